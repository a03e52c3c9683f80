"""soadyn: spatial-operator dynamics of space manipulators, derived symbolically, emitted as verified C.

The root package is a thin face over :mod:`soadyn.symbolic` and :mod:`soadyn.codegen`.
"""

from soadyn.symbolic import Robot, load_robot

__version__ = "0.1.0"
__all__ = ["Robot", "load_robot", "__version__"]
