"""Simulation on SO(3) (RKMK4): conservation laws, convergence order, torque inputs, files, CLI."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_ARM, module_cache_dir

from soadyn import load_robot
from soadyn.cli.simulate import add_simulate_parser, cmd_simulate
from soadyn.model.rotations import quat_exp, quat_mul, rodrigues
from soadyn.model.rotations import quaternion_to_matrix as rotation_matrix
from soadyn.runtime.numeric_module import NumericModule
from soadyn.runtime.simulate import SimulationError, Trajectory, simulate


@pytest.fixture(scope="module")
def arm_module(request, cc, tmp_path_factory):
    """The scratch tree robot compiled to C (cached across sessions in pytest's cache directory)."""
    from soadyn.codegen import compile as compile_robot

    out = module_cache_dir(request, tmp_path_factory, "soadyn_simulate")
    return compile_robot(TEST_ARM, out_dir=out, progress=False)


def _rotz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def test_quaternion_helpers(rng):
    """The group operations of the integrator: R(a * b) = R(a) R(b), and exp of a rotation vector is the
    rotation by its length about it (checked against Rodrigues' formula and a plain z rotation)."""
    a, b = rng.normal(size=4), rng.normal(size=4)
    assert np.allclose(rotation_matrix(quat_mul(a, b)), rotation_matrix(a) @ rotation_matrix(b), atol=1e-14)
    assert np.allclose(rotation_matrix(quat_exp(np.array([0, 0, 0.7]))), _rotz(0.7), atol=1e-15)
    th = rng.normal(size=3)
    assert abs(np.linalg.norm(quat_exp(th)) - 1) < 1e-15
    angle = np.linalg.norm(th)
    assert np.allclose(rotation_matrix(quat_exp(th)), rodrigues(th / angle, angle), atol=1e-14)


def test_spinning_base_follows_the_exponential_map():
    """A lone body spinning about a principal axis: R(t) = R0 Exp(w t) exactly; the quaternion stays unit."""
    r = load_robot(TEST_ARM)
    lone = r.replace(base="free", body_names=r.body_names[:1], parent=[-1], joints=[None], frames=[],
                     inertias=[type(r.inertias[0])(10.0, np.zeros(3), np.diag([1.0, 2.0, 3.0]))])
    m = NumericModule(lone)
    q0 = np.array([0.1, 0.2, 0.3, 0, 0, math.sin(0.2), math.cos(0.2)])
    v0 = np.array([0, 0, 1.3, 0.5, 0, 0])              # spin about z, move along base x
    tr = simulate(m, q0, v0, 2.0, dt=0.05)
    R0 = rotation_matrix(q0[3:7])
    for t, q in zip(tr.t, tr.q):
        assert np.allclose(rotation_matrix(q[3:7]), R0 @ _rotz(1.3 * t), atol=1e-12)
        assert abs(np.linalg.norm(q[3:7]) - 1) < 1e-14
    # the base origin is the CoM: it moves on a straight line although v (base axes) turns with the body
    assert np.allclose(tr.q[:, :3], q0[:3] + np.outer(tr.t, R0 @ v0[3:]), atol=1e-12)
    assert np.allclose(tr.v[-1, 3:], _rotz(1.3 * 2.0).T @ v0[3:], atol=1e-9)


def test_fourth_order_convergence(arm_module, rng):
    r = load_robot(TEST_ARM)
    q0 = r.random_configuration(rng)
    v0 = 0.5 * rng.normal(size=r.nv)
    tau = rng.normal(size=r.nv - 6)
    finals = {dt: simulate(arm_module, q0, v0, 1.0, tau, dt=dt).q[-1] for dt in (0.04, 0.02, 0.005)}
    e1 = np.max(np.abs(finals[0.04] - finals[0.005]))
    e2 = np.max(np.abs(finals[0.02] - finals[0.005]))
    assert 10 < e1 / e2 < 22, (e1, e2)           # ~16 for a 4th-order method (minus the reference's error)


def test_momentum_and_energy_over_10_s(arm_module, rng):
    """Zero external wrench: momentum conserved to the integrator's tolerance over 10 s; with joint torques
    the work done equals the change of kinetic energy."""
    r = load_robot(TEST_ARM)
    q0 = r.random_configuration(rng)
    v0 = 0.3 * rng.normal(size=r.nv)                  # tumbling base, non-zero momentum
    tau = 0.5 * rng.normal(size=r.nv - 6)
    tr = simulate(arm_module, q0, v0, 10.0, tau, dt=2e-3)
    scale = np.max(np.abs(tr.momentum[0]))
    drift = tr.momentum_drift()
    assert np.max(drift) < 1e-9 * scale, drift
    assert np.max(np.abs(tr.work)) > 1.0                # the torques do real work ...
    assert tr.energy_balance_error() < 1e-9 * np.max(np.abs(tr.kinetic_energy))   # ... that shows up as T
    # the CoM moves uniformly (P constant)
    P = tr.momentum[0, 3:]
    assert np.allclose(tr.com, tr.com[0] + np.outer(tr.t, P / r.total_mass), atol=1e-9)


def test_energy_with_gravity_fixed_base(rng):
    r = load_robot(TEST_ARM, base="fixed").replace(gravity=[0.0, 0.0, -9.81])
    m = NumericModule(r)
    tr = simulate(m, r.random_configuration(rng), np.zeros(r.nv), 0.3, lambda t, q, v: -0.5 * v, dt=2e-3)
    assert np.ptp(tr.potential_energy) > 0.05
    assert tr.energy_balance_error() < 1e-8
    assert tr.work[-1] < 0                              # damping only removes energy


def test_torque_forms_agree(rng):
    r = load_robot(TEST_ARM)
    m = NumericModule(r)
    q0, v0 = r.random_configuration(rng), 0.1 * rng.normal(size=r.nv)
    tj = rng.normal(size=r.n_joints)
    full = np.concatenate([np.zeros(6), tj])
    a = simulate(m, q0, v0, 0.05, tj, dt=0.01)
    b = simulate(m, q0, v0, 0.05, full, dt=0.01)
    c = simulate(m, q0, v0, 0.05, np.tile(tj, (5, 1)), dt=0.01)
    d = simulate(m, q0, v0, 0.05, lambda t, q, v: tj, dt=0.01)

    class Ctrl:
        def torque(self, t, q, v):
            return full

    e = simulate(m, q0, v0, 0.05, Ctrl(), dt=0.01)
    for other in (b, c, d, e):
        assert np.array_equal(other.q, a.q)
    assert np.allclose(a.tau[:, 6:], tj)


def test_bad_inputs_are_reported():
    r = load_robot(TEST_ARM)
    m = NumericModule(r)
    q0, v0 = r.neutral(), np.zeros(r.nv)
    with pytest.raises(ValueError, match=r"q0 must have shape \(11,\)"):
        simulate(m, q0[:-1], v0, 1.0)
    bad = q0.copy()
    bad[3:7] = 0
    with pytest.raises(ValueError, match="quaternion"):
        simulate(m, bad, v0, 1.0)
    with pytest.raises(ValueError, match="duration"):
        simulate(m, q0, v0, -1.0)
    with pytest.raises(ValueError, match="NaN"):
        simulate(m, q0, v0, 0.1, np.full(r.n_joints, np.nan))
    with pytest.raises(ValueError, match=r"must have shape \(10,\) or \(4,\)"):
        simulate(m, q0, v0, 0.1, np.ones(3))
    with pytest.raises(SimulationError, match="NaN/inf"):
        simulate(m, q0, v0, 0.02, lambda t, q, v: np.full(r.nv, 1e300), dt=0.01)


def test_module_without_the_needed_functions_is_refused_before_running():
    class OnlyForwardDynamics:
        nq, nv, base = 11, 10, "free"

        def __init__(self, inner):
            self.forward_dynamics = inner.forward_dynamics

    r = load_robot(TEST_ARM)
    with pytest.raises(ValueError, match=r"\['momentum', 'kinetic_energy', 'center_of_mass'\] are missing"):
        simulate(OnlyForwardDynamics(NumericModule(r)), r.neutral(), np.zeros(r.nv), 0.1)


def test_save_load_plot(tmp_path, rng):
    r = load_robot(TEST_ARM)
    m = NumericModule(r)
    tr = simulate(m, r.random_configuration(rng), 0.1 * rng.normal(size=r.nv), 0.05, dt=0.01)
    path = tr.save(tmp_path / "traj")
    assert path.suffix == ".npz"
    back = Trajectory.load(path)
    for f in ("t", "q", "v", "tau", "momentum", "kinetic_energy", "work", "com", "base_rpy"):
        assert np.array_equal(getattr(back, f), getattr(tr, f))
    assert back.joint_names == r.joint_names and back.base == "free" and back.dt == 0.01
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not a soadyn trajectory"):
        Trajectory.load(tmp_path / "other.npz")
    pytest.importorskip("matplotlib")
    tr.plot(tmp_path / "t.png")
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_cli_simulate(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_simulate_parser(parser.add_subparsers())
    args = parser.parse_args(["simulate", str(TEST_ARM), "--duration", "0.04", "--dt", "0.01", "--python",
                              "--torque", "0.1,0.2,0.3,0.4", "--out", str(tmp_path / "o.npz"),
                              "--no-progress"])
    assert cmd_simulate(args) == 0
    out = capsys.readouterr().out
    assert "momentum drift" in out and (tmp_path / "o.npz").is_file()
    assert np.allclose(Trajectory.load(tmp_path / "o.npz").tau[:, 6:], [0.1, 0.2, 0.3, 0.4])
    args = parser.parse_args(["simulate", str(TEST_ARM), "--duration", "0.04", "--python", "--torque", "1,x"])
    assert cmd_simulate(args) == 2
    assert "--torque: expected comma-separated numbers" in capsys.readouterr().err


def test_cli_simulate_takes_the_shared_robot_options(capsys):
    """``soadyn simulate`` has the robot options of every other sub-command (cli/options.py), ``--mimic``
    included: a URDF whose mimic joint follows a missing joint is refused by the default (a true coupling)
    and simulates with the joint fixed (1 DOF) or independent (2 DOF)."""
    from soadyn.cli.main import main

    urdf = str(Path(__file__).parent / "data" / "bad" / "urdf_mimic.urdf")
    common = ["simulate", urdf, "--duration", "0.02", "--dt", "0.01", "--python", "--no-progress"]
    assert main(common) == 1
    assert "mimics joint 'j9'" in capsys.readouterr().err
    for mode, n in (("fixed", 1), ("independent", 2)):
        assert main([*common, "--mimic", mode, "--torque", ",".join(["0.1"] * n)]) == 0
        assert "momentum drift" in capsys.readouterr().out
    assert main([*common, "--mimic", "fixed", "--torque", "0.1,0.1"]) == 2      # 1 joint left: 2 refused
    assert "shape (7,) or (1,)" in capsys.readouterr().err


def test_cli_simulate_base_override_builds_its_own_module(tmp_path, cc):
    """``--base fixed`` compiles ``<robot>_fixed`` (like ``soadyn compile --base fixed``), never over the
    file's free-base module of the same directory."""
    parser = argparse.ArgumentParser()
    add_simulate_parser(parser.add_subparsers())
    args = parser.parse_args(["simulate", str(TEST_ARM), "--base", "fixed", "--duration", "0.02",
                              "--dt", "0.01", "--cache", str(tmp_path), "--no-progress"])
    assert cmd_simulate(args) == 0
    built = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert built == [f"{load_robot(TEST_ARM).name}_fixed"], built
