"""Pinocchio models read with soadyn's placement convention: one home for the test suite
(tests/conftest.py) and benchmarks/sweep_erd.py (which loads this file by its path).  numpy only, no side
effects on import."""

from __future__ import annotations

import numpy as np


def exact_permutations(model) -> None:
    """Pinocchio's joint and frame rotations that are within 1e-10 of a signed permutation, made that
    permutation: the convention of docs/conventions.md ("Placements are read as written, with two
    roundings"), which soadyn applies to files writing pi/2 to 12 digits (the UR5).  Written here
    independently of soadyn's ``snap_rotation``."""
    def exact(M):
        R = np.array(M.rotation)
        P = np.round(R)
        if np.max(np.abs(R - P)) < 1e-10 and np.array_equal(np.abs(P).sum(axis=0), np.ones(3)) \
                and np.array_equal(np.abs(P).sum(axis=1), np.ones(3)):
            M.rotation = P
        return M
    for j in range(len(model.jointPlacements)):
        model.jointPlacements[j] = exact(model.jointPlacements[j])
    for f in model.frames:
        f.placement = exact(f.placement)
