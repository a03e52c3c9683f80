"""Dual-arm capture: two planar 3-DOF arms on a free-floating base close a loop through a captured target.

The system is the planar dual-arm robot of Dimitrov's thesis (seed 003, section 5.4, Appendix F.2, Tables
F.4-F.5; built by examples/seed004_models.py as examples/seed004_dual_arm.yaml): arm 1 holds the target
rigidly, and the weld ``ee2 == grasp2`` (hand 2 on the target) closes the chain (seed 004 section III-D,
``cflag``).  12 tree coordinates (6 base + 6 joints), 3 independent weld rows in the plane, 9 independent
coordinates (seed 004 eq. 5).

The closed-loop functions are generated as C (``closed_loop_forward_dynamics``,
``closed_loop_dependent_velocities``, ``closed_loop_constraints``, plus ``momentum``) and the post-capture
motion is integrated with RK4: the whole system starts tumbling rigidly (base spin 0.05 rad/s about z,
drift 0.02 m/s along x: the momentum taken over from the target) and the joints are driven by torques
``A sin(w_i t)`` (A = 10 N m by default, w_i as in docs/structure-changes.md), base wrench zero.  The
stabilisation is the one of docs/structure-changes.md: ``projection`` (default: Newton on ``g(q) = 0`` and
the dependent velocities recomputed after every step), ``none``, or ``baumgarte`` / ``both`` (these two use
the float forward dynamics of the generic core, ``soadyn.runtime.closed_loop.forward_dynamics``, since the
generated function has no Baumgarte terms; slower).

Printed: the partition, max |g| (position level), max |J_c v| (velocity level) and the drift of the
momentum (no external wrench: it must stay constant).

Run:  python examples/dual_arm_capture.py [--duration 5] [--dt 0.01] [--torque 10] [--compare]
          [--stabilisation {projection,none,baumgarte,both}] [--plot out.png] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from soadyn.cli.options import add_time_options, parse_time_options

HERE = Path(__file__).resolve().parent
#: capture configuration j1..j6 [deg] (= seed004_models.Q_CAPTURE: arms up, hands 1 m apart)
Q_CAPTURE_DEG = [80, 10, 10, -80, -10, -10]
#: the generated functions this script needs (the full table is not built)
FUNCTIONS = [
    "closed_loop_forward_dynamics",
    "closed_loop_dependent_velocities",
    "closed_loop_constraints",
    "momentum",
]
OMEGA = np.array([1.0, 2.0, 3.0, 1.5, 2.5, 0.7])  # torque frequencies [rad/s] (docs/structure-changes.md)


def captured_system():
    """(tree robot, robot with the capture weld, capture configuration)."""
    from soadyn import load_robot
    from soadyn import structure as st

    tree = load_robot(HERE / "seed004_dual_arm.yaml")
    closed = st.close_loop(tree, "ee2", "grasp2", "weld", name="capture")
    # its own module name: generated/seed004_dual_arm stays untouched
    closed = closed.replace(name="dual_arm_capture_loop")
    q = tree.neutral()
    q[7:] = np.radians(Q_CAPTURE_DEG)
    return tree, closed, q


def joint_torques(nv: int, amplitude: float):
    def tau(t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        out = np.zeros(nv)
        out[6:] = amplitude * np.sin(OMEGA * t)
        return out

    return tau


def run(module, closed, q0, v0, duration: float, dt: float, stabilisation: str,
        amplitude: float = 10.0) -> dict:
    """Simulate and measure constraint violation and momentum drift."""
    from soadyn.runtime import closed_loop as cl

    ccl = cl.CompiledClosedLoop(module, closed)
    if stabilisation in ("none", "projection"):
        fd = lambda q, v, tau, part, bg: ccl.forward_dynamics(q, v, tau)  # noqa: E731 - generated C
    else:
        fd = None  # the core's closed-loop algorithm on floats, with the Baumgarte terms
    steps = int(round(duration / dt))
    t0 = time.perf_counter()
    tr = cl.simulate(closed, q0, v0, joint_torques(closed.nv, amplitude), dt=dt, steps=steps,
                     stabilisation=stabilisation, part=ccl.partition, fd=fd)
    wall = time.perf_counter() - t0
    h = np.asarray(module.momentum(tr.q, tr.v))  # (N, 6): [L about the CoM; P], inertial axes
    g, jv = module.closed_loop_constraints(tr.q, tr.v)  # generated check of the same quantities
    return {
        "trajectory": tr,
        "stabilisation": stabilisation,
        "wall": wall,
        "max_g": float(tr.position_error.max()),
        "max_Jv": float(tr.velocity_error.max()),
        "max_g_generated": float(np.abs(g).max()),
        "max_Jv_generated": float(np.abs(jv).max()),
        "momentum": h,
        "momentum_drift": float(np.abs(h - h[0]).max()),
        "momentum_scale": float(np.abs(h[0]).max()),
        "joint_travel": float(np.abs(tr.q[:, 7:] - q0[7:]).max()),
    }


def plot(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from soadyn.runtime.trajectory import save_time_plots

    tr, h = res["trajectory"], res["momentum"]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.6))
    ax[0].plot(tr.t, np.degrees(tr.q[:, 7:]))
    ax[0].legend([f"j{i}" for i in range(1, 7)], fontsize=7, ncol=2)
    ax[0].set_title("joint angles [deg]")
    ax[1].semilogy(tr.t, np.maximum(tr.position_error, 1e-18), label="max |g(q)|")
    ax[1].semilogy(tr.t, np.maximum(tr.velocity_error, 1e-18), label="max |J_c v|")
    ax[1].set_title(f"constraint violation ({res['stabilisation']})")
    ax[1].legend(fontsize=7)
    ax[2].plot(tr.t, h - h[0])
    ax[2].legend(["Lx", "Ly", "Lz", "Px", "Py", "Pz"], fontsize=7, ncol=2)
    ax[2].set_title("momentum - initial [N m s | N s]")
    save_time_plots(fig, ax, path)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_time_options(ap, 5.0, 0.01, "directory for the generated module (default: a temporary directory)")
    ap.add_argument("--torque", type=float, default=10.0, help="joint torque amplitude A [N m] (default 10)")
    ap.add_argument("--stabilisation", default="projection",
                    choices=["projection", "none", "baumgarte", "both"])
    ap.add_argument("--compare", action="store_true", help="also run the other stabilisation modes")
    ap.add_argument("--plot", metavar="PNG", help="write a plot of the run (needs matplotlib)")
    args = parse_time_options(ap, argv)

    from soadyn import structure as st
    from soadyn.codegen import compile as compile_robot
    from soadyn.runtime import closed_loop as cl
    from soadyn.symbolic.algorithms.closed_loop import n_constraint_rows

    tree, closed, q0 = captured_system()
    print(f"dual-arm capture: {tree.nv} tree coordinates, {n_constraint_rows(closed)} weld constraint "
          "rows")
    print(st.format_connectivity(st.connectivity_table(closed)))

    out = args.out or Path(tempfile.mkdtemp(prefix="dual_arm_capture_"))
    t0 = time.perf_counter()
    module = compile_robot(closed, out, functions=FUNCTIONS, progress=False)
    print(f"generated + compiled closed-loop functions in {time.perf_counter() - t0:.1f} s ({out})")

    ccl = cl.CompiledClosedLoop(module, closed)
    part = ccl.partition
    print(f"partition fixed at generation time: {part.describe()}; kept weld rows {part.rows} "
          f"(planar: w_z, v_x, v_y); {part.n_independent} independent coordinates")
    seed_ind = tuple(part.names.index(n) for n in [*part.names[:6], "j1", "j3", "j5"])
    seed_part = cl.Partition(tuple(i for i in range(tree.nv) if i not in seed_ind), seed_ind, part.names,
                             part.rows)
    cl.project_velocity(closed, q0, np.zeros(tree.nv), seed_part)  # raises if its J_D were singular here
    print(f"(seed 003 section 5.4 chooses joints 1, 3, 5 independent; the float path accepts that too: "
          f"{seed_part.describe()})")

    # post-capture state: rigid tumble; the dependent rates follow from the independent ones (seed 003
    # eq. 2.54), here all joint rates are zero
    v_guess = np.zeros(tree.nv)
    v_guess[2] = 0.05
    v_guess[3] = 0.02
    v0 = ccl.dependent_velocities(q0, v_guess)

    modes = [args.stabilisation]
    if args.compare:
        modes += [m for m in ("projection", "none", "baumgarte") if m != args.stabilisation]
    results = {}
    print(f"\nRK4, dt = {args.dt:g} s, {args.duration:g} s, "
          f"torques {args.torque:g} sin(w_i t) N m on j1..j6:")
    print(f"{'stabilisation':<14} {'max |g|':>9} {'max |J v|':>9} {'|h(t)-h(0)|':>11} {'wall [s]':>8}")
    for mode in modes:
        res = run(module, closed, q0, v0, args.duration, args.dt, mode, args.torque)
        results[mode] = res
        print(f"{mode:<14} {res['max_g']:9.2e} {res['max_Jv']:9.2e} {res['momentum_drift']:11.2e} "
              f"{res['wall']:8.1f}")
    main_res = results[args.stabilisation]
    print(f"momentum scale max|h(0)| = {main_res['momentum_scale']:.3g} (N m s, N s); "
          f"joints moved up to {np.degrees(main_res['joint_travel']):.1f} deg")
    print(f"generated closed_loop_constraints along the {args.stabilisation} run: max |g| = "
          f"{main_res['max_g_generated']:.2e}, max |J v| = {main_res['max_Jv_generated']:.2e}")
    if args.plot:
        plot(main_res, args.plot)
        print(f"plot written to {args.plot}")
    return results


if __name__ == "__main__":
    res = main()
    sys.exit(0 if res else 1)
