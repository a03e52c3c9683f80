"""Reproducible builds (issue 10): the generated sources are byte-identical on any machine, thread count and
PYTHONHASHSEED, and equal to the committed generated/ files.

"Another machine" is simulated on this one by the environment variables that change which kernels the
numeric libraries run: NumPy's SIMD dispatch (``NPY_DISABLE_CPU_FEATURES``), OpenBLAS's kernel family and
threads (``OPENBLAS_CORETYPE``, ``OPENBLAS_NUM_THREADS``), glibc's libm variants (``GLIBC_TUNABLES``
hwcaps: no FMA/AVX2), and Python's hash seed.  Before the fix (constants folded with ``np.sin``, ``@``
and LAPACK) the NumPy/OpenBLAS environment changed the last digits of constants in
dimitrov_7dof_rw.c and its operation counts.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from conftest import EXAMPLES, REPO

ENVIRONMENTS = {
    "plain": {"PYTHONHASHSEED": "0"},
    "hash+threads": {"PYTHONHASHSEED": "12345", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
                     "MKL_NUM_THREADS": "1", "SOADYN_JOBS": "1"},
    "old-cpu": {"PYTHONHASHSEED": "7", "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL X86_V3",
                "OPENBLAS_CORETYPE": "Prescott", "OPENBLAS_NUM_THREADS": "3"},
    "no-fma-libm": {"PYTHONHASHSEED": "random", "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX2_Usable,"
                    "-FMA_Usable", "NPY_DISABLE_CPU_FEATURES": "AVX512F AVX512_SKX"},
}

_GEN = r"""
import hashlib, json, sys
from soadyn.cli.regenerate import generate_example
out = {}
for path in sys.argv[1:]:
    name, files = generate_example(__import__("pathlib").Path(path))
    out.update({f"{name}/{f}": hashlib.sha256(t.encode()).hexdigest() for f, t in files.items()})
print(json.dumps(out))
"""


def _generate(env: dict[str, str], robots: list[str]) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k not in ("NPY_DISABLE_CPU_FEATURES", "OPENBLAS_CORETYPE",
                                                             "GLIBC_TUNABLES")}
    full.update(env)
    r = subprocess.run([sys.executable, "-c", _GEN, *[str(EXAMPLES / f"{x}.yaml") for x in robots]], env=full,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _committed(files: dict[str, str]) -> dict[str, str]:
    return {k: hashlib.sha256((REPO / "generated" / k).read_bytes()).hexdigest() for k in files}


def test_sources_identical_across_environments():
    small = ["test_arm", "tian_wu_3dof"]
    jobs = [(name, env, small) for name, env in ENVIRONMENTS.items()]
    jobs.append(("old-cpu dimitrov", ENVIRONMENTS["old-cpu"], ["dimitrov_7dof_rw"]))
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = dict(zip([j[0] for j in jobs], pool.map(lambda j: _generate(j[1], j[2]), jobs)))
    reference = _committed(results["plain"])
    for name, got in results.items():
        want = reference if name != "old-cpu dimitrov" else _committed(got)
        differ = sorted(k for k in want if got.get(k) != want[k])
        assert not differ, f"environment {name!r} generated other bytes than generated/: {differ}"
