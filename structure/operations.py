"""Structure changes of a robot model (seed 004, section III): lock joints, invert the chain (new base),
fix / free the base, close a loop; the connectivity description of seed 004 (section II-A.2, Tables
II-III); and the maps between the states of two models of the same system.

Every operation returns a *new* :class:`~soadyn.model.robot.Robot` (the input is not changed) that
obeys the conventions of :mod:`soadyn.model.robot` (depth-first body order, body frame = joint frame)
and that :func:`soadyn.model.to_yaml` writes to a robot file which ``load_robot`` reads back to the same
model.

Chain inversion (seed 004 III-B) in our frame convention
--------------------------------------------------------
Let the new base be body ``b`` and the path to the old base be ``b = p_0, p_1 = parent(b), ..., p_m = 0``.
The joint ``J_i`` of body ``p_i`` (i < m) connects parent ``p_{i+1}`` to child ``p_i`` with
``X(p_{i+1} -> p_i) = P_i M(a_i, q_i)``: constant placement ``P_i`` then the joint motion ``M`` about / along
the axis ``a_i``.  After inversion ``p_{i+1}`` is the child of ``p_i`` through ``J_i``.  A body frame must be
its joint frame, so the body frame of ``p_{i+1}`` moves to ``N_{i+1} = O_{p_{i+1}} P_i`` (the parent-side copy
of the old joint frame of ``p_i``; it coincides with ``O_{p_i}`` at ``q_i = 0``).  With ``N_0 = O_b F`` (``F``
the placement of the named frame chosen as new base, identity for a body)::

    X(N_i -> N_{i+1}) = P_{i-1}^-1 M(a_i, q_i)^-1 = P_{i-1}^-1 M(-a_i, q_i)        (P_{-1} := F)

so the reversed joint has placement ``P_{i-1}^-1`` in its new parent, axis ``-a_i`` (same coordinates, the
axis is expressed in the old joint frame of ``p_i``, which is the new joint frame) and **the same joint
coordinate**: ``q_new = q_old``, ``qd_new = qd_old``, ``tau_new = tau_old`` (the joint actuator acts between
the same two bodies; reversing the axis and the roles of parent and child leaves its power
``tau * qd`` unchanged).  Inertias, children placements and named frames of a moved body ``p_i`` are
re-expressed by ``P_{i-1}^-1`` (``F^-1`` for the new base).  Each moved body is renamed
``<old name>__<joint name>`` and its old body frame is kept as a named frame called ``<old name>``, so
``robot.frame_of(<old name>)`` still finds the same physical frame.  When the new base is a named frame
``F`` on body ``b``, the new base body takes the frame's name and ``b`` becomes a named frame.

The free base's coordinates describe the new base frame ``N_0``: its pose, twist and acceleration follow
from the old state by forward kinematics (:func:`map_state`).  For a fixed base, inversion welds the new
base to the inertial frame instead of the old one (seed 004 Example 1 uses this after adding a link); the
gravity vector is then re-expressed in the new base frame at the configuration ``at`` (default: neutral).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from soadyn.model.robot import (
    LOOP_TYPES,
    BodySpec,
    Inertia,
    Joint,
    LoopClosure,
    Placement,
    Robot,
    snap,
    state_vector,
)
from soadyn.model.robotfile import unique_name
from soadyn.model.rotations import matrix_to_quaternion, quaternion_to_matrix
from soadyn.symbolic.frames import frame_motion, frame_pose


class StructureError(ValueError):
    """A structure change was asked for something the model does not have or cannot do."""


# ---- model <-> specs ---------------------------------------------------------------------------


def _specs(robot: Robot) -> tuple[list[BodySpec], list[tuple[str, str, Placement]]]:
    """File-level specs of a merged model (each body with its joint; frames by body name)."""
    bodies = [
        BodySpec(
            robot.body_names[k],
            None if k == 0 else robot.body_names[robot.parent[k]],
            robot.joints[k],
            robot.inertias[k],
        )
        for k in range(robot.n_bodies)
    ]
    frames = [(f.name, robot.body_names[f.body], f.placement) for f in robot.frames]
    return bodies, frames


def _rebuild(
    robot: Robot,
    bodies: Sequence[BodySpec],
    frames: Sequence[tuple[str, str, Placement]],
    base: str | None = None,
    gravity: np.ndarray | None = None,
    loops: Sequence[LoopClosure] | None = None,
    name: str | None = None,
) -> Robot:
    out = Robot.from_specs(
        name or robot.name,
        base or robot.base,
        robot.gravity if gravity is None else gravity,
        bodies,
        frames,
        source="",
        source_hash="",
    )
    # run-time inertial parameters stay with the bodies that remain bodies (a merged body's are folded in)
    out = out.replace(loops=robot.loops if loops is None else loops,
                      param_bodies=tuple(b for b in out.body_names if b in robot.param_bodies))
    for lc in out.loops:
        for fr in (lc.frame_a, lc.frame_b):
            if fr != "world":
                out.frame_of(fr)  # raises KeyError naming the frame if it vanished
    return out


# ---- lock joints (seed 004 III-A) --------------------------------------------------------------


def _joint_values(names: Sequence[str], at: Any, what: str) -> dict[str, float]:
    if at is None:
        return {n: 0.0 for n in names}
    if isinstance(at, Mapping):
        extra = sorted(set(at) - set(names))
        if extra:
            raise StructureError(
                f"{what}: 'at' gives values for {extra}, which are not in the joint list {list(names)}"
            )
        return {n: float(at.get(n, 0.0)) for n in names}
    vals = np.asarray(at, dtype=float).ravel()
    if vals.shape != (len(names),):
        raise StructureError(
            f"{what}: 'at' must have one value per joint ({len(names)}: {list(names)}), "
            f"got {vals.size} values; or pass a mapping joint name -> value"
        )
    if not np.all(np.isfinite(vals)):
        raise StructureError(f"{what}: 'at' contains a non-finite value: {vals.tolist()}")
    return dict(zip(names, (float(x) for x in vals)))


def _check_joint_names(robot: Robot, names: Sequence[str], what: str) -> None:
    if isinstance(names, str):
        raise StructureError(f"{what}: pass a list of joint names, not the string {names!r}")
    for n in names:
        if n not in robot.joint_names:
            raise StructureError(
                f"{what}: robot {robot.name!r} has no moving joint {n!r}; joints: {robot.joint_names}"
            )
    if len(set(names)) != len(names):
        raise StructureError(f"{what}: joint names repeated in {list(names)}")


def lock_joints(
    robot: Robot, names: Sequence[str], at: Mapping[str, float] | Sequence[float] | None = None
) -> Robot:
    """Lock the named joints at the given positions (default 0): seed 004 III-A "new number of joints".

    Each locked joint becomes a fixed joint with placement ``P M(a, at)``; its body is merged into its parent
    with the composite inertia (parallel-axis theorem, as in Walker & Orin, seed 004 ref. [5]) and survives as
    a named frame (``frame_of(<body>)`` still works), as do its children's placements and named frames.
    The locked joints' coordinates disappear from q, v and tau.
    """
    _check_joint_names(robot, names, "lock_joints")
    vals = _joint_values(names, at, "lock_joints")
    bodies, frames = _specs(robot)
    out = []
    for k, b in enumerate(bodies):
        j = b.joint
        if k > 0 and j.name in vals:
            b = BodySpec(
                b.name,
                b.parent,
                Joint(j.name, "fixed", np.zeros(3), j.placement * j.motion(vals[j.name])),
                b.inertia,
            )
        out.append(b)
    return _rebuild(robot, out, frames)


def add_body(robot: Robot, name: str, parent: str, joint: Joint, inertia: Inertia | None = None) -> Robot:
    """Attach a new body (seed 004 III-A, "new number of joints" increasing the DOF; Example 1 adds the
    grapple fixture this way).  ``parent`` is a body or named frame; ``joint.placement`` is relative to
    it.  ``inertia`` defaults to a massless body, allowed only where the body ends up as a fixed base or
    behind a fixed joint (e.g. before :func:`invert` + :func:`fix_base`)."""
    taken = set(robot.body_names) | set(robot.frame_names)
    if name in taken:
        raise StructureError(f"add_body: name {name!r} is already a body or frame of robot {robot.name!r}")
    if joint.name in robot.joint_names or any(f.name == joint.name for f in robot.frames):
        raise StructureError(f"add_body: joint name {joint.name!r} already used in robot {robot.name!r}")
    try:
        k, X = robot.frame_of(parent)
    except KeyError as e:
        raise StructureError(f"add_body: {e.args[0]}") from None
    bodies, frames = _specs(robot)
    ine = inertia if inertia is not None else Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
    bodies.append(
        BodySpec(
            name, robot.body_names[k], Joint(joint.name, joint.type, joint.axis, X * joint.placement), ine
        )
    )
    return _rebuild(robot, bodies, frames)


# ---- invert (seed 004 III-B) -------------------------------------------------------------------


def invert(robot: Robot, new_base: str, at: Mapping[str, float] | Sequence[float] | None = None) -> Robot:
    """Re-root the tree at body or named frame ``new_base`` (seed 004 III-B; see the module docstring).

    Joints on the path from the new base to the old one reverse direction (axis negated, same coordinate
    and torque); bodies on that path get their frames moved to their new joint frames and are renamed
    ``<old>__<joint>``, their old frames staying available as named frames ``<old>``; every other body,
    joint and frame keeps its name.  Bodies are numbered depth-first from the new base with the path first
    (the seed's rule: an open chain along the system first, then the remaining branches).
    ``at`` (joint name -> value or a vector in ``robot.joint_names`` order) is only used for a fixed base
    with gravity, to re-express gravity in the new base frame.
    """
    try:
        b, F = robot.frame_of(new_base)
    except KeyError as e:
        raise StructureError(f"invert: {e.args[0]}") from None
    new_is_frame = new_base not in robot.body_names
    path = [b]
    while path[-1] != 0:
        path.append(robot.parent[path[-1]])
    on_path = {k: i for i, k in enumerate(path)}
    if not robot.is_free and robot.inertias[0].mass <= 0 and len(path) > 1:
        raise StructureError(
            f"invert: the fixed base {robot.body_names[0]!r} of robot {robot.name!r} has no mass; after "
            "inversion it would be a moving body with zero mass (singular mass matrix); give it a mass and "
            "inertia first"
        )

    # S[k]: placement of the old body frame of body k in its new body frame
    S: dict[int, Placement] = {}
    newname: dict[int, str] = {}
    taken = set(robot.body_names) | set(robot.frame_names)
    for i, k in enumerate(path):
        if i == 0:
            S[k] = F.inverse()
            newname[k] = new_base if new_is_frame else robot.body_names[k]
        else:
            S[k] = robot.joints[path[i - 1]].placement.inverse()
            newname[k] = unique_name(f"{robot.body_names[k]}__{robot.joints[path[i - 1]].name}", taken)
    for k in range(robot.n_bodies):
        if k not in on_path:
            S[k] = Placement.identity()
            newname[k] = robot.body_names[k]

    specs: list[BodySpec] = []
    for i, k in enumerate(path):
        ine = robot.inertias[k].transformed(S[k])
        if i == 0:
            specs.append(BodySpec(newname[k], None, None, ine))
        else:
            jo = robot.joints[path[i - 1]]  # joint of the previous path body, reversed
            joint = Joint(jo.name, jo.type, -np.asarray(jo.axis, dtype=float), S[path[i - 1]])
            specs.append(BodySpec(newname[k], newname[path[i - 1]], joint, ine))
    for k in range(1, robot.n_bodies):
        if k in on_path:
            continue
        p = robot.parent[k]
        j = robot.joints[k]
        specs.append(
            BodySpec(
                newname[k], newname[p], Joint(j.name, j.type, j.axis, S[p] * j.placement), robot.inertias[k]
            )
        )
    frames: list[tuple[str, str, Placement]] = []
    for k in path:  # the old body frames of moved bodies, under their old names
        if newname[k] != robot.body_names[k]:
            frames.append((robot.body_names[k], newname[k], S[k]))
    for f in robot.frames:
        if new_is_frame and f.name == new_base:
            continue  # it is the new base body's frame now
        frames.append((f.name, newname[f.body], S[f.body] * f.placement))

    gravity = robot.gravity.copy()
    if not robot.is_free and np.any(gravity):
        qj = _joint_values(robot.joint_names, at, "invert")
        Rb = frame_pose(robot, [qj[n] for n in robot.joint_names], robot.body_names[b])[0] @ F.R
        gravity = snap(Rb.T @ gravity)
    return _rebuild(robot, specs, frames, gravity=gravity)


# ---- fix / free the base (seed 004 III-C) ------------------------------------------------------


def fix_base(robot: Robot, base_orientation: Sequence[float] | None = None) -> Robot:
    """Weld the base to the inertial frame (seed 004 III-C, "extract fixed-base equations").

    The result's equations are the joint rows of eq. (1) with the base at rest.  For a fixed base the
    inertial frame is the base frame, so gravity is re-expressed in base coordinates using the base
    orientation quaternion ``[x, y, z, w]`` at which the base is held (default identity).
    """
    if not robot.is_free:
        return robot.with_base("fixed")
    g = robot.gravity.copy()
    if base_orientation is not None:
        quat = np.asarray(base_orientation, dtype=float)
        if quat.shape != (4,) or not np.all(np.isfinite(quat)) or not np.linalg.norm(quat) > 0:
            raise StructureError(
                f"fix_base: base_orientation must be a non-zero quaternion [x, y, z, w], got {quat}"
            )
        g = snap(quaternion_to_matrix(quat).T @ g)
    return robot.replace(base="fixed", gravity=g)


def free_base(robot: Robot) -> Robot:
    """Release a fixed base: the base becomes a free-floating 6-DOF body (needs mass and inertia)."""
    ine = robot.inertias[0]
    if robot.is_free:
        return robot.with_base("free")
    if not ine.mass > 0 or not np.all(np.linalg.eigvalsh(ine.inertia) > 0):
        raise StructureError(
            f"free_base: the base body {robot.body_names[0]!r} of robot {robot.name!r} has mass {ine.mass} "
            "and "
            "no positive-definite inertia; a free-floating base needs both (set them in the robot file)"
        )
    return robot.with_base("free")


# ---- close a loop (seed 004 III-D) -------------------------------------------------------------


def close_loop(
    robot: Robot,
    frame_a: str,
    frame_b: str,
    joint: str = "weld",
    axis: Sequence[float] | None = None,
    name: str | None = None,
    world_placement: Placement | None = None,
) -> Robot:
    """Record a loop-closure (cut) joint between two frames (seed 004 III-D, ``cflag``).

    ``joint``: ``weld`` | ``revolute`` | ``prismatic`` | ``spherical``; ``axis`` (frame-a coordinates) for
    revolute and prismatic.  ``frame_b`` may be ``"world"`` (the inertial frame: grappling a fixed point),
    then ``world_placement`` is the pose of the grapple point in the inertial frame (default identity).
    The model's tree is unchanged; the constraint is used by :mod:`soadyn.runtime.closed_loop`.
    """
    if joint not in LOOP_TYPES:
        raise StructureError(f"close_loop: joint type {joint!r} is not one of {LOOP_TYPES}")
    for fr in (frame_a, frame_b):
        if fr == "world":
            continue
        try:
            robot.frame_of(fr)
        except KeyError as e:
            raise StructureError(f"close_loop: {e.args[0]}") from None
    if frame_a == "world":
        raise StructureError("close_loop: frame_a must be a frame of the robot; put 'world' as frame_b")
    if frame_a == frame_b:
        raise StructureError(f"close_loop: frame_a and frame_b are both {frame_a!r}; a loop needs two frames")
    ax = None
    if joint in ("revolute", "prismatic"):
        if axis is None:
            raise StructureError(f"close_loop: a {joint} cut joint needs 'axis' (a direction in frame_a)")
        ax = np.asarray(axis, dtype=float)
        if ax.shape != (3,) or not np.all(np.isfinite(ax)) or not np.linalg.norm(ax) > 0:
            raise StructureError(f"close_loop: axis must be a non-zero 3-vector, got {axis}")
        ax = ax / np.linalg.norm(ax)
    elif axis is not None:
        raise StructureError(f"close_loop: a {joint} cut joint takes no axis")
    taken = {lc.name for lc in robot.loops}
    lname = name or unique_name(f"loop{len(robot.loops) + 1}", set(taken))
    if lname in taken:
        raise StructureError(f"close_loop: loop name {lname!r} already used")
    if world_placement is not None and frame_b != "world":
        raise StructureError("close_loop: world_placement is only for frame_b = 'world'")
    loop = LoopClosure(lname, frame_a, frame_b, joint, ax, world_placement)
    return robot.replace(loops=(*robot.loops, loop))


# ---- connectivity description (seed 004 II-A.2, II-B.1, III-A) ---------------------------------


@dataclass(frozen=True)
class ConnectivityRow:
    """One row of seed 004's connectivity table for body ``link`` (0 = base)."""

    link: int
    name: str
    parent: int
    end_effector: int
    connect: int
    cflag: int


def connectivity_table(robot: Robot, locked: Sequence[str] = ()) -> list[ConnectivityRow]:
    """Seed 004's description (parent, end-effector, connect, cflag) of every non-base body.

    * ``parent``: index of the parent body (0 = base);
    * ``end_effector``: 1, 2, ... for the leaves of the tree in body order, 0 otherwise;
    * ``connect``: for a body whose joint is in ``locked``, the number of bodies rigidly connected
      together with it by locked joints (its locked group, not counting the moving body it is welded to);
      0 otherwise.  (Table III of the seed shows the count on every locked link of arm 2 but only on the
      last link of arm 1; we report it on every locked link.)
    * ``cflag``: ``i`` if this body closes a loop with body ``i`` (``i = 0``: the base; a loop to the
      world is reported as 0 too, as in seed 004 Example 2), -1 if none.  The flag goes on the body with
      the larger index, as in Table II.
    """
    _check_joint_names(robot, list(locked), "connectivity_table")
    lockset = set(locked)
    n = robot.n_bodies
    ee = [0] * n
    count = 0
    for k in range(1, n):
        if not robot.children[k]:
            count += 1
            ee[k] = count
    is_locked = [k > 0 and robot.joints[k].name in lockset for k in range(n)]
    group = list(range(n))
    for k in range(1, n):
        if is_locked[k] and is_locked[robot.parent[k]]:
            group[k] = group[robot.parent[k]]
    sizes: dict[int, int] = {}
    for k in range(1, n):
        if is_locked[k]:
            sizes[group[k]] = sizes.get(group[k], 0) + 1
    cflag = [-1] * n
    for lc in robot.loops:
        ka = robot.frame_of(lc.frame_a)[0]
        kb = 0 if lc.frame_b == "world" else robot.frame_of(lc.frame_b)[0]
        hi, lo = max(ka, kb), min(ka, kb)
        cflag[hi] = lo
    return [
        ConnectivityRow(
            k, robot.body_names[k], robot.parent[k], ee[k], sizes[group[k]] if is_locked[k] else 0, cflag[k]
        )
        for k in range(1, n)
    ]


def format_connectivity(rows: Sequence[ConnectivityRow]) -> str:
    """Text table in the layout of seed 004 Tables II-III."""
    w = max([4, *(len(r.name) for r in rows)])
    lines = [f"{'link':>4}  {'name':<{w}}  {'parent':>6}  {'end-effector':>12}  {'connect':>7}  {'cflag':>5}"]
    for r in rows:
        lines.append(
            f"{r.link:>4}  {r.name:<{w}}  {r.parent:>6}  {r.end_effector:>12}  {r.connect:>7}  {r.cflag:>5}"
        )
    return "\n".join(lines)


# ---- state maps between two models of the same system ------------------------------------------


def map_state(
    src: Robot, dst: Robot, q: Any, v: Any | None = None, a: Any | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Map a state of ``src`` to the equivalent state of ``dst`` (a model derived from it by
    :func:`invert`, :func:`lock_joints`, or any combination).

    Joint coordinates, rates and accelerations are matched by joint name (every joint of ``dst`` must
    exist in ``src``; joints of ``src`` missing in ``dst`` are locked ones and are dropped: the caller is
    responsible for them being at their locked values).  A free base of ``dst`` is the frame named
    ``dst.body_names[0]`` of ``src``; its pose, body-frame twist and acceleration come from forward
    kinematics of ``src``.  Returns ``(q, v, a)`` (``v``/``a`` None if not given).
    """
    missing = [n for n in dst.joint_names if n not in src.joint_names]
    if missing:
        raise StructureError(f"map_state: joints {missing} of {dst.name!r} are not joints of {src.name!r}")
    who = f"map_state({src.name!r})"
    qs = state_vector(q, src.nq, "q", who)
    vs = None if v is None else state_vector(v, src.nv, "v", who)
    as_ = None if a is None else state_vector(a, src.nv, "a", who)
    idx = [src.joint_names.index(n) for n in dst.joint_names]
    qo = np.empty(dst.nq)
    vo = None if vs is None else np.empty(dst.nv)
    ao = None if as_ is None else np.empty(dst.nv)
    qo[dst.base_nq :] = qs[src.base_nq :][idx]
    if vo is not None:
        vo[dst.base_nv :] = vs[src.base_nv :][idx]
    if ao is not None:
        ao[dst.base_nv :] = as_[src.base_nv :][idx]
    if dst.is_free:
        if not src.is_free:
            raise StructureError(f"map_state: {dst.name!r} has a free base but {src.name!r} a fixed one")
        try:
            fm = frame_motion(src, qs, vs, as_, dst.body_names[0])
        except KeyError as e:
            raise StructureError(
                f"map_state: the base {dst.body_names[0]!r} of {dst.name!r} is not a frame of "
                f"{src.name!r} ({e})"
            ) from None
        qo[:3] = fm.p
        qo[3:7] = matrix_to_quaternion(fm.R)
        if vo is not None:
            vo[:6] = fm.body_twist()
        if ao is not None:
            ao[:6] = fm.body_acceleration()
    return qo, vo, ao
