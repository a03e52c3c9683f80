"""Time simulation of a generated module (or :class:`~soadyn.runtime.numeric_module.NumericModule`).

``simulate(module, q0, v0, duration, torques=..., dt=None)`` integrates ``a = forward_dynamics(q, v, tau)``
(the O(N) articulated-body algorithm of the generated code) with a 4th-order Runge-Kutta-Munthe-Kaas
(RKMK4) step that keeps the base attitude on SO(3):

* The configuration space of a free base is ``R^3 x SO(3) x R^n``.  Over one step the state is written in
  a chart centred at the step's start ``(p0, R0, qj0)``: ``p = p0 + dp``, ``R = R0 Exp(theta)``,
  ``qj = qj0 + dqj``, with the velocity ``v`` itself as the other half of the state.
* In the chart the equations are ordinary ODEs: ``dp/dt = R v_lin`` (``v_lin`` is in base axes),
  ``dqj/dt = qdj`` and ``dtheta/dt = J_r(theta)^-1 w`` where ``w`` is the base angular velocity in base
  axes (``dR/dt = R w~``) and ``J_r^-1(theta) = I + theta~/2 + (1/|theta|^2 - (1 + cos|theta|) /
  (2 |theta| sin|theta|)) theta~^2`` is the inverse right Jacobian of the exponential map (dexp^-1).
* Classical RK4 in the chart, then the quaternion is updated with the exponential map,
  ``quat = quat0 * exp(theta / 2)``, and renormalised (a change at round-off level: the product of
  unit quaternions is a unit quaternion).  The attitude is therefore an exact rotation at every step and
  the method is 4th order (Munthe-Kaas, BIT 1998).

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

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Trajectory", "SimulationError", "simulate", "quat_mul", "quat_exp", "rotation_matrix",
           "rpy_from_matrix", "cmd_simulate", "add_simulate_parser"]


class SimulationError(RuntimeError):
    """The integration failed (non-finite state, bad torque output)."""


# ---- quaternions [x, y, z, w] ---------------------------------------------------------------------------
def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of quaternions stored [x, y, z, w]; ``R(a * b) = R(a) R(b)``."""
    ea, wa, eb, wb = a[:3], a[3], b[:3], b[3]
    return np.concatenate([wa * eb + wb * ea + np.cross(ea, eb), [wa * wb - ea @ eb]])


def quat_exp(theta: np.ndarray) -> np.ndarray:
    """Unit quaternion of the rotation vector ``theta`` (axis * angle): [sin(a/2) axis, cos(a/2)]."""
    a = float(np.linalg.norm(theta))
    if a < 1e-8:
        s = 0.5 - a * a / 48.0
    else:
        s = math.sin(0.5 * a) / a
    return np.concatenate([s * np.asarray(theta, float), [math.cos(0.5 * a)]])


def rotation_matrix(quat: np.ndarray) -> np.ndarray:
    """Base-to-inertial rotation of a quaternion [x, y, z, w] (norm divided out)."""
    x, y, z, w = quat
    n = x * x + y * y + z * z + w * w
    return np.array([[w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z]]) / n


def rpy_from_matrix(R: np.ndarray) -> np.ndarray:
    """URDF roll-pitch-yaw with ``R = Rz(yaw) Ry(pitch) Rx(roll)``."""
    pitch = math.asin(max(-1.0, min(1.0, -R[2, 0])))
    return np.array([math.atan2(R[2, 1], R[2, 2]), pitch, math.atan2(R[1, 0], R[0, 0])])


def _dexpinv_right(theta: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``J_r(theta)^-1 w``: chart velocity of ``R = R0 Exp(theta)`` for the body angular velocity ``w``."""
    a2 = float(theta @ theta)
    tw = np.cross(theta, w)
    if a2 < 1e-8:
        c = 1.0 / 12.0 + a2 / 720.0
    else:
        a = math.sqrt(a2)
        c = 1.0 / a2 - (1.0 + math.cos(a)) / (2.0 * a * math.sin(a))
    return w + 0.5 * tw + c * np.cross(theta, tw)


# ---- trajectory -------------------------------------------------------------------------------------------
@dataclass
class Trajectory:
    """Samples of a simulation.  Arrays have one row per sample time ``t``."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    momentum: np.ndarray          # (N, 6) [angular about the system CoM; linear], inertial axes
    kinetic_energy: np.ndarray    # (N,)
    potential_energy: np.ndarray  # (N,) -m g . com (zero without gravity)
    work: np.ndarray              # (N,) int_0^t tau . v dt
    com: np.ndarray               # (N, 3) system centre of mass, inertial frame
    base_rpy: np.ndarray          # (N, 3) base roll, pitch, yaw (unwrapped); empty columns for a fixed base
    joint_names: list[str] = field(default_factory=list)
    base: str = "free"
    name: str = ""
    dt: float = 0.0

    @property
    def energy(self) -> np.ndarray:
        """Mechanical energy T + V."""
        return self.kinetic_energy + self.potential_energy

    @property
    def base_position(self) -> np.ndarray:
        return self.q[:, :3] if self.base == "free" else np.zeros((len(self.t), 3))

    @property
    def joint_positions(self) -> np.ndarray:
        return self.q[:, 7:] if self.base == "free" else self.q

    def momentum_drift(self) -> np.ndarray:
        """max_t |h(t) - h(0)| per component (6)."""
        return np.max(np.abs(self.momentum - self.momentum[0]), axis=0)

    def energy_balance_error(self) -> float:
        """max_t |(T + V)(t) - (T + V)(0) - W(t)|: zero for exact integration."""
        return float(np.max(np.abs(self.energy - self.energy[0] - self.work)))

    def save(self, path: str | Path) -> Path:
        """Write all arrays and metadata to a ``.npz`` file (suffix added if missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        np.savez(path, t=self.t, q=self.q, v=self.v, tau=self.tau, momentum=self.momentum,
                 kinetic_energy=self.kinetic_energy, potential_energy=self.potential_energy, work=self.work,
                 com=self.com, base_rpy=self.base_rpy, joint_names=np.array(self.joint_names, dtype=str),
                 base=np.array(self.base), name=np.array(self.name), dt=np.array(self.dt),
                 format=np.array("soadyn-trajectory-1"))
        return path

    @classmethod
    def load(cls, path: str | Path) -> Trajectory:
        """Read a file written by :meth:`save`."""
        path = Path(path)
        try:
            d = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: cannot read a trajectory ({e}); expected a .npz written by "
                             "Trajectory.save") from None
        if "format" not in d or str(d["format"]) != "soadyn-trajectory-1":
            raise ValueError(f"{path}: not a soadyn trajectory file (field 'format' missing or unknown); "
                             "write it with Trajectory.save")
        return cls(t=d["t"], q=d["q"], v=d["v"], tau=d["tau"], momentum=d["momentum"],
                   kinetic_energy=d["kinetic_energy"], potential_energy=d["potential_energy"], work=d["work"],
                   com=d["com"], base_rpy=d["base_rpy"], joint_names=[str(s) for s in d["joint_names"]],
                   base=str(d["base"]), name=str(d["name"]), dt=float(d["dt"]))

    def plot(self, path: str | Path | None = None) -> Any:
        """Base position and attitude, joint angles and momentum against time (needs matplotlib)."""
        try:
            import matplotlib

            if path is not None:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:  # pragma: no cover - optional extra
            raise RuntimeError("plotting needs matplotlib: pip install 'soadyn[plot]'") from None
        fig, ax = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
        if self.base == "free":
            for i, lab in enumerate("xyz"):
                ax[0, 0].plot(self.t, self.base_position[:, i], label=lab)
                ax[0, 1].plot(self.t, np.degrees(self.base_rpy[:, i]), label=("roll", "pitch", "yaw")[i])
        ax[0, 0].set_ylabel("base position [m]")
        ax[0, 1].set_ylabel("base attitude [deg]")
        for j, name in enumerate(self.joint_names):
            ax[1, 0].plot(self.t, self.joint_positions[:, j], label=name)
        ax[1, 0].set_ylabel("joint position [rad | m]")
        for i, lab in enumerate(("Lx", "Ly", "Lz", "Px", "Py", "Pz")):
            ax[1, 1].plot(self.t, self.momentum[:, i] - self.momentum[0, i], label=lab)
        ax[1, 1].set_ylabel("momentum - initial [N m s | N s]")
        for a in ax.ravel():
            a.grid(True, alpha=0.3)
            if a.lines:
                a.legend(fontsize=7, ncol=2)
        for a in ax[1]:
            a.set_xlabel("t [s]")
        fig.suptitle(f"{self.name}: simulation, dt = {self.dt:g} s")
        fig.tight_layout()
        if path is not None:
            fig.savefig(path, dpi=110)
            plt.close(fig)
        return fig


# ---- simulation -------------------------------------------------------------------------------------------
def _vector(x: Any, n: int, what: str) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.shape != (n,):
        raise ValueError(f"simulate: {what} must have shape ({n},), got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"simulate: {what} contains NaN or inf")
    return a


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
    needed = ("forward_dynamics", "momentum", "kinetic_energy", "center_of_mass")
    missing = [f for f in needed if not callable(getattr(module, f, None))]
    if missing:
        raise ValueError(f"simulate needs the module functions {list(needed)}; {missing} are missing: "
                         "compile with functions=[...] including them (or all functions)")
    nq, nv = module.nq, module.nv
    q = _vector(q0, nq, "q0").copy()
    v = _vector(v0, nv, "v0").copy()
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
    save_every = int(save_every)
    n_steps = max(1, int(math.ceil(duration / dt - 1e-9)))
    tau_at = _torque_source(module, torques, n_steps, free)
    fext_at = _fext_source(module, f_ext)
    nj = nv - 6 if free else nv

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

    def chart_to_q(qs: np.ndarray, y: np.ndarray) -> np.ndarray:
        if not free:
            return qs + y[:nj]
        out = np.empty(nq)
        out[:3] = qs[:3] + y[3:6]
        out[3:7] = quat_mul(qs[3:7], quat_exp(y[:3]))
        out[7:] = qs[7:] + y[6:6 + nj]
        return out

    def rhs(t: float, qs: np.ndarray, y: np.ndarray, vv: np.ndarray, k: int):
        if not (np.all(np.isfinite(y)) and np.all(np.isfinite(vv))):
            raise SimulationError(f"simulate: the state became NaN/inf at t = {t:.6g} s; reduce dt or "
                                  "check the torques")
        qq = chart_to_q(qs, y)
        a, tau = accel(t, qq, vv, k)
        dy = np.empty_like(y)
        if free:
            w, vl = vv[:3], vv[3:6]
            dy[:3] = _dexpinv_right(y[:3], w)
            dy[3:6] = rotation_matrix(qq[3:7]) @ vl
            dy[6:] = vv[6:]
        else:
            dy[:] = vv
        with np.errstate(all="ignore"):
            power = float(tau @ vv)
        return dy, a, power, tau

    ny = nv  # chart coordinates: theta (3), dp (3), dq (nj) for a free base; dq (nj) for a fixed one
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
            y0 = np.zeros(ny)
            k1, a1, p1, tau1 = rhs(t, q, y0, v, k)
            if k % save_every == 0:
                T[keep], Q[keep], V[keep], TAU[keep], W[keep] = t, q, v, tau1, work
                keep += 1
            k2, a2, p2, _ = rhs(t + 0.5 * h, q, y0 + 0.5 * h * k1, v + 0.5 * h * a1, k)
            k3, a3, p3, _ = rhs(t + 0.5 * h, q, y0 + 0.5 * h * k2, v + 0.5 * h * a2, k)
            k4, a4, p4, _ = rhs(t + h, q, y0 + h * k3, v + h * a3, k)
            y = (h / 6.0) * (k1 + 2 * k2 + 2 * k3 + k4)
            v = v + (h / 6.0) * (a1 + 2 * a2 + 2 * a3 + a4)
            work += (h / 6.0) * (p1 + 2 * p2 + 2 * p3 + p4)
            q = chart_to_q(q, y)
            if free:
                q[3:7] /= np.linalg.norm(q[3:7])
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
        rpy = np.array([rpy_from_matrix(rotation_matrix(qq[3:7])) for qq in Q])
        rpy = np.unwrap(rpy, axis=0)
    else:
        rpy = np.zeros((len(T), 3))
    return Trajectory(T, Q, V, TAU, mom, ke, pe, W, com, rpy, list(module.joint_names),
                      "free" if free else "fixed", str(getattr(module, "name", "")), dt)


# ---- command line ------------------------------------------------------------------------------------------
def add_simulate_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``soadyn simulate`` on a sub-parser collection; sets ``func=cmd_simulate``."""
    p = sub.add_parser(
        "simulate", help="simulate a robot under constant joint torques",
        description="Compile (or load from cache) a robot, integrate its forward dynamics with an SO(3) "
                    "Runge-Kutta-Munthe-Kaas step, save the trajectory (.npz) and optionally plot it.")
    p.add_argument("robot", help="robot file: .yaml/.yml (soadyn format) or .urdf")
    p.add_argument("--base", choices=("free", "fixed"), default=None, help="override the base type")
    p.add_argument("--duration", type=float, required=True, help="simulated time [s]")
    p.add_argument("--dt", type=float, default=1e-3, help="integration step [s] (default 0.001)")
    p.add_argument("--torque", default=None,
                   help="constant generalised forces, comma separated: n_joints values (base unactuated) "
                        "or nv values (free base: base moment, base force, then joints); write "
                        "--torque=-0.5,-0.3 when the first value is negative")
    p.add_argument("--q0", default=None, help="initial configuration, comma separated: nq values or, for a "
                   "free base, n_joints joint values (base at the origin, identity attitude)")
    p.add_argument("--v0", default=None, help="initial velocity, comma separated (nv or n_joints values)")
    p.add_argument("--out", default=None, help="write the trajectory to this .npz file")
    p.add_argument("--plot", default=None,
                   help="write a plot (PNG) of base position/attitude, joints, momentum")
    p.add_argument("--python", action="store_true",
                   help="use the pure-Python algorithms instead of compiling C (slow; no compiler needed)")
    p.add_argument("--cache", default=None, help="directory for compiled modules (default: soadyn's cache)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_simulate)
    return p


def _parse_list(text: str | None, what: str) -> np.ndarray | None:
    if text is None:
        return None
    try:
        vals = [float(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise ValueError(f"--{what}: expected comma-separated numbers, got {text!r}") from None
    return np.array(vals)


def _load_module(args: argparse.Namespace) -> Any:
    from soadyn.model import load_robot
    from soadyn.runtime.numeric_module import NumericModule

    robot = load_robot(args.robot, base=args.base)
    if args.python:
        return NumericModule(robot), robot
    try:
        from soadyn.codegen import compile as compile_robot  # type: ignore[attr-defined]
    except ImportError:
        print("note: soadyn.codegen.compile is not available; using the pure-Python algorithms",
              file=sys.stderr)
        return NumericModule(robot), robot
    kwargs = {} if args.cache is None else {"out_dir": args.cache}
    return compile_robot(robot, **kwargs), robot


def _initial_state(default: np.ndarray, given: np.ndarray | None, flag: str, free: bool,
                   nj: int) -> np.ndarray:
    """``--q0`` / ``--v0``: the full vector, or (free base) the joint values alone on top of ``default``."""
    if given is None:
        return default
    if free and len(given) == nj:
        out = default.copy()
        out[len(default) - nj:] = given
        return out
    if len(given) == len(default):
        return given
    raise ValueError(f"--{flag}: expected {len(default)}" + (f" or {nj}" if free else "")
                     + f" values, got {len(given)}")


def cmd_simulate(args: argparse.Namespace) -> int:
    """``soadyn simulate``: returns the exit code (2 for bad arguments)."""
    try:
        module, robot = _load_module(args)
        free = robot.is_free
        nj = robot.n_joints
        q0 = _initial_state(robot.neutral(), _parse_list(args.q0, "q0"), "q0", free, nj)
        v0 = _initial_state(np.zeros(robot.nv), _parse_list(args.v0, "v0"), "v0", free, nj)
        tau = _parse_list(args.torque, "torque")
        traj = simulate(module, q0, v0, args.duration, torques=tau, dt=args.dt,
                        progress=False if args.no_progress else None, gravity=robot.gravity,
                        total_mass=robot.total_mass)
    except (ValueError, SimulationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    drift = traj.momentum_drift()
    print(f"{robot.name}: simulated {traj.t[-1]:g} s in {len(traj.t) - 1} steps of {args.dt:g} s")
    print(f"  momentum drift (max |h(t) - h(0)|): angular {np.max(drift[:3]):.3e} N m s, "
          f"linear {np.max(drift[3:]):.3e} N s")
    print(f"  energy balance error max |dE - W|: {traj.energy_balance_error():.3e} J")
    if free:
        print(f"  base displacement: {np.array2string(traj.q[-1, :3] - traj.q[0, :3], precision=4)} m; "
              f"CoM drift {np.max(np.linalg.norm(traj.com - traj.com[0], axis=1)):.3e} m")
    if args.out:
        print(f"  trajectory written to {traj.save(args.out)}")
    if args.plot:
        try:
            traj.plot(args.plot)
        except RuntimeError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"  plot written to {args.plot}")
    return 0
