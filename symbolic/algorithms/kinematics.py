"""Kinematics shared by all recursions: the operators phi(parent(k), k), hinge maps H*(k), link poses,
and the first (base-to-tip) half of Algorithm 1 of seed 000: spatial velocities V(k), Coriolis
accelerations a(k) and gyroscopic forces b(k) (eq. 2.1-2.2).

Tree form of seed 000's serial recursions: link k+1 (inboard) is ``robot.parent[k]``; the sums over
link k-1 become sums over ``robot.children[k]`` ("gather"), and base-to-tip sweeps "scatter" (section 3.4).

Accelerations are Jain's conventional ones, ``alpha(k) = [dw/dt; dv/dt]`` of frame O_k (inertial-frame
derivatives, in body-k coordinates).  Eq. 2.2 gives a(k) for rotational hinges; derived again for every
hinge here (see docs/conventions.md):

* revolute (axis s in O_k):  ``a = [w_p x s qd;  w_p x (w_p x l_k)]``
* prismatic (axis s):        ``a = [0;  w_p x (w_p x l_k) + 2 w_p x s qd]``
* free base (6-DOF hinge):   ``a = [0; w x v]``, because the generalised base speeds are body-frame
  components, whose time derivative is ``dv/dt - w x v``;

with ``w_p`` the parent's angular velocity and ``l_k`` the vector O_parent -> O_k, both in k coordinates.
``b(k) = [w~ J(k) w; m w~ w~ p(k)]`` (eq. 2.2) with J(k) the inertia about O_k; an external wrench
``f_ext(k)`` on body k enters as ``b(k) - f_ext(k)``.  Gravity enters as the acceleration ``-g`` of the
inertial frame ("link n+1"), so alpha includes it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from soadyn.model.robot import Robot
from soadyn.symbolic.parameters import body_inertia, spatial_inertia
from soadyn.symbolic.scalar import ScalarContext, reuse
from soadyn.symbolic.spatial import Xform, cross, quaternion_to_matrix, rotation_about_axis


def hinge_map(robot: Robot, k: int) -> np.ndarray:
    """H*(k) as a float 6-vector for a 1-DOF joint (revolute: [s; 0], prismatic: [0; s])."""
    j = robot.joints[k]
    out = np.zeros(6)
    if j.type == "revolute":
        out[:3] = j.axis
    else:
        out[3:] = j.axis
    return out


def unit_hinge_index(robot: Robot, k: int) -> int | None:
    """If H*(k) is a coordinate unit vector +e_i, return i (structural zeros of P+ can then be imposed)."""
    h = hinge_map(robot, k)
    nz = np.flatnonzero(h)
    if len(nz) == 1 and h[nz[0]] == 1.0:
        return int(nz[0])
    return None


@dataclass
class Kinematics:
    """Per-body operators for one configuration.

    ``X[k]`` is phi(parent(k), k) (for k = 0 and a free base: phi(inertial, base)); ``Xp[k]``/``Xj[k]`` its
    constant-placement and joint-motion factors (``X[k] = Xp[k].then(Xj[k])``).
    """

    robot: Robot
    ctx: ScalarContext
    X: list[Xform]
    Xp: list[Xform]
    Xj: list[Xform]
    R0: np.ndarray | None  # base attitude (base to inertial), None for a fixed base
    r0: np.ndarray | None  # base position (inertial)

    def hinge(self, k: int) -> np.ndarray:
        return self.ctx.const(hinge_map(self.robot, k))

    def spatial_inertia(self, k: int) -> np.ndarray:
        return spatial_inertia(self.robot, self.ctx, k)

    def unit_hinge(self, k: int) -> int | None:
        """:func:`unit_hinge_index` of body k's hinge in these coordinates."""
        return unit_hinge_index(self.robot, k)

    def inertia_times(self, k: int, x: np.ndarray) -> np.ndarray:
        """``M(k) x`` using the rigid-body structure: ``[J w + h x u; m u - h x w]`` for ``x = [w; u]``."""
        bi = body_inertia(self.robot, self.ctx, k)
        w, u = x[:3], x[3:]
        return np.concatenate([bi.J @ w + cross(bi.h, u), bi.m * u - cross(bi.h, w)])


def _const_or_none(ctx: ScalarContext, a: np.ndarray, identity: np.ndarray) -> np.ndarray | None:
    return None if np.array_equal(a, identity) else ctx.const(a)


def joint_transforms(robot: Robot, ctx: ScalarContext, q: np.ndarray) -> Kinematics:
    """phi(parent(k), k) for every body; sin/cos evaluated once per joint (seed 000 eq. 2.1)."""
    return reuse(ctx, "joint_transforms", (robot, q), lambda: _joint_transforms(robot, ctx, q))


def _joint_transforms(robot: Robot, ctx: ScalarContext, q: np.ndarray) -> Kinematics:
    n = robot.n_bodies
    X: list[Xform] = [Xform()] * n
    Xp: list[Xform] = [Xform()] * n
    Xj: list[Xform] = [Xform()] * n
    R0 = r0 = None
    if robot.is_free:
        R0 = ctx.stage("R0", quaternion_to_matrix(q[3:7]))
        r0 = q[:3]
        X[0] = Xp[0] = Xform(R0, r0)
    for k in range(1, n):
        j = robot.joints[k]
        qk = q[robot.q_index(k)]
        if j.type == "revolute":
            c = ctx.stage(f"c{k}", ctx.cos(qk))
            s = ctx.stage(f"s{k}", ctx.sin(qk))
            Xj[k] = Xform(rotation_about_axis(ctx, j.axis, c, s), None)
        else:
            Xj[k] = Xform(None, ctx.const(j.axis) * qk)
        Xp[k] = Xform(_const_or_none(ctx, j.placement.R, np.eye(3)),
                      ctx.lengths[k] if k in ctx.lengths else _const_or_none(ctx, j.placement.p, np.zeros(3)))
        X[k] = Xp[k].then(Xj[k])
        if X[k].R is not None:
            X[k].R = ctx.stage(f"R{k}", X[k].R)
        if X[k].l is not None and j.type == "prismatic":
            X[k].l = ctx.stage(f"l{k}", X[k].l)
    return Kinematics(robot, ctx, X, Xp, Xj, R0, r0)


def link_poses(kin: Kinematics, relative: bool = False) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Attitude R_k (body to reference) and origin position p_k of every body.

    The reference frame is the inertial frame, or with ``relative=True`` the base frame (the base pose
    then drops out, which is what frame-coordinate quantities need).
    """
    Rw, pw = reuse(kin.ctx, "link_poses_b" if relative else "link_poses_w", (kin,),
                   lambda: _link_poses(kin, relative))
    return list(Rw), list(pw)


def _link_poses(kin: Kinematics, relative: bool) -> tuple[list[np.ndarray], list[np.ndarray]]:
    robot, ctx = kin.robot, kin.ctx
    Rw: list[np.ndarray] = []
    pw: list[np.ndarray] = []
    tag = "b" if relative else "w"
    for k in range(robot.n_bodies):
        if k == 0:
            if robot.is_free and not relative:
                Rw.append(kin.R0)
                pw.append(kin.r0)
            else:
                Rw.append(ctx.eye(3))
                pw.append(ctx.zeros(3))
            continue
        p = robot.parent[k]
        Xk = kin.X[k]
        R = Rw[p] if Xk.R is None else ctx.stage(f"R{tag}{k}", Rw[p] @ Xk.R)
        pos = pw[p] if Xk.l is None else ctx.stage(f"p{tag}{k}", pw[p] + Rw[p] @ Xk.l)
        Rw.append(R)
        pw.append(pos)
    return Rw, pw


@dataclass
class VelocityTerms:
    V: list[np.ndarray]   # spatial velocity of O_k, body-k coordinates
    a: list[np.ndarray]   # Coriolis accelerations a(k)
    b: list[np.ndarray]   # gyroscopic forces b(k) (minus external wrenches)


def velocities(kin: Kinematics, v: np.ndarray, f_ext: np.ndarray | None = None,
               need_b: bool = True) -> VelocityTerms:
    """Base-to-tip: ``V(k) = phi*(k+1, k) V(k+1) + H*(k) beta(k)`` (eq. 2.1) with a(k), b(k) (eq. 2.2)."""
    robot, ctx = kin.robot, kin.ctx
    n = robot.n_bodies
    V: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    a: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    b: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    zero6 = ctx.zeros(6)
    for k in range(n):
        if k == 0:
            if robot.is_free:
                V[0] = v[0:6]
                a[0] = ctx.stage("a0", np.concatenate([ctx.zeros(3), cross(v[0:3], v[3:6])]))
            else:
                V[0], a[0] = zero6, zero6
        else:
            p = robot.parent[k]
            j = robot.joints[k]
            qd = v[robot.v_index(k)][0]
            Xk = kin.X[k]
            wp = V[p][:3] if Xk.R is None else Xk.R.T @ V[p][:3]   # parent angular velocity, k coords
            Vk = Xk.motion_to_child(V[p]) + kin.hinge(k) * qd
            V[k] = ctx.stage(f"V{k}", Vk)
            s = ctx.const(j.axis)
            if Xk.l is None:
                lin = ctx.zeros(3)
            else:
                lk = Xk.l if Xk.R is None else Xk.R.T @ Xk.l
                lin = cross(wp, cross(wp, lk))
            if j.type == "revolute":
                ak = np.concatenate([cross(wp, s * qd), lin])
            else:
                ak = np.concatenate([ctx.zeros(3), lin + 2 * cross(wp, s * qd)])
            a[k] = ctx.stage(f"a{k}", ak)
        if need_b:
            b[k] = gyroscopic_force(kin, k, V[k], None if f_ext is None else f_ext[k])
    return VelocityTerms(V, a, b)


def gyroscopic_force(kin: Kinematics, k: int, Vk: np.ndarray, fext_k: np.ndarray | None) -> np.ndarray:
    """b(k) = [w~ J w; m w~ w~ p] (eq. 2.2), J about O_k; external wrench subtracted."""
    bi = body_inertia(kin.robot, kin.ctx, k)
    J, mp = bi.J, bi.h
    w = Vk[:3]
    bk = np.concatenate([cross(w, J @ w), cross(w, cross(w, mp))])
    if fext_k is not None:
        bk = bk - fext_k
    return kin.ctx.stage(f"b{k}", bk)


def gravity_acceleration(kin: Kinematics) -> np.ndarray:
    """phi*(n+1, base) alpha(n+1) with alpha(inertial) = [0; -g]: the base's share of gravity."""
    robot, ctx = kin.robot, kin.ctx
    g = ctx.const(-robot.gravity)
    if robot.is_free:
        lin = kin.R0.T @ g
    else:
        lin = g
    return np.concatenate([ctx.zeros(3), lin])
