"""Build profiles, stage functions, SIMD batches, threads=, out= and the object cache (issue 11).

The SIMD batch entry points and the stage functions rearrange where values live, never what is computed:
their results must equal the scalar path to 1e-15 relative (in practice bit for bit)."""

from __future__ import annotations

import json
import platform
import re
import resource
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import EXAMPLES

from soadyn import load_robot
from soadyn.codegen import compile as soadyn_compile
from soadyn.codegen import objcache
from soadyn.codegen.pipeline import cache_key
from soadyn.codegen.profiles import IEEE_FLAGS, TAKEN_JUMPS_FLAG, Profile, get_profile, taken_jumps_help
from soadyn.codegen.stages import split_stages

TEST_ARM = Path(__file__).resolve().parents[1] / "examples" / "test_arm.yaml"

FUNCS = "forward_dynamics,inverse_dynamics,mass_matrix,mass_matrix_inverse,center_of_mass,jacobian"
#: the fast profile's flags with stages of ~150 operations: the small test arm's functions get several
#: the fast flags with the derivative stages' taken jumps compiled in on every x86-64 machine (the fast
#: profile defines SOADYN_TAKEN_JUMPS only where profiles.taken_jumps_help says so)
TINY_STAGES = Profile("tiny_stages", tuple(dict.fromkeys(get_profile("fast").cflags + (TAKEN_JUMPS_FLAG,))),
                      stage_ops=150, lanes=4)


def _states(robot, n, seed=3):
    rng = np.random.default_rng(seed)
    Q = np.stack([robot.random_configuration(rng) for _ in range(n)])
    return Q, rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))


def _rel(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


#: the SIMD batches' own stages (``units.LANES_STAGE_OPS``) shorter than TINY_STAGES' and every SIMD batch
#: in units of its own, compiled at -O1 (``units.SIMD_UNIT_OPS``): the module of the tests below
SIMD_PATCH = {"LANES_STAGE_OPS": 60, "SIMD_UNIT_OPS": 0}


@pytest.fixture(scope="module")
def staged_module(tmp_path_factory, test_arm_path):
    """The test arm's FUNCS built with TINY_STAGES and :data:`SIMD_PATCH`; ``unit_flags``: the flags each
    translation unit was compiled with, by stem."""
    import soadyn.codegen.build as build
    import soadyn.codegen.units as units

    seen: dict[str, list[str]] = {}
    add_unit = build.UnitCompiler.add_unit

    def spy(self, stem, text, dependency="", flags=None):
        seen[stem] = list(flags if flags is not None else self.flags)
        return add_unit(self, stem, text, dependency, flags)

    with pytest.MonkeyPatch.context() as mp:
        for k, v in SIMD_PATCH.items():
            mp.setattr(units, k, v)
        mp.setattr(build.UnitCompiler, "add_unit", spy)
        m = soadyn_compile(test_arm_path, tmp_path_factory.mktemp("staged"), functions=FUNCS,
                           profile=TINY_STAGES, progress=False)
    m.unit_flags = seen
    return m


@pytest.fixture(scope="module")
def plain_module(tmp_path_factory, test_arm_path):
    plain = Profile("plain", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=1)
    return soadyn_compile(test_arm_path, tmp_path_factory.mktemp("plain"), functions=FUNCS, profile=plain,
                          progress=False)


def test_stages_and_lanes_are_in_the_build(staged_module):
    """The shipped <module>.c is the plain single-file C99 (the same for every profile); the extension is
    built from the same statements split into stages and SIMD lanes."""
    shipped = Path(staged_module.__file__).parent / f"{staged_module.module_name}.c"
    assert "_stage1(" not in shipped.read_text()
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units

    gen = pl.generate(load_robot(TEST_ARM), functions=FUNCS, profile=TINY_STAGES)
    src = "\n".join(text for _, text in translation_units(gen.functions, gen.files[gen.header_name]))
    name = gen.module_name
    assert f"{name}_forward_dynamics_stage1(" in src
    assert f"{name}_forward_dynamics_lanes(" in src and f"{name}_forward_dynamics_lanes_stage1(" in src
    assert f"{name}_jacobian_local_case1(" in src     # a frame family: prefix stages + one function per frame
    assert f"{name}_jacobian_local_lanes_case1(" in src   # ... and its SIMD batch the same way


def test_simd_batches_in_shorter_stages_and_units_of_their_own(staged_module, monkeypatch):
    """A SIMD batch's statements are cut into stages of their own, shorter than the single call's
    (``units.LANES_STAGE_OPS``); a function's SIMD pieces (vector stages, lanes driver) are translation
    units of their own (``units.SIMD_UNIT_OPS``), compiled at -O1 with every other flag of the profile,
    the single-call units at the profile's -O2.  (The batches' bits: the tests below, on this module.)"""
    import soadyn.codegen.pipeline as pl
    import soadyn.codegen.units as units
    from soadyn.codegen.units import SIMD_UNIT, lowered_unit, translation_units

    for k, v in SIMD_PATCH.items():
        monkeypatch.setattr(units, k, v)
    gen = pl.generate(load_robot(TEST_ARM), functions=FUNCS, profile=TINY_STAGES)
    out = dict(translation_units(gen.functions, gen.files[gen.header_name]))
    fd = f"{gen.module_name}_forward_dynamics"
    simd = {stem: text for stem, text in out.items() if SIMD_UNIT in stem}
    assert all(map(lowered_unit, simd)) and not lowered_unit(fd)

    def defines(text: str, name: str) -> bool:
        return any(x.startswith((f"void {name}(", f"SOADYN_STAGE void {name}(")) and not x.endswith(";")
                   for x in text.splitlines())

    assert f"{fd}__simd" in simd and defines(simd[f"{fd}__simd"], f"{fd}_lanes")
    assert not defines(out[fd], f"{fd}_lanes") and f"{fd}_lanes(q + " in out[fd]     # the batch calls it
    assert not any(defines(out[fd], f"{fd}_lanes_stage{k}") for k in range(100))
    scalar = sum(defines(out[fd], f"{fd}_stage{k}") for k in range(100))
    vector = sum(defines("".join(simd.values()), f"{fd}_lanes_stage{k}") for k in range(100))
    assert 2 <= scalar < vector, (scalar, vector)
    fast = list(TINY_STAGES.cflags)
    assert staged_module.unit_flags[f"{fd}__simd"] == ["-O1" if f == "-O2" else f for f in fast]
    assert staged_module.unit_flags[fd] == fast and "-O2" in fast
    # the product-loop functions' single-call units are lowered too, not their zero-wrench callers'
    gen = pl.generate(load_robot(EXAMPLES / "seed004_dual_arm.yaml"), functions=["generalized_bias"],
                      profile=TINY_STAGES)
    stems = [stem for stem, _ in translation_units(gen.functions, gen.files[gen.header_name])]
    gb = f"{gen.module_name}_generalized_bias"
    assert f"{gb}_fext__O1" in stems and f"{gb}" in stems, stems
    assert all(lowered_unit(x) == x.startswith(f"{gb}_fext") for x in stems), stems


def test_batch_lanes_threads_equal_scalar_path(staged_module, plain_module, test_arm_path):
    robot = load_robot(test_arm_path)
    n = 23  # not a multiple of the 4 lanes: the remainder goes through the scalar function
    Q, V, T = _states(robot, n)
    for m in (staged_module, plain_module):
        single = {
            "fd": np.stack([m.forward_dynamics(Q[i], V[i], T[i]) for i in range(n)]),
            "id": np.stack([m.inverse_dynamics(Q[i], V[i], T[i]) for i in range(n)]),
            "M": np.stack([m.mass_matrix(Q[i]) for i in range(n)]),
            "Minv": np.stack([m.mass_matrix_inverse(Q[i]) for i in range(n)]),
        }
        for threads in (None, 2, 3):
            batch = {"fd": m.forward_dynamics(Q, V, T, threads=threads),
                     "id": m.inverse_dynamics(Q, V, T, threads=threads),
                     "M": m.mass_matrix(Q, threads=threads),
                     "Minv": m.mass_matrix_inverse(Q, threads=threads)}
            for k in single:
                assert _rel(batch[k], single[k]) <= 1e-15, (m.module_name, k, threads)
    # the staged + SIMD module against the plain one (different code, the same operations)
    for fn, args in (("forward_dynamics", (Q, V, T)), ("inverse_dynamics", (Q, V, T)), ("mass_matrix", (Q,)),
                     ("mass_matrix_inverse", (Q,))):
        a, b = getattr(staged_module, fn)(*args), getattr(plain_module, fn)(*args)
        assert _rel(a, b) <= 1e-15, fn
    for frame in staged_module.frame_ids:
        for world in (False, True):
            a = staged_module.jacobian(Q, frame, world_aligned=world)
            assert _rel(a, plain_module.jacobian(Q, frame, world_aligned=world)) <= 1e-15, frame
            # the staged family's SIMD batch (prefix stages, then the frame's case) has the single calls' bits
            one = np.stack([staged_module.jacobian(q, frame, world_aligned=world) for q in Q])
            assert np.array_equal(a.view(np.int64), one.view(np.int64)), (frame, world)
    with pytest.raises(ValueError, match="unknown frame"):
        staged_module.jacobian(Q[0], "no such frame")


def test_mass_matrix_structure_in_stages_and_lanes(staged_module, plain_module, test_arm_path):
    """The mass matrix's structured variants (nonzero-only, upper) through stages and SIMD lanes, into
    garbage-filled out= buffers, against the plain module's full-writing function."""
    robot = load_robot(test_arm_path)
    n, nv = 23, robot.nv
    Q, _, _ = _states(robot, n, seed=8)
    ffi, lib = plain_module._ffi, plain_module._lib
    full = np.full((n, nv, nv), np.nan)
    getattr(lib, f"{plain_module.module_name}_mass_matrix_batch")(n, ffi.from_buffer("double[]", Q),
                                                                  ffi.from_buffer("double[]", full))
    rng = np.random.default_rng(4)
    for tri, ref in (("full", full), ("upper", np.triu(full))):
        for threads in (None, 2):
            out = rng.normal(size=(n, nv, nv))
            assert staged_module.mass_matrix(Q, triangle=tri, out=out, threads=threads) is out
            assert _rel(out, ref) <= 1e-15, (tri, threads)
            assert _rel(staged_module.mass_matrix(Q, triangle=tri, threads=threads), ref) <= 1e-15
        for i in (0, n - 1):
            assert _rel(staged_module.mass_matrix(Q[i], triangle=tri, out=rng.normal(size=(nv, nv))),
                        ref[i]) <= 1e-15


def test_out_argument(staged_module, test_arm_path):
    robot = load_robot(test_arm_path)
    Q, V, T = _states(robot, 5)
    out = np.full(robot.nv, np.nan)
    got = staged_module.forward_dynamics(Q[0], V[0], T[0], out=out)
    assert got is out
    assert np.array_equal(out, staged_module.forward_dynamics(Q[0], V[0], T[0]))
    outs = np.empty((5, robot.nv, robot.nv))
    assert staged_module.mass_matrix(Q, out=outs) is outs
    assert np.array_equal(outs, staged_module.mass_matrix(Q))
    with pytest.raises(ValueError, match="out must be"):
        staged_module.forward_dynamics(Q[0], V[0], T[0], out=np.empty(robot.nv + 1))
    with pytest.raises(ValueError, match="out must be"):
        staged_module.forward_dynamics(Q[0], V[0], T[0], out=np.empty(robot.nv, dtype=np.float32))
    ro = np.empty(robot.nv)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="out must be"):
        staged_module.forward_dynamics(Q, V, T, out=ro)
    with pytest.raises(ValueError, match="threads"):
        staged_module.forward_dynamics(Q, V, T, threads=0)


def test_split_stages_keeps_every_statement():
    from soadyn.codegen import cprogram as cp

    E = cp.Expr.of
    body = [cp.load("q_0", "q", 0), cp.value("t0", E("sin(q_0)")), cp.value("t1", E("t0*t0 + 2*q_0")),
            cp.value("t2", E("t1*t0 - t1/3")), cp.store("out", 0, E("t2 + t0")), cp.store("out", 1, E("t1"))]
    staged = split_stages("f", [("const double *", "q"), ("double *", "out")], body, max_ops=2)
    assert staged is not None and len(staged.stages) >= 2
    text = "\n".join(staged.stages)
    for expected in ("sin(q[0])", "out[0] = ", "out[1] = "):
        assert expected in text
    assert staged.work >= 1 and staged.body[0].kind == cp.SCRATCH and staged.body[0].target == "w"


def test_profiles_key_stamp_and_errors(tmp_path, test_arm_path):
    robot = load_robot(test_arm_path)
    keys = {p: cache_key(robot, "m", None, get_profile(p)) for p in ("fast", "portable", "debug")}
    assert len(set(keys.values())) == 3
    assert "-march=native" in get_profile("fast").cflags
    assert "-march=native" not in " ".join(get_profile("portable").cflags)
    with pytest.raises(ValueError, match="valid profiles: fast, portable, debug"):
        get_profile("fastest")
    m = soadyn_compile(test_arm_path, tmp_path, functions="center_of_mass", profile="debug", progress=False)
    stamp = json.loads((Path(m.__file__).parent / "soadyn_stamp.json").read_text())
    assert stamp["profile"] == "debug" and stamp["cflags"] == list(get_profile("debug").cflags)


def test_object_cache_reuses_unchanged_functions(tmp_path, test_arm_path, monkeypatch):
    monkeypatch.setenv("SOADYN_OBJECT_CACHE", str(tmp_path / "objects"))
    prof = Profile("cache_test", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=1)
    first = soadyn_compile(test_arm_path, tmp_path, functions="center_of_mass", profile=prof, progress=False)
    q = load_robot(test_arm_path).random_configuration(np.random.default_rng(0))
    com = first.center_of_mass(q)
    hits = objcache.STATS["hits"]
    m = soadyn_compile(test_arm_path, tmp_path, functions="center_of_mass,momentum", profile=prof,
                       progress=False)
    assert objcache.STATS["hits"] == hits + 1       # center_of_mass's object, not momentum's
    assert np.array_equal(m.center_of_mass(q), com)


def test_soadyn_cflags_replace_optimisation_flags_only(monkeypatch):
    """SOADYN_CFLAGS may not drop -ffp-contract=off / -fno-math-errno (bit-identical profiles)."""
    from soadyn.codegen.profiles import IEEE_FLAGS, get_profile

    monkeypatch.setenv("SOADYN_CFLAGS", "-O1 -g")
    flags = get_profile("portable").cflags
    assert flags[:2] == ("-O1", "-g") and all(f in flags for f in IEEE_FLAGS)


def test_object_key_follows_the_cpu_for_native_code_and_the_compiler(monkeypatch):
    """A shared object cache never serves -march=native objects built on another kind of CPU, nor objects
    of another compiler that answers to the same name."""
    from soadyn.codegen import objcache

    args = ("int f(void){return 1;}", "", ["cc"], ["-O2", "-march=native"], "/inc")
    monkeypatch.setattr(objcache, "machine_id", lambda: "cpu-a")
    a = objcache.object_key(*args)
    monkeypatch.setattr(objcache, "machine_id", lambda: "cpu-b")
    assert objcache.object_key(*args) != a
    portable = (*args[:3], ["-O2", "-march=x86-64"], "/inc")
    assert objcache.object_key(*portable) == objcache.object_key(*portable)
    monkeypatch.setattr(objcache, "compiler_identity", lambda cc: "gcc 99")
    b = objcache.object_key(*portable)
    monkeypatch.setattr(objcache, "compiler_identity", lambda cc: "clang 99")
    assert objcache.object_key(*portable) != b


@pytest.mark.parametrize("n", [17, 23, 101, 1001])
@pytest.mark.parametrize("part_ops", [1, None])
def test_threads_equal_one_batch_call_bit_for_bit(staged_module, test_arm_path, n, part_ops, monkeypatch):
    """threads=k splits a batch on whole SIMD groups: the same lanes as one batch call, so the same bits
    (with and without out=, odd batch sizes, more threads than cores; parts of any size, and of the
    module's minimum size)."""
    robot = load_robot(test_arm_path)
    Q, V, T = _states(robot, n, seed=n)
    m = staged_module
    if part_ops is not None:
        monkeypatch.setattr(m, "_PART_OPS", part_ops)
    ops = m.op_counts[f"{m.module_name}_forward_dynamics"]["total"]
    split = m._parts(n, 2, getattr(m._lib, f"{m.module_name}_forward_dynamics_batch"))
    assert split == (2 if n * ops >= 2 * m._PART_OPS else 1)
    ref = {"fd": m.forward_dynamics(Q, V, T), "id": m.inverse_dynamics(Q, V, T), "M": m.mass_matrix(Q),
           "J": m.jacobian(Q, robot.body_names[-1], world_aligned=True)}
    for threads in (1, 2, 3, 4, 7):
        got = {"fd": m.forward_dynamics(Q, V, T, threads=threads),
               "id": m.inverse_dynamics(Q, V, T, threads=threads), "M": m.mass_matrix(Q, threads=threads),
               "J": m.jacobian(Q, robot.body_names[-1], world_aligned=True, threads=threads)}
        for k in ref:
            assert np.array_equal(got[k], ref[k]), (k, threads)
        out = np.full((n, robot.nv), np.nan)
        assert m.forward_dynamics(Q, V, T, out=out, threads=threads) is out
        assert np.array_equal(out, ref["fd"]), threads


def _outcome(f):
    try:
        r = f()
    except Exception as e:  # noqa: BLE001 - the outcome, whatever it is, is compared
        return ("raised", type(e), str(e))
    rs = r if isinstance(r, tuple) else (r,)
    return ("returned", type(r), [(type(x), getattr(x, "dtype", None), np.shape(x), np.asarray(x).tobytes())
                                  for x in rs])


def test_single_call_entries_in_c_change_no_outcome(staged_module, test_arm_path, monkeypatch):
    """The C entry points of calls without threads= (``_fx_*``) give exactly what the module's Python code
    gives without them: results bit for bit, the same object for out=, the same refusals (wrong shapes and
    dtypes, non-contiguous or read-only out, zero quaternion, unknown frames, batch sizes that disagree)
    and aliasing of out and an input handled alike."""
    m = staged_module
    assert {"forward_dynamics", "inverse_dynamics", "mass_matrix", "jacobian_local", "jacobian_world",
            "quaternions_nonzero"} <= set(m._FX)
    robot = load_robot(test_arm_path)
    Q, V, T = _states(robot, 9, seed=5)
    q, v, t = Q[0], V[0], T[0]
    nv, nb = robot.nv, robot.n_bodies
    frame = robot.body_names[-1]
    ro = np.empty(nv)
    ro.flags.writeable = False
    zq = q.copy()
    zq[3:7] = 0
    out_v, out_M, out_J = np.empty(nv), np.empty((nv, nv)), np.empty((6, nv))
    out_b, ro_b = np.empty((len(Q), nv)), np.empty((len(Q), nv))
    ro_b.flags.writeable = False
    # the C entries do take the ordinary calls
    assert m._fx_forward_dynamics(q, v, t, None) is not None
    assert m._fx_forward_dynamics(q, v, t, out_v) is out_v
    assert m._fx_mass_matrix(q, None).shape == (nv, nv) and m._fx_jacobian_world(q, 0, None).shape == (6, nv)
    assert m._fx_forward_dynamics(q, v, t, ro) is None and m._fx_forward_dynamics(zq, v, t, None) is None
    assert m._fx_forward_dynamics(Q, V, T, None).shape == (len(Q), nv)
    assert m._fx_quaternions_nonzero(Q) is True and m._fx_quaternions_nonzero(np.r_[Q, zq[None]]) is False
    alias = {}

    def aliased(j):
        def call():
            a = [q.copy(), v.copy(), t.copy()]
            alias.setdefault(j, []).append(a)
            return m.forward_dynamics(*a, out=a[j])
        return call

    cases = {
        "fd": lambda: m.forward_dynamics(q, v, t), "id": lambda: m.inverse_dynamics(q, v, t),
        "M": lambda: m.mass_matrix(q), "Minv": lambda: m.mass_matrix_inverse(q),
        "fd out": lambda: m.forward_dynamics(q, v, t, out=out_v) is out_v,
        "M out": lambda: m.mass_matrix(q, out=out_M) is out_M,
        "fd fext": lambda: m.forward_dynamics(q, v, t, np.ones((nb, 6))),
        "fd list": lambda: m.forward_dynamics(q.tolist(), v.tolist(), t.tolist()),
        "fd int": lambda: m.forward_dynamics(q.astype(int), v.astype(int), t.astype(int)),
        "fd f32": lambda: m.forward_dynamics(q.astype(np.float32), v, t),
        "fd big-endian": lambda: m.forward_dynamics(q.astype(">f8"), v, t),
        "fd strided": lambda: m.forward_dynamics(np.repeat(q, 2)[::2], v, t),
        "fd subclass": lambda: m.forward_dynamics(q.view(np.recarray), v, t),
        "fd 2-d": lambda: m.forward_dynamics(q[None], v[None], t[None]),
        "fd wrong shape": lambda: m.forward_dynamics(q[:-1], v, t),
        "fd complex": lambda: m.forward_dynamics(q.astype(complex), v, t),
        "fd zero quaternion": lambda: m.forward_dynamics(zq, v, t),
        "M zero quaternion": lambda: m.mass_matrix(zq),
        "fd batch zero quaternion": lambda: m.forward_dynamics(np.r_[Q, zq[None]], np.r_[V, V[:1]],
                                                               np.r_[T, T[:1]]),
        "fd batch fortran": lambda: m.forward_dynamics(np.asfortranarray(Q), V, T),
        "fd batch": lambda: m.forward_dynamics(Q, V, T), "M batch": lambda: m.mass_matrix(Q),
        "J batch": lambda: m.jacobian(Q, frame, world_aligned=True),
        "fd batch out": lambda: m.forward_dynamics(Q, V, T, out=out_b) is out_b,
        "fd batch out of one state": lambda: m.forward_dynamics(Q, V, T, out=out_v),
        "fd batch out, other n": lambda: m.forward_dynamics(Q, V, T, out=np.empty((len(Q) + 1, nv))),
        "fd batch, n disagree": lambda: m.forward_dynamics(Q, V[:-1], T),
        "fd batch, one v": lambda: m.forward_dynamics(Q, V[0], T),
        "fd batch of 0": lambda: m.forward_dynamics(Q[:0], V[:0], T[:0]),
        "fd batch of 1": lambda: m.forward_dynamics(Q[:1], V[:1], T[:1]),
        "fd batch, strided": lambda: m.forward_dynamics(Q[::2], V[::2], T[::2]),
        "fd batch read-only out": lambda: m.forward_dynamics(Q, V, T, out=ro_b),
        "fd out read-only": lambda: m.forward_dynamics(q, v, t, out=ro),
        "fd out f32": lambda: m.forward_dynamics(q, v, t, out=np.empty(nv, np.float32)),
        "fd out shape": lambda: m.forward_dynamics(q, v, t, out=np.empty(nv + 1)),
        "fd out strided": lambda: m.forward_dynamics(q, v, t, out=np.empty(2 * nv)[::2]),
        "fd out list": lambda: m.forward_dynamics(q, v, t, out=[out_v])[0] is out_v,
        "fd out tuple of 2": lambda: m.forward_dynamics(q, v, t, out=(out_v, out_v)),
        "fd out subclass": lambda: m.forward_dynamics(q, v, t, out=np.empty(nv).view(np.recarray)),
        "fd threads=1": lambda: m.forward_dynamics(q, v, t, threads=1),
        "fd threads=0": lambda: m.forward_dynamics(q, v, t, threads=0),
        "fd out=v": aliased(1), "fd out=tau": aliased(2),
        "J local": lambda: m.jacobian(q, frame), "J world": lambda: m.jacobian(q, frame, world_aligned=True),
        "J np.bool_": lambda: m.jacobian(q, frame, world_aligned=np.bool_(True)),
        "J out": lambda: m.jacobian(q, frame, out=out_J) is out_J,
        "J 'no'": lambda: m.jacobian(q, frame, world_aligned="no"),
        "J unknown frame": lambda: m.jacobian(q, "no such frame"),
        "J unhashable frame": lambda: m.jacobian(q, ["x"]),
        "J zero quaternion": lambda: m.jacobian(zq, frame),
        "J zero quaternion, unknown frame": lambda: m.jacobian(zq, "no such frame"),
        "com": lambda: m.center_of_mass(q),
    }
    fast = {k: _outcome(f) for k, f in cases.items()}
    for name in list(vars(m)):
        if name.startswith("_fx_"):
            monkeypatch.setattr(m, name, m._nofast)
    python = {k: _outcome(f) for k, f in cases.items()}
    for k in cases:
        assert fast[k] == python[k], k
    for j, (with_c, without) in alias.items():
        assert all(np.array_equal(a, b) for a, b in zip(with_c, without)), j
    assert fast["fd out read-only"][0] == "raised" and fast["fd zero quaternion"][0] == "raised"


def test_c_entries_of_scalar_and_several_outputs(tmp_path, test_arm_path, monkeypatch):
    """A 0-d result comes back as a numpy scalar (an array with out=), several outputs as a tuple, with
    the C entries as without them."""
    m = soadyn_compile(test_arm_path, tmp_path, functions="kinetic_energy,innovations_factors,"
                       "angular_reduced_dynamics", profile="debug", progress=False)
    robot = load_robot(test_arm_path)
    Q, V, _ = _states(robot, 3, seed=11)
    q, v = Q[0], V[0]
    assert m._fx_kinetic_energy(q, v, None) is not None and m._fx_innovations_factors(q, None) is not None
    t_out = np.empty(())
    L, D = np.empty((robot.nv, robot.nv)), np.empty((robot.nv, robot.nv))
    cases = {"T": lambda: m.kinetic_energy(q, v), "T out": lambda: m.kinetic_energy(q, v, out=t_out) is t_out,
             "T batch": lambda: m.kinetic_energy(Q, V), "LD": lambda: m.innovations_factors(q),
             "LD out": lambda: m.innovations_factors(q, out=(L, D)),
             "LD out list": lambda: m.innovations_factors(q, out=[L, D]),
             "LD out one": lambda: m.innovations_factors(q, out=L),
             "reduced": lambda: m.angular_reduced_dynamics(q, v),
             "reduced fext": lambda: m.angular_reduced_dynamics(q, v, np.ones((robot.n_bodies, 6)))}
    fast = {k: _outcome(f) for k, f in cases.items()}
    for name in list(vars(m)):
        if name.startswith("_fx_"):
            monkeypatch.setattr(m, name, m._nofast)
    assert fast == {k: _outcome(f) for k, f in cases.items()}
    assert fast["T"][1] is np.float64 and fast["LD"][1] is tuple
    # several outputs: the C entry takes an out tuple (not one overlapping an input or another out), and a
    # batch's new results (C entry, and the Python path with threads) equal the single calls' values
    monkeypatch.undo()
    assert m._fx_innovations_factors(q, (L, D)) == (L, D) and m._fx_innovations_factors(q, [L, D]) is None
    assert m._fx_innovations_factors(q, (L, L)) is None and m._fx_innovations_factors(q, (L,)) is None
    qL = np.empty(robot.nv * robot.nv + q.size)                   # an out that overlaps the input q
    qL[:q.size] = q
    assert m._fx_innovations_factors(qL[:q.size], (qL[q.size - 1:-1].reshape(L.shape), D)) is None
    assert m._fx_innovations_factors(qL[:q.size], (qL[q.size:].reshape(L.shape), D)) is not None
    per_state = [m.innovations_factors(x) for x in Q]
    for batch in (m.innovations_factors(Q), m.innovations_factors(Q, threads=1),
                  m.innovations_factors(Q, threads=2)):
        assert all(b.shape == (len(Q), robot.nv, robot.nv) and b.flags.c_contiguous and b.flags.writeable
                   for b in batch)
        for i, one in enumerate(per_state):
            assert all(np.array_equal(b[i], o) for b, o in zip(batch, one))
        batch[0][...] = 0.0                                       # views of one block, but apart
        assert np.array_equal(batch[1][0], per_state[0][1])


def test_lowered_flags_lower_only_the_optimisation_level():
    """cffi's wrapper unit is compiled at -O1 for the -O2/-O3 profiles, with every other flag kept."""
    from soadyn.codegen.build import lowered_flags

    fast = list(get_profile("fast").cflags)
    assert lowered_flags(fast) == ["-O1" if f == "-O2" else f for f in fast] and "-O2" in fast
    assert lowered_flags(["-O3", *IEEE_FLAGS]) == ["-O1", *IEEE_FLAGS]
    debug = list(get_profile("debug").cflags)
    assert lowered_flags(debug) == debug


def test_units_streamed_per_function_equal_the_whole_module_units():
    """generate(on_function=...) hands over each function's units as it is derived (a build compiles
    them meanwhile): the same units, text for text, as from the whole module, each self-contained (no
    module header), and the same module files."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units

    robot = load_robot(TEST_ARM)
    whole = pl.generate(robot, functions=FUNCS, profile=TINY_STAGES)
    expected = translation_units(whole.functions, whole.files[whole.header_name])
    streamed: list = []
    calls: list = []
    gen = pl.generate(robot, functions=FUNCS, profile=TINY_STAGES,
                      on_function=lambda funcs, header: (calls.append([f.cname for f in funcs]),
                                                         streamed.extend(translation_units(funcs, header))))
    assert len(calls) == len(gen.specs) and sum(map(len, calls)) == len(gen.functions)
    assert sorted(streamed) == sorted(expected)
    assert gen.files == whole.files and gen.cdef == whole.cdef
    assert not any(f'"{whole.header_name}"' in text for _, text in streamed)
    assert any("_case1(" in text and "N_FRAMES" in text for _, text in streamed)   # a family's enum


def test_simd_batch_stores_constant_zero_outputs(tmp_path):
    """The reaction wheels' bias forces are exact zeros (axis through their centre of mass): the SIMD batch
    stores them like the scalar function does, into an output of any contents (it left them unwritten)."""
    m = soadyn_compile(EXAMPLES / "dimitrov_7dof_rw.yaml", tmp_path, functions=["bias_forces"],
                       progress=False, profile="fast")
    rng = np.random.default_rng(3)
    n = 9
    Q = np.zeros((n, m.nq))
    Q[:, 6] = 1.0
    Q[:, 7:] = rng.uniform(-3, 3, (n, m.nq - 7))
    V = rng.normal(size=(n, m.nv))
    out = np.full((n, m.nv), np.nan)
    m.bias_forces(Q, V, out=out)
    single = np.array([m.bias_forces(Q[i], V[i]) for i in range(n)])
    assert np.all(single[:, 13:] == 0.0)
    assert np.array_equal(out, single)


@pytest.mark.parametrize("macros, is_gcc", [
    ("#define __GNUC__ 12\n#define __x86_64__ 1\n", True),
    ("#define __GNUC__ 4\n#define __clang__ 1\n", False),            # clang answers to __GNUC__ too
    ("#define __GNUC__ 4\n#define __INTEL_LLVM_COMPILER 20240000\n", False),
    ("#define __SUNPRO_C 0x5150\n", False),
])
def test_gcc_pass_flags_only_for_gcc(tmp_path, monkeypatch, macros, is_gcc):
    """STRAIGHT_LINE_FLAGS are GCC's pass names: a compiler that is not GCC (asked for its predefined
    macros, as ``cc -dM -E`` prints them) gets the profiles without them."""
    from soadyn.codegen.profiles import STRAIGHT_LINE_FLAGS, compiler_is_gcc

    fake = tmp_path / "fakecc"
    (tmp_path / "macros.txt").write_text(macros)
    fake.write_text(f"#!/bin/sh\ncat '{tmp_path / 'macros.txt'}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    assert compiler_is_gcc() is is_gcc
    for name in ("fast", "portable"):
        flags = get_profile(name).cflags
        assert all((f in flags) is is_gcc for f in STRAIGHT_LINE_FLAGS), (name, flags)
        assert all(f in flags for f in IEEE_FLAGS)


def test_a_compiler_that_cannot_run_is_not_taken_for_gcc(tmp_path, monkeypatch):
    from soadyn.codegen.profiles import compiler_is_gcc

    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    assert compiler_is_gcc() is False


def test_every_simd_function_batch_equals_its_single_calls_on_a_free_tree(tmp_path):
    """Every function of ``SIMD_FUNCTIONS`` that a free-base tree (two arms on one base) has: its batch
    (4 lanes, 7 states: one lanes group and a scalar remainder) equals its single calls bit for bit, and the
    build really has its SIMD entry (a dropped vectorisation would make the batch a scalar loop).  Among
    them: the frame families (every frame), the functions made of in-place product loops and their
    zero-wrench callers (which run the ``*_fext`` twin's batch), the derivatives."""
    import inspect

    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.functions import api_names, function_table
    from soadyn.codegen.units import PRODUCT_LANE_FUNCTIONS, SIMD_FUNCTIONS, translation_units

    assert PRODUCT_LANE_FUNCTIONS <= SIMD_FUNCTIONS       # the product-loop functions' lanes: by default
    robot = load_robot(EXAMPLES / "seed004_dual_arm.yaml")
    prof = Profile("lanes_O0", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=4)
    apis = sorted(set(api_names(function_table(robot))) & {n.removesuffix("_fext") for n in SIMD_FUNCTIONS})
    apis.append("jacobian")                          # C jacobian_local / jacobian_world
    assert len(apis) >= 24, apis             # the dynamics, free-base functions, families, derivatives
    gen = pl.generate(robot, functions=apis, profile=prof)
    src = "\n".join(text for _, text in translation_units(gen.functions, gen.files[gen.header_name]))
    cnames = {f.cname.removeprefix(gen.module_name + "_") for f in gen.functions}
    for c in sorted(SIMD_FUNCTIONS & cnames):
        assert f"{gen.module_name}_{c}_lanes(" in src, c
    for f in gen.functions:                         # a zero-wrench caller's batch runs its twin's batch
        if f.zero_fext:
            assert f"{f.zero_fext}_batch(" in "\n".join(f.batch_body), f.cname
    m = soadyn_compile(robot, tmp_path, functions=apis, profile=prof, progress=False)
    n, rng = 7, np.random.default_rng(11)
    ins = {"q": np.stack([robot.random_configuration(rng) for _ in range(n)]),
           "v": rng.normal(size=(n, robot.nv)), "a": rng.normal(size=(n, robot.nv)),
           "tau": rng.normal(size=(n, robot.nv)), "qd": rng.normal(size=(n, robot.nv - 6)),
           "h": rng.normal(size=(n, 6)), "f_ext": rng.normal(size=(n, robot.n_bodies, 6))}
    frames = [robot.body_names[0], robot.body_names[-1], *robot.frame_names[-1:]]
    for api in apis:
        f = getattr(m, api)
        params = inspect.signature(f).parameters
        names = [p for p, x in params.items() if x.default is inspect.Parameter.empty]
        for kw in ({}, {"f_ext": ins["f_ext"]}) if "f_ext" in params else ({},):
            for frame in frames if "frame" in names else [None]:
                one_ins = {**ins, "frame": [frame] * n}
                kws = [{}, {"world_aligned": True}] if "world_aligned" in params else [{}]
                for opt in kws:
                    batch = f(*[frame if k == "frame" else ins[k] for k in names], **kw, **opt)
                    for i in range(n):
                        one = f(*[one_ins[k][i] for k in names], **{k: x[i] for k, x in kw.items()}, **opt)
                        for b, o in zip(*((batch, one) if isinstance(one, tuple) else ((batch,), (one,)))):
                            assert np.array_equal(b[i].view(np.int64), np.asarray(o).view(np.int64)), \
                                (api, kw.keys(), frame, opt, i)


def test_regressor_batches_run_in_lanes_and_equal_single_calls(tmp_path):
    """The regressors' batches (large outputs: 8 KB a state on the xArm7, 36 KB on the B1+Z1) run in SIMD
    lanes: the build has their ``_lanes`` entries, and 7 states (one lanes group, a scalar remainder) give
    the single calls' bits, on a free tree with every body's parameters as inputs."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units
    from soadyn.model.parameters import with_param_bodies

    robot = with_param_bodies(load_robot(EXAMPLES / "seed004_dual_arm.yaml"), "all")
    prof = Profile("lanes_O0", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=4)
    funcs = ["inverse_dynamics_regressor", "momentum_regressor"]
    gen = pl.generate(robot, functions=funcs, profile=prof)
    src = "\n".join(text for _, text in translation_units(gen.functions, gen.files[gen.header_name]))
    for c in funcs:
        assert f"{gen.module_name}_{c}_lanes(" in src, c
    m = soadyn_compile(robot, tmp_path, functions=funcs, profile=prof, progress=False)
    n, rng = 7, np.random.default_rng(5)
    q = np.stack([robot.random_configuration(rng) for _ in range(n)])
    v, a = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    Y, Yh = m.inverse_dynamics_regressor(q, v, a, threads=1), m.momentum_regressor(q, v, threads=1)
    assert np.count_nonzero(Y) > Y.size // 10 and np.count_nonzero(Yh) > Yh.size // 10
    for i in range(n):
        one = m.inverse_dynamics_regressor(q[i], v[i], a[i])
        assert np.array_equal(Y[i].view(np.int64), one.view(np.int64))
        assert np.array_equal(Yh[i].view(np.int64), m.momentum_regressor(q[i], v[i]).view(np.int64))


def test_frame_family_of_mostly_zero_outputs_gets_lanes_too():
    """A frame family whose outputs are large and mostly exact zeros over its cases (the four-arm tree's
    Jacobians, 6 x 37: most joints off each frame's path) gets SIMD lanes like the others: its scalar
    batch was the single call in a loop, 1.02-1.06x its time on B1+Z1 and TALOS (issue 26; those batches
    are not bound by writing the output: benchmarks/README.md, tenth session)."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.lanes import family_cases

    robot = load_robot(EXAMPLES / "seed004_four_arm_37dof.yaml")      # 6 x 37 Jacobians
    gen = pl.generate(robot, functions=["jacobian"], profile=Profile("z", ("-O0",), 0, lanes=4))
    funcs = {f.cname.removeprefix(gen.module_name + "_"): f for f in gen.functions}
    local = funcs["jacobian_local"]
    cases = family_cases(local.body, {a.name: a.size for a in local.outputs})
    entries = [c for case in cases.values() for es in case.values() for _, c in es]
    assert 2 * sum(c == "0" for c in entries) >= len(entries)      # mostly zeros: the case in point
    got = {name: f.extra.vectorised for name, f in funcs.items()}
    assert got == {"jacobian_local": True, "jacobian_world": True}, got


def _trunk_doc() -> dict:
    """A free base, a trunk of two joints, then two branches of three: the frames beyond the trunk share
    a prefix (the trunk's sines and cosines), the base's frame needs none of it."""
    rng = np.random.default_rng(8)
    bodies = [{"name": "base", "mass": 12.0, "com": [0.01, 0.02, -0.03],
               "inertia": {"ixx": 0.9, "iyy": 1.1, "izz": 1.3}}]
    for name, parent in [("t0", "base"), ("t1", "t0"), ("a0", "t1"), ("a1", "a0"), ("a2", "a1"),
                         ("c0", "t1"), ("c1", "c0"), ("c2", "c1")]:
        axis = rng.normal(size=3)
        bodies.append({"name": name, "parent": parent, "mass": float(rng.uniform(0.5, 2.0)),
                       "com": rng.normal(0, 0.1, 3).tolist(),
                       "inertia": {"ixx": 0.03, "iyy": 0.04, "izz": 0.05},
                       "joint": {"name": f"j_{name}", "type": "revolute",
                                 "axis": (axis / np.linalg.norm(axis)).tolist(),
                                 "xyz": rng.normal(0, 0.3, 3).tolist(),
                                 "rpy": rng.uniform(-3, 3, 3).tolist()}})
    return {"name": "trunk_two_branches", "base": "free", "gravity": [0.0, 0.0, -9.81], "bodies": bodies}


def test_frame_family_lanes_run_the_shared_prefix_only_where_a_case_reads_it(tmp_path):
    """A frame family's SIMD batch (stages, so the prefix shared by the cases is a stage of its own) calls
    the prefix's stage in the cases whose stages read the work-array entries it writes, and not in the
    others (``lanes.prefix_where_read``: the base's frame here, TALOS's legs); every frame's batch, into
    garbage, has the single calls' bits, the remainder states too."""
    import yaml

    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units

    path = tmp_path / "trunk.yaml"
    path.write_text(yaml.safe_dump(_trunk_doc()))
    robot = load_robot(path)
    prof = Profile("family_lanes_O0", ("-O0", *IEEE_FLAGS), stage_ops=60, lanes=4)
    gen = pl.generate(robot, functions=["jacobian"], profile=prof)
    src = "\n".join(text for _, text in translation_units(gen.functions, gen.files[gen.header_name]))
    name = gen.module_name
    driver = src[src.index(f"void {name}_jacobian_local_lanes(const double *q, int frame, double *J)\n{{"):]
    driver = driver[:driver.index("\n}\n")]
    head, _, cases = driver.partition("switch (frame) {")
    assert f"{name}_jacobian_local_lanes_stage" not in head            # no prefix before the switch
    branches = re.findall(r"case (\w+): \{\n((?:.*\n)*?)\s*break;", cases)
    with_prefix = {e for e, body in branches if "_lanes_stage" in body}
    assert with_prefix and len(with_prefix) < len(branches)
    assert not any(e.endswith("_BASE") for e in with_prefix)
    m = soadyn_compile(robot, tmp_path, functions=["jacobian"], profile=prof, progress=False)
    Q, _, _ = _states(robot, 7, seed=9)
    assert len(m.frame_ids) == 9
    for frame in m.frame_ids:
        for api in (m.jacobian, lambda q, f, **kw: m.jacobian(q, f, world_aligned=True, **kw)):
            out = np.random.default_rng(3).normal(size=(7, 6, robot.nv))
            api(Q, frame, out=out)
            for i in range(7):
                assert np.array_equal(out[i].view(np.int64), api(Q[i], frame).view(np.int64)), (frame, i)


def test_lanes_work_entries_are_what_the_printed_vector_stages_name(tmp_path):
    """``lanes.work_entries`` (a stage's statements: its ``work`` statements, the ``w[k]`` of its
    expressions) names exactly the work-array entries that the stage's vector code, as ``lanes.vectorise``
    prints it, reads (``w[k]`` on a right-hand side, an output store's too) and writes (``w[k] = ...``):
    the trunk robot's Jacobian family cut into small stages (prefix and cases) and its forward dynamics'
    stages."""
    import yaml

    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.lanes import vectorise, work_entries
    from soadyn.codegen.stages import split_family

    path = tmp_path / "trunk.yaml"
    path.write_text(yaml.safe_dump(_trunk_doc()))
    gen = pl.generate(load_robot(path), functions=["jacobian", "forward_dynamics"],
                      profile=Profile("plain", ("-O0",), 0, lanes=1))
    funcs = {f.cname.removeprefix(gen.module_name + "_"): f for f in gen.functions}
    checked = {"read": 0, "written": 0}
    for name, split in (("jacobian_local", split_family), ("forward_dynamics", split_stages)):
        f = funcs[name]
        params = [("const double *", a.name) for a in f.inputs] + [("double *", a.name) for a in f.outputs]
        staged = split(f.cname, params, f.body, 60)
        assert staged is not None and len(staged.names) > 2, name
        for body in staged.stage_bodies:
            lines = vectorise(body, {a.name: a.size for a in f.inputs}, {a.name: a.size for a in f.outputs},
                              4, {})
            assert lines is not None
            written = {int(m[1]) for x in lines for m in [re.match(r"w\[(\d+)\] = ", x)] if m}
            read = {int(k) for x in lines
                    for k in re.findall(r"\bw\[(\d+)\]", re.sub(r"^w\[\d+\] = ", "", x))}
            assert work_entries(body) == (read, written)
            checked["read"] += bool(read)
            checked["written"] += bool(written)
    assert checked["read"] > 2 and checked["written"] > 2, checked


def test_large_outputs_with_zeros_zeroed_at_once_in_the_simd_batch(tmp_path, monkeypatch):
    """Full-writing outputs with many exact zeros (the innovations factors: tree zeros, a unit diagonal)
    whose lanes' rows are zeroed with one memset before the other entries (``lanes.MEMSET_MIN``, lowered
    here to reach the test robot's), into garbage: the single calls' bits, the remainder states too."""
    import soadyn.codegen.lanes as lanes

    monkeypatch.setattr(lanes, "MEMSET_MIN", 0)
    robot = load_robot(EXAMPLES / "seed004_dual_arm.yaml")
    m = soadyn_compile(robot, tmp_path, functions=["innovations_factors"], progress=False,
                       profile=Profile("zeroed_O0", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=4))
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units

    gen = pl.generate(robot, functions=["innovations_factors"], profile=Profile("z", ("-O0",), 0, lanes=4))
    src = "\n".join(text for _, text in translation_units(gen.functions, gen.files[gen.header_name]))
    assert "__builtin_memset(L, 0" in src and "__builtin_memset(D, 0" in src
    n = 7
    rng = np.random.default_rng(12)
    Q = np.stack([robot.random_configuration(rng) for _ in range(n)])
    L, D = (rng.normal(size=(n, robot.nv, robot.nv)) for _ in range(2))
    m.innovations_factors(Q, out=(L, D))
    for i in range(n):
        l1, d1 = m.innovations_factors(Q[i])
        assert np.array_equal(L[i].view(np.int64), l1.view(np.int64)), i
        assert np.array_equal(D[i].view(np.int64), d1.view(np.int64)), i
    assert np.count_nonzero(L[0] == 0) > 0 and np.count_nonzero(L[0] == 1) >= robot.nv   # zeros and constants


@pytest.mark.parametrize("whole_rows_max", [0, 1 << 20])
def test_full_writing_mass_matrix_batch_both_ways_of_writing_rows(tmp_path, test_arm_path, monkeypatch,
                                                                  whole_rows_max):
    """The full-writing mass matrix's SIMD batch, its rows written whole (small outputs) or zeroed by a
    memset and stored entry by entry (large ones: ``lanes.WHOLE_ROWS_MAX``), into garbage: the single
    calls' bits."""
    import soadyn.codegen.lanes as lanes

    monkeypatch.setattr(lanes, "WHOLE_ROWS_MAX", whole_rows_max)
    m = soadyn_compile(test_arm_path, tmp_path, functions="mass_matrix", progress=False,
                       profile=Profile("lanes_O0", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=4))
    robot = load_robot(test_arm_path)
    Q, _, _ = _states(robot, 9, seed=5)
    out = np.random.default_rng(6).normal(size=(9, robot.nv, robot.nv))
    assert m.mass_matrix(Q, out=out) is out
    assert np.array_equal(out, np.stack([m.mass_matrix(Q[i]) for i in range(9)]))


@pytest.mark.parametrize("unrolled", [0, 1 << 20])
def test_simd_batch_whole_rows_with_constants_and_blocks_equal_single_calls(tmp_path, monkeypatch, unrolled):
    """The SIMD batch's copy of the lane-major buffers into the states' rows: an output stored whole with
    constants among its entries (a fixed base's body poses: the base's identity rotation, fixed offsets)
    gets its constants broadcast into the buffer and is copied back a lanes x lanes block at a time; a
    packed output (the mass matrix's nonzero entries, the innovations factors after a memset) copies its
    runs of consecutive entries the same way and the rest entry by entry (``lanes.UNROLLED_STORES`` 0: by a
    table, else unrolled).  Into garbage out= arrays, 7 states (a lanes group and a remainder): the single
    calls' bits; the full and the upper mass matrix against the plain module."""
    import soadyn.codegen.lanes as lanes
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import translation_units

    monkeypatch.setattr(lanes, "UNROLLED_STORES", unrolled)
    monkeypatch.setattr(lanes, "MEMSET_MIN", 0)
    prof = Profile("rows_O0", ("-O0", *IEEE_FLAGS), stage_ops=0, lanes=4)
    rng = np.random.default_rng(13)
    n = 7
    cases = {"fixed": ("body_poses,center_of_mass,innovations_factors",
                       "o_R_b[0] = (soadyn_v4d){1, 1, 1, 1};"),
             "free": ("mass_matrix,innovations_factors", "soadyn_trs(M + tb_M[j][0]")}
    for base, (funcs, text) in cases.items():
        robot = load_robot(TEST_ARM, base=base)
        gen = pl.generate(robot, functions=funcs.split(","), profile=prof)
        src = "\n".join(t for _, t in translation_units(gen.functions, gen.files[gen.header_name]))
        assert text in src, base
        m = soadyn_compile(robot, tmp_path / base, functions=funcs, profile=prof, progress=False)
        Q = np.stack([robot.random_configuration(rng) for _ in range(n)])
        for api in funcs.split(","):
            f = getattr(m, api)
            ones = [f(Q[i]) for i in range(n)]
            ones = [o if isinstance(o, tuple) else (o,) for o in ones]
            outs = tuple(rng.normal(size=(n, *o.shape)) for o in ones[0])
            f(Q, out=outs if len(outs) > 1 else outs[0])
            for i in range(n):
                for b, o in zip(outs, ones[i]):
                    assert np.array_equal(b[i].view(np.int64), np.asarray(o).view(np.int64)), (base, api, i)
        if base == "free":
            for tri in ("full", "upper"):
                out = rng.normal(size=(n, robot.nv, robot.nv))
                m.mass_matrix(Q, triangle=tri, out=out)
                for i in range(n):
                    one = m.mass_matrix(Q[i], triangle=tri)
                    assert np.array_equal(out[i].view(np.int64), one.view(np.int64)), (tri, i)


def test_large_new_batch_results_reuse_the_released_block(tmp_path, test_arm_path):
    """A new batch result of 32 MiB or more (``FX_KEEP_MIN``, ``templates/fastcalls.c.j2``) is a block whose
    release keeps it for the next one (glibc maps such blocks afresh each time: every call page-faulted its
    result in): a result still alive is never reused, a released one is, and the reused block holds the new
    batch's values (the single calls' bits, not the old batch's)."""
    robot = load_robot(test_arm_path)
    m = soadyn_compile(test_arm_path, tmp_path, functions="innovations_factors", progress=False)
    n = (32 << 20) // (2 * 8 * robot.nv ** 2) + 5
    rng = np.random.default_rng(14)
    Q = np.stack([robot.random_configuration(rng) for _ in range(64)])[rng.integers(0, 64, n)]
    Q2 = np.ascontiguousarray(Q[::-1])

    def address(a):
        return a.__array_interface__["data"][0]

    def faults(f):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        r = f()
        return r, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0

    L1, D1 = m.innovations_factors(Q)
    first = address(L1)
    (L2, D2), new = faults(lambda: m.innovations_factors(Q2))   # the first result is alive: a new block
    assert address(L2) != first and new > 8              # (page faults: at least 16 huge pages)
    del L1, D1
    (L3, D3), kept = faults(lambda: m.innovations_factors(Q2))  # the first block, released, again
    assert address(L3) == first and kept <= 4
    assert np.array_equal(L3.view(np.int64), L2.view(np.int64))
    assert np.array_equal(D3.view(np.int64), D2.view(np.int64))
    for i in (0, n // 2, n - 1):
        one = m.innovations_factors(Q2[i])
        assert np.array_equal(L3[i].view(np.int64), one[0].view(np.int64))
        assert np.array_equal(D3[i].view(np.int64), one[1].view(np.int64))
    small = m.innovations_factors(Q[:64])[0]      # below FX_KEEP_MIN: numpy's own allocation
    assert small.base is None or isinstance(small.base, np.ndarray)


def test_priority_register_allocation_same_bits(tmp_path, monkeypatch):
    """The derivatives' and M^-1's translation units ask gcc for its priority register
    allocator (``#pragma GCC optimize``, :data:`~soadyn.codegen.units.PRIORITY_RA_FUNCTIONS`), the other
    functions' (the forward dynamics) do not; the results, single call and SIMD batch, are the bits of the
    same build without the pragma (a pragma that dropped ``-ffp-contract=off`` or ``-fno-math-errno`` would
    change them)."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import PRIORITY_RA_PRAGMA, translation_units

    robot = load_robot(EXAMPLES / "tian_wu_3dof.yaml")
    funcs = ("inverse_dynamics_derivatives,forward_dynamics_derivatives,mass_matrix,mass_matrix_inverse,"
             "forward_dynamics")
    gen = pl.generate(robot, functions=funcs, profile=TINY_STAGES)
    pragma = PRIORITY_RA_PRAGMA[1]
    units = translation_units(gen.functions, gen.files[gen.header_name])
    marked = {stem for stem, text in units if pragma in text}
    assert marked and all("_derivatives" in stem or "_mass_matrix" in stem for stem in marked)
    assert any("_derivatives_stage1(" in text for stem, text in units if stem in marked)   # its stages too
    assert any(stem.endswith("_mass_matrix_inverse") for stem in marked)
    assert any("_forward_dynamics" in stem and "_derivatives" not in stem for stem, _ in units)
    assert not any("_forward_dynamics" in stem and "_derivatives" not in stem for stem in marked)
    assert pragma not in "".join(gen.files.values())            # the portable single-file C: none
    with_ra = soadyn_compile(robot, tmp_path / "ra", functions=funcs, progress=False, profile=TINY_STAGES)
    monkeypatch.setattr("soadyn.codegen.emit.PRIORITY_RA_FUNCTIONS", frozenset())
    without = soadyn_compile(robot, tmp_path / "plain", functions=funcs, progress=False, profile=TINY_STAGES)
    Q, V, A = _states(robot, 9)
    for name in ("inverse_dynamics_derivatives", "forward_dynamics_derivatives"):
        single = [np.stack([np.stack(getattr(m, name)(Q[i], V[i], A[i])) for i in range(len(Q))])
                  for m in (with_ra, without)]
        batch = [np.stack(getattr(m, name)(Q, V, A)) for m in (with_ra, without)]
        assert single[0].tobytes() == single[1].tobytes(), name
        assert batch[0].tobytes() == batch[1].tobytes(), name
    for name in ("mass_matrix", "mass_matrix_inverse"):
        single = [np.stack([getattr(m, name)(Q[i]) for i in range(len(Q))]) for m in (with_ra, without)]
        batch = [getattr(m, name)(Q) for m in (with_ra, without)]
        assert single[0].tobytes() == single[1].tobytes(), name
        assert batch[0].tobytes() == batch[1].tobytes(), name


def _fused(asm: str) -> int:
    """Fused multiply-add instructions (x86: ``vfmadd*``, ``vfmsub*``, ``vfmaddsub*``, ``vfnm*``) in gcc's
    assembly output."""
    return sum(1 for line in asm.splitlines() if line.strip().startswith(("vfm", "vfnm")))


def test_slp_units_no_fused_operations_same_bits(tmp_path, monkeypatch, cc):
    """The ID derivatives' scalar translation units carry :data:`~soadyn.codegen.units.SLP_PRAGMA` (gcc's SLP
    vectoriser on), their SIMD batch's units and the other functions' do not, and their stages read each
    work-array value once (``LOAD_ONCE_FUNCTIONS``).  gcc 12's SLP fuses add/subtract pairs with products
    (``vfmaddsub``) despite ``-ffp-contract=off``: the pragma's target line excludes every fused form --
    the units' assembly (fast flags) has none, while the same units without that line have some on an FMA
    machine (the check can fail).  The results, single call and batch, are the bits of the build without
    SLP and load-once."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.profiles import compiler_command, compiler_is_gcc
    from soadyn.codegen.units import SLP_PRAGMA, translation_units

    robot = load_robot(EXAMPLES / "test_arm.yaml")
    funcs = "inverse_dynamics_derivatives,forward_dynamics_derivatives"
    gen = pl.generate(robot, functions=funcs, profile=TINY_STAGES)
    units = translation_units(gen.functions, gen.files[gen.header_name])
    marked = {stem: text for stem, text in units if SLP_PRAGMA[1] in text}
    assert marked and all("_inverse_dynamics_derivatives" in s and "__simd" not in s for s in marked)
    assert any("_inverse_dynamics_derivatives__simd" in stem for stem, _ in units)   # lanes: no SLP
    assert any("_forward_dynamics_derivatives" in stem for stem, _ in units)
    load = re.compile(r"const double \w+ = w\[\d+\];")                             # a value loaded once
    assert any(load.search(text) for text in marked.values())
    assert not any(load.search(text) for stem, text in units if "_forward_dynamics" in stem)
    if compiler_is_gcc() and platform.machine().lower() in ("x86_64", "amd64"):
        command = [*compiler_command(), *get_profile("fast").cflags, "-S", "-o", "-", "-x", "c", "-"]
        cpuinfo = Path("/proc/cpuinfo")
        with_fma = cpuinfo.exists() and "fma" in cpuinfo.read_text().split()
        control = 0
        for stem, text in marked.items():
            asm = subprocess.run(command, input=text, capture_output=True, text=True)
            assert asm.returncode == 0, asm.stderr[:2000]
            assert _fused(asm.stdout) == 0, stem
            if with_fma:
                bare = text.replace(SLP_PRAGMA[2], "")
                control += _fused(subprocess.run(command, input=bare, capture_output=True, text=True).stdout)
        version = subprocess.run([*compiler_command(), "-dumpversion"], capture_output=True, text=True)
        gcc12 = version.stdout.strip().split(".")[0] == "12"
        assert control > 0 or not (with_fma and gcc12)   # without the target line gcc 12 fuses
    slp = soadyn_compile(robot, tmp_path / "slp", functions=funcs, progress=False, profile=TINY_STAGES)
    monkeypatch.setattr("soadyn.codegen.emit.SLP_FUNCTIONS", frozenset())
    monkeypatch.setattr("soadyn.codegen.emit.LOAD_ONCE_FUNCTIONS", frozenset())
    plain = soadyn_compile(robot, tmp_path / "plain", functions=funcs, progress=False, profile=TINY_STAGES)
    Q, V, A = _states(robot, 9)
    name = "inverse_dynamics_derivatives"
    single = [np.stack([np.stack(getattr(m, name)(Q[i], V[i], A[i])) for i in range(len(Q))])
              for m in (slp, plain)]
    batch = [np.stack(getattr(m, name)(Q, V, A)) for m in (slp, plain)]
    assert single[0].tobytes() == single[1].tobytes()
    assert batch[0].tobytes() == batch[1].tobytes()


def test_window_stages_same_bits(tmp_path, monkeypatch):
    """The stages of the :data:`~soadyn.codegen.units.WINDOW_FUNCTIONS` reach their most used work-array
    values through base pointers (``w0[-16]`` .. ``w0[15]``, made opaque by an empty ``asm``) over a work
    array laid out for them (``stages._hot_layout``), moved where a stage's next segment begins (segments
    made short here, so that the test arm's stages have several), and their stores into the outputs
    through base pointers of the outputs (``stages._output_bases``), runs of zeros as loops
    (``stages._zero_runs``), a taken jump every few statements (``stages._jumps``); with the ID
    derivatives added, the
    load-once stages read through them too (one segment each).  Data movement only: the single calls and
    the SIMD batches (which reuse the scalar stages' layout with stages this short) have the bits of the
    build without windows and jumps; so have the mass matrix's and M^-1's (windows and jumps too)."""
    import soadyn.codegen.pipeline as pl
    from soadyn.codegen.units import WINDOW_FUNCTIONS, translation_units

    robot = load_robot(EXAMPLES / "test_arm.yaml")
    funcs = "inverse_dynamics_derivatives,forward_dynamics_derivatives,mass_matrix,mass_matrix_inverse"
    both = WINDOW_FUNCTIONS | {"inverse_dynamics_derivatives", "inverse_dynamics_derivatives_fext"}
    monkeypatch.setattr("soadyn.codegen.emit.WINDOW_FUNCTIONS", both)
    monkeypatch.setattr("soadyn.codegen.stages.SEGMENT_WINDOWS", 1 / 16)
    gen = pl.generate(robot, functions=funcs, profile=TINY_STAGES)
    units = dict(translation_units(gen.functions, gen.files[gen.header_name]))
    base = re.compile(r'__asm__\("" : "\+r"\(w0\)\);')
    for name in ("_forward_dynamics_derivatives", "_inverse_dynamics_derivatives"):
        texts = [t for s, t in units.items() if name in s and "__simd" not in s]
        assert any(base.search(t) for t in texts), name
        assert any(re.search(r"w\d+\[-\d+\]", t) for t in texts), name
    assert any(re.search(r"\n +w0 = w \+ \d+;", t) for s, t in units.items()    # a segment's new base
               if "_forward_dynamics_derivatives" in s and "__simd" not in s)
    assert any(re.search(r"const double \w+ = w\d+\[-?\d+\];", t) for s, t in units.items()
               if "_inverse_dynamics_derivatives" in s)          # loaded once from a window
    # the outputs' stores through base pointers of their arrays (stages._output_bases)
    assert any(re.search(r"\n +ob_da_d\w+ = da_d\w+ \+ \d+;", t) for s, t in units.items()
               if "_forward_dynamics_derivatives" in s and "__simd" not in s)
    assert any(re.search(r"\n +ob_da_d\w+\[-?\d+\] = ", t) for s, t in units.items()
               if "_forward_dynamics_derivatives" in s and "__simd" not in s)
    # runs of exact zeros as short loops (stages._zero_runs)
    assert any(re.search(r"for \(int k = -?\d+; k < -?\d+; \+\+k\) ob_da_d\w+\[k\] = 0\.0;", t)
               for s, t in units.items() if "_forward_dynamics_derivatives" in s and "__simd" not in s)
    # a taken jump to the next instruction every JUMP_EVERY statements (stages._jumps): placement only
    assert any('__asm__ volatile("jmp 1f\\n1:");' in t for s, t in units.items()
               if "_forward_dynamics_derivatives" in s and "__simd" not in s)
    assert not any("jmp 1f" in t for s, t in units.items() if "__simd" in s)
    for name in ("_mass_matrix_inverse",):       # M^-1 (units.WIDE_MATRIX_FUNCTIONS)
        texts = [t for s, t in units.items() if s.endswith(name) or f"{name}_" in s and "__simd" not in s]
        assert any(base.search(t) for t in texts), name
    assert any('__asm__ volatile("jmp 1f\\n1:");' in t for s, t in units.items()
               if "_mass_matrix_inverse" in s and "__simd" not in s)
    windowed = soadyn_compile(robot, tmp_path / "w", functions=funcs, progress=False, profile=TINY_STAGES)
    # the build without windows and without jumps (the check above can fail)
    monkeypatch.setattr("soadyn.codegen.units.JUMP_FUNCTIONS", frozenset())
    gen_plain = pl.generate(robot, functions=funcs, profile=TINY_STAGES)
    assert not any("jmp 1f" in t for _, t in translation_units(gen_plain.functions,
                                                               gen_plain.files[gen_plain.header_name]))
    monkeypatch.setattr("soadyn.codegen.emit.WINDOW_FUNCTIONS", frozenset())
    plain = soadyn_compile(robot, tmp_path / "plain", functions=funcs, progress=False, profile=TINY_STAGES)
    Q, V, A = _states(robot, 9)
    for name in funcs.split(","):
        ins = (lambda i: (Q[i],)) if name.startswith("mass_matrix") else (lambda i: (Q[i], V[i], A[i]))
        single = [np.stack([np.stack(getattr(m, name)(*ins(i))) for i in range(len(Q))])
                  for m in (windowed, plain)]
        batch = [np.stack(getattr(m, name)(*((Q,) if name.startswith("mass_matrix") else (Q, V, A))))
                 for m in (windowed, plain)]
        assert single[0].tobytes() == single[1].tobytes(), name
        assert batch[0].tobytes() == batch[1].tobytes(), name


def test_taken_jumps_only_on_the_cpus_they_were_measured_on(monkeypatch):
    """The derivative stages' taken jumps (stages.JUMP_EVERY) are compiled in only where the fast profile
    defines SOADYN_TAKEN_JUMPS: AMD family 26 (Zen 5) and later and Intel family 6 model 207 (Emerald
    Rapids), read from /proc/cpuinfo's first processor; the generated source is the same everywhere (the
    jump is printed under that define)."""
    zen5 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n\nprocessor\t: 1\n"
    assert taken_jumps_help(zen5)
    assert not taken_jumps_help(zen5.replace(": 26", ": 25"))          # Zen 4
    assert not taken_jumps_help("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")
    emr = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 207\n"
    assert taken_jumps_help(emr)                                         # Emerald Rapids
    assert not taken_jumps_help(emr.replace(": 207", ": 85"))           # Skylake/Cascade Lake Xeon
    assert not taken_jumps_help(emr.replace(": 207", ": 2070"))
    assert not taken_jumps_help(emr.replace("GenuineIntel", "AuthenticAMD"))  # AMD family 6
    assert not taken_jumps_help("processor\t: 0\nCPU implementer\t: 0x41\n")   # aarch64
    assert not taken_jumps_help("")
    # the second processor's fields do not count
    assert not taken_jumps_help("vendor_id\t: GenuineIntel\ncpu family\t: 6\n\n"
                                "vendor_id\t: AuthenticAMD\ncpu family\t: 26\n")
    monkeypatch.delenv("SOADYN_CFLAGS", raising=False)
    monkeypatch.setattr("soadyn.codegen.profiles.taken_jumps_help", lambda cpuinfo=None: True)
    assert TAKEN_JUMPS_FLAG in get_profile("fast").cflags
    assert TAKEN_JUMPS_FLAG not in get_profile("portable").cflags
    monkeypatch.setattr("soadyn.codegen.profiles.taken_jumps_help", lambda cpuinfo=None: False)
    assert TAKEN_JUMPS_FLAG not in get_profile("fast").cflags
