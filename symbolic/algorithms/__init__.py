"""The O(N) spatial-operator algorithms of the seeds, one module per algorithm, generic over the scalar.

Every function takes ``(robot, ctx, ...)``; ``ctx`` is :class:`soadyn.symbolic.scalar.Numeric` for floats
or :class:`soadyn.symbolic.scalar.Symbolic` for a staged symbolic run (what :mod:`soadyn.codegen` emits).
"""

from soadyn.symbolic.algorithms.articulated_body import ArticulatedBody, articulated_body
from soadyn.symbolic.algorithms.closed_loop import (
                          closed_loop_constraints,
                          closed_loop_dependent_velocities,
                          closed_loop_forward_dynamics,
)
from soadyn.symbolic.algorithms.decoupled import forward_dynamics_decoupled
from soadyn.symbolic.algorithms.derivatives import (
                          forward_dynamics_derivatives,
                          frame_acceleration,
                          frame_acceleration_derivatives,
                          inverse_dynamics_derivatives,
)
from soadyn.symbolic.algorithms.derivatives import tangent_derivatives as _tangent
from soadyn.symbolic.algorithms.forward_dynamics import forward_dynamics
from soadyn.symbolic.algorithms.frames import body_poses, frame_pose, frame_twist
from soadyn.symbolic.algorithms.free_floating import (
                          angular_reduced_dynamics,
                          base_inertia,
                          base_velocity,
                          coupling_inertia,
                          coupling_inertia_rate,
                          generalized_bias,
                          generalized_inertia,
                          momentum_frame_twist,
)
from soadyn.symbolic.algorithms.innovations import innovations_factors, mass_matrix_inverse
from soadyn.symbolic.algorithms.jacobians import generalized_jacobian, jacobian
from soadyn.symbolic.algorithms.kinematics import joint_transforms, link_poses, velocities
from soadyn.symbolic.algorithms.momentum import center_of_mass, kinetic_energy, momentum
from soadyn.symbolic.algorithms.newton_euler import bias_forces, inverse_dynamics, mass_matrix
from soadyn.symbolic.algorithms.operational_space import (
                          inverse_operational_space_inertias,
                          operational_space_inertias,
)
from soadyn.symbolic.algorithms.regressors import inverse_dynamics_regressor, momentum_regressor
from soadyn.symbolic.algorithms.schur import forward_dynamics_schur

__all__ = [
    "closed_loop_constraints", "closed_loop_dependent_velocities", "closed_loop_forward_dynamics",
    "ArticulatedBody", "angular_reduced_dynamics", "articulated_body", "base_inertia", "base_velocity",
    "bias_forces", "coupling_inertia", "coupling_inertia_rate", "generalized_bias", "generalized_inertia",
    "momentum_frame_twist", "center_of_mass", "forward_dynamics",
    "forward_dynamics_decoupled", "forward_dynamics_schur", "inverse_operational_space_inertias",
    "operational_space_inertias",
    "generalized_jacobian", "innovations_factors", "inverse_dynamics", "jacobian", "joint_transforms",
    "kinetic_energy", "link_poses", "mass_matrix", "mass_matrix_inverse", "momentum", "velocities",
    "inverse_dynamics_regressor", "momentum_regressor",
    "inverse_dynamics_derivatives", "forward_dynamics_derivatives", "frame_acceleration_derivatives",
    "frame_pose", "body_poses", "frame_twist", "frame_acceleration",
]

# Mimic couplings: every public algorithm dispatches to its reduced-coordinate form for a coupled robot
# (soadyn.symbolic.algorithms.coupling); robots without couplings run the functions above unchanged.
from types import SimpleNamespace as _Namespace  # noqa: E402

from soadyn.symbolic.algorithms.coupling import coupled as _coupled  # noqa: E402

_FULL = _Namespace(**{_n: globals()[_n] for _n in __all__ if not isinstance(globals()[_n], type)})
for _n in vars(_FULL):
    globals()[_n] = _coupled(_n, getattr(_FULL, _n), _FULL)
del _n


def tangent_derivatives(robot, ctx, *args, of: str, **kw):  # noqa: ANN001, ANN201 - see the delegate
    """Forward-mode derivatives of the algorithm named ``of`` with respect to its inputs
    (:func:`soadyn.symbolic.algorithms.derivatives.tangent_derivatives`, which takes the function)."""
    fn = globals().get(of)
    if of not in __all__ or not callable(fn):
        raise ValueError(f"tangent_derivatives: no algorithm {of!r}; one of {', '.join(__all__)}")
    return _tangent(robot, ctx, fn, *args, of=of, **kw)
