"""soadyn.reference: the dense operator path (seed 000 section 2: E_phi, phi, H, M, ...), a second route to
every number the recursions give.  It has its own kinematics and constraint rows on purpose and imports only
the robot model (:mod:`soadyn.model`), so agreement with :mod:`soadyn.symbolic.algorithms` means something.

Modules: :mod:`~soadyn.reference.dense` (operators and the quantities built from them),
:mod:`~soadyn.reference.kinematics` (float forward kinematics of frames: :func:`frame_motion`),
:mod:`~soadyn.reference.free_floating`, :mod:`~soadyn.reference.invariant`.
"""

from soadyn.reference.kinematics import FrameMotion, frame_motion

__all__ = ["FrameMotion", "frame_motion"]
