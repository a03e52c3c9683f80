"""Human-readable printout of a :class:`~soadyn.symbolic.model.Robot` (used by ``soadyn info``)."""

from __future__ import annotations

import numpy as np

from .model import Robot


def _num(x: float) -> str:
    return f"{x:.6g}"


def _vec(v: np.ndarray) -> str:
    return "[" + ", ".join(_num(float(a)) for a in v) + "]"


def describe(robot: Robot) -> str:
    """Multi-line summary: sizes, the body tree (joint name/type/axis, mass), frames."""
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
    if robot.frames:
        lines.append(f"frames ({len(robot.frames)}; name, the body it is on, its position in that "
                     f"body frame):")
        fw = max(len(f.name) for f in robot.frames)
        for f in robot.frames:
            bw = max(len(robot.body_names[g.body]) for g in robot.frames)
            lines.append(f"  {f.name:<{fw}}  on {robot.body_names[f.body]:<{bw}}  at {_vec(f.placement.p)}")
    else:
        lines.append("frames: none")
    return "\n".join(lines)
