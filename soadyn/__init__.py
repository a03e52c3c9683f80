"""soadyn: spatial-operator dynamics of space manipulators, derived symbolically, emitted as verified C.

The root package is a thin face over :mod:`soadyn.symbolic` and :mod:`soadyn.codegen`.
"""

from soadyn.symbolic import Robot, load_robot

__version__ = "0.1.0"
__all__ = ["Robot", "load_robot", "compile", "load", "simulate", "Trajectory", "__version__"]


def __getattr__(name: str):
    # compile / load come from soadyn.codegen, imported on first use (keeps ``import soadyn`` light)
    if name in ("compile", "load"):
        from soadyn import codegen

        return getattr(codegen, name)
    if name in ("simulate", "Trajectory"):
        from soadyn.codegen import simulate as _sim

        return getattr(_sim, name)
    raise AttributeError(f"module 'soadyn' has no attribute {name!r}")
