r"""Converters between soadyn's state conventions and those of Pinocchio, MuJoCo and SpaceDyn/SPART.

soadyn (see ``docs/conventions.md``)::

    q = [p_base (3, inertial), quat_base [x, y, z, w] (base -> inertial), joints...]
    v = [w_base (3, base axes), v_base-origin (3, base axes), joint rates...]
    a = dv/dt componentwise;  tau = [moment; force] on the base at its origin, base axes; joints...

Pinocchio (free flyer): q identical, ``v = [v_origin; w]`` in base axes (blocks swapped), joints
depth-first from the URDF root in *its* order; ``a`` and ``tau`` follow v.  The map between the
two is a fixed permutation ``v_pin = Pi v`` (orthogonal), so ``tau_pin = Pi tau`` (the power
``tau . v`` is invariant) and ``M_pin = Pi M Pi^T``.

MuJoCo (free joint): ``qpos = [p (3), quat [w, x, y, z]]``, ``qvel = [v_origin in world axes,
w in body axes]``.  Here the velocity map depends on the state: ``v_mj = T(q) v`` with base block
``[[0, R], [I, 0]]``; accelerations pick up ``dT/dt v``: ``a_mj = T a + [R (w x v_o); 0]``.

SpaceDyn (Yoshida) / SPART: base state ``R0`` (base CoM, inertial), ``A0`` (base -> inertial
rotation matrix), ``v0`` (base CoM velocity, inertial), ``w0`` (base angular velocity,
inertial), joint ``q``, ``qd`` in the same depth-first order as ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.robot import Robot, require_free, state_vector
from soadyn.model.rotations import matrix_to_quaternion, quaternion_to_matrix

__all__ = ["PinocchioMap", "to_pinocchio", "from_pinocchio", "MujocoMap", "SpaceDynState",
           "to_spacedyn", "from_spacedyn", "spacedyn_acceleration", "matrix_to_quaternion"]


def _couplings(robot: Robot) -> str:
    return ", ".join(f"{j.name} mimics {j.mimic.joint}" for j in robot.joints[1:] if j.mimic is not None)


# ---- Pinocchio -----------------------------------------------------------------------------------------
class PinocchioMap:
    """Converts vectors and matrices between a soadyn ``Robot`` and a Pinocchio ``Model``.

    Built once from ``(robot, pin_model)``; joints are matched by name.  A free-base robot needs
    a model built with ``pin.JointModelFreeFlyer()`` as root joint, a fixed-base robot one without.
    Only 1-DOF Pinocchio joints are accepted besides the free flyer (an unbounded revolute joint, which
    Pinocchio's URDF parser makes of a ``continuous`` joint, has ``q_pin = [cos q, sin q]``) and, for a
    robot with mimic couplings, Pinocchio's mimic joints (``buildModelFromUrdf(..., mimic=True)``), which
    must have the robot's source joint, multiplier and offset; both then use the reduced coordinates.
    Drive train:
    :meth:`drive_to_pin` / :meth:`apply_drive`.

    Attributes: ``perm`` (nv x nv, ``v_pin = perm @ v``), ``joint_ids[k]`` (Pinocchio joint id of
    body k; for a fixed base body 0 maps to the universe, id 0), ``q_ids`` (q index in Pinocchio
    of each of our q entries; of the cosine for an unbounded joint), ``unbounded`` (rows: our q index and
    Pinocchio's q index of the cosine, one per unbounded revolute joint).
    """

    def __init__(self, robot: Robot, pin_model: Any) -> None:
        self.robot = robot
        self.model = pin_model
        who = f"PinocchioMap({robot.name!r})"
        names = list(pin_model.names)
        shortnames = [j.shortname() for j in pin_model.joints]
        root_free = len(names) > 1 and shortnames[1] == "JointModelFreeFlyer"
        if robot.is_free != root_free:
            fix = ("build it with pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer())" if robot.is_free
                   else "build it without a root joint")
            raise ValueError(f"{who}: robot base is {robot.base!r} but the Pinocchio model "
                             f"{'has' if root_free else 'has no'} free-flyer root joint; {fix}")
        n_mimic = shortnames.count("JointModelMimic")
        if robot.is_coupled and not n_mimic:
            raise ValueError(f"{who}: the robot has mimic couplings ({_couplings(robot)}) but the Pinocchio "
                             "model has no mimic joints; build it with pin.buildModelFromUrdf(path, ..., "
                             "mimic=True), or load the robot with mimic='independent'")
        if n_mimic and not robot.is_coupled:
            raise ValueError(f"{who}: the Pinocchio model has {n_mimic} mimic joints but the robot has no "
                             "couplings; build it with mimic=False, or load the robot with mimic='couple'")
        # Pinocchio's unbounded revolute joints (URDF ``continuous``) store [cos q, sin q]: one more q each
        n_unbounded = sum(1 for jm in pin_model.joints[1:] if jm.nq == 2 and jm.nv == 1)
        if pin_model.nv != robot.nv or pin_model.nq != robot.nq + n_unbounded:
            raise ValueError(f"{who}: size mismatch: robot nq={robot.nq}, nv={robot.nv}; Pinocchio "
                             f"nq={pin_model.nq}, nv={pin_model.nv} (mimic joints? unsupported joint types?)")
        mimicked = dict(zip(pin_model.mimicking_joints, pin_model.mimicked_joints)) if n_mimic else {}
        self.joint_ids = [1 if root_free else 0]
        q_ids = list(range(7)) if root_free else []
        unbounded = []    # (our q index, Pinocchio's q index of cos q) of the unbounded revolute joints
        perm = np.zeros((robot.nv, robot.nv))
        if root_free:
            perm[0:3, 3:6] = np.eye(3)
            perm[3:6, 0:3] = np.eye(3)
        for k in range(1, robot.n_bodies):
            joint = robot.joints[k]
            name = joint.name
            if name not in names:
                raise ValueError(f"{who}: joint {name!r} is not in the Pinocchio model (joints: {names[1:]})")
            jid = names.index(name)
            jm = pin_model.joints[jid]
            self.joint_ids.append(jid)
            if joint.mimic is not None:  # a coupled joint: Pinocchio's mimic joint of the same coupling
                mm, pm = joint.mimic, jm.extract() if shortnames[jid] == "JointModelMimic" else None
                src = names[mimicked[jid]] if pm is not None else None
                if pm is None or src != mm.joint or not np.isclose(pm.scaling, mm.multiplier, rtol=1e-12) \
                        or not np.isclose(pm.offset, mm.offset, rtol=1e-12, atol=1e-15):
                    theirs = (f"mimics {src!r} with multiplier {pm.scaling:g}, offset {pm.offset:g}"
                              if pm is not None else f"is a {shortnames[jid]}")
                    raise ValueError(f"{who}: joint {name!r} mimics {mm.joint!r} with multiplier "
                                     f"{mm.multiplier:g}, offset {mm.offset:g} but in the Pinocchio model "
                                     f"it {theirs}; build both from the same file")
                continue
            if jm.nv != 1 or jm.nq not in (1, 2) or (jm.nq == 2 and joint.type != "revolute"):
                raise ValueError(f"{who}: Pinocchio joint {name!r} ({shortnames[jid]}) is not a 1-DOF "
                                 "revolute/prismatic joint")
            if jm.nq == 2:
                unbounded.append((robot.q_index(k), jm.idx_q))
            q_ids.append(jm.idx_q)
            perm[jm.idx_v, robot.v_index(k).start] = 1.0
        self.q_ids = np.array(q_ids, dtype=int)
        self.unbounded = np.array(unbounded, dtype=int).reshape(-1, 2)
        self.perm = perm

    def drive_to_pin(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(armature, damping, friction)`` per Pinocchio velocity (zeros on the free flyer), the values
        of ``model.armature``, ``model.damping``, ``model.friction`` that describe this robot's drive train
        (docs/conventions.md, "Drive train").  A coupled joint's armature and damping act on its source's
        coordinate as ``multiplier^2 *`` the value (the diagonal ``G^T diag(.) G``); a coupled joint's
        friction has no such form and is refused."""
        r = self.robot
        nb = r.base_nv
        arm, damp, fric = np.zeros(r.nv), np.zeros(r.nv), np.zeros(r.nv)
        for k, (i, a, _) in enumerate(r.coordinate_map(), start=1):
            j = r.joints[k]
            if j.mimic is not None and j.friction:
                raise ValueError(f"PinocchioMap({r.name!r}): joint {j.name!r} is coupled (mimics "
                                 f"{j.mimic.joint!r}) and has Coulomb friction, which Pinocchio's per-"
                                 "coordinate model.friction cannot represent; set its friction to 0 or put "
                                 f"it on {j.mimic.joint!r}")
            arm[nb + i] += a * a * j.armature
            damp[nb + i] += a * a * j.damping
            fric[nb + i] += j.friction
        return self.perm @ arm, self.perm @ damp, self.perm @ fric

    def apply_drive(self) -> None:
        """Write :meth:`drive_to_pin` into the Pinocchio model (``armature``, ``damping``, ``friction``).
        Pinocchio's ``crba``/``aba`` use the armature; its ``rnea``/``aba`` ignore damping and friction (add
        ``damping v + friction v / sqrt(v^2 + v_s^2)`` yourself: Pinocchio has no smoothing scale ``v_s``)."""
        arm, damp, fric = self.drive_to_pin()
        self.model.armature = arm
        self.model.damping = damp
        self.model.friction = fric

    # q
    def q_to_pin(self, q: Any) -> np.ndarray:
        """Our ``q`` -> Pinocchio's (an unbounded revolute joint's angle as ``[cos q, sin q]``)."""
        q = state_vector(q, self.robot.nq, "q", "PinocchioMap.q_to_pin")
        out = np.zeros(self.model.nq)
        out[self.q_ids] = q
        i, j = self.unbounded[:, 0], self.unbounded[:, 1]
        out[j], out[j + 1] = np.cos(q[i]), np.sin(q[i])
        return out

    def q_from_pin(self, q_pin: Any) -> np.ndarray:
        """Pinocchio's ``q`` -> ours (an unbounded revolute joint's angle from ``atan2(sin, cos)``)."""
        q_pin = state_vector(q_pin, self.model.nq, "q_pin", "PinocchioMap.q_from_pin")
        q = q_pin[self.q_ids].copy()
        i, j = self.unbounded[:, 0], self.unbounded[:, 1]
        q[i] = np.arctan2(q_pin[j + 1], q_pin[j])
        return q

    # v, a, tau (all transform with the same orthogonal permutation)
    def v_to_pin(self, v: Any) -> np.ndarray:
        """Velocity, acceleration or generalised force to Pinocchio's ordering."""
        return self.perm @ state_vector(v, self.robot.nv, "vector", "PinocchioMap.v_to_pin")

    def v_from_pin(self, v_pin: Any) -> np.ndarray:
        return self.perm.T @ state_vector(v_pin, self.robot.nv, "vector", "PinocchioMap.v_from_pin")

    a_to_pin = tau_to_pin = v_to_pin
    a_from_pin = tau_from_pin = v_from_pin

    # nv x nv matrices (mass matrix, its inverse)
    def matrix_to_pin(self, A: np.ndarray) -> np.ndarray:
        return self.perm @ np.asarray(A, dtype=float) @ self.perm.T

    def matrix_from_pin(self, A_pin: np.ndarray) -> np.ndarray:
        return self.perm.T @ np.asarray(A_pin, dtype=float) @ self.perm

    # 6 x nv Jacobians: Pinocchio rows [v; w], ours [w; v]
    def jacobian_from_pin(self, J_pin: np.ndarray) -> np.ndarray:
        # Pinocchio's Python returns a 6 x 1 Jacobian (one joint, fixed base) as a vector of 6
        J = np.asarray(J_pin, dtype=float).reshape(6, self.robot.nv) @ self.perm
        return np.vstack([J[3:], J[:3]])

    def jacobian_to_pin(self, J: np.ndarray) -> np.ndarray:
        J = np.asarray(J, dtype=float)
        return np.vstack([J[3:], J[:3]]) @ self.perm.T

    @staticmethod
    def momentum_from_pin(hg: Any) -> np.ndarray:
        """Pinocchio centroidal momentum ``[linear; angular]`` (about the CoM, world axes) -> ours."""
        h = np.asarray(hg, dtype=float).ravel()
        return np.concatenate([h[3:], h[:3]])

    def fext_to_pin(self, f_ext: np.ndarray) -> Any:
        """(n_bodies, 6) wrenches [n; f] at body origins, body axes -> Pinocchio ``StdVec_Force``
        (one per joint, in the joint frame = our body frame, [linear; angular])."""
        import pinocchio as pin

        f_ext = np.asarray(f_ext, dtype=float)
        if f_ext.shape != (self.robot.n_bodies, 6):
            raise ValueError(f"PinocchioMap.fext_to_pin: f_ext must have shape ({self.robot.n_bodies}, 6)")
        out = pin.StdVec_Force()
        for _ in range(self.model.njoints):
            out.append(pin.Force.Zero())
        for k, jid in enumerate(self.joint_ids):
            if jid == 0:
                continue  # a fixed base: forces on it never reach a joint
            out[jid] = pin.Force(f_ext[k, 3:], f_ext[k, :3])
        return out


def to_pinocchio(robot: Robot, pin_model: Any, q: Any = None, v: Any = None, a: Any = None,
                 tau: Any = None) -> tuple:
    """Convert whichever of ``q, v, a, tau`` are given to Pinocchio's conventions (same order,
    ``None`` passed through).  Build a :class:`PinocchioMap` once when converting many states."""
    m = PinocchioMap(robot, pin_model)
    return (None if q is None else m.q_to_pin(q), None if v is None else m.v_to_pin(v),
            None if a is None else m.v_to_pin(a), None if tau is None else m.v_to_pin(tau))


def from_pinocchio(robot: Robot, pin_model: Any, q: Any = None, v: Any = None, a: Any = None,
                   tau: Any = None) -> tuple:
    """Inverse of :func:`to_pinocchio`."""
    m = PinocchioMap(robot, pin_model)
    return (None if q is None else m.q_from_pin(q), None if v is None else m.v_from_pin(v),
            None if a is None else m.v_from_pin(a), None if tau is None else m.v_from_pin(tau))


# ---- MuJoCo ------------------------------------------------------------------------------------------
class MujocoMap:
    """Converts states and dynamics quantities between a soadyn ``Robot`` and a MuJoCo ``MjModel``.

    Joints are matched by name; a free base needs a free joint on the root body (any name), a
    fixed base none.  Free joint: ``qpos = [p, quat wxyz]``, ``qvel = [v_origin world; w body]``.
    A robot with mimic couplings maps its reduced coordinates onto a MuJoCo model that has every joint
    (the coupling there is a joint ``<equality>``, which MuJoCo enforces softly): ``qpos`` of
    ``q_full = G q + b``, ``qvel = T(q_full) G v``, ``tau = G^T T^T qfrc``, ``M = G^T T^T M_mj T G``; the way
    back reads the independent joints.  Drive train: :meth:`apply_drive`.
    """

    def __init__(self, robot: Robot, mj_model: Any) -> None:
        import mujoco

        self.robot = robot
        self.model = mj_model
        #: coupled robots (mimic): the map of the uncoupled tree, the expansion G, b, and the indices of the
        #: reduced coordinates among the full velocities (None for uncoupled robots)
        self._full: MujocoMap | None = None
        if robot.is_coupled:
            self._full = MujocoMap(robot.uncoupled(), mj_model)
            self._G, self._b = robot.expansion()
            nb = robot.base_nv
            self._sel = np.array([*range(nb), *(nb + k - 1 for k in range(1, robot.n_bodies)
                                                if robot.joints[k].mimic is None)], dtype=int)
            self._qsel = np.array([*range(robot.base_nq), *(self._sel[nb:] - nb + robot.base_nq)], dtype=int)
            return
        who = f"MujocoMap({robot.name!r})"
        names = [mujoco.mj_id2name(mj_model, mujoco.mjtObj.mjOBJ_JOINT, i) for i in range(mj_model.njnt)]
        types = list(mj_model.jnt_type)
        free = [i for i, t in enumerate(types) if t == mujoco.mjtJoint.mjJNT_FREE]
        if robot.is_free != bool(free):
            raise ValueError(f"{who}: robot base is {robot.base!r} but the MuJoCo model has "
                             f"{len(free)} free joints; add/remove a <freejoint/> on the root body")
        if mj_model.nv != robot.nv or mj_model.nq != robot.nq:
            raise ValueError(f"{who}: size mismatch: robot nq={robot.nq}, nv={robot.nv}; MuJoCo "
                             f"nq={mj_model.nq}, nv={mj_model.nv}")
        self.qadr = np.zeros(robot.n_joints, dtype=int)
        self.dadr = np.zeros(robot.n_joints, dtype=int)
        for k in range(1, robot.n_bodies):
            name = robot.joints[k].name
            if name not in names:
                raise ValueError(f"{who}: joint {name!r} is not in the MuJoCo model (joints: {names})")
            i = names.index(name)
            self.qadr[k - 1] = mj_model.jnt_qposadr[i]
            self.dadr[k - 1] = mj_model.jnt_dofadr[i]
        self.free_q = int(mj_model.jnt_qposadr[free[0]]) if free else -1
        self.free_v = int(mj_model.jnt_dofadr[free[0]]) if free else -1

    # ---- coupled robots: every coupled joint is a joint of the MuJoCo model (full coordinates) ----------
    def _qfull(self, q: Any) -> np.ndarray:
        r = self.robot
        q = state_vector(q, r.nq, "q", f"MujocoMap({r.name!r})")
        nb, nbv = r.base_nq, r.base_nv
        return np.concatenate([q[:nb], self._G[nbv:, nbv:] @ q[nb:] + self._b])

    def _vfull(self, v: Any, name: str) -> np.ndarray:
        return self._G @ state_vector(v, self.robot.nv, name, f"MujocoMap({self.robot.name!r})")

    def apply_drive(self, frictionloss: bool = False) -> None:
        """Write the robot's armature and damping into the MuJoCo model's ``dof_armature`` / ``dof_damping``
        (a coupled joint's own dof gets its own values: MuJoCo has every joint).  ``frictionloss=True`` also
        writes the Coulomb friction to ``dof_frictionloss``; MuJoCo applies it as a constraint force (dry
        friction, no smoothing), not the smoothed joint torque of docs/conventions.md, so the two agree
        only away from zero velocity (and not at all with constraints disabled)."""
        import mujoco

        m = self.model
        for j in self.robot.joints[1:]:
            i = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.name)
            d = m.jnt_dofadr[i]
            m.dof_armature[d], m.dof_damping[d] = j.armature, j.damping
            if frictionloss:
                m.dof_frictionloss[d] = j.friction

    def _R(self, q: np.ndarray) -> np.ndarray:
        return quaternion_to_matrix(q[3:7])

    def q_to_mj(self, q: Any) -> np.ndarray:
        if self._full is not None:
            return self._full.q_to_mj(self._qfull(q))
        r = self.robot
        q = state_vector(q, r.nq, "q", "MujocoMap.q_to_mj")
        out = np.zeros(r.nq)
        if r.is_free:
            x, y, z, w = q[3:7]
            out[self.free_q:self.free_q + 7] = [*q[:3], w, x, y, z]
        out[self.qadr] = q[r.base_nq:]
        return out

    def q_from_mj(self, qpos: Any) -> np.ndarray:
        if self._full is not None:  # the independent coordinates (MuJoCo's equality holds them only softly)
            return self._full.q_from_mj(qpos)[self._qsel]
        r = self.robot
        qpos = state_vector(qpos, r.nq, "qpos", "MujocoMap.q_from_mj")
        out = np.zeros(r.nq)
        if r.is_free:
            f = qpos[self.free_q:self.free_q + 7]
            out[:7] = [*f[:3], f[4], f[5], f[6], f[3]]
        out[r.base_nq:] = qpos[self.qadr]
        return out

    def T(self, q: Any) -> np.ndarray:
        """nv x nv matrix with ``qvel = T(q) v`` (coupled robots: nv_mj x nv, ``T_full(q_full) G``)."""
        if self._full is not None:
            return self._full.T(self._qfull(q)) @ self._G
        r = self.robot
        T = np.zeros((r.nv, r.nv))
        if r.is_free:
            R = self._R(np.asarray(q, float))
            f = self.free_v
            T[f:f + 3, 3:6] = R
            T[f + 3:f + 6, 0:3] = np.eye(3)
        T[self.dadr, np.arange(r.base_nv, r.nv)] = 1.0
        return T

    def v_to_mj(self, q: Any, v: Any) -> np.ndarray:
        if self._full is not None:
            return self._full.v_to_mj(self._qfull(q), self._vfull(v, "v"))
        return self.T(q) @ state_vector(v, self.robot.nv, "v", "MujocoMap.v_to_mj")

    def v_from_mj(self, q: Any, qvel: Any) -> np.ndarray:
        if self._full is not None:
            return self._full.v_from_mj(self._qfull(q), qvel)[self._sel]
        return np.linalg.solve(self.T(q), state_vector(qvel, self.robot.nv, "qvel", "MujocoMap.v_from_mj"))

    def _adot_v(self, q: Any, v: Any) -> np.ndarray:
        """``dT/dt v``: non-zero only in the free joint's linear block, ``R (w x v_o)``."""
        r = self.robot
        out = np.zeros(r.nv)
        if r.is_free:
            v = np.asarray(v, float)
            out[self.free_v:self.free_v + 3] = self._R(np.asarray(q, float)) @ np.cross(v[:3], v[3:6])
        return out

    def a_to_mj(self, q: Any, v: Any, a: Any) -> np.ndarray:
        if self._full is not None:
            return self._full.a_to_mj(self._qfull(q), self._vfull(v, "v"), self._vfull(a, "a"))
        return self.T(q) @ state_vector(a, self.robot.nv, "a", "MujocoMap.a_to_mj") + self._adot_v(q, v)

    def a_from_mj(self, q: Any, v: Any, qacc: Any) -> np.ndarray:
        if self._full is not None:
            return self._full.a_from_mj(self._qfull(q), self._vfull(v, "v"), qacc)[self._sel]
        qacc = state_vector(qacc, self.robot.nv, "qacc", "MujocoMap.a_from_mj")
        return np.linalg.solve(self.T(q), qacc - self._adot_v(q, v))

    def tau_from_mj(self, q: Any, f: Any) -> np.ndarray:
        """Generalised force (qfrc_*) -> ours: ``tau = T^T f`` (power invariance; coupled robots:
        ``G^T T_full^T f``)."""
        if self._full is not None:
            return self._G.T @ self._full.tau_from_mj(self._qfull(q), f)
        return self.T(q).T @ state_vector(f, self.robot.nv, "qfrc", "MujocoMap.tau_from_mj")

    def tau_to_mj(self, q: Any, tau: Any) -> np.ndarray:
        """Ours -> a MuJoCo generalised force; for a coupled robot the reduced force acts on the base and
        the independent joints (zero on the coupled ones), so that ``tau_from_mj`` gives it back."""
        if self._full is not None:
            full = np.zeros(self._G.shape[0])
            full[self._sel] = state_vector(tau, self.robot.nv, "tau", "MujocoMap.tau_to_mj")
            return self._full.tau_to_mj(self._qfull(q), full)
        return np.linalg.solve(self.T(q).T, state_vector(tau, self.robot.nv, "tau", "MujocoMap.tau_to_mj"))

    def mass_matrix_from_mj(self, q: Any, M_mj: np.ndarray) -> np.ndarray:
        if self._full is not None:
            return self._G.T @ self._full.mass_matrix_from_mj(self._qfull(q), M_mj) @ self._G
        T = self.T(q)
        return T.T @ np.asarray(M_mj, float) @ T

    def bias_from_mj(self, q: Any, v: Any, qfrc_bias: Any, M_mj: np.ndarray) -> np.ndarray:
        """``C = T^T (c_mj + M_mj dT/dt v)``: MuJoCo's bias is for its own (world-linear) accelerations
        (coupled robots: ``G^T`` of the full one at ``G v``)."""
        if self._full is not None:
            return self._G.T @ self._full.bias_from_mj(self._qfull(q), self._vfull(v, "v"), qfrc_bias, M_mj)
        return self.T(q).T @ (np.asarray(qfrc_bias, float) + np.asarray(M_mj, float) @ self._adot_v(q, v))


# ---- SpaceDyn / SPART -------------------------------------------------------------------------------
@dataclass
class SpaceDynState:
    """Base state in the SpaceDyn form: ``R0`` base CoM (inertial), ``A0`` base -> inertial rotation,
    ``v0`` base CoM velocity (inertial), ``w0`` base angular velocity (inertial), joints ``q``, ``qd``."""

    R0: np.ndarray
    A0: np.ndarray
    v0: np.ndarray
    w0: np.ndarray
    q: np.ndarray
    qd: np.ndarray


_SPACEDYN = "; the SpaceDyn base state applies to a free base only"


def to_spacedyn(robot: Robot, q: Any, v: Any) -> SpaceDynState:
    """soadyn ``(q, v)`` -> SpaceDyn state.  The base CoM is that of body 0 *after* fixed-joint merging."""
    require_free(robot, "to_spacedyn", _SPACEDYN)
    q = state_vector(q, robot.nq, "q", "to_spacedyn")
    v = state_vector(v, robot.nv, "v", "to_spacedyn")
    A0 = quaternion_to_matrix(q[3:7])
    c0 = np.asarray(robot.inertias[0].com, float)
    w, vo = v[:3], v[3:6]
    return SpaceDynState(R0=q[:3] + A0 @ c0, A0=A0, v0=A0 @ (vo + np.cross(w, c0)), w0=A0 @ w,
                         q=q[7:].copy(), qd=v[6:].copy())


def from_spacedyn(robot: Robot, s: SpaceDynState) -> tuple[np.ndarray, np.ndarray]:
    """SpaceDyn state -> soadyn ``(q, v)`` (quaternion with w >= 0)."""
    require_free(robot, "from_spacedyn", _SPACEDYN)
    A0 = np.asarray(s.A0, float)
    quat = matrix_to_quaternion(A0)
    c0 = np.asarray(robot.inertias[0].com, float)
    w = A0.T @ state_vector(s.w0, 3, "w0", "from_spacedyn")
    vo = A0.T @ state_vector(s.v0, 3, "v0", "from_spacedyn") - np.cross(w, c0)
    p = state_vector(s.R0, 3, "R0", "from_spacedyn") - A0 @ c0
    q = np.concatenate([p, quat, state_vector(s.q, robot.n_joints, "q", "from_spacedyn")])
    v = np.concatenate([w, vo, state_vector(s.qd, robot.n_joints, "qd", "from_spacedyn")])
    return q, v


def spacedyn_acceleration(robot: Robot, q: Any, v: Any, a: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """soadyn acceleration -> SpaceDyn ``(vd0, wd0, qdd)``: inertial derivatives of v0, w0.

    With body-axes ``w, v_o`` and ``a = d/dt [w; v_o]``: ``wd0 = A0 dw``,
    ``vd0 = A0 (dv_o + w x v_o + dw x c0 + w x (w x c0))``.
    """
    require_free(robot, "spacedyn_acceleration", _SPACEDYN)
    q, v, a = (state_vector(x, m, n, "spacedyn_acceleration") for n, x, m in
               (("q", q, robot.nq), ("v", v, robot.nv), ("a", a, robot.nv)))
    A0 = quaternion_to_matrix(q[3:7])
    c0 = np.asarray(robot.inertias[0].com, float)
    w, vo, dw, dvo = v[:3], v[3:6], a[:3], a[3:6]
    vd0 = A0 @ (dvo + np.cross(w, vo) + np.cross(dw, c0) + np.cross(w, np.cross(w, c0)))
    return vd0, A0 @ dw, a[6:].copy()
