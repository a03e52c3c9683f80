"""Build the robot files of the seed 004 examples (writes examples/seed004_*.yaml; rerun to regenerate).

* ``seed004_example1.yaml``: Lampariello et al. (seed 004) Example 1, Fig. 5: a free-flying base with one
  revolute joint; the end-effector will grapple a fixed point through a one-DOF fixture.  The seed gives
  no numbers: base 100 kg, 1 m cube-like inertia; a 1 m link of 10 kg; all joints about z.
* ``seed004_four_arm_37dof.yaml``: seed 004 Example 3, Fig. 1: four 7-DOF arms and three reaction wheels
  on a free-flying base, 6 + 4 * 7 + 3 = 37 DOF.  The seed gives no numbers; each arm is Dimitrov's 7-DOF
  arm (seed 003 Appendix F.1, examples/dimitrov_7dof_rw.yaml), mounted at the same offset rotated by 0,
  90, 180 and 270 degrees about the base z axis; the wheels are those of the same file.
* ``seed004_dual_arm.yaml``: the planar dual-arm system of seed 003 Appendix F.2 (Tables F.4-F.5), two 3-DOF
  arms on a 1000 kg base, holding a captured target (200 kg, 150 kg m^2: the target of seed 003 Appendix
  F.1; section 5.4 gives none) rigidly in arm 1's hand.  Frame ``grasp2`` on the target is where arm 2's
  hand ``ee2`` holds it at the capture configuration ``Q_CAPTURE`` below; closing the loop
  ``ee2 == grasp2`` (weld) gives the post-capture closed chain of seed 003 section 5.4.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from soadyn import load_robot
from soadyn.model import to_yaml
from soadyn.model.robot import BodySpec, Inertia, Joint, Placement, Robot
from soadyn.symbolic.frames import frame_motion

HERE = Path(__file__).resolve().parent
D = math.pi / 180.0

#: dual-arm capture configuration (joint angles j1..j6, rad): arms reach up, hands 1 m apart
Q_CAPTURE = np.array([80, 10, 10, -80, -10, -10]) * D


def _box(m: float, I: float) -> Inertia:
    return Inertia(m, np.zeros(3), I * np.eye(3))


def _rev(name: str, xyz, rpy=(0, 0, 0), axis=(0, 0, 1)) -> Joint:
    return Joint(name, "revolute", np.asarray(axis, dtype=float), Placement.from_xyz_rpy(xyz, rpy))


def example1() -> Robot:
    bodies = [
        BodySpec("base", None, None, _box(100.0, 16.0)),
        BodySpec(
            "link1",
            "base",
            _rev("j1", [0.5, 0, 0]),
            Inertia(10.0, np.array([0.5, 0, 0]), np.diag([0.02, 0.85, 0.85])),
        ),
    ]
    frames = [("ee", "link1", Placement.from_xyz_rpy([1.0, 0, 0], [0, 0, 0]))]
    return Robot.from_specs("seed004_example1", "free", [0, 0, 0], bodies, frames)


def four_arm() -> Robot:
    src = load_robot(HERE / "dimitrov_7dof_rw.yaml")
    bodies = [BodySpec("base", None, None, src.inertias[0])]
    arm = [k for k in range(1, src.n_bodies) if src.joints[k].name in {f"j{i}" for i in range(1, 8)}]
    for a in range(4):
        rot = Placement.from_xyz_rpy([0, 0, 0], [0, 0, a * math.pi / 2])
        for k in arm:
            j = src.joints[k]
            parent = "base" if src.parent[k] == 0 else f"a{a + 1}_{src.body_names[src.parent[k]]}"
            X = rot * j.placement if src.parent[k] == 0 else j.placement
            bodies.append(
                BodySpec(
                    f"a{a + 1}_{src.body_names[k]}",
                    parent,
                    Joint(f"a{a + 1}_{j.name}", "revolute", j.axis, X),
                    src.inertias[k],
                )
            )
    for k in range(1, src.n_bodies):
        if k not in arm:
            j = src.joints[k]
            bodies.append(BodySpec(src.body_names[k], "base", j, src.inertias[k]))
    ee = next(f for f in src.frames if f.name == "ee")
    frames = [(f"ee{a + 1}", f"a{a + 1}_{src.body_names[ee.body]}", ee.placement) for a in range(4)]
    return Robot.from_specs("seed004_four_arm_37dof", "free", [0, 0, 0], bodies, frames)


def dual_arm() -> Robot:
    link = _box(100.0, 33.0)
    bodies = [BodySpec("base", None, None, _box(1000.0, 1250.0))]
    # arm 1 (Table F.4): J1 at [0.5, 0, 0] of the base; each link 1 m along its +x, CoM in the middle
    parent = "base"
    for i, xyz in zip((1, 2, 3), ([0.5, 0, 0], [1.0, 0, 0], [1.0, 0, 0])):
        bodies.append(
            BodySpec(
                f"link{i}", parent, _rev(f"j{i}", xyz), Inertia(100.0, np.array([0.5, 0, 0]), link.inertia)
            )
        )
        parent = f"link{i}"
    # arm 2: J4 at [-0.5, 0, 0]; links along their -x
    parent = "base"
    for i, xyz in zip((4, 5, 6), ([-0.5, 0, 0], [-1.0, 0, 0], [-1.0, 0, 0])):
        bodies.append(
            BodySpec(
                f"link{i}", parent, _rev(f"j{i}", xyz), Inertia(100.0, np.array([-0.5, 0, 0]), link.inertia)
            )
        )
        parent = f"link{i}"
    frames = [
        ("ee1", "link3", Placement.from_xyz_rpy([1.0, 0, 0], [0, 0, 0])),
        ("ee2", "link6", Placement.from_xyz_rpy([-1.0, 0, 0], [0, 0, 0])),
    ]
    tree = Robot.from_specs("seed004_dual_arm", "free", [0, 0, 0], bodies, frames)
    # target held rigidly by hand 1: CoM 0.35 m above the middle of the two hands at the capture pose
    q = tree.neutral()
    q[7:] = Q_CAPTURE
    m1 = frame_motion(tree, q, frame="ee1")
    m2 = frame_motion(tree, q, frame="ee2")
    X1 = Placement(m1.R, m1.p)
    X2 = Placement(m2.R, m2.p)
    com_world = 0.5 * (m1.p + m2.p) + np.array([0, 0.35, 0])
    com_in_ee1 = X1.inverse().R @ (com_world - m1.p)
    target = BodySpec(
        "target",
        "link3",
        Joint("grasp1", "fixed", np.zeros(3), Placement.from_xyz_rpy([1.0, 0, 0], [0, 0, 0])),
        Inertia(200.0, com_in_ee1, 150.0 * np.eye(3)),
    )
    grasp2 = X1.inverse() * X2  # hand 2's pose in the target (= ee1) frame at capture
    frames = [*frames, ("grasp2", "target", grasp2)]
    return Robot.from_specs("seed004_dual_arm", "free", [0, 0, 0], [*bodies, target], frames)


def main() -> None:
    for fn, fname in (
        (example1, "seed004_example1.yaml"),
        (four_arm, "seed004_four_arm_37dof.yaml"),
        (dual_arm, "seed004_dual_arm.yaml"),
    ):
        robot = fn()
        head = (
            f"# Generated by examples/seed004_models.py ({fn.__name__}); see that script for the sources.\n"
        )
        (HERE / fname).write_text(head + to_yaml(robot), encoding="utf-8")
        back = load_robot(HERE / fname)
        print(f"{fname}: {back.nv} DOF ({back.n_bodies} bodies), {len(back.frames)} frames")


if __name__ == "__main__":
    main()
