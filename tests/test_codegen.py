"""Code generator: every compiled function against the reference path and the float algorithm, batching,
input validation, the compile cache, atomic writes, determinism and staleness of ``generated/``.

Compiled modules are cached in pytest's cache directory (``.pytest_cache/.../soadyn_modules``) under the
generator's own cache key (robot fingerprint, generator source, compiler flags), so a re-run reuses them
and any change to the generator or the robot recompiles.  ``SOADYN_TEST_FRESH=1`` compiles into a
temporary directory instead.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import symengine as se
from conftest import module_cache_dir, requires_cc

from soadyn import load_robot
from soadyn.cli.regenerate import REPO, example_robots, generate_example
from soadyn.codegen import build, derive, load
from soadyn.codegen.derive import Program
from soadyn.codegen.functions import (
    c_identifier,
    expand_family,
    frame_enum,
    frame_identifiers,
    function_table,
)
from soadyn.codegen.optimise import count_ops, optimise
from soadyn.codegen.pipeline import compile_robot, generate, resolve_robot
from soadyn.codegen.profiles import IEEE_FLAGS, Profile
from soadyn.codegen.trig import PRELUDE as TRIG_PRELUDE
from soadyn.codegen.verify import check_function, format_checks, random_inputs, reference_function, rel_err
from soadyn.reference import dense as reference

TEST_ARM = REPO / "examples" / "test_arm.yaml"
TOL = 1e-10

TINY_YAML = """\
name: tiny_arm
base: fixed
gravity: [0.0, 0.0, -9.81]
bodies:
  - name: root
    mass: 0.0
    inertia: {ixx: 0.0, iyy: 0.0, izz: 0.0}
  - name: upper
    parent: root
    joint: {name: shoulder, type: revolute, axis: [0, 1, 0], xyz: [0.1, 0.0, 0.3]}
    mass: 1.2345678901234567
    com: [0.21, 0.0, 0.013]
    inertia: {ixx: 0.0123, iyy: 0.0456, izz: 0.0421, ixy: 0.0011}
  - name: lower
    parent: upper
    joint: {name: elbow, type: revolute, axis: [0, 0, 1], xyz: [0.4, 0.0, 0.0], rpy: [0.3, 0.0, 0.0]}
    mass: 0.7
    com: [0.15, 0.01, 0.0]
    inertia: {ixx: 0.004, iyy: 0.017, izz: 0.016}
"""


# --------------------------------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def module_dir(cc, request, tmp_path_factory) -> Path:
    if os.environ.get("SOADYN_TEST_FRESH") or getattr(request.config, "cache", None) is None:
        return tmp_path_factory.mktemp("soadyn_modules")
    return Path(module_cache_dir(request, tmp_path_factory, "soadyn_modules"))


@pytest.fixture(scope="session")
def arm_free(module_dir):
    robot, _ = resolve_robot(TEST_ARM)
    return robot, compile_robot(TEST_ARM, module_dir, progress=False)


@pytest.fixture(scope="session")
def arm_fixed(module_dir):
    robot, _ = resolve_robot(TEST_ARM, "fixed")
    return robot, compile_robot(TEST_ARM, module_dir, "fixed", progress=False)


@pytest.fixture(scope="session")
def tiny_path(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("tiny") / "tiny_arm.yaml"
    p.write_text(TINY_YAML)
    return p


@pytest.fixture(scope="session")
def tiny(tiny_path, module_dir):
    robot, _ = resolve_robot(tiny_path)
    return robot, compile_robot(tiny_path, module_dir, progress=False)


# --------------------------------------------------------------------------------------------------
# every function against the reference path and the float run of its algorithm
# --------------------------------------------------------------------------------------------------
CORE_APIS = ("center_of_mass", "mass_matrix", "bias_forces", "inverse_dynamics", "forward_dynamics",
             "mass_matrix_inverse", "innovations_factors", "momentum", "kinetic_energy", "jacobian")


@pytest.mark.parametrize("which", ["arm_free", "arm_fixed", "tiny"])
def test_every_function_matches_reference_and_algorithm(which, request):
    """Every C function, and every frame of every frame family, against the reference path."""
    robot, module = request.getfixturevalue(which)
    table = function_table(robot)
    assert {s.api for s in table} >= set(CORE_APIS)
    families = [s for s in table if s.is_family]
    fixed = {"jacobian_local", "jacobian_world", "frame_pose"}
    assert {s.name for s in families} == (fixed | {"generalized_jacobian", "momentum_frame_twist"}
                                          if robot.is_free else fixed)
    every_frame = [*robot.body_names, *robot.frame_names]
    for fam in families:
        assert list(fam.frames) == every_frame
    specs = [e for s in table for e in expand_family(s)]
    assert len(specs) == len(table) + len(families) * (len(every_frame) - 1)
    ins = random_inputs(robot, 100, np.random.default_rng(7))
    failures = []
    for spec in specs:
        check = check_function(module, robot, spec, ins, TOL)
        if spec.api in CORE_APIS or spec.api == "generalized_jacobian":
            assert check.err_reference is not None, f"no reference function for {spec.api}"
        assert check.err_algorithm is not None
        if not check.ok:
            failures.append((spec.name, check.err_reference, check.err_algorithm))
    assert not failures, failures


def test_reference_check_detects_a_wrong_result(arm_free):
    """The comparison is not vacuous: a perturbed module output is caught."""
    robot, module = arm_free
    spec = next(s for s in function_table(robot) if s.name == "mass_matrix")
    ins = random_inputs(robot, 3, np.random.default_rng(1))

    class Broken:
        @staticmethod
        def mass_matrix(q):
            M = module.mass_matrix(q)
            M[..., 0, 1] += 1e-8 * np.abs(M).max()
            return M

    check = check_function(Broken, robot, spec, ins, TOL)
    assert not check.ok and check.err_reference > 1e-9


def test_quaternion_norm_is_divided_out(arm_free):
    robot, module = arm_free
    q = robot.random_configuration(np.random.default_rng(3))
    q2 = q.copy()
    q2[3:7] *= 3.7
    for f in (module.mass_matrix, module.center_of_mass):
        assert rel_err(f(q2), f(q)) < 1e-14
    J1 = module.jacobian(q, "tcp", world_aligned=True)
    J2 = module.jacobian(q2, "tcp", world_aligned=True)
    assert rel_err(J2, J1) < 1e-14


def test_module_metadata(arm_free, arm_fixed):
    robot, module = arm_free
    assert (module.nq, module.nv, module.n_bodies) == (robot.nq, robot.nv, robot.n_bodies)
    assert module.joint_names == robot.joint_names
    assert module.body_names == list(robot.body_names)
    assert module.frame_names == robot.frame_names
    assert module.name == "scratch_tree" and module.base == "free"
    rfixed, mfixed = arm_fixed
    assert mfixed.module_name == "scratch_tree_fixed" and mfixed.base == "fixed" and mfixed.nq == rfixed.nq
    assert not hasattr(mfixed, "generalized_jacobian")
    assert all(v["total"] > 0 for k, v in module.op_counts.items() if "mass_matrix" in k)
    for r, m in ((robot, module), (rfixed, mfixed)):
        assert isinstance(m.gravity, np.ndarray) and m.gravity.shape == (3,)
        assert np.array_equal(m.gravity, r.gravity)
        assert m.total_mass == pytest.approx(sum(i.mass for i in r.inertias), rel=1e-15)
        assert m.robot_file_sha256 == hashlib.sha256(TEST_ARM.read_bytes()).hexdigest()
    assert module.total_mass > 0


def test_module_metadata_of_a_robot_without_file(tiny, module_dir):
    robot, _ = tiny
    import dataclasses

    r = dataclasses.replace(robot, name="tiny_nofile", source_hash="")
    m = compile_robot(r, module_dir, functions=["center_of_mass"], progress=False)
    assert m.robot_file_sha256 is None and m.gravity.tolist() == [0.0, 0.0, -9.81]
    assert m.total_mass == pytest.approx(1.2345678901234567 + 0.7, rel=1e-15)


# --------------------------------------------------------------------------------------------------
# batching and input handling
# --------------------------------------------------------------------------------------------------
def test_batched_equals_scalar(arm_free):
    robot, m = arm_free
    ins = random_inputs(robot, 5, np.random.default_rng(11))
    q, v, a, tau, fx = ins["q"], ins["v"], ins["a"], ins["tau"], ins["f_ext"]
    calls = [
        (m.mass_matrix, (q,), {}), (m.center_of_mass, (q,), {}), (m.kinetic_energy, (q, v), {}),
        (m.inverse_dynamics, (q, v, a), {}), (m.inverse_dynamics, (q, v, a), {"f_ext": fx}),
        (m.forward_dynamics, (q, v, tau), {"f_ext": fx}), (m.innovations_factors, (q,), {}),
        (m.jacobian, (q, "l2"), {"world_aligned": True}), (m.generalized_jacobian, (q, "tcp"), {}),
    ]
    for f, args, kw in calls:
        batch = f(*args, **kw)
        for i in range(len(q)):
            one = f(*[x[i] if isinstance(x, np.ndarray) else x for x in args],
                    **{k: x[i] if isinstance(x, np.ndarray) else x for k, x in kw.items()})
            if isinstance(batch, tuple):
                for b, o in zip(batch, one):
                    assert np.array_equal(b[i], o)
            else:
                assert np.array_equal(batch[i], one), f.__name__
    assert isinstance(m.kinetic_energy(q[0], v[0]), float)
    assert m.kinetic_energy(q, v).shape == (5,)
    assert m.mass_matrix(q).shape == (5, robot.nv, robot.nv)
    assert m.mass_matrix(np.empty((0, robot.nq))).shape == (0, robot.nv, robot.nv)


def test_f_ext_zero_equals_no_f_ext(arm_free):
    robot, m = arm_free
    ins = random_inputs(robot, 4, np.random.default_rng(5))
    zero = np.zeros((4, robot.n_bodies, 6))
    assert rel_err(m.inverse_dynamics(ins["q"], ins["v"], ins["a"], f_ext=zero),
                   m.inverse_dynamics(ins["q"], ins["v"], ins["a"])) < 1e-14
    # and a non-zero wrench changes the result
    assert rel_err(m.inverse_dynamics(ins["q"], ins["v"], ins["a"], f_ext=ins["f_ext"]),
                   m.inverse_dynamics(ins["q"], ins["v"], ins["a"])) > 1e-3


def test_input_conversion(arm_free):
    robot, m = arm_free
    q = robot.random_configuration(np.random.default_rng(2))
    ref = m.mass_matrix(q)
    # non-contiguous views, lists, float32 and integers are accepted
    big = np.zeros((robot.nq, 2))
    big[:, 0] = q
    assert np.array_equal(m.mass_matrix(big[:, 0]), ref)
    assert np.array_equal(m.mass_matrix(list(q)), ref)
    qi = np.round(q * 3).astype(np.int64)
    qi[3:7] = [0, 0, 0, 1]
    assert np.array_equal(m.mass_matrix(qi), m.mass_matrix(qi.astype(float)))
    Q = np.stack([q, q, q])
    assert np.array_equal(m.mass_matrix(Q[::2]), np.stack([ref, ref]))
    assert np.array_equal(m.mass_matrix(np.asfortranarray(Q))[1], ref)
    # NaN and inf are refused, naming the input and the entry (issue 21: one rule for every function)
    qn = q.copy()
    qn[-1] = np.nan
    with pytest.raises(ValueError, match=
                       rf"mass_matrix: q holds a non-finite value \(nan at index {len(q) - 1}\)"):
        m.mass_matrix(qn)


@pytest.mark.parametrize("bad, match", [
    (lambda r: np.zeros(r.nq - 1), "shape"),
    (lambda r: np.zeros((2, 3, r.nq)), "shape"),
    (lambda r: np.zeros(r.nq, dtype=complex), "real"),
    (lambda r: np.array([None] * r.nq, dtype=object), "real"),
    (lambda r: np.array(["1"] * r.nq), "real"),
    (lambda r: np.ones(r.nq, dtype=bool), "real"),
])
def test_bad_inputs_raise_value_error(arm_free, bad, match):
    robot, m = arm_free
    with pytest.raises(ValueError, match=match):
        m.mass_matrix(bad(robot))


def test_bad_call_arguments(arm_free):
    robot, m = arm_free
    ins = random_inputs(robot, 3, np.random.default_rng(0))
    q, v = ins["q"], ins["v"]
    with pytest.raises(ValueError, match="batch"):
        m.bias_forces(q, v[:2])
    with pytest.raises(ValueError, match="batch"):
        m.bias_forces(q[0], v)
    with pytest.raises(ValueError, match="f_ext"):
        m.inverse_dynamics(q[0], v[0], v[0], f_ext=np.zeros((robot.n_bodies, 5)))
    with pytest.raises(ValueError, match="unknown frame 'nope'"):
        m.jacobian(q[0], "nope")
    with pytest.raises(ValueError, match="unknown frame"):
        m.generalized_jacobian(q[0], 3)


# --------------------------------------------------------------------------------------------------
# cache, atomic writes, compile errors
# --------------------------------------------------------------------------------------------------
def test_second_compile_does_no_work(tiny, tiny_path, module_dir):
    robot, first = tiny
    d0, c0 = derive.STATS["derivations"], build.STATS["compilations"]
    again = compile_robot(tiny_path, module_dir, progress=False)
    assert (derive.STATS["derivations"], build.STATS["compilations"]) == (d0, c0)
    assert again is first
    # load() of the directory gives the same module too
    assert load(Path(first.__file__).parent) is first


@requires_cc
def test_changed_robot_recompiles_and_failures_leave_module_intact(tmp_path, monkeypatch):
    path = tmp_path / "tiny_arm.yaml"
    path.write_text(TINY_YAML)
    out = tmp_path / "out"
    m1 = compile_robot(path, out, progress=False)
    q = np.array([0.3, -0.7])
    M1 = m1.mass_matrix(q)
    path.write_text(TINY_YAML.replace("mass: 0.7", "mass: 0.9"))
    d0 = derive.STATS["derivations"]
    m2 = compile_robot(path, out, progress=False)
    assert derive.STATS["derivations"] > d0
    assert m2 is not m1 and not np.allclose(m2.mass_matrix(q), M1)
    assert np.array_equal(m1.mass_matrix(q), M1)  # the old module object keeps working
    ref = load_robot(path)
    from soadyn.reference import dense as reference

    assert rel_err(m2.mass_matrix(q), reference.mass_matrix(ref, q)) < TOL
    before = sorted(p.name for p in (out / "tiny_arm").iterdir())
    # a failing compiler: clear error naming it, the existing module untouched, no temporary left over
    path.write_text(TINY_YAML.replace("mass: 0.7", "mass: 1.1"))
    monkeypatch.setenv("CC", "false")
    with pytest.raises(build.CompileError, match="'false' failed"):
        compile_robot(path, out, progress=False)
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(build.CompileError, match="not found"):
        compile_robot(path, out, progress=False)
    assert sorted(p.name for p in (out / "tiny_arm").iterdir()) == before
    assert [p.name for p in out.iterdir()] == ["tiny_arm"]


def test_cache_key_hashes_the_generator_manifest_only():
    from soadyn.codegen.pipeline import generator_files

    names = {n for n, _ in generator_files()}
    for used in ("soadyn.codegen/derive.py", "soadyn.codegen/optimise.py", "soadyn.codegen/emit.py",
                 "soadyn.symbolic.algorithms/jacobians.py", "soadyn.symbolic.algorithms/kinematics.py",
                 "soadyn.symbolic/scalar.py", "soadyn.symbolic/spatial.py", "soadyn.model/robot.py",
                 "soadyn.templates/module.c.j2", "soadyn.templates/__init__.py.j2"):
        assert used in names, used
    for unused in ("soadyn.model/robotfile.py", "soadyn.model/urdf.py", "soadyn.cli/commands.py",
                   "soadyn.codegen/verify.py", "soadyn.runtime/simulate.py", "soadyn.reference/dense.py",
                   "soadyn.structure/operations.py"):
        assert unused not in names, unused


_MANIFEST_PROBE = """
import sys
from soadyn.model import read_robot_file
from soadyn.reference import dense as reference
robot = read_robot_file(sys.argv[1])
setup = {m for m in sys.modules if m.startswith("soadyn")}
from soadyn.codegen.derive import derive, rename_reserved
from soadyn.codegen.emit import emit_module
from soadyn.codegen.functions import function_table
from soadyn.codegen.optimise import optimise
specs = function_table(robot)[:1]
emit_module(robot, "probe", specs, [optimise(rename_reserved(derive(robot, s), s)) for s in specs])
print(" ".join(sorted(setup)))
print(" ".join(sorted(m for m in sys.modules if m.startswith("soadyn") and m not in setup)))
"""


def test_generator_loads_only_manifest_files(tmp_path):
    """Deriving, optimising and emitting a function loads no soadyn module outside the generator manifest
    (a fresh interpreter; modules already loaded to read the robot file do not count, except that the
    robot model itself must be in the manifest)."""
    import subprocess
    import sys

    from soadyn.codegen.pipeline import manifest_modules

    loop_robot = REPO / "examples" / "seed004_example1.yaml"
    out = subprocess.run([sys.executable, "-c", _MANIFEST_PROBE, str(loop_robot)], capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout.splitlines()
    setup, loaded = set(out[0].split()), set(out[1].split())
    manifest = manifest_modules()
    assert {"soadyn.symbolic.algorithms.closed_loop", "soadyn.codegen.emit"} <= loaded
    assert loaded - manifest == set(), "generator modules missing from GENERATOR_MANIFEST"
    assert "soadyn.model.robot" in setup and "soadyn.model.robot" in manifest


def test_functions_option(tiny, tiny_path, module_dir):
    robot, full = tiny
    m = compile_robot(tiny_path, module_dir / "subset", functions=["forward_dynamics", "jacobian"],
                      progress=False)
    assert hasattr(m, "forward_dynamics") and hasattr(m, "jacobian") and not hasattr(m, "mass_matrix")
    assert sorted(m.op_counts) == ["tiny_arm_forward_dynamics", "tiny_arm_forward_dynamics_fext",
                                   "tiny_arm_jacobian_local", "tiny_arm_jacobian_world"]
    q, v, tau = np.array([0.4, -0.2]), np.array([0.3, 0.1]), np.array([1.0, -2.0])
    assert np.array_equal(m.forward_dynamics(q, v, tau), full.forward_dynamics(q, v, tau))
    assert np.array_equal(m.jacobian(q, "lower"), full.jacobian(q, "lower"))
    with pytest.raises(ValueError, match=r"'mass_matrx'.*mass_matrix"):
        compile_robot(tiny_path, module_dir / "subset", functions="mass_matrx", progress=False)


@requires_cc
def test_interrupt_leaves_no_half_written_module(tmp_path, monkeypatch):
    path = tmp_path / "tiny_arm.yaml"
    path.write_text(TINY_YAML)
    out = tmp_path / "out"

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "build_extension", interrupted)
    with pytest.raises(KeyboardInterrupt):
        compile_robot(path, out, progress=False)
    assert list(out.iterdir()) == []


def test_module_importable_from_out_dir(tiny, module_dir):
    import subprocess
    import sys

    code = (f"import sys; sys.path.insert(0, {str(module_dir)!r}); import tiny_arm; "
            "print(tiny_arm.nq, tiny_arm.mass_matrix([0.1, 0.2]).shape)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["2", "(2,", "2)"]


# --------------------------------------------------------------------------------------------------
# emitted C
# --------------------------------------------------------------------------------------------------
def test_generation_is_deterministic_and_c_is_plain(tiny):
    robot, _ = tiny
    a = generate(robot)
    b = generate(robot)
    assert a.files == b.files
    c = a.files["tiny_arm.c"]
    # no static data; the only static things are the functions of the sin/cos prelude (soadyn.codegen.trig)
    assert c.count(TRIG_PRELUDE) == 1
    assert "static" not in c.replace(TRIG_PRELUDE, "") and "malloc" not in c
    # no pow() except squares (which compilers turn into a multiplication)
    assert all(m == "2" for m in re.findall(r"pow\([^,()]+, ([^)]+)\)", c))
    # constants are printed exactly (round-trip), not rounded to 15 digits
    from soadyn.codegen.emit import emit_function
    from soadyn.codegen.functions import Arg, FunctionSpec

    x = se.Symbol("q_0")
    prog = optimise(Program("f", [("q", [x])], [], [("o", [x * se.RealDouble(1.2345678901234567)])]))
    spec = FunctionSpec("f", "f", (Arg("q", (1,)),), (Arg("o", (1,)),), "f")
    from soadyn.codegen.printer import CPrinter

    assert "1.2345678901234567" in "\n".join(CPrinter().lines(emit_function(spec, prog, "p_").body))
    for name in ("mass_matrix", "forward_dynamics_fext"):
        assert f"void tiny_arm_{name}(" in c and f"void tiny_arm_{name}_batch(int n," in c
        assert f"void tiny_arm_{name}(" in a.files["tiny_arm.h"]
    h = a.files["tiny_arm.h"]
    for name in ("jacobian_local", "jacobian_world"):
        assert f"int tiny_arm_{name}(const double *q, int frame, double *J);" in h
        assert f"int tiny_arm_{name}_batch(int n, const double *q, int frame, double *J);" in h
    assert "generalized_jacobian" not in c                      # fixed base
    assert not re.search(r"jacobian_(root|upper|lower)", c)     # no per-frame functions any more
    assert f"Robot file sha256: {robot.source_hash}" in c


# --------------------------------------------------------------------------------------------------
# frame families
# --------------------------------------------------------------------------------------------------
def test_frame_family_c_layout(arm_free):
    """One C function per family: enum of frame ids in the header, shared prefix, one case per frame, op
    counts of prefix and cases in the header, and fewer operations than one function per frame."""
    robot, module = arm_free
    gen = generate(robot, "scratch_tree", functions=["jacobian", "generalized_jacobian"])
    h, c = gen.files["scratch_tree.h"], gen.files["scratch_tree.c"]
    enum = frame_enum(robot, "scratch_tree")
    assert [n for n, _, _ in enum] == [*robot.body_names, *robot.frame_names]
    assert [i for _, _, i in enum] == list(range(len(enum)))
    for name, enumerator, i in enum:
        assert re.search(rf"^\s+{enumerator} = {i},", h, re.M), enumerator
        assert module.frame_ids[name] == i
    assert f"#define SCRATCH_TREE_N_FRAMES {len(enum)}" in h
    assert "SCRATCH_TREE_FRAME_TCP" in h and "SCRATCH_TREE_FRAME_BASE" in h
    fams = {f.cname: f for f in gen.functions}
    assert set(fams) == {"scratch_tree_jacobian_local", "scratch_tree_jacobian_world",
                         "scratch_tree_generalized_jacobian"}
    for f in fams.values():
        body = c.split(f.signature)[1].split("\n}\n")[0]
        assert body.count("switch (frame)") == 1
        assert [m for m in re.findall(r"case (\w+):", body)] == [e for _, e, _ in enum]
        assert "default:\n        return 1;" in body
        # prefix + cases = the whole function; the header states prefix and per-case counts
        assert f.prefix_ops["total"] + sum(o["total"] for _, _, o in f.case_ops) == f.ops["total"]
        assert f"shared prefix {f.prefix_ops['total']}" in h
        per_frame = module.frame_op_counts[f.cname]
        assert per_frame["prefix"] == f.prefix_ops["total"]
        cases = {n: o["total"] for n, _, o in f.case_ops}
        assert {k: v for k, v in per_frame.items() if k != "prefix"} == cases
    # sharing: the family costs less than the frames derived one by one
    from soadyn.codegen.derive import derive as derive_one
    from soadyn.codegen.derive import rename_reserved

    fam = next(s for s in function_table(robot) if s.name == "generalized_jacobian")
    separate = sum(optimise(rename_reserved(derive_one(robot, e), e)).ops["total"]
                   for e in expand_family(fam))
    assert fams["scratch_tree_generalized_jacobian"].ops["total"] < 0.5 * separate


def test_frame_family_status_and_names(arm_free):
    """The C entry points return 0 for a valid frame id and 1 (outputs untouched) for an invalid one; the
    Python wrapper takes names only and lists the valid ones."""
    robot, m = arm_free
    lib = m._lib
    ffi = m._ffi
    q = robot.random_configuration(np.random.default_rng(4))
    J = np.full((6, robot.nv), 7.0)
    fq, fJ = ffi.from_buffer("double[]", q), ffi.from_buffer("double[]", J)
    n = len(m.frame_ids)
    for bad in (-1, n, n + 5):
        assert lib.scratch_tree_jacobian_local(fq, bad, fJ) == 1
        assert lib.scratch_tree_jacobian_world_batch(1, fq, bad, fJ) == 1
        assert lib.scratch_tree_generalized_jacobian(fq, bad, fJ) == 1
    assert np.all(J == 7.0)
    tcp = m.frame_ids["tcp"]
    assert lib.scratch_tree_jacobian_local(fq, tcp, fJ) == 0
    assert np.array_equal(J, m.jacobian(q, "tcp"))
    assert lib.scratch_tree_jacobian_local_batch(1, fq, tcp, fJ) == 0
    assert lib.SCRATCH_TREE_FRAME_TCP == tcp
    with pytest.raises(ValueError, match=r"unknown frame 'TCP'.*tcp"):
        m.jacobian(q, "TCP")
    with pytest.raises(ValueError, match="unknown frame"):
        m.jacobian(q, tcp)                       # ids are for C; Python takes names
    with pytest.raises(ValueError, match="unknown frame"):
        m.generalized_jacobian(q, ["tcp"])


#: a build that splits every frame family into prefix stages and per-frame case functions (values through
#: the work array), at -O0 to keep the compile short
SPLIT_PROFILE = Profile("split_families", ("-O0", *IEEE_FLAGS), stage_ops=40, lanes=1)


@requires_cc
@pytest.mark.parametrize("base", ["free", "fixed"])
@pytest.mark.parametrize("profile", ["debug", "split"])
def test_frame_family_every_frame_into_garbage(module_dir, base, profile):
    """Every frame of a branched tree (two branches off the base, a fixed tool body, a named frame): the
    local and world Jacobians and the generalised Jacobian against the reference path, written into
    ``out=`` buffers that hold garbage (NaN, huge numbers) for one state and a batch; a frame's case
    computes only what that frame needs and writes every element, the zeros of the joints off its path
    as loops.  ``split``: the same through stage
    functions and one C function per frame."""
    robot, _ = resolve_robot(TEST_ARM, base)
    functions = ["jacobian", "generalized_jacobian"] if base == "free" else ["jacobian"]
    m = compile_robot(TEST_ARM, module_dir, base, functions=functions,
                      progress=False, profile=SPLIT_PROFILE if profile == "split" else "debug")
    text = (Path(m.__file__).parent / f"{m.module_name}.c").read_text()
    assert "for (int k = " in text                 # zero runs as loops (the joints off a frame's path)
    rng = np.random.default_rng(11)
    Q = np.stack([robot.random_configuration(rng) for _ in range(3)])
    garbage = [np.nan, 1e300, -7.0]
    assert sorted(m.frame_ids) == sorted([*robot.body_names, *robot.frame_names])
    for frame in m.frame_ids:
        calls = [(f"jacobian {wa}",
                  lambda q, out, f=frame, wa=wa: m.jacobian(q, f, world_aligned=wa, out=out),
                  lambda q, f=frame, wa=wa: reference.jacobian(robot, q, f, wa)) for wa in (False, True)]
        if robot.is_free:
            calls.append(("generalized_jacobian",
                          lambda q, out, f=frame: m.generalized_jacobian(q, f, out=out),
                          lambda q, f=frame: reference.generalized_jacobian(robot, q, f)))
        for what, fn, ref in calls:
            refs = np.stack([ref(q) for q in Q])
            for g in garbage:
                out = np.full(refs.shape[1:], g)
                fn(Q[0], out)
                assert rel_err(out, refs[0]) < TOL, (frame, what, g)
                outs = np.full(refs.shape, g)
                fn(Q, outs)
                assert max(rel_err(o, r) for o, r in zip(outs, refs)) < TOL, (frame, what, g, "batch")


def test_split_cases_copies_and_closure(arm_free):
    """``split_cases``: a quantity needed by every frame is in the prefix; with room to grow, a quantity
    needed by some frames is copied into each of their cases (no frame computes another branch); with
    ``growth=1`` nothing is copied (the old shared prefix); in every case, the prefix and the case define
    everything the case's outputs use, in order."""
    from soadyn.codegen.derive import rename_reserved
    from soadyn.codegen.optimise import split_cases

    robot, _ = arm_free
    for name in ("jacobian_local", "jacobian_world", "generalized_jacobian"):
        spec = next(s for s in function_table(robot) if s.name == name)
        prog = optimise(rename_reserved(derive.derive(robot, spec), spec))
        n = len(spec.frames)
        inputs = {s for _, ss in prog.inputs for s in ss}
        totals = {}
        for growth in (1.0, 2.0, 1e9):
            split = split_cases(prog, n, growth)
            for assigns, outs in split.cases:
                known = set(inputs)
                for t, e in [*split.prefix, *assigns]:
                    assert e.free_symbols <= known, (name, growth, t)
                    known.add(t)
                for _, es in outs:
                    for e in es:
                        assert e.free_symbols <= known, (name, growth)
            total = split.prefix_ops["total"] + sum(o["total"] for o in split.case_ops)
            assert total <= growth * prog.ops["total"]
            totals[growth] = (split, total)
        no_copies, _ = totals[1.0]
        assert no_copies.shared == 1 and no_copies.prefix
        everything, _ = totals[1e9]
        # copying everything needed by fewer than all frames: each call pays only for its frame
        per_call = [everything.prefix_ops["total"] + o["total"] for o in everything.case_ops]
        shared = [no_copies.prefix_ops["total"] + o["total"] for o in no_copies.case_ops]
        assert all(a <= b for a, b in zip(per_call, shared)) and sum(per_call) < sum(shared)


def test_identifiers():
    assert c_identifier("panda-link 1") == "panda_link_1"
    assert c_identifier("3d") == "_3d"
    assert c_identifier("double") == "double_"
    robot, _ = resolve_robot(TEST_ARM)
    ids = frame_identifiers(robot)
    assert len(set(ids.values())) == len(ids) and ids["tcp"] == "tcp"
    # a robot named like a standard-library module must not shadow it when imported
    import dataclasses

    from soadyn.codegen.pipeline import module_name_for

    assert module_name_for(dataclasses.replace(robot, name="json")) == "json_robot"
    assert module_name_for(robot) == "scratch_tree"
    assert module_name_for(robot.with_base("fixed"), "free") == "scratch_tree_fixed"


# --------------------------------------------------------------------------------------------------
# optimiser
# --------------------------------------------------------------------------------------------------
def _program():
    q0, q1, q2 = se.symbols("q_0 q_1 q_2")
    A, B, C, D, E = se.symbols("A B C D E")
    assigns = [(A, q0 * q1 + q2), (B, -A), (C, A * q0**3 + B / se.sqrt(q2) + (q0 + q1) ** -2),
               (D, se.sin(q0) * q1), (E, A)]
    return Program("f", [("q", [q0, q1, q2])], assigns,
                   [("out", [C, B * C, se.Integer(0), q0**5 * q1 + E])])


def _evaluate(program: Program, values: dict[str, float]) -> list[float]:
    env = {se.Symbol(k): v for k, v in values.items()}
    for t, e in program.assignments:
        env[t] = float(e.xreplace(env))
    return [float(e.xreplace(env)) for _, es in program.outputs for e in es]


def test_optimise_preserves_values_and_removes_dead_code():
    p = _program()
    o = optimise(p)
    vals = {"q_0": 0.7, "q_1": -1.3, "q_2": 2.1}
    assert np.allclose(_evaluate(o, vals), _evaluate(p, vals), rtol=1e-14, atol=0)
    targets = {t.name for t, _ in o.assignments}
    assert "D" not in targets            # dead: no output uses it
    assert "B" not in targets and "E" not in targets   # copies (negation, plain) propagated
    for _, e in o.assignments:
        for pw in e.atoms(se.Pow):
            assert pw.args[1] in (2, -1, se.Rational(1, 2))


def test_operation_count_rules():
    x, y, z = se.symbols("x y z")
    prog = lambda *es: Program("f", [], [], [("o", list(es))])  # noqa: E731
    assert count_ops(prog(x + y - z))["add"] == 2
    c = count_ops(prog(-x * y / z))
    assert (c["mul"], c["div"], c["add"]) == (1, 1, 0)        # negation folded
    c = count_ops(prog(2 * x * y / (y + z)))
    assert (c["mul"], c["div"], c["add"]) == (2, 1, 1)
    c = count_ops(prog(x**2 + se.sqrt(y) + se.cos(z)))
    assert (c["mul"], c["sqrt"], c["trig"], c["add"]) == (1, 1, 1, 2)
    assert count_ops(prog(x, se.Integer(3)))["total"] == 0
    c = count_ops(optimise(Program("f", [], [], [("o", [x**5])])))
    assert (c["mul"], c["other"]) == (3, 0)                   # x2 = x*x, x4 = x2*x2, x4*x


def test_cse_reduces_operations():
    x, y = se.symbols("q_0 q_1")
    common = (x + y) * (x - y)
    p = Program("f", [("q", [x, y])], [], [("o", [common * x, common * y, common + 1])])
    assert count_ops(optimise(p))["total"] < count_ops(optimise(p, cse=False))["total"]


# --------------------------------------------------------------------------------------------------
# committed sources in generated/
# --------------------------------------------------------------------------------------------------
#: every committed example is regenerated in memory and compared byte for byte (~7 s in all); the
#: on-demand ones (regenerate.ON_DEMAND, e.g. the 37-DOF robot) are not committed
COMMITTED_EXAMPLES = [p.stem for p in example_robots(REPO / "examples")]


def test_committed_examples_are_the_documented_ones():
    from soadyn.cli.regenerate import ON_DEMAND

    assert set(COMMITTED_EXAMPLES) >= {"test_arm", "tian_wu_3dof", "dimitrov_7dof_rw", "seed004_example1",
                                       "seed004_dual_arm"}
    assert "seed004_four_arm_37dof" not in COMMITTED_EXAMPLES
    assert "seed004_four_arm_37dof.yaml" in ON_DEMAND
    assert "seed004_four_arm_37dof" in [p.stem for p in example_robots(REPO / "examples", True)]


def test_generated_sources_exist_and_match_robot_files():
    examples = example_robots(REPO / "examples")
    assert examples
    for path in examples:
        robot, name = resolve_robot(path)
        c = REPO / "generated" / name / f"{name}.c"
        assert c.is_file(), f"{c} missing: run python -m soadyn.cli.regenerate"
        head = c.read_text(encoding="utf-8")[:2000]
        assert f"Robot fingerprint:  {robot.fingerprint()}" in head, (
            f"{c} is stale ({path.name} changed): run python -m soadyn.cli.regenerate")


@pytest.mark.parametrize("stem", COMMITTED_EXAMPLES)
def test_generated_sources_are_current(stem):
    path = REPO / "examples" / f"{stem}.yaml"
    if not path.is_file():
        pytest.skip(f"{path.name} not in examples/")
    name, files = generate_example(path)
    for fname, text in files.items():
        committed = REPO / "generated" / name / fname
        same = committed.is_file() and committed.read_text(encoding="utf-8") == text
        assert same, f"{committed} is stale: run python -m soadyn.cli.regenerate"  # no MB-sized diff


def test_stale_detection_catches_an_edit(tmp_path):
    from soadyn.cli.regenerate import stale

    ex = tmp_path / "examples"
    ex.mkdir()
    (ex / "tiny_arm.yaml").write_text(TINY_YAML)
    out = tmp_path / "generated"
    assert stale(ex, out) == [f"{out / 'tiny_arm' / 'tiny_arm.c'}: missing",
                              f"{out / 'tiny_arm' / 'tiny_arm.h'}: missing"]
    from soadyn.cli.regenerate import main

    assert main(["--examples", str(ex), "--out", str(out)]) == 0
    assert stale(ex, out) == []
    (ex / "tiny_arm.yaml").write_text(TINY_YAML.replace("mass: 0.7", "mass: 0.8"))
    assert len(stale(ex, out)) == 2
    assert main(["--examples", str(ex), "--out", str(out), "--check"]) == 1
    shutil.rmtree(out)


def test_registry_names_an_independent_reference_for_every_tree_function():
    """Every function of the free and fixed tables is registered; every tree function names a reference in
    soadyn.reference that resolves to a function; only the partition-dependent closed-loop ones (and their
    derivatives) have none, with a reason."""
    from soadyn.codegen.functions import REGISTRY, WHEN

    for reg in REGISTRY.values():
        assert reg.when in WHEN, reg
        if reg.api.removesuffix("_derivatives") in ("closed_loop_forward_dynamics",
                                                    "closed_loop_dependent_velocities"):
            assert reg.reference is None and reg.unchecked
            continue
        assert reg.reference.startswith("soadyn.reference."), reg
        fn = reference_function(reg)
        assert callable(fn) and fn.__module__.startswith("soadyn.reference."), reg
    for base in ("free", "fixed"):
        robot = load_robot(TEST_ARM, base)
        apis = {s.api for s in function_table(robot, derivatives=True)}   # opt-in derivatives included
        assert apis <= set(REGISTRY)
        assert apis == {a for a, r in REGISTRY.items() if r.applies(robot)}


def test_a_missing_algorithm_is_an_error(tiny):
    from dataclasses import replace

    robot, _ = tiny
    spec = replace(function_table(robot)[0], algorithm="no_such_algorithm")
    with pytest.raises(derive.DerivationError, match="no function 'no_such_algorithm'"):
        generate(robot, "probe", specs=[spec])


def test_verify_lists_a_function_without_independent_check(arm_free, monkeypatch):
    """A function whose registration names no reference is listed as such, not skipped."""
    from dataclasses import replace

    from soadyn.codegen import functions
    from soadyn.codegen.verify import summary

    robot, module = arm_free
    spec = next(s for s in function_table(robot) if s.name == "mass_matrix")
    monkeypatch.setitem(functions.REGISTRY, "mass_matrix",
                        replace(functions.REGISTRY["mass_matrix"], reference=None, unchecked="test"))
    check = check_function(module, robot, spec, random_inputs(robot, 3, np.random.default_rng(2)), TOL)
    assert check.err_reference is None and check.err_algorithm < TOL and not check.independent
    line = format_checks([check]).splitlines()[1]
    assert line.split()[:4] == ["mass_matrix", "none", f"{check.err_algorithm:.2e}", "ok"]
    assert "no independent check: test" in line
    assert "(1 without an independent check)" in summary([check], 3, TOL)


def test_generated_c_has_a_section_comment_per_recursion_stage():
    """forward_dynamics of a committed robot reads as Algorithms 1, 2 and 3 in order."""
    text = (REPO / "generated" / "tian_wu_3dof" / "tian_wu_3dof.c").read_text(encoding="utf-8")
    body = text[text.index("void tian_wu_3dof_forward_dynamics("):]
    body = body[:body.index("\n}\n")]
    comments = re.findall(r"^    /\* (.*) \*/$", body, flags=re.M)
    starts = [c.split(":")[0] for c in comments]
    assert starts[:4] == ["joint transforms phi(k+1, k)", "Algorithm 1 (seed 000 eq. 2.1-2.2)",
                          "Algorithm 2 (seed 000 eq. 2.6)", "Algorithm 3 (seed 000 eq. 2.13a)"]
    assert len(comments) == 5 and comments[4].startswith("accelerations alpha(k) = alpha+(k)")


def test_factorisation_doc_quotes_the_generated_headers():
    """Every operation count in docs/factorisations.md is the one in the committed generated header, and
    forward_dynamics is the cheapest forward-dynamics variant in every row (as the text says)."""
    doc = (REPO / "docs" / "factorisations.md").read_text(encoding="utf-8")
    section = doc[doc.index("## Operation counts"):doc.index("## When to use which")]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|")]
    header, body = rows[0], rows[2:]
    apis = [c.split()[0].strip("`") for c in header[1:]]
    assert len(body) >= 3
    for row in body:
        module = re.match(r"`(\w+)`", row[0]).group(1)
        text = (REPO / "generated" / module / f"{module}.h").read_text(encoding="utf-8")
        ops = {m.group(2): int(m.group(1))
               for m in re.finditer(r"operations: (\d+) \*/\n(?:void|int) (\w+)\(", text)}
        quoted = {api: int(v) for api, v in zip(apis, row[1:])}
        assert quoted == {api: ops[f"{module}_{api}"] for api in apis}, module
        assert quoted["forward_dynamics"] < min(quoted["forward_dynamics_decoupled"],
                                                quoted["forward_dynamics_schur"])


# ---- functions without external wrenches that call their *_fext variant (functions.ZERO_FEXT_CALLS) ------
def test_zero_wrench_functions_run_their_fext_program(arm_free, rng):
    """forward_dynamics_schur and the others of ZERO_FEXT_CALLS without f_ext are their ``*_fext`` C function
    run with a zero array: one compiled program (the C body is the call), the same bits as passing zeros;
    the inverse and forward dynamics keep a program of their own, which spends no operation on f_ext."""
    from soadyn.codegen.functions import ZERO_FEXT_CALLS

    robot, module = arm_free
    # the committed C of the same robot file (kept current by test_generated_sources_are_current)
    source = (REPO / "generated" / "scratch_tree" / "scratch_tree.c").read_text(encoding="utf-8")
    prefix = f"{module.module_name}_"
    zero = np.zeros((robot.n_bodies, 6))
    apis = sorted(ZERO_FEXT_CALLS & {s.api for s in function_table(robot)})
    assert apis == sorted(ZERO_FEXT_CALLS)          # the free-base test arm has all of them
    for api in apis:
        body = source.split(f"\nvoid scratch_tree_{api}(", 1)[1].split("\n}\n", 1)[0]
        assert f"scratch_tree_{api}_fext(" in body and body.count(";") == 2, body
        assert module.op_counts[prefix + api] == module.op_counts[prefix + api + "_fext"]
        for _ in range(3):
            q = robot.random_configuration(rng)
            v, tau = rng.normal(size=robot.nv), rng.normal(size=robot.nv)
            args = (q, v, tau) if api.startswith("forward_dynamics") else (q, v)
            plain, zeros = getattr(module, api)(*args), getattr(module, api)(*args, f_ext=zero)
            for a, b in zip(plain if isinstance(plain, tuple) else (plain,),
                            zeros if isinstance(zeros, tuple) else (zeros,)):
                assert np.array_equal(a, b)
    for api in ("inverse_dynamics", "forward_dynamics"):
        assert module.op_counts[prefix + api]["add"] < module.op_counts[prefix + api + "_fext"]["add"]


def test_a_zero_wrench_function_without_its_fext_variant_has_a_program(arm_free):
    """Generated on its own (an explicit table without the ``*_fext`` spec), such a function is derived as
    usual; with both, the variant is derived first whatever the table's order."""
    robot, _ = arm_free
    table = function_table(robot)
    plain = next(s for s in table if s.name == "forward_dynamics_schur")
    fext = next(s for s in table if s.name == "forward_dynamics_schur_fext")
    assert plain.zero_fext_call == "forward_dynamics_schur_fext"
    alone = generate(robot, "probe", specs=[plain])
    assert "forward_dynamics_schur_fext" not in alone.files["probe.c"]
    both = generate(robot, "probe", specs=[plain, fext])
    assert [s.name for s in both.specs] == ["forward_dynamics_schur_fext", "forward_dynamics_schur"]
    assert alone.op_counts()["probe_forward_dynamics_schur"]["add"] < \
        both.op_counts()["probe_forward_dynamics_schur"]["add"]


def test_sink_loads_puts_each_input_load_before_its_first_reader():
    """Loads go to the first statement that reads them, or before the block (a frame family's switch)
    holding it; a load nothing reads stays where it was; nothing else moves."""
    from soadyn.codegen import cprogram as cp
    from soadyn.codegen.printer import CPrinter

    E = cp.Expr.of
    body = [cp.load("q_0", "q", 0), cp.load("v_1", "v", 1), cp.load("v_2", "v", 2), cp.comment("stage {"),
            cp.value("t0", E("q_0*2")), cp.store("M", 0, E("t0")),
            cp.Stmt(cp.SWITCH, cases=[cp.Case("F_A", "'a{': 3 operations",
                                              [cp.value("t1", E("v_1*t0")),
                                               cp.store("J", 0, E("t1 + q_0"))])])]
    assert CPrinter().lines(cp.sink_loads(body)) == [
        "const double v_2 = v[2];", "/* stage { */", "const double q_0 = q[0];", "const double t0 = q_0*2;",
        "M[0] = t0;", "const double v_1 = v[1];", "switch (frame) {", "case F_A: {  /* 'a{': 3 operations */",
        "    const double t1 = v_1*t0;", "    J[0] = t1 + q_0;", "    break;", "}", "default:",
        "    return 1;", "}", "return 0;"]
    one = [cp.store("M", 0, E("1"))]
    assert cp.sink_loads(one) == one
