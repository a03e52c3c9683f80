"""Reproduce Dimitrov's thesis (seed 003) experiments on the Appendix F 7-DOF arm with 3 reaction wheels.

1. Reactionless motion (section 3.1, eq. 3.15): arm accelerations from the reaction null space of the
   angular coupling inertia keep the base angular velocity at zero while the end-effector moves.
2. Bias momentum approach, case S_A (section 4.5.2.3): wheel torques -0.1 N m on each wheel for 30 s with
   the arm under the momentum management law (eq. 4.21, realised dynamically by Reaction Null Space
   Control, eq. 5.5, K_b = 25, K_m = 10).  The thesis states L_bm = [3, 3, 3] N m s at t_f = 30 s, a
   "full-bias" distribution, and (Step A) that from phi(t0) = [-10.3, 22.6, 14.9, -35.6, -150.6, 32.2, 16.6]
   deg the end-effector arrives near the grasping point r_g(t_f) = [2, -1.2, 1.54] m.  The same motion is
   also computed at kinematic level (the thesis's own steps 1-6).
3. Generalised Jacobian (eq. E.6): the end-effector velocity predicted from joint rates and momentum,
   integrated along a free-floating simulation with non-zero momentum, matches the simulated motion.

Run:  python examples/reproduce_dimitrov.py [--plot dimitrov.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
WHEELS = ["j8", "j9", "j10"]
ARM = [f"j{i}" for i in range(1, 8)]
PHI0_DEG = [-10.3, 22.6, 14.9, -35.6, -150.6, 32.2, 16.6]     # thesis section 4.5.2.3, Step A result
R_G_TF = np.array([2.0, -1.2, 1.54])                           # grasping point at t_f = 30 s


def module_for(python: bool = False, cache: str | None = None):
    from soadyn import load_robot
    from soadyn.runtime.numeric_module import NumericModule

    robot = load_robot(HERE / "dimitrov_7dof_rw.yaml")
    if python:
        return NumericModule(robot), robot
    from soadyn.codegen import compile as compile_robot

    return compile_robot(robot, out_dir=cache), robot


_ROBOT = None


def _robot():
    global _ROBOT
    if _ROBOT is None:
        from soadyn import load_robot

        _ROBOT = load_robot(HERE / "dimitrov_7dof_rw.yaml")
    return _ROBOT


def ee_position(module, q) -> np.ndarray:
    """End-effector position (inertial frame) at configuration q."""
    from soadyn.symbolic.frames import frame_pose

    return frame_pose(_robot(), q, "ee")[1]


def initial_state(robot) -> tuple[np.ndarray, np.ndarray]:
    q0 = robot.neutral()
    q0[7:14] = np.radians(PHI0_DEG)
    return q0, np.zeros(robot.nv)


def reactionless(module, robot, duration: float = 10.0, dt: float = 0.01) -> dict:
    from soadyn.runtime.control import ReactionlessController
    from soadyn.runtime.simulate import simulate

    q0, v0 = initial_state(robot)
    xi = lambda t, q, v: 0.02 * np.sin(0.5 * t + np.arange(7))  # noqa: E731 - arbitrary smooth input
    traj = simulate(module, q0, v0, duration, torques=ReactionlessController(module, xi, joints=ARM), dt=dt)
    p = np.array([ee_position(module, q) for q in traj.q])
    return {"trajectory": traj, "max_base_rate": float(np.max(np.abs(traj.v[:, :3]))),
            "ee_path_length": float(np.sum(np.linalg.norm(np.diff(p, axis=0), axis=1))),
            "ee_displacement": float(np.linalg.norm(p[-1] - p[0])), "momentum_drift": traj.momentum_drift()}


def bias_momentum(module, robot, duration: float = 30.0, dt: float = 0.01,
                  kinematic_dt: float = 0.05) -> dict:
    from soadyn.runtime.control import ReactionNullSpaceControl, partial_momenta, simulate_momentum_management
    from soadyn.runtime.simulate import simulate

    q0, v0 = initial_state(robot)
    ctrl = ReactionNullSpaceControl(module, WHEELS, tau_r=[-0.1, -0.1, -0.1], K_b=25.0, K_m=10.0)
    traj = simulate(module, q0, v0, duration, torques=ctrl, dt=dt)
    pm = [partial_momenta(module, q, v, WHEELS) for q, v in zip(traj.q, traj.v)]
    kin = simulate_momentum_management(module, q0, WHEELS, [-0.1, -0.1, -0.1], duration, dt=kinematic_dt)
    return {"trajectory": traj, "L_bm": np.array([x["manipulator"] for x in pm]),
            "L_r": np.array([x["wheels"] for x in pm]), "L_b": np.array([x["base"] for x in pm]),
            "max_base_rate": float(np.max(np.abs(traj.v[:, :3]))),
            "ee_end": ee_position(module, traj.q[-1]), "ee_start": ee_position(module, q0),
            "ee_end_kinematic": ee_position(module, kin["q"][-1]), "kinematic": kin,
            "max_arm_rate": float(np.max(np.abs(traj.v[:, 6:13]))), "momentum_drift": traj.momentum_drift()}


def generalized_jacobian_prediction(module, robot, duration: float = 5.0, dt: float = 0.005) -> dict:
    """Free-floating motion with non-zero momentum (a tumbling base) under constant joint torques; the
    end-effector velocity predicted by eq. E.6 is integrated (Simpson) and compared with the motion."""
    from soadyn.runtime.control import frame_twist
    from soadyn.runtime.simulate import simulate

    q0, v0 = initial_state(robot)
    v0[:3] = [0.01, -0.02, 0.015]
    v0[3:6] = [0.01, 0.0, -0.01]
    tau = np.concatenate([[0.4, -0.3, 0.2, 0.1, -0.05, 0.05, 0.02], [0.05, -0.05, 0.05]])
    traj = simulate(module, q0, v0, duration, torques=tau, dt=dt)
    p = np.array([ee_position(module, q) for q in traj.q])
    vel = np.array([frame_twist(module, q, "ee", v[6:], traj.momentum[0])[3:]
                    for q, v in zip(traj.q, traj.v)])
    n = (len(traj.t) - 1) // 2 * 2                      # Simpson needs an even number of intervals
    h = traj.t[1] - traj.t[0]
    simpson = h / 3 * (vel[0] + 4 * vel[1:n:2].sum(0) + 2 * vel[2:n - 1:2].sum(0) + vel[n])
    # the zero-momentum Jacobian alone (eq. E.5 without the momentum term) for contrast
    from soadyn.symbolic.algorithms import generalized_jacobian
    from soadyn.symbolic.scalar import NUMERIC

    vel0 = np.array([(generalized_jacobian(robot, NUMERIC, q, "ee") @ v[6:])[3:]
                     for q, v in zip(traj.q, traj.v)])
    simpson0 = h / 3 * (vel0[0] + 4 * vel0[1:n:2].sum(0) + 2 * vel0[2:n - 1:2].sum(0) + vel0[n])
    actual = p[n] - p[0]
    return {"trajectory": traj, "actual": actual, "predicted": simpson,
            "error": float(np.max(np.abs(simpson - actual))),
            "error_zero_momentum": float(np.max(np.abs(simpson0 - actual)))}


def plot(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from soadyn.runtime.trajectory import save_time_plots

    tr = res["trajectory"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, c in enumerate("xyz"):
        ax[0].plot(tr.t, res["L_bm"][:, i], label=f"L_bm {c}")
        ax[0].plot(tr.t, res["L_r"][:, i], "--", label=f"L_r {c}")
    ax[0].set_title("angular momentum distribution [N m s] (cf. Fig. 4.18, case F)")
    ax[0].legend(fontsize=7, ncol=2)
    ax[1].plot(tr.t, tr.v[:, 6:13])
    ax[1].set_title("arm joint rates [rad/s]")
    save_time_plots(fig, ax, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", action="store_true", help="pure-Python algorithms (very slow)")
    p.add_argument("--plot", default=None, help="write the momentum distribution plot to this PNG")
    p.add_argument("--cache", default=None, help="directory for the compiled module")
    args = p.parse_args(argv)
    module, robot = module_for(args.python, args.cache)
    r1 = reactionless(module, robot)
    print(f"[reactionless] max |w_base| = {r1['max_base_rate']:.2e} rad/s over 10 s; end-effector path "
          f"{r1['ee_path_length']:.3f} m (displacement {r1['ee_displacement']:.3f} m)")
    r2 = bias_momentum(module, robot)
    print(f"[bias momentum] L_bm(30 s) = {np.array2string(r2['L_bm'][-1], precision=6)} N m s "
          f"(thesis: [3, 3, 3]); L_r = {np.array2string(r2['L_r'][-1], precision=6)}; "
          f"max |w_base| = {r2['max_base_rate']:.2e} rad/s")
    print(f"[bias momentum] end-effector {np.array2string(r2['ee_start'], precision=3)} -> "
          f"{np.array2string(r2['ee_end'], precision=4)} m (kinematic-level eq. 4.21: "
          f"{np.array2string(r2['ee_end_kinematic'], precision=4)}); thesis r_g(t_f) = {R_G_TF} m, "
          f"distance {np.linalg.norm(r2['ee_end'] - R_G_TF):.4f} m")
    r3 = generalized_jacobian_prediction(module, robot)
    print(f"[generalised Jacobian] EE displacement {np.array2string(r3['actual'], precision=5)} m, "
          f"predicted (eq. E.6) error {r3['error']:.2e} m; zero-momentum Jacobian alone: "
          f"{r3['error_zero_momentum']:.2e} m")
    if args.plot:
        plot(r2, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
