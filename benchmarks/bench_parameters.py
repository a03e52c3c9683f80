#!/usr/bin/env python3
# ruff: noqa: E501  (long lines are the embedded C++ program text)
"""Cost of run-time inertial parameters, and the torque regressor against Pinocchio's, in one run.

Robot: the Panda URDF of example-robot-data on a free base with the two finger joints locked (nv = 13, the
"7-DOF free arm" of bench_dynamics.py and issue 13).  Three generated C sources (soadyn.codegen.generate):

* constant: ``inverse_dynamics``, ``forward_dynamics`` with every inertia folded in as a constant;
* parameterised: the same with every body's ten parameters an input (``params``, 9 x 10), plus
  ``inverse_dynamics_regressor`` (13 x 90);

all timed by bench_pinocchio's C loop, in one program, with the same flags (-O3 -DNDEBUG -march=native) on
the same 1000 random states (reported: the fastest repetition over ``--rounds`` runs, which is robust to a
loaded machine; bench_pinocchio's median is not), and Pinocchio's ``computeJointTorqueRegressor`` (and ``rnea`` as a yardstick) compiled
header-only with the same flags on the same model (bench_pinocchio.model_cpp).  Targets (issue 13):
parameterised ID and FD <= 1.5x the constant ones; torque regressor >= 3x faster than Pinocchio's.

Usage:  python benchmarks/bench_parameters.py [--states 1000] [--workdir benchmarks/build] [--out res.json]
Pinocchio's header-only build takes minutes; ``--workdir`` keeps the binary for the next run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen.pipeline import generate, write_sources  # noqa: E402
from soadyn.model.parameters import random_params, with_param_bodies  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402

TARGET_PARAM_RATIO = 1.5
TARGET_REGRESSOR_SPEEDUP = 3.0

_CPP = (bp.CPP_PRELUDE.replace("#include <pinocchio/algorithm/frames.hpp>",
                                "#include <pinocchio/algorithm/frames.hpp>\n#include <pinocchio/algorithm/regressor.hpp>")
        + bp.CPP_MAIN_HEAD + "{{MODEL}}\n" + bp.CPP_READ_STATES + r"""  std::printf("{\n");
  timeit("rnea", n, reps, min_rep_ms, [&](int i) { sink += pinocchio::rnea(model, data, q(i), v(i), a(i))[0]; }, false);
  timeit("computeJointTorqueRegressor", n, reps, min_rep_ms, [&](int i) {
    sink += pinocchio::computeJointTorqueRegressor(model, data, q(i), v(i), a(i))(0, 0); }, true);
  std::printf("}\n");
  return 0;
}
""")


def _pinocchio_args() -> list[str]:
    """bench_pinocchio's include paths; Eigen may come from a cmeel-eigen wheel in another site-packages
    (e.g. a virtual environment) than the ``pin`` wheel."""
    try:
        return bp.pinocchio_compile_args()
    except bp.BenchError:
        for entry in sys.path:
            eigen = Path(entry) / "cmeel.prefix" / "include" / "eigen3"
            if (eigen / "Eigen").is_dir():
                inc = bp.cmeel_prefix() / "include"
                return [f"-I{inc}", f"-I{eigen}",
                        "-DBOOST_MPL_LIMIT_LIST_SIZE=30", "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30",
                        "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS", "-DBOOST_FUSION_INVOKE_MAX_ARITY=12"]
        raise


def pinocchio_regressor_ns(urdf: Path, lock: list[str], flags, n: int, workdir: Path, rounds: int = 3) -> dict:
    """ns per call (fastest repetition of ``rounds`` runs) of Pinocchio's rnea and
    computeJointTorqueRegressor (header-only, our flags)."""
    model = bp.load_pin_model(urdf, "free", lock)
    workdir.mkdir(parents=True, exist_ok=True)
    src, exe, stamp = workdir / "bench_regressor.cpp", workdir / "bench_regressor", workdir / "bench_regressor.cmd"
    text = _CPP.replace("{{MODEL}}", bp.model_cpp(model, model.frames[len(model.frames) - 1].name))
    cmd = [bp._compiler("c++"), bp.CXX_STD, *flags, *_pinocchio_args(), str(src), "-o", str(exe)]
    if not (exe.exists() and src.exists() and src.read_text() == text and stamp.exists()
            and stamp.read_text() == " ".join(cmd)):
        src.write_text(text)
        bp._run(cmd, "compiling the Pinocchio regressor benchmark")
        stamp.write_text(" ".join(cmd))
    st = bp.random_states(model, n, 0)
    with open(workdir / "states.bin", "wb") as fh:
        for key in ("q", "v", "a", "tau"):
            np.ascontiguousarray(st[key], dtype=np.float64).tofile(fh)
    best: dict[str, float] = {}
    for _ in range(rounds):
        out = json.loads(bp._run([str(exe), str(workdir / "states.bin"), str(n), "7", "50", "time"], "Pinocchio timing run"))
        for k, v in out.items():
            best[k] = min(best.get(k, float("inf")), v["ns_min"])
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--workdir", type=Path, default=HERE / "build")
    ap.add_argument("--no-pinocchio", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="timing runs; the fastest repetition counts")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    flags = bp.DEFAULT_FLAGS
    preset = bp.PRESETS["panda"]
    urdf, lock = preset["urdf"](), preset["lock"]
    robot = lock_joints(load_robot(urdf, base="free", mimic="independent"), lock).replace(name="panda_const")
    prm = with_param_bodies(robot, "all").replace(name="panda_params")
    P = len(prm.param_bodies)
    work = args.workdir / "bench_parameters"
    rng = np.random.default_rng(0)
    n = args.states
    qs = np.stack([robot.random_configuration(rng) for _ in range(n)])
    vs, acc = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    ps = np.stack([random_params(prm, rng).ravel() for _ in range(n)])
    nq, nv = robot.nq, robot.nv
    results: dict[str, float] = {}
    sizes: dict[str, list] = {}
    cdir = work / "c"                       # both modules in one timing program, measured back to back
    for rb, funcs in ((robot, ["inverse_dynamics", "forward_dynamics"]),
                      (prm, ["inverse_dynamics", "forward_dynamics", "inverse_dynamics_regressor"])):
        gen = generate(rb, rb.name, functions=funcs)
        write_sources(gen, cdir)
        extra = [("params", 10 * P)] if rb is prm else []
        sizes[f"{rb.name}_inverse_dynamics"] = [("q", nq), ("v", nv), ("a", nv), *extra, ("tau", nv, "out")]
        sizes[f"{rb.name}_forward_dynamics"] = [("q", nq), ("v", nv), ("tau", nv), *extra, ("a", nv, "out")]
        if rb is prm:
            sizes[f"{rb.name}_inverse_dynamics_regressor"] = [("q", nq), ("v", nv), ("a", nv),
                                                              ("Y", nv * 10 * P, "out")]
        for s in gen.functions:
            results[f"ops:{s.cname}"] = s.ops["total"]
    inputs = {f: {"q": qs, "v": vs, "a": acc, "tau": acc, "params": ps} for f in sizes}
    order = list(sizes)
    for _ in range(args.rounds):            # the fastest of a few rounds: robust to a loaded machine
        res = bp.time_c_functions(cdir, order, sizes, flags=flags, inputs=inputs, n_states=n,
                                  workdir=work / "c_loop")
        for f, t in res["timings"].items():
            results[f] = min(results.get(f, float("inf")), t["ns_min"])
        order = order[::-1]
    pin = {} if args.no_pinocchio else pinocchio_regressor_ns(urdf, lock, flags, n, work / "pinocchio",
                                                               args.rounds)
    r_id = results["panda_params_inverse_dynamics"] / results["panda_const_inverse_dynamics"]
    r_fd = results["panda_params_forward_dynamics"] / results["panda_const_forward_dynamics"]
    print(f"Panda free base, fingers locked: nq={nq}, nv={nv}, {P} parameterised bodies; flags {' '.join(flags)}")
    print(f"{'function':32s} {'constant':>10s} {'params':>10s} {'ratio':>6s}   ops const / params")
    for f, r in (("inverse_dynamics", r_id), ("forward_dynamics", r_fd)):
        print(f"{f:32s} {results[f'panda_const_{f}']:9.0f}ns {results[f'panda_params_{f}']:9.0f}ns {r:6.2f}   "
              f"{results[f'ops:panda_const_{f}']} / {results[f'ops:panda_params_{f}']}")
    reg = results["panda_params_inverse_dynamics_regressor"]
    print(f"{'inverse_dynamics_regressor':32s} {reg:9.0f}ns  ({results['ops:panda_params_inverse_dynamics_regressor']} ops)")
    ok = r_id <= TARGET_PARAM_RATIO and r_fd <= TARGET_PARAM_RATIO
    if pin:
        speed = pin["computeJointTorqueRegressor"] / reg
        print(f"Pinocchio computeJointTorqueRegressor {pin['computeJointTorqueRegressor']:.0f} ns, rnea {pin['rnea']:.0f} ns "
              f"-> soadyn regressor {speed:.2f}x faster (target >= {TARGET_REGRESSOR_SPEEDUP})")
        ok = ok and speed >= TARGET_REGRESSOR_SPEEDUP
    print(f"targets (params <= {TARGET_PARAM_RATIO}x constant{', regressor speed-up' if pin else ''}): "
          f"{'met' if ok else 'NOT met'}")
    if args.out:
        args.out.write_text(json.dumps({"ns": results, "pinocchio_ns": pin, "ratio_id": r_id, "ratio_fd": r_fd,
                                        "flags": list(flags), "machine": bp.machine_info()}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
