#!/usr/bin/env python3
"""How fast this core runs straight-line code that does not fit its instruction caches.

    python benchmarks/probe_code_fetch.py [--ghz 2.65] [--workdir W]

Writes C functions of N statements ``r_k = r_k op w[c]`` (24 independent chains of double multiplies, adds
and subtracts, each reading a 64-entry work array: the shape of soadyn's stage functions, whose operations
read the work array), compiles each with the ``fast`` profile's flags and times one call (best of 7 x
2,000 calls).  Printed per size: code bytes, instructions (``objdump``), ns per call, and with ``--ghz``
(the core's clock, e.g. from a chain of dependent ``imul``) bytes and instructions per cycle.  A function
that fits the L1i runs at the core's arithmetic rate; beyond it, at the rate the front end fetches code
from L2 (benchmarks/README.md, fifteenth session: ~13 bytes a cycle on an Intel Emerald Rapids core).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHAINS = 24
MAIN = r"""#include <stdio.h>
#include <time.h>
void f(const double *in, double *w, double *out);
int main(void) {
    double in[%(chains)d], w[64], out[1];
    for (int i = 0; i < %(chains)d; i++) in[i] = 1.0 + i * 1e-3;
    for (int i = 0; i < 64; i++) w[i] = 1.0 + i * 1e-4;
    double best = 1e30;
    for (int r = 0; r < 7; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int k = 0; k < 2000; k++) f(in, w, out);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = ((b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) * 1e-9) / 2000;
        if (s < best) best = s;
    }
    printf("%%.1f\n", best * 1e9);
    return out[0] == 12345.0;
}
"""


def source(n: int, seed: int = 1) -> str:
    """C text of ``f``: ``n`` statements over :data:`CHAINS` chains."""
    rnd = random.Random(seed)
    lines = ["void f(const double *restrict in, double *restrict w, double *restrict out) {",
             "  double " + ", ".join(f"r{i} = in[{i}]" for i in range(CHAINS)) + ";"]
    for k in range(n):
        lines.append(f"  r{k % CHAINS} = r{k % CHAINS} {rnd.choice('*+-')} w[{rnd.randrange(64)}];")
    lines.append("  out[0] = " + " + ".join(f"r{i}" for i in range(CHAINS)) + ";\n}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,8000,32000,128000", help="statements per function")
    ap.add_argument("--ghz", type=float, default=0.0, help="the core's clock, for per-cycle rates")
    ap.add_argument("--workdir", default="")
    args = ap.parse_args(argv)
    from soadyn.codegen.profiles import get_profile

    flags = [f for f in get_profile("fast").cflags if not f.startswith("-D")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="soadyn_fetch_"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "main.c").write_text(MAIN % {"chains": CHAINS})
    print("| statements | code bytes | instructions | ns per call | bytes per cycle "
          "| instructions per cycle |")
    print("|---|---|---|---|---|---|")
    for n in (int(x) for x in args.sizes.split(",")):
        c, o, exe = work / f"f{n}.c", work / f"f{n}.o", work / f"m{n}"
        c.write_text(source(n))
        subprocess.run(["gcc", *flags, "-c", str(c), "-o", str(o)], check=True)
        subprocess.run(["gcc", "-O2", str(work / "main.c"), str(o), "-o", str(exe)], check=True)
        size = int(subprocess.run(["size", str(o)], capture_output=True, text=True, check=True)
                   .stdout.splitlines()[-1].split()[0])
        dis = subprocess.run(["objdump", "-d", str(o)], capture_output=True, text=True, check=True).stdout
        ins = sum(1 for line in dis.splitlines() if line.startswith("  ") and "\t" in line)
        ns = float(subprocess.run([str(exe)], capture_output=True, text=True).stdout)
        per = (f"{size / (ns * args.ghz):.1f} | {ins / (ns * args.ghz):.2f}" if args.ghz else "- | -")
        print(f"| {n:,} | {size:,} | {ins:,} | {ns:,.0f} | {per} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
