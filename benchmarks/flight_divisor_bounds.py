"""Could the flight library's forward dynamics and M^-1 be proved finite from lower bounds of their divisors?

The interval pass of the flight export (``soadyn.codegen.bounds``) refuses FD and M^-1: they divide by
the articulated inertias' hinge terms ``D_k = h_k^T P_k h_k`` (+ the rotor's armature) and, for a free
base, by the pivots of the LDL factorisation of the base's 6x6 articulated inertia ``P_0``, whose
intervals contain 0.  In exact arithmetic each divisor has a constant lower bound known at export time:
``P_k >= M_k`` (the body's own spatial inertia, in the PSD order), so ``D_k >= h_k^T M_k h_k + I_a``, and
the i-th LDL pivot of ``P_0`` is at least that of ``M_0``.  This script gives the pass such a floor for
each divisor (``soadyn.codegen.bounds.divisor_intervals``: the floor taken as given, what a run-time guard
``D >= floor`` would establish; ``--fraction`` of the exact bound, default 1/2) and prints the interval
the pass computes for each divisor before its floor, and whether every output is then bounded.

    python benchmarks/flight_divisor_bounds.py [--fraction 0.5] [--precision double|float] ROBOT [--base B]

Statements named by the derivation are read: ``Dinv<k> = 1/D`` (body k's hinge,
:mod:`soadyn.symbolic.algorithms.articulated_body`) and ``D0di<i> = 1/d_i`` (the base LDL,
:func:`soadyn.symbolic.algorithms.linalg.ldl`); joints with more than one degree of freedom are left
without a floor.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from soadyn.codegen.bounds import Limits, divisor_intervals
from soadyn.codegen.export import INPUT_MAX, JOINT_Q_MAX, QUAT_NORM_MAX, QUAT_NORM_MIN
from soadyn.codegen.pipeline import generate, resolve_robot
from soadyn.symbolic.algorithms.kinematics import hinge_map

FUNCTIONS = "forward_dynamics,mass_matrix_inverse"


def ldl_pivots(A: np.ndarray) -> np.ndarray:
    """The pivots d of A = L diag(d) L^T, columns in order (the order of the derivation's ``ldl``)."""
    n = A.shape[0]
    L, d = np.eye(n), np.zeros(n)
    for j in range(n):
        d[j] = A[j, j] - sum(L[j, k] ** 2 * d[k] for k in range(j))
        for i in range(j + 1, n):
            L[i, j] = (A[i, j] - sum(L[i, k] * L[j, k] * d[k] for k in range(j))) / d[j]
    return d


def exact_floors(robot) -> dict[str, float]:
    """Statement name -> the exact lower bound of its divisor (see the module docstring)."""
    out = {}
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        if j.type not in ("revolute", "prismatic"):
            continue
        h = hinge_map(robot, k)
        out[f"Dinv{k}"] = float(h @ robot.inertias[k].spatial() @ h) + float(j.armature)
    if robot.is_free:
        for i, d in enumerate(ldl_pivots(robot.inertias[0].spatial())):
            out[f"D0di{i}"] = float(d)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("robot")
    ap.add_argument("--base", choices=("free", "fixed"), default=None)
    ap.add_argument("--fraction", type=float, default=0.5, help="floor = this fraction of the exact bound")
    ap.add_argument("--precision", choices=("double", "float"), default="double")
    args = ap.parse_args(argv)
    robot, name = resolve_robot(args.robot, args.base, mimic="independent")
    gen = generate(robot, f"{name}_impl", functions=FUNCTIONS)
    floors = {k: args.fraction * v for k, v in exact_floors(robot).items()}
    limits = Limits(float(JOINT_Q_MAX), float(QUAT_NORM_MIN), float(QUAT_NORM_MAX), args.precision,
                    robot.is_free, 7 if robot.is_free else 0, float(INPUT_MAX))
    print(f"{robot.name} ({robot.base} base, nv {robot.nv}), {args.precision}; floor = {args.fraction} x "
          "the exact lower bound")
    for spec, f in zip(gen.specs, gen.functions):
        if spec.name.endswith("_fext"):
            continue
        seen, why = divisor_intervals(f.body, list(spec.inputs), list(f.outputs), limits, floors)
        for target, (lo, hi, floor) in seen.items():
            print(f"  {spec.name:20s} {target:6s} divisor in [{lo:10.3g}, {hi:10.3g}]  floor {floor:.3g}")
        print(f"  {spec.name}: {'every output bounded' if why is None else 'refused: ' + why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
