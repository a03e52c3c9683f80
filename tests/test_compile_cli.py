"""``soadyn compile`` and ``soadyn verify`` on the command line (a tiny robot, compiled once per module)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import requires_cc
from test_codegen import TINY_YAML

from soadyn.cli.main import main
from soadyn.codegen import build, derive


@pytest.fixture(scope="module")
def robot_file(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("cli") / "tiny_arm.yaml"
    p.write_text(TINY_YAML)
    return p


@pytest.fixture(scope="module")
def compiled(cc, robot_file) -> Path:
    out = robot_file.parent / "gen"
    assert main(["compile", str(robot_file), "-o", str(out), "-q"]) == 0
    return out


def test_compile_writes_module(compiled, capsys):
    d = compiled / "tiny_arm"
    names = {p.name for p in d.iterdir()}
    assert {"tiny_arm.c", "tiny_arm.h", "__init__.py", "soadyn_stamp.json"} <= names
    assert any(n.startswith("_soadyn_") and n.endswith(build.extension_suffix()) for n in names)
    assert not any(n.endswith(".o") or "_part" in n for n in names)   # build leftovers removed


def test_second_compile_is_up_to_date(compiled, robot_file, capsys):
    d0, c0 = derive.STATS["derivations"], build.STATS["compilations"]
    assert main(["compile", str(robot_file), "-o", str(compiled), "-q"]) == 0
    assert (derive.STATS["derivations"], build.STATS["compilations"]) == (d0, c0)
    out = capsys.readouterr().out
    assert "up to date" in out and "import tiny_arm" in out


def test_verify_passes(compiled, robot_file, capsys):
    assert main(["verify", str(robot_file), "-o", str(compiled), "--states", "20", "-q"]) == 0
    out = capsys.readouterr().out
    assert "mass_matrix" in out and "all ok" in out and "(0 without an independent check)" in out
    # every frame of each frame family is checked on its own
    for frame in ("root", "upper", "lower"):
        assert f"jacobian_world[{frame}]" in out and f"jacobian_local[{frame}]" in out
    assert "FAIL" not in out


def test_verify_fails_over_tolerance(compiled, robot_file, capsys):
    # round-off differences are ~1e-16: a tolerance of 1e-30 must be exceeded somewhere
    assert main(["verify", str(robot_file), "-o", str(compiled), "--states", "3", "--tol", "1e-30",
                 "-q"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_sources_only(robot_file, tmp_path, capsys):
    assert main(["compile", str(robot_file), "-o", str(tmp_path), "--sources-only", "-q"]) == 0
    assert sorted(p.name for p in (tmp_path / "tiny_arm").iterdir()) == ["tiny_arm.c", "tiny_arm.h"]


def test_base_override_gets_its_own_module(tmp_path):
    free = tmp_path / "tiny_arm.yaml"
    free.write_text(TINY_YAML.replace("base: fixed", "base: free").replace(
        "mass: 0.0\n    inertia: {ixx: 0.0, iyy: 0.0, izz: 0.0}",
        "mass: 5.0\n    inertia: {ixx: 1, iyy: 1, izz: 1}"))
    assert main(["compile", str(free), "-o", str(tmp_path), "--base", "fixed", "--sources-only", "-q"]) == 0
    assert (tmp_path / "tiny_arm_fixed" / "tiny_arm_fixed.c").is_file()
    assert main(["compile", str(free), "-o", str(tmp_path), "--sources-only", "-q"]) == 0
    assert "generalized_jacobian" in (tmp_path / "tiny_arm" / "tiny_arm.c").read_text()
    assert "generalized_jacobian" not in (tmp_path / "tiny_arm_fixed" / "tiny_arm_fixed.c").read_text()


@requires_cc
def test_functions_subset(robot_file, tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["compile", str(robot_file), "-o", str(out), "--functions", "mass_matrix, jacobian",
                 "-q"]) == 0
    import json

    stamp = json.loads((out / "tiny_arm" / "soadyn_stamp.json").read_text())
    assert sorted(stamp["ops"]) == ["tiny_arm_jacobian_local", "tiny_arm_jacobian_world",
                                    "tiny_arm_mass_matrix", "tiny_arm_mass_matrix_nz",
                                    "tiny_arm_mass_matrix_upper"]
    assert stamp["functions"] == ["mass_matrix", "jacobian"]
    c = (out / "tiny_arm" / "tiny_arm.c").read_text()
    assert "tiny_arm_mass_matrix(" in c and "forward_dynamics" not in c
    # the same selection is up to date; a different one rebuilds (part of the cache key)
    c0 = build.STATS["compilations"]
    again = ["compile", str(robot_file), "-o", str(out), "--functions", "jacobian,mass_matrix", "-q"]
    assert main(again) == 0
    assert build.STATS["compilations"] == c0 and "up to date" in capsys.readouterr().out
    assert main(["compile", str(robot_file), "-o", str(out), "--functions", "center_of_mass", "-q"]) == 0
    assert build.STATS["compilations"] == c0 + 1


@pytest.mark.parametrize("names, bad", [("mass_matrix,nope", "'nope'"),
                                        ("generalized_jacobian", "'generalized"), (",", "empty")])
def test_functions_unknown_name(robot_file, tmp_path, capsys, names, bad):
    assert main(["compile", str(robot_file), "-o", str(tmp_path / "gen"), "--functions", names, "-q"]) == 2
    err = capsys.readouterr().err
    assert "--functions" in err and bad in err and "forward_dynamics" in err     # lists the valid names
    assert not (tmp_path / "gen").exists()


def test_bad_robot_file_is_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY_YAML.replace("mass: 0.7", "mass: -0.7"))
    assert main(["compile", str(bad), "-o", str(tmp_path / "gen"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "mass" in err and "Traceback" not in err
    assert not (tmp_path / "gen" / "tiny_arm").exists()


def test_missing_compiler_is_reported(robot_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    assert main(["compile", str(robot_file), "-o", str(tmp_path / "gen"), "-q"]) == 1
    err = capsys.readouterr().err
    assert "no-such-cc" in err and "not found" in err
