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
  cache keyed by the models' fingerprints (``soadyn.compile``'s cache); tasks carry the directory paths and
  the modules' content hashes (:func:`module_digest`), and each worker process verifies and loads a module
  once (cffi objects do not pickle).
* **Results** (directory ``results``, data only: nothing under it is ever imported or executed):
  ``campaign.json`` (the spec, its hash, ``n``, the modules' content hashes; a resumed run must match it),
  ``summary/part-*.parquet`` written while the campaign runs, every ``part_size`` rows or
  ``flush_seconds``, each part carrying the spec hash in its Parquet metadata (:func:`load_results` reads
  them all), and with ``trajectories`` a Zarr group ``trajectories.zarr/s<id>`` per scenario written by the
  worker.  A part is written to a temporary name and renamed, so a row is either recorded or not.  One
  writer at a time: ``run`` holds an exclusive ``flock`` on ``results/.lock`` (released by the system when
  the process ends, however it ends); a second writer is refused.  Files in ``summary/`` that are not
  parts written by soadyn are ignored with a :class:`CampaignWarning`.
* **Resume.**  Scenarios whose id is recorded are skipped: rerunning the same call after an interruption (or
  a crash of the client) computes only the others.  Rows are counted by scenario id (a row recorded twice,
  e.g. a copied part, is reported and counted once); a directory whose ``campaign.json`` or any part
  carries another spec hash is refused, naming both.  A worker that dies is replaced by Dask's nanny and
  its task rescheduled; nothing is duplicated because only the client writes rows.  A scenario that fails
  (diverged simulation, singular matrix) is a row with ``status = "failed"`` and its error.
* **Waits end.**  Connecting to a scheduler (``connect_timeout``; a refused port fails at once, a peer that
  does not speak Dask after the timeout), the first worker (``worker_timeout``) and the next finished task
  (``task_timeout``) are bounded; each gives a one-line :class:`CampaignError` (what, how long, what to
  check) and keeps the recorded rows.
* **Memory** stays flat in ``n``: scenarios are generated lazily, at most ``4 x workers`` tasks are in
  flight, and rows are flushed to disk in parts.
* **Seeds.**  Scenario ``i`` of a spec is drawn from ``numpy.random.default_rng(seed_i)`` with ``seed_i``
  from ``SeedSequence([spec.seed, i])``, recorded in the row; :func:`replay` reruns one scenario in this
  process from the results directory and returns the same row (and its trajectory).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.names import brief, terminal
from soadyn.runtime.campaign_dask import CONNECT_TIMEOUT, TASK_TIMEOUT, WORKER_TIMEOUT, Waits, run_dask
from soadyn.runtime.campaign_report import METRICS, PARAMS, report, summary_table
from soadyn.runtime.campaign_spec import MAX_N
from soadyn.runtime.campaign_store import (
    FORMAT,
    CampaignError,
    CampaignWarning,
    MissingExtraError,
    PartWriter,
    check_entries,
    check_manifest,
    check_parts,
    default_results,
    load_results,
    make_manifest,
    read_manifest,
    read_parts,
    recorded_ids,
    require_stack,
    scenarios_identity,
    setup_from_manifest,
    warn,
    writer_lock,
)
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
    "CampaignResult", "CampaignError", "CampaignWarning", "MissingExtraError",
    "prepare_modules", "module_digest", "default_results", "require_stack", "FORMAT", "METRICS", "PARAMS",
    "CONNECT_TIMEOUT", "WORKER_TIMEOUT", "TASK_TIMEOUT", "identical_rows",
    "CampaignSpecError",
    "TRUTH_FUNCTIONS",
    "CHASER_FUNCTIONS",
    "summary_table",
]

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


def module_digest(path: str | Path) -> str:
    """The content hash of a compiled module directory: sha256 over the sha256 of its generated files (the
    C source, the header, ``__init__.py``), which are reproducible bytes wherever the module is built.  The
    compiled extension is left out (its bytes depend on the build directory); :func:`soadyn.codegen.load`
    checks it against the module's stamp before importing it."""
    from importlib.machinery import EXTENSION_SUFFIXES

    from soadyn.codegen.cache import file_digests

    files = {k: v for k, v in file_digests(Path(path)).items()
             if not any(k.endswith(x) for x in EXTENSION_SUFFIXES)}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def module_digests(paths: dict[str, str]) -> dict[str, str]:
    """``{name: module_digest}`` for the modules of :func:`prepare_modules` (the robot file excluded; a
    directory that is not there has the empty hash, and its tasks fail on the workers)."""
    return {k: module_digest(p) if Path(p).is_dir() else "" for k, p in paths.items() if k != "robot"}


def _load(path: str, kind: str, digest: str | None = None) -> Any:
    """A module (``kind="module"``) or robot file (``"robot"``), loaded once per process.  A module is
    loaded only if its content hash is ``digest`` (the hash recorded when the campaign prepared it)."""
    key = f"{kind}:{path}:{digest}"
    if key not in _LOADED:
        if kind == "robot":
            from soadyn.symbolic.checks import load_robot

            _LOADED[key] = load_robot(path)
        else:
            from soadyn.codegen import load

            if digest and module_digest(path) != digest:
                raise CampaignError(f"{brief(path, 300)}: the module's files do not match the hash "
                                    f"{digest[:16]} recorded when the campaign prepared it (rebuilt or "
                                    "edited since); rerun the campaign to rebuild it")
            _LOADED[key] = load(path)
    return _LOADED[key]


def _task(scenarios: list[Scenario], paths: dict[str, str], zarr_path: str | None,
          digests: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run on a worker: scenarios in order, rows back (trajectories written to Zarr by the worker)."""
    digests = digests or {}
    rows = []
    for sc in scenarios:
        chaser = _load(paths["chaser"], "module", digests.get("chaser"))
        robot = _load(paths["robot"], "robot")
        name = f"truth:{float(sc.payload_scale)!r}"
        truth = _load(paths[name], "module", digests.get(name))
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


# ---- run -----------------------------------------------------------------------------------------
def _check_int(x: Any, what: str, lo: int, hi: int, meaning: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not lo <= int(x) <= hi:
        raise CampaignSpecError(f"{what}: must be an integer from {lo} to {hi} ({meaning}), got {brief(x)}")
    return int(x)


def max_workers() -> int:
    """The most worker processes an embedded cluster may start: 4 per core (at least 8)."""
    return max(8, 4 * (os.cpu_count() or 1))


def check_workers(workers: Any, what: str = "workers") -> int | None:
    """``workers`` of :func:`run` (None: one per core; 0: in this process) or :class:`CampaignSpecError`."""
    if workers is None:
        return None
    return _check_int(workers, what, 0, max_workers(), "0: in this process; k: worker processes of the "
                      "embedded cluster, at most 4 per core")


def _check_timeout(x: Any, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not (math.isfinite(x) and 0 < x <= 1e6):
        raise CampaignSpecError(f"{what}: must be a number of seconds in (0, 1e6], got {brief(x)}")
    return float(x)


def _scenario_source(
    scenarios: Any, n: int | None
) -> tuple[CampaignSpec | None, list[Scenario] | None, int, Callable[[int], Scenario]]:
    if isinstance(scenarios, (str, Path)):
        scenarios = load_spec(scenarios)
    if isinstance(scenarios, CampaignSpec):
        total = scenarios.n if n is None else _check_int(n, "n", 1, MAX_N, "number of scenarios")
        return scenarios, None, total, scenarios.scenario
    if isinstance(scenarios, Sequence) and scenarios and all(isinstance(s, Scenario) for s in scenarios):
        lst = list(scenarios)
        if n is not None and n != len(lst):
            raise CampaignSpecError(f"run: n = {brief(n)} but {len(lst)} scenarios were given; omit n")
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
    connect_timeout: float = CONNECT_TIMEOUT,
    worker_timeout: float = WORKER_TIMEOUT,
    task_timeout: float = TASK_TIMEOUT,
) -> CampaignResult:
    """Run a campaign (see the module docstring); returns a :class:`CampaignResult`.

    ``scenarios``: a :class:`~soadyn.runtime.scenario.CampaignSpec` (sampler; ``n`` defaults to the spec's),
    a spec file path, or a list of :class:`~soadyn.runtime.scenario.Scenario` (unique ids, one Setup).
    ``client``: None (embedded LocalCluster, ``workers`` processes, default every core), a scheduler
    address, or a ``distributed.Client``.  ``workers=0``: in-process, no Dask.  ``results``: directory
    (default ``./<name>.campaign``; a results directory holds one campaign and one writer at a time).
    ``trajectories``: override the spec's ``outputs.trajectories``.
    A script that lets ``run`` start worker processes needs Python's ``if __name__ == "__main__":`` guard
    (the processes are spawned and import the main module).  ``batch``: scenarios per task.
    ``on_row``: called with every recorded row (e.g. to stop early by
    raising; recorded rows are flushed first).  Every wait ends: ``connect_timeout`` for the scheduler,
    ``worker_timeout`` for the first worker, ``task_timeout`` for the next finished task (else
    :class:`CampaignError`, recorded rows kept).
    """
    require_stack()
    spec, lst, total, make = _scenario_source(scenarios, n)
    workers = check_workers(workers)
    batch = _check_int(batch, "batch", 1, 100_000, "scenarios per task")
    part_size = _check_int(part_size, "part_size", 1, 10_000_000, "rows per summary part")
    waits = Waits(_check_timeout(connect_timeout, "connect_timeout"),
                   _check_timeout(worker_timeout, "worker_timeout"),
                   _check_timeout(task_timeout, "task_timeout"))
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
    results = Path(results) if results is not None else default_results(spec)
    with writer_lock(results):
        return _run_locked(spec, lst, total, make, setup, levels, results, client, workers, cache, progress,
                           part_size, flush_seconds, batch, on_row, waits)


def _run_locked(spec: CampaignSpec | None, lst: list[Scenario] | None, total: int,
                make: Callable[[int], Scenario], setup: Setup, levels: list[float], results: Path,
                client: Any, workers: int | None, cache: str | Path | None, progress: bool, part_size: int,
                flush_seconds: float, batch: int, on_row: Callable[[dict[str, Any]], None] | None,
                waits: Waits) -> CampaignResult:
    """:func:`run` holding the results directory's lock: check that the directory holds this campaign
    (campaign.json and the spec hash of every part) before compiling, then compute the missing rows."""
    manifest = make_manifest(spec, lst, total, {})
    what = f"this campaign ({brief(manifest['name'])})"
    manifest_ok = check_manifest(results, manifest, what)
    summary_dir = results / "summary"
    check_entries(results)
    parts = read_parts(summary_dir)
    check_parts(parts, manifest["identity"], results, what, manifest_ok)
    done = recorded_ids(parts, summary_dir)
    paths = prepare_modules(setup, levels, cache)
    digests = module_digests(paths)
    manifest["module_sha256"] = digests
    tmp = results / ".campaign.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, default=str) + "\n")
    os.replace(tmp, results / "campaign.json")
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

    writer = PartWriter(summary_dir, part_size, flush_seconds, manifest["identity"])
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
            raise CampaignError(f"every task fails on the workers ({terminal(errors[0], 300)}); check that "
                                f"the workers run this soadyn and see {brief(paths['chaser'], 300)} and the "
                                "results folder")

    t0 = time.perf_counter()
    n_workers = 0
    try:
        if workers == 0 and client is None:
            for chunk in pending():
                record(_task(chunk, paths, zarr_path, digests))
        else:
            n_workers = run_dask(lost, pending(), paths, digests, zarr_path, client, workers, record, waits,
                                 _task)
    finally:
        writer.flush()
        if bar is not None:
            bar.close()
    return CampaignResult(results, total, stats["computed"], total - todo, stats["failed"],
                          time.perf_counter() - t0, n_workers, stats["compute"], stats["unrecorded"],
                          errors[:5])


# ---- replay --------------------------------------------------------------------------------------
def _scenario_from_manifest(results: Path, sid: int) -> tuple[Scenario, dict[str, Any]]:
    """Scenario ``sid`` of a results directory, rebuilt from ``campaign.json`` (data: the spec is validated
    again and its hash must be the recorded one)."""
    f = results / "campaign.json"
    m = read_manifest(results)
    where = brief(str(f), 300)
    if m is None:
        raise CampaignSpecError(f"{brief(str(results), 300)}: no campaign.json; give a results directory "
                                "written by soadyn campaign")
    if not 0 <= sid < m["n"]:
        raise CampaignSpecError(f"{where}: scenario id {sid} out of range 0..{m['n'] - 1}")
    try:
        if m["kind"] == "spec":
            from soadyn.runtime.scenario import spec_from_dict

            spec = spec_from_dict(m.get("spec"), base_dir=results, source=str(f))
            sc, now = spec.scenario(sid), spec.identity()
        else:
            setup = setup_from_manifest(m.get("setup"))
            if not Path(setup.robot).is_file():
                raise CampaignSpecError(f"{where}: the robot file {brief(setup.robot, 300)} of this campaign "
                                        "is not there any more")
            params = m.get("scenarios")
            if not isinstance(params, list) or not all(isinstance(p, dict) for p in params):
                raise ValueError("'scenarios' is not a list of scenarios")
            lst = [Scenario(setup, **{**p, "spin_axis": tuple(p.get("spin_axis", ()))}) for p in params]
            match = [s for s in lst if s.id == sid]
            if not match:
                raise CampaignSpecError(f"{where}: no scenario with id {sid}")
            sc, now = match[0], scenarios_identity(lst)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        if isinstance(e, CampaignSpecError):
            raise
        raise CampaignSpecError(f"{where}: not a campaign written by soadyn ({terminal(e, 200)})") from None
    if now != m["identity"]:
        raise CampaignSpecError(
            f"{where}: records spec hash {brief(m['identity'])} but its spec (and robot file) now hash to "
            f"{now}; the recorded rows are not this spec's (the spec or the robot file was edited)")
    return sc, m


def replay(
    results: str | Path, scenario_id: int, trajectories: bool = True, cache: str | Path | None = None
) -> tuple[dict[str, Any], dict | None]:
    """Rerun scenario ``scenario_id`` of a results directory in this process (no Dask): returns the summary
    row (equal to the recorded one except timing) and its trajectory arrays (``trajectories=True``).

    The results directory is data: nothing under it is imported.  The modules are compiled from the
    recorded spec (or found in the module ``cache``) and compared with the content hashes recorded at run
    time; a module that differs (another soadyn or compiler) is reported with a :class:`CampaignWarning`
    (the row may then differ in the last bits)."""
    results = Path(results)
    sc, m = _scenario_from_manifest(results, int(scenario_id))
    if trajectories != sc.setup.trajectories:
        sc = Scenario(
            Setup(**{**asdict(sc.setup), "trajectories": trajectories, "wheels": sc.setup.wheels}),
            **sc.params(),
        )
    paths = prepare_modules(sc.setup, [sc.payload_scale], cache)
    name = f"truth:{float(sc.payload_scale)!r}"
    recorded = m.get("module_sha256") if isinstance(m.get("module_sha256"), dict) else {}
    for k in ("chaser", name):
        now = module_digest(paths[k])
        if recorded.get(k) not in (None, now):
            warn(f"replay: module {k} rebuilt from the spec has hash {now[:16]}, the campaign's had "
                  f"{terminal(str(recorded.get(k))[:16])}; the row may differ in the last bits")
    chaser, robot = _load(paths["chaser"], "module"), _load(paths["robot"], "robot")
    truth = _load(paths[name], "module")
    return run_scenario(sc, chaser, truth, robot)



def identical_rows(a: Any, b: Any) -> bool:
    """True when two summary tables hold the same scenarios with bit-identical values (timing excluded)."""
    cols = [c for c in SUMMARY_FIELDS if c not in TIMING_FIELDS]
    a = a.sort_values("id").reset_index(drop=True)[cols]
    b = b.sort_values("id").reset_index(drop=True)[cols]
    return bool(a.equals(b))
