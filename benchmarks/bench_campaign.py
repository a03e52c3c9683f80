"""Campaign engine benchmark (issue 14): scenarios/s on 1 and 2 Dask worker processes, speed-up, the engine's
overhead per scenario, and memory against the number of completed scenarios.

    python benchmarks/bench_campaign.py [--n 200] [--batch 1] [--cache DIR]

Scenarios are those of examples/campaigns/capture.yaml.  Each cluster is started first and warmed up (every
worker loads the compiled modules once), so the timed run measures the campaign itself.
``overhead/scenario`` = (wall x workers - sum of in-task compute times) / n: the time the engine (Dask
scheduling and transfer, Parquet parts, progress bar) adds to each scenario's simulation.  The load average
is printed: on a shared machine other processes take cores and the wall-clock figures suffer.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SPEC = HERE.parent / "examples" / "campaigns" / "capture.yaml"


def _rss_mb(pid: int | None = None) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def bench(n: int, workers: int, cache: str | None, batch: int = 1) -> dict:
    from distributed import Client, LocalCluster

    from soadyn.campaign import load_spec, run

    spec = load_spec(SPEC)
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    try:
        with tempfile.TemporaryDirectory() as warm:          # warm-up: modules loaded on every worker
            run(spec, n=2 * workers, client=client, results=warm, cache=cache, progress=False)
        rss: list[tuple[int, float]] = []
        count = [0]

        def on_row(row: dict) -> None:
            count[0] += 1
            if count[0] % max(1, n // 8) == 0:
                rss.append((count[0], _rss_mb()))

        worker_rss0 = sum(client.run(lambda: psutil.Process().memory_info().rss / 2**20).values())
        load0 = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            # the spec's n is 1000; the first n scenarios are timed
            res = run(spec, n=n, client=client, results=Path(out) / "r", cache=cache, progress=False,
                      on_row=on_row, batch=batch)
            wall = time.perf_counter() - t0
        worker_rss1 = sum(client.run(lambda: psutil.Process().memory_info().rss / 2**20).values())
        load1 = os.getloadavg()[0]
    finally:
        client.close()
        cluster.close()
    return {"workers": workers, "n": n, "wall": wall, "throughput": n / wall, "compute": res.compute,
            "overhead_ms": (wall * workers - res.compute) / n * 1e3, "failed": res.failed,
            "client_rss": rss, "worker_rss": (worker_rss0, worker_rss1), "load": (load0, load1)}


def serial_compute(n: int, cache: str | None) -> float:
    """Mean in-process time of one scenario (no Dask), first n scenarios."""
    from soadyn.campaign import load_spec, run

    with tempfile.TemporaryDirectory() as out:
        res = run(load_spec(SPEC), n=n, workers=0, results=out, cache=cache, progress=False)
        return res.compute / n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200, help="scenarios per timed run (default 200)")
    ap.add_argument("--cache", default=None, help="compiled-module cache directory")
    ap.add_argument("--batch", type=int, default=4, help="scenarios per Dask task (default 4)")
    args = ap.parse_args(argv)
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}; {args.batch} scenario(s) per task")
    ser = serial_compute(min(args.n, 40), args.cache)
    print(f"serial (no Dask): {ser * 1e3:.0f} ms per scenario, {1 / ser:.2f} scenarios/s")
    rows = [bench(args.n, w, args.cache, args.batch) for w in (1, 2)]
    print(f"\n{'workers':>7} {'n':>5} {'wall [s]':>9} {'scn/s':>7} {'ms/scn in task':>14} "
          f"{'overhead/scn [ms]':>17} {'load avg':>11}")
    for r in rows:
        print(f"{r['workers']:7d} {r['n']:5d} {r['wall']:9.1f} {r['throughput']:7.2f} "
              f"{r['compute'] / r['n'] * 1e3:14.0f} {r['overhead_ms']:17.2f} "
              f"{r['load'][0]:5.1f}->{r['load'][1]:4.1f}")
    print(f"speed-up 2 vs 1 worker: {rows[1]['throughput'] / rows[0]['throughput']:.2f}x")
    for r in rows:
        pts = ", ".join(f"{c}: {m:.0f}" for c, m in r["client_rss"])
        print(f"{r['workers']} worker(s): client RSS [MB] after k scenarios: {pts}; workers' RSS "
              f"{r['worker_rss'][0]:.0f} -> {r['worker_rss'][1]:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
