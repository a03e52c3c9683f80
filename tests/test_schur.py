"""Schur-complement (constraint-force) factorisation of M^-1 (seed 002), and the generated C of the
base-invariant / Schur functions.

Routes compared: the O(N) CF solve (``algorithms.schur``) against the articulated-body forward dynamics
and ``inv(M)``; the dense matrices A', B, C of eq. 3.14-3.16 / 4.12-4.13 (``reference_invariant``) against
``inv`` of the dense reference mass matrix; the compiled C against the dense reference path.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_base_invariant import SERIAL, TREE, _close, _state, random_robot

from soadyn import load_robot
from soadyn.model.robot import Inertia
from soadyn.reference import dense as reference
from soadyn.reference import invariant as ri
from soadyn.symbolic.algorithms import forward_dynamics
from soadyn.symbolic.algorithms.schur import (
    complement_basis,
    forward_dynamics_schur,
    mass_matrix_inverse_schur,
)
from soadyn.symbolic.scalar import NUMERIC

EX = Path(__file__).resolve().parents[1] / "examples"


def _robots(rng, base):
    files = ("tian_wu_3dof.yaml", "test_arm.yaml", "dimitrov_7dof_rw.yaml")
    out = [load_robot(EX / f, base=base) for f in files]
    out[1] = out[1].replace(gravity=[0.2, -0.3, -9.81])
    out += [random_robot(rng, SERIAL, base), random_robot(rng, TREE, base)]
    return out


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_schur_forward_dynamics_equals_articulated_body(rng, base):
    for robot in _robots(rng, base):
        for _ in range(3):
            q, v, tau, f_ext = _state(robot, rng)
            for fe in (None, f_ext):
                _close(forward_dynamics_schur(robot, NUMERIC, q, v, tau, fe),
                       forward_dynamics(robot, NUMERIC, q, v, tau, fe))


@pytest.mark.parametrize("base", ["free", "fixed"])
def test_schur_inverse_and_dense_factors(rng, base):
    for robot in _robots(rng, base):
        q = robot.random_configuration(rng)
        Minv = np.linalg.inv(reference.mass_matrix(robot, q))
        _close(mass_matrix_inverse_schur(robot, NUMERIC, q), Minv, 1e-9)
        f = ri.schur_factors(robot, q)
        _close(f.C - f.B.T @ np.linalg.solve(f.Ap, f.B), Minv, 1e-9)           # eq. 3.20
        assert np.linalg.eigvalsh(f.Ap).min() > 0                                 # A' SPD (appendix B)
        _close(f.Ap, f.Ap.T)
        # eq. 4.13: A' - A = W^T I0^-1 W is non-zero only in the blocks of hinges on the base
        diff = (f.Ap - f.A).reshape(robot.n_joints, 5, robot.n_joints, 5)
        on_base = [k - 1 for k in robot.children[0]]
        for i in range(robot.n_joints):
            for j in range(robot.n_joints):
                if not (i in on_base and j in on_base):
                    assert np.abs(diff[i, :, j, :]).max() == 0.0
        if robot.is_free:
            assert np.abs(diff).max() > 0
        else:
            assert np.abs(diff).max() == 0.0


def test_serial_A_prime_is_block_tridiagonal(rng):
    robot = random_robot(rng, SERIAL)
    Ap = ri.schur_factors(robot, robot.random_configuration(rng)).Ap
    nj = robot.n_joints
    blocks = Ap.reshape(nj, 5, nj, 5)
    for i in range(nj):
        for j in range(nj):
            nz = np.abs(blocks[i, :, j, :]).max() > 0
            assert nz == (abs(i - j) <= 1), (i, j)


def test_complement_basis():
    rng = np.random.default_rng(7)
    for h in [np.eye(6)[2], np.eye(6)[4], np.r_[rng.normal(size=3), 0, 0, 0], np.r_[0, 0, 0, 0.6, 0, 0.8]]:
        W = complement_basis(h)
        assert W.shape == (6, 5)
        _close(W.T @ W, np.eye(5), 1e-14)
        _close(W.T @ h, np.zeros(5), 1e-14)


def test_massless_body_is_rejected_with_the_body_name(rng):
    robot = load_robot(EX / "tian_wu_3dof.yaml")
    robot = robot.replace(inertias=[*robot.inertias[:2], Inertia(0.0, np.zeros(3), np.zeros((3, 3))),
                                    *robot.inertias[3:]])
    q, v, tau, _ = _state(robot, rng)
    with pytest.raises(ValueError, match="link2.*singular spatial inertia"):
        forward_dynamics_schur(robot, NUMERIC, q, v, tau)


# ---- generated C ----------------------------------------------------------------------------------------
NAMES = ("forward_dynamics_decoupled", "forward_dynamics_decoupled_fext", "operational_space_inertias",
         "forward_dynamics_schur", "forward_dynamics_schur_fext")


@pytest.fixture(scope="module")
def gen_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("generated_e")


@pytest.mark.parametrize("robot_file", ["test_arm.yaml", "tian_wu_3dof.yaml"])
def test_generated_code_matches_reference(rng, gen_dir, robot_file, cc):
    """The compiled C (public ``soadyn.codegen.compile``) against the dense reference path."""
    from soadyn.codegen import compile

    robot = load_robot(EX / robot_file).replace(gravity=[0.0, 0.5, -9.81])
    mod = compile(robot, gen_dir, progress=False)
    assert {f"{mod.module_name}_{n}" for n in NAMES} <= set(mod.op_counts)
    for _ in range(5):
        q, v, tau, f_ext = _state(robot, rng)
        ref = reference.forward_dynamics(robot, q, v, tau)
        ref_fe = reference.forward_dynamics(robot, q, v, tau, f_ext)
        _close(mod.forward_dynamics_decoupled(q, v, tau), ref)
        _close(mod.forward_dynamics_decoupled(q, v, tau, f_ext), ref_fe)
        _close(mod.forward_dynamics_schur(q, v, tau), ref)
        _close(mod.forward_dynamics_schur(q, v, tau, f_ext), ref_fe)
        _close(mod.operational_space_inertias(q), ri.operational_space_inertias(robot, q), 1e-9)
