"""Time per call of the exported flight C library against the soadyn module's C, double and float.

For each robot: export the double and the float C library (``soadyn.codegen.export``) of the functions
(default FD, M, ID, M^-1), generate the module's C of the same functions as the module builds it (its
translation units: stage functions, fused sin/cos; :func:`soadyn.codegen.units.translation_units` of
the profile), and compile all three with the **same flags** (``--flags generic``: the exported CMake
file's for gcc, ``-O2 -ffreestanding -ftree-loop-distribute-patterns -fno-math-errno -ffp-contract=off``
and on x86 ``-mforce-drap``, the module's units without these three; ``--flags native`` adds
``-march=native -fno-tree-slp-vectorize``, the CMake option ``<NAME>_NATIVE`` and the module's ``fast``
profile).  One C loop calls a function on each of N random
states (``soadyn.codegen.verify.random_inputs``) in turn; a round times every variant of every function
once, in alternating order, and the table gives the median over rounds of ns per call, its range
(min-max) and the ratio library / module taken per round (median, range).  Before timing, the double
library's outputs are compared with the module C's, bit for bit, on every state.

    python benchmarks/bench_flight.py [--states 1000] [--rounds 9] [--flags generic|native] [ROBOT ...]
    python benchmarks/bench_flight.py --callgrind --no-float [ROBOT ...]     # instructions per call

With ``--callgrind`` and ``--layouts`` the library's ``<fn>_prechecked`` (the same function without
the input check: the state-checked-once API, docs/flight-c.md) is measured beside the library and the
module (``--no-prechecked``: not).

Without robots: the example-robot-data URDFs Panda (free base) and the held-out xArm7 (free base) and
UR10 (fixed) (docs/flight-c.md).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from soadyn.codegen.export import PRECHECKED, X86_GCC_FLAGS, export_c_library
from soadyn.codegen.functions import function_table, select_functions
from soadyn.codegen.pipeline import generate, resolve_robot
from soadyn.codegen.profiles import IEEE_FLAGS, Profile, get_profile
from soadyn.codegen.units import translation_units
from soadyn.codegen.verify import random_inputs

FUNCTIONS = "forward_dynamics,mass_matrix,inverse_dynamics,mass_matrix_inverse"
SHORT = {"forward_dynamics": "FD", "mass_matrix": "M", "inverse_dynamics": "ID",
         "mass_matrix_inverse": "M^-1"}
FLAGS = {"generic": ["-std=c99", "-O2", *IEEE_FLAGS],
         "native": ["-std=c99", "-O2", *IEEE_FLAGS, "-march=native", "-fno-tree-slp-vectorize"]}
#: the exported CMake file's for gcc (the module's C includes math.h; -mforce-drap on x86)
LIB_ONLY = ["-ffreestanding", "-ftree-loop-distribute-patterns",
            *(X86_GCC_FLAGS if platform.machine() in ("x86_64", "AMD64", "i686") else ())]
ROOT = Path(__file__).resolve().parents[1]

#: the call of f (1 to 4 input arrays, then the output) in the C loops below: a function pointer type per
#: arity and status; SOADYN_CALL(returns_int, n_in) calls f on A(0).., o and ors its status into bad
CALL_C = r"""
typedef void (*vf1)(const void *, void *);
typedef void (*vf2)(const void *, const void *, void *);
typedef void (*vf3)(const void *, const void *, const void *, void *);
typedef void (*vf4)(const void *, const void *, const void *, const void *, void *);
typedef int (*if1)(const void *, void *);
typedef int (*if2)(const void *, const void *, void *);
typedef int (*if3)(const void *, const void *, const void *, void *);
typedef int (*if4)(const void *, const void *, const void *, const void *, void *);
#define SOADYN_CALL(returns_int, n_in) \
    switch ((returns_int) ? (n_in) : -(n_in)) { \
    case 1: bad |= ((if1)f)(A(0), o); break; \
    case 2: bad |= ((if2)f)(A(0), A(1), o); break; \
    case 3: bad |= ((if3)f)(A(0), A(1), A(2), o); break; \
    case 4: bad |= ((if4)f)(A(0), A(1), A(2), A(3), o); break; \
    case -1: ((vf1)f)(A(0), o); break; \
    case -2: ((vf2)f)(A(0), A(1), o); break; \
    case -3: ((vf3)f)(A(0), A(1), A(2), o); break; \
    default: ((vf4)f)(A(0), A(1), A(2), A(3), o); break; \
    }
"""

#: a C loop over the states: f(in0 + i*s0, ..., out + i*so) for i < n, ns per call
TIMING_C = CALL_C + r"""
#include <time.h>
double soadyn_time(void *f, int returns_int, int n_in, char **in, const long *stride, char *out,
                   long out_stride, int n)
{
    struct timespec t0, t1;
    int i, bad = 0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; ++i) {
        char *o = out + i * out_stride;
#define A(k) (in[k] + i * stride[k])
        SOADYN_CALL(returns_int, n_in);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (bad) return -1.0;
    return ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
}
"""


#: --callgrind: a program that calls FN of SO on each of N states read from files (valgrind counts the
#: instructions of FN and its callees): driver SO FN RETURNS_INT N IN0.bin:SIZE0 ... OUT_SIZE
DRIVER_C = r"""
#define _POSIX_C_SOURCE 200809L
#include <alloca.h>
#include <dlfcn.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
""" + CALL_C + r"""static int run(int argc, char **argv);
/* SOADYN_STACK=bytes moves the stack of the calls (4 KiB aliasing, --layouts) */
int main(int argc, char **argv)
{
    const char *e = getenv("SOADYN_STACK");
    volatile char *pad = alloca((e ? (size_t)atol(e) : 0) + 1);
    pad[0] = 0;
    return run(argc, argv);
}
static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
/* SOADYN_PASSES=p: time p passes over the states, print the median ns per call */
static int run(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    const char *ep = getenv("SOADYN_PASSES");
    int passes = ep ? atoi(ep) : 1, p;
    double *ts = malloc(sizeof(double) * (size_t)(passes > 0 ? passes : 1));
    void *f = h ? dlsym(h, argv[2]) : NULL;
    int ret = atoi(argv[3]), n = atoi(argv[4]), nin = argc - 6, osz = atoi(argv[argc - 1]), k, i, bad = 0;
    double *in[4], *out;
    int sz[4];
    if (f == NULL || nin < 1 || nin > 4) return 2;
    for (k = 0; k < nin; ++k) {
        char *c = strchr(argv[5 + k], ':');
        FILE *fh;
        *c = 0;
        sz[k] = atoi(c + 1);
        in[k] = malloc(sizeof(double) * (size_t)sz[k] * (size_t)n);
        fh = fopen(argv[5 + k], "rb");
        if (fh == NULL || fread(in[k], sizeof(double), (size_t)sz[k] * n, fh) != (size_t)sz[k] * n) return 3;
        fclose(fh);
    }
    out = malloc(sizeof(double) * (size_t)osz * (size_t)n);
    for (p = 0; p < passes; ++p) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (i = 0; i < n; ++i) {
        double *o = out + (size_t)i * osz;
#define A(k) (in[k] + (size_t)i * sz[k])
        SOADYN_CALL(ret, nin);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ts[p] = ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n;
    }
    qsort(ts, (size_t)passes, sizeof(double), cmp);
    if (ep) printf("%.2f\n", ts[passes / 2]);
    return bad != 0;
}
"""


def instructions(tmp: Path, so: Path, fn: str, returns_int: bool, inputs: list[tuple[str, int]],
                 out_size: int, n: int) -> int:
    """Instructions per call of ``fn`` (and its callees) over ``n`` states (valgrind --tool=callgrind)."""
    cg = tmp / "callgrind.out"
    r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}",
                        f"--toggle-collect={fn}", str(tmp / "driver"), str(so), fn, str(int(returns_int)),
                        str(n),
                        *[f"{tmp / name}.bin:{size}" for name, size in inputs], str(out_size)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{fn}: the callgrind run failed: {r.stderr.strip()[-400:]}")
    total = next(int(line.split()[1]) for line in cg.read_text().splitlines()
                 if line.startswith(("summary:", "totals:")))
    return round(total / n)


#: --layouts: code layouts (bytes of a never-called function compiled first) x stack offsets (bytes)
PADS = (0, 320, 1088, 1600, 2112, 2624, 3136, 3648)
STACKS = (0, 1024, 2048, 3072)


def layouts(tmp: Path, robot_name: str, specs: list,
            builds: dict[str, tuple[list[str], list[str], bool, str]], prefix: str) -> None:
    """Per function: ns per call of each build (label -> (compile arguments, link arguments, returns
    int, suffix of the function's name)) over :data:`PADS` code layouts x :data:`STACKS` stack offsets,
    a fresh copy of the .so each time (median of 20 passes over the states), and the ratio to the first
    build in each configuration; prints median [min-max] over the configurations."""
    sos = {}
    for pad in PADS:
        pf = tmp / f"pad{pad}.c"
        pf.write_text(f'void soadyn_pad_fn(void);\nvoid soadyn_pad_fn(void) {{ __asm__ volatile(".fill '
                      f'{pad // 4}, 4, 0x90909090"); }}\n')
        for label, (args, libs, _, _) in builds.items():
            so = tmp / f"{label}_pad{pad}.so"
            _gcc([*args[:-1], str(pf), args[-1], *libs, "-o", str(so)])
            sos[label, pad] = so
    first = next(iter(builds))
    for spec in specs:
        t: dict[str, list[float]] = {b: [] for b in builds}
        ratio: dict[str, list[float]] = {b: [] for b in builds}
        for i, pad in enumerate(PADS):
            for j, stack in enumerate(STACKS):
                got = {}
                for label in (list(builds) if (i + j) % 2 == 0 else list(builds)[::-1]):
                    fresh = tmp / f"fresh_{label}.so"
                    shutil.copyfile(sos[label, pad], fresh)
                    fn = prefix + spec.name + builds[label][3]
                    r = subprocess.run([str(tmp / "driver"), str(fresh), fn,
                                        str(int(builds[label][2])), "1000",
                                        *[f"{tmp / a.name}.bin:{a.size}" for a in spec.inputs],
                                        str(spec.outputs[0].size)], capture_output=True, text=True,
                                       env={**os.environ, "SOADYN_STACK": str(stack), "SOADYN_PASSES": "20"})
                    if r.returncode != 0:
                        raise SystemExit(f"{label} {spec.name}: the driver failed: {r.stderr[-300:]}")
                    got[label] = float(r.stdout.split()[-1])
                    t[label].append(got[label])
                for label in builds:
                    ratio[label].append(got[label] / got[first])
        cells = " ".join(f"{label} {statistics.median(t[label]):.0f} "
                         f"[{min(t[label]):.0f}-{max(t[label]):.0f}]"
                         + ("" if label == first else
                            f" ({statistics.median(ratio[label]):.2f} [{min(ratio[label]):.2f}-"
                            f"{max(ratio[label]):.2f}])") for label in builds)
        print(f"{robot_name[:24]:24s} {SHORT.get(spec.name, spec.name)[:5]:5s} {cells}", flush=True)


def default_robots() -> list[tuple[str, str]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import ERD  # None without example-robot-data

    if ERD is None:
        raise SystemExit("example-robot-data is not installed: name the robot files")
    return [(str(ERD / "panda_description/urdf/panda.urdf"), "free"),
            (str(ERD / "xarm_description/urdf/xarm7.urdf"), "free"),
            (str(ERD / "ur_description/urdf/ur10_robot.urdf"), "fixed")]


def _gcc(args: list[str]) -> None:
    subprocess.run(["gcc", *args], check=True)


def module_units(path: str, base: str | None, name: str, functions: str, profile: Profile,
                 directory: Path) -> list[Path]:
    """The module's C of ``functions`` as the module build compiles it (its translation units)."""
    robot, _ = resolve_robot(path, base, mimic="independent")
    units: list[tuple[str, str]] = []
    generate(robot, name, functions=functions, profile=profile,
             on_function=lambda funcs, header: units.extend(translation_units(funcs, header)))
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for stem, text in units:
        p = directory / f"{stem}.c"
        p.write_text(text)
        out.append(p)
    return out


class Variant:
    """One compiled shared object and how to call its functions."""

    def __init__(self, label: str, so: Path, prefix: str, returns_int: bool, dtype: type) -> None:
        self.label, self.so, self.lib, self.prefix = label, so, ctypes.CDLL(str(so)), prefix
        self.returns_int, self.dtype = returns_int, dtype

    def fn(self, name: str) -> int:
        return ctypes.cast(getattr(self.lib, self.prefix + name), ctypes.c_void_p).value


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("robots", nargs="*")
    ap.add_argument("--base", choices=("free", "fixed"), default=None, help="base of the ROBOTs given")
    ap.add_argument("--functions", default=FUNCTIONS)
    ap.add_argument("--states", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--flags", choices=tuple(FLAGS), default="generic")
    ap.add_argument("--keep", default=None, help="build in this directory and keep it (else a temporary one)")
    ap.add_argument("--no-float", action="store_true", help="time the double library and the module only")
    ap.add_argument("--layouts", action="store_true",
                    help="instead of the in-process rounds: each of 8 code layouts x 4 stack offsets, a "
                         "fresh copy of each .so in a C driver; ns per call and ratio to the module, median "
                         "[min-max] over the 32 configurations")
    ap.add_argument("--compare", default=None,
                    help="with --layouts: another exported double library (its .c) to time beside")
    ap.add_argument("--callgrind", action="store_true",
                    help="instead of timing: instructions per call (valgrind), module and double library, "
                         "over 200 states (load-independent)")
    ap.add_argument("--no-prechecked", action="store_true",
                    help="with --callgrind or --layouts: leave out the library's <fn>_prechecked (the "
                         "function without the input check, after <name>_check_<inputs>)")
    args = ap.parse_args(argv)
    robots = [(r, args.base) for r in args.robots] or default_robots()
    flags = FLAGS[args.flags]
    prof = get_profile("fast" if args.flags == "native" else "portable")
    with open("/proc/loadavg") as fh:
        load0 = fh.read().split()[:3]
    print(f"flags: {' '.join(flags)} (library also {' '.join(LIB_ONLY)}); {args.states} states, "
          f"{args.rounds} alternating rounds; ns per call: median [min-max] over rounds; "
          f"load {' '.join(load0)}")
    if args.callgrind:
        print("instructions per call (valgrind --tool=callgrind, the function and its callees, 200 states)")
        last = "" if args.no_prechecked else f" {'prechecked':>17s} {'prechecked-mod':>17s}"
        print(f"{'robot':24s} {'fn':5s} {'module':>17s} {'library':>17s} {'lib/mod':>17s}{last}")
    else:
        print(f"{'robot':24s} {'fn':5s} {'module':>17s} {'library':>17s} {'lib/mod':>17s} {'float lib':>17s}")
    for path, base in robots:
        robot, name = resolve_robot(path, base, mimic="independent")
        specs = [s for s in select_functions(function_table(robot, derivatives=True), args.functions,
                                             robot.name) if not s.name.endswith("_fext")]
        with tempfile.TemporaryDirectory(prefix="bench_flight-") as tmpd:
            tmp = Path(args.keep) / name if args.keep else Path(tmpd)
            tmp.mkdir(parents=True, exist_ok=True)
            timer_so = tmp / "timer.so"
            (tmp / "timer.c").write_text(TIMING_C)
            _gcc(["-O2", "-fPIC", "-shared", str(tmp / "timer.c"), "-o", str(timer_so)])
            timer = ctypes.CDLL(str(timer_so)).soadyn_time
            timer.restype = ctypes.c_double
            variants = []
            srcs = module_units(path, base, name, args.functions, prof, tmp / "module")
            so = tmp / "module.so"
            _gcc([*flags, "-fPIC", "-shared", *map(str, srcs), "-o", str(so), "-lm"])
            variants.append(Variant("module", so, f"{name}_", False, np.float64))
            for precision in ("double",) + (() if args.no_float else ("float",)):
                d = tmp / precision
                export_c_library(path, d, precision, args.functions, base, mimic="independent")
                so = tmp / f"lib_{precision}.so"
                _gcc([*flags, *LIB_ONLY, "-fPIC", "-shared", str(d / f"{name}.c"), "-o", str(so)])
                variants.append(Variant(precision, so, f"{name}_", True,
                                        np.float64 if precision == "double" else np.float32))
            ins = random_inputs(robot, args.states, np.random.default_rng(0))
            if args.callgrind or args.layouts:
                (tmp / "driver.c").write_text(DRIVER_C)
                _gcc(["-O2", str(tmp / "driver.c"), "-o", str(tmp / "driver"), "-ldl"])
                for k, x in ins.items():
                    np.ascontiguousarray(x[:200] if args.callgrind else x[:1000],
                                         dtype=np.float64).tofile(tmp / f"{k}.bin")
            if args.layouts:
                lib_c = str(tmp / "double" / f"{name}.c")
                # (the pad function goes before the last argument: the module's first unit is its last)
                builds = {"module": ([*flags, "-fPIC", "-shared", *map(str, srcs[::-1])], ["-lm"], False, ""),
                          "library": ([*flags, *LIB_ONLY, "-fPIC", "-shared", lib_c], [], True, "")}
                if not args.no_prechecked:      # the same library, its functions without the input check
                    builds["prechecked"] = ([*flags, *LIB_ONLY, "-fPIC", "-shared", lib_c], [], True,
                                            PRECHECKED)
                if args.compare:
                    builds["compare"] = ([*flags, *LIB_ONLY, "-fPIC", "-shared", args.compare], [], True, "")
                layouts(tmp, robot.name, specs, builds, f"{name}_")
                continue
            if args.callgrind:
                for spec in specs:
                    calls = [(v, spec.name) for v in variants[:2]]
                    if not args.no_prechecked:
                        calls.append((variants[1], spec.name + PRECHECKED))
                    got = [instructions(tmp, v.so, v.prefix + fn, v.returns_int,
                                        [(a.name, a.size) for a in spec.inputs], spec.outputs[0].size, 200)
                           for v, fn in calls]
                    pre = "" if args.no_prechecked else f" {got[2]:>17d} {got[2] - got[0]:>+17d}"
                    print(f"{robot.name[:24]:24s} {SHORT.get(spec.name, spec.name)[:5]:5s} "
                          f"{got[0]:>17d} {got[1]:>17d} {got[1] / got[0]:>17.3f}{pre}", flush=True)
                continue
            rows = []
            for spec in specs:
                arrays = {v.label: [np.ascontiguousarray(ins[a.name], dtype=v.dtype) for a in spec.inputs]
                          for v in variants}
                outs = {v.label: np.zeros((args.states, spec.outputs[0].size), dtype=v.dtype)
                        for v in variants}

                def run(v: Variant, n: int = args.states, spec=spec, arrays=arrays, outs=outs,
                        timer=timer) -> float:
                    xs = arrays[v.label]
                    ptrs = (ctypes.c_char_p * len(xs))(*[ctypes.cast(x.ctypes.data, ctypes.c_char_p)
                                                         for x in xs])
                    strides = (ctypes.c_long * len(xs))(*[x.strides[0] for x in xs])
                    o = outs[v.label]
                    ns = timer(ctypes.c_void_p(v.fn(spec.name)), int(v.returns_int), len(xs), ptrs, strides,
                               ctypes.c_char_p(o.ctypes.data), ctypes.c_long(o.strides[0]), n)
                    if ns < 0:
                        raise SystemExit(f"{v.label} {spec.name}: a call returned an error status")
                    return ns

                for v in variants:
                    run(v)                                  # warm up, fill the outputs
                if not np.array_equal(outs["module"].view(np.uint64), outs["double"].view(np.uint64)):
                    raise SystemExit(f"{robot.name} {spec.name}: the double library's bits differ from "
                                     "the module's C")
                times: dict[str, list[float]] = {v.label: [] for v in variants}
                ratio: list[float] = []
                for r in range(args.rounds):
                    order = variants if r % 2 == 0 else variants[::-1]
                    got = {v.label: run(v) for v in order}
                    for k, t in got.items():
                        times[k].append(t)
                    ratio.append(got["double"] / got["module"])
                rows.append((spec.name, times, ratio))
            for fname, times, ratio in rows:
                def cell(xs: list[float], fmt: str = "{:.0f}") -> str:
                    return (fmt.format(statistics.median(xs)) + " [" + fmt.format(min(xs)) + "-"
                            + fmt.format(max(xs)) + "]")
                print(f"{robot.name[:24]:24s} {SHORT.get(fname, fname)[:5]:5s} {cell(times['module']):>17s} "
                      f"{cell(times['double']):>17s} {cell(ratio, '{:.2f}'):>17s} "
                      f"{cell(times['float']) if 'float' in times else '':>17s}", flush=True)
    with open("/proc/loadavg") as fh:
        print(f"load after: {' '.join(fh.read().split()[:3])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
