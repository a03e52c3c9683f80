"""The README's code runs as written, and the seed 004 example scripts give their documented agreement.

* Every ```python block of README.md runs in a fresh interpreter (in document order), and every command of
  the ```sh blocks of the "Space-robotics workflows" section runs in a shell; a block fails the test when it
  raises (the snippets carry their own asserts: reactionless base rate, model agreement, ...).  The working
  directory is a temporary directory that mirrors the repository root by symbolic links, so snippets see
  ``examples/``, ``generated/`` and ``build/`` of the repository while the files they write (PNG, YAML) land
  in the temporary directory.  Compiled modules are cached in ``build/soadyn/`` (git-ignored).
* The repository's git status must not gain entries in ``generated/``, ``examples/`` or the root, and no
  file there may change its bytes (the snippets never write into tracked files).
* examples/seed004_example1.py and examples/dual_arm_capture.py run with short durations.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, REPO, module_cache_dir

README = REPO / "README.md"
SECTION = "## Space-robotics workflows"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def _blocks(text: str) -> list[tuple[str, str, bool]]:
    """(language, code, inside the space-robotics section) of every fenced block, in document order."""
    start = text.find(SECTION)
    end = text.find("\n## ", start + 1) if start >= 0 else -1
    out = []
    for m in BLOCK.finditer(text):
        inside = start >= 0 and start < m.start() and (end < 0 or m.start() < end)
        out.append((m.group(1), m.group(2), inside))
    return out


def _git_status() -> set[str] | None:
    if shutil.which("git") is None or not (REPO / ".git").exists():
        return None
    r = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    # only the places a README snippet could write to (other helpers may edit elsewhere meanwhile)
    return {ln for ln in r.stdout.splitlines()
            if ln[3:].startswith(("generated/", "examples/")) or "/" not in ln[3:]}


def _tracked_bytes() -> dict[str, str]:
    """sha256 of every file under generated/ and examples/ (the places a snippet could write to): a
    rewrite with other bytes fails the test even when git would not list a new entry."""
    import hashlib

    return {str(p.relative_to(REPO)): hashlib.sha256(p.read_bytes()).hexdigest()
            for top in ("generated", "examples") for p in sorted((REPO / top).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".so", ".o", ".pyd")}


def _mirror(tmp: Path) -> Path:
    """A directory whose entries link to the repository root's (build/ created if missing)."""
    (REPO / "build").mkdir(exist_ok=True)
    work = tmp / "repo"
    work.mkdir()
    for p in REPO.iterdir():
        if p.name != ".git":
            (work / p.name).symlink_to(p, target_is_directory=p.is_dir())
    return work


def _run(cmd: list[str] | str, cwd: Path, what: str, shell: bool = False) -> None:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0")
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, shell=shell, env=env)
    if r.returncode != 0:
        pytest.fail(f"{what} failed (exit {r.returncode})\n--- stdout\n{r.stdout[-3000:]}\n"
                    f"--- stderr\n{r.stderr[-5000:]}")


def test_readme_blocks_are_found():
    """The extraction itself: the section exists and holds the workflows the README promises."""
    blocks = _blocks(README.read_text(encoding="utf-8"))
    inside = [code for lang, code, ins in blocks if ins and lang == "python"]
    assert len(inside) >= 3
    joined = "\n".join(inside)
    for needle in ("ReactionlessController", "reaction_null_space", "lock_joints", "invert", "fix_base",
                   "close_loop", "forward_dynamics_decoupled", "forward_dynamics_schur",
                   "operational_space_inertias", "savefig"):
        assert needle in joined, needle
    assert any(ins and lang == "sh" and "soadyn info" in code for lang, code, ins in blocks)


def test_readme_snippets_run(tmp_path):
    before = _git_status()
    work = _mirror(tmp_path)
    # the "Using a generated module" block imports generated/tian_wu_3dof, built by `soadyn compile`
    tracked = _tracked_bytes()
    _run([sys.executable, "-c", "import soadyn; soadyn.compile('examples/tian_wu_3dof.yaml', "
          "out_dir='build/soadyn')"], work, "soadyn compile examples/tian_wu_3dof.yaml -o build/soadyn")
    n_py = n_sh = 0
    for i, (lang, code, inside) in enumerate(_blocks(README.read_text(encoding="utf-8"))):
        if lang == "python":
            script = tmp_path / f"readme_block{i}.py"
            script.write_text(code, encoding="utf-8")
            _run([sys.executable, str(script)], work, f"README python block {i}:\n{code[:400]}")
            n_py += 1
        elif lang == "sh" and inside:
            for line in code.splitlines():
                cmd = line.split("#", 1)[0].strip()
                if cmd:
                    _run(cmd, work, f"README command {cmd!r}", shell=True)
                    n_sh += 1
    assert n_py >= 4 and n_sh >= 2
    png = work / "reactionless.png"
    assert png.is_file() and not png.is_symlink() and png.stat().st_size > 10_000
    assert "loops:" in (work / "grapple_loop.yaml").read_text(encoding="utf-8")
    after = _git_status()
    if before is not None and after is not None:
        assert after <= before, f"README snippets changed the repository: {sorted(after - before)}"
    changed = sorted(p for p, h in _tracked_bytes().items() if tracked.get(p) != h)
    assert not changed, f"README snippets rewrote tracked files: {changed}"


# ---- example scripts ---------------------------------------------------------------------------


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def cache(request, tmp_path_factory) -> str:
    return str(module_cache_dir(request, tmp_path_factory, "soadyn_readme_examples"))


def test_seed004_example1_script(cache, capsys):
    """Seed 004 Example 1: 7 -> 2 DOF, and the 2-DOF fixed-base model moves like the constrained flyer."""
    res = _load("seed004_example1").main(["--duration", "0.5", "--out", cache])
    out = capsys.readouterr().out
    assert (res["dof_before"], res["dof_after"]) == (7, 2)
    assert "DOF: 7 (free flyer) -> 2" in out
    assert res["frame_error_reference"] < 1e-10
    assert res["frame_error_generated"] < 1e-10
    assert res["fd_error"] < 1e-10
    assert res["travel"] > 1e-4  # the satellite moved ...
    assert res["trajectory_error"] < 1e-9 * max(1.0, res["travel"])  # ... the same way in both models


def test_dual_arm_capture_script(cache, capsys, tmp_path):
    """Dual-arm capture: constraint violation at the projection tolerance, momentum conserved."""
    png = tmp_path / "dual.png"
    res = _load("dual_arm_capture").main(["--duration", "0.5", "--out", cache, "--plot", str(png)])
    out = capsys.readouterr().out
    r = res["projection"]
    assert "dependent: ['j4', 'j5', 'j6']" in out
    assert r["max_g"] < 1e-10 and r["max_Jv"] < 1e-10
    assert np.isclose(r["max_g_generated"], r["max_g"], rtol=1e-6, atol=1e-14)
    assert r["momentum_scale"] > 100  # the system tumbles: |h| is not zero ...
    assert r["momentum_drift"] < 1e-8 * r["momentum_scale"]  # ... and stays constant
    assert r["joint_travel"] > 1e-3
    assert png.is_file() and png.stat().st_size > 10_000
