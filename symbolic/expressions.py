"""The SymPy face: a robot's dynamics as equations a person can read, print in LaTeX or keep symbolic.

:func:`to_sympy` runs an algorithm of :mod:`soadyn.symbolic.algorithms` on the symbolic context -- the same
staged program the C is generated from -- and hands it over to SymPy, either

* expanded (default): every staged intermediate substituted back, one SymPy ``Matrix`` in the inputs;
  sensible for small robots (a few joints), optionally simplified (``simplify=True``: ``trigsimp`` then
  ``simplify`` entry by entry), or
* staged (``staged=True``): the list of assignments ``Eq(V3_4, ...)`` in evaluation order followed by one
  ``Eq`` per output entry (``M_0_1``, ...), which stays small for any robot.

Symbols.  Inputs keep the names of the generated C (``q_0, q_1, ...``, ``v_i``, ``a_i``, ``tau_i``: flat
indices of the arrays ``q``, ``v``, ... as documented in the generated module).  With
``parameters=True`` every body's ten inertial parameters (:mod:`soadyn.model.parameters`: mass, first
moment ``m c``, inertia J about the body origin) become ``m_k, h_{x,k}, h_{y,k}, h_{z,k}, J_{xx,k}, J_{xy,k},
J_{xz,k}, J_{yy,k}, J_{yz,k}, J_{zz,k}`` (k the body index); with ``lengths=True`` every non-zero component
of a joint's offset from its parent's origin (the ``xyz`` of the robot file, in parent coordinates) becomes
``l_{x,k}`` (y, z) for the joint of body k.  :func:`symbol_table` lists them with their meaning.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import symengine as se
import sympy as sp

from soadyn.model.parameters import PARAMETER_NAMES
from soadyn.symbolic.scalar import Symbolic

_PARAM_SYMBOLS = ("m_{%d}", "h_{x,%d}", "h_{y,%d}", "h_{z,%d}", "J_{xx,%d}", "J_{xy,%d}", "J_{xz,%d}",
                  "J_{yy,%d}", "J_{yz,%d}", "J_{zz,%d}")


def _input_size(robot: Any, name: str) -> int:
    sizes = {"q": robot.nq, "v": robot.nv, "a": robot.nv, "tau": robot.nv, "qd": robot.n_joints, "h": 6}
    if name not in sizes:
        raise ValueError(f"to_sympy: the algorithm takes an input {name!r} that has no symbolic form here; "
                         f"supported inputs: {', '.join(sizes)}")
    return sizes[name]


def symbol_table(robot: Any, parameters: bool = False, lengths: bool = False) -> dict[str, str]:
    """SymPy symbol name -> meaning, for the inertial parameters and link lengths (see module doc)."""
    out: dict[str, str] = {}
    if parameters:
        for k, b in enumerate(robot.body_names):
            for fmt, what in zip(_PARAM_SYMBOLS, PARAMETER_NAMES):
                out[fmt % k] = f"{what} of body {b!r}"
    if lengths:
        for k in range(1, robot.n_bodies):
            for i, axis in enumerate("xyz"):
                if robot.joints[k].placement.p[i] != 0.0:
                    out[f"l_{{{axis},{k}}}"] = (f"{axis} offset of joint {robot.joints[k].name!r} from the "
                                                f"origin of {robot.body_names[robot.parent[k]]!r} (value "
                                                f"{float(robot.joints[k].placement.p[i])!r})")
    return out


def _run(robot: Any, function: str, parameters: bool, lengths: bool, kwargs: dict[str, Any]
         ) -> tuple[Symbolic, list[np.ndarray]]:
    import soadyn.symbolic.algorithms as algorithms

    fn = getattr(algorithms, function, None)
    if fn is None or not callable(fn):
        raise ValueError(f"to_sympy: unknown function {function!r}; use an algorithm of "
                         f"soadyn.symbolic.algorithms, e.g. mass_matrix, inverse_dynamics, momentum")
    ctx = Symbolic()
    names = [p for p in list(inspect.signature(fn).parameters)[2:]
             if inspect.signature(fn).parameters[p].default is inspect.Parameter.empty]
    args = [ctx.input(n, _input_size(robot, n)) for n in names]
    if parameters:
        ctx.parameters = {k: np.array([se.Symbol(f % k) for f in _PARAM_SYMBOLS], dtype=object)
                          for k in range(robot.n_bodies)}
    if lengths:
        for k in range(1, robot.n_bodies):
            p = robot.joints[k].placement.p
            if np.any(p != 0.0):
                ctx.lengths[k] = np.array([se.Symbol(f"l_{{{a},{k}}}") if p[i] != 0.0 else se.Integer(0)
                                           for i, a in enumerate("xyz")], dtype=object)
    result = fn(robot, ctx, *args, **kwargs)
    results = list(result) if isinstance(result, tuple) else [result]
    return ctx, [np.asarray(r, dtype=object) for r in results]


def _sympy(e: Any) -> Any:
    """SymEngine -> SymPy, with integer-valued floats (the -1.0 of a rotation sign) made exact."""
    out = sp.sympify(e)
    exact = {f: sp.Integer(int(f)) for f in out.atoms(sp.Float) if f == int(f)}
    return out.xreplace(exact) if exact else out


def _matrix(arr: np.ndarray) -> Any:
    if arr.ndim == 0:
        return _sympy(arr[()])
    if arr.ndim == 1:
        return sp.Matrix(arr.shape[0], 1, [_sympy(e) for e in arr])
    return sp.Matrix(arr.shape[0], arr.shape[1], [_sympy(e) for e in arr.reshape(arr.shape[0], -1).ravel()])


def to_sympy(robot: Any, function: str, *, parameters: bool = False, lengths: bool = False,
             staged: bool = False, simplify: bool = False, **kwargs: Any) -> Any:
    """``function`` (an algorithm name such as ``"mass_matrix"``) of ``robot`` as SymPy (module doc).

    Returns a ``Matrix`` (a column for a vector output, a scalar expression for a scalar, a tuple for
    several outputs) or, with ``staged=True``, a list of ``Eq`` (assignments, then one per output entry
    named ``<function>_<i>``).  ``kwargs`` go to the algorithm (e.g. ``frame="tcp"`` for ``jacobian``).
    """
    ctx, results = _run(robot, function, parameters, lengths, kwargs)
    if staged:
        eqs = [sp.Eq(sp.Symbol(a.target.name), _sympy(a.expr)) for a in ctx.program]
        for j, arr in enumerate(results):
            tag = function if len(results) == 1 else f"{function}{j}"
            eqs += [sp.Eq(sp.Symbol(f"{tag}_{i}"), _sympy(e)) for i, e in enumerate(arr.ravel())]
        return eqs
    value: dict[se.Basic, se.Basic] = {}
    for a in ctx.program:                      # topological order: every target's value uses earlier ones
        value[a.target] = se.sympify(a.expr).xreplace(value) if value else se.sympify(a.expr)
    outs = []
    for arr in results:
        flat = np.array([se.sympify(e).xreplace(value) for e in arr.ravel()], dtype=object).reshape(arr.shape)
        m = _matrix(flat)
        if simplify:
            m = m.applyfunc(lambda e: sp.simplify(sp.trigsimp(e))) if isinstance(m, sp.MatrixBase) \
                else sp.simplify(sp.trigsimp(m))
        outs.append(m)
    return outs[0] if len(outs) == 1 else tuple(outs)


def latex(robot: Any, function: str, *, parameters: bool = False, lengths: bool = False,
          staged: bool | None = None, **kwargs: Any) -> str:
    """LaTeX of :func:`to_sympy` (expanded and simplified for up to 3 joints, staged above)."""
    if staged is None:
        staged = robot.n_joints > 3
    res = to_sympy(robot, function, parameters=parameters, lengths=lengths, staged=staged,
                   simplify=not staged, **kwargs)
    if staged:
        return "\\begin{aligned}\n" + " \\\\\n".join(
            f"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in res) + "\n\\end{aligned}"
    parts = res if isinstance(res, tuple) else (res,)
    return "\n".join(sp.latex(p) for p in parts)
