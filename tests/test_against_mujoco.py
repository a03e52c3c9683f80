"""The dense reference path against MuJoCo on the UR5 URDF (fixed base, and free base with a
<freejoint/> added to the root body).

MuJoCo reads the URDF itself (meshes stripped, static bodies not fused; for the free base a free
joint is added to the root link through ``MjSpec``); constraints, contacts,
armature and damping are off.  M from mj_fullM, C from qfrc_bias, ID from mj_inverse, FD from
mj_forward with qfrc_applied and xfrc_applied.  MuJoCo's free-joint qvel is [world linear, local
angular] and its quaternion [w, x, y, z]; ``MujocoMap`` converts.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import load_urdf, record, rel_err, with_gravity

from soadyn.model.conventions import MujocoMap
from soadyn.model.rotations import skew
from soadyn.reference import dense as ref

mujoco = pytest.importorskip("mujoco")

N_STATES = 100
TOL = 1e-9
GRAVITY = np.array([0.7, -1.3, -9.81])


def _mj_model(urdf, base: str):
    text = urdf.read_text()
    text = re.sub(r"<visual>.*?</visual>|<collision>.*?</collision>", "", text, flags=re.S)
    opts = '<mujoco><compiler fusestatic="false" discardvisual="true"/></mujoco>'
    text = re.sub(r"(<robot[^>]*>)", r"\1" + opts, text, count=1)
    spec = mujoco.MjSpec.from_string(text)
    if base == "free":  # a free joint on the root link (edited in the spec: no XML round trip)
        spec.body("base_link").add_freejoint(name="root")
    m = spec.compile()
    m.opt.gravity[:] = GRAVITY
    dis = mujoco.mjtDisableBit
    m.opt.disableflags |= int(dis.mjDSBL_CONSTRAINT) | int(dis.mjDSBL_CONTACT)
    m.dof_armature[:] = 0.0
    m.dof_damping[:] = 0.0
    m.dof_frictionloss[:] = 0.0
    return m


def _spatial_inertia_mj(m, b: int) -> np.ndarray:
    """Spatial inertia of MuJoCo body b about its frame origin, body axes, angular first."""
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, m.body_iquat[b])
    R = R.reshape(3, 3)
    Ic = R @ np.diag(m.body_inertia[b]) @ R.T
    c, mass = m.body_ipos[b], m.body_mass[b]
    cx = skew(c)
    return np.block([[Ic - mass * cx @ cx, mass * cx], [-mass * cx, mass * np.eye(3)]])


@pytest.mark.parametrize("base", ["fixed", "free"])
def test_ur5_matches_mujoco(ur5_urdf, base: str) -> None:
    robot = with_gravity(load_urdf(ur5_urdf, base), GRAVITY)
    m = _mj_model(ur5_urdf, base)
    d = mujoco.MjData(m)
    mm = MujocoMap(robot, m)
    src = f"mujoco ur5/{base}"
    body_ids = [mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, n) for n in robot.body_names]
    if base == "free":
        body_ids[0] = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, "base_link")

    # precondition: MuJoCo's URDF import kept the inertias (root excluded for the fixed base)
    for k in range(0 if base == "free" else 1, robot.n_bodies):
        assert body_ids[k] >= 0, f"MuJoCo model has no body {robot.body_names[k]!r}"
        e = rel_err(robot.inertias[k].spatial(), _spatial_inertia_mj(m, body_ids[k]))
        assert e < 1e-12, f"MuJoCo altered the inertia of {robot.body_names[k]!r} (rel. diff {e:.1e})"

    rng = np.random.default_rng(11)
    worst: dict[str, float] = {}

    def check(qty: str, ours, theirs) -> None:
        e = rel_err(ours, theirs)
        worst[qty] = max(worst.get(qty, 0.0), e)
        record(src, qty, e)

    Mfull = np.zeros((m.nv, m.nv))
    for _ in range(N_STATES):
        q = robot.random_configuration(rng)
        v, a = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        d.qpos[:] = mm.q_to_mj(q)
        d.qvel[:] = mm.v_to_mj(q, v)
        d.qfrc_applied[:] = 0.0
        d.xfrc_applied[:] = 0.0
        mujoco.mj_forward(m, d)
        mujoco.mj_fullM(m, d, Mfull)
        check("M (mj_fullM)", ref.mass_matrix(robot, q), mm.mass_matrix_from_mj(q, Mfull))
        check("C+g (qfrc_bias)", ref.bias_forces(robot, q, v), mm.bias_from_mj(q, v, d.qfrc_bias, Mfull))

        d.qacc[:] = mm.a_to_mj(q, v, a)
        mujoco.mj_inverse(m, d)
        check("ID (mj_inverse)", ref.inverse_dynamics(robot, q, v, a), mm.tau_from_mj(q, d.qfrc_inverse))

        # forward dynamics with joint forces and external wrenches (xfrc: world [force; torque] at CoM)
        tau = 10 * rng.normal(size=robot.nv)
        f_ext = rng.normal(size=(robot.n_bodies, 6))
        if base == "fixed":
            f_ext[0] = 0.0  # MuJoCo's world body takes no applied force
        d.qfrc_applied[:] = mm.tau_to_mj(q, tau)
        Rb, _ = ref.body_poses(robot, q)
        for k, b in enumerate(body_ids):
            if b <= 0:
                continue
            n_o, f = f_ext[k, :3], f_ext[k, 3:]
            n_c = n_o - np.cross(robot.inertias[k].com, f)
            d.xfrc_applied[b] = np.concatenate([Rb[k] @ f, Rb[k] @ n_c])
        mujoco.mj_forward(m, d)
        check("FD (mj_forward, xfrc)", ref.forward_dynamics(robot, q, v, tau, f_ext),
              mm.a_from_mj(q, v, d.qacc))

    bad = {k: e for k, e in worst.items() if not e <= TOL}
    assert not bad, f"{src}: worst relative errors above {TOL}: {bad}"
