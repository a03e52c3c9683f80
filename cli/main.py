"""The ``soadyn`` command line: the parser, the dispatcher and the ``info`` sub-command.

Where the sub-commands live: ``info`` here; ``compile`` and ``verify`` in :mod:`soadyn.cli.commands`;
``simulate`` in :mod:`soadyn.cli.simulate`; ``campaign`` in :mod:`soadyn.cli.campaign`.  The robot options
every sub-command that reads a robot file shares (``ROBOT``, ``--base``, ``--mimic``) are
:func:`soadyn.cli.options.add_robot_args`.  ``python -m soadyn.cli.regenerate`` is a separate script, not
a sub-command.

Adding a sub-command: write ``add_<name>(sub)`` (in its own module when it is more than a few lines) that
registers the parser with ``set_defaults(func=...)`` pointing to a function ``(args) -> int`` (the exit
code), and append it to ``SUBCOMMANDS``.  A :class:`RobotFileError` (bad robot file), a compiler failure,
an ``OSError`` or a ``ValueError`` raised by a sub-command is printed as one ``error:`` line on stderr with
exit code 1, without a traceback (:func:`main`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from soadyn.cli.options import add_robot_args
from soadyn.model.names import terminal
from soadyn.model.robotfile import RobotFileError
from soadyn.symbolic.checks import load_robot

# ---- info ------------------------------------------------------------------------------------------

def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="validate a robot file and print its tree",
                       description="Validate a robot file and print bodies, joints, DOF, masses, the "
                                   "seed 004 connectivity table, frames and loop closures.")
    add_robot_args(p)
    p.add_argument("--locked", action="append", default=[], metavar="J1,J2,...",
                   help="joints to count as locked in the connectivity table's 'connect' column "
                        "(comma-separated; may be repeated)")
    p.add_argument("--latex", default=None, metavar="FUNCTION",
                   help="print FUNCTION (e.g. mass_matrix) of the robot as LaTeX instead of the tree: "
                        "expanded and simplified for up to 3 joints, as staged assignments above "
                        "(soadyn.symbolic.expressions)")
    p.add_argument("--symbolic", default="", metavar="parameters,lengths",
                   help="with --latex: keep the inertial parameters and/or the joint offsets as symbols")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args: argparse.Namespace) -> int:
    from soadyn.cli.describe import describe
    from soadyn.structure.operations import StructureError

    robot = load_robot(args.robot, base=args.base, mimic=args.mimic)
    if args.latex is not None:          # --latex "" is an unknown name, not no option
        return _print_latex(robot, args.latex, args.symbolic)
    locked = [n.strip() for item in args.locked for n in item.split(",") if n.strip()]
    try:
        text = describe(robot, locked)
    except StructureError as e:
        print(f"error: --locked: {e}", file=sys.stderr)
        return 1
    print(terminal(text))
    return 0


def _print_latex(robot: Any, function: str, symbolic: str) -> int:
    from soadyn.symbolic.expressions import latex, symbol_table

    keep = {s.strip() for s in symbolic.split(",") if s.strip()}
    if keep - {"parameters", "lengths"}:
        bad = sorted(keep - {"parameters", "lengths"})
        print(f"error: --symbolic: unknown {bad}; use parameters,lengths", file=sys.stderr)
        return 2
    try:
        text = latex(robot, function, parameters="parameters" in keep, lengths="lengths" in keep)
    except ValueError as e:
        print(f"error: --latex: {e}", file=sys.stderr)
        return 2
    print(text)
    for name, meaning in symbol_table(robot, "parameters" in keep, "lengths" in keep).items():
        print(f"% {name}: {meaning}")
    return 0


# ---- dispatcher ------------------------------------------------------------------------------------

from soadyn.cli.campaign import add_campaign  # noqa: E402
from soadyn.cli.commands import add_compile, add_verify  # noqa: E402
from soadyn.cli.export import add_export  # noqa: E402
from soadyn.cli.simulate import add_simulate_parser  # noqa: E402

SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_info, add_compile, add_verify,
                                                                   add_simulate_parser, add_campaign]
SUBCOMMANDS.append(add_export)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soadyn", description="Spatial-operator dynamics of space manipulators: robot files to "
                                   "verified C.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for add in SUBCOMMANDS:
        add(sub)
    return parser


def _error(message: object) -> None:
    """One ``error:`` line on stderr: terminal-safe (no control characters from a robot file) and
    bounded."""
    text = terminal(str(message).strip(), limit=2000)
    print("error: " + text, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``soadyn`` console script; returns the exit code.

    Every failure is one ``error:`` line on stderr and exit code 1, never a traceback: a bad robot
    file (:class:`RobotFileError`), a compiler failure or a module-name collision, an unusable output
    directory (``OSError``), an invalid argument (``ValueError``).  ``SOADYN_DEBUG=1`` re-raises
    unexpected exceptions instead (for bug reports).
    """
    from soadyn.codegen.build import CompileError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except RobotFileError as e:
        _error(e)
        return 1
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except CompileError as e:
        _error(e)
        return 1
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        _error(f"cannot access{where}: {e.strerror or e}; check the path and its permissions")
        return 1
    except (ValueError, KeyError) as e:
        _error(e.args[0] if isinstance(e, KeyError) and e.args else e)
        return 1
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except Exception as e:  # last resort: still one line (SOADYN_DEBUG=1 shows the traceback)
        if os.environ.get("SOADYN_DEBUG"):
            raise
        _error(f"internal error ({type(e).__name__}: {e}); please report it with the input file "
               "(SOADYN_DEBUG=1 shows the traceback)")
        return 3


if __name__ == "__main__":
    sys.exit(main())
