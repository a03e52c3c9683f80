"""Reproduce Tian & Wu (seed 001) section 6: a 3-DOF arm on a free-floating base under constant torques.

T(1..3) = -0.5, -0.3, -0.1 N m for 5 s, step 1 ms, initial angles [pi/2, 0, pi/2], everything at rest
(robot: examples/tian_wu_3dof.yaml; link lengths inferred, see its header).  The paper shows the base
displacement in x and y (Fig. 4-5); it prints no numbers, so what can be checked is what the physics
requires: the total momentum stays zero and the system CoM does not move (their section 5).

Run:  python examples/reproduce_tian_wu.py [--python] [--plot tian_wu.png]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def module_for(path: Path, python: bool = False, cache: str | None = None):
    """A compiled module for the robot file (or the pure-Python stand-in)."""
    from soadyn import load_robot
    from soadyn.runtime.numeric_module import NumericModule

    robot = load_robot(path)
    if python:
        return NumericModule(robot), robot
    from soadyn.codegen import compile as compile_robot

    return compile_robot(robot, out_dir=cache), robot


def run(module, robot, duration: float = 5.0, dt: float = 1e-3) -> dict:
    from soadyn.runtime.simulate import simulate

    q0 = robot.neutral()
    q0[7:] = [np.pi / 2, 0.0, np.pi / 2]
    traj = simulate(module, q0, np.zeros(robot.nv), duration, torques=[-0.5, -0.3, -0.1], dt=dt)
    return {
        "trajectory": traj,
        "momentum_drift": traj.momentum_drift(),
        "com_drift": float(np.max(np.linalg.norm(traj.com - traj.com[0], axis=1))),
        "base_displacement": traj.q[-1, :3] - traj.q[0, :3],
        "base_yaw_deg": float(np.degrees(traj.base_rpy[-1, 2])),
        "joint_angles_end": traj.q[-1, 7:],
        "energy_balance": traj.energy_balance_error(),
    }


def plot(res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from soadyn.runtime.trajectory import save_time_plots

    tr = res["trajectory"]
    fig, ax = plt.subplots(1, 3, figsize=(13, 3.8))
    ax[0].plot(tr.t, tr.q[:, 0] - tr.q[0, 0])
    ax[0].set_title("base displacement x [m] (cf. Fig. 4)")
    ax[1].plot(tr.t, tr.q[:, 1] - tr.q[0, 1])
    ax[1].set_title("base displacement y [m] (cf. Fig. 5)")
    for j in range(3):
        ax[2].plot(tr.t, tr.v[:, 6 + j], label=f"joint {j + 1}")
    ax[2].plot(tr.t, tr.v[:, 2], "k--", label="base (z)")
    ax[2].set_title("angular velocities [rad/s] (cf. Fig. 6)")
    ax[2].legend()
    save_time_plots(fig, ax, path)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", action="store_true", help="pure-Python algorithms (slow, no compiler)")
    p.add_argument("--plot", default=None, help="write the displacement curves to this PNG")
    p.add_argument("--cache", default=None, help="directory for the compiled module")
    args = p.parse_args(argv)
    module, robot = module_for(HERE / "tian_wu_3dof.yaml", args.python, args.cache)
    res = run(module, robot)
    d = res["momentum_drift"]
    print(f"momentum drift over 5 s: angular {np.max(d[:3]):.2e} N m s, linear {np.max(d[3:]):.2e} N s")
    print(f"CoM drift: {res['com_drift']:.2e} m; energy balance error {res['energy_balance']:.2e} J")
    print(f"base displacement after 5 s: {np.array2string(res['base_displacement'], precision=5)} m, "
          f"base yaw {res['base_yaw_deg']:.3f} deg")
    print(f"joint angles after 5 s: {np.array2string(res['joint_angles_end'], precision=4)} rad")
    if args.plot:
        plot(res, args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
