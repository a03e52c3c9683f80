"""Symbolic run of an algorithm -> a straight-line program (inputs, assignments, outputs).

The algorithms of :mod:`soadyn.symbolic.algorithms` run unchanged on a
:class:`~soadyn.symbolic.scalar.Symbolic` context: inputs are arrays of SymEngine symbols
(``q_0, q_1, ...``), every spatial quantity staged by the algorithm becomes an assignment
``V3_4 = <small expression>`` in ``ctx.program``, and the returned arrays are expressions in the inputs and
staged symbols.  Nothing is expanded, so the program grows linearly with the number of bodies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import symengine as se

from soadyn.codegen.functions import RESERVED, FunctionSpec
from soadyn.model.parameters import param_indices
from soadyn.model.robot import Robot
from soadyn.symbolic import algorithms
from soadyn.symbolic.scalar import Assignment, Symbolic

#: number of symbolic derivations run in this process (tests use it to show that a cached compile derives
#: nothing)
STATS = {"derivations": 0}


@dataclass
class Program:
    """A straight-line program: ``assignments`` in topological order, outputs flattened row-major."""

    name: str
    inputs: list[tuple[str, list[se.Symbol]]]
    assignments: list[tuple[se.Symbol, se.Basic]]
    outputs: list[tuple[str, list[se.Basic]]]
    ops: dict[str, int] = field(default_factory=dict)
    #: staged symbol name -> the stage name the algorithm gave it (``V3_4`` -> ``V3``), for the C comments
    stages: dict[str, str] = field(default_factory=dict)


class DerivationError(RuntimeError):
    """The symbolic run of an algorithm failed or produced an unusable program."""


def algorithm(name: str):
    """The function ``name`` of :mod:`soadyn.symbolic.algorithms`; a missing one raises
    :class:`DerivationError` (never a silently dropped generated function)."""
    fn = getattr(algorithms, name, None)
    if not callable(fn):
        raise DerivationError(f"soadyn.symbolic.algorithms has no function {name!r} (named in "
                              "soadyn.codegen.functions.REGISTRY)")
    return fn


@dataclass
class SharingSymbolic(Symbolic):
    """A :class:`Symbolic` context that stages every distinct expression once (hash-consing).

    Staging an expression equal to one staged before returns the earlier symbol instead of a new one, so
    running an algorithm several times on one context (once per frame of a frame family) re-derives the
    shared kinematics without growing the program: the second run builds the same expressions from the
    same symbols and gets the same symbols back.
    """

    _memo: dict = field(default_factory=dict)

    def _stage_one(self, sym_name: str, e: Any, stage: str = "") -> Any:
        e = se.sympify(e)
        if e.is_Number or e.is_Symbol:
            return e
        hit = self._memo.get(e)
        if hit is not None:
            return hit
        s = se.Symbol(sym_name)
        self.program.append(Assignment(s, e, stage))
        self._memo[e] = s
        return s


#: separator between an output's name and its case (frame id) in the program of a frame family
CASE_SEP = "@"


def derive(robot: Robot, spec: FunctionSpec) -> Program:
    """Run ``spec.algorithm`` symbolically on ``robot`` and return the raw staged program.

    For a frame family (``spec.frames``) the algorithm runs once per frame on one
    :class:`SharingSymbolic` context; the outputs of frame ``i`` are named ``<output>@<i>``.
    """
    STATS["derivations"] += 1
    fn = algorithm(spec.algorithm)
    ctx = SharingSymbolic() if spec.is_family else Symbolic()
    args = []
    kwargs = spec.kwargs_dict()
    for arg in spec.inputs:
        arr = ctx.input(arg.name, arg.shape)
        if arg.name == "f_ext":
            kwargs["f_ext"] = arr
        elif arg.name == "params":       # read by the algorithms through soadyn.symbolic.parameters
            ctx.parameters = dict(zip(param_indices(robot), arr))
        else:
            args.append(arr)
    outputs = []
    cases = list(enumerate(spec.frames)) if spec.is_family else [(None, None)]
    for case, frame in cases:
        kw = dict(kwargs) if frame is None else {**kwargs, "frame": frame}
        result = fn(robot, ctx, *args, **kw)
        results = result if isinstance(result, tuple) else (result,)
        if len(results) != len(spec.outputs):
            raise DerivationError(f"{spec.algorithm} returned {len(results)} arrays, "
                                  f"expected {len(spec.outputs)}")
        for out, res in zip(spec.outputs, results):
            arr = np.asarray(res, dtype=object)
            if arr.shape != out.shape:
                raise DerivationError(f"{spec.algorithm} returned shape {arr.shape} for {out.name!r}, "
                                      f"expected {out.shape}")
            name = out.name if case is None else f"{out.name}{CASE_SEP}{case}"
            outputs.append((name, [se.sympify(e) for e in arr.ravel()]))
    program = Program(spec.name, [(k, list(v)) for k, v in ctx.inputs.items()],
                      [(a.target, se.sympify(a.expr)) for a in ctx.program], outputs,
                      stages={a.target.name: a.stage for a in ctx.program})
    _check_names(program)
    return program


def _check_names(program: Program) -> None:
    """Staged symbols must be unique, distinct from inputs and valid C identifiers (SymEngine symbols with
    equal names are the same symbol, so a clash would silently merge two quantities)."""
    seen: set[str] = set()
    for _, syms in program.inputs:
        seen.update(s.name for s in syms)
    for t, _ in program.assignments:
        n = t.name
        if n in seen:
            raise DerivationError(f"{program.name}: staged symbol {n!r} defined twice or clashes with an "
                                  "input")
        if not n.isidentifier() or not n.isascii():
            raise DerivationError(f"{program.name}: staged symbol {n!r} is not a C identifier")
        seen.add(n)


def rename_reserved(program: Program, spec: FunctionSpec | None = None) -> Program:
    """Rename staged symbols whose names are C keywords, math functions or parameter names."""
    names = {t.name for t, _ in program.assignments} | {s.name for _, ss in program.inputs for s in ss}
    reserved = set(RESERVED)
    if spec is not None:
        reserved |= {a.name for a in (*spec.inputs, *spec.outputs)} | {spec.name}
        if spec.is_family:
            reserved |= {"frame", "status"}
    ren: dict[se.Basic, se.Basic] = {}
    for t, _ in program.assignments:
        if t.name in reserved:
            new = t.name + "_"
            while new in names:
                new += "_"
            names.add(new)
            ren[t] = se.Symbol(new)
    if not ren:
        return program
    assigns = [(ren.get(t, t), e.xreplace(ren)) for t, e in program.assignments]
    outs = [(n, [e.xreplace(ren) for e in es]) for n, es in program.outputs]
    stages = {ren.get(se.Symbol(n), se.Symbol(n)).name: st for n, st in program.stages.items()}
    return Program(program.name, program.inputs, assigns, outs, program.ops, stages)
