"""Issue 21 items 1-7 and issue 22 item 6: the campaign surfaces attacked as an attacker and an unlucky user
would.  A results directory is data (nothing under it is imported), one spec per directory (the spec hash
is stored with every part), one writer at a time, stray files ignored with a warning; every wait ends
(loopback peers only, bounded in time); one schema for a spec (unknown keys with the nearest name, types and
physical ranges before any compile); output names stay in the working directory; error lines are
terminal-safe and bounded; without the campaign extra, one line says what to install."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import warnings

import pytest
import yaml
from conftest import EXAMPLES, REPO, module_cache_dir

from soadyn.runtime import campaign
from soadyn.runtime.scenario import CampaignSpecError, spec_from_dict

ROBOT = str(EXAMPLES / "dimitrov_7dof_rw.yaml")


def _doc(**changes):
    """The example spec, short phases, the same two payload levels as tests/test_campaign.py (the compiled
    modules are shared through the module cache)."""
    doc = yaml.safe_load((EXAMPLES / "campaigns" / "capture.yaml").read_text())
    doc["robot"] = ROBOT
    doc["sample"]["contact_time"] = {"uniform": [0.1, 0.3]}
    doc["sample"]["payload_scale"] = {"choice": [0.9, 1.1]}
    doc["post_impact"] = {"duration": 0.3, "dt": 0.05}
    doc["n"] = 3
    doc.update(changes)
    return doc


def _spec(**changes):
    return spec_from_dict(_doc(**changes), source="spec.yaml")


@pytest.fixture(scope="module")
def cache(request, tmp_path_factory):
    return module_cache_dir(request, tmp_path_factory, "soadyn_campaign")


def _run(spec, results, cache, **kw):
    kw.setdefault("workers", 0)
    return campaign.run(spec, results=results, cache=cache, progress=False, **kw)


def _cli(argv, capsys):
    from soadyn.cli.main import main

    code = main(argv)
    return code, capsys.readouterr()


def _bounded(fn, seconds):
    """``fn()`` in a daemon thread; (result or exception, elapsed); a call still running after ``seconds``
    fails the test (a hang)."""
    out: dict = {}

    def target():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            out["value"] = e

    t0 = time.monotonic()
    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(seconds)
    assert not th.is_alive(), f"still waiting after {seconds} s"
    return out["value"], time.monotonic() - t0


# ---- 1. a results directory is data --------------------------------------------------------------------
def test_replay_never_imports_a_module_named_by_the_results_directory(cache, tmp_path):
    res = tmp_path / "res"
    _run(_spec(), res, cache)
    evil = tmp_path / "evil"
    evil.mkdir()
    marker = tmp_path / "pwned"
    (evil / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    m = json.loads((res / "campaign.json").read_text())
    m["modules"] = {k: str(evil) for k in ("chaser", "robot", "truth:0.9", "truth:1.1")}
    (res / "campaign.json").write_text(json.dumps(m))
    row, _ = campaign.replay(res, 1, cache=cache, trajectories=False)
    assert not marker.exists()
    rec = campaign.load_results(res).set_index("id").loc[1]
    assert row["status"] == "ok" and row["peak_base_attitude_deg"] == rec["peak_base_attitude_deg"]


def test_resume_without_campaign_json_refuses_another_spec(cache, tmp_path):
    res = tmp_path / "res"
    a = _spec(seed=1)
    _run(a, res, cache)
    (res / "campaign.json").unlink()
    b = _spec(seed=2)
    with pytest.raises(CampaignSpecError) as e:
        _run(b, res, cache)
    assert a.identity() in str(e.value) and b.identity() in str(e.value)
    assert len(campaign.load_results(res)) == 3          # nothing of B was mixed in


def test_replay_refuses_a_changed_spec(cache, tmp_path):
    res = tmp_path / "res"
    _run(_spec(seed=1), res, cache)
    m = json.loads((res / "campaign.json").read_text())
    m["spec"]["seed"] = 5                                 # the recorded rows are seed 1's
    (res / "campaign.json").write_text(json.dumps(m))
    with pytest.raises(CampaignSpecError, match="spec hash"):
        campaign.replay(res, 0, cache=cache, trajectories=False)


def test_a_format_1_directory_resumes_and_its_module_paths_are_ignored(cache, tmp_path):
    """campaign.json of an older soadyn (format 1: module paths, parts without a spec hash) still resumes
    while it matches the spec; its paths are never used."""
    import pyarrow.parquet as pq

    res = tmp_path / "res"
    spec = _spec()
    _run(spec, res, cache)
    m = json.loads((res / "campaign.json").read_text())
    m["format"] = "soadyn-campaign-1"
    m["modules"] = {"chaser": str(tmp_path / "nowhere")}
    (res / "campaign.json").write_text(json.dumps(m))
    for part in (res / "summary").glob("part-*.parquet"):
        pq.write_table(pq.read_table(part).replace_schema_metadata(None), part)      # no spec hash
    again = _run(spec, res, cache)
    assert (again.computed, again.skipped) == (0, 3)
    (res / "campaign.json").unlink()                      # then nothing vouches for the parts: refused
    with pytest.raises(CampaignSpecError, match="no spec hash"):
        _run(spec, res, cache)


def test_one_writer_at_a_time(cache, tmp_path):
    res = tmp_path / "res"
    spec = _spec()
    inner = []

    def second_writer(row):
        if not inner:
            try:
                _run(spec, res, cache)
                inner.append("ran")
            except campaign.CampaignError as e:
                inner.append(str(e))

    _run(spec, res, cache, on_row=second_writer)
    assert "in use" in inner[0] and ".lock" in inner[0]
    df = campaign.load_results(res)
    assert len(df) == 3 and df["id"].is_unique


def test_a_dead_writer_does_not_hold_the_lock(cache, tmp_path):
    res = tmp_path / "res"
    res.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
        "print('locked', flush=True); time.sleep(60)"), str(res / ".lock")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(campaign.CampaignError, match="in use"):
            _run(_spec(), res, cache)
    finally:
        holder.kill()
        holder.wait()
    assert _run(_spec(), res, cache).computed == 3


def test_a_copied_part_is_reported_and_counted_once(cache, tmp_path):
    res = tmp_path / "res"
    spec = _spec()
    _run(spec, res, cache)
    (part,) = list((res / "summary").glob("part-*.parquet"))
    shutil.copy(part, part.with_name("part-99999999999999999999-1-00000.parquet"))
    with pytest.warns(campaign.CampaignWarning, match="duplicate"):
        df = campaign.load_results(res)
    assert len(df) == 3 and df["id"].is_unique
    with pytest.warns(campaign.CampaignWarning, match="duplicate"):
        again = _run(spec, res, cache)
    assert (again.computed, again.skipped) == (0, 3)


def test_stray_files_in_summary_are_ignored_with_a_warning(cache, tmp_path, capsys):
    res = tmp_path / "res"
    _run(_spec(), res, cache)
    (res / "summary" / "notes.txt").write_text("my notes\n")
    (res / "summary" / "part-junk.parquet").write_bytes(b"not parquet")
    (res / "__init__.py").write_text("raise SystemExit('imported')\n")
    with pytest.warns(campaign.CampaignWarning) as caught:
        df = campaign.load_results(res)
    said = " ".join(str(w.message) for w in caught)
    assert "notes.txt" in said and "part-junk.parquet" in said and "__init__.py" in said
    assert len(df) == 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, out = _cli(["campaign", "report", str(res), "--out", str(tmp_path / "rep")], capsys)
    assert code == 0 and (tmp_path / "rep" / "summary.txt").is_file()


def test_malformed_campaign_json_names_the_file(cache, tmp_path, capsys):
    res = tmp_path / "res"
    _run(_spec(), res, cache)
    (res / "campaign.json").write_text("{ not json")
    with pytest.raises(CampaignSpecError, match="campaign.json"):
        _run(_spec(), res, cache)
    code, out = _cli(["campaign", "replay", str(res), "0"], capsys)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "campaign.json" in lines[0] and "Traceback" not in out.err
    (res / "campaign.json").write_text(json.dumps({"format": "soadyn-campaign-1", "kind": "scenarios",
                                                   "setup": {"robot": 5}, "scenarios": "x"}))
    code, out = _cli(["campaign", "replay", str(res), "0"], capsys)
    assert code == 2 and len(out.err.strip().splitlines()) == 1 and "campaign.json" in out.err


# ---- 2. every wait ends ----------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [-1, 10**6, True])
def test_workers_is_validated_before_anything_starts(workers, cache, tmp_path):
    value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=workers), 20)
    assert isinstance(value, CampaignSpecError) and "workers" in str(value), value


def test_cli_workers_minus_one(tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(_doc()))
    code, out = _cli(["campaign", str(spec), "--workers", "-1", "-o", str(tmp_path / "r")], capsys)
    assert code == 2 and "--workers" in out.err and len(out.err.strip().splitlines()) == 1


def test_embedded_cluster_gives_the_serial_rows(cache, tmp_path):
    """The bounded waits around an embedded LocalCluster (client=None) leave its results unchanged."""
    res = _run(_spec(), tmp_path / "dask", cache, workers=1)
    assert (res.computed, res.workers) == (3, 1)
    _run(_spec(), tmp_path / "serial", cache)
    assert campaign.identical_rows(campaign.load_results(tmp_path / "dask"),
                                   campaign.load_results(tmp_path / "serial"))


def _assert_clean_wait_error(value, took, limit, *words):
    assert isinstance(value, campaign.CampaignError), repr(value)
    msg = str(value)
    assert "\n" not in msg and took < limit, (msg, took)
    for w in words:
        assert w in msg, msg


def test_scheduler_without_workers(cache, tmp_path):
    from distributed import LocalCluster

    with LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster:
        value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=None,
                                            client=cluster.scheduler_address, worker_timeout=2), 40)
    _assert_clean_wait_error(value, took, 30, "no worker", "2 s", "dask worker")


def test_peer_that_accepts_and_never_answers(cache, tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)                       # the kernel completes the handshake; nobody ever reads or writes
    try:
        addr = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
        value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=None, client=addr,
                                            connect_timeout=2), 40)
    finally:
        srv.close()
    _assert_clean_wait_error(value, took, 30, addr, "2 s", "Dask scheduler")


def test_http_server_as_peer(cache, tmp_path):
    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    th = threading.Thread(target=httpd.serve_forever, daemon=True)
    th.start()
    try:
        addr = f"tcp://127.0.0.1:{httpd.server_address[1]}"
        value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=None, client=addr,
                                            connect_timeout=2), 40)
    finally:
        httpd.shutdown()
        httpd.server_close()
    _assert_clean_wait_error(value, took, 30, addr, "Dask scheduler")


def test_refused_port_fails_at_once(cache, tmp_path):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                           # nobody listens there now
    addr = f"tcp://127.0.0.1:{port}"
    value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=None, client=addr,
                                        connect_timeout=20), 40)
    _assert_clean_wait_error(value, took, 5, addr, "refused")


_RELEASE = threading.Event()


def _stuck_task(*a, **k):
    """A task that does not finish until the test releases it (module level: it pickles by name)."""
    _RELEASE.wait(60)
    return []


def test_a_task_that_never_finishes_times_out(cache, tmp_path, monkeypatch):
    from distributed import Client, LocalCluster

    release = _RELEASE
    release.clear()
    monkeypatch.setattr(campaign, "_task", _stuck_task)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as client:
        try:
            value, took = _bounded(lambda: _run(_spec(), tmp_path / "r", cache, workers=None, client=client,
                                                task_timeout=2), 40)
        finally:
            release.set()
    _assert_clean_wait_error(value, took, 30, "2 s", "task")


# ---- 3. one schema for a campaign spec -----------------------------------------------------------------
BAD_SPECS = [
    # (change, field named in the error, word of the fix)
    ({"impact": {"contact": "normal", "normla": [0, 0, 1]}}, "impact.normla", "normal"),
    ({"approach": {"dtt": 0.05}}, "approach.dtt", "dt"),
    ({"post_impact": {"duration": 1.0, "dt": 0.05, "durtion": 2}}, "post_impact.durtion", "duration"),
    ({"sampel": {}}, "sampel", "sample"),
    ({"outputs": {"trajectory": True}}, "outputs.trajectory", "trajectories"),
    ({"impact": [1, 2]}, "impact", "mapping"),
    ({"approach": 5}, "approach", "mapping"),
    ({"controllers": {"dmc": 5}}, "controllers.dmc", "mapping"),
    ({"controllers": {"dmc": {"K_v": "20"}}}, "controllers.dmc.K_v", "number"),
    ({"target": {"mass": "200", "inertia": [1, 1, 1], "grasp_xyz": [0, 0, 1]}}, "target.mass", "number"),
    ({"n": "ten"}, "n", "integer"),
    ({"n": 10**12}, "n", "10000000"),
    ({"seed": -1}, "seed", ""),
    ({"wheels": ["j8", "j8"]}, "wheels", "repeated"),
    ({"wheels": "j8"}, "wheels", "list"),
    ({"sample": {"restitution": 5}}, "sample.restitution", "[0, 1]"),
    ({"sample": {"restitution": {"uniform": [0.0, 2.0]}}}, "sample.restitution", "[0, 1]"),
    ({"sample": {"restitution": {"normal": [0.2, 0.1]}}}, "sample.restitution", "uniform"),
    ({"sample": {"contact_time": -5}}, "sample.contact_time", "positive"),
    ({"sample": {"contact_time": {"uniform": [-1.0, 1.0]}}}, "sample.contact_time", "positive"),
    ({"sample": {"spin_axis": [0, 0, 0]}}, "sample.spin_axis", "zero"),
    ({"sample": {"spin_axis": {"choice": [[0, 0, 1], [0, 0, 0]]}}}, "sample.spin_axis", "zero"),
    ({"sample": {"payload_scale": -1}}, "sample.payload_scale", "positive"),
    ({"sample": {"closing_speed": -0.1}}, "sample.closing_speed", ""),
    ({"sample": {"case": {"choice": []}}}, "sample.case", ""),
    ({"sample": {"uniform": 3}}, "sample.uniform", "valid"),
    ({"target": {"mass": 200, "inertia": [1, 1, 5], "grasp_xyz": [0, 0, 1]}}, "target.inertia", "triangle"),
    ({"target": {"mass": 200, "inertia": [1, -1, 1], "grasp_xyz": [0, 0, 1]}}, "target.inertia", "positive"),
    ({"outputs": {"trajectories": "no"}}, "outputs.trajectories", "boolean"),
    ({"post_impact": {"duration": 1e12, "dt": 0.05}}, "post_impact.duration", "1e+09"),
    ({"post_impact": {"duration": 1e5, "dt": 0.05}}, "post_impact", "steps"),
    ({"post_impact": {"duration": 1.0, "dt": 1e-12}}, "post_impact", "steps"),
    ({"approach": {"dt": 1e-9}}, "approach", "steps"),
    ({"impact": {"normal": [0, 0, 0]}}, "impact.normal", "zero"),
    ({"impact": {"contact": "glue"}}, "impact.contact", "normal"),
    ({"name": "../../x"}, "name", "-o"),
    ({"name": "/tmp/soadyn_escape"}, "name", "-o"),
    ({"arm_deg": [0, 0, "a", 0, 0, 0, 0]}, "arm_deg[2]", "number"),
    ({"arm_deg": [0, 0, 0]}, "arm_deg", "7"),
]


@pytest.mark.parametrize("change, field, fix", BAD_SPECS,
                         ids=[b[1] + f"-{i}" for i, b in enumerate(BAD_SPECS)])
def test_bad_spec_is_one_clean_line_before_any_compile(change, field, fix, tmp_path, capsys, monkeypatch):
    def forbidden(*a, **k):
        raise AssertionError("a compilation or a cluster started for a bad spec")

    monkeypatch.setattr(campaign, "prepare_modules", forbidden)
    monkeypatch.chdir(tmp_path)
    doc = _doc(**change)
    with pytest.raises(CampaignSpecError) as e:               # the API: same error, no traceback type
        spec_from_dict(doc, source="api.yaml")
    assert f"field '{field}'" in str(e.value) and fix in str(e.value), str(e.value)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out = _cli(["campaign", str(path), "--workers", "0"], capsys)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in out.err, out.err
    assert str(path) in lines[0] and f"field '{field}'" in lines[0], lines[0]
    assert not list(tmp_path.glob("*.campaign")) and not (tmp_path.parent / "x.campaign").exists()


def test_duplicate_yaml_keys_are_refused(tmp_path):
    text = yaml.safe_dump(_doc()) + "n: 7\n"
    (tmp_path / "dup.yaml").write_text(text)
    with pytest.raises(CampaignSpecError, match="duplicate key"):
        campaign.load_spec(tmp_path / "dup.yaml")


def test_alias_bomb_is_refused_quickly(tmp_path):
    """Anchors and aliases nested under a known key (``impact``, whose sub-keys were not checked): 9 levels
    of 10 aliases expand to 10^9 values; refused while reading, before anything is built."""
    lines = ["  a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for i in range(1, 9):
        lines.append(f"  a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    doc = yaml.safe_dump(_doc()).replace("impact:\n", "impact:\n" + "\n".join(lines) + "\n", 1)
    path = tmp_path / "bomb.yaml"
    path.write_text(doc)
    assert path.stat().st_size < 4000
    t0 = time.monotonic()
    with pytest.raises(CampaignSpecError) as e:
        campaign.load_spec(path)
    assert time.monotonic() - t0 < 5 and str(path) in str(e.value) and len(str(e.value)) < 600
    assert "expands" in str(e.value)


def test_a_default_output_name_stays_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(name="capture")
    assert campaign.default_results(spec).resolve() == (tmp_path / "capture.campaign").resolve()
    spec.name = "../../x"           # edited after validation: still refused
    with pytest.raises(CampaignSpecError, match="-o"):
        campaign.default_results(spec)


def test_control_characters_and_huge_keys_give_a_short_safe_line(tmp_path, capsys):
    for key in ("\x1b[31mred\x07", "k" * 200_000):
        doc = _doc()
        doc["impact"] = {key: 1}
        path = tmp_path / "bad.yaml"
        path.write_text(yaml.safe_dump(doc, width=10**7))
        code, out = _cli(["campaign", str(path)], capsys)
        assert code == 2 and "\x1b" not in out.err and "\x07" not in out.err
        assert len(out.err) < 2500 and out.err.count("\n") == 1
    for argv in (["campaign", "replay", "\x1b[2Jdir", "0"],
                 ["campaign", "report", "\x1b[2J" + "d" * 100_000]):
        code, out = _cli(argv, capsys)
        assert code == 2 and "\x1b" not in out.err and len(out.err) < 2500 and out.err.count("\n") == 1


# ---- 4. the campaign extra (issue 22 item 6) ------------------------------------------------------------
def test_campaign_stack_is_an_extra():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    stack = {"dask", "distributed", "pandas", "pyarrow", "zarr"}

    def names(reqs):
        return {r.split(">")[0].split("=")[0].split("[")[0].strip().lower() for r in reqs}

    assert not names(project["dependencies"]) & stack
    assert names(project["optional-dependencies"]["campaign"]) >= stack
    test = project["optional-dependencies"]["test"]
    assert any(r.replace(" ", "").startswith("soadyn[campaign") for r in test)


def test_import_soadyn_and_the_generator_do_not_import_the_stack():
    code = ("import sys, soadyn, soadyn.codegen, soadyn.codegen.pipeline, soadyn.campaign, soadyn.cli.main; "
            "print(sorted(m for m in ('dask', 'distributed', 'pandas', 'pyarrow', 'zarr') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


@pytest.mark.parametrize("missing", ["distributed", "pandas", "zarr"])
def test_without_the_extra_one_line_says_what_to_install(missing, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, missing, None)          # `import <missing>` raises ImportError
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump(_doc()))
    code, out = _cli(["campaign", str(spec), "-o", str(tmp_path / "r")], capsys)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "pip install 'soadyn[campaign]'" in lines[0], out.err
    assert missing in lines[0] and not (tmp_path / "r").exists()
    if missing == "pandas":
        with pytest.raises(ImportError, match=r"soadyn\[campaign\]"):
            campaign.load_results(tmp_path)


def test_scenario_uses_the_one_rk4_and_no_reference_code():
    """Issue 22: production code never imports soadyn.reference; one RK4 (runtime/integrate.py)."""
    import ast

    src = (REPO / "runtime" / "scenario.py").read_text()
    mods = {n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("soadyn.reference") for m in mods), mods
    assert "soadyn.runtime.integrate" in mods and "k4 = f(" not in src
