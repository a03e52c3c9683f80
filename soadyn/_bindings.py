"""What the CasADi and JAX bindings share: the C functions of a compiled module and the derivatives with
respect to the raw configuration q.

A compiled module (``soadyn.load``/``soadyn.compile``) is described by its header (the prototypes: names and
argument order) and its Python functions (the shapes of the outputs, found by one call on a neutral state).

**Derivatives with respect to the raw q.**  The generated derivative functions differentiate along the
tangent ``q (+) delta`` of ``docs/conventions.md`` (``delta`` of size nv: base attitude ``R exp(delta_w~)``,
position ``p + R delta_v``, joints ``q_j + delta_j``).  CasADi and JAX differentiate with respect to the raw
input q of size nq, whose base quaternion need not have unit length (the generated code divides its norm
out).  The chain rule with the map ``T(q) = d delta / d q`` (nv x nq) converts them exactly::

    delta_v = R^T dp,   delta_w = (2 / |quat|^2) vec(conj(quat) (x) dquat)
            = (2 / |quat|^2) [w I - e~, -e] dquat       (quat = [e; w] = [x, y, z, w]),

joints the identity.  The radial part of ``dquat`` (a change of norm) gives ``delta_w = 0``, as it leaves R
unchanged.  :func:`raw_q_jacobian` applies it; the generated CasADi wrappers apply the same formulas in C.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from soadyn.codegen.functions import NO_TANGENT, tangent_name
from soadyn.codegen.functions import TANGENT_SUFFIX as TANGENT

#: the C functions that write only part of their output (they need a zeroed buffer): not wrapped
_PARTIAL = ("_nz", "_upper")
_PROTO = re.compile(r"^(void|int)\s+(\w+)\s*\(([^)]*)\)\s*;", re.M)
_ARG = re.compile(r"^(const\s+)?(double|int)\s*\*?\s*(?:restrict\s+|__restrict\s+)?(\w+)$")


@dataclass(frozen=True)
class CFunction:
    """One generated C function of a module: ``symbol`` (full C name), the public Python function ``api``
    it backs with the keyword arguments that select it (``world_aligned``, ``f_ext``), the inputs and
    outputs as ``(name, shape)`` in C argument order, and whether it is a frame family (``int frame``)."""

    symbol: str
    cname: str
    api: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    outputs: tuple[tuple[str, tuple[int, ...]], ...]
    family: bool
    world_aligned: bool | None = None
    fext: bool = False


def module_dir(module: ModuleType) -> Path:
    """Directory of a compiled module (its ``__init__.py``)."""
    f = getattr(module, "__file__", None)
    if not f or not hasattr(module, "module_name") or not hasattr(module, "nq"):
        raise TypeError(f"expected a compiled soadyn module (soadyn.compile(...) or soadyn.load(...)), got "
                        f"{type(module).__name__} {str(module)[:60]!r}")
    return Path(f).resolve().parent


def input_shapes(module: ModuleType) -> dict[str, tuple[int, ...]]:
    """Shape of every named input array of a module's C functions."""
    nq, nv, nb = module.nq, module.nv, module.n_bodies
    nj = nv - 6 if module.base == "free" else nv
    return {"q": (nq,), "v": (nv,), "a": (nv,), "tau": (nv,), "f_ext": (nb, 6), "qd": (nj,), "h": (6,),
            "params": (len(module.param_bodies), 10)}


def neutral_q(module: ModuleType) -> np.ndarray:
    q = np.zeros(module.nq)
    if module.base == "free":
        q[6] = 1.0
    return q


def _api_of(module: ModuleType, cname: str) -> tuple[str, bool | None, bool] | None:
    """(api, world_aligned, f_ext) of a C function name (without the module prefix), None when the module
    has no public function for it."""
    if cname.endswith(_PARTIAL):
        return None
    for family in ("jacobian", "jacobian" + TANGENT):
        if cname in (family + "_local", family + "_world"):
            return family, cname.endswith("_world"), False
    fext = cname.endswith("_fext")
    api = cname[:-5] if fext else cname
    if api in getattr(module, "__all__", ()) and callable(getattr(module, api, None)):
        return api, None, fext
    return None


_TABLES: dict[tuple[str, str], list[CFunction]] = {}


def c_functions(module: ModuleType) -> list[CFunction]:
    """Every C function of ``module`` that a binding can call (full-writing, public), in header order
    (read once per module build: cached by directory and cache key)."""
    d = module_dir(module)
    key = (str(d), str(getattr(module, "cache_key", "")))
    if key not in _TABLES:
        _TABLES[key] = _read_functions(module, d)
    return list(_TABLES[key])


def _read_functions(module: ModuleType, d: Path) -> list[CFunction]:
    prefix = module.module_name + "_"
    header = (d / f"{module.module_name}.h").read_text(encoding="utf-8")
    shapes = input_shapes(module)
    out: list[CFunction] = []
    for _ret, symbol, args in _PROTO.findall(header):
        if not symbol.startswith(prefix) or symbol.endswith("_batch"):
            continue
        cname = symbol[len(prefix):]
        which = _api_of(module, cname)
        if which is None:
            continue
        api, world, fext = which
        ins: list[str] = []
        outs: list[str] = []
        family = False
        for a in (x.strip() for x in args.split(",")):
            m = _ARG.match(a)
            if m is None:
                raise ValueError(f"{d}: cannot read the prototype of {symbol} ({a!r})")
            const, typ, name = m.groups()
            if typ == "int":
                family = True
            elif const:
                ins.append(name)
            else:
                outs.append(name)
        if any(n not in shapes for n in ins):
            continue
        kwargs: dict[str, Any] = {n: _probe_value(module, n, shapes[n]) for n in ins}
        if family:
            kwargs["frame"] = module.body_names[0]
        if world is not None:
            kwargs["world_aligned"] = world
        try:
            res = getattr(module, api)(**kwargs)
        except Exception:   # noqa: BLE001 - a function that cannot be probed is not wrapped
            continue
        res = res if isinstance(res, tuple) else (res,)
        if len(res) != len(outs):
            continue
        out.append(CFunction(symbol, cname, api, tuple((n, shapes[n]) for n in ins),
                             tuple((n, tuple(np.shape(r))) for n, r in zip(outs, res)), family, world, fext))
    return out


def _probe_value(module: ModuleType, name: str, shape: tuple[int, ...]) -> np.ndarray:
    if name == "q":
        return neutral_q(module)
    if name == "params":
        return module.default_params()
    return np.zeros(shape)


def find_function(module: ModuleType, api: str, frame: str | None = None, world_aligned: bool = False,
                  f_ext: bool = False) -> tuple[CFunction, int | None]:
    """The C function behind ``module.<api>`` with these options, and the frame id (families)."""
    funcs = c_functions(module)
    have = sorted({f.api for f in funcs})
    cands = [f for f in funcs if f.api == api]
    if not cands:
        raise ValueError(f"{module.module_name} has no function {api!r}; it has: {', '.join(have)} "
                         f"(build others with soadyn.compile(..., functions=[...]))")
    cands = [f for f in cands if f.fext == bool(f_ext)]
    if not cands:
        raise ValueError(f"{api}: {'no' if f_ext else 'only a'} variant with external wrenches f_ext; "
                         f"call it with f_ext={not f_ext}")
    if cands[0].family:
        cands = [f for f in cands if f.world_aligned in (None, bool(world_aligned))]
        if frame is None:
            raise ValueError(f"{api} needs a frame: one of {list(module.frame_ids)}")
        if frame not in module.frame_ids:
            raise ValueError(f"{api}: unknown frame {str(frame)[:80]!r}; valid: {list(module.frame_ids)}")
        return cands[0], module.frame_ids[frame]
    if frame is not None:
        raise ValueError(f"{api} takes no frame")
    return cands[0], None


# ---- derivatives with respect to the raw q ---------------------------------------------------------
def attitude_map(quat: np.ndarray) -> np.ndarray:
    """The attitude rows of ``T(q) = d delta / d q`` (module docstring): ``d delta_w / d quat =
    (2 / |quat|^2) [w I - e~, -e]`` (3 x 4, or (N, 3, 4) for a batch; quat = [x, y, z, w], any norm)."""
    quat = np.asarray(quat, dtype=float)
    e, w = quat[..., :3], quat[..., 3]
    G = np.empty(quat.shape[:-1] + (3, 4))
    G[..., 0:3, 0:3] = w[..., None, None] * np.eye(3)
    G[..., 0, 1], G[..., 0, 2], G[..., 1, 2] = e[..., 2], -e[..., 1], e[..., 0]
    G[..., 1, 0], G[..., 2, 0], G[..., 2, 1] = -e[..., 2], e[..., 1], -e[..., 0]
    G[..., :, 3] = -e
    G *= (2.0 / (quat ** 2).sum(-1))[..., None, None]
    return G


def quaternion_matrix(quat: np.ndarray) -> np.ndarray:
    """``R = ((w^2 - e.e) I + 2 e e^T + 2 w e~) / |quat|^2`` of quaternions [x, y, z, w] (any norm)."""
    e, w = quat[..., :3], quat[..., 3]
    n2 = (quat ** 2).sum(-1)
    ee = (e ** 2).sum(-1)
    R = (w ** 2 - ee)[..., None, None] * np.eye(3) + 2 * e[..., :, None] * e[..., None, :]
    sk = np.zeros(quat.shape[:-1] + (3, 3))
    sk[..., 0, 1], sk[..., 0, 2], sk[..., 1, 2] = -e[..., 2], e[..., 1], -e[..., 0]
    sk[..., 1, 0], sk[..., 2, 0], sk[..., 2, 1] = e[..., 2], -e[..., 1], e[..., 0]
    return (R + 2 * w[..., None, None] * sk) / n2[..., None, None]


def raw_q_jacobian(D: np.ndarray, q: np.ndarray, free: bool, out: np.ndarray | None = None) -> np.ndarray:
    """The derivative with respect to the raw q (rows x nq) from the tangent one ``D`` (rows x nv): ``D``
    times ``T(q)`` of the module docstring, by its blocks (position ``R^T``, attitude :func:`attitude_map`,
    joints shifted by one column: a dense product with ``T`` was the largest Python cost of a batched JAX
    Jacobian); written into ``out`` when given."""
    D = np.asarray(D, dtype=float)
    nv = D.shape[-1]
    if out is None:
        out = np.empty(np.broadcast_shapes(D.shape[:-2], np.shape(q)[:-1]) + D.shape[-2:-1]
                       + (nv + 1 if free else nv,))
    if not free:
        out[...] = D
        return out
    quat = np.asarray(q, dtype=float)[..., 3:7]
    np.matmul(D[..., 3:6], np.swapaxes(quaternion_matrix(quat), -1, -2), out=out[..., 0:3])  # R^T dp
    np.matmul(D[..., 0:3], attitude_map(quat), out=out[..., 3:7])
    out[..., 7:] = D[..., 6:]
    return out


#: public functions whose Jacobian comes from dedicated generated functions -> the module functions it
#: needs; every other function ``f`` is differentiated by its forward-mode derivatives ``f_derivatives``
#: (:func:`tangent_function`)
DERIVATIVES = {
    "inverse_dynamics": ("inverse_dynamics_derivatives", "mass_matrix"),
    "forward_dynamics": ("forward_dynamics_derivatives",),
    "frame_pose": ("jacobian",),
    "body_poses": ("jacobian",),
    "frame_twist": ("frame_acceleration_derivatives", "jacobian"),
    "frame_acceleration": ("frame_acceleration_derivatives", "jacobian"),
}


#: public functions that have no generated derivatives of any kind
NOT_DIFFERENTIABLE = NO_TANGENT - set(DERIVATIVES)


def tangent_function(f: CFunction) -> str:
    """The C name (without the module prefix) of the forward-mode derivatives of ``f``:
    ``jacobian_world`` -> ``jacobian_derivatives_world``."""
    return tangent_name(f.cname, f.api)


def derivative_support(module: ModuleType, api: str, fext: bool = False) -> str:
    """"" when the Jacobian of ``module.<api>`` (``fext``: its variant with external wrenches) is
    available, else why not (one line, naming the fix)."""
    if api not in DERIVATIVES:
        if api.endswith(TANGENT) or api.endswith("_regressor") or api in NOT_DIFFERENTIABLE:
            return f"{api} has no generated derivative (first derivatives only)" if api.endswith(TANGENT) \
                else f"{api} has no generated derivative"
        if not callable(getattr(module, api + TANGENT, None)):
            return (f"{module.module_name} was built without {api}{TANGENT}, the derivatives of {api}: "
                    f"compile it with functions=[{api!r}, '{api}{TANGENT}', ...]")
        return ""
    if fext and api not in ("inverse_dynamics", "forward_dynamics"):
        return f"{api} with f_ext: no generated derivative"
    need = DERIVATIVES[api] + (("jacobian",) if fext else ())
    if getattr(module, "param_bodies", None) and api in ("inverse_dynamics", "forward_dynamics"):
        need += ("inverse_dynamics_regressor",)       # d/dparams: Y (ID), -M^-1 Y (FD)
    missing = [n for n in need if not callable(getattr(module, n, None))]
    if missing:
        have = ", ".join(map(repr, (api, *need)))
        return (f"{module.module_name} was built without {', '.join(missing)}, which the derivatives of "
                f"{api} need: compile it with functions=[{have}, ...]")
    return ""


def _rotation_rows(Jw: np.ndarray, R: np.ndarray) -> np.ndarray:
    """d R / d delta (9 x nv, R row-major) from the angular rows of the world-aligned Jacobian:
    ``dR = (Jw[0:3] delta)~ R``, column c of R turns as ``w x R[:, c]``."""
    w = Jw[..., 0:3, :]                                        # (..., 3, nv)
    out = np.empty(R.shape[:-2] + (3, 3, w.shape[-1]))
    for c in range(3):
        r = R[..., :, c][..., :, None]                         # (..., 3, 1)
        out[..., 0, c, :] = w[..., 1, :] * r[..., 2, :] - w[..., 2, :] * r[..., 1, :]
        out[..., 1, c, :] = w[..., 2, :] * r[..., 0, :] - w[..., 0, :] * r[..., 2, :]
        out[..., 2, c, :] = w[..., 0, :] * r[..., 1, :] - w[..., 1, :] * r[..., 0, :]
    return out.reshape(R.shape[:-2] + (9, w.shape[-1]))


def dense_jacobian(module: ModuleType, api: str, args: tuple[np.ndarray, ...],
                   frame: str | None = None, world_aligned: bool | None = None,
                   joined: bool = False) -> Any:
    """Jacobian of ``module.<api>(*args[, frame, world_aligned])``: one block per input (the outputs
    flattened row-major and stacked, rows x input size), q raw (the tangent derivatives converted with
    :func:`raw_q_jacobian`); a leading batch dimension is allowed.  ``joined``: the blocks side by side in
    one array (rows x all inputs)."""
    blocks = _dense_jacobian(module, api, args, frame, world_aligned)
    return np.concatenate(blocks, axis=-1) if joined else blocks


def _dense_jacobian(module: ModuleType, api: str, args: tuple[np.ndarray, ...], frame: str | None,
                    world_aligned: bool | None) -> tuple[np.ndarray, ...]:
    params = bool(getattr(module, "param_bodies", None)) and api in ("inverse_dynamics", "forward_dynamics")
    fext = api in ("inverse_dynamics", "forward_dynamics") and len(args) == 4 + params
    why = derivative_support(module, api, fext)
    if why:
        raise ValueError(why)
    q = args[0]
    free = module.base == "free"
    m = module
    if api not in DERIVATIVES:
        return _tangent_jacobian(module, api, args, frame, world_aligned)
    kw = {"f_ext": args[3]} if fext else {}
    pk = {"params": args[-1]} if params else {}
    if api == "inverse_dynamics":
        dq, dv = m.inverse_dynamics_derivatives(*args[:3], **kw, **pk)
        blocks = [raw_q_jacobian(dq, q, free), dv, m.mass_matrix(q, **pk)]
    elif api == "forward_dynamics":
        dq, dv, dtau = m.forward_dynamics_derivatives(*args[:3], **kw, **pk)
        blocks = [raw_q_jacobian(dq, q, free), dv, dtau]
    if api in ("inverse_dynamics", "forward_dynamics"):
        if fext:
            # tau = ID - sum_k J_k^T f_k (J_k: body k's Jacobian in its own axes, f_k at its origin), so
            # dtau/df_k = -J_k^T and da/df_k = M^-1 J_k^T; columns in the row-major order of f_ext (nb, 6)
            JT = [np.swapaxes(m.jacobian(q, b), -1, -2) for b in m.body_names]
            blocks.append(np.concatenate([-J if api == "inverse_dynamics" else blocks[2] @ J for J in JT],
                                         axis=-1))
        if params:
            # tau = Y(q, v, a) params.ravel() + ID(params=0): dtau/dparams = Y; from ID(q, v, FD) = tau,
            # da/dparams = -M^-1 Y(q, v, a) at the forward dynamics' a
            if api == "inverse_dynamics":
                blocks.append(m.inverse_dynamics_regressor(*args[:3]))
            else:
                acc = m.forward_dynamics(*args[:3], **kw, **pk)
                blocks.append(-(blocks[2] @ m.inverse_dynamics_regressor(q, args[1], acc)))
        return tuple(blocks)
    if api == "frame_pose":
        Jw = m.jacobian(q, frame, world_aligned=True)
        R, _ = m.frame_pose(q, frame)
        D = np.concatenate([_rotation_rows(Jw, R), Jw[..., 3:6, :]], axis=-2)
        return (raw_q_jacobian(D, q, free),)
    if api == "body_poses":
        R, _ = m.body_poses(q)
        Js = [m.jacobian(q, b, world_aligned=True) for b in m.body_names]
        Dr = [_rotation_rows(J, R[..., k, :, :]) for k, J in enumerate(Js)]
        D = np.concatenate([*Dr, *(J[..., 3:6, :] for J in Js)], axis=-2)
        return (raw_q_jacobian(D, q, free),)
    Jw = m.jacobian(q, frame, world_aligned=True)
    if api == "frame_twist":
        _, _, dVq, _, _ = m.frame_acceleration_derivatives(q, args[1], np.zeros_like(args[1]), frame)
        return raw_q_jacobian(dVq, q, free), Jw
    # frame_acceleration: outputs V, A; inputs q, v, a
    _, _, dVq, dAq, dAv = m.frame_acceleration_derivatives(*args, frame)
    zero = np.zeros_like(Jw)
    return (raw_q_jacobian(np.concatenate([dVq, dAq], axis=-2), q, free),
            np.concatenate([Jw, dAv], axis=-2), np.concatenate([zero, Jw], axis=-2))


def _variant(module: ModuleType, api: str, n_args: int, frame: str | None,
             world_aligned: bool | None) -> CFunction:
    """The C function of ``module.<api>`` that takes ``n_args`` arrays (with or without f_ext)."""
    for fext in (False, True):
        try:
            f, _ = find_function(module, api, frame, bool(world_aligned), fext)
        except ValueError:
            continue
        if len(f.inputs) == n_args:
            return f
    raise ValueError(f"{api}: no variant takes {n_args} arrays")


def _tangent_jacobian(module: ModuleType, api: str, args: tuple[np.ndarray, ...], frame: str | None,
                      world_aligned: bool | None) -> tuple[np.ndarray, ...]:
    """:func:`dense_jacobian` from the forward-mode derivatives ``<api>_derivatives`` (outputs major:
    ``d<y>_d<x>`` of shape ``lead + y.shape + x.shape``)."""
    kw: dict[str, Any] = {}
    if frame is not None:
        kw["frame"] = frame
    if world_aligned is not None:
        kw["world_aligned"] = world_aligned
    f = _variant(module, api, len(args), frame, world_aligned)
    names = [n for n, _ in f.inputs]       # by name: the module's f_ext and params are keywords
    res = getattr(module, api + TANGENT)(**dict(zip(names, args)), **kw)
    res = res if isinstance(res, tuple) else (res,)
    q = np.asarray(args[0])
    lead = q.shape[:-1]
    n_in = len(args)
    shapes = [np.shape(a)[len(lead):] for a in args]
    blocks = []
    for i, shape in enumerate(shapes):
        size = module.nv if i == 0 else int(np.prod(shape))
        parts = [np.reshape(res[k * n_in + i], lead + (-1, size)) for k in range(len(res) // n_in)]
        D = np.concatenate(parts, axis=-2)
        blocks.append(raw_q_jacobian(D, q, module.base == "free") if i == 0 else D)
    return tuple(blocks)


# ---- structural sparsity (from the generated program's exact zeros) ---------------------------------
_STAMPS: dict[tuple[str, str], dict] = {}


def nonzeros(module: ModuleType, cname: str, output: str, shape: tuple[int, ...],
             case: int | None = None) -> np.ndarray:
    """Boolean array (``shape``) of the entries of output ``output`` of the C function ``cname`` (frame
    case ``case`` of a family) that are not an exact zero of its generated program (the module's stamp,
    ``nonzeros``: soadyn.codegen.derive.nonzero_patterns).  Entries outside it are zero for every input."""
    import json

    d = module_dir(module)
    key = (str(d), str(getattr(module, "cache_key", "")))
    if key not in _STAMPS:
        stamp = d / "soadyn_stamp.json"
        _STAMPS[key] = json.loads(stamp.read_text(encoding="utf-8")).get("nonzeros", {}) \
            if stamp.is_file() else {}
    name = output if case is None else f"{output}@{case}"
    text = _STAMPS[key].get(cname, {}).get(name)
    size = int(np.prod(shape))
    if text is None:
        raise ValueError(f"{module.module_name}: no structural pattern of {cname}.{name} in its stamp: "
                         "rebuild the module (soadyn.compile(..., force=True))")
    bits = [bool(int(ch, 16) >> j & 1) for ch in text for j in range(4)][:size]
    return np.array(bits, dtype=bool).reshape(shape)


def raw_q_pattern(D: np.ndarray, free: bool) -> np.ndarray:
    """The structural pattern with respect to the raw q (rows x nq) of a tangent pattern ``D`` (rows x
    nv): ``T(q)`` (module docstring) mixes the position columns among themselves (``R^T``), the attitude
    columns into the four quaternion columns, and shifts the joints by one."""
    if not free:
        return D.copy()
    nv = D.shape[-1]
    T = np.zeros((nv, nv + 1), dtype=bool)
    T[0:3, 3:7] = True
    T[3:6, 0:3] = True
    T[np.arange(6, nv), np.arange(7, nv + 1)] = True
    return (D.astype(int) @ T.astype(int)) > 0


def _rotation_pattern(Jw: np.ndarray) -> np.ndarray:
    """Pattern of d R / d delta (9 x nv, R row-major; :func:`_rotation_rows`) from the world-aligned
    Jacobian's: ``dR[r, c] = (w x R[:, c])[r] = w[r+1] R[r+2, c] - w[r+2] R[r+1, c]`` (indices mod 3), so
    row r of R moves along a column where angular row r+1 or r+2 of the Jacobian is not zero."""
    w = Jw[0:3]
    rows = [w[(r + 1) % 3] | w[(r + 2) % 3] for r in range(3)]
    return np.array([rows[r] for r in range(3) for _ in range(3)])


def jacobian_pattern(module: ModuleType, api: str, names: list[str], frame: str | None = None,
                     world_aligned: bool | None = None, fext: bool = False) -> np.ndarray:
    """Boolean sparsity (outputs flattened row-major) x (inputs, q raw) of the Jacobian of ``api`` that
    :func:`dense_jacobian` computes, from the structural zeros of the generated programs it is made of
    (:func:`nonzeros`): a pattern that never hides a non-zero, with the zeros the tree's structure makes."""
    m = module
    nv, free = m.nv, m.base == "free"
    fid = None if frame is None else m.frame_ids[frame]
    sfx = "_fext" if fext else ""

    def nz(cname: str, out: str, shape: tuple[int, ...], case: int | None = None) -> np.ndarray:
        return nonzeros(m, cname, out, shape, case)

    def hstack(blocks: list[np.ndarray]) -> np.ndarray:
        return np.concatenate([b.reshape(b.shape[0], -1) for b in blocks], axis=1)

    sq = (nv, nv)
    if api in ("inverse_dynamics", "forward_dynamics"):
        if api == "inverse_dynamics":
            c = "inverse_dynamics_derivatives" + sfx
            blocks = [raw_q_pattern(nz(c, "dtau_dq", sq), free), nz(c, "dtau_dv", sq),
                      nz("mass_matrix", "M", sq)]
        else:
            c = "forward_dynamics_derivatives" + sfx
            blocks = [raw_q_pattern(nz(c, "da_dq", sq), free), nz(c, "da_dv", sq), nz(c, "da_dtau", sq)]
        if fext:
            JT = [nz("jacobian_local", "J", (6, nv), k).T for k in range(m.n_bodies)]
            blocks.append(np.concatenate([J if api == "inverse_dynamics" else (blocks[2].astype(int) @ J) > 0
                                          for J in JT], axis=1))
        if "params" in names:
            Y = nz("inverse_dynamics_regressor", "Y", (nv, 10 * len(m.param_bodies)))
            blocks.append(Y if api == "inverse_dynamics" else (blocks[2].astype(int) @ Y) > 0)
        return hstack(blocks)
    if api in ("frame_pose", "body_poses", "frame_twist", "frame_acceleration"):
        def Jw(case: int) -> np.ndarray:
            return nz("jacobian_world", "J", (6, nv), case)
        if api == "frame_pose":
            J = Jw(fid)
            return raw_q_pattern(np.concatenate([_rotation_pattern(J), J[3:6]]), free)
        if api == "body_poses":
            Js = [Jw(k) for k in range(m.n_bodies)]
            return raw_q_pattern(np.concatenate([*map(_rotation_pattern, Js), *(J[3:6] for J in Js)]), free)
        c = "frame_acceleration_derivatives"
        dVq = nz(c, "dVf_dq", (6, nv), fid)
        J = Jw(fid)
        if api == "frame_twist":
            return hstack([raw_q_pattern(dVq, free), J])
        dAq, dAv = nz(c, "dAf_dq", (6, nv), fid), nz(c, "dAf_dv", (6, nv), fid)
        return hstack([raw_q_pattern(np.concatenate([dVq, dAq]), free), np.concatenate([J, dAv]),
                       np.concatenate([np.zeros_like(J), J])])
    # forward-mode derivatives: the outputs d<y>_d<x> of <api>_derivatives, outputs major
    f, _ = find_function(m, api, frame, bool(world_aligned), fext)
    cname = tangent_function(f)
    shapes = input_shapes(m)
    blocks = []
    for x in names:
        rows = []
        for y, yshape in f.outputs:
            cols = (nv,) if x == "q" else shapes[x]
            rows.append(nz(cname, f"d{y}_d{x}", yshape + cols, fid).reshape(-1, int(np.prod(cols))))
        D = np.concatenate(rows)
        blocks.append(raw_q_pattern(D, free) if x == "q" else D)
    return hstack(blocks)


def random_inputs(module: ModuleType, names: list[str], states: int, seed: int) -> list[np.ndarray]:
    """Random inputs (wide ranges, base quaternions of random norm) for pattern probing and tests."""
    rng = np.random.default_rng(seed)
    shapes = input_shapes(module)
    out = []
    for n in names:
        x = rng.normal(size=(states,) + shapes[n]) * (2.0 if n == "q" else 1.0)
        out.append(x)
    return out
