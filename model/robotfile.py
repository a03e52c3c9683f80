"""Robot files (YAML) -> :class:`~soadyn.model.robot.Robot`, with validation.

The format is documented in ``docs/robot-format.md``.  Reading happens in three stages, each of which
stops at the first problem with a :class:`RobotFileError` naming the file, the field (``bodies[3].inertia``)
and the fix:

1. YAML parsing (``yaml.safe_load`` semantics, plus: duplicate mapping keys are errors, and numbers such
   as ``1e-3`` are read as floats as in YAML 1.2 -- PyYAML's YAML 1.1 rules would read them as strings);
2. structure, against the JSON schema ``schema.json`` (Draft 2020-12, unknown keys are errors);
3. meaning: a single tree with one root, unique names, physically valid masses and inertias, a
   non-singular mass matrix (:func:`check_mass_matrix`), and loop closures (``loops:``, seed 004 III-D)
   between known frames (:func:`soadyn.structure.operations.loops_from_doc`).

Massless bodies: a body may have ``mass: 0`` only if it is attached by a ``fixed`` joint (a massless
frame such as a tool point), or if it is the root of a robot with a fixed base (the base never moves, so
its inertia never enters the dynamics).  A moving body needs positive mass and a positive-definite inertia
that satisfies the triangle inequality; with that, the joint-space mass matrix is positive definite.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import yaml

from soadyn.model.robot import BASE_TYPES, BodySpec, Inertia, Joint, Placement, Robot

#: Relative tolerance of the triangle inequality on principal moments (fraction of the trace).
TRIANGLE_TOL = 1e-6
#: Relative tolerance of the symmetry check of a 3x3 inertia matrix.
SYMMETRY_TOL = 1e-9


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


# ---- YAML parsing ------------------------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and reads YAML 1.2 floats like ``1e-3``."""


_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark,
                f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1}); remove one of them",
                key_node.start_mark)
        seen[key] = key_node
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


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
        return yaml.load(raw, Loader=_Loader)  # noqa: S506 - _Loader derives from SafeLoader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "YAML"
        problem = str(e.problem) + (f" ({e.context})" if e.context else "")
        raise RobotFileError(path, where, f"YAML syntax error: {problem}; fix the YAML syntax") from None
    except yaml.YAMLError as e:
        raise RobotFileError(path, "", f"YAML error: {e}") from None
    except UnicodeDecodeError:
        raise RobotFileError(path, "", "not UTF-8 text; a robot file must be a UTF-8 YAML file") from None


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
        return f"string {x!r}"
    if isinstance(x, (int, float)):
        return f"number {x}"
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
        extra = sorted(k for k in inst if k not in allowed)
        return (field_path(parts + [str(extra[0])]),
                f"unknown key {extra[0]!r}; allowed keys here: {', '.join(allowed)} (check the spelling)")
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
        return field_path(parts), f"{inst!r} is not allowed; use one of: {opts}"
    if v in ("minItems", "maxItems"):
        if last == "inertia":
            return field_path(parts), f"a 3x3 inertia needs 3 rows, got {len(inst)}"
        if last == "bodies":
            return field_path(parts), "no bodies; list at least the base body"
        return field_path(parts), f"expected 3 numbers [x, y, z], got {len(inst)}"
    if v == "minLength":
        return field_path(parts), "must not be empty; give a name"
    return field_path(parts), err.message


def _doc_order(err: jsonschema.ValidationError) -> tuple:
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in err.absolute_path)


def validate_schema(doc: Any, file: str | Path) -> None:
    """Check ``doc`` (parsed YAML) against :func:`schema`; raise :class:`RobotFileError` on the first
    error."""
    if not isinstance(doc, dict):
        what = "empty" if doc is None else f"{_type_name(doc)}"
        raise RobotFileError(file, "(top level)",
                             f"file is {what}; a robot file is a mapping with keys name, base, bodies")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(doc), key=_doc_order)
    if errors:
        field, problem = _schema_message(errors[0])
        raise RobotFileError(file, field, problem)


def _check_finite(x: Any, parts: list, file: str | Path) -> None:
    if isinstance(x, dict):
        for k, v in x.items():
            _check_finite(v, parts + [str(k)], file)
    elif isinstance(x, list):
        for i, v in enumerate(x):
            _check_finite(v, parts + [i], file)
    elif isinstance(x, float) and not math.isfinite(x):
        raise RobotFileError(file, field_path(parts), f"is {x} (not finite); use a finite number")


# ---- physical checks (shared with the URDF reader) --------------------------------------------------------

def inertia_matrix(x: dict | list) -> np.ndarray:
    """3x3 matrix of a schema-valid inertia entry (mapping ``ixx..iyz`` or nested 3x3 list)."""
    if isinstance(x, dict):
        return np.array([[x["ixx"], x.get("ixy", 0.0), x.get("ixz", 0.0)],
                         [x.get("ixy", 0.0), x["iyy"], x.get("iyz", 0.0)],
                         [x.get("ixz", 0.0), x.get("iyz", 0.0), x["izz"]]], dtype=float)
    return np.array(x, dtype=float)


def inertia_problem(I: np.ndarray, triangle: bool = True) -> str | None:
    """Why ``I`` (3x3, about the CoM) is not a rigid-body inertia, or None if it is.

    Checks symmetry, positive definiteness and (if ``triangle``) the triangle inequality
    ``A + B >= C`` on the principal moments, with tolerance ``TRIANGLE_TOL * trace``.
    """
    scale = float(np.max(np.abs(I))) if I.size else 0.0
    asym = float(np.max(np.abs(I - I.T)))
    if asym > SYMMETRY_TOL * scale + 1e-300:
        i, j = np.unravel_index(int(np.argmax(np.abs(I - I.T))), I.shape)
        return (f"not symmetric (row {i} column {j} is {I[i, j]:g} but row {j} column {i} is {I[j, i]:g}); "
                "an inertia matrix equals its transpose, make the off-diagonal pairs equal")
    ev = np.linalg.eigvalsh(0.5 * (I + I.T))
    if not ev[0] > 1e-12 * max(ev[-1], 0.0) or ev[0] <= 0.0:
        return (f"not positive definite (eigenvalues {', '.join(f'{e:.6g}' for e in ev)}); "
                "check the magnitudes and the signs of the products of inertia "
                "(convention I_xy = -integral(x y dm))")
    if triangle:
        a, b, c = ev
        if a + b < c - TRIANGLE_TOL * (a + b + c):
            return (f"violates the triangle inequality on the principal moments "
                    f"({a:.6g} + {b:.6g} < {c:.6g}); no rigid body has these moments, check the values")
    return None


def check_mass_matrix(robot: Robot, n_configs: int = 2) -> tuple[int, str] | None:
    """Find a joint (or the free base) whose articulated inertia is singular, i.e. a singular mass matrix.

    Runs the articulated-body recursion (seed 000, Alg. 2: P(k), D(k) = H P H*) at the neutral
    configuration and at a fixed pseudo-random one.  Returns ``(k, problem)`` for the first body ``k``
    (tip to base) whose hinge inertia ``D(k)`` vanishes (``k = 0``: the free base's 6x6 articulated
    inertia is singular), else None.  M is positive definite iff every D(k) is (innovations
    factorisation, seed 000 Lemma 2.1).  A vanishing D(k) only spoils the quantities inboard of k, which
    are checked after it.
    """
    from soadyn.symbolic.algorithms import articulated_body
    from soadyn.symbolic.scalar import NUMERIC

    rng = np.random.default_rng(12345)
    for c in range(n_configs):
        q = robot.neutral()
        if c > 0:
            q[robot.base_nq:] = rng.uniform(-1.0, 1.0, robot.n_joints)
        with np.errstate(divide="ignore", invalid="ignore"):
            ab = articulated_body(robot, NUMERIC, q)
        for k in range(robot.n_bodies - 1, 0, -1):
            D, norm = float(ab.D[k]), float(np.max(np.abs(ab.P[k])))
            if not D > 1e-10 * norm or D <= 0.0:
                j = robot.joints[k]
                what = ("moment of inertia about its axis" if j.type == "revolute"
                        else "mass along its axis")
                return k, (f"joint {j.name!r} carries zero {what} (body {robot.body_names[k]!r} and "
                           "everything outboard of it), so the mass matrix would be singular; give a "
                           "moving body outboard of the joint mass and inertia, or make the joint fixed")
        if robot.is_free:
            P0 = np.asarray(ab.P[0], dtype=float)
            ev = np.linalg.eigvalsh(0.5 * (P0 + P0.T))
            if not ev[0] > 1e-10 * max(ev[-1], 0.0):
                return 0, (f"the free-floating base's articulated inertia is singular (eigenvalues "
                           f"{', '.join(f'{e:.3g}' for e in ev)}): the base body {robot.body_names[0]!r} and "
                           "the joints cannot resist all base motions; give the base mass and inertia "
                           "(or use base: fixed)")
    return None


# ---- semantic checks and building ---------------------------------------------------------------------

def _vec(x: Sequence[float] | None) -> np.ndarray:
    return np.zeros(3) if x is None else np.asarray(x, dtype=float)


def unit_axis(x: Sequence[float]) -> np.ndarray:
    """The axis divided by its norm; an axis already of unit norm (within 4 ulp) is kept bit for bit, so
    that a model written by ``structure.to_yaml`` reads back with the same fingerprint (dividing a unit
    vector by its floating-point norm changes the last bit of about a third of them)."""
    a = np.asarray(x, dtype=float)
    n = float(np.linalg.norm(a))
    return a.copy() if abs(n - 1.0) <= 4.0 * np.finfo(float).eps else a / n


def _check_tree(doc: dict, file: str | Path) -> None:
    bodies = doc["bodies"]
    index: dict[str, int] = {}
    for i, b in enumerate(bodies):
        if b["name"] in index:
            raise RobotFileError(file, f"bodies[{i}].name",
                                 f"duplicate body name {b['name']!r} (also bodies[{index[b['name']]}]); "
                                 "body names must be unique, rename one")
        index[b["name"]] = i
    roots = [i for i, b in enumerate(bodies) if "parent" not in b]
    if not roots:
        raise RobotFileError(file, "bodies",
                             "no root body: every body names a parent; the base body must have no "
                             "'parent' key")
    if len(roots) > 1:
        names = ", ".join(f"{bodies[i]['name']!r} (bodies[{i}])" for i in roots)
        raise RobotFileError(file, f"bodies[{roots[1]}].parent",
                             f"several root bodies without 'parent': {names}; exactly one body (the base) "
                             "may omit 'parent', give the others their parent")
    for i, b in enumerate(bodies):
        if "parent" in b and b["parent"] not in index:
            raise RobotFileError(file, f"bodies[{i}].parent",
                                 f"unknown parent {b['parent']!r}; known bodies: {', '.join(index)}")
    root = roots[0]
    for i in range(len(bodies)):
        chain = [i]
        k = i
        while k != root:
            k = index[bodies[k]["parent"]]
            if k in chain:
                loop = chain[chain.index(k):] + [k]
                names = " -> ".join(repr(bodies[m]["name"]) for m in loop)
                raise RobotFileError(file, f"bodies[{i}].parent",
                                     f"parents form a cycle ({names}) not connected to the base "
                                     f"{bodies[root]['name']!r}; every chain of parents must end at the base")
            chain.append(k)
    # joints
    rb = bodies[root]
    if "joint" in rb:
        raise RobotFileError(file, f"bodies[{root}].joint",
                             f"the root body {rb['name']!r} must not have a joint (its motion is set by "
                             "'base: free|fixed'); remove the joint or give the body a parent")
    joint_names: dict[str, int] = {}
    for i, b in enumerate(bodies):
        if i == root:
            continue
        if "joint" not in b:
            raise RobotFileError(file, f"bodies[{i}].joint",
                                 f"body {b['name']!r} has a parent but no joint; add "
                                 "'joint: {name: ..., type: revolute|prismatic|fixed, axis: [x, y, z]}'")
        j = b["joint"]
        if j["name"] in joint_names:
            raise RobotFileError(file, f"bodies[{i}].joint.name",
                                 f"duplicate joint name {j['name']!r} (also bodies[{joint_names[j['name']]}]"
                                 ".joint); joint names must be unique, rename one")
        joint_names[j["name"]] = i
        if j["type"] != "fixed" and not np.any(np.asarray(j["axis"], dtype=float)):
            raise RobotFileError(file, f"bodies[{i}].joint.axis",
                                 "is zero; give a non-zero direction such as [0, 0, 1] (it is normalised)")


def _check_masses(doc: dict, base: str, file: str | Path) -> None:
    for i, b in enumerate(doc["bodies"]):
        m = b["mass"]
        fixed_joint = "joint" in b and b["joint"]["type"] == "fixed"
        is_root = "parent" not in b
        if m < 0:
            raise RobotFileError(file, f"bodies[{i}].mass", f"is negative ({m}); a mass must be >= 0")
        if m == 0:
            if not (fixed_joint or (is_root and base == "fixed")):
                why = ("the base of a free-floating robot" if is_root else "a body on a moving joint")
                raise RobotFileError(file, f"bodies[{i}].mass",
                                     f"is 0 but {b['name']!r} is {why}, which needs mass > 0; "
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
                                 f"{f['name']!r} is already a body name; bodies are frames too, "
                                 f"rename the frame")
        if f["name"] in seen:
            raise RobotFileError(file, f"frames[{i}].name",
                                 f"duplicate frame name {f['name']!r} (also "
                                 f"frames[{seen[f['name']]}]); rename one")
        seen[f["name"]] = i
        if f["body"] not in body_names:
            raise RobotFileError(file, f"frames[{i}].body",
                                 f"unknown body {f['body']!r}; known bodies: {', '.join(sorted(body_names))}")


def _build(doc: dict, base: str, file: str | Path, source_hash: str) -> Robot:
    specs: list[BodySpec] = []
    for b in doc["bodies"]:
        joint = None
        j = b.get("joint")
        if j is not None:
            if j["type"] == "fixed":
                axis = np.zeros(3)
            else:
                axis = unit_axis(j["axis"])
            X = Placement.from_xyz_rpy(_vec(j.get("xyz")), _vec(j.get("rpy")))
            joint = Joint(j["name"], j["type"], axis, X)
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
    found = check_mass_matrix(robot)
    if found is not None:
        k, problem = found
        idx = next(i for i, b in enumerate(doc["bodies"]) if b["name"] == robot.body_names[k])
        raise RobotFileError(file, f"bodies[{idx}]", problem)
    return robot


def check_base(base: str | None, file: str | Path) -> None:
    if base is not None and base not in BASE_TYPES:
        raise RobotFileError(file, "base (override)", f"{base!r} is not allowed; use one of: free, fixed")


def parse_robot_yaml(raw: bytes, file: str | Path, base: str | None = None) -> Robot:
    """Validate and build a robot from YAML bytes (``file`` is used in messages and as ``robot.source``)."""
    check_base(base, file)
    doc = _parse_yaml(Path(file), raw)
    validate_schema(doc, file)
    _check_finite(doc, [], file)
    base = base or doc["base"]
    _check_tree(doc, file)
    _check_masses(doc, base, file)
    _check_frames(doc, file)
    robot = _build(doc, base, file, hashlib.sha256(raw).hexdigest())
    if "loops" in doc:
        from soadyn.structure.operations import loops_from_doc

        robot.loops = loops_from_doc(doc["loops"], robot, file)
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


def load_yaml(path: str | Path, base: str | None = None) -> Robot:
    """Read, validate and build a YAML robot file; ``base`` ('free' | 'fixed') overrides the file's ``base``.

    Raises :class:`RobotFileError` (a ``ValueError``) naming the file, field and fix on any problem.
    """
    path = Path(path)
    raw = read_bytes(path)
    return parse_robot_yaml(raw, path, base)
