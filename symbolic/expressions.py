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

Bounds.  The expanded form of a staged program can be exponentially larger than the program (Tian & Wu's
3-joint arm: forward dynamics 2,246 staged operations, 1.3e8 expanded; inverse dynamics 1,253 and 67,167).
Its size is counted on the staged program before anything is expanded (:func:`operation_counts`:
expression-tree nodes, each shared intermediate counted once per use), and a form larger than
:data:`EXPANDED_LIMIT` (expanded) or :data:`STAGED_LIMIT` (staged) is refused at once with both counts.
SymPy's ``simplify``/``trigsimp`` have no bound of their own (a 1,500-node kinetic energy takes over a
minute): :func:`latex` simplifies in a child process for at most ``simplify_seconds`` and otherwise prints
the unsimplified form, with a note.
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


#: largest expanded form (expression-tree nodes, see :func:`operation_counts`) that is built and printed
EXPANDED_LIMIT = 250_000
#: largest staged form (nodes of all assignments and outputs) that is printed
STAGED_LIMIT = 200_000
#: algorithm inputs with a symbolic form (their sizes are robot dimensions)
INPUTS = ("q", "v", "a", "tau", "qd", "h", "f_ext")
#: keyword arguments an algorithm may take from the caller
KEYWORDS = ("frame", "world_aligned", "relative")


def _input_size(robot: Any, name: str) -> int:
    sizes = {"q": robot.nq, "v": robot.nv, "a": robot.nv, "tau": robot.nv, "qd": robot.n_joints, "h": 6}
    if name not in sizes:
        raise ValueError(f"to_sympy: the algorithm takes an input {name!r} that has no symbolic form here; "
                         f"supported inputs: {', '.join(sizes)}")
    return sizes[name]


def _required(fn: Any) -> list[str]:
    sig = inspect.signature(fn).parameters
    return [p for p in list(sig)[2:] if sig[p].default is inspect.Parameter.empty]


def function_names() -> list[str]:
    """The algorithms :func:`to_sympy` accepts: those of :mod:`soadyn.symbolic.algorithms` that take
    ``(robot, ctx, inputs...)`` with symbolic inputs (``frame=``: a keyword) and return arrays."""
    import soadyn.symbolic.algorithms as algorithms

    out = []
    for name in algorithms.__all__:
        fn = getattr(algorithms, name, None)
        if (not inspect.isfunction(fn) or list(inspect.signature(fn).parameters)[:2] != ["robot", "ctx"]
                or name in _NOT_EXPRESSIONS):
            continue
        if all(p in INPUTS or p in KEYWORDS for p in _required(fn)):
            out.append(name)
    return sorted(out)


#: algorithms whose result is a structure of the recursion, not arrays of expressions
_NOT_EXPRESSIONS = frozenset({"joint_transforms", "articulated_body"})


def _flag(name: str, x: Any, none: bool = False) -> bool | None:
    """A boolean option must be a boolean: ``parameters="no"`` is an error, not True."""
    if x is None and none:
        return None
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ValueError(f"to_sympy: {name} must be True or False{' or None' if none else ''}, got "
                     f"{type(x).__name__} {repr(x)[:40]}")


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

    valid = function_names()
    if not isinstance(function, str) or function not in valid:
        raise ValueError(f"to_sympy: unknown function {repr(function)[:60]}; valid names: {', '.join(valid)}")
    fn = getattr(algorithms, function)
    sig = inspect.signature(fn).parameters
    unknown = [k for k in kwargs if k not in sig or k not in KEYWORDS]
    if unknown:
        takes = [k for k in sig if k in KEYWORDS]
        raise ValueError(f"to_sympy: {function} takes no keyword {unknown[0]!r}"
                         + (f"; it takes {', '.join(takes)}" if takes else ""))
    names = [p for p in _required(fn) if p not in kwargs]
    missing = [p for p in names if p in KEYWORDS]
    if missing:
        raise ValueError(f"to_sympy: {function} needs {missing[0]}=<name> (a body {list(robot.body_names)} "
                         f"or a frame {list(robot.frame_names)})")
    if "frame" in kwargs and (not isinstance(kwargs["frame"], str)
                              or kwargs["frame"] not in (*robot.body_names, *robot.frame_names)):
        raise ValueError(f"to_sympy: unknown frame {repr(kwargs['frame'])[:60]}; bodies "
                         f"{list(robot.body_names)}, frames {list(robot.frame_names)}")
    ctx = Symbolic()
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
    arrays = [np.asarray(r, dtype=object) for r in results]
    if any(not isinstance(e, (se.Basic, int, float)) for arr in arrays for e in arr.ravel()):
        raise ValueError(f"to_sympy: {function} does not return arrays of expressions")
    return ctx, arrays


def _nodes(e: Any, memo: dict[Any, int]) -> int:
    """Expression-tree nodes of ``e`` with every staged target counted as the tree of its value."""
    hit = memo.get(e)
    if hit is not None:
        return hit
    args = e.args
    return 1 + sum(_nodes(x, memo) for x in args) if args else 1


def operation_counts(ctx: Symbolic, results: list[np.ndarray]) -> tuple[int, int]:
    """(staged, expanded): expression-tree nodes of the staged program plus its outputs, and of the outputs
    with every intermediate substituted (what the expanded form holds; counted, not built)."""
    staged = sum(_nodes(se.sympify(a.expr), {}) for a in ctx.program)
    staged += sum(_nodes(se.sympify(e), {}) for arr in results for e in arr.ravel())
    memo: dict[Any, int] = {}
    for a in ctx.program:
        memo[a.target] = _nodes(se.sympify(a.expr), memo)
    expanded = sum(_nodes(se.sympify(e), memo) for arr in results for e in arr.ravel())
    return staged, expanded


def _too_large(function: str, staged: int, expanded: int, form: str) -> ValueError:
    limit = STAGED_LIMIT if form == "staged" else EXPANDED_LIMIT
    hint = " (staged=True prints the staged assignments)" if form == "expanded" and staged <= STAGED_LIMIT \
        else ""
    count = expanded if form == "expanded" else staged
    return ValueError(f"to_sympy: {function} is too large to print {form}: {count:,} operations (staged "
                      f"{staged:,}, expanded {expanded:,}; limit {limit:,}){hint}")


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
    """``function`` (an algorithm name such as ``"mass_matrix"``, one of :func:`function_names`) of
    ``robot`` as SymPy (module doc).

    Returns a ``Matrix`` (a column for a vector output, a scalar expression for a scalar, a tuple for
    several outputs) or, with ``staged=True``, a list of ``Eq`` (assignments, then one per output entry
    named ``<function>_<i>``).  ``kwargs`` go to the algorithm (e.g. ``frame="link3"`` for ``jacobian``).
    Raises ``ValueError`` at once, with the operation counts, for a form above :data:`EXPANDED_LIMIT` /
    :data:`STAGED_LIMIT`; ``simplify=True`` runs SymPy's simplify without a time bound
    (:func:`latex` bounds it).
    """
    parameters, lengths = _flag("parameters", parameters), _flag("lengths", lengths)
    staged, simplify = _flag("staged", staged), _flag("simplify", simplify)
    ctx, results = _run(robot, function, parameters, lengths, kwargs)
    n_staged, n_expanded = operation_counts(ctx, results)
    if staged:
        if n_staged > STAGED_LIMIT:
            raise _too_large(function, n_staged, n_expanded, "staged")
        eqs = [sp.Eq(sp.Symbol(a.target.name), _sympy(a.expr)) for a in ctx.program]
        for j, arr in enumerate(results):
            tag = function if len(results) == 1 else f"{function}{j}"
            eqs += [sp.Eq(sp.Symbol(f"{tag}_{i}"), _sympy(e)) for i, e in enumerate(arr.ravel())]
        return eqs
    if n_expanded > EXPANDED_LIMIT:
        raise _too_large(function, n_staged, n_expanded, "expanded")
    value: dict[se.Basic, se.Basic] = {}
    for a in ctx.program:                      # topological order: every target's value uses earlier ones
        value[a.target] = se.sympify(a.expr).xreplace(value) if value else se.sympify(a.expr)
    outs = []
    for arr in results:
        flat = np.array([se.sympify(e).xreplace(value) for e in arr.ravel()], dtype=object).reshape(arr.shape)
        m = _matrix(flat)
        if simplify:
            m = _simplify(m)
        outs.append(m)
    return outs[0] if len(outs) == 1 else tuple(outs)


def _simplify(m: Any) -> Any:
    """``trigsimp`` then ``simplify``, entry by entry."""
    if isinstance(m, sp.MatrixBase):
        return m.applyfunc(lambda e: sp.simplify(sp.trigsimp(e)))
    return sp.simplify(sp.trigsimp(m))


def _simplify_child(parts: tuple[Any, ...], conn: Any) -> None:
    conn.send(tuple(_simplify(p) for p in parts))
    conn.close()


def _simplified(parts: tuple[Any, ...], seconds: float) -> tuple[Any, ...] | None:
    """``parts`` simplified in a child process, or None when that takes longer than ``seconds`` (the child
    is then killed): SymPy's simplify cannot be interrupted in this process."""
    import multiprocessing as mp

    if seconds <= 0:
        return None
    mpc = mp.get_context("spawn")
    recv, send = mpc.Pipe(duplex=False)
    child = mpc.Process(target=_simplify_child, args=(parts, send), daemon=True)
    child.start()
    send.close()
    try:
        return recv.recv() if recv.poll(seconds) else None
    except EOFError:
        return None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        recv.close()


def latex(robot: Any, function: str, *, parameters: bool = False, lengths: bool = False,
          staged: bool | None = None, simplify_seconds: float = 60.0, **kwargs: Any) -> str:
    """LaTeX of :func:`to_sympy`.  ``staged=None``: expanded and simplified for up to 3 joints when the
    expanded form is at most :data:`EXPANDED_LIMIT` operations, staged otherwise (a ``%`` note at the end
    says why).  Simplification runs for at most ``simplify_seconds`` (then the expanded form is printed
    unsimplified, with a note).  Raises ``ValueError`` at once for a form too large to print."""
    parameters, lengths = _flag("parameters", parameters), _flag("lengths", lengths)
    staged = _flag("staged", staged, none=True)
    if isinstance(simplify_seconds, bool) or not isinstance(simplify_seconds, (int, float)) \
            or not 0 <= simplify_seconds < float("inf"):
        raise ValueError(f"latex: simplify_seconds must be a finite number >= 0, got {simplify_seconds!r}")
    notes = []
    if staged is None:
        ctx, results = _run(robot, function, parameters, lengths, kwargs)
        n_staged, n_expanded = operation_counts(ctx, results)
        staged = robot.n_joints > 3 or n_expanded > EXPANDED_LIMIT
        if robot.n_joints <= 3 and staged:
            notes.append(f"% {function}: staged, as the expanded form has {n_expanded:,} operations "
                         f"(limit {EXPANDED_LIMIT:,})")
    res = to_sympy(robot, function, parameters=parameters, lengths=lengths, staged=staged, **kwargs)
    if staged:
        return "\\begin{aligned}\n" + " \\\\\n".join(
            f"{sp.latex(e.lhs)} &= {sp.latex(e.rhs)}" for e in res) + "\n\\end{aligned}" + \
            "".join("\n" + n for n in notes)
    parts = res if isinstance(res, tuple) else (res,)
    simple = _simplified(parts, simplify_seconds)
    if simple is None:
        notes.append(f"% {function}: not simplified (SymPy's simplify took longer than "
                     f"{simplify_seconds:g} s)")
    return "\n".join([*(sp.latex(p) for p in (simple or parts)), *notes])
