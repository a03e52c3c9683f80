"""Scalar contexts: run the same algorithm code on floats or on symbolic expressions.

Every algorithm in :mod:`soadyn.symbolic` takes a context ``ctx`` and works on
numpy arrays whose entries are floats (:class:`Numeric`) or SymEngine
expressions (:class:`Symbolic`, ``dtype=object``).  The context supplies the few
operations that differ between the two (``sin``, ``cos``, ``sqrt``, constants)
and the staging hook ``ctx.stage(name, array)``:

* numerically it returns the array unchanged;
* symbolically it records ``symbol = expression`` for every non-trivial entry
  and returns fresh symbols in its place, so that each spatial quantity of
  each recursion step becomes a named intermediate.  The recorded program is a
  shared graph of small expressions (no expression swell) that
  :mod:`soadyn.codegen` optimises and prints as C.

Structural zeros: robot constants enter through ``ctx.const`` which keeps
exact 0 and +-1 exact (SymEngine ``Integer``), so ``0*x`` and ``1*x`` vanish
as the expressions are built.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np
import symengine as se

from soadyn.model.names import c_identifier

T = TypeVar("T")


@runtime_checkable
class ScalarContext(Protocol):
    """What an algorithm may ask of its scalar context; nothing else (no "symbolic or not" branch).

    :class:`Numeric` runs the algorithms as float numpy code, :class:`Symbolic` records them as a
    staged straight-line program.  Arrays an algorithm builds from its own entries go through
    :meth:`array`, so their dtype is the context's (``float`` or ``object``).
    """

    #: inertial parameters of the parameterised bodies: body index -> pi (10,), symbols or floats
    #: (soadyn.symbolic.parameters reads the inertias through this; empty = all constants)
    parameters: dict[int, np.ndarray]
    #: joint placement offsets given as symbols (the SymPy face): body index -> offset (3,) in the parent
    lengths: dict[int, np.ndarray]

    def const(self, x: Any) -> np.ndarray:
        """A robot constant (exact 0 and +-1 stay exact symbolically)."""
        ...

    def zeros(self, shape: int | tuple[int, ...]) -> np.ndarray: ...

    def eye(self, n: int) -> np.ndarray: ...

    def array(self, values: Any) -> np.ndarray:
        """A new array of the context's dtype holding ``values`` (a copy)."""
        ...

    def one(self) -> Any:
        """The scalar 1 of the context."""
        ...

    def sin(self, x: Any) -> Any: ...

    def cos(self, x: Any) -> Any: ...

    def sqrt(self, x: Any) -> Any: ...

    def is_zero(self, x: Any) -> bool:
        """True only for an exact (structural) zero."""
        ...

    def stage(self, name: str, arr: Any) -> Any:
        """Name an intermediate (a scalar or an array) of the recursion stage ``name``."""
        ...

    def stage_symmetric(self, name: str, arr: np.ndarray) -> np.ndarray:
        """Stage a symmetric matrix, upper triangle named, lower mirrored."""
        ...

    def matmul(self, name: str, A: np.ndarray, B: np.ndarray, symmetric: bool = False,
               left_of: tuple[np.ndarray, list[int], list[int]] | None = None,
               mask: np.ndarray | None = None) -> np.ndarray:
        """The dense product ``A @ B`` of two matrices, named ``name``.  A code generator may evaluate it
        as a loop over the stored factors instead of one scalar expression per entry.  ``symmetric``: the
        caller knows ``A @ B`` is symmetric; only its upper triangle is computed, and mirrored.
        ``left_of = (W, rows, cols)``: ``A`` is the block ``W[rows][:, cols]`` of a matrix ``W`` (a code
        generator may read it from ``W`` in place instead of copying it).  ``mask`` (boolean, the shape of
        the result): the caller reads only the entries where it is true; a code generator computes only
        those (the others are None there)."""
        ...

    def product_loops(self, entries: int) -> bool:
        """Whether :meth:`matmul` of a result with this many entries may become a loop over the factors
        (an algorithm then keeps its result out of its other expressions); False: one expression per
        entry, which the rest of the algorithm may read at no cost."""
        ...


def mirror_upper(R: np.ndarray) -> np.ndarray:
    """``R`` (square) with its strict lower triangle replaced by the mirror of its upper triangle."""
    R = np.array(R)
    if R.ndim != 2 or R.shape[0] != R.shape[1]:
        raise ValueError(f"a symmetric product must be square, got shape {R.shape}")
    low = np.tril_indices(R.shape[0], -1)
    R[low] = R.T[low]
    return R


def reuse(ctx: Any, name: str, objs: tuple, make: Callable[[], T]) -> T:
    """``make()``, or what it returned before on ``ctx`` for the same ``name`` and the same objects ``objs``
    (by identity) where the context keeps results (``ctx.reuse``: the hash-consing context of a frame
    family, where running the same sub-algorithm again on the same inputs only stages the same symbols
    again).  The result must not be modified by the caller."""
    keep = getattr(ctx, "reuse", None)
    return make() if keep is None else keep(name, objs, make)


class Numeric:
    """Float context: the algorithms run as plain numpy code."""

    symbolic = False
    dtype: Any = float

    def __init__(self, parameters: dict[int, np.ndarray] | None = None) -> None:
        self.parameters = {} if parameters is None else dict(parameters)
        self.lengths: dict[int, np.ndarray] = {}

    def const(self, x: Any) -> np.ndarray:
        return np.asarray(x, dtype=float)

    def zeros(self, shape: int | tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape)

    def eye(self, n: int) -> np.ndarray:
        return np.eye(n)

    def array(self, values: Any) -> np.ndarray:
        return np.array(values, dtype=float)

    def one(self) -> Any:
        return 1.0

    def sin(self, x: Any) -> Any:
        return math.sin(x)

    def cos(self, x: Any) -> Any:
        return math.cos(x)

    def sqrt(self, x: Any) -> Any:
        return math.sqrt(x)

    def stage(self, name: str, arr: Any) -> Any:
        return arr

    def is_zero(self, x: Any) -> bool:
        return False

    def matmul(self, name: str, A: np.ndarray, B: np.ndarray, symmetric: bool = False,
               left_of: tuple[np.ndarray, list[int], list[int]] | None = None,
               mask: np.ndarray | None = None) -> np.ndarray:
        R = np.asarray(A) @ np.asarray(B)
        return mirror_upper(R) if symmetric else R

    def product_loops(self, entries: int) -> bool:
        return False

    def stage_symmetric(self, name: str, arr: Any) -> Any:
        return arr


def _exact(x: float) -> se.Basic:
    if x == 0.0:
        return se.Integer(0)
    if x == 1.0:
        return se.Integer(1)
    if x == -1.0:
        return se.Integer(-1)
    if float(x).is_integer() and abs(x) < 2**31:
        return se.Integer(int(x))
    return se.RealDouble(float(x))


@dataclass
class Assignment:
    """One line of a staged program: ``target = expr``."""

    target: se.Symbol
    expr: se.Basic
    #: the name the algorithm staged it under (``V3`` for entry 4 ``V3_4``): the recursion stage it belongs to
    stage: str = ""


@dataclass
class Symbolic:
    """Symbolic context: SymEngine expressions, staged into a straight-line program.

    ``program`` lists the assignments in creation order, which is a valid
    topological order (every expression only uses inputs and earlier targets).
    """

    symbolic = True
    dtype: Any = object
    program: list[Assignment] = field(default_factory=list)
    inputs: dict[str, list[se.Symbol]] = field(default_factory=dict)
    parameters: dict[int, np.ndarray] = field(default_factory=dict)
    lengths: dict[int, np.ndarray] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    # -- inputs ---------------------------------------------------------------------------------
    def input(self, name: str, shape: int | Sequence[int]) -> np.ndarray:
        """A named input array of fresh symbols, e.g. ``q = ctx.input('q', robot.nq)``.

        Entries are named ``name_i`` (flat, row-major index), matching the C argument
        ``const double *name``.
        """
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(np.prod(shape)) if shape else 1
        syms = [se.Symbol(f"{name}_{i}") for i in range(n)]
        self.inputs[name] = syms
        return np.array(syms, dtype=object).reshape(shape)

    # -- scalar operations ---------------------------------------------------------------------
    def const(self, x: Any) -> np.ndarray:
        a = np.asarray(x, dtype=float)
        out = np.empty(a.shape, dtype=object)
        for idx in np.ndindex(a.shape):
            out[idx] = _exact(float(a[idx]))
        return out

    def zeros(self, shape: int | tuple[int, ...]) -> np.ndarray:
        out = np.empty(shape, dtype=object)
        out.fill(se.Integer(0))
        return out

    def eye(self, n: int) -> np.ndarray:
        out = self.zeros((n, n))
        for i in range(n):
            out[i, i] = se.Integer(1)
        return out

    def array(self, values: Any) -> np.ndarray:
        return np.array(values, dtype=object)

    def one(self) -> Any:
        return se.Integer(1)

    def sin(self, x: Any) -> Any:
        return se.sin(x)

    def cos(self, x: Any) -> Any:
        return se.cos(x)

    def sqrt(self, x: Any) -> Any:
        return se.sqrt(x)

    def is_zero(self, x: Any) -> bool:
        return isinstance(x, se.Basic) and x == 0

    # -- staging ---------------------------------------------------------------------------------
    def fresh(self, name: str) -> str:
        """A new symbol name from ``name``: a generated C identifier (:func:`soadyn.model.names.c_identifier`:
        ASCII, bounded, a hash for long names), numbered when taken -- never a robot's name verbatim."""
        name = c_identifier(name, 40)
        c = self._counts.get(name, 0)
        self._counts[name] = c + 1
        return name if c == 0 else f"{name}_{c}"

    def stage(self, name: str, arr: Any) -> Any:
        """Replace every non-atomic entry of ``arr`` by a fresh symbol ``name_i``; record the definitions.

        ``name`` should be a C identifier fragment such as ``V3`` (spatial velocity of body 3).
        Numbers and symbols are passed through unchanged.
        """
        if isinstance(arr, np.ndarray):
            base = self.fresh(name)
            out = np.empty(arr.shape, dtype=object)
            flat = arr.ravel()
            for i, (idx, e) in enumerate(zip(np.ndindex(arr.shape), flat)):
                out[idx] = self._stage_one(f"{base}_{i}", e, name)
            return out
        return self._stage_one(self.fresh(name), arr, name)

    def stage_symmetric(self, name: str, arr: np.ndarray) -> np.ndarray:
        """Stage a symmetric matrix: the upper triangle gets symbols, the lower mirrors it.

        Symmetry is imposed by construction, so ``P(k)`` stays exactly symmetric in the program.
        """
        base = self.fresh(name)
        n = arr.shape[0]
        out = np.empty(arr.shape, dtype=object)
        for i in range(n):
            for j in range(i, n):
                out[i, j] = out[j, i] = self._stage_one(f"{base}_{i}{j}" if n <= 10 else f"{base}_{i}_{j}",
                                                        arr[i, j], name)
        return out

    def matmul(self, name: str, A: np.ndarray, B: np.ndarray, symmetric: bool = False,
               left_of: tuple[np.ndarray, list[int], list[int]] | None = None,
               mask: np.ndarray | None = None) -> np.ndarray:
        """``A @ B`` as one expression per entry (:class:`soadyn.codegen.derive.CodegenSymbolic` defers it to
        a loop in the generated C instead)."""
        R = np.asarray(A) @ np.asarray(B)
        return mirror_upper(R) if symmetric else R

    def product_loops(self, entries: int) -> bool:
        return False

    def _stage_one(self, sym_name: str, e: Any, stage: str = "") -> Any:
        e = se.sympify(e)
        if e.is_Number or e.is_Symbol:
            return e
        s = se.Symbol(sym_name)
        self.program.append(Assignment(s, e, stage))
        return s


NUMERIC = Numeric()
