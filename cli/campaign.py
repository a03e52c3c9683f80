"""``soadyn campaign``: run a capture campaign from a spec file, report on its results, replay one scenario.

    soadyn campaign SPEC.yaml [-o RESULTS] [-n N] [--scheduler ADDRESS | --workers K] [--trajectories]
    soadyn campaign report RESULTS [--out DIR]
    soadyn campaign replay RESULTS ID [--out FILE.npz]

See :mod:`soadyn.runtime.campaign`.  A bad spec or argument gives one error line (file, field, fix) and
exit code 2 before any module is compiled or any worker started; a campaign that cannot go on (a wait that
timed out, a results directory in use, failing workers) one line and exit code 1.  Every line is
terminal-safe and bounded (:func:`soadyn.model.names.terminal`).  Without the campaign extra (dask,
distributed, pandas, pyarrow, zarr) one line says what to install.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

__all__ = ["add_campaign", "cmd_campaign"]

USAGE = ("soadyn campaign SPEC.yaml [options] | soadyn campaign report RESULTS [--out DIR] | "
         "soadyn campaign replay RESULTS ID [--out FILE.npz]")


def add_campaign(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``soadyn campaign`` (sets ``func=cmd_campaign``)."""
    p = sub.add_parser(
        "campaign", help="run a Monte-Carlo capture campaign on Dask; report; replay",
        usage=USAGE,
        description="Run the scenarios of a campaign spec (YAML) on Dask: an embedded LocalCluster using "
                    "every core, or an existing cluster with --scheduler.  Results (Parquet summary parts, "
                    "optional Zarr trajectories) are written as scenarios complete; rerunning resumes.  "
                    "'report RESULTS' plots the distributions; 'replay RESULTS ID' reruns one scenario "
                    "here.  Needs the campaign extra: pip install 'soadyn[campaign]'.")
    p.add_argument("target", nargs="+", metavar="SPEC | report RESULTS | replay RESULTS ID")
    p.add_argument("-o", "--results", default=None, help="results directory (default: <name>.campaign in "
                   "the working directory)")
    p.add_argument("-n", type=int, default=None, help="number of scenarios (default: the spec's n)")
    p.add_argument("--scheduler", default=None, help="address of an existing Dask scheduler "
                   "(e.g. tcp://10.0.0.5:8786); default: an embedded LocalCluster")
    p.add_argument("--workers", type=int, default=None,
                   help="worker processes of the embedded cluster (default: every core; 0: in-process)")
    p.add_argument("--batch", type=int, default=4, help="scenarios per Dask task (default 4)")
    p.add_argument("--trajectories", action="store_true", help="also store full trajectories (Zarr)")
    p.add_argument("--cache", default=None, help="directory for compiled modules "
                   "(default: $SOADYN_CACHE or ~/.cache/soadyn/campaign)")
    p.add_argument("--connect-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the scheduler to answer (default 30)")
    p.add_argument("--worker-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the first worker (default 120)")
    p.add_argument("--task-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the next task to finish (default 900)")
    p.add_argument("--out", default=None, help="report: folder for the plots; replay: .npz for the "
                   "trajectory")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_campaign)
    return p


def _say(kind: str, message: object) -> None:
    """One ``error:`` / ``warning:`` line on stderr, terminal-safe and bounded as every error line of the
    CLI (:func:`soadyn.model.names.terminal`, the limit of :func:`soadyn.cli.main._error`)."""
    from soadyn.model.names import terminal

    print(f"{kind}: " + terminal(str(message).strip(), limit=2000), file=sys.stderr)


def cmd_campaign(args: argparse.Namespace) -> int:
    """Dispatch ``campaign SPEC`` / ``campaign report`` / ``campaign replay``; returns the exit code."""
    from soadyn.codegen.build import CompileError
    from soadyn.runtime.campaign import CampaignError, CampaignWarning, MissingExtraError, require_stack
    from soadyn.runtime.scenario import CampaignSpecError

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CampaignWarning)
        try:
            require_stack()
            if args.target[0] == "report":
                code = _report(args)
            elif args.target[0] == "replay":
                code = _replay(args)
            elif len(args.target) != 1:
                raise CampaignSpecError(f"campaign: expected one spec file, got {len(args.target)} "
                                        f"arguments; usage: {USAGE}")
            else:
                code = _run(args)
        except (CampaignSpecError, MissingExtraError) as e:
            code = 2
            _say("error", e)
        except (CompileError, CampaignError) as e:
            code = 1
            _say("error", e)
        finally:
            for w in caught:
                if issubclass(w.category, CampaignWarning):
                    _say("warning", w.message)
                else:
                    warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return code


def _run(args: argparse.Namespace) -> int:
    from soadyn.runtime.campaign import (
        CONNECT_TIMEOUT,
        TASK_TIMEOUT,
        WORKER_TIMEOUT,
        check_workers,
        load_results,
        run,
        summary_table,
    )
    from soadyn.runtime.scenario import CampaignSpecError, load_spec

    if args.scheduler is not None and args.workers is not None:
        raise CampaignSpecError("--scheduler and --workers exclude each other: the cluster's workers are "
                                "its own")
    check_workers(args.workers, "--workers")
    if args.n is not None and args.n < 1:
        raise CampaignSpecError(f"-n: the number of scenarios must be >= 1, got {args.n}")
    if args.batch < 1:
        raise CampaignSpecError(f"--batch must be >= 1, got {args.batch}")
    spec = load_spec(args.target[0])
    res = run(spec, n=args.n, client=args.scheduler, results=args.results, workers=args.workers,
              cache=args.cache, trajectories=True if args.trajectories else None,
              progress=not args.no_progress, batch=args.batch,
              connect_timeout=CONNECT_TIMEOUT if args.connect_timeout is None else args.connect_timeout,
              worker_timeout=WORKER_TIMEOUT if args.worker_timeout is None else args.worker_timeout,
              task_timeout=TASK_TIMEOUT if args.task_timeout is None else args.task_timeout)
    from soadyn.model.names import terminal

    print(terminal(f"{spec.name}: {res.computed} scenarios computed, {res.skipped} already recorded, "
                   f"{res.failed} failed; {res.wall:.1f} s wall, {res.throughput:.2f} scenarios/s on "
                   f"{res.workers or 'no'} worker(s)"))
    if res.unrecorded:
        _say("warning", f"{res.unrecorded} scenarios not recorded (task errors on the workers, e.g. "
                        f"{res.worker_errors[0][:200]}); rerun the same command to retry them")
    print(terminal(f"results: {res.results}/summary (pandas.read_parquet)", 2000))
    print(summary_table(load_results(res.results)))
    return 0


def _report(args: argparse.Namespace) -> int:
    from soadyn.model.names import terminal
    from soadyn.runtime.campaign import load_results, report, summary_table
    from soadyn.runtime.scenario import CampaignSpecError

    if len(args.target) != 2:
        raise CampaignSpecError(f"campaign report: expected one results directory; usage: {USAGE}")
    files = report(args.target[1], args.out)
    print(summary_table(load_results(args.target[1])))
    for f in files:
        print(terminal(f"written: {f}", 2000))
    return 0


def _replay(args: argparse.Namespace) -> int:
    import numpy as np

    from soadyn.model.names import terminal
    from soadyn.runtime.campaign import replay
    from soadyn.runtime.scenario import CampaignSpecError

    if len(args.target) != 3 or not (args.target[2].isascii() and args.target[2].isdigit()) \
            or len(args.target[2]) > 18:
        raise CampaignSpecError(f"campaign replay: expected a results directory and a scenario id; "
                                f"usage: {USAGE}")
    row, traj = replay(args.target[1], int(args.target[2]), trajectories=args.out is not None,
                       cache=args.cache)
    for k, v in row.items():
        print(terminal(f"{k:>24}: {v}", 2000))
    if args.out and traj is not None:
        path = Path(args.out)
        np.savez(path, **traj)
        print(terminal(f"trajectory written to {path}", 2000))
    return 0 if row["status"] == "ok" else 1
