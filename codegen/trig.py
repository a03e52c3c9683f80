"""Sine and cosine of the generated C: inline, branch-free, within 1 ulp of libm.

libm's ``sin``/``cos`` (glibc 2.36) cost ~20 ns per joint angle, called out of line: 31 ``sincos`` calls
took ~640 ns in a C loop, half of the four-arm robot's mass matrix (1,310 ns), and every call also
forces the caller's live floating-point values out of the registers (SysV: no callee-saved vector
registers).  The generated code calls :data:`C_SIN` / :data:`C_COS` instead, static inline functions of
this module's :data:`PRELUDE`: the argument reduced by pi/2 in three parts (Cody-Waite, with the
compensation of FreeBSD msun's ``e_rem_pio2.c``, the reduced argument as a double-double), FreeBSD msun's
``__kernel_sin``/``__kernel_cos`` polynomials (``k_sin.c``, ``k_cos.c``, error < 1 ulp; their copyright
notice below), and the quadrant applied by bit operations, without a branch (the quadrant of a random
joint angle is unpredictable).  sin(x) and cos(x) of one argument share everything up to the two
polynomials (gcc merges the identical pure code of the two inlined calls).  Outside
``|x| < 823549.6`` (2^19 pi/2, where ``fn * pio2_1`` stops being exact) and for inf/nan the libm
function is called.

Accuracy, measured against glibc 2.36 on 2e7 arguments (uniform in [-4, 4], [-1e3, 1e3], [-8e5, 8e5] and
within 1e-12 relative of multiples of pi/2): at most 1 ulp apart, ~20 % of the results differ from
glibc's by 1 ulp (``tests/test_trig.py``).  Every profile, the SIMD lanes (which call the same inline
functions per lane) and the portable source use these functions, so all of them still round alike.

The kernels' notice (FreeBSD ``lib/msun/src/k_sin.c``, ``k_cos.c``, ``e_rem_pio2.c``):
Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved.
Developed at SunSoft, a Sun Microsystems, Inc. business.
Permission to use, copy, modify, and distribute this software is freely granted, provided that this
notice is preserved.
"""

from __future__ import annotations

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Stmt

#: the C names the generated expressions call
C_SIN, C_COS = "soadyn_sin", "soadyn_cos"


PRELUDE = r"""#ifndef SOADYN_TRIG
#define SOADYN_TRIG 1
#include <string.h>
/* sin/cos: Cody-Waite reduction by pi/2 and the fdlibm kernels (FreeBSD msun k_sin.c, k_cos.c,
 * e_rem_pio2.c; Copyright (C) 1993 by Sun Microsystems, Inc. All rights reserved. Developed at SunSoft,
 * a Sun Microsystems, Inc. business. Permission to use, copy, modify, and distribute this software is
 * freely granted, provided that this notice is preserved.) Within 1 ulp of libm; libm for
 * |x| >= 2^19 pi/2, inf and nan.  SOADYN_SINCOS_ARITH is the arithmetic of one argument or of a vector of
 * them (the same IEEE operations in the same order: every lane rounds as the scalar code). */
#if defined(__GNUC__) || defined(__clang__)
#define SOADYN_INLINE static inline __attribute__((always_inline, unused))
#else
#define SOADYN_INLINE static inline
#endif
#define SOADYN_TRIG_BIG 823549.6
#define SOADYN_SINCOS_ARITH(x, ks, kc, t)                                                             \
    {                                                                                                 \
        t = x*6.36619772367581382433e-01 + 6755399441055744.0;  /* round(x 2/pi) + 1.5 2^52 */       \
        fn = t - 6755399441055744.0;                                                                  \
        tt = x - fn*1.57079632673412561417e+00;                                                       \
        w = fn*6.07710050630396597660e-11;                                                            \
        r = tt - w;                                                                                   \
        w = fn*2.02226624879595063154e-21 - ((tt - r) - w);                                           \
        tt = r;                                                                                       \
        w = fn*2.02226624871116645580e-21;                                                            \
        r = tt - w;                                                                                   \
        w = fn*8.47842766036889956997e-32 - ((tt - r) - w);                                           \
        y0 = r - w;                                            /* x - fn pi/2 = y0 + y1 */           \
        y1 = (r - y0) - w;                                                                            \
        z = y0*y0;                                                                                    \
        v = z*y0;                                                                                     \
        p = 8.33333333332248946124e-03 + z*(-1.98412698298579493134e-04 + z*(2.75573137070700676789e-06 \
            + z*(-2.50507602534068634195e-08 + z*1.58969099521155010221e-10)));                       \
        ks = y0 - ((z*(0.5*y1 - v*p) - y1) - v*-1.66666666666666324348e-01);                          \
        v = z*z;                                                                                      \
        p = z*(4.16666666666666019037e-02 + z*(-1.38888888888741095749e-03                         \
            + z*2.48015872894767294178e-05)) + v*v*(-2.75573143513906633035e-07                      \
            + z*(2.08757232129817482790e-09 + z*-1.13596475577881948265e-11));                        \
        hz = 0.5*z;                                                                                   \
        u = 1.0 - hz;                                                                                 \
        kc = u + (((1.0 - u) - hz) + (z*p - y0*y1));                                                  \
    }
/* the quadrant n (mod 4, the low bits of t): odd swaps sin and cos, then the signs */
#define SOADYN_SINCOS_QUADRANT(n, bs, bc, rs, rc)                                                     \
    {                                                                                                 \
        sel = 0ULL - (n & 1ULL);                                                                      \
        rs = ((bs & ~sel) | (bc & sel)) ^ ((n & 2ULL) << 62);                                         \
        rc = ((bc & ~sel) | (bs & sel)) ^ (((n + 1ULL) & 2ULL) << 62);                                \
    }
SOADYN_INLINE void soadyn_sincos(double x, double *s, double *c)
{
    double t, fn, tt, w, r, y0, y1, z, v, p, hz, u, ks, kc;
    unsigned long long n, bs, bc, sel, rs, rc;
    if (!(fabs(x) < SOADYN_TRIG_BIG)) {
        *s = sin(x);
        *c = cos(x);
        return;
    }
    SOADYN_SINCOS_ARITH(x, ks, kc, t)
    memcpy(&n, &t, 8);
    memcpy(&bs, &ks, 8);
    memcpy(&bc, &kc, 8);
    SOADYN_SINCOS_QUADRANT(n, bs, bc, rs, rc)
    memcpy(s, &rs, 8);
    memcpy(c, &rc, 8);
}
SOADYN_INLINE double soadyn_sin(double x)
{
    double s, c;
    soadyn_sincos(x, &s, &c);
    return s;
}
SOADYN_INLINE double soadyn_cos(double x)
{
    double s, c;
    soadyn_sincos(x, &s, &c);
    return c;
}
/* libm's sin and cos of the x[k] outside the reduction's range (and inf, nan): out of line, so that no
 * call sits in the generated code's hot path (a call site per lane cost the Panda's M^-1 ~70 ns) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, cold, unused))
#endif
static void soadyn_sincos_libm(const double *x, double *s, double *c, int n)
{
    int k;
    for (k = 0; k < n; ++k)
        if (!(fabs(x[k]) < SOADYN_TRIG_BIG)) {
            s[k] = sin(x[k]);
            c[k] = cos(x[k]);
        }
}
/* sin and cos of 4 arguments at once (GCC/Clang vector extensions; the scalar function elsewhere) */
#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD)
#define SOADYN_T4D 1
typedef double soadyn_t4d __attribute__((vector_size(32)));
typedef unsigned long long soadyn_t4u __attribute__((vector_size(32)));
SOADYN_INLINE void soadyn_sincos4_core(const soadyn_t4d *xp, soadyn_t4d *s, soadyn_t4d *c)
{
    const soadyn_t4d x = *xp;
    soadyn_t4d t, fn, tt, w, r, y0, y1, z, v, p, hz, u, ks, kc;
    soadyn_t4u n, bs, bc, sel, rs, rc;
    SOADYN_SINCOS_ARITH(x, ks, kc, t)
    n = (soadyn_t4u)t;
    bs = (soadyn_t4u)ks;
    bc = (soadyn_t4u)kc;
    SOADYN_SINCOS_QUADRANT(n, bs, bc, rs, rc)
    *s = (soadyn_t4d)rs;
    *c = (soadyn_t4d)rc;
}
SOADYN_INLINE void soadyn_sincos4(const soadyn_t4d *xp, soadyn_t4d *s, soadyn_t4d *c)
{
    double xa[4], sa[4], ca[4];
    int l, big = 0;
    soadyn_sincos4_core(xp, s, c);
    for (l = 0; l < 4; ++l) big |= !(fabs((*xp)[l]) < SOADYN_TRIG_BIG);
    if (big) {
        for (l = 0; l < 4; ++l) {
            xa[l] = (*xp)[l];
            sa[l] = (*s)[l];
            ca[l] = (*c)[l];
        }
        soadyn_sincos_libm(xa, sa, ca, 4);
        for (l = 0; l < 4; ++l) {
            (*s)[l] = sa[l];
            (*c)[l] = ca[l];
        }
    }
}
#endif
/* SOADYN_SINCOS_INLINE(x, s, c, n): s[k], c[k] for k < n (n a multiple of 4; x, s, c arrays), four at a time,
 * inline where a long function's trigonometry starts (INLINE_TRIG_STATEMENTS in soadyn/codegen/trig.py): no
 * call takes the caller's arrays' addresses, and libm is called with values, for the arguments out of range
 * only */
#ifdef SOADYN_T4D
#define SOADYN_SINCOS_INLINE(x, s, c, n)                                                              \
    do {                                                                                              \
        soadyn_t4d soadyn_xv, soadyn_sv, soadyn_cv;                                                   \
        int soadyn_k, soadyn_l, soadyn_big = 0;                                                       \
        for (soadyn_k = 0; soadyn_k < (n); soadyn_k += 4) {                                           \
            soadyn_xv = (soadyn_t4d){(x)[soadyn_k], (x)[soadyn_k + 1], (x)[soadyn_k + 2],             \
                                     (x)[soadyn_k + 3]};                                              \
            soadyn_sincos4_core(&soadyn_xv, &soadyn_sv, &soadyn_cv);                                  \
            for (soadyn_l = 0; soadyn_l < 4; ++soadyn_l) {                                            \
                (s)[soadyn_k + soadyn_l] = soadyn_sv[soadyn_l];                                       \
                (c)[soadyn_k + soadyn_l] = soadyn_cv[soadyn_l];                                       \
            }                                                                                         \
        }                                                                                             \
        for (soadyn_k = 0; soadyn_k < (n); ++soadyn_k)                                                \
            soadyn_big |= !(fabs((x)[soadyn_k]) < SOADYN_TRIG_BIG);                                   \
        if (__builtin_expect(soadyn_big, 0))                                                          \
            for (soadyn_k = 0; soadyn_k < (n); ++soadyn_k)                                            \
                if (!(fabs((x)[soadyn_k]) < SOADYN_TRIG_BIG)) {                                       \
                    (s)[soadyn_k] = sin((x)[soadyn_k]);                                               \
                    (c)[soadyn_k] = cos((x)[soadyn_k]);                                               \
                }                                                                                     \
    } while (0)
#else
#define SOADYN_SINCOS_INLINE(x, s, c, n)                                                              \
    do {                                                                                              \
        int soadyn_k;                                                                                 \
        for (soadyn_k = 0; soadyn_k < (n); ++soadyn_k)                                                \
            soadyn_sincos((x)[soadyn_k], (s) + soadyn_k, (c) + soadyn_k);                             \
    } while (0)
#endif
/* soadyn_sincos_n: the same, out of line, for shorter functions: one call where the trigonometry starts,
 * before most of their values are live (inlined into them, it made gcc spill more) */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((noinline, unused))
#endif
static void soadyn_sincos_n(const double *x, double *s, double *c, int n)
{
    SOADYN_SINCOS_INLINE(x, s, c, n);
}
#endif
"""

#: ``soadyn_sincos8_core(x, s, c)``: the arithmetic of :func:`soadyn_sincos4_core` on 8 arguments at once
#: (two consecutive vectors of 4, read and written as one 64-byte vector), for machines with 512-bit
#: vectors (``__AVX512F__``; elsewhere ``SOADYN_T8D`` stays undefined and the 4-wide core runs).  The same
#: IEEE operations in the same order on every lane: the same bits.  Text for the SIMD batches' units only
#: (:func:`soadyn.codegen.lanes.simd_prelude`), after :data:`PRELUDE`: the sines and cosines of a lanes
#: group's joint angles (``soadyn_vsincos_n``) were half the instructions of TALOS's and B1+Z1's
#: ``body_poses`` batches, as many per state as in the single call (issue 26)
SINCOS8 = r"""#if defined(SOADYN_T4D) && defined(__AVX512F__) && !defined(SOADYN_T8D)
#define SOADYN_T8D 1
typedef double soadyn_t8d __attribute__((vector_size(64)));
typedef unsigned long long soadyn_t8u __attribute__((vector_size(64)));
SOADYN_INLINE void soadyn_sincos8_core(const soadyn_t4d *xp, soadyn_t4d *s, soadyn_t4d *c)
{
    soadyn_t8d x, t, fn, tt, w, r, y0, y1, z, v, p, hz, u, ks, kc;
    soadyn_t8u n, bs, bc, sel, rs, rc;
    memcpy(&x, xp, sizeof x);
    SOADYN_SINCOS_ARITH(x, ks, kc, t)
    n = (soadyn_t8u)t;
    bs = (soadyn_t8u)ks;
    bc = (soadyn_t8u)kc;
    SOADYN_SINCOS_QUADRANT(n, bs, bc, rs, rc)
    memcpy(s, &rs, sizeof rs);
    memcpy(c, &rc, sizeof rc);
}
#endif
"""


def to_inline(text: str) -> str:
    """C text with libm's ``sin(``/``cos(`` calls replaced by the prelude's inline functions."""
    return cp.Expr.of(text).calls({"sin": C_SIN, "cos": C_COS}).text


#: a function body of at least this many statements computes its sines and cosines inline
#: (``SOADYN_SINCOS_INLINE``), a shorter one by calling ``soadyn_sincos_n``.  Measured (gcc 12.2
#: ``-O3 -march=native``, Panda free base, ns per call, best of 3-4 alternating rounds, issue 12): inline,
#: the forward-dynamics derivatives (2,992 statements) 2,176 -> 2,077 ns (with the product change of the same
#: session) and the inverse-dynamics derivatives (1,687) 1,236 -> 1,164 ns were faster; the forward dynamics
#: (836) 402 -> 520 ns and M^-1 (1,004) 477 -> 503 ns were slower.  The Dimitrov robot (nv 16, best of 3):
#: inline faster for the decoupled FD (2,330 statements) 1,403 -> 1,293 ns, the Schur-complement FD (2,134)
#: 1,641 -> 1,550 ns and the operational-space inertias (1,611) 509 -> 453 ns; the FD (952) slower,
#: 443 -> 524 ns; M^-1 (1,228) about even, 594 -> 585 ns.  The shipped fast and portable modules compile stage
#: functions (:data:`soadyn.codegen.units.STAGE_OPS` operations); a stage of this length takes the inline form
#: too (four-arm robot's units: ID, FD, M, M^-1 within 2 % either way).
#: Lowered from 1,300 to 700 in the seventh session: the figures above were single builds, and the same bytes
#: run up to 2x apart from one copy of a shared object to another (page placement, benchmarks/README.md).
#: Timed from 5 fresh copies of each build (``fast``, C loop, median [range] ns, load 0.7-1), threshold 1,300
#: against inline: FD xArm7 free 485 [481-694] -> 440 [429-450] (threshold 0), Dimitrov 430 [428-436] -> 336
#: [330-341], Kinova free 411 [409-416] -> 351 [349-356] (threshold 700); M^-1 482 -> 472, 440 -> 481 (the
#: Dimitrov robot's M^-1, 1,218 statements, +9 %), 404 -> 408; ID, M, bias forces and the innovations factors
#: of under 700 statements unchanged, and 3-7 % slower when inlined (xArm7, threshold 0).
INLINE_TRIG_STATEMENTS = 700


def fuse_trig(body: list[Stmt]) -> list[Stmt]:
    """``body`` with its sines and cosines computed four at a time: every
    :data:`~soadyn.codegen.cprogram.TRIG` statement whose argument is an input element (or a load of one)
    reads its value from arrays that one ``soadyn_sincos_n`` call (``SOADYN_SINCOS_INLINE`` in a body of
    :data:`INLINE_TRIG_STATEMENTS` statements or more) fills where the first of them was (a
    :data:`~soadyn.codegen.cprogram.SINCOS` statement; per block: the cases of a frame family each get
    their own); sin and cos of one argument share their reduction.  Measured on the four-arm robot's mass
    matrix (31 joint angles; ns per call, C loop, one run): libm 1,331; inline ``soadyn_sin``/``soadyn_cos``
    one by one 1,265 (gcc keeps a reduction per call); one ``soadyn_sincos`` per pair 1,061; four at a
    time 909."""
    loads = {s.target: f"{s.array}[{s.index}]" for s in _flat(body) if s.kind == cp.LOAD}
    call = "SOADYN_SINCOS_INLINE" if cp.statements(body) >= INLINE_TRIG_STATEMENTS else "soadyn_sincos_n"
    fused: set[str] = set()
    out: list[Stmt] = []
    block: list[Stmt] = []
    for s in body:
        if s.kind == cp.SWITCH:
            out += _fuse_block(block, loads, call, fused)
            block = []
            out.append(Stmt(cp.SWITCH, cases=[cp.Case(c.enumerator, c.comment,
                                                      _fuse_block(c.body, loads, call, fused))
                                              for c in s.cases]))
        else:
            block.append(s)
    out += _fuse_block(block, loads, call, fused)
    if not fused:
        return out
    # the loads that only the fused sines and cosines read are dead now
    read: set[str] = set()
    for s in _flat(out):
        read.update(s.reads())
    dead = fused - read
    if not dead:
        return out
    return [s for s in out if not (s.kind == cp.LOAD and s.target in dead)]


def _flat(body: list[Stmt]):
    for s in body:
        yield s
        for c in s.cases:
            yield from c.body


def _fuse_block(block: list[Stmt], loads: dict[str, str], call: str, fused: set[str]) -> list[Stmt]:
    args: dict[str, int] = {}
    at = None
    uses: dict[int, tuple[str, str]] = {}
    for k, s in enumerate(block):
        if s.kind != cp.TRIG:
            continue
        x = s.arg
        element = x if cp.is_element(x) else loads.get(x)
        if element is None:
            continue
        if element is not x:
            fused.add(x)
        at = k if at is None else at
        args.setdefault(element, len(args))
        uses[k] = (s.fn, element)
    if not uses:
        return block
    n = -(-len(args) // 4) * 4
    head = Stmt(cp.SINCOS, args=tuple(list(args) + ["0"] * (n - len(args))), fn=call)
    out = []
    for k, s in enumerate(block):
        if k == at:
            out.append(head)
        if k in uses:
            fn, element = uses[k]
            out.append(Stmt(cp.ARITH, s.target, cp.Expr(f"soadyn_t{fn[0]}[{args[element]}]")))
        else:
            out.append(s)
    return out
