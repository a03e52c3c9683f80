#!/usr/bin/env python3
"""Overhead of the CasADi and JAX bindings over the direct module call, and IPOPT with exact vs
finite-difference derivatives (issue 23, "Checks").

1. **Calls** (default): per robot, ``forward_dynamics`` and ``inverse_dynamics`` and their Jacobians, for
   one state and for a batch of states (default 10,000), on random states (joint angles in [-pi, pi],
   random unit base quaternion, v and tau/a normal):

   ============  =========================================  =========================================
   case          one state                                  batch of N states
   ============  =========================================  =========================================
   module        ``m.forward_dynamics(q, v, tau)``          ``m.forward_dynamics(Q, V, TAU)`` (batched
                 (numpy in, new numpy result)               C entry point, ``threads=1``)
   CasADi        ``f(q, v, tau)``, f = ``soadyn.casadi.     ``f.map(N)(Q, V, TAU)`` (serial map; inputs
                 function(m, ...)``, numpy in, DM out       DM, one column per state)
   JAX           ``jax.jit(w.forward_dynamics)`` on jax     ``jax.jit(jax.vmap(w.forward_dynamics))``
                 arrays, ``block_until_ready``
   ============  =========================================  =========================================

   Jacobians: module ``forward_dynamics_derivatives`` (da/dq, da/dv, da/dtau) and, for the inverse
   dynamics, ``inverse_dynamics_derivatives`` + ``mass_matrix`` (dtau/da); CasADi ``f.jacobian()`` (its
   inputs include the nominal output; batch: ``f.jacobian().map(N)``); JAX ``jax.jit(jax.jacfwd(f,
   argnums=(0, 1, 2)))`` (batch: ``jit(vmap(jacfwd(f)))``, and ``jit(vmap(soadyn.jax.jacobian(w, api)))``,
   the same values without jacfwd's product of the Jacobian with the identity basis of the tangents).
   The bindings differentiate with respect to the
   raw q (nq columns; the module's derivatives are in the tangent space, nv columns): that conversion is
   part of what the bindings cost.  Each binding's values are checked against the module first (printed).

   Last, the frameworks' floor at the same shapes, no soadyn inside: a CasADi SX function and a jitted
   ``jax.pure_callback`` computing ``v + tau`` (the module column: numpy ``v + tau``).

   Timing as the other benchmarks: a repetition runs the call enough times to last >= 20 ms (single
   state) or at least once (batch); wall clock (``time.perf_counter``), minimum of ``--repeats``
   repetitions, best of ``--rounds`` rounds.  ns per call (one state) or per state (batch).

2. **Planner** (``--planner``): ``examples/plan_tumbling_grasp.py``'s IPOPT direct multiple shooting,
   same problem and start, first derivatives exact (the generated Jacobians through ``jac_<name>``) or
   CasADi's finite differences of the same C functions (a library without ``jac_`` symbols), each with
   IPOPT's exact Hessian (CasADi's finite differences of the first derivatives) and with its
   limited-memory quasi-Newton Hessian.  Printed per round: iterations, solve time (``Opti.solve``, setup
   included), final violation (the plan simulated again, as the example measures it), objective.

Usage::

    python benchmarks/bench_bindings.py      # Dimitrov 7-DOF + wheels (free) and UR10 (fixed)
    python benchmarks/bench_bindings.py --batch 10000 --rounds 3
    python benchmarks/bench_bindings.py --planner --rounds 3
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "examples"))

FUNCTIONS = ["forward_dynamics", "forward_dynamics_derivatives", "inverse_dynamics",
             "inverse_dynamics_derivatives", "mass_matrix", "jacobian"]
#: held-out fixed-base arm: example-robot-data's UR10 (the tests use the Panda, the UR5 and the Z1)
HELD_OUT = ("ur10", "ur_description/urdf/ur10_robot.urdf")


def robots() -> list[tuple[str, object]]:
    from bench_pinocchio import cmeel_prefix

    import soadyn

    out = [("dimitrov_7dof_rw (free)", soadyn.load_robot(REPO / "examples" / "dimitrov_7dof_rw.yaml"))]
    urdf = cmeel_prefix() / "share" / "example-robot-data" / "robots" / HELD_OUT[1]
    out.append((f"{HELD_OUT[0]} (fixed)", soadyn.load_robot(urdf, base="fixed").rigid()))
    return out


def states(m, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    Q = rng.uniform(-np.pi, np.pi, (n, m.nq))
    if m.base == "free":
        Q[:, 0:3] = rng.normal(size=(n, 3))
        quat = rng.normal(size=(n, 4))
        Q[:, 3:7] = quat / np.linalg.norm(quat, axis=1, keepdims=True)
    return Q, rng.normal(size=(n, m.nv)), rng.normal(size=(n, m.nv))


def best_ns(fn: Callable[[], object], per: int, repeats: int, min_s: float = 0.02) -> float:
    """ns per call of ``fn`` divided by ``per`` (states per call): loops sized to last >= ``min_s``,
    minimum over ``repeats`` repetitions."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-9)
    loops = max(1, int(min_s / once))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        best = min(best, (time.perf_counter() - t0) / loops)
    return best / per * 1e9


def _maxdiff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, dtype=float) - np.asarray(b, dtype=float))))


def cases(m, ca, sc, jax, w, N: int, rng: np.random.Generator) -> list[dict]:
    """The timed calls of one robot: dicts with function, case, per (states) and the three callables."""
    import jax.numpy as jnp

    import soadyn.jax as sj

    Q, V, T = states(m, N, rng)
    q, v, t = Q[0], V[0], T[0]

    def api_cases(api: str) -> list[dict]:
        out = []
        f = sc.function(m, api)
        fj = getattr(w, api)
        mod = getattr(m, api)
        jq, jv, jt = jnp.asarray(q), jnp.asarray(v), jnp.asarray(t)
        JQ, JV, JT = jnp.asarray(Q), jnp.asarray(V), jnp.asarray(T)
        DQ, DV, DT = ca.DM(Q.T), ca.DM(V.T), ca.DM(T.T)
        # values
        one_j = jax.jit(fj)
        bat_j = jax.jit(jax.vmap(fj))
        bat_c = f.map(N)
        ref1, refN = mod(q, v, t), mod(Q, V, T, threads=1)
        check = {"casadi": max(_maxdiff(np.asarray(f(q, v, t)).ravel(), ref1),
                               _maxdiff(np.asarray(bat_c(DQ, DV, DT)).T, refN)),
                 "jax": max(_maxdiff(one_j(jq, jv, jt), ref1), _maxdiff(bat_j(JQ, JV, JT), refN))}
        out.append({"function": api, "case": "value, 1 state", "per": 1, "check": check,
                    "module": lambda mod=mod: mod(q, v, t),
                    "casadi": lambda f=f: f(q, v, t),
                    "jax": lambda g=one_j: g(jq, jv, jt).block_until_ready()})
        out.append({"function": api, "case": f"value, {N:,} states", "per": N, "check": check,
                    "module": lambda mod=mod: mod(Q, V, T, threads=1),
                    "casadi": lambda g=bat_c: g(DQ, DV, DT),
                    "jax": lambda g=bat_j: g(JQ, JV, JT).block_until_ready()})
        # Jacobians
        if api == "forward_dynamics":
            def mder(q, v, t, threads=None):
                return m.forward_dynamics_derivatives(q, v, t, threads=threads)
        else:
            def mder(q, v, t, threads=None):
                return (*m.inverse_dynamics_derivatives(q, v, t, threads=threads),
                        m.mass_matrix(q, threads=threads))
        J = f.jacobian()
        a1 = f(q, v, t)
        AN = bat_c(DQ, DV, DT)
        bat_J = J.map(N)
        jac1 = jax.jit(jax.jacfwd(fj, argnums=(0, 1, 2)))
        jacN = jax.jit(jax.vmap(jax.jacfwd(fj, argnums=(0, 1, 2))))
        # d/dv and d/d(tau or a) are in both conventions the same: compare those blocks
        cj = J(q, v, t, a1)
        dm = mder(q, v, t)
        jj = jac1(jq, jv, jt)
        check = {"casadi": max(_maxdiff(cj[1], dm[-2]), _maxdiff(cj[2], dm[-1])),
                 "jax": max(_maxdiff(jj[1], dm[-2]), _maxdiff(jj[2], dm[-1]))}

        def jblock(res):
            for x in jax.tree_util.tree_leaves(res):
                x.block_until_ready()
        out.append({"function": api + " Jacobian", "case": "1 state", "per": 1, "check": check,
                    "module": lambda mder=mder: mder(q, v, t),
                    "casadi": lambda J=J, a1=a1: J(q, v, t, a1),
                    "jax": lambda g=jac1: jblock(g(jq, jv, jt))})
        out.append({"function": api + " Jacobian", "case": f"{N:,} states", "per": N, "check": check,
                    "module": lambda mder=mder: mder(Q, V, T, threads=1),
                    "casadi": lambda g=bat_J, AN=AN: g(DQ, DV, DT, AN),
                    "jax": lambda g=jacN: jblock(g(JQ, JV, JT))})
        # JAX without jacfwd's product with the identity basis: soadyn.jax.jacobian (same values)
        dirN = jax.jit(jax.vmap(sj.jacobian(w, api)))
        same = max(_maxdiff(x, y) for x, y in zip(dirN(JQ, JV, JT), jacN(JQ, JV, JT)))
        out.append({"function": api + " Jacobian, JAX soadyn.jax.jacobian", "case": f"{N:,} states",
                    "per": N, "check": {"casadi": check["casadi"], "jax": same},
                    "module": lambda mder=mder: mder(Q, V, T, threads=1),
                    "casadi": lambda g=bat_J, AN=AN: g(DQ, DV, DT, AN),
                    "jax": lambda g=dirN: jblock(g(JQ, JV, JT))})
        return out

    def floor() -> list[dict]:
        """The frameworks' own cost of a call with the same shapes, no soadyn inside: a CasADi SX function
        ``(q, v, tau) -> v + tau`` and a jitted ``jax.pure_callback`` returning ``v + tau`` from numpy."""
        Qs, Vs, Ts = (ca.SX.sym(n, k) for n, k in (("q", m.nq), ("v", m.nv), ("t", m.nv)))
        f = ca.Function("floor", [Qs, Vs, Ts], [Vs + Ts])

        def g(q, v, t):
            return jax.pure_callback(lambda q, v, t: np.asarray(v) + np.asarray(t),
                                     jax.ShapeDtypeStruct(v.shape, jnp.float64), q, v, t,
                                     vmap_method="broadcast_all")
        jq, jv, jt = jnp.asarray(q), jnp.asarray(v), jnp.asarray(t)
        JQ, JV, JT = jnp.asarray(Q), jnp.asarray(V), jnp.asarray(T)
        DQ, DV, DT = ca.DM(Q.T), ca.DM(V.T), ca.DM(T.T)
        one_j, bat_j, bat_c = jax.jit(g), jax.jit(jax.vmap(g)), f.map(N)
        return [{"function": "floor: v + tau, no soadyn", "case": "1 state", "per": 1,
                 "module": lambda: v + t, "casadi": lambda: f(q, v, t),
                 "jax": lambda: one_j(jq, jv, jt).block_until_ready()},
                {"function": "floor: v + tau, no soadyn", "case": f"{N:,} states", "per": N,
                 "module": lambda: V + T, "casadi": lambda: bat_c(DQ, DV, DT),
                 "jax": lambda: bat_j(JQ, JV, JT).block_until_ready()}]

    return [c for api in ("forward_dynamics", "inverse_dynamics") for c in api_cases(api)] + floor()


def bench_calls(args) -> None:
    import casadi as ca
    import jax

    import soadyn
    import soadyn.casadi as sc
    import soadyn.jax as sj

    jax.config.update("jax_enable_x64", True)
    print(f"casadi {ca.__version__}, jax {jax.__version__}, numpy {np.__version__}; "
          f"load average {os.getloadavg()[0]:.1f}")
    rows: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    built = []
    for label, robot in robots():
        m = soadyn.compile(robot, out_dir=args.workdir, functions=FUNCTIONS, progress=False)
        sc.library(m)
        w = sj.wrap(m)
        cs = cases(m, ca, sc, jax, w, args.batch, np.random.default_rng(0))
        built.append((label, m, cs))
        print(f"{label}: nq = {m.nq}, nv = {m.nv}")
        for c in cs:
            if c["per"] == 1 and "check" in c:
                print(f"  {c['function']}: max |binding - module| casadi {c['check']['casadi']:.1e}, "
                      f"jax {c['check']['jax']:.1e}" + ("  (d/dv, d/dtau|a blocks)" if "Jac" in c["function"]
                                                       else ""))
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}: load average {os.getloadavg()[0]:.1f}", flush=True)
        for label, _m, cs in built:
            for c in cs:
                key = (label, c["function"], c["case"])
                d = rows.setdefault(key, {})
                for side in ("module", "casadi", "jax"):
                    d.setdefault(side, []).append(best_ns(c[side], c["per"], args.repeats))
    print()
    print("| robot | function | case | module ns | CasADi ns | JAX ns | CasADi / module | JAX / module |")
    print("|---|---|---|---|---|---|---|---|")

    def rng_(xs: list[float]) -> str:
        lo, hi = min(xs), max(xs)
        return f"{lo:,.0f}" if hi < 1.05 * lo else f"{lo:,.0f}-{hi:,.0f}"

    for (label, fn, case), d in rows.items():
        rc = [c / mm for c, mm in zip(d["casadi"], d["module"])]
        rj = [j / mm for j, mm in zip(d["jax"], d["module"])]
        print(f"| {label} | {fn} | {case} | {rng_(d['module'])} | {rng_(d['casadi'])} | {rng_(d['jax'])} | "
              f"{min(rc):.2f}-{max(rc):.2f}x | {min(rj):.2f}-{max(rj):.2f}x |")
    print("\n(ranges: min-max over the rounds of each round's minimum of repetitions; ns per call for 1 "
          "state, per state for a batch)")


def bench_planner(args) -> None:
    import plan_tumbling_grasp as ptg

    from soadyn import load_robot
    from soadyn.codegen import compile as soadyn_compile

    robot = load_robot(ptg.ROBOT)
    mod = soadyn_compile(robot, args.workdir, functions=ptg.FUNCTIONS, progress=False)
    planner = ptg.Planner(mod, robot, ptg.Target(np.array([1.8, -1.8, 1.7])), args.steps, args.horizon)
    print(f"planner: {robot.name}, {planner.N} steps of {planner.h:.3f} s; load average "
          f"{os.getloadavg()[0]:.1f}")
    configs = [(d, h) for h in ("exact", "limited-memory") for d in ("exact", "fd")]
    res: dict[tuple[str, str], list[tuple]] = {}
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds}: load average {os.getloadavg()[0]:.1f}", flush=True)
        for d, h in configs:
            U, secs, st = ptg.solve_ipopt(planner, hessian=h, derivatives=d)
            cost = planner.rollout(U.ravel(), False)["cost"]
            row = (st["iter_count"], secs, ptg.violation(planner, U), cost, st.get("return_status", "?"))
            res.setdefault((d, h), []).append(row)
            print(f"  derivatives {d:5s} hessian {h:14s}: {row[0]:4d} it, {secs:7.2f} s, violation "
                  f"{row[2]:.1e}, objective {row[3]:.10e} ({row[4]})", flush=True)
    print()
    print("| first derivatives | Hessian | iterations | solve time [s] | final violation | objective "
          "| status |")
    print("|---|---|---|---|---|---|---|")
    for (d, h), rows in res.items():
        it = sorted({x[0] for x in rows})
        t = [x[1] for x in rows]
        vi = [x[2] for x in rows]
        ob = [x[3] for x in rows]
        names = {"exact": "generated (jac_)", "fd": "CasADi finite differences"}
        hes = {"exact": "exact (FD of the first derivatives)", "limited-memory": "limited-memory"}
        print(f"| {names[d]} | {hes[h]} | {'/'.join(map(str, it))} | {min(t):.2f}-{max(t):.2f} | "
              f"{min(vi):.1e}-{max(vi):.1e} | {min(ob):.10e} | {', '.join(sorted({x[4] for x in rows}))} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=10000, help="states of the batched calls")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=7, help="repetitions per round (minimum taken)")
    ap.add_argument("--workdir", default=str(REPO / "build" / "bench_bindings"), help="module directory")
    ap.add_argument("--planner", action="store_true", help="IPOPT exact vs finite-difference derivatives")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--horizon", type=float, default=8.0)
    args = ap.parse_args(argv)
    if args.planner:
        bench_planner(args)
    else:
        bench_calls(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
