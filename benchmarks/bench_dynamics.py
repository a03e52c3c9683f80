#!/usr/bin/env python3
# ruff: noqa: E501  (embedded C text)
"""Time what users get: the module ``soadyn compile`` ships, against Pinocchio C++ in the same run.

For each robot:

1. a fresh ``compile`` of every default function with the shipped default profile (``fast``) in a child
   process: seconds per phase (derive, optimise, emit, compile), wall time, peak memory (the Python
   process and the largest compiler process), operations;
2. the **shipped module's own compiled functions** (looked up in its extension with cffi) in a C timing
   loop over the same states as Pinocchio (``ns``), the result into one reused buffer as Pinocchio's goes
   to its ``data``; and into a new row per state ("outputs cycling", the writes missing the caches at
   37 DOF);
3. its batched entry point from Python over 20,000 states, one thread and ``threads=2`` (``ns/state``);
4. a single call from Python, new result array and ``out=`` (``us``);
5. Pinocchio's RNEA / CRBA / ABA / computeMinverse / frame Jacobian, header-only C++ compiled here with
   ``-O3 -DNDEBUG -march=native`` (``bench_pinocchio.py``; the program reads the model at run time, so one
   build serves every robot), and their Python bindings per call;
6. ratios Pinocchio / soadyn (> 1: soadyn faster).

Timing: process CPU time (``CLOCK_PROCESS_CPUTIME_ID`` / ``time.process_time``), the minimum over
repetitions, so that other jobs on a shared machine inflate the numbers as little as possible.  Both
sides are timed on the same states.

Usage::

    python benchmarks/bench_dynamics.py                          # Panda, free base, fingers locked (nv = 13)
    python benchmarks/bench_dynamics.py --robot examples/seed004_four_arm_37dof.yaml
    python benchmarks/bench_dynamics.py --sweep                  # chains of 7/14/28/56 joints, humanoid tree, 4-arm
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen import load  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402

#: soadyn function -> Pinocchio algorithm
PAIRS = {"inverse_dynamics": "rnea", "mass_matrix": "crba", "forward_dynamics": "aba",
         "mass_matrix_inverse": "minv", "jacobian_local": "frame_jacobian"}
SWEEP_FUNCTIONS = "inverse_dynamics,forward_dynamics,mass_matrix,mass_matrix_inverse,bias_forces,jacobian,momentum,center_of_mass"
TIMED = ("inverse_dynamics", "forward_dynamics", "mass_matrix", "mass_matrix_inverse", "bias_forces",
         "jacobian_local", "momentum", "center_of_mass")

# ---------------------------------------------------------------------------------------------------
# robots of the size sweep (URDF text, so that anyone can load them)
# ---------------------------------------------------------------------------------------------------
_INERTIAL = ('<inertial><origin xyz="{cx} 0 0" rpy="0 0 0"/><mass value="{m}"/>'
             '<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{iyy}" iyz="0" izz="{iyy}"/></inertial>')


def _link(name: str, m: float, length: float) -> str:
    ixx = 0.5 * m * 0.04 ** 2
    iyy = m * (3 * 0.04 ** 2 + length ** 2) / 12
    return f'<link name="{name}">' + _INERTIAL.format(cx=length / 2, m=m, ixx=ixx, iyy=iyy) + "</link>"


def _joint(name: str, parent: str, child: str, xyz: str, axis: str, rpy: str = "0 0 0") -> str:
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>'
            '<limit lower="-3.14" upper="3.14" effort="100" velocity="10"/></joint>')


def chain_urdf(n: int) -> str:
    """A serial chain of ``n`` revolute joints (axes alternating z, y, x; links 0.3 m, masses 2 kg down
    to 0.5 kg) on a 20 kg base."""
    parts = [f'<robot name="chain{n}">', _link("base", 20.0, 0.4)]
    axes = ("0 0 1", "0 1 0", "1 0 0")
    prev = "base"
    for i in range(1, n + 1):
        m = 2.0 - 1.5 * (i - 1) / max(n - 1, 1)
        parts += [_link(f"l{i}", m, 0.3), _joint(f"j{i}", prev, f"l{i}", "0.3 0 0" if i > 1 else "0.2 0 0.1",
                                                   axes[(i - 1) % 3], "0 0 0.1")]
        prev = f"l{i}"
    return "\n".join(parts + ["</robot>"])


def humanoid_urdf() -> str:
    """A branched humanoid-size tree: free pelvis, 3-joint waist, 2-joint head, two 7-joint arms, two
    6-joint legs (32 joints; nv = 38 with the free base)."""
    parts = ['<robot name="humanoid32">', _link("pelvis", 15.0, 0.2)]

    def limb(prefix: str, root: str, origin: str, axes: list[str], length: float, mass: float) -> None:
        prev = root
        for i, ax in enumerate(axes, 1):
            name = f"{prefix}{i}"
            parts.extend([_link(name, mass, length),
                          _joint(f"{name}_joint", prev, name, origin if i == 1 else f"{length} 0 0", ax)])
            prev = name

    limb("waist", "pelvis", "0 0 0.2", ["0 0 1", "0 1 0", "1 0 0"], 0.1, 5.0)
    limb("head", "waist3", "0.1 0 0.3", ["0 0 1", "0 1 0"], 0.1, 1.5)
    for side, y in (("l", 0.2), ("r", -0.2)):
        limb(f"{side}arm", "waist3", f"0.1 {y} 0.25", ["0 1 0", "1 0 0", "0 0 1", "0 1 0", "0 0 1", "0 1 0", "1 0 0"], 0.15, 1.2)
        limb(f"{side}leg", "pelvis", f"0 {y / 2} -0.1", ["0 0 1", "1 0 0", "0 1 0", "0 1 0", "0 1 0", "1 0 0"], 0.22, 3.0)
    return "\n".join(parts + ["</robot>"])


# ---------------------------------------------------------------------------------------------------
# Pinocchio model of a soadyn robot (same bodies, placements and inertias, same depth-first order)
# ---------------------------------------------------------------------------------------------------
def pin_model(robot, frame: str):
    import pinocchio as pin

    model = pin.Model()
    model.gravity.linear = np.asarray(robot.gravity, dtype=float)
    jid = {}
    if robot.is_free:
        jid[0] = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "root")
        model.appendBodyToJoint(jid[0], _pin_inertia(robot.inertias[0]), pin.SE3.Identity())
    else:
        jid[0] = 0
    eye = np.eye(3)
    for k in range(1, robot.n_bodies):
        j = robot.joints[k]
        axis = np.asarray(j.axis, dtype=float)
        which = next((i for i in range(3) if np.array_equal(axis, eye[i])), None)
        if j.type == "revolute":
            jm = (pin.JointModelRX(), pin.JointModelRY(), pin.JointModelRZ())[which] if which is not None \
                else pin.JointModelRevoluteUnaligned(axis)
        else:
            jm = (pin.JointModelPX(), pin.JointModelPY(), pin.JointModelPZ())[which] if which is not None \
                else pin.JointModelPrismaticUnaligned(axis)
        jid[k] = model.addJoint(jid[robot.parent[k]], jm, pin.SE3(j.placement.R, j.placement.p), j.name)
        model.appendBodyToJoint(jid[k], _pin_inertia(robot.inertias[k]), pin.SE3.Identity())
    body, X = robot.frame_of(frame)
    model.addFrame(pin.Frame(frame, jid[body], pin.SE3(X.R, X.p), pin.FrameType.OP_FRAME))
    return model


def _pin_inertia(I):
    import pinocchio as pin

    return pin.Inertia(float(I.mass), np.asarray(I.com, dtype=float), np.asarray(I.inertia, dtype=float))


# ---------------------------------------------------------------------------------------------------
# the shipped module's functions in a C loop
# ---------------------------------------------------------------------------------------------------
_HARNESS = r"""
#define _POSIX_C_SOURCE 199309L
#include <string.h>
#include <time.h>
typedef void (*f1)(const double *, double *);
typedef void (*f2)(const double *, const double *, double *);
typedef void (*f3)(const double *, const double *, const double *, double *);
typedef int (*ff)(const double *, int, double *);
static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
volatile double soadyn_bench_sink;
/* min over reps of ns per call; kind = number of inputs (1..3) or -1 for a frame family (q, frame, out) */
double soadyn_bench_time(void *fn, int kind, int n, int reps, int passes, const double **in, const int *stride,
                         double *out, int out_stride, int frame) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
        double t0 = cpu();
        for (int p = 0; p < passes; ++p)
            for (int i = 0; i < n; ++i) {
                double *o = out + (long)i * out_stride;
                switch (kind) {
                case 1: ((f1)fn)(in[0] + (long)i * stride[0], o); break;
                case 2: ((f2)fn)(in[0] + (long)i * stride[0], in[1] + (long)i * stride[1], o); break;
                case 3: ((f3)fn)(in[0] + (long)i * stride[0], in[1] + (long)i * stride[1], in[2] + (long)i * stride[2], o); break;
                default: ((ff)fn)(in[0] + (long)i * stride[0], frame, o); break;
                }
                soadyn_bench_sink += o[0];
            }
        double dt = (cpu() - t0) / ((double)n * passes) * 1e9;
        if (dt < best) best = dt;
    }
    return best;
}
/* min over reps of ns per state of the mass matrix into a buffer of n states; mode 0: the full-writing
 * scalar function per state; 1: a variant that needs a zeroed output, per state, buffer zeroed once before
 * timing (zeroing not timed); 2: the same with a memset of the state's matrix before each call (timed);
 * 3: the batched entry point (n states, one call); 4: memset of the whole batch buffer + the batched entry
 * point of a variant (timed) */
typedef void (*fb)(int, const double *, double *);
double soadyn_bench_mass(void *fn, int mode, int n, int reps, int passes, const double *q, int nq, double *out,
                         int size) {
    double best = 1e300;
    for (int r = 0; r < reps; ++r) {
        double t0 = cpu();
        for (int p = 0; p < passes; ++p) {
            if (mode >= 3) {
                if (mode == 4) memset(out, 0, sizeof(double) * (size_t)n * (size_t)size);
                ((fb)fn)(n, q, out);
                soadyn_bench_sink += out[(long)(n - 1) * size];
                continue;
            }
            for (int i = 0; i < n; ++i) {
                double *o = out + (long)i * size;
                if (mode == 2) memset(o, 0, sizeof(double) * (size_t)size);
                ((f1)fn)(q + (long)i * nq, o);
                soadyn_bench_sink += o[0];
            }
        }
        double dt = (cpu() - t0) / ((double)n * passes) * 1e9;
        if (dt < best) best = dt;
    }
    return best;
}
"""


def _harness(workdir: Path) -> ctypes.CDLL:
    src, lib = workdir / "harness.c", workdir / "harness.so"
    src.write_text(_HARNESS)
    subprocess.run([os.environ.get("CC", "gcc"), "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    h = ctypes.CDLL(str(lib))
    h.soadyn_bench_time.restype = ctypes.c_double
    h.soadyn_bench_time.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    h.soadyn_bench_mass.restype = ctypes.c_double
    h.soadyn_bench_mass.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    return h


#: rows of the mass-matrix structure measurement: (label, C function suffix, harness mode)
MASS_ROWS = (("full-writing, per state", "", 0),
             ("nonzero-only, per state, buffer pre-zeroed (zeroing not timed)", "_nz", 1),
             ("nonzero-only, per state, memset of the state's matrix + call", "_nz", 2),
             ("upper, per state, buffer pre-zeroed (zeroing not timed)", "_upper", 1),
             ("upper, per state, memset of the state's matrix + call", "_upper", 2),
             ("full-writing batched entry (n states)", "_batch", 3),
             ("nonzero-only batched entry, buffer pre-zeroed (zeroing not timed)", "_nz_batch", 3),
             ("memset of the batch buffer + nonzero-only batched entry", "_nz_batch", 4),
             ("memset of the batch buffer + upper batched entry", "_upper_batch", 4))


def _baseline_functions(module_dir: str | Path, name: str) -> dict[str, int]:
    """Addresses of ``<name>_mass_matrix`` and ``_batch`` in the extension of a module built by another
    soadyn version (``--baseline``), loaded with ctypes (its own symbols, RTLD_LOCAL)."""
    so = next(Path(module_dir).glob("_soadyn_*.so"))
    lib = ctypes.CDLL(str(so))
    return {suffix: ctypes.cast(getattr(lib, f"{name}_mass_matrix{suffix}"), ctypes.c_void_p).value
            for suffix in ("", "_batch")}


def time_mass_structure(h, mod, Q: np.ndarray, reps: int = 7, rounds: int = 3,
                        baseline: str | None = None) -> dict[str, float]:
    """ns per state of the shipped module's mass matrix: full-writing against the structured variants
    (:data:`MASS_ROWS`), interleaved over ``rounds`` so that load changes hit every row alike; the minimum
    over all repetitions.  Checks first that every variant reproduces the full function exactly.
    ``baseline``: a module directory of the same robot built by another soadyn version, whose full-writing
    function and batched entry are timed in the same rounds (and checked against this module's)."""
    ffi, lib, p = mod._ffi, mod._lib, mod.module_name
    nv = mod.nv
    size = nv * nv
    Q = np.ascontiguousarray(Q)
    n = len(Q)
    full = np.full((n, nv, nv), np.nan)
    getattr(lib, f"{p}_mass_matrix_batch")(n, ffi.from_buffer("double[]", Q), ffi.from_buffer("double[]", full))
    for suffix in ("_nz", "_upper"):
        o = np.zeros((n, nv, nv))
        getattr(lib, f"{p}_mass_matrix{suffix}_batch")(n, ffi.from_buffer("double[]", Q), ffi.from_buffer("double[]", o))
        ref = np.triu(full) if suffix == "_upper" else full
        assert np.array_equal(o, ref), f"{suffix}: differs from the full-writing function"
    rows = [(label, int(ffi.cast("uintptr_t", ffi.addressof(lib, f"{p}_mass_matrix{suffix}"))), mode)
            for label, suffix, mode in MASS_ROWS]
    if baseline:
        fns = _baseline_functions(baseline, p)
        o = np.full((n, nv, nv), np.nan)
        h.soadyn_bench_mass(fns["_batch"], 3, n, 1, 1, Q.ctypes.data, Q.shape[1], o.ctypes.data, size)
        assert np.array_equal(o, full), "the baseline module computes another mass matrix"
        rows += [("baseline module: full-writing, per state", fns[""], 0),
                 ("baseline module: full-writing batched entry (n states)", fns["_batch"], 3)]
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label, fn, mode in rows:
            o = np.zeros((n, size))
            t1 = h.soadyn_bench_mass(fn, mode, n, 1, 1, Q.ctypes.data, Q.shape[1], o.ctypes.data, size)
            passes = max(1, int(30e6 / max(t1 * n, 1.0)))
            t = h.soadyn_bench_mass(fn, mode, n, reps, passes, Q.ctypes.data, Q.shape[1], o.ctypes.data, size)
            best[label] = min(best.get(label, 1e300), t)
    return best


def python_mass_structure(mod, Q: np.ndarray, n_batch: int, rounds: int = 2) -> dict[str, float]:
    """ns per state from Python over ``n_batch`` states (CPU time, min of 5 x ``rounds``): the wrapper
    (new result and ``out=``, both triangles) and the two ways a new full result can be made (numpy.empty +
    the full-writing batched entry; numpy.zeros + the nonzero-only one), which the wrapper chooses between
    by the share of structural zeros (``soadyn.codegen.emit.SPARSE_NEW_RESULT``)."""
    ffi, lib, p, nv = mod._ffi, mod._lib, mod.module_name, mod.nv
    reps = -(-n_batch // len(Q))
    Qb = np.ascontiguousarray(np.tile(Q, (reps, 1))[:n_batch])
    fb = ffi.from_buffer
    full_b, nz_b = getattr(lib, f"{p}_mass_matrix_batch"), getattr(lib, f"{p}_mass_matrix_nz_batch")
    O = np.empty((n_batch, nv, nv))

    def empty_full():
        o = np.empty((n_batch, nv, nv))
        full_b(n_batch, fb("double[]", Qb), fb("double[]", o, True))

    def zeros_nz():
        o = np.zeros((n_batch, nv, nv))
        nz_b(n_batch, fb("double[]", Qb), fb("double[]", o, True))

    cases = {"numpy.empty + full-writing batched entry": empty_full,
             "numpy.zeros + nonzero-only batched entry": zeros_nz,
             "wrapper mass_matrix(Q) (new result)": lambda: mod.mass_matrix(Qb),
             "wrapper mass_matrix(Q, triangle='upper') (new result)": lambda: mod.mass_matrix(Qb, triangle="upper"),
             "wrapper mass_matrix(Q, out=O)": lambda: mod.mass_matrix(Qb, out=O),
             "wrapper mass_matrix(Q, triangle='upper', out=O)": lambda: mod.mass_matrix(Qb, triangle="upper", out=O)}
    best: dict[str, float] = {}
    for _ in range(rounds):
        for label, fn in cases.items():
            fn()
            for _ in range(5):
                t0 = time.process_time()
                fn()
                best[label] = min(best.get(label, 1e300), (time.process_time() - t0) / n_batch * 1e9)
    return best


def unit_compile_cpu(robot, profile: str, workdir: Path) -> dict[str, float]:
    """Compiler CPU seconds per generated mass-matrix function (its translation units: stages, SIMD lanes,
    the function and its batch entry), each unit compiled alone with the flags the build gives it."""
    import resource

    from soadyn.codegen.build import lowered_flags
    from soadyn.codegen.pipeline import generate
    from soadyn.codegen.profiles import compiler_command, get_profile
    from soadyn.codegen.units import lowered_unit, translation_units

    prof = get_profile(profile)
    gen = generate(robot, functions=["mass_matrix"], profile=prof)
    d = workdir / "units"
    d.mkdir(parents=True, exist_ok=True)
    (d / gen.header_name).write_text(gen.files[gen.header_name])
    out: dict[str, float] = {}
    for stem, text in translation_units(gen.functions, gen.files[gen.header_name]):
        (d / f"{stem}.c").write_text(text)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        flags = lowered_flags(prof.cflags) if lowered_unit(stem) else prof.cflags      # as the build does
        subprocess.run([*compiler_command(), "-c", "-fPIC", *flags, f"-I{d}", str(d / f"{stem}.c"), "-o",
                        str(d / f"{stem}.o")], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        fn = next(f.cname for f in sorted(gen.functions, key=lambda f: -len(f.cname)) if stem.startswith(f.cname))
        out[fn.removeprefix(gen.module_name + "_")] = out.get(fn.removeprefix(gen.module_name + "_"), 0.0) + (
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return out


def structure_robot(label: str, path: Path, base: str, lock: list[str], workdir: Path, profile: str,
                    n_states: int, n_batch: int, baseline: str | None = None) -> dict:
    """Fresh compile of ``mass_matrix`` alone, then :func:`time_mass_structure` on ``n_states`` states."""
    workdir.mkdir(parents=True, exist_ok=True)
    robot = load_robot(path, base=None if base == "file" else base, mimic="independent")
    if lock:
        robot = lock_joints(robot, lock)
    info = fresh_compile(path, base, lock, workdir / label, profile, "mass_matrix")
    mod = load(info["module_dir"])
    rng = np.random.default_rng(0)
    Q = np.array([robot.random_configuration(rng) for _ in range(n_states)])
    h = _harness(workdir)
    full = mod.mass_matrix(Q[0])
    ops = {k.removeprefix(mod.module_name + "_"): v["total"] for k, v in info["stamp"]["ops"].items()}
    return {"label": label, "robot": robot.name, "nv": robot.nv, "profile": info["stamp"].get("profile"),
            "cflags": info["stamp"].get("cflags"), "compile_s": info["stamp"]["timings"].get("compile"),
            "n_batch": n_batch, "compile_cpu_s": unit_compile_cpu(robot, profile, workdir / label),
            "entries": robot.nv ** 2, "exact_zeros": int(np.sum(full == 0)),
            "stored_nz": _stores(info["module_dir"], mod.module_name, "_nz"),
            "stored_upper": _stores(info["module_dir"], mod.module_name, "_upper"), "ops": ops,
            "ns": time_mass_structure(h, mod, Q, baseline=baseline), "python_ns": python_mass_structure(mod, Q, n_batch),
            "new_result_nz": f"_lib.{mod.module_name}_mass_matrix_nz, " in Path(mod.__file__).read_text(),
            "load": os.getloadavg()[0]}


def _stores(module_dir: str, module_name: str, suffix: str) -> int:
    """Output stores of the C function ``<module>_mass_matrix<suffix>`` in the module's portable source."""
    text = (Path(module_dir) / f"{module_name}.c").read_text()
    body = text.split(f"void {module_name}_mass_matrix{suffix}(const double *q, double *M)\n{{", 1)[1].split("\n}", 1)[0]
    return sum(1 for line in body.splitlines() if line.strip().startswith("M["))


def structure_report(r: dict) -> str:
    lines = [f"### {r['label']}: {r['robot']} (nv = {r['nv']}), mass matrix structure", "",
             f"profile `{r['profile']}` ({' '.join(r['cflags'] or [])}); {r['entries']:,} entries, "
             f"{r['exact_zeros']:,} exact zeros; stores: full {r['entries']:,}, nonzero-only {r['stored_nz']:,}, "
             f"upper {r['stored_upper']:,}; operations {r['ops']}; load average {r['load']:.1f}", "",
             "compiler CPU per function (its units compiled one by one): "
             + ", ".join(f"{k} {v:.1f} s" for k, v in r["compile_cpu_s"].items()), "",
             "| variant | ns/state (CPU, min) | vs full-writing per state |", "|---|---|---|"]
    base = r["ns"][MASS_ROWS[0][0]]
    for label, t in r["ns"].items():
        lines.append(f"| {label} | {t:.0f} | {base / t:.2f}x |")
    way = "numpy.zeros + nonzero-only" if r["new_result_nz"] else "numpy.empty + full-writing"
    lines += ["", f"From Python, batch of {r['n_batch']:,} states (a new full result here: {way}):", "",
              "| call | ns/state (CPU, min) |", "|---|---|"]
    lines += [f"| {label} | {t:.0f} |" for label, t in r["python_ns"].items()]
    return "\n".join(lines) + "\n"


def time_shipped(h, mod, states: dict, frame_id: int, reps: int = 7, cycling: bool = False) -> dict[str, float]:
    """ns per call of the module's own compiled functions (the cffi extension's symbols).

    The result goes to one output buffer, reused by every call, as Pinocchio's goes to its ``data``
    (``data.M``, ``data.Minv``, ...); ``cycling``: to a new row of an (n_states, size) array per state
    instead (at 37 DOF a 1,369-entry M^-1 row per call: the writes then miss the caches)."""
    ffi, lib, p = mod._ffi, mod._lib, mod.module_name
    nv = mod.nv
    Q, V, T = states["q"], states["v"], states["tau"]
    n = len(Q)
    args = {"inverse_dynamics": ([Q, V, T], nv), "forward_dynamics": ([Q, V, T], nv), "mass_matrix": ([Q], nv * nv),
            "mass_matrix_inverse": ([Q], nv * nv), "bias_forces": ([Q, V], nv), "momentum": ([Q, V], 6),
            "center_of_mass": ([Q], 3), "jacobian_local": ([Q], 6 * nv)}
    out = {}
    for name in TIMED:
        cname = f"{p}_{name}"
        if cname not in mod.op_counts:
            continue
        ins, osize = args[name]
        fn = int(ffi.cast("uintptr_t", ffi.addressof(lib, cname)))
        kind = -1 if name == "jacobian_local" else len(ins)
        arrs = [np.ascontiguousarray(a) for a in ins]
        ptrs = (ctypes.c_void_p * 3)(*[a.ctypes.data for a in arrs], *([0] * (3 - len(arrs))))
        strides = (ctypes.c_int * 3)(*[a.shape[1] for a in arrs], *([0] * (3 - len(arrs))))
        o = np.empty((n, osize))
        step = osize if cycling else 0
        t1 = h.soadyn_bench_time(fn, kind, n, 1, 1, ptrs, strides, o.ctypes.data, step, frame_id)
        passes = max(1, int(30e6 / max(t1 * n, 1.0)))          # ~30 ms per repetition
        out[name] = h.soadyn_bench_time(fn, kind, n, reps, passes, ptrs, strides, o.ctypes.data, step, frame_id)
    return out


_PROTO = re.compile(r"^(void|int) (\w+)\(([^)]*)\);$", re.M)


def prototypes(mod) -> dict[str, tuple[str, list[tuple[str, str, int]]]]:
    """``{C name: (return type, [(kind, argument name, doubles per state), ...])}`` of the module's
    single-state functions: kinds and names from its header (``in``: ``const double *``, ``out``:
    ``double *``, ``frame``: ``int``), sizes from the call of the function in its batched entry's loop in the
    module's source (``x + (long)i * N``)."""
    d = Path(mod.__file__).parent
    header, source = (d / f"{mod.module_name}.h").read_text(), (d / f"{mod.module_name}.c").read_text()
    out = {}
    for ret, name, args in _PROTO.findall(header):
        parts = [a.strip() for a in args.split(",")]
        if parts and parts[0] == "int n":
            continue                                 # a batched entry point
        batch = source[source.index(f" {name}_batch(int n"):]
        call = re.search(rf"\b{name}\(([^;]*)\);", batch[batch.index("{"):])
        sizes = [int(m.group(1)) if m else 0 for m in (re.search(r"\(long\)i \* (\d+)$", a.strip())
                                                       for a in call.group(1).split(","))]
        kinds = []
        for a, size in zip(parts, sizes):
            arg = a.rsplit("*", 1)[-1].split()[-1]
            kinds.append(("in" if a.startswith("const double") else "out" if a.startswith("double") else "frame",
                          arg, size))
        out[name] = (ret, kinds)
    return out


def _any_harness(protos: dict, workdir: Path) -> ctypes.CDLL:
    """A shared library with ``t_<i>(fn, n, reps, passes, in, stride, out, frame)`` per prototype: ``fn``
    called through its exact type, inputs per state, every output into one reused buffer, min over reps of
    ns per call (process CPU time)."""
    lines = ["#define _POSIX_C_SOURCE 199309L", "#include <time.h>",
             "static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); "
             "return t.tv_sec + 1e-9 * t.tv_nsec; }", "volatile double soadyn_bench_sink;"]
    for i, (ret, kinds) in enumerate(protos.values()):
        types = ", ".join("const double *" if k == "in" else "double *" if k == "out" else "int" for k, *_ in kinds)
        ins = outs = 0
        call = []
        for k, *_ in kinds:
            if k == "in":
                call.append(f"in[{ins}] + (long)i * stride[{ins}]")
                ins += 1
            elif k == "out":
                call.append(f"out[{outs}]")
                outs += 1
            else:
                call.append("frame")
        lines += [f"double t_{i}(void *fn, int n, int reps, int passes, const double **in, const int *stride, "
                  "double **out, int frame) {",
                  f"  typedef {ret} (*F)({types}); double best = 1e300;",
                  "  for (int r = 0; r < reps; ++r) { double t0 = cpu();",
                  "    for (int p = 0; p < passes; ++p) for (int i = 0; i < n; ++i) "
                  f"{{ ((F)fn)({', '.join(call)}); soadyn_bench_sink += out[0][0]; }}",
                  "    double dt = (cpu() - t0) / ((double)n * passes) * 1e9; if (dt < best) best = dt; }",
                  "  return best; }"]
    src, lib = workdir / "harness_any.c", workdir / "harness_any.so"
    src.write_text("\n".join(lines) + "\n")
    subprocess.run([os.environ.get("CC", "gcc"), "-O2", "-shared", "-fPIC", str(src), "-o", str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def time_module_functions(mod, names: list[str], inputs: dict[str, np.ndarray], workdir: Path, frame_id: int = 0,
                          reps: int = 7, library: Path | None = None) -> dict[str, float]:
    """ns per call of the module's own compiled single-state functions ``names`` (C names without the module
    prefix, any signature of its header: :func:`prototypes`) in a C loop over the states of ``inputs``
    (argument name -> (n, size) array), each output into one reused buffer of its size; min over ``reps``
    repetitions of ~30 ms.  ``library``: a copy of the module's shared object to take the functions from
    (a fresh copy is a fresh placement of its pages: the same bytes can differ by up to 2x in speed between
    copies, benchmarks/README.md)."""
    ffi, lib, p = mod._ffi, mod._lib, mod.module_name
    copy = ctypes.CDLL(str(library)) if library is not None else None
    allp = prototypes(mod)
    protos = {f"{p}_{f}": allp[f"{p}_{f}"] for f in names if f"{p}_{f}" in allp}
    workdir.mkdir(parents=True, exist_ok=True)
    h = _any_harness(protos, workdir)
    n = len(inputs["q"])
    res = {}
    for i, (cname, (_, kinds)) in enumerate(protos.items()):
        arrs = [np.ascontiguousarray(inputs[a]) for k, a, _ in kinds if k == "in"]
        bad = [(a, x.shape[1], size) for (k, a, size), x in zip([k for k in kinds if k[0] == "in"], arrs)
               if x.shape[1] != size]
        if bad:
            raise ValueError(f"{cname}: input width differs from the C function's (name, given, C): {bad}")
        outs = [np.zeros(size) for k, _, size in kinds if k == "out"]
        ptrs = (ctypes.c_void_p * max(1, len(arrs)))(*[a.ctypes.data for a in arrs])
        strides = (ctypes.c_int * max(1, len(arrs)))(*[a.shape[1] for a in arrs])
        optrs = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        t = getattr(h, f"t_{i}")
        t.restype = ctypes.c_double
        t.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                      ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p), ctypes.c_int]
        fn = (ctypes.cast(getattr(copy, cname), ctypes.c_void_p).value if copy is not None
              else int(ffi.cast("uintptr_t", ffi.addressof(lib, cname))))
        t1 = t(fn, n, 1, 1, ptrs, strides, optrs, frame_id)
        passes = max(1, int(30e6 / max(t1 * n, 1.0)))
        res[cname.removeprefix(p + "_")] = t(fn, n, reps, passes, ptrs, strides, optrs, frame_id)
    return res


def _py_us(fn, args, kw=None, repeat: int = 20000, reps: int = 5) -> float:
    kw = kw or {}
    fn(*args, **kw)
    best = 1e300
    for _ in range(reps):
        t0 = time.process_time()
        for _ in range(repeat):
            fn(*args, **kw)
        best = min(best, time.process_time() - t0)
    return best / repeat * 1e6


def _threads_ns(fn, args, n: int, threads: int, reps: int = 15) -> tuple[float, float]:
    """Wall-clock ns per state of one batched call over n states with threads=1 and threads=k, measured
    alternately (a burst of other jobs hits both alike), minimum over ``reps`` each."""
    best = {1: 1e300, threads: 1e300}
    fn(*args, threads=threads)
    for _ in range(reps):
        for k in best:
            t0 = time.perf_counter()
            fn(*args, threads=k)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best[1] / n * 1e9, best[threads] / n * 1e9


def _batch_ns(fn, args, n: int, threads=None, reps: int = 5) -> float:
    """ns per state of one batched call over n states (wall clock with threads, else CPU time)."""
    clock = time.perf_counter if threads else time.process_time
    fn(*args, threads=threads)
    best = 1e300
    for _ in range(reps):
        t0 = clock()
        fn(*args, threads=threads)
        best = min(best, clock() - t0)
    return best / n * 1e9


# ---------------------------------------------------------------------------------------------------
# one robot
# ---------------------------------------------------------------------------------------------------
_COMPILE_CHILD = r"""
import json, resource, sys, time
from soadyn import load_robot
from soadyn.structure.operations import lock_joints
from soadyn.codegen import compile
path, base, lock, out, profile = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
functions, rigid = sys.argv[6] or None, sys.argv[7] == "rigid"
t0 = time.perf_counter()
robot = load_robot(path, base=None if base == "file" else base, mimic="independent")
if lock:
    robot = lock_joints(robot, lock)
if rigid:
    robot = robot.rigid()
m = compile(robot, out_dir=out, functions=functions, force=True, progress=False, profile=profile)
wall = time.perf_counter() - t0
print(json.dumps({"wall": wall, "module_dir": str(__import__("pathlib").Path(m.__file__).parent),
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "compiler_maxrss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def fresh_compile(path: Path, base: str, lock: list[str], workdir: Path, profile: str,
                  functions: str | None = None, rigid: bool = False) -> dict:
    """A first compile in a child process (no object cache); ``rigid``: the robot's joints made ideal
    (``Robot.rigid``: no armature, damping or friction, as in a Pinocchio model)."""
    out = workdir / "modules"
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, SOADYN_OBJECT_CACHE="off")   # a first compile: no object reused
    res = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, str(path), base, json.dumps(lock), str(out), profile,
                          functions or "", "rigid" if rigid else ""], capture_output=True, text=True, check=False, env=env)
    if res.returncode != 0:
        raise SystemExit(f"compile failed:\n{res.stderr[-3000:]}")
    info = json.loads(res.stdout.strip().splitlines()[-1])
    info["stamp"] = json.loads((Path(info["module_dir"]) / "soadyn_stamp.json").read_text())
    return info


def bench_robot(label: str, path: Path, base: str, lock: list[str], frame: str | None, workdir: Path,
                profile: str, n_states: int, n_batch: int, pinocchio: bool, functions: str | None = None) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    robot = load_robot(path, base=None if base == "file" else base, mimic="independent")
    if lock:
        robot = lock_joints(robot, lock)
    frame = frame or (robot.frame_names[-1] if robot.frame_names else robot.body_names[-1])
    info = fresh_compile(path, base, lock, workdir / label, profile, functions)
    mod = load(info["module_dir"])
    stamp = info["stamp"]

    pm = pin_model(robot, frame)
    pst = bp.random_states(pm, n_states, seed=0)
    st = bp.states_to_soadyn(pst, robot.is_free)
    h = _harness(workdir)
    c_ns = time_shipped(h, mod, st, mod.frame_ids[frame])
    c_ns_cycling = time_shipped(h, mod, st, mod.frame_ids[frame], cycling=True)

    # from Python: batched entry (n_batch states) and single calls
    reps = -(-n_batch // n_states)
    Qb, Vb, Tb = (np.ascontiguousarray(np.tile(st[k], (reps, 1))[:n_batch]) for k in ("q", "v", "tau"))
    has = {k for k in ("inverse_dynamics", "forward_dynamics", "mass_matrix", "mass_matrix_inverse")
           if hasattr(mod, k)}                       # --functions may compile a subset
    batch_args = {"inverse_dynamics": (Qb, Vb, Tb), "forward_dynamics": (Qb, Vb, Tb), "mass_matrix": (Qb,),
                  "mass_matrix_inverse": (Qb,)}
    batch1 = {k: _batch_ns(getattr(mod, k), a, n_batch) for k, a in batch_args.items() if k in has}
    batch2: dict = {"load_average": os.getloadavg()[0]}
    if "forward_dynamics" in has:
        one, two = _threads_ns(mod.forward_dynamics, (Qb, Vb, Tb), n_batch, 2)
        batch2.update(forward_dynamics=two, forward_dynamics_1thread_wall=one)
    q, v, tau = st["q"][0], st["v"][0], st["tau"][0]
    a_out, M_out = np.empty(robot.nv), np.empty((robot.nv, robot.nv))
    py_args = {"inverse_dynamics": (q, v, tau), "forward_dynamics": (q, v, tau), "mass_matrix": (q,),
               "mass_matrix_inverse": (q,)}
    py = {k: _py_us(getattr(mod, k), a) for k, a in py_args.items() if k in has}
    for k, o in (("inverse_dynamics", a_out), ("forward_dynamics", a_out), ("mass_matrix", M_out)):
        if k in has:
            py[k + "_out"] = _py_us(getattr(mod, k), py_args[k], {"out": o})

    pin_res = None
    if pinocchio:
        pin_res = bp.bench_pinocchio_model(pm, frame, n_states=n_states, workdir=workdir.parent / "pinocchio",
                                           states=pst)
    # Pinocchio's Python bindings (no C++ build needed)
    import pinocchio as pin

    data = pm.createData()
    qp, vp, tp = pst["q"][0], pst["v"][0], pst["tau"][0]
    pin_py = {"rnea": _py_us(pin.rnea, (pm, data, qp, vp, tp)), "aba": _py_us(pin.aba, (pm, data, qp, vp, tp)),
              "crba": _py_us(pin.crba, (pm, data, qp)), "minv": _py_us(pin.computeMinverse, (pm, data, qp))}
    # same numbers on both sides (state 0): FD vs ABA
    pa = pin.aba(pm, data, qp, vp, tp)
    ours = bp.states_to_soadyn({"a": pa[None, :]}, robot.is_free)["a"][0]
    if "forward_dynamics" in has:
        pin_py["fd_max_rel_diff"] = float(np.max(np.abs(mod.forward_dynamics(q, v, tau) - ours))
                                          / np.max(np.abs(ours)))
    t = stamp["timings"]
    ops = {k.removeprefix(mod.module_name + "_"): v["total"] for k, v in stamp["ops"].items()}
    fam = mod.frame_op_counts.get(f"{mod.module_name}_jacobian_local")
    if fam:
        ops["jacobian_local"] = fam["prefix"] + fam[frame]
    return {"label": label, "robot": robot.name, "nq": robot.nq, "nv": robot.nv, "base": robot.base,
            "frame": frame, "profile": stamp.get("profile"), "cflags": stamp.get("cflags"),
            "phases_s": t, "wall_s": info["wall"], "maxrss_mb": info["maxrss_mb"],
            "compiler_maxrss_mb": info["compiler_maxrss_mb"], "n_functions": len(stamp["ops"]),
            "total_ops": sum(v["total"] for v in stamp["ops"].values()), "ops": ops, "c_ns": c_ns,
            "c_ns_cycling": c_ns_cycling,
            "batch_ns": batch1, "batch_threads": batch2, "python_us": py,
            "pinocchio_ns": pin_res["ns_per_call"] if pin_res else None,
            "pinocchio_check": pin_res["check_max_rel_diff"] if pin_res else None, "pinocchio_python_us": pin_py}


def report(r: dict) -> str:
    lines = [f"### {r['label']}: {r['robot']} ({r['base']} base, nq = {r['nq']}, nv = {r['nv']})", "",
             f"profile `{r['profile']}` ({' '.join(r['cflags'] or [])}); {r['n_functions']} C functions, "
             f"{r['total_ops']:,} operations; " + ", ".join(f"{k} {v:.1f} s" for k, v in r["phases_s"].items())
             + f"; wall {r['wall_s']:.1f} s; peak memory {r['maxrss_mb']:.0f} MB (Python), "
             f"{r['compiler_maxrss_mb']:.0f} MB (largest compiler process)", "",
             "| function | ops | C ns (shipped) | C ns, outputs cycling | batch ns/state | Python us (1 state) "
             "| Pinocchio C++ ns | ratio C | ratio batch |",
             "|---|---|---|---|---|---|---|---|---|"]
    pin = r["pinocchio_ns"] or {}
    for fn in TIMED:
        if fn not in r["c_ns"]:
            continue
        c = r["c_ns"][fn]
        b = r["batch_ns"].get(fn)
        p = pin.get(PAIRS.get(fn, ""))
        cell = lambda x, f: "-" if x is None else format(x, f)  # noqa: E731
        cyc = r.get("c_ns_cycling", {}).get(fn)
        lines.append(f"| {fn} | {r['ops'].get(fn, 0):,} | {c:.0f} | {cell(cyc, '.0f')} | {cell(b, '.0f')} | "
                     f"{cell(r['python_us'].get(fn), '.2f')} | {cell(p, '.0f')} | "
                     f"{cell(p / c if p else None, '.2f')}x | {cell(p / b if p and b else None, '.2f')}x |")
    bt = r["batch_threads"]
    py = r["python_us"]
    lines += [""]
    if "forward_dynamics" in bt:
        outs = ", ".join(f"{label} {py[k]:.2f} us" for label, k in (
            ("FD", "forward_dynamics_out"), ("ID", "inverse_dynamics_out"), ("M", "mass_matrix_out")) if k in py)
        lines += [f"FD batch over states, wall (alternating, min of 15): 1 thread "
                  f"{bt['forward_dynamics_1thread_wall']:.0f} ns/state, threads=2 {bt['forward_dynamics']:.0f} "
                  f"ns/state ({bt['forward_dynamics_1thread_wall'] / bt['forward_dynamics']:.2f}x; load average "
                  f"{bt['load_average']:.1f}); Python with out=: {outs}"]
    if r["pinocchio_python_us"]:
        pp = r["pinocchio_python_us"]
        lines.append(f"Pinocchio Python binding per call: rnea {pp['rnea']:.2f} us, aba {pp['aba']:.2f} us, "
                     f"crba {pp['crba']:.2f} us, computeMinverse {pp['minv']:.2f} us"
                     + (f"; |FD - ABA| / |ABA| at state 0: {pp['fd_max_rel_diff']:.1e}"
                        if "fd_max_rel_diff" in pp else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="panda", help="'panda' (preset) or a robot file (.yaml/.urdf)")
    ap.add_argument("--base", choices=("free", "fixed", "file"), default="free",
                    help="base type (file: as the robot file says)")
    ap.add_argument("--sweep", action="store_true", help="chains of 7/14/28/56 joints, humanoid tree, 4-arm robot")
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=20000)
    ap.add_argument("--workdir", default=str(HERE / "build"))
    ap.add_argument("--no-pinocchio", action="store_true",
                    help="skip Pinocchio's C++ build and timing (its Python bindings are still timed)")
    ap.add_argument("--functions", default=None,
                    help="compile only these API functions (default: all; --sweep default: " + SWEEP_FUNCTIONS + ")")
    ap.add_argument("--sizes", default="7,14,28,56", help="chain lengths of the sweep")
    ap.add_argument("--mass-structure", action="store_true",
                    help="only the mass matrix: full-writing vs nonzero-only vs upper triangle (issue 11, item 3)")
    ap.add_argument("--baseline", help="with --mass-structure: a module directory of the same robot built by "
                    "another soadyn version ('{module}' is replaced by the robot's label), timed in the same run")
    ap.add_argument("--out", help="write the JSON results here")
    args = ap.parse_args(argv)
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    jobs = []
    if args.sweep:
        gen = Path(tempfile.mkdtemp(prefix="soadyn_sweep_", dir=work))
        for n in (int(s) for s in args.sizes.split(",") if s):
            p = gen / f"chain{n}.urdf"
            p.write_text(chain_urdf(n))
            jobs.append((f"chain{n}", p, "free", [], None))
        p = gen / "humanoid32.urdf"
        p.write_text(humanoid_urdf())
        jobs.append(("humanoid32", p, "free", [], None))
        jobs.append(("four_arm_37dof", REPO / "examples" / "seed004_four_arm_37dof.yaml", "file", [], None))
    elif args.robot == "panda":
        pre = bp.PRESETS["panda"]
        jobs.append(("panda", pre["urdf"](), args.base, pre["lock"], pre["frame"]))
    else:
        jobs.append((Path(args.robot).stem, Path(args.robot), args.base, [], None))
    results = []
    print(f"machine: {bp.machine_info()}; {bp._compiler_version(bp._compiler('c'))}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    for label, path, base, lock, frame in jobs:
        if args.mass_structure:
            baseline = args.baseline.replace("{module}", label) if args.baseline else None
            r = structure_robot(label, path, base, lock, work / "runs", args.profile, args.states, args.batch,
                                baseline)
            results.append(r)
            print(structure_report(r), flush=True)
            continue
        functions = args.functions or (SWEEP_FUNCTIONS if args.sweep else None)
        r = bench_robot(label, path, base, lock, frame, work / "runs", args.profile, args.states, args.batch,
                        not args.no_pinocchio, functions)
        results.append(r)
        print(report(r), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
