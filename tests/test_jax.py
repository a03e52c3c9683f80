"""JAX binding (soadyn.jax): jit, vmap through the batched C entry point, grad/jacfwd/jacrev from the
generated derivatives (the same modules as tests/test_casadi.py: the test arm, free and fixed base)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import TEST_ARM, module_cache_dir, with_gravity

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import soadyn.jax as sj  # noqa: E402
from soadyn._bindings import dense_jacobian  # noqa: E402
from soadyn.codegen.pipeline import compile_robot, resolve_robot  # noqa: E402

FUNCS = ["forward_dynamics", "inverse_dynamics", "mass_matrix", "forward_dynamics_derivatives",
         "inverse_dynamics_derivatives", "jacobian", "center_of_mass", "momentum"]
GRAVITY = np.array([0.7, -1.3, -9.81])


@pytest.fixture(scope="module", params=["free", "fixed"])
def arm(request, tmp_path_factory):
    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_modules")
    robot, _ = resolve_robot(TEST_ARM, request.param)
    robot = with_gravity(robot, GRAVITY)
    m = compile_robot(robot, d, functions=FUNCS, progress=False)
    return m, sj.wrap(m)


def _states(m, rng, n=None):
    lead = () if n is None else (n,)
    q = rng.uniform(-np.pi, np.pi, lead + (m.nq,))
    if m.base == "free":
        q[..., :3] = rng.uniform(-1, 1, lead + (3,))
        q[..., 3:7] = rng.normal(size=lead + (4,)) * rng.uniform(0.5, 2.0, lead + (1,))   # any norm
    return q, rng.normal(size=lead + (m.nv,)), rng.normal(size=lead + (m.nv,))


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
    with pytest.raises(ValueError, match="mass_matrix: cannot differentiate: mass_matrix has no generated"):
        jax.grad(lambda q: jnp.sum(w.mass_matrix(q)))(q)
    with pytest.raises(ValueError, match="unknown frame"):
        w.jacobian(q, "nope")


def test_module_without_derivatives(request, tmp_path_factory, rng):
    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_modules")
    robot, _ = resolve_robot(TEST_ARM, "fixed")
    m = compile_robot(robot, d, functions=["forward_dynamics"], progress=False)
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
