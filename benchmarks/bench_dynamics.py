#!/usr/bin/env python3
"""soadyn's generated C against Pinocchio's C++, measured in the same run, with the same compiler flags.

For one robot (default: the Panda URDF of example-robot-data on a free base, fingers locked: nv = 13):

1. derivation and compile seconds of the whole generated module (fresh build), operation counts;
2. ns per call of the generated C functions in a C loop over 1,000 random states
   (``bench_pinocchio.time_c_functions``), compiled with the flags of the Pinocchio side;
3. microseconds per call from Python (one state per call, and per state in a batch of 1,000);
4. Pinocchio's RNEA, CRBA, ABA, computeMinverse and frame Jacobian on the same model, header-only,
   same flags (``bench_pinocchio.bench_pinocchio``);
5. the ratio table (Pinocchio ns / soadyn ns; > 1 means soadyn is faster).

Usage::

    python benchmarks/bench_dynamics.py                          # Panda, free base
    python benchmarks/bench_dynamics.py --base fixed
    python benchmarks/bench_dynamics.py --robot examples/dimitrov_7dof_rw.yaml --no-pinocchio

Pinocchio's header-only build takes minutes; ``--workdir`` (default ``benchmarks/build``) keeps it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

from soadyn.codegen import compile as soadyn_compile  # noqa: E402
from soadyn.model import load_robot  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402

#: soadyn function -> Pinocchio algorithm it is compared with
PAIRS = {"inverse_dynamics": "rnea", "mass_matrix": "crba", "forward_dynamics": "aba",
         "mass_matrix_inverse": "minv", "jacobian_local": "frame_jacobian"}
TARGETS = {"inverse_dynamics": 3.0, "forward_dynamics": 3.0, "mass_matrix_inverse": 3.0, "mass_matrix": 2.0}


def _c_signatures(mod, frame_id: int) -> tuple[dict, str]:
    """Argument lists for time_c_functions, and a wrapper C file for the frame-indexed Jacobian."""
    nq, nv, nb = mod.nq, mod.nv, mod.n_bodies
    prefix = mod.module_name
    sizes = {
        f"{prefix}_inverse_dynamics": [("q", nq), ("v", nv), ("a", nv), ("tau", nv, "out")],
        f"{prefix}_bias_forces": [("q", nq), ("v", nv), ("C", nv, "out")],
        f"{prefix}_mass_matrix": [("q", nq), ("M", nv * nv, "out")],
        f"{prefix}_forward_dynamics": [("q", nq), ("v", nv), ("tau", nv), ("a", nv, "out")],
        f"{prefix}_forward_dynamics_fext": [("q", nq), ("v", nv), ("tau", nv), ("f_ext", nb * 6),
                                            ("a", nv, "out")],
        f"{prefix}_mass_matrix_inverse": [("q", nq), ("Minv", nv * nv, "out")],
        f"{prefix}_innovations_factors": [("q", nq), ("L", nv * nv, "out"), ("D", nv * nv, "out")],
        f"{prefix}_center_of_mass": [("q", nq), ("com", 3, "out")],
        f"{prefix}_momentum": [("q", nq), ("v", nv), ("h", 6, "out")],
        "bench_jacobian_local": [("q", nq), ("J", 6 * nv, "out")],
    }
    optional = {f"{prefix}_forward_dynamics_decoupled": [("q", nq), ("v", nv), ("tau", nv), ("a", nv, "out")],
                f"{prefix}_forward_dynamics_schur": [("q", nq), ("v", nv), ("tau", nv), ("a", nv, "out")]}
    for name, sig in optional.items():
        if name in mod.op_counts:
            sizes[name] = sig
    wrapper = (f'#include "{prefix}.h"\n'
               "void bench_jacobian_local(const double *q, double *J);\n"
               "void bench_jacobian_local(const double *q, double *J)"
               f" {{ (void){prefix}_jacobian_local(q, {frame_id}, J); }}\n")
    return sizes, wrapper


def _python_us(fn, args, repeat: int = 2000) -> float:
    fn(*args)
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn(*args)
    return (time.perf_counter() - t0) / repeat * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robot", default="panda", help="'panda' (preset) or a robot file (.yaml/.urdf)")
    ap.add_argument("--base", choices=("free", "fixed"), default="free")
    ap.add_argument("--lock", nargs="*", default=None, help="joints to lock at 0 (both sides)")
    ap.add_argument("--frame", default=None, help="frame for the Jacobian (default: preset's or the last)")
    ap.add_argument("--flags", default=" ".join(bp.DEFAULT_FLAGS), help="C/C++ flags, both sides")
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--workdir", default=str(HERE / "build"))
    ap.add_argument("--no-pinocchio", action="store_true", help="time soadyn only")
    ap.add_argument("--out", help="write the JSON result here")
    args = ap.parse_args(argv)

    if args.robot == "panda":
        preset = bp.PRESETS["panda"]
        path, lock, frame = preset["urdf"](), preset["lock"], preset["frame"]
    else:
        path, lock, frame = Path(args.robot), [], None
    lock = args.lock if args.lock is not None else lock
    frame = args.frame or frame
    flags = args.flags.split()
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)

    robot = load_robot(path, base=args.base, mimic="independent")
    if lock:
        robot = lock_joints(robot, lock)
    frame = frame or (robot.frame_names[-1] if robot.frame_names else robot.body_names[-1])

    # ---- soadyn: fresh derive + compile ---------------------------------------------------------------
    fresh = work / "soadyn"
    shutil.rmtree(fresh, ignore_errors=True)
    t0 = time.perf_counter()
    mod = soadyn_compile(robot, out_dir=fresh, force=True, progress=False)
    wall = time.perf_counter() - t0
    stamp = json.loads((Path(mod.__file__).parent / "soadyn_stamp.json").read_text())
    module_dir = Path(mod.__file__).parent

    # ---- soadyn: C loop, same flags as Pinocchio ------------------------------------------------------
    frame_id = mod.frame_ids[frame]
    sizes, wrapper = _c_signatures(mod, frame_id)
    cdir = work / "soadyn_c"
    shutil.rmtree(cdir, ignore_errors=True)
    cdir.mkdir(parents=True)
    for f in list(module_dir.glob("*.c")) + list(module_dir.glob("*.h")):
        if not f.name.startswith("_soadyn_"):
            shutil.copy(f, cdir / f.name)
    (cdir / "bench_wrap.c").write_text(wrapper)
    rng = np.random.default_rng(0)
    qs = np.stack([robot.random_configuration(rng) for _ in range(args.states)])
    inputs = {name: {"q": qs} for name in sizes}
    ours = bp.time_c_functions(cdir, list(sizes), sizes, flags=flags, inputs=inputs, n_states=args.states,
                               sources=sorted(cdir.glob("*.c")), headers=[f"{mod.module_name}.h"])

    # ---- soadyn: from Python ----------------------------------------------------------------------------
    q, v, tau = qs[0], rng.normal(size=robot.nv), rng.normal(size=robot.nv)
    n = args.states
    V, T = rng.normal(size=(n, robot.nv)), rng.normal(size=(n, robot.nv))
    py = {
        "inverse_dynamics": _python_us(mod.inverse_dynamics, (q, v, tau)),
        "mass_matrix": _python_us(mod.mass_matrix, (q,)),
        "forward_dynamics": _python_us(mod.forward_dynamics, (q, v, tau)),
        "mass_matrix_inverse": _python_us(mod.mass_matrix_inverse, (q,)),
        "jacobian_local": _python_us(lambda x: mod.jacobian(x, frame), (q,)),
    }
    py_batch = {
        "inverse_dynamics": _python_us(mod.inverse_dynamics, (qs, V, T), 20) / n,
        "forward_dynamics": _python_us(mod.forward_dynamics, (qs, V, T), 20) / n,
        "mass_matrix": _python_us(mod.mass_matrix, (qs,), 20) / n,
    }

    # ---- Pinocchio -------------------------------------------------------------------------------------
    pin = None
    if not args.no_pinocchio:
        if path.suffix.lower() != ".urdf":
            print("Pinocchio side needs a URDF; use --no-pinocchio for YAML robots", file=sys.stderr)
            return 2
        pin = bp.bench_pinocchio(path, args.base, frame, lock, flags=flags, n_states=args.states,
                                 workdir=work / f"pin_{robot.name}_{args.base}")

    # ---- report -------------------------------------------------------------------------------------
    prefix = mod.module_name
    ns = {k.removeprefix(prefix + "_"): val for k, val in ours["ns_per_call"].items()}
    ns["jacobian_local"] = ns.pop("bench_jacobian_local")
    ops = {k.removeprefix(prefix + "_"): v["total"] for k, v in mod.op_counts.items()}
    fam = mod.frame_op_counts.get(f"{prefix}_jacobian_local")
    if fam:  # a call for one frame costs the shared prefix plus that frame's case
        ops["jacobian_local"] = fam["prefix"] + fam[frame]
    t = stamp["timings"]
    derive_s = sum(t.get(k, 0.0) for k in ("derive", "optimise", "emit"))
    total_ops = sum(o for o in ops.values() if o)
    print(f"robot {robot.name} ({args.base} base, nq={robot.nq}, nv={robot.nv}, locked={lock}); "
          f"frame {frame}")
    print(f"flags: {' '.join(flags)}; {ours['compiler']}; {ours['machine']}")
    print(f"derive + optimise + emit {derive_s:.2f} s, compile {t.get('compile', 0.0):.2f} s, "
          f"wall {wall:.2f} s; {len(mod.op_counts)} C functions, {total_ops} operations")
    print()
    print("| function | ops | ops/DOF | soadyn C ns | Python us (1 state) | Pinocchio ns | ratio | target |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []

    def cell(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    for fn in sorted(ns, key=lambda f: (f not in PAIRS, f)):
        p = pin["ns_per_call"].get(PAIRS[fn]) if pin and fn in PAIRS else None
        ratio = p / ns[fn] if p else None
        o = ops.get(fn)
        rows.append({"function": fn, "ops": o, "ns": ns[fn], "python_us": py.get(fn),
                     "python_batch_us_per_state": py_batch.get(fn), "pinocchio_ns": p, "ratio": ratio,
                     "target": TARGETS.get(fn)})
        print(f"| {fn} | {cell(o, 'd')} | {cell(o / robot.nv if o else None, '.0f')} | {ns[fn]:.0f} | "
              f"{cell(py.get(fn), '.2f')} | {cell(p, '.0f')} | {cell(ratio, '.2f')} | "
              f"{cell(TARGETS.get(fn), '.0f')} |")
    print()
    print("Python, batch of", n, "states (us per state):",
          ", ".join(f"{k} {v:.3f}" for k, v in py_batch.items()))
    result = {"robot": robot.name, "base": args.base, "nv": robot.nv, "locked": lock, "frame": frame,
              "flags": flags, "derive_compile": stamp["timings"], "wall_s": wall, "rows": rows,
              "soadyn_c": ours, "pinocchio": pin}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
