"""soadyn.runtime: what users run with a compiled module -- simulation (integrators, trajectories), control
laws of the free-floating toolkit, the closed-loop runtime, and a pure-Python stand-in module.
"""
