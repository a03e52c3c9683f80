"""Register-pressure order of long generated functions (:mod:`soadyn.codegen.schedule`).

The order must be a topological order of the same statements (so the C computes the same bits), and it must
keep fewer values live than the stage order it replaces."""

from __future__ import annotations

import ctypes
import re
import subprocess

import numpy as np
import pytest
from conftest import TEST_ARM

import soadyn.codegen.emit as emit
from soadyn.codegen.pipeline import generate, resolve_robot
from soadyn.codegen.schedule import pressure_order, statement_deps, worth_scheduling


def _max_live(order: list[int], deps: list[frozenset[int]]) -> int:
    """Most values defined and still to be read at any point of ``order`` (every statement defines one)."""
    readers = {i: sum(1 for d in deps if i in d) for i in range(len(deps))}
    live: set[int] = set()
    most = 0
    for i in order:
        for j in deps[i]:
            readers[j] -= 1
            if readers[j] == 0:
                live.discard(j)
        if readers[i]:
            live.add(i)
        most = max(most, len(live))
    return most


def _random_dag(rng: np.random.Generator, n: int) -> list[frozenset[int]]:
    return [frozenset(int(j) for j in rng.choice(i, size=min(i, rng.integers(0, 4)), replace=False))
            for i in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_pressure_order_is_a_topological_permutation(seed):
    rng = np.random.default_rng(seed)
    deps = _random_dag(rng, 300)
    order = pressure_order(deps, [True] * len(deps))
    assert sorted(order) == list(range(len(deps)))
    at = {s: k for k, s in enumerate(order)}
    assert all(at[j] < at[i] for i, d in enumerate(deps) for j in d)


def test_pressure_order_interleaves_producers_and_consumers():
    """Stage order: n values, then n statements each reading one of them: n live at once.  The schedule
    reads each value right after it is made."""
    n = 40
    deps = [frozenset()] * n + [frozenset({i}) for i in range(n)]
    assert _max_live(list(range(2 * n)), deps) == n
    order = pressure_order(deps, [True] * n + [False] * n)
    assert _max_live(order, deps) == 1


def test_pressure_order_lowers_live_values_on_random_programs():
    rng = np.random.default_rng(11)
    for _ in range(5):
        deps = _random_dag(rng, 400)
        order = pressure_order(deps, [True] * len(deps))
        assert _max_live(order, deps) < _max_live(list(range(len(deps))), deps)


def test_wide_functions_are_scheduled():
    assert worth_scheduling([14], [13 * 13])                  # M of a 7-hinge free arm
    assert worth_scheduling([14, 13, 13], [169, 169, 169])    # forward-dynamics derivatives
    assert not worth_scheduling([14, 13, 13], [13])           # inverse / forward dynamics


def test_statement_deps_and_bad_input():
    deps = statement_deps([{"q"}, {"a", "q"}, {"a", "b"}], ["a", "b", None])
    assert deps == [frozenset(), frozenset({0}), frozenset({0, 1})]
    with pytest.raises(ValueError, match="not earlier"):
        pressure_order([frozenset({1}), frozenset()], [True, True])


def _compile(cc, src, lib):
    subprocess.run([*cc, "-std=c99", "-O2", "-ffp-contract=off", "-fno-math-errno", "-shared", "-fPIC",
                    str(src), "-o", str(lib), "-lm"], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def test_scheduled_function_computes_the_same_bits(cc, tmp_path, monkeypatch):
    """The forward-dynamics derivatives of a free 3-hinge arm (a wide function) in stage order and in pressure
    order: different statement order, every stage's comment once, and bit-identical outputs."""
    robot, _ = resolve_robot(TEST_ARM, "free")
    texts = {}
    for label, wide in (("stage", False), ("pressure", True)):
        monkeypatch.setattr(emit, "worth_scheduling", lambda inputs, outputs, wide=wide: wide)
        gen = generate(robot, module_name=f"sch_{label}", functions=["forward_dynamics_derivatives"])
        texts[label] = {name.replace(f"sch_{label}", "M"): text.replace(f"sch_{label}", "M")
                        for name, text in gen.files.items()}
    body = {k: t["M.c"][t["M.c"].index("void M_forward_dynamics_derivatives("):] for k, t in texts.items()}
    assert body["stage"] != body["pressure"]
    assert "register-pressure order" in body["pressure"] and "register-pressure order" not in body["stage"]
    comments = re.findall(r"^ */\* (.*) \*/$", body["pressure"].split("\n}\n")[0], re.M)
    assert len(comments) == len(set(comments)) > 3                 # each stage's comment once
    statements = {k: sorted(line.strip() for line in b.split("\n}\n")[0].splitlines()
                            if line.strip().startswith("const double") or "] = " in line)
                  for k, b in body.items()}
    assert statements["stage"] == statements["pressure"]           # the same statements, reordered
    libs = {}
    for label, files in texts.items():
        d = tmp_path / label
        d.mkdir()
        for name, text in files.items():
            (d / name).write_text(text)
        libs[label] = _compile(cc, d / "M.c", d / "M.so")
    rng = np.random.default_rng(3)
    nv = robot.nv
    for _ in range(4):
        q = robot.random_configuration(rng)
        ins = [np.ascontiguousarray(x, dtype=float) for x in (q, rng.normal(size=nv), rng.normal(size=nv))]
        got = {}
        for label, lib in libs.items():
            outs = [np.full(nv * nv, np.nan) for _ in range(3)]
            lib.M_forward_dynamics_derivatives(*[a.ctypes.data_as(ctypes.c_void_p) for a in ins + outs])
            got[label] = outs
        for a, b in zip(got["stage"], got["pressure"]):
            assert not np.isnan(a).any()
            assert np.array_equal(a.view(np.int64), b.view(np.int64))
