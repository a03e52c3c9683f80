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
