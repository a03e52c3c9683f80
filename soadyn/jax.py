"""JAX binding: the generated C of a compiled module under ``jax.jit``, ``jax.vmap`` and ``jax.grad``.

    import jax
    jax.config.update("jax_enable_x64", True)       # float64: required (see below)
    import soadyn, soadyn.jax
    m = soadyn.compile("robot.yaml", functions=["forward_dynamics", "forward_dynamics_derivatives", ...])
    dyn = soadyn.jax.wrap(m)
    a = jax.jit(dyn.forward_dynamics)(q, v, tau)
    A = jax.vmap(dyn.forward_dynamics)(Q, V, TAU)    # one call of the module's batched C entry point
    g = jax.grad(lambda q: dyn.forward_dynamics(q, v, tau) @ w)(q)

* **float64.**  The generated C computes in double precision and its derivatives are checked to 1e-12;
  JAX computes in float32 unless ``jax_enable_x64`` is on.  :func:`wrap` raises if it is off, or turns it
  on when called with ``enable_x64=True`` (process-wide: every later JAX array defaults to float64).
* **Batches.**  Every function is a ``jax.pure_callback`` with ``vmap_method="broadcast_all"``: under
  ``jax.vmap`` (nested or not) the callback receives the whole batch and calls the module once, whose
  batched C entry point evaluates the states (no Python loop over states).
* **Derivatives.**  A ``jax.custom_jvp`` rule from the generated derivatives, with respect to the raw q
  (base quaternion of any non-zero norm; :mod:`soadyn._bindings`): ``inverse_dynamics`` and
  ``forward_dynamics`` (``*_derivatives``, ``mass_matrix`` for dtau/da; with ``f_ext``, ``-J_k^T`` and
  ``M^-1 J_k^T`` from ``jacobian``), ``frame_pose`` and ``body_poses`` (``jacobian``), ``frame_twist``
  and ``frame_acceleration`` (``frame_acceleration_derivatives`` and ``jacobian``), every other function
  ``f`` from its forward-mode derivatives ``f_derivatives`` (build it with ``functions=["f",
  "f_derivatives", ...]``).  The rule's callback returns the Jacobian joined (outputs x all inputs) and
  multiplies it once by the stacked tangents: ``jax.jacfwd`` pushes the whole identity basis through it
  (a vmap over the tangents), so that product is its main cost beyond the module's (``benchmarks/README.md``).
  The tangent map is linear in the tangents, so JAX transposes it for ``jax.grad``/``jax.jacrev`` (reverse
  mode).  First order only: differentiating the derivative (a Hessian) raises.  A function without
  generated derivatives in the module raises one ValueError naming the ``functions=[...]`` that add them.
* :func:`jacobian` (``soadyn.jax.jacobian(w, "forward_dynamics")``): the blocks ``jax.jacfwd`` gives, from
  one callback, without its product with the identity basis: the fast way to batched first derivatives.
* Bad input: a wrong shape raises ValueError when the function is traced; NaN or inf in an input raises
  ValueError from the callback (under ``jit`` JAX re-raises it as a runtime error carrying the message).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("soadyn.jax needs JAX: pip install 'soadyn[jax]' (or: pip install jax)") from None

import numpy as np

from soadyn._bindings import c_functions, dense_jacobian, derivative_support, find_function, module_dir

__all__ = ["wrap", "Wrapped", "jacobian"]

_F64 = np.float64


class Wrapped:
    """The JAX functions of one compiled module (attributes named like the module's functions).

    ``stats["callbacks"]`` counts the calls into the module (a vmapped call over N states is one)."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.stats = {"callbacks": 0}
        self.names: list[str] = []

    def __repr__(self) -> str:
        return f"<soadyn.jax functions of {self.module.module_name}: {', '.join(self.names)}>"


def _check_x64(enable_x64: bool) -> None:
    if jax.config.jax_enable_x64:
        return
    if enable_x64:
        jax.config.update("jax_enable_x64", True)
        return
    raise ValueError("soadyn.jax needs float64: call jax.config.update('jax_enable_x64', True) before "
                     "soadyn.jax.wrap(module), or call soadyn.jax.wrap(module, enable_x64=True)")


def _lead(x: np.ndarray, shape: tuple[int, ...]) -> tuple[int, ...]:
    return x.shape[:x.ndim - len(shape)]


def _callback(w: Wrapped, name: str, fn: Callable, in_shapes: list[tuple[str, tuple[int, ...]]],
              out_shapes: list[tuple[int, ...]]) -> Callable:
    """Host function of a pure_callback: any number of leading batch dimensions (vmap), flattened into the
    module's one batch dimension and restored."""

    def host(*args: np.ndarray) -> tuple[np.ndarray, ...]:
        w.stats["callbacks"] += 1
        lead = _lead(np.asarray(args[0]), in_shapes[0][1])
        flat = []
        for a, (what, s) in zip(args, in_shapes):
            a = np.asarray(a, dtype=_F64)
            if not np.all(np.isfinite(a)):
                raise ValueError(f"soadyn.jax {name}: input {what} holds NaN or inf")
            flat.append(a.reshape((-1,) + s) if lead else a)
        res = fn(*flat)
        res = res if isinstance(res, tuple) else (res,)
        return tuple(np.asarray(r, dtype=_F64).reshape(lead + s) for r, s in zip(res, out_shapes))

    return host


def _checked(name: str, args: tuple, in_shapes: list[tuple[str, tuple[int, ...]]]) -> list[jax.Array]:
    if len(args) != len(in_shapes):
        raise ValueError(f"soadyn.jax {name}: takes {len(in_shapes)} arrays "
                         f"({', '.join(n for n, _ in in_shapes)}), got {len(args)}")
    out = []
    for x, (what, s) in zip(args, in_shapes):
        a = jnp.asarray(x)
        if not (jnp.issubdtype(a.dtype, jnp.floating) or jnp.issubdtype(a.dtype, jnp.integer)):
            raise ValueError(f"soadyn.jax {name}: {what} must hold real numbers, got dtype {a.dtype}")
        if a.shape != s:
            raise ValueError(f"soadyn.jax {name}: {what} must have shape {s}, got {a.shape} (batch with "
                             "jax.vmap)")
        if not isinstance(a, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(a))):
            raise ValueError(f"soadyn.jax {name}: input {what} holds NaN or inf")
        out.append(a.astype(jnp.float64))
    return out


def _make(w: Wrapped, name: str, fn: Callable, in_shapes: list[tuple[str, tuple[int, ...]]],
          out_shapes: list[tuple[int, ...]], jac: Callable | None, why: str) -> Callable:
    """A JAX function of ``fn`` (numpy, batchable) with a custom JVP from ``jac`` (numpy: the outputs and
    the Jacobian blocks d out / d input, batchable), or one that refuses to be differentiated (``why``)."""
    host = _callback(w, name, fn, in_shapes, out_shapes)
    res_types = tuple(jax.ShapeDtypeStruct(s, jnp.float64) for s in out_shapes)
    single = len(out_shapes) == 1

    def primal(*xs):
        out = jax.pure_callback(host, res_types, *xs, vmap_method="broadcast_all")
        return out[0] if single else tuple(out)

    f = jax.custom_jvp(primal)
    if jac is not None:
        n_out = sum(int(np.prod(s)) for s in out_shapes)
        n_in = sum(int(np.prod(s)) for _, s in in_shapes)
        jhost = _callback(w, name, jac, in_shapes, [*out_shapes, (n_out, n_in)])
        jtypes = tuple(jax.ShapeDtypeStruct(s, jnp.float64) for s in [*out_shapes, (n_out, n_in)])

        def rule(primals, tangents):
            res = jax.pure_callback(jhost, jtypes, *primals, vmap_method="broadcast_all")
            outs, J = res[:len(out_shapes)], res[-1]
            # one product with the inputs' tangents stacked: under jax.jacfwd (a vmap over the basis of
            # the tangents) a product per input block and their sum cost 3x more (benchmarks/README.md)
            flat = J @ jnp.concatenate([jnp.ravel(dx) for dx in tangents])   # outputs stacked row-major
            touts, k = [], 0
            for s in out_shapes:
                size = int(np.prod(s))
                touts.append(flat[k:k + size].reshape(s))
                k += size
            return (outs[0], touts[0]) if single else (tuple(outs), tuple(touts))
    else:
        def rule(primals, tangents):
            raise ValueError(f"soadyn.jax {name}: cannot differentiate: {why}")
    f.defjvp(rule)

    def call(*args):
        return f(*_checked(name, args, in_shapes))

    call.__name__ = name
    how = "differentiable (generated derivatives)" if jac is not None else f"not differentiable: {why}"
    call.__doc__ = (f"{name}({', '.join(n for n, _ in in_shapes)}) of {w.module.module_name} as a JAX "
                    f"function (the generated C through jax.pure_callback); {how}")
    return call


def wrap(module: ModuleType, *, enable_x64: bool = False) -> Wrapped:
    """JAX functions of every public function of ``module`` (see the module docstring).

    ``w.forward_dynamics(q, v, tau, f_ext=None)``, ``w.mass_matrix(q)``, ``w.jacobian(q, frame,
    world_aligned=False)`` (``frame`` a name, static), ...: the module's arguments without ``out=`` and
    ``threads=``; inputs without a batch dimension (batch with ``jax.vmap``)."""
    module_dir(module)
    _check_x64(enable_x64)
    w = Wrapped(module)
    by_api: dict[str, list] = {}
    for cf in c_functions(module):
        by_api.setdefault(cf.api, []).append(cf)
    for api, cfs in by_api.items():
        setattr(w, api, _api_function(w, module, api, cfs))
        w.names.append(api)
    return w


def _api_function(w: Wrapped, module: ModuleType, api: str, cfs: list) -> Callable:
    fn = getattr(module, api)
    cache: dict[Any, Callable] = {}
    plain = next((c for c in cfs if not c.fext), None)
    fext = next((c for c in cfs if c.fext), None)
    family = cfs[0].family

    def get(key: Any, cf: Any, kw: dict) -> Callable:
        g = cache.get(key)
        if g is None:
            ins = list(cf.inputs)
            names = [n for n, _ in ins]

            def bound(*xs, _names=names, _kw=kw):
                return fn(**dict(zip(_names, xs)), **_kw)      # by name: q, v, tau, f_ext, params
            outs = [s for _, s in cf.outputs]
            why = derivative_support(module, api, cf.fext)
            jac = None
            if not why:
                frame = key[0] if family else None
                world = kw.get("world_aligned")

                def jac(*xs, _api=api, _frame=frame, _world=world):
                    y = bound(*xs)
                    return (*(y if isinstance(y, tuple) else (y,)),
                            dense_jacobian(module, _api, xs, _frame, _world, joined=True))
            g = cache[key] = _make(w, api, bound, ins, outs, jac, why)
        return g

    if family:
        def call_family(*args, frame: str, world_aligned: bool = False):
            if frame not in module.frame_ids:
                raise ValueError(f"soadyn.jax {api}: unknown frame {str(frame)[:80]!r}; valid: "
                                 f"{list(module.frame_ids)}")
            kw = {"frame": frame}
            cf = plain
            if any(c.world_aligned is not None for c in cfs):
                kw["world_aligned"] = bool(world_aligned)
                cf = next(c for c in cfs if c.world_aligned == bool(world_aligned))
            return get((frame, kw.get("world_aligned")), cf, kw)(*args)

        params = [n for n, _ in plain.inputs]

        def family_fn(*args, **kw):
            # positional frame / world_aligned like the module: jacobian(q, frame, world_aligned)
            arrays, rest = list(args[:len(params)]), list(args[len(params):])
            if rest:
                kw.setdefault("frame", rest[0])
            if len(rest) > 1:
                kw.setdefault("world_aligned", rest[1])
            if "frame" not in kw:
                raise ValueError(f"soadyn.jax {api}: give a frame (one of {list(module.frame_ids)})")
            return call_family(*arrays, **kw)

        family_fn.__name__ = api
        return family_fn

    def call(*args, f_ext=None):
        if f_ext is None:
            if plain is None:
                raise ValueError(f"soadyn.jax {api}: needs f_ext")
            return get("plain", plain, {})(*args)
        if fext is None:
            raise ValueError(f"soadyn.jax {api}: has no variant with external wrenches f_ext")
        arrays = list(args)
        arrays.insert([n for n, _ in fext.inputs].index("f_ext"), f_ext)    # C order: ..., f_ext, params
        return get("fext", fext, {})(*arrays)

    call.__name__ = api
    try:
        sig = inspect.signature(fn)
        call.__signature__ = sig.replace(   # type: ignore[attr-defined]
            parameters=[p for p in sig.parameters.values() if p.name not in ("out", "threads")])
    except (TypeError, ValueError):  # pragma: no cover
        pass
    return call


def jacobian(w: Wrapped, name: str, *, frame: str | None = None, world_aligned: bool = False,
             f_ext: bool = False) -> Callable:
    """The Jacobian of ``w.<name>`` as a JAX function of the same arrays (``f_ext``: the variant with
    external wrenches, an extra input after the others), what ``jax.jacfwd(f, argnums=<all inputs>)``
    gives: for each input x, ``dy/dx`` of shape ``y.shape + x.shape`` (q raw, nq columns); a tuple of such
    tuples, one per output, when the function has several.  One callback of the generated derivatives, under
    ``jax.jit`` and ``jax.vmap`` (the batched C entry point); unlike ``jax.jacfwd`` it does not multiply the
    Jacobian by the identity basis of the tangents (``n_out (nq + ...)^2`` multiply-adds per state, most of
    a batched ``vmap(jacfwd(f))`` on a free base: ``benchmarks/README.md``).  Not differentiable itself."""
    module = w.module
    cf, _ = find_function(module, name, frame, world_aligned, f_ext)
    why = derivative_support(module, name, cf.fext)
    if why:
        raise ValueError(f"soadyn.jax.jacobian({name!r}): {why}")
    ins = list(cf.inputs)
    outs = [s for _, s in cf.outputs]
    shapes = [s + x for s in outs for _, x in ins]
    world = cf.world_aligned

    def blocks(*xs: np.ndarray) -> tuple[np.ndarray, ...]:
        J = dense_jacobian(module, name, xs, frame, world)       # per input: outputs stacked, row-major
        res, r0 = [], 0
        for s in outs:
            size = int(np.prod(s))
            res += [b[..., r0:r0 + size, :] for b in J]
            r0 += size
        return tuple(res)

    host = _callback(w, name, blocks, ins, shapes)
    types = tuple(jax.ShapeDtypeStruct(s, jnp.float64) for s in shapes)

    def call(*args):
        res = jax.pure_callback(host, types, *_checked(f"jacobian({name!r})", args, ins),
                                vmap_method="broadcast_all")
        per = [tuple(res[k * len(ins):(k + 1) * len(ins)]) for k in range(len(outs))]
        return per[0] if len(outs) == 1 else tuple(per)

    call.__name__ = f"jacobian_{name}"
    call.__doc__ = (f"Jacobian of {name}({', '.join(n for n, _ in ins)}) of {module.module_name} (one block "
                    "per input, q raw) from the generated derivatives")
    return call
