"""The SymPy face: the planar 2-link arm's mass matrix is the textbook one; Tian & Wu's SymPy mass matrix
evaluates to the generated C; the LaTeX command prints it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sympy as sp
from conftest import EXAMPLES, module_cache_dir

from soadyn import load_robot
from soadyn.cli.main import main
from soadyn.codegen.pipeline import compile_robot
from soadyn.symbolic.expressions import symbol_table, to_sympy

PLANAR_2R = """
name: planar_2r
base: fixed
gravity: [0, -9.81, 0]
bodies:
  - {name: ground, mass: 0.0}
  - name: l1
    parent: ground
    joint: {name: q1, type: revolute, axis: [0, 0, 1]}
    mass: 1.3
    com: [0.4, 0, 0]
    inertia: {ixx: 0.01, iyy: 0.08, izz: 0.09}
  - name: l2
    parent: l1
    joint: {name: q2, type: revolute, axis: [0, 0, 1], xyz: [0.9, 0, 0]}
    mass: 0.8
    com: [0.3, 0, 0]
    inertia: {ixx: 0.005, iyy: 0.04, izz: 0.045}
"""


@pytest.fixture(scope="module")
def planar(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("sympy") / "planar_2r.yaml"
    p.write_text(PLANAR_2R)
    return p


def test_planar_two_link_mass_matrix_is_the_textbook_one(planar):
    """Spong, Hutchinson & Vidyasagar, Robot Modeling and Control, eq. 7.83-7.85 (CoM on the link x axes):
    m11 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos q2) + I1 + I2, m12 = m2 (lc2^2 + l1 lc2 cos q2) + I2,
    m22 = m2 lc2^2 + I2, with I_k about the CoM."""
    robot = load_robot(planar)
    M = to_sympy(robot, "mass_matrix", parameters=True, lengths=True)
    m1, m2, lc1, lc2, l1, I1, I2, q2 = sp.symbols("m1 m2 lc1 lc2 l1 I1 I2 q2")
    table = symbol_table(robot, parameters=True, lengths=True)
    assert "l_{x,2}" in table and "J_{zz,1}" in table
    S = {s.name: s for s in M.free_symbols}
    assert set(S) <= set(table) | {"q_0", "q_1"}
    sub = {S["J_{zz,1}"]: I1 + m1 * lc1**2, S["J_{zz,2}"]: I2 + m2 * lc2**2, S["h_{x,2}"]: m2 * lc2,
           S["h_{y,2}"]: 0, S["m_{2}"]: m2, S["l_{x,2}"]: l1, S["q_1"]: q2}
    textbook = sp.Matrix([[m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * sp.cos(q2)) + I1 + I2,
                           m2 * (lc2**2 + l1 * lc2 * sp.cos(q2)) + I2],
                          [m2 * (lc2**2 + l1 * lc2 * sp.cos(q2)) + I2, m2 * lc2**2 + I2]])
    diff = (M.xreplace(sub) - textbook).applyfunc(sp.simplify)
    assert diff == sp.zeros(2, 2)


def test_staged_form_evaluates_like_the_expanded_one(planar, rng):
    robot = load_robot(planar)
    eqs = to_sympy(robot, "inverse_dynamics", staged=True)
    assert all(isinstance(e, sp.Eq) for e in eqs)
    tau = to_sympy(robot, "inverse_dynamics")
    for _ in range(3):
        vals = {sp.Symbol(f"{n}_{i}"): float(rng.normal()) for n in ("q", "v", "a") for i in range(2)}
        env = dict(vals)
        for e in eqs:
            env[e.lhs] = float(e.rhs.xreplace(env))
        staged = [env[sp.Symbol(f"inverse_dynamics_{i}")] for i in range(2)]
        np.testing.assert_allclose(staged, [float(t.xreplace(vals)) for t in tau], rtol=1e-13)


@pytest.fixture(scope="module")
def tian_wu_module(request, tmp_path_factory):
    out = module_cache_dir(request, tmp_path_factory, "soadyn_sympy_modules")
    path = EXAMPLES / "tian_wu_3dof.yaml"
    return load_robot(path), compile_robot(path, out, functions=["mass_matrix", "inverse_dynamics"],
                                           progress=False)


def test_tian_wu_sympy_equals_generated_c(tian_wu_module, rng):
    robot, mod = tian_wu_module
    M = to_sympy(robot, "mass_matrix")
    tau = to_sympy(robot, "inverse_dynamics")
    q = sp.symbols(f"q_0:{robot.nq}")
    v = sp.symbols(f"v_0:{robot.nv}")
    a = sp.symbols(f"a_0:{robot.nv}")
    fM = sp.lambdify([q], M, "numpy", cse=True)
    ftau = sp.lambdify([q, v, a], tau, "numpy", cse=True)
    for _ in range(10):
        qs, vs, as_ = robot.random_configuration(rng), rng.normal(size=robot.nv), rng.normal(size=robot.nv)
        Mc = mod.mass_matrix(qs)
        assert np.max(np.abs(np.array(fM(qs), dtype=float) - Mc)) <= 1e-12 * np.max(np.abs(Mc))
        tc = mod.inverse_dynamics(qs, vs, as_)
        got = np.array(ftau(qs, vs, as_), dtype=float).ravel()
        assert np.max(np.abs(got - tc)) <= 1e-12 * np.max(np.abs(tc))


def test_info_latex_prints_the_mass_matrix(planar, capsys):
    assert main(["info", str(planar), "--latex", "mass_matrix", "--symbolic", "parameters,lengths"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("\\left[\\begin{matrix}")
    assert "l_{x,2}^{2} m_{2}" in out and "\\cos{\\left(q_{1} \\right)}" in out
    assert "% J_{zz,2}: J_zz of body 'l2'" in out
    assert main(["info", str(planar), "--latex", "no_such_function"]) == 2


# ---- bounds and names (issue 21 item 11) --------------------------------------------------------------
TIAN_WU = EXAMPLES / "tian_wu_3dof.yaml"


@pytest.mark.parametrize("function", ["forward_dynamics", "mass_matrix_inverse",
                                      "forward_dynamics_derivatives"])
def test_too_large_forms_are_refused_at_once_with_their_size(function):
    import time

    from soadyn.symbolic.expressions import EXPANDED_LIMIT

    robot = load_robot(TIAN_WU)
    t = time.perf_counter()
    with pytest.raises(ValueError, match=rf"{function} is too large to print expanded: [\d,]+ operations"):
        to_sympy(robot, function)
    assert time.perf_counter() - t < 10.0
    eqs = to_sympy(robot, function, staged=True)            # the staged form stays printable
    assert len(eqs) > robot.nv
    from soadyn.symbolic.expressions import _run, operation_counts

    staged, expanded = operation_counts(*_run(robot, function, False, False, {}))
    assert expanded > EXPANDED_LIMIT > staged


def test_expanded_size_count_is_the_size_of_the_expanded_form(planar):
    """operation_counts counts nodes of the expanded form without building it: compare with the built one."""
    import symengine as se

    from soadyn.symbolic.expressions import _nodes, _run, operation_counts

    robot = load_robot(planar)
    for function in ("mass_matrix", "inverse_dynamics"):
        ctx, res = _run(robot, function, False, False, {})
        value = {}
        for a in ctx.program:
            value[a.target] = se.sympify(a.expr).xreplace(value)
        built = sum(_nodes(se.sympify(e).xreplace(value), {}) for arr in res for e in arr.ravel())
        _, counted = operation_counts(ctx, res)
        assert counted >= built > 0       # substitution may fold constants; never more nodes than counted
        assert counted <= 2 * built


def test_info_latex_is_bounded_and_names_are_checked(capsys):
    import time

    for function in ("forward_dynamics", "mass_matrix_inverse", "forward_dynamics_derivatives"):
        t = time.perf_counter()
        assert main(["info", str(TIAN_WU), "--latex", function]) == 0
        out = capsys.readouterr().out
        assert out.startswith("\\begin{aligned}") and f"% {function}: staged, as the expanded form has" in out
        assert time.perf_counter() - t < 30.0
    for bad in ("__class__", "link_poses", "", "joint_transforms", "no_such_function"):
        assert main(["info", str(TIAN_WU), "--latex", bad]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "unknown function" in err and "mass_matrix" in err, (bad, err)


def test_to_sympy_keywords_and_flags(planar):
    from soadyn.reference import dense

    robot = load_robot(TIAN_WU)
    J = to_sympy(robot, "jacobian", frame="link3")              # the docstring's own example
    Jw = to_sympy(robot, "jacobian", frame="ee", world_aligned=True)
    rng = np.random.default_rng(2)
    q = robot.random_configuration(rng)
    subs = {sp.Symbol(f"q_{i}"): float(x) for i, x in enumerate(q)}
    np.testing.assert_allclose(np.array(J.subs(subs), dtype=float), dense.jacobian(robot, q, "link3"),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.array(Jw.subs(subs), dtype=float),
                               dense.jacobian(robot, q, "ee", world_aligned=True), rtol=0, atol=1e-12)
    for kw, words in (({}, "needs frame="), ({"frame": "nope"}, "unknown frame"),
                      ({"frame": "link3", "color": 1}, "takes no keyword 'color'")):
        with pytest.raises(ValueError, match=words):
            to_sympy(robot, "jacobian", **kw)
    small = load_robot(planar)
    for flag in ("parameters", "lengths", "staged", "simplify"):
        for value in ("no", 1, None):
            with pytest.raises(ValueError, match=f"{flag} must be True or False"):
                to_sympy(small, "mass_matrix", **{flag: value})
    assert to_sympy(small, "mass_matrix", parameters=np.bool_(False)) == to_sympy(small, "mass_matrix")


def test_latex_simplification_has_a_time_bound(planar):
    from soadyn.symbolic.expressions import latex

    robot = load_robot(TIAN_WU)
    import time

    t = time.perf_counter()
    text = latex(robot, "kinetic_energy", simplify_seconds=1.0)   # simplify takes > 60 s here
    assert time.perf_counter() - t < 20.0
    assert text.endswith("% kinetic_energy: not simplified (SymPy's simplify took longer than 1 s)")
    with pytest.raises(ValueError, match="simplify_seconds"):
        latex(robot, "kinetic_energy", simplify_seconds=float("nan"))
