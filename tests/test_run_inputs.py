"""Run-time inputs of the generated modules, one rule for every function (issue 21 items 8-10):

* ``out=`` arrays that overlap an input are safe (the input is read before anything is written: same
  bits as without the overlap); ``out=`` arrays that overlap each other are refused;
* non-finite inputs (NaN, inf) are refused, in single and batched calls, on the C fast path and the
  Python path alike;
* ``threads=`` takes any integer type, refuses bool / float / non-positive, and the thread pools are
  reused and bounded (a module never holds more threads than the machine's cores);
* ``params=`` is checked by the robot-file loader's physical checks (:func:`soadyn.model.parameters.
  parameter_problem`, which calls :func:`soadyn.model.inertia.inertia_problem` on the inertia about the
  centre of mass).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from conftest import TEST_ARM, module_cache_dir

from soadyn.codegen.pipeline import compile_robot, resolve_robot
from soadyn.model.parameters import inertia_to_vector, parameter_problem, with_param_bodies
from soadyn.model.robot import Inertia

FUNCS = ["forward_dynamics", "inverse_dynamics", "mass_matrix", "jacobian", "momentum",
         "inverse_dynamics_derivatives", "forward_dynamics_derivatives", "frame_acceleration_derivatives"]


@pytest.fixture(scope="session")
def run_dir(request, tmp_path_factory) -> Path:
    return module_cache_dir(request, tmp_path_factory, "soadyn_run_input_modules")


@pytest.fixture(scope="session", params=["fixed", "free"])
def arm(request, run_dir, cc):  # noqa: ARG001 - cc: skip without a compiler
    robot, _ = resolve_robot(TEST_ARM, request.param)
    robot = with_param_bodies(robot, "all").replace(name=f"run_inputs_{request.param}")
    return robot, compile_robot(robot, run_dir, functions=FUNCS, progress=False)


def _state(robot, n=None, seed=1):
    rng = np.random.default_rng(seed)
    if n is None:
        return robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    q = np.array([robot.random_configuration(rng) for _ in range(n)])
    return q, rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))


def _tuple(r):
    return r if isinstance(r, tuple) else (r,)


# ---- out= overlapping inputs or each other -----------------------------------------------------------
def _alias_cases(m, robot):
    """name -> (call(inputs) with an aliased out, the same call's inputs); each call gets fresh copies."""
    nv, nq = robot.nv, robot.nq
    frame = robot.body_names[-1]
    cases = {}

    def case(name, build):
        cases[name] = build

    def fd_out(j):            # out = one of (v, tau) itself (nv,)
        def build():
            q, v, t = _state(robot)
            args = [q, v, t]
            return (lambda: m.forward_dynamics(*args, out=args[j])), (q.copy(), v.copy(), t.copy()), \
                (lambda a: m.forward_dynamics(*a))
        return build

    case("fd out=v", fd_out(1))
    case("fd out=tau", fd_out(2))

    def id_out_a():
        q, v, t = _state(robot)
        return (lambda: m.inverse_dynamics(q, v, t, out=t)), (q.copy(), v.copy(), t.copy()), \
            (lambda a: m.inverse_dynamics(*a))
    case("id out=a", id_out_a)

    def fd_out_in_q():        # out's buffer starts inside q's (views of one buffer)
        q, v, t = _state(robot)
        buf = np.empty(nq + nv)
        buf[:nq] = q
        qv, out = buf[:nq], buf[nq - 2:nq - 2 + nv]
        return (lambda: m.forward_dynamics(qv, v, t, out=out)), (q.copy(), v.copy(), t.copy()), \
            (lambda a: m.forward_dynamics(*a))
    case("fd out overlaps q", fd_out_in_q)

    def derivs_out_v(name, k):
        def build():
            q, v, t = _state(robot)
            outs = [np.empty((nv, nv)) for _ in range(k)]
            outs[0].ravel()[:nv] = v
            vv = outs[0].ravel()[:nv]
            return (lambda: getattr(m, name)(q, vv, t, out=tuple(outs))), (q.copy(), v.copy(), t.copy()), \
                (lambda a: getattr(m, name)(*a))
        return build
    case("fd derivatives out overlaps v", derivs_out_v("forward_dynamics_derivatives", 3))
    case("id derivatives out overlaps v", derivs_out_v("inverse_dynamics_derivatives", 2))

    def derivs_out_tau():
        q, v, t = _state(robot)
        outs = [np.empty((nv, nv)) for _ in range(3)]
        outs[2].ravel()[-nv:] = t
        tt = outs[2].ravel()[-nv:]
        return (lambda: m.forward_dynamics_derivatives(q, v, tt, out=tuple(outs))), \
            (q.copy(), v.copy(), t.copy()), (lambda a: m.forward_dynamics_derivatives(*a))
    case("fd derivatives out overlaps tau", derivs_out_tau)

    def mm_out_q(triangle):
        def build():
            q, _, _ = _state(robot)
            out = np.empty((nv, nv))
            out.ravel()[:nq] = q
            qq = out.ravel()[:nq]
            return (lambda: m.mass_matrix(qq, triangle=triangle, out=out)), (q.copy(),), \
                (lambda a: m.mass_matrix(*a, triangle=triangle))
        return build
    case("M out overlaps q", mm_out_q("full"))
    case("M upper out overlaps q", mm_out_q("upper"))

    def jac_out_q():
        q, _, _ = _state(robot)
        out = np.empty((6, nv))
        out.ravel()[3:3 + nq] = q
        qq = out.ravel()[3:3 + nq]
        return (lambda: m.jacobian(qq, frame, world_aligned=True, out=out)), (q.copy(),), \
            (lambda a: m.jacobian(*a, frame, world_aligned=True))
    case("jacobian out overlaps q", jac_out_q)

    def batch_mm(threads):
        def build():
            Q, _, _ = _state(robot, 40)
            out = np.empty((40, nv, nv))
            out.reshape(-1)[:Q.size] = Q.ravel()
            QQ = out.reshape(-1)[:Q.size].reshape(Q.shape)
            return (lambda: m.mass_matrix(QQ, out=out, threads=threads)), (Q.copy(),), \
                (lambda a: m.mass_matrix(*a))
        return build
    case("batched M, Q overlaps out", batch_mm(None))
    case("batched M, Q overlaps out, threads=2", batch_mm(2))

    def batch_fd(threads):
        def build():
            Q, V, T = _state(robot, 40)
            return (lambda: m.forward_dynamics(Q, V, T, out=T, threads=threads)), \
                (Q.copy(), V.copy(), T.copy()), (lambda a: m.forward_dynamics(*a))
        return build
    case("batched fd out=T", batch_fd(None))
    case("batched fd out=T, threads=2", batch_fd(2))

    def fext_out():
        q, v, t = _state(robot)
        out = np.empty(robot.n_bodies * 6)
        out[:] = np.linspace(-1, 1, out.size)
        fe = out.reshape(robot.n_bodies, 6)
        res = out[:nv]
        inputs = (q.copy(), v.copy(), t.copy(), fe.copy())
        return (lambda: m.forward_dynamics(q, v, t, fe, out=res)), inputs, (lambda a: m.forward_dynamics(*a))
    case("fd f_ext overlaps out", fext_out)

    def params_out():
        q, _, _ = _state(robot)
        P = m.default_params()
        out = np.empty(max(nv * nv, P.size + 1))
        out[:P.size] = P.ravel()
        PP = out[:P.size].reshape(P.shape)
        res = out[:nv * nv].reshape(nv, nv)
        return (lambda: m.mass_matrix(q, params=PP, out=res)), (q.copy(),), \
            (lambda a: m.mass_matrix(*a, params=P))
    case("M params overlaps out", params_out)
    return cases


def test_out_overlapping_an_input_gives_the_unaliased_result(arm):
    robot, m = arm
    wrong = []
    for name, build in _alias_cases(m, robot).items():
        call, inputs, ref_call = build()
        want = _tuple(ref_call(inputs))
        try:
            got = _tuple(call())
        except ValueError as e:
            assert "overlap" in str(e), (name, str(e))
            continue
        if not all(np.array_equal(a, b) for a, b in zip(got, want)):
            wrong.append(name)
    assert wrong == [], wrong


@pytest.mark.parametrize("name, k", [("forward_dynamics_derivatives", 3),
                                     ("inverse_dynamics_derivatives", 2)])
def test_out_arrays_overlapping_each_other_are_refused(arm, name, k):
    robot, m = arm
    q, v, t = _state(robot)
    o = np.empty((robot.nv, robot.nv))
    with pytest.raises(ValueError, match=rf"{name}: out\[0\] and out\[1\] overlap"):
        getattr(m, name)(q, v, t, out=(o,) * k)
    big = np.empty(robot.nv * robot.nv + 1)
    outs = [big[:-1].reshape(o.shape), big[1:].reshape(o.shape)] + [np.empty_like(o) for _ in range(k - 2)]
    with pytest.raises(ValueError, match="overlap"):
        getattr(m, name)(q, v, t, out=tuple(outs))
    fine = tuple(np.empty_like(o) for _ in range(k))
    assert getattr(m, name)(q, v, t, out=fine) == fine


# ---- non-finite inputs -------------------------------------------------------------------------------
def _calls(m, robot, q, v, t):
    frame = robot.body_names[-1]
    fe = np.zeros(q.shape[:-1] + (robot.n_bodies, 6))
    return {
        "forward_dynamics": (lambda a, **k: m.forward_dynamics(*a, **k), (q, v, t)),
        "forward_dynamics f_ext": (lambda a, **k: m.forward_dynamics(*a, **k), (q, v, t, fe)),
        "inverse_dynamics": (lambda a, **k: m.inverse_dynamics(*a, **k), (q, v, t)),
        "mass_matrix": (lambda a, **k: m.mass_matrix(*a, **k), (q,)),
        "mass_matrix upper": (lambda a, **k: m.mass_matrix(*a, triangle="upper", **k), (q,)),
        "jacobian": (lambda a, **k: m.jacobian(a[0], frame, **k), (q,)),
        "momentum": (lambda a, **k: m.momentum(*a, **k), (q, v)),
        "forward_dynamics_derivatives": (lambda a, **k: m.forward_dynamics_derivatives(*a, **k), (q, v, t)),
        "inverse_dynamics_derivatives": (lambda a, **k: m.inverse_dynamics_derivatives(*a, **k), (q, v, t)),
        "inverse_dynamics_derivatives f_ext": (lambda a, **k: m.inverse_dynamics_derivatives(*a, **k),
                                               (q, v, t, fe)),
        "frame_acceleration_derivatives": (lambda a, **k: m.frame_acceleration_derivatives(*a, frame, **k),
                                           (q, v, t)),
    }


@pytest.mark.parametrize("batch", [None, 20])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_inputs_are_refused_everywhere(arm, batch, bad):
    robot, m = arm
    q, v, t = _state(robot, batch)
    accepted = []
    for name, (call, args) in _calls(m, robot, q, v, t).items():
        call(args)                                           # finite: fine
        for i in range(len(args)):
            for at in (0, -1):                               # the first / last entry (of the last state)
                a = [x.copy() for x in args]
                a[i].reshape(-1)[at] = bad
                for kw in ({}, {"threads": 2}, {"out": None}) if batch else ({}, {"out": None}):
                    try:
                        call(a, **kw)
                    except ValueError as e:
                        assert "non-finite" in str(e) and name.split()[0] in str(e), (name, str(e))
                        continue
                    accepted.append((name, i, at, kw))
    assert accepted == []


def test_non_finite_params_and_out_contents(arm):
    robot, m = arm
    q, v, t = _state(robot)
    P = m.default_params()
    P[-1, 0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        m.forward_dynamics_derivatives(q, v, t, params=P)
    out = np.full(robot.nv, np.nan)            # out's old contents do not matter
    assert np.all(np.isfinite(m.forward_dynamics(q, v, t, out=out)))


# ---- threads= ----------------------------------------------------------------------------------------
def test_threads_takes_integer_types_and_refuses_others(arm):
    robot, m = arm
    Q, V, T = _state(robot, 40)
    want = m.forward_dynamics(Q, V, T)
    for th in (np.int64(2), np.int32(3), np.uint8(2), 1, 2):
        assert np.array_equal(m.forward_dynamics(Q, V, T, threads=th), want), repr(th)
    for th in (True, False, np.bool_(True), 2.0, np.float64(2), -1, 0, "2", [2]):
        with pytest.raises(ValueError, match=r"forward_dynamics: threads must be a positive integer"):
            m.forward_dynamics(Q, V, T, threads=th)


def test_thread_pools_are_reused_and_bounded(arm):
    robot, m = arm
    Q, V, T = _state(robot, 200)
    before = threading.active_count()
    part = m._PART_OPS
    m._PART_OPS = 1                              # split every batch as far as threads= allows
    try:
        for th in range(2, 40):
            m.forward_dynamics(Q, V, T, threads=th)
            m.mass_matrix(Q, threads=np.int64(th))
    finally:
        m._PART_OPS = part
    import os
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threading.active_count() - before <= max(cores - 1, 1)
    m.release_threads()
    assert threading.active_count() <= before
    assert np.array_equal(m.forward_dynamics(Q, V, T, threads=2), m.forward_dynamics(Q, V, T))


# ---- params= checked like the robot file -------------------------------------------------------------
def _body(m, c, Ic):
    return inertia_to_vector(Inertia(m, np.asarray(c, dtype=float), np.asarray(Ic, dtype=float)))


def test_params_are_checked_by_the_loaders_rules(arm):
    robot, m = arm
    q, v, t = _state(robot)
    P0 = m.default_params()
    k = len(P0) - 1                                          # a body on a moving joint
    cases = {
        "all-zero row on a moving joint": (np.zeros(10), "moving joint"),
        "small negative inertia": (_body(2.0, [0.1, 0, 0], np.diag([-1e-12, 0.5, 0.5])), "positive definite"),
        "zero moment about the CoM": (_body(2.0, [0.1, 0, 0], np.diag([0.0, 0.5, 0.5])), "positive definite"),
        "triangle": (_body(2.0, [0.1, 0, 0], np.diag([0.1, 0.1, 0.5])), "triangle"),
        "negative mass": (np.r_[-1.0, np.zeros(9)], "negative"),
    }
    for name, (row, words) in cases.items():
        P = P0.copy()
        P[k] = row
        for call in (lambda P=P: m.forward_dynamics(q, v, t, params=P),
                     lambda P=P: m.forward_dynamics_derivatives(q, v, t, params=P),
                     lambda P=P: m.mass_matrix(np.array([q, q]), params=P)):
            with pytest.raises(ValueError, match=words):
                call()
        assert words in (parameter_problem(row, moving=True) or ""), name
    # a valid body far from its origin (inertia about the origin 1.6e7 times the one about the CoM)
    far = _body(1e-2, [4e4, 0, 0], np.diag([0.01, 0.012, 0.015]))
    assert parameter_problem(far) is None
    P = P0.copy()
    P[k] = far
    assert np.all(np.isfinite(m.forward_dynamics(q, v, t, params=P)))


def test_params_zero_row_allowed_only_where_the_loader_allows_mass_0(arm):
    robot, m = arm
    q, v, t = _state(robot)
    P = m.default_params()
    P[0] = 0.0                                               # the base
    if robot.is_free:
        with pytest.raises(ValueError, match="free-floating"):
            m.forward_dynamics(q, v, t, params=P)
    else:                                                    # a fixed base's inertia never enters
        assert np.all(np.isfinite(m.forward_dynamics(q, v, t, params=P)))



def test_params_batch_check_names_the_state_and_check_params_false_is_the_callers_promise(arm):
    """A batch of parameter sets is checked row by row (the vectorised screen, then the loader's rule on
    the rows it leaves), naming state and body; check_params=False skips only the physical check."""
    robot, m = arm
    q, v, t = _state(robot, n=5)
    P = np.repeat(m.default_params()[None], 5, axis=0)
    k = P.shape[1] - 1                                       # a body on a moving joint
    tri = _body(2.0, [0.1, 0, 0], np.diag([0.1, 0.1, 0.5]))  # breaks the triangle inequality
    P[3, k] = tri
    with pytest.raises(ValueError, match=rf"params\[3, {k}\].*triangle"):
        m.forward_dynamics(q, v, t, params=P)
    # the caller's promise: no physical check, the C runs on the given numbers (a triangle violation
    # still gives a finite acceleration, the same as a consistent module on the same numbers would)
    a = m.forward_dynamics(q, v, t, params=P, check_params=False)
    assert a.shape == (5, robot.nv) and np.all(np.isfinite(a))
    np.testing.assert_array_equal(a[:3], m.forward_dynamics(q[:3], v[:3], t[:3], params=P[:3]))
    a1 = m.forward_dynamics(q[3], v[3], t[3], params=P[3], check_params=False)
    np.testing.assert_array_equal(a1, a[3])
    with pytest.raises(ValueError, match="triangle"):           # checked again when asked
        m.forward_dynamics(q[3], v[3], t[3], params=P[3])
    P0 = m.default_params() * 1.5                            # accepted once: the same numbers in another
    m.forward_dynamics(q[0], v[0], t[0], params=P0)          # shape are still refused by the call
    with pytest.raises(ValueError, match="shape"):
        m.forward_dynamics(q[0], v[0], t[0], params=P0.ravel())
    np.testing.assert_array_equal(m.forward_dynamics(q[:1], v[:1], t[:1], params=P0[None])[0],
                                  m.forward_dynamics(q[0], v[0], t[0], params=P0))
    P[3, k, 0] = np.nan                                      # never skipped: finiteness and shape
    with pytest.raises(ValueError, match="non-finite"):
        m.forward_dynamics(q, v, t, params=P, check_params=False)
    with pytest.raises(ValueError, match="shape"):
        m.forward_dynamics(q, v, t, params=P[:, :-1], check_params=False)


# ---- verify --tol (issue 21 item 13) ---------------------------------------------------------------------
@pytest.mark.parametrize("tol", ["nan", "-1", "0", "inf", "-inf"])
def test_verify_refuses_a_tolerance_that_is_not_positive_and_finite(tol, tmp_path, capsys):
    from soadyn.cli.main import main
    from soadyn.codegen.verify import verify

    assert main(["verify", str(TEST_ARM), "-o", str(tmp_path), f"--tol={tol}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--tol must be a positive finite number" in err
    assert list(tmp_path.iterdir()) == []                       # refused before any compile
    with pytest.raises(ValueError, match="tol must be a positive finite number"):
        verify(TEST_ARM, tmp_path, tol=float(tol))
    assert list(tmp_path.iterdir()) == []
