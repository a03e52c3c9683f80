"""Printers: symbolic expressions -> :class:`~soadyn.codegen.cprogram.Expr`, and typed statements -> C text.

:class:`ExpressionPrinter` prints one optimised expression with ``symengine.ccode``; floating-point
constants are handed to it as their shortest round-trip ``repr`` (the printer itself would round them to
15 significant digits), so the C constants are bit-identical to the robot model, and libm's ``sin``/``cos``
become the inline :data:`~soadyn.codegen.trig.C_SIN`/:data:`~soadyn.codegen.trig.C_COS`.

A statement printer prints a list of :class:`~soadyn.codegen.cprogram.Stmt` for one target:

* :class:`CPrinter`: C99 ``double``, the committed ``generated/`` sources and the compiled modules (every
  rounding as the program says);
* :class:`FloatPrinter`: C99 ``float`` (flight computers: ``float`` locals and arrays, ``f``-suffixed
  literals, ``sinf``/``cosf``/``sqrtf``/``powf``), the same statements in the same order.

A new target (CasADi's external-function ABI, array code) is one more subclass: the statements, and every
transformation before printing, are shared.
"""

from __future__ import annotations

import re

import symengine as se

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Expr, Stmt
from soadyn.codegen.derive import DerivationError

#: names a generated expression may call
_C_FUNCS = frozenset({"sin", "cos", "sqrt", "pow", "soadyn_sin", "soadyn_cos"})
_INLINE = {"sin": "soadyn_sin", "cos": "soadyn_cos"}
#: a read of a fused sine or cosine (:func:`soadyn.codegen.trig.fuse_trig`: double arrays)
_FUSED_READ = re.compile(r"soadyn_t[sc]\[\d+\]")


def _exact_constants(e: se.Basic) -> se.Basic:
    """Swap floating-point constants for symbols named by their round-trip repr (printed verbatim)."""
    consts = e.atoms(se.RealDouble)
    if not consts:
        return e
    sub = {}
    for c in consts:
        x = float(c)
        if x != x or x in (float("inf"), float("-inf")):
            raise DerivationError(f"non-finite constant {x} in generated code: check the robot's parameters")
        s = se.Symbol(repr(abs(x)))
        sub[c] = -s if x < 0 else s
    return e.xreplace(sub)


class ExpressionPrinter:
    """``symengine.ccode`` with exact constants, the inline sine and cosine, and a check that only known
    names reach the C code."""

    def __init__(self, known: set[str], where: str) -> None:
        self.known = known | _C_FUNCS
        self.where = where

    def __call__(self, e: se.Basic) -> Expr:
        # a finite float prints with a "." or an exponent: without either, ``e`` has none and the walk of
        # :func:`_exact_constants` (which costs more than printing) is skipped
        text = se.ccode(e)
        if cp.has_float_literal(text):
            text = se.ccode(_exact_constants(e))
        expr = Expr(text)
        if "sin(" in text or "cos(" in text:
            expr = expr.calls(_INLINE)
        names = expr.names()
        if not self.known.issuperset(names):
            name = next(n for n in names if n not in self.known)
            _exact_constants(e)      # a non-finite constant (printed as a name) raises its own error
            raise DerivationError(f"{self.where}: generated expression uses unknown name {name!r} "
                                  f"(a singular or non-finite term?): {expr.text[:200]}")
        return expr


class CPrinter:
    """C99 ``double`` statements (the reference printer: the bytes of ``generated/``)."""

    real = "double"
    #: called functions renamed (an identifier followed by ``(``)
    functions: dict[str, str] = {}

    def expr(self, e: Expr) -> str:
        return e.text

    def lines(self, body: list[Stmt], indent: str = "") -> list[str]:
        """The C lines of ``body`` (without the function's own indentation)."""
        out: list[str] = []
        for s in body:
            self._statement(s, indent, out)
        return out

    def _statement(self, s: Stmt, ind: str, out: list[str]) -> None:
        k, real = s.kind, self.real
        if k == cp.LOAD:
            out.append(f"{ind}const {real} {s.target} = {s.array}[{s.index}];")
        elif k in (cp.TRIG, cp.ARITH):
            out.append(f"{ind}const {real} {s.target} = {self.expr(s.expr)};")
        elif k == cp.STORE:
            out.append(f"{ind}{s.target}[{s.index}] = {self.expr(s.expr)};")
        elif k == cp.ZEROS:
            out.append(f"{ind}for (int k = {s.index}; k < {s.end}; ++k) {s.target}[k] = {self.zero};")
        elif k == cp.WORK:
            out.append(f"{ind}w[{s.index}] = {s.target};")
        elif k == cp.SCRATCH:
            out.append(f"{ind}{real} {s.target}[{s.index}]" + (f" = {{{self.zero}}};" if s.zero else ";"))
        elif k in (cp.CALL, cp.PRODUCT):
            out.append(f"{ind}{s.target}({', '.join(s.args)});")
        elif k == cp.VOID:
            out.append(f"{ind}(void){s.target};")
        elif k == cp.COMMENT:
            out.append(f"{ind}/* {s.text} */")
        elif k == cp.BASE:
            # an empty asm makes the pointer opaque: the compiler keeps it in a register instead of
            # folding it back into w (short displacements; soadyn.codegen.stages, windows)
            out += [f"{ind}{real + ' *' if s.zero else ''}{s.target} = {s.array or 'w'} + {s.index};",
                    "#if defined(__GNUC__) || defined(__clang__)",
                    f'{ind}__asm__("" : "+r"({s.target}));',
                    "#endif"]
        elif k == cp.JUMP:
            # a taken jump to the next instruction: the front end starts a new fetch block there
            # (soadyn.codegen.stages, JUMP_EVERY); x86-64 GCC/Clang only, and only where the build defines
            # SOADYN_TAKEN_JUMPS (profiles.taken_jumps_help: the CPUs it was measured on), nothing elsewhere
            out += ["#if defined(SOADYN_TAKEN_JUMPS) && (defined(__GNUC__) || defined(__clang__)) "
                    "&& defined(__x86_64__)",
                    f'{ind}__asm__ volatile("jmp 1f\\n1:");',
                    "#endif"]
        elif k == cp.SINCOS:
            n = len(s.args)
            xs = ", ".join(s.args)
            out.append(f"{ind}{real} soadyn_tx[{n}] = {{{xs}}}, soadyn_ts[{n}], soadyn_tc[{n}];")
            out.append(f"{ind}{s.fn}(soadyn_tx, soadyn_ts, soadyn_tc, {n});")
        elif k == cp.SWITCH:
            out.append(f"{ind}switch (frame) {{")
            for c in s.cases:
                if c.comment is None:
                    (one,) = self.lines(c.body)
                    out.append(f"{ind}case {c.enumerator}: {one} break;")
                    continue
                out.append(f"{ind}case {c.enumerator}: {{  /* {c.comment} */")
                out += self.lines(c.body, ind + "    ")
                out += [f"{ind}    break;", f"{ind}}}"]
            out += [f"{ind}default:", f"{ind}    return 1;", f"{ind}}}", f"{ind}return 0;"]
        else:   # pragma: no cover - every kind is printed
            raise ValueError(f"no C for a statement of kind {k!r}")

    zero = "0.0"


class FloatPrinter(CPrinter):
    """C99 ``float``: the same statements in single precision -- ``float`` locals and arrays, literals
    with an ``f`` suffix (rounded once, from their decimal text, to the nearest float), and libm's float
    functions (``sinf``, ``cosf``, ``sqrtf``, ``powf``).  Fused sines and cosines
    (:func:`~soadyn.codegen.trig.fuse_trig`) run the double kernels on the float arguments converted
    exactly to double and round each result once to float: the value of ``sinf(x)`` as the flight
    library defines it (``(float)soadyn_sin((double)x)``), with explicit conversions (``-Wconversion
    -Wdouble-promotion``)."""

    real = "float"
    functions = {"soadyn_sin": "sinf", "soadyn_cos": "cosf", "sin": "sinf", "cos": "cosf", "sqrt": "sqrtf",
                 "pow": "powf"}
    zero = "0.0f"

    def _statement(self, s: Stmt, ind: str, out: list[str]) -> None:
        if s.kind == cp.SINCOS:
            n = len(s.args)
            xs = ", ".join(x if x == "0" else f"(double){x}" for x in s.args)
            out.append(f"{ind}double soadyn_tx[{n}] = {{{xs}}}, soadyn_ts[{n}], soadyn_tc[{n}];")
            out.append(f"{ind}{s.fn}(soadyn_tx, soadyn_ts, soadyn_tc, {n});")
        elif s.kind == cp.ARITH and _FUSED_READ.fullmatch(s.expr.text):
            out.append(f"{ind}const float {s.target} = (float){s.expr.text};")
        else:
            super()._statement(s, ind, out)

    def expr(self, e: Expr) -> str:
        toks = e.calls(self.functions).tokens
        return "".join(t + "f" if (t[0].isdigit() or t[0] == ".") and ("." in t or "e" in t or "E" in t)
                       else t for t in toks)
