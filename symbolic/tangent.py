"""Forward-mode differentiation of a staged program, and the tangent space of the configuration.

A :class:`~soadyn.symbolic.scalar.Symbolic` run records a straight-line program ``t_i = e_i(inputs,
t_0..t_{i-1})``.  Its directional derivative along direction ``d`` follows the chain rule assignment by
assignment (forward mode)::

    dt_i/dx_d = sum over symbols s of e_i:  (de_i/ds) * ds/dx_d

Each nonzero derivative is staged as a new assignment appended to the same program, so the derivative
program is again straight-line and goes through the same optimise/emit/build path.  Tangents are sparse
(one dict ``direction -> expression`` per symbol): a derivative that is exactly zero is never created, so
the tree's sparsity survives (a joint angle does not reach the bodies inboard of it, a position
perturbation of the free base reaches nothing that is written in body coordinates).  Only the
assignments that the differentiated outputs need are visited, and ``held`` symbols (quantities to keep
fixed, e.g. the accelerations fed into inverse dynamics) have zero tangent.

**Tangent of the configuration** (docs/conventions.md, "Derivatives"): a perturbation ``delta`` of size
nv, ordered like v, acts as ``q (+) delta``:

* base attitude ``R exp([delta_w]~)``: ``dR/d delta_w_i = R e_i~``;
* base position ``p + R delta_v``: ``dp/d delta_v_i = R e_i``;
* joints ``q_j + delta_j``.

For the attitude the staged matrix ``R0`` (the quaternion's rotation, with the norm divided out) gets its
tangent ``R0 e_i~`` directly (a sign and a permutation of its entries, no operations), so the quaternion's
normalisation never enters a derivative.  Any other use of the quaternion is seeded with the exact
quaternion tangent ``1/2 quat (x) [e_i; 0]`` (Hamilton product), whose rotation is again ``R e_i~`` for
a quaternion of any norm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import symengine as se

from soadyn.symbolic.scalar import Assignment, Symbolic
from soadyn.symbolic.spatial import quaternion_to_matrix

Tangent = dict[int, se.Basic]


@dataclass
class Directions:
    """Tangent seeds: ``seeds[symbol]`` = {direction: derivative of that input}; ``overrides`` the same
    for staged symbols whose tangent is known in closed form (the base attitude)."""

    n: int
    seeds: dict[se.Basic, Tangent]
    overrides: dict[se.Basic, Tangent]


def _is_atom(e: se.Basic) -> bool:
    return e.is_Number or e.is_Symbol or (e.is_Mul and len(e.args) == 2 and e.args[0] == -1
                                          and e.args[1].is_Symbol)


def configuration_directions(robot: Any, ctx: Symbolic, q: np.ndarray, offset: int = 0,
                             n_total: int | None = None) -> Directions:
    """Seeds of the configuration tangent ``q (+) delta`` (module docstring); delta_i is direction
    ``offset + i``.  Call after the algorithm ran on ``ctx`` (the staged base attitude is looked up)."""
    seeds: dict[se.Basic, Tangent] = {}
    overrides: dict[se.Basic, Tangent] = {}
    nv = robot.nv
    if getattr(robot, "is_coupled", False):    # mimic couplings: the reduced joint coordinates
        for r in range(nv - robot.base_nv):
            seeds[q[robot.base_nq + r]] = {offset + robot.base_nv + r: se.Integer(1)}
    else:
        for k in range(1, robot.n_bodies):
            qi = robot.q_index(k)
            vi = robot.v_index(k).start
            seeds[q[qi]] = {offset + vi: se.Integer(1)}
    if robot.is_free:
        quat = q[3:7]
        Rexpr = quaternion_to_matrix(quat)
        by_expr = {se.sympify(Rexpr[r, c]): (r, c) for r in range(3) for c in range(3)}
        Rsym: dict[tuple[int, int], se.Basic] = {}
        for a in ctx.program:
            rc = by_expr.get(a.expr)
            if rc is not None and rc not in Rsym:
                Rsym[rc] = a.target
        R = np.empty((3, 3), dtype=object)
        for r in range(3):
            for c in range(3):
                R[r, c] = Rsym.get((r, c), se.sympify(Rexpr[r, c]))
        if len(Rsym) == 9:
            for (r, c), sym in Rsym.items():
                # (R e_i~)[r, c] = sum_k R[r, k] (e_i~)[k, c]: one +-1 entry per nonzero column
                tan: Tangent = {}
                for i in range(3):
                    col = _skew_column(i, c)
                    if col is not None:
                        k, sign = col
                        tan[offset + i] = sign * R[r, k]
                overrides[sym] = tan
        for j in range(3):                       # position: dp/d delta_v_i = R e_i
            seeds[q[j]] = {offset + 3 + i: R[j, i] for i in range(3)}
        x, y, z, w = (se.sympify(s) for s in quat)
        half = se.Rational(1, 2)
        for i in range(3):                        # quaternion: 1/2 quat (x) [e_i; 0]
            e = [0, 0, 0]
            e[i] = 1
            # vector part w e + qv x e, scalar part -qv . e
            qv = (x, y, z)
            cr = (qv[1] * e[2] - qv[2] * e[1], qv[2] * e[0] - qv[0] * e[2], qv[0] * e[1] - qv[1] * e[0])
            d = [half * (w * e[m] + cr[m]) for m in range(3)] + [-half * qv[i]]
            for m, sym in enumerate((x, y, z, w)):
                if d[m] != 0:
                    seeds.setdefault(sym, {})[offset + i] = d[m]
    n = offset + nv if n_total is None else n_total
    return Directions(n, seeds, overrides)


def _skew_column(i: int, c: int) -> tuple[int, int] | None:
    """(k, sign) with (e_i~)[k, c] = sign, or None if column c of e_i~ is zero."""
    if c == i:
        return None
    j, k = (i + 1) % 3, (i + 2) % 3
    # e_i~ has [k, j] = +1 and [j, k] = -1
    if c == j:
        return k, 1
    return j, -1


def vector_directions(x: np.ndarray, offset: int) -> dict[se.Basic, Tangent]:
    """Seeds for an input vector: ``dx_i/dx_i = 1`` as direction ``offset + i``."""
    return {s: {offset + i: se.Integer(1)} for i, s in enumerate(np.ravel(x))}


class _Differentiator:
    def __init__(self, ctx: Symbolic, seeds: dict[se.Basic, Tangent], overrides: dict[se.Basic, Tangent],
                 held: set[se.Basic], name: str) -> None:
        self.ctx = ctx
        self.tan: dict[se.Basic, Tangent] = {s: t for s, t in seeds.items() if s not in held}
        self.overrides = overrides
        self.held = held
        self.name = ctx.fresh(name)
        self.count = 0

    def _new(self, e: se.Basic) -> se.Basic:
        if _is_atom(e):
            return e
        memo = getattr(self.ctx, "_memo", None)      # a hash-consing context shares equal derivatives
        if memo is not None and e in memo:
            return memo[e]
        s = se.Symbol(f"{self.name}_{self.count}")
        self.count += 1
        self.ctx.program.append(Assignment(s, e))
        if memo is not None:
            memo[e] = s
        return s

    def derivative(self, e: se.Basic) -> Tangent:
        """Tangent of an expression whose symbols already have their tangents."""
        if e.is_Number:
            return {}
        if e.is_Symbol:
            return self.tan.get(e, {})
        active = [s for s in e.free_symbols if self.tan.get(s)]
        if not active:
            return {}
        parts = []
        dirs: set[int] = set()
        for s in active:
            ts = self.tan[s]
            p = e.diff(s)
            if p == 0:
                continue
            if len(ts) > 1:
                p = self._new(p)
            parts.append((p, ts))
            dirs.update(ts)
        out: Tangent = {}
        for d in sorted(dirs):
            terms = [p * ts[d] for p, ts in parts if d in ts]
            val = se.Add(*terms) if len(terms) > 1 else terms[0]
            if val != 0:
                out[d] = self._new(val)
        return out

    def run(self, outputs: list[se.Basic]) -> None:
        """Tangents of every staged symbol the outputs need (not crossing held symbols)."""
        index = {a.target: i for i, a in enumerate(self.ctx.program)}
        need: set[int] = set()
        stack = [s for e in outputs for s in (e.free_symbols if not e.is_Number else ())]
        while stack:
            s = stack.pop()
            i = index.get(s)
            if i is None or i in need or s in self.held:
                continue
            need.add(i)
            if s in self.overrides:
                continue
            stack.extend(self.ctx.program[i].expr.free_symbols)
        program = list(self.ctx.program)
        for i in sorted(need):
            a = program[i]
            if a.target in self.overrides:
                self.tan[a.target] = self.overrides[a.target]
            else:
                t = self.derivative(a.expr)
                if t:
                    self.tan[a.target] = t


def jacobians(ctx: Symbolic, outputs: list[np.ndarray], seeds: dict[se.Basic, Tangent], n_dir: int,
              overrides: dict[se.Basic, Tangent] | None = None, held: set[se.Basic] | None = None,
              name: str = "d") -> list[np.ndarray]:
    """Forward-mode derivatives of ``outputs`` (arrays of expressions staged on ``ctx``) along ``n_dir``
    directions: returns arrays of shape ``out.shape + (n_dir,)``, exact zeros where a derivative vanishes
    identically.  New assignments are appended to ``ctx.program`` under names ``<name>_<i>``."""
    diff = _Differentiator(ctx, seeds, overrides or {}, held or set(), name)
    flat = [[se.sympify(e) for e in np.ravel(out)] for out in outputs]
    diff.run([e for f in flat for e in f])
    result = []
    for out, es in zip(outputs, flat):
        J = np.empty((len(es), n_dir), dtype=object)
        J.fill(se.Integer(0))
        for r, e in enumerate(es):
            for d, val in diff.derivative(e).items():
                J[r, d] = val
        result.append(J.reshape(np.shape(out) + (n_dir,)))
    return result


# --------------------------------------------------------------------------------------------------
# float run of a staged program
# --------------------------------------------------------------------------------------------------
def _python_text(e: se.Basic) -> str:
    consts = e.atoms(se.RealDouble)
    if consts:
        sub = {}
        for c in consts:
            x = float(c)
            s = se.Symbol(f"({x!r})" if x >= 0 else f"({-x!r})")
            sub[c] = s if x >= 0 else -s
        e = e.xreplace(sub)
    return str(e)


def python_function(inputs: list[tuple[str, list[se.Symbol]]], program: list[Assignment],
                    outputs: list[np.ndarray]) -> Any:
    """A Python function ``f(*input_arrays) -> list of float arrays`` evaluating a staged program
    assignment by assignment in double precision (the float run of a generated function: same program,
    no optimisation, no C)."""
    lines = ["def _f(" + ", ".join(f"_in{i}" for i in range(len(inputs))) + "):"]
    for i, (_, syms) in enumerate(inputs):
        for j, s in enumerate(syms):
            lines.append(f"    {s.name} = _in{i}[{j}]")
    for a in program:
        lines.append(f"    {a.target.name} = {_python_text(se.sympify(a.expr))}")
    outs = []
    for k, out in enumerate(outputs):
        flat = [se.sympify(e) for e in np.ravel(out)]
        lines.append(f"    _o{k} = _np.array([{', '.join(_python_text(e) for e in flat)}], dtype=float)"
                     f".reshape({tuple(np.shape(out))!r})")
        outs.append(f"_o{k}")
    lines.append(f"    return [{', '.join(outs)}]")
    import math

    env: dict[str, Any] = {"_np": np, "sin": math.sin, "cos": math.cos, "sqrt": math.sqrt}
    exec(compile("\n".join(lines), "<staged program>", "exec"), env)  # noqa: S102 - our own generated text
    return env["_f"]
