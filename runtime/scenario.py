"""Capture scenarios: a campaign spec (YAML), its sampler, one capture run (approach, impact, post-impact).

A run follows seed 003's capture operation (thesis Fig. 4.1) from the start of the approach:

1. **Pre-impact momentum distribution** (thesis sec. 4.5.1, Fig. 4.8).  The target spins at
   ``spin_rate`` about ``spin_axis`` (target axes); the chaser plans its bias from the target's angular
   momentum ``L_t`` estimated with the *nominal* payload (the payload scale is unknown to it).  With the
   base at rest (``L_b = 0``) and ``f`` = ``bias_fraction``:

   ====  ====================================  =====================================================
   case  state at the approach start           approach (``contact_time`` s, RNSC eq. 5.5 on the chaser)
   ====  ====================================  =====================================================
   A     at rest (non-bias)                    reactionless: wheel torque 0, base kept still
   B     wheels hold ``-f L_t``, arm still     reactionless: the wheels keep their momentum
   C     wheels hold ``-f L_t``, arm still     bias momentum approach: wheels drained into the arm
   D     at rest                               bias momentum approach: wheels spun up, arm takes
                                               ``L_bm = -f L_t`` (thesis case S_A)
   ====  ====================================  =====================================================

   The transfer uses a constant wheel torque ``tau_r = H~_rr dqd_r / t_c`` (``dqd_r = H~_br^+ dL_r``,
   thesis eq. 4.5, 4.21) with RNSC (``K_b``, ``K_m`` of the spec's ``rnsc`` entry) keeping the base
   attitude still, as in the thesis's S_A simulation.  The approach's geometry is not planned: at
   ``contact_time`` the grasp fixture is where the hand is (the target is placed by the grasp transform).
2. **Impact** (:mod:`soadyn.runtime.impact`): the target's body rates at contact come from its torque-free
   motion (Euler's equations, RK4) over ``contact_time``; the grasp point closes on the hand at
   ``closing_speed`` along the hand's ``normal`` axis; a contact with restitution ``restitution``
   (``contact: normal`` = frictionless normal force, ``grasp`` = six directions) is followed by the latch.
3. **Post-impact**: the truth model is the chaser with the target attached (actual payload), controlled
   by DMC (eq. 5.6) or RNSC (eq. 5.5) computed on the chaser's own model (neither law uses the target's
   inertia, thesis sec. 5.2-5.3), wheel torque 0, for ``post_duration`` s.

Summary per run: see :data:`SUMMARY_FIELDS`.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from soadyn.model.rotations import matrix_to_quaternion, rpy_to_matrix
from soadyn.runtime.campaign_spec import (
    CASES,
    CONTROLLERS,
    DEFAULTS,
    EULER_DT,
    PARAMETERS,
    CampaignSpec,
    CampaignSpecError,
    Scenario,
    Setup,
    load_spec,
    scenario_seed,
    spec_from_dict,
)
from soadyn.runtime.integrate import rk4_vector
from soadyn.symbolic.frames import frame_pose

__all__ = [
    "CampaignSpecError",
    "Setup",
    "Scenario",
    "CampaignSpec",
    "load_spec",
    "spec_from_dict",
    "run_scenario",
    "SUMMARY_FIELDS",
    "CONTROLLERS",
    "CASES",
    "PARAMETERS",
    "DEFAULTS",
    "scenario_seed",
]

STRATEGY = {"A": "reactionless", "B": "reactionless", "C": "bias_momentum", "D": "bias_momentum"}

#: columns of the per-scenario summary (name -> Parquet type)
SUMMARY_FIELDS: dict[str, str] = {
    "id": "int64",
    "seed": "int64",
    "case": "string",
    "strategy": "string",
    "controller": "string",
    "spin_rate_deg_s": "float64",
    "spin_axis_x": "float64",
    "spin_axis_y": "float64",
    "spin_axis_z": "float64",
    "contact_time": "float64",
    "payload_scale": "float64",
    "target_mass": "float64",
    "restitution": "float64",
    "closing_speed": "float64",
    "bias_fraction": "float64",
    "status": "string",
    "error": "string",
    "L_target": "float64",
    "L_bm_contact": "float64",
    "bias_ratio": "float64",
    "contact_impulse": "float64",
    "latch_impulse_linear": "float64",
    "latch_impulse_angular": "float64",
    "impact_energy_loss": "float64",
    "impact_momentum_error": "float64",
    "capture_model_error": "float64",
    "peak_base_attitude_deg": "float64",
    "final_base_attitude_deg": "float64",
    "peak_base_rate_deg_s": "float64",
    "peak_wheel_momentum": "float64",
    "final_wheel_momentum": "float64",
    "peak_arm_rate": "float64",
    "peak_arm_torque": "float64",
    "post_momentum_drift": "float64",
    "steps": "int64",
    "compute_s": "float64",
}
#: fields that depend on the machine's speed, not on the scenario (left out of identity checks)
TIMING_FIELDS = ("compute_s",)


# ---- one run -------------------------------------------------------------------------------------
def _euler_rates(I: np.ndarray, w: np.ndarray, duration: float, dt: float) -> np.ndarray:
    """Torque-free body rates after ``duration``: ``I dw/dt = -w x I w`` (Euler's equations, body axes),
    integrated with the one RK4 of :mod:`soadyn.runtime.integrate` (no configuration: the rates are the
    state)."""
    Iinv = np.linalg.inv(I)
    return rk4_vector(lambda t, x: -Iinv @ np.cross(x, I @ x), w, duration, dt)


def _attitude_angle(q0: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """Rotation angle [rad] between the base attitude ``q0`` and each row of ``Q`` (quaternions x,y,z,w)."""
    d = np.abs(Q @ q0) / (np.linalg.norm(Q, axis=1) * np.linalg.norm(q0))
    return 2.0 * np.arccos(np.clip(d, -1.0, 1.0))


def _empty_row(sc: Scenario) -> dict[str, Any]:
    row: dict[str, Any] = {k: (np.nan if t == "float64" else None) for k, t in SUMMARY_FIELDS.items()}
    p = sc.params()
    ax = p.pop("spin_axis")
    row.update(p)
    row.update(
        spin_axis_x=ax[0],
        spin_axis_y=ax[1],
        spin_axis_z=ax[2],
        strategy=STRATEGY[sc.case],
        target_mass=sc.setup.target_mass * sc.payload_scale,
        steps=0,
        error="",
    )
    return row


def run_scenario(sc: Scenario, chaser: Any, truth: Any, robot: Any) -> tuple[dict[str, Any], dict | None]:
    """Run one capture (see the module docstring) with the compiled ``chaser`` module, the ``truth`` module
    (chaser + target at ``sc.payload_scale``) and the chaser ``Robot`` (for the hand pose).  Returns the
    summary row and, when the setup asks for trajectories, a dict of arrays.  Failures (divergence, singular
    matrices, bad numbers) are recorded in the row (``status`` = ``failed``, ``error``), never raised."""
    t0 = time.perf_counter()
    row = _empty_row(sc)
    try:
        with np.errstate(all="ignore"):
            traj = _capture(sc, chaser, truth, robot, row)
        row["status"] = "ok"
    except (ArithmeticError, ValueError, RuntimeError, np.linalg.LinAlgError) as e:
        row["status"] = "failed"
        row["error"] = f"{type(e).__name__}: {e}"[:500]
        traj = None
    row["compute_s"] = time.perf_counter() - t0
    return row, traj


def _capture(sc: Scenario, chaser: Any, truth: Any, robot: Any, row: dict[str, Any]) -> dict | None:
    from soadyn.runtime.control import (
        DistributedMomentumControl,
        ReactionNullSpaceControl,
        partial_momenta,
        state,
    )
    from soadyn.runtime.impact import RigidBody, capture, pair_momentum
    from soadyn.runtime.simulate import SimulationError, simulate

    S = sc.setup
    wheels = list(S.wheels)
    rw = np.array([chaser.joint_names.index(w) for w in wheels], dtype=int)
    arm = np.setdiff1d(np.arange(chaser.nv - 6), rw)
    q0 = np.array(S.q0)
    I_nom = np.array(S.target_inertia).reshape(3, 3)
    Rg = rpy_to_matrix(S.grasp_rpy)
    w_body0 = math.radians(sc.spin_rate_deg_s) * np.array(sc.spin_axis)

    # 1. momentum distribution at the approach start (base at rest, P = 0), thesis Fig. 4.8
    R_h0, _ = frame_pose(robot, q0, S.hand)
    L_t_est = (R_h0 @ Rg) @ I_nom @ w_body0  # inertial axes, nominal payload
    st0 = state(chaser, q0, np.zeros(chaser.nv))
    Lb = st0.R0.T @ L_t_est
    f = sc.bias_fraction
    Hbr, Hrr = st0.Hc[:, rw], st0.Hp[np.ix_(rw, rw)]
    qd_r0 = np.zeros(len(rw))
    qd_r_end = np.zeros(len(rw))
    if len(rw):
        if sc.case in ("B", "C"):
            qd_r0 = np.linalg.lstsq(Hbr, -f * Lb, rcond=None)[0]
        qd_r_end = {
            "A": qd_r0,
            "B": qd_r0,
            "C": np.zeros(len(rw)),
            "D": np.linalg.lstsq(Hbr, f * Lb, rcond=None)[0],
        }[sc.case]
    elif sc.case != "A":
        raise ValueError(f"case {sc.case} needs reaction wheels (spec field 'wheels')")
    v0 = np.zeros(chaser.nv)
    v0[6 + rw] = qd_r0
    M0 = st0.M
    v0[3:6] = -np.linalg.solve(M0[3:6, 3:6], M0[3:6, 6:] @ v0[6:])  # zero linear momentum

    g = S.gains["rnsc"]
    T_c = sc.contact_time
    if T_c > 0:
        tau_r = Hrr @ (qd_r_end - qd_r0) / T_c if len(rw) else None
        ctrl = ReactionNullSpaceControl(chaser, wheels, tau_r=tau_r, K_b=g["K_b"], K_m=g["K_m"])
        try:
            app = simulate(chaser, q0, v0, T_c, torques=ctrl, dt=S.approach_dt, progress=False)
        except (SimulationError, ArithmeticError, ValueError) as e:
            raise RuntimeError(f"approach diverged ({type(e).__name__}: {e})") from None
        qc, vc = app.q[-1].copy(), app.v[-1].copy()
    else:
        app = None
        qc, vc = q0, v0

    # 2. impact: target placed by the grasp, rates from its torque-free motion
    R_h, p_h = frame_pose(robot, qc, S.hand)
    R_t = R_h @ Rg
    c_t = p_h + R_h @ np.array(S.grasp_xyz)
    w_body = _euler_rates(I_nom, w_body0, T_c, EULER_DT)
    w_t = R_t @ w_body
    J = np.asarray(chaser.jacobian(qc, S.hand, world_aligned=True), float)
    n_w = R_h @ np.array(S.normal)
    v_point = (J @ vc)[3:] - sc.closing_speed * n_w
    scale = sc.payload_scale
    target = RigidBody(
        S.target_mass * scale, I_nom * scale, c_t, matrix_to_quaternion(R_t), w_t,
        v_point + np.cross(w_t, c_t - p_h),
    )
    L_t = target.inertia_world() @ w_t
    pm = partial_momenta(chaser, qc, vc, wheels)
    row["L_target"] = float(np.linalg.norm(L_t))
    row["L_bm_contact"] = float(np.linalg.norm(pm["manipulator"]))
    row["bias_ratio"] = float(-pm["manipulator"] @ L_t / max(L_t @ L_t, 1e-300))
    D = None if S.contact == "grasp" else np.concatenate([np.zeros(3), n_w])
    first, latch = capture(chaser, qc, vc, S.hand, target, p_h, sc.restitution, D)
    h_before = pair_momentum(chaser, qc, vc, target)
    h_after = pair_momentum(chaser, qc, latch.v, latch.target)
    scale_h = max(float(np.max(np.abs(h_before))), 1e-12)
    row["contact_impulse"] = float(np.linalg.norm(first.impulse))
    row["latch_impulse_linear"] = float(np.linalg.norm(latch.impulse[3:]))
    row["latch_impulse_angular"] = float(np.linalg.norm(latch.impulse[:3]))
    row["impact_energy_loss"] = first.energy_before - latch.energy_after
    row["impact_momentum_error"] = float(np.max(np.abs(h_after - h_before))) / scale_h
    ht = np.asarray(truth.momentum(qc, latch.v), float)
    ct = np.asarray(truth.center_of_mass(qc), float)
    ht_o = np.concatenate([ht[:3] + np.cross(ct, ht[3:]), ht[3:]])
    row["capture_model_error"] = float(np.max(np.abs(ht_o - h_after))) / scale_h

    # 3. post-impact: truth = chaser + target, control on the chaser's model
    if sc.controller == "dmc":
        ctrl = DistributedMomentumControl(chaser, wheels, K_v=S.gains["dmc"]["K_v"])
    else:
        ctrl = ReactionNullSpaceControl(chaser, wheels, K_b=g["K_b"], K_m=g["K_m"])
    try:
        post = simulate(truth, qc, latch.v, S.post_duration, torques=ctrl, dt=S.post_dt, progress=False)
    except (SimulationError, ArithmeticError, ValueError) as e:   # NaN/inf states end in math errors
        raise RuntimeError(f"post-impact diverged ({type(e).__name__}: {e})") from None
    quat0 = q0[3:7]
    ang_post = _attitude_angle(quat0, post.q[:, 3:7])
    row["peak_base_attitude_deg"] = float(np.degrees(ang_post.max()))
    row["final_base_attitude_deg"] = float(np.degrees(ang_post[-1]))
    row["peak_base_rate_deg_s"] = float(np.degrees(np.max(np.linalg.norm(post.v[:, :3], axis=1))))
    k = max(1, len(post.t) // 10)
    samples = list(range(0, len(post.t), k)) + [len(post.t) - 1]
    Lw = [np.linalg.norm(partial_momenta(chaser, post.q[i], post.v[i], wheels)["wheels"]) for i in samples]
    row["peak_wheel_momentum"] = float(max(Lw))
    row["final_wheel_momentum"] = float(Lw[-1])
    row["peak_arm_rate"] = float(np.max(np.abs(post.v[:, 6 + arm])))
    row["peak_arm_torque"] = float(np.max(np.abs(post.tau[:, 6 + arm])))
    row["post_momentum_drift"] = float(np.max(post.momentum_drift())) / max(float(np.max(np.abs(ht))), 1e-12)
    row["steps"] = int((len(app.t) - 1 if app is not None else 0) + len(post.t) - 1)
    if not np.isfinite(row["peak_base_attitude_deg"]):
        raise RuntimeError("post-impact state is not finite")
    if not S.trajectories:
        return None
    parts = [app, post] if app is not None else [post]
    t = np.concatenate([p.t + (0 if p is app else T_c) for p in parts])
    return {
        "t": t,
        "q": np.concatenate([p.q for p in parts]),
        "v": np.concatenate([p.v for p in parts]),
        "tau": np.concatenate([p.tau for p in parts]),
        "phase": np.concatenate([np.full(len(p.t), 0 if p is app else 1, dtype=np.int8) for p in parts]),
        "base_attitude_deg": np.degrees(_attitude_angle(quat0, np.concatenate([p.q[:, 3:7] for p in parts]))),
    }
