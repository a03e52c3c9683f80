"""CasADi binding (soadyn.casadi): the generated C as casadi.Function objects with the exact Jacobian.

Modules: tests/binding_modules.py (the test arm, free and fixed base, gravity on, with the dynamics, the
kinematics of frames and their derivatives)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from binding_modules import arm_module, central, state
from conftest import TEST_ARM, module_cache_dir

ca = pytest.importorskip("casadi")

import soadyn.casadi as sc  # noqa: E402
from soadyn._bindings import c_functions, dense_jacobian, find_function, raw_q_jacobian  # noqa: E402
from soadyn.casadi import casadi_rows  # noqa: E402


@pytest.fixture(scope="module", params=["free", "fixed"])
def arm(request, tmp_path_factory):
    return arm_module(request, tmp_path_factory, request.param)


_state = state
_central = central


def test_every_function_matches_the_module(arm, rng):
    checked = 0
    for f in c_functions(arm):
        if f.fext:
            continue
        frames = list(arm.frame_ids) if f.family else [None]
        for frame in frames[-2:]:
            fn = sc.function(arm, f.api, frame=frame, world_aligned=bool(f.world_aligned))
            q, v, x = _state(arm, rng)
            vals = {"q": q, "v": v, "a": x, "tau": x}
            args = [vals[n] for n, _ in f.inputs]
            kw = {} if frame is None else {"frame": frame}
            if f.world_aligned is not None:
                kw["world_aligned"] = f.world_aligned
            ref = getattr(arm, f.api)(*args, **kw)
            ref = ref if isinstance(ref, tuple) else (ref,)
            got = fn(*args)
            got = got if isinstance(got, (list, tuple)) else [got]
            for g, r in zip(got, ref):
                r = np.asarray(r)
                r = r.reshape(-1, r.shape[-1]) if r.ndim == 3 else r       # stacked matrices
                g = np.asarray(g).reshape(r.shape) if r.ndim < 2 else np.asarray(g)
                assert g.shape == r.shape
                np.testing.assert_array_equal(g, r)          # the same C, the same bits
            checked += 1
    assert checked >= 8


@pytest.mark.parametrize("api", ["forward_dynamics", "inverse_dynamics"])
def test_jacobian_matches_finite_differences(arm, rng, api):
    fn = sc.function(arm, api)
    jac = fn.jacobian()
    nq, nv = arm.nq, arm.nv
    f = getattr(arm, api)
    for _ in range(3):
        q, v, x = _state(arm, rng)
        y = f(q, v, x)
        blocks = [np.asarray(ca.DM(b).full()) for b in jac(q, v, x, y)]
        J = np.hstack(blocks)
        assert J.shape == (nv, nq + 2 * nv)
        Jfd = _central(lambda z: f(z[:nq], z[nq:nq + nv], z[nq + nv:]), np.r_[q, v, x])
        scale = np.abs(Jfd).max()
        assert np.abs(J - Jfd).max() <= 1e-6 * scale, (api, np.abs(J - Jfd).max(), scale)
        # the same numbers as the Python conversion of the module's tangent derivatives
        np.testing.assert_allclose(J, np.hstack(dense_jacobian(arm, api, (q, v, x))), rtol=1e-12, atol=1e-12)
        if arm.base == "free":
            # the raw quaternion: scaling it changes nothing, so the Jacobian is orthogonal to it
            assert np.abs(J[:, 3:7] @ q[3:7]).max() <= 1e-9 * scale
            assert np.abs(J[:, 0:3]).max() == 0.0          # body-frame dynamics: no base position


@pytest.mark.parametrize("api", ["frame_pose", "frame_twist", "frame_acceleration", "body_poses"])
def test_frame_jacobians_match_finite_differences(arm, rng, api):
    nq, nv = arm.nq, arm.nv
    names = {"frame_pose": ["q"], "frame_twist": ["q", "v"], "frame_acceleration": ["q", "v", "a"],
             "body_poses": ["q"]}[api]
    sizes = {"q": nq, "v": nv, "a": nv}
    for frame in (("tcp", "l4") if api != "body_poses" else (None,)):
        fn = sc.function(arm, api, frame=frame)
        jac = fn.jacobian()
        q, v, x = _state(arm, rng)
        args = [{"q": q, "v": v, "a": x}[n] for n in names]
        outs = fn(*args)
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        blocks = jac(*args, *outs)
        blocks = blocks if isinstance(blocks, (list, tuple)) else [blocks]
        # rows: each output's entries in CasADi's (column-major) order, as casadi.vec gives them
        per = len(names)
        J = np.vstack([np.hstack([np.asarray(ca.DM(b).full()) for b in blocks[k * per:(k + 1) * per]])
                       for k in range(fn.n_out())])

        def f(z, fn=fn):
            parts, k = [], 0
            for n in names:
                parts.append(z[k:k + sizes[n]])
                k += sizes[n]
            res = fn(*parts)
            res = res if isinstance(res, (list, tuple)) else [res]
            return np.concatenate([np.asarray(ca.vec(r)).ravel() for r in res])

        Jfd = _central(f, np.concatenate(args))
        scale = max(1.0, np.abs(Jfd).max())
        assert np.abs(J - Jfd).max() <= 1e-6 * scale, (api, frame, np.abs(J - Jfd).max())
        # structural zeros: the tcp does not move with j4 (another branch), l4 not with j1-j3
        col = (7 if arm.base == "free" else 0) + arm.joint_names.index("j4" if frame == "tcp" else "j1")
        sp = jac.sparsity_out(0)
        rows = range(sp.size1()) if frame else [3 * arm.body_names.index("l4") + r for r in range(3)]
        assert not any(sp.has_nz(r, col) for r in rows)


@pytest.mark.parametrize("api", ["forward_dynamics", "inverse_dynamics"])
def test_jacobian_with_external_wrenches(arm, rng, api):
    """The f_ext variant: its Jacobian includes the (n_bodies, 6) wrench input (-J_k^T, M^-1 J_k^T)."""
    fn = sc.function(arm, api, f_ext=True)
    nq, nv, nb = arm.nq, arm.nv, arm.n_bodies
    q, v, x = _state(arm, rng)
    fe = rng.normal(size=(nb, 6))
    y = getattr(arm, api)(q, v, x, f_ext=fe)
    np.testing.assert_array_equal(np.asarray(fn(q, v, x, fe)).ravel(), y)
    J = np.hstack([np.asarray(ca.DM(b).full()) for b in fn.jacobian()(q, v, x, fe, y)])
    assert J.shape == (nv, nq + 2 * nv + 6 * nb)

    def f(z):
        fz = z[nq + 2 * nv:].reshape(6, nb).T              # CasADi's column-major f_ext
        return getattr(arm, api)(z[:nq], z[nq:nq + nv], z[nq + nv:nq + 2 * nv], f_ext=fz)

    Jfd = _central(f, np.r_[q, v, x, fe.T.ravel()])
    assert np.abs(J - Jfd).max() <= 1e-6 * np.abs(Jfd).max(), np.abs(J - Jfd).max()
    assert sc.has_jacobian(arm, api, f_ext=True) == ""


def test_forward_mode_jacobian_with_external_wrenches(arm, rng):
    """A forward-mode Jacobian of a *_fext variant (forward_dynamics_schur_fext): the wrench columns come
    from the generated d<y>_df_ext; against central differences of the module's function, and against the
    analytic da/df_k = M^-1 J_k^T of the forward dynamics (the same accelerations)."""
    fn = sc.function(arm, "forward_dynamics_schur", f_ext=True, jacobian=True)
    fd = sc.function(arm, "forward_dynamics", f_ext=True, jacobian=True)
    nq, nv, nb = arm.nq, arm.nv, arm.n_bodies
    for _ in range(2):
        q, v, x = _state(arm, rng)
        fe = rng.normal(size=(nb, 6))
        y = arm.forward_dynamics_schur(q, v, x, f_ext=fe)
        np.testing.assert_array_equal(np.asarray(fn(q, v, x, fe)).ravel(), y)
        J = np.hstack([np.asarray(ca.DM(b).full()) for b in fn.jacobian()(q, v, x, fe, y)])
        assert J.shape == (nv, nq + 2 * nv + 6 * nb)

        def f(z):
            fz = z[nq + 2 * nv:].reshape(6, nb).T              # CasADi's column-major f_ext
            return arm.forward_dynamics_schur(z[:nq], z[nq:nq + nv], z[nq + nv:nq + 2 * nv], f_ext=fz)

        Jfd = _central(f, np.r_[q, v, x, fe.T.ravel()])
        scale = max(1.0, np.abs(Jfd).max())
        assert np.abs(J - Jfd).max() <= 1e-6 * scale, np.abs(J - Jfd).max()
        Ja = np.hstack([np.asarray(ca.DM(b).full()) for b in fd.jacobian()(q, v, x, fe, fd(q, v, x, fe))])
        np.testing.assert_allclose(J, Ja, rtol=0, atol=1e-9 * scale)
    assert sc.has_jacobian(arm, "forward_dynamics_schur", f_ext=True) == ""


def test_jacobian_with_run_time_parameters(request, tmp_path_factory, rng):
    """A robot with run-time inertial parameters: jac_<name> includes the params columns (and the f_ext
    ones for a *_fext variant); against central differences of the module's own function (the reference
    path has no parameter input: tests/test_derivatives.py checks the generated derivatives against it)."""
    from binding_modules import params_module

    from soadyn.model.parameters import random_params

    m = params_module(request, tmp_path_factory)
    nq, nv, nb = m.nq, m.nv, m.n_bodies
    q, v, x = _state(m, rng)
    P = random_params(params_robot_of(m), rng)
    fe = rng.normal(size=(nb, 6))
    fn = sc.function(m, "forward_dynamics_schur", f_ext=True, jacobian=True)
    y = fn(q, v, x, fe, P)
    np.testing.assert_array_equal(np.asarray(y).ravel(),
                                  m.forward_dynamics_schur(q, v, x, f_ext=fe, params=P))
    J = np.hstack([np.asarray(ca.DM(b).full()) for b in fn.jacobian()(q, v, x, fe, P, y)])
    assert J.shape == (nv, nq + 2 * nv + 6 * nb + P.size)

    def f(z):                                  # CasADi's column-major f_ext and params
        a, b, c, d, e = np.split(z, np.cumsum([nq, nv, nv, 6 * nb]))
        return m.forward_dynamics_schur(a, b, c, f_ext=d.reshape(6, nb).T, params=e.reshape(10, -1).T,
                                        check_params=False)

    Jfd = _central(f, np.r_[q, v, x, fe.T.ravel(), P.T.ravel()])
    assert np.abs(J - Jfd).max() <= 1e-6 * max(1.0, np.abs(Jfd).max()), np.abs(J - Jfd).max()
    fm = sc.function(m, "mass_matrix", jacobian=True)
    M = fm(q, P)
    Jm = np.hstack([np.asarray(ca.DM(b).full()) for b in fm.jacobian()(q, P, M)])
    Jfd = _central(lambda z: np.asarray(fm(z[:nq], z[nq:].reshape(10, -1).T)).ravel(order="F"),
                   np.r_[q, P.T.ravel()])
    assert np.abs(Jm - Jfd).max() <= 1e-6 * max(1.0, np.abs(Jfd).max())
    assert np.abs(Jm[:, nq:]).max() > 1e-3          # the parameters move M
    # the inverse and forward dynamics: analytic derivatives, d/dparams from the regressor (Y, -M^-1 Y)
    for api in ("inverse_dynamics", "forward_dynamics"):
        for fx in (False, True):
            fn = sc.function(m, api, f_ext=fx, jacobian=True)
            args = [q, v, x, *([fe] if fx else []), P]
            J = np.hstack([np.asarray(ca.DM(b).full()) for b in fn.jacobian()(*args, fn(*args))])

            def g(z, api=api, fx=fx):
                a, b, c, *rest = np.split(z, np.cumsum([nq, nv, nv] + ([6 * nb] if fx else [])))
                kw = {"f_ext": rest[0].reshape(6, nb).T} if fx else {}
                return getattr(m, api)(a, b, c, params=rest[-1].reshape(10, -1).T, check_params=False, **kw)

            Jfd = _central(g, np.concatenate([q, v, x, *([fe.T.ravel()] if fx else []), P.T.ravel()]))
            assert np.abs(J - Jfd).max() <= 1e-6 * max(1.0, np.abs(Jfd).max()), (api, fx)


def params_robot_of(m):
    from binding_modules import params_robot

    robot = params_robot()
    assert list(robot.param_bodies) == list(m.param_bodies)
    return robot


def test_symbolic_jacobian_uses_the_exact_derivatives(arm, rng):
    fd = sc.function(arm, "forward_dynamics")
    q, v, tau = ca.MX.sym("q", arm.nq), ca.MX.sym("v", arm.nv), ca.MX.sym("tau", arm.nv)
    a = fd(q, v, tau)
    g = ca.Function("g", [q, v, tau], [ca.jacobian(a, ca.vertcat(q, v, tau)), ca.sumsqr(a)])
    q0, v0, t0 = _state(arm, rng)
    J = np.asarray(g(q0, v0, t0)[0])
    np.testing.assert_allclose(J, np.hstack(dense_jacobian(arm, "forward_dynamics", (q0, v0, t0))),
                               rtol=1e-12, atol=1e-12)
    # reverse mode (gradient of a scalar) goes through the same Jacobian
    grad = ca.Function("gr", [q, v, tau], [ca.gradient(ca.sumsqr(a), q)])
    a0 = arm.forward_dynamics(q0, v0, t0)
    np.testing.assert_allclose(np.asarray(grad(q0, v0, t0)).ravel(), 2 * a0 @ J[:, :arm.nq], rtol=1e-10,
                               atol=1e-10)


def test_sparsity_is_the_structural_one(arm, rng):
    fn = sc.function(arm, "inverse_dynamics")
    sp = fn.jacobian().sparsity_out(0)               # dtau/dq
    pattern = np.asarray(ca.DM(sp, 1).full()) != 0
    joints = arm.joint_names
    off = 6 if arm.base == "free" else 0
    qoff = 7 if arm.base == "free" else 0
    j1, j4 = off + joints.index("j1"), off + joints.index("j4")
    q1, q4 = qoff + joints.index("j1"), qoff + joints.index("j4")
    if arm.base == "fixed":
        # different branches of the tree: tau_j4 does not depend on q_j1 and the other way round
        assert not pattern[j4, q1] and not pattern[j1, q4]
        assert pattern[j1, q1] and pattern[j4, q4]
        assert not pattern.all()
    else:
        assert not pattern[:, 0:3].any()                # base position: no influence
        assert pattern[:, 3:7].any()                    # attitude: gravity
    # nothing outside the pattern is ever nonzero (other states than the ones that built it)
    for _ in range(20):
        q, v, x = _state(arm, rng)
        for block, B in zip(("q", "v", "a"), dense_jacobian(arm, "inverse_dynamics", (q, v, x))):
            k = ["q", "v", "a"].index(block)
            P = np.asarray(ca.DM(fn.jacobian().sparsity_out(k), 1).full()) != 0
            assert np.all(B[~P] == 0.0)
    # CasADi reads the Jacobian's sparsity from the library
    assert fn.jac_sparsity(0, 0).nnz() == int(pattern.sum())


def test_no_derivative_is_an_error_naming_the_function(arm):
    mo = sc.function(arm, "momentum")                  # built without momentum_derivatives
    with pytest.raises(RuntimeError, match="momentum"):
        mo.jacobian()
    why = sc.has_jacobian(arm, "momentum")
    assert why == (f"{arm.module_name} was built without momentum_derivatives, the derivatives of momentum: "
                   "compile it with functions=['momentum', 'momentum_derivatives', ...]")
    with pytest.raises(ValueError, match=r"^soadyn.casadi.function\('momentum', jacobian=True\): .* was "
                                         r"built without momentum_derivatives.*functions=\['momentum'") as e:
        sc.function(arm, "momentum", jacobian=True)
    assert "\n" not in str(e.value)
    assert "first derivatives only" in sc.has_jacobian(arm, "inverse_dynamics_derivatives")
    assert sc.has_jacobian(arm, "forward_dynamics") == ""
    assert sc.has_jacobian(arm, "mass_matrix") == ""
    sc.function(arm, "mass_matrix", jacobian=True)


#: forward-mode derivatives (``<api>_derivatives``): (function, inputs, frame, world_aligned)
TANGENT_APIS = [("mass_matrix", ["q"], None, False), ("center_of_mass", ["q"], None, False),
                ("bias_forces", ["q", "v"], None, False), ("jacobian", ["q"], "tcp", False),
                ("jacobian", ["q"], "l4", True)]


def _casadi_jacobian(fn, args):
    """CasADi's Jacobian of ``fn`` at ``args`` (rows: the outputs' entries in CasADi's column-major order,
    stacked; columns: the inputs) and its sparsity pattern (dense boolean)."""
    outs = fn(*args)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    jac = fn.jacobian()
    blocks = jac(*args, *outs)
    blocks = blocks if isinstance(blocks, (list, tuple)) else [blocks]
    per = fn.n_in()
    J = np.vstack([np.hstack([np.asarray(ca.DM(b).full()) for b in blocks[k * per:(k + 1) * per]])
                   for k in range(fn.n_out())])
    P = np.vstack([np.hstack([np.asarray(ca.DM(jac.sparsity_out(k * per + i), 1).full()) != 0
                              for i in range(per)]) for k in range(fn.n_out())])
    return J, P


def _flat_casadi(fn, sizes):
    def f(z):
        res = fn(*np.split(z, np.cumsum(sizes)[:-1]))
        res = res if isinstance(res, (list, tuple)) else [res]
        return np.concatenate([np.asarray(ca.vec(r)).ravel() for r in res])
    return f


@pytest.mark.parametrize("api,names,frame,world", TANGENT_APIS)
def test_forward_mode_jacobians(arm, rng, api, names, frame, world):
    """jac_<name> from the generated forward-mode derivatives: against central differences of the function,
    against the module's derivatives converted in Python, and its sparsity never hides a non-zero."""
    fn = sc.function(arm, api, frame=frame, world_aligned=world, jacobian=True)
    sizes = [{"q": arm.nq, "v": arm.nv}[n] for n in names]
    cf, _ = find_function(arm, api, frame, world)
    perm = casadi_rows([s for _, s in cf.outputs])
    for _ in range(3):
        q, v, _x = _state(arm, rng)
        args = [{"q": q, "v": v}[n] for n in names]
        J, P = _casadi_jacobian(fn, args)
        Jfd = _central(_flat_casadi(fn, sizes), np.concatenate(args))
        scale = max(1.0, np.abs(Jfd).max())
        assert np.abs(J - Jfd).max() <= 1e-6 * scale, (api, np.abs(J - Jfd).max())
        assert np.abs(Jfd[~P]).max(initial=0.0) <= 1e-7 * scale     # nothing outside the pattern moves
        assert np.all(J[~P] == 0.0)
        kw = {} if frame is None else {"frame": frame, "world_aligned": world}
        ref = np.hstack(dense_jacobian(arm, api, tuple(args), **kw))[perm]
        np.testing.assert_allclose(J, ref, rtol=1e-12, atol=1e-12)
    assert P.all() == (api == "center_of_mass" and arm.base == "free")    # structural zeros in the pattern


def test_forward_mode_sparsity_has_the_tree_zeros(arm, rng):
    """The pattern comes from the generated program's exact zeros: the test arm's joint j4 is on another
    branch than j1-j3 (tcp on l3), so dM[j1, j4]/dq and d J_tcp / d q_j4 are structurally zero."""
    joints = arm.joint_names
    off = 6 if arm.base == "free" else 0
    qoff = 7 if arm.base == "free" else 0
    j1, j4 = off + joints.index("j1"), off + joints.index("j4")
    mm = sc.function(arm, "mass_matrix").jacobian().sparsity_out(0)      # dM/dq, rows M column-major
    P = np.asarray(ca.DM(mm, 1).full()) != 0
    nv = arm.nv
    assert not P[j1 + nv * j4].any() and not P[j4 + nv * j1].any()       # M[j1, j4] = 0 for every q
    assert P[j1 + nv * j1].any() or arm.base == "fixed"
    assert not P[off + nv * off:, qoff + joints.index("j1")].all()
    jt = sc.function(arm, "jacobian", frame="tcp").jacobian().sparsity_out(0)
    PJ = np.asarray(ca.DM(jt, 1).full()) != 0
    assert not PJ[:, qoff + joints.index("j4")].any()   # the tcp does not move with j4
    assert PJ[:, qoff + joints.index("j2")].any()
    if arm.base == "free":
        assert not P[:, 0:3].any()                      # M in base axes: no base position
    # never hides a non-zero: the module's own derivatives on other states are zero outside it
    for _ in range(10):
        q, _, _ = _state(arm, rng)
        dM = arm.mass_matrix_derivatives(q)              # (nv, nv, nv) along the tangent
        D = raw_q_jacobian(np.swapaxes(dM, 0, 1).reshape(nv * nv, nv), q, arm.base == "free")
        assert np.all(D[~P] == 0.0)                      # rows: M column-major = (M^T) row-major = M


def test_bad_input(arm, rng):
    fd = sc.function(arm, "forward_dynamics")
    q, v, tau = _state(arm, rng)
    with pytest.raises(RuntimeError):
        fd(q, v, np.r_[tau, 1.0])                  # wrong shape: CasADi's own dimension check
    bad = tau.copy()
    bad[0] = np.nan
    with pytest.raises(RuntimeError, match="forward_dynamics"):
        fd(q, v, bad)                              # the C wrapper refuses non-finite input
    if arm.base == "free":
        q0 = q.copy()
        q0[3:7] = 0.0
        with pytest.raises(RuntimeError, match="forward_dynamics"):
            fd(q0, v, tau)
    with pytest.raises(ValueError, match="unknown frame"):
        sc.function(arm, "jacobian", frame="nope")
    with pytest.raises(ValueError, match="has no function"):
        sc.function(arm, "generalized_inertia_nope")


def test_casadi_codegen_links_the_library(arm, rng, tmp_path, cc):
    """CasADi generates C for a function that calls the external one (and its Jacobian); gcc compiles it
    into a program linked with the library, whose output equals the module's."""
    fd = sc.function(arm, "forward_dynamics")
    lib = sc.library(arm)
    q, v, tau = ca.MX.sym("q", arm.nq), ca.MX.sym("v", arm.nv), ca.MX.sym("tau", arm.nv)
    a = fd(q, v, tau)
    g = ca.Function("plan_step", [q, v, tau], [a, ca.jacobian(a, tau)])
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        g.generate("plan_step.c", {"main": True})
    finally:
        os.chdir(cwd)
    exe = tmp_path / "plan_step"
    cmd = [*cc, str(tmp_path / "plan_step.c"), str(lib), f"-Wl,-rpath,{lib.parent}", "-lm", "-o", str(exe)]
    subprocess.run(cmd, check=True, capture_output=True)
    q0, v0, t0 = _state(arm, rng)
    inp = " ".join(repr(float(x)) for x in np.r_[q0, v0, t0])
    out = subprocess.run([str(exe), "plan_step"], input=inp, capture_output=True, text=True, check=True)
    vals = np.array(out.stdout.split(), dtype=float)
    a0 = arm.forward_dynamics(q0, v0, t0)
    np.testing.assert_array_equal(vals[:arm.nv], a0)
    dadtau = dense_jacobian(arm, "forward_dynamics", (q0, v0, t0))[2]
    J = np.asarray(ca.DM(g.sparsity_out(1), vals[arm.nv:]).full())        # printed: the nonzeros
    np.testing.assert_allclose(J, dadtau, rtol=1e-12, atol=1e-14)
    if arm.base == "fixed":
        assert g.sparsity_out(1).nnz() < arm.nv ** 2        # two branches on a fixed base: M^-1 has zeros


def test_import_without_casadi_says_what_to_install():
    code = ("import sys; sys.modules['casadi'] = None\n"
            "try:\n import soadyn.casadi\nexcept ImportError as e:\n print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("soadyn.casadi needs CasADi >= 3.6: pip install 'soadyn[casadi]' "
                                  "(or: pip install casadi)")


def test_library_is_reused(arm):
    a = sc.library(arm)
    assert sc.library(arm) == a and Path(a).is_file()


def test_cli_target_casadi(request, tmp_path_factory, capsys):
    from soadyn.cli.main import main

    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_cli")
    rc = main(["compile", str(TEST_ARM), "-o", str(d), "--base", "fixed", "-q", "--target", "casadi",
               "--functions", "forward_dynamics,forward_dynamics_derivatives"])
    out = capsys.readouterr().out
    assert rc == 0
    lib = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("casadi: "))
    f = ca.external("scratch_tree_fixed_ca_forward_dynamics", lib)
    assert f.jacobian().n_out() == 3             # jac_a_q, jac_a_v, jac_a_tau from the library
