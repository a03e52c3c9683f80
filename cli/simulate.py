"""``soadyn simulate``: the command-line front end of :func:`soadyn.runtime.simulate.simulate`.

``soadyn simulate ROBOT [--base free|fixed] [--mimic ...] --duration T [--dt DT] [--torque ...] [--q0 ...]
[--v0 ...] [--out F.npz] [--plot F.png] [--python] [--cache DIR]`` compiles (or loads from cache) the robot,
integrates it and prints the momentum drift and the energy balance error.  The robot options are the shared
ones of :func:`soadyn.cli.options.add_robot_args`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from soadyn.cli.options import add_robot_args
from soadyn.model.robotfile import RobotFileError
from soadyn.runtime.simulate import SimulationError, simulate


def add_simulate_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``soadyn simulate`` on a sub-parser collection; sets ``func=cmd_simulate``."""
    p = sub.add_parser(
        "simulate", help="simulate a robot under constant joint torques",
        description="Compile (or load from cache) a robot, integrate its forward dynamics with an SO(3) "
                    "Runge-Kutta-Munthe-Kaas step, save the trajectory (.npz) and optionally plot it.")
    add_robot_args(p)
    p.add_argument("--duration", type=float, required=True, help="simulated time [s]")
    p.add_argument("--dt", type=float, default=1e-3, help="integration step [s] (default 0.001)")
    p.add_argument("--torque", default=None,
                   help="constant generalised forces, comma separated: n_joints values (base unactuated) "
                        "or nv values (free base: base moment, base force, then joints); write "
                        "--torque=-0.5,-0.3 when the first value is negative")
    p.add_argument("--q0", default=None, help="initial configuration, comma separated: nq values or, for a "
                   "free base, n_joints joint values (base at the origin, identity attitude)")
    p.add_argument("--v0", default=None, help="initial velocity, comma separated (nv or n_joints values)")
    p.add_argument("--out", default=None, help="write the trajectory to this .npz file")
    p.add_argument("--plot", default=None,
                   help="write a plot (PNG) of base position/attitude, joints, momentum")
    p.add_argument("--python", action="store_true",
                   help="use the pure-Python algorithms instead of compiling C (slow; no compiler needed)")
    p.add_argument("--cache", default=None, help="directory for compiled modules (default: soadyn's cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)
    return p


def _parse_list(text: str | None, what: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise ValueError(f"--{what}: expected comma-separated numbers, got {text!r}") from None
    return np.array(vals)


def _load_module(args: argparse.Namespace) -> Any:
    from soadyn.codegen.pipeline import compile_robot, resolve_robot
    from soadyn.runtime.numeric_module import NumericModule

    robot, _ = resolve_robot(args.robot, args.base, mimic=args.mimic)
    if args.python:
        return NumericModule(robot), robot
    # from the file, so that a --base override gets its own module (<robot>_<base>), as with soadyn compile
    return compile_robot(args.robot, args.cache, args.base, mimic=args.mimic), robot


def _initial_state(default: np.ndarray, given: np.ndarray | None, flag: str, free: bool,
                   nj: int) -> np.ndarray:
    """``--q0`` / ``--v0``: the full vector, or (free base) the joint values alone on top of ``default``."""
    if given is None:
        return default
    if free and len(given) == nj:
        out = default.copy()
        out[len(default) - nj:] = given
        return out
    if len(given) == len(default):
        return given
    raise ValueError(f"--{flag}: expected {len(default)}" + (f" or {nj}" if free else "")
                     + f" values, got {len(given)}")


def cmd_simulate(args: argparse.Namespace) -> int:
    """``soadyn simulate``: returns the exit code (2 for bad arguments; a bad robot file raises
    :class:`~soadyn.model.RobotFileError`, which :func:`soadyn.cli.main.main` reports with exit code 1)."""
    try:
        module, robot = _load_module(args)
        free = robot.is_free
        nj = robot.n_joints
        q0 = _initial_state(robot.neutral(), _parse_list(args.q0, "q0"), "q0", free, nj)
        v0 = _initial_state(np.zeros(robot.nv), _parse_list(args.v0, "v0"), "v0", free, nj)
        tau = _parse_list(args.torque, "torque")
        traj = simulate(module, q0, v0, args.duration, torques=tau, dt=args.dt,
                        progress=False if args.no_progress else None, gravity=robot.gravity,
                        total_mass=robot.total_mass)
    except RobotFileError:
        raise  # a bad robot file: one line and exit code 1 from soadyn.cli.main, as for every sub-command
    except (ValueError, SimulationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    drift = traj.momentum_drift()
    print(f"{robot.name}: simulated {traj.t[-1]:g} s in {len(traj.t) - 1} steps of {args.dt:g} s")
    print(f"  momentum drift (max |h(t) - h(0)|): angular {np.max(drift[:3]):.3e} N m s, "
          f"linear {np.max(drift[3:]):.3e} N s")
    print(f"  energy balance error max |dE - W|: {traj.energy_balance_error():.3e} J")
    if free:
        print(f"  base displacement: {np.array2string(traj.q[-1, :3] - traj.q[0, :3], precision=4)} m; "
              f"CoM drift {np.max(np.linalg.norm(traj.com - traj.com[0], axis=1)):.3e} m")
    if args.out:
        print(f"  trajectory written to {traj.save(args.out)}")
    if args.plot:
        try:
            traj.plot(args.plot)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"  plot written to {args.plot}")
    return 0
