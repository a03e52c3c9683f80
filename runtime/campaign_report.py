"""Plots and tables of a campaign's results (:mod:`soadyn.runtime.campaign`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.names import brief
from soadyn.runtime.campaign_store import load_results, require_stack
from soadyn.runtime.scenario import CampaignSpecError

#----------------------------------------------------------------------------------
#: metrics shown by the report and the summary table
METRICS = [
    ("peak_base_attitude_deg", "peak base attitude error [deg]"),
    ("peak_wheel_momentum", "peak wheel momentum [N m s]"),
    ("contact_impulse", "contact impulse [N s]"),
    ("latch_impulse_angular", "latch angular impulse [N m s]"),
    ("peak_arm_torque", "peak arm torque [N m]"),
]
PARAMS = [
    ("spin_rate_deg_s", "target spin rate [deg/s]"),
    ("contact_time", "contact time [s]"),
    ("payload_scale", "payload scale [-]"),
    ("restitution", "restitution [-]"),
]


def summary_table(df: Any) -> str:
    """Text table per (case, controller): count, failures, median / 95th percentile / max of the main
    metrics."""
    if len(df) == 0:
        return "(no rows)"
    ok = df[df["status"] == "ok"]
    lines = [
        f"{'case':<4} {'ctrl':<5} {'n':>5} {'fail':>4}  " + "  ".join(f"{m[:22]:>22}" for m, _ in METRICS[:3])
    ]
    lines.append(
        f"{'':<4} {'':<5} {'':>5} {'':>4}  " + "  ".join(f"{'median / p95 / max':>22}" for _ in METRICS[:3])
    )
    for (case, ctrl), g in df.groupby(["case", "controller"]):
        gok = ok[(ok["case"] == case) & (ok["controller"] == ctrl)]
        cells = []
        for m, _ in METRICS[:3]:
            x = gok[m].to_numpy(float)
            cells.append(
                f"{np.median(x):6.3g} /{np.percentile(x, 95):6.3g} /{np.max(x):6.3g}"
                if len(x)
                else f"{'-':>22}"
            )
        lines.append(
            f"{case:<4} {ctrl:<5} {len(g):5d} {int((g['status'] != 'ok').sum()):4d}  "
            + "  ".join(f"{c:>22}" for c in cells)
        )
    return "\n".join(lines)


def report(results: str | Path, out: str | Path | None = None) -> list[Path]:
    """Plot the distributions of the metrics against the sampled parameters (matplotlib, Agg) into ``out``
    (default ``<results>/report``); also writes ``summary.txt`` (the :func:`summary_table`).  Returns the
    written files."""
    require_stack(("pandas", "pyarrow"))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = Path(results)
    if not os.path.isdir(results / "summary"):
        raise CampaignSpecError(
            f"{brief(str(results), 300)}: no summary/ folder; give a results directory written by soadyn "
            "campaign")
    df = load_results(results)
    out = Path(out) if out is not None else results / "report"
    out.mkdir(parents=True, exist_ok=True)
    ok = df[df["status"] == "ok"]
    files = []
    colors = {"dmc": "tab:blue", "rnsc": "tab:orange"}
    fig, ax = plt.subplots(len(METRICS), len(PARAMS) + 1, figsize=(4 * (len(PARAMS) + 1), 2.8 * len(METRICS)))
    for i, (m, mlabel) in enumerate(METRICS):
        for c, g in ok.groupby("controller"):
            ax[i, 0].hist(g[m], bins=30, alpha=0.6, color=colors.get(c), label=str(c))
        ax[i, 0].set_xlabel(mlabel)
        ax[i, 0].set_ylabel("scenarios")
        if ax[i, 0].get_legend_handles_labels()[0]:
            ax[i, 0].legend(fontsize=7)
        for j, (p, plabel) in enumerate(PARAMS):
            for c, g in ok.groupby("controller"):
                ax[i, j + 1].scatter(g[p], g[m], s=5, alpha=0.5, color=colors.get(c), label=str(c))
            ax[i, j + 1].set_xlabel(plabel)
            ax[i, j + 1].set_ylabel(mlabel, fontsize=7)
    for a in ax.ravel():
        a.grid(alpha=0.3)
    fig.suptitle(f"{results.name}: {len(ok)} successful of {len(df)} scenarios")
    fig.tight_layout()
    f = out / "distributions.png"
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)
    fig, ax = plt.subplots(1, len(METRICS[:3]), figsize=(13, 3.6))
    for i, (m, mlabel) in enumerate(METRICS[:3]):
        keys = [(cs, c) for cs in sorted(ok["case"].unique()) for c in sorted(ok["controller"].unique())]
        data = [ok[(ok["case"] == cs) & (ok["controller"] == c)][m].to_numpy(float) for cs, c in keys]
        keep = [(k, d) for k, d in zip(keys, data) if len(d)]
        if keep:
            ax[i].boxplot([d for _, d in keep], tick_labels=[f"{cs}/{c}" for (cs, c), _ in keep])
        ax[i].set_ylabel(mlabel)
        ax[i].tick_params(axis="x", labelsize=7, rotation=45)
        ax[i].grid(alpha=0.3)
    fig.suptitle("by pre-impact case (seed 003 Fig. 4.8) and post-impact controller")
    fig.tight_layout()
    f = out / "by_case.png"
    fig.savefig(f, dpi=90)
    plt.close(fig)
    files.append(f)
    f = out / "summary.txt"
    f.write_text(summary_table(df) + "\n")
    files.append(f)
    return files

