#!/usr/bin/env python3
"""Python entry points of a compiled module: batched (``threads=1``) per state against one call per state,
and the cost of run-time inertial parameters (``params=``) against the constant module, in one run.

Robot: the Panda URDF of example-robot-data on a free base with the two finger joints locked (nv = 13),
every body's ten parameters an input (``with_param_bodies(robot, "all")``), and the same robot with its
inertias folded in as constants.  Times are process CPU time (the shared machine's other jobs do not count),
the fastest of a few repetitions, over 2,000 random states, all from Python through the module's own
functions (``soadyn.compile`` with the default profile):

* per function: one state per call (new result, and ``out=``), and the batch of all states with
  ``threads=1`` (new result, and ``out=``) per state; issue 26 asks batch <= 0.8x single;
* ``inverse_dynamics`` with ``params=``: one parameter set (first call checks it, the repeated set is not
  checked again), a new set per call, one set per state (repeated batch, and new each call), and
  ``check_params=False`` (no physical check: the caller's promise), against the constant module.

Usage:  python benchmarks/bench_batches.py [--states 2000] [--out-dir benchmarks/build/bench_batches]
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen.pipeline import compile_robot  # noqa: E402
from soadyn.model.parameters import random_params, with_param_bodies  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402

FUNCTIONS = ["inverse_dynamics", "forward_dynamics", "mass_matrix", "inverse_dynamics_derivatives",
             "forward_dynamics_derivatives", "inverse_dynamics_regressor", "momentum_regressor"]


def best_ns(f: Callable[[], object], per: int, reps: int = 5) -> float:
    """ns per item (``per`` items per call of ``f``): the fastest of ``reps`` runs, process CPU time."""
    b = float("inf")
    for _ in range(reps):
        t = time.process_time()
        f()
        b = min(b, time.process_time() - t)
    return b / per * 1e9


def _like(r: object) -> object:
    return tuple(np.empty_like(x) for x in r) if isinstance(r, tuple) else np.empty_like(r)


def batch_row(g: Callable, batch: list[np.ndarray], k: int) -> tuple[int, tuple[float, ...]]:
    """(result size, (single, single out=, batch per state, batch out= per state) ns) of function g."""
    n = len(batch[0])
    one = [x[0] for x in batch]
    o1, ob = _like(g(*one)), _like(g(*batch, threads=1))
    size = sum(x.size for x in o1) if isinstance(o1, tuple) else o1.size
    return size, (best_ns(lambda: [g(*one) for _ in range(k)], k),
                  best_ns(lambda: [g(*one, out=o1) for _ in range(k)], k),
                  best_ns(lambda: g(*batch, threads=1), n),
                  best_ns(lambda: g(*batch, threads=1, out=ob), n))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--out-dir", type=Path, default=HERE / "build" / "bench_batches")
    args = ap.parse_args(argv)
    preset = bp.PRESETS["panda"]
    const = lock_joints(load_robot(preset["urdf"](), base="free", mimic="independent"),
                        preset["lock"]).replace(name="bb_panda_const")
    prm = with_param_bodies(const, "all").replace(name="bb_panda_params")
    mc = compile_robot(const, args.out_dir, functions=["inverse_dynamics"], progress=False)
    mp = compile_robot(prm, args.out_dir, functions=FUNCTIONS, progress=False)
    rng = np.random.default_rng(0)
    n = args.states
    ins = {"q": np.stack([const.random_configuration(rng) for _ in range(n)]),
           "v": rng.normal(size=(n, const.nv)), "a": rng.normal(size=(n, const.nv))}
    ins["tau"] = ins["a"]
    k = 300
    print(f"Panda free base, fingers locked, all {len(prm.param_bodies)} bodies parameterised; {n} states; "
          "ns per state (process CPU time, fastest of 5)")
    print(f"{'function':30s} {'out B':>6s} {'single':>7s} {'out=':>7s} {'batch':>7s} {'out=':>7s} "
          f"{'ratio':>6s}")
    for fn in FUNCTIONS:
        g = getattr(mp, fn)
        batch = [ins[p] for p in inspect.signature(g).parameters if p in ins]
        size, times = batch_row(g, batch, k)
        ts, tso, tb, tbo = times
        print(f"{fn:30s} {8 * size:6d} {ts:7.0f} {tso:7.0f} {tb:7.0f} {tbo:7.0f} {tb / ts:6.2f}")
    q, v, a = ins["q"], ins["v"], ins["a"]
    ps = np.stack([random_params(prm, rng) for _ in range(n)])
    p0 = ps[0].copy()
    count = [0]

    def fresh() -> np.ndarray:          # a new, still consistent batch (all parameters scaled)
        count[0] += 1
        return ps * (1.0 + 1e-9 * count[0])

    g, gc = mp.inverse_dynamics, mc.inverse_dynamics
    q0, v0, a0 = q[0], v[0], a[0]
    rows = {
        "single, constant module": best_ns(lambda: [gc(q0, v0, a0) for _ in range(k)], k),
        "single, params default": best_ns(lambda: [g(q0, v0, a0) for _ in range(k)], k),
        "single, params= one set (repeated)": best_ns(lambda: [g(q0, v0, a0, params=p0)
                                                               for _ in range(k)], k),
        "single, params= check_params=False": best_ns(lambda: [g(q0, v0, a0, params=p0,
                                                                 check_params=False) for _ in range(k)], k),
        "single, params= new set each call": best_ns(lambda: [g(q0, v0, a0, params=ps[i])
                                                              for i in range(k)], k, reps=3),
        "batch, constant module": best_ns(lambda: gc(q, v, a, threads=1), n),
        "batch, one set for all states": best_ns(lambda: g(q, v, a, params=p0, threads=1), n),
        "batch, one set per state (repeated)": best_ns(lambda: g(q, v, a, params=ps, threads=1), n),
        "batch, one set per state (new each call)": best_ns(lambda: g(q, v, a, params=fresh(), threads=1), n),
        "batch, one set per state, check_params=False": best_ns(
            lambda: g(q, v, a, params=ps, threads=1, check_params=False), n),
    }
    print("\ninverse_dynamics with run-time parameters, ns per state")
    for name, t in rows.items():
        print(f"{name:46s} {t:9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
