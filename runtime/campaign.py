"""Monte-Carlo capture campaigns on Dask: run, resume, replay, report.

``run(spec | scenarios, n=None, client=None, results=...)`` runs the scenarios of
:mod:`soadyn.runtime.scenario` on a Dask cluster and records one summary row per scenario:

* **Cluster.**  ``client=None``: an embedded ``distributed.LocalCluster`` with one single-threaded worker
  process per core (``workers=`` to choose), started and closed by the call.  ``client="tcp://host:8786"``
  or a ``distributed.Client``: an existing cluster (dask-jobqueue, Kubernetes, SSH, ``dask scheduler`` +
  ``dask worker``); the workers need soadyn installed and must see the module directory and the results
  directory (shared file system).  ``workers=0`` runs in this process without Dask (debugging, replay).
* **Modules.**  The chaser and one truth model per payload level (chaser + target attached, see
  :func:`soadyn.runtime.impact.attach_target`) are compiled once, before any task is submitted, into a
  cache keyed by the models' fingerprints (``soadyn.compile``'s cache); tasks carry directory paths and
  each worker process loads a module once (cffi objects do not pickle).
* **Results** (directory ``results``): ``campaign.json`` (the spec, ``n``, module paths; a resumed run must
  match it), ``summary/part-*.parquet`` written while the campaign runs, every ``part_size`` rows or
  ``flush_seconds`` (``pandas.read_parquet(results / "summary")`` reads them all), and with
  ``trajectories`` a Zarr group ``trajectories.zarr/s<id>`` per scenario written by the worker.
  A part is written to a temporary name and renamed, so a row is either recorded or not.
* **Resume.**  Scenarios whose id is recorded are skipped: rerunning the same call after an interruption (or
  a crash of the client) computes only the others.  A worker that dies is replaced by Dask's nanny and its
  task rescheduled; nothing is duplicated because only the client writes rows.  A scenario that fails
  (diverged simulation, singular matrix) is a row with ``status = "failed"`` and its error.
* **Memory** stays flat in ``n``: scenarios are generated lazily, at most ``4 x workers`` tasks are in
  flight, and rows are flushed to disk in parts.
* **Seeds.**  Scenario ``i`` of a spec is drawn from ``numpy.random.default_rng(seed_i)`` with ``seed_i``
  from ``SeedSequence([spec.seed, i])``, recorded in the row; :func:`replay` reruns one scenario in this
  process from the results directory and returns the same row (and its trajectory).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.runtime.scenario import (
    SUMMARY_FIELDS,
    TIMING_FIELDS,
    CampaignSpec,
    CampaignSpecError,
    Scenario,
    Setup,
    load_spec,
    run_scenario,
)

__all__ = [
    "run",
    "replay",
    "load_results",
    "report",
    "CampaignResult", "CampaignError",
    "prepare_modules",
    "CampaignSpecError",
    "TRUTH_FUNCTIONS",
    "CHASER_FUNCTIONS",
    "summary_table",
]

FORMAT = "soadyn-campaign-1"
#: generated functions each model needs (a subset keeps the one-off compilation short)
CHASER_FUNCTIONS = [
    "forward_dynamics",
    "mass_matrix",
    "bias_forces",
    "momentum",
    "kinetic_energy",
    "center_of_mass",
    "jacobian",
    "mass_matrix_inverse",
]
TRUTH_FUNCTIONS = ["forward_dynamics", "momentum", "kinetic_energy", "center_of_mass"]
MAX_TRUTH_MODELS = 16


class CampaignError(RuntimeError):
    """The campaign cannot go on (e.g. no worker can run a task); recorded rows are kept."""


@dataclass
class CampaignResult:
    """What :func:`run` did: ``results`` directory, scenarios ``total``, ``computed`` now, ``skipped``
    (recorded before), ``failed`` (among those computed now), ``wall`` seconds, ``workers``, the summed
    in-task ``compute`` seconds, ``unrecorded`` scenarios whose task failed for good on the workers (not
    recorded: a rerun retries them) and the first ``worker_errors``."""

    results: Path
    total: int
    computed: int
    skipped: int
    failed: int
    wall: float
    workers: int
    compute: float
    unrecorded: int = 0
    worker_errors: list[str] = field(default_factory=list)

    @property
    def throughput(self) -> float:
        """Scenarios per second of wall time (computed ones)."""
        return self.computed / self.wall if self.wall > 0 else float("nan")

    def summary(self) -> Any:
        """The recorded rows as a pandas DataFrame."""
        return load_results(self.results)


# ---- modules -------------------------------------------------------------------------------------
def _default_cache() -> Path:
    return Path(os.environ.get("SOADYN_CACHE", Path.home() / ".cache" / "soadyn" / "campaign"))


def prepare_modules(
    setup: Setup, payload_levels: Iterable[float], cache: str | Path | None = None
) -> dict[str, str]:
    """Compile (or find in ``cache``) the chaser and one truth model per payload level; returns
    ``{"chaser": dir, "robot": robot file, "truth:<scale>": dir, ...}`` (paths as strings)."""
    out = Path(cache) if cache is not None else _default_cache()
    levels = sorted(set(float(x) for x in payload_levels))
    model_fields = (setup.robot, setup.hand, setup.target_mass, setup.target_inertia, setup.grasp_xyz,
                    setup.grasp_rpy)
    key = json.dumps([model_fields, levels, str(out.resolve()), os.stat(setup.robot).st_mtime_ns])
    hit = _PREPARED.get(key)
    if hit is not None and all(Path(p).exists() for p in hit.values()):
        return dict(hit)
    from soadyn.codegen import compile as compile_robot
    from soadyn.runtime.impact import attach_target
    from soadyn.symbolic.checks import load_robot

    robot = load_robot(setup.robot)
    chaser = compile_robot(robot, out_dir=out, functions=CHASER_FUNCTIONS, progress=False)
    paths = {"chaser": str(Path(chaser.__file__).parent), "robot": setup.robot}
    inertia = np.array(setup.target_inertia).reshape(3, 3)
    for s in levels:
        model = attach_target(
            robot,
            setup.hand,
            setup.target_mass * s,
            inertia * s,
            setup.grasp_xyz,
            setup.grasp_rpy,
            name="tmp",
        )
        model = model.replace(name=f"{robot.name}_capture_{model.fingerprint()[:12]}")
        mod = compile_robot(model, out_dir=out, functions=TRUTH_FUNCTIONS, progress=False)
        paths[f"truth:{s!r}"] = str(Path(mod.__file__).parent)
    _PREPARED[key] = dict(paths)
    return paths


#: prepare_modules results of this process (the compile cache check hashes the generator sources)
_PREPARED: dict[str, dict[str, str]] = {}


_LOADED: dict[str, Any] = {}


def _load(path: str, kind: str) -> Any:
    """A module (``kind="module"``) or robot file (``"robot"``), loaded once per process."""
    key = f"{kind}:{path}"
    if key not in _LOADED:
        if kind == "robot":
            from soadyn.symbolic.checks import load_robot

            _LOADED[key] = load_robot(path)
        else:
            from soadyn.codegen import load

            _LOADED[key] = load(path)
    return _LOADED[key]


def _task(scenarios: list[Scenario], paths: dict[str, str], zarr_path: str | None) -> list[dict[str, Any]]:
    """Run on a worker: scenarios in order, rows back (trajectories written to Zarr by the worker)."""
    rows = []
    for sc in scenarios:
        chaser = _load(paths["chaser"], "module")
        robot = _load(paths["robot"], "robot")
        truth = _load(paths[f"truth:{float(sc.payload_scale)!r}"], "module")
        row, traj = run_scenario(sc, chaser, truth, robot)
        if traj is not None and zarr_path is not None:
            _write_trajectory(zarr_path, sc.id, traj)
        rows.append(row)
    return rows


def _write_trajectory(zarr_path: str, sid: int, traj: dict[str, np.ndarray]) -> None:
    import zarr

    g = zarr.open_group(zarr_path, mode="a").require_group(f"s{sid:07d}")
    for k, a in traj.items():
        g.create_array(k, data=np.asarray(a), chunks=a.shape if a.ndim else None, overwrite=True)


# ---- storage -------------------------------------------------------------------------------------
def _schema() -> Any:
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.schema([(k, types[t]) for k, t in SUMMARY_FIELDS.items()])


class _Writer:
    """Buffers rows and writes them as Parquet parts (temporary name, then an atomic rename)."""

    def __init__(self, directory: Path, part_size: int, flush_seconds: float) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.part_size, self.flush_seconds = part_size, flush_seconds
        self.rows: list[dict[str, Any]] = []
        self.last = time.monotonic()
        self.count = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= self.part_size or time.monotonic() - self.last >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        self.last = time.monotonic()
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(self.rows, schema=_schema())
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self.count:05d}.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        self.count += 1
        self.rows = []


def _recorded_ids(summary_dir: Path) -> set[int]:
    import pyarrow.parquet as pq

    ids: set[int] = set()
    for p in sorted(summary_dir.glob("part-*.parquet")):
        ids.update(int(x) for x in pq.read_table(p, columns=["id"]).column("id").to_pylist())
    return ids


def load_results(results: str | Path) -> Any:
    """All recorded rows of a results directory as a pandas DataFrame sorted by ``id`` (one row per
    scenario)."""
    import pandas as pd

    d = Path(results) / "summary"
    if not any(d.glob("part-*.parquet")):
        return pd.DataFrame({k: pd.Series(dtype="object") for k in SUMMARY_FIELDS})
    df = pd.read_parquet(d)
    return df.sort_values("id").reset_index(drop=True)


# ---- manifest ------------------------------------------------------------------------------------
def _manifest(
    spec: CampaignSpec | None, scenarios: list[Scenario] | None, n: int, paths: dict[str, str]
) -> dict[str, Any]:
    m: dict[str, Any] = {"format": FORMAT, "n": n, "modules": paths}
    if spec is not None:
        m.update(
            kind="spec", name=spec.name, spec=spec.raw, spec_source=spec.source, identity=spec.identity()
        )
    else:
        assert scenarios is not None
        m.update(
            kind="scenarios",
            name="scenarios",
            setup=asdict(scenarios[0].setup),
            scenarios=[s.params() for s in scenarios],
            identity=_scenarios_identity(scenarios),
        )
    return m


def _scenarios_identity(scenarios: list[Scenario]) -> str:
    import hashlib

    blob = json.dumps([asdict(s) for s in scenarios], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _check_manifest(results: Path, new: dict[str, Any]) -> None:
    f = results / "campaign.json"
    if not f.is_file():
        return
    old = json.loads(f.read_text())
    if old.get("format") != FORMAT or old.get("identity") != new["identity"] or old.get("n") != new["n"]:
        raise CampaignSpecError(
            f"{results}: holds a different campaign (campaign.json: identity "
            f"{old.get('identity')}, n {old.get('n')}; this one: {new['identity']}, n "
            f"{new['n']}); choose another results directory or remove it"
        )


# ---- run -----------------------------------------------------------------------------------------
def _scenario_source(
    scenarios: Any, n: int | None
) -> tuple[CampaignSpec | None, list[Scenario] | None, int, Callable[[int], Scenario]]:
    if isinstance(scenarios, (str, Path)):
        scenarios = load_spec(scenarios)
    if isinstance(scenarios, CampaignSpec):
        total = scenarios.n if n is None else int(n)
        if total < 1:
            raise CampaignSpecError(f"{scenarios.source}: n must be >= 1, got {total}")
        return scenarios, None, total, scenarios.scenario
    if isinstance(scenarios, Sequence) and scenarios and all(isinstance(s, Scenario) for s in scenarios):
        lst = list(scenarios)
        if n is not None and int(n) != len(lst):
            raise CampaignSpecError(f"run: n = {n} but {len(lst)} scenarios were given; omit n")
        ids = [s.id for s in lst]
        if len(set(ids)) != len(ids):
            raise CampaignSpecError("run: scenario ids must be unique")
        if any(s.setup != lst[0].setup for s in lst):
            raise CampaignSpecError("run: all scenarios of a campaign must share one Setup")
        by_index = dict(enumerate(lst))
        return None, lst, len(lst), by_index.__getitem__
    raise CampaignSpecError("run: give a CampaignSpec, a spec file path or a non-empty list of Scenario")


def run(
    scenarios: CampaignSpec | str | Path | Sequence[Scenario],
    n: int | None = None,
    client: Any = None,
    results: str | Path | None = None,
    *,
    workers: int | None = None,
    cache: str | Path | None = None,
    trajectories: bool | None = None,
    progress: bool = True,
    part_size: int = 64,
    flush_seconds: float = 5.0,
    batch: int = 4,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> CampaignResult:
    """Run a campaign (see the module docstring); returns a :class:`CampaignResult`.

    ``scenarios``: a :class:`~soadyn.runtime.scenario.CampaignSpec` (sampler; ``n`` defaults to the spec's),
    a spec file path, or a list of :class:`~soadyn.runtime.scenario.Scenario` (unique ids, one Setup).
    ``client``: None (embedded LocalCluster, ``workers`` processes, default every core), a scheduler
    address, or a ``distributed.Client``.  ``workers=0``: in-process, no Dask.  ``results``: directory
    (default ``./<name>.campaign``).  ``trajectories``: override the spec's ``outputs.trajectories``.
    A script that lets ``run`` start worker processes needs Python's ``if __name__ == "__main__":`` guard
    (the processes are spawned and import the main module).  ``batch``: scenarios per task.
    ``on_row``: called with every recorded row (e.g. to stop early by
    raising; recorded rows are flushed first).
    """
    spec, lst, total, make = _scenario_source(scenarios, n)
    setup = spec.setup if spec is not None else lst[0].setup  # type: ignore[index]
    if trajectories is not None and trajectories != setup.trajectories:
        setup = Setup(**{**asdict(setup), "trajectories": bool(trajectories), "wheels": setup.wheels})
        if spec is not None:
            spec.setup = setup
            spec.raw = {**spec.raw, "outputs": {"trajectories": bool(trajectories)}}
        else:
            lst = [Scenario(setup, **s.params()) for s in lst]  # type: ignore[union-attr]
            make = dict(enumerate(lst)).__getitem__
    if spec is not None:
        levels = spec.payload_levels()
    else:
        levels = sorted({s.payload_scale for s in lst})  # type: ignore[union-attr]
    if len(levels) > MAX_TRUTH_MODELS:
        raise CampaignSpecError(
            f"{getattr(spec, 'source', 'scenarios')}: field 'sample.payload_scale': "
            f"{len(levels)} payload levels; each is one compiled model, use at most "
            f"{MAX_TRUTH_MODELS} ({{choice: [...]}})"
        )
    results = Path(results if results is not None else f"{spec.name if spec else 'scenarios'}.campaign")
    paths = prepare_modules(setup, levels, cache)
    manifest = _manifest(spec, lst, total, paths)
    _check_manifest(results, manifest)
    results.mkdir(parents=True, exist_ok=True)
    (results / "campaign.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    summary_dir = results / "summary"
    done = _recorded_ids(summary_dir) if summary_dir.is_dir() else set()
    zarr_path = None
    if setup.trajectories:
        import zarr

        zarr_path = str((results / "trajectories.zarr").resolve())
        zarr.open_group(zarr_path, mode="a")

    def pending() -> Iterator[list[Scenario]]:
        chunk: list[Scenario] = []
        for i in range(total):
            sc = make(i)
            if sc.id in done:
                continue
            chunk.append(sc)
            if len(chunk) >= batch:
                yield chunk
                chunk = []
        if chunk:
            yield chunk

    writer = _Writer(summary_dir, part_size, flush_seconds)
    todo = (
        sum(1 for i in range(total) if make(i).id not in done)
        if lst is not None
        else total - len([i for i in done if 0 <= i < total])
    )
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=total - todo, desc="campaign", unit="scn", smoothing=0.05)
    stats = {"computed": 0, "failed": 0, "compute": 0.0, "unrecorded": 0}

    def record(rows: list[dict[str, Any]]) -> None:
        for row in rows:
            writer.add(row)
            stats["computed"] += 1
            stats["failed"] += row["status"] != "ok"
            stats["compute"] += float(row["compute_s"])
            if bar is not None:
                bar.update(1)
            if on_row is not None:
                on_row(row)

    errors: list[str] = []

    def lost(chunk: list[Scenario], e: BaseException) -> None:
        stats["unrecorded"] += len(chunk)
        errors.append(f"{type(e).__name__}: {e}")
        if stats["computed"] == 0 and len(errors) >= 3:
            raise CampaignError(f"every task fails on the workers ({errors[0][:300]}); check that the "
                                f"workers run this soadyn and see {paths['chaser']} and the results folder")

    t0 = time.perf_counter()
    n_workers = 0
    try:
        if workers == 0 and client is None:
            for chunk in pending():
                record(_task(chunk, paths, zarr_path))
        else:
            n_workers = _run_dask(lost, pending(), paths, zarr_path, client, workers, record)
    finally:
        writer.flush()
        if bar is not None:
            bar.close()
    return CampaignResult(results, total, stats["computed"], total - todo, stats["failed"],
                          time.perf_counter() - t0, n_workers, stats["compute"], stats["unrecorded"],
                          errors[:5])


def _run_dask(
    lost: Callable[[list[Scenario], BaseException], None],
    chunks: Iterator[list[Scenario]],
    paths: dict[str, str],
    zarr_path: str | None,
    client: Any,
    workers: int | None,
    record: Callable[[list[dict[str, Any]]], None],
) -> int:
    from distributed import Client, LocalCluster, as_completed

    cluster = own = None
    if client is None:
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0")
        client = own = Client(cluster)
    elif isinstance(client, str):
        client = own = Client(client)
    try:
        n_workers = max(1, sum(client.nthreads().values()))
        window = 4 * n_workers
        # results gathered in the background; a task that fails for good (its worker killed more often than
        # distributed.scheduler.allowed-failures, a worker that cannot load the modules) is not recorded, so a
        # rerun retries it; scenario failures (divergence...) are rows, not task errors
        pending = as_completed(with_results=True, raise_errors=False)
        inflight: dict[str, list[Scenario]] = {}
        it = iter(chunks)

        def submit() -> bool:
            chunk = next(it, None)
            if chunk is None:
                return False
            key = f"soadyn-scenario-{chunk[0].id}-{time.time_ns()}"
            inflight[key] = chunk
            pending.add(client.submit(_task, chunk, paths, zarr_path, pure=False, key=key))
            return True

        for _ in range(window):
            if not submit():
                break
        for fut, rows in pending:
            chunk = inflight.pop(fut.key)
            if fut.status != "finished":             # rows is then the exception's (type, value, traceback)
                err = rows[1] if isinstance(rows, tuple) and len(rows) == 3 else RuntimeError(str(rows))
                fut.release()
                lost(chunk, err)
            else:
                fut.release()
                record(rows)
            submit()
        return n_workers
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


# ---- replay --------------------------------------------------------------------------------------
def _scenario_from_manifest(results: Path, sid: int) -> tuple[Scenario, dict[str, Any]]:
    f = results / "campaign.json"
    if not f.is_file():
        raise CampaignSpecError(
            f"{results}: no campaign.json; give a results directory written by soadyn campaign"
        )
    m = json.loads(f.read_text())
    if m.get("kind") == "spec":
        from soadyn.runtime.scenario import spec_from_dict

        spec = spec_from_dict(m["spec"], base_dir=Path(m["spec"]["robot"]).parent, source=str(f))
        if not 0 <= sid < m["n"]:
            raise CampaignSpecError(f"{f}: scenario id {sid} out of range 0..{m['n'] - 1}")
        sc = spec.scenario(sid)
    else:
        st = m["setup"]
        setup = Setup(
            **{
                **st,
                "wheels": tuple(st["wheels"]),
                **{k: tuple(st[k]) for k in ("q0", "target_inertia", "grasp_xyz", "grasp_rpy", "normal")},
            }
        )
        match = [p for p in m["scenarios"] if p["id"] == sid]
        if not match:
            raise CampaignSpecError(f"{f}: no scenario with id {sid}")
        p = dict(match[0])
        p["spin_axis"] = tuple(p["spin_axis"])
        sc = Scenario(setup, **p)
    return sc, m


def replay(
    results: str | Path, scenario_id: int, trajectories: bool = True, cache: str | Path | None = None
) -> tuple[dict[str, Any], dict | None]:
    """Rerun scenario ``scenario_id`` of a results directory in this process (no Dask): returns the summary
    row (equal to the recorded one except timing) and its trajectory arrays (``trajectories=True``)."""
    results = Path(results)
    sc, m = _scenario_from_manifest(results, int(scenario_id))
    if trajectories != sc.setup.trajectories:
        sc = Scenario(
            Setup(**{**asdict(sc.setup), "trajectories": trajectories, "wheels": sc.setup.wheels}),
            **sc.params(),
        )
    paths = m["modules"]
    if not all(Path(p).exists() for p in paths.values()):
        paths = prepare_modules(sc.setup, [sc.payload_scale], cache)
    chaser, robot = _load(paths["chaser"], "module"), _load(paths["robot"], "robot")
    truth = _load(paths[f"truth:{float(sc.payload_scale)!r}"], "module")
    return run_scenario(sc, chaser, truth, robot)


# ---- report --------------------------------------------------------------------------------------
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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = Path(results)
    if not (results / "summary").is_dir():
        raise CampaignSpecError(
            f"{results}: no summary/ folder; give a results directory written by soadyn campaign"
        )
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


def identical_rows(a: Any, b: Any) -> bool:
    """True when two summary tables hold the same scenarios with bit-identical values (timing excluded)."""
    cols = [c for c in SUMMARY_FIELDS if c not in TIMING_FIELDS]
    a = a.sort_values("id").reset_index(drop=True)[cols]
    b = b.sort_values("id").reset_index(drop=True)[cols]
    return bool(a.equals(b))
