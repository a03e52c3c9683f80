#!/usr/bin/env python3
"""Write rate of a batch's output: plain stores against streaming (non-temporal) stores (issue 26, item 2).

    python benchmarks/bench_write_rate.py [--mib 3.5,6.3,64] [--block 7296] [--rounds 5]

A C loop writes an output of MIB mebibytes block by block (a lanes group's rows: ``--block`` bytes, B1+Z1's
``body_poses`` for 4 states by default) from a buffer in L1, as a batch's copy-back does, with 32-byte
plain stores or 32-byte streaming stores (``movntpd``, then ``sfence``).  "warm": the output is written
again and again (a reused ``out=`` or the batch's kept block: it stays in the last-level cache when it fits
there); "cold": the output is evicted between writes (streaming stores of the other kind first).  Printed:
GB/s, best of 20 writes per round, per round.  x86-64 with AVX only (gcc or clang).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
static double now(void)
{ struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
__attribute__((noinline)) static void plain(double *p, const double *s, size_t n)
{ for (size_t i = 0; i < n; i += 4) _mm256_storeu_pd(p + i, _mm256_loadu_pd(s + i)); }
__attribute__((noinline)) static void stream(double *p, const double *s, size_t n)
{ for (size_t i = 0; i < n; i += 4) _mm256_stream_pd(p + i, _mm256_loadu_pd(s + i)); }
static double write_all(int nt, double *p, const double *s, size_t n, size_t nb)
{
    double t = now();
    for (size_t o = 0; o + nb <= n; o += nb) (nt ? stream : plain)(p + o, s, nb);
    _mm_sfence();
    return now() - t;
}
int main(int argc, char **argv)
{
    size_t bytes = strtoull(argv[1], 0, 10) & ~(size_t)63, blk = strtoull(argv[2], 0, 10) & ~(size_t)31;
    size_t n = bytes / 8, nb = blk / 8;
    int rounds = atoi(argv[3]);
    double *p = aligned_alloc(64, bytes), *s = aligned_alloc(64, blk);
    memset(p, 0, bytes);
    for (size_t i = 0; i < nb; ++i) s[i] = i;
    for (int r = 0; r < rounds; ++r) {
        double best[2][2] = {{1e30, 1e30}, {1e30, 1e30}};   /* [nt][cold] */
        for (int nt = 0; nt < 2; ++nt)
            for (int k = 0; k < 20; ++k) {
                double t = write_all(nt, p, s, n, nb);              /* warm: written just before */
                if (t < best[nt][0] && k) best[nt][0] = t;
                write_all(1, p, s, n, nb);                          /* evicted: streamed out */
                t = write_all(nt, p, s, n, nb);
                if (t < best[nt][1]) best[nt][1] = t;
            }
        printf("%.1f MiB, blocks of %zu bytes: warm plain %.1f streaming %.1f GB/s; "
               "cold plain %.1f streaming %.1f GB/s\n", bytes / 1048576.0, blk, n * 8 / best[0][0],
               n * 8 / best[1][0], n * 8 / best[0][1], n * 8 / best[1][1]);
    }
    return 0;
}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", default="3.5,6.3,64", help="output sizes in MiB, comma-separated")
    ap.add_argument("--block", type=int, default=7296, help="bytes per block (4 states of the output)")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    cc = os.environ.get("CC", "cc")
    work = Path(tempfile.mkdtemp(prefix="write_rate_"))
    try:
        (work / "w.c").write_text(PROGRAM)
        subprocess.run([cc, "-O2", "-mavx", str(work / "w.c"), "-o", str(work / "w")], check=True)
        for mib in (float(x) for x in args.mib.split(",")):
            sys.stdout.write(subprocess.run([str(work / "w"), str(int(mib * 2**20)), str(args.block),
                                             str(args.rounds)], check=True, capture_output=True,
                                            text=True).stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
