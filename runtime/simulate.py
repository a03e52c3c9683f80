"""Time simulation of a generated module (or :class:`~soadyn.runtime.numeric_module.NumericModule`).

``simulate(module, q0, v0, duration, torques=..., dt=None)`` integrates ``a = forward_dynamics(q, v, tau)``
(the O(N) articulated-body algorithm of the generated code) with the 4th-order Runge-Kutta-Munthe-Kaas
step of :mod:`soadyn.runtime.integrate` (RKMK4), which keeps the base attitude on SO(3) and carries the
velocity and the work integral as the rest of the state.

Torques: ``None`` (zero), a constant array (nv entries, or n_joints entries for a free base whose base is
then unactuated), an array of shape ``(n_steps, nv | n_joints)`` held constant over each step, a function
``f(t, q, v) -> tau``, or a controller object with a ``torque(t, q, v)`` method (see
:mod:`soadyn.runtime.control`).  Functions and controllers are evaluated at every Runge-Kutta stage.

The result is a :class:`Trajectory` with time, q, v, the applied torques, the total momentum
(``[angular about the system CoM; linear]``, inertial axes), kinetic / potential energy, the work done by
the generalised forces ``W = int tau . v dt`` (integrated with the same RK4 stages, so that
``T + V - W`` is conserved to the integrator's tolerance), the system CoM and the base attitude as
roll-pitch-yaw (URDF convention, unwrapped).  It saves to and loads from ``.npz``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from soadyn.model.robot import state_vector
from soadyn.model.rotations import matrix_to_rpy, quaternion_to_matrix
from soadyn.runtime.integrate import rk4_step
from soadyn.runtime.trajectory import Trajectory

__all__ = ["Trajectory", "SimulationError", "simulate"]


class SimulationError(RuntimeError):
    """The integration failed (non-finite state, bad torque output)."""


# ---- simulation -------------------------------------------------------------------------------------------
def _torque_source(module: Any, torques: Any, n_steps: int, free: bool) -> Callable[..., np.ndarray]:
    nv = module.nv
    nj = nv - 6 if free else nv

    def pad(tau: np.ndarray, what: str) -> np.ndarray:
        tau = np.asarray(tau, dtype=float)
        if tau.shape == (nv,):
            return tau
        if free and tau.shape == (nj,):
            return np.concatenate([np.zeros(6), tau])
        want = f"({nv},)" + (f" or ({nj},) (joint torques, base unactuated)" if free else "")
        raise ValueError(f"simulate: {what} must have shape {want}, got {tau.shape}")

    if torques is None:
        zero = np.zeros(nv)
        return lambda t, q, v, k: zero
    if hasattr(torques, "torque") and callable(torques.torque):
        ctrl = torques
        return lambda t, q, v, k: pad(ctrl.torque(t, q, v), "the controller's torque(t, q, v)")
    if callable(torques):
        fn = torques
        return lambda t, q, v, k: pad(fn(t, q, v), "torques(t, q, v)")
    arr = np.asarray(torques, dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("simulate: torques contain NaN or inf")
    if arr.ndim <= 1:
        const = pad(arr, "torques")
        return lambda t, q, v, k: const
    if arr.ndim == 2 and arr.shape[0] >= n_steps:
        series = np.stack([pad(row, "torques[k]") for row in arr])
        return lambda t, q, v, k: series[min(k, len(series) - 1)]
    raise ValueError(f"simulate: a torque series must have shape (n_steps >= {n_steps}, {nv} or {nj}), "
                     f"got {arr.shape}")


def _fext_source(module: Any, f_ext: Any) -> Callable[..., np.ndarray | None]:
    if f_ext is None:
        return lambda t, q, v: None
    if callable(f_ext):
        return f_ext
    arr = np.asarray(f_ext, dtype=float)
    nb = getattr(module, "n_bodies", len(getattr(module, "body_names", [])))
    if arr.shape != (nb, 6) or not np.all(np.isfinite(arr)):
        raise ValueError(f"simulate: f_ext must be a finite ({nb}, 6) array of [moment; force] per body")
    return lambda t, q, v: arr


def _checked_inputs(module: Any, free: bool, q0: Any, v0: Any, duration: float, dt: float | None,
                    save_every: int) -> tuple[np.ndarray, np.ndarray, float, float, int]:
    """The arguments of :func:`simulate` checked (one clear error line each), q0's quaternion normalised."""
    needed = ("forward_dynamics", "momentum", "kinetic_energy", "center_of_mass")
    missing = [f for f in needed if not callable(getattr(module, f, None))]
    if missing:
        raise ValueError(f"simulate needs the module functions {list(needed)}; {missing} are missing: "
                         "compile with functions=[...] including them (or all functions)")
    nq, nv = module.nq, module.nv
    q = state_vector(q0, nq, "q0", "simulate").copy()
    v = state_vector(v0, nv, "v0", "simulate").copy()
    if free:
        nrm = float(np.linalg.norm(q[3:7]))
        if nrm == 0.0:
            raise ValueError("simulate: q0[3:7] (base quaternion [x, y, z, w]) is zero; "
                             "use e.g. [0, 0, 0, 1]")
        q[3:7] /= nrm
    duration = float(duration)
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"simulate: duration must be a positive number of seconds, got {duration}")
    dt = 1e-3 if dt is None else float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"simulate: dt must be a positive number of seconds, got {dt}")
    if int(save_every) < 1:
        raise ValueError(f"simulate: save_every must be >= 1, got {save_every}")
    return q, v, duration, dt, int(save_every)


def simulate(module: Any, q0: Any, v0: Any, duration: float, torques: Any = None, dt: float | None = None,
             f_ext: Any = None, save_every: int = 1, progress: bool | None = None,
             gravity: Sequence[float] | None = None, total_mass: float | None = None) -> Trajectory:
    """Integrate the forward dynamics of ``module`` from ``(q0, v0)`` for ``duration`` seconds (RKMK4).

    ``module``: a generated module or :class:`~soadyn.runtime.numeric_module.NumericModule`.
    ``torques``: see the module docstring.  ``dt``: step (default 1 ms; the last step is shortened to end
    exactly at ``duration``).  ``f_ext``: None, an ``(n_bodies, 6)`` array or ``f(t, q, v)``.
    ``save_every``: keep every k-th step.  ``progress``: tqdm bar (default: on for >= 20000 steps on a
    terminal).  ``gravity`` / ``total_mass``: for the potential energy when the module does not carry them.
    """
    free = getattr(module, "base", "free") == "free"
    q, v, duration, dt, save_every = _checked_inputs(module, free, q0, v0, duration, dt, save_every)
    nq, nv = module.nq, module.nv
    n_steps = max(1, int(math.ceil(duration / dt - 1e-9)))
    tau_at = _torque_source(module, torques, n_steps, free)
    fext_at = _fext_source(module, f_ext)

    def accel(t: float, qq: np.ndarray, vv: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        tau = tau_at(t, qq, vv, k)
        fe = fext_at(t, qq, vv)
        with np.errstate(all="ignore"):
            a = (module.forward_dynamics(qq, vv, tau) if fe is None
                 else module.forward_dynamics(qq, vv, tau, fe))
        a = np.asarray(a, dtype=float)
        if not (np.all(np.isfinite(a)) and np.all(np.isfinite(tau)) and np.all(np.isfinite(vv))):
            raise SimulationError(f"simulate: the state became NaN/inf at t = {t:.6g} s; reduce dt or check "
                                  "the torques")
        return a, tau

    def rates(t: float, qq: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x = [v; work]: the velocity moves q, its rates are [a; tau . v] (k: the current step)."""
        a, tau = accel(t, qq, x[:nv], k)
        with np.errstate(all="ignore"):
            power = float(tau @ x[:nv])
        return x[:nv], np.append(a, power)

    n_keep = n_steps // save_every + 1 + (1 if n_steps % save_every else 0)
    T = np.empty(n_keep)
    Q = np.empty((n_keep, nq))
    V = np.empty((n_keep, nv))
    TAU = np.empty((n_keep, nv))
    W = np.empty(n_keep)
    work = 0.0
    t = 0.0
    keep = 0
    bar = None
    if progress is None:
        progress = n_steps >= 20000 and sys.stderr.isatty()
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=n_steps, desc="simulate", unit="step", leave=False)
    try:
        for k in range(n_steps):
            h = min(dt, duration - t) if k == n_steps - 1 else dt
            a1, tau1 = accel(t, q, v, k)
            if k % save_every == 0:
                T[keep], Q[keep], V[keep], TAU[keep], W[keep] = t, q, v, tau1, work
                keep += 1
            with np.errstate(all="ignore"):
                k1 = (v, np.append(a1, float(tau1 @ v)))
            q, x = rk4_step(rates, t, q, np.append(v, work), h, free, k1)
            v, work = x[:nv], float(x[nv])
            t = duration if k == n_steps - 1 else (k + 1) * dt
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v))):
                raise SimulationError(f"simulate: the state became NaN/inf at t = {t:.6g} s (step {k + 1}); "
                                      "reduce dt or check the torques")
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    _, tau_end = accel(t, q, v, n_steps - 1)
    T[keep], Q[keep], V[keep], TAU[keep], W[keep] = t, q, v, tau_end, work
    keep += 1
    T, Q, V, TAU, W = T[:keep], Q[:keep], V[:keep], TAU[:keep], W[:keep]
    return _finish(module, T, Q, V, TAU, W, free, dt, gravity, total_mass)


def _finish(module: Any, T: np.ndarray, Q: np.ndarray, V: np.ndarray, TAU: np.ndarray, W: np.ndarray,
            free: bool, dt: float, gravity: Sequence[float] | None, total_mass: float | None) -> Trajectory:
    mom = np.asarray(module.momentum(Q, V), dtype=float).reshape(len(T), 6)
    ke = np.asarray(module.kinetic_energy(Q, V), dtype=float).reshape(len(T))
    com = np.asarray(module.center_of_mass(Q), dtype=float).reshape(len(T), 3)
    g = gravity if gravity is not None else getattr(module, "gravity", None)
    pe = np.zeros(len(T))
    if g is not None and np.any(np.asarray(g, float)):
        m = total_mass if total_mass is not None else getattr(module, "total_mass", None)
        if m is None and free:
            m = float(np.asarray(module.mass_matrix(Q[0]))[3, 3])     # the free base's linear block is m I
        if m is None:
            raise ValueError("simulate: the module has gravity but no total mass; pass total_mass=")
        pe = -float(m) * com @ np.asarray(g, float)
    if free:
        rpy = np.array([matrix_to_rpy(quaternion_to_matrix(qq[3:7])) for qq in Q])
        rpy = np.unwrap(rpy, axis=0)
    else:
        rpy = np.zeros((len(T), 3))
    return Trajectory(T, Q, V, tau=TAU, momentum=mom, kinetic_energy=ke, potential_energy=pe, work=W, com=com,
                      base_rpy=rpy, joint_names=list(module.joint_names), base="free" if free else "fixed",
                      name=str(getattr(module, "name", "")), dt=dt)
