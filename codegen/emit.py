"""Optimised programs -> C99 source and header (Jinja templates), plus the cffi declarations.

Every generated function is plain C99: ``const double *`` inputs, ``double *`` outputs (row-major), one
``const double`` local per staged quantity (the algorithm's names, e.g. ``V3_4``) or common subexpression
(``t12``), no allocation, no globals, reentrant.  ``<name>_batch(int n, ...)`` loops over ``n`` states
stored contiguously.  Expressions are printed by ``symengine.ccode``; the only preprocessing is that
floating-point constants are handed to the printer as their shortest round-trip ``repr`` (the printer
itself rounds them to 15 significant digits), so the C constants are bit-identical to the robot model.
"""

from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import jinja2
import symengine as se

from soadyn._version import __version__
from soadyn.codegen.derive import DerivationError, Product, Program
from soadyn.codegen.functions import Arg, FunctionSpec, c_identifier, frame_enum
from soadyn.codegen.optimise import count_ops, eliminate_dead_code, split_cases
from soadyn.codegen.schedule import pressure_order, statement_deps, worth_scheduling
from soadyn.codegen.sections import section_of
from soadyn.codegen.trig import C_COS, C_SIN, LOAD_LINE, fuse_pairs, to_inline
from soadyn.codegen.trig import PRELUDE as TRIG_PRELUDE
from soadyn.codegen.units import OUTPUT_STORE, SIMD_FUNCTIONS, finish_function
from soadyn.model.names import c_comment, py_doc, py_literal
from soadyn.model.parameters import default_params
from soadyn.model.robot import Robot

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
#: a digit next to a "." or an exponent: where printed C text may hold a floating-point constant
_FLOAT_TEXT = re.compile(r"\d[.eE]|\.\d")
_C_FUNCS = frozenset({"sin", "cos", "sqrt", "pow", C_SIN, C_COS})


def generator_version() -> str:
    return __version__


@dataclass
class EmittedFunction:
    cname: str
    doc: str
    inputs: list[Any]
    outputs: list[Any]
    ops: dict[str, int]
    signature: str
    batch_signature: str
    batch_args: str
    prototype: str
    batch_prototype: str
    body: list[str]
    unused: list[str]
    batch_body: list[str] = field(default_factory=list)
    #: frame families: ops of the shared prefix and [(frame name, enumerator, ops of its case)]
    prefix_ops: dict[str, int] | None = None
    case_ops: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)
    #: stage functions and SIMD batch code (:func:`soadyn.codegen.units.finish_function`)
    extra: Any = None
    #: the body's last lines, run after its statements: calls of the program's products
    #: (:func:`product_function`), whose definitions are ``helpers`` (printed before the function)
    epilogue: list[str] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    #: scratch arrays (name, size) declared first in the body: the factors of general products, filled by
    #: the statements like outputs
    scratch: list[tuple[str, int]] = field(default_factory=list)
    #: a function with general products: its statements with the products as expressions (the same
    #: operations in the same order as the loops), from which the SIMD batch is made
    lanes_body: list[str] | None = None
    #: output entries the function stores (all of them unless it skips structural zeros)
    stores: int = 0
    #: a function whose SIMD batch reuses the nonzero-only variant's vector computation: (the variant's C
    #: name, {output: the entries this function stores}, whether the lanes' rows are zeroed first)
    delegate: tuple[str, dict[str, set[int]], bool] | None = None
    #: the nonzero-only variant that such a function reuses: its SIMD computation is a function of its own
    core: bool = False

    @property
    def is_family(self) -> bool:
        return self.prefix_ops is not None

    def ops_text(self) -> str:
        """One-line operation count: the total, or prefix + per-frame cases for a family."""
        if self.prefix_ops is None:
            return f"operations: {self.ops['total']}"
        cases = ", ".join(f"'{c_comment(name, 60)}' {ops['total']}" for name, _, ops in self.case_ops)
        return (f"operations: shared prefix {self.prefix_ops['total']} + the case of the frame "
                f"({cases}); {self.ops['total']} in all")


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("soadyn.templates").joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["c_comment"] = c_comment
    env.filters["pyrepr"] = repr
    env.filters["pystr"] = py_literal
    env.filters["pystrs"] = lambda xs: "[" + ", ".join(py_literal(x) for x in xs) + "]"
    env.filters["pydoc"] = py_doc
    env.filters["fuse_trig"] = fuse_pairs
    return env


def render(template: str, **kw: Any) -> str:
    """Render one of the package templates (``soadyn/templates/<template>``)."""
    return _environment().get_template(template).render(**kw)


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


class _Printer:
    """``symengine.ccode`` with exact constants and a check that only known names reach the C code."""

    def __init__(self, known: set[str], where: str) -> None:
        self.known = known | _C_FUNCS
        self.where = where

    def __call__(self, e: se.Basic) -> str:
        # SymEngine prints a finite float with a "." or an exponent: without either, ``e`` has none and
        # the walk of :func:`_exact_constants` (which costs more than printing) is skipped
        text = to_inline(se.ccode(e))
        if _FLOAT_TEXT.search(text):
            text = to_inline(se.ccode(_exact_constants(e)))
        for name in _IDENT.findall(_NUMBER.sub(" ", text)):
            if name not in self.known:
                _exact_constants(e)      # a non-finite constant (printed as a name) raises its own error
                raise DerivationError(f"{self.where}: generated expression uses unknown name {name!r} "
                                      f"(a singular or non-finite term?): {text[:200]}")
        return text


def _used_names(program: Program) -> set[str]:
    used: set[str] = set()
    for _, e in program.assignments:
        used.update(s.name for s in e.free_symbols)
    for _, es in program.outputs:
        for e in es:
            if not e.is_Number:
                used.update(s.name for s in e.free_symbols)
    return used


def _assignments(assigns: list[tuple[se.Basic, se.Basic]], pr: _Printer, stages: dict[str, str],
                 indent: str = "") -> list[str]:
    """``const double`` lines, with a section comment (:mod:`soadyn.codegen.sections`) wherever the
    recursion stage changes."""
    out: list[str] = []
    current = None
    for t, e in assigns:
        section = section_of(stages.get(t.name, ""))
        if section is not None and section != current:
            out.append(f"{indent}/* {c_comment(section)} */")
            current = section
        out.append(f"{indent}const double {t.name} = {pr(e)};")
    return out


def _scheduled(program: Program, outs: list[tuple[str, int, se.Basic]], pr: _Printer) -> list[str]:
    """The assignments and the output stores ``outs`` in register-pressure order
    (:func:`soadyn.codegen.schedule.pressure_order`), each stage's comment before its first statement."""
    targets = [t for t, _ in program.assignments]
    exprs = [e for _, e in program.assignments] + [e for _, _, e in outs]
    deps = statement_deps([e.free_symbols for e in exprs], [*targets, *([None] * len(outs))])
    order = pressure_order(deps, [True] * len(targets) + [False] * len(outs))
    lines = ["/* statements in register-pressure order (codegen/schedule.py): the stages interleave, each "
             "stage's comment is before its first statement */"]
    seen: set[str] = set()
    for k in order:
        if k < len(targets):
            t = targets[k]
            section = section_of(program.stages.get(t.name, ""))
            if section is not None and section not in seen:
                lines.append(f"/* {c_comment(section)} */")
                seen.add(section)
            lines.append(f"const double {t.name} = {pr(exprs[k])};")
        else:
            name, i, _ = outs[k - len(targets)]
            lines.append(f"{name}[{i}] = {pr(exprs[k])};")
    return lines


#: how many result vectors one pass of a product's row loop keeps in registers
PRODUCT_BLOCK = 8


def _product_vector_lines(p: Product, width: int) -> list[str]:
    """The loops of an in-place product (:func:`product_function`) with ``width`` doubles per GCC/Clang
    vector (1: plain scalar loops): the right factor read back from the result's columns, then each result
    row accumulated over the left factor's row, ``r = a[0] B[0] + a[1] B[1] + ...`` (left to right), and
    stored.  The factor and the row are unions of vectors and doubles (C99 type punning), so that no vector
    load waits on the scalar stores just before it."""
    m, n = p.m, p.columns
    if width == 1:
        return [f"double prod_B[{m}][{n}], prod_r[{n}];",
                "int prod_i, prod_j, prod_k;",
                f"for (prod_k = 0; prod_k < {m}; ++prod_k) {{",
                *_product_copies(p, "prod_B[prod_k]", load=True),
                "}",
                f"for (prod_i = 0; prod_i < {m}; ++prod_i) {{",
                f"    const double *prod_a = {p.left} + {m} * prod_i;",
                f"    for (prod_j = 0; prod_j < {n}; ++prod_j) "
                "prod_r[prod_j] = prod_a[0] * prod_B[0][prod_j];",
                f"    for (prod_k = 1; prod_k < {m}; ++prod_k)",
                f"        for (prod_j = 0; prod_j < {n}; ++prod_j) "
                "prod_r[prod_j] += prod_a[prod_k] * prod_B[prod_k][prod_j];",
                *_product_copies(p, "prod_r", load=False), "}"]
    nvec = sum(-(-count // width) for *_, count in p.runs)     # each run from a whole vector on
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"typedef double prod_w __attribute__((vector_size({8 * width}), aligned(8), may_alias));",
           f"union {{ prod_v v[{nvec}]; double d[{nvec * width}]; }} prod_B[{m}], prod_r;",
           "int prod_i, prod_j, prod_k;",
           f"for (prod_k = 0; prod_k < {m}; ++prod_k) {{",
           f"    for (prod_j = 0; prod_j < {nvec}; ++prod_j) prod_B[prod_k].v[prod_j] = (prod_v){{0}};"]
    out += _product_copies(p, "prod_B[prod_k].d", load=True, width=width)
    out += ["}",
            f"for (prod_i = 0; prod_i < {m}; ++prod_i) {{",
            f"    const double *prod_a = {p.left} + {m} * prod_i;"]
    out += _accumulate_row(nvec, m, "prod_r")
    return out + _product_copies(p, "prod_r.d", load=False, width=width) + ["}"]


def _accumulate_row(nvec: int, k: int, row: str, indent: str = "    ") -> list[str]:
    """Row ``prod_i`` of a product, ``nvec`` vectors wide, into ``row``: blocks of at most
    :data:`PRODUCT_BLOCK` vector accumulators, ``c = a[0] B[0] + a[1] B[1] + ...`` (left to right)."""
    out = []
    for b0 in range(0, nvec, PRODUCT_BLOCK):
        acc = range(b0, min(nvec, b0 + PRODUCT_BLOCK))
        out += [f"{indent}{{",
                f"{indent}    " + " ".join(f"prod_v prod_c{v} = prod_a[0] * prod_B[0].v[{v}];" for v in acc),
                f"{indent}    for (prod_k = 1; prod_k < {k}; ++prod_k) {{",
                f"{indent}        " + " ".join(f"prod_c{v} += prod_a[prod_k] * prod_B[prod_k].v[{v}];"
                                               for v in acc),
                f"{indent}    }}",
                f"{indent}    " + " ".join(f"{row}.v[{v}] = prod_c{v};" for v in acc),
                f"{indent}}}"]
    return out


def _product_copies(p: Product, row: str, load: bool, width: int = 1) -> list[str]:
    """Loops between a row buffer ``row`` and the result's columns in the outputs: ``load``: row ``prod_k``
    of the right factor read back; else row ``prod_i`` of the result stored, scaled.  ``width`` > 1: whole
    unaligned vectors (``prod_w``) of each run, then its last entries one by one (an elementwise loop over
    runs of 7 and 13 entries was compiled into scalar loads and lane inserts: 4.5 % of the Panda
    forward-dynamics derivatives' time, perf)."""
    out = []
    at = 0
    sign = "-" if p.scale < 0 and not load else ""
    for name, stride, col, count in p.runs:
        if width > 1:
            at = -(-at // width) * width
        src, dst = f"{row} + {at}", f"{name} + {stride} * {'prod_k' if load else 'prod_i'} + {col}"
        if load:
            src, dst = dst, src
        if width > 1:
            out.append(f"    for (prod_j = 0; prod_j + {width} <= {count}; prod_j += {width}) "
                       f"*(prod_w *)({dst} + prod_j) = {sign}*(const prod_w *)({src} + prod_j);")
            out.append(f"    for (; prod_j < {count}; ++prod_j) ({dst})[prod_j] = {sign}({src})[prod_j];")
        else:
            out.append(f"    for (prod_j = 0; prod_j < {count}; ++prod_j) "
                       f"({dst})[prod_j] = {sign}({src})[prod_j];")
        at += count
    return out


def _general_product_lines(p: Product, width: int) -> list[str]:
    """The loops of a general product (``p.k`` > 0): ``A`` (m x k) and ``B`` (k x n) read from the scratch
    array ``p.left``; each result row accumulated over ``A``'s row, ``r = a[0] B[0] + a[1] B[1] + ...``
    (left to right), then stored into (or, ``accumulate``, added to) its output row.  A symmetric product
    computes row i from column i on (whole vectors from the one holding column i), stores it from column
    i on and copies it into column i below the diagonal (what the program stored there equals the
    entry above).  ``width`` doubles per vector (1: the plain scalar loops)."""
    m, k, n = p.m, p.k, p.columns
    name, stride, col, _ = p.runs[0]
    op = ("-=" if p.scale < 0 else "+=") if p.accumulate else "="
    sign = "-" if p.scale < 0 and not p.accumulate else ""
    first = "prod_i" if p.symmetric else "0"
    head = [f"for (prod_i = 0; prod_i < {m}; ++prod_i) {{",
            f"    const double *prod_a = {p.left} + {k} * prod_i;",
            f"    double *prod_o = {name} + {stride} * ({p.row0} + prod_i) + {col};"]
    mirror = ([f"    for (prod_j = prod_i + 1; prod_j < {n}; ++prod_j) "
               f"prod_o[{stride} * (prod_j - prod_i) + prod_i] = prod_o[prod_j];"]
              if p.symmetric else [])
    if width == 1:
        return [f"double prod_r[{n}];",
                "int prod_i, prod_j, prod_k;",
                f"const double *prod_b = {p.left} + {m * k};",
                *head,
                f"    for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                "prod_r[prod_j] = prod_a[0] * prod_b[prod_j];",
                f"    for (prod_k = 1; prod_k < {k}; ++prod_k)",
                f"        for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                f"prod_r[prod_j] += prod_a[prod_k] * prod_b[{n} * prod_k + prod_j];",
                f"    for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                f"prod_o[prod_j] {op} {sign}prod_r[prod_j];",
                *mirror, "}"]
    nvec = -(-n // width)
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"typedef double prod_w __attribute__((vector_size({8 * width}), aligned(8), may_alias));",
           f"union {{ prod_v v[{nvec}]; double d[{nvec * width}]; }} prod_B[{k}], prod_u;",
           "int prod_i, prod_j, prod_k;",
           f"for (prod_k = 0; prod_k < {k}; ++prod_k) {{",
           f"    for (prod_j = 0; prod_j < {n}; ++prod_j) "
           f"prod_B[prod_k].d[prod_j] = {p.left}[{m * k} + {n} * prod_k + prod_j];"]
    if nvec * width > n:
        out.append(f"    for (prod_j = {n}; prod_j < {nvec * width}; ++prod_j) "
                   "prod_B[prod_k].d[prod_j] = 0.0;")
    out += ["}", *head]
    if p.symmetric:
        out += [f"    prod_v prod_a{c} = {{{', '.join([f'prod_a[{c}]'] * width)}}};" for c in range(k)]
        out += [f"    for (prod_j = prod_i / {width}; prod_j < {nvec}; ++prod_j) {{",
                "        prod_v prod_c = prod_a0 * prod_B[0].v[prod_j];",
                *(f"        prod_c += prod_a{c} * prod_B[{c}].v[prod_j];" for c in range(1, k)),
                "        prod_u.v[prod_j] = prod_c;",
                "    }"]
    else:
        out += _accumulate_row(nvec, k, "prod_u")
    # whole (unaligned) vectors of the row, then its last entries one by one
    out += [f"    for (prod_j = {first}; prod_j + {width} <= {n}; prod_j += {width}) "
            f"*(prod_w *)(prod_o + prod_j) {op} {sign}*(const prod_w *)(prod_u.d + prod_j);",
            f"    for (; prod_j < {n}; ++prod_j) prod_o[prod_j] {op} {sign}prod_u.d[prod_j];"]
    return out + mirror + ["}"]


def product_function(p: Product, cname: str) -> tuple[str, list[str]]:
    """C of ``p``, run after the statements: ``(definition, lines of the call)``.

    The loops (:func:`_product_vector_lines` in place, :func:`_general_product_lines` from a scratch array)
    come three times: with GCC or Clang over vectors of 4 doubles with AVX, else 2; otherwise plain scalar
    loops.  Every lane performs the scalar loop's operations in the same order (``-ffp-contract=off``), so
    all three give the same bits.  The loops are a function of their own (``noinline``): inlined at the
    end of a long straight-line body, gcc -O3 made them 2.5x slower (Panda forward-dynamics derivatives:
    700 against 280 ns)."""
    what = section_of(p.name) or f"{p.name}: dense product"
    sign = "-" if p.scale < 0 else ""
    name = f"{cname}_prod_{p.name}"
    if p.k:
        lines = functools.partial(_general_product_lines, p)
        args = [p.left, p.runs[0][0]]
        how = "added to" if p.accumulate else "stored into"
        head = (f"{name}: {sign}A B, ({p.m} x {p.k}) by ({p.k} x {p.columns}), A and B from {p.left}, {how} "
                f"rows {p.row0}.. of {args[1]}")
    else:
        lines = functools.partial(_product_vector_lines, p)
        args = [p.left] + list(dict.fromkeys(r[0] for r in p.runs))
        head = (f"{name} = {sign}{p.left} B, ({p.m} x {p.m}) by ({p.m} x {p.columns}), B read back from the "
                "outputs")
    params = ", ".join([f"const double *{args[0]}"] + [f"double *{o}" for o in args[1:]])
    ind = "    "
    body = (["#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD)",
             "#if defined(__AVX__)"]
            + [ind + x for x in lines(4)] + ["#else"]
            + [ind + x for x in lines(2)] + ["#endif", "#else"]
            + [ind + x for x in lines(1)] + ["#endif"])
    text = (f"/* {c_comment(what)}:\n   {head} */\n"
            "#if defined(__GNUC__) || defined(__clang__)\n__attribute__((noinline))\n#endif\n"
            f"static void {name}({params})\n{{\n" + "".join(f"{x}\n" for x in body) + "}\n")
    return text, [f"/* {c_comment(what)} */", f"{name}({', '.join(args)});"]


def expanded_products(body: list[str], products: list[Product]) -> list[str]:
    """``body`` (the statements, stores included) with its general products as expressions: a factor's
    scratch entry becomes a local ``<scratch>_<i>``, and each result entry ``C + s (a_i0 b_0j + ...)`` is
    stored after the statements, summed left to right like the loops (a symmetric product's entry
    (i, j), i <= j, also at (j, i)), so that every lane rounds exactly as the scalar function."""
    blocks: dict[tuple[str, int], tuple[Product, int, int]] = {}
    for p in products:
        name, stride, col, n = p.runs[0]
        for i in range(p.m):
            for j in range(n):
                blocks[name, stride * (p.row0 + i) + col + j] = (p, i, j)
    rest: dict[tuple[str, int, int], str] = {}
    out = []
    for line in body:
        m = OUTPUT_STORE.match(line.strip())
        if m and any(m.group(1) == p.left for p in products):
            out.append(f"const double {m.group(1)}_{m.group(2)} = {m.group(3)};")
        elif m and (m.group(1), int(m.group(2))) in blocks:
            p, i, j = blocks[m.group(1), int(m.group(2))]
            rest[p.name, i, j] = m.group(3)
        else:
            out.append(line)
    for p in products:
        name, stride, col, n = p.runs[0]
        m_, k = p.m, p.k
        for i in range(m_):
            for j in range(n):
                if p.symmetric and j < i:
                    continue
                terms = " + ".join(f"{p.left}_{k * i + c}*{p.left}_{m_ * k + n * c + j}" for c in range(k))
                out.append(f"const double {p.left}_r{i}_{j} = {terms};")
                sign, op = ("-", "-") if p.scale < 0 else ("", "+")
                for a, b in ((i, j), (j, i)) if p.symmetric and i != j else ((i, j),):
                    value = (f"{rest.get((p.name, i, j), '0')} {op} ({p.left}_r{i}_{j})" if p.accumulate
                             else f"{sign}{p.left}_r{i}_{j}")
                    out.append(f"{name}[{stride * (p.row0 + a) + col + b}] = {value};")
    return out


#: a run of at least ZERO_RUN exact zeros in an output of a frame family is written by loops of at most
#: ZERO_CHUNK elements, which C compilers turn into a few vector stores: a frame's Jacobian is zero in
#: every column of a joint off the frame's path (153 of the 222 entries for a hand of the four-arm
#: robot).  gcc 12 inlines such a loop for up to 8 doubles under every tuning tried (generic x86-64,
#: AVX2, AVX-512) but calls libc's memset for 16 or more with the generic and AVX2 tunings (measured
#: slower than the single stores for the short cases of a tree's frames)
ZERO_RUN = 4
ZERO_CHUNK = 8


def _stores(name: str, es: list[se.Basic], pr: _Printer, indent: str = "") -> list[str]:
    """Stores of every element of the output ``name``; runs of exact zeros as short loops (no element is
    left unwritten: the caller's buffer may hold anything)."""
    out: list[str] = []
    i, n = 0, len(es)
    while i < n:
        j = i
        while j < n and es[j].is_Number and es[j] == 0:
            j += 1
        if j - i >= ZERO_RUN:
            for a in range(i, j, ZERO_CHUNK):
                b = min(a + ZERO_CHUNK, j)
                if b - a >= ZERO_RUN:
                    out.append(f"{indent}for (int k = {a}; k < {b}; ++k) {name}[k] = 0.0;")
                else:
                    out += [f"{indent}{name}[{k}] = 0;" for k in range(a, b)]
            i = j
            continue
        out.append(f"{indent}{name}[{i}] = {pr(es[i])};")
        i += 1
    return out


def _mirrored_entries(products: list[Product]) -> set[tuple[str, int]]:
    """(output, index) of the entries below the diagonal of a symmetric general product's block: its loop
    copies the entries above the diagonal there (:func:`_general_product_lines`), so the statements do not
    store them (465 stores per call of the four-arm robot's M^-1; the SIMD batch's expressions,
    :func:`expanded_products`, store both triangles themselves)."""
    out: set[tuple[str, int]] = set()
    for p in products:
        if p.k and p.symmetric:
            name, stride, col, _ = p.runs[0]
            out |= {(name, stride * (p.row0 + a) + col + b) for a in range(p.m) for b in range(a)}
    return out


_COMMENT = re.compile(r"/\*.*?\*/")


def sink_loads(lines: list[str]) -> list[str]:
    """``lines`` with each input load (``const double v_3 = v[3];``) moved to just before the first line
    that reads it, or before the block (a frame family's ``switch``) holding that line.  A preamble of
    loads keeps every input value live from the start (spilled to the stack): the compiler does not move a
    load past the sines' and cosines' call, which could write the memory the input points to.  Measured
    (gcc 12, ns per call, best of 3 rounds, issue 11): Dimitrov robot, plain C at ``-O2 -march=native``,
    the ``_fext`` variants of the inverse dynamics 226 -> 214, forward dynamics 532 -> 492, generalised
    bias 467 -> 419, decoupled forward dynamics 1,429 -> 1,335, and the forward dynamics 444 -> 427; Panda
    free base, the shipped ``fast`` units, ID 164 -> 156, ID ``_fext`` 192 -> 168, FD ``_fext`` 479 ->
    404, while the FD, 401 -> 434 in one binary, was 448 -> 433 in a binary with other functions linked
    beside it and even at ``-O3`` (code layout).  The statements and their roundings are unchanged."""
    loads: dict[str, int] = {}       # top-level load lines by the name they define
    anchor: list[int] = []           # for each line, the top-level line that starts its block
    depth = opened = 0
    for k, line in enumerate(lines):
        if depth == 0:
            opened = k
            m = LOAD_LINE.match(line)
            if m:
                loads[m.group(1)] = k
        anchor.append(opened)
        code = _COMMENT.sub("", line)
        depth += code.count("{") - code.count("}")
    if not loads:
        return lines
    moved = set(loads.values())
    before: dict[int, list[str]] = {}
    for k, line in enumerate(lines):
        if k in moved:
            continue
        for name in dict.fromkeys(_IDENT.findall(line)):
            j = loads.pop(name, None)
            if j is not None:
                before.setdefault(anchor[k], []).append(lines[j])
    for j in loads.values():          # read by no line: where it was
        before.setdefault(j, []).append(lines[j])
    out: list[str] = []
    for k, line in enumerate(lines):
        out += before.get(k, [])
        if k not in moved:
            out.append(line)
    return out


def _signatures(spec: FunctionSpec, cname: str) -> tuple[str, str, str]:
    """The C signature of the function, of its batch entry, and the arguments of the batch's call of
    state ``i``."""
    family = spec.is_family
    params_in = [f"const double *{a.name}" for a in spec.inputs] + (["int frame"] if family else [])
    params_out = [f"double *{a.name}" for a in spec.outputs]
    ret = "int" if family else "void"
    signature = f"{ret} {cname}({', '.join(params_in + params_out)})"
    batch_signature = f"{ret} {cname}_batch({', '.join(['int n'] + params_in + params_out)})"
    batch_args = ", ".join([f"{a.name} + (long)i * {a.size}" for a in spec.inputs]
                           + (["frame"] if family else [])
                           + [f"{a.name} + (long)i * {a.size}" for a in spec.outputs])
    return signature, batch_signature, batch_args


def emit_zero_fext_call(spec: FunctionSpec, program: Program, prefix: str) -> EmittedFunction:
    """A function without external wrenches that calls its ``*_fext`` variant (``spec.zero_fext_call``,
    whose optimised ``program`` it runs) with a zero ``f_ext`` array on its stack: one compiled body for
    both (:data:`~soadyn.codegen.functions.ZERO_FEXT_CALLS`).  Its operation counts are the variant's."""
    cname = prefix + spec.name
    target = prefix + spec.zero_fext_call
    signature, batch_signature, batch_args = _signatures(spec, cname)
    sizes = {name: len(syms) for name, syms in program.inputs}
    if "f_ext" not in sizes or {a.name for a in spec.inputs} != set(sizes) - {"f_ext"}:
        raise DerivationError(f"{cname}: {target} does not take this function's inputs and f_ext")
    params = ([f"const double *{name}" for name, _ in program.inputs]
              + [f"double *{a.name}" for a in spec.outputs])
    args = ", ".join([name for name, _ in program.inputs] + [a.name for a in spec.outputs])
    body = [f"double f_ext[{sizes['f_ext']}] = {{0.0}};", f"{target}({args});"]
    loop = ["int i;", "for (i = 0; i < n; ++i) {", f"    {cname}({batch_args});", "}"]
    doc = f"{spec.doc}: {target} with zero external wrenches"
    return EmittedFunction(cname, c_comment(doc), list(spec.inputs), list(spec.outputs),
                           dict(program.ops), signature, batch_signature, batch_args, signature + ";",
                           batch_signature + ";", body, [], loop,
                           helpers=[f"void {target}({', '.join(params)});"])


def emit_function(spec: FunctionSpec, program: Program, prefix: str,
                  enum: list[tuple[str, str, int]] | None = None,
                  skip_zeros: bool = False) -> EmittedFunction:
    """C text of one optimised program (a frame family needs ``enum``, see :func:`frame_enum`).

    ``skip_zeros``: no store for an output entry that is the exact zero (a structural zero, the same for
    every input): the function then needs a zeroed output (:func:`structured_variants`)."""
    cname = prefix + spec.name
    family = spec.is_family
    signature, batch_signature, batch_args = _signatures(spec, cname)

    known: set[str] = {t.name for t, _ in program.assignments}
    used = _used_names(program)
    body: list[str] = []
    unused: list[str] = []
    for name, syms in program.inputs:
        any_used = False
        for i, s in enumerate(syms):
            known.add(s.name)
            if s.name in used:
                body.append(f"const double {s.name} = {name}[{i}];")
                any_used = True
        if not any_used:
            unused.append(name)
    pr = _Printer(known, f"{cname}")
    loop = ["int i;"]
    stores = 0
    fn_ops = dict(program.ops)
    prefix_ops = None
    case_ops: list[tuple[str, str, dict[str, int]]] = []
    epilogue: list[str] = []
    helpers: list[str] = []
    scratch: list[tuple[str, int]] = []
    lanes_body: list[str] | None = None
    if not family:
        factors = {p.left for p in program.products if p.k}
        mirrored = _mirrored_entries(program.products)
        outs = [(name, i, e) for name, es in program.outputs for i, e in enumerate(es)
                if name in factors or ((name, i) not in mirrored and not (skip_zeros and e == 0))]
        stores = sum(1 for name, _, _ in outs if name not in factors)
        if worth_scheduling([a.size for a in spec.inputs], [a.size for a in spec.outputs]):
            body += _scheduled(program, outs, pr)
        else:
            body += _assignments(program.assignments, pr, program.stages)
            body += [f"{name}[{i}] = {pr(e)};" for name, i, e in outs]
        body = sink_loads(body)
        loop += ["for (i = 0; i < n; ++i) {", f"    {cname}({batch_args});", "}"]
        for p in program.products:
            text, call = product_function(p, cname)
            helpers.append(text)
            epilogue += call
            if p.k:                        # the scratch array of a general product's factors
                scratch.append((p.left, p.m * p.k + p.k * p.columns))
        if program.products and all(p.k for p in program.products):
            lanes_body = expanded_products(body, program.products)
        body = [f"double {n}[{size}];" for n, size in scratch] + body + epilogue
    else:
        if program.products:
            raise DerivationError(f"{cname}: a frame family cannot have product loops")
        if enum is None or len(enum) != len(spec.frames):
            raise DerivationError(f"{cname}: frame family without a matching frame enum")
        split = split_cases(program, len(spec.frames))
        body += _assignments(split.prefix, pr, program.stages)
        body.append("switch (frame) {")
        for (assigns, outs), (fname, enumerator, _), ops in zip(split.cases, enum, split.case_ops):
            body.append(f"case {enumerator}: {{  /* '{c_comment(fname)}': {ops['total']} operations */")
            body += _assignments(assigns, pr, program.stages, "    ")
            for name, es in outs:
                body += _stores(name, es, pr, "    ")
            body.append("    break;")
            body.append("}")
            case_ops.append((fname, enumerator, ops))
        body += ["default:", "    return 1;", "}", "return 0;"]
        body = sink_loads(body)
        prefix_ops = split.prefix_ops
        # what the C holds: quantities copied into several cases count once per copy
        fn_ops = {k: prefix_ops[k] + sum(o[k] for o in split.case_ops) for k in prefix_ops}
        n_frames = f"{prefix.upper()}N_FRAMES"
        loop += [f"if (frame < 0 || frame >= {n_frames}) return 1;",
                 "for (i = 0; i < n; ++i) {", f"    (void){cname}({batch_args});", "}", "return 0;"]
    return EmittedFunction(cname, c_comment(spec.doc), list(spec.inputs), list(spec.outputs),
                           fn_ops, signature, batch_signature, batch_args, signature + ";",
                           batch_signature + ";", body, unused, loop, prefix_ops, case_ops,
                           epilogue=epilogue, helpers=helpers, stores=stores, scratch=scratch,
                           lanes_body=lanes_body)


#: functions that also get structured variants (:func:`structured_variants`): the square output's name
STRUCTURED = {"mass_matrix": "M"}
#: what the variants' documentation says about the output buffer
ZEROED = "needs a zeroed output: the entries not written are the exact zeros of every state"
#: a new result of the Python ``mass_matrix(triangle="full")`` is ``numpy.zeros`` + the nonzero-only variant
#: when at least this fraction of the entries are structural zeros, else ``numpy.empty`` + the full-writing
#: function.  Measured from Python over 20,000 states (``benchmarks/README.md``, issue 11 item 3): with 59 %
#: zeros (the four-arm robot) zeros + nonzero stores was 3-5 % faster per state, with 8 % zeros (the Panda)
#: 5-52 % slower.
SPARSE_NEW_RESULT = 0.5


def _masked(program: Program, keep) -> Program:
    """``program`` with the output entries that ``keep(name, i)`` rejects set to zero, dead code removed and
    the operations counted again."""
    outputs = [(n, [e if keep(n, i) else se.Integer(0) for i, e in enumerate(es)])
               for n, es in program.outputs]
    p = eliminate_dead_code(Program(program.name, program.inputs, program.assignments, outputs, {},
                                    program.stages))
    p.ops = count_ops(p)
    return p


def structured_variants(spec: FunctionSpec, program: Program, prefix: str) -> list[EmittedFunction]:
    """Variants of a function with a square, symmetric output (:data:`STRUCTURED`) that write less than the
    whole matrix into a **zeroed** output (issue 11, item 3):

    * ``<name>_nz``: only the structurally nonzero entries (the exact zeros, e.g. between bodies on
      different branches of a tree, are not stored);
    * ``<name>_upper``: only the structurally nonzero entries with ``i <= j`` (upper triangle, row-major);
      what only the lower triangle needs is removed as dead code.

    The full-writing function stays: it is the one for a buffer of unknown contents."""
    out_name = STRUCTURED.get(spec.name)
    if out_name is None or spec.is_family:
        return []
    n = next(a.shape[0] for a in spec.outputs if a.name == out_name)
    nz = replace(spec, name=f"{spec.name}_nz",
                 doc=f"{spec.doc}, structurally nonzero entries only ({ZEROED})")
    upper = replace(spec, name=f"{spec.name}_upper",
                    doc=f"{spec.doc}, upper triangle (i <= j), structurally nonzero entries only ({ZEROED})")
    upper_program = _masked(program, lambda name, i: name != out_name or i // n <= i % n)
    return [emit_function(nz, program, prefix, skip_zeros=True),
            emit_function(upper, upper_program, prefix, skip_zeros=True)]


def _delegate_to_nonzero(funcs: list[EmittedFunction], nz: EmittedFunction, program: Program) -> None:
    """Let the SIMD batches of the full-writing function and of the upper variant (``funcs``) reuse the
    vector computation of the nonzero-only variant ``nz``: the long body is vectorised and compiled once
    for all three (the full one zeroes the lanes' rows with one memset, then every function transposes the
    entries it stores).  The scalar functions keep their own bodies, the full-writing one unchanged: a
    full-writing function that called the variant after a memset measured 1,437 against 1,340 ns per state
    on the four-arm robot in one run, but unchanged code varied as much between runs on the shared machine,
    so nothing was traded for it."""
    full, upper = funcs
    shapes = {a.name: a.shape for a in full.outputs}
    full.delegate = (nz.cname, {name: set(range(len(es))) for name, es in program.outputs}, True)
    upper.delegate = (nz.cname, {name: {i for i in range(len(es)) if len(shapes[name]) != 2
                                        or i // shapes[name][1] <= i % shapes[name][1]}
                                 for name, es in program.outputs}, False)
    nz.core = True


def module_prefix(module_name: str) -> str:
    return c_identifier(module_name) + "_"


def _common(robot: Robot, module_name: str) -> dict[str, Any]:
    return dict(robot=robot, version=generator_version(), source_hash=robot.source_hash or "n/a",
                fingerprint=robot.fingerprint(), header_name=f"{module_name}.h",
                source_name=f"{module_name}.c")


def emit_functions(robot: Robot, module_name: str, specs: list[FunctionSpec],
                   programs: list[Program]) -> tuple[list[EmittedFunction], list[bool]]:
    """The C functions of ``specs`` (each with its structured variants), unfinished, and whether each gets
    a SIMD batch: what :func:`emit_module` renders."""
    prefix = module_prefix(module_name)
    enum = frame_enum(robot, module_name)
    funcs: list[EmittedFunction] = []
    simd: list[bool] = []
    for s, p in zip(specs, programs):
        if s.zero_fext_call:
            funcs.append(emit_zero_fext_call(s, p, prefix))
            simd.append(False)
            continue
        main = emit_function(s, p, prefix, enum)
        variants = structured_variants(s, p, prefix)
        if variants:
            _delegate_to_nonzero([main, variants[1]], variants[0], p)
        group = [main, *variants]
        funcs += group
        simd += [s.name in SIMD_FUNCTIONS] * len(group)
    return funcs, simd


def emit_module(robot: Robot, module_name: str, specs: list[FunctionSpec],
                programs: list[Program], stage_ops: int = 0, lanes: int = 1,
                emitted: tuple[list[EmittedFunction], list[bool]] | None = None
                ) -> tuple[dict[str, str], str, list[EmittedFunction]]:
    """Render ``<module>.c`` and ``<module>.h``; return ({file name: text}, cffi cdef text, functions).

    ``<module>.c`` is the portable single-file C99 of the functions, the same for every build profile.
    ``stage_ops``, ``lanes``: the returned functions are then finished for the build (stage functions and
    SIMD batches, :func:`~soadyn.codegen.units.finish_function`; compiled from
    :func:`~soadyn.codegen.units.translation_units`): the same statements, arranged for the compiler.
    ``emitted``: the :func:`emit_functions` of ``specs`` and ``programs`` when the caller has them
    (unfinished; finishing works on copies)."""
    prefix = module_prefix(module_name)
    enum = frame_enum(robot, module_name)
    if emitted is None:
        funcs, simd = emit_functions(robot, module_name, specs, programs)
    else:
        funcs, simd = [copy.copy(f) for f in emitted[0]], list(emitted[1])
    families = [f for f in funcs if f.is_family]
    common = _common(robot, module_name)
    prototypes = "\n".join(f"/* {c_comment(f.doc)}; {c_comment(f.ops_text(), 1 << 20)} */\n{f.prototype}\n"
                           f"{f.batch_prototype}\n" for f in funcs).rstrip()
    enum_name = f"{prefix}frame"
    header = render("module.h.j2", guard=f"SOADYN_{c_identifier(module_name).upper()}_H",
                    prototypes=prototypes, enum=enum if families else [], enum_name=enum_name,
                    n_frames=f"{prefix.upper()}N_FRAMES", families=[f.cname for f in families], **common)
    source = render("module.c.j2", functions=funcs, prelude=TRIG_PRELUDE, **common)
    # a delegating function after the variant whose vector computation its SIMD batch reuses
    for f, vector in sorted(zip(funcs, simd), key=lambda fv: fv[0].delegate is not None):
        finish_function(f, stage_ops, lanes if vector else 1,
                        {g.cname: g for g in funcs} if f.delegate is not None else None)
    cdef = ""
    if families:
        cdef = (f"enum {enum_name} {{\n" + "".join(f"    {e} = {i},\n" for _, e, i in enum) + "};\n")
    cdef += "\n".join(f"{f.prototype}\n{f.batch_prototype}" for f in funcs) + "\n"
    return {common["source_name"]: source, common["header_name"]: header}, cdef, funcs


def _tuple_literal(shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _strides_literal(shape: tuple[int, ...]) -> str:
    strides = []
    step = 8
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return _tuple_literal(tuple(reversed(strides))) if shape else "()"


def _arg_dict(a: Arg) -> dict[str, Any]:
    return dict(name=a.name, shape=_tuple_literal(a.shape), strides=_strides_literal(a.shape), dims=a.shape)


def _doc_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def python_api(specs: list[FunctionSpec], prefix: str,
               funcs: list[EmittedFunction] | None = None) -> list[dict[str, Any]]:
    """Description of the Python-level functions of the module, for ``__init__.py.j2`` (``funcs``: the
    emitted functions, for the number of entries the structured variants store)."""
    stores = {f.cname: f.stores for f in funcs or []}
    apis: list[dict[str, Any]] = []
    by_api: dict[str, list[FunctionSpec]] = {}
    for s in specs:
        by_api.setdefault(s.api, []).append(s)
    for api, group in by_api.items():
        first = group[0]
        outputs = [_arg_dict(o) for o in first.outputs]
        shapes = ", ".join(f"{o.name} {o.shape}" for o in first.outputs)
        has_params = any(a.name == "params" for a in first.inputs)
        tail = ["params=None"] if has_params else []     # run-time inertial parameters, a keyword
        if first.is_family:
            by_world = {s.kwargs_dict().get("world_aligned", False): prefix + s.name for s in group}
            names = [a.name for a in first.inputs if a.name != "params"]
            if api == "jacobian":
                params = ", ".join([*names, "frame", "world_aligned=False", *tail])
                doc = (f"Geometric Jacobian J {first.outputs[0].shape} of a body or named frame (by name): "
                       "its spatial velocity [w; v] = J v. world_aligned=False: frame axes; True: inertial "
                       "axes, at the frame origin.")
            elif api == "generalized_jacobian":
                params = ", ".join([*names, "frame", *tail])
                doc = (f"Generalised Jacobian {first.outputs[0].shape} of a body or named frame (by name; "
                       "free base, zero momentum): its spatial velocity from the joint rates.")
            else:
                params = ", ".join([*names, "frame", *tail])
                doc = f"{first.doc[:1].upper()}{first.doc[1:]} (frame by name): returns {shapes}."
            apis.append(dict(name=api, kind="family", params=params, outputs=outputs, has_params=has_params,
                             input_names=names,
                             inputs=[_arg_dict(a) for a in first.inputs],
                             local=by_world.get(False), world=by_world.get(True), doc=_doc_text(doc)))
        else:
            plain = next(s for s in group if not s.fext_input)
            fext = next((s for s in group if s.fext_input), None)
            inputs = [_arg_dict(a) for a in plain.inputs]
            names = [a.name for a in plain.inputs if a.name != "params"]
            entry = dict(name=api, inputs=inputs, outputs=outputs, c=prefix + plain.name, input_names=names,
                         has_params=has_params,
                         doc=_doc_text(f"{plain.doc[:1].upper()}{plain.doc[1:]}: returns {shapes}."))
            if fext is None and plain.name in STRUCTURED:
                size = first.outputs[0].size
                zeros = size - stores.get(f"{prefix}{plain.name}_nz", size)
                entry.update(kind="structured", params=", ".join([*names, *tail]),
                             c_nz=f"{prefix}{plain.name}_nz", c_upper=f"{prefix}{plain.name}_upper",
                             new_nz=zeros >= SPARSE_NEW_RESULT * size, zeros=zeros, size=size,
                             doc=_doc_text(f"{plain.doc[:1].upper()}{plain.doc[1:]}: returns {shapes}. "
                                           "triangle='upper': only the entries i <= j are computed, "
                                           "zeros below the diagonal (an out= array is zeroed first)."))
            elif fext is None:
                entry.update(kind="plain", params=", ".join([*names, *tail]))
            else:
                entry.update(kind="fext", params=", ".join([*names, "f_ext=None", *tail]),
                             c_fext=prefix + fext.name,
                             fext_inputs=[_arg_dict(a) for a in fext.inputs])
            apis.append(entry)
    return apis


def emit_wrapper(robot: Robot, module_name: str, ext_name: str, specs: list[FunctionSpec],
                 funcs: list[EmittedFunction], key: str = "") -> str:
    """The generated package's ``__init__.py``."""
    prefix = module_prefix(module_name)
    families = [f for f in funcs if f.is_family]
    frame_ops = {f.cname: {"prefix": f.prefix_ops["total"], **{n: o["total"] for n, _, o in f.case_ops}}
                 for f in families}
    enum = frame_enum(robot, module_name)
    apis = python_api(specs, prefix, funcs)
    return render("__init__.py.j2", robot=robot, module_name=module_name, ext_name=ext_name, key=key,
                  version=generator_version(), source_hash=robot.source_hash or "n/a",
                  sha256=robot.source_hash or None, gravity=[float(g) for g in robot.gravity],
                  total_mass=float(robot.total_mass), fingerprint=robot.fingerprint(), functions=funcs,
                  frame_ids=[(name, i) for name, _, i in enum], frame_ops=frame_ops,
                  apis=apis, param_bodies=list(robot.param_bodies),
                  fast_entries=fast_entries(apis, robot.is_free),
                  default_params=default_params(robot).tolist())


# --------------------------------------------------------------------------------------------------
# single calls from Python: a C entry per function that checks its arguments in C (``<ext>_fast.c``)
# --------------------------------------------------------------------------------------------------
_FAST_HEAD = """\
/* Single-state entry points for Python (generated by soadyn; DO NOT EDIT).
 *
 * fx_<name>(inputs..., out) runs the C function when every input is an exact numpy.ndarray of dtype
 * float64, the function's shape and C-contiguous strides (the conditions of the module's Python fast path,
 * checked the same way), the base quaternion q[3:7] of a free base is not zero, and out is None or such
 * an array and writeable; it returns the result (out, or a new array).  With one leading dimension n > 0
 * on every input (and out), the batch entry point runs on the n states instead, in this thread.
 * Otherwise it returns None and does nothing: the module's Python code then handles (or refuses) the
 * call exactly as without this file.
 */
#define PY_SSIZE_T_CLEAN
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <numpy/arrayobject.h>
#include "{header}"

static PyArray_Descr *fx_f64;

/* o is an exact float64 ndarray of shape dims (n < 0) or (n, dims), with C-contiguous strides */
static int fx_ok(PyObject *o, npy_intp n, int nd, const npy_intp *dims)
{{
    PyArrayObject *a = (PyArrayObject *)o;
    npy_intp step = 8;
    int k, lead = n >= 0;
    if (Py_TYPE(o) != &PyArray_Type || PyArray_DESCR(a) != fx_f64 || PyArray_NDIM(a) != nd + lead)
        return 0;
    for (k = nd - 1; k >= 0; --k) {{
        if (PyArray_DIMS(a)[k + lead] != dims[k] || PyArray_STRIDES(a)[k + lead] != step)
            return 0;
        step *= dims[k];
    }}
    return !lead || (PyArray_DIMS(a)[0] == n && PyArray_STRIDES(a)[0] == step);
}}

/* the batch size of a call: -1 when the first input has the function's own rank, its leading dimension
 * when it has one more (0 when that is empty or too large for the C int: not this path) */
static npy_intp fx_n(PyObject *o, int nd)
{{
    npy_intp n;
    if (Py_TYPE(o) != &PyArray_Type || PyArray_NDIM((PyArrayObject *)o) != nd + 1)
        return -1;
    n = PyArray_DIMS((PyArrayObject *)o)[0];
    return n > 0 && n <= INT_MAX ? n : 0;
}}

/* out: None (a new array) or a writeable array of the result's shape; NULL (no error set): not this path */
static PyObject *fx_out(PyObject *o, npy_intp n, int nd, const npy_intp *dims)
{{
    npy_intp shape[NPY_MAXDIMS];
    int k, lead = n >= 0;
    if (o == Py_None) {{
        shape[0] = n;
        for (k = 0; k < nd; ++k)
            shape[k + lead] = dims[k];
        return PyArray_SimpleNew(nd + lead, shape, NPY_DOUBLE);
    }}
    if (!fx_ok(o, n, nd, dims) || !PyArray_ISWRITEABLE((PyArrayObject *)o))
        return NULL;
    Py_INCREF(o);
    return o;
}}

#define FX_D(o) ((double *)PyArray_DATA((PyArrayObject *)(o)))
#define FX_SKIP Py_RETURN_NONE

/* every entry of the float64 array o is finite: no exponent field all ones (NaN, inf).  A bit test, so no
 * compiler flag can fold it away: (u & E) + 2^52 carries into bit 63 exactly when the exponent is all ones;
 * four independent lanes keep the loop at about one cycle per entry */
static int fx_finite(PyObject *o)
{{
    const char *p = (const char *)PyArray_DATA((PyArrayObject *)o);
    const uint64_t E = 0x7ff0000000000000ULL, C = 0x0010000000000000ULL;
    npy_intp i, n = PyArray_SIZE((PyArrayObject *)o);
    uint64_t a, b, c, d, x = 0, y = 0, z = 0, w = 0;
    for (i = 0; i + 4 <= n; i += 4) {{
        memcpy(&a, p + 8 * i, 8);
        memcpy(&b, p + 8 * i + 8, 8);
        memcpy(&c, p + 8 * i + 16, 8);
        memcpy(&d, p + 8 * i + 24, 8);
        x |= (a & E) + C;
        y |= (b & E) + C;
        z |= (c & E) + C;
        w |= (d & E) + C;
    }}
    for (; i < n; ++i) {{
        memcpy(&a, p + 8 * i, 8);
        x |= (a & E) + C;
    }}
    return !((x | y | z | w) >> 63);
}}

/* the bytes of array o overlap those of one of the k (C-contiguous) input arrays args[0..k-1] */
static int fx_overlap(PyObject *o, PyObject *const *args, int k)
{{
    uintptr_t lo = (uintptr_t)PyArray_BYTES((PyArrayObject *)o), hi = lo + PyArray_NBYTES((PyArrayObject *)o);
    int i;
    for (i = 0; i < k; ++i) {{
        uintptr_t a = (uintptr_t)PyArray_BYTES((PyArrayObject *)args[i]);
        if (a < hi && lo < a + (uintptr_t)PyArray_NBYTES((PyArrayObject *)args[i]))
            return 1;
    }}
    return 0;
}}
"""

_FAST_TAIL = """\

static PyMethodDef fx_methods[] = {{
{methods}    {{NULL, NULL, 0, NULL}}
}};

/* dict name -> builtin function; called once by the module's __init__.py (ctypes.PyDLL, GIL held) */
PyObject *{ext}_fastcalls(void)
{{
    PyObject *d;
    PyMethodDef *m;
    if (PyArray_API == NULL && _import_array() < 0)
        return NULL;
    fx_f64 = PyArray_DescrFromType(NPY_DOUBLE);   /* the float64 singleton: numpy.dtype(numpy.float64) */
    if (fx_f64 == NULL || (d = PyDict_New()) == NULL)
        return NULL;
    for (m = fx_methods; m->ml_name != NULL; ++m) {{
        PyObject *f = PyCFunction_New(m, NULL);
        if (f == NULL || PyDict_SetItemString(d, m->ml_name, f) < 0) {{
            Py_XDECREF(f);
            Py_DECREF(d);
            return NULL;
        }}
        Py_DECREF(f);
    }}
    return d;
}}
"""


def _fast_entry(name: str, cfunc: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
                quat: bool, frame: bool) -> str:
    """C of one fast entry: ``fx_<name>(inputs..., [frame id,] out)`` -> result or None; inputs with one
    leading dimension run ``<cfunc>_batch``."""
    def dims(a: dict[str, Any]) -> str:
        return f"[{max(len(a['dims']), 1)}] = {{{', '.join(map(str, a['dims'])) or '0'}}};"

    lines = [f"static PyObject *fx_{name}(PyObject *self, PyObject *const *args, Py_ssize_t nargs)", "{"]
    lines += [f"    static const npy_intp d{i}{dims(a)}" for i, a in enumerate(inputs)]
    lines += [f"    static const npy_intp e{j}{dims(o)}" for j, o in enumerate(outputs)]
    k_out = len(inputs) + (1 if frame else 0)
    lines += ["    PyObject *r;", "    npy_intp n;", "    int fid = 0;", "    (void)self;", "    (void)fid;",
              f"    if (nargs != {k_out + 1}) FX_SKIP;",
              f"    if ((n = fx_n(args[0], {len(inputs[0]['dims'])})) == 0) FX_SKIP;"]
    checks = " || ".join(f"!fx_ok(args[{i}], n, {len(a['dims'])}, d{i})" for i, a in enumerate(inputs))
    lines.append(f"    if ({checks}) FX_SKIP;")
    # a non-finite input: the module's Python code refuses it (issue 21)
    finite = " || ".join(f"!fx_finite(args[{i}])" for i in range(len(inputs)))
    lines.append(f"    if ({finite}) FX_SKIP;")
    if quat:
        iq = next(i for i, a in enumerate(inputs) if a["name"] == "q")
        nq = inputs[iq]["dims"][0]
        lines += [f"    {{ const double *qq = FX_D(args[{iq}]);",
                  f"      for (npy_intp i = 0; i < (n < 0 ? 1 : n); ++i, qq += {nq})",
                  "          if (!(qq[3] != 0 || qq[4] != 0 || qq[5] != 0 || qq[6] != 0)) FX_SKIP; }"]
    fid = ""
    if frame:
        lines += [f"    if (!PyLong_CheckExact(args[{len(inputs)}])) FX_SKIP;",
                  f"    fid = (int)PyLong_AsLong(args[{len(inputs)}]);"]
        fid = "fid, "
    ins = "".join(f"FX_D(args[{i}]), " for i in range(len(inputs)))
    if len(outputs) == 1:
        nd = len(outputs[0]["dims"])
        lines += [f"    r = fx_out(args[{k_out}], n, {nd}, e0);",
                  "    if (r == NULL) { if (PyErr_Occurred()) return NULL; FX_SKIP; }",
                  # out overlapping an input: the module's Python code copies the input first (issue 21)
                  f"    if (r == args[{k_out}] && fx_overlap(r, args, {len(inputs)}))",
                  "        { Py_DECREF(r); FX_SKIP; }",
                  "    Py_BEGIN_ALLOW_THREADS",
                  f"    if (n < 0) {cfunc}({ins}{fid}FX_D(r));",
                  f"    else {cfunc}_batch((int)n, {ins}{fid}FX_D(r));",
                  "    Py_END_ALLOW_THREADS"]
        if nd == 0:
            lines.append(f"    if (n < 0 && args[{k_out}] == Py_None)\n"
                         "        return PyArray_Return((PyArrayObject *)r);")
        lines.append("    return r;")
    else:
        m = len(outputs)
        outs = ", ".join(f"FX_D(o[{j}])" for j in range(m))
        lines += [f"    if (args[{k_out}] != Py_None) FX_SKIP;",
                  f"    PyObject *o[{m}] = {{NULL}};",
                  "    static const npy_intp *e[] = {" + ", ".join(f"e{j}" for j in range(m)) + "};",
                  "    static const int nd[] = {" + ", ".join(str(len(o["dims"])) for o in outputs) + "};",
                  f"    for (int j = 0; j < {m}; ++j)",
                  "        if ((o[j] = fx_out(Py_None, n, nd[j], e[j])) == NULL) {",
                  "            for (int k = 0; k < j; ++k) Py_DECREF(o[k]);",
                  "            return NULL;", "        }",
                  "    Py_BEGIN_ALLOW_THREADS",
                  f"    if (n < 0) {cfunc}({ins}{fid}{outs});",
                  f"    else {cfunc}_batch((int)n, {ins}{fid}{outs});",
                  "    Py_END_ALLOW_THREADS",
                  f"    r = PyTuple_New({m});",
                  "    if (r == NULL) {", *(f"        Py_DECREF(o[{j}]);" for j in range(m)),
                  "        return NULL;", "    }",
                  *(f"    PyTuple_SET_ITEM(r, {j}, o[{j}]);" for j in range(m)),
                  "    return r;"]
    lines.append("}")
    return "\n".join(lines) + "\n"


_FAST_QUATS = """
/* quaternions_nonzero(q): q an exact float64 ndarray (N, {nq}), C-contiguous: True when no row has
 * q[3:7] all zero, else False; None for any other q (the Python check handles it) */
static PyObject *fx_quaternions_nonzero(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{{
    PyArrayObject *a;
    const double *q;
    npy_intp n, i, d[1];
    (void)self;
    if (nargs != 1 || Py_TYPE(args[0]) != &PyArray_Type || PyArray_NDIM((PyArrayObject *)args[0]) != 2)
        Py_RETURN_NONE;
    a = (PyArrayObject *)args[0];
    n = PyArray_DIMS(a)[0];
    d[0] = {nq};
    if (!fx_ok(args[0], n, 1, d))
        Py_RETURN_NONE;
    q = (const double *)PyArray_DATA(a);
    for (i = 0; i < n; ++i, q += {nq})
        if (!(q[3] != 0 || q[4] != 0 || q[5] != 0 || q[6] != 0))
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}}
"""


def fast_entries(apis: list[dict[str, Any]], is_free: bool) -> list[tuple[str, str, list, list, bool, bool]]:
    """(entry name, C function, inputs, outputs, quaternion check, frame argument) of every fast entry:
    ``<api>`` for plain functions and for functions with ``f_ext`` (the call without it), ``<api>_local``
    and ``<api>_world`` for frame families."""
    out = []
    for api in apis:
        quat = is_free and "q" in api["input_names"]
        if api["kind"] in ("plain", "fext", "structured"):      # structured: the full-writing function
            out.append((api["name"], api["c"], api["inputs"], api["outputs"], quat, False))
        else:
            out.append((api["name"] + "_local", api["local"], api["inputs"], api["outputs"], quat, True))
            if api.get("world"):
                out.append((api["name"] + "_world", api["world"], api["inputs"], api["outputs"], quat, True))
    return out


def emit_fastcalls(robot: Robot, module_name: str, ext_name: str, specs: list[FunctionSpec],
                   header_name: str) -> str:
    """C of the single-call entry points (a translation unit of the extension, compiled against Python's
    and numpy's headers): see ``_FAST_HEAD``; ``<ext_name>_fastcalls()`` returns them in a dict."""
    entries = fast_entries(python_api(specs, module_prefix(module_name)), robot.is_free)
    body = "".join("\n" + _fast_entry(*e) for e in entries)
    names = [e[0] for e in entries]
    if robot.is_free:
        body += _FAST_QUATS.format(nq=robot.nq)
        names.append("quaternions_nonzero")
    methods = "".join(f'    {{"{e}", (PyCFunction)(void (*)(void))fx_{e}, METH_FASTCALL, NULL}},\n'
                      for e in names)
    return _FAST_HEAD.format(header=header_name) + body + _FAST_TAIL.format(methods=methods, ext=ext_name)
