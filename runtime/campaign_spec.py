"""A campaign spec (YAML) -> :class:`CampaignSpec`: one schema, checked before anything is compiled.

A spec is data from anywhere, read like a robot file (:mod:`soadyn.model.safe_yaml`: the same size, depth
and alias limits, YAML 1.2 core types, duplicate keys refused), then checked in two stages, each stopping at
the first problem with one :class:`CampaignSpecError` line ``<file>: field '<path>': <problem and fix>``:

1. **structure** against :data:`SCHEMA` (JSON schema, Draft 2020-12): unknown keys at every level are
   errors naming the nearest valid key, types are exact (``trajectories: "no"`` is a string, not a boolean);
2. **meaning**: every number finite and of sane magnitude, the physical ranges of :data:`RANGES`
   (restitution in [0, 1], contact time > 0, ...), a target inertia that is a rigid body's (positive
   definite, triangle inequality: :func:`soadyn.model.robotfile.inertia_problem`), non-zero axes, wheels
   that are distinct joints of the robot, bounded work (``n`` <= :data:`MAX_N`, at most :data:`MAX_STEPS`
   steps per phase), and a ``name`` that is a plain file name (it names the default results folder
   ``<name>.campaign`` in the working directory; any other place is given with ``-o``).

Messages never print an unbounded value (:func:`soadyn.model.names.brief`).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CampaignSpecError", "Setup", "Scenario", "CampaignSpec", "load_spec", "spec_from_dict", "scenario_seed",
    "SCHEMA", "RANGES", "MAX_N", "MAX_STEPS", "CONTROLLERS", "CASES", "CONTACTS", "PARAMETERS", "DEFAULTS",
]

CONTROLLERS = ("dmc", "rnsc")
CASES = ("A", "B", "C", "D")
CONTACTS = ("normal", "grasp")
#: sampled parameters: name -> kind ("float": number or distribution, "axis", "level", "case", "controller")
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
#: physical range of each sampled number: (low, high, low is allowed, unit/meaning); a distribution must
#: stay inside (so ``normal`` is refused where the range is bounded)
RANGES: dict[str, tuple[float, float, bool, str]] = {
    "spin_rate_deg_s": (-360.0, 360.0, True, "deg/s, at most one turn per second"),
    "contact_time": (0.0, 1e4, False, "s, positive"),
    "payload_scale": (0.0, 100.0, False, "positive factor of the target mass and inertia"),
    "restitution": (0.0, 1.0, True, "coefficient of restitution"),
    "closing_speed": (0.0, 10.0, True, "m/s, towards the target"),
    "bias_fraction": (0.0, 1.0, True, "fraction of the target's momentum"),
}
#: most scenarios of one campaign
MAX_N = 10_000_000
#: most integration steps of one phase (duration / dt) of one scenario
MAX_STEPS = 1_000_000
#: step of the target's torque-free motion over the approach (Euler's equations, RK4)
EULER_DT = 0.01
#: largest magnitude of any number of a spec
MAX_MAGNITUDE = 1e9
MAX_CHOICES = 1000
#: a spec name: a plain file name (the default results folder is ``<name>.campaign``)
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}$")


class CampaignSpecError(ValueError):
    """A campaign spec is invalid; the message is one line naming the file, the field and the fix."""


# ---- schema --------------------------------------------------------------------------------------
def _obj(props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": props, "additionalProperties": False, "required": list(required)}


_NUM = {"type": "number"}
_POS = {"type": "number", "exclusiveMinimum": 0}
_VEC3 = {"type": "array", "items": _NUM, "minItems": 3, "maxItems": 3}
_SAMPLED = {"type": ["number", "string", "array", "object"], "maxItems": MAX_CHOICES,
            "propertyNames": {"enum": ["uniform", "normal", "choice", "sphere"]},
            "minProperties": 1, "maxProperties": 1}

#: the JSON schema (Draft 2020-12) of a campaign spec
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    **_obj({
        "name": {"type": "string"},
        "robot": {"type": "string", "minLength": 1},
        "hand": {"type": "string", "minLength": 1},
        "wheels": {"type": "array", "items": {"type": "string"}, "uniqueItems": True, "maxItems": 64},
        "arm_deg": {"type": "array", "items": _NUM, "maxItems": 1000},
        "target": _obj({"mass": _POS, "grasp_xyz": _VEC3, "grasp_rpy": _VEC3,
                        "inertia": {"type": "array", "minItems": 3, "maxItems": 3,
                                    "items": {"type": ["number", "array"], "items": _NUM,
                                              "minItems": 3, "maxItems": 3}}},
                       ("mass", "inertia", "grasp_xyz")),
        "impact": _obj({"contact": {"enum": list(CONTACTS)}, "normal": _VEC3}),
        "approach": _obj({"dt": _POS}),
        "post_impact": _obj({"duration": _POS, "dt": _POS}),
        "controllers": _obj({"dmc": _obj({"K_v": _POS}), "rnsc": _obj({"K_b": _POS, "K_m": _POS})}),
        "sample": _obj({k: _SAMPLED for k in PARAMETERS}),
        "n": {"type": "integer", "minimum": 1, "maximum": MAX_N},
        "seed": {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
        "outputs": _obj({"trajectories": {"type": "boolean"}}),
    }, ("robot", "hand", "target")),
}


# ---- data ----------------------------------------------------------------------------------------
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
        """The spec hash: sha256 (16 hex digits) of what decides the scenarios (the spec's content and the
        robot file's bytes)."""
        h = hashlib.sha256(json.dumps(self.raw, sort_keys=True, default=str).encode())
        h.update(Path(self.setup.robot).read_bytes())
        return h.hexdigest()[:16]


def _plain(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


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


# ---- reading -------------------------------------------------------------------------------------
def load_spec(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign spec file (YAML); raises :class:`CampaignSpecError` (one line)."""
    import soadyn.model.safe_yaml as safe_yaml

    path = Path(path)
    if not path.is_file():
        raise CampaignSpecError(f"{path}: campaign spec not found; give the path of a YAML spec "
                                "(see examples/campaigns/capture.yaml)")
    try:
        with open(path, "rb") as f:
            raw = f.read(safe_yaml.MAX_BYTES + 1)
    except OSError as e:
        raise CampaignSpecError(f"{path}: cannot read the spec ({e.strerror}); check its "
                                "permissions") from None
    try:
        doc = safe_yaml.load(raw)
    except safe_yaml.SafeYamlError as e:
        where = f" ({e.where})" if e.where else ""
        raise CampaignSpecError(f"{path}: not a valid spec file{where}: {e.problem}") from None
    return spec_from_dict(doc, base_dir=path.parent, source=str(path))


def _type_name(x: Any) -> str:
    from soadyn.model.names import brief

    if x is None:
        return "null (empty value)"
    if isinstance(x, bool):
        return f"boolean {x}"
    if isinstance(x, (int, float, str)):
        return f"{'string' if isinstance(x, str) else 'number'} {brief(x)}"
    if isinstance(x, list):
        return f"a list of {len(x)}"
    return "a mapping" if isinstance(x, dict) else type(x).__name__


_WANT = {"number": "a number", "integer": "an integer", "string": "a string", "array": "a list",
         "object": "a mapping of keys", "boolean": "a boolean (true or false, without quotes)"}


def _schema_message(err: Any) -> tuple[str, str]:
    """(field path, problem and fix) of one schema violation."""
    from soadyn.model.names import brief, terminal
    from soadyn.model.robotfile import field_path

    parts = list(err.absolute_path)
    inst, v, want = err.instance, err.validator, err.validator_value
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        key = sorted(str(k) for k in inst if k not in allowed)[0]
        near = difflib.get_close_matches(key[:200], allowed, n=1, cutoff=0.6)
        hint = f"did you mean '{near[0]}'? " if near else ""
        return (field_path(parts + [terminal(key, 60)]),
                f"unknown key; {hint}valid keys here: {', '.join(allowed)}")
    if v == "propertyNames":
        key = str(inst)
        near = difflib.get_close_matches(key[:200], want["enum"], n=1, cutoff=0.6)
        hint = f"did you mean '{near[0]}'? " if near else ""
        return field_path(parts), f"unknown distribution {brief(key)}; {hint}valid: {', '.join(want['enum'])}"
    if v == "required":
        missing = [k for k in want if k not in inst]
        return field_path(parts + missing[:1]), "missing; it is required"
    if v == "type":
        kinds = want if isinstance(want, list) else [want]
        expect = " or ".join(_WANT.get(k, k) for k in kinds)
        return field_path(parts), f"expected {expect}, got {_type_name(inst)}"
    if v == "enum":
        return field_path(parts), f"{brief(inst)} is not allowed; use one of: {', '.join(map(str, want))}"
    if v in ("minimum", "exclusiveMinimum", "maximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}[v]
        what = "positive" if v == "exclusiveMinimum" and want == 0 else f"{op} {want}"
        return field_path(parts), f"must be {what}, got {brief(inst)}"
    if v in ("minItems", "maxItems"):
        most = "at least" if v == "minItems" else "at most"
        return field_path(parts), f"expected {most} {want} entries, got {len(inst)}"
    if v in ("minProperties", "maxProperties"):
        return field_path(parts), ("a distribution has one key: uniform, normal, choice (or sphere for "
                                   "an axis)")
    if v == "uniqueItems":
        return field_path(parts), "a name is repeated; list each one once"
    if v == "minLength":
        return field_path(parts), "must not be empty"
    return field_path(parts), f"does not match the campaign-spec schema ({v}); see examples/campaigns"


def _check_schema(doc: Any, fail: Any) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(SCHEMA)
    errors = list(itertools.islice(validator.iter_errors(doc), 200))
    if errors:
        err = min(errors, key=lambda e: (len(e.absolute_path), [str(p) for p in e.absolute_path]))
        raise fail(*_schema_message(err))


def _check_numbers(doc: Any, fail: Any) -> None:
    """Every number finite and at most :data:`MAX_MAGNITUDE` in magnitude (iterative walk)."""
    from soadyn.model.robotfile import field_path

    todo: list[tuple[Any, list]] = [(doc, [])]
    while todo:
        x, parts = todo.pop()
        if isinstance(x, dict):
            todo.extend((v, parts + [k]) for k, v in x.items() if k != "seed" or parts)
        elif isinstance(x, list):
            todo.extend((v, parts + [i]) for i, v in enumerate(x))
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            if not math.isfinite(x) or abs(x) > MAX_MAGNITUDE:
                from soadyn.model.names import brief

                raise fail(field_path(parts), f"{brief(x)} is not a finite number of magnitude <= "
                           f"{MAX_MAGNITUDE:g}; check the value and its units")


def spec_from_dict(doc: Any, base_dir: str | Path = ".", source: str = "<dict>") -> CampaignSpec:
    """Validate a spec given as a dict (the YAML content); relative robot paths resolve from ``base_dir``.
    Raises :class:`CampaignSpecError` (one line) for anything :data:`SCHEMA` or the range checks refuse."""
    def fail(fld: str, msg: str) -> CampaignSpecError:
        return CampaignSpecError(f"{source}: field '{fld}': {msg}")

    if not isinstance(doc, dict):
        raise CampaignSpecError(f"{source}: the spec must be a mapping of fields (name, robot, hand, ...), "
                                f"got {_type_name(doc)}")
    _check_schema(doc, fail)
    _check_numbers(doc, fail)
    name = doc.get("name")
    if name is None:
        stem = Path(source).stem
        name = stem if NAME.match(stem) else "campaign"
    elif not NAME.match(name):
        from soadyn.model.names import brief

        raise fail("name", f"{brief(name)} is not a plain file name (letters, digits, '_', '.', '+', '-'; "
                   "at most 100): it names the default results folder <name>.campaign in the working "
                   "directory; give -o DIR (results=) to write anywhere else")
    setup = _setup(doc, Path(base_dir), fail)
    dists = {k: _distribution(doc.get("sample", {}).get(k, DEFAULTS[k]), k, fail) for k in PARAMETERS}
    _check_steps(doc, setup, dists, fail)
    raw = dict(doc)
    raw["robot"] = setup.robot
    return CampaignSpec(name, setup, dists, int(doc.get("n", 100)), int(doc.get("seed", 0)), source, raw)


# ---- meaning -------------------------------------------------------------------------------------
def _setup(doc: dict, base_dir: Path, fail: Any) -> Setup:
    """The shared setup of a schema-valid spec: robot, hand, wheels, start configuration, target, phases."""
    from soadyn.model.names import brief
    from soadyn.model.robotfile import RobotFileError, axis_problem, inertia_problem
    from soadyn.symbolic.checks import load_robot

    robot_path = base_dir / doc["robot"]
    if not robot_path.is_file():
        raise fail("robot", f"file {brief(doc['robot'])} not found (paths are relative to the spec's folder "
                   f"{brief(str(base_dir.resolve()), 200)}); give an existing robot file")
    try:
        robot = load_robot(robot_path)
    except RobotFileError as e:
        raise fail("robot", f"cannot load the robot file: {e}") from None
    if not robot.is_free:
        raise fail("robot", f"robot {brief(robot.name)} has a fixed base; capture needs a "
                   "free-floating chaser")
    hand = doc["hand"]
    if hand not in robot.body_names and hand not in robot.frame_names:
        raise fail("hand", f"{brief(hand)} is not a body or frame of {brief(robot.name)}; frames: "
                   f"{brief(robot.frame_names)}, bodies: {brief(robot.body_names)}")
    wheels = list(doc.get("wheels", []))
    for w in wheels:
        if w not in robot.joint_names:
            near = difflib.get_close_matches(w[:200], robot.joint_names, n=1)
            hint = f"did you mean '{near[0]}'? " if near else ""
            raise fail("wheels", f"{brief(w)} is not a joint of {brief(robot.name)}; {hint}joints: "
                       f"{brief(robot.joint_names)}")
    arm = [j for j in robot.joint_names if j not in wheels]
    if not arm:
        raise fail("wheels", "every joint is a wheel; the arm needs at least one joint")
    q0 = robot.neutral()
    if "arm_deg" in doc:
        a = doc["arm_deg"]
        if len(a) != len(arm):
            raise fail("arm_deg", f"expected {len(arm)} numbers (one per arm joint "
                       f"{brief(arm)}), got {len(a)}")
        q0[7 + np.array([robot.joint_names.index(j) for j in arm])] = np.radians(np.asarray(a, float))

    tg = doc["target"]
    inertia = tg["inertia"]
    if all(isinstance(r, list) for r in inertia):
        I = np.array(inertia, dtype=float)
    elif not any(isinstance(r, list) for r in inertia):
        I = np.diag(np.asarray(inertia, dtype=float))
    else:
        raise fail("target.inertia", "give 3 principal moments or a 3x3 matrix [kg m^2], not a mix")
    problem = inertia_problem(I)
    if problem:
        raise fail("target.inertia", problem)
    imp = doc.get("impact", {})
    normal = np.asarray(imp.get("normal", [0.0, 0.0, 1.0]), float)
    problem = axis_problem(normal)
    if problem:
        raise fail("impact.normal", f"the direction {problem}")
    normal = normal / np.linalg.norm(normal)
    gains = {"dmc": {"K_v": 20.0}, "rnsc": {"K_b": 25.0, "K_m": 10.0}}
    for name, g in doc.get("controllers", {}).items():
        gains[name].update({k: float(v) for k, v in g.items()})
    ap, post = doc.get("approach", {}), doc.get("post_impact", {})
    return Setup(str(robot_path.resolve()), hand, tuple(wheels), tuple(float(x) for x in q0),
                 float(tg["mass"]), tuple(float(x) for x in I.ravel()),
                 tuple(float(x) for x in tg["grasp_xyz"]),
                 tuple(float(x) for x in tg.get("grasp_rpy", [0, 0, 0])),
                 imp.get("contact", "normal"), tuple(float(x) for x in normal), float(ap.get("dt", 0.02)),
                 float(post.get("duration", 2.0)), float(post.get("dt", 0.02)), gains,
                 bool(doc.get("outputs", {}).get("trajectories", False)))


def _distribution(d: Any, name: str, fail: Any) -> Any:
    """A parameter's value or distribution, checked against its kind and :data:`RANGES`: a constant,
    ``{uniform: [a, b]}``, ``{normal: [mean, std]}`` (unbounded parameters only), ``{choice: [...]}``, or
    for the spin axis ``sphere`` / ``{sphere: true}`` (uniform directions)."""
    from soadyn.model.names import brief

    fld = f"sample.{name}"
    kind = PARAMETERS[name]
    if kind == "axis":
        if d == "sphere" or d == {"sphere": True}:
            return {"sphere": True}
        if isinstance(d, dict) and set(d) == {"choice"}:
            if not isinstance(d["choice"], list) or not d["choice"]:
                raise fail(fld, "choice needs a non-empty list of axes")
            return {"choice": [_axis(a, fld, fail) for a in d["choice"]]}
        if isinstance(d, dict) and "sphere" in d:
            raise fail(fld, "write sphere (or {sphere: true}) for uniform directions")
        return _axis(d, fld, fail)
    if isinstance(d, dict):
        ((k, arg),) = d.items()
        if k == "choice":
            if not isinstance(arg, list) or not arg or len(arg) > MAX_CHOICES:
                raise fail(fld, f"choice needs a list of 1 to {MAX_CHOICES} values")
            return {"choice": [_constant(a, name, fld, fail) for a in arg]}
        if kind in ("case", "controller", "level"):
            raise fail(fld, f"{kind} values are drawn with {{choice: [...]}}, not {k}")
        if k == "sphere":
            raise fail(fld, "sphere is a distribution of directions (spin_axis only)")
        if not (isinstance(arg, list) and len(arg) == 2 and all(_is_number(x) for x in arg)):
            raise fail(fld, f"{k} needs two numbers [{'low, high' if k == 'uniform' else 'mean, std'}], "
                       f"got {brief(arg)}")
        a, b = (float(x) for x in arg)
        if k == "normal":
            if name in RANGES and name != "spin_rate_deg_s":
                raise fail(fld, f"a normal distribution leaves the range {_range_text(name)}; use "
                           "{uniform: [low, high]} or {choice: [...]}")
            if b < 0:
                raise fail(fld, f"normal needs a standard deviation >= 0, got {b:g}")
            return {"normal": [a, b]}
        if b < a:
            raise fail(fld, f"uniform bounds out of order: [{a:g}, {b:g}]; write [low, high]")
        _in_range(a, name, fld, fail)
        _in_range(b, name, fld, fail)
        return {"uniform": [a, b]}
    return _constant(d, name, fld, fail)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _axis(a: Any, fld: str, fail: Any) -> list[float]:
    from soadyn.model.names import brief
    from soadyn.model.robotfile import axis_problem

    if not (isinstance(a, list) and len(a) == 3 and all(_is_number(x) for x in a)):
        raise fail(fld, f"an axis is 3 numbers [x, y, z] (or sphere), got {brief(a)}")
    problem = axis_problem(a)
    if problem:
        raise fail(fld, f"the axis {problem}")
    return [float(x) for x in a]


def _range_text(name: str) -> str:
    lo, hi, closed, what = RANGES[name]
    return f"{'[' if closed else '('}{lo:g}, {hi:g}] ({what})"


def _in_range(x: float, name: str, fld: str, fail: Any) -> None:
    lo, hi, closed, _ = RANGES[name]
    if not ((lo <= x) if closed else (lo < x)) or x > hi:
        raise fail(fld, f"{x:g} is outside the range {_range_text(name)}")


def _constant(x: Any, name: str, fld: str, fail: Any) -> Any:
    from soadyn.model.names import brief

    valid = {"case": CASES, "controller": CONTROLLERS}.get(PARAMETERS[name])
    if valid is not None:
        if not isinstance(x, str) or x not in valid:
            raise fail(fld, f"unknown {PARAMETERS[name]} {brief(x)}; valid: {', '.join(valid)}")
        return x
    if not _is_number(x):
        raise fail(fld, f"expected a number or a distribution ({{uniform: [a, b]}}, {{choice: [...]}}), "
                   f"got {_type_name(x)}")
    _in_range(float(x), name, fld, fail)
    return float(x)


def _largest(dist: Any) -> float:
    if isinstance(dist, dict):
        ((k, arg),) = dist.items()
        return float(max(arg)) if k in ("uniform", "choice") else math.inf
    return float(dist)


def _check_steps(doc: dict, setup: Setup, dists: dict[str, Any], fail: Any) -> None:
    """At most :data:`MAX_STEPS` steps per phase: the approach (longest contact time / approach dt and
    / :data:`EULER_DT`) and the post-impact phase (duration / dt)."""
    t_c = _largest(dists["contact_time"])
    phases = (("approach", t_c / min(setup.approach_dt, EULER_DT), "the longest contact time / approach.dt"),
              ("post_impact", setup.post_duration / setup.post_dt, "post_impact.duration / dt"))
    for fld, steps, what in phases:
        if steps > MAX_STEPS:
            raise fail(fld, f"{what} gives {steps:.3g} steps per scenario, more than {MAX_STEPS}; shorten "
                       "the phase or take a larger dt")
