#!/usr/bin/env python3
# ruff: noqa: E501  (long lines are the embedded C++ program text)
"""Generated derivative functions against Pinocchio's C++ ``computeRNEADerivatives`` /
``computeABADerivatives``, measured in the same run with the same compiler flags.

For one robot (default: the Panda URDF of example-robot-data on a free base, fingers locked: nv = 13):

1. a fresh derive + compile of only the derivative functions (``inverse_dynamics_derivatives``,
   ``forward_dynamics_derivatives``, ``frame_acceleration_derivatives``), wall seconds and operation counts;
2. ns per call of the generated C in the C timing loop of ``bench_pinocchio.time_c_functions``, compiled
   with the flags of the Pinocchio side (``-O3 -DNDEBUG -march=native``);
3. Pinocchio's ``computeRNEADerivatives`` and ``computeABADerivatives`` on the same model, header-only,
   same flags (the C++ results at one state are first checked against Python ``pin``);
4. the ratio Pinocchio ns / soadyn ns (> 1: soadyn faster), and the same against GRiD's published CPU
   figures for Pinocchio + CppADCodeGen (iiwa, fixed base, i7-10700K: 1.4 us ID gradient, 2.5 us FD
   gradient; quoted by issue 12, not measured here).

Usage::

    python benchmarks/bench_derivatives.py                     # Panda, free base
    python benchmarks/bench_derivatives.py --base fixed

Pinocchio's header-only derivative build takes minutes; ``--workdir`` (default ``benchmarks/build``)
keeps the binary between runs.  The program reads the model at run time (``bench_pinocchio.model_text``),
so one build serves every robot (``bench_round3.py`` times five with it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

#: GRiD (Plancher et al.) published CPU figures for Pinocchio + CppADCodeGen, iiwa fixed base, us per call
GRID_CPU_US = {"inverse_dynamics_derivatives": 1.4, "forward_dynamics_derivatives": 2.5}
TARGET_RATIO = 3.0
#: issue 26's targets per function (single call against Pinocchio's analytic derivatives)
TARGETS = {"inverse_dynamics_derivatives": 4.0, "forward_dynamics_derivatives": TARGET_RATIO}
DERIVATIVE_FUNCTIONS = ("inverse_dynamics_derivatives", "forward_dynamics_derivatives",
                        "frame_acceleration_derivatives")

_CPP = (bp.CPP_PRELUDE.replace("#include <pinocchio/algorithm/frames.hpp>",
                                "#include <pinocchio/algorithm/rnea-derivatives.hpp>\n"
                                "#include <pinocchio/algorithm/aba-derivatives.hpp>")
        + bp.CPP_MAIN_HEAD + r"""  if (argc < 7) { std::fprintf(stderr, "model file missing\n"); return 2; }
  pinocchio::Model model;
  pinocchio::FrameIndex frame_id;
  if (!read_model(argv[6], model, frame_id)) { std::fprintf(stderr, "bad model file %s\n", argv[6]); return 2; }
  (void)frame_id;
""" + bp.CPP_READ_STATES + r"""  if (check) {
    std::printf("{\n  \"nq\": %d, \"nv\": %d,\n", nq, nv);
    pinocchio::computeRNEADerivatives(model, data, q(0), v(0), a(0));
    put("dtau_dq", data.dtau_dq, false);
    put("dtau_dv", data.dtau_dv, false);
    pinocchio::computeABADerivatives(model, data, q(0), v(0), t(0));
    put("ddq_dq", data.ddq_dq, false);
    put("ddq_dv", data.ddq_dv, false);
    Eigen::MatrixXd Mi = data.Minv;
    Mi.triangularView<Eigen::StrictlyLower>() = Mi.transpose().triangularView<Eigen::StrictlyLower>();
    put("ddq_dtau", Mi, true);
    std::printf("}\n");
    return 0;
  }
  std::printf("{\n");
  timeit("rnea_derivatives", n, reps, min_rep_ms, [&](int i) {
    pinocchio::computeRNEADerivatives(model, data, q(i), v(i), a(i)); sink += data.dtau_dq(0, nv - 1) + data.dtau_dv(0, 0); }, false);
  timeit("aba_derivatives", n, reps, min_rep_ms, [&](int i) {
    pinocchio::computeABADerivatives(model, data, q(i), v(i), t(i)); sink += data.ddq_dq(0, nv - 1) + data.ddq_dv(0, 0); }, true);
  std::printf("}\n");
  return 0;
}
""")


def compile_args() -> list[str]:
    """``bench_pinocchio.pinocchio_compile_args``, also finding Eigen/Boost headers in this environment's own
    ``cmeel.prefix`` when the ``pin`` wheel lives in another site-packages (a venv on system packages), or in
    the ``cmeel.prefix`` directories listed in ``SOADYN_CMEEL_PREFIX`` (``:``-separated)."""
    import os
    import sysconfig

    try:
        return bp.pinocchio_compile_args()
    except bp.BenchError:
        pass
    extra = [Path(x) for x in os.environ.get("SOADYN_CMEEL_PREFIX", "").split(os.pathsep) if x]
    prefixes = [bp.cmeel_prefix(), Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix", *extra]
    args = []
    for needed, inc in (("pinocchio", "include"), ("eigen3/Eigen", "include/eigen3"), ("boost", "include")):
        found = next((p / inc for p in prefixes if (p / "include" / needed).exists()), None)
        if found is None:
            raise bp.BenchError(f"no {needed} headers in {prefixes}; pip install pin cmeel-eigen cmeel-boost")
        args.append(f"-I{found}")
    return list(dict.fromkeys(args)) + [
        "-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
        "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12"]


def build_derivative_program(flags, workdir: Path) -> Path:
    """Compile (or reuse from ``workdir``) the Pinocchio derivative timing program.  It reads the model at run
    time (``bench_pinocchio.model_text``), so one build serves every robot."""
    cxx = bp._compiler("c++")
    workdir.mkdir(parents=True, exist_ok=True)
    src, exe, stamp = workdir / "bench_pin_deriv.cpp", workdir / "bench_pin_deriv", workdir / "bench_pin_deriv.cmd"
    cmd = [cxx, bp.CXX_STD, *flags, *compile_args(), str(src), "-o", str(exe)]
    if not (exe.exists() and src.exists() and src.read_text() == _CPP and stamp.exists()
            and stamp.read_text() == " ".join(cmd)):
        src.write_text(_CPP)
        bp._run(cmd, "compiling the Pinocchio derivative benchmark")
        stamp.write_text(" ".join(cmd))
    return exe


def bench_pinocchio_derivatives(model, flags, n_states: int, seed: int, workdir: Path,
                                states: dict | None = None, tag: str = "") -> dict:
    """Check the Pinocchio derivative program on ``model`` against Python ``pin`` (state 0) and return the
    command that times it (``timing_command``).  ``states``: Pinocchio states (default
    ``bench_pinocchio.random_states(model, n_states, seed)``); ``tag`` names this robot's state and model
    files in ``workdir`` (several robots can share one build)."""
    import pinocchio as pin

    t0 = time.perf_counter()
    exe = build_derivative_program(flags, workdir)
    compile_s = time.perf_counter() - t0
    st = bp.random_states(model, n_states, seed) if states is None else states
    n_states = len(st["q"])
    states_file, model_file = workdir / f"states{tag}.bin", workdir / f"model{tag}.txt"
    with open(states_file, "wb") as fh:
        for key in ("q", "v", "a", "tau"):
            np.ascontiguousarray(st[key], dtype=np.float64).tofile(fh)
    model_file.write_text(bp.model_text(model, None))
    got = json.loads(bp._run([str(exe), str(states_file), str(n_states), "1", "1", "check", str(model_file)],
                             "check run"))
    data = model.createData()
    q, v, a, tau = st["q"][0], st["v"][0], st["a"][0], st["tau"][0]
    ref = dict(zip(("dtau_dq", "dtau_dv"), (x.copy() for x in pin.computeRNEADerivatives(model, data, q, v, a))))
    pin.computeABADerivatives(model, data, q, v, tau)
    Mi = data.Minv.copy()
    ref.update(ddq_dq=data.ddq_dq.copy(), ddq_dv=data.ddq_dv.copy(), ddq_dtau=np.triu(Mi) + np.triu(Mi, 1).T)
    diffs = {k: float(np.max(np.abs(np.asarray(got[k]) - ref[k])) / max(1.0, float(np.max(np.abs(ref[k])))))
             for k in ref}
    return {"pinocchio_version": pin.__version__, "compile_s": compile_s, "check_max_rel_diff": diffs,
            "reference_state0": ref, "compiler": bp._compiler_version(bp._compiler("c++")), "flags": list(flags),
            "states": st,
            "timing_command": [str(exe), str(states_file), str(n_states), "7", "50", "time", str(model_file)]}


def time_pinocchio(command: list[str], stat: str = "ns_median", fresh_copy: bool = False) -> dict[str, float]:
    """ns per call (``stat``: ``ns_median`` or ``ns_min`` of 7 repetitions) of each Pinocchio function, one run
    of the compiled program (``fresh_copy``: of a new copy of it, :func:`bench_pinocchio.run_fresh_copy`)."""
    timings = json.loads(bp.run_fresh_copy(command, "timing run") if fresh_copy else bp._run(command, "timing run"))
    return {k: v[stat] for k, v in timings.items()}


def main(argv: list[str] | None = None) -> int:
    from soadyn import load_robot
    from soadyn.codegen import compile as soadyn_compile
    from soadyn.model.conventions import PinocchioMap
    from soadyn.structure.operations import lock_joints

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", choices=("free", "fixed"), default="free")
    ap.add_argument("--urdf", help="another robot than the Panda preset (a held-out URDF)")
    ap.add_argument("--lock", nargs="*", default=[], help="with --urdf: joint names to lock at 0")
    ap.add_argument("--frame", help="with --urdf: frame of frame_acceleration_derivatives (default: last)")
    ap.add_argument("--flags", default=" ".join(bp.DEFAULT_FLAGS), help="C/C++ flags, both sides")
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--workdir", default=str(HERE / "build"))
    ap.add_argument("--no-pinocchio", action="store_true", help="time soadyn only")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds, alternating soadyn and Pinocchio")
    ap.add_argument("--out", help="write the JSON result here")
    args = ap.parse_args(argv)
    preset = bp.PRESETS["panda"]
    path, lock, frame = preset["urdf"](), preset["lock"], preset["frame"]
    if args.urdf:
        path, lock, frame = Path(args.urdf), args.lock, args.frame
    flags = args.flags.split()
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    robot = lock_joints(load_robot(path, base=args.base, mimic="independent"), lock)
    model = bp.load_pin_model(path, args.base, lock)
    robot = robot.replace(gravity=np.array(model.gravity.linear, dtype=float))   # Pinocchio's (URDF has none)

    # ---- soadyn: fresh derive + compile of the derivative functions only ----------------------------
    fresh = Path(tempfile.mkdtemp(prefix="soadyn_deriv_", dir=work))
    t0 = time.perf_counter()
    cache_env = os.environ.get("SOADYN_OBJECT_CACHE")
    os.environ["SOADYN_OBJECT_CACHE"] = "off"           # a first compile: no object reused from earlier runs
    try:
        mod = soadyn_compile(robot, out_dir=fresh, functions=list(DERIVATIVE_FUNCTIONS), force=True,
                             progress=False)
    finally:
        if cache_env is None:
            os.environ.pop("SOADYN_OBJECT_CACHE", None)
        else:
            os.environ["SOADYN_OBJECT_CACHE"] = cache_env
    wall = time.perf_counter() - t0
    module_dir = Path(mod.__file__).parent
    stamp = json.loads((module_dir / "soadyn_stamp.json").read_text())
    p, nq, nv, nb = mod.module_name, mod.nq, mod.nv, mod.n_bodies
    frame = frame or list(mod.frame_ids)[-1]
    fid = mod.frame_ids[frame]
    sizes = {
        f"{p}_inverse_dynamics_derivatives": [("q", nq), ("v", nv), ("a", nv), ("dtau_dq", nv * nv, "out"),
                                              ("dtau_dv", nv * nv, "out")],
        f"{p}_inverse_dynamics_derivatives_fext": [("q", nq), ("v", nv), ("a", nv), ("f_ext", nb * 6),
                                                   ("dtau_dq", nv * nv, "out"), ("dtau_dv", nv * nv, "out")],
        f"{p}_forward_dynamics_derivatives": [("q", nq), ("v", nv), ("tau", nv), ("da_dq", nv * nv, "out"),
                                              ("da_dv", nv * nv, "out"), ("da_dtau", nv * nv, "out")],
        "bench_frame_acceleration_derivatives": [("q", nq), ("v", nv), ("a", nv), ("out", 12 + 18 * nv, "out")],
    }
    wrapper = (f'#include "{p}.h"\n'
               "void bench_frame_acceleration_derivatives(const double *q, const double *v, const double *a, "
               "double *o);\n"
               "void bench_frame_acceleration_derivatives(const double *q, const double *v, const double *a, "
               f"double *o) {{ (void){p}_frame_acceleration_derivatives(q, v, a, {fid}, o, o + 6, o + 12, "
               f"o + 12 + 6 * {nv}, o + 12 + 12 * {nv}); }}\n")
    cdir = work / "soadyn_deriv_c"
    shutil.rmtree(cdir, ignore_errors=True)
    cdir.mkdir(parents=True)
    for f in list(module_dir.glob("*.c")) + list(module_dir.glob("*.h")):
        shutil.copy(f, cdir / f.name)
    (cdir / "bench_wrap.c").write_text(wrapper)

    pin_res = None
    inputs = None
    if not args.no_pinocchio:
        pin_res = bench_pinocchio_derivatives(model, flags, args.states, 0, work / "pin_deriv")
        st = pin_res.pop("states")
        pm = PinocchioMap(robot, model)
        ours_st = {"q": np.array([pm.q_from_pin(x) for x in st["q"]]),
                   "v": np.array([pm.v_from_pin(x) for x in st["v"]]),
                   "a": np.array([pm.v_from_pin(x) for x in st["a"]]),
                   "tau": np.array([pm.tau_from_pin(x) for x in st["tau"]])}
        inputs = {name: ours_st for name in sizes}
        # same state, both sides: our derivatives against Pinocchio's (mapped), state 0
        dq, dv = mod.inverse_dynamics_derivatives(ours_st["q"][0], ours_st["v"][0], ours_st["a"][0])
        ref = pin_res.pop("reference_state0")
        pin_res["agreement_state0"] = {
            k: float(np.max(np.abs(o - pm.matrix_from_pin(ref[k]))) / np.max(np.abs(ref[k])))
            for k, o in (("dtau_dq", dq), ("dtau_dv", dv))}
        da = mod.forward_dynamics_derivatives(ours_st["q"][0], ours_st["v"][0], ours_st["tau"][0])
        pin_res["agreement_state0"].update({
            k: float(np.max(np.abs(o - pm.matrix_from_pin(ref[k]))) / np.max(np.abs(ref[k])))
            for k, o in zip(("ddq_dq", "ddq_dv", "ddq_dtau"), da)})
    # rounds alternate the two sides, so that load from other jobs falls on both; each side keeps its best
    # (lowest) median per function over the rounds
    rounds: list[dict] = []
    for _ in range(args.rounds):
        ours = bp.time_c_functions(cdir, list(sizes), sizes, flags=flags, inputs=inputs, n_states=args.states,
                                   sources=sorted(cdir.glob("*.c")), headers=[f"{p}.h"],
                                   workdir=work / "soadyn_deriv_timing")
        rounds.append({"soadyn": ours["ns_per_call"],
                       "pinocchio": time_pinocchio(pin_res["timing_command"]) if pin_res else {}})
    ours["ns_per_call"] = {k: min(r["soadyn"][k] for r in rounds) for k in rounds[0]["soadyn"]}
    if pin_res:
        pin_res["ns_per_call"] = {k: min(r["pinocchio"][k] for r in rounds) for k in rounds[0]["pinocchio"]}
    shutil.rmtree(fresh, ignore_errors=True)

    ns = {k.removeprefix(p + "_").removeprefix("bench_"): v for k, v in ours["ns_per_call"].items()}
    ops = {k.removeprefix(p + "_"): v["total"] for k, v in mod.op_counts.items()}
    fam = mod.frame_op_counts.get(f"{p}_frame_acceleration_derivatives")
    if fam:
        ops["frame_acceleration_derivatives"] = fam["prefix"] + fam[frame]
    t = stamp["timings"]
    print(f"robot {robot.name} ({args.base} base, nq={robot.nq}, nv={robot.nv}, locked={lock}); frame {frame}")
    print(f"flags: {' '.join(flags)}; {ours['compiler']}; {ours['machine']}")
    print(f"derivative functions: derive {t.get('derive', 0):.2f} s, optimise {t.get('optimise', 0):.2f} s, "
          f"emit {t.get('emit', 0):.2f} s, compile {t.get('compile', 0):.2f} s; wall {wall:.2f} s (target <= 20 s)")
    if pin_res:
        print(f"Pinocchio {pin_res['pinocchio_version']} C++ check vs Python pin: {pin_res['check_max_rel_diff']}")
        print(f"soadyn vs Pinocchio at state 0 (relative): {pin_res['agreement_state0']}")
    print()
    print("| function | ops | soadyn C ns | Pinocchio ns | ratio | target | GRiD CPU (Pinocchio+CppADCodeGen, "
          "iiwa fixed, published) ns | ratio to GRiD |")
    print("|---|---|---|---|---|---|---|---|")
    pairs = {"inverse_dynamics_derivatives": "rnea_derivatives", "forward_dynamics_derivatives": "aba_derivatives"}
    rows = []
    for fn in ns:
        pn = pin_res["ns_per_call"].get(pairs.get(fn, "")) if pin_res else None
        ratio = pn / ns[fn] if pn else None
        grid = GRID_CPU_US.get(fn)
        rows.append({"function": fn, "ops": ops.get(fn), "ns": ns[fn], "pinocchio_ns": pn, "ratio": ratio,
                     "grid_ns": grid * 1e3 if grid else None})
        print(f"| {fn} | {ops.get(fn, '-')} | {ns[fn]:.0f} | {'-' if pn is None else f'{pn:.0f}'} | "
              f"{'-' if ratio is None else f'{ratio:.2f}x'} | {f'{TARGETS[fn]:.0f}x' if fn in TARGETS else '-'} | "
              f"{'-' if grid is None else f'{grid * 1e3:.0f}'} | {'-' if grid is None else f'{grid * 1e3 / ns[fn]:.2f}x'} |")
    print("\nper round (soadyn | Pinocchio ns): " + "; ".join(
        " ".join(f"{k.removeprefix(p + '_')}={v:.0f}" for k, v in r["soadyn"].items()) + " | "
        + " ".join(f"{k}={v:.0f}" for k, v in r["pinocchio"].items()) for r in rounds))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    result = {"robot": robot.name, "base": args.base, "nv": robot.nv, "flags": flags, "timings": t,
              "wall_s": wall, "rows": rows, "rounds": rounds, "soadyn_c": ours, "pinocchio": pin_res}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
