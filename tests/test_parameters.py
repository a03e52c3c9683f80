"""Run-time inertial parameters: robot file, conventions, physical checks, generated modules with ``params``.

Compiled modules are cached across sessions (pytest cache, like tests/test_codegen.py) and built with only
the functions the tests call.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES, REPO, TEST_ARM, module_cache_dir

from soadyn import load_robot
from soadyn.codegen.pipeline import compile_robot, generate
from soadyn.model.parameters import (
    PARAMETER_NAMES,
    check_params,
    clearly_consistent,
    default_params,
    first_parameter_problem,
    inertia_to_vector,
    parameter_problem,
    random_params,
    screen_conditions,
    vector_to_inertia,
    with_param_bodies,
    with_param_values,
)
from soadyn.model.robot import Inertia
from soadyn.model.robotfile import RobotFileError
from soadyn.reference import dense

FUNCS = ["inverse_dynamics", "forward_dynamics", "mass_matrix", "momentum", "center_of_mass",
         "forward_dynamics_schur", "generalized_inertia"]
TOL = 1e-12


@pytest.fixture(scope="session")
def module_dir(request, tmp_path_factory) -> Path:
    return module_cache_dir(request, tmp_path_factory, "soadyn_param_modules")


@pytest.fixture(scope="session")
def arm_params(module_dir):
    """scratch_tree (free base, a prismatic joint) with every body parameterised."""
    robot = with_param_bodies(load_robot(TEST_ARM), "all")
    return robot, compile_robot(robot, module_dir, functions=FUNCS, progress=False)


# ---- conventions and checks --------------------------------------------------------------------------
def test_parameter_vector_roundtrip_and_order():
    ine = Inertia(2.0, np.array([0.1, -0.2, 0.3]), np.array([[0.5, 0.01, -0.02], [0.01, 0.6, 0.03],
                                                             [-0.02, 0.03, 0.7]]))
    pi = inertia_to_vector(ine)
    # J about the origin by the parallel-axis theorem, written out: J = I_c + m (|c|^2 1 - c c^T)
    c = ine.com
    J = ine.inertia + 2.0 * (c @ c * np.eye(3) - np.outer(c, c))
    assert PARAMETER_NAMES == ("m", "mc_x", "mc_y", "mc_z", "J_xx", "J_xy", "J_xz", "J_yy", "J_yz", "J_zz")
    want = [2.0, 0.2, -0.4, 0.6, J[0, 0], J[0, 1], J[0, 2], J[1, 1], J[1, 2], J[2, 2]]
    np.testing.assert_allclose(pi, want, rtol=0, atol=1e-15)
    back = vector_to_inertia(pi)
    np.testing.assert_allclose(back.com, ine.com, atol=1e-15)
    np.testing.assert_allclose(back.inertia, ine.inertia, atol=1e-15)


@pytest.mark.parametrize("change, words", [
    ({0: -1.0}, "negative mass"),
    ({4: -0.5}, "not positive definite"),
    ({9: 50.0}, "triangle inequality"),
    ({1: np.nan}, "non-finite"),
])
def test_parameter_problems_are_named(change, words):
    pi = inertia_to_vector(Inertia(2.0, np.array([0.1, 0.0, 0.0]), np.diag([0.5, 0.6, 0.7])))
    assert parameter_problem(pi) is None
    for i, x in change.items():
        pi[i] = x
    assert words in parameter_problem(pi)


def test_triangle_inequality_is_about_the_com():
    # a thin rod (moments ~0, A, A about the CoM) is valid; moving J_zz above the bound is not; an exactly
    # zero moment is refused, as the robot-file loader refuses it (a moving body needs a positive-definite
    # inertia about its CoM)
    m, L = 1.0, 1.0
    pi = inertia_to_vector(Inertia(m, np.array([0.5, 0, 0]), np.diag([1e-6, m * L**2 / 12, m * L**2 / 12])))
    assert parameter_problem(pi) is None
    rod = inertia_to_vector(Inertia(m, np.array([0.5, 0, 0]), np.diag([0.0, m * L**2 / 12, m * L**2 / 12])))
    assert "not positive definite" in parameter_problem(rod)
    pi[9] += 0.2          # J_zz up: I_c = diag(0, 1/12, 1/12 + 0.2) breaks A + B >= C
    assert "triangle" in parameter_problem(pi)


def test_robot_file_parameters(tmp_path):
    text = TEST_ARM.read_text()
    p = tmp_path / "arm.yaml"
    p.write_text(text + "parameters: [l3, base]\n")
    r = load_robot(p)
    assert r.param_bodies == ("base", "l3")                         # body order, not the order written
    assert r.fingerprint() != load_robot(TEST_ARM).fingerprint()
    p.write_text(text + "parameters: all\n")
    assert load_robot(p).param_bodies == tuple(load_robot(TEST_ARM).body_names)
    p.write_text(text + "parameters: [l9]\n")
    with pytest.raises(RobotFileError, match=r"arm.yaml.*parameters.*'l9'"):
        load_robot(p)


def test_unparameterised_robot_derives_the_committed_c():
    """No parameterised body: the C is the committed one, function by function (the Schur-complement
    functions hold LAPACK-inverted constants whose last bits vary between machines; compared elsewhere)."""
    for stem in ("test_arm", "tian_wu_3dof"):
        robot = load_robot(EXAMPLES / f"{stem}.yaml")
        gen = generate(robot)
        committed = (REPO / "generated" / gen.module_name / gen.source_name).read_text(encoding="utf-8")
        ours = gen.files[gen.source_name]

        def bodies(text: str) -> dict[str, str]:
            parts = re.split(r"\n(?=void |int )", re.sub(r"/\*.*?\*/", "", text, flags=re.S))
            return {p.split("(")[0]: p for p in parts[1:] if "_schur" not in p.split("(")[0]}

        a, b = bodies(ours), bodies(committed)
        assert a.keys() == b.keys() and len(a) > 20
        assert [k for k in a if a[k] != b[k]] == []


# ---- generated modules -----------------------------------------------------------------------------
def test_params_equal_a_recompiled_module(arm_params, module_dir, rng):
    robot, mod = arm_params
    assert mod.param_bodies == list(robot.body_names)
    np.testing.assert_array_equal(mod.default_params(), default_params(robot))
    P = random_params(robot, rng)
    baked = with_param_bodies(with_param_values(robot, P), []).replace(name="scratch_tree_baked")
    ref = compile_robot(baked, module_dir, functions=FUNCS, progress=False)
    assert not ref.param_bodies
    n = 20
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    for name, args in (("inverse_dynamics", (q, v, a)), ("forward_dynamics", (q, v, a)),
                       ("mass_matrix", (q,)), ("momentum", (q, v)), ("center_of_mass", (q,)),
                       ("forward_dynamics_schur", (q, v, a)), ("generalized_inertia", (q,))):
        got = getattr(mod, name)(*args, params=P)                     # one parameter set for the batch
        want = getattr(ref, name)(*args)
        assert np.max(np.abs(got - want)) <= TOL * np.max(np.abs(want)), name
        per_state = getattr(mod, name)(*args, params=np.broadcast_to(P, (n, *P.shape)))
        np.testing.assert_array_equal(per_state, got)
    # the default equals the robot file's values (compare with the dense reference)
    np.testing.assert_allclose(mod.mass_matrix(q[0]), dense.mass_matrix(robot, q[0]), rtol=0, atol=1e-12)


def test_batched_params_differ_per_state(arm_params, rng):
    robot, mod = arm_params
    P = np.array([random_params(robot, rng) for _ in range(3)])
    q = np.array([robot.random_configuration(rng) for _ in range(3)])
    M = mod.mass_matrix(q, params=P)
    for i in range(3):
        ref = dense.mass_matrix(with_param_values(robot, P[i]), q[i])
        assert np.max(np.abs(M[i] - ref)) <= 1e-12 * np.max(np.abs(ref))


@pytest.mark.parametrize("row, col, value, words", [
    (2, 0, -0.5, "negative mass"),
    (1, 4, -1.0, "not positive definite"),
    (4, 9, 40.0, "triangle inequality"),
])
def test_invalid_params_raise_before_c(arm_params, rng, row, col, value, words):
    robot, mod = arm_params
    P = default_params(robot)
    P[row, col] = value
    with pytest.raises(ValueError, match=words) as e:
        check_params(robot, P)
    assert robot.body_names[row] in str(e.value)
    with pytest.raises(ValueError, match=rf"mass_matrix: params\[{row}\] \(body '{robot.body_names[row]}'\).*"
                                         f"{words}"):
        mod.mass_matrix(robot.neutral(), params=P)
    with pytest.raises(ValueError, match="params must have shape"):
        mod.mass_matrix(robot.neutral(), params=P[:2])


def test_structure_operations_keep_parameterised_bodies():
    from soadyn.structure.operations import lock_joints

    robot = with_param_bodies(load_robot(TEST_ARM), ["l2", "l4", "l3"])
    locked = lock_joints(robot, ["j3"])            # l3 merges into l2
    assert locked.param_bodies == ("l2", "l4")


def test_verify_passes_for_a_parameterised_module(module_dir, tmp_path):
    """``soadyn verify`` on a robot file with ``parameters: all``: every generated function (regressors
    included) against the reference path evaluated with the same random parameters."""
    from soadyn.cli.commands import verify

    p = tmp_path / "tian_wu_params.yaml"
    text = (EXAMPLES / "tian_wu_3dof.yaml").read_text()
    p.write_text(text.replace("name: tian_wu_3dof", "name: tian_wu_params") + "\nparameters: all\n")
    checks = verify(p, module_dir, states=4, tol=1e-10)
    names = {c.function for c in checks}
    assert {"inverse_dynamics_regressor", "momentum_regressor", "forward_dynamics_schur"} <= names
    bad = [(c.function, c.err_reference, c.err_algorithm) for c in checks if not c.ok]
    assert not bad
    assert all(c.err_reference is not None for c in checks if "regressor" in c.function)


def test_derivatives_read_the_parameters(rng):
    """The derivative algorithms (issue 12) read inertias through the same accessor: with run-time
    parameters they equal the derivatives of the robot with those values built in."""
    from soadyn.model.parameters import param_indices
    from soadyn.symbolic import algorithms as alg
    from soadyn.symbolic.scalar import Numeric

    robot = with_param_bodies(load_robot(TEST_ARM), "all")
    P = random_params(robot, rng)
    baked = with_param_values(robot, P)
    q, v, a = robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    for fn in (alg.inverse_dynamics_derivatives, alg.forward_dynamics_derivatives):
        got = fn(robot, Numeric(dict(zip(param_indices(robot), P))), q, v, a)
        want = fn(baked, Numeric(), q, v, a)
        for g, w in zip(got, want):
            assert np.max(np.abs(g - w)) <= 1e-12 * np.max(np.abs(w))


def test_single_calls_with_params_in_c_change_no_outcome(arm_params, rng, monkeypatch):
    """The C entries of single calls (``_fx_*``) with ``params``: the same bits and refusals as the
    module's Python code (default, given, per-state and invalid parameter sets)."""
    robot, mod = arm_params
    assert {"mass_matrix", "forward_dynamics"} <= set(mod._FX)
    P = random_params(robot, rng)
    bad = P.copy()
    bad[2, 0] = -0.5
    q = robot.random_configuration(rng)
    Q = np.array([robot.random_configuration(rng) for _ in range(3)])
    v, a = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    cases = {"M default": lambda: mod.mass_matrix(q), "M params": lambda: mod.mass_matrix(q, params=P),
             "M params list": lambda: mod.mass_matrix(q, params=P.tolist()),
             "M params batch of 1": lambda: mod.mass_matrix(q, params=P[None]),
             "M bad params": lambda: mod.mass_matrix(q, params=bad),
             "FD params": lambda: mod.forward_dynamics(q, v, a, params=P),
             "FD params out": lambda: mod.forward_dynamics(q, v, a, params=P, out=np.empty(robot.nv)),
             "momentum params": lambda: mod.momentum(q, v, params=P),
             "M batch, one params": lambda: mod.mass_matrix(Q, params=P),
             "M batch, params per state": lambda: mod.mass_matrix(Q, params=np.array([P, P, P])),
             "M batch, default params": lambda: mod.mass_matrix(Q)}

    def outcome(f):
        try:
            r = f()
        except ValueError as e:
            return ("raised", str(e))
        return ("returned", type(r), r.shape, r.tobytes())

    fast = {k: outcome(f) for k, f in cases.items()}
    for name in list(vars(mod)):
        if name.startswith("_fx_"):
            monkeypatch.setattr(mod, name, mod._nofast)
    assert fast == {k: outcome(f) for k, f in cases.items()}


def _screen_cases() -> tuple[np.ndarray, np.ndarray]:
    """Rows (k, 10) around every boundary of parameter_problem, and which are far inside (expected
    accepted by the vectorised screen)."""
    rng = np.random.default_rng(7)
    rows, inside = [], []

    def add(I, c, m=2.0, far=False):
        rows.append(inertia_to_vector(Inertia(m, np.asarray(c, float), np.asarray(I, float))))
        inside.append(far)

    for _ in range(200):                       # random rigid bodies: principal moments from point masses
        R, _r = np.linalg.qr(rng.normal(size=(3, 3)))
        x, y, z = rng.uniform(0.05, 1.0, size=3)
        d = np.array([y + z, x + z, x + y])    # moments of a box-like density: strictly triangle-feasible
        add(R @ np.diag(d) @ R.T, rng.normal(size=3) * 0.3, m=rng.uniform(0.1, 10.0), far=True)
    for eps in (1e-3, 1e-7, 1e-10, 1e-13, 0.0, -1e-13, -1e-7, -1e-3):
        add(np.diag([0.5 * (1 + eps), 0.3, 0.2]), [0.1, 0.0, 0.0])          # triangle A + B = C edge
        add(np.diag([eps, 0.5, 0.5]), [0.1, 0.2, 0.0])                      # positive-definite edge
    add(np.diag([0.01, 0.012, 0.015]), [4e4, 0, 0], m=1e-2)                 # far from the origin
    add(np.diag([0.01, 0.012, 0.015]), [4e7, 0, 0], m=1e-2)                 # rounding decides I_c
    for row in (np.zeros(10), np.r_[-1.0, np.zeros(9)], np.r_[2.0, np.nan, np.zeros(8)],   # massless,
                np.r_[2.0, 1e300, 1e300, 0, 1, 0, 0, 1, 0, 1],     # negative mass, NaN, I_c overflows,
                np.r_[np.inf, 0, 0, 0, 1, 0, 0, 1, 0, 1], np.r_[2.0, 0, 0, 0, np.inf, 0, 0, 1, 0, 1],   # inf
                np.r_[2.0, 0, 0, 0, 1, -np.inf, 0, 1, 0, 1]):
        rows.append(row)
        inside.append(False)
    return np.array(rows), np.array(inside)


def test_vectorised_screen_agrees_with_parameter_problem():
    """clearly_consistent never accepts a row parameter_problem refuses, accepts the well-inside ones, and
    first_parameter_problem (screen + scalar rule) finds the same first refused row as the scalar rule."""
    rows, inside = _screen_cases()
    ok = clearly_consistent(rows)
    verdict = [parameter_problem(r) for r in rows]
    assert not any(o and v is not None for o, v in zip(ok, verdict))
    assert ok[inside].all()
    assert sum(v is not None for v in verdict) >= 10           # the edges include refused rows
    for moving in ([True], [False], [True, False, True]):
        for start in range(0, len(rows), 37):
            sub = rows[start:]
            want = next(((i, v) for i, r in enumerate(sub)
                         if (v := parameter_problem(r, moving[i % len(moving)])) is not None), None)
            assert first_parameter_problem(sub, moving) == want


def test_vectorised_screen_is_sound_on_random_bodies_at_every_scale():
    """No row clearly_consistent accepts is refused by parameter_problem: 6 x 1,500 random rows near the
    triangle and definiteness edges (relative distances 1e-9..1e-3, both sides), with moments, masses and
    centres over 16 decades (centres far from the body origin: J about the origin cancels against
    h~h~/m), J perturbed off any rigid body, masses of both signs; and the screen still accepts rows well
    inside (at least 10 % of them)."""
    rng = np.random.default_rng(11)
    rows = []
    for kind in range(6):
        for _ in range(1500):
            R = np.linalg.qr(rng.normal(size=(3, 3)))[0]
            if kind == 0:                                   # triangle edge A + B = C
                a, b = rng.uniform(0.01, 1, 2)
                ev = np.array([a, b, (a + b) * (1 + rng.choice([-1, 1]) * 10 ** rng.uniform(-9, -3))])
            elif kind == 1:                                 # definiteness edge
                ev = np.array([rng.choice([-1, 1]) * 10 ** rng.uniform(-9, -3), 0.5, 0.5])
            elif kind == 2:
                ev = 10 ** rng.uniform(-8, 8) * rng.uniform(0, 1, 3)
            else:
                ev = rng.uniform(-0.1, 1, 3)
            m = 10 ** rng.uniform(-8, 8)
            c = rng.normal(size=3) * 10 ** rng.uniform(-3, 7 if kind >= 3 else 3)
            row = inertia_to_vector(Inertia(m, c, R @ np.diag(ev) @ R.T))
            if kind == 4:                                   # J off any rigid body
                row[4:] += rng.normal(size=6) * np.abs(row[4:]).max() * 10 ** rng.uniform(-12, -2)
            if kind == 5:
                row[0] *= rng.choice([-1, 1])
            rows.append(row)
    rows = np.array(rows)
    ok = clearly_consistent(rows)
    assert ok.mean() > 0.1
    assert [i for i in np.flatnonzero(ok) if parameter_problem(rows[i]) is not None] == []


# ---- parameters in batches: SIMD lanes, one set for a batch, the accepted sets (issue 26) ------------
@pytest.mark.parametrize("profile", ["fast", "portable", "staged"])
def test_parameter_batches_through_the_lanes_equal_single_calls(module_dir, rng, profile):
    """Per-state parameter sets in a batch go through the SIMD lanes (read lane-major, codegen/lanes.py
    TRANSPOSED_INPUTS; 4 lanes in 'fast', 2 in 'portable'; 50 parameters: a tail of 2 past the 4-lane
    blocks) and, from Python, in chunks of 32 states (fastcalls.c.j2): every state's result equals the
    single call with its own set (the scalar C), bit for bit, and the reference path within rounding; one
    set for the whole batch (tiled in C) equals the same set given per state.  A set read by the wrong
    lane, or a block transposed wrongly (or used before its transposition: 'staged' splits the functions
    into stages of ~150 operations, each block transposed in the stage that first reads it), gives another
    state's parameters and fails."""
    from soadyn.codegen.profiles import Profile, get_profile

    robot = with_param_bodies(load_robot(TEST_ARM), "all").replace(name=f"scratch_tree_lanes_{profile}")
    prof = get_profile("fast" if profile == "staged" else profile)
    if profile == "staged":
        prof = Profile("staged", prof.cflags, 150, prof.lanes, prof.native)
    mod = compile_robot(robot, module_dir, functions=["inverse_dynamics", "mass_matrix"], profile=prof,
                        progress=False)
    n = 37                                    # one 32-state chunk, then 5: four lanes and one scalar state
    P = np.array([random_params(robot, rng, spread=0.5) for _ in range(n)])
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    for check in (True, False):
        tau = mod.inverse_dynamics(q, v, a, params=P, check_params=check)
        M = mod.mass_matrix(q, params=P, check_params=check, threads=1)
        for i in range(n):
            assert np.array_equal(tau[i], mod.inverse_dynamics(q[i], v[i], a[i], params=P[i])), (check, i)
            assert np.array_equal(M[i], mod.mass_matrix(q[i], params=P[i])), (check, i)
    for i in (0, 3, 4, 33, 36):
        want = dense.mass_matrix(with_param_values(robot, P[i]), q[i])
        assert np.max(np.abs(M[i] - want)) <= 1e-12 * np.max(np.abs(want)), i
    one = mod.inverse_dynamics(q, v, a, params=P[5])
    assert np.array_equal(one, mod.inverse_dynamics(q, v, a, params=np.repeat(P[5:6], n, axis=0)))
    assert not np.array_equal(one, tau)
    out = np.empty((n, robot.nv))
    assert mod.inverse_dynamics(q, v, a, params=P[5], out=out) is out and np.array_equal(out, one)


@pytest.mark.parametrize("profile", ["fast", "portable"])
def test_parameter_batch_lanes_test_the_state_inputs(module_dir, rng, profile):
    """A per-state parameter batch from Python leaves the finiteness of q, v, a and the free base's
    quaternions to the SIMD lanes (<f>_batch_checked, check & 4 and & 8: a sum per vector position of the
    lanes' rows, q[3:7] of each lane) and tests the states after their groups itself: a NaN or an infinity
    in any state input, or a zero quaternion, at a state inside the lanes' groups or in the scalar tail,
    stops the lanes at that state's group and leaves the call to the Python code, which refuses it as
    before (the same message as the constant module's); without those bits the lanes do not look.  Finite
    entries whose sums overflow stop the lanes too, and the entry's own test then runs them."""
    import ctypes

    from soadyn.codegen.profiles import get_profile

    robot = with_param_bodies(load_robot(TEST_ARM), "all").replace(name=f"scratch_tree_lanes_{profile}")
    mod = compile_robot(robot, module_dir, functions=["inverse_dynamics", "mass_matrix"],
                        profile=get_profile(profile), progress=False)
    lanes = get_profile(profile).lanes
    ext = ctypes.CDLL(str(next(Path(mod.__file__).parent.glob("_soadyn_*.so"))))
    checked = ext[f"{mod.module_name}_inverse_dynamics_batch_checked"]
    checked.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 5 + [ctypes.c_int]
    fid = mod._FX["inverse_dynamics"]
    n = 37                                    # 36 states in the lanes' groups, one in the scalar tail
    P = np.array([random_params(robot, rng) for _ in range(n)])
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    tau = np.empty((n, robot.nv))
    for check in (1, 2):
        assert checked(8, *(x.ctypes.data for x in (q, v, a, P, tau)), check | 4 | 8) == 8
    assert fid(q, v, a, P, None, True) is not None and fid(q, v, a, P, None, False) is not None
    for which, k in (("q", 0), ("q", 5), ("v", 2), ("a", robot.nv - 1)):
        for s in (1, 6, 21, 36):
            for bad in (np.nan, np.inf, -np.inf):
                x = {"q": q, "v": v, "a": a}
                x = {name: y.copy() for name, y in x.items()}
                x[which][s, k] = bad
                args = [x["q"], x["v"], x["a"]]
                if s < 8:
                    for check in (1, 2):
                        assert checked(8, *(y.ctypes.data for y in (*args, P, tau)), check | 4) \
                            == s // lanes * lanes, (which, k, s, bad)
                        assert checked(8, *(y.ctypes.data for y in (*args, P, tau)), check) == 8
                assert fid(*args, P, None, True) is None and fid(*args, P, None, False) is None
        with pytest.raises(ValueError, match="non-finite"):
            mod.inverse_dynamics(*args, params=P)
    big = v.copy()                            # finite entries whose sums overflow: the entry's test decides
    big[:8] = 1.5e308
    assert checked(8, *(y.ctypes.data for y in (q, big, a, P, tau)), 1 | 4) == 0
    assert fid(q, big, a, P, None, True) is not None
    for s in (2, 7, 36):                      # a zero quaternion: finite, refused by the Python code
        z = q.copy()
        z[s, 3:7] = 0.0
        if s < 8:
            assert checked(8, *(y.ctypes.data for y in (z, v, a, P, tau)), 1 | 8) == s // lanes * lanes
            assert checked(8, *(y.ctypes.data for y in (z, v, a, P, tau)), 1 | 4) == 8
        assert fid(z, v, a, P, None, True) is None and fid(z, v, a, P, None, False) is None
        with pytest.raises(ValueError, match="quaternion"):
            mod.inverse_dynamics(z, v, a, params=P)


def _cc_runs_avx2() -> bool:
    """This machine runs AVX2 and FMA code (x86-64-v3)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return all(f" {f}" in flags for f in ("avx2", "fma", "bmi2"))


#: a row on the triangle edge A + B = C (principal moments 0.5 = 0.3 + 0.2): parameter_problem accepts it,
#: the screens (clearly_consistent, and its C print in the extension) leave it to parameter_problem
EDGE_ROW = inertia_to_vector(Inertia(2.0, np.array([0.1, 0.0, 0.0]), np.diag([0.5, 0.3, 0.2])))


def test_accepted_parameter_sets_are_compared_whole(arm_params, rng):
    """A batch the C screen accepts runs without the Python check and is not kept; a set (or batch) the
    Python check accepted (a row on an edge the screen leaves to it) is kept and not checked again (the
    extension keeps its bytes): one that differs from it only in a late state (past the first 32-state
    chunk) is still checked and refused, naming that state; check_params=False still refuses a non-finite
    value there; the robot file's values are accepted from the start; at most 64 sets are kept."""
    robot, mod = arm_params
    assert parameter_problem(EDGE_ROW) is None and not clearly_consistent(EDGE_ROW[None])[0]
    assert mod._fx_params_known(mod.default_params()) is True
    n = 40
    P = np.array([random_params(robot, rng) for _ in range(n)])
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    M = mod.mass_matrix(q, params=P)
    assert mod._fx_params_known(P) is False                   # screened in C, nothing kept
    edge = P.copy()
    edge[:, 1] = EDGE_ROW
    assert mod._FX["mass_matrix"](q, edge, None, True) is None          # left to the Python check
    Me = mod.mass_matrix(q, params=edge)
    assert mod._fx_params_known(edge) is True and mod._fx_params_known(edge.copy()) is True
    assert mod._FX["mass_matrix"](q, edge, None, True) is not None      # known now
    for base in (P, edge):
        bad = base.copy()
        bad[38, 2, 0] = -1.0
        assert mod._fx_params_known(bad) is False
        with pytest.raises(ValueError, match=r"mass_matrix: params\[38, 2\] .*negative mass"):
            mod.mass_matrix(q, params=bad)
        nan = base.copy()
        nan[35, 1, 4] = np.nan
        with pytest.raises(ValueError, match="non-finite"):
            mod.mass_matrix(q, params=nan, check_params=False)
    assert np.array_equal(mod.mass_matrix(q, params=edge), Me)
    for _ in range(70):                        # more sets than the extension keeps
        s = random_params(robot, rng)
        s[1] = EDGE_ROW
        mod.mass_matrix(q[0], params=s)
    assert mod._fx_params_known(mod.default_params()) is True
    assert mod._fx_params_known(edge) is False
    assert np.array_equal(mod.mass_matrix(q, params=edge), Me)    # checked again, same result
    assert np.array_equal(mod.mass_matrix(q, params=P), M)


@pytest.mark.parametrize("profile", ["tests", "fast", "portable", "avx2"])
def test_c_parameter_screen_gives_the_python_screens_verdict(arm_params, module_dir, rng, profile):
    """The extension's C screen (clearly_consistent's rule printed as C, codegen/fastcalls.py) accepts
    exactly the rows clearly_consistent accepts, through its scalar path (one set of 5 rows) and its
    vector path (as many rows per vector as the target's vectors hold doubles: 2 in 'portable' and the
    tests' profile, 4 with AVX2, 8 in 'fast' on an AVX-512 machine, columns made by shuffles of whole
    rows; a batch of 8 states, the row at each position of a vector): the C entry runs (returns a result)
    on an unknown set iff every row passes, else it leaves the call to the Python check.  Rows: every edge
    of _screen_cases, their small perturbations, random valid bodies, rows that fail one condition alone,
    and a NaN or an infinity at each of the ten entries of a valid row (the screen is the only finiteness
    test of a checked set: both screens refuse them).  In 'fast' and 'portable' the inverse dynamics' batch
    screens the rows in its SIMD lanes (codegen/lanes.py, screen_function; check_params=False: their
    finiteness, from their sum): from Python the same verdicts, and its C entry <f>_batch_checked runs the
    groups of lanes before the row's and stops at the row's (or at finite entries whose sum overflows,
    which the Python entry's own finiteness test then accepts)."""
    import ctypes

    from soadyn.codegen.profiles import Profile, get_profile

    robot, mod = arm_params                 # the tests' profile
    if profile == "avx2":                   # the fast profile's flags for an AVX2 machine
        if not _cc_runs_avx2():
            pytest.skip("this machine cannot run AVX2 code")
        fast = get_profile("fast")
        prof = Profile("avx2", tuple("-march=x86-64-v3" if f == "-march=native" else f for f in fast.cflags),
                       fast.stage_ops, fast.lanes)
        mod = compile_robot(robot.replace(name="scratch_tree_screen_avx2"), module_dir,
                            functions=["mass_matrix"], profile=prof, progress=False)
    elif profile != "tests":                # the modules of test_parameter_batches_through_the_lanes_...
        mod = compile_robot(robot.replace(name=f"scratch_tree_lanes_{profile}"), module_dir,
                            functions=["inverse_dynamics", "mass_matrix"], profile=get_profile(profile),
                            progress=False)
    fx = mod._FX["mass_matrix"]
    rows, _ = _screen_cases()
    # rotated bodies near the edges, negative masses: rows that fail one condition of the rule alone
    k = 4000
    R = np.linalg.qr(rng.normal(size=(k, 3, 3)))[0]
    J = R @ (rng.uniform(-0.2, 1.0, (k, 3))[:, :, None] * np.eye(3)) @ R.transpose(0, 2, 1)
    more = np.column_stack([rng.choice([1.0, -1.0], k, p=[0.9, 0.1]), np.zeros((k, 3)), J[:, 0, 0],
                            J[:, 0, 1], J[:, 0, 2], J[:, 1, 1], J[:, 1, 2], J[:, 2, 2]])
    valid = random_params(robot, rng)[1]
    negative = -valid                          # m < 0 and -J, -h: S = m Sigma_O - h h^T is the valid one's
    unbounded = np.repeat(valid[None], 30, axis=0)
    for i in range(30):
        unbounded[i, i % 10] = (np.nan, np.inf, -np.inf)[i // 10]
    rows = np.vstack([rows, rows * (1 + 1e-9 * rng.normal(size=rows.shape)), more, negative,
                      [random_params(robot, rng)[1] for _ in range(20)], unbounded])
    with np.errstate(all="ignore"):
        fails = ~np.array([x > y for x, y in screen_conditions(rows.T.copy())])
        assert fails[:, -30:].any(axis=0).all()       # no NaN or infinity passes
    alone = fails & (fails.sum(axis=0) == 1)
    # m > 0, the rounding bound, the last minor (the triangle inequality): each decides some rows alone
    assert alone[[0, 1, 4]].any(axis=1).all()
    pick = np.flatnonzero(alone.any(axis=0) | (rng.uniform(size=len(rows)) < 0.05))
    rows = rows[np.unique(np.r_[pick, np.arange(len(rows) - 50, len(rows))])]
    want = clearly_consistent(rows)
    assert 0 < want.sum() < len(rows)
    base = random_params(robot, rng)
    q = robot.random_configuration(rng)
    Q = np.array([robot.random_configuration(rng) for _ in range(8)])
    B = np.array([random_params(robot, rng) for _ in range(8)])
    assert clearly_consistent(base).all() and clearly_consistent(B.reshape(-1, 10)).all()
    lanes = None
    if profile in ("fast", "portable"):       # the inverse dynamics' lanes check the rows themselves
        lanes = get_profile(profile).lanes
        fid = mod._FX["inverse_dynamics"]
        ext = ctypes.CDLL(str(next(Path(mod.__file__).parent.glob("_soadyn_*.so"))))
        checked = ext[f"{mod.module_name}_inverse_dynamics_batch_checked"]
        checked.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 5 + [ctypes.c_int]
        V, tau = rng.normal(size=(8, robot.nv)), np.empty((8, robot.nv))
        assert checked(8, *(x.ctypes.data for x in (Q, V, V, B, tau)), 1) == 8
    for k, (row, w) in enumerate(zip(rows, want)):
        one = base.copy()
        one[k % 5] = row
        assert (fx(q, one, None, True) is not None) == w, (k, row)
        batch = B.copy()
        batch[k % 8, (k // 8) % 5] = row
        assert (fx(Q, batch, None, True) is not None) == w, (k, row)
        # check_params=False: the finiteness test alone (fx_finite_d, 8 entries per vector with AVX-512)
        finite = bool(np.isfinite(row).all())
        assert (fx(q, one, None, False) is not None) == finite, (k, row)
        assert (fx(Q, batch, None, False) is not None) == finite, (k, row)
        if lanes is not None:
            assert (fid(Q, V, V, batch, None, True) is not None) == w, (k, row)
            assert (fid(Q, V, V, batch, None, False) is not None) == finite, (k, row)
            for check, ok in ((1, w), (2, finite)):
                done = checked(8, *(x.ctypes.data for x in (Q, V, V, batch, tau)), check)
                assert done == (8 if ok else k % 8 // lanes * lanes), (k, row, check)
    if lanes is not None:       # finite entries whose sum overflows: the lanes leave them to fx_finite_d
        big = B.copy()
        big[5, 1, 4:6] = 1.5e308
        assert checked(8, *(x.ctypes.data for x in (Q, V, V, big, tau)), 2) == 5 // lanes * lanes
        assert fid(Q, V, V, big, None, False) is not None
