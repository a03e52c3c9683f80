"""URDF import into :class:`~soadyn.model.robot.Robot`.

Library choice: the URDF is parsed with ``yourdfpy`` (maintained, pure Python on lxml, BSD/MIT), with
``load_meshes=False, build_scene_graph=False, load_collision_meshes=False`` and a null filename handler,
so mesh files are never looked up and a URDF whose meshes are missing (the usual case outside ROS) still
loads.  ``urdfdom``/Pinocchio are C++ and would make the generator depend on a compiled stack; ``urdfpy``
is unmaintained.  yourdfpy is lenient in two places, which this module closes before handing it the
file: on malformed XML it silently falls back to a "recover" parse, and it fills missing inertia
attributes with defaults.  So the XML is first parsed strictly with lxml here (syntax errors are reported
with their line), and the numeric attributes we use are checked (count, number syntax, finiteness), with
the line of the offending element in the message.

Mapping to the model (see ``docs/robot-format.md``):

* ``continuous`` joints are ``revolute``; ``fixed`` joints are merged into their parent body by
  :meth:`Robot.from_specs` (the merged link survives as a named frame); a ``floating`` joint that is the
  only joint of a massless root link (``world``) makes its child the base (free by default; welded with
  ``base='fixed'``); other ``floating`` joints and ``planar`` joints are errors.
  ``<mimic joint multiplier offset>`` joints are true couplings by default
  (``mimic='couple'``: ``q = multiplier q_joint + offset``, no coordinate of their own, chains resolved,
  cycles and unknown joints are errors); ``'independent'`` treats them as ordinary joints (what
  ``pinocchio.buildModelFromUrdf`` does by default), ``'fixed'`` locks them at position zero and
  ``'error'`` refuses them.
* The joint frame is the ``<origin>`` of the joint in the parent link frame; the axis (default
  ``1 0 0`` as in the URDF spec) is normalised.  The joint frame becomes the child body frame.
* ``<inertial>``: ``<origin xyz>`` is the centre of mass; ``<origin rpy>`` rotates the inertia tensor
  into the link frame, ``I_link = R I R^T``.  A link without ``<inertial>`` has zero mass; mass 0 with a
  tensor keeps the tensor (a rotational inertia, as in Pinocchio).  Masses must be
  >= 0 and tensors positive semi-definite (point masses are accepted); a tensor that violates the
  triangle inequality only gives a warning, since several published URDFs do so and the dynamics stay
  well-posed.  A moving joint that carries no inertia (e.g. a massless moving leaf link) makes the mass
  matrix singular and is an error naming the joint when the checked loader is used
  (:func:`soadyn.load_robot`, i.e. :func:`soadyn.symbolic.checks.check_mass_matrix`).
* Body order: depth-first from the root link, siblings in the order their joints appear in the file.
  Pinocchio (urdfdom) also orders depth-first but visits siblings sorted by joint name, so for trees the
  two joint orders can differ (never for serial chains); permute by joint name.
* ``<dynamics damping friction>`` of a moving joint become its viscous damping and Coulomb friction
  (smoothed, docs/conventions.md "Drive train"); URDF has no rotor inertia, so soadyn reads two extension
  attributes of the same element, ``armature`` (I_m n^2) and ``friction_velocity`` (smoothing scale),
  which other URDF readers ignore: ``<dynamics damping="0.5" friction="1.2" armature="0.1"/>``.  Negative
  values are errors.  ``dynamics_on=False`` ignores ``<dynamics>`` (ideal joints).
* Default base: ``free`` (a space robot); gravity zero.
"""

from __future__ import annotations

import hashlib
import io
import math
import warnings
from pathlib import Path

import numpy as np
from lxml import etree

import soadyn.model.exact as exact
from soadyn.model.names import brief, terminal
from soadyn.model.robot import (
    BodySpec,
    Inertia,
    Joint,
    Mimic,
    MimicError,
    Placement,
    Robot,
    resolve_mimics,
    snap,
    snap_rotation,
)
from soadyn.model.robotfile import (
    MIN_MAGNITUDE,
    MassCheck,
    RobotFileError,
    axis_problem,
    check_base,
    check_number,
    drive_fields,
    drive_problem,
    inertia_problem,
    read_bytes,
    unit_axis,
)

MIMIC_MODES = ("couple", "error", "independent", "fixed")

# numeric attributes checked before yourdfpy sees them: element tag -> {attribute: count}
_NUMERIC = {
    "origin": {"xyz": 3, "rpy": 3},
    "axis": {"xyz": 3},
    "mass": {"value": 1},
    "dynamics": {"damping": 1, "friction": 1, "armature": 1, "friction_velocity": 1},
}
#: attributes of ``<dynamics>`` read into the joint (``armature`` and ``friction_velocity`` are soadyn
#: extensions that other URDF readers ignore)
_DYNAMICS_ATTRS = ("armature", "damping", "friction", "friction_velocity")
_INERTIA_ATTRS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")


def _q(name: object) -> str:
    """A name as a bounded, terminal-safe, double-quoted attribute value for messages."""
    text = str(name)
    return '"' + terminal(text[:40]).replace('"', '\\"') + '"' + ("..." if len(text) > 40 else "")


def _where(el: etree._Element) -> str:
    """``<joint name="j1"> (line 40)`` for the link/joint enclosing ``el``."""
    owner = el
    while owner is not None and owner.tag not in ("link", "joint"):
        owner = owner.getparent()
    if owner is None:
        return f"<{el.tag}> (line {el.sourceline})"
    inner = "" if owner is el else f"/{el.tag}"
    return f"<{owner.tag} name={_q(owner.get('name', '?'))}>{inner} (line {el.sourceline})"


def _numbers(text: str, n: int, path: Path, el: etree._Element, attr: str) -> list[float]:
    parts = text.split()
    shown = brief(text, 40)
    try:
        vals = [float(p) for p in parts[: n + 1]]
    except ValueError:
        raise RobotFileError(path, _where(el), f"{attr}={shown} is not {n} number(s); write e.g. "
                             f"{attr}=\"{' '.join(['0'] * n)}\"") from None
    if len(parts) != n:
        raise RobotFileError(path, _where(el), f"{attr}={shown} has {len(parts)} number(s), expected {n}")
    for v in vals:
        # an <origin>'s or <inertia>'s |x| < MIN_MAGNITUDE is an exporter's rounding of 0 (iCub writes
        # xyz -7.46e-34 and ixz 2.4e-35): read as the 0 it is (placements round every |x| < 1e-14 to 0,
        # ``snap``; ``parse_urdf`` zeroes such tensor entries)
        if not (el.tag in ("origin", "inertia") and math.isfinite(v) and abs(v) < MIN_MAGNITUDE):
            check_number(v, f"{_where(el)} {attr}", path)
    return vals


def _prevalidate(root: etree._Element, path: Path) -> None:
    """Strict checks yourdfpy does not make (names, numbers, required inertia attributes)."""
    if root.tag != "robot":
        raise RobotFileError(path, f"<{root.tag}> (line {root.sourceline})",
                             "the root element must be <robot name=\"...\">; is this a URDF file?")
    if not root.get("name"):
        raise RobotFileError(path, f"<robot> (line {root.sourceline})", "missing the 'name' "
                                                                        "attribute; add it")
    if root.find("link") is None:
        raise RobotFileError(path, f"<robot> (line {root.sourceline})", "no <link> elements; nothing to load")
    for tag in ("link", "joint"):
        for el in root.findall(tag):
            if not el.get("name"):
                raise RobotFileError(path, f"<{tag}> (line {el.sourceline})", "missing the 'name' "
                                                                              "attribute; add it")
    for j in root.findall("joint"):
        for sub in ("parent", "child"):
            e = j.find(sub)
            if e is None or not e.get("link"):
                raise RobotFileError(path, _where(j), f"missing <{sub} link=\"...\"/>; add it")
        if not j.get("type"):
            raise RobotFileError(path, _where(j), "missing the 'type' attribute (revolute, continuous, "
                                 "prismatic or fixed)")
    for el in root.iter():
        spec = _NUMERIC.get(el.tag) if isinstance(el.tag, str) else None
        if spec and (el.getparent() is not None and el.getparent().tag in ("joint", "inertial")):
            for attr, n in spec.items():
                if el.get(attr) is not None:
                    _numbers(el.get(attr), n, path, el, attr)
    for link in root.findall("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        mass = inertial.find("mass")
        if mass is None or mass.get("value") is None:
            raise RobotFileError(path, _where(inertial), "missing <mass value=\"...\"/>; add it or remove "
                                 "<inertial> (a link without <inertial> is massless)")
        ine = inertial.find("inertia")
        if ine is None:
            raise RobotFileError(path, _where(inertial), "missing <inertia ixx=... iyy=... izz=... ixy=... "
                                 "ixz=... iyz=.../>; add it")
        for a in _INERTIA_ATTRS:
            if ine.get(a) is None:
                raise RobotFileError(path, _where(ine), f"missing attribute {a!r}; URDF needs all six of "
                                     f"{', '.join(_INERTIA_ATTRS)}")
            _numbers(ine.get(a), 1, path, ine, a)


def _placement(T: np.ndarray | None) -> Placement:
    if T is None:
        return Placement.identity()
    T = np.asarray(T, dtype=float)
    return Placement(snap_rotation(T[:3, :3]), snap(T[:3, 3]))


def parse_urdf(raw: bytes, path: str | Path, base: str | None = None, mimic: str = "couple", *,
               check: MassCheck | None = None, dynamics_on: bool = True) -> Robot:
    """Build a robot from URDF bytes (``path`` is used in messages and as ``robot.source``); ``check``
    (see :data:`~soadyn.model.robotfile.MassCheck`) runs on the built tree.  ``dynamics_on=False`` ignores
    every ``<dynamics>`` element (ideal joints, as Pinocchio's RNEA/ABA and soadyn before issue 25)."""
    path = Path(path)
    check_base(base, path)
    if mimic not in MIMIC_MODES:
        raise ValueError(f"mimic must be one of {MIMIC_MODES}, got {mimic!r}")
    # internal entities are expanded here (libxml2 bounds their amplification), external ones never
    # (no file or network access); yourdfpy then reads the expanded tree we checked, not the raw bytes
    parser = etree.XMLParser(remove_blank_text=True, resolve_entities="internal", no_network=True,
                             load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(raw, parser=parser)
    except etree.XMLSyntaxError as e:
        line = e.lineno if e.lineno else "?"
        raise RobotFileError(path, f"line {line}", f"XML syntax error: {brief(e.msg, 120)[1:-1]}; fix the "
                             "XML") from None
    for el in root.iter():
        if not isinstance(el.tag, str) and el.tag is etree.Entity:
            raise RobotFileError(path, f"line {el.sourceline}", f"entity {brief(el.text, 40)} is not "
                                 "defined in the file (external entities are not read); write the value")
    _prevalidate(root, path)
    dynamics: dict[str, dict[str, float]] = {}
    for je in root.findall("joint"):
        de = je.find("dynamics")
        if de is not None:
            dynamics[je.get("name")] = {a: float(de.get(a)) for a in _DYNAMICS_ATTRS if de.get(a) is not None}
    expanded = etree.tostring(root, encoding="utf-8")
    lines = {(el.tag, el.get("name")): el.sourceline for el in root if el.tag in ("link", "joint")}

    def where(tag: str, name: str) -> str:
        return f"<{tag} name={_q(name)}> (line {lines.get((tag, name), '?')})"

    import yourdfpy  # slow to import: only once the file passed the strict checks

    try:
        model = yourdfpy.URDF.load(io.BytesIO(expanded), build_scene_graph=False,
                                   build_collision_scene_graph=False,
                                   load_meshes=False, load_collision_meshes=False,
                                   filename_handler=yourdfpy.filename_handler_null).robot
    except Exception as e:  # yourdfpy raises assorted errors on odd input; report them with the file
        raise RobotFileError(path, "", f"yourdfpy could not read the URDF ({type(e).__name__}: "
                             f"{brief(str(e), 120)})") from None

    # names and tree shape
    link_names: list[str] = []
    for link in model.links:
        if link.name in link_names:
            raise RobotFileError(path, where("link", link.name), "duplicate link name; link names "
                                                                 "must be unique")
        link_names.append(link.name)
    joint_of_child: dict[str, object] = {}
    seen_joints: set[str] = set()
    for j in model.joints:
        if j.name in seen_joints:
            raise RobotFileError(path, where("joint", j.name), "duplicate joint name; joint names "
                                                               "must be unique")
        seen_joints.add(j.name)
        for role, ln in (("parent", j.parent), ("child", j.child)):
            if ln not in link_names:
                raise RobotFileError(path, where("joint", j.name), f"{role} link {brief(ln)} is not defined; "
                                     "add the <link> or fix the name")
        if j.child in joint_of_child:
            raise RobotFileError(path, where("joint", j.name),
                                 f"link {brief(j.child)} is already the child of joint "
                                 f"{brief(joint_of_child[j.child].name)}; "
                                 "a URDF must be a tree (closed loops are not supported)")
        joint_of_child[j.child] = j
    roots = [ln for ln in link_names if ln not in joint_of_child]
    if len(roots) != 1:
        what = "no root link (the joints form a cycle)" if not roots else f"several root links {brief(roots)}"
        field = where("link", roots[1]) if roots else "<robot>"
        raise RobotFileError(path, field, f"{what}; a URDF must be a single tree: connect every link to "
                             "one root link by joints")

    # joints
    specs: list[BodySpec] = []
    links = {link.name: link for link in model.links}

    def inertia_of(name: str) -> Inertia:
        link = links[name]
        ine = link.inertial
        if ine is None or ine.mass is None:
            return Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
        m = float(ine.mass)
        if m < 0:
            raise RobotFileError(path, where("link", name) + "/inertial", f"negative mass {m}; a "
                                                                          f"mass must be >= 0")
        X = _placement(ine.origin)
        I0 = np.asarray(ine.inertia, dtype=float)
        I0 = np.where(np.abs(I0) < MIN_MAGNITUDE, 0.0, I0)      # rounding residue (see _numbers)
        I = exact.congruence(X.R, 0.5 * (I0 + I0.T))
        if np.any(I):
            ev = np.linalg.eigvalsh(I)
            # relative to the link's own scale: its largest moment, or m |c|^2 about the link frame
            # (iCub's l_ankle_2 writes a zero tensor but ixz = 1.36e-20, with m |c|^2 = 8.3e-4)
            if ev[0] < -1e-9 * max(ev[-1], m * float(X.p @ X.p)):
                raise RobotFileError(path, where("link", name) + "/inertial",
                                     f"inertia not positive semi-definite (eigenvalues "
                                     f"{', '.join(f'{e:.6g}' for e in ev)}); check the values and signs")
            if ev[0] > 0:
                problem = inertia_problem(I)
                if problem:
                    warnings.warn(f"{path}: {where('link', name)}/inertial: inertia {problem}",
                                  stacklevel=3)
        # mass 0 keeps its rotational inertia, as Pinocchio does (Bolt's feet: mass 0, I = diag(5.7e-7, ...))
        return Inertia(m, X.p if m else np.zeros(3), I)

    root_link = roots[0]
    joints = list(model.joints)
    welded: set[str] = set()
    # the usual way to write a floating base: a massless root link (e.g. "world") whose only joint is
    # ``floating``; the child is then the base (free by default; base 'fixed' welds it at the origin)
    root_joints = [j for j in joints if j.parent == root_link]
    if len(root_joints) == 1 and root_joints[0].type == "floating" and inertia_of(root_link).mass == 0:
        fj = root_joints[0]
        if base == "fixed":
            welded.add(fj.name)
        else:
            if fj.origin is not None and not np.array_equal(np.asarray(fj.origin, dtype=float), np.eye(4)):
                raise RobotFileError(path, where("joint", fj.name), "a floating root joint with an <origin> "
                                     "is not supported (the base pose is the state q); remove the <origin>")
            joints.remove(fj)
            root_link = fj.child
            base = base or "free"
    specs.append(BodySpec(root_link, None, None, inertia_of(root_link)))
    mimics: dict[str, Mimic] = {}
    if mimic == "couple":
        movable = {j.name for j in model.joints if j.type in ("revolute", "continuous", "prismatic")}
        written = {j.name: Mimic(j.mimic.joint,
                                 1.0 if j.mimic.multiplier is None else float(j.mimic.multiplier),
                                 0.0 if j.mimic.offset is None else float(j.mimic.offset))
                   for j in model.joints if j.mimic is not None}
        for name, mm in written.items():
            for v in (mm.multiplier, mm.offset):
                check_number(v, where("joint", name) + "/mimic", path)
        try:
            mimics = resolve_mimics(written, movable)
        except MimicError as e:
            raise RobotFileError(path, where("joint", e.joint) + "/mimic",
                                 f"{e.problem} (or load the file with mimic='independent' or 'fixed', "
                                 "--mimic on the command line)") from None
    for j in joints:
        jtype = "fixed" if j.name in welded else j.type
        if j.mimic is not None and mimic != "couple":
            if mimic == "error":
                raise RobotFileError(path, where("joint", j.name),
                                     f"mimic joint (follows {brief(j.mimic.joint)}) refused (mimic='error'); "
                                     "load with mimic='couple' (the default: a true coupling), "
                                     "'independent' (an ordinary joint, as Pinocchio does by default) or "
                                     "'fixed' (locked at 0)")
            if mimic == "fixed":
                jtype = "fixed"
        if jtype == "continuous":
            jtype = "revolute"
        if jtype == "floating":
            raise RobotFileError(path, where("joint", j.name),
                                 "a floating joint is supported only as the one joint of a massless root "
                                 "link (e.g. 'world'), which makes its child the free base; use revolute, "
                                 "continuous, prismatic or fixed here")
        if jtype == "planar":
            raise RobotFileError(path, where("joint", j.name),
                                 "joint type 'planar' is not supported; write it as two prismatic joints and "
                                 "a revolute joint through massless links")
        if jtype not in ("revolute", "prismatic", "fixed"):
            raise RobotFileError(path, where("joint", j.name),
                                 f"unknown joint type {brief(jtype)}; use revolute, continuous, prismatic "
                                 f"or fixed")
        if jtype == "fixed":
            axis = np.zeros(3)
        else:
            axis = np.asarray(j.axis if j.axis is not None else (1.0, 0.0, 0.0), dtype=float)
            problem = axis_problem(axis)
            if problem:
                raise RobotFileError(path, where("joint", j.name), f"axis {problem} (<axis xyz>)")
            axis = snap(unit_axis(axis))
        dyn = dynamics.get(j.name, {})
        if jtype == "fixed" or not dynamics_on:
            dyn = {}            # a fixed (or locked mimic) joint has no drive; URDFs often write zeros there
        drive_problem(dyn, jtype, where("joint", j.name) + "/dynamics", path)
        specs.append(BodySpec(j.child, j.parent, Joint(j.name, jtype, axis, _placement(j.origin),
                                                       **drive_fields(dyn), mimic=mimics.get(j.name)),
                              inertia_of(j.child)))
    try:
        robot = Robot.from_specs(model.name, base or "free", np.zeros(3), specs, (), source=str(path),
                                 source_hash=hashlib.sha256(raw).hexdigest())
    except ValueError as e:
        raise RobotFileError(path, "", f"{brief(str(e), 160)[1:-1]}; a URDF must be a single tree rooted at "
                             "one link") from None
    found = None if check is None else check(robot)
    if found is not None:
        k, problem = found
        field = (where("link", robot.body_names[0]) if k == 0
                 else where("joint", robot.joints[k].name))
        raise RobotFileError(path, field, problem)
    return robot


def load_urdf(path: str | Path, base: str | None = None, mimic: str = "couple", *,
              check: MassCheck | None = None, dynamics_on: bool = True) -> Robot:
    """Read a URDF file into a Robot (default base 'free'); see the module docstring for the mapping."""
    path = Path(path)
    return parse_urdf(read_bytes(path), path, base, mimic, check=check, dynamics_on=dynamics_on)
