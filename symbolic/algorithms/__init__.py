"""The O(N) spatial-operator algorithms of the seeds, one module per algorithm, generic over the scalar.

Every function takes ``(robot, ctx, ...)``; ``ctx`` is :class:`soadyn.symbolic.scalar.Numeric` for floats
or :class:`soadyn.symbolic.scalar.Symbolic` for a staged symbolic run (what :mod:`soadyn.codegen` emits).
"""

from .articulated_body import ArticulatedBody, articulated_body
from .forward_dynamics import forward_dynamics
from .innovations import innovations_factors, mass_matrix_inverse
from .jacobians import generalized_jacobian, jacobian
from .kinematics import joint_transforms, link_poses, velocities
from .momentum import center_of_mass, kinetic_energy, momentum
from .newton_euler import bias_forces, inverse_dynamics, mass_matrix

__all__ = [
    "ArticulatedBody", "articulated_body", "bias_forces", "center_of_mass", "forward_dynamics",
    "generalized_jacobian", "innovations_factors", "inverse_dynamics", "jacobian", "joint_transforms",
    "kinetic_energy", "link_poses", "mass_matrix", "mass_matrix_inverse", "momentum", "velocities",
]
