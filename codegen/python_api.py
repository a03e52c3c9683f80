"""The Python API of a generated module: which Python functions it has, and its ``__init__.py``.

:func:`python_api` describes the module's Python-level functions (one per public API name: plain,
with ``f_ext``, a frame family, or a structured matrix with its variants) for the wrapper template
``templates/__init__.py.j2`` (:func:`emit_wrapper`) and for the single-call C entry points
(:func:`fast_entries`, :mod:`soadyn.codegen.fastcalls`).
"""

from __future__ import annotations

from typing import Any

from soadyn.codegen.emit import (
    SPARSE_NEW_RESULT,
    STRUCTURED,
    EmittedFunction,
    generator_version,
    module_prefix,
    render,
)
from soadyn.codegen.functions import Arg, FunctionSpec, frame_enum
from soadyn.model.parameters import default_params
from soadyn.model.robot import Robot


def _tuple_literal(shape: tuple[int, ...]) -> str:
    if not shape:
        return "()"
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _strides_literal(shape: tuple[int, ...]) -> str:
    strides = []
    step = 8
    for s in reversed(shape):
        strides.append(step)
        step *= s
    return _tuple_literal(tuple(reversed(strides))) if shape else "()"


def _arg_dict(a: Arg) -> dict[str, Any]:
    return dict(name=a.name, shape=_tuple_literal(a.shape), strides=_strides_literal(a.shape), dims=a.shape)


def _doc_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


def python_api(specs: list[FunctionSpec], prefix: str,
               funcs: list[EmittedFunction] | None = None) -> list[dict[str, Any]]:
    """Description of the Python-level functions of the module, for ``__init__.py.j2`` (``funcs``: the
    emitted functions, for the number of entries the structured variants store)."""
    stores = {f.cname: f.stores for f in funcs or []}
    apis: list[dict[str, Any]] = []
    by_api: dict[str, list[FunctionSpec]] = {}
    for s in specs:
        by_api.setdefault(s.api, []).append(s)
    for api, group in by_api.items():
        first = next((s for s in group if not s.fext_input), group[0])   # a *_fext variant may add outputs
        outputs = [_arg_dict(o) for o in first.outputs]
        shapes = ", ".join(f"{o.name} {o.shape}" for o in first.outputs)
        has_params = any(a.name == "params" for a in first.inputs)
        tail = ["params=None"] if has_params else []     # run-time inertial parameters, a keyword
        if first.is_family:
            by_world = {s.kwargs_dict().get("world_aligned", False): prefix + s.name for s in group}
            names = [a.name for a in first.inputs if a.name != "params"]
            if api == "jacobian_derivatives":
                params = ", ".join([*names, "frame", "world_aligned=False", *tail])
                doc = (f"{first.doc[:1].upper()}{first.doc[1:]} (frame by name; world_aligned: the "
                       f"Jacobian's axes, as jacobian): returns {shapes}.")
            elif api == "jacobian":
                params = ", ".join([*names, "frame", "world_aligned=False", *tail])
                doc = (f"Geometric Jacobian J {first.outputs[0].shape} of a body or named frame (by name): "
                       "its spatial velocity [w; v] = J v. world_aligned=False: frame axes; True: inertial "
                       "axes, at the frame origin.")
            elif api == "generalized_jacobian":
                params = ", ".join([*names, "frame", *tail])
                doc = (f"Generalised Jacobian {first.outputs[0].shape} of a body or named frame (by name; "
                       "free base, zero momentum): its spatial velocity from the joint rates.")
            else:
                params = ", ".join([*names, "frame", *tail])
                doc = f"{first.doc[:1].upper()}{first.doc[1:]} (frame by name): returns {shapes}."
            apis.append(dict(name=api, kind="family", params=params, outputs=outputs, has_params=has_params,
                             input_names=names,
                             inputs=[_arg_dict(a) for a in first.inputs],
                             local=by_world.get(False), world=by_world.get(True), doc=_doc_text(doc)))
        else:
            plain = next(s for s in group if not s.fext_input)
            fext = next((s for s in group if s.fext_input), None)
            inputs = [_arg_dict(a) for a in plain.inputs]
            names = [a.name for a in plain.inputs if a.name != "params"]
            entry = dict(name=api, inputs=inputs, outputs=outputs, c=prefix + plain.name, input_names=names,
                         has_params=has_params,
                         doc=_doc_text(f"{plain.doc[:1].upper()}{plain.doc[1:]}: returns {shapes}."))
            if fext is None and plain.name in STRUCTURED:
                size = first.outputs[0].size
                zeros = size - stores.get(f"{prefix}{plain.name}_nz", size)
                entry.update(kind="structured", params=", ".join([*names, *tail]),
                             c_nz=f"{prefix}{plain.name}_nz", c_upper=f"{prefix}{plain.name}_upper",
                             new_nz=zeros >= SPARSE_NEW_RESULT * size, zeros=zeros, size=size,
                             doc=_doc_text(f"{plain.doc[:1].upper()}{plain.doc[1:]}: returns {shapes}. "
                                           "triangle='upper': only the entries i <= j are computed, "
                                           "zeros below the diagonal (an out= array is zeroed first)."))
            elif fext is None:
                entry.update(kind="plain", params=", ".join([*names, *tail]))
            else:
                entry.update(kind="fext", params=", ".join([*names, "f_ext=None", *tail]),
                             c_fext=prefix + fext.name,
                             fext_inputs=[_arg_dict(a) for a in fext.inputs],
                             fext_outputs=[_arg_dict(o) for o in fext.outputs])
            apis.append(entry)
    return apis


def emit_wrapper(robot: Robot, module_name: str, ext_name: str, specs: list[FunctionSpec],
                 funcs: list[EmittedFunction], key: str = "") -> str:
    """The generated package's ``__init__.py``."""
    prefix = module_prefix(module_name)
    families = [f for f in funcs if f.is_family]
    frame_ops = {f.cname: {"prefix": f.prefix_ops["total"], **{n: o["total"] for n, _, o in f.case_ops}}
                 for f in families}
    enum = frame_enum(robot, module_name)
    apis = python_api(specs, prefix, funcs)
    return render("__init__.py.j2", robot=robot, module_name=module_name, ext_name=ext_name, key=key,
                  version=generator_version(), source_hash=robot.source_hash or "n/a",
                  sha256=robot.source_hash or None, gravity=[float(g) for g in robot.gravity],
                  total_mass=float(robot.total_mass), fingerprint=robot.fingerprint(), functions=funcs,
                  frame_ids=[(name, i) for name, _, i in enum], frame_ops=frame_ops,
                  apis=apis, param_bodies=list(robot.param_bodies),
                  fast_entries=fast_entries(apis, robot.is_free),
                  default_params=default_params(robot).tolist())


def fast_entries(apis: list[dict[str, Any]], is_free: bool) -> list[tuple[str, str, list, list, bool, bool]]:
    """(entry name, C function, inputs, outputs, quaternion check, frame argument) of every fast entry:
    ``<api>`` for plain functions and for functions with ``f_ext`` (the call without it), ``<api>_local``
    and ``<api>_world`` for frame families."""
    out = []
    for api in apis:
        quat = is_free and "q" in api["input_names"]
        if api["kind"] in ("plain", "fext", "structured"):      # structured: the full-writing function
            out.append((api["name"], api["c"], api["inputs"], api["outputs"], quat, False))
        else:
            out.append((api["name"] + "_local", api["local"], api["inputs"], api["outputs"], quat, True))
            if api.get("world"):
                out.append((api["name"] + "_world", api["world"], api["inputs"], api["outputs"], quat, True))
    return out
