"""Robot files (YAML) -> :class:`~soadyn.model.robot.Robot`, with validation.

The format is documented in ``docs/robot-format.md``.  Reading happens in three stages, each of which
stops at the first problem with a :class:`RobotFileError` naming the file, the field (``bodies[3].inertia``)
and the fix:

1. YAML parsing (``yaml.safe_load`` semantics, plus: duplicate mapping keys are errors, and numbers such
   as ``1e-3`` are read as floats as in YAML 1.2 -- PyYAML's YAML 1.1 rules would read them as strings);
2. structure, against the JSON schema ``schema.json`` (Draft 2020-12, unknown keys are errors);
3. meaning: a single tree with one root, unique names, physically valid masses and inertias, a
   non-singular mass matrix (when a ``check`` is given: :func:`soadyn.symbolic.checks.load_robot` passes
   :func:`soadyn.symbolic.checks.check_mass_matrix`, which runs the dynamics), and loop closures
   (``loops:``, seed 004 III-D) between known frames (:func:`loops_from_doc`).

Writing: :func:`to_yaml` (and :func:`to_dict`) write any model as a robot file that reads back to the same
model.

Massless bodies: a body may have ``mass: 0`` only if it is attached by a ``fixed`` joint (a massless
frame such as a tool point), or if it is the root of a robot with a fixed base (the base never moves, so
its inertia never enters the dynamics).  A moving body needs positive mass and a positive-definite inertia
that satisfies the triangle inequality; with that, the joint-space mass matrix is positive definite.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import yaml

import soadyn.model.exact as exact
import soadyn.model.safe_yaml as safe_yaml
from soadyn.model.inertia import SYMMETRY_TOL, TRIANGLE_TOL, inertia_problem  # noqa: F401 (re-exported)
from soadyn.model.names import brief
from soadyn.model.robot import (
    BASE_TYPES,
    FRICTION_VELOCITY,
    LOOP_TYPES,
    BodySpec,
    Inertia,
    Joint,
    LoopClosure,
    Mimic,
    MimicError,
    Placement,
    Robot,
    resolve_mimics,
)
from soadyn.model.rotations import matrix_to_rpy

#: A check of a built robot (e.g. :func:`soadyn.symbolic.checks.check_mass_matrix`): ``(k, problem)`` for a
#: body ``k`` that makes the model unusable, else None.  The readers report it with the file and field.
MassCheck = Callable[[Robot], "tuple[int, str] | None"]

#: Sane magnitudes (SI units: kg, m, kg m^2, rad): every number of a robot file is 0 or has
#: MIN_MAGNITUDE <= |x| <= MAX_MAGNITUDE.  Beyond them products and eigenvalues of the dynamics overflow
#: or lose every digit; such a value is a unit or typing mistake.
MAX_MAGNITUDE = 1e9
MIN_MAGNITUDE = 1e-30
#: an axis is normalised only when its norm lies in [AXIS_NORM_MIN, AXIS_NORM_MAX]
AXIS_NORM_MIN = 1e-6
AXIS_NORM_MAX = 1e6


class RobotFileError(ValueError):
    """A robot file is missing, malformed or physically invalid.

    ``str(err)`` is one line: ``<file>: <field>: <problem and fix>``.
    """

    def __init__(self, file: str | Path, field: str, problem: str) -> None:
        self.file = str(file)
        self.field = field
        self.problem = problem
        where = f"{self.file}: {field}: " if field else f"{self.file}: "
        super().__init__(where + problem)


# ---- YAML parsing (bounded and strict: soadyn.model.safe_yaml) ------------------------------------

def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise RobotFileError(path, "", "file not found; check the path") from None
    except IsADirectoryError:
        raise RobotFileError(path, "", "is a directory, not a robot file") from None
    except OSError as e:
        raise RobotFileError(path, "", f"cannot read the file ({e.strerror})") from None


def _parse_yaml(path: Path, raw: bytes) -> Any:
    try:
        return safe_yaml.load(raw)
    except safe_yaml.SafeYamlError as e:
        raise RobotFileError(path, e.where, e.problem) from None


# ---- schema ------------------------------------------------------------------------------------------

@lru_cache(maxsize=1)
def schema() -> dict:
    """The JSON schema (Draft 2020-12) of a robot file."""
    text = resources.files("soadyn.model").joinpath("schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def field_path(parts: Sequence[str | int]) -> str:
    """``['bodies', 3, 'inertia']`` -> ``'bodies[3].inertia'``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out or "(top level)"


def _type_name(x: Any) -> str:
    if x is None:
        return "null (empty value)"
    if isinstance(x, bool):
        return f"boolean {x}"
    if isinstance(x, str):
        return f"string {brief(x)}{safe_yaml.yaml11_hint(x)}"
    if isinstance(x, (int, float)):
        return f"number {brief(x)}"
    if isinstance(x, list):
        return f"a list of {len(x)}"
    if isinstance(x, dict):
        return "a mapping"
    return type(x).__name__


_EXPECT = {"number": "a number", "string": "a string", "array": "a list", "object": "a mapping"}


def _schema_message(err: jsonschema.ValidationError) -> tuple[str, str]:
    """(field path, problem with fix) of one schema violation."""
    parts = list(err.absolute_path)
    inst = err.instance
    v = err.validator
    last = parts[-1] if parts else None
    if v == "additionalProperties":
        allowed = sorted(err.schema.get("properties", {}))
        extra = sorted(str(k) for k in inst if k not in allowed)
        return (field_path(parts + [brief(extra[0])[1:-1]]),
                f"unknown key {brief(extra[0])}; allowed keys here: {', '.join(allowed)} "
                "(check the spelling)")
    if v == "required":
        missing = [k for k in err.validator_value if k not in inst]
        key = missing[0] if missing else "?"
        extra = ""
        if key == "axis" and parts and parts[0] == "loops":
            extra = (f" (a {inst.get('type')} cut joint needs a non-zero axis in frame_a, e.g. [0, 0, 1])")
        elif key == "axis":
            extra = " (revolute and prismatic joints need a non-zero axis, e.g. [0, 0, 1])"
        elif key in ("frame_a", "frame_b"):
            extra = " (a body or frame name" + (", or world" if key == "frame_b" else "") + ")"
        return field_path(parts + [key]), f"missing required key {key!r}{extra}; add it"
    if v == "type":
        want = err.validator_value
        if last == "inertia" or (len(parts) >= 2 and parts[-2] == "inertia" and isinstance(last, int)):
            return (field_path(parts),
                    f"expected a 3x3 list or a mapping {{ixx, iyy, izz, ixy, ixz, iyz}}, got "
                    f"{_type_name(inst)}")
        want_s = _EXPECT.get(want, str(want))
        fix = "; write a plain number without quotes, e.g. 1.5 or 2.0e-3" if want == "number" else ""
        return field_path(parts), f"expected {want_s}, got {_type_name(inst)}{fix}"
    if v == "enum":
        opts = ", ".join(str(o) for o in err.validator_value)
        return field_path(parts), f"{brief(inst)} is not allowed; use one of: {opts}"
    if v in ("minItems", "maxItems"):
        if last == "inertia":
            return field_path(parts), f"a 3x3 inertia needs 3 rows, got {len(inst)}"
        if last == "bodies":
            return field_path(parts), "no bodies; list at least the base body"
        return field_path(parts), f"expected 3 numbers [x, y, z], got {len(inst)}"
    if v == "minLength":
        return field_path(parts), "must not be empty; give a name"
    return field_path(parts), f"does not match the robot-file schema ({v}); see docs/robot-format.md"


def _doc_order(err: jsonschema.ValidationError) -> tuple:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in err.absolute_path)


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_name(x: Any) -> bool:
    return isinstance(x, str) and len(x) > 0


def _is_vec3(x: Any) -> bool:
    return isinstance(x, list) and len(x) == 3 and all(_is_num(v) for v in x)


def _fits(obj: Any, required: tuple[str, ...], fields: dict[str, Any]) -> bool:
    return (isinstance(obj, dict) and all(k in obj for k in required)
            and all(k in fields and fields[k](v) for k, v in obj.items()))


_INERTIA_KEYS = {k: _is_num for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
#: drive-train keys of a joint (docs/robot-format.md): all numbers
DRIVE_KEYS = ("armature", "rotor_inertia", "gear_ratio", "damping", "friction", "friction_velocity")
_MIMIC = {"joint": _is_name, "multiplier": _is_num, "offset": _is_num}
_JOINT = {"name": _is_name, "type": lambda v: v in ("revolute", "prismatic", "fixed"), "axis": _is_vec3,
          "xyz": _is_vec3, "rpy": _is_vec3, **{k: _is_num for k in DRIVE_KEYS},
          "mimic": lambda v: _fits(v, ("joint",), _MIMIC)}
_BODY = {"name": _is_name, "parent": _is_name, "mass": _is_num, "com": _is_vec3,
         "inertia": lambda v: (_fits(v, ("ixx", "iyy", "izz"), _INERTIA_KEYS) if isinstance(v, dict)
                               else isinstance(v, list) and len(v) == 3 and all(_is_vec3(r) for r in v)),
         "joint": lambda v: _fits(v, ("name", "type"), _JOINT) and (v["type"] == "fixed" or "axis" in v)}
_FRAME = {"name": _is_name, "body": _is_name, "xyz": _is_vec3, "rpy": _is_vec3}
_LOOP = {"name": _is_name, "frame_a": _is_name, "frame_b": _is_name,
         "type": lambda v: v in ("weld", "revolute", "prismatic", "spherical"), "axis": _is_vec3,
         "xyz": _is_vec3, "rpy": _is_vec3}
_TOP = {"name": _is_name, "description": lambda v: isinstance(v, str),
        "base": lambda v: v in ("free", "fixed"), "gravity": _is_vec3,
        "bodies": lambda v: isinstance(v, list) and len(v) > 0 and all(_fits(b, ("name", "mass"), _BODY)
                                                                      for b in v),
        "frames": lambda v: isinstance(v, list) and all(_fits(f, ("name", "body"), _FRAME) for f in v),
        "loops": lambda v: isinstance(v, list) and all(
            _fits(lp, ("frame_a", "frame_b"), _LOOP)
            and (lp.get("type") not in ("revolute", "prismatic") or "axis" in lp) for lp in v)}


def conforms(doc: Any) -> bool:
    """Fast path of :func:`validate_schema`: True only if ``doc`` satisfies ``schema.json`` (the same
    rules written out; the JSON-schema validator, ~100x slower, then runs only to explain a failure).
    The tests check on every fuzzed file that ``conforms`` never accepts what the schema refuses."""
    return _fits(doc, ("name", "base", "bodies"), _TOP)


def validate_schema(doc: Any, file: str | Path) -> None:
    """Check ``doc`` (parsed YAML) against :func:`schema`; raise :class:`RobotFileError` on the first
    error."""
    if not isinstance(doc, dict):
        what = "empty" if doc is None else f"{_type_name(doc)}"
        raise RobotFileError(file, "(top level)",
                             f"file is {what}; a robot file is a mapping with keys name, base, bodies")
    if conforms(doc):
        return
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(itertools.islice(validator.iter_errors(doc), 200), key=_doc_order)
    if errors:
        field, problem = _schema_message(errors[0])
        raise RobotFileError(file, field, problem)


def check_number(x: Any, where: str, file: str | Path) -> None:
    """A number of a robot file must be finite and 0 or of sane magnitude (:data:`MAX_MAGNITUDE`)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return
    if isinstance(x, int):
        if abs(x) > MAX_MAGNITUDE:
            raise RobotFileError(file, where, f"is {brief(x)}, beyond the sane range |x| <= "
                                 f"{MAX_MAGNITUDE:g} (SI units: kg, m, kg m^2); check the value and its "
                                 "units")
        return
    if not math.isfinite(x):
        raise RobotFileError(file, where, f"is {x} (not finite); use a finite number")
    if abs(x) > MAX_MAGNITUDE:
        raise RobotFileError(file, where, f"is {x:.6g}, beyond the sane range |x| <= {MAX_MAGNITUDE:g} "
                             "(SI units: kg, m, kg m^2); check the value and its units")
    if 0.0 < abs(x) < MIN_MAGNITUDE:
        raise RobotFileError(file, where, f"is {x:.6g}, below {MIN_MAGNITUDE:g} in magnitude (beyond "
                             "double precision in the dynamics); write 0 if zero was meant")


def _check_numbers(doc: Any, file: str | Path) -> None:
    """:func:`check_number` on every number of the document (iterative: depth is bounded by the YAML
    reader anyway); integers become floats."""
    todo: list[tuple[Any, list]] = [(doc, [])]
    while todo:
        x, parts = todo.pop()
        if isinstance(x, dict):
            for k, v in x.items():
                if isinstance(v, int) and not isinstance(v, bool):
                    check_number(v, field_path(parts + [k]), file)
                    x[k] = float(v)
            todo.extend((v, parts + [k]) for k, v in reversed(x.items()))  # popped in document order
        elif isinstance(x, list):
            for i, v in enumerate(x):
                if isinstance(v, int) and not isinstance(v, bool):
                    check_number(v, field_path(parts + [i]), file)
                    x[i] = float(v)
            todo.extend((v, parts + [i]) for i, v in reversed(list(enumerate(x))))
        else:
            check_number(x, field_path(parts), file)


# ---- physical checks (shared with the URDF reader) --------------------------------------------------------

def inertia_matrix(x: dict | list) -> np.ndarray:
    """3x3 matrix of a schema-valid inertia entry (mapping ``ixx..iyz`` or nested 3x3 list)."""
    if isinstance(x, dict):
        return np.array([[x["ixx"], x.get("ixy", 0.0), x.get("ixz", 0.0)],
                         [x.get("ixy", 0.0), x["iyy"], x.get("iyz", 0.0)],
                         [x.get("ixz", 0.0), x.get("iyz", 0.0), x["izz"]]], dtype=float)
    return np.array(x, dtype=float)


# ---- semantic checks and building ---------------------------------------------------------------------

def _vec(x: Sequence[float] | None) -> np.ndarray:
    return np.zeros(3) if x is None else np.asarray(x, dtype=float)


def axis_problem(x: Sequence[float]) -> str | None:
    """Why ``x`` cannot be normalised into a joint axis (zero, or a norm outside
    [:data:`AXIS_NORM_MIN`, :data:`AXIS_NORM_MAX`], where normalising loses digits), or None."""
    n = exact.norm(x)
    if n == 0.0:
        return "is zero; give a non-zero direction such as [0, 0, 1] (it is normalised)"
    if not AXIS_NORM_MIN <= n <= AXIS_NORM_MAX:
        return (f"has norm {n:.3g}, outside [{AXIS_NORM_MIN:g}, {AXIS_NORM_MAX:g}]; write the direction "
                "with components of order 1, e.g. [0, 0, 1] (it is normalised)")
    return None


def unit_axis(x: Sequence[float]) -> np.ndarray:
    """The axis divided by its (correctly rounded, machine-independent) norm; an axis already of unit
    norm (within 4 ulp) is kept bit for bit, so that a model written by ``structure.to_yaml`` reads back
    with the same fingerprint (dividing a unit vector by its floating-point norm changes the last bit of
    about a third of them).  Callers check :func:`axis_problem` first."""
    a = np.asarray(x, dtype=float)
    n = exact.norm(a)
    return a.copy() if abs(n - 1.0) <= 4.0 * np.finfo(float).eps else a / n


def _names(names: Sequence[str], limit: int = 8) -> str:
    """A bounded list of names for a message."""
    shown = ", ".join(brief(n, 40) for n in list(names)[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _check_tree(doc: dict, file: str | Path) -> None:
    """One root, unique names, known parents, no cycle, joints where needed: O(n) in the bodies."""
    bodies = doc["bodies"]
    index: dict[str, int] = {}
    for i, b in enumerate(bodies):
        if b["name"] in index:
            raise RobotFileError(file, f"bodies[{i}].name",
                                 f"duplicate body name {brief(b['name'])} (also bodies[{index[b['name']]}]); "
                                 "body names must be unique, rename one")
        index[b["name"]] = i
    roots = [i for i, b in enumerate(bodies) if "parent" not in b]
    if not roots:
        raise RobotFileError(file, "bodies",
                             "no root body: every body names a parent; the base body must have no "
                             "'parent' key")
    if len(roots) > 1:
        names = ", ".join(f"{brief(bodies[i]['name'], 40)} (bodies[{i}])" for i in roots[:4])
        raise RobotFileError(file, f"bodies[{roots[1]}].parent",
                             f"several root bodies without 'parent': {names}; exactly one body (the base) "
                             "may omit 'parent', give the others their parent")
    children: dict[int, list[int]] = {}
    for i, b in enumerate(bodies):
        if "parent" in b:
            if b["parent"] not in index:
                raise RobotFileError(file, f"bodies[{i}].parent",
                                     f"unknown parent {brief(b['parent'])}; known bodies: "
                                     f"{_names(list(index))}")
            children.setdefault(index[b["parent"]], []).append(i)
    root = roots[0]
    reached = {root}
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), ()):
            reached.add(c)
            todo.append(c)
    if len(reached) != len(bodies):
        i = next(k for k in range(len(bodies)) if k not in reached)
        seen: dict[int, int] = {}
        k = i
        while k not in seen:  # every unreached body's parent chain ends in a cycle
            seen[k] = len(seen)
            k = index[bodies[k]["parent"]]
        loop = [m for m, _ in sorted(seen.items(), key=lambda t: t[1]) if seen[m] >= seen[k]]
        names = " -> ".join(brief(bodies[m]["name"], 30) for m in (loop + [k])[:8])
        raise RobotFileError(file, f"bodies[{i}].parent",
                             f"parents form a cycle ({names}{' ...' if len(loop) > 7 else ''}) not connected "
                             f"to the base {brief(bodies[root]['name'])}; every chain of parents must end at "
                             "the base")
    # joints
    rb = bodies[root]
    if "joint" in rb:
        raise RobotFileError(file, f"bodies[{root}].joint",
                             f"the root body {brief(rb['name'])} must not have a joint (its motion is set by "
                             "'base: free|fixed'); remove the joint or give the body a parent")
    joint_names: dict[str, int] = {}
    for i, b in enumerate(bodies):
        if i == root:
            continue
        if "joint" not in b:
            raise RobotFileError(file, f"bodies[{i}].joint",
                                 f"body {brief(b['name'])} has a parent but no joint; add "
                                 "'joint: {name: ..., type: revolute|prismatic|fixed, axis: [x, y, z]}'")
        j = b["joint"]
        if j["name"] in joint_names:
            raise RobotFileError(file, f"bodies[{i}].joint.name",
                                 f"duplicate joint name {brief(j['name'])} (also "
                                 f"bodies[{joint_names[j['name']]}].joint); joint names must be unique, "
                                 "rename one")
        joint_names[j["name"]] = i
        if j["type"] != "fixed":
            problem = axis_problem(j["axis"])
            if problem:
                raise RobotFileError(file, f"bodies[{i}].joint.axis", problem)
        drive_problem(j, j["type"], f"bodies[{i}].joint", file)
    _check_mimics(doc, joint_names, file)


def _check_mimics(doc: dict, joint_names: dict[str, int], file: str | Path) -> None:
    """``mimic:`` of the joints: on a moving joint, naming another moving joint, chains resolved, no cycle."""
    bodies = doc["bodies"]
    movable = {n for n, i in joint_names.items() if bodies[i]["joint"]["type"] != "fixed"}
    mimics: dict[str, Mimic] = {}
    for name, i in joint_names.items():
        mm = bodies[i]["joint"].get("mimic")
        if mm is None:
            continue
        if bodies[i]["joint"]["type"] == "fixed":
            raise RobotFileError(file, f"bodies[{i}].joint.mimic", "a fixed joint cannot mimic another; "
                                 "remove mimic or make the joint revolute or prismatic")
        if mm["joint"] not in joint_names:
            raise RobotFileError(file, f"bodies[{i}].joint.mimic.joint",
                                 f"unknown joint {brief(mm['joint'])}; name a joint of this file "
                                 f"({_names(list(joint_names))})")
        mimics[name] = Mimic(mm["joint"], float(mm.get("multiplier", 1.0)), float(mm.get("offset", 0.0)))
    try:
        resolve_mimics(mimics, movable)
    except MimicError as e:
        raise RobotFileError(file, f"bodies[{joint_names[e.joint]}].joint.mimic", e.problem) from None


def drive_problem(j: dict, jtype: str, where: str, file: str | Path) -> None:
    """Check the drive-train keys of one joint mapping (:data:`DRIVE_KEYS`); raise :class:`RobotFileError`
    naming ``<where>.<key>`` and the fix.  Shared by the YAML, URDF and MJCF readers."""
    given = [k for k in DRIVE_KEYS if k in j]
    if given and jtype == "fixed":
        raise RobotFileError(file, f"{where}.{given[0]}", f"a fixed joint has no drive train; remove "
                             f"{given[0]!r} (or make the joint revolute or prismatic)")
    for k in ("armature", "rotor_inertia", "damping", "friction"):
        if k in j and j[k] < 0:
            raise RobotFileError(file, f"{where}.{k}", f"is negative ({j[k]!r}); {k} must be >= 0 "
                                 "(a passive drive cannot add energy); give its magnitude")
    if "friction_velocity" in j and not j["friction_velocity"] > 0:
        raise RobotFileError(file, f"{where}.friction_velocity", f"is {j['friction_velocity']!r}; the "
                             "velocity scale of the smoothed friction must be > 0 (default 0.01)")
    if "armature" in j and "rotor_inertia" in j:
        raise RobotFileError(file, f"{where}.rotor_inertia", "given together with armature; give either "
                             "armature (= I_m n^2) or rotor_inertia and gear_ratio, not both")
    if "gear_ratio" in j:
        if "rotor_inertia" not in j:
            raise RobotFileError(file, f"{where}.gear_ratio", "without rotor_inertia; add rotor_inertia "
                                 "(armature = rotor_inertia * gear_ratio^2) or remove gear_ratio")
        if j["gear_ratio"] == 0:
            raise RobotFileError(file, f"{where}.gear_ratio", "is 0; a gear ratio (rotor turns per joint "
                                 "turn) is non-zero, e.g. 100")


def drive_fields(j: dict) -> dict[str, float]:
    """Keyword arguments of :class:`~soadyn.model.robot.Joint` from a joint mapping checked by
    :func:`drive_problem` (armature = rotor_inertia * gear_ratio^2 when the rotor is given)."""
    out: dict[str, float] = {}
    if "rotor_inertia" in j:
        n = float(j.get("gear_ratio", 1.0))
        out["armature"] = float(j["rotor_inertia"]) * n * n
    for k in ("armature", "damping", "friction", "friction_velocity"):
        if k in j:
            out[k] = float(j[k])
    return out


def _check_masses(doc: dict, base: str, file: str | Path) -> None:
    for i, b in enumerate(doc["bodies"]):
        m = b["mass"]
        fixed_joint = "joint" in b and b["joint"]["type"] == "fixed"
        is_root = "parent" not in b
        if m < 0:
            raise RobotFileError(file, f"bodies[{i}].mass", f"is negative ({m!r}); a mass must be >= 0")
        if m == 0:
            if not (fixed_joint or (is_root and base == "fixed")):
                why = ("the base of a free-floating robot" if is_root else "a body on a moving joint")
                raise RobotFileError(file, f"bodies[{i}].mass",
                                     f"is 0 but {brief(b['name'])} is {why}, which needs mass > 0; "
                                     f"massless bodies "
                                     "are allowed only when attached by a fixed joint (or as a fixed base)")
            if "inertia" in b and np.any(inertia_matrix(b["inertia"])):
                raise RobotFileError(file, f"bodies[{i}].inertia",
                                     "is non-zero on a body with mass 0; remove 'inertia' or give a mass")
            continue
        if "inertia" not in b:
            raise RobotFileError(file, f"bodies[{i}].inertia",
                                 "missing; a body with mass > 0 needs 'inertia' (about its CoM, body axes)")
        problem = inertia_problem(inertia_matrix(b["inertia"]))
        if problem:
            raise RobotFileError(file, f"bodies[{i}].inertia", problem)


def _check_frames(doc: dict, file: str | Path) -> None:
    body_names = {b["name"] for b in doc["bodies"]}
    seen: dict[str, int] = {}
    for i, f in enumerate(doc.get("frames", [])):
        if f["name"] in body_names:
            raise RobotFileError(file, f"frames[{i}].name",
                                 f"{brief(f['name'])} is already a body name; bodies are frames too, "
                                 f"rename the frame")
        if f["name"] in seen:
            raise RobotFileError(file, f"frames[{i}].name",
                                 f"duplicate frame name {brief(f['name'])} (also "
                                 f"frames[{seen[f['name']]}]); rename one")
        seen[f["name"]] = i
        if f["body"] not in body_names:
            raise RobotFileError(file, f"frames[{i}].body",
                                 f"unknown body {brief(f['body'])}; known bodies: "
                                 f"{_names(sorted(body_names))}")


def _build(doc: dict, base: str, file: str | Path, source_hash: str, check: MassCheck | None) -> Robot:
    specs: list[BodySpec] = []
    joints = [b["joint"] for b in doc["bodies"] if "joint" in b]
    mimics = resolve_mimics({j["name"]: Mimic(j["mimic"]["joint"], float(j["mimic"].get("multiplier", 1.0)),
                                              float(j["mimic"].get("offset", 0.0)))
                             for j in joints if "mimic" in j},
                            {j["name"] for j in joints if j["type"] != "fixed"})
    for b in doc["bodies"]:
        joint = None
        j = b.get("joint")
        if j is not None:
            if j["type"] == "fixed":
                axis = np.zeros(3)
            else:
                axis = unit_axis(j["axis"])
            X = Placement.from_xyz_rpy(_vec(j.get("xyz")), _vec(j.get("rpy")))
            joint = Joint(j["name"], j["type"], axis, X, **drive_fields(j), mimic=mimics.get(j["name"]))
        m = float(b["mass"])
        I = inertia_matrix(b["inertia"]) if "inertia" in b and m > 0 else np.zeros((3, 3))
        specs.append(BodySpec(b["name"], b.get("parent"), joint,
                              Inertia(m, _vec(b.get("com")) if m > 0 else np.zeros(3), 0.5 * (I + I.T))))
    frames = [(f["name"], f["body"], Placement.from_xyz_rpy(_vec(f.get("xyz")), _vec(f.get("rpy"))))
              for f in doc.get("frames", [])]
    try:
        robot = Robot.from_specs(doc["name"], base, _vec(doc.get("gravity")), specs, frames,
                                 source=str(file), source_hash=source_hash)
    except ValueError as e:  # should have been caught above; keep the file name in the message
        raise RobotFileError(file, "bodies", str(e)) from None
    found = None if check is None else check(robot)
    if found is not None:
        k, problem = found
        idx = next(i for i, b in enumerate(doc["bodies"]) if b["name"] == robot.body_names[k])
        raise RobotFileError(file, f"bodies[{idx}]", problem)
    return robot


def check_base(base: str | None, file: str | Path) -> None:
    if base is not None and base not in BASE_TYPES:
        raise RobotFileError(file, "base (override)",
                             f"{brief(base)} is not allowed; use one of: free, fixed")


def parse_robot_yaml(raw: bytes, file: str | Path, base: str | None = None, *,
                     check: MassCheck | None = None) -> Robot:
    """Validate and build a robot from YAML bytes (``file`` is used in messages and as ``robot.source``).

    ``check`` (see :data:`MassCheck`) runs on the built tree; a problem it finds is reported on the body."""
    check_base(base, file)
    doc = _parse_yaml(Path(file), raw)
    validate_schema(doc, file)
    _check_numbers(doc, file)
    base = base or doc["base"]
    _check_tree(doc, file)
    _check_masses(doc, base, file)
    _check_frames(doc, file)
    robot = _build(doc, base, file, hashlib.sha256(raw).hexdigest(), check)
    if "loops" in doc:
        robot = robot.replace(loops=loops_from_doc(doc["loops"], robot, file))
    if "parameters" in doc:
        robot = _with_parameters(robot, doc["parameters"], file)
    return robot


def _with_parameters(robot: Robot, value: Any, file: str | Path) -> Robot:
    """``parameters: [body, ...] | all``: bodies whose inertial parameters are run-time inputs."""
    from soadyn.model.parameters import with_param_bodies

    try:
        return with_param_bodies(robot, value)
    except ValueError as e:
        raise RobotFileError(file, "parameters", str(e).removeprefix("parameters: ")
                             + "; list bodies of this file (after fixed joints are merged) or write all"
                             ) from None


def load_yaml(path: str | Path, base: str | None = None, *, check: MassCheck | None = None) -> Robot:
    """Read, validate and build a YAML robot file; ``base`` ('free' | 'fixed') overrides the file's ``base``.

    Raises :class:`RobotFileError` (a ``ValueError``) naming the file, field and fix on any problem.
    """
    path = Path(path)
    raw = read_bytes(path)
    return parse_robot_yaml(raw, path, base, check=check)


# ---- loops section -------------------------------------------------------------------------------------


def unique_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``, ... (the first not in ``taken``), added to ``taken``."""
    out, i = name, 2
    while out in taken:
        out = f"{name}_{i}"
        i += 1
    taken.add(out)
    return out


def _check_loop_frames(it: dict, where: str, file: str | Path, names: list[str]) -> None:
    """frame_a / frame_b of one ``loops`` item: present, names of the robot's bodies or frames (or world)."""
    for key in ("frame_a", "frame_b"):
        if key not in it:
            raise RobotFileError(
                file, f"{where}.{key}",
                f"missing required key {key!r}; add it (a body or frame name"
                + ("" if key == "frame_a" else ", or world for the inertial frame") + ")",
            )
        fr = it[key]
        if not isinstance(fr, str) or not fr:
            raise RobotFileError(file, f"{where}.{key}", f"expected a body or frame name, got {fr!r}")
        if fr == "world":
            if key == "frame_a":
                raise RobotFileError(
                    file, f"{where}.frame_a",
                    "is 'world'; frame_a must be a frame of the robot, put 'world' as frame_b",
                )
            if "world" in names:
                raise RobotFileError(
                    file, f"{where}.frame_b",
                    "'world' is ambiguous: the robot has a body or frame named 'world', and frame_b: "
                    "world means the inertial frame; rename that body or frame",
                )
        elif fr not in names:
            raise RobotFileError(
                file, f"{where}.{key}",
                f"unknown frame {fr!r}; use a body or frame name ({', '.join(names)})"
                + (" or world" if key == "frame_b" else ""),
            )


def _loop_axis(it: dict, kind: str, where: str, file: str | Path) -> Any:
    """The ``axis`` of one ``loops`` item: required (non-zero, finite) for revolute and prismatic cuts."""
    axis = it.get("axis")
    if kind in ("revolute", "prismatic"):
        if axis is None:
            raise RobotFileError(
                file, f"{where}.axis",
                f"missing required key 'axis' (a {kind} cut joint needs a non-zero axis in frame_a, "
                "e.g. [0, 0, 1]); add it",
            )
        ax = np.asarray(axis, dtype=float)
        if ax.shape != (3,) or not np.all(np.isfinite(ax)) or not np.linalg.norm(ax) > 0:
            raise RobotFileError(
                file, f"{where}.axis",
                f"must be a non-zero, finite 3-vector, got {axis}; give a direction such as [0, 0, 1] "
                "(it is normalised)",
            )
    elif axis is not None:
        raise RobotFileError(
            file, f"{where}.axis",
            f"a {kind} cut joint takes no axis; remove it (or use type revolute or prismatic)",
        )
    return axis


def loops_from_doc(items: Any, robot: Robot, file: str | Path = "<robot file>") -> list[LoopClosure]:
    """Read the ``loops:`` section of a robot file (syntax in docs/robot-format.md) for ``robot``.

    Each item is a cut joint of seed 004 III-D (see :func:`soadyn.structure.close_loop`).  Raises
    ``RobotFileError`` naming ``loops[i].<field>`` and the fix: unknown or missing keys, unknown frames, a
    loop from a frame to itself, a wrong or missing axis, ``xyz``/``rpy`` on a loop that does not end at
    ``world``, duplicate loop names.  The schema of the file reader checks the types first; the checks here
    are repeated so that the function is safe on any parsed document.
    """
    if items is None:
        return []
    if not isinstance(items, list):
        raise RobotFileError(
            file,
            "loops",
            "expected a list of loop closures, e.g. "
            "[{name: grasp, frame_a: ee2, frame_b: handle, type: weld}]",
        )
    allowed = ("name", "frame_a", "frame_b", "type", "axis", "xyz", "rpy")
    names = [*robot.body_names, *robot.frame_names]
    out: list[LoopClosure] = []
    explicit: dict[str, int] = {}
    for i, it in enumerate(items):
        where = f"loops[{i}]"
        if not isinstance(it, dict):
            raise RobotFileError(file, where, "expected a mapping with keys frame_a, frame_b, type")
        extra = sorted(str(k) for k in it if k not in allowed)
        if extra:
            raise RobotFileError(
                file, f"{where}.{extra[0]}",
                f"unknown key {extra[0]!r}; allowed keys here: {', '.join(sorted(allowed))} "
                "(check the spelling)",
            )
        _check_loop_frames(it, where, file, names)
        if it["frame_a"] == it["frame_b"]:
            raise RobotFileError(
                file, f"{where}.frame_b",
                f"is {it['frame_b']!r}, the same as frame_a; a loop joins two different frames, name another",
            )
        kind = it.get("type", "weld")
        if kind not in LOOP_TYPES:
            raise RobotFileError(
                file, f"{where}.type", f"{kind!r} is not allowed; use one of: {', '.join(LOOP_TYPES)}"
            )
        axis = _loop_axis(it, kind, where, file)
        wp = None
        for key in ("xyz", "rpy"):
            if key in it and it["frame_b"] != "world":
                raise RobotFileError(
                    file, f"{where}.{key}",
                    "places the grapple point in the inertial frame and is allowed only with frame_b: "
                    "world; remove it (frame_b's own placement is its frame)",
                )
        if "xyz" in it or "rpy" in it:
            wp = Placement.from_xyz_rpy(it.get("xyz", [0.0, 0.0, 0.0]), it.get("rpy", [0.0, 0.0, 0.0]))
        name = it.get("name")
        if name is not None:
            if not isinstance(name, str) or not name:
                raise RobotFileError(file, f"{where}.name", f"expected a non-empty name, got {name!r}")
            if name in explicit:
                raise RobotFileError(
                    file, f"{where}.name",
                    f"duplicate loop name {name!r} (also loops[{explicit[name]}]); loop names must be "
                    "unique, rename one",
                )
            explicit[name] = i
        else:  # default loop<n>, avoiding the names given explicitly anywhere in the section
            later = {str(x.get("name")) for x in items[i + 1 :] if isinstance(x, dict)}
            taken = {lc.name for lc in out} | later
            name = unique_name(f"loop{len(out) + 1}", taken)
        # the reader's normalisation of the axis keeps unit axes bit for bit (see unit_axis)
        out.append(LoopClosure(name, it["frame_a"], it["frame_b"], kind,
                               None if axis is None else unit_axis(axis), wp))
    return out


# ---- YAML output -------------------------------------------------------------------------------


def _floats(a: Any) -> list[float]:
    return [float(x) + 0.0 for x in np.asarray(a, dtype=float).ravel()]  # + 0.0: no "-0.0" in files


def _file_rpy(R: np.ndarray) -> np.ndarray:
    """Roll-pitch-yaw for a file: :func:`matrix_to_rpy`, nudged by up to one ulp per angle when that makes
    the reader's ``Placement.from_xyz_rpy`` rebuild ``R`` bit for bit (then the model read back has the
    same fingerprint); otherwise the closest angles (rotation error about 1e-16)."""
    rpy = matrix_to_rpy(R)
    if np.array_equal(Placement.from_xyz_rpy(np.zeros(3), rpy).R, R):
        return rpy
    cands = [[a, math.nextafter(a, -math.inf), math.nextafter(a, math.inf)] for a in rpy]
    for r0 in cands[0]:
        for r1 in cands[1]:
            for r2 in cands[2]:
                trial = np.array([r0, r1, r2])
                if np.array_equal(Placement.from_xyz_rpy(np.zeros(3), trial).R, R):
                    return trial
    return rpy


def _placement_dict(X: Placement, always: bool = False) -> dict[str, list[float]]:
    """``xyz``/``rpy`` entries of a placement (zero parts omitted unless ``always``)."""
    out: dict[str, list[float]] = {}
    if always or np.any(X.p):
        out["xyz"] = _floats(X.p)
    if not np.array_equal(X.R, np.eye(3)):
        out["rpy"] = _floats(_file_rpy(X.R))
    return out


def to_dict(robot: Robot) -> dict[str, Any]:
    """The robot as a robot-file document (plain dicts and lists; the merged model, fixed joints as frames).

    Loop closures are written under ``loops`` (syntax in docs/structure-changes.md).
    """
    doc: dict[str, Any] = {"name": robot.name, "base": robot.base}
    if np.any(robot.gravity):
        doc["gravity"] = _floats(robot.gravity)
    bodies = []
    for k in range(robot.n_bodies):
        ine = robot.inertias[k]
        b: dict[str, Any] = {"name": robot.body_names[k]}
        if k > 0:
            b["parent"] = robot.body_names[robot.parent[k]]
            j = robot.joints[k]
            b["joint"] = {
                "name": j.name,
                "type": j.type,
                "axis": _floats(j.axis),
                **_placement_dict(j.placement),
            }
            if j.has_drive:
                for key in ("armature", "damping", "friction"):
                    if getattr(j, key):
                        b["joint"][key] = float(getattr(j, key))
                if j.friction and j.friction_velocity != FRICTION_VELOCITY:
                    b["joint"]["friction_velocity"] = float(j.friction_velocity)
            if j.mimic is not None:
                b["joint"]["mimic"] = {"joint": j.mimic.joint, "multiplier": float(j.mimic.multiplier),
                                       "offset": float(j.mimic.offset)}
        b["mass"] = float(ine.mass)
        if ine.mass > 0:
            if np.any(ine.com):
                b["com"] = _floats(ine.com)
            I = ine.inertia
            b["inertia"] = {
                "ixx": float(I[0, 0]),
                "iyy": float(I[1, 1]),
                "izz": float(I[2, 2]),
                "ixy": float(I[0, 1]),
                "ixz": float(I[0, 2]),
                "iyz": float(I[1, 2]),
            }
        bodies.append(b)
    doc["bodies"] = bodies
    if robot.frames:
        doc["frames"] = [
            {"name": f.name, "body": robot.body_names[f.body], **_placement_dict(f.placement)}
            for f in robot.frames
        ]
    if robot.loops:
        doc["loops"] = []
        for lc in robot.loops:
            d: dict[str, Any] = {
                "name": lc.name,
                "frame_a": lc.frame_a,
                "frame_b": lc.frame_b,
                "type": lc.type,
            }
            if lc.axis is not None:
                d["axis"] = _floats(lc.axis)
            if lc.world_placement is not None:  # written even if identity: None and identity hash apart
                d.update(_placement_dict(lc.world_placement, always=True))
            doc["loops"].append(d)
    if robot.param_bodies:
        doc["parameters"] = list(robot.param_bodies)
    return doc


def to_yaml(robot: Robot, path: str | Path | None = None) -> str:
    """Write the robot as a YAML robot file (returns the text; writes it to ``path`` if given).

    Floats are written with full (repr) precision and roll-pitch-yaw angles are chosen so that the reader
    rebuilds each rotation bit for bit where such angles exist; unit axes are kept as written by the
    reader.  So a model read from a file, with fixed/freed base or loops added, reads back with the same
    fingerprint.  Rotations composed by :func:`soadyn.structure.invert` / ``lock_joints`` are in general
    not exactly representable by rpy angles and come back to about 1e-16 (and their inertias, made exactly
    symmetric by the reader, to about 1e-16 relative).
    """
    text = "# written by soadyn.model.to_yaml\n" + yaml.safe_dump(
        to_dict(robot), sort_keys=False, default_flow_style=None, width=120
    )
    if path is not None:
        Path(path).write_text(text, encoding="utf-8")
    return text
