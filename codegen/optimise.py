"""Optimisation of a staged straight-line program, and operation counting.

Passes (:func:`optimise`), each keeping a valid topological order:

0. **exact integers**: floating-point constants with an integral value (``1.0`` from a sign, ``2.0``) become
   exact integers, so ``-1.0*s`` turns into a free negation and ``0.0*x`` vanishes;
1. **dead-code elimination** from the outputs back (a symbolic run stages every quantity the algorithm
   touches, e.g. the base attitude for a mass matrix that does not depend on it);
2. **copy propagation**: ``x = y``, ``x = -y`` and ``x = <number>`` are substituted into their users
   (a negation folds into the user's sign, so it costs nothing);
3. **global common-subexpression elimination** with ``symengine.cse`` over all right-hand sides and
   outputs of the function at once; a temporary is scheduled right before its first (transitive) user,
   so the staged order and names of the algorithm are kept;
4. copy propagation again, then dead-code elimination again;
5. **power lowering** so that the C code never calls ``pow`` for a power that is cheaper as
   multiplications: ``b**2`` stays (C compilers turn ``pow(b, 2)`` into ``b*b`` at any optimisation
   level, as the result is exact), ``b**n`` for ``|n| >= 3`` and ``b**-2`` become chains of named squares,
   ``b**(-1/2)`` becomes ``1/s`` with ``s = sqrt(b)``.

Operation counting (:func:`count_ops`) over the final expression trees, as the C printer writes them:

* an ``Add`` of ``k`` terms costs ``k - 1`` adds (a subtraction is an add: ``x - y`` is printed as
  such, the ``-1`` of the term is folded);
* a ``Mul`` is printed as ``c*n1*n2/(d1*d2)``: a numeric coefficient ``c`` counts as a factor unless it is
  ``+-1`` (a negation is free: it is folded into the enclosing add or a fused sign), so a product of ``u``
  numerator and ``w`` denominator factors costs ``max(u-1, 0) + max(w-1, 0)`` muls and one div if
  ``w > 0``;
* ``b**2`` one mul, ``b**-1`` one div, ``sqrt`` one sqrt, ``sin``/``cos`` one trig; anything else
  (``pow`` with a non-lowered exponent, other functions) counts under ``other``;
* a plain copy (a symbol or a number) is free.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import symengine as se

from soadyn.codegen.derive import Program

OP_KINDS = ("add", "mul", "div", "sqrt", "trig", "other")


# --------------------------------------------------------------------------------------------------
# dead code, copies
# --------------------------------------------------------------------------------------------------
def _free(e: se.Basic) -> set:
    return e.free_symbols if not (e.is_Number) else set()


def eliminate_dead_code(program: Program) -> Program:
    """Drop assignments that no output depends on (walking the program backwards)."""
    needed: set = set()
    for _, es in program.outputs:
        for e in es:
            needed |= _free(e)
    kept = []
    for t, e in reversed(program.assignments):
        if t in needed:
            kept.append((t, e))
            needed |= _free(e)
    kept.reverse()
    return replace(program, assignments=kept)


def _integral(e: se.Basic) -> se.Basic:
    sub = {}
    for c in e.atoms(se.RealDouble):
        x = float(c)
        if x.is_integer() and abs(x) < 2**53:
            sub[c] = se.Integer(int(x))
    return e.xreplace(sub) if sub else e


def exact_integers(program: Program) -> Program:
    """Floating-point constants with integral values -> exact integers (re-canonicalising the expressions)."""
    assigns = [(t, _integral(e)) for t, e in program.assignments]
    outputs = [(n, [_integral(e) for e in es]) for n, es in program.outputs]
    return replace(program, assignments=assigns, outputs=outputs)


def _subst(e: se.Basic, sub: dict, free: set | None = None) -> se.Basic:
    """``e.xreplace(sub)`` restricted to the symbols of ``e`` (SymEngine converts the whole dict per call);
    ``free``: the free symbols of ``e`` when the caller has them."""
    if e.is_Number or not sub:
        return e
    small = {s: sub[s] for s in (e.free_symbols if free is None else free) if s in sub}
    return e.xreplace(small) if small else e


def _is_copy(e: se.Basic) -> bool:
    if e.is_Number or e.is_Symbol:
        return True
    if e.is_Mul:
        args = e.args
        return len(args) == 2 and args[0] == -1 and args[1].is_Symbol
    return False


def propagate_copies(program: Program) -> Program:
    """Substitute ``x = y``, ``x = -y``, ``x = number`` into every later use and drop them."""
    sub: dict = {}
    out = []
    for t, e in program.assignments:
        e = _subst(e, sub)
        if _is_copy(e):
            sub[t] = e
        else:
            out.append((t, e))
    outputs = program.outputs
    if sub:
        outputs = [(n, [_subst(e, sub) for e in es]) for n, es in outputs]
    return replace(program, assignments=out, outputs=outputs)


# --------------------------------------------------------------------------------------------------
# common subexpressions
# --------------------------------------------------------------------------------------------------
def _fresh_namer(taken: set[str], prefix: str = "t"):
    i = 0

    def fresh() -> se.Symbol:
        nonlocal i
        while True:
            name = f"{prefix}{i}"
            i += 1
            if name not in taken:
                taken.add(name)
                return se.Symbol(name)

    return fresh


def _taken_names(program: Program) -> set[str]:
    names = {t.name for t, _ in program.assignments}
    for _, syms in program.inputs:
        names.update(s.name for s in syms)
    return names


def common_subexpressions(program: Program) -> Program:
    """Global CSE of all right-hand sides and outputs; temporaries placed before their first user."""
    n_assign = len(program.assignments)
    exprs = [e for _, e in program.assignments]
    for _, es in program.outputs:
        exprs.extend(es)
    if not exprs:
        return program
    reps, reduced = se.cse(exprs)
    if not reps:
        return program
    fresh = _fresh_namer(_taken_names(program), "t")
    # the free symbols of cse's results, in cse's names: for the renaming and the scheduling below
    rep_free = [_free(e) for _, e in reps]
    reduced_free = [_free(e) for e in reduced]
    # rename cse's x0, x1, ... to names that cannot clash with staged symbols
    ren = {}
    renamed = []
    for (s, e), free in zip(reps, rep_free):
        e = _subst(e, ren, free)
        new = fresh()
        ren[s] = new
        renamed.append((new, e))
    reduced = [_subst(e, ren, free) for e, free in zip(reduced, reduced_free)]

    # position of every staged assignment; outputs sit at n_assign
    temp_index = {s: i for i, (s, _) in enumerate(reps)}   # cse's symbol -> its temporary
    first_use = [n_assign] * len(renamed)  # position (in the staged program) of the first user
    for pos, free in enumerate(reduced_free):
        p = min(pos, n_assign)
        for s in free:
            i = temp_index.get(s)
            if i is not None and p < first_use[i]:
                first_use[i] = p
    # a temporary used by a later temporary must come no later than that one's users
    for j in reversed(range(len(renamed))):
        for s in rep_free[j]:
            i = temp_index.get(s)
            if i is not None and first_use[j] < first_use[i]:
                first_use[i] = first_use[j]
    buckets: dict[int, list[int]] = {}
    for i, p in enumerate(first_use):
        buckets.setdefault(p, []).append(i)   # ascending i = cse's topological order
    assigns = []
    for pos in range(n_assign + 1):
        for i in buckets.get(pos, ()):
            assigns.append(renamed[i])
        if pos < n_assign:
            assigns.append((program.assignments[pos][0], reduced[pos]))
    outputs = []
    k = n_assign
    for name, es in program.outputs:
        outputs.append((name, reduced[k:k + len(es)]))
        k += len(es)
    return replace(program, assignments=assigns, outputs=outputs)


# --------------------------------------------------------------------------------------------------
# powers
# --------------------------------------------------------------------------------------------------
class _PowerLowering:
    def __init__(self, program: Program) -> None:
        self.fresh = _fresh_namer(_taken_names(program), "p")
        self.new: list[tuple[se.Symbol, se.Basic]] = []
        self.memo: dict = {}

    def temp(self, e: se.Basic) -> se.Basic:
        if e.is_Symbol or e.is_Number:
            return e
        key = ("t", e)
        if key not in self.memo:
            s = self.fresh()
            self.new.append((s, e))
            self.memo[key] = s
        return self.memo[key]

    def int_power(self, b: se.Basic, n: int) -> se.Basic:
        """b**n for n >= 1 by repeated squaring over named temporaries."""
        if n == 1:
            return b
        if n == 2:
            return b**2
        b = self.temp(b)
        sq = self.temp(b**2)
        h = self.int_power(sq, n // 2)
        return h if n % 2 == 0 else h * b

    def power(self, b: se.Basic, p: se.Basic) -> se.Basic:
        if p.is_Integer:
            n = int(p)
            if n in (-1, 1, 2, 0):
                return b**p
            if n > 0:
                return self.int_power(b, n)
            return 1 / self.temp(self.int_power(b, -n))
        if p.is_Rational and (2 * p).is_Integer:
            k = int(2 * p)
            if k == 1:
                return se.sqrt(b)
            s = self.temp(se.sqrt(b))
            return self.power(s, se.Integer(k))
        return b**p

    def rewrite(self, e: se.Basic) -> se.Basic:
        if e.is_Symbol or e.is_Number:
            return e
        hit = self.memo.get(e)
        if hit is not None:
            return hit
        args = e.args
        new_args = [self.rewrite(a) for a in args]
        if e.is_Pow:
            out = self.power(new_args[0], new_args[1])
        elif any(a is not b and a != b for a, b in zip(new_args, args)):
            out = e.xreplace({a: b for a, b in zip(args, new_args) if a != b})
        else:
            out = e
        self.memo[e] = out
        return out


def _needs_lowering(e: se.Basic) -> bool:
    for p in e.atoms(se.Pow):
        x = p.args[1]
        if not (x.is_Integer and int(x) in (-1, 2)) and x != se.Rational(1, 2):
            return True
    return False


def lower_powers(program: Program) -> Program:
    """Replace powers that C would compute with ``pow`` by multiplications, ``sqrt`` and divisions."""
    low = _PowerLowering(program)
    assigns = []
    for t, e in program.assignments:
        if _needs_lowering(e):
            e = low.rewrite(e)
            assigns.extend(low.new)
            low.new = []
        assigns.append((t, e))
    tail = []
    outputs = []
    for name, es in program.outputs:
        new_es = []
        for e in es:
            if _needs_lowering(e):
                e = low.rewrite(e)
                tail.extend(low.new)
                low.new = []
            new_es.append(e)
        outputs.append((name, new_es))
    return replace(program, assignments=assigns + tail, outputs=outputs)


# --------------------------------------------------------------------------------------------------
# counting
# --------------------------------------------------------------------------------------------------
_ONE, _MINUS_ONE, _TWO = se.Integer(1), se.Integer(-1), se.Integer(2)
_HALF, _MINUS_HALF = se.Rational(1, 2), se.Rational(-1, 2)


def _count(e: se.Basic, c: Counter) -> None:
    if e.is_Symbol or e.is_Number:
        return
    if e.is_Add:
        args = e.args
        c["add"] += len(args) - 1
        for a in args:
            _count(a, c)
        return
    if e.is_Mul:
        num = den = 0
        for f in e.args:
            if f.is_Number:
                if f != _ONE and f != _MINUS_ONE:
                    num += 1
                continue
            if f.is_Pow:
                b, x = f.args
                if x.is_Number and x < 0:
                    den += 1
                    x = -x
                    _count(b if x == _ONE else b ** x, c)
                    continue
            num += 1
            _count(f, c)
        c["mul"] += max(num - 1, 0) + max(den - 1, 0)
        c["div"] += 1 if den else 0
        return
    if e.is_Pow:
        b, x = e.args
        if x == _MINUS_ONE:
            c["div"] += 1
        elif x == _TWO:
            c["mul"] += 1
        elif x == _HALF:
            c["sqrt"] += 1
        elif x == _MINUS_HALF:
            c["sqrt"] += 1
            c["div"] += 1
        elif x.is_Integer and int(x) > 2:
            c["mul"] += int(x) - 1
        elif x.is_Integer and int(x) < -1:
            c["mul"] += -int(x) - 1
            c["div"] += 1
        else:
            c["other"] += 1
        _count(b, c)
        return
    if e.is_Function:
        name = type(e).__name__
        c["trig" if name in ("sin", "cos") else "other"] += 1
        for a in e.args:
            _count(a, c)
        return
    c["other"] += 1  # pragma: no cover - nothing else is produced by the algorithms


def count_ops(program: Program) -> dict[str, int]:
    """Operation counts of the program (rules in the module docstring); ``total`` sums them."""
    c: Counter = Counter()
    for _, e in program.assignments:
        _count(e, c)
    for _, es in program.outputs:
        for e in es:
            _count(e, c)
    out = {k: int(c.get(k, 0)) for k in OP_KINDS}
    out["total"] = sum(out.values())
    return out


# --------------------------------------------------------------------------------------------------
# frame families
# --------------------------------------------------------------------------------------------------
#: code growth a frame family may pay for computing, per frame, only what that frame needs (see
#: :func:`split_cases`): the emitted prefix and cases hold at most this many times the operations of the
#: family's program (where every quantity appears once)
CASE_GROWTH = 2.0
#: ... and a copy must be worth it: the fraction of the average call's operations it saves must be at
#: least this many times the fraction of code it adds (see :func:`split_cases`)
CASE_WORTH = 0.25


@dataclass
class CaseSplit:
    """A frame family's optimised program cut into a shared prefix and one block per case (frame).

    ``prefix``: assignments computed before the ``switch`` (in program order); ``cases[c]``: (the other
    assignments case ``c`` needs, outputs of case ``c`` with the case suffix removed from their names);
    ``prefix_ops`` / ``case_ops[c]``: operation counts of those parts (a call for frame ``c`` costs
    ``prefix_ops + case_ops[c]``); ``shared``: the largest number of frames that need an assignment which
    is still copied into those frames' cases instead of the prefix.
    """

    prefix: list[tuple[se.Symbol, se.Basic]]
    cases: list[tuple[list[tuple[se.Symbol, se.Basic]], list[tuple[str, list[se.Basic]]]]]
    prefix_ops: dict[str, int]
    case_ops: list[dict[str, int]]
    shared: int = 1


def split_cases(program: Program, n_cases: int, growth: float = CASE_GROWTH,
                worth: float = CASE_WORTH) -> CaseSplit:
    """Partition a family program (outputs named ``<name>@<case>``) into a prefix and per-case blocks.

    Each assignment is needed (transitively) by a set of cases.  An assignment needed by every case is in
    the prefix; one needed by ``k`` cases is either in the prefix, where every call pays for it, or
    copied into each of the ``k`` cases, where only the calls that need it do: on a tree, the kinematics
    of a body are needed by the frames of its subtree only, so a shared prefix would compute every body
    of the robot for every frame.  Copies cost code: ``k - 1`` extra copies of ``w`` operations save
    ``w (n - k)`` operations summed over the ``n`` frames' calls.  Assignments are copied level by level
    in order of increasing ``k`` (the best trade first) while (a) the emitted code stays within ``growth``
    times the program's operations and (b) the level is worth it: the fraction of the average call it
    saves, ``(n - k) / n`` of its operations over the average call's, is at least ``worth`` times the
    fraction of code it adds, ``(k - 1)`` of its operations over the code's (on a long chain the bodies
    near the base, needed by almost every frame, stay shared; so does the mass matrix of a generalised
    Jacobian).  An assignment's dependencies are needed by at least the same cases, so they are in the
    prefix or in the same cases before it, and each part keeps the program's topological order.
    """
    from soadyn.codegen.derive import CASE_SEP

    need: dict = {}
    case_outputs: list[list[tuple[str, list[se.Basic]]]] = [[] for _ in range(n_cases)]
    for name, es in program.outputs:
        base, _, case = name.rpartition(CASE_SEP)
        c = int(case)
        case_outputs[c].append((base, es))
        bit = 1 << c
        for e in es:
            for s in _free(e):
                need[s] = need.get(s, 0) | bit
    masks = []
    for t, e in reversed(program.assignments):
        m = need.get(t, 0)
        masks.append(m)
        if m:
            for s in _free(e):
                need[s] = need.get(s, 0) | m
    masks.reverse()
    counts = [bin(m).count("1") for m in masks]
    total = program.ops["total"] if "total" in program.ops else count_ops(program)["total"]
    # operations by the number of cases needing them, and the operations of all calls (one per case)
    # with everything needed by two or more cases shared
    ops_by_k: dict[int, int] = {}
    calls = total
    for (t, e), k in zip(program.assignments, counts):
        if k > 1:
            ops = count_ops(Program(program.name, [], [(t, e)], []))["total"]
            ops_by_k[k] = ops_by_k.get(k, 0) + ops
            calls += (n_cases - 1) * ops
    shared = 1
    code = total
    for k in sorted(ops_by_k):
        if k >= n_cases:
            break
        w = ops_by_k[k]
        if code + (k - 1) * w > growth * total or (n_cases - k) * code < worth * (k - 1) * calls:
            break
        code += (k - 1) * w
        calls -= (n_cases - k) * w
        shared = k
    prefix: list = []
    per_case: list[list] = [[] for _ in range(n_cases)]
    for (t, e), m, k in zip(program.assignments, masks, counts):
        if not m:
            continue
        if k > shared:
            prefix.append((t, e))
            continue
        while m:
            low = m & -m
            per_case[low.bit_length() - 1].append((t, e))
            m ^= low
    cases = list(zip(per_case, case_outputs))
    prefix_ops = count_ops(Program(program.name, [], prefix, []))
    case_ops = [count_ops(Program(program.name, [], a, o)) for a, o in cases]
    return CaseSplit(prefix, cases, prefix_ops, case_ops, shared)


# --------------------------------------------------------------------------------------------------
def optimise(program: Program, cse: bool = True) -> Program:
    """All passes in order (see the module docstring); the result carries its operation counts."""
    p = eliminate_dead_code(program)
    p = exact_integers(p)
    p = propagate_copies(p)
    p = eliminate_dead_code(p)
    if cse:
        p = common_subexpressions(p)
        p = propagate_copies(p)
        p = eliminate_dead_code(p)
    p = lower_powers(p)
    p.ops = count_ops(p)
    for product in p.products:
        for kind, n in product.ops().items():
            p.ops[kind] += n
        p.ops["total"] += sum(product.ops().values())
    return p
