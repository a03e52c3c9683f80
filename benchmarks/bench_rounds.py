"""Two soadyn versions and Pinocchio in alternating rounds: mass matrix and M^-1 (issue 11).

    python benchmarks/bench_rounds.py --rounds 4 --robots panda,humanoid32,four_arm \
        before=/path/to/pkgdir after=-

Each ``label=PYTHONPATH`` names a soadyn version: ``-`` is the installed one, else a directory holding a
``soadyn`` package of another checkout (its subpackages as in the editable install: ``soadyn/`` with
``__init__.py``, ``_version.py`` and links to ``cli``, ``codegen``, ``model``, ``reference``, ``runtime``,
``structure``, ``symbolic``, ``templates`` of that checkout).  Per robot each version compiles its module
fresh (``fast`` profile, :func:`bench_dynamics.fresh_compile`); then every round times each module's
``mass_matrix`` and ``mass_matrix_inverse`` in the C loop of ``bench_dynamics.py`` (CPU time, minimum of 7
repetitions, outputs cycling through the states) and runs Pinocchio's timing program
(:func:`bench_pinocchio.bench_pinocchio_model`) on the same states.  Printed: the minimum per side over
the rounds and the ratios.  On a shared machine the rounds let both sides meet a quiet moment.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_dynamics as bd  # noqa: E402
import bench_pinocchio as bp  # noqa: E402

FUNCTIONS = ("mass_matrix", "mass_matrix_inverse")
PIN = {"mass_matrix": "crba", "mass_matrix_inverse": "minv"}


def jobs(work: Path) -> dict:
    hum = work / "humanoid32.urdf"
    hum.write_text(bd.humanoid_urdf())
    pre = bp.PRESETS["panda"]
    return {"panda": (pre["urdf"](), "free", pre["lock"], pre["frame"]),
            "humanoid32": (hum, "free", [], None),
            "four_arm": (bd.REPO / "examples" / "seed004_four_arm_37dof.yaml", "file", [], None)}


def build(label: str, job: tuple, versions: dict[str, str], work: Path) -> dict[str, tuple[ctypes.CDLL, str]]:
    path, base, lock, _ = job
    libs = {}
    for v, pythonpath in versions.items():
        old, cwd = os.environ.get("PYTHONPATH"), os.getcwd()
        if pythonpath != "-":
            os.environ["PYTHONPATH"] = pythonpath
        os.chdir(work)          # the child's sys.path starts with its cwd: not a checkout's root
        try:
            info = bd.fresh_compile(Path(path), base, lock, work / f"{label}_{v}", "fast",
                                    ",".join(FUNCTIONS))
        finally:
            os.chdir(cwd)
            if old is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = old
        mdir = Path(info["module_dir"])
        libs[v] = (ctypes.CDLL(str(next(mdir.glob("_soadyn_*.so")))), mdir.name)
    return libs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="+", help="label=PYTHONPATH ('-': the installed soadyn)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--robots", default="panda,humanoid32,four_arm")
    ap.add_argument("--workdir", default=str(HERE / "build" / "rounds"))
    args = ap.parse_args(argv)
    from soadyn import load_robot
    from soadyn.structure.operations import lock_joints

    versions = dict(v.split("=", 1) for v in args.versions)
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    h = bd._harness(work)
    table = jobs(work)
    for label in args.robots.split(","):
        path, base, lock, frame = table[label]
        robot = load_robot(path, base=None if base == "file" else base, mimic="independent")
        if lock:
            robot = lock_joints(robot, lock)
        frame = frame or (robot.frame_names[-1] if robot.frame_names else robot.body_names[-1])
        libs = build(label, table[label], versions, work)
        pm = bd.pin_model(robot, frame)
        pst = bp.random_states(pm, 1000, seed=0)
        q = np.ascontiguousarray(bp.states_to_soadyn(pst, robot.is_free)["q"])
        n, nq, size = len(q), robot.nq, robot.nv * robot.nv
        out = np.empty((n, size))
        ptrs = (ctypes.c_void_p * 3)(q.ctypes.data, 0, 0)
        strides = (ctypes.c_int * 3)(nq, 0, 0)
        best: dict[tuple[str, str], float] = {}
        for r in range(args.rounds):
            for v, (lib, mname) in libs.items():
                for f in FUNCTIONS:
                    fn = ctypes.cast(getattr(lib, f"{mname}_{f}"), ctypes.c_void_p).value
                    t1 = h.soadyn_bench_time(fn, 1, n, 1, 1, ptrs, strides, out.ctypes.data, size, 0)
                    passes = max(1, int(30e6 / max(t1 * n, 1.0)))
                    t = h.soadyn_bench_time(fn, 1, n, 7, passes, ptrs, strides, out.ctypes.data, size, 0)
                    best[v, f] = min(best.get((v, f), float("inf")), t)
            pin = bp.bench_pinocchio_model(pm, frame, n_states=n, workdir=HERE / "build" / "pinocchio",
                                           states=pst)["ns_per_call"]
            for f in FUNCTIONS:
                best["pinocchio", f] = min(best.get(("pinocchio", f), float("inf")), pin[PIN[f]])
            print(f"{label} round {r} (load {os.getloadavg()[0]:.1f}): "
                  + ", ".join(f"{v} {f} {best[v, f]:.0f}" for v in [*libs, "pinocchio"] for f in FUNCTIONS),
                  flush=True)
        for f in FUNCTIONS:
            pn = best["pinocchio", f]
            print(f"{label} {f}: Pinocchio {pn:.0f} ns | "
                  + " | ".join(f"{v} {best[v, f]:.0f} ns ({pn / best[v, f]:.2f}x)" for v in libs), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
