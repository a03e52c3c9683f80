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

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.rotations import matrix_to_quaternion, rpy_to_matrix

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
    "scenario_seed",
]

CONTROLLERS = ("dmc", "rnsc")
CASES = ("A", "B", "C", "D")
STRATEGY = {"A": "reactionless", "B": "reactionless", "C": "bias_momentum", "D": "bias_momentum"}
CONTACTS = ("normal", "grasp")
#: sampled parameters: name -> (kind, allowed); kind "float" (number or distribution), "axis", "choice"
PARAMETERS = {
    "spin_rate_deg_s": "float",
    "spin_axis": "axis",
    "contact_time": "float",
    "payload_scale": "level",
    "restitution": "float",
    "closing_speed": "float",
    "bias_fraction": "float",
    "case": "case",
    "controller": "controller",
}
DEFAULTS = {
    "spin_rate_deg_s": 1.0,
    "spin_axis": [0.0, 0.0, 1.0],
    "contact_time": 1.0,
    "payload_scale": 1.0,
    "restitution": 0.0,
    "closing_speed": 0.0,
    "bias_fraction": 1.0,
    "case": "D",
    "controller": "dmc",
}

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


class CampaignSpecError(ValueError):
    """A campaign spec is invalid; the message is one line naming the file, the field and the fix."""


# ---- spec ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setup:
    """What every scenario of a campaign shares (plain data: pickles to workers)."""

    robot: str  # absolute path of the robot file
    hand: str
    wheels: tuple[str, ...]
    q0: tuple[float, ...]  # chaser configuration at the approach start
    target_mass: float
    target_inertia: tuple[float, ...]  # 9 entries, about the CoM, target axes
    grasp_xyz: tuple[float, ...]
    grasp_rpy: tuple[float, ...]
    contact: str
    normal: tuple[float, ...]  # hand axes, from the hand towards the target
    approach_dt: float
    post_duration: float
    post_dt: float
    gains: dict = field(default_factory=dict)  # controller -> {gain: value}
    trajectories: bool = False


@dataclass(frozen=True)
class Scenario:
    """One run: the shared setup and the sampled parameters; ``seed`` regenerates the parameters."""

    setup: Setup
    id: int
    seed: int
    case: str = "D"
    controller: str = "dmc"
    spin_rate_deg_s: float = 1.0
    spin_axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    contact_time: float = 1.0
    payload_scale: float = 1.0
    restitution: float = 0.0
    closing_speed: float = 0.0
    bias_fraction: float = 1.0

    def params(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("setup")
        return d


def scenario_seed(campaign_seed: int, index: int) -> int:
    """The recorded seed of scenario ``index``: 63 bits from ``SeedSequence([campaign_seed, index])``."""
    s = np.random.SeedSequence([int(campaign_seed), int(index)]).generate_state(2, np.uint32)
    return int((int(s[0]) << 31) ^ int(s[1])) & ((1 << 63) - 1)


@dataclass
class CampaignSpec:
    """A parsed, validated campaign spec: the setup, the distributions, ``n`` and the campaign ``seed``."""

    name: str
    setup: Setup
    distributions: dict[str, Any]
    n: int
    seed: int
    source: str = "<dict>"
    raw: dict = field(default_factory=dict)

    def scenario(self, index: int) -> Scenario:
        """Scenario ``index`` (0-based); the same index always gives the same scenario."""
        seed = scenario_seed(self.seed, index)
        return self.scenario_from_seed(index, seed)

    def scenario_from_seed(self, index: int, seed: int) -> Scenario:
        rng = np.random.default_rng(seed)
        vals: dict[str, Any] = {}
        for name in PARAMETERS:  # fixed order: the stream is reproducible
            vals[name] = _draw(self.distributions[name], rng)
        ax = np.asarray(vals["spin_axis"], float)
        vals["spin_axis"] = tuple(float(x) for x in ax / np.linalg.norm(ax))
        return Scenario(self.setup, int(index), int(seed), **{k: _plain(v) for k, v in vals.items()})

    def payload_levels(self) -> list[float]:
        d = self.distributions["payload_scale"]
        return [float(x) for x in (d["choice"] if isinstance(d, dict) else [d])]

    def identity(self) -> str:
        """Hash of what decides the scenarios (spec content and robot file bytes)."""
        h = hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode())
        h.update(Path(self.setup.robot).read_bytes())
        return h.hexdigest()[:16]


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def _draw(dist: Any, rng: np.random.Generator) -> Any:
    if isinstance(dist, dict):
        ((kind, arg),) = dist.items()
        if kind == "uniform":
            return float(rng.uniform(arg[0], arg[1]))
        if kind == "normal":
            return float(rng.normal(arg[0], arg[1]))
        if kind == "choice":
            return arg[int(rng.integers(len(arg)))]
        if kind == "sphere":
            x = rng.normal(size=3)
            return tuple(float(a) for a in x / np.linalg.norm(x))
    return dist


def load_spec(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign spec file (YAML); raises :class:`CampaignSpecError` (one line)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise CampaignSpecError(
            f"{path}: campaign spec not found; give the path of a YAML spec "
            "(see examples/campaigns/capture.yaml)"
        )
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        where = f" (line {line + 1})" if line is not None else ""
        raise CampaignSpecError(f"{path}: not valid YAML{where}; fix the syntax") from None
    return spec_from_dict(doc, base_dir=path.parent, source=str(path))


def spec_from_dict(doc: Any, base_dir: str | Path = ".", source: str = "<dict>") -> CampaignSpec:
    """Validate a spec given as a dict (the YAML content); relative robot paths resolve from ``base_dir``."""
    from soadyn.model.robotfile import RobotFileError
    from soadyn.symbolic.checks import load_robot

    def fail(fld: str, msg: str) -> CampaignSpecError:
        return CampaignSpecError(f"{source}: field '{fld}': {msg}")

    if not isinstance(doc, dict):
        raise CampaignSpecError(f"{source}: the spec must be a mapping of fields (name, robot, hand, ...)")
    known = {
        "name",
        "robot",
        "hand",
        "wheels",
        "arm_deg",
        "target",
        "impact",
        "approach",
        "post_impact",
        "controllers",
        "sample",
        "n",
        "seed",
        "outputs",
    }
    for k in doc:
        if k not in known:
            raise fail(str(k), f"unknown field; valid fields: {sorted(known)}")
    for k in ("robot", "hand", "target"):
        if k not in doc:
            raise fail(k, "missing; it is required")
    robot_path = Path(base_dir) / str(doc["robot"])
    if not robot_path.is_file():
        raise fail(
            "robot",
            f"file '{doc['robot']}' not found (paths are relative to the spec's folder "
            f"{Path(base_dir).resolve()}); give an existing robot file",
        )
    try:
        robot = load_robot(robot_path)
    except RobotFileError as e:
        raise fail("robot", f"cannot load the robot file: {e}") from None
    if not robot.is_free:
        raise fail("robot", f"robot {robot.name!r} has a fixed base; capture needs a free-floating chaser")
    hand = str(doc["hand"])
    if hand not in robot.body_names and hand not in robot.frame_names:
        raise fail(
            "hand",
            f"{hand!r} is not a body or frame of {robot.name}; frames: {robot.frame_names}, "
            f"bodies: {robot.body_names}",
        )
    wheels = doc.get("wheels", [])
    if not isinstance(wheels, list) or any(w not in robot.joint_names for w in wheels):
        raise fail("wheels", f"must be a list of joint names of {robot.name}: {robot.joint_names}")
    arm = [j for j in robot.joint_names if j not in wheels]
    q0 = robot.neutral()
    if "arm_deg" in doc:
        a = _numbers(doc["arm_deg"], len(arm), "arm_deg", fail, f"one per arm joint {arm}")
        q0[7 + np.array([robot.joint_names.index(j) for j in arm])] = np.radians(a)

    tg = doc["target"]
    if not isinstance(tg, dict):
        raise fail("target", "must be a mapping with mass, inertia, grasp_xyz (and grasp_rpy)")
    for k in tg:
        if k not in ("mass", "inertia", "grasp_xyz", "grasp_rpy"):
            raise fail(f"target.{k}", "unknown field; valid: mass, inertia, grasp_xyz, grasp_rpy")
    mass = _positive(tg.get("mass"), "target.mass", fail)
    inertia = np.asarray(tg.get("inertia", []), dtype=float) if _is_numeric(tg.get("inertia")) else None
    if inertia is None or inertia.shape not in ((3,), (3, 3)):
        raise fail("target.inertia", "must be 3 principal moments or a 3x3 matrix [kg m^2]")
    I = np.diag(inertia) if inertia.shape == (3,) else inertia
    if not np.allclose(I, I.T) or np.any(np.linalg.eigvalsh(0.5 * (I + I.T)) <= 0):
        raise fail("target.inertia", "must be symmetric positive definite")
    gx = _numbers(tg.get("grasp_xyz"), 3, "target.grasp_xyz", fail, "target CoM in the hand frame [m]")
    gr = _numbers(tg.get("grasp_rpy", [0, 0, 0]), 3, "target.grasp_rpy", fail, "roll, pitch, yaw [rad]")

    imp = doc.get("impact", {}) or {}
    contact = str(imp.get("contact", "normal"))
    if contact not in CONTACTS:
        raise fail("impact.contact", f"unknown contact {contact!r}; valid: {list(CONTACTS)}")
    normal = _numbers(imp.get("normal", [0, 0, 1]), 3, "impact.normal", fail, "a direction in hand axes")
    if np.linalg.norm(normal) == 0:
        raise fail("impact.normal", "must be a non-zero direction")
    normal = normal / np.linalg.norm(normal)
    ap = doc.get("approach", {}) or {}
    post = doc.get("post_impact", {}) or {}
    approach_dt = _positive(ap.get("dt", 0.02), "approach.dt", fail)
    post_duration = _positive(post.get("duration", 2.0), "post_impact.duration", fail)
    post_dt = _positive(post.get("dt", 0.02), "post_impact.dt", fail)

    gains = {"dmc": {"K_v": 20.0}, "rnsc": {"K_b": 25.0, "K_m": 10.0}}
    ctrl = doc.get("controllers", {}) or {}
    if not isinstance(ctrl, dict):
        raise fail("controllers", "must map controller names (dmc, rnsc) to gains")
    for name, g in ctrl.items():
        if name not in CONTROLLERS:
            raise fail(f"controllers.{name}", f"unknown controller {name!r}; valid: {list(CONTROLLERS)}")
        for gk, gv in (g or {}).items():
            if gk not in gains[name]:
                raise fail(f"controllers.{name}.{gk}", f"unknown gain; valid: {sorted(gains[name])}")
            gains[name][gk] = _positive(gv, f"controllers.{name}.{gk}", fail)

    sample = doc.get("sample", {}) or {}
    if not isinstance(sample, dict):
        raise fail("sample", "must map parameter names to values or distributions")
    dists: dict[str, Any] = {}
    for k in sample:
        if k not in PARAMETERS:
            raise fail(f"sample.{k}", f"unknown parameter; valid: {list(PARAMETERS)}")
    for name, kind in PARAMETERS.items():
        dists[name] = _distribution(sample.get(name, DEFAULTS[name]), kind, f"sample.{name}", fail)

    n = doc.get("n", 100)
    seed = doc.get("seed", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise fail("n", f"must be a positive integer (number of scenarios), got {n!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise fail("seed", f"must be a non-negative integer, got {seed!r}")
    outputs = doc.get("outputs", {}) or {}
    for k in outputs:
        if k != "trajectories":
            raise fail(f"outputs.{k}", "unknown output; valid: trajectories (true/false)")
    setup = Setup(
        str(robot_path.resolve()),
        hand,
        tuple(wheels),
        tuple(float(x) for x in q0),
        float(mass),
        tuple(float(x) for x in I.ravel()),
        tuple(gx),
        tuple(gr),
        contact,
        tuple(normal),
        float(approach_dt),
        float(post_duration),
        float(post_dt),
        gains,
        bool(outputs.get("trajectories", False)),
    )
    raw = dict(doc)
    raw["robot"] = str(robot_path.resolve())
    return CampaignSpec(str(doc.get("name", Path(source).stem)), setup, dists, int(n), int(seed), source, raw)


def _is_numeric(x: Any) -> bool:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        return False
    return bool(np.all(np.isfinite(a)))


def _numbers(x: Any, n: int, fld: str, fail: Any, what: str) -> np.ndarray:
    if not _is_numeric(x) or np.asarray(x, float).shape != (n,):
        shape = np.asarray(x, dtype=object).shape if x is not None else "missing"
        raise fail(fld, f"must be {n} finite numbers ({what}), got shape {shape}")
    return np.asarray(x, float)


def _positive(x: Any, fld: str, fail: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise fail(fld, f"must be a positive number, got {x!r}")
    return float(x)


def _distribution(d: Any, kind: str, fld: str, fail: Any) -> Any:
    """Check a parameter value or distribution: a constant, {uniform: [a, b]}, {normal: [mu, sigma]},
    {choice: [...]}, or (axes) ``sphere`` / {sphere: true}."""
    valid = {"case": CASES, "controller": CONTROLLERS}.get(kind)
    if kind == "axis":
        if d == "sphere" or d == {"sphere": True}:
            return {"sphere": True}
        if isinstance(d, dict) and set(d) == {"choice"}:
            for a in d["choice"]:
                _numbers(a, 3, fld, fail, "an axis")
            return {"choice": [list(map(float, a)) for a in d["choice"]]}
        a = _numbers(d, 3, fld, fail, "an axis, or 'sphere' for uniform directions")
        if np.linalg.norm(a) == 0:
            raise fail(fld, "the axis must be non-zero")
        return [float(x) for x in a]
    if isinstance(d, dict):
        if len(d) != 1:
            raise fail(fld, "a distribution has one key: uniform, normal or choice")
        ((k, arg),) = d.items()
        if k == "choice":
            if not isinstance(arg, list) or not arg:
                raise fail(fld, "choice needs a non-empty list")
            return {"choice": [_constant(a, kind, valid, fld, fail) for a in arg]}
        if kind in ("case", "controller", "level"):
            raise fail(fld, f"{kind} values are drawn with {{choice: [...]}}, not {k}")
        if k in ("uniform", "normal"):
            if not _is_numeric(arg) or np.asarray(arg, float).shape != (2,):
                raise fail(fld, f"{k} needs two numbers [{'low, high' if k == 'uniform' else 'mean, std'}]")
            a, b = (float(x) for x in arg)
            if (k == "uniform" and b < a) or (k == "normal" and b < 0):
                raise fail(fld, f"{k} bounds out of order: {arg}")
            return {k: [a, b]}
        raise fail(fld, f"unknown distribution {k!r}; valid: uniform, normal, choice")
    return _constant(d, kind, valid, fld, fail)


def _constant(x: Any, kind: str, valid: tuple[str, ...] | None, fld: str, fail: Any) -> Any:
    if valid is not None:
        if x not in valid:
            raise fail(fld, f"unknown {kind} {x!r}; valid: {list(valid)}")
        return str(x)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise fail(fld, f"must be a number, got {x!r}")
    if kind == "level" and x <= 0:
        raise fail(fld, f"payload scale must be positive, got {x}")
    return float(x)


# ---- one run -------------------------------------------------------------------------------------
def _euler_rk4(I: np.ndarray, w: np.ndarray, duration: float, dt: float) -> np.ndarray:
    """Torque-free body rates: ``I dw/dt = -w x I w`` (Euler's equations, body axes), RK4."""
    if duration <= 0:
        return w
    Iinv = np.linalg.inv(I)
    f = lambda x: -Iinv @ np.cross(x, I @ x)  # noqa: E731
    n = max(1, int(math.ceil(duration / dt)))
    h = duration / n
    for _ in range(n):
        k1 = f(w)
        k2 = f(w + 0.5 * h * k1)
        k3 = f(w + 0.5 * h * k2)
        k4 = f(w + h * k3)
        w = w + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return w


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
    from soadyn.reference.dense import frame_pose
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
    w_body = _euler_rk4(I_nom, w_body0, T_c, 0.01)
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
