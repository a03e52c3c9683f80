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
from conftest import EXAMPLES, TEST_ARM, module_cache_dir

from soadyn.codegen.derive import CodegenSymbolic, place_products
from soadyn.codegen.pipeline import compile_robot, generate, resolve_robot
from soadyn.codegen.profiles import get_profile
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
    """What the C loop does: read B back from the result's columns, multiply by A, store scale * A B (the
    general form: A and B from the scratch array, the result stored into or added to a block; a symmetric
    one: the upper triangle computed, then copied below the diagonal)."""
    m = product.m
    if product.k:
        k, n = product.k, product.columns
        f = values[product.left]
        if product.source:                  # A read in place from an output, B alone in the scratch
            src, stride, rows, cols = product.source
            B = f.reshape(k, product.bstride or n)[:, :n]
            A = values[src][:stride * (max(rows) + 1)].reshape(-1, stride)[np.ix_(rows, cols)]
            R = product.scale * (A @ B)
        else:                               # B's rows padded to bstride (a masked product)
            B = f[m * k:].reshape(k, product.bstride or n)[:, :n]
            R = product.scale * (f[:m * k].reshape(m, k) @ B)
        name, stride, col, _ = product.runs[0]
        out = values[name].reshape(-1, stride)
        block = out[product.row0:product.row0 + m, col:col + n]
        new = block + R if product.accumulate else R
        if product.symmetric:
            new = np.triu(new) + np.triu(new, 1).T
        if product.ranges:                  # only each row's run of columns
            for i, (lo, hi) in enumerate(product.ranges):
                block[i, lo:hi] = new[i, lo:hi]
            return
        block[...] = new
        return
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


def test_general_product_added_to_a_block_of_an_output():
    """A left factor that is not an output: A and B go to a scratch array, the result is added to what the
    program stored in a block (rows 1.., columns 2..) of the output."""
    m, k, p = 8, 4, 9                                           # >= GENERAL_PRODUCT_MIN entries
    ctx = CodegenSymbolic()
    x = ctx.input("x", (m, k))
    y = ctx.input("y", (k, p))
    A, B = ctx.stage("A", 2 * x), ctx.stage("B", y + 1)
    P = ctx.matmul("P", A, B)
    C = ctx.stage("C", x[:, :1] * y[:1, :])                     # m x p, added to the product
    out = np.zeros((m + 2, p + 3), dtype=object)
    out[1:m + 1, 2:p + 2] = C + P
    out[0, 0] = x[0, 0]
    new_outputs, products = place_products(ctx, [("R", list(out.ravel()))], {"R": out.shape})
    (prod,) = products
    assert (prod.k, prod.row0, prod.accumulate, prod.symmetric) == (k, 1, True, False)
    assert prod.runs == (("R", p + 3, 2, p),)
    assert prod.ops() == {"mul": m * k * p, "add": m * (k - 1) * p + m * p}
    assert [n for n, _ in new_outputs] == ["R", prod.left]
    xv, yv = RNG.normal(size=(m, k)), RNG.normal(size=(k, p))
    values = dict(zip(("R", prod.left), (v.copy() for v in _run(ctx, new_outputs, xv, yv))))
    _apply(prod, values)
    want = np.zeros(out.shape)
    want[1:m + 1, 2:p + 2] = xv[:, :1] * yv[:1, :] + (2 * xv) @ (yv + 1)
    want[0, 0] = xv[0, 0]
    np.testing.assert_allclose(values["R"].reshape(out.shape), want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("case", ["lower", "not_a_run", "too_small"])
def test_masked_product_computes_the_mask_alone(case):
    """``ctx.matmul(..., mask=)``: the lower triangle of a 7 x 7 product stored into a block of an output
    whose other entries hold something else: a loop over each row's run of columns (``Product.ranges``;
    B padded to a multiple of 4 columns in the scratch), the rest of the block left as the program stored
    it.  A row whose entries are not one run of columns, or fewer than MASKED_PRODUCT_MIN entries: one
    expression per entry of the mask."""
    from soadyn.codegen.derive import MASKED_PRODUCT_MIN

    m, k = (7, 3) if case != "too_small" else (5, 3)
    mask = np.tri(m, dtype=bool)
    if case == "not_a_run":
        mask[m - 1, 1] = False
    assert (mask.sum() < MASKED_PRODUCT_MIN) == (case == "too_small")
    ctx = CodegenSymbolic()
    x = ctx.input("x", (m, k))
    y = ctx.input("y", (k, m))
    A, B = ctx.stage("A", 2 * x), ctx.stage("B", y + 1)
    P = ctx.matmul("P", A, B, mask=mask)
    assert all(P[i, j] is None for i, j in zip(*np.nonzero(~mask)))
    P2 = ctx.matmul("Q", A, 3 * B, mask=mask)                  # the same A: read from P's scratch array
    other = ctx.stage("O", x[:, :1] * y[:1, :])                  # the entries outside the mask
    out = np.zeros((m + 1, m + 2), dtype=object)
    out[1:, 1:m + 1] = np.where(mask, None, other)
    out2 = np.zeros((m, m), dtype=object)
    for i, j in zip(*np.nonzero(mask)):
        out[1 + i, 1 + j] = -P[i, j]
        out2[i, j] = P2[i, j]
    new_outputs, products = place_products(ctx, [("R", list(out.ravel())), ("R2", list(out2.ravel()))],
                                           {"R": out.shape, "R2": out2.shape})
    xv, yv = RNG.normal(size=(m, k)), RNG.normal(size=(k, m))
    want = np.zeros(out.shape)
    want[1:, 1:m + 1] = np.where(mask, -(2 * xv) @ (yv + 1), xv[:, :1] * yv[:1, :])
    want2 = np.where(mask, (2 * xv) @ (3 * (yv + 1)), 0.0)
    if case == "lower":
        prod, prod2 = products
        assert prod.ranges == tuple((0, i + 1) for i in range(m)) and prod.bstride == 8
        assert (prod.row0, prod.scale, prod.accumulate, prod.source) == (1, -1, False, None)
        assert prod.ops()["mul"] == m * (m + 1) // 2 * k
        assert prod2.source == (prod.left, k, tuple(range(m)), tuple(range(k)))
        names = ("R", "R2", prod.left, prod2.left)
        values = dict(zip(names, (v.copy() for v in _run(ctx, new_outputs, xv, yv))))
        assert len(values[prod2.left]) == k * 8                    # B alone
        _apply(prod, values)
        _apply(prod2, values)
        got, got2 = values["R"], values["R2"]
    else:
        assert products == []
        assert sum(a.target.name.startswith(("P_", "Q_")) for a in ctx.program) == 2 * mask.sum()
        got, got2 = _run(ctx, new_outputs, xv, yv)[:2]
    np.testing.assert_allclose(got.reshape(out.shape), want, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(got2.reshape(out2.shape), want2, rtol=1e-14, atol=1e-14)


def test_general_product_reads_a_block_of_an_output_in_place():
    """A left factor that is a block (rows and columns not contiguous) of another output W: the loops read
    it from W (``Product.source``), the scratch array holds B alone; without ``left_of``, or when W is not
    an output, A is copied into the scratch array."""
    m, k, p = 9, 4, 8                                           # >= GENERAL_PRODUCT_MIN entries
    ctx, W, B = _toy(11, p)
    rows, cols = [0, 1, 2, 3, 5, 6, 7, 9, 10], [1, 4, 5, 8]
    A = W[np.ix_(rows, cols)]
    Bk = B[:k]
    for left_of, with_w in (((W, rows, cols), True), (None, True), ((W, rows, cols), False)):
        ctx.deferred.clear()
        P = -ctx.matmul("P", A, Bk, left_of=left_of)
        outs = [("R", list(P.ravel()))] + ([("W", list(W.ravel()))] if with_w else [])
        new_outputs, (prod,) = place_products(ctx, outs, {"R": (m, p), "W": W.shape})
        if left_of is not None and with_w:
            assert prod.source == ("W", 11, tuple(rows), tuple(cols))
            assert len(dict(new_outputs)[prod.left]) == k * p
        else:
            assert prod.source is None and len(dict(new_outputs)[prod.left]) == m * k + k * p
        rng = np.random.default_rng(12)            # its own draws: the other tests' data stay as they were
        xv, yv = rng.normal(size=(11, 11)), rng.normal(size=(11, p))
        values = {n: v.copy() for (n, _), v in zip(new_outputs, _run(ctx, new_outputs, xv, yv))}
        if not with_w:
            values["W"] = (xv + xv.T).ravel()
        _apply(prod, values)
        want = -(xv + xv.T)[np.ix_(rows, cols)] @ (2 * yv[:k])
        np.testing.assert_allclose(values["R"].reshape(m, p), want, rtol=1e-13, atol=1e-13)


def test_symmetric_product_computes_the_upper_triangle():
    """``A D A^T`` declared symmetric: one symbol per upper entry, stored at both places with a symmetric
    rest; a rest that is not symmetric, or a product under GENERAL_PRODUCT_MIN entries, falls back to one
    expression per upper entry."""
    for m, case in ((8, "block"), (8, "rest_not_symmetric"), (7, "too_small")):
        k = 3
        ctx = CodegenSymbolic()
        x = ctx.input("x", (m, k))
        y = ctx.input("y", (m, m))
        A = ctx.stage("A", x)
        B = ctx.stage("B", 3 * x.T)
        P = ctx.matmul("P", A, B, symmetric=True)
        assert P[1, 2] == P[2, 1]
        C = ctx.stage("C", y) if case == "rest_not_symmetric" else ctx.stage_symmetric("C", y + y.T)
        out = np.zeros((m + 1, m + 1), dtype=object)
        out[1:, 1:] = C + P
        new_outputs, products = place_products(ctx, [("R", list(out.ravel()))], {"R": out.shape})
        xv, yv = RNG.normal(size=(m, k)), RNG.normal(size=(m, m))
        want = np.zeros(out.shape)
        want[1:, 1:] = (yv if case == "rest_not_symmetric" else yv + yv.T) + 3 * xv @ xv.T
        if case == "block":
            (prod,) = products
            assert (prod.symmetric, prod.row0, prod.accumulate) == (True, 1, True)
            assert prod.ops()["mul"] == m * (m + 1) // 2 * k
            values = dict(zip(("R", prod.left), (v.copy() for v in _run(ctx, new_outputs, xv, yv))))
            _apply(prod, values)
            got = values["R"].reshape(out.shape)
            assert np.array_equal(got, got.T)
        else:                                       # one expression per entry of the upper triangle
            assert products == []
            assert sum(a.target.name.startswith("P_") for a in ctx.program) == m * (m + 1) // 2
            got = _run(ctx, new_outputs, xv, yv)[0].reshape(out.shape)
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("case", ["used_later", "not_a_block", "mixed_signs"])
def test_product_expanded_where_it_cannot_run_in_place(case):
    m, p = 3, 4
    ctx, A, B = _toy(m, p)
    P = ctx.matmul("P", A, B)
    if case == "used_later":
        extra = ctx.stage("later", P[0, 0] * 2)
        outputs = [("R", list(P.ravel())), ("A", list(A.ravel())), ("e", [extra])]
        shapes = {"R": (m, p), "A": (m, m), "e": (1,)}
    elif case == "not_a_block":                     # A is no output, and the result is stored transposed
        outputs = [("R", list(P.T.ravel()))]
        shapes = {"R": (p, m)}
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
    if case == "not_a_block":
        want = want.T
    np.testing.assert_allclose(got[0].reshape(want.shape), want, rtol=1e-14)


# ---- the generated C: vectors of 4, of 2, none: the same bits ------------------------------------------
def _accepts(cc: list[str], flag: str, tmp: Path) -> bool:
    src = tmp / "probe.c"
    src.write_text("int main(void) { return 0; }\n")
    done = subprocess.run([*cc, flag, str(src), "-o", str(tmp / "probe")], capture_output=True)
    return done.returncode == 0


def _build_variants(cc, src: Path, tmp_path: Path, avx: bool = False) -> dict[str, ctypes.CDLL]:
    """``src`` compiled with vectors of the compiler's default target, without vectors, and (where the
    compiler takes it) with -march=native; ``avx``: also with AVX and no AVX-512 (vectors of 4 where the
    native target has vectors of 8)."""
    variants = {"simd (compiler's default target)": [], "scalar loops": ["-DSOADYN_NO_SIMD"]}
    if _accepts(cc, "-march=native", tmp_path):
        variants["simd (-march=native)"] = ["-march=native"]
    if avx and _accepts(cc, "-mavx2", tmp_path):
        variants["simd (-mavx2 -mno-avx512f)"] = ["-mavx2", "-mno-avx512f"]
    libs = {}
    for label, flags in variants.items():
        lib = tmp_path / f"{src.stem}{len(libs)}.so"
        subprocess.run([*cc, "-std=gnu99", "-O2", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC",
                        *flags, str(src), "-o", str(lib), "-lm"], check=True, capture_output=True)
        libs[label] = ctypes.CDLL(str(lib))
    return libs


def _same_bits(libs: dict[str, ctypes.CDLL], fn_name: str, ins, refs, nv: int) -> list[np.ndarray]:
    results = {}
    for label, dll in libs.items():
        outs = [np.full((nv, nv), np.nan) for _ in refs]
        args = [np.ascontiguousarray(x, dtype=float) for x in ins] + outs
        getattr(dll, fn_name)(*[a.ctypes.data_as(ctypes.c_void_p) for a in args])
        results[label] = outs
    for label, outs in results.items():
        for got, want in zip(outs, refs):
            assert not np.isnan(got).any(), label
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max(), err_msg=label)
    first = next(iter(results.values()))
    for label, outs in results.items():
        for a, b in zip(outs, first):
            assert np.array_equal(a.view(np.int64), b.view(np.int64)), label
    return first


def test_product_loops_give_the_same_bits_with_and_without_vectors(cc, request, tmp_path_factory, tmp_path):
    robot, _ = resolve_robot(TEST_ARM, "free")
    robot = robot.replace(gravity=np.array([0.7, -1.3, -9.81]))
    # the module of tests/test_derivatives.py (same robot, gravity, functions and directory): served from
    # the module cache, not derived again
    out = module_cache_dir(request, tmp_path_factory, "soadyn_derivative_modules")
    mod = compile_robot(robot, out, functions=["inverse_dynamics_derivatives", "forward_dynamics_derivatives",
                                                "frame_acceleration_derivatives"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    assert "prod_B" in src.read_text()                  # the product is a loop in this function
    rng = np.random.default_rng(8)
    q = robot.random_configuration(rng)
    v, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    _same_bits(_build_variants(cc, src, tmp_path), f"{mod.module_name}_forward_dynamics_derivatives",
               (q, v, tau), mod.forward_dynamics_derivatives(q, v, tau), robot.nv)


def test_symmetric_product_of_the_mass_matrix_inverse_gives_the_same_bits(cc, request, tmp_path_factory,
                                                                          tmp_path):
    """The free base's term of M^-1 (eq. 2.10c) as a symmetric loop, on a branched tree (an arm and three
    wheels on the base, 10 hinges; the terms of the arm's first three hinges, which span most pairs, as
    three more columns of the product): the same bits with and without vectors (of 2, 4 and 8 doubles: the
    entries below the diagonal as transposed 4 x 4 blocks, off the diagonal and on it, and one 8 x 8 block
    on it, the rest copied), equal to the float run and the dense reference, and the joints' block exactly
    symmetric."""
    from soadyn.reference.dense import mass_matrix

    robot, _ = resolve_robot(EXAMPLES / "dimitrov_7dof_rw.yaml", None)
    assert robot.is_free and len(set(robot.parent[1:])) < robot.n_bodies - 1      # branched
    out = module_cache_dir(request, tmp_path_factory, "soadyn_product_modules")
    mod = compile_robot(robot, out, functions=["mass_matrix_inverse"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    text = src.read_text()
    assert "_mass_matrix_inverse_prod_MinvB(" in text and "PROD_SHUF" in text     # loop, transposed blocks
    assert "(10 x 9) by (9 x 10)" in text     # the arm's first three hinges' terms as columns of the product
    q = robot.random_configuration(np.random.default_rng(9))
    libs = _build_variants(cc, src, tmp_path, avx=True)
    (minv,) = _same_bits(libs, f"{mod.module_name}_mass_matrix_inverse", (q,), (mod.mass_matrix_inverse(q),),
                         robot.nv)
    assert np.array_equal(minv[6:, 6:], minv[6:, 6:].T)
    # the SIMD batch (lanes of states) evaluates the product as expressions: the same bits per state
    (f,) = generate(robot, functions=["mass_matrix_inverse"], profile=get_profile("fast")).functions
    assert f.lanes_body is not None and f.extra.vectorised
    qs = np.array([robot.random_configuration(np.random.default_rng(s)) for s in range(5)])
    batch = mod.mass_matrix_inverse(qs)
    for qk, mk in zip(qs, batch):
        assert np.array_equal(mk.view(np.int64), mod.mass_matrix_inverse(qk).view(np.int64))
    want = np.linalg.inv(mass_matrix(robot, q))
    np.testing.assert_allclose(minv, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())


@pytest.mark.parametrize("m", [13, 15])
def test_symmetric_product_rows_with_a_partial_last_vector(cc, tmp_path, m):
    """A symmetric product that reads ``A`` in place from the output it writes (M^-1's base term in the
    forward-dynamics derivatives: ``W0*`` in the columns before the block), whose row is not a whole
    number of vectors (13 = 8 + 4 + 1, 15 = 8 + 4 + 2 + 1 with AVX-512; 13 = 3 x 4 + 1, 15 = 3 x 4 + 2 + 1
    with AVX): its last columns stored as unmasked pieces of 4, 2 and 1 lanes.  The generated C, built
    without vectors, with the default target, -march=native and AVX2, gives the same bits, equal to the
    product computed by numpy, the block exactly symmetric, and nothing outside the block written (the
    first row, and ``A``'s columns, which the next row reads)."""
    from soadyn.codegen.products import product_function

    k = 3
    ctx = CodegenSymbolic()
    x = ctx.input("x", (m, k))
    y = ctx.input("y", (m, m))
    X = ctx.stage("X", x)
    R = np.zeros((m + 1, k + m), dtype=object)
    R[1:, :k] = X
    P = ctx.matmul("P", X, 3 * X.T, symmetric=True, left_of=(R, list(range(1, m + 1)), list(range(k))))
    R[1:, k:] = ctx.stage_symmetric("C", y + y.T) + P
    new_outputs, (prod,) = place_products(ctx, [("R", list(R.ravel()))], {"R": R.shape})
    assert prod.symmetric and prod.columns == m and prod.source[0] == prod.runs[0][0] == "R"
    rng = np.random.default_rng(m)
    xv, yv = rng.normal(size=(m, k)), rng.normal(size=(m, m))
    R0, F = (np.ascontiguousarray(v, dtype=float) for v in _run(ctx, new_outputs, xv, yv))
    R0.reshape(m + 1, k + m)[0] = 7.0                                    # the first row: outside the block
    text, _ = product_function(prod, "t")
    assert "_mm_store_sd" in text and "_mm256_storeu_pd" in text
    params = list(dict.fromkeys([prod.left, prod.source[0], prod.runs[0][0]]))
    args = ", ".join("F" if a == prod.left else "R" for a in params)
    src = tmp_path / f"sym{m}.c"
    src.write_text(f"{text}\nvoid run(const double *F, double *R) {{ t_prod_P({args}); }}\n")
    libs = _build_variants(cc, src, tmp_path, avx=True)
    results = []
    for label, dll in libs.items():
        out = R0.copy()
        dll.run(F.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p))
        results.append(out)
        got, before = out.reshape(m + 1, k + m), R0.reshape(m + 1, k + m)
        assert np.array_equal(got[0], before[0]) and np.array_equal(got[:, :k], before[:, :k]), label
        assert np.array_equal(got[1:, k:], got[1:, k:].T), label
        np.testing.assert_allclose(got[1:, k:], yv + yv.T + 3 * xv @ xv.T, rtol=1e-13, atol=1e-13,
                                   err_msg=label)
    assert all(np.array_equal(r.view(np.int64), results[0].view(np.int64)) for r in results)


def test_mass_matrix_inverse_of_a_trunk_skips_the_zero_terms(cc, request, tmp_path_factory, tmp_path):
    """A humanoid's shape (two legs of 3 on the base, a trunk of 3 carrying two arms of 3: 15 hinges): the
    trunk's first two hinges' terms are columns of M^-1's base-term product (15 x 8 by 8 x 15) that are
    zero on the legs' rows, which sum only the base's 6 terms (row loops of 6, 7 and 8 terms).  The same
    bits with vectors of 8, 4, 2 and none and in the SIMD batch (whose expressions skip the same terms),
    and M^-1 of the dense reference."""
    import yaml
    from test_derivatives import _add_chain, _base_body

    from soadyn import load_robot
    from soadyn.reference.dense import mass_matrix

    rng = np.random.default_rng(11)
    bodies = _base_body()
    for leg in range(2):
        _add_chain(bodies, rng, "base", [(f"leg{leg}_{i}", f"jleg{leg}_{i}") for i in range(3)])
    chest = _add_chain(bodies, rng, "base", [(f"trunk{i}", f"jtrunk{i}") for i in range(3)])
    for arm in range(2):
        _add_chain(bodies, rng, chest, [(f"arm{arm}_{i}", f"jarm{arm}_{i}") for i in range(3)])
    path = tmp_path / "trunk_humanoid.yaml"
    path.write_text(yaml.safe_dump({"name": "trunk_humanoid", "base": "free", "gravity": [0.0, 0.0, -9.81],
                                    "bodies": bodies}))
    robot = load_robot(path)
    out = module_cache_dir(request, tmp_path_factory, "soadyn_product_modules")
    mod = compile_robot(robot, out, functions=["mass_matrix_inverse"], progress=False)
    src = next(Path(mod.__file__).parent.glob("*.c"))
    text = src.read_text()
    assert "(15 x 8) by (8 x 15)" in text
    for rows in ("prod_i = 0; prod_i < 6;", "prod_i = 6; prod_i < 7;", "prod_i = 7; prod_i < 15;"):
        assert rows in text                                  # the row loops: 6, 7 and 8 terms
    q = robot.random_configuration(np.random.default_rng(12))
    libs = _build_variants(cc, src, tmp_path, avx=True)
    (minv,) = _same_bits(libs, f"{mod.module_name}_mass_matrix_inverse", (q,), (mod.mass_matrix_inverse(q),),
                         robot.nv)
    assert np.array_equal(minv[6:, 6:], minv[6:, 6:].T)
    want = np.linalg.inv(mass_matrix(robot, q))
    np.testing.assert_allclose(minv, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
    qs = np.array([robot.random_configuration(np.random.default_rng(s)) for s in range(5)])
    for qk, mk in zip(qs, mod.mass_matrix_inverse(qs)):
        assert np.array_equal(mk.view(np.int64), mod.mass_matrix_inverse(qk).view(np.int64))
