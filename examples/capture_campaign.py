"""Capture campaign (issue 14): the thesis robot (seed 003, App. F) captures a tumbling target, 1,000 times.

Sampled per scenario (examples/campaigns/capture.yaml): target spin rate and axis, contact time, payload mass
(three levels), restitution and closing speed of the contact, the pre-impact momentum distribution (cases A-D
of seed 003 Fig. 4.8: non-bias, wheel bias, full arm bias from stored wheel momentum, bias momentum approach
from rest) and the post-impact controller (DMC eq. 5.6 / RNSC eq. 5.5).  Runs on an embedded Dask
LocalCluster (every core) or on an existing cluster (--scheduler), prints the throughput and a summary table,
and writes Parquet parts to the results directory (rerun the same command to resume).

Run:  python examples/capture_campaign.py [--n 1000] [--workers K | --scheduler tcp://HOST:8786]
          [--results capture_campaign.campaign] [--report]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(HERE / "campaigns" / "capture.yaml"), help="campaign spec (YAML)")
    ap.add_argument("--n", type=int, default=None, help="number of scenarios (default: the spec's, 1000)")
    ap.add_argument("--workers", type=int, default=None, help="worker processes (default: every core)")
    ap.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler")
    ap.add_argument("--results", default="capture_campaign.campaign", help="results directory")
    ap.add_argument("--cache", default=None, help="directory of compiled modules")
    ap.add_argument("--report", action="store_true", help="also write the report plots")
    args = ap.parse_args(argv)

    from soadyn.campaign import CampaignSpecError, load_results, load_spec, report, run, summary_table

    try:
        spec = load_spec(args.spec)
        res = run(spec, n=args.n, client=args.scheduler, results=args.results, workers=args.workers,
                  cache=args.cache)
    except CampaignSpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    df = load_results(res.results)
    print(f"\n{spec.name}: {res.total} scenarios, {res.computed} computed now ({res.skipped} recorded "
          f"before), {res.failed} failed")
    if res.computed:
        print(f"throughput: {res.throughput:.2f} scenarios/s on {res.workers or 1} worker process(es); "
              f"{res.wall:.1f} s wall (cluster start included), {res.compute / res.computed * 1e3:.0f} ms "
              "of simulation per scenario")
    ok = df[df["status"] == "ok"]
    print(f"impact checks over {len(ok)} scenarios: pair momentum error max "
          f"{ok['impact_momentum_error'].max():.1e} (relative), attached-model momentum mismatch max "
          f"{ok['capture_model_error'].max():.1e}")
    print("\n" + summary_table(df))
    if args.report:
        for f in report(res.results):
            print(f"written: {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
