#!/usr/bin/env python3
"""Batched entry points against single calls, several builds of one robot in one process (issue 26).

    python benchmarks/bench_batch_ab.py ROBOT before=DIR after=DIR [--funcs a,b] [--rounds 3] [--n 2000]

ROBOT is a label of ``bench_round3.ROBOTS`` (held-out example-robot-data robots); each DIR a compiled module
of it (e.g. ``bench_dynamics.fresh_compile(..., "fast", rigid=True)``, or ``soadyn compile URDF --base free
-o OUT`` of the rigid robot).  Per round, for each module in turn (alternating, so that a burst of other
jobs hits both): the C single call of every function in a C loop over the states from a fresh copy of the
module's shared object (``bench_dynamics.time_module_functions``), the C batch entry alone on ``--n``
states into one reused output (cffi), and the Python batch entry with ``threads=1``, new result and
``out=`` (``bench_batches.best_ns``).  Printed: ns per state, median over the rounds [min-max], and the
ratios batch / C single (issue 26: <= 0.8).  Process CPU time throughout; the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
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


def states(label: str, n: int) -> tuple[dict[str, np.ndarray], str]:
    """``n`` random states of every input a batched entry takes, and the frame (a leaf body)."""
    rel, base, lock, _ = r3.ROBOTS[label]
    robot = load_robot(r3.robots_dir() / rel, base=base, mimic="independent")
    robot = (lock_joints(robot, lock) if lock else robot).rigid()
    rng = np.random.default_rng(0)
    st = {"q": np.stack([robot.random_configuration(rng) for _ in range(n)])}
    for k in ("v", "a", "tau"):
        st[k] = rng.normal(size=(n, robot.nv))
    st["f_ext"] = rng.uniform(-1, 1, (n, 6 * robot.n_bodies))
    st["h"] = rng.uniform(-1, 1, (n, 6))
    st["qd"] = np.ascontiguousarray(st["v"][:, 6:] if robot.is_free else st["v"])
    return st, robot.body_names[-1]


def c_batch_ns(mod, f: str, st: dict[str, np.ndarray], frame: str, n: int) -> float:
    """ns per state of the C batch entry of Python function ``f`` alone, into one reused output."""
    p, cn = mod.module_name, r3.c_name(f)
    _, kinds = bd.prototypes(mod)[f"{p}_{cn}"]
    ffi = mod._ffi
    fn = getattr(mod._lib, f"{p}_{cn}_batch")
    args: list = [n]
    alive = []
    for kind, a, size in kinds:
        if kind == "in":
            x = np.ascontiguousarray(st[a][:n])
        elif kind == "frame":
            args.append(mod.frame_ids[frame])
            continue
        else:
            x = np.zeros((n, size))
        alive.append(x)
        args.append(ffi.cast("double *", x.ctypes.data))
    fn(*args)
    return bb.best_ns(lambda: fn(*args), n, 7)


def python_batch_ns(g, arrays: list[np.ndarray], n: int) -> tuple[float, float]:
    """ns per state of the Python batch entry ``g`` with ``threads=1``: a new result, and into ``out=``."""
    ob = g(*arrays, threads=1)
    return (bb.best_ns(lambda: g(*arrays, threads=1), n, 7),
            bb.best_ns(lambda: g(*arrays, threads=1, out=ob), n, 7))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("robot", choices=sorted(r3.ROBOTS))
    ap.add_argument("modules", nargs="+", help="TAG=DIR: a compiled module of the robot")
    ap.add_argument("--funcs", default="",
                    help="comma-separated Python functions (default: every batched one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=2000, help="states per batch")
    args = ap.parse_args(argv)
    st, frame = states(args.robot, args.n)
    mods = {}
    for spec in args.modules:
        tag, _, d = spec.partition("=")
        if not d:
            ap.error(f"{spec!r}: expected TAG=DIR")
        mods[tag] = load(d)
    funcs = [f for f in args.funcs.split(",") if f]
    work = Path(tempfile.mkdtemp(prefix="bench_batch_ab_"))
    seen: dict[tuple[str, str, str], list[float]] = {}
    loads = []
    try:
        for r in range(args.rounds):
            for tag, mod in mods.items():
                entries = r3.batched_entries(mod, st, frame)
                fs = funcs or sorted(entries)
                copy = work / f"{tag}_{r}.so"
                shutil.copy2(r3._shared_object(mod), copy)     # a fresh placement of the pages per round
                single = bd.time_module_functions(mod, sorted({r3.c_name(f) for f in fs}), st,
                                                  work / f"h_{tag}", mod.frame_ids[frame], library=copy)
                copy.unlink()
                for f in fs:
                    timed = (single[r3.c_name(f)], c_batch_ns(mod, f, st, frame, args.n),
                             *python_batch_ns(*entries[f], args.n))
                    for kind, ns in zip(("c1", "cb", "pyb", "pyo"), timed):
                        seen.setdefault((tag, f, kind), []).append(ns)
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.robot}, {args.n} states, {args.rounds} rounds, load average "
          f"{min(loads):.1f}-{max(loads):.1f}; ns per state, median [min-max]")
    print("| function | build | C single | C batch | Python batch | Python batch out= | C batch / C single "
          "| Python batch / C single | out= / C single |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in funcs or sorted({k[1] for k in seen}):
        for tag in mods:
            m = {k: seen[(tag, f, k)] for k in ("c1", "cb", "pyb", "pyo")}
            med = {k: float(np.median(v)) for k, v in m.items()}
            cells = [f"{med[k]:,.0f} [{min(v):,.0f}-{max(v):,.0f}]" for k, v in m.items()]
            ratios = [f"{med[k] / med['c1']:.2f}" for k in ("cb", "pyb", "pyo")]
            print(f"| {f} | {tag} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
