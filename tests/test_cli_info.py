"""``soadyn info``: tree printout of valid files, one-line errors and exit code 1 for bad ones."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from soadyn.codegen.cli import main

ROOT = Path(__file__).resolve().parents[1]
ARM = ROOT / "examples" / "test_arm.yaml"
BAD = ROOT / "tests" / "data" / "bad"


def test_info_prints_tree(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(ARM)]) == 0
    out = capsys.readouterr().out
    assert "robot:      scratch_tree" in out
    assert "nq = 11   nv = 10" in out
    assert "total mass: 58" in out
    assert "free-floating" in out
    lines = out.splitlines()
    row = {name: next(ln for ln in lines if f"] {name} " in ln) for name in ("base", "l1", "l2", "l3", "l4")}
    assert "joint j3 (prismatic, axis [1, 0, 0])" in row["l3"] and row["l3"].endswith("mass 1.5")
    assert "joint j1 (revolute, axis [0, 0, 1])" in row["l1"]
    # tree drawing: l4 is the base's last child, l2 hangs under l1
    assert row["l4"].lstrip().startswith("`-- [4] l4")
    assert row["l2"].index("[2]") > row["l1"].index("[1]")
    first = next(i for i, ln in enumerate(lines) if ln.startswith("frames"))
    frames = {ln.split()[0]: ln.split()[2] for ln in lines[first + 1:]}
    assert frames == {"tool": "l3", "tcp": "l3"}


def test_info_base_override(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(ARM), "--base", "fixed"]) == 0
    out = capsys.readouterr().out
    assert "nq = 4   nv = 4" in out and "base:       fixed" in out


@pytest.mark.parametrize("fixture", ["inertia_not_pd.yaml", "yaml_syntax.yaml", "urdf_mimic.urdf"])
def test_info_bad_file(fixture: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(BAD / fixture)]) == 1
    cap = capsys.readouterr()
    assert cap.out == ""
    err = cap.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"error: {BAD / fixture}: ")


def test_info_subprocess_bad_and_good() -> None:
    exe = shutil.which("soadyn")
    cmd = [exe] if exe else [sys.executable, "-m", "soadyn.codegen.cli"]
    bad = subprocess.run([*cmd, "info", str(BAD / "cycle.yaml")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"error: {BAD / 'cycle.yaml'}: bodies[1].parent: parents form a cycle ('link1' -> 'link2' -> "
        f"'link1') "
        "not connected to the base 'base'; every chain of parents must end at the base"]
    good = subprocess.run([*cmd, "info", str(ARM)], capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and "nq = 11" in good.stdout
