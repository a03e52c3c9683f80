"""The compiled modules the binding tests share (tests/test_casadi.py, test_jax.py, test_frames.py): the
test arm (a 4-DOF tree: j1-j2-j3 and j4 on the base, a named frame tcp) with a free and a fixed base,
gravity on (it exercises the attitude columns), with the dynamics, the kinematics of frames and their
derivatives, and the forward-mode derivatives of a few other functions; cached like the other compiled test
modules."""

from __future__ import annotations

import numpy as np
from conftest import TEST_ARM, module_cache_dir, with_gravity

from soadyn.codegen.pipeline import compile_robot, resolve_robot

FUNCS = ["forward_dynamics", "inverse_dynamics", "mass_matrix", "forward_dynamics_derivatives",
         "inverse_dynamics_derivatives", "jacobian", "center_of_mass", "momentum", "frame_pose", "body_poses",
         "frame_twist", "frame_acceleration", "frame_acceleration_derivatives",
         # forward-mode derivatives of other functions (momentum deliberately without: the error case)
         "mass_matrix_derivatives", "center_of_mass_derivatives", "jacobian_derivatives",
         "bias_forces", "bias_forces_derivatives",
         # a function with external wrenches: its *_fext variant's forward-mode derivatives include d/df_ext
         "forward_dynamics_schur", "forward_dynamics_schur_derivatives"]
GRAVITY = np.array([0.7, -1.3, -9.81])


def arm_robot(base: str):
    robot, _ = resolve_robot(TEST_ARM, base)
    return with_gravity(robot, GRAVITY)


def arm_module(request, tmp_path_factory, base: str):
    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_modules")
    return compile_robot(arm_robot(base), d, functions=FUNCS, progress=False)


#: a robot with run-time inertial parameters (two bodies): forward-mode derivatives include d/dparams
PARAM_FUNCS = ["mass_matrix", "mass_matrix_derivatives", "center_of_mass", "center_of_mass_derivatives",
               "forward_dynamics_schur", "forward_dynamics_schur_derivatives", "jacobian",
               "jacobian_derivatives", "inverse_dynamics", "inverse_dynamics_derivatives", "forward_dynamics",
               "forward_dynamics_derivatives", "inverse_dynamics_regressor"]


def params_robot():
    from soadyn.model.parameters import with_param_bodies

    robot, _ = resolve_robot(TEST_ARM, "free")
    return with_param_bodies(with_gravity(robot, GRAVITY), ["l2", "l4"]).replace(name="scratch_tree_params")


def params_module(request, tmp_path_factory):
    d = module_cache_dir(request, tmp_path_factory, "soadyn_binding_modules")
    return compile_robot(params_robot(), d, functions=PARAM_FUNCS, progress=False)


def state(m, rng, n=None):
    """Random (q, v, x) of module ``m``: base quaternion of random norm (the module divides it out)."""
    lead = () if n is None else (n,)
    q = rng.uniform(-np.pi, np.pi, lead + (m.nq,))
    if m.base == "free":
        q[..., :3] = rng.uniform(-1, 1, lead + (3,))
        q[..., 3:7] = rng.normal(size=lead + (4,)) * rng.uniform(0.5, 2.0, lead + (1,))
    return q, rng.normal(size=lead + (m.nv,)), rng.normal(size=lead + (m.nv,))


def central(f, x, h=1e-6):
    """Central differences of f (vector -> flat vector) at x, (len f) x (len x)."""
    cols = []
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        cols.append((np.ravel(f(x + e)) - np.ravel(f(x - e))) / (2 * h))
    return np.array(cols).T
