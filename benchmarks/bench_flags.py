#!/usr/bin/env python3
"""Build-flag variants of one robot's module, timed against each other in alternating rounds.

    python benchmarks/bench_flags.py --urdf xarm_description/urdf/xarm7.urdf --base free \
        --functions inverse_dynamics_derivatives,forward_dynamics_derivatives --rounds 10 --workdir W \
        default=default "jumps=-O2 -march=native ... -DSOADYN_TAKEN_JUMPS"

Each ``NAME=CFLAGS`` is a variant: ``default`` is the shipped ``fast`` profile on this machine, anything else
replaces its optimisation flags (``SOADYN_CFLAGS``; the IEEE flags stay).  Each variant is compiled once
(``bench_dynamics.fresh_compile``: a child process, no object cache; kept in ``WORKDIR/NAME`` and reused
by later runs with the same name).  Then every round times, for each variant in turn, every single-state
C function of the module from a fresh copy of its shared object (a new placement of its pages:
``bench_dynamics.time_module_functions``, a C loop over 1,000 random states) and, with ``--batches``, every
batched Python entry point with ``threads=1`` over 2,000 states (``bench_batches.best_ns``).  Printed: per
function the range and median per variant and, per round, each variant's time over the first variant's
(the rounds alternate, so a slow moment of the machine hits every variant of that round alike).
The fifteenth session's Intel measurements (benchmarks/README.md) were taken with this script's
forerunner.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_batches as bb  # noqa: E402
import bench_dynamics as bd  # noqa: E402
import bench_round3 as r3  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen import load  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402


def build(path: Path, base: str, lock: list[str], functions: str, work: Path, name: str, flags: str) -> dict:
    """Compile (or reuse) variant ``name``: ``flags`` 'default' = the shipped fast profile."""
    d = work / name
    info_file = d / "variant.json"
    if info_file.exists():
        info = json.loads(info_file.read_text())
        if info.get("flags") == flags and Path(info["module_dir"]).is_dir():
            return info
    old = os.environ.pop("SOADYN_CFLAGS", None)
    try:
        if flags != "default":
            os.environ["SOADYN_CFLAGS"] = flags
        t0 = time.perf_counter()
        info = bd.fresh_compile(path, base, lock, d, "fast", functions or None, rigid=True)
        info["wall"] = time.perf_counter() - t0
    finally:
        os.environ.pop("SOADYN_CFLAGS", None)
        if old is not None:
            os.environ["SOADYN_CFLAGS"] = old
    info = {"module_dir": info["module_dir"], "wall": info["wall"], "flags": flags}
    info_file.write_text(json.dumps(info))
    return info


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--urdf", required=True, help="a URDF under example-robot-data's robots/, or a path")
    ap.add_argument("--base", choices=("free", "fixed"), default="free")
    ap.add_argument("--lock", default="", help="comma-separated joints locked at 0")
    ap.add_argument("--functions", default="", help="comma-separated functions (default: the default set)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--batches", action="store_true", help="time the batched entry points too")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("variants", nargs="+", metavar="NAME=CFLAGS")
    args = ap.parse_args(argv)
    variants = [v.split("=", 1) for v in args.variants]
    if any(len(v) != 2 or not v[0] for v in variants) or len({n for n, _ in variants}) != len(variants):
        ap.error("give each variant as NAME=CFLAGS (or NAME=default), names distinct")
    path = Path(args.urdf)
    if not path.is_absolute():
        path = r3.robots_dir() / args.urdf
    lock = [j for j in args.lock.split(",") if j]
    work = Path(args.workdir).resolve()
    robot = load_robot(path, base=args.base, mimic="independent")
    robot = (lock_joints(robot, lock) if lock else robot).rigid()
    mods = {}
    for name, flags in variants:
        info = build(path, args.base, lock, args.functions, work, name, flags)
        print(f"{name}: compile wall {info['wall']:.1f} s", flush=True)
        mods[name] = load(info["module_dir"])
    frame = robot.body_names[-1]
    _, st, batch = r3.draw_states(robot, bd.pin_model(robot, frame), 1000, 2000)
    want = [f for f in args.functions.split(",") if f]
    seen: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for name, mod in mods.items():
            so = r3._shared_object(mod)
            fd, copy = tempfile.mkstemp(suffix=".so", dir=work)
            os.close(fd)
            shutil.copy2(so, copy)
            try:
                names = [k.removeprefix(mod.module_name + "_") for k in bd.prototypes(mod)]
                names = [n for n in names if not want or n in want]
                timed = bd.time_module_functions(mod, names, st, work / name / "harness",
                                                 mod.frame_ids[frame], library=Path(copy))
            finally:
                os.unlink(copy)
            for f, ns in timed.items():
                seen.setdefault((name, f"C {f}"), []).append(ns)
            if args.batches:
                for f, (g, arrays) in r3.batched_entries(mod, batch, frame).items():
                    seen.setdefault((name, f"batch {f}"), []).append(
                        bb.best_ns(lambda g=g, arrays=arrays: g(*arrays, threads=1), 2000))
        print(f"round {r} (load {os.getloadavg()[0]:.1f})", flush=True)
    first = variants[0][0]
    for f in sorted({f for _, f in seen}):
        cells = [f"{n} {min(xs):,.0f}-{max(xs):,.0f} (median {np.median(xs):,.0f})"
                 for n, _ in variants if (xs := seen.get((n, f)))]
        print(f"{f}: " + "; ".join(cells))
        for n, _ in variants[1:]:
            if (n, f) in seen and (first, f) in seen:
                per = " ".join(f"{b / a:.2f}" for a, b in zip(seen[(first, f)], seen[(n, f)]))
                print(f"    {n} / {first} per round: {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
