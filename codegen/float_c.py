"""Single-precision C of a robot's functions: the typed statements of ``<module>.c`` printed as ``float``.

Flight computers often compute in single precision.  :func:`float_source` prints the very statements
that :mod:`soadyn.codegen.emit` made for the double module (same order, same common subexpressions) with
:class:`~soadyn.codegen.printer.FloatPrinter`: ``float`` locals and arrays, ``f``-suffixed literals and
libm's ``sinf``/``cosf``/``sqrtf``/``powf``.  There is no second text pipeline: a function is printed from
its :class:`~soadyn.codegen.emit.EmittedFunction` statements, so every transformation of the program
(load sinking, zero-wrench calls, structured variants) is shared with the double C.

Not printed in single precision (listed in the file's comment): functions with product loops (the loops
of :mod:`soadyn.codegen.products` are double vector code; the derivative functions).  What single
precision costs in accuracy is measured in ``tests/test_printers.py``.
"""

from __future__ import annotations

from soadyn.codegen.emit import EmittedFunction, enum_block, module_prefix
from soadyn.codegen.functions import frame_enum
from soadyn.codegen.printer import FloatPrinter
from soadyn.model.names import c_comment
from soadyn.model.robot import Robot


def float_signature(f: EmittedFunction) -> str:
    """``<ret> <cname>(const float *inputs..., [int frame,] float *outputs...)``."""
    params = ([f"const float *{a.name}" for a in f.inputs] + (["int frame"] if f.is_family else [])
              + [f"float *{a.name}" for a in f.outputs])
    return f"{'int' if f.is_family else 'void'} {f.cname}({', '.join(params)})"


def float_source(robot: Robot, module_name: str, funcs: list[EmittedFunction]) -> str:
    """C99 ``float`` source of the emitted functions ``funcs`` (unfinished: no stages, no SIMD batch;
    e.g. :attr:`soadyn.codegen.pipeline.Generated.functions` of a build without profile).  Every function
    keeps its C name and its array layout; there is no batch entry."""
    printer = FloatPrinter()
    done = [f for f in funcs if not f.epilogue]
    skipped = [f.cname for f in funcs if f.epilogue]
    head = [f"/* {c_comment(module_name)}_float.c: robot \"{c_comment(robot.name)}\" ({robot.base} base) in "
            "single precision, generated C99 (soadyn codegen/float_c.py); DO NOT EDIT.",
            " * The statements of the double module, printed as float. */"]
    if skipped:
        head.append(f"/* not in single precision (product loops): {c_comment(', '.join(skipped))} */")
    out = [*head, "#include <math.h>", ""]
    if any(f.is_family for f in done):
        prefix = module_prefix(module_name)
        out += [enum_block(frame_enum(robot, module_name), f"{prefix}frame", f"{prefix.upper()}N_FRAMES"), ""]
    out += [f"{float_signature(f)};" for f in done]
    for f in done:
        out += ["", f"/* {f.doc} (single precision) */", float_signature(f), "{"]
        out += [f"    (void){a};" for a in f.unused]
        out += [f"    {line}" for line in printer.lines(f.body)]
        out.append("}")
    return "\n".join(out) + "\n"
