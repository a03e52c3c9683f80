"""Human-readable printout of a :class:`~soadyn.model.robot.Robot` (used by ``soadyn info``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from soadyn.model.robot import Robot
from soadyn.structure import connectivity_table, format_connectivity


def _num(x: float) -> str:
    return f"{x:.6g}"


def _vec(v: np.ndarray) -> str:
    return "[" + ", ".join(_num(float(a)) for a in v) + "]"


def describe(robot: Robot, locked: Sequence[str] = ()) -> str:
    """Multi-line summary: sizes, the body tree (joint name/type/axis, mass), seed 004's connectivity
    table (``locked``: joints counted as locked in its ``connect`` column), frames and loop closures.

    Raises :class:`~soadyn.structure.StructureError` if ``locked`` names an unknown joint.
    """
    base = "free-floating (6 DOF)" if robot.is_free else "fixed"
    lines = [
        f"robot:      {robot.name}",
        f"source:     {robot.source or '(none)'}",
        f"base:       {base}",
        f"bodies:     {robot.n_bodies}   joints: {robot.n_joints}   nq = {robot.nq}   nv = {robot.nv}",
        f"total mass: {_num(robot.total_mass)}",
        f"gravity:    {_vec(robot.gravity)}",
        "",
        "tree (depth-first; [index] body, the joint attaching it to its parent, mass incl. merged "
        "fixed links):",
    ]
    rows: list[tuple[str, str, str]] = []

    def walk(k: int, prefix: str, last: bool, depth: int) -> None:
        head = "" if depth == 0 else prefix + ("`-- " if last else "|-- ")
        if k == 0:
            info = f"base ({robot.base})"
        else:
            j = robot.joints[k]
            info = f"joint {j.name} ({j.type}, axis {_vec(j.axis)})"
        rows.append((f"{head}[{k}] {robot.body_names[k]}", info, _num(robot.inertias[k].mass)))
        kids = robot.children[k]
        child_prefix = prefix if depth == 0 else prefix + ("    " if last else "|   ")
        for i, c in enumerate(kids):
            walk(c, child_prefix, i == len(kids) - 1, depth + 1)

    walk(0, "", True, 0)
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    for label, info, mass in rows:
        lines.append(f"  {label:<{w0}}  {info:<{w1}}  mass {mass}")
    lines.append("")
    if robot.n_bodies > 1:
        lines.append("connectivity (seed 004 Tables II-III): parent (0 = base), end-effector (leaf number, "
                     "0 = none),")
        lines.append("connect (links in a locked group), cflag (the body this one closes a loop with, "
                     "0 = base or world, -1 = none):")
        table = format_connectivity(connectivity_table(robot, locked))
        lines.extend("  " + ln for ln in table.splitlines())
        lines.append("")
    if robot.frames:
        lines.append(f"frames ({len(robot.frames)}; name, the body it is on, its position in that "
                     f"body frame):")
        fw = max(len(f.name) for f in robot.frames)
        for f in robot.frames:
            bw = max(len(robot.body_names[g.body]) for g in robot.frames)
            lines.append(f"  {f.name:<{fw}}  on {robot.body_names[f.body]:<{bw}}  at {_vec(f.placement.p)}")
    else:
        lines.append("frames: none")
    lines.append("")
    if robot.loops:
        lines.append(f"loop closures ({len(robot.loops)}; cut joints, seed 004 III-D):")
        nw = max(len(lc.name) for lc in robot.loops)
        for lc in robot.loops:
            text = f"  {lc.name:<{nw}}  {lc.type:<9}  {lc.frame_a} -> {lc.frame_b}"
            if lc.axis is not None:
                text += f"  axis {_vec(lc.axis)} (in {lc.frame_a})"
            if lc.world_placement is not None:
                text += f"  at {_vec(lc.world_placement.p)} in the inertial frame"
            lines.append(text)
    else:
        lines.append("loop closures: none")
    return "\n".join(lines)
