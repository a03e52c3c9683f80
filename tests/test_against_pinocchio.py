"""The dense reference path against Pinocchio on the Panda and UR5 URDFs (free and fixed base).

100 random states per robot and base; every quantity is converted with ``PinocchioMap`` and must
agree to 1e-9 relative (max abs difference / max abs of Pinocchio's value).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import pinocchio_pair, record, rel_err

from soadyn.model.conventions import PinocchioMap
from soadyn.reference import dense as ref

pin = pytest.importorskip("pinocchio")

N_STATES = 100
TOL = 1e-9
GRAVITY = np.array([0.7, -1.3, -9.81])
FRAMES = {"panda": ["panda_hand_tcp", "panda_link4", "panda_leftfinger"], "ur5": ["tool0", "forearm_link"]}


def _setup(name: str, base: str):
    robot, model = pinocchio_pair(name, base, GRAVITY)
    return robot, model, model.createData(), PinocchioMap(robot, model)


def _sym(A: np.ndarray) -> np.ndarray:
    """Pinocchio fills only the upper triangle of M and M^-1."""
    return np.triu(A) + np.triu(A, 1).T


@pytest.mark.parametrize("base", ["free", "fixed"])
@pytest.mark.parametrize("name", ["panda", "ur5"])
def test_dynamics_match_pinocchio(name: str, base: str) -> None:
    robot, model, data, pm = _setup(name, base)
    src = f"pinocchio {name}/{base}"
    rng = np.random.default_rng(7 if base == "free" else 8)
    frame_ids = {f: model.getFrameId(f) for f in FRAMES[name]}
    for fid in frame_ids.values():
        assert fid < model.nframes
    worst: dict[str, float] = {}

    def check(qty: str, ours, theirs) -> None:
        e = rel_err(ours, theirs)
        worst[qty] = max(worst.get(qty, 0.0), e)
        record(src, qty, e)

    for _ in range(N_STATES):
        q = robot.random_configuration(rng)
        v, a = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        f_ext = rng.normal(size=(robot.n_bodies, 6))
        qp, vp, ap = pm.q_to_pin(q), pm.v_to_pin(v), pm.v_to_pin(a)
        fp = pm.fext_to_pin(f_ext)

        check("M (crba)", ref.mass_matrix(robot, q), pm.matrix_from_pin(_sym(pin.crba(model, data, qp))))
        check("C+g (nonLinearEffects)", ref.bias_forces(robot, q, v),
              pm.tau_from_pin(pin.nonLinearEffects(model, data, qp, vp)))
        tau = ref.inverse_dynamics(robot, q, v, a, f_ext)
        check("ID (rnea, fext)", tau, pm.tau_from_pin(pin.rnea(model, data, qp, vp, ap, fp)))
        tau2 = rng.normal(size=robot.nv) * 10
        check("FD (aba, fext)", ref.forward_dynamics(robot, q, v, tau2, f_ext),
              pm.a_from_pin(pin.aba(model, data, qp, vp, pm.tau_to_pin(tau2), fp)))
        check("M^-1 (computeMinverse)", ref.mass_matrix_inverse(robot, q),
              pm.matrix_from_pin(_sym(pin.computeMinverse(model, data, qp))))
        for f, fid in frame_ids.items():
            for rf, wa in ((pin.ReferenceFrame.LOCAL, False), (pin.ReferenceFrame.LOCAL_WORLD_ALIGNED, True)):
                Jp = pin.computeFrameJacobian(model, data, qp, fid, rf)
                check(f"J {'LWA' if wa else 'LOCAL'}", ref.jacobian(robot, q, f, world_aligned=wa),
                      pm.jacobian_from_pin(Jp))
        h_pin = pm.momentum_from_pin(pin.computeCentroidalMomentum(model, data, qp, vp).vector)
        c_pin = pin.centerOfMass(model, data, qp)
        if base == "fixed":
            # Pinocchio leaves the universe body (links welded to the ground) out of the CoM and the
            # centroidal momentum; ours includes the (motionless) base.  Add it back.
            m0, c0, m = model.inertias[0].mass, model.inertias[0].lever, data.mass[0]
            c_all = (m * c_pin + m0 * c0) / (m + m0)
            h_pin[:3] += np.cross(c_pin - c_all, h_pin[3:])
            c_pin = c_all
        check("centroidal momentum", ref.momentum(robot, q, v), h_pin)
        check("CoM", ref.center_of_mass(robot, q), c_pin)
        check("kinetic energy", ref.kinetic_energy(robot, q, v),
              pin.computeKineticEnergy(model, data, qp, vp))

    bad = {k: e for k, e in worst.items() if not e <= TOL}
    assert not bad, f"{src}: worst relative errors above {TOL}: {bad}"
