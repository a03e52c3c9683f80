#!/usr/bin/env python3
# ruff: noqa: E501  (long lines are the embedded C/C++ program text)
"""Time Pinocchio's C++ dynamics (RNEA, CRBA, ABA, M^-1, frame Jacobian), and generic C functions.

Pinocchio side (:func:`bench_pinocchio`): the URDF is parsed with the Python ``pin`` package (optionally
with a free-flyer root and some joints locked); the resulting ``pinocchio::Model`` is written out as C++
source that rebuilds exactly the same model (same joint types -- RZ, PrismaticUnaligned, FreeFlyer ...,
placements, inertias, the timed frame), so the program is **header-only**: every Pinocchio algorithm is
instantiated in our translation unit and compiled with our flags (``PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION``
is *not* defined, and no Pinocchio library is linked; Eigen/Boost headers come from the cmeel wheels).
This is what makes the comparison with the generated C fair: same compiler, same flags.  A correctness
check compares the C++ results at one state with Python ``pin`` on the original model.

Our side (:func:`time_c_functions`): a generic C99 timing loop over functions of the form
``void f(const double *in1, ..., double *out1, ...)`` compiled together with the ``.c`` files of a
directory, same flags, same state count and repetition scheme.

Timing scheme (both sides): ``n_states`` (1000) random states are stored in arrays; one *pass* calls
the function once per state; passes are repeated until a repetition lasts >= ``min_rep_ms``; ``reps``
repetitions are timed and the JSON reports ns/call as the median (and min, max) over repetitions.  A
checksum of the outputs is accumulated into a volatile sink so no call can be optimised away.

Usage::

    python benchmarks/bench_pinocchio.py --robot panda --base free            # Panda, fingers locked
    python benchmarks/bench_pinocchio.py --urdf my.urdf --base fixed --frame tool0 --out res.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

#: Optimisation flags shared by the Pinocchio C++ program and the generated C (recorded in the JSON).
DEFAULT_FLAGS: tuple[str, ...] = ("-O3", "-DNDEBUG", "-march=native")
CXX_STD = "-std=c++17"
C_STD = "-std=c99"
ALGORITHMS = ("rnea", "crba", "aba", "minv", "frame_jacobian")


class BenchError(RuntimeError):
    """A benchmark could not be set up, compiled or run; the message says what to fix."""


# ---- environment ---------------------------------------------------------------------------------------

def cmeel_prefix() -> Path:
    """``<site-packages>/cmeel.prefix`` of the installed ``pin``/``libpinocchio``/``cmeel-*`` wheels."""
    import pinocchio

    for parent in Path(pinocchio.__file__).resolve().parents:
        cand = parent / "cmeel.prefix"
        if (cand / "include" / "pinocchio").is_dir():
            return cand
    raise BenchError("cannot find cmeel.prefix/include/pinocchio next to the 'pin' package; "
                     "install the wheels with: pip install pin cmeel-eigen cmeel-boost")


def _cmeel_prefixes() -> list[Path]:
    """Every ``cmeel.prefix`` on ``sys.path`` (a venv with system site-packages has two), then those listed
    in ``SOADYN_CMEEL_PREFIX`` (``:``-separated; e.g. a venv whose wheels ship the Eigen headers)."""
    out = [cmeel_prefix()]
    for entry in sys.path:
        for cand in (Path(entry) / "cmeel.prefix", *Path(entry).parents):
            cand = cand if cand.name == "cmeel.prefix" else cand / "cmeel.prefix"
            if cand.is_dir() and cand not in out:
                out.append(cand)
    out += [Path(x) for x in os.environ.get("SOADYN_CMEEL_PREFIX", "").split(os.pathsep) if x]
    return out


def pinocchio_compile_args(prefix: Path | None = None) -> list[str]:
    """Include paths and defines for a header-only Pinocchio program (no libraries needed)."""
    prefixes = _cmeel_prefixes() if prefix is None else [prefix]
    dirs: list[Path] = []
    for needed in ("pinocchio", "eigen3/Eigen", "boost"):
        found = next((p / "include" for p in prefixes if (p / "include" / needed).exists()), None)
        if found is None:
            raise BenchError(f"include/{needed} is missing from {[str(p) for p in prefixes]}; install the cmeel "
                             "wheels (pip install pin cmeel-eigen cmeel-boost)")
        for d in (found, found / "eigen3"):
            if d not in dirs:
                dirs.append(d)
    return [f"-I{d}" for d in dirs] + [
            # as pinocchio's exported CMake target does (Boost.MPL limits for the joint variant)
            "-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
            "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12"]


def _compiler(kind: str) -> str:
    name = os.environ.get("CXX" if kind == "c++" else "CC") or ("g++" if kind == "c++" else "gcc")
    path = shutil.which(name)
    if path is None:
        raise BenchError(f"compiler {name!r} not found on PATH; install it or set "
                         f"{'CXX' if kind == 'c++' else 'CC'}")
    return path


def _compiler_version(cc: str) -> str:
    out = subprocess.run([cc, "--version"], capture_output=True, text=True, check=False).stdout
    return out.splitlines()[0] if out else cc


def machine_info() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform()}


def _run(cmd: Sequence[str], what: str, cwd: Path | None = None) -> str:
    res = subprocess.run(list(cmd), capture_output=True, text=True, cwd=cwd, check=False)
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).splitlines()[-30:])
        raise BenchError(f"{what} failed (exit {res.returncode}): {' '.join(cmd)}\n{tail}")
    return res.stdout


# ---- the Pinocchio model ----------------------------------------------------------------------------------

def panda_urdf() -> Path:
    """The Panda URDF shipped by the ``example-robot-data`` wheel."""
    p = cmeel_prefix() / "share" / "example-robot-data" / "robots" / "panda_description" / "urdf" / "panda.urdf"
    if not p.is_file():
        raise BenchError(f"{p} not found; install example-robot-data (pip install example-robot-data)")
    return p


PRESETS = {
    # Panda arm without its two finger joints (locked at 0): nv = 7 fixed, 13 free (the figure).
    "panda": {"urdf": panda_urdf, "lock": ["panda_finger_joint1", "panda_finger_joint2"],
              "frame": "panda_hand_tcp"},
}


def load_pin_model(urdf: str | Path, base: str, lock_joints: Sequence[str] = ()):
    """Parse a URDF with ``pin``; ``base='free'`` adds a free-flyer root; listed joints are locked at 0."""
    import pinocchio as pin

    urdf = Path(urdf)
    if base not in ("free", "fixed"):
        raise BenchError(f"base must be 'free' or 'fixed', got {base!r}")
    if not urdf.is_file():
        raise BenchError(f"URDF file {urdf} not found")
    model = (pin.buildModelFromUrdf(str(urdf), pin.JointModelFreeFlyer()) if base == "free"
             else pin.buildModelFromUrdf(str(urdf)))
    if lock_joints:
        ids = []
        for name in lock_joints:
            if not model.existJointName(name):
                raise BenchError(f"{urdf}: no joint {name!r} to lock; joints: {list(model.names)[1:]}")
            ids.append(model.getJointId(name))
        model = pin.buildReducedModel(model, ids, pin.neutral(model))
    return model


def _num(x: float) -> str:
    return repr(float(x))


def _vec3(v) -> str:
    return f"Eigen::Vector3d({', '.join(_num(a) for a in np.asarray(v).ravel())})"


def _mat3(m) -> str:
    m = np.asarray(m)
    return f"(Eigen::Matrix3d() << {', '.join(_num(a) for a in m.ravel())}).finished()"


def _joint_cpp(j) -> str:
    kind = j.shortname()
    simple = {"JointModelFreeFlyer", "JointModelRX", "JointModelRY", "JointModelRZ", "JointModelPX",
              "JointModelPY", "JointModelPZ", "JointModelRUBX", "JointModelRUBY", "JointModelRUBZ",
              "JointModelSpherical", "JointModelPlanar", "JointModelTranslation"}
    if kind in simple:
        return f"pinocchio::{kind}()"
    if kind in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned",
                "JointModelRevoluteUnboundedUnaligned"):
        return f"pinocchio::{kind}({_vec3(j.axis)})"
    raise BenchError(f"joint type {kind} is not supported by the C++ model writer; add it to _joint_cpp")


def model_cpp(model, frame: str | None) -> str:
    """C++ statements building ``model`` (a ``pinocchio::Model``) and ``frame_id`` (the timed frame)."""
    lines = ["  pinocchio::Model model;"]
    for i in range(1, model.njoints):
        M = model.jointPlacements[i]
        I = model.inertias[i]
        lines.append(f"  {{ pinocchio::SE3 X({_mat3(M.rotation)}, {_vec3(M.translation)});")
        lines.append(f"    pinocchio::JointIndex id = model.addJoint({model.parents[i]}, "
                     f"{_joint_cpp(model.joints[i])}, X, \"{model.names[i]}\");")
        lines.append(f"    model.appendBodyToJoint(id, pinocchio::Inertia({_num(I.mass)}, {_vec3(I.lever)}, "
                     f"{_mat3(I.inertia)}), pinocchio::SE3::Identity()); }}")
    g = np.asarray(model.gravity.linear)
    lines.append(f"  model.gravity.linear({_vec3(g)});")
    if frame is not None:
        if not model.existFrame(frame):
            raise BenchError(f"no frame {frame!r}; frames: {[f.name for f in model.frames]}")
        f = model.frames[model.getFrameId(frame)]
        M = f.placement
        lines.append(f"  pinocchio::FrameIndex frame_id = model.addFrame(pinocchio::Frame(\"{frame}\", "
                     f"{f.parentJoint}, pinocchio::SE3({_mat3(M.rotation)}, {_vec3(M.translation)}), "
                     "pinocchio::OP_FRAME));")
    else:
        lines.append("  pinocchio::FrameIndex frame_id = 0;")
    return "\n".join(lines)


#: joint type codes of the model file read by the C++ program
_JOINT_CODES = {"JointModelFreeFlyer": 0, "JointModelRevoluteUnaligned": 1, "JointModelPrismaticUnaligned": 2,
                "JointModelRX": 3, "JointModelRY": 4, "JointModelRZ": 5, "JointModelPX": 6, "JointModelPY": 7,
                "JointModelPZ": 8}


def model_text(model, frame: str | None) -> str:
    """``model`` (a ``pinocchio::Model``) and the timed frame as the text read by the timing program
    (one line per joint: parent, type code, axis, placement R (row-major) and p, mass, lever, inertia).
    The program is the same for every robot, so Pinocchio's headers are compiled once."""
    lines = [str(model.njoints - 1)]
    for i in range(1, model.njoints):
        j = model.joints[i]
        kind = j.shortname()
        if kind not in _JOINT_CODES:
            raise BenchError(f"joint type {kind} is not supported by the model writer; add it to _JOINT_CODES")
        # the generic JointModel of a model built by Pinocchio's own URDF parser hides the axis: extract()
        axis = (np.asarray(j.axis if hasattr(j, "axis") else j.extract().axis).ravel() if "Unaligned" in kind
                else np.zeros(3))
        M, I = model.jointPlacements[i], model.inertias[i]
        nums = [model.parents[i], _JOINT_CODES[kind], *axis, *np.asarray(M.rotation).ravel(),
                *np.asarray(M.translation), I.mass, *np.asarray(I.lever), *np.asarray(I.inertia).ravel()]
        lines.append(" ".join(_num(x) if isinstance(x, float) else str(x) for x in map(_pyscalar, nums)))
    lines.append(" ".join(_num(g) for g in np.asarray(model.gravity.linear)))
    if frame is not None:
        if not model.existFrame(frame):
            raise BenchError(f"no frame {frame!r}; frames: {[f.name for f in model.frames]}")
        f = model.frames[model.getFrameId(frame)]
        lines.append(" ".join([str(int(f.parentJoint)), *(_num(x) for x in np.asarray(f.placement.rotation).ravel()),
                               *(_num(x) for x in np.asarray(f.placement.translation))]))
    else:
        lines.append("0 1 0 0 0 1 0 0 0 1 0 0 0")
    return "\n".join(lines) + "\n"


def _pyscalar(x):
    return float(x) if isinstance(x, (float, np.floating)) else int(x)


def random_states(model, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random (q, v, a, tau) in Pinocchio's conventions.  A free-flyer gets position in [-1, 1]^3
    and a uniformly random unit quaternion (``randomConfiguration`` needs finite limits there); bounded
    joints are uniform within their limits, unbounded ones in [-pi, pi]; v, a, tau ~ U(-1, 1)."""
    import pinocchio as pin

    rng = np.random.default_rng(seed)
    lo = np.array(model.lowerPositionLimit, dtype=float).copy()
    hi = np.array(model.upperPositionLimit, dtype=float).copy()
    bad = ~(np.abs(lo) < 1e10) | ~(np.abs(hi) < 1e10) | (lo >= hi)  # free-flyer limits are +-DBL_MAX
    lo[bad], hi[bad] = -np.pi, np.pi
    q = np.empty((n, model.nq))
    for s in range(n):
        x = rng.uniform(lo, hi)
        for j in range(1, model.njoints):
            jm = model.joints[j]
            k = jm.idx_q
            if jm.shortname() == "JointModelFreeFlyer":
                x[k:k + 3] = rng.uniform(-1, 1, 3)
                quat = rng.normal(size=4)
                x[k + 3:k + 7] = quat / np.linalg.norm(quat)
            elif jm.nq == 2:  # unbounded revolute: (cos, sin)
                t = rng.uniform(-np.pi, np.pi)
                x[k:k + 2] = np.cos(t), np.sin(t)
        q[s] = pin.normalize(model, x)
    v, a, tau = (rng.uniform(-1, 1, (n, model.nv)) for _ in range(3))
    return {"q": q, "v": v, "a": a, "tau": tau}


def states_to_soadyn(states: Mapping[str, np.ndarray], free: bool,
                     joint_perm: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Pinocchio states -> soadyn's conventions, so both sides can be timed on the same states.

    The free-flyer q layout [xyz, quat xyzw] is the same; v, a, tau swap the base blocks
    ([lin; ang] -> [ang; lin]).  ``joint_perm[i]`` = Pinocchio joint-coordinate index of soadyn's
    joint i (identity if None; assumes one coordinate per joint, as for revolute/prismatic joints).
    """
    out = {}
    nb_q, nb_v = (7, 6) if free else (0, 0)
    for key, arr in states.items():
        arr = np.array(arr, dtype=float, copy=True)
        nb = nb_q if key == "q" else nb_v
        if free and key != "q":
            arr[:, :6] = np.concatenate([arr[:, 3:6], arr[:, 0:3]], axis=1)
        if joint_perm is not None:
            arr[:, nb:] = arr[:, nb:][:, list(joint_perm)]
        out[key] = arr
    return out


#: the shared part of every Pinocchio timing program: includes, a process-CPU clock, ``timeit`` (calibrated
#: passes, median/min/max ns per call as JSON), ``read_model`` and ``put`` (a matrix as JSON)
CPP_PRELUDE = r"""// Generated by benchmarks/bench_pinocchio.py -- header-only Pinocchio timing program.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/crba.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/frames.hpp>

static volatile double sink = 0;
typedef Eigen::Map<const Eigen::VectorXd> CMap;

// process CPU time: other jobs on a shared machine do not count (the minimum over repetitions is reported
// as ns_min, the median as ns_median)
struct cpu_clock {
  typedef std::chrono::nanoseconds duration;
  typedef duration::rep rep;
  typedef duration::period period;
  typedef std::chrono::time_point<cpu_clock> time_point;
  static time_point now() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return time_point(duration((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec));
  }
};

template<typename F>
static void timeit(const char *name, int n, int reps, double min_rep_ms, F f, bool last) {
  using clk = cpu_clock;
  int passes = 1;
  for (;;) {  // calibrate the number of passes per repetition
    auto t0 = clk::now();
    for (int p = 0; p < passes; ++p) for (int i = 0; i < n; ++i) f(i);
    double ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    if (ms >= min_rep_ms || passes >= (1 << 24)) break;
    passes = std::max(passes * 2, (int)(passes * 1.2 * min_rep_ms / std::max(ms, 1e-3)));
  }
  std::vector<double> ns(reps);
  for (int r = 0; r < reps; ++r) {
    auto t0 = clk::now();
    for (int p = 0; p < passes; ++p) for (int i = 0; i < n; ++i) f(i);
    ns[r] = std::chrono::duration<double, std::nano>(clk::now() - t0).count() / ((double)passes * n);
  }
  std::vector<double> s = ns;
  std::sort(s.begin(), s.end());
  double med = (reps % 2) ? s[reps / 2] : 0.5 * (s[reps / 2 - 1] + s[reps / 2]);
  std::printf("  \"%s\": {\"ns_median\": %.3f, \"ns_min\": %.3f, \"ns_max\": %.3f, \"calls_per_rep\": %lld, "
              "\"reps\": %d}%s\n", name, med, s[0], s[reps - 1], (long long)passes * n, reps, last ? "" : ",");
}

static bool read_model(const char *path, pinocchio::Model &model, pinocchio::FrameIndex &frame_id) {
  FILE *fp = std::fopen(path, "r");
  if (!fp) return false;
  int nj = 0;
  if (std::fscanf(fp, "%d", &nj) != 1) { std::fclose(fp); return false; }
  for (int i = 0; i < nj; ++i) {
    int parent, type;
    double x[3 + 9 + 3 + 1 + 3 + 9];
    if (std::fscanf(fp, "%d %d", &parent, &type) != 2) { std::fclose(fp); return false; }
    for (double &d : x) if (std::fscanf(fp, "%lf", &d) != 1) { std::fclose(fp); return false; }
    Eigen::Vector3d axis(x[0], x[1], x[2]);
    Eigen::Matrix3d R; R << x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11];
    pinocchio::SE3 X(R, Eigen::Vector3d(x[12], x[13], x[14]));
    Eigen::Matrix3d I; I << x[19], x[20], x[21], x[22], x[23], x[24], x[25], x[26], x[27];
    pinocchio::JointIndex id;
    std::string name = "j" + std::to_string(i + 1);
    switch (type) {
      case 0: id = model.addJoint(parent, pinocchio::JointModelFreeFlyer(), X, name); break;
      case 1: id = model.addJoint(parent, pinocchio::JointModelRevoluteUnaligned(axis), X, name); break;
      case 2: id = model.addJoint(parent, pinocchio::JointModelPrismaticUnaligned(axis), X, name); break;
      case 3: id = model.addJoint(parent, pinocchio::JointModelRX(), X, name); break;
      case 4: id = model.addJoint(parent, pinocchio::JointModelRY(), X, name); break;
      case 5: id = model.addJoint(parent, pinocchio::JointModelRZ(), X, name); break;
      case 6: id = model.addJoint(parent, pinocchio::JointModelPX(), X, name); break;
      case 7: id = model.addJoint(parent, pinocchio::JointModelPY(), X, name); break;
      case 8: id = model.addJoint(parent, pinocchio::JointModelPZ(), X, name); break;
      default: std::fclose(fp); return false;
    }
    model.appendBodyToJoint(id, pinocchio::Inertia(x[15], Eigen::Vector3d(x[16], x[17], x[18]), I),
                            pinocchio::SE3::Identity());
  }
  double g[3];
  int fj;
  double f[12];
  if (std::fscanf(fp, "%lf %lf %lf %d", &g[0], &g[1], &g[2], &fj) != 4) { std::fclose(fp); return false; }
  for (double &d : f) if (std::fscanf(fp, "%lf", &d) != 1) { std::fclose(fp); return false; }
  std::fclose(fp);
  model.gravity.linear(Eigen::Vector3d(g[0], g[1], g[2]));
  Eigen::Matrix3d R; R << f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8];
  frame_id = model.addFrame(pinocchio::Frame("timed_frame", fj, pinocchio::SE3(R, Eigen::Vector3d(f[9], f[10], f[11])),
                                             pinocchio::OP_FRAME));
  return true;
}

static void put(const char *name, const Eigen::MatrixXd &m, bool last) {
  std::printf("  \"%s\": [", name);
  for (int i = 0; i < m.rows(); ++i) {
    std::printf("%s[", i ? ", " : "");
    for (int j = 0; j < m.cols(); ++j) std::printf("%s%.17g", j ? ", " : "", m(i, j));
    std::printf("]");
  }
  std::printf("]%s\n", last ? "" : ",");
}

"""
#: start of ``main``: arguments ``states.bin n reps min_rep_ms check|time``
CPP_MAIN_HEAD = r"""int main(int argc, char **argv) {
  if (argc < 6) { std::fprintf(stderr, "usage: %s states.bin n reps min_rep_ms check|time\n", argv[0]); return 2; }
  const int n = std::atoi(argv[2]), reps = std::atoi(argv[3]);
  const double min_rep_ms = std::atof(argv[4]);
  const bool check = std::string(argv[5]) == "check";
"""
#: after ``model`` is built: its Data, and the states file read into q(i), v(i), a(i), t(i)
CPP_READ_STATES = r"""  pinocchio::Data data(model);
  const int nq = model.nq, nv = model.nv;
  std::vector<double> Q((size_t)n * nq), V((size_t)n * nv), A((size_t)n * nv), T((size_t)n * nv);
  FILE *fp = std::fopen(argv[1], "rb");
  if (!fp) { std::fprintf(stderr, "cannot open %s\n", argv[1]); return 2; }
  size_t got = std::fread(Q.data(), sizeof(double), Q.size(), fp) + std::fread(V.data(), sizeof(double), V.size(), fp)
             + std::fread(A.data(), sizeof(double), A.size(), fp) + std::fread(T.data(), sizeof(double), T.size(), fp);
  std::fclose(fp);
  if (got != Q.size() + V.size() + A.size() + T.size()) { std::fprintf(stderr, "short state file\n"); return 2; }
  auto q = [&](int i) { return CMap(&Q[(size_t)i * nq], nq); };
  auto v = [&](int i) { return CMap(&V[(size_t)i * nv], nv); };
  auto a = [&](int i) { return CMap(&A[(size_t)i * nv], nv); };
  auto t = [&](int i) { return CMap(&T[(size_t)i * nv], nv); };
"""
_CPP_MAIN = CPP_PRELUDE + CPP_MAIN_HEAD + r"""  if (argc < 7) { std::fprintf(stderr, "model file missing\n"); return 2; }
  pinocchio::Model model;
  pinocchio::FrameIndex frame_id;
  if (!read_model(argv[6], model, frame_id)) { std::fprintf(stderr, "bad model file %s\n", argv[6]); return 2; }
""" + CPP_READ_STATES + r"""  pinocchio::Data::Matrix6x J(6, nv);
  if (check) {  // results at state 0, for comparison with Python pin
    std::printf("{\n  \"nq\": %d, \"nv\": %d,\n", nq, nv);
    put("rnea", pinocchio::rnea(model, data, q(0), v(0), a(0)), false);
    Eigen::MatrixXd M = pinocchio::crba(model, data, q(0));
    M.triangularView<Eigen::StrictlyLower>() = M.transpose().triangularView<Eigen::StrictlyLower>();
    put("crba", M, false);
    put("aba", pinocchio::aba(model, data, q(0), v(0), t(0)), false);
    Eigen::MatrixXd Mi = pinocchio::computeMinverse(model, data, q(0));
    Mi.triangularView<Eigen::StrictlyLower>() = Mi.transpose().triangularView<Eigen::StrictlyLower>();
    put("minv", Mi, false);
    J.setZero();
    pinocchio::computeFrameJacobian(model, data, q(0), frame_id, pinocchio::LOCAL, J);
    put("frame_jacobian", J, true);
    std::printf("}\n");
    return 0;
  }
  std::printf("{\n");
  timeit("rnea", n, reps, min_rep_ms, [&](int i) { sink += pinocchio::rnea(model, data, q(i), v(i), a(i))[0]; }, false);
  timeit("crba", n, reps, min_rep_ms, [&](int i) { sink += pinocchio::crba(model, data, q(i))(0, nv - 1); }, false);
  timeit("aba", n, reps, min_rep_ms, [&](int i) { sink += pinocchio::aba(model, data, q(i), v(i), t(i))[0]; }, false);
  timeit("minv", n, reps, min_rep_ms, [&](int i) { sink += pinocchio::computeMinverse(model, data, q(i))(0, nv - 1); }, false);
  timeit("frame_jacobian", n, reps, min_rep_ms, [&](int i) {
    pinocchio::computeFrameJacobian(model, data, q(i), frame_id, pinocchio::LOCAL, J); sink += J(0, nv - 1); }, true);
  std::printf("}\n");
  return 0;
}
"""


def _python_reference(model, frame: str | None, st: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    import pinocchio as pin

    data = model.createData()
    q, v, a, tau = st["q"][0], st["v"][0], st["a"][0], st["tau"][0]
    out = {"rnea": pin.rnea(model, data, q, v, a).copy(), "aba": pin.aba(model, data, q, v, tau).copy()}
    M = pin.crba(model, data, q).copy()
    out["crba"] = np.triu(M) + np.triu(M, 1).T
    Mi = pin.computeMinverse(model, data, q).copy()
    out["minv"] = np.triu(Mi) + np.triu(Mi, 1).T
    if frame is not None:
        out["frame_jacobian"] = pin.computeFrameJacobian(model, data, q, model.getFrameId(frame), pin.LOCAL)
    return out


def build_program(flags: Sequence[str] = DEFAULT_FLAGS, workdir: str | Path | None = None) -> Path:
    """Compile the (robot-independent) Pinocchio timing program once per flag set; return its path.

    Header-only Pinocchio takes minutes to compile: the binary is reused from ``workdir`` when the
    source and command are unchanged."""
    cxx = _compiler("c++")
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="soadyn_bench_pin_"))
    tmp.mkdir(parents=True, exist_ok=True)
    tag = "_".join(f.strip("-").replace("=", "") for f in flags)
    src, exe, stamp = tmp / "bench_pin.cpp", tmp / f"bench_pin_{tag}", tmp / f"bench_pin_{tag}.cmd"
    cmd = [cxx, CXX_STD, *flags, *pinocchio_compile_args(), str(src), "-o", str(exe)]
    if not (exe.exists() and src.exists() and src.read_text() == _CPP_MAIN and stamp.exists()
            and stamp.read_text() == " ".join(cmd)):
        src.write_text(_CPP_MAIN)
        _run(cmd, "compiling the Pinocchio benchmark")
        stamp.write_text(" ".join(cmd))
    return exe


def run_fresh_copy(command: list[str], what: str) -> str:
    """:func:`_run` of ``command`` with its program ``command[0]`` copied first to a new file beside it
    (removed after): the copy's pages are placed anew by the kernel, as a rebuilt program's would be."""
    exe = Path(command[0])
    fd, name = tempfile.mkstemp(prefix=exe.name + "_copy", dir=exe.parent)
    os.close(fd)
    try:
        shutil.copy2(exe, name)
        return _run([name, *command[1:]], what)
    finally:
        os.unlink(name)


def bench_pinocchio_model(model, frame: str | None, flags: Sequence[str] = DEFAULT_FLAGS, n_states: int = 1000,
                          reps: int = 7, min_rep_ms: float = 50.0, seed: int = 0,
                          workdir: str | Path | None = None, states: Mapping[str, np.ndarray] | None = None,
                          fresh_copy: bool = False) -> dict:
    """Time RNEA, CRBA, ABA, computeMinverse and the LOCAL frame Jacobian of a ``pinocchio.Model`` in C++.

    The program is first run in ``check`` mode and its results compared with Python ``pin``
    (``check_max_rel_diff``).  ``states`` (Pinocchio conventions, from :func:`random_states`) default to
    ``random_states(model, n_states, seed)``.  ``fresh_copy``: time a fresh copy of the program (a new
    placement of its pages, :func:`run_fresh_copy`)."""
    import pinocchio as pin

    if frame is None:
        frame = model.frames[len(model.frames) - 1].name
    exe = build_program(flags, workdir)
    tmp = exe.parent
    st = random_states(model, n_states, seed) if states is None else states
    n_states = len(st["q"])
    states_file, model_file = tmp / "states.bin", tmp / "model.txt"
    with open(states_file, "wb") as fh:
        for key in ("q", "v", "a", "tau"):
            np.ascontiguousarray(st[key], dtype=np.float64).tofile(fh)
    model_file.write_text(model_text(model, frame))
    got = json.loads(_run([str(exe), str(states_file), str(n_states), "1", "1", "check", str(model_file)],
                          "check run"))
    ref = _python_reference(model, frame, st)
    # max |C++ - Python| relative to max(1, max |Python|), per algorithm
    diffs = {k: float(np.max(np.abs(np.asarray(got[k]).reshape(np.shape(ref[k])) - ref[k]))
                      / max(1.0, float(np.max(np.abs(ref[k]))))) for k in ref}
    timing = [str(exe), str(states_file), str(n_states), str(reps), str(min_rep_ms), "time", str(model_file)]
    timings = json.loads(run_fresh_copy(timing, "timing run") if fresh_copy else _run(timing, "timing run"))
    return {
        "side": "pinocchio", "pinocchio_version": pin.__version__, "frame": frame,
        "jacobian_reference_frame": "LOCAL", "nq": model.nq, "nv": model.nv, "n_states": n_states,
        "seed": seed, "mode": "header-only (all algorithms compiled here, no Pinocchio library linked)",
        "compiler": _compiler_version(_compiler("c++")), "flags": list(flags), "machine": machine_info(),
        "check_max_rel_diff": diffs,
        "notes": "crba and minv fill the upper triangle only (Pinocchio's convention); gravity included in rnea",
        "ns_per_call": {k: v["ns_min"] for k, v in timings.items()},
        "timings": timings,
    }


def bench_pinocchio(urdf: str | Path, base: str = "free", frame: str | None = None,
                    lock_joints: Sequence[str] = (), flags: Sequence[str] = DEFAULT_FLAGS, n_states: int = 1000,
                    reps: int = 7, min_rep_ms: float = 50.0, seed: int = 0, workdir: str | Path | None = None,
                    keep: bool = False) -> dict:
    """:func:`bench_pinocchio_model` of a URDF (``base='free'`` adds a free flyer; ``lock_joints`` at 0)."""
    model = load_pin_model(urdf, base, lock_joints)
    res = bench_pinocchio_model(model, frame, flags, n_states, reps, min_rep_ms, seed, workdir)
    res.update({"urdf": str(urdf), "base": base, "locked_joints": list(lock_joints)})
    return res


# ---- our side: generic C timing loop ------------------------------------------------------------------

def _norm_args(fname: str, spec) -> list[tuple[str, int, str]]:
    out = []
    for item in spec:
        if len(item) == 2:
            name, size, kind = item[0], item[1], "in"
        else:
            name, size, kind = item
        if kind not in ("in", "out", "work"):
            raise BenchError(f"{fname}: argument {name!r}: kind must be 'in', 'out' or 'work', got {kind!r}")
        if int(size) < 1:
            raise BenchError(f"{fname}: argument {name!r}: size must be >= 1, got {size!r}")
        out.append((str(name), int(size), kind))
    if not any(k == "out" for _, _, k in out):
        raise BenchError(f"{fname}: needs at least one 'out' argument (its first entry feeds the checksum)")
    return out


def c_timing_source(function_names: Sequence[str], sizes: Mapping[str, Sequence], headers: Sequence[str]) -> str:
    """C99 source of a timing loop over ``void f(args...)`` (arguments in the order of ``sizes[f]``:
    ``(name, size, 'in'|'out'|'work')``; 'in' arrays are read per state from the input file, 'out' and
    'work' are single reused buffers)."""
    L = ["/* Generated by benchmarks/bench_pinocchio.py: timing loop for generated C functions. */",
         "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", "#include <time.h>"]
    L += [f'#include "{h}"' for h in headers]
    L += ["static volatile double sink = 0;",
          # the process CPU time, the clock of the C++ side (cpu_clock): a wall clock counts the time other
          # jobs hold the core (on a shared machine at load 6 the generated C's medians of 50 ms repetitions
          # were 2-4x those of 2 ms ones, while the C++ side's were not)
          "static double now_ns(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);"
          " return (double)t.tv_sec * 1e9 + (double)t.tv_nsec; }",
          "static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b;"
          " return (x > y) - (x < y); }",
          "static double *read_block(FILE *fp, size_t count) { double *p = malloc(count * sizeof(double));"
          " if (!p || fread(p, sizeof(double), count, fp) != count) { fprintf(stderr, \"short input file\\n\");"
          " exit(2); } return p; }",
          "int main(int argc, char **argv) {",
          "  if (argc < 5) { fprintf(stderr, \"usage: %s inputs.bin n reps min_rep_ms\\n\", argv[0]); return 2; }",
          "  const int n = atoi(argv[2]), reps = atoi(argv[3]); const double min_rep_ms = atof(argv[4]);",
          "  FILE *fp = fopen(argv[1], \"rb\"); if (!fp) { fprintf(stderr, \"cannot open %s\\n\", argv[1]); return 2; }",
          "  double *ns = malloc((size_t)reps * sizeof(double));",
          "  printf(\"{\\n\");"]
    for fi, f in enumerate(function_names):
        args = _norm_args(f, sizes[f])
        L.append("  {")
        call = []
        for ai, (name, size, kind) in enumerate(args):
            var = f"a{ai}"
            if kind == "in":
                L.append(f"    double *{var} = read_block(fp, (size_t)n * {size}); /* {name} */")
                call.append(f"{var} + (size_t)i * {size}")
            else:
                L.append(f"    double *{var} = calloc({size}, sizeof(double)); /* {name} */")
                call.append(var)
        first_out = next(i for i, (_, _, k) in enumerate(args) if k == "out")
        body = f"for (long p = 0; p < passes; ++p) for (int i = 0; i < n; ++i) {{ {f}({', '.join(call)}); " \
               f"sink += a{first_out}[0]; }}"
        last = "" if fi == len(function_names) - 1 else ","
        L += ["    long passes = 1; double t0, ms;",
              f"    for (;;) {{ t0 = now_ns(); {body} ms = (now_ns() - t0) * 1e-6;",
              "      if (ms >= min_rep_ms || passes >= (1L << 24)) break;",
              "      { long want = (long)(passes * 1.2 * min_rep_ms / (ms > 1e-3 ? ms : 1e-3));"
              " passes = want > 2 * passes ? want : 2 * passes; } }",
              f"    for (int r = 0; r < reps; ++r) {{ t0 = now_ns(); {body}"
              " ns[r] = (now_ns() - t0) / ((double)passes * n); }",
              "    qsort(ns, (size_t)reps, sizeof(double), cmp);",
              "    double med = (reps % 2) ? ns[reps / 2] : 0.5 * (ns[reps / 2 - 1] + ns[reps / 2]);",
              f"    printf(\"  \\\"{f}\\\": {{\\\"ns_median\\\": %.3f, \\\"ns_min\\\": %.3f, \\\"ns_max\\\": %.3f, "
              f"\\\"calls_per_rep\\\": %ld, \\\"reps\\\": %d}}{last}\\n\", med, ns[0], ns[reps - 1], passes * n, reps);"]
        L += [f"    free(a{ai});" for ai in range(len(args))]
        L.append("  }")
    L += ["  fclose(fp); free(ns);", "  printf(\"}\\n\");", "  return 0;", "}"]
    return "\n".join(L) + "\n"


def time_c_functions(c_source_dir: str | Path, function_names: Sequence[str], sizes: Mapping[str, Sequence],
                     flags: Sequence[str] = DEFAULT_FLAGS, inputs: Mapping[str, Mapping[str, np.ndarray]] | None = None,
                     n_states: int = 1000, reps: int = 7, min_rep_ms: float = 50.0, seed: int = 0,
                     sources: Sequence[str | Path] | None = None, headers: Sequence[str] | None = None,
                     extra_args: Sequence[str] = (), workdir: str | Path | None = None) -> dict:
    """Compile a C timing loop against the generated C in ``c_source_dir`` and time each function.

    ``sizes[f]`` lists ``f``'s arguments in call order as ``(name, size, kind)`` with kind ``'in'``
    (``const double *``, one row per state), ``'out'`` or ``'work'`` (``double *`` buffers); a 2-tuple
    means ``'in'``.  ``inputs[f][name]`` (shape ``(n_states, size)``) gives the states, e.g. the same
    random states as the Pinocchio side converted to soadyn's conventions; missing ones are U(-1, 1)
    (for a quaternion input that is fine for timing: the generated code divides out its norm).
    ``sources`` defaults to every ``.c`` in the directory, ``headers`` to every ``.h``.
    Returns ``{"ns_per_call": {f: median ns}, "timings": {...}, "flags": ..., "compiler": ...}``.
    """
    c_source_dir = Path(c_source_dir).resolve()
    if not c_source_dir.is_dir():
        raise BenchError(f"C source directory {c_source_dir} does not exist")
    srcs = [Path(s) for s in sources] if sources is not None else sorted(c_source_dir.glob("*.c"))
    hdrs = list(headers) if headers is not None else sorted(p.name for p in c_source_dir.glob("*.h"))
    if not srcs:
        raise BenchError(f"no .c files in {c_source_dir}")
    missing = [f for f in function_names if f not in sizes]
    if missing:
        raise BenchError(f"no argument sizes given for {missing}; pass sizes[name] = [(arg, size, kind), ...]")
    cc = _compiler("c")
    rng = np.random.default_rng(seed)
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="soadyn_bench_c_"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        with open(tmp / "inputs.bin", "wb") as fh:
            for f in function_names:
                for name, size, kind in _norm_args(f, sizes[f]):
                    if kind != "in":
                        continue
                    arr = None if inputs is None else inputs.get(f, {}).get(name)
                    arr = rng.uniform(-1, 1, (n_states, size)) if arr is None else np.asarray(arr, dtype=np.float64)
                    if arr.shape != (n_states, size):
                        raise BenchError(f"inputs[{f!r}][{name!r}] has shape {arr.shape}, "
                                         f"expected ({n_states}, {size})")
                    np.ascontiguousarray(arr, dtype=np.float64).tofile(fh)
        main = tmp / "bench_main.c"
        main.write_text(c_timing_source(function_names, sizes, hdrs))
        exe = tmp / "bench_c"
        cmd = [cc, C_STD, *flags, "-D_POSIX_C_SOURCE=199309L", f"-I{c_source_dir}", *extra_args, str(main),
               *[str(s) for s in srcs], "-o", str(exe), "-lm"]
        # a kept workdir reuses the program when the command and every source are unchanged
        stamp = tmp / "bench_c.stamp"
        digest = hashlib.sha256("\0".join(cmd).encode())
        for src in [main, *srcs, *(c_source_dir / h for h in hdrs)]:
            digest.update(Path(src).read_bytes())
        if not (workdir and exe.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest()):
            _run(cmd, "compiling the C timing loop")
            stamp.write_text(digest.hexdigest())
        timings = json.loads(_run([str(exe), str(tmp / "inputs.bin"), str(n_states), str(reps), str(min_rep_ms)],
                                  "C timing run"))
        return {"side": "c", "c_source_dir": str(c_source_dir), "n_states": n_states, "flags": list(flags),
                "compiler": _compiler_version(cc), "compile_command": " ".join(cmd[:2 + len(flags)]) + " ...",
                "machine": machine_info(), "ns_per_call": {k: v["ns_median"] for k, v in timings.items()},
                "timings": timings}
    finally:
        if workdir is None:
            shutil.rmtree(tmp, ignore_errors=True)


# ---- command line ---------------------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--urdf", help="URDF file")
    src.add_argument("--robot", choices=sorted(PRESETS), help="a preset robot (URDF, locked joints, frame)")
    ap.add_argument("--base", choices=("free", "fixed"), default="free")
    ap.add_argument("--frame", help="frame for computeFrameJacobian (default: preset's, else the last frame)")
    ap.add_argument("--lock", nargs="*", default=None, help="joint names to lock at 0")
    ap.add_argument("--flags", default=" ".join(DEFAULT_FLAGS), help="optimisation flags (one string)")
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--min-rep-ms", type=float, default=50.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", help="keep the generated program here")
    ap.add_argument("--out", help="also write the JSON here")
    args = ap.parse_args(argv)
    if args.robot:
        preset = PRESETS[args.robot]
        urdf, lock, frame = preset["urdf"](), preset["lock"], preset["frame"]
    else:
        urdf, lock, frame = Path(args.urdf), [], None
    if args.lock is not None:
        lock = args.lock
    if args.frame:
        frame = args.frame
    try:
        res = bench_pinocchio(urdf, args.base, frame, lock, tuple(args.flags.split()), args.states, args.reps,
                              args.min_rep_ms, args.seed, args.workdir)
    except BenchError as e:
        print(f"bench_pinocchio: {e}", file=sys.stderr)
        return 1
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    bad = {k: d for k, d in res["check_max_rel_diff"].items() if not d <= 1e-10}
    if bad:
        print(f"bench_pinocchio: WARNING: C++ results differ from Python pin: {bad}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
