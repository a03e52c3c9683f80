"""JAX binding (soadyn.jax): jit, vmap through the batched C entry point, grad/jacfwd/jacrev from the
generated derivatives (modules of tests/binding_modules.py: the test arm, free and fixed base)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from binding_modules import arm_module, central, state
from conftest import TEST_ARM, module_cache_dir

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import soadyn.jax as sj  # noqa: E402
from soadyn._bindings import dense_jacobian  # noqa: E402
from soadyn.codegen.pipeline import compile_robot, resolve_robot  # noqa: E402


@pytest.fixture(scope="module", params=["free", "fixed"])
def arm(request, tmp_path_factory):
    m = arm_module(request, tmp_path_factory, request.param)
    return m, sj.wrap(m)


_states = state


@pytest.mark.parametrize("api", ["forward_dynamics", "inverse_dynamics"])
def test_check_grads(arm, rng, api):
    m, w = arm
    for _ in range(2):
        check_grads(getattr(w, api), _states(m, rng), order=1, modes=("fwd", "rev"))


@pytest.mark.parametrize("api", ["forward_dynamics", "inverse_dynamics"])
def test_jacobians_are_the_generated_ones(arm, rng, api):
    m, w = arm
    x = _states(m, rng)
    ref = dense_jacobian(m, api, x)
    for jac in (jax.jacfwd, jax.jacrev):
        got = jax.jit(jac(getattr(w, api), argnums=(0, 1, 2)))(*x)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(np.asarray(g), r, rtol=1e-13, atol=1e-13)
    # a scalar loss: jax.grad through the transposed JVP equals the chain rule by hand
    y = getattr(m, api)(*x)
    g = jax.grad(lambda q: jnp.sum(getattr(w, api)(q, x[1], x[2]) ** 2))(x[0])
    np.testing.assert_allclose(np.asarray(g), 2 * y @ ref[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("api", ["frame_pose", "frame_twist", "frame_acceleration", "body_poses"])
def test_kinematics_gradients(arm, rng, api):
    m, w = arm
    q, v, x = _states(m, rng)
    args = {"frame_pose": (q,), "frame_twist": (q, v), "frame_acceleration": (q, v, x),
            "body_poses": (q,)}[api]
    f = getattr(w, api)
    g = (lambda *a: f(*a, "tcp")) if api != "body_poses" else f
    check_grads(g, args, order=1, modes=("fwd", "rev"))
    # against central differences of the module itself
    sizes = [len(a) for a in args]

    def flat(z):
        parts = np.split(z, np.cumsum(sizes)[:-1])
        r = getattr(m, api)(*parts, "tcp") if api != "body_poses" else m.body_poses(*parts)
        return np.concatenate([np.ravel(p) for p in (r if isinstance(r, tuple) else (r,))])

    Jfd = central(flat, np.concatenate(args))
    J = jax.jacfwd(lambda z: jnp.concatenate([jnp.ravel(p) for p in jax.tree_util.tree_leaves(
        g(*jnp.split(z, np.cumsum(sizes)[:-1])))]))(jnp.asarray(np.concatenate(args)))
    assert np.abs(np.asarray(J) - Jfd).max() <= 1e-6 * max(1.0, np.abs(Jfd).max())


@pytest.mark.parametrize("api", ["mass_matrix", "center_of_mass", "bias_forces", "jacobian"])
def test_forward_mode_derivatives_check_grads(arm, rng, api):
    """Functions differentiated by their generated forward-mode derivatives (``<api>_derivatives``): JAX's
    numerical check (orders 1, fwd and rev) and the batched Jacobian against the module's derivatives."""
    m, w = arm
    q, v, _ = _states(m, rng)
    if api == "jacobian":
        f, args = (lambda q: w.jacobian(q, "tcp", world_aligned=True)), (q,)
    else:
        f, args = getattr(w, api), ((q, v) if api == "bias_forces" else (q,))
    for _ in range(2):
        check_grads(f, args, order=1, modes=("fwd", "rev"))
    Q, V, _ = _states(m, rng, 20)
    before = w.stats["callbacks"]
    if api == "bias_forces":
        got = jax.jit(jax.vmap(jax.jacfwd(f, argnums=(0, 1))))(Q, V)
        ref = dense_jacobian(m, api, (Q, V))
    else:
        got = (jax.jit(jax.vmap(jax.jacfwd(f)))(Q),)
        kw = {"frame": "tcp", "world_aligned": True} if api == "jacobian" else {}
        ref = dense_jacobian(m, api, (Q,), **kw)
    assert w.stats["callbacks"] - before == 1               # one batched call of the derivatives
    for g, r in zip(got, ref):
        np.testing.assert_allclose(np.asarray(g).reshape(r.shape), r, rtol=1e-13, atol=1e-13)


def test_forward_mode_derivatives_with_external_wrenches(arm, rng):
    """A *_fext variant differentiated by its generated forward-mode derivatives (d/df_ext among them):
    JAX's numerical check (orders 1, fwd and rev) with f_ext, and jacfwd against central differences of the
    module's function in every input, f_ext included."""
    m, w = arm
    q, v, tau = _states(m, rng)
    fe = rng.normal(size=(m.n_bodies, 6))

    def f(q, v, tau, fe):
        return w.forward_dynamics_schur(q, v, tau, f_ext=fe)

    check_grads(f, (q, v, tau, fe), order=1, modes=("fwd", "rev"))
    got = jax.jit(jax.jacfwd(f, argnums=(0, 1, 2, 3)))(q, v, tau, fe)
    sizes = np.cumsum([m.nq, m.nv, m.nv])

    def flat(z):
        a, b, c, d = np.split(z, sizes)
        return m.forward_dynamics_schur(a, b, c, f_ext=d.reshape(fe.shape))

    Jfd = central(flat, np.concatenate([q, v, tau, fe.ravel()]))
    J = np.hstack([np.asarray(g).reshape(m.nv, -1) for g in got])
    assert np.abs(J - Jfd).max() <= 1e-6 * max(1.0, np.abs(Jfd).max())


def test_gradients_with_run_time_parameters(request, tmp_path_factory, rng):
    """A robot with run-time inertial parameters: gradients with respect to params (and f_ext) from the
    generated forward-mode derivatives, JAX's numerical check (orders 1, fwd and rev)."""
    from binding_modules import params_module, params_robot

    from soadyn.model.parameters import random_params

    m = params_module(request, tmp_path_factory)
    w = sj.wrap(m)
    q, v, tau = _states(m, rng)
    P = random_params(params_robot(), rng)
    P[:, [4, 7, 9]] += 0.05      # off the triangle inequality's edge: check_grads' steps stay rigid bodies
    fe = rng.normal(size=(m.n_bodies, 6))
    check_grads(w.mass_matrix, (q, P), order=1, modes=("fwd", "rev"))
    check_grads(lambda q, v, tau, fe, P: w.forward_dynamics_schur(q, v, tau, P, f_ext=fe),
                (q, v, tau, fe, P), order=1, modes=("fwd", "rev"))
    check_grads(w.forward_dynamics, (q, v, tau, P), order=1, modes=("fwd", "rev"))   # -M^-1 Y columns
    check_grads(w.inverse_dynamics, (q, v, tau, P), order=1, modes=("fwd", "rev"))   # the regressor
    g = jax.grad(lambda P: jnp.sum(w.center_of_mass(q, P) ** 2))(P)
    assert np.abs(np.asarray(g)).max() > 1e-3


@pytest.mark.parametrize("api", ["forward_dynamics", "mass_matrix", "jacobian"])
def test_direct_jacobian_equals_jacfwd(arm, rng, api):
    """soadyn.jax.jacobian: jacfwd's blocks (same numbers, bit for bit: the same generated derivatives) from
    one callback, batched under vmap; and a function without derivatives is refused in one line."""
    m, w = arm
    Q, V, T = _states(m, rng, 30)
    if api == "jacobian":
        f, J = (lambda q: w.jacobian(q, "tcp")), sj.jacobian(w, "jacobian", frame="tcp")
        args, argnums = (Q,), 0
    elif api == "mass_matrix":
        f, J, args, argnums = w.mass_matrix, sj.jacobian(w, api), (Q,), 0
    else:
        f, J, args, argnums = w.forward_dynamics, sj.jacobian(w, api), (Q, V, T), (0, 1, 2)
    ref = jax.jit(jax.vmap(jax.jacfwd(f, argnums=argnums)))(*args)
    ref = ref if isinstance(ref, tuple) else (ref,)
    before = w.stats["callbacks"]
    got = jax.jit(jax.vmap(J))(*args)
    assert w.stats["callbacks"] - before == 1
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(r))
    with pytest.raises(ValueError, match=r"^soadyn.jax.jacobian\('momentum'\): .* built without momentum_"):
        sj.jacobian(w, "momentum")


def test_vmap_is_one_batched_call(arm, rng):
    m, w = arm
    Q, V, T = _states(m, rng, 1000)
    before = w.stats["callbacks"]
    A = jax.jit(jax.vmap(w.forward_dynamics))(Q, V, T)
    assert w.stats["callbacks"] - before == 1         # the module's batch entry point, not 1,000 calls
    np.testing.assert_array_equal(np.asarray(A), m.forward_dynamics(Q, V, T))
    # nested vmap and vmap of a gradient
    A2 = jax.vmap(jax.vmap(w.forward_dynamics))(Q.reshape(10, 100, -1), V.reshape(10, 100, -1),
                                                  T.reshape(10, 100, -1))
    np.testing.assert_array_equal(np.asarray(A2).reshape(1000, -1), m.forward_dynamics(Q, V, T))
    G = jax.vmap(jax.jacfwd(w.inverse_dynamics))(Q[:50], V[:50], T[:50])
    ref = dense_jacobian(m, "inverse_dynamics", (Q[:50], V[:50], T[:50]))[0]
    np.testing.assert_allclose(np.asarray(G), ref, rtol=1e-13, atol=1e-13)


def test_other_functions_and_frames(arm, rng):
    m, w = arm
    q, v, _ = _states(m, rng)
    np.testing.assert_array_equal(np.asarray(jax.jit(w.mass_matrix)(q)), m.mass_matrix(q))
    np.testing.assert_array_equal(np.asarray(w.momentum(q, v)), m.momentum(q, v))
    fe = rng.normal(size=(m.n_bodies, 6))
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda q, v, t, f: w.forward_dynamics(q, v, t, f_ext=f))(
        q, v, v, fe)), m.forward_dynamics(q, v, v, f_ext=fe))
    for api in ("forward_dynamics", "inverse_dynamics"):
        check_grads(lambda q, v, t, f, api=api: getattr(w, api)(q, v, t, f_ext=f), (q, v, v, fe), order=1,
                    modes=("fwd", "rev"))
    with pytest.raises(ValueError, match="built without momentum_derivatives, the derivatives of momentum: "
                                         r"compile it with functions=\['momentum', 'momentum_derivatives'"):
        jax.jacfwd(lambda q: w.momentum(q, v))(q)
    for world in (False, True):
        J = jax.jit(lambda q, world=world: w.jacobian(q, "tcp", world_aligned=world))(q)
        np.testing.assert_array_equal(np.asarray(J), m.jacobian(q, "tcp", world_aligned=world))


def test_bad_input(arm, rng):
    m, w = arm
    q, v, tau = _states(m, rng)
    with pytest.raises(ValueError, match=r"forward_dynamics: tau must have shape"):
        w.forward_dynamics(q, v, tau[:-1])
    bad = tau.copy()
    bad[1] = np.nan
    with pytest.raises(ValueError, match="forward_dynamics: input tau holds NaN or inf"):
        w.forward_dynamics(q, v, bad)
    with pytest.raises(Exception, match="forward_dynamics: input tau holds NaN or inf"):
        jax.jit(w.forward_dynamics)(q, v, bad)                   # raised from the callback
    with pytest.raises(ValueError, match="momentum: cannot differentiate: .* built without momentum_deriv"):
        jax.grad(lambda q: jnp.sum(w.momentum(q, v)))(q)
    with pytest.raises(ValueError, match="inverse_dynamics_derivatives has no generated derivative"):
        jax.grad(lambda q: jnp.sum(w.inverse_dynamics_derivatives(q, v, tau)[0]))(q)
    with pytest.raises(ValueError, match="unknown frame"):
        w.jacobian(q, "nope")


def test_module_without_derivatives(request, tmp_path_factory, rng):
    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_modules")
    robot, _ = resolve_robot(TEST_ARM, "fixed")
    m = compile_robot(robot, d, functions=["forward_dynamics"], progress=False)
    assert not hasattr(m, "forward_dynamics_derivatives")
    w = sj.wrap(m)
    q, v, tau = _states(m, rng)
    np.testing.assert_array_equal(np.asarray(w.forward_dynamics(q, v, tau)), m.forward_dynamics(q, v, tau))
    with pytest.raises(ValueError, match="built without forward_dynamics_derivatives"):
        jax.grad(lambda t: jnp.sum(w.forward_dynamics(q, v, t)))(tau)


def _run(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=env).stdout


def test_float64_is_required():
    code = ("import jax\nimport soadyn.jax as sj\n"
            "try:\n sj._check_x64(False)\nexcept ValueError as e:\n print(e)\n"
            "sj._check_x64(True); print(jax.config.jax_enable_x64)")
    out = _run(code).splitlines()
    assert out == ["soadyn.jax needs float64: call jax.config.update('jax_enable_x64', True) before "
                   "soadyn.jax.wrap(module), or call soadyn.jax.wrap(module, enable_x64=True)", "True"]


def test_import_without_jax_says_what_to_install():
    out = _run("import sys; sys.modules['jax'] = None\n"
               "try:\n import soadyn.jax\nexcept ImportError as e:\n print(e)")
    assert out.strip() == "soadyn.jax needs JAX: pip install 'soadyn[jax]' (or: pip install jax)"
