#!/usr/bin/env python3
"""Per-state parameter batches, two builds of one robot in one process: constant vs parameterised (issue 26).

    python benchmarks/bench_params_ab.py URDF before=DIR after=DIR [--lock J ...] [--rounds 15]

Each DIR holds the modules ``bb_<urdf stem>_const`` and ``bb_<urdf stem>_params`` of ``bench_batches.py
--params-only --urdf URDF --out-dir DIR`` (free base, every body parameterised; built by the tree under
test).  Two fresh copies of each parameterised build and one of each constant build are loaded (a copy of
the same bytes can run up to 2x slower: page placement, ``benchmarks/README.md``); every round times each
of them in turn, the order rotated from round to round: the C batch entry alone (cffi, no checks), and the
Python entry on 2,000 states with ``threads=1``, ``out=``, ``params=`` one set per state, checked and with
``check_params=False`` (the constant module: without ``params=``).  Printed: ns per state, minimum and
median over the rounds, and minimum / the constant modules' fastest Python figure.  Process CPU time; the
fastest of 20 calls per figure; the load average is printed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import cffi
import numpy as np

from soadyn import load_robot
from soadyn.codegen.load import load
from soadyn.model.parameters import random_params, with_param_bodies
from soadyn.structure.operations import lock_joints

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_batches import best_ns  # noqa: E402  (ns per state, the fastest of reps calls)

REPS = 20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("urdf", type=Path)
    ap.add_argument("builds", nargs=2, help="before=DIR after=DIR")
    ap.add_argument("--lock", nargs="*", default=[], help="joints of the URDF locked at 0")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--n", type=int, default=2000)
    args = ap.parse_args(argv)
    builds = dict(b.split("=", 1) for b in args.builds)
    tag = "bb_" + "".join(c if c.isalnum() else "_" for c in args.urdf.stem)
    const = lock_joints(load_robot(args.urdf, base="free", mimic="independent"), args.lock)
    prm = with_param_bodies(const, "all")
    n = args.n
    rng = np.random.default_rng(0)
    q = np.stack([const.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, const.nv)), rng.normal(size=(n, const.nv))
    ps = np.stack([random_params(prm, rng) for _ in range(n)])
    out = np.empty((n, const.nv))
    ffi = cffi.FFI()
    cargs = [ffi.from_buffer("double[]", x) for x in (q, v, a)]
    cps, cout = ffi.from_buffer("double[]", ps), ffi.from_buffer("double[]", out, True)
    tmp = Path(tempfile.mkdtemp(prefix="bench_params_ab_"))
    runs: dict[tuple[str, str], Callable[[], float]] = {}
    try:
        for side, d in builds.items():
            for k, kind in enumerate(["params", "params", "const"]):
                label = f"{side}/{kind}{k if kind == 'params' else ''}"
                dst = tmp / f"{tag}_{kind}_{side}{k}"
                shutil.copytree(Path(d) / f"{tag}_{kind}", dst)
                m = load(dst)
                g, c = m.inverse_dynamics, getattr(m._lib, f"{m.module_name}_inverse_dynamics_batch")
                if kind == "const":
                    runs[label, "C"] = lambda c=c: best_ns(lambda: c(n, *cargs, cout), n, REPS)
                    runs[label, "Python"] = lambda g=g: best_ns(
                        lambda: g(q, v, a, threads=1, out=out), n, REPS)
                    continue
                runs[label, "C"] = lambda c=c: best_ns(lambda: c(n, *cargs, cps, cout), n, REPS)
                for check in (True, False):
                    runs[label, f"check_params={check}"] = lambda g=g, check=check: best_ns(
                        lambda: g(q, v, a, params=ps, check_params=check, threads=1, out=out), n, REPS)
        times: dict[tuple[str, str], list[float]] = {key: [] for key in runs}
        keys = list(runs)
        for r in range(args.rounds):
            for key in keys[r % len(keys):] + keys[:r % len(keys)]:
                times[key].append(runs[key]())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ref = min(min(x) for (label, call), x in times.items() if label.endswith("const") and call == "Python")
    print(f"{tag}: free base, nv={const.nv}, {len(prm.param_bodies)} bodies parameterised; {n} states; "
          f"{args.rounds} rounds; load average {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print(f"| {'build/module':16s} | {'call':20s} | {'min ns':>7s} | {'median':>7s} | {'/ const':>7s} |")
    print(f"|{'-' * 18}|{'-' * 22}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for (label, call), xs in sorted(times.items(), key=lambda t: (t[0][1], t[0][0])):
        print(f"| {label:16s} | {call:20s} | {min(xs):7.1f} | {float(np.median(xs)):7.1f} | "
              f"{min(xs) / ref:7.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
