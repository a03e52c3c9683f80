"""``soadyn info``: tree printout of valid files, one-line errors and exit code 1 for bad ones."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from soadyn.cli.main import main

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
    end = lines.index("", first)
    frames = {ln.split()[0]: ln.split()[2] for ln in lines[first + 1:end]}
    assert frames == {"tool": "l3", "tcp": "l3"}
    assert lines[-1] == "loop closures: none"


def _connectivity(out: str) -> dict[str, list[int]]:
    """name -> [link, parent, end-effector, connect, cflag] from the printed seed 004 table."""
    lines = out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.split()[:2] == ["link", "name"])
    assert lines[head].split() == ["link", "name", "parent", "end-effector", "connect", "cflag"]
    end = lines.index("", head)
    rows = [ln.split() for ln in lines[head + 1:end]]
    return {r[1]: [int(r[0]), *map(int, r[2:])] for r in rows}


def test_info_prints_connectivity_table(capsys: pytest.CaptureFixture[str]) -> None:
    """Seed 004 Tables II-III for the scratch tree (base -> l1 -> l2 -> l3, base -> l4), worked by hand:
    leaves l3 and l4 are end-effectors 1 and 2; locking j2 and j3 welds l2 and l3 into one group of 2."""
    assert main(["info", str(ARM)]) == 0
    table = _connectivity(capsys.readouterr().out)
    assert table == {"l1": [1, 0, 0, 0, -1], "l2": [2, 1, 0, 0, -1], "l3": [3, 2, 1, 0, -1],
                     "l4": [4, 0, 2, 0, -1]}
    assert main(["info", str(ARM), "--locked", "j2,j3", "--locked", "j4"]) == 0
    table = _connectivity(capsys.readouterr().out)
    assert [table[n][3] for n in ("l1", "l2", "l3", "l4")] == [0, 2, 2, 1]


def test_info_prints_loops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A robot file with loops: the closures are listed and cflag marks the later body of each loop
    (tcp is on l3, so the tcp-l4 loop flags l4 with 3; a loop to the world flags its body with 0)."""
    text = ARM.read_text() + (
        "loops:\n"
        "  - {name: hinge, frame_a: tcp, frame_b: l4, type: revolute, axis: [0, 0, 2]}\n"
        "  - {name: grapple, frame_a: l1, frame_b: world, type: spherical, xyz: [0.5, 0, 1.0]}\n")
    path = tmp_path / "closed.yaml"
    path.write_text(text)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    table = _connectivity(out)
    assert [table[n][4] for n in ("l1", "l2", "l3", "l4")] == [0, -1, -1, 3]
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("loop closures (2;"))
    assert lines[i + 1].split() == ["hinge", "revolute", "tcp", "->", "l4", "axis", "[0,", "0,", "1]", "(in",
                                    "tcp)"]
    assert lines[i + 2].split()[:5] == ["grapple", "spherical", "l1", "->", "world"]
    assert "at [0.5, 0, 1] in the inertial frame" in lines[i + 2]


def test_info_bad_loop_and_bad_locked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", str(BAD / "loop_unknown_frame.yaml")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {BAD / 'loop_unknown_frame.yaml'}: loops[0].frame_b: unknown frame 'tipp'")
    assert main(["info", str(ARM), "--locked", "j9"]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and "no moving joint 'j9'" in cap.err and len(cap.err.strip().splitlines()) == 1


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
    cmd = [exe] if exe else [sys.executable, "-m", "soadyn.cli.main"]
    bad = subprocess.run([*cmd, "info", str(BAD / "cycle.yaml")], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == [
        f"error: {BAD / 'cycle.yaml'}: bodies[1].parent: parents form a cycle ('link1' -> 'link2' -> "
        f"'link1') "
        "not connected to the base 'base'; every chain of parents must end at the base"]
    good = subprocess.run([*cmd, "info", str(ARM)], capture_output=True, text=True, timeout=120)
    assert good.returncode == 0 and "nq = 11" in good.stdout
