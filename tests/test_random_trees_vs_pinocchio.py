"""Random trees (revolute and prismatic joints about arbitrary axes, fixed joints, arbitrary placements)
built twice: as a soadyn robot file and directly as a Pinocchio model from the same numbers.  The O(N)
recursions must agree with Pinocchio's RNEA, CRBA and ABA; this exercises structures the URDF examples
do not have (branching, prismatic joints off the coordinate axes, merged fixed-joint bodies)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from soadyn import load_robot
from soadyn.model.conventions import PinocchioMap
from soadyn.model.rotations import rpy_to_matrix
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import Numeric

pin = pytest.importorskip("pinocchio")
CTX = Numeric()


def _random_doc(seed: int, base: str) -> dict:
    rng = np.random.default_rng(seed)
    bodies = [{"name": "base", "mass": float(rng.uniform(5, 50)), "com": rng.normal(0, 0.1, 3).tolist(),
               "inertia": {"ixx": 2.0, "iyy": 2.5, "izz": 3.0, "ixy": 0.1, "ixz": -0.05, "iyz": 0.02}}]
    for i in range(1, 9):
        kind = str(rng.choice(["revolute", "revolute", "prismatic", "fixed"]))
        if rng.random() < 0.5:
            axis = rng.normal(size=3)
        else:
            axis = np.eye(3)[rng.integers(0, 3)] * rng.choice([-1, 1])
        a, b, c = rng.uniform(0.05, 0.3, 3)
        m = float(rng.uniform(0.5, 5))
        joint = {"name": f"j{i}", "type": kind, "xyz": rng.normal(0, 0.3, 3).tolist(),
                 "rpy": rng.uniform(-3, 3, 3).tolist()}
        if kind != "fixed":
            joint["axis"] = (np.asarray(axis) / np.linalg.norm(axis)).tolist()
        bodies.append({"name": f"b{i}", "parent": bodies[int(rng.integers(0, i))]["name"], "mass": m,
                       "com": rng.normal(0, 0.1, 3).tolist(), "joint": joint,
                       "inertia": {"ixx": float(m * (b * b + c * c) / 12 + 0.01),
                                   "iyy": float(m * (a * a + c * c) / 12 + 0.01),
                                   "izz": float(m * (a * a + b * b) / 12 + 0.01), "ixy": 0.002}})
    return {"name": f"random{seed}", "base": base, "gravity": [0.3, -0.4, -9.81], "bodies": bodies}


def _pinocchio_model(doc: dict):
    """The same tree as a Pinocchio model; fixed-joint bodies are appended to their parent's joint."""
    model = pin.Model()
    model.gravity.linear = np.array(doc["gravity"])
    where = {}   # body name -> (pinocchio joint id, placement of the body frame in that joint frame)

    def inertia(b):
        I = b["inertia"]
        xy, xz, yz = I.get("ixy", 0), I.get("ixz", 0), I.get("iyz", 0)
        Ic = np.array([[I["ixx"], xy, xz], [xy, I["iyy"], yz], [xz, yz, I["izz"]]])
        return pin.Inertia(b["mass"], np.array(b["com"]), Ic)

    # Pinocchio's algorithms assume every subtree's joints are contiguous: add bodies depth-first
    kids: dict[str, list[dict]] = {b["name"]: [] for b in doc["bodies"]}
    for b in doc["bodies"][1:]:
        kids[b["parent"]].append(b)
    order, stack = [], [doc["bodies"][0]]
    while stack:
        b = stack.pop()
        order.append(b)
        stack.extend(reversed(kids[b["name"]]))
    root = order[0]
    jid = 0
    if doc["base"] == "free":
        jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
    model.appendBodyToJoint(jid, inertia(root), pin.SE3.Identity())
    where[root["name"]] = (jid, pin.SE3.Identity())
    for b in order[1:]:
        j = b["joint"]
        pj, X = where[b["parent"]]
        placement = X * pin.SE3(rpy_to_matrix(j["rpy"]), np.array(j["xyz"]))
        if j["type"] == "fixed":
            model.appendBodyToJoint(pj, inertia(b), placement)
            where[b["name"]] = (pj, placement)
            continue
        axis = np.array(j["axis"])
        jm = (pin.JointModelRevoluteUnaligned(axis) if j["type"] == "revolute"
              else pin.JointModelPrismaticUnaligned(axis))
        new = model.addJoint(pj, jm, placement, j["name"])
        model.appendBodyToJoint(new, inertia(b), pin.SE3.Identity())
        where[b["name"]] = (new, pin.SE3.Identity())
    return model


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("base", ["free", "fixed"])
def test_random_tree_matches_pinocchio(tmp_path, seed, base):
    doc = _random_doc(seed, base)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(doc))
    robot = load_robot(path)
    model = _pinocchio_model(doc)
    data = model.createData()
    pm = PinocchioMap(robot, model)
    rng = np.random.default_rng(100 + seed)
    for _ in range(5):
        q = robot.random_configuration(rng)
        v, a, tau = (rng.normal(size=robot.nv) for _ in range(3))
        qp, vp = pm.q_to_pin(q), pm.v_to_pin(v)
        Mp = pin.crba(model, data, qp)            # upper triangle, in Pinocchio's joint order
        M = pm.matrix_from_pin(np.triu(Mp) + np.triu(Mp, 1).T)
        tau_pin = pm.v_from_pin(pin.rnea(model, data, qp, vp, pm.v_to_pin(a)))
        a_pin = pm.v_from_pin(pin.aba(model, data, qp, vp, pm.v_to_pin(tau)))
        for ours, theirs in ((alg.mass_matrix(robot, CTX, q), M),
                             (alg.inverse_dynamics(robot, CTX, q, v, a), tau_pin),
                             (alg.forward_dynamics(robot, CTX, q, v, tau), a_pin)):
            assert np.abs(ours - theirs).max() <= 1e-9 * np.abs(theirs).max()
