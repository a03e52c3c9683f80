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
import json
import math
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import yaml

from soadyn.model.robot import BASE_TYPES, LOOP_TYPES, BodySpec, Inertia, Joint, LoopClosure, Placement, Robot
from soadyn.model.rotations import matrix_to_rpy

#: A check of a built robot (e.g. :func:`soadyn.symbolic.checks.check_mass_matrix`): ``(k, problem)`` for a
#: body ``k`` that makes the model unusable, else None.  The readers report it with the file and field.
MassCheck = Callable[[Robot], "tuple[int, str] | None"]

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


def _build(doc: dict, base: str, file: str | Path, source_hash: str, check: MassCheck | None) -> Robot:
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
    found = None if check is None else check(robot)
    if found is not None:
        k, problem = found
        idx = next(i for i, b in enumerate(doc["bodies"]) if b["name"] == robot.body_names[k])
        raise RobotFileError(file, f"bodies[{idx}]", problem)
    return robot


def check_base(base: str | None, file: str | Path) -> None:
    if base is not None and base not in BASE_TYPES:
        raise RobotFileError(file, "base (override)", f"{base!r} is not allowed; use one of: free, fixed")


def parse_robot_yaml(raw: bytes, file: str | Path, base: str | None = None, *,
                     check: MassCheck | None = None) -> Robot:
    """Validate and build a robot from YAML bytes (``file`` is used in messages and as ``robot.source``).

    ``check`` (see :data:`MassCheck`) runs on the built tree; a problem it finds is reported on the body."""
    check_base(base, file)
    doc = _parse_yaml(Path(file), raw)
    validate_schema(doc, file)
    _check_finite(doc, [], file)
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
