"""``soadyn compile`` and ``soadyn verify``: the argparse front ends (the work is in soadyn.codegen).

``soadyn compile ROBOT [-o DIR] [--base free|fixed] [--functions a,b,...] [--force] [--sources-only]``
    writes ``DIR/<robot name>/`` (default ``DIR`` = ``./generated``) holding ``<name>.c``, ``<name>.h``,
    the compiled extension and ``__init__.py``; afterwards ``sys.path.insert(0, DIR); import <name>``.
    An unchanged robot is not derived or compiled again (cache stamp).  ``--sources-only`` writes the C
    source and header only (no compiler needed).  ``--functions`` builds only the named public functions
    (e.g. ``forward_dynamics,mass_matrix,jacobian``).

``soadyn verify ROBOT [-o DIR] [--states N] [--tol T] [--seed S]``
    compiles (or reuses) the module and checks every generated C function with
    :func:`soadyn.codegen.verify.verify` (registered independent reference and float run of the same
    algorithm); prints the worst relative error per function, lists the functions without an independent
    check, and exits with 1 when an error exceeds the tolerance (default 1e-10).

Both also take the robot options every sub-command shares (``--base``, ``--mimic``:
:func:`soadyn.cli.options.add_robot_args`), ``--profile`` (build profile) and ``-q`` (no progress bars).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from soadyn.cli.options import add_robot_args
from soadyn.codegen.build import CompileError
from soadyn.codegen.functions import api_names, function_table, select_functions
from soadyn.codegen.profiles import PROFILES, get_profile
from soadyn.codegen.verify import check_tolerance, format_checks, summary, verify
from soadyn.model.names import terminal


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------
def _module_args(p: argparse.ArgumentParser) -> None:
    """What ``compile`` and ``verify`` share: the robot, the output directory, the build profile, -q."""
    add_robot_args(p, out_dir=True)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument("--profile", choices=PROFILES, default=None,
                   help="build profile: fast (default; fastest code for this machine, -march=native), "
                        "portable (baseline ISA, for other machines of this class), debug (compiles quickly)")


def add_compile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="generate, compile and cache the C dynamics module of a robot",
                       description="Derive every dynamics function of a robot symbolically, emit C99, "
                       "compile it with cffi into DIR/<robot name>/ and cache it (an unchanged robot is not "
                       "rebuilt). Then: sys.path.insert(0, DIR); import <robot name>.")
    _module_args(p)
    p.add_argument("--force", action="store_true", help="rebuild even when the cached module is current")
    p.add_argument("--sources-only", action="store_true",
                   help="write only <name>.c and <name>.h (no C compiler needed)")
    p.add_argument("--functions", default=None, metavar="NAMES",
                   help="comma-separated public function names to build (default: all), e.g. "
                        "forward_dynamics,mass_matrix,jacobian")
    p.add_argument("--target", choices=("python", "casadi"), default="python",
                   help="casadi: also build the CasADi external-function library (soadyn.casadi; without "
                        "--functions the inverse/forward-dynamics derivatives are added for exact Jacobians; "
                        "name f_derivatives in --functions for the Jacobian of another function f)")
    p.set_defaults(func=cmd_compile)


def add_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every generated function against the reference path",
                       description="Compile (or reuse) the module of a robot and compare every generated "
                       "function with the dense reference path and with the float run of its algorithm "
                       "on random states; exit code 1 if any relative error exceeds the tolerance.")
    _module_args(p)
    p.add_argument("--states", type=int, default=100, help="number of random states (default 100)")
    p.add_argument("--tol", type=float, default=1e-10, help="relative tolerance (default 1e-10)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=cmd_verify)


def _summary(module: Any, out: Path, cached: bool) -> str:
    from soadyn.codegen.cache import read_stamp

    stamp = read_stamp(Path(module.__file__).parent)
    ops = sum(v["total"] for v in stamp["ops"].values())
    t = stamp["timings"]
    where = Path(module.__file__).parent
    head = (f"{module.name} ({module.base} base): up to date" if cached else
            f"{module.name} ({module.base} base): {len(stamp['ops'])} C functions, {ops} operations; "
            f"derive {t.get('derive', 0):.1f} s, optimise {t.get('optimise', 0):.1f} s, "
            f"compile {t.get('compile', 0):.1f} s")
    return (f"{head} -> {where}\n"
            f"use: import sys; sys.path.insert(0, {str(out)!r}); import {module.module_name}")


def cmd_compile(args: argparse.Namespace) -> int:
    from soadyn.codegen import derive as _derive
    from soadyn.codegen.pipeline import compile_robot, generate, resolve_robot, write_sources

    progress = not args.quiet and sys.stderr.isatty()
    out = Path(args.out)
    functions = args.functions
    casadi = getattr(args, "target", "python") == "casadi"
    if casadi and functions is None and not args.sources_only:
        robot, _ = resolve_robot(args.robot, args.base, mimic=args.mimic)
        functions = ",".join([*api_names(function_table(robot)), "inverse_dynamics_derivatives",
                              "forward_dynamics_derivatives"])
    if functions is not None:
        robot, _ = resolve_robot(args.robot, args.base, mimic=args.mimic)
        try:
            select_functions(function_table(robot, derivatives=True), functions, robot.name)
        except ValueError as e:
            print(terminal(f"error: --functions: {e}", 2000), file=sys.stderr)
            return 2
    try:
        if args.sources_only:
            robot, name = resolve_robot(args.robot, args.base, mimic=args.mimic)
            gen = generate(robot, name, progress=progress, functions=functions,
                           profile=get_profile(args.profile))
            for p in write_sources(gen, out / name):
                print(p)
            return 0
        before = _derive.STATS["derivations"]
        module = compile_robot(args.robot, out, args.base, functions, force=args.force, progress=progress,
                               mimic=args.mimic, profile=args.profile)
    except CompileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(terminal(_summary(module, out.resolve(), _derive.STATS["derivations"] == before)))
    if casadi:
        return _casadi_library(module)
    return 0


def _casadi_library(module: Any) -> int:
    """Build the CasADi library of a compiled module and say how to load it (``--target casadi``)."""
    try:
        import soadyn.casadi as sc
    except ImportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    try:
        lib = sc.library(module)
    except CompileError as e:
        print(terminal(f"error: {e}", 4000), file=sys.stderr)
        return 1
    fd = sc.function(module, "forward_dynamics")
    print(terminal(f"casadi: {lib}\nuse: casadi.external({fd.name()!r}, {str(lib)!r}) or "
                   f"soadyn.casadi.function(module, 'forward_dynamics')"))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    progress = not args.quiet and sys.stderr.isatty()
    if args.states < 1:
        print("error: --states must be at least 1", file=sys.stderr)
        return 2
    try:
        check_tolerance(args.tol, "--tol")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        checks = verify(args.robot, args.out, args.base, states=args.states, tol=args.tol, seed=args.seed,
                        progress=progress, mimic=args.mimic, profile=args.profile)
    except CompileError as e:
        print(terminal(f"error: {e}", 4000), file=sys.stderr)
        return 1
    print(terminal(format_checks(checks)))
    print(summary(checks, args.states, args.tol))
    return 0 if all(c.ok for c in checks) else 1
