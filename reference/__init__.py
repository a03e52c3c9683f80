"""soadyn.reference: the dense operator path (seed 000 section 2: E_phi, phi, H, M, ...), a second route to
every number the recursions give.  It has its own kinematics and constraint rows on purpose and imports only
the robot model (:mod:`soadyn.model`), so agreement with :mod:`soadyn.symbolic.algorithms` means something.
"""
