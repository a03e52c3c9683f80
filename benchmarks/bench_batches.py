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

``--params-only`` prints only the table of issue 26 item 3 for the robot (``--urdf``/``--lock``: a held-out
robot, free base, every body parameterised; modules of the same functions on both sides, since a larger
module alone measured ~50 ns slower per single call): each row's constant and parameterised figures are
taken alternately, ``--rounds`` times, and printed as ranges with the ratio of the fastest ones.

Usage:  python benchmarks/bench_batches.py [--states 2000] [--out-dir benchmarks/build/bench_batches]
        python benchmarks/bench_batches.py --params-only [--urdf X.urdf --lock J ...] [--rounds 5]
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


#: issue 26 item 3: parameterised / constant, per row
TARGETS = {"ID single, params= one set (checked)": "<= 1.2",
           "ID batch, one set per state (checked)": "<= 1.3",
           "ID batch, one set per state, check_params=False": "<= 1.3",
           "regressor: single (left) vs batch (right)": "< 1",
           "regressor: single vs batch of 256 states": "< 1"}


def _span(xs: list[float]) -> str:
    return f"{min(xs):,.0f}-{max(xs):,.0f}" if len(xs) > 1 else f"{xs[0]:,.0f}"


def params_table(const, out_dir: Path, n: int, rounds: int) -> None:
    """Issue 26 item 3 on ``const`` (free base): every body parameterised against the constant module,
    ns per state, each row's two sides measured alternately ``rounds`` times (ranges; ratio of minima)."""
    tag = const.name
    mc = compile_robot(const.replace(name=f"{tag}_const"), out_dir, functions=["inverse_dynamics"],
                       progress=False)
    prm = with_param_bodies(const, "all").replace(name=f"{tag}_params")
    mp = compile_robot(prm, out_dir, functions=["inverse_dynamics"], progress=False)
    mr = compile_robot(prm.replace(name=f"{tag}_regressor"), out_dir,
                       functions=["inverse_dynamics_regressor"], progress=False)
    rng = np.random.default_rng(0)
    q = np.stack([const.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, const.nv)), rng.normal(size=(n, const.nv))
    ps = np.stack([random_params(prm, rng) for _ in range(n)])
    p0 = ps[0].copy()
    q0, v0, a0 = q[0], v[0], a[0]
    g, gc, reg = mp.inverse_dynamics, mc.inverse_dynamics, mr.inverse_dynamics_regressor
    k = 1000
    count = [0]

    def fresh() -> np.ndarray:          # a new, still consistent batch (all parameters scaled)
        count[0] += 1
        return ps * (1.0 + 1e-9 * count[0])

    def loop(f: Callable[[], object]) -> None:
        for _ in range(k):          # results dropped: a list of k regressors (8 KB each) page-faulted 4x
            f()

    def single(f: Callable[[], object]) -> Callable[[], float]:
        return lambda: best_ns(lambda: loop(f), k)

    def batch(f: Callable[[], object], reps: int = 5) -> Callable[[], float]:
        return lambda: best_ns(f, n, reps)

    # (row, constant side, parameterised side): the constant module's call, and the same call with params
    rows = [
        ("ID single, no params= (robot file's values)", single(lambda: gc(q0, v0, a0)),
         single(lambda: g(q0, v0, a0))),
        ("ID single, params= one set (checked)", single(lambda: gc(q0, v0, a0)),
         single(lambda: g(q0, v0, a0, params=p0))),
        ("ID single, params= check_params=False", single(lambda: gc(q0, v0, a0)),
         single(lambda: g(q0, v0, a0, params=p0, check_params=False))),
        ("ID batch, one set for all states", batch(lambda: gc(q, v, a, threads=1)),
         batch(lambda: g(q, v, a, params=p0, threads=1))),
        ("ID batch, one set per state (checked)", batch(lambda: gc(q, v, a, threads=1)),
         batch(lambda: g(q, v, a, params=ps, threads=1))),
        ("ID batch, one set per state, check_params=False", batch(lambda: gc(q, v, a, threads=1)),
         batch(lambda: g(q, v, a, params=ps, threads=1, check_params=False))),
        ("ID batch, one set per state, new each call", batch(lambda: gc(q, v, a, threads=1)),
         batch(lambda: g(q, v, a, params=fresh(), threads=1), reps=3)),
        ("ID batch, C only (no Python, no checks)", batch(lambda: c_const(n, *c_args, c_tau)),
         batch(lambda: c_params(n, *c_args, c_ps, c_tau))),
        ("ID batch of 256 states, C only", lambda: best_ns(lambda: c_const(256, *c_args, c_tau), 256, 20),
         lambda: best_ns(lambda: c_params(256, *c_args, c_ps, c_tau), 256, 20)),
        ("regressor: single (left) vs batch (right)", single(lambda: reg(q0, v0, a0)),
         batch(lambda: reg(q, v, a, threads=1))),
        ("regressor: single vs batch of 256 states", single(lambda: reg(q0, v0, a0)),
         lambda: best_ns(lambda: reg(q[:256], v[:256], a[:256], threads=1), 256, 20)),
    ]
    # the C batch entries themselves (cffi, no Python checks): where the time goes
    fb, tau = mc._ffi.from_buffer, np.empty((n, const.nv))
    c_args = [fb("double[]", x) for x in (q, v, a)]
    c_ps, c_tau = fb("double[]", ps), fb("double[]", tau, True)
    c_const = getattr(mc._lib, f"{mc.module_name}_inverse_dynamics_batch")
    c_params = getattr(mp._lib, f"{mp.module_name}_inverse_dynamics_batch")
    g(q, v, a, params=ps)               # the repeated batch: accepted once before timing
    times: dict[str, tuple[list[float], list[float]]] = {r[0]: ([], []) for r in rows}
    for _ in range(rounds):
        for name, left, right in rows:
            times[name][0].append(left())
            times[name][1].append(right())
    print(f"{const.name}: free base, nv={const.nv}, all {len(prm.param_bodies)} bodies parameterised; "
          f"{n} states; ns per state (process CPU time, fastest of 5 per figure, {rounds} alternating "
          f"rounds); load average {open('/proc/loadavg').read().split()[0]}")
    print(f"| {'call':50s} | {'constant':>11s} | {'params':>11s} | {'ratio':>5s} | target |")
    print(f"|{'-' * 52}|{'-' * 13}|{'-' * 13}|{'-' * 7}|--------|")
    for name, _, _ in rows:
        c, p = times[name]
        target = TARGETS.get(name)
        print(f"| {name:50s} | {_span(c):>11s} | {_span(p):>11s} | {min(p) / min(c):5.2f} | "
              f"{target or '':6s} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--out-dir", type=Path, default=HERE / "build" / "bench_batches")
    ap.add_argument("--params-only", action="store_true", help="only the params= table (issue 26 item 3)")
    ap.add_argument("--urdf", type=Path, help="another robot (free base) for --params-only")
    ap.add_argument("--lock", nargs="*", default=[], help="joints of --urdf locked at 0")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of the params= table")
    args = ap.parse_args(argv)
    if args.params_only:
        if args.urdf:
            robot = lock_joints(load_robot(args.urdf, base="free", mimic="independent"), args.lock)
            robot = robot.replace(name="bb_" + "".join(c if c.isalnum() else "_" for c in args.urdf.stem))
        else:
            preset = bp.PRESETS["panda"]
            robot = lock_joints(load_robot(preset["urdf"](), base="free", mimic="independent"),
                                preset["lock"]).replace(name="bb_panda")
        params_table(robot, args.out_dir, args.states, args.rounds)
        return 0
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
