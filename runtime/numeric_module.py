"""A pure-Python stand-in for a generated module: the O(N) algorithms run on floats.

:class:`NumericModule` exposes the same Python API as a module made by ``soadyn.codegen.compile``
(``nq``, ``nv``, ``joint_names``, ``forward_dynamics(q, v, tau, f_ext=None)``, ``momentum(q, v)``,
``jacobian(q, frame, world_aligned=False)``, ...; inputs may carry one leading batch dimension), so the
simulator and the control laws run unchanged on either.  It is slow (interpreted numpy), useful as a
fallback when no C compiler is available and for development.  Extra attributes not in generated
modules: ``robot``, ``gravity`` and ``total_mass``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.robot import Robot, require_free
from soadyn.symbolic import algorithms as alg
from soadyn.symbolic.scalar import NUMERIC


class NumericModule:
    """Module-like adapter around :mod:`soadyn.symbolic.algorithms` with the numeric context."""

    def __init__(self, robot: Robot | str | Path) -> None:
        if not isinstance(robot, Robot):
            from soadyn.symbolic.checks import load_robot

            robot = load_robot(robot)
        self.robot = robot
        self.name = robot.name
        self.base = robot.base
        self.nq = robot.nq
        self.nv = robot.nv
        self.n_bodies = robot.n_bodies
        self.joint_names = list(robot.joint_names)
        self.body_names = list(robot.body_names)
        self.frame_names = list(robot.frame_names)
        self.gravity = np.asarray(robot.gravity, float).copy()
        self.total_mass = robot.total_mass

    # ---- argument handling ------------------------------------------------------------------------
    def _arr(self, x: Any, n: int | tuple[int, ...], what: str, fn: str) -> tuple[np.ndarray, int | None]:
        shape = (n,) if isinstance(n, int) else n
        a = np.asarray(x)
        if a.dtype.kind not in "iuf":
            raise ValueError(f"{fn}: {what} must hold real numbers, got dtype {a.dtype}")
        a = a.astype(float)
        if a.shape == shape:
            return a, None
        if a.ndim == len(shape) + 1 and a.shape[1:] == shape:
            return a, a.shape[0]
        want = ", ".join(str(s) for s in shape)
        raise ValueError(f"{fn}: {what} must have shape ({want}) or (N, {want}), got {a.shape}")

    def _run(self, fn: str, f: Callable[..., Any], args: list[tuple[Any, Any, str]], **kw: Any) -> Any:
        arrays, n = [], None
        for i, (x, shape, what) in enumerate(args):
            a, m = self._arr(x, shape, what, fn)
            if i and m != n:
                raise ValueError(f"{fn}: inputs disagree on the batch dimension")
            n = m
            arrays.append(a)
        if n is None:
            return _as_float(f(self.robot, NUMERIC, *arrays, **kw))
        outs = [_as_float(f(self.robot, NUMERIC, *[a[i] for a in arrays], **kw)) for i in range(n)]
        if isinstance(outs[0], tuple):
            return tuple(np.stack([o[j] for o in outs]) for j in range(len(outs[0])))
        return np.stack(outs)

    def _fext(self, f_ext: Any, fn: str) -> np.ndarray | None:
        if f_ext is None:
            return None
        a, n = self._arr(f_ext, (self.n_bodies, 6), "f_ext", fn)
        if n is not None:
            raise ValueError(f"{fn}: a batch of f_ext is not supported by NumericModule; loop instead")
        return a

    def _frame(self, frame: str, fn: str) -> str:
        if frame not in self.body_names and frame not in self.frame_names:
            raise ValueError(f"{fn}: unknown frame {frame!r}; bodies: {self.body_names}, "
                             f"frames: {self.frame_names}")
        return frame

    # ---- the API of generated modules -----------------------------------------------------------
    def center_of_mass(self, q: Any) -> np.ndarray:
        return self._run("center_of_mass", alg.center_of_mass, [(q, self.nq, "q")])

    def mass_matrix(self, q: Any, *, triangle: str = "full") -> np.ndarray:
        if triangle not in ("full", "upper"):
            raise ValueError(f"mass_matrix: triangle must be 'full' or 'upper', got {triangle!r}")
        M = self._run("mass_matrix", alg.mass_matrix, [(q, self.nq, "q")])
        return np.triu(M) if triangle == "upper" else M

    def bias_forces(self, q: Any, v: Any, f_ext: Any = None) -> np.ndarray:
        return self._run("bias_forces", alg.bias_forces, [(q, self.nq, "q"), (v, self.nv, "v")],
                         f_ext=self._fext(f_ext, "bias_forces"))

    def inverse_dynamics(self, q: Any, v: Any, a: Any, f_ext: Any = None) -> np.ndarray:
        return self._run("inverse_dynamics", alg.inverse_dynamics,
                         [(q, self.nq, "q"), (v, self.nv, "v"), (a, self.nv, "a")],
                         f_ext=self._fext(f_ext, "inverse_dynamics"))

    def forward_dynamics(self, q: Any, v: Any, tau: Any, f_ext: Any = None) -> np.ndarray:
        return self._run("forward_dynamics", alg.forward_dynamics,
                         [(q, self.nq, "q"), (v, self.nv, "v"), (tau, self.nv, "tau")],
                         f_ext=self._fext(f_ext, "forward_dynamics"))

    def mass_matrix_inverse(self, q: Any) -> np.ndarray:
        return self._run("mass_matrix_inverse", alg.mass_matrix_inverse, [(q, self.nq, "q")])

    def momentum(self, q: Any, v: Any) -> np.ndarray:
        return self._run("momentum", alg.momentum, [(q, self.nq, "q"), (v, self.nv, "v")])

    def kinetic_energy(self, q: Any, v: Any) -> np.ndarray:
        return self._run("kinetic_energy", alg.kinetic_energy, [(q, self.nq, "q"), (v, self.nv, "v")])

    def jacobian(self, q: Any, frame: str, world_aligned: bool = False) -> np.ndarray:
        return self._run("jacobian", alg.jacobian, [(q, self.nq, "q")], frame=self._frame(frame, "jacobian"),
                         world_aligned=bool(world_aligned))

    def generalized_jacobian(self, q: Any, frame: str) -> np.ndarray:
        require_free(self, "generalized_jacobian")
        return self._run("generalized_jacobian", alg.generalized_jacobian, [(q, self.nq, "q")],
                         frame=self._frame(frame, "generalized_jacobian"))

    # ---- free-floating toolkit (soadyn.symbolic.algorithms.free_floating) -------------------------
    def base_inertia(self, q: Any) -> np.ndarray:
        require_free(self, "base_inertia")
        return self._run("base_inertia", alg.base_inertia, [(q, self.nq, "q")])

    def coupling_inertia(self, q: Any) -> np.ndarray:
        require_free(self, "coupling_inertia")
        return self._run("coupling_inertia", alg.coupling_inertia, [(q, self.nq, "q")])

    def generalized_inertia(self, q: Any) -> np.ndarray:
        require_free(self, "generalized_inertia")
        return self._run("generalized_inertia", alg.generalized_inertia, [(q, self.nq, "q")])

    def generalized_bias(self, q: Any, v: Any, f_ext: Any = None) -> np.ndarray:
        require_free(self, "generalized_bias")
        return self._run("generalized_bias", alg.generalized_bias, [(q, self.nq, "q"), (v, self.nv, "v")],
                         f_ext=self._fext(f_ext, "generalized_bias"))

    def angular_reduced_dynamics(self, q: Any, v: Any, f_ext: Any = None) -> tuple[np.ndarray, ...]:
        require_free(self, "angular_reduced_dynamics")
        return self._run("angular_reduced_dynamics", alg.angular_reduced_dynamics,
                         [(q, self.nq, "q"), (v, self.nv, "v")],
                         f_ext=self._fext(f_ext, "angular_reduced_dynamics"))

    def coupling_inertia_rate(self, q: Any, qd: Any) -> np.ndarray:
        require_free(self, "coupling_inertia_rate")
        return self._run("coupling_inertia_rate", alg.coupling_inertia_rate,
                         [(q, self.nq, "q"), (qd, self.nv - 6, "qd")])

    def base_velocity(self, q: Any, qd: Any, h: Any) -> np.ndarray:
        require_free(self, "base_velocity")
        return self._run("base_velocity", alg.base_velocity,
                         [(q, self.nq, "q"), (qd, self.nv - 6, "qd"), (h, 6, "h")])

    def momentum_frame_twist(self, q: Any, h: Any, frame: str) -> np.ndarray:
        require_free(self, "momentum_frame_twist")
        return self._run("momentum_frame_twist", alg.momentum_frame_twist, [(q, self.nq, "q"), (h, 6, "h")],
                         frame=self._frame(frame, "momentum_frame_twist"))

    def __repr__(self) -> str:
        return f"NumericModule({self.name!r}, base={self.base!r}, nq={self.nq}, nv={self.nv})"


def _as_float(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(np.asarray(e, dtype=float) for e in x)
    a = np.asarray(x, dtype=float)
    return a[()] if a.ndim == 0 else a
