"""The ``soadyn`` command line: one sub-command per small function.

Adding a sub-command: write ``_add_<name>(sub)`` that registers the parser (with
``set_defaults(func=_cmd_<name>)``) and ``_cmd_<name>(args) -> int``, and append ``_add_<name>`` to
``SUBCOMMANDS``.  A :class:`RobotFileError` (bad robot file) raised by a
sub-command is printed as one line on stderr and gives exit code 1, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from soadyn.model import load_robot
from soadyn.model.robotfile import RobotFileError


def _add_robot_args(p: argparse.ArgumentParser) -> None:
    """Arguments shared by every sub-command that loads a robot."""
    p.add_argument("robot", help="robot file: .yaml/.yml (soadyn format) or .urdf")
    p.add_argument("--base", choices=("free", "fixed"), default=None,
                   help="override the base type (default: the file's; 'free' for URDF)")
    p.add_argument("--mimic", choices=("error", "independent", "fixed"), default="error",
                   help="URDF <mimic> joints: error (default), independent joints, or fixed at 0")


# ---- info ------------------------------------------------------------------------------------------

def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="validate a robot file and print its tree",
                       description="Validate a robot file and print bodies, joints, DOF, masses, the "
                                   "seed 004 connectivity table, frames and loop closures.")
    _add_robot_args(p)
    p.add_argument("--locked", action="append", default=[], metavar="J1,J2,...",
                   help="joints to count as locked in the connectivity table's 'connect' column "
                        "(comma-separated; may be repeated)")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args: argparse.Namespace) -> int:
    from soadyn.cli.describe import describe
    from soadyn.structure.operations import StructureError

    robot = load_robot(args.robot, base=args.base, mimic=args.mimic)
    locked = [n.strip() for item in args.locked for n in item.split(",") if n.strip()]
    try:
        text = describe(robot, locked)
    except StructureError as e:
        print(f"error: --locked: {e}", file=sys.stderr)
        return 1
    print(text)
    return 0


# ---- dispatcher ------------------------------------------------------------------------------------

from soadyn.cli.commands import add_compile, add_verify  # noqa: E402
from soadyn.cli.simulate import add_simulate_parser  # noqa: E402

SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_info, add_compile, add_verify,
                                                                   add_simulate_parser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soadyn", description="Spatial-operator dynamics of space manipulators: robot files to "
                                   "verified C.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``soadyn`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except RobotFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
