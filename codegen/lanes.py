"""SIMD lanes across states: the batched entry point of a function evaluates ``lanes`` states at once.

:func:`vectorise` prints a function's statements (:mod:`soadyn.codegen.cprogram`) for a vector of
``lanes`` doubles (GCC/Clang vector extensions): each local becomes a vector, an input element a gather
(``SOADYN_LD``), an output store a store into a lane-major buffer transposed into the callers' arrays at
the end (:func:`transposition`), a sine and cosine of one argument one ``soadyn_vsincos`` (those of the
joint angles all in one ``soadyn_vsincos_n``: :func:`_fused_sincos`).  Every lane
computes exactly what the scalar code computes: the same IEEE operations in the same order
(``-ffp-contract=off``), the inline ``sin``/``cos`` of :mod:`soadyn.codegen.trig` per lane.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import groupby
from typing import NamedTuple

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Expr, Stmt
from soadyn.codegen.screen import parameter_screen
from soadyn.codegen.trig import C_COS, C_SIN, SINCOS8

#: a lanes transposition with more computed entries than this is a loop over a table of them
UNROLLED_STORES = 32
#: inputs that a SIMD batch reads lane-major (:func:`transposed_block`: one block transposition per
#: ``lanes`` entries, where the first of them is read; the states' rows prefetched at the start)
#: instead of gathering each entry where it is used: the run-time inertial parameters, ten per body, as
#: many as the state's entries several times over.  Gathered, they made the parameterised inverse
#: dynamics' batch of 2,000 states 1.45x the constant module's (Panda, 80 parameters, issue 26)
TRANSPOSED_INPUTS = frozenset({"params"})

#: the lanes' rows of a transposed input are prefetched at the start of the SIMD computation when they
#: hold at most this many bytes.  Measured on the inverse dynamics' C batch of 2,000 states, all bodies
#: parameterised, alternating copies (load 9): xArm7 (4 x 80 parameters, 2,560 bytes) 66-69 ns per state
#: with the prefetch against 72-73 without, chunks checked first as from Python 70-74 against 74-76; UR10
#: (2,240 bytes) 51 against 55 (checked chunks: equal); B1+Z1 (4 x 190, 6,080 bytes: 95 prefetches per
#: call) 195-207 with against 183-191 without, checked chunks 208-217 against 200-204
PREFETCH_MAX_BYTES = 4096

#: a lanes driver whose outputs' rows (all ``lanes`` states) hold at least this many bytes prefetches their
#: cache lines while its stages compute (:func:`prefetched_outputs`).  TALOS's FD derivatives (3 x 1,444
#: entries a state, 139 KB a lanes group; a batch of 2,000 states writes 69 MB, beyond the L3), C batch of
#: 2,000 states, ns a state, fresh copies alternating (load 6): 6,794-6,877 without, 5,487-5,689 with
#: ``prefetchw``, 4,774-5,035 with ``prefetcht0`` (a line read in the exclusive state is written without a
#: further request).  Not below: TALOS's Jacobian (7.3 KB a group, a batch of 2,000 within the L3) ran
#: 50-51 -> 56-60 ns a state with its 114 lines prefetched after the shared stage (either kind)
PREFETCH_OUTPUT_MIN = 32768

#: a full-writing delegate's output of at most this many entries is stored whole, every block read from
#: the core's slots through a table (:func:`whole_rows`); a larger one is zeroed with a memset and its
#: computed entries stored one by one (TALOS's mass matrix, 1,444 entries: whole rows, then from a zeroed
#: lane-major copy, took 852-858 ns per state against 568-581 for the memset; the xArm7's, 169 entries:
#: 89-93 against 105-109.  With the table, Intel Emerald Rapids, per round: TALOS 1.03, G1 0.89, Alex
#: 1.08 of the memset's time: the threshold stays; benchmarks/README.md, fifteenth session)
WHOLE_ROWS_MAX = 256
#: a full-writing function's output of more entries than this, a quarter or more of them exact zeros, is
#: zeroed in the lanes' rows with one memset and its other entries stored one by one (else every zero is
#: stored like the other constants, one unrolled scalar store per lane: TALOS's innovations factors,
#: 2,888 entries, ~2,400 of them zeros)
MEMSET_MIN = 256

#: the input whose rows (ten inertial parameters per body) a SIMD batch can screen in its lanes
#: (:func:`screen_function`): they are transposed lane-major there anyway (:data:`TRANSPOSED_INPUTS`)
SCREENED_INPUT = "params"


class _Array(NamedTuple):
    """A scratch array of a product's factors as the lanes fill it (like an output: name and size)."""

    name: str
    size: int


#: ``soadyn_vsum`` (:func:`screen_function`) for four lanes under AVX-512: eight doubles per vector
WIDE_SUM = """#if defined(__AVX512F__) && (defined(__clang__) || __GNUC__ >= 12)
    typedef double soadyn_w8 __attribute__((vector_size(64)));
    soadyn_w8 w, u = {0};
    int k;
    SOADYN_UNROLL
    for (k = 0; k + 8 <= n; k += 8) {
        __builtin_memcpy(&w, p + k, sizeof w);
        u += w;
    }
    s += __builtin_shufflevector(u, u, 0, 1, 2, 3) + __builtin_shufflevector(u, u, 4, 5, 6, 7);
    if (k + 4 <= n) {
        soadyn_v4d y;
        __builtin_memcpy(&y, p + k, sizeof y);
        s += y;
        k += 4;
    }
    for (; k < n; ++k)
        s[0] += p[k];
    return s;
#else
"""


def screen_function(lanes: int) -> str:
    """``soadyn_vscreen(c, rows)``: 1 when the ``rows`` rows of ten parameters of each of the ``lanes``
    states, lane-major (``c[10 r + k]``: entry k of row r of every state), all pass the parameter screen
    (:func:`soadyn.codegen.screen.parameter_screen`: the rule of ``clearly_consistent``, the same IEEE
    operations in the same order as the single-call entries' ``fx_screen``, so the same verdict on every
    row; a NaN or an infinity fails it), else 0; and ``soadyn_vfinite(c, n)``, the finiteness test of
    ``check_params=False``.  A SIMD batch with run-time parameters runs them on the columns it transposed
    for its own use (``<f>_batch_checked``, :func:`finish_lanes`) instead of the Python entry's separate
    pass over the rows before the batch (issue 26): 20 instead of 27 instructions per row (xArm7, AVX2).
    Four lanes under AVX-512: two rows per vector of eight (their columns side by side, one shuffle each),
    eight rows per vector as in ``fx_screen``."""
    vd = vector_type(lanes)
    screen = parameter_screen().splitlines()

    def rows(vt: str, mt: str, col: str, step: int, width: int) -> list[str]:
        return [f"{mt} ok = ({mt}){{0}} - 1;   /* every lane of every row so far */",
                f"#define T {vt}",
                f"for (; r + {step} <= rows; r += {step}, c += {10 * step}) {{",
                "    const T " + ", ".join(f"c{k} = {col.format(k=k, k10=k + 10)}" for k in range(10)) + ";",
                *(f"    {x}" for x in screen), "}", "#undef T",
                f"for (all = ok[0], l = 1; l < {width}; ++l)", "    all &= ok[l];",
                "if (!all)", "    return 0;"]

    vm = f"long long __attribute__((vector_size({8 * lanes})))"
    lines = ["long long all;", "int r = 0, l;"]
    if lanes == 4:
        lines += ["#if defined(__AVX512F__) && (defined(__clang__) || __GNUC__ >= 12)", "{",
                  "typedef double soadyn_w8 __attribute__((vector_size(64)));",
                  "typedef long long soadyn_m8 __attribute__((vector_size(64)));",
                  # row r + 1's half inserted from memory (vinsertf64x4 with a memory operand) instead
                  # of a second load and a register shuffle: the xArm7's screen alone 5.9 -> 5.5 ns a
                  # state, 114 -> 103 instructions (pbat4, benchmarks/README.md)
                  *rows("soadyn_w8", "soadyn_m8",
                        "(soadyn_w8)_mm512_insertf64x4(_mm512_castpd256_pd512((__m256d)c[{k}]), "
                        "(__m256d)c[{k10}], 1)", 2, 8),
                  "}", "#endif"]
    lines += ["{", f"typedef {vm} soadyn_vm;", *rows(vd, "soadyn_vm", "c[{k}]", 1, lanes), "}", "return 1;"]
    body = "".join(f"{x}\n" if x.startswith("#") else f"    {x}\n" for x in lines)
    um = f"unsigned long long __attribute__((vector_size({8 * lanes})))"
    finite = ("/* 1 when every lane of s is finite, by the bit test of fx_finite_d: (u & E) + 2^52 carries\n"
              " * into bit 63 exactly when the exponent is all ones */\n"
              f"static inline int soadyn_vfinite_sum({vd} s)\n{{\n"
              f"    typedef {um} soadyn_vu;\n"
              "    const soadyn_vu x = (((soadyn_vu)s) & ((soadyn_vu){0} + 0x7ff0000000000000ULL))\n"
              "                        + ((soadyn_vu){0} + 0x0010000000000000ULL);\n"
              "    unsigned long long t = 0;\n    int l;\n"
              f"    for (l = 0; l < {lanes}; ++l)\n        t |= x[l];\n    return !(t >> 63);\n}}\n"
              "/* 1 when every entry c[0 .. n - 1] of the lanes is finite: their sum per lane is (a NaN\n"
              " * or an infinity makes it NaN or infinite); one addition per vector instead of three bit\n"
              " * operations (xArm7, AVX2: 96 -> 42 instructions a state).  A sum that overflows returns 0:\n"
              " * the caller's fx_finite_d decides then */\n"
              f"static inline int soadyn_vfinite(const {vd} *c, int n)\n{{\n"
              f"    {vd} s0 = {{0}}, s1 = {{0}}, s2 = {{0}}, s3 = {{0}};\n"
              "    int k;\n"
              "    for (k = 0; k + 4 <= n; k += 4) {\n"
              "        s0 += c[k];\n        s1 += c[k + 1];\n"
              "        s2 += c[k + 2];\n        s3 += c[k + 3];\n"
              "    }\n"
              "    for (; k < n; ++k)\n        s0 += c[k];\n"
              "    return soadyn_vfinite_sum((s0 + s1) + (s2 + s3));\n}\n"
              "/* s plus the sum, per position in a vector, of the n doubles p[0 .. n - 1] (the lanes'\n"
              " * rows of a state input, contiguous: unaligned vector loads, the loop unrolled (n is a\n"
              " * constant where it is inlined); the last n % lanes one by one into lane 0): the lanes'\n"
              " * finiteness test of the state inputs (soadyn_vfinite_sum), instead of the Python entry's\n"
              " * separate pass over every state's q, v, a.  Eight doubles per vector with AVX-512 */\n"
              "#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 8\n"
              "#define SOADYN_UNROLL _Pragma(\"GCC unroll 16\")\n"
              "#else\n#define SOADYN_UNROLL\n#endif\n"
              f"static inline {vd} soadyn_vsum(const double *p, int n, {vd} s)\n{{\n"
              + (WIDE_SUM if lanes == 4 else "")
              + f"    {vd} x, y, t = {{0}};\n"
              "    int k;\n"
              "    SOADYN_UNROLL\n"
              f"    for (k = 0; k + {2 * lanes} <= n; k += {2 * lanes}) {{\n"
              "        __builtin_memcpy(&x, p + k, sizeof x);\n"
              f"        __builtin_memcpy(&y, p + k + {lanes}, sizeof y);\n"
              "        s += x;\n        t += y;\n    }\n"
              f"    for (; k + {lanes} <= n; k += {lanes}) {{\n"
              "        __builtin_memcpy(&x, p + k, sizeof x);\n        s += x;\n    }\n"
              "    for (; k < n; ++k)\n        s[0] += p[k];\n"
              "    return s + t;\n"
              + ("#endif\n" if lanes == 4 else "") + "}\n")
    wide = ("#if defined(__AVX512F__) && (defined(__clang__) || __GNUC__ >= 12)\n"
            "#include <immintrin.h>\n#endif\n" if lanes == 4 else "")
    return (f"#ifndef SOADYN_VSCREEN\n#define SOADYN_VSCREEN 1\n{wide}"
            # out of line: inlined, its AVX-512 code made the lanes driver's frame 64-byte aligned and the
            # xArm7's batch of 256 states, in cache, 1.15x slower even with the check off (58 -> 67 ns)
            "__attribute__((noinline))\n"
            f"static int soadyn_vscreen(const {vd} *c, int rows)\n{{\n{body}}}\n{finite}#endif")


def _screened(f, transposed: dict[str, tuple[int, set[int]]]) -> bool:
    """Whether the SIMD batch of ``f`` screens its parameter rows in its lanes (:func:`screen_function`):
    a function (not a frame family, no delegate's core) with the :data:`SCREENED_INPUT` read lane-major."""
    return (SCREENED_INPUT in transposed and not f.is_family and not f.core
            and transposed[SCREENED_INPUT][0] % 10 == 0)


_VFUNCS = {"sin": "soadyn_vsin", "cos": "soadyn_vcos", "sqrt": "soadyn_vsqrt", "pow": "soadyn_vpow",
           C_SIN: "soadyn_vsin", C_COS: "soadyn_vcos"}


def _natural(name: str) -> tuple:
    """Sort key: the digit runs of ``name`` as numbers (``q[10]`` after ``q[9]``)."""
    return tuple(int(t) if digits else t
                 for digits, t in ((d, "".join(g)) for d, g in groupby(name, str.isdigit)))


def vector_type(lanes: int) -> str:
    return f"soadyn_v{lanes}d"


def simd_prelude(lanes: int) -> str:
    """Type, per-lane math and gather/scatter macros of the SIMD batch code (GCC/Clang vector extensions;
    other compilers get the scalar loop).  Every lane computes exactly what the scalar code computes:
    the same IEEE operations in the same order (``-ffp-contract=off``), the inline ``sin``/``cos`` of
    :mod:`soadyn.codegen.trig` per lane."""
    vd = vector_type(lanes)
    lanes_list = range(lanes)
    ld = ", ".join(f"(p)[{i}*(s)+(k)]" if i else "(p)[k]" for i in lanes_list)

    def lanewise(name: str, f: str) -> str:
        return (f"static inline {vd} {name}({vd} x)\n{{\n    {vd} r;\n    int l;\n"
                f"    for (l = 0; l < {lanes}; ++l) r[l] = {f}(x[l]);\n    return r;\n}}\n")

    return "\n".join([
        "#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD) \\",
        f"    && !defined({vd.upper()})",
        f"#define {vd.upper()} 1",
        f"typedef double {vd} __attribute__((vector_size({8 * lanes})));",
        lanewise("soadyn_vsin", C_SIN) + lanewise("soadyn_vcos", C_COS) + lanewise("soadyn_vsqrt", "sqrt"),
        f"static inline {vd} soadyn_vpow({vd} x, double e)\n{{\n    {vd} r;\n    int l;\n"
        "    if (e == 2.0) return x*x;\n"
        f"    for (l = 0; l < {lanes}; ++l) r[l] = pow(x[l], e);\n    return r;\n}}",
        f"static inline void soadyn_vsincos({vd} x, {vd} *s, {vd} *c)\n{{\n"
        + ("    soadyn_sincos4(&x, s, c);\n}" if lanes == 4 else
           f"    int l;\n    for (l = 0; l < {lanes}; ++l) soadyn_sincos(x[l], &(*s)[l], &(*c)[l]);\n}}"),
        _vsincos_n(lanes),
        f"#define SOADYN_LD(p, k, s) (({vd}){{{ld}}})",
        _transposer(lanes),
        "#endif",
    ]) + "\n"


def _vsincos_n(lanes: int) -> str:
    """``soadyn_vsincos_n(x, s, c, n)``: the sines and cosines of ``n`` vectors of angles, one loop (the
    constants of the reduction and the polynomials stay in registers), the arguments out of the inline
    reduction's range (and inf, nan) through libm afterwards, as :func:`soadyn_vsincos` does per vector:
    the same bits.  With 512-bit vectors, 4 lanes take two vectors at a time
    (:data:`~soadyn.codegen.trig.SINCOS8`)."""
    vd = vector_type(lanes)
    head = (f"#if defined(__GNUC__) || defined(__clang__)\n__attribute__((noinline, unused))\n#endif\n"
            f"static void soadyn_vsincos_n(const {vd} *x, {vd} *s, {vd} *c, int n)\n{{\n")
    if lanes != 4:
        return head + "    int k;\n    for (k = 0; k < n; ++k) soadyn_vsincos(x[k], s + k, c + k);\n}"
    return SINCOS8 + head + (
        "    int k, l;\n"
        "    long long big = 0;\n"
        "    k = 0;\n"
        "#ifdef SOADYN_T8D\n"
        "    for (; k + 2 <= n; k += 2) soadyn_sincos8_core(x + k, s + k, c + k);\n"
        "#endif\n"
        "    for (; k < n; ++k) soadyn_sincos4_core(x + k, s + k, c + k);\n"
        "    for (k = 0; k < n; ++k) for (l = 0; l < 4; ++l) big |= !(fabs(x[k][l]) < SOADYN_TRIG_BIG);\n"
        "    if (big)\n"
        "        for (k = 0; k < n; ++k) for (l = 0; l < 4; ++l)\n"
        "            if (!(fabs(x[k][l]) < SOADYN_TRIG_BIG)) {\n"
        "                s[k][l] = sin(x[k][l]);\n"
        "                c[k][l] = cos(x[k][l]);\n"
        "            }\n}")


def shuffle_macro(name: str, width: int) -> list[str]:
    """Lines defining ``name(a, b, i, j, ...)``: the shuffle of two vectors of ``width`` doubles by lane
    indices (``__builtin_shufflevector`` where gcc >= 12 or clang has it, else gcc's ``__builtin_shuffle``
    with a mask vector)."""
    mask = f"long long __attribute__((vector_size({8 * width})))"
    return ["#if defined(__clang__) || __GNUC__ >= 12",
            f"#define {name}(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)",
            "#else",
            f"#define {name}(a, b, ...) __builtin_shuffle(a, b, ({mask}){{__VA_ARGS__}})",
            "#endif"]


def _transposer(lanes: int) -> str:
    """``soadyn_tr(t, p, s)``: the ``lanes`` x ``lanes`` block ``p[l * s + j]`` (state l, entry j) into
    ``t[j][l]``: ``lanes`` vector loads and shuffles instead of ``lanes`` gathers (``SOADYN_LD``) of
    scalars.  Data movement only: the values are the same bits."""
    vd = vector_type(lanes)
    head = f"static inline void soadyn_tr({vd} *t, const double *p, int s)\n{{\n"
    # the inverse, soadyn_trs(p, s, t): t[j][l] into p[l * s + j], the lanes' rows stored whole
    shead = f"static inline void soadyn_trs(double *p, int s, const {vd} *t)\n{{\n"
    if lanes not in (2, 4):
        return (head + f"    int j;\n    for (j = 0; j < {lanes}; ++j) t[j] = SOADYN_LD(p, j, s);\n}}\n"
                + shead + f"    int j, l;\n    for (j = 0; j < {lanes}; ++j) for (l = 0; l < {lanes}; ++l) "
                "p[l * s + j] = t[j][l];\n}")
    shuf = shuffle_macro("SOADYN_SHUF", lanes)
    loads = "".join(f"    __builtin_memcpy(&r{i}, p + {i} * s, sizeof r{i});\n" for i in range(lanes))
    stores = "".join(f"    __builtin_memcpy(p + {i} * s, &r{i}, sizeof r{i});\n" for i in range(lanes))
    if lanes == 2:
        body = (f"    {vd} r0, r1;\n{loads}"
                "    t[0] = SOADYN_SHUF(r0, r1, 0, 2);\n    t[1] = SOADYN_SHUF(r0, r1, 1, 3);\n")
        sbody = (f"    const {vd} r0 = SOADYN_SHUF(t[0], t[1], 0, 2);\n"
                 f"    const {vd} r1 = SOADYN_SHUF(t[0], t[1], 1, 3);\n{stores}")
    else:
        top = f"    {vd} r0, r1, r2, r3;\n{loads}"
        shuffles = (f"    const {vd} a0 = SOADYN_SHUF(r0, r1, 0, 4, 2, 6);\n"
                    f"    const {vd} a1 = SOADYN_SHUF(r0, r1, 1, 5, 3, 7);\n"
                    f"    const {vd} a2 = SOADYN_SHUF(r2, r3, 0, 4, 2, 6);\n"
                    f"    const {vd} a3 = SOADYN_SHUF(r2, r3, 1, 5, 3, 7);\n"
                    "    t[0] = SOADYN_SHUF(a0, a2, 0, 1, 4, 5);\n"
                    "    t[1] = SOADYN_SHUF(a1, a3, 0, 1, 4, 5);\n"
                    "    t[2] = SOADYN_SHUF(a0, a2, 2, 3, 6, 7);\n"
                    "    t[3] = SOADYN_SHUF(a1, a3, 2, 3, 6, 7);\n")
        body = top + shuffles
        sbody = (f"    const {vd} a0 = SOADYN_SHUF(t[0], t[1], 0, 4, 2, 6);\n"
                 f"    const {vd} a1 = SOADYN_SHUF(t[0], t[1], 1, 5, 3, 7);\n"
                 f"    const {vd} a2 = SOADYN_SHUF(t[2], t[3], 0, 4, 2, 6);\n"
                 f"    const {vd} a3 = SOADYN_SHUF(t[2], t[3], 1, 5, 3, 7);\n"
                 f"    const {vd} r0 = SOADYN_SHUF(a0, a2, 0, 1, 4, 5);\n"
                 f"    const {vd} r1 = SOADYN_SHUF(a1, a3, 0, 1, 4, 5);\n"
                 f"    const {vd} r2 = SOADYN_SHUF(a0, a2, 2, 3, 6, 7);\n"
                 f"    const {vd} r3 = SOADYN_SHUF(a1, a3, 2, 3, 6, 7);\n{stores}")
    if lanes == 4:
        # AVX-512: the rows of states 0, 1 and of 2, 3 side by side in two eight-double vectors, and entries
        # k, k + 1 (k + 2, k + 3) of the four states from one two-source permutation of them (vpermt2pd),
        # stored as t[0], t[1] (t[2], t[3]) by one store: two shuffles and two permutations instead of eight
        # shuffles, two stores instead of four.  The xArm7's parameterised inverse dynamics (20 blocks of
        # parameters per group of four states) batch of 2,000 states, C alone: -2 ns a state (issue 26)
        body = (top + "#if defined(__AVX512F__) && (defined(__clang__) || __GNUC__ >= 12)\n"
                "    typedef double soadyn_w8tr __attribute__((vector_size(64)));\n"
                "    const soadyn_w8tr a = __builtin_shufflevector(r0, r1, 0, 1, 2, 3, 4, 5, 6, 7);\n"
                "    const soadyn_w8tr b = __builtin_shufflevector(r2, r3, 0, 1, 2, 3, 4, 5, 6, 7);\n"
                "    const soadyn_w8tr x = __builtin_shufflevector(a, b, 0, 4, 8, 12, 1, 5, 9, 13);\n"
                "    const soadyn_w8tr y = __builtin_shufflevector(a, b, 2, 6, 10, 14, 3, 7, 11, 15);\n"
                "    __builtin_memcpy(t, &x, sizeof x);\n"
                "    __builtin_memcpy(t + 2, &y, sizeof y);\n"
                f"#else\n{shuffles}#endif\n")
    return "\n".join(shuf) + "\n" + head + body + "}\n" + shead + sbody + "}"


def transposed_block(name: str, size: int, lanes: int, block: int) -> list[str]:
    """Lines filling block ``block`` of ``T_<name>``, the input ``name`` (``size`` entries per state) of the
    ``lanes`` states in lane-major order (``T_<name>[k]``: entry k of every state): one ``soadyn_tr``, or
    gathers for the last ``size % lanes`` entries."""
    lo = block * lanes
    if lo + lanes <= size:
        return [f"soadyn_tr(T_{name} + {lo}, {name} + {lo}, {size});"]
    return [f"T_{name}[{k}] = SOADYN_LD({name}, {k}, {size});" for k in range(lo, size)]


def _blocks_first_used(expr: Expr, transposed: dict[str, tuple[int, set[int]]], lanes: int) -> list[str]:
    """Lines transposing the blocks of ``transposed`` inputs (name -> (size, blocks done)) that ``expr``
    reads for the first time (marked done): each block is transposed where it is first needed, between
    the operations, rather than all at the start (measured on the inverse dynamics' batch of 256 states,
    in cache: 1.18x the constant module all at the start, 1.09-1.11x where first read)."""
    if not transposed:
        return []
    out: list[str] = []
    for t in expr.tokens:
        if cp.is_element(t):
            name, k = cp.element(t)
            if name in transposed:
                size, done = transposed[name]
                if k // lanes not in done:
                    done.add(k // lanes)
                    out += transposed_block(name, size, lanes, k // lanes)
    return out


def _vexpr(expr: Expr, inputs: dict[str, int], lanes: int = 0,
           transposed: dict | frozenset = frozenset()) -> str:
    """A scalar expression for ``lanes`` states (``lanes`` 0: no constant broadcast): input elements
    gathered (or read from the lane-major ``T_<name>`` of a ``transposed`` input), math calls by their
    vector versions, a constant broadcast to a vector."""
    if lanes and cp.is_constant(expr):
        # a constant: broadcast (x - 0.0 == x exactly for every x, signed zeros included)
        return f"({expr.text}) - ({vector_type(lanes)}){{0}}"
    out = []
    for t in _vcalls(expr.tokens):
        if cp.is_element(t):
            name, k = cp.element(t)
            if name in transposed:
                t = f"T_{name}[{k}]"
            elif name in inputs:
                t = f"SOADYN_LD({name}, {k}, {inputs[name]})"
        out.append(t)
    return "".join(out)


def _vcalls(toks: list[str]) -> list[str]:
    """Math calls -> their vector versions, except a call whose argument is a constant (it stays a scalar
    ``double``, which GCC/Clang broadcast in an operation with a vector)."""
    out: list[str] = []
    i = 0
    while i < len(toks):
        t = toks[i]
        if t in _VFUNCS and i + 1 < len(toks) and toks[i + 1] == "(":
            depth, j = 1, i + 2
            while depth and j < len(toks):
                depth += {"(": 1, ")": -1}.get(toks[j], 0)
                j += 1
            args = toks[i + 2:j - 1]
            if cp.is_constant(Expr.of_tokens(args)):
                out += toks[i:j]
            else:
                out += [_VFUNCS[t], "(", *_vcalls(args), ")"]
            i = j
        else:
            out.append(t)
            i += 1
    return out


def _sincos_pairs(stmts: list[Stmt]) -> dict[str, int]:
    """Arguments of which the statements take both the sine and the cosine, numbered in natural order."""
    sins: set[str] = set()
    coss: set[str] = set()
    for s in stmts:
        if s.expr is not None and s.kind != cp.LOAD:
            for fn, a, _ in s.expr.trig_args():
                (sins if fn == "sin" else coss).add(a)
    return {a: k for k, a in enumerate(sorted(sins & coss, key=_natural))}


def vectorise(stmts: list[Stmt], inputs: dict[str, int], outputs: dict[str, int], lanes: int,
              rename: dict[str, str], slots: dict[str, dict[int, int]] | None = None,
              transposed: dict[str, tuple[int, set[int]]] | None = None) -> list[str] | None:
    """The statements of a straight-line body printed for ``lanes`` states at once (None if one cannot
    be: a switch, a run of zeros, a call of something else than a stage).  ``inputs``/``outputs``: array
    parameters and their sizes (state strides); ``rename``: called functions (stages) -> their vector
    versions; ``slots``: output entry -> its slot in the lane-major buffer (an entry without a slot, a
    constant, is not stored there); ``transposed``: inputs read from their lane-major ``T_<name>``, name ->
    (size, blocks already transposed: shared by the stages of a function, vectorised in the order they
    run), each block transposed where it is first read (:func:`transposed_block`)."""
    transposed = {} if transposed is None else transposed
    vd = vector_type(lanes)
    # sin(x) and cos(x) of one argument: one sincos per lane (what gcc does for the scalar code)
    pairs = _sincos_pairs(stmts)
    # those of input elements (joint angles) all at once where the first is needed: one soadyn_vsincos_n
    # over an array of them (a loop with its constants in registers), as the scalar code's soadyn_sincos_n
    fused = _fused_sincos(stmts, pairs, inputs, transposed)
    names = {a: (f"sv_s[{i}]", f"sv_c[{i}]") if a in fused else (f"sc_s{j}", f"sc_c{j}")
             for i, a in enumerate(sorted(fused, key=lambda a: pairs[a]))
             for j in [pairs[a]]} | {a: (f"sc_s{j}", f"sc_c{j}") for a, j in pairs.items() if a not in fused}
    done: set[str] = set()
    out = []
    for s in stmts:
        k = s.kind
        if k in cp.VALUES:
            expr = s.expr
            out += _blocks_first_used(expr, transposed, lanes)
            here = {a for _, a, _ in expr.trig_args()} & pairs.keys()
            if here & fused.keys() and not done & fused.keys():
                done.update(fused)
                order = sorted(fused, key=lambda a: pairs[a])
                out.append(f"{vd} sv_x[{len(order)}], sv_s[{len(order)}], sv_c[{len(order)}];")
                out += _gathered("sv_x", [fused[a] for a in order], inputs, lanes)
                out.append(f"soadyn_vsincos_n(sv_x, sv_s, sv_c, {len(order)});")
            for a in sorted(here, key=_natural):
                j = pairs[a]
                if a not in done:
                    done.add(a)
                    out.append(f"{vd} sc_s{j}, sc_c{j};")
                    arg = _vexpr(Expr(a), inputs, 0, transposed)
                    out.append(f"soadyn_vsincos({arg}, &sc_s{j}, &sc_c{j});")
            if here:
                expr = _substitute_trig(expr, {a: names[a] for a in here})
            out.append(f"const {vd} {s.target} = {_vexpr(expr, inputs, lanes, transposed)};")
        elif k == cp.STORE and s.target in outputs:  # into the lane-major output buffer (transposed later)
            j = s.index
            if slots is not None:
                if j not in slots[s.target]:
                    continue
                j = slots[s.target][j]
            out += _blocks_first_used(s.expr, transposed, lanes)
            out.append(f"o_{s.target}[{j}] = {_vexpr(s.expr, inputs, lanes, transposed)};")
        elif k == cp.WORK:
            out.append(f"w[{s.index}] = {s.target};")
        elif k == cp.SCRATCH and s.target == "w" and not s.zero:
            out.append(f"{vd} w[{s.index}];")
        elif k == cp.CALL and s.target in rename:
            args = ", ".join(f"o_{a}" if a in outputs else f"{a}, T_{a}" if a in transposed else a
                             for a in s.args)
            out.append(f"{rename[s.target]}({args});")
        elif k == cp.ZEROS and s.target in outputs and all(
                slots is None or slots[s.target].get(j) == j for j in range(s.index, s.end)):
            out.append(f"for (int k = {s.index}; k < {s.end}; ++k) o_{s.target}[k] = ({vd}){{0}};")
        elif k == cp.SWITCH and not transposed:
            # a frame family's cases (one frame for the whole batch): each case's statements for the lanes
            out.append("switch (frame) {")
            for c in s.cases:
                inner = vectorise(c.body, inputs, outputs, lanes, rename, slots, transposed)
                if inner is None:
                    return None
                out += [f"case {c.enumerator}: {{", *inner, "break;", "}"]
            out += ["default: break;", "}"]
        elif k == cp.VOID:
            out.append(f"(void)o_{s.target};" if s.target in outputs else f"(void){s.target};")
        elif k == cp.COMMENT:
            out.append(f"/* {s.text} */")
        elif k == cp.PREFETCH:   # the entries that are multiples of 8 by one loop, the last one alone
            first, last = -(-s.index // 8) * 8, s.end // 8 * 8
            if first <= last:
                out.append(f"for (int k = {first}; k <= {last}; k += 8) "
                           f"__builtin_prefetch({s.target} + k, 0, 3);")
            if s.end % 8:
                out.append(f"__builtin_prefetch({s.target} + {s.end}, 0, 3);")
        else:
            return None
    return out


def _substitute_trig(expr: Expr, names: dict[str, tuple[str, str]]) -> Expr:
    """``expr`` with each ``sin(a)``/``cos(a)`` of ``names`` replaced by the lanes' sine or cosine of ``a``
    (``names[a]``: the two C names)."""
    toks = list(expr.tokens)
    for fn, a, i in sorted(expr.trig_args(), key=lambda x: -x[2]):
        if a in names:
            toks[i:i + 4] = [names[a][fn == "cos"]]
    return Expr.of_tokens(toks)


def _gathered(name: str, elements: list[str], inputs: dict[str, int], lanes: int) -> list[str]:
    """Lines setting ``name[i]`` to input element ``elements[i]`` of the ``lanes`` states: ``lanes``
    consecutive entries of one input by one block transposition (``soadyn_tr``), the others gathered."""
    out = []
    i = 0
    while i < len(elements):
        arr, k = cp.element(elements[i])
        run = elements[i:i + lanes]
        if len(run) == lanes and all(cp.element(e) == (arr, k + m) for m, e in enumerate(run)):
            out.append(f"soadyn_tr({name} + {i}, {arr} + {k}, {inputs[arr]});")
            i += lanes
        else:
            out.append(f"{name}[{i}] = SOADYN_LD({arr}, {k}, {inputs[arr]});")
            i += 1
    return out


#: at least this many sine-cosine pairs of input elements in a body are computed by one
#: ``soadyn_vsincos_n`` call (:func:`_fused_sincos`)
FUSED_SINCOS_MIN = 2


def _fused_sincos(stmts: list[Stmt], pairs: dict[str, int], inputs: dict[str, int],
                  transposed: dict) -> dict[str, str]:
    """The sine-cosine arguments of ``pairs`` that are elements of an input (not read lane-major), or loads
    of one, -> the element: computed together by ``soadyn_vsincos_n`` where the first is needed (at least
    :data:`FUSED_SINCOS_MIN` of them; else none).  One call per angle (``soadyn_vsincos``, out of line)
    reloaded the reduction's and the polynomials' constants every time: TALOS's body poses, 32 angles,
    ~120 instructions per call, half of the SIMD batch's instructions (issue 26)."""
    loads = {s.target: s.expr.text for s in stmts if s.kind == cp.LOAD}
    out = {}
    for a in pairs:
        e = a if cp.is_element(a) else loads.get(a)
        if e is not None and cp.is_element(e) and cp.element(e)[0] in inputs \
                and cp.element(e)[0] not in transposed:
            out[a] = e
    return out if len(out) >= FUSED_SINCOS_MIN else {}


@dataclass
class Extra:
    """What :func:`soadyn.codegen.units.finish_function` adds to a generated function (printed before it in
    the source)."""

    pieces: list[str] = field(default_factory=list)       # C definitions: stages, vector stages, lanes driver
    #: where the SIMD batch's pieces (its vector stages and lanes driver, :func:`finish_lanes`) start in
    #: ``pieces`` (None: no SIMD stages of its own)
    simd_from: int | None = None
    prototypes: list[str] = field(default_factory=list)
    lanes: int = 1
    vectorised: bool = False
    #: the SIMD computation as a function of its own (``<name>_lanes_core(inputs, o_outputs)``) that a
    #: delegating function reuses: (its name, its parameter list, {output: (slots, [(entry, constant or
    #: None, slot)])})
    core: tuple[str, str, dict[str, tuple[int, list[tuple[int, str | None, int]]]]] | None = None

    @property
    def text(self) -> str:
        if not self.pieces:
            return ""
        return "\n".join(self.prototypes) + "\n\n" + "\n".join(self.pieces)


def block(signature: str, lines: list[str]) -> str:
    return f"{signature}\n{{\n" + "".join(f"    {x}\n" for x in lines) + "}\n"


def guarded(lanes: int, text: str) -> str:
    return f"#ifdef {vector_type(lanes).upper()}\n{text}#endif\n"


def _memset_rows(f, a, stored: dict[str, list[tuple[int, str | None]]]) -> bool:
    """Output ``a`` of ``f`` is large, written whole, a quarter or more of it exact zeros: the SIMD batch
    zeroes the lanes' rows with one memset and stores the other entries one by one (:data:`MEMSET_MIN`)."""
    zeros = sum(c == "0" for _, c in stored[a.name])
    return (not f.core and a.size > MEMSET_MIN and 4 * zeros >= a.size
            and sorted(k for k, _ in stored[a.name]) == list(range(a.size)))


def _slots(f, stored: dict[str, list[tuple[int, str | None]]], arrays=None
           ) -> tuple[dict[str, bool], dict[str, dict[int, int]]]:
    """Outputs whose every entry the statements store (computed values or constants, in any order) keep
    slot = entry, their constants broadcast into the lane-major buffer, and are copied back a lanes x
    lanes block at a time; the others are packed (entries left alone, a delegate's core, or large and
    zeroed by a memset: :func:`_memset_rows`): (packed per output, {output: {entry: slot}}).  Whole
    blocks instead of one vector load and ``lanes`` scalar stores per computed entry (and ``lanes`` per
    constant): the fixed xArm7's body poses (96 entries, 24 constants) took 600 instructions per state in
    the SIMD batch, a third of them in that copy, against 780 for a single call; 459 with whole blocks
    (batch / single call 0.86 -> 0.62 in a C loop; issue 26)."""
    arrays = f.outputs if arrays is None else arrays
    packed = {a.name: sorted(k for k, _ in stored[a.name]) != list(range(a.size))
              or (any(c is not None for _, c in stored[a.name]) and (f.core or _memset_rows(f, a, stored)))
              for a in arrays}
    slots: dict[str, dict[int, int]] = {}
    for a in arrays:
        # packed slots in entry order: a run of consecutive entries has consecutive slots (:func:`_runs`)
        computed = sorted(k for k, c in stored[a.name] if c is None)
        slots[a.name] = {k: j for j, k in enumerate(computed)} if packed[a.name] else {k: k for k in computed}
    return packed, slots


def finish_lanes(f, extra: Extra, lanes: int, main: list[Stmt], staged,
                 stored: dict[str, list[tuple[int, str | None]]], products: list[Stmt] = ()) -> None:
    """The ``lanes``-wide SIMD batch of ``f``: its statements ``main`` (the body, or the calls of the
    stages ``staged``: :class:`soadyn.codegen.stages.Staged`, each stage vectorised too) printed by
    :func:`vectorise` into lane-major buffers, transposed into the callers' arrays at the end; ``stored``:
    the entries the statements store (:func:`~soadyn.codegen.cprogram.stored_entries`).
    ``products``: the single call's product-loop calls (:data:`~soadyn.codegen.cprogram.PRODUCT`
    statements, comments ignored), which then run per state after the lanes (:func:`_lanes_batch_body`):
    the statements fill the scratch arrays of the factors (``f.scratch``) like outputs, lane-major, and
    the driver transposes them into the batch entry's arrays of ``lanes`` rows."""
    calls = [s for s in products if s.kind == cp.PRODUCT]
    if calls and (f.core or f.is_family):
        return
    frame = [("int ", "frame")] if f.is_family else []
    scratch = [_Array(n, size) for n, size in f.scratch] if calls else []
    outs = f.outputs + scratch
    params = ([("const double *", a.name) for a in f.inputs] + frame
              + [("double *", a.name) for a in outs])
    inputs = {a.name: a.size for a in f.inputs}
    outputs = {a.name: a.size for a in outs}
    packed, slots = _slots(f, stored, outs)
    vname = f"{f.cname}_lanes"
    vd = vector_type(lanes)
    decl = ", ".join(f"{t}{p}" for t, p in params)
    vdecl = ", ".join([f"const double *{a.name}" for a in f.inputs]
                      + [f"{vd} *o_{a.name}" for a in outs])
    transposed: dict[str, tuple[int, set[int]]] = {a.name: (a.size, set()) for a in f.inputs
                                                    if a.name in TRANSPOSED_INPUTS}
    sdecl = ", ".join([f"const double *{a.name}, {vd} *T_{a.name}" if a.name in transposed
                       else f"const double *{a.name}" for a in f.inputs]
                      + [f"{vd} *o_{a.name}" for a in outs])
    rename = {}
    work: dict[str, tuple[set[int], set[int]]] = {}     # stage -> work-array entries (read, written)
    vpieces, vprotos = [], []
    if staged is not None:
        for name, body in zip(staged.names, staged.stage_bodies):
            vstage = vname + name.removeprefix(f.cname)        # <f>_lanes_stage<k>, <f>_lanes_case<j>
            rename[name] = vstage
            vbody = vectorise(body, inputs, outputs, lanes, {}, slots, transposed)
            if vbody is None:
                return
            # a stage may read only blocks an earlier stage transposed, or none
            vbody = [x for n in sorted(transposed) for x in (f"(void){n};", f"(void)T_{n};")] + vbody
            work[name] = work_entries(body)
            sig = f"void {vstage}({sdecl}, {vd} *w)"
            vprotos.append(f"SOADYN_STAGE {sig};")
            vpieces.append(guarded(lanes, block(f"SOADYN_STAGE {sig}", vbody)))
    if f.is_family:
        main = prefix_where_read(main, work)
    if not f.core:   # (a core writes lane-major buffers only)
        main = prefetched_outputs(main, [(a.name, a.size) for a in f.outputs], lanes, set(rename))
    vbody = vectorise(main, inputs, outputs, lanes, rename, slots, transposed)
    if vbody is None:
        return
    screened = _screened(f, transposed)
    if screened:
        # check: the blocks of the parameters no statement read, then the screen of the lanes' rows
        size, done = transposed[SCREENED_INPUT]
        rest = [x for b in range(-(-size // lanes)) if b not in done
                for x in transposed_block(SCREENED_INPUT, size, lanes, b)]
        states = [a for a in f.inputs if a.name != SCREENED_INPUT]
        # check & 4: the state inputs' rows (contiguous: lanes x size) finite, from one sum per vector
        # position; check & 8 (a free base's q): no lane's quaternion q[3:7] all zeros.  The Python entry
        # tested them in a pass of its own over the whole batch before (xArm7: 2.5-4.6 ns a state)
        quat = next((a for a in f.inputs if a.name == "q" and a.size >= 7), None)
        sums = "".join(f"soadyn_vsum({a.name}, {lanes * a.size}, " for a in states)
        screen = (["if (!check)", "    return 1;",
                   *(["if (check & 4) {",
                      f"    const {vd} s = {sums}({vd}){{0}}{')' * len(states)};",
                      "    if (!soadyn_vfinite_sum(s))", "        return 0;", "}"] if states else []),
                   *([f"if (check & 8) for (l = 0; l < {lanes}; ++l)",
                      "    if (!(" + " || ".join(f"q[l * {quat.size} + {k}] != 0" for k in range(3, 7))
                      + "))",
                      "        return 0;"] if quat is not None else []),
                   *rest,
                   f"return (check & 3) == 1 ? soadyn_vscreen(T_{SCREENED_INPUT}, {size // 10})",
                   f"     : (check & 3) == 2 ? soadyn_vfinite(T_{SCREENED_INPUT}, {size}) : 1;"])
    # the lane-major buffers, filled block by block where first read; the lanes' rows of the inputs
    # prefetched (one per 64-byte line) first: in cache as fast as gathers, and on 2,000 states (out of
    # cache) 1.27-1.29x the constant module instead of 1.45 (Panda, xArm7; transposed all at the start:
    # 1.18x in cache, 1.27 out of it)
    # (rows of at most PREFETCH_MAX_BYTES in all: see there)
    vbody = [x for a in f.inputs if a.name in transposed
             for x in ([f"{vd} T_{a.name}[{a.size}];"]
                       + [f"for (int k = 0; k < {lanes * a.size}; k += 8) __builtin_prefetch({a.name} + k);"]
                       * (8 * lanes * a.size <= PREFETCH_MAX_BYTES))
             ] + vbody
    if f.core:   # a function whose SIMD computation a delegating function reuses
        core = f"{vname}_core"
        vprotos.append(f"void {core}({vdecl});")
        vpieces.append(guarded(lanes, block(f"void {core}({vdecl})", vbody)))
        vbody = [f"{core}({', '.join([a.name for a in f.inputs] + [f'o_{a.name}' for a in outs])});"]
        extra.core = (core, vdecl, {a.name: (len(slots[a.name]), [(k, c, slots[a.name].get(k, -1))
                                                                  for k, c in stored[a.name]])
                                    for a in outs})
    # lane-major buffers, transposed into the callers' arrays at the end: measured 185 vs 347 ns per
    # state for the Panda's mass matrix against extracting each lane at every output store.  An output
    # with constant entries (the mass matrix's structural zeros) or entries left alone (its variants for a
    # zeroed output) keeps only its computed entries there, in slots, and the transposition writes each
    # stored entry by name, the constants directly
    plain = [a for a in outs if not packed[a.name]]
    vbody = ([f"{vd} o_{a.name}[{a.size if not packed[a.name] else max(len(slots[a.name]), 1)}];"
              for a in outs] + vbody + ["int k, l;" if plain else "int l;"])
    for a in outs:
        if not packed[a.name]:
            # the constants broadcast into the buffer, then a lanes x lanes block at a time (soadyn_trs:
            # shuffles, then each lane's row stored whole): lanes vector stores instead of lanes^2 scalar ones
            vbody += [f"o_{a.name}[{k}] = ({vd}){{{', '.join([c] * lanes)}}};"
                      for k, c in stored[a.name] if c is not None]
            vbody.append(f"for (k = 0; k + {lanes} <= {a.size}; k += {lanes}) "
                         f"soadyn_trs({a.name} + k, {a.size}, o_{a.name} + k);")
            vbody.append(f"for (; k < {a.size}; ++k) for (l = 0; l < {lanes}; ++l) "
                         f"{a.name}[l * {a.size} + k] = o_{a.name}[k][l];")
            continue
        entries = [(k, c, slots[a.name].get(k, -1)) for k, c in stored[a.name]]
        if _memset_rows(f, a, stored):
            # a large full-writing output, a quarter or more exact zeros: the lanes' rows zeroed at once
            vbody.append(f"__builtin_memset({a.name}, 0, sizeof(double) * {lanes * a.size});")
            vbody += transposition(a.name, a.size, lanes, entries, zeroed=True)
            continue
        vbody += transposition(a.name, a.size, lanes, entries, zeroed=False)
    sig = f"void {vname}({decl})"
    if screened:   # check & 3: 1, the screen of the parameter rows too, 2, their finiteness; check & 4: the
        # state inputs finite, & 8: the quaternions nonzero (1 when all pass); 0: none (returns 1)
        sig = f"int {vname}({decl}, int check)"
        vbody += screen
    vprotos.append(f"{sig};")
    # the screen in the driver's piece (its unit: a large function's SIMD pieces are split into several)
    vpieces.append(guarded(lanes, (screen_function(lanes) + "\n" if screened else "") + block(sig, vbody)))
    extra.prototypes += [guarded(lanes, "\n".join(vprotos) + "\n")]
    extra.simd_from = len(extra.pieces)
    extra.pieces += vpieces
    extra.vectorised = True
    f.batch_body = _lanes_batch_body(f, vname, lanes, screened, scratch, calls)
    if screened:
        f.batch_checked_body = _lanes_checked_body(f, vname, lanes, scratch, calls)


def work_entries(body: list[Stmt]) -> tuple[set[int], set[int]]:
    """The work-array entries a stage's statements (``Staged.stage_bodies``) read -- the elements ``w[k]``
    of their expressions -- and write (:data:`~soadyn.codegen.cprogram.WORK` statements)."""
    read: set[int] = set()
    written: set[int] = set()
    for s in body:
        if s.kind == cp.WORK:
            written.add(s.index)
        elif s.expr is not None:
            read.update(k for t in s.expr.tokens if cp.is_element(t)
                        for a, k in [cp.element(t)] if a == "w")
    return read, written


def prefix_where_read(main: list[Stmt], work: dict[str, tuple[set[int], set[int]]]) -> list[Stmt]:
    """A frame family's lanes driver statements ``main`` with the calls of its shared prefix's stages
    (before the switch) moved into the cases whose stages read an entry of the work array they write
    (``work``: stage -> entries read, written; :func:`work_entries`), and out of the others: the prefix
    computes values for the cases only (a family's prefix stores no output: :func:`family_cases`), so a
    case that reads none of them (TALOS's leg and base frames: the torso's angles, a lone vector of sines
    and cosines, a sixth of the Jacobian batch's time) runs without it.  The same values, the same bits."""
    top = next((i for i, s in enumerate(main) if s.kind == cp.SWITCH), None)
    if top is None:
        return main

    def stage(s: Stmt) -> bool:
        return s.kind == cp.CALL and s.target in work

    prefix = [s for s in main[:top] if stage(s)]
    if not prefix:
        return main
    written = set().union(*(work[s.target][1] for s in prefix))
    reads = [any(work[s.target][0] & written for s in c.body if stage(s)) for c in main[top].cases]
    cases = [cp.Case(c.enumerator, c.comment, (prefix if r else []) + c.body)
             for c, r in zip(main[top].cases, reads)]
    return [s for s in main[:top] if not stage(s)] + [Stmt(cp.SWITCH, cases=cases)] + main[top + 1:]


def prefetched_outputs(main: list[Stmt], outputs: list[tuple[str, int]], lanes: int,
                       stages: set[str]) -> list[Stmt]:
    """``main`` (a lanes driver's statements) with the cache lines of the ``lanes`` states' rows of the
    outputs (name, entries per state) prefetched in slices (:data:`~soadyn.codegen.cprogram.PREFETCH`
    statements) after its calls of ``stages`` (those before a frame family's switch), when they hold at
    least :data:`PREFETCH_OUTPUT_MIN` bytes: the lines come from memory while the stages compute, not
    when the transposition and the product loops first write them.  Prefetches only: the same stores,
    the same bits."""
    total = sum(lanes * size for _, size in outputs)
    # the calls before a frame family's switch (its cases' calls: one runs)
    top = next((i for i, s in enumerate(main) if s.kind == cp.SWITCH), len(main))
    calls = [i for i, s in enumerate(main[:top]) if s.kind == cp.CALL and s.target in stages]
    if 8 * total < PREFETCH_OUTPUT_MIN or not calls:
        return main
    # the rows of every output one after the other, in lines of 8 doubles (the last entry of each too)
    lines = [(name, k) for name, size in outputs
             for k in [*range(0, lanes * size, 8), *([lanes * size - 1] if (lanes * size - 1) % 8 else [])]]
    per = -(-len(lines) // len(calls))
    out, done = [], 0
    for i, s in enumerate(main):
        out.append(s)
        if calls and i == calls[0]:
            calls.pop(0)
            part, done = lines[done:done + per], done + per
            for name, group in groupby(part, key=lambda t: t[0]):
                ks = [k for _, k in group]
                out.append(Stmt(cp.PREFETCH, name, index=ks[0], end=ks[-1]))
    return out


def _lane_args(f) -> str:
    return ", ".join([f"{a.name} + (long)i * {a.size}" for a in f.inputs] + (["frame"] if f.is_family else [])
                     + [f"{a.name} + (long)i * {a.size}" for a in f.outputs])


def _lanes_checked_body(f, vname: str, lanes: int, scratch: list[_Array] = (),
                        calls: list[Stmt] = ()) -> list[str]:
    """The body of ``<f>_batch_checked`` (:func:`batch_checked_text`) with a SIMD batch that checks its
    parameter rows: ``lanes`` states at a time through ``vname`` with its check, up to the first group whose
    rows fail (computed, but not counted); ``scratch``, ``calls``: see :func:`_per_state_products`."""
    vd = vector_type(lanes)
    args = _lane_args(f) + "".join(f", {a.name}" for a in scratch)
    decls, run = _per_state_products(f, lanes, scratch, calls)
    return ["int i = 0;", *_voids(f), f"#ifdef {vd.upper()}", "{", *decls,
            f"for (; i + {lanes} <= n; i += {lanes}) {{",
            f"    if (!{vname}({args}, check))", "        break;", *run, "}", "}", "#endif", "return i;"]


def _per_state_products(f, lanes: int, scratch: list[_Array], calls: list[Stmt]
                        ) -> tuple[list[str], list[str]]:
    """The batch entry's arrays of ``lanes`` rows of each scratch array (filled by the lanes driver) and
    the lines running the product loops (``calls``: the single call's, in its order) on each state of a
    lanes group after the driver, with the state's rows of the outputs and scratch arrays: ([], []) without
    product calls."""
    if not calls:
        return [], []
    sizes = {a.name: a.size for a in f.outputs}
    own = {a.name: a.size for a in scratch}
    decls = [f"double {a.name}[{lanes * a.size}];" for a in scratch] + ["int l;"]

    def arg(name: str) -> str:
        if name in own:
            return f"{name} + l * {own[name]}"
        return f"{name} + (long)(i + l) * {sizes[name]}"
    run = [f"    for (l = 0; l < {lanes}; ++l) {{",
           *(f"        {c.target}({', '.join(arg(a) for a in c.args)});" for c in calls), "    }"]
    return decls, run


def _voids(f) -> list[str]:
    """``(void)`` of every parameter of ``<f>_batch_checked``: none is read without SIMD lanes."""
    return [f"(void){a.name};" for a in f.inputs + f.outputs] + ["(void)n;", "(void)check;"]


def batch_checked_text(f) -> str:
    """``int <f>_batch_checked(n, inputs..., outputs..., check)`` of a function with run-time parameters
    (not a frame family): the batch entry's leading states, whole SIMD groups, whose rows pass the check,
    their results stored, up to the first group that fails; it returns their number (0 without such a SIMD
    batch: no states done).  ``check & 3``: 1, the parameter rows pass the screen of
    :func:`screen_function`, 2, they are finite; ``check & 4``: every other input (the state: q, v, a) is
    finite; ``check & 8``: no state's quaternion ``q[3:7]`` is all zeros (a free base).  The Python entry
    runs it first and checks the rest as before (``templates/fastcalls.c.j2``); "" for other functions."""
    if f.is_family or SCREENED_INPUT not in {a.name for a in f.inputs}:
        return ""
    sig = f"int {f.cname}_batch_checked({f.batch_params}, int check)"
    body = getattr(f, "batch_checked_body", None)
    if body is None:
        body = [*_voids(f), "return 0;"]
    return f"\n{sig};\n{sig}\n{{\n" + "".join(f"    {x}\n" if not x.startswith("#") else f"{x}\n"
                                               for x in body) + "}\n"


def _lanes_batch_body(f, vname: str, lanes: int, screened: bool = False, scratch: list[_Array] = (),
                      calls: list[Stmt] = ()) -> list[str]:
    """The batched entry of ``f``: ``lanes`` states at a time through ``vname`` (``screened``: with its
    check off), the rest one by one (a frame family: after its check of the frame id, which every state
    shares).  ``calls``: product loops run per state after each lanes group (the driver fills the rows of
    the ``scratch`` arrays: :func:`_per_state_products`)."""
    vd = vector_type(lanes)
    lane_args = _lane_args(f) + "".join(f", {a.name}" for a in scratch) + (", 0" if screened else "")
    check = [f.frame_check] if f.frame_check else []
    call = f"(void){f.cname}" if f.is_family else f.cname
    decls, run = _per_state_products(f, lanes, scratch, calls)
    return [*check, "int i = 0;", f"#ifdef {vd.upper()}", *(["{", *decls] if decls else []),
            f"for (; i + {lanes} <= n; i += {lanes}) {{",
            f"    {vname}({lane_args});", *run, "}", *(["}"] if decls else []), "#endif",
            "for (; i < n; ++i) {", f"    {call}({f.batch_args});", "}",
            *(["return 0;"] if f.is_family else [])]


def family_cases(body: list[Stmt], outputs: dict[str, int]
                 ) -> dict[str, dict[str, list[tuple[int, str | None]]]] | None:
    """The entries each case of a frame family's switch (``body``: prefix, then the switch) stores, by
    enumerator: output -> [(entry, constant or None)] (a run of zeros as its ``"0"`` entries); None unless
    every case stores every entry of every output and the prefix none: the SIMD batch fills whole
    lane-major buffers in every case and copies them back whole."""
    switch = [s for s in body if s.kind == cp.SWITCH]
    if len(switch) != 1 or any(s.kind in (cp.STORE, cp.ZEROS) for s in body):
        return None
    out: dict[str, dict[str, list[tuple[int, str | None]]]] = {}
    for c in switch[0].cases:
        seen: dict[str, dict[int, str | None]] = {name: {} for name in outputs}   # the last store wins
        for s in c.body:
            if s.kind == cp.STORE and s.target in seen:
                seen[s.target][s.index] = s.expr.text.strip() if cp.is_constant(s.expr) else None
            elif s.kind == cp.ZEROS and s.target in seen:
                seen[s.target].update((k, "0") for k in range(s.index, s.end))
            elif s.kind not in cp.VALUES and s.kind != cp.COMMENT:
                return None
        if any(len(seen[name]) != size for name, size in outputs.items()):
            return None
        out[c.enumerator] = {name: sorted(es.items()) for name, es in seen.items()}
    return out


def transposition(name: str, size: int, lanes: int, entries: list[tuple[int, str | None, int]],
                   zeroed: bool = True) -> list[str]:
    """Lines copying the lane-major buffer ``o_<name>`` into the callers' arrays: ``entries`` (entry,
    constant or None, slot); a constant is stored directly.  With ``zeroed``, zeros (``"0"``) are left
    out: a delegating function clears its states' rows with one memset first (a thousand unrolled zero
    stores cost gcc seconds of alias analysis); any other function stores them like the other constants.
    Runs of ``lanes`` consecutive entries in consecutive slots (:func:`_runs`; packed slots follow the
    entries' order) are copied a lanes x lanes block at a time (``soadyn_trs``, a loop over a table of the
    blocks: ``lanes`` vector loads, shuffles and stores instead of ``lanes``^2 scalar stores; B1+Z1's mass
    matrix batch 0.92-0.94 -> 0.77-0.79x its single call, TALOS's operational-space inertias 0.91 ->
    0.63x, issue 26).  Of the rest, more than :data:`UNROLLED_STORES` computed entries are copied by a
    loop over a table of their entries in slot order, one vector load and ``lanes`` stores per entry:
    written out one store per line, gcc's alias walkers (DSE, PRE) take time quadratic in their number
    (4.4 s of gcc CPU for the 37-DOF mass matrix inverse's 1,369 entries, 0.06 s as a loop; the batched
    entries of the mass matrix family run as fast or faster, measured in issue 11)."""
    consts = [(k, c) for k, c, _ in entries if c is not None and not (zeroed and c == "0")]
    vd = vector_type(lanes)
    blocks, rest = _runs(entries, lanes)
    out = []
    if blocks:
        # runs of lanes consecutive entries in consecutive slots: lanes x lanes blocks (soadyn_trs)
        table = ", ".join(f"{{{k}, {slot}}}" for k, slot in blocks)
        out = [f"static const int tb_{name}[{len(blocks)}][2] = {{{table}}};",
               f"for (j = 0; j < {len(blocks)}; ++j) "
               f"soadyn_trs({name} + tb_{name}[j][0], {size}, o_{name} + tb_{name}[j][1]);"]
    computed = sorted((slot, k) for k, slot in rest)
    if len(computed) <= UNROLLED_STORES:
        lines = [f"    {name}[l * {size} + {k}] = {c};" for k, c in consts]
        lines += [f"    {name}[l * {size} + {k}] = o_{name}[{slot}][l];" for slot, k in computed]
        loop = [f"for (l = 0; l < {lanes}; ++l) {{", *lines, "}"] if lines else []
        return ["{", "int j;", *out, *loop, "}"] if out else loop
    n = len(computed)
    if [slot for slot, _ in computed] == list(range(n)):     # slots 0 .. n-1: a table of the entries
        table = ", ".join(str(k) for _, k in computed)
        out += [f"static const int tr_{name}[{n}] = {{{table}}};",
                f"for (j = 0; j < {n}; ++j) {{", f"    const {vd} t = o_{name}[j];",
                f"    const int e = tr_{name}[j];"]
    else:                                                      # a subset of the slots: (entry, slot) pairs
        table = ", ".join(f"{{{k}, {slot}}}" for slot, k in computed)
        out += [f"static const int tr_{name}[{n}][2] = {{{table}}};",
                f"for (j = 0; j < {n}; ++j) {{", f"    const {vd} t = o_{name}[tr_{name}[j][1]];",
                f"    const int e = tr_{name}[j][0];"]
    out += [f"    for (l = 0; l < {lanes}; ++l) {name}[l * {size} + e] = t[l];", "}"]
    if consts:
        out += [f"for (l = 0; l < {lanes}; ++l) {{",
                *(f"    {name}[l * {size} + {k}] = {c};" for k, c in consts), "}"]
    return ["{", "int j;", *out, "}"]


def _runs(entries: list[tuple[int, str | None, int]], lanes: int
          ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The computed ``entries`` (entry, constant or None, slot) split into lanes x lanes blocks (first entry,
    first slot: ``lanes`` consecutive entries in consecutive slots, copied by one ``soadyn_trs``) and the
    rest (entry, slot), copied entry by entry."""
    computed = sorted((k, slot) for k, c, slot in entries if c is None)
    blocks: list[tuple[int, int]] = []
    rest: list[tuple[int, int]] = []
    i = 0
    while i < len(computed):
        j = i + 1
        while j < len(computed) and computed[j][0] == computed[i][0] + (j - i) \
                and computed[j][1] == computed[i][1] + (j - i):
            j += 1
        full = (j - i) // lanes * lanes
        blocks += [computed[m] for m in range(i, i + full, lanes)]
        rest += computed[i + full:j]
        i = j
    return blocks, rest


def whole_rows(name: str, size: int, lanes: int, entries: list[tuple[int, str | None, int]],
               n_slots: int) -> tuple[int, list[str]]:
    """(slots of the lane-major buffer ``o_<name>``, lines writing every entry of the lanes' rows of ``name``
    from it) (``entries``: entry, constant or None, slot; the entries not listed are zeros; ``n_slots``:
    the slots the core fills): the buffer gets one zero slot after the computed ones and a slot per
    distinct constant, and every ``lanes`` consecutive entries are read from their slots by a table and
    stored a lanes x lanes block at a time (``soadyn_trs``).  On the xArm7's mass matrix (169 entries) the
    whole rows replaced a memset of the rows and one scalar store per computed entry and lane; the table
    (fifteenth session) replaced a zeroed lane-major copy of the whole output (a vector store per entry,
    then a copy per computed entry) that the blocks were read from.  Data movement only: the same bits."""
    vd = vector_type(lanes)
    src = {k: slot for k, c, slot in entries if c is None}
    consts = list(dict.fromkeys(c for _, c, _ in entries if c is not None and c != "0"))
    const_slot = {c: n_slots + 1 + i for i, c in enumerate(consts)}
    src.update({k: const_slot[c] for k, c, _ in entries if c is not None and c != "0"})
    table = [src.get(k, n_slots) for k in range(size)]
    rows = ", ".join(str(x) for x in table)
    reads = ", ".join(f"o_{name}[tw_{name}[j + {i}]]" for i in range(lanes))
    out = ["{", "int j;", f"o_{name}[{n_slots}] = ({vd}){{0}};",
           *(f"o_{name}[{const_slot[c]}] = ({vd}){{{', '.join([c] * lanes)}}};" for c in consts),
           f"static const int tw_{name}[{size}] = {{{rows}}};",
           f"for (j = 0; j + {lanes} <= {size}; j += {lanes}) {{",
           f"    const {vd} w[{lanes}] = {{{reads}}};",
           f"    soadyn_trs({name} + j, {size}, w);",
           "}",
           f"for (; j < {size}; ++j) for (l = 0; l < {lanes}; ++l) "
           f"{name}[l * {size} + j] = o_{name}[tw_{name}[j]][l];",
           "}"]
    return n_slots + 1 + len(consts), out


def finish_delegate(f, extra: Extra, lanes: int, target) -> None:
    """SIMD batch of a full-writing function from its nonzero-only variant ``target``: the variant's SIMD
    computation (its ``_lanes_core``), one memset of the lanes' rows, then the transposition of the
    computed entries and the variant's constants."""
    t_extra = getattr(target, "extra", None)
    if lanes <= 1 or t_extra is None or t_extra.core is None:
        return
    core, vdecl, layout = t_extra.core
    vd = vector_type(lanes)
    params = [("const double *", a.name) for a in f.inputs] + [("double *", a.name) for a in f.outputs]
    decl = ", ".join(f"{t}{p}" for t, p in params)
    vname = f"{f.cname}_lanes"
    _, keep, zero = f.delegate
    decls, body = [], []
    for a in f.outputs:
        n_slots = layout[a.name][0]
        entries = [e for e in layout[a.name][1] if e[0] in keep[a.name]]
        if zero and a.size <= WHOLE_ROWS_MAX:
            n_slots, lines = whole_rows(a.name, a.size, lanes, entries, n_slots)
            body += lines
        else:
            if zero:
                body.append(f"memset({a.name}, 0, sizeof(double) * {lanes * a.size});")
            body += transposition(a.name, a.size, lanes, entries)
        decls.append(f"{vd} o_{a.name}[{max(n_slots, 1)}];")
    args = ", ".join([a.name for a in f.inputs] + [f"o_{a.name}" for a in f.outputs])
    body = [*decls, f"{core}({args});", "int l;", *body]
    extra.prototypes.append(guarded(lanes, f"void {core}({vdecl});\nvoid {vname}({decl});\n"))
    extra.pieces.append(guarded(lanes, block(f"void {vname}({decl})", body)))
    extra.vectorised = True
    f.batch_body = _lanes_batch_body(f, vname, lanes)




def finish_zero_fext(f, extra: Extra, lanes: int) -> None:
    """Batch of a function that calls its ``*_fext`` twin with zero wrenches
    (:func:`soadyn.codegen.emit.emit_zero_fext_call`) in a SIMD build: the twin's batch entry (its SIMD
    lanes) on ``lanes`` states at a time with one zeroed array of ``lanes`` states' wrenches, instead of a
    loop of single calls (each its own zero array and scalar call)."""
    target, ins = f.zero_fext, f.zero_fext_inputs
    size = dict(ins)["f_ext"]
    outs = [(a.name, a.size) for a in f.outputs]
    decl = ", ".join(["int n"] + [f"const double *{a}" for a, _ in ins] + [f"double *{a}" for a, _ in outs])
    args = ", ".join(["{}"] + ["soadyn_zero" if a == "f_ext" else f"{a} + (long)i * {k}" for a, k in ins]
                     + [f"{a} + (long)i * {k}" for a, k in outs])
    extra.prototypes.append(f"void {target}_batch({decl});")
    f.batch_body = [f"double soadyn_zero[{lanes * size}] = {{0}};", "int i = 0;",
                    f"for (; i + {lanes} <= n; i += {lanes}) {target}_batch({args.format(lanes)});",
                    f"if (i < n) {target}_batch({args.format('n - i')});"]
