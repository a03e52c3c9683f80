"""Centre of mass, momentum and kinetic energy (sums over bodies of the per-body quantities)."""

from __future__ import annotations

from typing import Any

import numpy as np

from soadyn.symbolic.algorithms.drive import armature
from soadyn.symbolic.algorithms.kinematics import joint_transforms, velocities
from soadyn.symbolic.parameters import body_inertia, total_mass
from soadyn.symbolic.scalar import ScalarContext
from soadyn.symbolic.spatial import cross


def _to_inertial(kin: Any, x: np.ndarray, point: bool) -> np.ndarray:
    """Base-frame vector (or point) to inertial coordinates: ``R_0 x`` (``+ r_0`` for a point)."""
    if kin.R0 is None:
        return x
    return kin.R0 @ x + kin.r0 if point else kin.R0 @ x


def first_moment(kin: Any) -> np.ndarray:
    """``sum_k m_k c_k`` about the base origin in base axes, gathered tip to base like the composite
    inertias of eq. 2.4a: ``h(k) = m_k p_k + sum_c (R_c h(c) + m_c l_c)`` with m_c the subtree mass."""
    robot, ctx = kin.robot, kin.ctx
    h: list[Any] = [None] * robot.n_bodies
    mass: list[Any] = [0.0] * robot.n_bodies
    for k in reversed(range(robot.n_bodies)):
        bi = body_inertia(robot, ctx, k)
        hk = bi.h
        mass[k] = bi.m
        for c in robot.children[k]:
            X = kin.X[c]
            hc = h[c] if X.R is None else X.R @ h[c]
            if X.l is not None:
                hc = hc + mass[c] * X.l
            hk = hk + hc
            mass[k] += mass[c]
        h[k] = ctx.stage(f"hm{k}", hk)
    return h[0]


def center_of_mass(robot: Any, ctx: ScalarContext, q: np.ndarray) -> np.ndarray:
    """System centre of mass in the inertial frame, ``r_0 + R_0 h(0) / m`` (see :func:`first_moment`)."""
    kin = joint_transforms(robot, ctx, q)
    c = ctx.stage("com_b", first_moment(kin) * (1.0 / total_mass(robot, ctx)))
    return _to_inertial(kin, c, point=True)


def momentum(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """[angular momentum about the system CoM; linear momentum], inertial coordinates.

    The spatial momentum of the whole system at the base origin is the base block row of
    ``phi M phi* H* beta`` (eq. 2.3a, 2.4a), gathered tip to base:
    ``h(k) = M(k) V(k) + sum_c phi(k, c) h(c)``.
    With ``h(0) = [L_0; P]`` (base axes) and the CoM offset c from the base origin, the angular momentum
    about the CoM is ``L_0 - c x P``; one rotation by R_0 gives inertial axes.
    """
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, need_b=False)
    hs: list[Any] = [None] * robot.n_bodies
    for k in reversed(range(robot.n_bodies)):
        hk = kin.inertia_times(k, vt.V[k])
        for c in robot.children[k]:
            hk = hk + kin.X[c].force_to_parent(hs[c])
        hs[k] = ctx.stage(f"hv{k}", hk)
    c = ctx.stage("com_b", first_moment(kin) * (1.0 / total_mass(robot, ctx)))
    L = hs[0][:3] - cross(c, hs[0][3:])
    return np.concatenate([_to_inertial(kin, L, False), _to_inertial(kin, hs[0][3:], False)])


def kinetic_energy(robot: Any, ctx: ScalarContext, q: np.ndarray, v: np.ndarray) -> Any:
    """1/2 sum_k V(k)* M(k) V(k), plus the rotors' 1/2 I_a qd^2 (drive train armature)."""
    kin = joint_transforms(robot, ctx, q)
    vt = velocities(kin, v, need_b=False)
    T = 0
    for k in range(robot.n_bodies):
        V = vt.V[k]
        T = T + V @ kin.inertia_times(k, V)
        ia = armature(robot, k)
        if ia:
            qd = v[robot.v_index(k)][0]
            T = T + ia * (qd * qd)
    return 0.5 * T
