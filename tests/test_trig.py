"""The generated C's sine and cosine (``soadyn.codegen.trig``): within 1 ulp of libm, the 4-wide vector
path bit-identical to the scalar one, libm outside the reduction's range, and the body rewrite that
computes a function's joint-angle sines and cosines four at a time."""

from __future__ import annotations

import subprocess

import pytest
from conftest import requires_cc

from soadyn.codegen import trig

_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
%s
static double ulps(double a, double b)
{
    if (a == b) return 0;
    return fabs(a - b) / fabs(nextafter(b, INFINITY) - b);
}
int main(void)
{
    enum { N = 400000 };
    static double x[N], s[N], c[N], s2[N], c2[N];
    double worst = 0;
    long differ = 0, scalar_vs_vector = 0, fallback = 0, big = 0;
    long i;
    srand(7);
    for (i = 0; i < N; ++i) {
        double u = rand() / (double)RAND_MAX;
        switch (i %% 5) {
        case 0: x[i] = (2 * u - 1) * 4; break;
        case 1: x[i] = (2 * u - 1) * 1000; break;
        case 2: x[i] = (rand() %% 2001 - 1000) * 1.5707963267948966 * (1 + (u - 0.5) * 1e-12); break;
        case 3: x[i] = (2 * u - 1) * 823549; break;
        default: x[i] = (2 * u - 1) * 1e9; break;    /* beyond the reduction: libm */
        }
    }
    x[0] = 0.0; x[1] = -0.0; x[2] = INFINITY; x[3] = NAN; x[4] = 823549.6; x[5] = -823549.5;
    soadyn_sincos_n(x, s, c, N);
    SOADYN_SINCOS_INLINE(x, s2, c2, N);
    for (i = 0; i < N; ++i) {
        double s1, c1, es, ec;
        soadyn_sincos(x[i], &s1, &c1);
        if (memcmp(&s1, &s[i], 8) || memcmp(&c1, &c[i], 8) || memcmp(&s1, &s2[i], 8) || memcmp(&c1, &c2[i], 8)
            || soadyn_sin(x[i]) != s1 && s1 == s1
            || soadyn_cos(x[i]) != c1 && c1 == c1)
            ++scalar_vs_vector;
        big += !(fabs(x[i]) < 823549.6);
        if (isnan(x[i]) || isinf(x[i])) {
            fallback += isnan(s1) && isnan(c1);
            continue;
        }
        if (fabs(x[i]) >= 823549.6) fallback += s1 == sin(x[i]) && c1 == cos(x[i]);
        es = ulps(s1, sin(x[i]));
        ec = ulps(c1, cos(x[i]));
        differ += es > 0 || ec > 0;
        if (es > worst) worst = es;
        if (ec > worst) worst = ec;
    }
    printf("%%.17g %%ld %%ld %%ld %%ld %%d %%d\n", worst, differ, scalar_vs_vector, fallback, big,
           signbit(s[1]) != 0, s[0] == 0 && c[0] == 1 && c[1] == 1);
    return 0;
}
"""


@requires_cc
@pytest.mark.parametrize("flags", [["-O2", "-march=native"], ["-O2"], ["-O0", "-DSOADYN_NO_SIMD"]])
def test_sincos_within_one_ulp_of_libm_and_vector_equals_scalar(tmp_path, cc, flags):
    src = tmp_path / "trig.c"
    src.write_text(_PROGRAM % trig.PRELUDE)
    exe = tmp_path / "trig"
    subprocess.run([*cc, *flags, "-fno-math-errno", "-ffp-contract=off", "-Wall", "-Werror",
                    "-Wno-parentheses", str(src), "-o", str(exe), "-lm"], check=True)
    worst, differ, mismatched, fallback, big, neg_zero, zero = subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert float(worst) <= 1.0                  # glibc is (nearly) correctly rounded: < 1 ulp of exact
    assert int(differ) > 0                      # not libm by another name: the test can fail
    assert int(mismatched) == 0                 # 4-wide (called or inline) == scalar, bit for bit
    assert int(fallback) == int(big) > 70000  # |x| >= 2^19 pi/2 and inf/nan: libm's results
    assert neg_zero == "1" and zero == "1"


def _body(lines):
    """Typed statements of simple C lines (``const double x = e;``, ``a[k] = e;``), for the tests."""
    from soadyn.codegen import cprogram as cp

    out = []
    for line in lines:
        lhs, rhs = line[:-1].split(" = ")
        if lhs.startswith("const double "):
            name = lhs[len("const double "):]
            if cp.is_element(rhs):
                out.append(cp.load(name, *cp.element(rhs)))
            else:
                out.append(cp.value(name, cp.Expr.of(rhs)))
        elif lhs.startswith("w["):
            out.append(cp.Stmt(cp.WORK, rhs, index=cp.element(lhs)[1]))
        else:
            out.append(cp.store(*cp.element(lhs), cp.Expr.of(rhs)))
    return out


def _fused(lines):
    from soadyn.codegen.printer import CPrinter

    return CPrinter().lines(trig.fuse_trig(_body(lines)))


def test_fuse_trig_computes_sines_and_cosines_four_at_a_time():
    body = ["const double q_8 = q[8];", "const double q_9 = q[9];", "const double c1 = soadyn_cos(q[7]);",
            "w[0] = c1;", "const double s1 = soadyn_sin(q[7]);", "const double s2 = soadyn_sin(q_8);",
            "const double c2 = soadyn_cos(q_8);", "const double c3 = soadyn_cos(t_9);",
            "const double s4 = soadyn_sin(q_9);", "M[0] = c1*s2;", "M[1] = q_9*s4;"]
    out = _fused(body)
    # q_8 is read by the fused sines and cosines only: its load is dead and dropped; q_9's stays
    assert out[:3] == ["const double q_9 = q[9];",
                       "double soadyn_tx[4] = {q[7], q[8], q[9], 0}, soadyn_ts[4], soadyn_tc[4];",
                       "soadyn_sincos_n(soadyn_tx, soadyn_ts, soadyn_tc, 4);"]
    assert out[3:] == ["const double c1 = soadyn_tc[0];", "w[0] = c1;", "const double s1 = soadyn_ts[0];",
                       "const double s2 = soadyn_ts[1];", "const double c2 = soadyn_tc[1];",
                       "const double c3 = soadyn_cos(t_9);",  # not an input element: one call
                       "const double s4 = soadyn_ts[2];", "M[0] = c1*s2;", "M[1] = q_9*s4;"]
    assert _fused(["M[0] = 1;"]) == ["M[0] = 1;"]
    assert trig.to_inline("sin(q_0)*cos(x) + sqrt(y) + soadyn_vsin(z)") == (
        "soadyn_sin(q_0)*soadyn_cos(x) + sqrt(y) + soadyn_vsin(z)")


def test_fuse_trig_inline_in_long_bodies():
    """A body of INLINE_TRIG_STATEMENTS statements or more computes its sines and cosines inline."""
    short = ["const double c1 = soadyn_cos(q[7]);", "const double s1 = soadyn_sin(q[7]);", "M[0] = c1*s1;"]
    filler = [f"const double f{i} = q[0]*{i};" for i in range(trig.INLINE_TRIG_STATEMENTS)]
    assert "soadyn_sincos_n(soadyn_tx, soadyn_ts, soadyn_tc, 4);" in _fused(short)
    long = _fused(short + filler)
    assert "SOADYN_SINCOS_INLINE(soadyn_tx, soadyn_ts, soadyn_tc, 4);" in long
    assert not any("soadyn_sincos_n" in x for x in long)
    assert long[2:] == _fused(short)[2:] + filler      # the rest of the body as before



_LANES_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
%s
%s
int main(void)
{
    enum { N = 4096, L = %d };
    static soadyn_v%dd x[N / L], s[N / L], c[N / L];
    long i, mismatched = 0, big = 0;
    srand(5);
    for (i = 0; i < N; ++i) {
        double u = rand() / (double)RAND_MAX;
        x[i / L][i %% L] = i %% 7 == 6 ? (2 * u - 1) * 1e9 : (2 * u - 1) * (i %% 2 ? 4 : 823549);
    }
    x[0][0] = INFINITY; x[0][1] = NAN; x[1][0] = -0.0; x[1][1] = 823549.6;
    soadyn_vsincos_n(x, s, c, N / L - 1);     /* an odd count: 8 at a time, where there are, then 4 */
    soadyn_vsincos_n(x + N / L - 1, s + N / L - 1, c + N / L - 1, 1);
    for (i = 0; i < N; ++i) {
        double s1, c1, xs = x[i / L][i %% L], vs = s[i / L][i %% L], vc = c[i / L][i %% L];
        soadyn_sincos(xs, &s1, &c1);
        mismatched += memcmp(&s1, &vs, 8) != 0 || memcmp(&c1, &vc, 8) != 0;
        big += !(fabs(xs) < 823549.6);
    }
#ifdef SOADYN_T8D
    printf("%%ld %%ld 8\n", mismatched, big);
#else
    printf("%%ld %%ld 4\n", mismatched, big);
#endif
    return 0;
}
"""


@requires_cc
@pytest.mark.parametrize("lanes", [4, 2])
def test_lanes_sincos_of_an_array_of_vectors_equals_scalar(tmp_path, cc, lanes):
    """``soadyn_vsincos_n`` of the SIMD batches (the joint angles' sines and cosines of a lanes group in
    one loop, :func:`soadyn.codegen.lanes.vectorise`): every lane bit for bit the scalar
    ``soadyn_sincos``, libm's values out of the reduction's range, inf and nan included; with 512-bit
    vectors (``__AVX512F__``) the 4-lane batches take two vectors at a time (``soadyn_sincos8_core``), the
    last of an odd count alone."""
    from soadyn.codegen.lanes import simd_prelude

    src = tmp_path / "vtrig.c"
    src.write_text(_LANES_PROGRAM % (trig.PRELUDE, simd_prelude(lanes), lanes, lanes))
    exe = tmp_path / "vtrig"
    subprocess.run([*cc, "-O2", "-march=native", "-fno-math-errno", "-ffp-contract=off", "-Wall", "-Werror",
                    "-Wno-parentheses", str(src), "-o", str(exe), "-lm"], check=True)
    run = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
    mismatched, big, width = run.stdout.split()
    macros = subprocess.run([*cc, "-march=native", "-dM", "-E", "-x", "c", "/dev/null"], check=True,
                            capture_output=True, text=True).stdout
    assert int(width) == (8 if lanes == 4 and "__AVX512F__" in macros else 4)
    assert int(mismatched) == 0
    assert int(big) > 500                     # the libm fallback ran, in many vectors
