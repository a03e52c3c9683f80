"""Single calls from Python: a C entry per function that checks its arguments in C (``<ext>_fast.c``).

``fx_<name>(inputs..., out)`` runs the generated C function when every input is an exact float64
``numpy.ndarray`` of the function's shape (C-contiguous) with finite entries, and ``out`` does not overlap
an input (the Python code copies the input first); it returns None otherwise, so that the module's
Python code handles (or refuses) the call exactly as without this file.  The C is the template
``templates/fastcalls.c.j2`` (its header comment says what each helper checks); this module computes
what differs between entries.
"""

from __future__ import annotations

from math import prod
from typing import Any

from soadyn.codegen.emit import module_prefix, render
from soadyn.codegen.functions import FunctionSpec
from soadyn.codegen.python_api import fast_entries, python_api
from soadyn.codegen.screen import parameter_screen
from soadyn.model.robot import Robot


def _dims(a: dict[str, Any]) -> str:
    return f"[{max(len(a['dims']), 1)}] = {{{', '.join(map(str, a['dims'])) or '0'}}};"


def _size(a: dict[str, Any]) -> int:
    return prod(a["dims"])


def _entry(name: str, cfunc: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]],
           quat: bool, frame: bool) -> dict[str, Any]:
    """What the template needs of one entry ``fx_<name>(inputs..., [frame id,] out[, check])``: inputs
    with one leading dimension run ``<cfunc>_batch``; ``check`` (entries with ``params`` only): True to
    run only on a parameter set the module accepted before (``fx_known``) or one whose rows pass the C
    screen (:func:`parameter_screen`), False to skip that check."""
    iq = next((i for i, a in enumerate(inputs) if a["name"] == "q"), 0)
    ip = next((i for i, a in enumerate(inputs) if a["name"] == "params"), None)
    m = len(outputs)
    if ip == 0:
        raise ValueError(f"{cfunc}: params must follow the state inputs (the batch size is read from "
                         "the first)")
    rest = [i for i in range(len(inputs)) if i != ip]
    return dict(
        name=name, cfunc=cfunc, in_dims=[_dims(a) for a in inputs], out_dims=[_dims(o) for o in outputs],
        k_out=len(inputs) + (1 if frame else 0), n_in=len(inputs), nd0=len(inputs[0]["dims"]),
        checks=" || ".join(f"!fx_ok(args[{i}], n, {len(inputs[i]['dims'])}, d{i})" for i in rest) or "0",
        # a non-finite input: the module's Python code refuses it (issue 21); params: below
        finite=" || ".join(f"!fx_finite(args[{i}])" for i in rest) or "0",
        # a batch of parameter sets: the states from i0 on, not tested by the SIMD lanes (check & 4, & 8)
        finite_rest=" || ".join([f"!fx_finite_d(FX_D(args[{i}]) + i0 * {_size(inputs[i])}, "
                                 f"(n - i0) * {_size(inputs[i])})" for i in rest]
                                + ([f"!fx_quats_nonzero(FX_D(args[{iq}]) + i0 * {_size(inputs[iq])}, "
                                    "n - i0)"] if quat else [])) or "0",
        state_check="4 | 8" if quat else "4",
        ip=ip, p_size=_size(inputs[ip]) if ip is not None else 0,
        p_nd=len(inputs[ip]["dims"]) if ip is not None else 0,
        quat=quat, iq=iq, frame=frame,
        ins="".join(f"FX_D(args[{i}]), " for i in range(len(inputs))), fid="fid, " if frame else "",
        # one parameter set for a batch: the batch entry on chunks of states, params tiled (fx_tile)
        ins_chunk="".join("tile, " if i == ip else f"FX_D(args[{i}]) + i0 * {_size(a)}, "
                          for i, a in enumerate(inputs)),
        ins_chunk_ps="".join(f"FX_D(args[{i}]) + i0 * {_size(a)}, " for i, a in enumerate(inputs)),
        out_chunk=f"FX_D(r) + i0 * {_size(outputs[0])}",
        outs_chunk=", ".join(f"FX_D(o[{j}]) + i0 * {_size(o)}" for j, o in enumerate(outputs)),
        # the batch entry checking its parameters in its SIMD lanes (lanes.batch_checked_text): its parameters
        checked=", ".join([f"const double *{a['name']}" for a in inputs]
                         + [f"double *{o['name']}" for o in outputs]) if ip is not None and not frame else "",
        m=m, nd=len(outputs[0]["dims"]), outs=", ".join(f"FX_D(o[{j}])" for j in range(m)),
        e_list=", ".join(f"e{j}" for j in range(m)), nd_list=", ".join(str(len(o["dims"])) for o in outputs))


def emit_fastcalls(robot: Robot, module_name: str, ext_name: str, specs: list[FunctionSpec],
                   header_name: str) -> str:
    """C of the single-call entry points (a translation unit of the extension, compiled against Python's
    and numpy's headers); ``<ext_name>_fastcalls()`` returns them in a dict."""
    entries = fast_entries(python_api(specs, module_prefix(module_name)), robot.is_free)
    names = [e[0] for e in entries] + (["quaternions_nonzero"] if robot.is_free else [])
    params = bool(robot.param_bodies)
    names += ["params_known", "params_accept"] if params else []
    return render("fastcalls.c.j2", header=header_name, entries=[_entry(*e) for e in entries],
                  nq=robot.nq if robot.is_free else 0, methods=names, ext=ext_name, params=params,
                  screen=parameter_screen() if params else "")
