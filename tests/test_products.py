"""Dense products of a staged program as loops of the generated C (``ctx.matmul``, issue 12).

:func:`soadyn.codegen.derive.place_products` turns ``scale * A @ B`` into an in-place product loop when the
result fills whole columns of outputs and ``A`` is an output, and expands it into scalar assignments
otherwise.  These tests evaluate both forms in floats against numpy, and build the generated C of a
derivative module with vectors of 4, of 2 and without vectors: the three must agree bit for bit."""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np
import pytest
import symengine as se
from conftest import TEST_ARM, module_cache_dir

from soadyn.codegen.derive import CodegenSymbolic, place_products
from soadyn.codegen.pipeline import compile_robot, resolve_robot
from soadyn.symbolic.tangent import python_function

RNG = np.random.default_rng(5)


def _toy(m: int, p: int):
    """A context with inputs x (m x m) and y (m x p); A = x + x^T staged (symmetric), B = 2 y staged."""
    ctx = CodegenSymbolic()
    x = ctx.input("x", (m, m))
    y = ctx.input("y", (m, p))
    A = ctx.stage("A", x + x.T)
    B = ctx.stage("B", 2 * y)
    return ctx, A, B


def _run(ctx, outputs, xv, yv):
    outs = [np.array(es, dtype=object) for _, es in outputs]
    fn = python_function(list(ctx.inputs.items()), ctx.program, outs)
    return fn(xv.ravel(), yv.ravel())


def _apply(product, values: dict[str, np.ndarray]) -> None:
    """What the C loop does: read B back from the result's columns, multiply by A, store scale * A B."""
    m = product.m
    A = values[product.left].reshape(m, m)
    cols = [(name, stride, col + c) for name, stride, col, count in product.runs for c in range(count)]
    B = np.array([[values[name][i * stride + c] for name, stride, c in cols] for i in range(m)])
    R = product.scale * (A @ B)
    for j, (name, stride, c) in enumerate(cols):
        for i in range(m):
            values[name][i * stride + c] = R[i, j]


def test_product_in_place_with_overridden_and_zero_columns():
    m, p = 4, 6
    ctx, A, B = _toy(m, p)
    B[:, 1] = 0                                   # an exact zero column: stored as zeros, not multiplied
    P = -ctx.matmul("P", A, B)
    P[0:2, 0] = se.Integer(7)                     # overridden entries of a column whose B is not zero
    left = np.concatenate([P[:, :3], np.zeros((m, 1), dtype=object)], axis=1)   # (m, 4) output
    outputs = [("L", list(left.ravel())), ("R", list(P[:, 3:].ravel())), ("A", list(A.ravel()))]
    shapes = {"L": (m, 4), "R": (m, 3), "A": (m, m)}
    new_outputs, products = place_products(ctx, outputs, shapes)
    # column 0 is not whole (two entries overridden): the product falls back to scalar expressions
    assert products == []
    assert any(a.target.name.startswith("P_") for a in ctx.program)
    xv, yv = RNG.normal(size=(m, m)), RNG.normal(size=(m, p))
    got = _run(ctx, new_outputs, xv, yv)
    Bv = 2 * yv
    Bv[:, 1] = 0
    want = -((xv + xv.T) @ Bv)
    want[0:2, 0] = 7
    np.testing.assert_allclose(got[0].reshape(m, 4)[:, :3], want[:, :3], rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(got[1].reshape(m, 3), want[:, 3:], rtol=1e-14, atol=1e-14)

    ctx, A, B = _toy(m, p)
    B[:, 1] = 0
    P = -ctx.matmul("P", A, B)
    P[:, 0] = se.Integer(3)                        # a whole column overridden: no product column
    outputs = [("L", list(P[:, :3].ravel())), ("R", list(P[:, 3:].ravel())), ("A", list(A.ravel()))]
    shapes = {"L": (m, 3), "R": (m, 3), "A": (m, m)}
    new_outputs, products = place_products(ctx, outputs, shapes)
    assert len(products) == 1
    (prod,) = products
    assert (prod.left, prod.m, prod.scale) == ("A", m, -1)
    assert prod.runs == (("L", 3, 2, 1), ("R", 3, 0, 3))          # column 1 (zero) and 0 (constant) left out
    assert prod.ops() == {"mul": m * m * 4, "add": m * (m - 1) * 4}
    assert not any(a.target.name.startswith("P_") for a in ctx.program)
    xv, yv = RNG.normal(size=(m, m)), RNG.normal(size=(m, p))
    values = dict(zip(("L", "R", "A"), (v.copy() for v in _run(ctx, new_outputs, xv, yv))))
    _apply(prod, values)
    Bv = 2 * yv
    Bv[:, 1] = 0
    want = -((xv + xv.T) @ Bv)
    want[:, 0] = 3
    np.testing.assert_allclose(values["L"].reshape(m, 3), want[:, :3], rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(values["R"].reshape(m, 3), want[:, 3:], rtol=1e-14, atol=1e-14)
    assert np.all(values["L"].reshape(m, 3)[:, 1] == 0.0)


@pytest.mark.parametrize("case", ["used_later", "left_not_output", "mixed_signs"])
def test_product_expanded_where_it_cannot_run_in_place(case):
    m, p = 3, 4
    ctx, A, B = _toy(m, p)
    P = ctx.matmul("P", A, B)
    if case == "used_later":
        extra = ctx.stage("later", P[0, 0] * 2)
        outputs = [("R", list(P.ravel())), ("A", list(A.ravel())), ("e", [extra])]
        shapes = {"R": (m, p), "A": (m, m), "e": (1,)}
    elif case == "left_not_output":
        outputs = [("R", list(P.ravel()))]
        shapes = {"R": (m, p)}
    else:
        P2 = P.copy()
        P2[:, 0] = -P2[:, 0]
        outputs = [("R", list(P2.ravel())), ("A", list(A.ravel()))]
        shapes = {"R": (m, p), "A": (m, m)}
    new_outputs, products = place_products(ctx, outputs, shapes)
    assert products == []
    xv, yv = RNG.normal(size=(m, m)), RNG.normal(size=(m, p))
    got = _run(ctx, new_outputs, xv, yv)
    want = (xv + xv.T) @ (2 * yv)
    if case == "used_later":
        np.testing.assert_allclose(got[2], [2 * want[0, 0]], rtol=1e-14)
    if case == "mixed_signs":
        want[:, 0] = -want[:, 0]
    np.testing.assert_allclose(got[0].reshape(m, p), want, rtol=1e-14)


# ---- the generated C: vectors of 4, of 2, none: the same bits ------------------------------------------
def _accepts(cc: list[str], flag: str, tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    done = subprocess.run([*cc, flag, str(src), "-o", str(tmp / "probe")], capture_output=True)
    return done.returncode == 0


def test_product_loops_give_the_same_bits_with_and_without_vectors(cc, request, tmp_path_factory, tmp_path):
    robot, _ = resolve_robot(TEST_ARM, "free")
    robot = robot.replace(gravity=np.array([0.7, -1.3, -9.81]))
    out = module_cache_dir(request, tmp_path_factory, "soadyn_product_modules")
    mod = compile_robot(robot, out, functions=["forward_dynamics_derivatives"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    assert "prod_B" in src.read_text()                  # the product is a loop in this function
    variants = {"simd (compiler's default target)": [], "scalar loops": ["-DSOADYN_NO_SIMD"]}
    if _accepts(cc, "-march=native", tmp_path):
        variants["simd (-march=native)"] = ["-march=native"]
    rng = np.random.default_rng(8)
    q = robot.random_configuration(rng)
    v, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    fn_name = f"{mod.module_name}_forward_dynamics_derivatives"
    results = {}
    for label, flags in variants.items():
        lib = tmp_path / f"lib{len(results)}.so"
        subprocess.run([*cc, "-std=gnu99", "-O2", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC",
                        *flags, str(src), "-o", str(lib), "-lm"], check=True, capture_output=True)
        fn = getattr(ctypes.CDLL(str(lib)), fn_name)
        outs = [np.full((robot.nv, robot.nv), np.nan) for _ in range(3)]
        args = [np.ascontiguousarray(x, dtype=float) for x in (q, v, tau)] + outs
        fn(*[a.ctypes.data_as(ctypes.c_void_p) for a in args])
        results[label] = outs
    ref = mod.forward_dynamics_derivatives(q, v, tau)
    for label, outs in results.items():
        for got, want in zip(outs, ref):
            assert not np.isnan(got).any(), label
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max(), err_msg=label)
    first = next(iter(results.values()))
    for label, outs in results.items():
        for a, b in zip(outs, first):
            assert np.array_equal(a.view(np.int64), b.view(np.int64)), label
