"""Structure in the mass matrix (issue 11, item 3): the structural zeros between bodies on different
branches are not stored per call, and ``triangle="upper"`` fills only i <= j.

The generated C keeps the full-writing ``<robot>_mass_matrix`` (correct for any buffer) and adds
``_mass_matrix_nz`` / ``_mass_matrix_upper``, which need a zeroed output; the Python wrapper uses them only
where it zeroes the buffer itself.  Every check below starts from a garbage-filled ``out=`` buffer, so a
wrapper that trusted it to be zero fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_ARM, module_cache_dir

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot
from soadyn.reference import dense

N = 11          # batch size: not a multiple of the SIMD lanes of any profile


#: a fixed-base tree of four branches on a hub (j1-j2-j3, j4, j5, j6): 28 of its 36 entries are structural
#: zeros, so a new result goes through numpy.zeros + the nonzero-only variant (the scratch tree, 24 of 100,
#: through numpy.empty + the full-writing function)
SPARSE_TREE = """
name: mass_structure_hub
base: fixed
bodies:
  - {name: hub, mass: 10.0, inertia: {ixx: 1.0, iyy: 1.0, izz: 1.0}}
  - {name: a1, parent: hub, joint: {name: j1, type: revolute, axis: [0, 0, 1], xyz: [0.3, 0, 0]},
     mass: 2.0, com: [0.2, 0.01, 0], inertia: {ixx: 0.01, iyy: 0.05, izz: 0.05}}
  - {name: a2, parent: a1, joint: {name: j2, type: revolute, axis: [0, 1, 0], xyz: [0.4, 0, 0]},
     mass: 1.5, com: [0.15, 0, 0.02], inertia: {ixx: 0.01, iyy: 0.04, izz: 0.04, ixy: 0.002}}
  - {name: a3, parent: a2, joint: {name: j3, type: prismatic, axis: [1, 0, 0], xyz: [0.3, 0, 0]},
     mass: 0.7, com: [0.05, 0, 0], inertia: {ixx: 0.002, iyy: 0.01, izz: 0.01}}
  - {name: b1, parent: hub, joint: {name: j4, type: revolute, axis: [0, 1, 0], xyz: [-0.3, 0, 0.1]},
     mass: 1.2, com: [-0.1, 0, 0], inertia: {ixx: 0.01, iyy: 0.03, izz: 0.03}}
  - {name: c1, parent: hub, joint: {name: j5, type: revolute, axis: [1, 0, 0], xyz: [0, 0.3, 0]},
     mass: 0.9, com: [0, 0.1, 0.02], inertia: {ixx: 0.01, iyy: 0.02, izz: 0.02}}
  - {name: d1, parent: hub, joint: {name: j6, type: revolute, axis: [0.6, 0, 0.8], xyz: [0, -0.3, 0],
     rpy: [0.2, 0, 0.1]}, mass: 0.8, com: [0, -0.1, 0], inertia: {ixx: 0.01, iyy: 0.02, izz: 0.03}}
"""


@pytest.fixture(scope="module", params=["scratch_free", "hub_fixed"])
def tree(request, tmp_path_factory, cc):
    """The scratch tree (free base; branches j1-j3 and j4 on the base) and :data:`SPARSE_TREE`, mass matrix
    only, debug profile (the suite's)."""
    out = module_cache_dir(request, tmp_path_factory, "soadyn_mass_structure_modules")
    if request.param == "scratch_free":
        robot = load_robot(TEST_ARM).replace(name="mass_structure_scratch")
    else:
        path = out / "mass_structure_hub.yaml"
        if not path.is_file() or path.read_text() != SPARSE_TREE:
            path.write_text(SPARSE_TREE)
        robot = load_robot(path)
    module = compile_robot(robot, out, functions=["mass_matrix"], progress=False)
    init = Path(module.__file__).read_text()
    name = module.module_name
    nz_new = f"_lib.{name}_mass_matrix_nz, _lib.{name}_mass_matrix_nz_batch" in init
    assert nz_new == (request.param == "hub_fixed")    # both wrapper paths of triangle="full" are tested
    return robot, module


def _states(robot, n, seed=11):
    rng = np.random.default_rng(seed)
    return np.stack([robot.random_configuration(rng) for _ in range(n)])


def _garbage(shape, seed=5):
    out = np.random.default_rng(seed).normal(size=shape) * 1e3
    out.flat[::3] = np.nan
    return out


def _dirty(shape):
    """Leave a freed NaN-filled block of this size behind: numpy's and malloc's caches hand it to the next
    allocation of the same size, so a result array that the wrapper forgot to zero shows NaNs."""
    junk = np.full(shape, np.nan)
    del junk


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def _branch_block(robot):
    """(rows, cols) of M coupling joint j4 (its own branch) with j1-j3: exact zeros for every q."""
    off = robot.nv - robot.n_joints
    names = robot.joint_names
    return [off + names.index(j) for j in ("j1", "j2", "j3")], [off + names.index("j4")]


def test_full_and_upper_against_reference_with_garbage_out(tree):
    robot, m = tree
    Q = _states(robot, N)
    ref = np.stack([dense.mass_matrix(robot, q) for q in Q])
    iu = np.triu_indices(robot.nv)
    il = np.tril_indices(robot.nv, -1)
    for i, q in enumerate(Q):
        _dirty((robot.nv, robot.nv))
        new = m.mass_matrix(q)
        assert _rel(new, ref[i]) <= 1e-12
        out = _garbage((robot.nv, robot.nv))
        assert m.mass_matrix(q, out=out) is out
        assert np.array_equal(out, new)
        _dirty((robot.nv, robot.nv))
        up = m.mass_matrix(q, triangle="upper")
        out = _garbage((robot.nv, robot.nv))
        assert m.mass_matrix(q, triangle="upper", out=out) is out
        for u in (up, out):
            assert _rel(u[iu], ref[i][iu]) <= 1e-12
            assert np.array_equal(u[iu], new[iu])
            assert np.all(u[il] == 0)
    rows, cols = _branch_block(robot)
    assert np.all(ref[:, rows][:, :, cols] == 0) and np.all(new[np.ix_(rows, cols)] == 0)


@pytest.mark.parametrize("threads", [None, 2])
def test_batch_equals_scalar_with_garbage_out(tree, threads):
    robot, m = tree
    Q = _states(robot, N, seed=12)
    for tri in ("full", "upper"):
        single = np.stack([m.mass_matrix(q, triangle=tri) for q in Q])
        _dirty((N, robot.nv, robot.nv))
        new = m.mass_matrix(Q, triangle=tri, threads=threads)
        out = _garbage((N, robot.nv, robot.nv))
        assert m.mass_matrix(Q, triangle=tri, out=out, threads=threads) is out
        for got in (new, out):
            assert _rel(got, single) <= 1e-15, tri
            assert np.array_equal(np.isnan(got), np.zeros_like(got, dtype=bool))
        if tri == "upper":
            assert np.all(out[:, np.tril_indices(robot.nv, -1)[0], np.tril_indices(robot.nv, -1)[1]] == 0)


def test_c_variants_skip_exactly_the_structural_zeros(tree):
    """At the C level: the full function writes every entry of a NaN buffer; the nonzero-only variant
    leaves the NaNs exactly where the matrix is zero for every state (the branch block among them) and the
    upper variant leaves the lower triangle and those zeros alone."""
    robot, m = tree
    ffi, lib, p = m._ffi, m._lib, m.module_name
    Q = _states(robot, N, seed=13)
    nv = robot.nv
    buf = lambda a: ffi.from_buffer("double[]", a)  # noqa: E731
    full = np.full((N, nv, nv), np.nan)
    getattr(lib, f"{p}_mass_matrix_batch")(N, buf(Q), buf(full))
    assert not np.isnan(full).any()
    zero_everywhere = np.all(full == 0, axis=0)
    rows, cols = _branch_block(robot)
    assert zero_everywhere[np.ix_(rows, cols)].all()
    for suffix, written in (("_nz", ~zero_everywhere),
                            ("_upper", ~zero_everywhere & np.triu(np.ones((nv, nv), dtype=bool)))):
        out = np.full((N, nv, nv), np.nan)
        getattr(lib, f"{p}_mass_matrix{suffix}_batch")(N, buf(Q), buf(out))
        assert np.array_equal(~np.isnan(out), np.broadcast_to(written, out.shape)), suffix
        assert np.array_equal(out[:, written], full[:, written])
        single = np.full((nv, nv), np.nan)
        getattr(lib, f"{p}_mass_matrix{suffix}")(buf(Q[0]), buf(single))
        assert np.array_equal(~np.isnan(single), written)
    assert int(zero_everywhere.sum()) > 0


def test_triangle_argument_errors(tree):
    robot, m = tree
    q = _states(robot, 1)[0]
    for bad in ("lower", "Upper", None, 1):
        with pytest.raises(ValueError, match="triangle must be 'full' or 'upper'"):
            m.mass_matrix(q, triangle=bad)
    with pytest.raises(ValueError, match="out must be"):
        m.mass_matrix(np.stack([q, q]), triangle="upper", out=np.empty((2, robot.nv, robot.nv + 1)))


def test_python_stand_in_has_the_same_triangle_argument(tree):
    """soadyn.runtime.numeric_module (the pure-Python stand-in of a compiled module) takes triangle= too."""
    from soadyn.runtime.numeric_module import NumericModule

    robot, m = tree
    q = _states(robot, 1, seed=21)[0]
    stand_in = NumericModule(robot)
    for tri in ("full", "upper"):
        assert _rel(stand_in.mass_matrix(q, triangle=tri), m.mass_matrix(q, triangle=tri)) <= 1e-12
    with pytest.raises(ValueError, match="triangle must be"):
        stand_in.mass_matrix(q, triangle="lower")
