"""``soadyn export ROBOT --c-library -o DIR [--precision double|float] [--compact] [--functions a,b]``.

Writes the standalone C99 flight library of a robot into ``DIR``
(:func:`soadyn.codegen.export.export_c_library`): ``<name>.h``, ``<name>.c``, ``CMakeLists.txt``,
``<name>Config.cmake`` and a test program with reference test vectors; then
``cmake -S DIR -B build && cmake --build build && ctest --test-dir build``.
"""

from __future__ import annotations

import argparse
import sys

from soadyn.cli.options import add_robot_args
from soadyn.model.names import terminal


def add_export(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a standalone C99 library of a robot (no Python)",
                       description="Write the dynamics of a robot as a standalone, freestanding C99 library "
                                   "with a CMake build, install rules and a ctest program whose test vectors "
                                   "come from the independent reference path.")
    add_robot_args(p)
    p.add_argument("--c-library", action="store_true", required=True,
                   help="export a C library (the only export format so far)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="output directory of the library")
    p.add_argument("--precision", choices=("double", "float"), default="double",
                   help="floating-point type (default double: the module's results bit for bit)")
    p.add_argument("--compact", action="store_true",
                   help="no stage functions and per-statement sines and cosines: less stack, more time, "
                        "the same results (docs/flight-c.md)")
    p.add_argument("--functions", default=None, metavar="NAMES",
                   help="comma-separated public function names (default: all), e.g. "
                        "forward_dynamics,mass_matrix,jacobian")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from soadyn.codegen.export import ExportError, export_c_library

    try:
        result = export_c_library(args.robot, args.out, args.precision, args.functions, args.base,
                                  compact=args.compact, mimic=args.mimic)
    except ExportError as e:
        print(terminal(f"error: {e}", 2000), file=sys.stderr)
        return 1
    known = [v for v in result.stack.values() if v is not None]
    stack = f"worst-case stack {max(known)} bytes" if known else "stack not measured"
    print(terminal(f"{result.name}: {len(result.stack)} functions, {stack} -> {result.directory}\n"
                   f"build and test: cmake -S {result.directory} -B build && cmake --build build && "
                   "ctest --test-dir build"))
    return 0
