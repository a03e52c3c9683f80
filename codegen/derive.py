"""Symbolic run of an algorithm -> a straight-line program (inputs, assignments, outputs).

The algorithms of :mod:`soadyn.symbolic.algorithms` run unchanged on a
:class:`~soadyn.symbolic.scalar.Symbolic` context: inputs are arrays of SymEngine symbols
(``q_0, q_1, ...``), every spatial quantity staged by the algorithm becomes an assignment
``V3_4 = <small expression>`` in ``ctx.program``, and the returned arrays are expressions in the inputs and
staged symbols.  Nothing is expanded, so the program grows linearly with the number of bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import symengine as se

from soadyn.codegen.functions import RESERVED, FunctionSpec
from soadyn.model.parameters import param_indices
from soadyn.model.robot import Robot
from soadyn.symbolic import algorithms
from soadyn.symbolic.algorithms.rnea_derivatives import CHAIN_PRODUCT
from soadyn.symbolic.scalar import Assignment, Symbolic, mirror_upper

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
    #: dense products evaluated after the assignments, in place in the outputs (:class:`Product`)
    products: list[Product] = field(default_factory=list)


@dataclass(frozen=True)
class Product:
    """``scale * A @ B`` (``A`` m x m), evaluated after the program's assignments as a loop (the C of
    :func:`soadyn.codegen.emit.product_function`), in place: the program stores column ``j`` of ``B`` where
    column ``j`` of the result goes, and ``A`` is the output ``left`` (row-major).  ``runs`` lists the
    result's columns in order as ``(output, row stride, first column, number of columns)``."""

    name: str
    left: str
    m: int
    scale: int
    runs: tuple[tuple[str, int, int, int], ...]
    #: the general form (``k`` > 0): ``A`` (m x k) then ``B`` (k x n), row-major, are the program's
    #: output ``left`` (a scratch array of the function, not of its signature), and the result is the block
    #: of rows ``row0 ...`` of the one run's output, stored (or, ``accumulate``, added to what the program
    #: stored there)
    k: int = 0
    row0: int = 0
    accumulate: bool = False
    #: ``A B`` is symmetric (m = n): the loops compute its upper triangle and store each entry twice
    symmetric: bool = False
    #: a general product whose ``A`` is read in place from an output ``(output, row stride, rows, cols)``:
    #: ``A[i, c] = output[stride * rows[i] + cols[c]]`` (a block of M^-1, not copied); ``left`` then holds
    #: ``B`` only
    source: tuple[str, int, tuple[int, ...], tuple[int, ...]] | None = None
    #: ``A`` is the output ``left`` (in place) or a block of ``source``, and that matrix is symmetric (M^-1):
    #: column c of ``A`` is also a run of its row c, so the loops may read ``A`` by columns
    #: (:func:`soadyn.codegen.products.row_vectors`)
    left_symmetric: bool = False
    #: a masked general product (``ctx.matmul``'s ``mask``): per row ``i`` of the block, the result's columns
    #: ``lo <= j < hi`` it computes and stores (the mask's entries of the row, contiguous); the other entries
    #: of the block are left alone.  Empty: every entry.
    ranges: tuple[tuple[int, int], ...] = ()
    #: the row stride of ``B`` in the scratch array (a masked product: the columns rounded up to a multiple
    #: of :data:`MASK_PAD`, the padding stored as zeros, so that the loops read whole vectors of ``B`` in
    #: place); 0: ``B``'s columns
    bstride: int = 0
    #: a symmetric general product whose ``A`` rows end in exact zeros (M^-1's folded hinges, whose rows are
    #: zero off their subtree: :func:`soadyn.symbolic.algorithms.innovations.folded_hinges`): per row ``i``,
    #: the number of leading columns of ``A`` (and rows of ``B``) its sum runs over
    #: (:func:`row_terms`); empty: all ``k``
    terms: tuple[int, ...] = ()

    @property
    def columns(self) -> int:
        return sum(r[3] for r in self.runs)

    @property
    def inner(self) -> int:
        return self.k or self.m

    def ops(self) -> dict[str, int]:
        """Multiplications and additions of the product (the scale is a free sign)."""
        m, k, n = self.m, self.inner, self.columns
        if self.terms:                   # symmetric: row i from column i on, over its own terms
            mul = sum((m - i) * t for i, t in enumerate(self.terms))
            return {"mul": mul, "add": mul - m * (m + 1) // 2 * (1 - self.accumulate)}
        entries = (sum(hi - lo for lo, hi in self.ranges) if self.ranges
                   else m * (m + 1) // 2 if self.symmetric else m * n)
        return {"mul": entries * k, "add": entries * (k - 1 + self.accumulate)}


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
    _kept: dict = field(default_factory=dict)

    def reuse(self, name: str, objs: tuple, make: Callable[[], Any]) -> Any:
        """What ``make()`` returned for the same ``name`` and objects ``objs`` (by identity, held here so
        that their ids stay theirs) on this context; else ``make()``, kept
        (:func:`soadyn.symbolic.scalar.reuse`: a second frame's run would only stage the same expressions
        again and get the same symbols back).
        Symbol names are drawn as if it ran again, so the program is the same either way."""
        key = (name, *map(id, objs))
        hit = self._kept.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], objs)):
            for k, n in hit[2].items():          # the names a second run would have drawn
                self._counts[k] = self._counts.get(k, 0) + n
            return hit[1]
        before = dict(self._counts)
        out = make()
        drawn = {k: n - before.get(k, 0) for k, n in self._counts.items() if n != before.get(k, 0)}
        self._kept[key] = (objs, out, drawn)
        return out

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


@dataclass
class _Deferred:
    """A product recorded by :meth:`CodegenSymbolic.matmul`: result symbols ``P`` for ``A @ B``, recorded
    when the program had ``position`` assignments."""

    name: str
    P: np.ndarray
    A: np.ndarray
    B: np.ndarray
    position: int
    symmetric: bool = False
    #: ``A`` is the block ``(rows, cols)`` of this matrix (``ctx.matmul``'s ``left_of``)
    left_of: tuple[np.ndarray, list[int], list[int]] | None = None
    #: the entries of ``A @ B`` the caller reads (``ctx.matmul``'s ``mask``); None: all
    mask: np.ndarray | None = None


@dataclass
class CodegenSymbolic(Symbolic):
    """The derivation context of a (non-family) generated function: a dense product ``ctx.matmul`` becomes
    a placeholder symbol per entry, and :func:`place_products` makes it a :class:`Product` loop of the C
    (one vectorised multiply-add per column vector instead of one scalar expression per entry), or
    expands it where its result is not an output of the right form."""

    deferred: list[_Deferred] = field(default_factory=list)
    #: products expanded into expressions instead (forward-mode tangents differentiate staged entries:
    #: :func:`soadyn.symbolic.algorithms.derivatives.plain_products`)
    expand_products: bool = False

    def product_loops(self, entries: int) -> bool:
        return not self.expand_products and entries >= GENERAL_PRODUCT_MIN

    def matmul(self, name: str, A: np.ndarray, B: np.ndarray, symmetric: bool = False,
               left_of: tuple[np.ndarray, list[int], list[int]] | None = None,
               mask: np.ndarray | None = None) -> np.ndarray:
        if self.expand_products:
            return super().matmul(name, A, B, symmetric, left_of, mask)
        A, B = np.asarray(A, dtype=object), np.asarray(B, dtype=object)
        if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
            raise DerivationError(f"matmul {name!r}: shapes {A.shape} and {B.shape} do not multiply")
        if symmetric and A.shape[0] != B.shape[1]:
            raise DerivationError(f"matmul {name!r}: a symmetric product must be square")
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (A.shape[0], B.shape[1]) or symmetric:
                raise DerivationError(f"matmul {name!r}: a mask must have the result's shape "
                                      f"{(A.shape[0], B.shape[1])} (and no symmetric product)")
        base = self.fresh(name)
        P = np.array([se.Symbol(f"{base}_{i}") for i in range(A.shape[0] * B.shape[1])],
                     dtype=object).reshape(A.shape[0], B.shape[1])
        if symmetric:                     # one symbol per entry of the upper triangle
            P = mirror_upper(P)
        if mask is not None:              # entries the caller does not read: none
            P[~mask] = None
        self.deferred.append(_Deferred(base, P, A, B, len(self.program), symmetric, left_of, mask))
        return P


def _as_product(d: _Deferred, outputs: dict[str, list[se.Basic]], shapes: dict[str, tuple[int, ...]],
                used: set, original: dict[str, list[se.Basic]] | None = None, twins: dict | None = None
                ) -> tuple[Product, dict[tuple[str, int], se.Basic]] | None:
    """The :class:`Product` of ``d`` and the output entries to store before it, or None when ``d`` cannot
    run in place: a result entry used by the program, or stored other than as ``+-P_ij`` down whole
    columns of one output, or ``A`` not square or not an output (as the algorithm returned the outputs,
    ``original``: an earlier product loop may finish its entries)."""
    m, k = d.A.shape
    if m != k or d.symmetric or d.mask is not None or used & set(d.P.ravel()):
        return None
    index = {p: ij for ij, p in np.ndenumerate(d.P)}
    where: dict[tuple[int, int], tuple[str, int]] = {}
    signs = set()
    for name, es in outputs.items():
        for flat, e in enumerate(es):
            if e.is_Number or not (e.free_symbols & index.keys()):
                continue
            split = _split_term(e, index)
            if split is None or split[0] != 0 or index[split[2]] in where:
                return None
            where[index[split[2]]] = (name, flat)
            signs.add(split[1])
    if len(signs) > 1:
        return None
    targets = {w[0] for w in where.values()}
    left = next((n for n, es in (original or outputs).items() if shapes.get(n) == (m, m) and n not in targets
                 and all(es[i * m + j] == se.sympify(d.A[i, j]) for i in range(m) for j in range(m))), None)
    if left is None:
        return None
    stores: dict[tuple[str, int], se.Basic] = {}
    runs: list[list[int]] = []
    for j in sorted({ij[1] for ij in where}):
        spots = [where.get((i, j)) for i in range(m)]
        if all(se.sympify(b) == 0 for b in d.B[:, j]):       # an exact zero column: no product needed
            stores.update({w: se.Integer(0) for w in spots if w is not None})
            continue
        if any(w is None for w in spots) or len({w[0] for w in spots}) != 1:
            return None
        name = spots[0][0]
        shape = shapes[name]
        col = spots[0][1]
        if len(shape) != 2 or shape[0] != m or any(w[1] != i * shape[1] + col for i, w in enumerate(spots)):
            return None
        stores.update({(name, i * shape[1] + col): se.sympify(d.B[i, j]) for i in range(m)})
        last = runs[-1] if runs else None
        if last and last[0] == name and last[2] + last[3] == col:
            last[3] += 1
        else:
            runs.append([name, shape[1], col, 1])
    if not runs:
        return None
    product = Product(d.name, left, m, signs.pop() if signs else 1, tuple(tuple(r) for r in runs),
                      left_symmetric=_symmetric(np.asarray(d.A, dtype=object), twins))
    return product, stores


def _split_term(e: se.Basic, index: dict, negated: bool = False) -> tuple[se.Basic, int, se.Basic] | None:
    """``e = C + s P_ij`` with ``C`` free of the result symbols ``index``: ``(C, s, P_ij)``, else None.
    ``negated``: also ``e = -(C' + s' P_ij)`` (a masked product's entry with the joint's damping term added:
    ``-(1.0 - dvL_0 + ...)``), as ``(-C', -s', P_ij)``."""
    if negated and e.is_Mul and len(e.args) == 2 and e.args[0] == -1 and e.args[1].is_Add:
        inner = _split_term(e.args[1], index)
        return None if inner is None else (-inner[0], -inner[1], inner[2])
    terms = e.args if e.is_Add else (e,)
    hits = [t for t in terms if t.free_symbols & index.keys()]
    if len(hits) != 1:
        return None
    t = hits[0]
    sign = 1
    if t.is_Mul and t.args[0] == -1 and len(t.args) == 2:
        sign, t = -1, t.args[1]
    if t not in index:
        return None
    rest = [u for u in terms if u is not hits[0]]
    return se.Add(*rest) if rest else se.Integer(0), sign, t


#: the fewest result entries for which a general product becomes a loop: below 8 x 8 the loop's fixed cost
#: (copying the factors, the call) and its dense arithmetic (the scalar expressions skip the factors' exact
#: zeros) are not repaid (M^-1 of examples/seed004_dual_arm.yaml, 6 x 6: 189 ns as expressions, 238 ns with
#: the loop; 14 hinges: 2,335 -> 1,940 ns; 31 hinges: 3,640 -> 2,940 ns)
GENERAL_PRODUCT_MIN = 64
#: the fewest result entries for which a general product that reads its left factor in place (a block of
#: an output: ``ctx.matmul``'s ``left_of``, M^-1 in ``-M^-1 dtau/dx``) becomes a loop: no copy of ``A``.
#: Forward-dynamics derivatives, a C loop over 1,000 states, three fresh copies each, threshold 64 -> 32:
#: Go2 (four legs of 3, nv 18: blocks 18 x 3, which as statements also pulled M^-1's base terms out of
#: their loop) 2,404-2,471 -> 1,807-1,937 ns; Bolt (two legs of 3, nv 12: 12 x 3) 1,050-1,122 -> 876-1,001
IN_PLACE_PRODUCT_MIN = 32
#: the fewest entries of a masked general product (``ctx.matmul``'s ``mask``) for which it becomes a loop:
#: the lower triangle of the shortest chain whose ID-derivative pairs ask for masked products
#: (:data:`soadyn.symbolic.algorithms.rnea_derivatives.CHAIN_PRODUCT`), so that the two stay in step (a
#: masked product left to statements is slower than the plain statements)
MASKED_PRODUCT_MIN = CHAIN_PRODUCT * (CHAIN_PRODUCT + 1) // 2
#: the fewest entries of a masked product placed as a loop into another product's factors
#: (:func:`_feeding_products`): a chain of 7.  Measured (callgrind instructions per call, -O2 -march=native
#: -mno-avx512f; code bytes of the single call, fast build), FD derivatives, statements -> loops: TALOS
#: (two arms of 8, two legs of 6) 102,474 -> 100,716 Ir, 350,089 -> 340,356 bytes; the arms alone
#: 101,048 Ir, 338,700 bytes; B1 + Z1 (one arm of 6) 38,694 -> 38,793 Ir, 154,919 -> 156,761 bytes
FEEDING_PRODUCT_MIN = 28
#: a masked product's ``B`` rows are padded to a multiple of this many columns in the scratch array (the
#: widest vector of :func:`soadyn.codegen.products.product_function`)
MASK_PAD = 8


def _as_general_product(d: _Deferred, outputs: dict[str, list[se.Basic]], shapes: dict[str, tuple[int, ...]],
                        used: set, lefts: dict | None = None,
                        original: dict[str, list[se.Basic]] | None = None, twins: dict | None = None
                        ) -> tuple[Product, dict[tuple[str, int], se.Basic]] | None:
    """The general :class:`Product` of ``d`` (``A`` m x k, ``B`` k x n, both copied into a scratch array)
    when every result entry is stored once, as ``C + s P_ij`` (one sign), in one dense block of one
    output (a symmetric product: its entry (i, j), i <= j, at both (i, j) and (j, i) of the block; a
    masked one: the mask's entries only, each row's a run of columns, ``Product.ranges``); the output
    entries to store before it (``C``), and the scratch array as the output ``prodf_<name>``.
    None otherwise.  ``lefts``: the ``A`` of the masked products placed before (its entries -> the scratch
    array holding it), so that a masked product with the same ``A`` reads it from there (``source``)."""
    (m, k), n = d.A.shape, d.B.shape[1]
    wanted = int(d.mask.sum()) if d.mask is not None else m * n
    least = (MASKED_PRODUCT_MIN if d.mask is not None else
             IN_PLACE_PRODUCT_MIN if d.left_of is not None else GENERAL_PRODUCT_MIN)
    if wanted < least or used & set(d.P.ravel()):
        return None
    index = {p: ij for ij, p in np.ndenumerate(d.P)
             if p is not None and (not d.symmetric or ij[0] <= ij[1])}
    hits: list[tuple[str, int, tuple[int, int], se.Basic]] = []
    signs = set()
    for name, es in outputs.items():
        for flat, e in enumerate(es):
            if e.is_Number or not (e.free_symbols & index.keys()):
                continue
            split = _split_term(e, index, negated=d.mask is not None)
            if split is None:
                return None
            rest, sign, sym = split
            hits.append((name, flat, index[sym], rest))
            signs.add(sign)
    if len(hits) != wanted or len(signs) != 1 or len({h[0] for h in hits}) != 1:
        return None
    name = hits[0][0]
    shape = shapes[name]
    if len(shape) != 2:
        return None
    at = [divmod(h[1], shape[1]) for h in hits]
    if d.mask is None:
        row0, col0 = min(r for r, _ in at), min(c for _, c in at)
    else:                              # the block's corner from any entry (a mask may miss row or column 0)
        row0, col0 = at[0][0] - hits[0][2][0], at[0][1] - hits[0][2][1]
        if row0 < 0 or col0 < 0:
            return None
    ranges: tuple[tuple[int, int], ...] = ()
    if d.mask is not None:             # each row's entries one run of columns
        rs = []
        for row in d.mask:
            cols = np.flatnonzero(row)
            if len(cols) and cols[-1] - cols[0] + 1 != len(cols):
                return None
            rs.append((int(cols[0]), int(cols[-1]) + 1) if len(cols) else (0, 0))
        ranges = tuple(rs)
    seen = set()
    for (r, c), (_, _, (i, j), _) in zip(at, hits):
        ij = (r - row0, c - col0)
        if ij != (i, j) and not (d.symmetric and ij == (j, i)) or ij in seen:
            return None
        seen.add(ij)
    if row0 + m > shape[0] or col0 + n > shape[1]:
        return None
    if d.symmetric:                   # the loop copies entry (i, j) to (j, i): so must the rest
        rest = {(r, c): h[3] for (r, c), h in zip(at, hits)}
        if any(rest[r, c] != rest[row0 + c - col0, col0 + r - row0] for r, c in rest):
            return None
    scratch = f"prodf_{d.name}"
    if scratch in outputs:
        return None
    accumulate = any(not (h[3].is_Number and h[3] == 0) for h in hits)
    source = _left_source(d, original or outputs, shapes, name, (row0, row0 + m, col0, col0 + n))
    if source is None and d.mask is None and wanted < GENERAL_PRODUCT_MIN:   # A copied after all
        return None
    mirror = source is not None and _symmetric(np.asarray(d.left_of[0], dtype=object), twins)
    key = tuple(se.sympify(e) for e in d.A.ravel())
    if source is None and ranges and lefts is not None and key in lefts:
        source = (lefts[key], k, tuple(range(m)), tuple(range(k)))
    bstride = -(-n // MASK_PAD) * MASK_PAD if ranges else 0
    terms = row_terms(d.A) if d.symmetric and source is None else ()
    product = Product(d.name, scratch, m, signs.pop(), ((name, shape[1], col0, n),), k=k, row0=row0,
                      accumulate=accumulate, symmetric=d.symmetric, source=source, left_symmetric=mirror,
                      ranges=ranges, bstride=bstride, terms=terms)
    stores = {(h[0], h[1]): h[3] for h in hits}
    B = d.B
    if bstride > n:                    # B's rows padded with zeros
        B = np.concatenate([B, np.zeros((k, bstride - n), dtype=object)], axis=1)
    factors = [*B.ravel()] if source else [*d.A.ravel(), *B.ravel()]
    stores.update({(scratch, i): se.sympify(e) for i, e in enumerate(factors)})
    if ranges and source is None and lefts is not None:
        lefts[key] = scratch
    return product, stores


def row_terms(A: np.ndarray) -> tuple[int, ...]:
    """Per row of ``A`` (entries symbols or numbers), the number of its leading columns that hold every
    entry that is not an exact zero (at least 1): the terms a product's row sums (``Product.terms``).
    Empty where every row needs all of its columns.  A term ``0 * b`` added to a finite sum leaves it
    unchanged (up to the sign of a zero sum), so the loops and the expanded statements skip the same
    terms."""
    k = A.shape[1]
    out = []
    for row in A:
        t = k
        while t > 1 and se.sympify(row[t - 1]) == 0:
            t -= 1
        out.append(t)
    return tuple(out) if any(t < k for t in out) else ()


def _symmetric(W: np.ndarray, twins: dict | None = None) -> bool:
    """``W`` (square, entries symbols or numbers) equals its transpose entry by entry; ``twins``: result
    symbols of a product -> the same entry of another product (:func:`_twins`), taken as equal."""
    n = W.shape[0]
    twins = twins or {}

    def same(a: Any, b: Any) -> bool:
        a, b = se.sympify(a), se.sympify(b)
        return twins.get(a, a) == twins.get(b, b)
    return W.shape == (n, n) and all(same(W[i, j], W[j, i]) for i in range(n) for j in range(i + 1, n))


def _twins(deferred: list[_Deferred]) -> dict:
    """Result symbols of a product ``B* A*`` -> the symbols of the transposed entries of an earlier
    product ``A B`` (no mask, not symmetric): entry (j, i) of the one sums ``B[k, j] A[i, k]`` over k in
    the order in which entry (i, j) of the other sums ``A[i, k] B[k, j]``, and IEEE multiplication
    commutes, so the two are the same bits (M^-1's base columns W0 and rows W0*: M^-1 stays symmetric
    symbol by symbol for the products that read it by columns)."""
    out: dict = {}
    for i, d1 in enumerate(deferred):
        for d2 in deferred[i + 1:]:
            if (d1.mask is None and d2.mask is None and not d1.symmetric and not d2.symmetric
                    and d2.A.shape == d1.B.T.shape and d2.B.shape == d1.A.T.shape
                    and all(se.sympify(a) == se.sympify(b) for a, b in zip(d2.A.ravel(), d1.B.T.ravel()))
                    and all(se.sympify(a) == se.sympify(b) for a, b in zip(d2.B.ravel(), d1.A.T.ravel()))):
                out.update({se.sympify(x): se.sympify(y) for x, y in zip(d2.P.ravel(), d1.P.T.ravel())})
    return out


def _left_source(d: _Deferred, outputs: dict[str, list[se.Basic]], shapes: dict[str, tuple[int, ...]],
                 target: str, block: tuple[int, int, int, int]
                 ) -> tuple[str, int, tuple[int, ...], tuple[int, ...]] | None:
    """Where a general product reads ``A`` in place: an output holding the whole matrix of
    ``ctx.matmul``'s ``left_of`` (row-major), so that the loops read the block from it instead of a copy
    (``Product.source``); None otherwise.  The result's own output ``target`` only where the block it
    reads misses the result's ``block`` (rows r0 <= r < r1, columns c0 <= c < c1): M^-1's base terms
    read the base columns, ``W0*``, beside the hinges' block they add to."""
    if d.left_of is None:
        return None
    W = np.asarray(d.left_of[0], dtype=object)
    rows, cols = tuple(int(r) for r in d.left_of[1]), tuple(int(c) for c in d.left_of[2])
    if W.ndim != 2 or (len(rows), len(cols)) != d.A.shape:
        return None
    r0, r1, c0, c1 = block
    apart = all(not r0 <= r < r1 for r in rows) or all(not c0 <= c < c1 for c in cols)
    flat = [se.sympify(e) for e in W.ravel()]
    for name, es in outputs.items():
        if (name != target or apart) and shapes.get(name) == W.shape and es == flat:
            return name, W.shape[1], rows, cols
    return None


def place_products(ctx: CodegenSymbolic, outputs: list[tuple[str, list[se.Basic]]],
                   shapes: dict[str, tuple[int, ...]]
                   ) -> tuple[list[tuple[str, list[se.Basic]]], list[Product]]:
    """Turn the products of ``ctx.matmul`` into :class:`Product` loops where their results are outputs
    (whole columns, one sign, ``A`` an output too); expand the others into ``ctx.program`` (in place).
    Returns the outputs to store before the products, and the products in order.

    A product's result may be a later product's ``A`` when that one reads ``A`` in place from the output
    (an in-place product, or ``Product.source``): the loops run in order, so it reads the finished
    entries (forward-dynamics derivatives: M^-1's base terms, then ``-M^-1 dtau/dx``).  A masked product of
    at least :data:`FEEDING_PRODUCT_MIN` entries whose results only later loops read, as entries of their
    ``B``, stores them straight there (:func:`_feeding_products`).  Any other use of a result (a
    statement, a factor copied into a scratch array, an expanded product) expands it."""
    used: set = set()
    for a in ctx.program:
        used |= a.expr.free_symbols
    program_used = set(used)
    reads_in_place = [d.left_of is not None or d.A.shape[0] == d.A.shape[1] for d in ctx.deferred]
    for d, inplace in zip(ctx.deferred, reads_in_place):   # a factor's symbols, unless read in place
        factors = (*(() if inplace else d.A.ravel()), *d.B.ravel())
        used |= {s for e in factors for s in se.sympify(e).free_symbols}
    original = {n: [se.sympify(e) for e in es] for n, es in outputs}
    twins = _twins(ctx.deferred)
    forced: set = set()
    while True:
        outs = {n: list(es) for n, es in original.items()}
        placed: list[tuple[int, Product]] = []
        expand: list[_Deferred] = []
        lefts: dict = {}
        for at, d in enumerate(ctx.deferred):
            found = (_as_product(d, outs, shapes, used | forced, original, twins)
                     or _as_general_product(d, outs, shapes, used | forced, lefts, original, twins))
            if found is None:
                expand.append(d)
                continue
            product, stores = found
            if product.k:
                outs[product.left] = [se.Integer(0)] * scratch_size(product)
            for (name, flat), e in stores.items():
                outs[name][flat] = e
            placed.append((at, product))
        placed += _feeding_products(ctx.deferred, expand, placed, outs, shapes, program_used, forced,
                                    original, twins)
        placed.sort(key=lambda ap: ap[0])
        expand = [d for d in expand if all(d is not ctx.deferred[at] for at, _ in placed)]
        # a placed product's result read by an expanded product, a copied factor or an earlier loop: expand it
        results = {at: {x for x in ctx.deferred[at].P.ravel() if x is not None} for at, _ in placed}
        where = {at: p for at, p in placed}
        clash = set()
        for at, d in enumerate(ctx.deferred):
            p = where.get(at)
            in_place = p is not None and (not p.k or p.source is not None)
            syms = {s for e in d.A.ravel() for s in se.sympify(e).free_symbols}
            clash |= {w for w, r in results.items() if r & syms and (not in_place or w > at)}
        looped = set().union(*results.values()) if results else set()
        if twins and any((x in looped) != (y in looped) for x, y in twins.items()):
            twins = {}            # a twin left to statements may round otherwise: read M^-1 as it is
            continue
        if not clash:
            break
        forced |= set().union(*(results[w] for w in clash))
    products = [p for _, p in placed]
    at_position: dict[int, list[_Deferred]] = {}
    for d in expand:                   # in the order recorded
        at_position.setdefault(d.position, []).append(d)
    for position in sorted(at_position, reverse=True):
        group = at_position[position]
        # products recorded with no statement between them: the last one's statements first, unless one
        # reads another's results (a chain's masked product dvL and the expanded blocks -M^-1 dtau/dx that
        # read it): then in the order recorded, so that every result is assigned before it is read
        results = {x for d in group for x in d.P.ravel() if x is not None}
        reads = any(results & se.sympify(e).free_symbols for d in group for e in (*d.A.ravel(), *d.B.ravel()))
        ctx.program[position:position] = [
            Assignment(d.P[ij], se.sympify(full[ij]), d.name)
            for d, full in ((d, d.A @ d.B) for d in (group if reads else group[::-1]))
            for ij in np.ndindex(*d.P.shape) if d.P[ij] is not None and (not d.symmetric or ij[0] <= ij[1])]
    scratch = [(p.left, outs[p.left]) for p in products if p.k]
    return [(n, outs[n]) for n, _ in outputs] + scratch, products


def _feeding_products(deferred: list[_Deferred], expand: list[_Deferred], placed: list[tuple[int, Product]],
                      outs: dict[str, list[se.Basic]], shapes: dict[str, tuple[int, ...]], program_used: set,
                      forced: set, original: dict[str, list[se.Basic]], twins: dict
                      ) -> list[tuple[int, Product]]:
    """Masked products (``ctx.matmul``'s ``mask``) left to statements because their results are entries of
    ``B`` of later products placed as loops (the forward-dynamics derivatives: a chain's ``dqL`` / ``dvL``
    entries of ``dtau/dx`` in the blocks ``-M^-1 dtau/dx``), placed as loops that store their results
    straight into those factors: into a general product's scratch array (its ``B``, row-major, stride
    ``bstride`` or its columns) or, for an in-place product, into the output where its ``B`` is stored.
    The loops run in the order recorded, so the masked one fills the entries before the product that
    reads them; the statements store nothing there (:func:`~soadyn.codegen.products.overwritten_entries`).
    Returns ``(position among the deferred, Product)`` of each placed here; ``outs`` updated."""
    out: list[tuple[int, Product]] = []
    by_at = dict(placed)
    lefts: dict = {}
    scratch_shapes = dict(shapes)
    for _, p in placed:
        if p.k:
            bs = p.bstride or p.columns
            boff = 0 if p.source else p.m * p.k
            if boff % bs == 0:
                scratch_shapes[p.left] = (scratch_size(p) // bs, bs)
    for d in expand:
        at = next(i for i, e in enumerate(deferred) if e is d)
        if d.mask is None or int(d.mask.sum()) < FEEDING_PRODUCT_MIN:
            continue
        results = {x for x in d.P.ravel() if x is not None}
        if results & (program_used | forced):
            continue
        consumers = []
        for i, e in enumerate(deferred):
            if e is d:
                continue
            a_syms = {s for x in e.A.ravel() for s in se.sympify(x).free_symbols}
            b_syms = {s for x in e.B.ravel() for s in se.sympify(x).free_symbols}
            if results & a_syms:
                break
            if results & b_syms:
                consumers.append(i)
        else:
            if not consumers or any(i not in by_at or i < at for i in consumers):
                continue
            others = set()
            for e in deferred:
                if e is not d:
                    others |= {s for x in e.A.ravel() for s in se.sympify(x).free_symbols}
            found = _as_general_product(d, outs, scratch_shapes, (others | program_used | forced) - results,
                                        lefts, original, twins)
            if found is None:
                continue
            product, stores = found
            outs[product.left] = [se.Integer(0)] * scratch_size(product)
            for (name, flat), e in stores.items():
                outs[name][flat] = e
            out.append((at, product))
    return out


def scratch_size(p: Product) -> int:
    """Entries of a general product's scratch array: ``A`` (unless read in place, ``p.source``) and ``B``."""
    return (0 if p.source else p.m * p.k) + p.k * (p.bstride or p.columns)


#: separator between an output's name and its case (frame id) in the program of a frame family
CASE_SEP = "@"


def nonzero_patterns(program: Program) -> dict[str, str]:
    """The structural sparsity of every output of ``program`` (``<output>`` or ``<output>@<case>``): the
    entries, row-major, that are not an exact zero of the program, as a hex string of bits (entry ``i`` is
    bit ``i % 4`` of character ``i // 4``).  An entry outside the pattern is zero for every input of this
    robot (its expression is the number 0); the entries a product loop writes count as non-zero."""
    nonzero = {name: [not (e.is_Number and e == 0) for e in es] for name, es in program.outputs}
    for pr in program.products:
        for name, stride, col0, ncol in pr.runs:
            bits = nonzero[name]
            rows = range(pr.row0, pr.row0 + pr.m) if pr.k else range(len(bits) // stride)
            for i, r in enumerate(rows):
                lo, hi = pr.ranges[i] if pr.ranges else (0, ncol)
                for c in range(col0 + lo, col0 + hi):
                    bits[r * stride + c] = True
        if pr.k:
            nonzero.pop(pr.left, None)         # the product's scratch array, not an output
    out = {}
    for name, bits in nonzero.items():
        chars = []
        for i in range(0, len(bits), 4):
            chars.append("0123456789abcdef"[sum(1 << j for j, b in enumerate(bits[i:i + 4]) if b)])
        out[name] = "".join(chars)
    return out


def derive(robot: Robot, spec: FunctionSpec) -> Program:
    """Run ``spec.algorithm`` symbolically on ``robot`` and return the raw staged program.

    For a frame family (``spec.frames``) the algorithm runs once per frame on one
    :class:`SharingSymbolic` context; the outputs of frame ``i`` are named ``<output>@<i>``.
    """
    STATS["derivations"] += 1
    fn = algorithm(spec.algorithm)
    ctx = SharingSymbolic() if spec.is_family else CodegenSymbolic()
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
    products: list[Product] = []
    if isinstance(ctx, CodegenSymbolic) and ctx.deferred:
        outputs, products = place_products(ctx, outputs, {a.name: a.shape for a in spec.outputs})
    program = Program(spec.name, [(k, list(v)) for k, v in ctx.inputs.items()],
                      [(a.target, se.sympify(a.expr)) for a in ctx.program], outputs,
                      stages={a.target.name: a.stage for a in ctx.program}, products=products)
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
    return replace(program, assignments=assigns, outputs=outs, stages=stages)
