"""Error of the float flight library against the double module, and time per call of both libraries.

For each robot: export the float and the double C library (``soadyn.codegen.export``) of M, ID, FD and
M^-1, build them as shared libraries (gcc -O2, the exported CMake flags), compile the double cffi module,
and report over N random states (``soadyn.codegen.verify.random_inputs``) the worst relative error
``max|x_float - x_double| / max|x_double|`` per function (inputs rounded to float: the error a float
flight computer sees), plus, with ``--time``, ns per call of each library in a C loop.

    python benchmarks/flight_float_error.py [--states 200] [--time] [ROBOT ...]

Without robots: the examples and the example-robot-data URDFs Panda and UR5 (docs/flight-c.md).
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from soadyn.codegen.export import export_c_library
from soadyn.codegen.functions import function_table, select_functions
from soadyn.codegen.pipeline import compile_robot, resolve_robot
from soadyn.codegen.verify import _call_generated, random_inputs

FUNCTIONS = "mass_matrix,inverse_dynamics,forward_dynamics,mass_matrix_inverse"
FLAGS = ["-std=c99", "-O2", "-ffreestanding", "-fno-math-errno", "-ffp-contract=off", "-fPIC", "-shared"]
ROOT = Path(__file__).resolve().parents[1]


def default_robots() -> list[tuple[str, str | None]]:
    out = [(str(ROOT / "examples" / f), None) for f in ("tian_wu_3dof.yaml", "seed004_example1.yaml",
                                                        "dimitrov_7dof_rw.yaml", "seed004_dual_arm.yaml",
                                                        "seed004_four_arm_37dof.yaml")]
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import PANDA_URDF, UR5_URDF  # None without example-robot-data

    return out + [(str(p), b) for p, b in ((PANDA_URDF, "free"), (UR5_URDF, "fixed")) if p is not None]


TIMING_C = r"""
#include <time.h>
/* the same loop for the library's status-returning functions (R = int) and the module's (R = void) */
#define SOADYN_TIMER(NAME, R)                                                                    \
typedef R (*NAME##_fn)(const {t} *, const {t} *, const {t} *, {t} *);                           \
double NAME(NAME##_fn f, const {t} *q, const {t} *v, const {t} *tau, {t} *a, int n)             \
{{                                                                                              \
    struct timespec t0, t1;                                                                     \
    int i;                                                                                      \
    clock_gettime(CLOCK_MONOTONIC, &t0);                                                        \
    for (i = 0; i < n; ++i) f(q, v, tau, a);                                                    \
    clock_gettime(CLOCK_MONOTONIC, &t1);                                                        \
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;     \
}}
SOADYN_TIMER(soadyn_time_fd, int)
SOADYN_TIMER(soadyn_time_void, void)
"""


def build(directory: Path, precision: str, tmp: Path) -> ctypes.CDLL:
    name = next(directory.glob("*Config.cmake")).name[:-len("Config.cmake")]
    t = "double" if precision == "double" else "float"
    (tmp / f"time_{precision}.c").write_text(TIMING_C.format(t=t))
    so = tmp / f"lib_{precision}.so"
    subprocess.run(["gcc", *FLAGS, str(directory / f"{name}.c"), "-o", str(so)], check=True)
    tso = tmp / f"time_{precision}.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(tmp / f"time_{precision}.c"), "-o", str(tso)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    timers = ctypes.CDLL(str(tso))
    lib.soadyn_timer = timers.soadyn_time_fd
    lib.soadyn_timer.restype = ctypes.c_double
    lib.soadyn_void_timer = timers.soadyn_time_void
    lib.soadyn_void_timer.restype = ctypes.c_double
    lib.soadyn_name = name
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("robots", nargs="*")
    ap.add_argument("--states", type=int, default=200)
    ap.add_argument("--base", choices=("free", "fixed"), default=None, help="base of the ROBOTs given")
    ap.add_argument("--time", action="store_true", help="also ns per forward-dynamics call of each library")
    args = ap.parse_args(argv)
    robots = [(r, args.base) for r in args.robots] or default_robots()
    print(f"{'robot':28s} {'bodies':>6s} {'nv':>4s}  " + "  ".join(f"{f:>19s}" for f in FUNCTIONS.split(","))
          + ("   FD ns: module / double / float" if args.time else ""))
    for path, base in robots:
        robot, _ = resolve_robot(path, base, mimic="independent")
        with tempfile.TemporaryDirectory() as tmpd:
            tmp = Path(tmpd)
            libs = {}
            for precision in ("double", "float"):
                d = tmp / precision
                export_c_library(path, d, precision, FUNCTIONS, base, mimic="independent")
                libs[precision] = build(d, precision, tmp)
            module = compile_robot(path, tmp / "modules", base, FUNCTIONS, progress=False,
                                   mimic="independent")
            ins = random_inputs(robot, args.states, np.random.default_rng(0))
            errs = []
            lib = libs["float"]
            for spec in select_functions(function_table(robot, derivatives=True), FUNCTIONS, robot.name):
                if spec.name.endswith("_fext"):
                    continue
                _, ref = _call_generated(module, spec, ins)
                fn = getattr(lib, f"{lib.soadyn_name}_{spec.name}")
                worst = 0.0
                for i in range(args.states):
                    xs = [np.ascontiguousarray(ins[a.name][i], dtype=np.float32) for a in spec.inputs]
                    out = np.zeros(spec.outputs[0].size, dtype=np.float32)
                    ptrs = [a.ctypes.data_as(ctypes.POINTER(ctypes.c_float)) for a in xs + [out]]
                    if fn(*ptrs) != 0:
                        worst = float("inf")
                        break
                    x = np.asarray(ref[i], dtype=float).reshape(-1)
                    worst = max(worst, float(np.max(np.abs(out - x)) / np.max(np.abs(x))))
                errs.append(worst)
            line = (f"{robot.name[:28]:28s} {robot.n_bodies:6d} {robot.nv:4d}  "
                    + "  ".join(f"{e:19.1e}" for e in errs))
            if args.time:
                # the module's own C function (fast profile), through the same C loop
                arrs = [np.ascontiguousarray(ins[k][0], dtype=np.float64) for k in ("q", "v", "tau")]
                out = np.zeros(robot.nv)
                ffi, clib = module._ffi, module._lib
                cname = f"{libs['double'].soadyn_name}_forward_dynamics"
                addr = int(ffi.cast("uintptr_t", ffi.addressof(clib, cname)))
                ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrs + [out]]
                timer = libs["double"].soadyn_void_timer
                ns = [min(timer(ctypes.c_void_p(addr), *ptrs, 20000) for _ in range(5))]
                for precision, ct in (("double", ctypes.c_double), ("float", ctypes.c_float)):
                    lb = libs[precision]
                    arrs = [np.ascontiguousarray(ins[k][0], dtype=np.float64 if ct is ctypes.c_double
                                                 else np.float32) for k in ("q", "v", "tau")]
                    out = np.zeros(robot.nv, dtype=arrs[0].dtype)
                    fn = getattr(lb, f"{lb.soadyn_name}_forward_dynamics")
                    ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrs + [out]]
                    f = ctypes.cast(fn, ctypes.c_void_p)
                    ns.append(min(lb.soadyn_timer(f, *ptrs, 20000) for _ in range(5)))
                line += f"   {ns[0]:6.0f} / {ns[1]:6.0f} / {ns[2]:6.0f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
