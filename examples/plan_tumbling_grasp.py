#!/usr/bin/env python3
"""Plan the approach of the hand to a grasp point on a tumbling target, with derivatives from the generated
C (seed 004 section IV and Fig. 8: approach and track a tumbling target before the grasp, the base attitude
disturbance penalised; seed 003 ch. 4), solved twice: direct multiple shooting with IPOPT in
``casadi.Opti``, and single shooting with SciPy's SLSQP.

Robot: ``examples/dimitrov_7dof_rw.yaml`` (7-DOF arm and three reaction wheels on a 1000 kg free-floating
base, no gravity), starting at rest at the thesis's phi(t0) = [-10, 20, 25, -35, -160, 30, 20] deg.

Target: a rigid body tumbling torque-free, axisymmetric, so its attitude is precession, nutation and spin,
``R_t(t) = Rz(precession t) Rx(nutation) Rz(spin t)``; the grasp point is fixed on the body, starts at
r_g = [1.8, -1.8, 1.7] m (the thesis's point, 0.70 m from the hand) and moves with it.

Problem (N steps of length h, semi-implicit Euler on the configuration manifold ``v+ = v + h a(q, v, tau)``,
``q+ = q (+) h v+`` (docs/conventions.md: base attitude ``R Exp(h w)``, position ``p + R h v_o``), base
unactuated, tau = [0 (6); u_k] with u the joint and wheel torques)::

    minimise   sum_k h (w_rate |w_base,k+1|^2 + w_tau |u_k|^2)      (base attitude disturbance, effort)
    subject to hand position = grasp point, hand twist = grasp point's twist at t = T   (9 equations)
               arm joint angles within +-170 deg at every node

* **IPOPT, direct multiple shooting** (``solve_ipopt``): the states ``(q_k, v_k)`` of every node are
  variables too, tied by the step equations (defect constraints).  ``forward_dynamics``, ``frame_pose``
  and ``frame_twist`` are the generated C through :mod:`soadyn.casadi` (CasADi external functions), whose
  Jacobians are the generated ones (``forward_dynamics_derivatives``; the frame Jacobian and
  ``frame_acceleration_derivatives``) with respect to the raw q; CasADi differentiates the step map
  (quaternion exponential) itself.  The externals have first derivatives only, so the Hessian of the
  Lagrangian is CasADi's finite differences of those exact Jacobians (``enable_fd`` on the externals,
  asked for explicitly here); ``--hessian limited-memory`` uses IPOPT's quasi-Newton approximation
  instead (it needs many more iterations on this problem and may stop at its iteration limit).
* **SciPy SLSQP, single shooting** (``Planner.solve``): the torques only; the gradients come from a forward
  sensitivity sweep driven by ``forward_dynamics_derivatives`` (da/dq along ``q (+) delta``, da/dv,
  da/dtau) and ``frame_acceleration_derivatives`` / ``jacobian`` (hand twist and position), with the
  exact tangent map of ``q (+) h v`` (SO(3) right Jacobian for the base attitude); optionally once more
  with SciPy's finite-difference gradients.

Both print the iterations, the solve time and the final constraint violation of their plan, measured the
same way: the plan's torques simulated again with the module (single shooting), then the largest
violation of the terminal equations and of the joint limits.

Usage::

    python examples/plan_tumbling_grasp.py [--steps 8] [--horizon 8] [--plot plan.png] [--no-fd]
                                           [--method both|ipopt|scipy]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from soadyn import load_robot
from soadyn.codegen import compile as soadyn_compile
from soadyn.model.configuration import retract

HERE = Path(__file__).resolve().parent
ROBOT = HERE / "dimitrov_7dof_rw.yaml"
HAND = "ee"
PHI0_DEG = [-10, 20, 25, -35, -160, 30, 20]
ARM_LIMIT = np.deg2rad(170.0)
W_RATE, W_TAU = 1e4, 1e-2
#: generated functions the planners use (frame_pose is built by default, the others on request)
FUNCTIONS = ["forward_dynamics", "forward_dynamics_derivatives", "frame_acceleration_derivatives", "jacobian",
             "frame_pose", "frame_twist"]
#: torque unit of the optimisation variables (N m): the solver sees U / TORQUE_SCALE
TORQUE_SCALE = 10.0


def _skew(x: np.ndarray) -> np.ndarray:
    return np.array([[0, -x[2], x[1]], [x[2], 0, -x[0]], [-x[1], x[0], 0]])


def _exp(phi: np.ndarray) -> np.ndarray:
    th = np.linalg.norm(phi)
    K = _skew(phi)
    if th < 1e-12:
        return np.eye(3) + K
    return np.eye(3) + np.sin(th) / th * K + (1 - np.cos(th)) / th**2 * K @ K


def _right_jacobian(phi: np.ndarray) -> np.ndarray:
    """Jr with Exp(phi + d) = Exp(phi) Exp(Jr d) to first order."""
    th = np.linalg.norm(phi)
    K = _skew(phi)
    if th < 1e-8:
        return np.eye(3) - 0.5 * K
    return np.eye(3) - (1 - np.cos(th)) / th**2 * K + (th - np.sin(th)) / th**3 * K @ K


def step(q: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``q (+) delta`` (docs/conventions.md): attitude ``R Exp(delta_w)``, position ``p + R delta_v``."""
    return retract(q, delta, True)


class Target:
    """Torque-free axisymmetric tumbling: precession about inertial z, constant nutation, spin."""

    def __init__(self, grasp0: np.ndarray, precession: float = 0.06, nutation: float = 0.35,
                 spin: float = 0.10, radius: float = 0.5) -> None:
        self.wp, self.th, self.ws = precession, nutation, spin
        d = grasp0 / np.linalg.norm(grasp0)
        self.centre = grasp0 + radius * d          # the grasp point on the side facing the robot
        self.r_body = self.attitude(0.0).T @ (grasp0 - self.centre)

    def attitude(self, t: float) -> np.ndarray:
        def rz(a):
            return np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])

        def rx(a):
            return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])

        return rz(self.wp * t) @ rx(self.th) @ rz(self.ws * t)

    def omega(self, t: float) -> np.ndarray:
        """Inertial angular velocity: precession about z plus spin about the body z axis."""
        return np.array([0, 0, self.wp]) + self.attitude(t)[:, 2] * self.ws

    def grasp(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(position, twist [w; v]) of the grasp point, inertial axes."""
        r = self.attitude(t) @ self.r_body
        w = self.omega(t)
        return self.centre + r, np.concatenate([w, np.cross(w, r)])


class Planner:
    def __init__(self, mod, robot, target: Target, steps: int, horizon: float) -> None:
        self.mod, self.robot, self.target = mod, robot, target
        self.N, self.h = steps, horizon / steps
        self.nv, self.nj = robot.nv, robot.n_joints
        q0 = robot.neutral()
        q0[7:14] = np.deg2rad(PHI0_DEG)
        self.q0, self.v0 = q0, np.zeros(robot.nv)
        self.arm = np.arange(6, 13)                 # tangent indices of the 7 arm joints
        self.n_u = steps * self.nj
        self._cache: dict = {}
        self.calls = {"rollouts": 0, "sensitivities": 0}

    def rollout(self, U: np.ndarray, grad: bool) -> dict:
        key = (U.tobytes(), grad)
        if key in self._cache:
            return self._cache[key]
        if not grad and (U.tobytes(), True) in self._cache:
            return self._cache[(U.tobytes(), True)]
        self.calls["sensitivities" if grad else "rollouts"] += 1
        mod, N, h, nv, nj = self.mod, self.N, self.h, self.nv, self.nj
        U = U.reshape(N, nj)
        q, v = self.q0.copy(), self.v0.copy()
        S = np.zeros((2 * nv, self.n_u)) if grad else None    # d[delta; dv]/dU
        cost, dcost = 0.0, np.zeros(self.n_u)
        limits, dlimits = [], []
        traj = [(q, v)]
        for k in range(N):
            tau = np.concatenate([np.zeros(6), U[k]])
            if grad:
                Aq, Av, At = mod.forward_dynamics_derivatives(q, v, tau)
            a = mod.forward_dynamics(q, v, tau)
            v1 = v + h * a
            q1 = step(q, h * v1)
            if grad:
                dq, dv = S[:nv], S[nv:]
                dv1 = dv + h * (Aq @ dq + Av @ dv)
                dv1[:, k * nj:(k + 1) * nj] += h * At[:, 6:]
                w1, vo1 = h * v1[0:3], h * v1[3:6]
                E = _exp(w1)
                dq1 = np.empty_like(dq)
                dq1[0:3] = E.T @ dq[0:3] + _right_jacobian(w1) @ (h * dv1[0:3])
                dq1[3:6] = E.T @ (dq[3:6] - _skew(vo1) @ dq[0:3] + h * dv1[3:6])
                dq1[6:] = dq[6:] + h * dv1[6:]
                S = np.vstack([dq1, dv1])
            q, v = q1, v1
            traj.append((q, v))
            cost += h * (W_RATE * v[0:3] @ v[0:3] + W_TAU * U[k] @ U[k])
            if grad:
                dcost += h * W_RATE * 2 * v[0:3] @ S[nv:nv + 3]
                dcost[k * nj:(k + 1) * nj] += h * W_TAU * 2 * U[k]
            th = q[7:14]
            limits.append(np.concatenate([ARM_LIMIT - th, ARM_LIMIT + th]))
            if grad:
                dlimits.append(np.vstack([-S[self.arm], S[self.arm]]))
        T = N * h
        g, Vg = self.target.grasp(T)
        _, p = mod.frame_pose(q, HAND)
        Vf, _, dVf_dq, _, _ = mod.frame_acceleration_derivatives(q, v, np.zeros(nv), HAND)
        eq = np.concatenate([p - g, Vf - Vg])
        out = {"cost": cost, "eq": eq, "ineq": np.concatenate(limits), "traj": traj}
        if grad:
            Jw = mod.jacobian(q, HAND, world_aligned=True)
            dq, dv = S[:nv], S[nv:]
            out["dcost"] = dcost
            out["deq"] = np.vstack([Jw[3:6] @ dq, dVf_dq @ dq + Jw @ dv])
            out["dineq"] = np.vstack(dlimits)
        self._cache = {key: out}
        return out

    def solve(self, gradients: bool, U0: np.ndarray, tol: float = 1e-10, maxiter: int = 400):
        """SLSQP over z = U / TORQUE_SCALE; generated (sensitivity) gradients or SciPy's finite differences.
        Returns (result with x in N m, seconds)."""
        s = TORQUE_SCALE

        def r(z):
            return self.rollout(z * s, gradients)

        cons = [{"type": "eq", "fun": lambda z: r(z)["eq"]}, {"type": "ineq", "fun": lambda z: r(z)["ineq"]}]
        kw = {}
        if gradients:
            kw["jac"] = lambda z: r(z)["dcost"] * s
            cons[0]["jac"] = lambda z: r(z)["deq"] * s
            cons[1]["jac"] = lambda z: r(z)["dineq"] * s
        t0 = time.perf_counter()
        res = minimize(lambda z: r(z)["cost"], U0 / s, method="SLSQP", constraints=cons,
                       options={"ftol": tol, "maxiter": maxiter}, **kw)
        res.x = res.x * s
        return res, time.perf_counter() - t0


def check_gradients(planner: Planner, U: np.ndarray) -> float:
    """Worst relative difference of the sensitivity gradients from central differences of the rollout."""
    r = planner.rollout(U, True)
    G = np.vstack([r["dcost"][None], r["deq"], r["dineq"]])
    cols = np.random.default_rng(0).choice(len(U), size=min(8, len(U)), replace=False)
    worst = 0.0
    for i in cols:
        e = np.zeros(len(U))
        e[i] = 1e-5
        rp, rm = planner.rollout(U + e, False), planner.rollout(U - e, False)
        num = np.concatenate([[rp["cost"] - rm["cost"]], rp["eq"] - rm["eq"], rp["ineq"] - rm["ineq"]]) / 2e-5
        worst = max(worst, float(np.max(np.abs(num - G[:, i])) / max(1e-9, np.max(np.abs(G[:, i])))))
    return worst


def violation(planner: Planner, U: np.ndarray) -> float:
    """Largest constraint violation of a plan: its torques simulated again with the module (single
    shooting), then the terminal equations (m, m/s, rad/s) and the joint limits (rad)."""
    r = planner.rollout(np.asarray(U, dtype=float).ravel(), False)
    return float(max(np.abs(r["eq"]).max(), max(0.0, -r["ineq"].min())))


def _casadi_step(ca, q, delta):
    """``q (+) delta`` in CasADi symbols: ``quat Exp(delta_w / 2)``, ``p + R delta_v``; the sinc form of the
    quaternion exponential stays smooth at delta_w = 0 (the initial guess)."""
    dw, dv = delta[0:3], delta[3:6]
    th2 = ca.dot(dw, dw)
    th = ca.sqrt(th2 + 1e-30)
    s = ca.if_else(th2 < 1e-10, 0.5 - th2 / 48, ca.sin(th / 2) / th)
    e = q[3:6]
    w = q[6]
    de, dw0 = s * dw, ca.cos(th / 2)
    quat = ca.vertcat(w * de + dw0 * e + ca.cross(e, de), w * dw0 - ca.dot(e, de))
    x, y, z = e[0], e[1], e[2]
    n2 = ca.dot(q[3:7], q[3:7])
    R = ca.vertcat(
        ca.horzcat(w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)),
        ca.horzcat(2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)),
        ca.horzcat(2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z)) / n2
    return ca.vertcat(q[0:3] + R @ dv, quat, q[7:] + delta[6:])


def solve_ipopt(planner: Planner, tol: float = 1e-8, max_iter: int = 500, print_level: int = 0,
                hessian: str = "exact", options: dict | None = None):
    """Direct multiple shooting in ``casadi.Opti`` with IPOPT (module docstring); returns (torques (N, nj),
    seconds, IPOPT statistics)."""
    import casadi as ca

    import soadyn.casadi as sc

    mod, N, h, nj = planner.mod, planner.N, planner.h, planner.nj
    nq, nv = mod.nq, mod.nv
    ext = {"enable_fd": True, "der_options": {"enable_fd": True}} if hessian == "exact" else {}
    fd = sc.function(mod, "forward_dynamics", options=ext)
    pose = sc.function(mod, "frame_pose", frame=HAND, options=ext)
    twist = sc.function(mod, "frame_twist", frame=HAND, options=ext)
    opti = ca.Opti()
    Q, V = opti.variable(nq, N + 1), opti.variable(nv, N + 1)
    Z = opti.variable(nj, N)                      # torques / TORQUE_SCALE
    opti.subject_to(Q[:, 0] == planner.q0)
    opti.subject_to(V[:, 0] == planner.v0)
    cost = 0
    for k in range(N):
        u = TORQUE_SCALE * Z[:, k]
        a = fd(Q[:, k], V[:, k], ca.vertcat(ca.DM.zeros(6), u))
        opti.subject_to(V[:, k + 1] == V[:, k] + h * a)
        opti.subject_to(Q[:, k + 1] == _casadi_step(ca, Q[:, k], h * V[:, k + 1]))
        opti.subject_to(opti.bounded(-ARM_LIMIT, Q[7:14, k + 1], ARM_LIMIT))
        cost += h * (W_RATE * ca.sumsqr(V[0:3, k + 1]) + W_TAU * ca.sumsqr(u))
    g, Vg = planner.target.grasp(N * h)
    _, p = pose(Q[:, N])
    opti.subject_to(p == g)
    opti.subject_to(twist(Q[:, N], V[:, N]) == Vg)
    opti.minimize(cost)
    opti.set_initial(Q, np.tile(planner.q0[:, None], (1, N + 1)))
    opti.set_initial(V, 0)
    opti.set_initial(Z, 0)
    opti.solver("ipopt", {"print_time": False},
                {"tol": tol, "max_iter": max_iter, "print_level": print_level,
                 "hessian_approximation": hessian, "sb": "yes", **(options or {})})
    t0 = time.perf_counter()
    try:
        sol = opti.solve()
        Zs, stats = sol.value(Z), sol.stats()
    except RuntimeError:                          # not converged: report what IPOPT reached
        Zs, stats = opti.debug.value(Z), opti.stats()
    return TORQUE_SCALE * np.asarray(Zs).T.reshape(N, nj), time.perf_counter() - t0, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--horizon", type=float, default=8.0, help="seconds")
    ap.add_argument("--out", default=str(HERE.parent / "generated"), help="module directory")
    ap.add_argument("--plot", metavar="PNG", help="save a plot of the plans")
    ap.add_argument("--method", choices=("both", "ipopt", "scipy"), default="both")
    ap.add_argument("--no-fd", action="store_true", help="skip the finite-difference-gradient SciPy solve")
    ap.add_argument("--hessian", choices=("exact", "limited-memory"), default="exact",
                    help="IPOPT's Hessian: differences of the exact Jacobians, or quasi-Newton")
    args = ap.parse_args(argv)

    robot = load_robot(ROBOT)
    mod = soadyn_compile(robot, args.out, functions=FUNCTIONS, progress=False)
    planner = Planner(mod, robot, Target(np.array([1.8, -1.8, 1.7])), args.steps, args.horizon)
    U0 = np.zeros(planner.n_u)
    print(f"robot {robot.name}: nv = {robot.nv}, {planner.N} steps of {planner.h:.3f} s, "
          f"{planner.n_u} torque variables")
    plans = {}
    ok = True
    head = f"{'method':44s} {'time [s]':>9s} {'iterations':>10s} {'objective':>17s} {'violation':>9s}"
    rows = []
    if args.method in ("both", "ipopt"):
        U, t_i, st = solve_ipopt(planner, hessian=args.hessian)
        plans["IPOPT, multiple shooting"] = U.ravel()
        conv = st.get("return_status", "?")
        ok &= bool(st.get("success", False))
        cost = planner.rollout(U.ravel(), False)["cost"]
        rows.append(f"{'IPOPT multiple shooting, generated Jacobians':44s} {t_i:9.2f} {st['iter_count']:10d} "
                    f"{cost:17.10e} {violation(planner, U):9.1e}  ({conv})")
    if args.method in ("both", "scipy"):
        print(f"gradient check (sensitivities vs central differences of the rollout): "
              f"{check_gradients(planner, U0 + 0.1):.1e} relative")
        res_g, t_g = planner.solve(True, U0)
        plans["SLSQP, single shooting"] = res_g.x
        ok &= bool(res_g.success)
        rows.append(f"{'SciPy SLSQP single shooting, generated grads':44s} {t_g:9.2f} {res_g.nit:10d} "
                    f"{res_g.fun:17.10e} {violation(planner, res_g.x):9.1e}  ({res_g.message})")
        if not args.no_fd:
            res_f, t_f = planner.solve(False, U0)
            rows.append(f"{'SciPy SLSQP single shooting, finite diffs':44s} {t_f:9.2f} {res_f.nit:10d} "
                        f"{res_f.fun:17.10e} {violation(planner, res_f.x):9.1e}  ({res_f.message})")
    print(head)
    print("\n".join(rows))
    for name, U in plans.items():
        r = planner.rollout(U, False)
        qN, _ = r["traj"][-1]
        g, _ = planner.target.grasp(planner.N * planner.h)
        rates = np.array([np.linalg.norm(v[0:3]) for _, v in r["traj"]])
        err = np.linalg.norm(mod.frame_pose(qN, HAND)[1] - g)
        tw = np.linalg.norm(r['eq'][3:])
        print(f"{name}: hand-to-grasp-point error {err:.2e} m, twist error {tw:.2e}; "
              f"peak base angular rate {np.rad2deg(rates.max()):.4f} deg/s; min joint-limit margin "
              f"{np.rad2deg(r['ineq'].min()):.1f} deg")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = np.arange(planner.N + 1) * planner.h
        fig, ax = plt.subplots(3, 1, figsize=(7, 8), sharex=True)
        for (name, U), style in zip(plans.items(), ("-", "--")):
            r = planner.rollout(U, False)
            dist = [np.linalg.norm(mod.frame_pose(q, HAND)[1] - planner.target.grasp(ti)[0])
                    for (q, _), ti in zip(r["traj"], t)]
            ax[0].plot(t, [np.rad2deg(q[7:14]) for q, _ in r["traj"]], style)
            ax[1].plot(t, [np.rad2deg(np.linalg.norm(v[0:3])) for _, v in r["traj"]], style, label=name)
            ax[2].plot(t, dist, style, label=name)
        ax[0].set_ylabel("arm joints [deg]")
        ax[1].set_ylabel("|base rate| [deg/s]")
        ax[1].legend()
        ax[2].set_ylabel("hand to grasp point [m]")
        ax[2].set_xlabel("t [s]")
        fig.suptitle("Approach to a tumbling target (generated derivatives)")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot saved to {args.plot}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
