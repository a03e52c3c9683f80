"""Compile fuzz: every robot the loader accepts compiles, and every function it builds is right (issue 21).

A seeded generator writes random small robot files (:func:`robot_doc`): 1 to 6 bodies, trees as well as
chains, revolute / prismatic / fixed joints about axis-aligned (signed) or general axes, zero or random
joint offsets, physically consistent inertias (a random box, rotated half of the time), bodies with
whole-number values (the symbolic context keeps them exact, so constants such as ``1.0/3.0`` reach the
printers), massless bodies where the loader allows them (a fixed base, a body on a fixed joint), free and
fixed bases, zero or random gravity, a named frame now and then; and a fixed list of robots whose outputs
are constant or zero (:data:`SPECIAL`: one prismatic joint as in issue 21 item 12, all-prismatic chains
and trees, one axis-aligned revolute joint without offsets, a free body without joints, a fixed base
without a moving joint).  Each file goes through ``soadyn.load_robot`` (the loader decides what is
accepted: every robot generated here is physically valid, so a refusal fails); each robot is compiled
with every default function, and every function (every frame of a family) is checked:

* against the independent reference (:mod:`soadyn.reference`, named by the registry) and the float run of
  its own algorithm, on ``CHECKED`` random states (:func:`soadyn.codegen.verify.random_inputs`);
* its batched entry point (``STATES`` states: whole SIMD groups plus a scalar remainder) against the
  single-state calls, bit for bit, and the same with ``out=`` arrays (the full-writing functions), and
  for a structured output ``triangle="upper"`` against the upper triangle of the full result.

Size: 26 robots (8 of them from :data:`SPECIAL`), all accepted by the loader, each compiled once: 12 in
the ``debug`` profile (-O0, scalar batches), 8 in a -O0 profile with 4 SIMD lanes and stages of ~40
operations (:data:`LANES`: the lanes and stage printers of ``fast`` at the compile cost of ``debug``), 4
in ``fast`` (-O2, native, 4 lanes) and 2 in ``portable`` (2 lanes); 15 to 29 C functions (11 to 22 API
functions) each, 792 checked functions and frames in all.  About 80 s wall / 35 s CPU with a cold module
cache on the shared 2-core machine, a few seconds with a warm one.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import yaml
from conftest import module_cache_dir, requires_cc

import soadyn
from soadyn.codegen.derive import algorithm
from soadyn.codegen.functions import expand_family, function_table
from soadyn.codegen.profiles import IEEE_FLAGS, Profile, get_profile
from soadyn.codegen.verify import random_inputs, reference_function
from soadyn.model import RobotFileError
from soadyn.symbolic.scalar import Numeric

#: states of a batched call: two groups of 4 SIMD lanes (three of 2) and a scalar remainder of 1
STATES = 9
#: states checked against the reference and the algorithm's float run (the others through the lanes
#: equalities with the single-state calls)
CHECKED = 3
TOL = 1e-9
#: smallest scale of an output (the robots' masses are 0.3-5, lengths 0.05-1, the states standard normal:
#: their nonzero outputs are far larger; a sign error in an output of this size still fails)
FLOOR = 1e-3

#: -O0 (compiles as fast as ``debug``) with the SIMD-lane batch code and stage functions of ~40 operations:
#: the printers of ``fast`` at the compile cost of ``debug``
LANES = Profile("fuzz-lanes", ("-O0", *IEEE_FLAGS), stage_ops=40, lanes=4)


# --------------------------------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------------------------------
def _rotation(rng: np.random.Generator) -> np.ndarray:
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    return Q if np.linalg.det(Q) > 0 else -Q


def _body(rng: np.random.Generator, name: str, mass: float | None = None, whole: bool = False) -> dict:
    """A body with a physically consistent inertia: a random box, rotated half of the time; ``mass=0``: a
    massless body (no inertia either).  ``whole``: whole numbers (the symbolic context keeps them exact,
    so that constants such as ``1.0/2.0`` reach the printers)."""
    if whole:
        m = float(rng.integers(1, 5)) if mass is None else mass
        moments = [(1, 1, 1), (2, 2, 3), (2, 3, 4), (3, 4, 5)][int(rng.integers(0, 4))]
        com = [0.0, 0.0, 0.0] if rng.random() < 0.5 else rng.integers(-1, 2, 3).astype(float).tolist()
        inertia = np.diag(moments).astype(float) * (m > 0)
        return {"name": name, "mass": m, "com": com, "inertia": inertia.tolist()}
    m = float(rng.uniform(0.3, 5.0)) if mass is None else mass
    com = [0.0, 0.0, 0.0] if rng.random() < 0.3 else rng.normal(0, 0.1, 3).round(4).tolist()
    a, b, c = rng.uniform(0.05, 0.5, 3)
    d = np.diag([b * b + c * c, a * a + c * c, a * a + b * b]) * m / 12
    inertia = d
    if rng.random() < 0.5:
        R = _rotation(rng)
        inertia = R @ d @ R.T
    inertia = (inertia + inertia.T) / 2
    return {"name": name, "mass": m, "com": com, "inertia": inertia.tolist()}


def _axis(rng: np.random.Generator) -> list[float]:
    if rng.random() < 0.5:
        return (np.eye(3)[rng.integers(0, 3)] * rng.choice([-1.0, 1.0])).tolist()
    a = rng.normal(size=3)
    return (a / np.linalg.norm(a)).tolist()


def _joint(rng: np.random.Generator, name: str, kind: str, offsets: bool = True, whole: bool = False) -> dict:
    joint = {"name": name, "type": kind}
    if kind != "fixed":
        joint["axis"] = np.eye(3)[int(rng.integers(0, 3))].tolist() if whole else _axis(rng)
    if offsets and rng.random() < 0.7:
        xyz = rng.integers(-1, 2, 3).astype(float) if whole else rng.normal(0, 0.3, 3).round(4)
        joint["xyz"] = xyz.tolist()
    if offsets and not whole and rng.random() < 0.5:
        joint["rpy"] = rng.uniform(-3.1, 3.1, 3).round(4).tolist()
    return joint


def _tree(rng: np.random.Generator, name: str, base: str, n_bodies: int, kinds: list[str],
          p_kinds: list[float], massless: float = 0.4, offsets: bool = True, gravity: bool = True,
          whole: float = 0.3) -> dict:
    """A random tree of ``n_bodies``; ``whole``: the probability that a body has whole-number values."""
    # massless bodies where the loader allows them: a fixed base, a body on a fixed joint
    bodies = [_body(rng, "b0", 0.0 if base == "fixed" and rng.random() < massless else None,
                    rng.random() < whole)]
    for i in range(1, n_bodies):
        w = rng.random() < whole
        joint = _joint(rng, f"j{i}", str(rng.choice(kinds, p=p_kinds)), offsets, w)
        b = _body(rng, f"b{i}", 0.0 if joint["type"] == "fixed" and rng.random() < massless else None, w)
        # a tree: any earlier body is a parent (a chain when it is always the last one)
        b["parent"] = f"b{int(rng.integers(0, i)) if rng.random() < 0.6 else i - 1}"
        b["joint"] = joint
        bodies.append(b)
    doc = {"name": name, "base": base, "bodies": bodies}
    if gravity and rng.random() < 0.6:
        doc["gravity"] = rng.normal(0, 5, 3).round(3).tolist()
    if rng.random() < 0.4:
        doc["frames"] = [{"name": "tcp", "body": f"b{int(rng.integers(0, n_bodies))}",
                          "xyz": rng.normal(0, 0.2, 3).round(4).tolist(),
                          "rpy": rng.uniform(-3, 3, 3).round(4).tolist()}]
    return doc


#: robots with constant or zero outputs: (name, base, bodies, joint kinds, offsets)
SPECIAL = [
    ("one_prismatic_fixed", "fixed", 2, ["prismatic"], True),    # issue 21 item 12, as reported
    ("one_prismatic_free", "free", 2, ["prismatic"], True),
    ("one_revolute_plain", "fixed", 2, ["revolute"], False),     # axis-aligned, no offsets: M constant
    ("prismatic_chain", "fixed", 4, ["prismatic"], False),       # every output but the jacobians constant
    ("prismatic_tree_free", "free", 5, ["prismatic"], True),
    ("free_body", "free", 1, ["revolute"], True),                # no joint at all
    ("fixed_only", "fixed", 3, ["fixed"], True),                 # no moving joint: loader decides
    ("prismatic_fixed_mix", "free", 4, ["prismatic", "fixed"], False),
]


def robot_doc(index: int) -> dict:
    """The robot file (as a dict) of fuzz case ``index``: the :data:`SPECIAL` cases first, then random."""
    rng = np.random.default_rng(21_000 + index)
    if index < len(SPECIAL):
        name, base, n, kinds, offsets = SPECIAL[index]
        p = [1.0 / len(kinds)] * len(kinds)
        doc = _tree(rng, f"fz{index}_{name}", base, n, kinds, p, massless=0.0, offsets=offsets,
                    gravity=offsets, whole=1.0 if index < 2 else 0.5)
        if not offsets:   # axis-aligned joints: terms vanish
            for b in doc["bodies"][1:]:
                if "axis" in b["joint"]:
                    b["joint"]["axis"] = np.eye(3)[int(rng.integers(0, 3))].tolist()
        return doc
    base = "free" if rng.random() < 0.5 else "fixed"
    return _tree(rng, f"fz{index}", base, int(rng.choice([2, 3, 4, 5, 6], p=[0.1, 0.2, 0.2, 0.25, 0.25])),
                 ["revolute", "prismatic", "fixed"], [0.5, 0.3, 0.2])


def _profile_of(index: int) -> Profile:
    name = PROFILE_PLAN[index]
    return LANES if name == "lanes" else get_profile(name)


#: the profile each case is compiled with (index -> profile name)
PROFILE_PLAN = (["lanes", "lanes", "debug", "lanes", "fast", "lanes", "lanes", "portable"]
                + ["debug", "debug", "debug", "fast", "debug", "lanes", "debug", "portable", "debug", "lanes",
                   "fast", "debug", "lanes", "debug", "fast", "debug", "debug", "debug"])
CASES = list(range(len(PROFILE_PLAN)))


# --------------------------------------------------------------------------------------------------
# the checks
# --------------------------------------------------------------------------------------------------
def _parts(x, n_out: int) -> list[np.ndarray]:
    return [np.asarray(x, dtype=float)] if n_out == 1 else [np.asarray(r, dtype=float) for r in x]


def _errors(got: list[np.ndarray], ref: list[list[np.ndarray]]) -> float:
    """Worst error of ``got`` (per output, states first) against ``ref`` (per state, per output): relative
    to the output's largest reference entry over the states, floored at 1e-6 of the function's largest
    output and at :data:`FLOOR` (an output that is zero in exact arithmetic, e.g. the bias forces of a
    robot whose joints cannot move its centres of mass, is roundoff in a reference built another way)."""
    scales = [max((float(np.max(np.abs(r[k]), initial=0.0)) for r in ref), default=0.0)
              for k in range(len(got))]
    floor = max(1e-6 * max(scales, default=0.0), FLOOR)
    worst = 0.0
    for k, g in enumerate(got):
        scale = max(scales[k], floor) or 1.0
        for i, r in enumerate(ref):
            d = np.abs(g[i] - np.asarray(r[k], dtype=float))
            if not np.all(np.isfinite(d)):
                return float("inf")
            worst = max(worst, float(np.max(d, initial=0.0)) / scale)
    return worst


def _state(ins: dict, spec, i) -> tuple[list, dict]:
    """Positional arguments and keywords of the Python call for state(s) ``i`` (an index or a slice)."""
    args = [ins[a.name][i] for a in spec.inputs if a.name not in ("f_ext", "params")]
    kw = {k: v for k, v in spec.kwargs if k in dict(spec.variant)}
    if spec.fext_input:
        kw["f_ext"] = ins["f_ext"][i]
    if any(a.name == "params" for a in spec.inputs):
        kw["params"] = ins["params"][i]
    return args, kw


def check_module(module, robot, rng: np.random.Generator) -> list[str]:
    """Every default function of ``module`` (see the module docstring); the list of failures."""
    ins = random_inputs(robot, STATES, rng)
    bad: list[str] = []
    specs = [e for s in function_table(robot) for e in expand_family(s)]
    assert specs, f"{robot.name}: no function"
    for spec in specs:
        assert hasattr(module, spec.api), f"{robot.name}: module lacks {spec.api}"
        fn = getattr(module, spec.api)
        n_out = len(spec.outputs)
        what = f"{robot.name} {spec.name}{dict(spec.variant) or ''}"
        args, kw = _state(ins, spec, slice(None))
        batch = _parts(fn(*args, **kw), n_out)
        # the reference and the algorithm's float run
        reg = spec.registration
        ref_fn, alg_fn = reference_function(reg), algorithm(spec.algorithm)
        refs, algs = [], []
        for i in range(CHECKED):
            pos, _ = _state(ins, spec, i)
            akw = dict(spec.kwargs)
            if spec.fext_input:
                akw["f_ext"] = ins["f_ext"][i]
            algs.append(_parts(alg_fn(robot, Numeric(), *pos, **akw), n_out))
            if ref_fn is not None:
                refs.append(_parts(ref_fn(robot, *pos, **akw), n_out))
        head = [b[:CHECKED] for b in batch]
        e_alg = _errors(head, algs)
        if not e_alg <= TOL:
            bad.append(f"{what}: algorithm error {e_alg:.2e}")
        if ref_fn is not None:
            tol = reg.reference_tol if reg.reference_tol is not None else TOL
            e_ref = _errors(head, refs)
            if not e_ref <= tol:
                bad.append(f"{what}: reference error {e_ref:.2e} (tolerance {tol:g})")
        # the batch (SIMD lanes, remainder) against single-state calls, bit for bit
        for i in range(STATES):
            pos, skw = _state(ins, spec, i)
            one = _parts(fn(*pos, **skw), n_out)
            if not all(np.array_equal(o, b[i]) for o, b in zip(one, batch)):
                gap = max(float(np.max(np.abs(o - b[i]), initial=0)) for o, b in zip(one, batch))
                bad.append(f"{what}: batch row {i} differs from the single call (max {gap:.2e})")
                break
        # out= arrays (the full-writing functions), batched and single
        outs = tuple(np.full_like(b, np.nan) for b in batch)
        fn(*args, **kw, out=outs if n_out > 1 else outs[0])
        if not all(np.array_equal(o, b) for o, b in zip(outs, batch)):
            bad.append(f"{what}: batched out= differs")
        pos, skw = _state(ins, spec, 0)
        outs1 = tuple(np.full_like(b[0], np.nan) for b in batch)
        fn(*pos, **skw, out=outs1 if n_out > 1 else outs1[0])
        if not all(np.array_equal(o, b[0]) for o, b in zip(outs1, batch)):
            bad.append(f"{what}: single out= differs")
        if "triangle" in inspect.signature(fn).parameters:
            upper = _parts(fn(*args, **kw, triangle="upper"), n_out)
            want = [np.triu(b) for b in batch]
            if not all(np.array_equal(u, w) for u, w in zip(upper, want)):
                bad.append(f"{what}: triangle='upper' (batched) differs from the full result's triangle")
            one = _parts(fn(*pos, **skw, triangle="upper"), n_out)
            if not all(np.array_equal(u, w[0]) for u, w in zip(one, want)):
                bad.append(f"{what}: triangle='upper' (single) differs from the full result's triangle")
    return bad


@pytest.fixture(scope="module")
def fuzz_dir(request, tmp_path_factory):
    return module_cache_dir(request, tmp_path_factory, "soadyn_compile_fuzz")


@requires_cc
@pytest.mark.parametrize("index", CASES, ids=lambda i: f"{i}-{PROFILE_PLAN[i]}")
def test_accepted_robot_compiles_and_is_right(index, fuzz_dir, tmp_path):
    doc = robot_doc(index)
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    try:
        robot = soadyn.load_robot(path)
    except RobotFileError as e:
        # the generator writes only physically valid robots (the fuzz must not shrink unnoticed); a refusal
        # is at least one line naming the file (the loader's contract)
        text = str(e)
        assert "\n" not in text and str(path.name) in text, text
        pytest.fail(f"a valid robot was refused by the loader: {text}")
    module = soadyn.compile(robot, fuzz_dir, profile=_profile_of(index), progress=False)
    bad = check_module(module, robot, np.random.default_rng(7 + index))
    assert not bad, "\n".join(bad)


def test_generator_covers_the_space():
    """The cases span what the docstring promises (so that the fuzz cannot shrink unnoticed)."""
    docs = [robot_doc(i) for i in CASES]
    kinds = [b["joint"]["type"] for d in docs for b in d["bodies"][1:]]
    axes = [b["joint"]["axis"] for d in docs for b in d["bodies"][1:] if "axis" in b["joint"]]
    aligned = sum(1 for a in axes if sorted(np.abs(a)) == [0.0, 0.0, 1.0])
    trees = sum(1 for d in docs if len({b.get("parent") for b in d["bodies"][1:]})
                < len(d["bodies"]) - 1)
    assert {kinds.count(k) > 3 for k in ("revolute", "prismatic", "fixed")} == {True}
    assert 5 < aligned < len(axes) - 5
    assert trees >= 5
    assert {d["base"] for d in docs} == {"free", "fixed"}
    assert {len(d["bodies"]) for d in docs} == set(range(1, 7))
    assert any(b["mass"] == 0.0 for d in docs for b in d["bodies"])
    assert len(PROFILE_PLAN) == 26 and {p: PROFILE_PLAN.count(p) for p in set(PROFILE_PLAN)} == {
        "debug": 12, "lanes": 8, "fast": 4, "portable": 2}


@requires_cc
@pytest.mark.parametrize("index", [1, 4])
def test_verify_accepts_exact_zero_outputs(index, fuzz_dir, tmp_path):
    """``soadyn verify`` passes on free-base robots of prismatic joints, whose outputs include blocks that are
    zero in exact arithmetic (the angular coupling block ``Hct`` of the reduced dynamics): the generated code
    derives the exact 0 and the dense reference may leave roundoff there (seen by the fuzz on other states),
    which must not read as a relative error of 1 (:func:`soadyn.codegen.verify.output_errors`)."""
    from soadyn.codegen.verify import verify

    doc = robot_doc(index)
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    checks = verify(path, out_dir=fuzz_dir, states=20, tol=1e-10, profile="debug")
    assert len(checks) > 10
    bad = [(c.function, c.err_reference, c.err_algorithm) for c in checks if not c.ok]
    assert not bad, bad


def test_output_errors_floor_keeps_small_outputs_measured():
    """The floor of :func:`output_errors` hides roundoff on an exact zero, not a wrong small output."""
    from soadyn.codegen.verify import output_errors

    big = np.array([10.0, -3.0])
    # an exact zero against roundoff of the reference: tiny error
    assert output_errors([[big, np.zeros(3)]], [[big, np.full(3, 4e-16)]]) < 1e-10
    # a small but nonzero output (1e-4 of the largest) with a wrong sign: a relative error of 2
    small = np.array([1e-3, 2e-3])
    assert output_errors([[big, -small]], [[big, small]]) == pytest.approx(2.0)
    # all-zero reference: absolute
    assert output_errors([[np.array([1e-12])]], [[np.zeros(1)]]) == pytest.approx(1e-12)
