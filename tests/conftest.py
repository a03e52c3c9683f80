"""Shared fixtures: robot file paths (scratch YAML robot, example-robot-data URDFs), rng, loaders, and the
one C-compiler check of the suite (``HAS_CC``, ``requires_cc``, the ``cc`` fixture).

A test that compiles generated C depends on ``cc`` (fixtures) or carries ``@requires_cc`` (tests): it is
skipped only when no C compiler exists.  Everything else a compile raises is a failure.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from pinocchio_placements import exact_permutations

from soadyn import load_robot
from soadyn.codegen.profiles import compiler_command
from soadyn.model.robot import Robot

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
TEST_ARM = EXAMPLES / "test_arm.yaml"

#: modules built by the suite use the quick-to-compile debug profile (same results bit for bit: every
#: profile rounds alike); tests/test_build_profiles.py builds with the fast profile's flags explicitly
os.environ.setdefault("SOADYN_PROFILE", "debug")

#: the C compiler soadyn would call ($CC, else Python's configured CC), looked up once
CC = compiler_command()
HAS_CC = bool(CC) and shutil.which(CC[0]) is not None
NO_CC_REASON = f"no C compiler: {' '.join(CC) or '(empty CC)'} not found"
#: mark for a test that compiles generated C
requires_cc = pytest.mark.skipif(not HAS_CC, reason=NO_CC_REASON)


@pytest.fixture(scope="session")
def cc() -> list[str]:
    """The C compiler command; skips the requesting test (or fixture) only when there is none."""
    if not HAS_CC:
        pytest.skip(NO_CC_REASON)
    return CC


def _erd_robots_dir() -> Path | None:
    """``<site-packages>/cmeel.prefix/share/example-robot-data/robots`` if installed."""
    cands = [Path(sysconfig.get_paths()["purelib"])]
    try:
        import pinocchio

        here = Path(pinocchio.__file__).resolve()
        cands += [here.parents[4], here.parents[5]]   # .../site-packages[/cmeel.prefix]
    except Exception:  # pragma: no cover - pinocchio missing
        pass
    for base in cands:
        for p in (base / "cmeel.prefix/share/example-robot-data/robots",):
            if p.is_dir():
                return p
    return None


ERD = _erd_robots_dir()
PANDA_URDF = ERD / "panda_description/urdf/panda.urdf" if ERD else None
UR5_URDF = ERD / "ur_description/urdf/ur5_robot.urdf" if ERD else None
URDFS = {"panda": PANDA_URDF, "ur5": UR5_URDF}


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240601)


@pytest.fixture(scope="session")
def test_arm_path() -> Path:
    return TEST_ARM


@pytest.fixture(scope="session")
def panda_urdf() -> Path:
    if PANDA_URDF is None or not PANDA_URDF.is_file():
        pytest.skip("example-robot-data (panda.urdf) not installed")
    return PANDA_URDF


@pytest.fixture(scope="session")
def ur5_urdf() -> Path:
    if UR5_URDF is None or not UR5_URDF.is_file():
        pytest.skip("example-robot-data (ur5_robot.urdf) not installed")
    return UR5_URDF


def with_gravity(robot: Robot, g) -> Robot:
    """A copy of ``robot`` with gravity ``g`` (3, inertial frame)."""
    return robot.replace(gravity=g)


# ---- URDF -> Robot ------------------------------------------------------------------------------
def load_urdf(path: Path, base: str) -> Robot:
    """The robot of a URDF through ``load_robot``; mimic joints independent, as Pinocchio's default."""
    # ideal joints (URDF <dynamics> dropped), as Pinocchio's RNEA/ABA and the MuJoCo comparisons assume;
    # the drive train is compared in tests/test_drivetrain.py
    return load_robot(path, base=base, mimic="independent").rigid()


# ---- agreement figures (printed at the end of the run) ------------------------------------------------
AGREEMENT: dict[tuple[str, str], float] = {}


def record(source: str, quantity: str, err: float) -> None:
    """Keep the worst relative error of ``quantity`` against ``source`` (e.g. 'pinocchio ur5/free')."""
    key = (source, quantity)
    AGREEMENT[key] = max(AGREEMENT.get(key, 0.0), float(err))


def rel_err(x, ref) -> float:
    """max |x - ref| / max |ref| (absolute when ref is all zero)."""
    x, ref = np.asarray(x, float), np.asarray(ref, float)
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return float(np.max(np.abs(x - ref))) / (scale if scale > 0 else 1.0)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    if not AGREEMENT:
        return
    tr = terminalreporter
    tr.section("soadyn reference agreement (worst relative error)")
    for (src, qty), err in sorted(AGREEMENT.items()):
        tr.write_line(f"{src:28s} {qty:28s} {err:.2e}")


def pinocchio_pair(name: str, base: str, gravity) -> tuple[Robot, object]:
    """The example-robot-data URDF ``name`` (panda, ur5) as a soadyn robot and as a Pinocchio model, both with
    ``gravity``; skips when Pinocchio or example-robot-data is not installed."""
    pin = pytest.importorskip("pinocchio")
    path = URDFS[name]
    if path is None or not path.is_file():
        pytest.skip("example-robot-data not installed")
    robot = with_gravity(load_urdf(path, base), gravity)
    model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if base == "free"
             else pin.buildModelFromUrdf(str(path)))
    model.gravity.linear = np.asarray(gravity, dtype=float).copy()
    exact_permutations(model)
    return robot, model


def module_cache_dir(request, tmp_path_factory, name: str) -> Path:
    """Directory for a test file's compiled modules: pytest's cache (kept between runs) unless
    ``SOADYN_TEST_FRESH`` is set or the cache plugin is off, then a fresh temporary one."""
    if os.environ.get("SOADYN_TEST_FRESH") or getattr(request.config, "cache", None) is None:
        return tmp_path_factory.mktemp(name)
    return Path(request.config.cache.mkdir(name))
