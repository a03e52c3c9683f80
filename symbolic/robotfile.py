"""Robot files (YAML) -> Robot.  PROVISIONAL minimal reader; schema validation to be added."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import yaml

from .model import BodySpec, Inertia, Joint, Placement, Robot


def _inertia_matrix(x) -> np.ndarray:
    if isinstance(x, dict):
        return np.array([[x.get("ixx", 0), x.get("ixy", 0), x.get("ixz", 0)],
                         [x.get("ixy", 0), x.get("iyy", 0), x.get("iyz", 0)],
                         [x.get("ixz", 0), x.get("iyz", 0), x.get("izz", 0)]], dtype=float)
    return np.asarray(x, dtype=float).reshape(3, 3)


def load_yaml(path: str | Path, base: str | None = None) -> Robot:
    path = Path(path)
    raw = path.read_bytes()
    doc = yaml.safe_load(raw)
    specs = []
    for b in doc["bodies"]:
        j = b.get("joint")
        joint = None
        if j is not None:
            axis = np.asarray(j.get("axis", [0, 0, 1]), dtype=float)
            if j["type"] != "fixed":
                axis = axis / np.linalg.norm(axis)
            joint = Joint(j.get("name", b["name"] + "_joint"), j["type"], axis,
                          Placement.from_xyz_rpy(j.get("xyz", [0, 0, 0]), j.get("rpy", [0, 0, 0])))
        specs.append(BodySpec(b["name"], b.get("parent"), joint,
                              Inertia(float(b["mass"]), np.asarray(b.get("com", [0, 0, 0]), dtype=float),
                                      _inertia_matrix(b["inertia"]))))
    frames = [(f["name"], f["body"], Placement.from_xyz_rpy(f.get("xyz", [0, 0, 0]), f.get("rpy", [0, 0, 0])))
              for f in doc.get("frames", [])]
    return Robot.from_specs(doc["name"], base or doc.get("base", "free"), doc.get("gravity", [0, 0, 0]),
                            specs, frames, source=str(path), source_hash=hashlib.sha256(raw).hexdigest())
