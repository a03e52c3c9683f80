"""MJCF import into :class:`~soadyn.model.robot.Robot` through MuJoCo's own parser (issue 25).

The file is read by ``mujoco.MjModel.from_xml_path`` (the optional ``mjcf`` extra: ``pip install
soadyn[mjcf]``), so includes, defaults, classes, ``inertiafromgeom`` and every other compiler rule are
MuJoCo's; soadyn converts the *compiled* model.  Mapping (docs/robot-format.md, "MJCF import"):

* ``hinge`` -> revolute, ``slide`` -> prismatic; a body without joints is welded to its parent (merged,
  kept as a named frame); a body with several joints becomes a chain of massless bodies
  ``<body>__<joint>`` (MuJoCo applies a body's joints in order, each about its anchor in the body frame),
  the last one carrying the body's name and inertia.
* A ``free`` joint on a child of the world body makes that body the free-floating base; without one the
  base is the world body (fixed).  Bodies welded to the world with no joint below them (floors, static
  scenery) are left out of a free-floating robot.
* soadyn's body frame is MuJoCo's body frame moved to the anchor (``pos``) of the body's (last) joint, with
  the same axes; the joint axis is MuJoCo's, the inertia is the compiled ``body_ipos``/``body_iquat``/
  ``body_inertia``.
* ``armature``, ``damping``, ``frictionloss`` of a joint -> its drive train (``frictionloss`` becomes the
  smoothed Coulomb friction of docs/conventions.md, which is not MuJoCo's constraint-based friction).
* ``site`` -> named frame on its body.  ``gravity`` from ``<option gravity>``.
* ``<equality><joint joint1 joint2 polycoef="c0 c1 0 0 0">`` -> the mimic coupling ``q1 = c0 + c1 q2``
  (chains resolved; MuJoCo enforces it as a soft constraint, soadyn exactly in reduced coordinates).

Refused with one line naming the file, the element and the fix: ``ball`` joints, a ``free`` joint below
another body, joint ``ref`` != 0, joint springs (``stiffness``), ``gravcomp``, tendons, equality
constraints other than linear joint couplings (``connect``/``weld``: use a soadyn ``loops:`` section;
``polycoef`` with powers above 1), armature/damping on a free joint.  Ignored with a warning: actuators
(soadyn's inputs are the joint forces themselves) and contacts (geoms that can collide; soadyn has no
contact model).
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.names import brief
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
    MassCheck,
    RobotFileError,
    check_base,
    drive_problem,
    read_bytes,
    unique_name,
)


def _quat_wxyz_to_matrix(qw: np.ndarray) -> np.ndarray:
    w, x, y, z = (float(c) for c in qw)
    n = w * w + x * x + y * y + z * z
    return np.array([
        [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]]) / n


def _name(mujoco: Any, m: Any, obj: Any, i: int, default: str) -> str:
    n = mujoco.mj_id2name(m, obj, i)
    return n if n else default


def parse_mjcf(path: str | Path, base: str | None = None, *, check: MassCheck | None = None) -> Robot:
    """Read an MJCF file through MuJoCo and build the robot (see the module docstring)."""
    path = Path(path)
    check_base(base, path)
    raw = read_bytes(path)
    try:
        import mujoco
    except ImportError:
        raise RobotFileError(path, "", "reading MJCF needs MuJoCo; install it with pip install "
                             "'soadyn[mjcf]' (or pip install mujoco)") from None
    try:
        m = mujoco.MjModel.from_xml_path(str(path))
    except Exception as e:  # MuJoCo reports XML and compiler errors as ValueError with the line
        msg = " ".join(str(e).split())
        raise RobotFileError(path, "", f"MuJoCo could not read the MJCF ({brief(msg, 200)[1:-1]}); fix the "
                             "file (MuJoCo's message names the element and line)") from None
    J = mujoco.mjtJoint
    O = mujoco.mjtObj

    def jname(i: int) -> str:
        return _name(mujoco, m, O.mjOBJ_JOINT, i, f"joint{i}")

    def bname(i: int) -> str:
        return _name(mujoco, m, O.mjOBJ_BODY, i, f"body{i}")

    def jwhere(i: int) -> str:
        body = brief(bname(int(m.jnt_bodyid[i])), 40)[1:-1]
        return f'<joint name="{brief(jname(i), 40)[1:-1]}"> (body {body})'

    # ---- what soadyn cannot represent -------------------------------------------------------------
    if m.ntendon:
        tn = _name(mujoco, m, O.mjOBJ_TENDON, 0, "tendon0")
        raise RobotFileError(path, f'<tendon> "{brief(tn, 40)[1:-1]}"', f"the model has {m.ntendon} "
                             "tendon(s), which soadyn does not model; remove the <tendon> section (apply "
                             "tendon forces as joint forces tau)")
    eq_names = {int(mujoco.mjtEq.mjEQ_JOINT): "joint", int(mujoco.mjtEq.mjEQ_CONNECT): "connect",
                int(mujoco.mjtEq.mjEQ_WELD): "weld"}
    written: dict[str, Mimic] = {}
    for e in range(m.neq):
        kind = eq_names.get(int(m.eq_type[e]), "equality")
        ename = _name(mujoco, m, O.mjOBJ_EQUALITY, e, f"eq{e}")
        where = f'<equality>/<{kind} name="{brief(ename, 40)[1:-1]}">'
        if not m.eq_active0[e]:
            warnings.warn(f"{path}: {where}: inactive equality constraint ignored", stacklevel=2)
            continue
        if kind == "joint":
            # joint1 = polycoef[0] + polycoef[1] joint2 (+ higher powers; both refs are 0): a mimic coupling
            c = np.asarray(m.eq_data[e][:5], float)
            j1, j2 = int(m.eq_obj1id[e]), int(m.eq_obj2id[e])
            if j2 < 0 or np.any(c[2:]):
                raise RobotFileError(path, where, "only linear couplings of two joints are representable "
                                     "(joint1 = c0 + c1 joint2); give joint2 and polycoef=\"c0 c1 0 0 0\"")
            if jname(j1) in written:
                raise RobotFileError(path, where, f"joint {brief(jname(j1))} is coupled twice; remove one "
                                     "of its equality constraints")
            written[jname(j1)] = Mimic(jname(j2), float(c[1]), float(c[0]))
            continue
        raise RobotFileError(path, where, "equality constraint not supported: soadyn closes loops with a "
                             "loops: section of a YAML robot file (docs/robot-format.md); remove it here and "
                             "add the loop there")
    movable = {jname(i) for i in range(m.njnt) if int(m.jnt_type[i]) in (int(J.mjJNT_HINGE),
                                                                         int(J.mjJNT_SLIDE))}
    try:
        mimics = resolve_mimics(written, movable)
    except MimicError as e:
        where = f'<equality>/<joint joint1="{brief(e.joint, 40)[1:-1]}">'
        raise RobotFileError(path, where, e.problem) from None
    for i in range(m.njnt):
        t = int(m.jnt_type[i])
        if t == int(J.mjJNT_BALL):
            raise RobotFileError(path, jwhere(i), "ball joints are not supported; replace the ball joint by "
                                 "three hinge joints with orthogonal axes (same pos)")
        if t == int(J.mjJNT_FREE):
            if int(m.body_parentid[m.jnt_bodyid[i]]) != 0:
                raise RobotFileError(path, jwhere(i), "a free joint is allowed only on a child of the "
                                     "worldbody (the free-floating base); move the body or remove the joint")
            continue
        if m.jnt_stiffness[i] != 0:
            raise RobotFileError(path, jwhere(i), f"joint stiffness {m.jnt_stiffness[i]:g} (a spring) is not "
                                 "modelled; set stiffness to 0 and apply the spring force through tau")
        if m.qpos0[m.jnt_qposadr[i]] != 0:
            raise RobotFileError(path, jwhere(i), "ref != 0: soadyn's joint coordinate is zero in the pose "
                                 "the file describes; remove ref (pose the body at its zero instead)")
    if np.any(m.body_gravcomp):
        b = int(np.flatnonzero(m.body_gravcomp)[0])
        raise RobotFileError(path, f'<body name="{brief(bname(b), 40)[1:-1]}">', "gravcomp is not modelled; "
                             "remove it (add the compensation to tau)")
    if m.nu:
        warnings.warn(f"{path}: <actuator>: {m.nu} actuator(s) ignored; soadyn's inputs are the joint forces "
                      "tau (apply gear and gain yourself)", stacklevel=2)
    if m.ngeom and (np.any(m.geom_contype) or np.any(m.geom_conaffinity)):
        warnings.warn(f"{path}: <geom>: contacts are not modelled; the collision geometry is ignored",
                      stacklevel=2)

    # ---- bodies and joints ---------------------------------------------------------------------------
    free = [i for i in range(m.njnt) if int(m.jnt_type[i]) == int(J.mjJNT_FREE)]
    if len(free) > 1:
        raise RobotFileError(path, jwhere(free[1]), "more than one free joint: soadyn models one robot with "
                             "one free-floating base; remove the other free bodies")
    root = int(m.jnt_bodyid[free[0]]) if free else 0
    for i in free:
        dof = int(m.jnt_dofadr[i])
        if np.any(m.dof_armature[dof:dof + 6]) or np.any(m.dof_damping[dof:dof + 6]) or \
                np.any(m.dof_frictionloss[dof:dof + 6]):
            raise RobotFileError(path, jwhere(i), "armature, damping or frictionloss on the free joint is "
                                 "not modelled (the base has no drive); remove them")
    kids: dict[int, list[int]] = {}
    for b in range(1, m.nbody):
        kids.setdefault(int(m.body_parentid[b]), []).append(b)
    # a subtree's bodies, base-first (MuJoCo's order is already depth-first)
    keep: list[int] = []
    todo = [root]
    while todo:
        b = todo.pop()
        keep.append(b)
        todo.extend(reversed(kids.get(b, [])))
    if free:   # other jointed trees on the world cannot belong to a free-floating robot
        for b in range(1, m.nbody):
            if b not in keep and m.body_jntnum[b] and not m.body_mocapid[b] >= 0:
                raise RobotFileError(path, f'<body name="{brief(bname(b), 40)[1:-1]}">', "a jointed body "
                                     "outside the free-floating base's tree; soadyn models one robot, remove "
                                     "it (or fix it to the free body)")
    anchor: dict[int, np.ndarray] = {}      # MuJoCo body -> its soadyn frame origin in its MuJoCo frame
    specs: list[BodySpec] = []
    names_used = {bname(b) for b in keep}
    for b in keep:
        I_c = Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
        if m.body_mass[b] > 0:
            Ri = _quat_wxyz_to_matrix(m.body_iquat[b])
            I_c = (float(m.body_mass[b]), np.asarray(m.body_ipos[b], float),
                   Ri @ np.diag(m.body_inertia[b]) @ Ri.T)
        name = bname(b)
        if b == root:
            anchor[b] = np.zeros(3)
            specs.append(BodySpec(name, None, None, _inertia(I_c, anchor[b])))
            continue
        parent = int(m.body_parentid[b])
        pname = bname(parent)
        R = snap_rotation(_quat_wxyz_to_matrix(m.body_quat[b]))
        p = np.asarray(m.body_pos[b], float)
        joints = list(range(int(m.body_jntadr[b]), int(m.body_jntadr[b]) + int(m.body_jntnum[b])))
        if not joints:
            anchor[b] = np.zeros(3)
            X = Placement(R, snap(p - anchor[parent]))
            specs.append(BodySpec(name, pname, Joint(f"{name}_weld", "fixed", np.zeros(3), X),
                                  _inertia(I_c, anchor[b])))
            continue
        prev_name, prev_anchor, X_R = pname, anchor[parent], R
        prev_in_parent = p                          # this body's MuJoCo origin in the parent's MuJoCo frame
        for n_i, i in enumerate(joints):
            a = np.asarray(m.jnt_pos[i], float)
            dof = int(m.jnt_dofadr[i])
            drive = {"armature": float(m.dof_armature[dof]), "damping": float(m.dof_damping[dof]),
                     "friction": float(m.dof_frictionloss[dof])}
            drive = {k: v for k, v in drive.items() if v}
            jtype = "revolute" if int(m.jnt_type[i]) == int(J.mjJNT_HINGE) else "prismatic"
            drive_problem(drive, jtype, jwhere(i), path)
            if n_i == 0:
                X = Placement(X_R, snap(prev_in_parent + X_R @ a - prev_anchor))
            else:
                X = Placement(np.eye(3), snap(a - prev_anchor))
            last = n_i == len(joints) - 1
            this = name if last else unique_name(f"{name}__{jname(i)}", names_used)
            inert = _inertia(I_c, a) if last else Inertia(0.0, np.zeros(3), np.zeros((3, 3)))
            axis = snap(np.asarray(m.jnt_axis[i], float) / np.linalg.norm(m.jnt_axis[i]))
            specs.append(BodySpec(this, prev_name, Joint(jname(i), jtype, axis, X, **drive,
                                                         mimic=mimics.get(jname(i))), inert))
            prev_name, prev_anchor = this, a
        anchor[b] = prev_anchor
    frames = []
    for s in range(m.nsite):
        b = int(m.site_bodyid[s])
        if b not in anchor:
            continue                                # a site on scenery outside the robot
        sname = _name(mujoco, m, O.mjOBJ_SITE, s, f"site{s}")
        if sname in names_used:
            raise RobotFileError(path, f'<site name="{brief(sname, 40)[1:-1]}">', "has the name of a body; "
                                 "rename the site (bodies are frames too)")
        Xs = Placement(snap_rotation(_quat_wxyz_to_matrix(m.site_quat[s])),
                       snap(np.asarray(m.site_pos[s], float) - anchor[b]))
        frames.append((sname, bname(b), Xs))
    model_name = m.names[: m.names.index(b"\0")].decode("utf-8", "replace") or path.stem
    default_base = "free" if free else "fixed"
    try:
        robot = Robot.from_specs(model_name, base or default_base, np.asarray(m.opt.gravity, float), specs,
                                 frames, source=str(path), source_hash=hashlib.sha256(raw).hexdigest())
    except ValueError as e:
        raise RobotFileError(path, "", f"{brief(str(e), 160)[1:-1]}; check the body tree") from None
    found = None if check is None else check(robot)
    if found is not None:
        k, problem = found
        field = (f'<body name="{brief(robot.body_names[k], 40)[1:-1]}">' if k == 0
                 else f'<joint name="{brief(robot.joints[k].name, 40)[1:-1]}">')
        raise RobotFileError(path, field, problem)
    return robot


def _inertia(I_c: Inertia | tuple, anchor: np.ndarray) -> Inertia:
    """The compiled inertia with its CoM in the soadyn body frame (MuJoCo frame moved to ``anchor``)."""
    if isinstance(I_c, Inertia):
        return I_c
    mass, com, I = I_c
    return Inertia(mass, com - anchor, 0.5 * (I + I.T))
