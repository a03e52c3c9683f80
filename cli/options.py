"""Command-line options shared by the ``soadyn`` subcommands and the example scripts."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_time_options(ap: argparse.ArgumentParser, duration: float, dt: float, out_help: str) -> None:
    """``--duration``, ``--dt`` (RK4 step) and ``--out`` (directory of the generated modules)."""
    ap.add_argument("--duration", type=float, default=duration,
                    help=f"simulated time [s] (default {duration:g})")
    ap.add_argument("--dt", type=float, default=dt, help=f"RK4 step [s] (default {dt:g})")
    ap.add_argument("--out", type=Path, default=None, help=out_help)


def parse_time_options(ap: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """Parse ``argv``; a non-positive duration or step, or a step over the duration, is a usage error."""
    args = ap.parse_args(argv)
    if not (args.duration > 0 and args.dt > 0 and args.dt <= args.duration):
        ap.error(f"--duration ({args.duration}) and --dt ({args.dt}) must be positive with dt <= duration")
    return args


def add_robot_args(p: argparse.ArgumentParser, out_dir: bool = False) -> None:
    """The robot file and how to read it (every sub-command that loads a robot); ``out_dir`` adds ``-o``."""
    p.add_argument("robot", help="robot file: .yaml/.yml (soadyn format) or .urdf")
    p.add_argument("--base", choices=("free", "fixed"), default=None,
                   help="override the base type (default: the file's; 'free' for URDF; a compiled module is "
                        "then named <robot>_<base>)")
    p.add_argument("--mimic", choices=("couple", "error", "independent", "fixed"), default="couple",
                   help="URDF <mimic> joints: couple (default: q = a q_joint + b, no coordinate of their "
                        "own), error, independent joints, or fixed at 0")
    if out_dir:
        p.add_argument("-o", "--out", default="generated", metavar="DIR",
                       help="output directory; the module goes to DIR/<robot name>/ (default: ./generated)")
