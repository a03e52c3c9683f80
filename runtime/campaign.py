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

import contextlib
import hashlib
import json
import math
import os
import re
import socket
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from soadyn.model.names import brief, terminal
from soadyn.runtime.campaign_spec import MAX_N, NAME
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
    "prepare_modules", "module_digest", "default_results", "require_stack",
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
#: the third-party stack of campaigns: the ``campaign`` extra (``pip install 'soadyn[campaign]'``)
STACK = ("dask", "distributed", "pandas", "pyarrow", "zarr")
#: default waits [s]: connecting to a scheduler, the first worker, the next finished task
CONNECT_TIMEOUT = 30.0
WORKER_TIMEOUT = 120.0
TASK_TIMEOUT = 900.0
#: the lock file of a results directory (one writer at a time)
LOCK = ".lock"
#: name of a summary part: part-<time ns>-<pid>-<count>.parquet
PART = re.compile(r"^part-[0-9]{20}-[0-9]{1,10}-[0-9]{5}\.parquet$")
#: Parquet key-value metadata holding the spec hash of the rows of a part
SPEC_KEY = b"soadyn.spec"
MAX_MANIFEST_BYTES = 256 * 1024 * 1024


class CampaignError(RuntimeError):
    """The campaign cannot go on (e.g. no worker can run a task, a wait timed out, the results directory
    is in use); recorded rows are kept.  The message is one line: what, for how long, what to check."""


class CampaignWarning(UserWarning):
    """Something in a results directory was skipped (a stray file, a duplicated row): the run goes on."""


class MissingExtraError(ImportError):
    """The campaign stack is not installed; the message says which extra to install."""


def require_stack(names: Sequence[str] = STACK) -> None:
    """Raise :class:`MissingExtraError` (one line) when a package of the campaign stack cannot be
    imported."""
    missing = []
    for m in names:
        try:
            import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        raise MissingExtraError(f"soadyn campaign needs the campaign extra ({', '.join(missing)} not "
                                "installed); install it with: pip install 'soadyn[campaign]'")


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


# ---- storage -------------------------------------------------------------------------------------
def _schema() -> Any:
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.schema([(k, types[t]) for k, t in SUMMARY_FIELDS.items()])


class _Writer:
    """Buffers rows and writes them as Parquet parts (temporary name, then an atomic rename); every part
    carries the spec hash ``identity`` in its metadata (:data:`SPEC_KEY`)."""

    def __init__(self, directory: Path, part_size: int, flush_seconds: float, identity: str) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.part_size, self.flush_seconds = part_size, flush_seconds
        self.identity = identity
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

        schema = _schema().with_metadata({SPEC_KEY: self.identity.encode()})
        table = pa.Table.from_pylist(self.rows, schema=schema)
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self.count:05d}.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        self.count += 1
        self.rows = []


@dataclass
class _Part:
    path: Path
    identity: str | None        # the spec hash in its metadata (None: a part of an older soadyn)
    ids: list[int]


def _warn(message: str) -> None:
    warnings.warn(message, CampaignWarning, stacklevel=3)


def _parts(summary_dir: Path) -> list[_Part]:
    """The summary parts of a results directory, in name order.  A file that is not a part written by
    soadyn (another name, or not a readable Parquet file with the summary columns) is ignored with a
    :class:`CampaignWarning`; the temporary files of an interrupted write (``.part-*.tmp``) silently."""
    import pyarrow.parquet as pq

    if not summary_dir.is_dir():
        return []
    parts: list[_Part] = []
    ignored: list[str] = []
    for p in sorted(summary_dir.iterdir()):
        if p.name.startswith(".part-") and p.name.endswith(".tmp"):
            continue
        if not (PART.match(p.name) and p.is_file()):
            ignored.append(p.name)
            continue
        try:
            meta = pq.read_schema(p).metadata or {}
            ids = pq.read_table(p, columns=["id"]).column("id").to_pylist()
            if set(pq.read_schema(p).names) != set(SUMMARY_FIELDS):
                raise ValueError("other columns")
        except Exception:  # noqa: BLE001 - any unreadable file is a stray file
            ignored.append(p.name)
            continue
        ident = meta.get(SPEC_KEY)
        parts.append(_Part(p, ident.decode(errors="replace") if ident else None, [int(i) for i in ids]))
    if ignored:
        _warn(f"{brief(str(summary_dir), 300)}: ignored {len(ignored)} file(s) that are not summary parts "
              f"written by soadyn campaign: {brief(ignored, 40)}; move them out of summary/")
    return parts


#: what a results directory holds besides its summary parts
KNOWN_ENTRIES = frozenset({"campaign.json", ".campaign.json.tmp", "summary", "trajectories.zarr", "report",
                           LOCK})


def _check_entries(results: Path) -> None:
    """A :class:`CampaignWarning` for entries of a results directory that soadyn did not write (they are
    ignored: nothing in a results directory is imported or executed)."""
    try:
        stray = sorted(p.name for p in results.iterdir() if p.name not in KNOWN_ENTRIES)
    except OSError:
        return
    if stray:
        _warn(f"{brief(str(results), 300)}: ignored {len(stray)} entr{'y' if len(stray) == 1 else 'ies'} not "
              f"written by soadyn campaign: {brief(stray, 40)}")


def _recorded(parts: list[_Part], summary_dir: Path) -> set[int]:
    """The recorded scenario ids; an id recorded more than once (a copied part, two writers) is reported
    with a :class:`CampaignWarning` and counted once."""
    seen: dict[int, str] = {}
    dup: list[int] = []
    where: set[str] = set()
    for part in parts:
        for i in part.ids:
            if i in seen:
                dup.append(i)
                where.update((seen[i], part.path.name))
            else:
                seen[i] = part.path.name
    if dup:
        _warn(f"{brief(str(summary_dir), 300)}: {len(dup)} duplicate row(s) (scenario ids "
              f"{brief(sorted(set(dup)))}) in parts {brief(sorted(where), 40)}; each id is counted once "
              "(the row of the first part)")
    return set(seen)


def _check_parts(parts: list[_Part], identity: str, results: Path, what: str, manifest_ok: bool) -> None:
    """Refuse parts written for another spec (their spec hash differs from ``identity``).  Parts without a
    hash (an older soadyn) are accepted only when ``campaign.json`` matches (``manifest_ok``)."""
    for part in parts:
        if part.identity == identity or (part.identity is None and manifest_ok):
            continue
        theirs = f"spec hash {part.identity}" if part.identity else "no spec hash (an older soadyn)"
        raise CampaignSpecError(
            f"{brief(str(results), 300)}: holds rows of another campaign (summary/{part.path.name} has "
            f"{theirs}; {what} has spec hash {identity}); choose another results directory or remove it")


def load_results(results: str | Path) -> Any:
    """All recorded rows of a results directory as a pandas DataFrame sorted by ``id`` (one row per
    scenario: duplicates are reported and dropped).  Stray files in ``summary/`` are ignored with a
    :class:`CampaignWarning`; parts of different specs are refused (:class:`CampaignSpecError`)."""
    require_stack(("pandas", "pyarrow"))
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    d = Path(results) / "summary"
    _check_entries(Path(results))
    parts = _parts(d)
    idents = {p.identity for p in parts}
    if len(idents) > 1:
        raise CampaignSpecError(f"{brief(str(d), 300)}: mixes rows of {len(idents)} campaigns (spec hashes "
                                f"{brief(sorted(str(i) for i in idents))}); keep the parts of one")
    if not parts:
        return pd.DataFrame({k: pd.Series(dtype="object") for k in SUMMARY_FIELDS})
    _recorded(parts, d)
    table = pa.concat_tables([pq.read_table(p.path).replace_schema_metadata(None) for p in parts])
    df = table.to_pandas()
    df = df.drop_duplicates("id", keep="first")
    return df.sort_values("id").reset_index(drop=True)


# ---- manifest ------------------------------------------------------------------------------------
def _manifest(spec: CampaignSpec | None, scenarios: list[Scenario] | None, n: int,
              digests: dict[str, str]) -> dict[str, Any]:
    """``campaign.json``: data only.  Modules are recorded by content hash (never by path: a results
    directory names nothing that is imported)."""
    m: dict[str, Any] = {"format": FORMAT, "n": n, "module_sha256": digests}
    if spec is not None:
        m.update(kind="spec", name=spec.name, spec=spec.raw, spec_source=spec.source,
                 identity=spec.identity())
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
    blob = json.dumps([asdict(s) for s in scenarios], sort_keys=True, default=str).encode()
    h = hashlib.sha256(blob)
    h.update(Path(scenarios[0].setup.robot).read_bytes())
    return h.hexdigest()[:16]


def _read_manifest(results: Path) -> dict[str, Any] | None:
    """``campaign.json`` of ``results`` (None if absent); a malformed one is a :class:`CampaignSpecError`
    naming the file."""
    f = results / "campaign.json"
    if not f.exists():
        return None
    where = brief(str(f), 300)
    try:
        with open(f, "rb") as fh:
            raw = fh.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise CampaignSpecError(f"{where}: cannot read it ({e.strerror})") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise CampaignSpecError(f"{where}: larger than {MAX_MANIFEST_BYTES} bytes; not written by soadyn")
    try:
        m = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise CampaignSpecError(f"{where}: not UTF-8 text; not written by soadyn campaign") from None
    except json.JSONDecodeError as e:
        raise CampaignSpecError(f"{where}: not valid JSON ({e.msg}, line {e.lineno}); restore it or remove "
                                "the results directory") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT or m.get("kind") not in ("spec", "scenarios") \
            or not isinstance(m.get("identity"), str) or not isinstance(m.get("n"), int):
        raise CampaignSpecError(f"{where}: not a {FORMAT} manifest (format, kind, identity, n); give a "
                                "results directory written by soadyn campaign")
    return m


def _check_manifest(results: Path, new: dict[str, Any], what: str) -> bool:
    """Refuse a results directory of another campaign (spec hash or n differ); True if it has a matching
    ``campaign.json``, False if it has none."""
    old = _read_manifest(results)
    if old is None:
        return False
    if old["identity"] != new["identity"] or old["n"] != new["n"]:
        raise CampaignSpecError(
            f"{brief(str(results), 300)}: holds a different campaign (campaign.json: spec hash "
            f"{brief(old['identity'])}, {brief(old.get('name'))} from {brief(old.get('spec_source'), 200)}, "
            f"n {old['n']}; {what}: spec hash {new['identity']}, n {new['n']}); choose another results "
            "directory or remove it")
    return True


@contextlib.contextmanager
def _writer_lock(results: Path) -> Iterator[None]:
    """One writer per results directory: an exclusive ``flock`` on ``results/.lock``, released by the
    system when the process ends, however it ends."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / LOCK
    fh = open(path, "a+")
    try:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.seek(0)
                pid = fh.read(20).strip()
                raise CampaignError(
                    f"{brief(str(results), 300)} is in use by another soadyn campaign (pid "
                    f"{brief(pid) if pid else 'unknown'}, lock {LOCK}); wait for it to finish or write to "
                    "another results directory (the lock of a process that died is released)") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fh.close()


def default_results(spec: CampaignSpec | None) -> Path:
    """``./<name>.campaign`` in the working directory; a name that is not a plain file name is refused
    (give ``results=`` / ``-o`` for any other place)."""
    name = spec.name if spec is not None else "scenarios"
    if not isinstance(name, str) or not NAME.match(name):
        raise CampaignSpecError(f"{getattr(spec, 'source', '<scenarios>')}: field 'name': {brief(name)} "
                                "is not a plain file name; give the results directory with -o DIR "
                                "(results=)")
    return Path(f"{name}.campaign")


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


@dataclass
class _Waits:
    """How long :func:`run` waits for a scheduler, the first worker and the next finished task [s]."""

    connect: float = CONNECT_TIMEOUT
    workers: float = WORKER_TIMEOUT
    task: float = TASK_TIMEOUT


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
    waits = _Waits(_check_timeout(connect_timeout, "connect_timeout"),
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
    with _writer_lock(results):
        return _run_locked(spec, lst, total, make, setup, levels, results, client, workers, cache, progress,
                           part_size, flush_seconds, batch, on_row, waits)


def _run_locked(spec: CampaignSpec | None, lst: list[Scenario] | None, total: int,
                make: Callable[[int], Scenario], setup: Setup, levels: list[float], results: Path,
                client: Any, workers: int | None, cache: str | Path | None, progress: bool, part_size: int,
                flush_seconds: float, batch: int, on_row: Callable[[dict[str, Any]], None] | None,
                waits: _Waits) -> CampaignResult:
    """:func:`run` holding the results directory's lock: check that the directory holds this campaign
    (campaign.json and the spec hash of every part) before compiling, then compute the missing rows."""
    manifest = _manifest(spec, lst, total, {})
    what = f"this campaign ({brief(manifest['name'])})"
    manifest_ok = _check_manifest(results, manifest, what)
    summary_dir = results / "summary"
    _check_entries(results)
    parts = _parts(summary_dir)
    _check_parts(parts, manifest["identity"], results, what, manifest_ok)
    done = _recorded(parts, summary_dir)
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

    writer = _Writer(summary_dir, part_size, flush_seconds, manifest["identity"])
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
            n_workers = _run_dask(lost, pending(), paths, digests, zarr_path, client, workers, record, waits)
    finally:
        writer.flush()
        if bar is not None:
            bar.close()
    return CampaignResult(results, total, stats["computed"], total - todo, stats["failed"],
                          time.perf_counter() - t0, n_workers, stats["compute"], stats["unrecorded"],
                          errors[:5])


def _probe_scheduler(address: str, timeout: float) -> None:
    """Before handing ``address`` to Dask: a TCP peer must accept within ``timeout`` and send the first
    8 bytes of a Dask handshake (a little-endian message length; a Dask listener writes its handshake at
    once).  A refused port fails at once; a silent peer or another protocol (an HTTP server) after
    ``timeout``, with a :class:`CampaignError` instead of a long retry or a huge allocation."""
    import struct

    from distributed.comm.addressing import parse_address, parse_host_port

    shown = terminal(address, 200)
    try:
        scheme, loc = parse_address(address)
        if scheme != "tcp":
            return                            # tls://, ucx://, inproc://: Dask's own timeout applies
        host, port = parse_host_port(loc)
    except (ValueError, TypeError) as e:
        raise CampaignError(f"--scheduler {shown}: not a scheduler address ({terminal(e, 100)}); give "
                            "tcp://HOST:PORT as printed by `dask scheduler`") from None
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise CampaignError(f"Dask scheduler at {shown}: connection refused; check the address and that "
                            "`dask scheduler` runs there") from None
    except TimeoutError:
        raise CampaignError(f"Dask scheduler at {shown}: no TCP connection within {timeout:g} s; check the "
                            "address, the network and firewalls") from None
    except OSError as e:
        raise CampaignError(f"Dask scheduler at {shown}: cannot connect ({e.strerror or e}); check the "
                            "address") from None
    with sock:
        head = b""
        try:
            while len(head) < 8:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(8 - len(head))
                if not chunk:
                    break
                head += chunk
        except (TimeoutError, OSError):
            pass
    size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
    if not 0 < size < 1 << 24:
        got = "sent no Dask handshake" if not head else f"answered {brief(head)} (not the Dask protocol)"
        raise CampaignError(f"the peer at {shown} accepted the connection but {got} within {timeout:g} s; "
                            "check that the address is a Dask scheduler's (`dask scheduler` prints it)")


def _connect(client: Any, workers: int | None, waits: _Waits) -> tuple[Any, Any, Any]:
    """(client, the client to close, the cluster to close): an embedded LocalCluster (``client=None``), a
    scheduler address, or the given ``distributed.Client``; then wait for a worker."""
    from distributed import Client, LocalCluster

    cluster = own = None
    if client is None:
        n = workers or os.cpu_count() or 1
        try:
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   timeout=waits.workers)
            client = own = Client(cluster, timeout=waits.connect)
        except Exception as e:  # noqa: BLE001 - whatever Dask raises, one line
            if cluster is not None:
                cluster.close()
            raise CampaignError(f"cannot start an embedded Dask cluster of {n} workers "
                                f"({type(e).__name__}: {terminal(e, 200)})") from None
        address = cluster.scheduler_address
    elif isinstance(client, str):
        address = client
        _probe_scheduler(address, waits.connect)
        try:
            client = own = Client(address, timeout=waits.connect)
        except (OSError, TimeoutError, MemoryError, ValueError) as e:
            raise CampaignError(f"cannot connect to the Dask scheduler at {terminal(address, 200)} within "
                                f"{waits.connect:g} s ({type(e).__name__}: {terminal(e, 200)}); check "
                                "the address and the scheduler") from None
    else:
        address = getattr(client, "scheduler", None) and client.scheduler.address
    try:
        client.wait_for_workers(1, timeout=waits.workers)
    except (TimeoutError, OSError) as e:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()
        shown = terminal(address, 200)
        raise CampaignError(f"no worker joined the Dask scheduler at {shown} within {waits.workers:g} s "
                            f"({type(e).__name__}); start workers with `dask worker {shown}` (they need this "
                            "soadyn with the campaign extra) or give a longer worker timeout") from None
    return client, own, cluster


def _run_dask(
    lost: Callable[[list[Scenario], BaseException], None],
    chunks: Iterator[list[Scenario]],
    paths: dict[str, str],
    digests: dict[str, str],
    zarr_path: str | None,
    client: Any,
    workers: int | None,
    record: Callable[[list[dict[str, Any]]], None],
    waits: _Waits,
) -> int:
    from distributed import wait

    client, own, cluster = _connect(client, workers, waits)
    inflight: dict[str, tuple[Any, list[Scenario]]] = {}
    try:
        n_workers = max(1, sum(client.nthreads().values()))
        window = 4 * n_workers
        # a task that fails for good (its worker killed more often than
        # distributed.scheduler.allowed-failures, a worker that cannot load the modules) is not recorded,
        # so a rerun retries it; scenario failures (divergence...) are rows, not task errors
        it = iter(chunks)

        def submit() -> bool:
            chunk = next(it, None)
            if chunk is None:
                return False
            key = f"soadyn-scenario-{chunk[0].id}-{time.time_ns()}"
            fut = client.submit(_task, chunk, paths, zarr_path, digests, pure=False, key=key)
            inflight[key] = (fut, chunk)
            return True

        for _ in range(window):
            if not submit():
                break
        last = time.monotonic()
        while inflight:
            left = waits.task - (time.monotonic() - last)
            try:
                if left <= 0:
                    raise TimeoutError
                done, _ = wait([f for f, _ in inflight.values()], timeout=left, return_when="FIRST_COMPLETED")
            except TimeoutError:
                ids = sorted(sc.id for _, chunk in inflight.values() for sc in chunk)
                raise CampaignError(
                    f"no task finished within {waits.task:g} s (waiting for scenarios {brief(ids)}); check "
                    "the workers (their logs, memory, that they still run) or give a longer task timeout; "
                    "recorded rows are kept, rerun to resume") from None
            for fut in done:
                _, chunk = inflight.pop(fut.key)
                if fut.status == "finished":
                    rows = fut.result()
                    fut.release()
                    record(rows)
                else:
                    err = fut.exception() if fut.status == "error" else RuntimeError(f"task {fut.status}")
                    fut.release()
                    lost(chunk, err)
                last = time.monotonic()
                submit()
        return n_workers
    finally:
        for fut, _ in inflight.values():
            fut.cancel()
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()


# ---- replay --------------------------------------------------------------------------------------
def _setup_from_manifest(st: Any) -> Setup:
    """A :class:`Setup` from its ``campaign.json`` form (checked: the file is data)."""
    tuples = ("wheels", "q0", "target_inertia", "grasp_xyz", "grasp_rpy", "normal")
    if not isinstance(st, dict) or set(st) != set(Setup.__dataclass_fields__):
        raise ValueError("'setup' does not have the fields of a campaign setup")
    for k in tuples:
        if not isinstance(st[k], list) or len(st[k]) > 10_000:
            raise ValueError(f"setup.{k} is not a list")
    for k in ("robot", "hand", "contact"):
        if not isinstance(st[k], str):
            raise ValueError(f"setup.{k} is not a string")
    if not isinstance(st["gains"], dict) or not isinstance(st["trajectories"], bool):
        raise ValueError("setup.gains / setup.trajectories have the wrong type")
    return Setup(**{**st, **{k: tuple(st[k]) for k in tuples}})


def _scenario_from_manifest(results: Path, sid: int) -> tuple[Scenario, dict[str, Any]]:
    """Scenario ``sid`` of a results directory, rebuilt from ``campaign.json`` (data: the spec is validated
    again and its hash must be the recorded one)."""
    f = results / "campaign.json"
    m = _read_manifest(results)
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
            setup = _setup_from_manifest(m.get("setup"))
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
            sc, now = match[0], _scenarios_identity(lst)
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
            _warn(f"replay: module {k} rebuilt from the spec has hash {now[:16]}, the campaign's had "
                  f"{terminal(str(recorded.get(k))[:16])}; the row may differ in the last bits")
    chaser, robot = _load(paths["chaser"], "module"), _load(paths["robot"], "robot")
    truth = _load(paths[name], "module")
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


def identical_rows(a: Any, b: Any) -> bool:
    """True when two summary tables hold the same scenarios with bit-identical values (timing excluded)."""
    cols = [c for c in SUMMARY_FIELDS if c not in TIMING_FIELDS]
    a = a.sort_values("id").reset_index(drop=True)[cols]
    b = b.sort_values("id").reset_index(drop=True)[cols]
    return bool(a.equals(b))
