"""``soadyn compile`` and ``soadyn verify``: command-line front ends and the verification routine.

``soadyn compile ROBOT [-o DIR] [--base free|fixed] [--functions a,b,...] [--force] [--sources-only]``
    writes ``DIR/<robot name>/`` (default ``DIR`` = ``./generated``) holding ``<name>.c``, ``<name>.h``,
    the compiled extension and ``__init__.py``; afterwards ``sys.path.insert(0, DIR); import <name>``.
    An unchanged robot is not derived or compiled again (cache stamp).  ``--sources-only`` writes the C
    source and header only (no compiler needed).  ``--functions`` builds only the named public functions
    (e.g. ``forward_dynamics,mass_matrix,jacobian``).

``soadyn verify ROBOT [-o DIR] [--states N] [--tol T] [--seed S]``
    compiles (or reuses) the module and compares every generated C function (each frame of a frame family
    on its own), on N random states through
    the batched entry points, with the dense reference path (:mod:`soadyn.reference.dense`) and with the
    float run of the same algorithm; prints the worst relative error per function and exits with 1 when
    one exceeds the tolerance (default 1e-10).

Relative error of one state: ``max|x - ref| / max|ref|`` (absolute when ``ref`` is all zero); the worst
state counts.  Random states: configurations from ``robot.random_configuration`` with the base quaternion
scaled by a random factor in [0.5, 2] (the generated code must divide the norm out), velocities,
accelerations, torques and external wrenches standard normal.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from soadyn.model.robot import Robot

from soadyn.codegen.build import CompileError
from soadyn.codegen.functions import FunctionSpec, expand_family, function_table, select_functions
from soadyn.codegen.profiles import PROFILES, get_profile

#: reference modules searched in order for a function of the generated API's name
REFERENCE_MODULES = ("soadyn.reference.dense", "soadyn.reference.invariant",
                     "soadyn.reference.free_floating")
#: generated functions that compute the same quantity as a differently named reference function
REFERENCE_ALIASES = {"forward_dynamics_decoupled": "forward_dynamics",
                     "forward_dynamics_schur": "forward_dynamics"}


# --------------------------------------------------------------------------------------------------
# verification
# --------------------------------------------------------------------------------------------------
@dataclass
class Check:
    """Worst relative errors of one generated C function."""

    function: str              # C function name (without the robot prefix)
    call: str                  # how it was called through the Python API
    err_reference: float | None
    err_algorithm: float | None
    tol: float
    note: str = ""

    @property
    def ok(self) -> bool:
        errs = [e for e in (self.err_reference, self.err_algorithm) if e is not None]
        return bool(errs) and all(e <= self.tol for e in errs)


def rel_err(x: Any, ref: Any) -> float:
    """``max|x - ref| / max|ref|`` (absolute when ``ref`` is all zero); NaN anywhere gives inf."""
    x, ref = np.asarray(x, dtype=float), np.asarray(ref, dtype=float)
    if x.shape != ref.shape:
        return float("inf")
    d = np.abs(x - ref)
    if not np.all(np.isfinite(d)):
        return float("inf")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    return float(np.max(d)) / (scale if scale > 0 else 1.0) if d.size else 0.0


def random_inputs(robot: Robot, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` random states (see the module docstring) for every input name of the function table."""
    q = np.array([robot.random_configuration(rng) for _ in range(n)]).reshape(n, robot.nq)
    if robot.is_free:
        q[:, 3:7] *= rng.uniform(0.5, 2.0, size=(n, 1))
    return {"q": q, "v": rng.normal(size=(n, robot.nv)), "a": rng.normal(size=(n, robot.nv)),
            "tau": rng.normal(size=(n, robot.nv)), "f_ext": rng.normal(size=(n, robot.n_bodies, 6)),
            "qd": rng.normal(size=(n, robot.n_joints)), "h": rng.normal(size=(n, 6))}


def reference_function(api: str) -> Callable[..., Any] | None:
    """The reference-path function for a generated API name, or None."""
    name = REFERENCE_ALIASES.get(api, api)
    for modname in REFERENCE_MODULES:
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    return None


def _call_generated(module: Any, spec: FunctionSpec, ins: dict[str, np.ndarray]) -> tuple[str, Any]:
    args = [ins[a.name] for a in spec.inputs if a.name != "f_ext"]
    kw: dict[str, Any] = dict(spec.kwargs)
    if spec.fext_input:
        kw["f_ext"] = ins["f_ext"]
    fn = getattr(module, spec.api)
    shown = [a.name for a in spec.inputs if a.name != "f_ext"]
    shown += ["f_ext" if k == "f_ext" else f"{k}={v!r}" for k, v in kw.items()]
    text = f"{spec.api}({', '.join(shown)})"
    return text, fn(*args, **kw)


def _split(result: Any, n_out: int) -> list[np.ndarray]:
    if n_out == 1:
        return [np.asarray(result, dtype=float)]
    return [np.asarray(r, dtype=float) for r in result]


def check_function(module: Any, robot: Robot, spec: FunctionSpec, ins: dict[str, np.ndarray], tol: float,
                   algorithm: bool = True) -> Check:
    """Compare one generated function (batched over all states of ``ins``) with the reference path and
    the float run of its algorithm."""
    from soadyn.symbolic.scalar import Numeric

    from soadyn.codegen.derive import algorithms_module

    n = ins["q"].shape[0]
    call, got = _call_generated(module, spec, ins)
    got_parts = _split(got, len(spec.outputs))
    ref_fn = reference_function(spec.api)
    alg_fn = getattr(algorithms_module(), spec.algorithm, None) if algorithm else None
    err_ref = 0.0 if ref_fn is not None else None
    err_alg = 0.0 if alg_fn is not None else None
    ctx = Numeric()
    for i in range(n):
        pos = [ins[a.name][i] for a in spec.inputs if a.name != "f_ext"]
        kw: dict[str, Any] = dict(spec.kwargs)
        if spec.fext_input:
            kw["f_ext"] = ins["f_ext"][i]
        mine = [p[i] for p in got_parts]
        if ref_fn is not None:
            ref = _split(ref_fn(robot, *pos, **kw), len(spec.outputs))
            err_ref = max(err_ref, *(rel_err(m, r) for m, r in zip(mine, ref)))
        if alg_fn is not None:
            val = _split(alg_fn(robot, ctx, *pos, **kw), len(spec.outputs))
            err_alg = max(err_alg, *(rel_err(m, r) for m, r in zip(mine, val)))
    note = "" if ref_fn is not None else "no reference function"
    return Check(spec.name, call, err_ref, err_alg, tol, note)


def verify(robot_or_path: Robot | str | Path, out_dir: str | Path | None = None, base: str | None = None,
           states: int = 100, tol: float = 1e-10, seed: int = 0, progress: bool = False,
           profile: str | None = None, **load_kw: Any) -> list[Check]:
    """Compile (or reuse) the module of a robot (build ``profile``) and check every generated function
    (see module doc)."""
    from soadyn.codegen.pipeline import compile_robot, resolve_robot

    robot, _ = resolve_robot(robot_or_path, base, **load_kw)
    module = compile_robot(robot_or_path, out_dir, base, progress=progress, profile=profile, **load_kw)
    rng = np.random.default_rng(seed)
    ins = random_inputs(robot, states, rng)
    specs = [e for s in function_table(robot) if hasattr(module, s.api) for e in expand_family(s)]
    from tqdm.auto import tqdm

    out = []
    for spec in tqdm(specs, disable=not progress, desc="verifying", unit="fn", leave=False, file=sys.stderr):
        out.append(check_function(module, robot, spec, ins, tol))
    return out


def format_checks(checks: list[Check]) -> str:
    def f(e: float | None) -> str:
        return "      n/a" if e is None else f"{e:9.2e}"

    width = max([len(c.function) for c in checks] + [8])
    lines = [f"{'function':{width}s}  {'reference':>9s}  {'algorithm':>9s}  status"]
    for c in checks:
        status = "ok" if c.ok else "FAIL"
        lines.append(f"{c.function:{width}s}  {f(c.err_reference)}  {f(c.err_algorithm)}  {status}"
                     + (f"  ({c.note})" if c.note else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------
def _robot_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("robot", help="robot file: .yaml/.yml (soadyn format) or .urdf")
    p.add_argument("--base", choices=("free", "fixed"), default=None,
                   help="override the base type (the module is then named <robot>_<base>)")
    p.add_argument("--mimic", choices=("error", "independent", "fixed"), default="error",
                   help="URDF <mimic> joints: error (default), independent joints, or fixed at 0")
    p.add_argument("-o", "--out", default="generated", metavar="DIR",
                   help="output directory; the module goes to DIR/<robot name>/ (default: ./generated)")
    p.add_argument("--profile", choices=PROFILES, default=None,
                   help="build profile: fast (default; fastest code for this machine, -march=native), "
                        "portable (baseline ISA, for other machines of this class), debug (compiles quickly)")


def add_compile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="generate, compile and cache the C dynamics module of a robot",
                       description="Derive every dynamics function of a robot symbolically, emit C99, "
                       "compile it with cffi into DIR/<robot name>/ and cache it (an unchanged robot is not "
                       "rebuilt). Then: sys.path.insert(0, DIR); import <robot name>.")
    _robot_args(p)
    p.add_argument("--force", action="store_true", help="rebuild even when the cached module is current")
    p.add_argument("--sources-only", action="store_true",
                   help="write only <name>.c and <name>.h (no C compiler needed)")
    p.add_argument("--functions", default=None, metavar="NAMES",
                   help="comma-separated public function names to build (default: all), e.g. "
                        "forward_dynamics,mass_matrix,jacobian")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_compile)


def add_verify(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check every generated function against the reference path",
                       description="Compile (or reuse) the module of a robot and compare every generated "
                       "function with the dense reference path and with the float run of its algorithm "
                       "on random states; exit code 1 if any relative error exceeds the tolerance.")
    _robot_args(p)
    p.add_argument("--states", type=int, default=100, help="number of random states (default 100)")
    p.add_argument("--tol", type=float, default=1e-10, help="relative tolerance (default 1e-10)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_verify)


def _summary(module: Any, out: Path, cached: bool) -> str:
    import json

    stamp = json.loads((Path(module.__file__).parent / "soadyn_stamp.json").read_text())
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
    if functions is not None:
        robot, _ = resolve_robot(args.robot, args.base, mimic=args.mimic)
        try:
            select_functions(function_table(robot), functions, robot.name)
        except ValueError as e:
            print(f"error: --functions: {e}", file=sys.stderr)
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
    print(_summary(module, out.resolve(), _derive.STATS["derivations"] == before))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    progress = not args.quiet and sys.stderr.isatty()
    if args.states < 1:
        print("error: --states must be at least 1", file=sys.stderr)
        return 2
    try:
        checks = verify(args.robot, args.out, args.base, states=args.states, tol=args.tol, seed=args.seed,
                        progress=progress, mimic=args.mimic, profile=args.profile)
    except CompileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(format_checks(checks))
    bad = [c for c in checks if not c.ok]
    worst = max((e for c in checks for e in (c.err_reference, c.err_algorithm) if e is not None), default=0.0)
    print(f"{len(checks)} functions, {args.states} states, worst relative error {worst:.2e}, tolerance "
          f"{args.tol:.0e}: {'FAILED (' + str(len(bad)) + ')' if bad else 'all ok'}")
    return 1 if bad else 0
