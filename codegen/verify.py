"""Check every generated C function against an independent reference and the float run of its algorithm.

For each generated function (each frame of a frame family on its own) :func:`verify` calls the compiled
module on N random states through the batched entry points and compares the result with

* the independent reference function that :data:`soadyn.codegen.functions.REGISTRY` names for it (dense
  operator expressions of :mod:`soadyn.reference`, which never imports the algorithms), and
* the float run of the same algorithm (:class:`~soadyn.symbolic.scalar.Numeric` context), which catches
  errors of the code generator itself.

A function whose registration names no reference is reported as such (``reference: none`` and the reason),
never skipped.  Relative error of one state: ``max|x - ref| / max|ref|`` (absolute when ``ref`` is all
zero), with each output measured against its largest value over the states, floored at a millionth of
the function's largest output (:func:`output_errors`); the worst state counts.  Random states:
configurations from ``robot.random_configuration`` with the
base quaternion scaled by a random factor in [0.5, 2] (the generated code must divide the norm out),
velocities, accelerations, torques and external wrenches standard normal.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.codegen.derive import algorithm
from soadyn.codegen.functions import FunctionSpec, Registration, expand_family, function_table
from soadyn.model.parameters import param_indices, random_params, with_param_values
from soadyn.model.robot import Robot
from soadyn.symbolic.scalar import Numeric


@dataclass
class Check:
    """Worst relative errors of one generated C function."""

    function: str              # C function name (without the robot prefix)
    call: str                  # how it was called through the Python API
    err_reference: float | None
    err_algorithm: float | None
    tol: float
    note: str = ""
    tol_reference: float | None = None     # tolerance of the reference check when it differs from tol

    @property
    def independent(self) -> bool:
        """Whether an independent reference checked it (not only the float run of its own algorithm)."""
        return self.err_reference is not None

    @property
    def ok(self) -> bool:
        checks = [(self.err_reference, self.tol if self.tol_reference is None else self.tol_reference),
                  (self.err_algorithm, self.tol)]
        checks = [(e, t) for e, t in checks if e is not None]
        return bool(checks) and all(e <= t for e, t in checks)


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


#: an output is measured against at least this fraction of the function's largest output (see
#: :func:`output_errors`)
SCALE_FLOOR = 1e-6


def output_errors(got: list[list[Any]], ref: list[list[Any]]) -> float:
    """Worst relative error of a function's outputs over the states: ``max|x - ref|`` of each output,
    divided by that output's largest ``|ref|`` over all the states, floored at :data:`SCALE_FLOOR` times the
    largest ``|ref|`` of any output (absolute when every reference entry is zero); NaN anywhere gives inf.

    The floor is what keeps an output that is zero in exact arithmetic (the generated code derives the exact
    0; the dense reference leaves roundoff of ~1e-16 times the other outputs) from reading as a relative
    error of 1; an output of any size above the floor is still measured against itself, so a wrong sign
    of a small output fails.
    """
    if not got:
        return 0.0
    n_out = len(got[0])
    scales = []
    for k in range(n_out):
        r = [np.asarray(state[k], dtype=float) for state in ref]
        scales.append(max((float(np.max(np.abs(x))) for x in r if x.size and np.all(np.isfinite(x))),
                          default=0.0))
    floor = SCALE_FLOOR * max(scales, default=0.0)
    worst = 0.0
    for k in range(n_out):
        scale = max(scales[k], floor)
        for g, r in zip(got, ref):
            x, y = np.asarray(g[k], dtype=float), np.asarray(r[k], dtype=float)
            if x.shape != y.shape:
                return float("inf")
            d = np.abs(x - y)
            if not np.all(np.isfinite(d)):
                return float("inf")
            if d.size:
                worst = max(worst, float(np.max(d)) / (scale if scale > 0 else 1.0))
    return worst


def random_inputs(robot: Robot, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` random states (see the module docstring) for every input name of the function table."""
    q = np.array([robot.random_configuration(rng) for _ in range(n)]).reshape(n, robot.nq)
    if robot.is_free:
        q[:, 3:7] *= rng.uniform(0.5, 2.0, size=(n, 1))
    out = {"q": q, "v": rng.normal(size=(n, robot.nv)), "a": rng.normal(size=(n, robot.nv)),
           "tau": rng.normal(size=(n, robot.nv)), "f_ext": rng.normal(size=(n, robot.n_bodies, 6)),
           "qd": rng.normal(size=(n, robot.n_joints)), "h": rng.normal(size=(n, 6))}
    if robot.param_bodies:   # run-time inertial parameters: random rigid bodies near the file's values
        out["params"] = np.array([random_params(robot, rng) for _ in range(n)])
    return out


def _state_robot(robot: Robot, spec: FunctionSpec, ins: dict[str, np.ndarray],
                 i: int) -> tuple[Robot, Numeric]:
    """(robot with state i's parameter values, numeric context carrying them) for a function taking
    ``params``: the reference path then sees the model a recompiled module would; otherwise the robot."""
    if not any(a.name == "params" for a in spec.inputs):
        return robot, Numeric()
    p = ins["params"][i]
    return with_param_values(robot, p), Numeric(dict(zip(param_indices(robot), p)))


def reference_function(reg: Registration) -> Callable[..., Any] | None:
    """The independent reference named by a registration (None when it names none).

    A registered reference that does not import or does not exist raises ``ImportError``: the registry
    is wrong, and verify must not quietly check less.
    """
    if reg.reference is None:
        return None
    modname, _, name = reg.reference.rpartition(".")
    fn = getattr(importlib.import_module(modname), name, None)
    if not callable(fn):
        raise ImportError(f"registry entry {reg.api!r}: {modname} has no function {name!r}")
    return fn


def _call_generated(module: Any, spec: FunctionSpec, ins: dict[str, np.ndarray]) -> tuple[str, Any]:
    args = [ins[a.name] for a in spec.inputs if a.name not in ("f_ext", "params")]
    # the Python API takes the variant's arguments (frame, world_aligned); other kwargs (a closed loop's
    # generation-time partition) are the algorithm's, baked into the C
    kw: dict[str, Any] = {k: v for k, v in spec.kwargs if k in dict(spec.variant)}
    if spec.fext_input:
        kw["f_ext"] = ins["f_ext"]
    if any(a.name == "params" for a in spec.inputs):
        kw["params"] = ins["params"]
    fn = getattr(module, spec.api)
    shown = [a.name for a in spec.inputs if a.name not in ("f_ext", "params")]
    shown += [k if k in ("f_ext", "params") else f"{k}={v!r}" for k, v in kw.items()]
    text = f"{spec.api}({', '.join(shown)})"
    return text, fn(*args, **kw)


def _split(result: Any, n_out: int) -> list[np.ndarray]:
    if n_out == 1:
        return [np.asarray(result, dtype=float)]
    return [np.asarray(r, dtype=float) for r in result]


def check_function(module: Any, robot: Robot, spec: FunctionSpec, ins: dict[str, np.ndarray],
                   tol: float) -> Check:
    """Compare one generated function (batched over all states of ``ins``) with its registered reference
    and with the float run of its algorithm."""
    n = ins["q"].shape[0]
    call, got = _call_generated(module, spec, ins)
    got_parts = _split(got, len(spec.outputs))
    reg = spec.registration
    ref_fn = reference_function(reg)
    alg_fn = algorithm(spec.algorithm)
    if reg.max_states is not None:      # an expensive reference (finite differences): a few states
        n = min(n, reg.max_states)
    mine, refs, vals = [], [], []
    for i in range(n):
        robot_i, ctx = _state_robot(robot, spec, ins, i)
        pos = [ins[a.name][i] for a in spec.inputs if a.name not in ("f_ext", "params")]
        kw: dict[str, Any] = dict(spec.kwargs)
        if spec.fext_input:
            kw["f_ext"] = ins["f_ext"][i]
        mine.append([p[i] for p in got_parts])
        if ref_fn is not None:
            refs.append(_split(ref_fn(robot_i, *pos, **kw), len(spec.outputs)))
        vals.append(_split(alg_fn(robot, ctx, *pos, **kw), len(spec.outputs)))
    err_ref = output_errors(mine, refs) if ref_fn is not None else None
    err_alg = output_errors(mine, vals)
    note = "" if ref_fn is not None else f"no independent check: {reg.unchecked}"
    if reg.reference_tol is not None:
        note = f"reference tolerance {reg.reference_tol:g} ({reg.reference.rpartition('.')[0]}), {n} states"
    return Check(spec.name, call, err_ref, err_alg, tol, note, reg.reference_tol)


def check_tolerance(tol: Any, what: str = "tol") -> float:
    """``tol`` as a float, or ``ValueError`` unless it is a positive finite number (NaN would fail every
    comparison, a negative or zero tolerance every check)."""
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating, np.integer)) \
            or not (0.0 < float(tol) < math.inf):
        raise ValueError(f"{what} must be a positive finite number (a relative error, e.g. 1e-10), "
                         f"got {tol!r}")
    return float(tol)


def verify(robot_or_path: Robot | str | Path, out_dir: str | Path | None = None, base: str | None = None,
           states: int = 100, tol: float = 1e-10, seed: int = 0, progress: bool = False,
           profile: str | None = None, **load_kw: Any) -> list[Check]:
    """Compile (or reuse) the module of a robot with build ``profile`` and check every generated function
    (see module doc)."""
    from tqdm.auto import tqdm

    from soadyn.codegen.pipeline import compile_robot, resolve_robot

    check_tolerance(tol)

    robot, _ = resolve_robot(robot_or_path, base, **load_kw)
    module = compile_robot(robot_or_path, out_dir, base, progress=progress, profile=profile, **load_kw)
    ins = random_inputs(robot, states, np.random.default_rng(seed))
    # opt-in functions (derivatives) are checked when the module has them
    default = {s.api for s in function_table(robot)}
    specs = [e for s in function_table(robot, derivatives=True) if hasattr(module, s.api) or s.api in default
             for e in expand_family(s)]
    missing = sorted({s.api for s in specs if not hasattr(module, s.api)})
    if missing:
        raise RuntimeError(f"compiled module {module.__name__} lacks {missing} of the function table: "
                           "rebuild it (--force)")
    return [check_function(module, robot, spec, ins, tol)
            for spec in tqdm(specs, disable=not progress, desc="verifying", unit="fn", leave=False,
                             file=sys.stderr)]


def format_checks(checks: list[Check]) -> str:
    """A table with one line per function; unchecked references show as ``none`` with the reason."""
    def f(e: float | None) -> str:
        return "     none" if e is None else f"{e:9.2e}"

    width = max([len(c.function) for c in checks] + [8])
    lines = [f"{'function':{width}s}  {'reference':>9s}  {'algorithm':>9s}  status"]
    for c in checks:
        status = "ok" if c.ok else "FAIL"
        lines.append(f"{c.function:{width}s}  {f(c.err_reference)}  {f(c.err_algorithm)}  {status}"
                     + (f"  ({c.note})" if c.note else ""))
    return "\n".join(lines)


def summary(checks: list[Check], states: int, tol: float) -> str:
    """One line: counts, functions without an independent check, worst error, verdict."""
    bad = [c for c in checks if not c.ok]
    unchecked = [c for c in checks if not c.independent]
    worst = max((e for c in checks for e in (c.err_reference, c.err_algorithm) if e is not None), default=0.0)
    return (f"{len(checks)} functions ({len(unchecked)} without an independent check), {states} states, "
            f"worst relative error {worst:.2e}, tolerance {tol:.0e}: "
            + (f"FAILED ({len(bad)})" if bad else "all ok"))
