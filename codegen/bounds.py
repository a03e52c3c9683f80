"""Interval bounds of a typed statement list (:mod:`soadyn.codegen.cprogram`): which functions of the
flight library (:mod:`soadyn.codegen.export`) cannot produce a non-finite output entry once their inputs
passed the input check, so that their result check can go.

Each input entry has an interval: a joint coordinate ``[-JOINT_Q_MAX, JOINT_Q_MAX]``, a quaternion
component ``[-QUAT_NORM_MAX, QUAT_NORM_MAX]`` (and the sum of the four components' squares, wherever a
statement forms it, ``[QUAT_NORM_MIN^2, QUAT_NORM_MAX^2]``), an entry of another input (velocities,
accelerations, torques, wrenches) ``[-INPUT_MAX, INPUT_MAX]`` (``Limits.input_max``; infinite: finite
only), the base position only finite: ``[-MAX, MAX]`` with MAX the largest finite number of the
precision.  The statements are evaluated in order in interval arithmetic, every operation's
result widened outward by a few units of roundoff of the precision (rounding to nearest is monotone, so the
rounded result of an exact value in ``[lo, hi]`` lies in the widened interval).  The pass refuses (returns
None) as soon as a bound could reach the overflow threshold, a divisor's interval comes near 0 (or below
the smallest normal number), a square root's argument may be negative, a sine's or cosine's argument
exceeds the kernels' exact reduction range, or anything it does not model appears (a call, a product
loop, a stage, an unknown function, a power other than a square -- the flight library's ``pow`` computes
squares only --, a construct it cannot parse).  One exception keeps a merely finite
input usable: ``x + y`` with ``|x| <= MAX`` and ``|y| < ulp(MAX) / 2`` is finite (rounding to nearest cannot
overflow), ``[-MAX, MAX]`` again (a frame position: the base position plus a bounded offset).

A function is *proved finite* when every path through its statements (a frame family: the shared prefix
then each case) stores a finite bound into every output entry.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Stmt

#: per precision: (largest finite number, unit roundoff, smallest divisor magnitude accepted, half an ulp
#: of the largest finite number: a bounded addend below it cannot make a finite sum overflow)
PRECISION = {"double": (1.7976931348623157e308, 2.0 ** -53, 1e-290, 2.0 ** 969),
             "float": (3.4028234663852886e38, 2.0 ** -24, 1e-30, 2.0 ** 102)}
#: the sin/cos kernels reduce exactly below this argument magnitude (header of the flight library)
TRIG_ARG_MAX = 823549.0
#: a bound must stay below MAX / MARGIN to count as finite
MARGIN = 1e6


class Refused(Exception):
    """The pass cannot prove a bound (the message says where)."""


@dataclass(frozen=True)
class Bound:
    """An interval ``[lo, hi]``; ``top``: only known finite (``[-MAX, MAX]``); ``quat``: the quaternion
    components whose squares this value is exactly the sum of (None: not such a sum)."""

    lo: float
    hi: float
    top: bool = False
    quat: frozenset[int] | None = None

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))


@dataclass(frozen=True)
class Limits:
    """The input limits the input check guarantees (the header's values) and the precision."""

    joint_q_max: float
    quat_norm_min: float
    quat_norm_max: float
    precision: str = "double"
    is_free: bool = False
    first_joint: int = 0
    #: the limit of every input entry but q's (inf: finite only)
    input_max: float = math.inf


class _Eval:
    def __init__(self, limits: Limits, inputs: list[Any], floors: dict[str, float] | None = None) -> None:
        self.lim = limits
        self.inputs = {a.name for a in inputs}
        self.max, self.u, self.tiny, self.half_ulp = PRECISION[limits.precision]
        self.grow = 1.0 + 4.0 * self.u + 4.0 * 2.0 ** -53
        self.env: dict[str, Bound] = {}
        #: statement ``X = 1/Y`` -> a lower bound of ``Y`` taken as given (:func:`divisor_intervals`)
        self.floors = floors or {}
        #: X -> (Y's interval before its floor, the floor)
        self.divisors: dict[str, tuple[float, float, float]] = {}

    # -- intervals ------------------------------------------------------------------------------------
    def make(self, lo: float, hi: float, quat: frozenset[int] | None = None) -> Bound:
        """``[lo, hi]`` widened by the roundoff of one operation; refused when it may overflow."""
        lo = lo * self.grow if lo < 0 else lo / self.grow
        hi = hi * self.grow if hi > 0 else hi / self.grow
        # below the normal range a rounding error is absolute, not relative: a lower magnitude there may
        # round to 0, so such an interval includes 0 (what a divisor's check then refuses)
        if 0.0 < lo < self.tiny:
            lo = 0.0
        if -self.tiny < hi < 0.0:
            hi = 0.0
        if not (math.isfinite(lo) and math.isfinite(hi)) or max(-lo, hi) > self.max / MARGIN:
            raise Refused("a bound may overflow")
        return Bound(lo, hi, quat=quat)

    def top(self) -> Bound:
        return Bound(-self.max, self.max, top=True)

    def const(self, x: float) -> Bound:
        return self.make(x, x)

    def add(self, a: Bound, b: Bound) -> Bound:
        if a.top or b.top:
            small = b if a.top else a
            if small.top or small.mag >= self.half_ulp / MARGIN:
                raise Refused("a sum of merely finite values may overflow")
            return self.top()
        disjoint = a.quat is not None and b.quat is not None and not a.quat & b.quat
        quat = a.quat | b.quat if disjoint else None
        if quat == frozenset(range(3, 7)):
            return self.make(self.lim.quat_norm_min ** 2, self.lim.quat_norm_max ** 2, quat)
        return self.make(a.lo + b.lo, a.hi + b.hi, quat)

    def neg(self, a: Bound) -> Bound:
        return self.top() if a.top else Bound(-a.hi, -a.lo)

    def mul(self, a: Bound, b: Bound) -> Bound:
        if a.top or b.top:
            raise Refused("a product of a merely finite value")
        p = (a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi)
        return self.make(min(p), max(p))

    def div(self, a: Bound, b: Bound) -> Bound:
        if b.top or (b.lo <= self.tiny and b.hi >= -self.tiny):
            raise Refused("a divisor's interval contains 0")
        return self.mul(a, Bound(1.0 / b.hi, 1.0 / b.lo))

    def square(self, a: Bound) -> Bound:
        if a.top:
            raise Refused("a square of a merely finite value")
        lo = 0.0 if a.lo <= 0.0 <= a.hi else min(a.lo * a.lo, a.hi * a.hi)
        return self.make(lo, a.mag * a.mag)

    # -- expressions ----------------------------------------------------------------------------------
    def expr(self, text: str) -> Bound:
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise Refused(f"cannot parse {text!r}") from e
        return self.node(tree)

    def node(self, n: ast.AST) -> Bound:
        if isinstance(n, ast.Constant) and type(n.value) in (int, float):
            return self.const(float(n.value))
        if isinstance(n, ast.Name):
            if n.id not in self.env:
                raise Refused(f"unknown name {n.id}")
            return self.env[n.id]
        if (isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
                and isinstance(n.slice, ast.Constant) and type(n.slice.value) is int):
            return self.element(n.value.id, n.slice.value)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            x = self.node(n.operand)
            return self.neg(x) if isinstance(n.op, ast.USub) else x
        if isinstance(n, ast.BinOp):
            if isinstance(n.op, ast.Div) and all(isinstance(x, ast.Constant) and isinstance(x.value, int)
                                                 for x in (n.left, n.right)):
                raise Refused("an integer division")
            a, b = self.node(n.left), self.node(n.right)
            if isinstance(n.op, ast.Add):
                return self.add(a, b)
            if isinstance(n.op, ast.Sub):
                return self.add(a, self.neg(b))
            if isinstance(n.op, ast.Mult):
                return self.mul(a, b)
            if isinstance(n.op, ast.Div):
                return self.div(a, b)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and not n.keywords:
            f, args = n.func.id, n.args
            if f == "pow" and len(args) == 2:
                e = args[1]
                negative = isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub)
                if negative and isinstance(e.operand, ast.Constant):
                    k = -e.operand.value
                elif isinstance(e, ast.Constant):
                    k = e.value
                else:
                    raise Refused("pow with a computed exponent")
                if k != 2:
                    # the flight library's pow computes squares only (any other power is NaN there)
                    raise Refused("pow with an exponent other than 2")
                base = self.node(args[0])
                r = self.square(base)
                if base.quat is not None and len(base.quat) == 1 and base.lo == -base.hi:
                    r = Bound(r.lo, r.hi, quat=base.quat)    # a quaternion component's square
                return r
            if f == "sqrt" and len(args) == 1:
                a = self.node(args[0])
                if a.top or a.lo < 0.0:
                    raise Refused("a square root of a possibly negative value")
                return self.make(math.sqrt(a.lo), math.sqrt(a.hi))
            if f in ("sin", "cos", "soadyn_sin", "soadyn_cos") and len(args) == 1:
                return self.trig(self.node(args[0]))
        raise Refused(f"cannot bound {ast.unparse(n)!r}")

    def trig(self, a: Bound) -> Bound:
        if a.top or a.mag > TRIG_ARG_MAX:
            raise Refused("a sine or cosine beyond the kernels' exact reduction")
        return self.make(-1.0, 1.0)

    def element(self, array: str, i: int) -> Bound:
        lim = self.lim
        if array != "q":
            if array in self.inputs:
                return self.top() if math.isinf(lim.input_max) else Bound(-lim.input_max, lim.input_max)
            raise Refused(f"an element of {array}")
        if i >= lim.first_joint:
            return Bound(-lim.joint_q_max, lim.joint_q_max)
        if lim.is_free and 3 <= i < 7:
            return Bound(-lim.quat_norm_max, lim.quat_norm_max, quat=frozenset({i}))
        return self.top()                       # the base position: finite only

    # -- statements -----------------------------------------------------------------------------------
    def block(self, body: list[Stmt], written: dict[str, set[int]], sizes: dict[str, int]) -> None:
        for s in body:
            k = s.kind
            if k in (cp.COMMENT, cp.VOID):
                continue
            if k == cp.LOAD:
                self.env[s.target] = self.element(s.array, s.index)
            elif k == cp.TRIG:
                self.env[s.target] = self.trig(self.expr(s.arg))
            elif k == cp.ARITH and s.target in self.floors:
                self.env[s.target] = self.floored(s.target, s.expr.text)
            elif k == cp.ARITH:
                self.env[s.target] = self.expr(s.expr.text)
            elif k in (cp.STORE, cp.ZEROS):
                if s.target not in sizes:
                    raise Refused(f"a store into {s.target}")
                if k == cp.ZEROS:
                    written[s.target].update(range(s.index, s.end))
                    continue
                self.expr(s.expr.text)         # refused unless finite (top: finite too)
                written[s.target].add(s.index)
            elif k == cp.SWITCH:
                env = dict(self.env)
                for c in s.cases:
                    self.env = dict(env)
                    case_written = {n: set(w) for n, w in written.items()}
                    self.block(c.body, case_written, sizes)
                    _covered(case_written, sizes)
                for n in written:               # every case covered every entry (checked above)
                    written[n] = set(range(sizes[n]))
                self.env = env
            else:
                raise Refused(f"a {k} statement")

    def floored(self, target: str, text: str) -> Bound:
        """``target = 1/Y`` with ``Y >= floors[target]`` taken as given (Y a name: narrowed for its later
        uses too)."""
        try:
            tree = ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise Refused(f"cannot parse {text!r}") from e
        if not (isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Div)
                and isinstance(tree.left, ast.Constant) and tree.left.value == 1):
            raise Refused(f"{target}: a floor for a statement that is not 1/divisor")
        b, floor = self.node(tree.right), self.floors[target]
        self.divisors[target] = (b.lo, b.hi, floor)
        if b.top or b.hi < floor:
            raise Refused(f"{target}: its divisor's interval is below the floor")
        narrowed = Bound(max(b.lo, floor), b.hi)
        if isinstance(tree.right, ast.Name):
            self.env[tree.right.id] = narrowed
        return self.div(self.const(1.0), narrowed)


def _covered(written: dict[str, set[int]], sizes: dict[str, int]) -> None:
    for n, size in sizes.items():
        if written[n] != set(range(size)):
            raise Refused(f"output {n}: {size - len(written[n] & set(range(size)))} entries not stored")


def _unproved(ev: _Eval, body: list[Stmt], outputs: list[Any]) -> str | None:
    """Run the pass ``ev`` over ``body``: None when every entry of ``outputs`` is stored and bounded,
    else the first reason it is not."""
    sizes = {a.name: a.size for a in outputs}
    written: dict[str, set[int]] = {n: set() for n in sizes}
    try:
        ev.block(body, written, sizes)
        _covered(written, sizes)
    except Refused as e:
        return str(e)
    return None


def prove_finite(body: list[Stmt], inputs: list[Any], outputs: list[Any], limits: Limits) -> str | None:
    """None when every output entry of ``body`` is proved finite for every input within ``limits`` (see
    the module docstring), else the reason it is not (the first thing the pass could not bound)."""
    return _unproved(_Eval(limits, inputs), body, outputs)


def bounds_of(body: list[Stmt], inputs: list[Any],
              limits: Limits) -> dict[tuple[str, int], tuple[float, float]]:
    """The interval of every stored output entry of a straight-line ``body`` (for tests: the outputs of a
    proved function lie inside); raises :class:`Refused` where :func:`prove_finite` would refuse."""
    ev = _Eval(limits, inputs)
    out: dict[tuple[str, int], tuple[float, float]] = {}
    for s in body:
        if s.kind == cp.STORE:
            b = ev.expr(s.expr.text)
            out[(s.target, s.index)] = (b.lo, b.hi)
        elif s.kind == cp.ZEROS:
            out.update({(s.target, i): (0.0, 0.0) for i in range(s.index, s.end)})
        else:
            ev.block([s], {}, {})
    return out


def divisor_intervals(body: list[Stmt], inputs: list[Any], outputs: list[Any], limits: Limits,
                      floors: dict[str, float]) -> tuple[dict[str, tuple[float, float, float]], str | None]:
    """The pass of :func:`prove_finite` with a lower bound taken as given for the divisor ``Y`` of each
    statement ``X = 1/Y`` named in ``floors`` (X -> bound): what a run-time guard ``Y >= bound`` would
    let the pass prove (a study of the articulated-body divisors, ``benchmarks/flight_divisor_bounds.py``;
    the flight export assumes no floor).  Returns each floored divisor's interval as the pass computed it
    (lo, hi, floor), and None when every output is then proved finite, else the reason."""
    ev = _Eval(limits, inputs, floors)
    reason = _unproved(ev, body, outputs)
    return ev.divisors, reason
