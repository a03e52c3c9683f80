"""Generated functions over chunked ``dask.array`` state sets (``map_blocks``), for users who evaluate the
dynamics over many states rather than simulate.

``evaluate(module_dir, "mass_matrix", Q)`` with ``Q`` a dask array of shape (N, nq) chunked along the first
axis only returns a lazy (N, nv, nv) dask array; each block is one call of the generated C batch entry point
(``module.<function>(block)``), run wherever the Dask scheduler puts it (threads, processes or a
distributed cluster).  Workers load the module from its directory (cffi objects do not pickle), once per
process.  Extra keyword arguments (e.g. ``frame="ee"``, ``world_aligned=True``) go to the function.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["evaluate"]

_MODULES: dict[str, Any] = {}


def _module(path: str) -> Any:
    if path not in _MODULES:
        from soadyn.codegen import load

        _MODULES[path] = load(path)
    return _MODULES[path]


def _block(*blocks: np.ndarray, path: str, function: str, kwargs: dict[str, Any]) -> np.ndarray:
    fn = getattr(_module(path), function)
    if blocks[0].shape[0] == 0:
        return np.empty((0,) + _out_shape(path, function, [b.shape[1:] for b in blocks], kwargs))
    positional = [blocks[0], *blocks[1:]]
    if "frame" in kwargs:               # frame families take the frame as the second positional argument
        positional = [blocks[0], kwargs["frame"], *blocks[1:]]
        kw = {k: v for k, v in kwargs.items() if k != "frame"}
    else:
        kw = kwargs
    return np.asarray(fn(*positional, **kw))


def _out_shape(path: str, function: str, in_shapes: list[tuple[int, ...]], kwargs: dict[str, Any]
               ) -> tuple[int, ...]:
    """Shape of one state's output, from a call on one zero state (cheap: the C function)."""
    x = [np.zeros(s) for s in in_shapes]
    if "frame" in kwargs:
        x.insert(1, kwargs["frame"])
    kw = {k: v for k, v in kwargs.items() if k != "frame"}
    out = getattr(_module(path), function)(*x, **kw)
    return tuple(np.shape(out))


def evaluate(module: str | os.PathLike | Any, function: str, *arrays: Any, **kwargs: Any) -> Any:
    """Lazy ``module.<function>`` over dask arrays (one leading batch axis, same chunks on that axis).

    ``module``: the compiled module directory, or a loaded module (its directory is used).  ``arrays``:
    dask or numpy arrays of shape (N, ...) matching the function's inputs (numpy arrays are chunked like
    the first dask array, or in one chunk).  Returns a dask array of shape (N, <output shape>).
    Raises ``ValueError`` for an unknown function or mismatched shapes (before any computation)."""
    import dask.array as da

    path = str(module) if isinstance(module, (str, os.PathLike)) else os.path.dirname(module.__file__)
    mod = _module(str(os.path.abspath(path)))
    path = str(os.path.abspath(path))
    if not callable(getattr(mod, function, None)) or function.startswith("_"):
        names = [n for n in getattr(mod, "__all__", []) if callable(getattr(mod, n, None))]
        raise ValueError(f"evaluate: module {mod.name!r} has no function {function!r}; functions: {names}")
    if not arrays:
        raise ValueError("evaluate: give at least one state array (N, ...)")
    n = np.shape(arrays[0])[0] if np.ndim(arrays[0]) else None
    for i, a in enumerate(arrays):
        if np.ndim(a) < 1 or np.shape(a)[0] != n:
            raise ValueError(f"evaluate: input {i} has shape {np.shape(a)}; every input needs the same "
                             f"leading length N = {n}")
    first = next((a for a in arrays if isinstance(a, da.Array)), None)
    chunks0 = first.chunks[0] if first is not None else (np.shape(arrays[0])[0],)
    darrs = []
    for a in arrays:
        d = a if isinstance(a, da.Array) else da.from_array(np.asarray(a, float), chunks=(chunks0,) + tuple(
            (s,) for s in np.shape(a)[1:]))
        if any(len(c) != 1 for c in d.chunks[1:]):
            d = d.rechunk({k: -1 for k in range(1, d.ndim)})
        if d.chunks[0] != chunks0:
            d = d.rechunk({0: chunks0})
        darrs.append(d)
    out_shape = _out_shape(path, function, [d.shape[1:] for d in darrs], kwargs)
    new_axes = len(out_shape) - (darrs[0].ndim - 1)
    chunks = (chunks0,) + tuple((s,) for s in out_shape)
    return da.map_blocks(_block, *darrs, path=path, function=function, kwargs=kwargs, dtype=float,
                         chunks=chunks, new_axis=list(range(darrs[0].ndim, darrs[0].ndim + new_axes))
                         if new_axes > 0 else None,
                         drop_axis=list(range(1 + len(out_shape), darrs[0].ndim)) if new_axes < 0 else None,
                         meta=np.empty((0,) * (1 + len(out_shape))))
