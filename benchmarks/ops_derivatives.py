#!/usr/bin/env python3
"""Operation counts of the derivative functions on held-out example-robot-data robots (no compile).

    python benchmarks/ops_derivatives.py [--json out.json]

Robots (none used by the tests): xArm7 on a free base (nv 13) and fixed (nv 7), UR10 and UR3 fixed (nv 6),
Unitree B1 + Z1 arm on a free base, gripper locked (nv 24); gravity -9.81 along z.  Prints, per robot, the
total operations of ``inverse_dynamics_derivatives`` and ``forward_dynamics_derivatives`` as the generated
program counts them (the figure in the module header).

    python benchmarks/ops_derivatives.py --by-stage [--robots xarm7_free]

also prints, per function, the operations by stage of the optimised program: the name an algorithm gave a
staged quantity without its body index (``phi3`` -> ``phi``; ``Fc``, ``psi``, ``IbJ``, ...), ``cse`` for
the temporaries common-subexpression elimination introduced, ``products`` for the dense product loops,
``outputs`` for what the output expressions compute themselves.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import sysconfig
from pathlib import Path

import numpy as np


def erd() -> Path:
    cands = [Path(sysconfig.get_paths()["purelib"])]
    try:
        import pinocchio

        here = Path(pinocchio.__file__).resolve()
        cands += [here.parents[4], here.parents[5]]
    except Exception:  # pragma: no cover
        pass
    for base in cands:
        p = base / "cmeel.prefix/share/example-robot-data/robots"
        if p.is_dir():
            return p
    sys.exit("example-robot-data not found")


ROBOTS = {
    "xarm7_free": ("xarm_description/urdf/xarm7.urdf", "free", []),
    "xarm7_fixed": ("xarm_description/urdf/xarm7.urdf", "fixed", []),
    "ur10_fixed": ("ur_description/urdf/ur10_robot.urdf", "fixed", []),
    "ur3_fixed": ("ur_description/urdf/ur3_robot.urdf", "fixed", []),
    "talos_free": ("talos_data/robots/talos_reduced.urdf", "free", []),
    "b1z1_free": ("b1_description/urdf/b1-z1.urdf", "free", ["jointGripper"]),
    "go2_free": ("go2_description/urdf/go2.urdf", "free", []),
    "solo12_free": ("solo_description/robots/solo12.urdf", "free", []),
    "g1_free": ("g1_description/urdf/g1_29dof_rev_1_0.urdf", "free", []),
    "alex_free": ("alex_description/urdf/alex_nub_hands.urdf", "free", []),
}
FUNCS = ("inverse_dynamics_derivatives", "forward_dynamics_derivatives")


def by_stage(program) -> dict[str, int]:
    """Operations of an optimised program grouped by stage name (module docstring), largest first."""
    from soadyn.codegen.derive import Program
    from soadyn.codegen.optimise import count_ops

    out: dict[str, int] = {}
    for sym, e in program.assignments:
        stage = program.stages.get(sym.name)
        key = "cse" if stage is None else re.sub(r"[\d_]*\d_?[xy]?$", "", stage)
        n = count_ops(Program(program.name, [], [(sym, e)], []))["total"]
        out[key] = out.get(key, 0) + n
    out["outputs"] = count_ops(Program(program.name, [], [], program.outputs))["total"]
    out["products"] = sum(sum(p.ops().values()) for p in program.products)
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def main(argv: list[str] | None = None) -> int:
    from soadyn import load_robot
    from soadyn.codegen.pipeline import generate
    from soadyn.structure.operations import lock_joints

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", nargs="*", default=list(ROBOTS))
    ap.add_argument("--json")
    ap.add_argument("--by-stage", action="store_true", help="operations by stage of each function too")
    args = ap.parse_args(argv)
    out: dict[str, dict[str, int]] = {}
    for name in args.robots:
        rel, base, lock = ROBOTS[name]
        robot = load_robot(erd() / rel, base=base, mimic="independent")
        if lock:
            robot = lock_joints(robot, lock)
        robot = robot.replace(gravity=np.array([0.0, 0.0, -9.81]))   # the URDFs have none
        gen = generate(robot, functions=list(FUNCS))
        ops = {k.removeprefix(gen.module_name + "_"): v["total"] for k, v in gen.op_counts().items()}
        out[name] = {f: ops[f] for f in FUNCS}
        print(f"{name} (nv {robot.nv}): " + ", ".join(f"{f} {ops[f]}" for f in FUNCS), flush=True)
        if args.by_stage:
            from soadyn.codegen.derive import derive, rename_reserved
            from soadyn.codegen.functions import function_table, select_functions
            from soadyn.codegen.optimise import optimise

            for spec in select_functions(function_table(robot, derivatives=True), list(FUNCS), robot.name):
                stages = by_stage(optimise(rename_reserved(derive(robot, spec), spec)))
                out[name][spec.name + "_by_stage"] = stages    # type: ignore[assignment]
                print(f"  {spec.name}: " + ", ".join(f"{k} {v}" for k, v in stages.items()), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
