"""soadyn.codegen: derive the algorithms symbolically, optimise, emit C99, build with cffi, load.

``compile(robot_or_path, out_dir=None, base=None)`` -> imported module; ``load(path)`` -> module.
"""

from soadyn.codegen.build import CompileError
from soadyn.codegen.load import load
from soadyn.codegen.pipeline import compile_robot

compile = compile_robot  # noqa: A001 - the public name of the API

__all__ = ["CompileError", "compile", "compile_robot", "load"]
