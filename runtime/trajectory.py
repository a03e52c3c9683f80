"""The one result type of soadyn's simulators: :class:`Trajectory`, with ``.npz`` save and load.

:func:`soadyn.runtime.simulate.simulate` fills the physics record (torques, momentum, energies, work, CoM,
base attitude); :func:`soadyn.runtime.closed_loop.simulate` fills the constraint record (position and
velocity error of the cut joints, the partitions used).  Fields a simulator does not record are ``None``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.loops import Partition

__all__ = ["Trajectory", "save_time_plots"]

FORMAT = "soadyn-trajectory-1"
_OPTIONAL = ("tau", "momentum", "kinetic_energy", "potential_energy", "work", "com", "base_rpy",
             "position_error", "velocity_error")


@dataclass
class Trajectory:
    """Samples of a simulation.  Arrays have one row per sample time ``t``."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray | None = None               # (N, nv) generalised forces applied
    momentum: np.ndarray | None = None          # (N, 6) [angular about the system CoM; linear], inertial axes
    kinetic_energy: np.ndarray | None = None    # (N,)
    potential_energy: np.ndarray | None = None  # (N,) -m g . com (zero without gravity)
    work: np.ndarray | None = None              # (N,) int_0^t tau . v dt
    com: np.ndarray | None = None               # (N, 3) system centre of mass, inertial frame
    base_rpy: np.ndarray | None = None          # (N, 3) base roll, pitch, yaw (unwrapped); zeros: fixed base
    position_error: np.ndarray | None = None    # (N,) closed loop: max |g(q)|
    velocity_error: np.ndarray | None = None    # (N,) closed loop: max |J_c v|
    partitions: list[Partition] = field(default_factory=list)  # closed loop: partitions used, in order
    joint_names: list[str] = field(default_factory=list)
    base: str = "free"
    name: str = ""
    dt: float = 0.0

    def _need(self, what: str) -> np.ndarray:
        x = getattr(self, what)
        if x is None:
            raise ValueError(f"this trajectory has no {what!r} samples: soadyn.simulate(module, ...) records "
                             "them; the closed-loop simulator records constraint errors only")
        return x

    @property
    def energy(self) -> np.ndarray:
        """Mechanical energy T + V."""
        return self._need("kinetic_energy") + self._need("potential_energy")

    @property
    def base_position(self) -> np.ndarray:
        return self.q[:, :3] if self.base == "free" else np.zeros((len(self.t), 3))

    @property
    def joint_positions(self) -> np.ndarray:
        return self.q[:, 7:] if self.base == "free" else self.q

    def momentum_drift(self) -> np.ndarray:
        """max_t |h(t) - h(0)| per component (6)."""
        h = self._need("momentum")
        return np.max(np.abs(h - h[0]), axis=0)

    def energy_balance_error(self) -> float:
        """max_t |(T + V)(t) - (T + V)(0) - W(t)|: zero for exact integration."""
        return float(np.max(np.abs(self.energy - self.energy[0] - self._need("work"))))

    def save(self, path: str | Path) -> Path:
        """Write all arrays and metadata to a ``.npz`` file (suffix added if missing)."""
        path = Path(path)
        if path.suffix != ".npz":
            path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
        arrays = {k: getattr(self, k) for k in _OPTIONAL if getattr(self, k) is not None}
        parts = [[list(p.dependent), list(p.independent), list(p.names), p.rows and list(p.rows)]
                 for p in self.partitions]
        np.savez(path, t=self.t, q=self.q, v=self.v, **arrays, partitions=np.array(json.dumps(parts)),
                 joint_names=np.array(self.joint_names, dtype=str), base=np.array(self.base),
                 name=np.array(self.name), dt=np.array(self.dt), format=np.array(FORMAT))
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
        if "format" not in d or str(d["format"]) != FORMAT:
            raise ValueError(f"{path}: not a soadyn trajectory file (field 'format' missing or unknown); "
                             "write it with Trajectory.save")
        parts = json.loads(str(d["partitions"])) if "partitions" in d else []
        return cls(t=d["t"], q=d["q"], v=d["v"], **{k: d[k] for k in _OPTIONAL if k in d},
                   partitions=[Partition(tuple(a), tuple(b), tuple(n), None if r is None else tuple(r))
                               for a, b, n, r in parts],
                   joint_names=[str(s) for s in d["joint_names"]], base=str(d["base"]), name=str(d["name"]),
                   dt=float(d["dt"]))

    def plot(self, path: str | Path | None = None) -> Any:
        """Base position and attitude, joint positions and momentum (or, for a closed-loop run, the
        constraint errors) against time (needs matplotlib)."""
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
            if self.base_rpy is not None:
                for i, lab in enumerate(("roll", "pitch", "yaw")):
                    ax[0, 1].plot(self.t, np.degrees(self.base_rpy[:, i]), label=lab)
        ax[0, 0].set_ylabel("base position [m]")
        ax[0, 1].set_ylabel("base attitude [deg]")
        names = self.joint_names or [f"q{j}" for j in range(self.joint_positions.shape[1])]
        for j, name in enumerate(names):
            ax[1, 0].plot(self.t, self.joint_positions[:, j], label=name)
        ax[1, 0].set_ylabel("joint position [rad | m]")
        if self.momentum is not None:
            for i, lab in enumerate(("Lx", "Ly", "Lz", "Px", "Py", "Pz")):
                ax[1, 1].plot(self.t, self.momentum[:, i] - self.momentum[0, i], label=lab)
            ax[1, 1].set_ylabel("momentum - initial [N m s | N s]")
        elif self.position_error is not None and self.velocity_error is not None:
            ax[1, 1].semilogy(self.t, np.maximum(self.position_error, 1e-18), label="max |g(q)|")
            ax[1, 1].semilogy(self.t, np.maximum(self.velocity_error, 1e-18), label="max |J_c v|")
            ax[1, 1].set_ylabel("constraint violation")
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


def save_time_plots(fig: Any, axes: Any, path: str | Path, dpi: int = 110) -> None:
    """Finish a figure of time histories (x label ``t [s]`` and a light grid on every axis), write it to
    ``path`` and close it (the example scripts' plots)."""
    import matplotlib.pyplot as plt

    for a in np.ravel(axes):
        a.set_xlabel("t [s]")
        a.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
