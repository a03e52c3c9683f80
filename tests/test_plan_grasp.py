"""The grasp planner on IPOPT (examples/plan_tumbling_grasp.py, issue 23 item D): direct multiple shooting
in casadi.Opti through the generated C (soadyn.casadi), on a short horizon so that it stays fast."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from conftest import module_cache_dir

pytest.importorskip("casadi")
pytest.importorskip("scipy")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plan_tumbling_grasp.py"


@pytest.fixture(scope="module")
def plan(request, tmp_path_factory):
    spec = importlib.util.spec_from_file_location("plan_tumbling_grasp", EXAMPLE)
    P = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(P)
    from soadyn import load_robot

    robot = load_robot(P.ROBOT)
    d = module_cache_dir(request, tmp_path_factory, "soadyn_plan_modules")
    mod = P.soadyn_compile(robot, d, functions=P.FUNCTIONS, progress=False)
    return P, P.Planner(mod, robot, P.Target(np.array([1.8, -1.8, 1.7])), 4, 4.0)


def test_ipopt_multiple_shooting_reaches_the_grasp_point(plan):
    P, planner = plan
    U, seconds, stats = P.solve_ipopt(planner)
    assert stats["success"], stats["return_status"]
    # the plan's torques simulated again by the module (single shooting): the multiple-shooting step
    # equations in CasADi agree with the planner's own step, and the terminal equations hold
    assert P.violation(planner, U) < 1e-6
    r = planner.rollout(U.ravel(), False)
    qN, vN = r["traj"][-1]
    g, Vg = planner.target.grasp(planner.N * planner.h)
    assert np.linalg.norm(planner.mod.frame_pose(qN, P.HAND)[1] - g) < 1e-6
    assert np.linalg.norm(planner.mod.frame_twist(qN, vN, P.HAND) - Vg) < 1e-6
    # the initial guess (no torque) misses by the whole approach distance
    assert P.violation(planner, np.zeros_like(U)) > 0.1


def test_the_example_uses_no_reference_path():
    tree = ast.parse(EXAMPLE.read_text())
    mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(m and m.startswith("soadyn.reference") for m in mods)
