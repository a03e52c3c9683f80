"""The results directory of a campaign (:mod:`soadyn.runtime.campaign`) is data: Parquet summary parts
that carry the spec hash, a ``campaign.json`` manifest, a writer lock.  Nothing under it is imported or
executed; everything read from it is checked (a malformed manifest, a stray file, a duplicated row or a
part of another spec gives a one-line :class:`CampaignSpecError` or a :class:`CampaignWarning`)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from importlib import import_module
from pathlib import Path
from typing import Any

from soadyn.model.names import brief
from soadyn.runtime.campaign_spec import NAME
from soadyn.runtime.scenario import SUMMARY_FIELDS, CampaignSpec, CampaignSpecError, Scenario, Setup

#: format of campaign.json (2: modules by content hash, no paths); 1 (module paths) is still read: its paths
#: are ignored, its parts (without a spec hash) count only while campaign.json matches the spec
FORMAT = "soadyn-campaign-2"
READABLE_FORMATS = ("soadyn-campaign-1", FORMAT)
#: the third-party stack of campaigns: the ``campaign`` extra (``pip install 'soadyn[campaign]'``)
STACK = ("dask", "distributed", "pandas", "pyarrow", "zarr")
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


# ---- storage -------------------------------------------------------------------------------------
def summary_schema() -> Any:
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.schema([(k, types[t]) for k, t in SUMMARY_FIELDS.items()])


class PartWriter:
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

        schema = summary_schema().with_metadata({SPEC_KEY: self.identity.encode()})
        table = pa.Table.from_pylist(self.rows, schema=schema)
        name = f"part-{time.time_ns():020d}-{os.getpid()}-{self.count:05d}.parquet"
        tmp = self.dir / f".{name}.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        self.count += 1
        self.rows = []


@dataclass
class Part:
    path: Path
    identity: str | None        # the spec hash in its metadata (None: a part of an older soadyn)
    ids: list[int]


def warn(message: str) -> None:
    warnings.warn(message, CampaignWarning, stacklevel=3)


def read_parts(summary_dir: Path) -> list[Part]:
    """The summary parts of a results directory, in name order.  A file that is not a part written by
    soadyn (another name, or not a readable Parquet file with the summary columns) is ignored with a
    :class:`CampaignWarning`; the temporary files of an interrupted write (``.part-*.tmp``) silently."""
    import pyarrow.parquet as pq

    if not summary_dir.is_dir():
        return []
    parts: list[Part] = []
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
        parts.append(Part(p, ident.decode(errors="replace") if ident else None, [int(i) for i in ids]))
    if ignored:
        warn(f"{brief(str(summary_dir), 300)}: ignored {len(ignored)} file(s) that are not summary parts "
              f"written by soadyn campaign: {brief(ignored, 40)}; move them out of summary/")
    return parts


#: what a results directory holds besides its summary parts
KNOWN_ENTRIES = frozenset({"campaign.json", ".campaign.json.tmp", "summary", "trajectories.zarr", "report",
                           LOCK})


def check_entries(results: Path) -> None:
    """A :class:`CampaignWarning` for entries of a results directory that soadyn did not write (they are
    ignored: nothing in a results directory is imported or executed)."""
    try:
        stray = sorted(p.name for p in results.iterdir() if p.name not in KNOWN_ENTRIES)
    except OSError:
        return
    if stray:
        warn(f"{brief(str(results), 300)}: ignored {len(stray)} entr{'y' if len(stray) == 1 else 'ies'} not "
              f"written by soadyn campaign: {brief(stray, 40)}")


def recorded_ids(parts: list[Part], summary_dir: Path) -> set[int]:
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
        warn(f"{brief(str(summary_dir), 300)}: {len(dup)} duplicate row(s) (scenario ids "
              f"{brief(sorted(set(dup)))}) in parts {brief(sorted(where), 40)}; each id is counted once "
              "(the row of the first part)")
    return set(seen)


def check_parts(parts: list[Part], identity: str, results: Path, what: str, manifest_ok: bool) -> None:
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
    check_entries(Path(results))
    parts = read_parts(d)
    idents = {p.identity for p in parts}
    if len(idents) > 1:
        raise CampaignSpecError(f"{brief(str(d), 300)}: mixes rows of {len(idents)} campaigns (spec hashes "
                                f"{brief(sorted(str(i) for i in idents))}); keep the parts of one")
    if not parts:
        return pd.DataFrame({k: pd.Series(dtype="object") for k in SUMMARY_FIELDS})
    recorded_ids(parts, d)
    table = pa.concat_tables([pq.read_table(p.path).replace_schema_metadata(None) for p in parts])
    df = table.to_pandas()
    df = df.drop_duplicates("id", keep="first")
    return df.sort_values("id").reset_index(drop=True)


# ---- manifest ------------------------------------------------------------------------------------
def make_manifest(spec: CampaignSpec | None, scenarios: list[Scenario] | None, n: int,
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
            identity=scenarios_identity(scenarios),
        )
    return m


def scenarios_identity(scenarios: list[Scenario]) -> str:
    blob = json.dumps([asdict(s) for s in scenarios], sort_keys=True, default=str).encode()
    h = hashlib.sha256(blob)
    h.update(Path(scenarios[0].setup.robot).read_bytes())
    return h.hexdigest()[:16]


def read_manifest(results: Path) -> dict[str, Any] | None:
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
    if not isinstance(m, dict) or m.get("format") not in READABLE_FORMATS \
            or m.get("kind") not in ("spec", "scenarios") or not isinstance(m.get("identity"), str) \
            or not isinstance(m.get("n"), int) or isinstance(m.get("n"), bool):
        raise CampaignSpecError(f"{where}: not a {FORMAT} manifest (format, kind, identity, n); give a "
                                "results directory written by soadyn campaign")
    return m


def check_manifest(results: Path, new: dict[str, Any], what: str) -> bool:
    """Refuse a results directory of another campaign (spec hash or n differ); True if it has a matching
    ``campaign.json``, False if it has none."""
    old = read_manifest(results)
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
def writer_lock(results: Path) -> Iterator[None]:
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


def setup_from_manifest(st: Any) -> Setup:
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


