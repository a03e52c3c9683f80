"""The O(N) spatial-operator algorithms of the seeds, one module per algorithm, generic over the scalar.

Every function takes ``(robot, ctx, ...)``; ``ctx`` is :class:`soadyn.symbolic.scalar.Numeric` for floats
or :class:`soadyn.symbolic.scalar.Symbolic` for a staged symbolic run (what :mod:`soadyn.codegen` emits).
"""

from .articulated_body import ArticulatedBody, articulated_body
from .closed_loop import (
                          closed_loop_constraints,
                          closed_loop_dependent_velocities,
                          closed_loop_forward_dynamics,
)
from .decoupled import forward_dynamics_decoupled
from .forward_dynamics import forward_dynamics
from .free_floating import (
                          angular_reduced_dynamics,
                          base_inertia,
                          base_velocity,
                          coupling_inertia,
                          coupling_inertia_rate,
                          generalized_bias,
                          generalized_inertia,
                          momentum_frame_twist,
)
from .innovations import innovations_factors, mass_matrix_inverse
from .jacobians import generalized_jacobian, jacobian
from .kinematics import joint_transforms, link_poses, velocities
from .momentum import center_of_mass, kinetic_energy, momentum
from .newton_euler import bias_forces, inverse_dynamics, mass_matrix
from .operational_space import inverse_operational_space_inertias, operational_space_inertias
from .schur import forward_dynamics_schur

__all__ = [
    "closed_loop_constraints", "closed_loop_dependent_velocities", "closed_loop_forward_dynamics",
    "ArticulatedBody", "angular_reduced_dynamics", "articulated_body", "base_inertia", "base_velocity",
    "bias_forces", "coupling_inertia", "coupling_inertia_rate", "generalized_bias", "generalized_inertia",
    "momentum_frame_twist", "center_of_mass", "forward_dynamics",
    "forward_dynamics_decoupled", "forward_dynamics_schur", "inverse_operational_space_inertias",
    "operational_space_inertias",
    "generalized_jacobian", "innovations_factors", "inverse_dynamics", "jacobian", "joint_transforms",
    "kinetic_energy", "link_poses", "mass_matrix", "mass_matrix_inverse", "momentum", "velocities",
]
