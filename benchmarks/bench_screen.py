#!/usr/bin/env python3
"""The C parameter screen alone (issue 26 item 3): ns per row of ``fx_screen`` (the physical-consistency
screen of a checked ``params`` batch) and of ``fx_finite_d`` (the finiteness test of ``check_params=False``),
as a compiled module's single-call entries run them, on the rows of a held-out robot.

The two functions are those of ``templates/fastcalls.c.j2`` rendered by the tree this script imports
(``codegen/fastcalls.py``: the screen printed from ``soadyn.model.parameters.screen_conditions``), compiled
with the build profile's flags into a driver that calls them on chunks of 256 rows (32 states of eight
bodies, like the entries' chunks of ``FX_TILE`` states): in cache (the same 256 rows again and again) and
streamed (``--states`` states' rows, 80 bytes each, one pass after the other), process CPU time, fastest
of ``--rounds`` passes.  Beside them, the screen a checked SIMD batch runs in its lanes
(``soadyn_vscreen`` of ``codegen/lanes.py``, four lanes) on the same rows laid out lane-major as the
lanes hold them (groups of four states, ``c[10 r + k]``: entry k of row r of the four states): in cache
(64 groups) and streamed (every group).  ``--callgrind``: instructions per row of the first two instead
(valgrind, which cannot run AVX-512: the 'fast' flags with ``-march=x86-64-v3``, AVX2, unless ``--cflags``
is given).

Usage:  python benchmarks/bench_screen.py [--urdf X.urdf] [--states 2000] [--rounds 200]
        python benchmarks/bench_screen.py --callgrind
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_pinocchio as bp  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen.emit import render  # noqa: E402
from soadyn.codegen.lanes import screen_function, vector_type  # noqa: E402
from soadyn.codegen.profiles import IEEE_FLAGS, compiler_command, get_profile  # noqa: E402
from soadyn.codegen.screen import parameter_screen  # noqa: E402
from soadyn.model.parameters import random_params, with_param_bodies  # noqa: E402

DRIVER = r"""
#include "fast.c"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
__attribute__((noinline)) int screen_call(const double *p, npy_intp r) { return fx_screen(p, r); }
__attribute__((noinline)) int finite_call(const double *p, npy_intp r) { return fx_finite_d(p, 10 * r); }
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* ns per row of f over rows p[0 .. rows - 1] in chunks of 256, repeated to >= 16,000 rows per pass */
static double per_row(int (*f)(const double *, npy_intp), const double *p, long rows, int passes, long *acc)
{
    long inner = rows < 16000 ? 16000 / rows : 1, z, r;
    double best = 1e300;
    for (int k = 0; k < passes; ++k) {
        double t = now();
        for (z = 0; z < inner; ++z)
            for (r = 0; r < rows; r += 256)
                *acc += f(p + 10 * r, rows - r < 256 ? rows - r : 256);
        t = now() - t;
        if (t < best)
            best = t;
    }
    return best / (double)(rows * inner) * 1e9;
}
int main(int argc, char **argv)
{
    long rows = atol(argv[2]), acc = 0;
    int passes = atoi(argv[3]);
    double *p = malloc(sizeof(double) * 10 * (size_t)rows);
    FILE *f = fopen(argv[1], "rb");
    if (p == NULL || f == NULL || fread(p, sizeof(double), 10 * (size_t)rows, f) != 10 * (size_t)rows)
        return 1;
    fclose(f);
    if (passes == 0) {         /* callgrind: one pass of each over all rows */
        for (long r = 0; r < rows; r += 256)
            acc += screen_call(p + 10 * r, rows - r < 256 ? rows - r : 256)
                   + finite_call(p + 10 * r, rows - r < 256 ? rows - r : 256);
        printf("%ld\n", acc);
        return 0;
    }
    printf("%.3f %.3f %.3f %.3f %ld\n", per_row(screen_call, p, 256, passes, &acc),
           per_row(finite_call, p, 256, passes, &acc), per_row(screen_call, p, rows, passes, &acc),
           per_row(finite_call, p, rows, passes, &acc), acc);
    return 0;
}
"""


LANES_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef double soadyn_v4d __attribute__((vector_size(32)));
#include "vscreen.c"
static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}
/* ns per row of soadyn_vscreen over groups c[0 .. groups - 1] (rows rows of ten columns of four lanes
 * each), repeated to >= 16,000 rows per pass */
static double per_row(const soadyn_v4d *c, long groups, int rows, int passes, long *acc)
{
    long inner = 4 * rows * groups < 16000 ? 16000 / (4 * rows * groups) + 1 : 1, z, g;
    double best = 1e300;
    for (int k = 0; k < passes; ++k) {
        double t = now();
        for (z = 0; z < inner; ++z)
            for (g = 0; g < groups; ++g)
                *acc += soadyn_vscreen(c + 10 * rows * g, rows);
        t = now() - t;
        if (t < best)
            best = t;
    }
    return best / (double)(4 * rows * groups * inner) * 1e9;
}
int main(int argc, char **argv)
{
    long groups = atol(argv[2]), acc = 0;
    int rows = atoi(argv[3]), passes = atoi(argv[4]);
    soadyn_v4d *c = aligned_alloc(64, sizeof(soadyn_v4d) * 10 * (size_t)(rows * groups));
    FILE *f = fopen(argv[1], "rb");
    if (c == NULL || f == NULL || fread(c, sizeof(soadyn_v4d), 10 * (size_t)(rows * groups), f)
            != 10 * (size_t)(rows * groups))
        return 1;
    fclose(f);
    printf("%.3f %.3f %ld\n", per_row(c, groups < 64 ? groups : 64, rows, passes, &acc),
           per_row(c, groups, rows, passes, &acc), acc);
    return 0;
}
"""


def build_lanes(work: Path, flags: list[str]) -> Path:
    """The driver over the lanes' screen (``soadyn_vscreen``, four lanes), compiled with ``flags``."""
    assert vector_type(4) == "soadyn_v4d"
    (work / "vscreen.c").write_text(screen_function(4))
    (work / "lanes_driver.c").write_text(LANES_DRIVER)
    exe = work / "lanes_driver"
    subprocess.run([*compiler_command(), *flags, "-w", f"-I{work}", "-o", str(exe),
                    str(work / "lanes_driver.c"), "-lm"], check=True)
    return exe


def build(work: Path, flags: list[str]) -> Path:
    """The driver over the rendered fastcalls unit (its parameter part), compiled with ``flags``."""
    tu = render("fastcalls.c.j2", header="bench_screen.h", entries=[], nq=0, methods=[], ext="bench_screen",
                params=True, screen=parameter_screen())
    (work / "fast.c").write_text(tu)
    (work / "bench_screen.h").write_text("")
    (work / "driver.c").write_text(DRIVER)
    inc = [sysconfig.get_paths()["include"], np.get_include()]
    libdir = sysconfig.get_config_var("LIBDIR")
    exe = work / "driver"
    cmd = [*compiler_command(), *flags, "-w", *(f"-I{d}" for d in [str(work), *inc]), "-o", str(exe),
           str(work / "driver.c"), f"-L{libdir}", f"-lpython{sysconfig.get_python_version()}",
           f"-Wl,-rpath,{libdir}", "-lm"]
    subprocess.run(cmd, check=True)
    return exe


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urdf", type=Path, help="robot (free base, every body parameterised); default xArm7")
    ap.add_argument("--states", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=200, help="passes; the fastest counts")
    ap.add_argument("--cflags", help="flags instead of the 'fast' profile's (the IEEE flags are kept)")
    ap.add_argument("--callgrind", action="store_true", help="instructions per row (valgrind)")
    args = ap.parse_args(argv)
    urdf = args.urdf or bp.cmeel_prefix() / "share/example-robot-data/robots/xarm_description/urdf/xarm7.urdf"
    robot = with_param_bodies(load_robot(urdf, base="free"), "all")
    rng = np.random.default_rng(0)
    rows = np.stack([random_params(robot, rng) for _ in range(args.states)]).reshape(-1, 10)
    flags = (shlex.split(args.cflags) + list(IEEE_FLAGS)) if args.cflags else list(get_profile("fast").cflags)
    if args.callgrind and not args.cflags:      # valgrind runs AVX2, not AVX-512
        flags = ["-march=x86-64-v3" if f == "-march=native" else f for f in flags]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        exe = build(work, flags)
        rows.tofile(work / "rows.bin")
        n = str(len(rows))
        if args.callgrind:
            out = work / "cg.out"
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe),
                            str(work / "rows.bin"), n, "0"], check=True, capture_output=True)
            ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(out)],
                                 check=True, capture_output=True, text=True).stdout
            for line in ann.splitlines():     # "  1,234 ( 5.6%)  ???:screen_call [path]"
                words = line.split()
                for fn in ("screen_call", "finite_call"):
                    if any(w.endswith(f":{fn}") for w in words):
                        ir = float(words[0].replace(",", ""))
                        print(f"{fn}: {ir / len(rows):.1f} instructions per row ({len(rows)} rows, "
                              f"flags {' '.join(flags)})")
            return 0
        res = subprocess.run([str(exe), str(work / "rows.bin"), n, str(args.rounds)], check=True,
                             capture_output=True, text=True).stdout.split()
        nb = len(robot.param_bodies)
        groups = args.states // 4          # lane-major as in the lanes: (group, row, entry, lane)
        lanes_rows = rows[:4 * nb * groups].reshape(groups, 4, nb, 10).transpose(0, 2, 3, 1)
        np.ascontiguousarray(lanes_rows).tofile(work / "lanes.bin")
        lres = subprocess.run([str(build_lanes(work, flags)), str(work / "lanes.bin"), str(groups), str(nb),
                               str(args.rounds)], check=True, capture_output=True, text=True).stdout.split()
    load = open("/proc/loadavg").read().split()[0]
    print(f"{urdf.stem}: {len(rows)} rows ({args.states} states), flags {' '.join(flags)}; ns per row, "
          f"fastest of {args.rounds} passes; load average {load}")
    print(f"  screen  in cache (256 rows) {res[0]:>7s}   streamed ({n} rows) {res[2]:>7s}")
    print(f"  finite  in cache (256 rows) {res[1]:>7s}   streamed ({n} rows) {res[3]:>7s}")
    print(f"  lanes' screen (soadyn_vscreen, 4 lanes) in cache ({min(groups, 64) * 4 * nb} rows) "
          f"{lres[0]:>7s}   streamed ({groups * 4 * nb} rows) {lres[1]:>7s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
