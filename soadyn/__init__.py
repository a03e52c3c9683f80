"""soadyn: spatial-operator dynamics of space manipulators, derived symbolically, emitted as verified C.

The root package is a thin face that re-exports the public API of the layers:

============================  =======================================================================
``load_robot``                :mod:`soadyn.symbolic.checks` (robot files, checked for a singular mass matrix)
``Robot``                     :mod:`soadyn.model` (the model)
``compile``, ``load``         :mod:`soadyn.codegen` (robot -> verified, importable C module)
``simulate``, ``Trajectory``  :mod:`soadyn.runtime.simulate` (what users run with a compiled module)
============================  =======================================================================
"""

from importlib import import_module
from typing import Any

from soadyn._version import __version__
from soadyn.model import Robot

__all__ = ["Robot", "load_robot", "compile", "load", "simulate", "Trajectory", "__version__"]

#: names resolved on first use (keeps ``import soadyn`` light: no SymEngine, cffi or Jinja until needed)
_LAZY = {"load_robot": "soadyn.symbolic.checks", "compile": "soadyn.codegen", "load": "soadyn.codegen",
         "simulate": "soadyn.runtime.simulate", "Trajectory": "soadyn.runtime.simulate"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'soadyn' has no attribute {name!r}")
