"""The physical check of a rigid body's rotational inertia: one home for the robot-file loaders
(:mod:`soadyn.model.robotfile`, :mod:`soadyn.model.urdf`) and the run-time inertial parameters
(:func:`soadyn.model.parameters.parameter_problem`)."""

from __future__ import annotations

import numpy as np

#: Relative tolerance of the triangle inequality on principal moments (fraction of the trace).
TRIANGLE_TOL = 1e-6
#: Relative tolerance of the symmetry check of a 3x3 inertia matrix.
SYMMETRY_TOL = 1e-9


def inertia_problem(I: np.ndarray, triangle: bool = True) -> str | None:
    """Why ``I`` (3x3, about the CoM) is not a rigid-body inertia, or None if it is.

    Checks symmetry, positive definiteness and (if ``triangle``) the triangle inequality
    ``A + B >= C`` on the principal moments, with tolerance ``TRIANGLE_TOL * trace``.
    """
    scale = float(np.max(np.abs(I))) if I.size else 0.0
    asym = float(np.max(np.abs(I - I.T)))
    if asym > SYMMETRY_TOL * scale + 1e-300:
        i, j = np.unravel_index(int(np.argmax(np.abs(I - I.T))), I.shape)
        return (f"not symmetric (row {i} column {j} is {I[i, j]:g} but row {j} column {i} is {I[j, i]:g}); "
                "an inertia matrix equals its transpose, make the off-diagonal pairs equal")
    ev = np.linalg.eigvalsh(0.5 * (I + I.T))
    if not ev[0] > 1e-12 * max(ev[-1], 0.0) or ev[0] <= 0.0:
        return (f"not positive definite (eigenvalues {', '.join(f'{e:.6g}' for e in ev)}); "
                "check the magnitudes and the signs of the products of inertia "
                "(convention I_xy = -integral(x y dm))")
    if triangle:
        a, b, c = ev
        if a + b < c - TRIANGLE_TOL * (a + b + c):
            return (f"violates the triangle inequality on the principal moments "
                    f"({a:.6g} + {b:.6g} < {c:.6g}); no rigid body has these moments, check the values")
    return None
