"""Capture campaigns on Dask (soadyn.runtime.campaign): a 2-worker LocalCluster gives the serial results
bit for bit; a worker killed mid-campaign and an interrupted campaign lose and duplicate nothing; failing
scenarios are rows with their error; a bad spec is one error line before anything starts; replay,
report, Zarr trajectories and the dask.array batch evaluation."""

from __future__ import annotations

import os
import signal
from dataclasses import replace

import numpy as np
import pytest
import yaml
from conftest import EXAMPLES, module_cache_dir

from soadyn.runtime import campaign
from soadyn.runtime.scenario import CampaignSpecError, load_spec, spec_from_dict

N = 40


def _spec_doc(**changes):
    """The example spec with short phases (a few tens of ms per scenario) and two payload levels."""
    doc = yaml.safe_load((EXAMPLES / "campaigns" / "capture.yaml").read_text())
    doc["sample"]["contact_time"] = {"uniform": [0.1, 0.3]}
    doc["sample"]["payload_scale"] = {"choice": [0.9, 1.1]}
    doc["post_impact"] = {"duration": 0.3, "dt": 0.05}
    doc["n"] = N
    doc.update(changes)
    return doc


@pytest.fixture(scope="module")
def cache(request, tmp_path_factory):
    return module_cache_dir(request, tmp_path_factory, "soadyn_campaign")


@pytest.fixture(scope="module")
def spec():
    return spec_from_dict(_spec_doc(), base_dir=EXAMPLES / "campaigns", source="test_spec.yaml")


@pytest.fixture(scope="module")
def serial(spec, cache, tmp_path_factory):
    """The reference: every scenario run in this process, in order."""
    out = tmp_path_factory.mktemp("serial")
    res = campaign.run(spec, client=None, workers=0, results=out, cache=cache, progress=False)
    assert (res.computed, res.skipped) == (N, 0)
    df = campaign.load_results(out)
    df.attrs["dir"] = out
    return df


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_serial_run_is_complete_and_sane(serial):
    assert sorted(serial["id"]) == list(range(N))
    assert (serial["status"] == "ok").all(), serial.loc[serial["status"] != "ok", "error"].tolist()
    assert set(serial["case"]) == {"A", "B", "C", "D"} and set(serial["controller"]) == {"dmc", "rnsc"}
    assert serial["impact_momentum_error"].max() < 1e-12
    assert serial["capture_model_error"].max() < 1e-11
    assert (serial["impact_energy_loss"] >= -1e-9).all()
    # the seeds regenerate the sampled parameters
    spec = spec_from_dict(_spec_doc(), base_dir=EXAMPLES / "campaigns", source="again.yaml")
    for i in (0, 17, 39):
        sc = spec.scenario_from_seed(i, int(serial.loc[i, "seed"]))
        assert sc.spin_rate_deg_s == serial.loc[i, "spin_rate_deg_s"] and sc.case == serial.loc[i, "case"]


def test_two_workers_give_the_serial_results(spec, cache, client, serial, tmp_path):
    res = campaign.run(spec, client=client, results=tmp_path, cache=cache, progress=False)
    assert (res.computed, res.skipped, res.workers) == (N, 0, 2)
    dist = campaign.load_results(tmp_path)
    assert len(dist) == N and dist["id"].is_unique
    assert campaign.identical_rows(dist, serial)


def test_killed_worker_loses_and_duplicates_nothing(spec, cache, client, serial, tmp_path):
    pids_before = set(client.run(os.getpid).values())
    killed = []

    def kill_one(row):
        if len(killed) == 0 and row["id"] >= 5:
            pid = sorted(pids_before)[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    res = campaign.run(spec, client=client, results=tmp_path, cache=cache, progress=False, on_row=kill_one)
    assert killed and res.computed == N
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in set(client.run(os.getpid).values())       # the nanny started a new process
    dist = campaign.load_results(tmp_path)
    assert len(dist) == N and dist["id"].is_unique
    assert campaign.identical_rows(dist, serial)


def test_workers_that_cannot_run_tasks_stop_the_campaign_and_record_nothing(spec, cache, client, tmp_path,
                                                                         monkeypatch):
    good = campaign.prepare_modules(spec.setup, spec.payload_levels(), cache)
    bad = {k: (v if k == "robot" else str(tmp_path / "not_there" / k)) for k, v in good.items()}
    monkeypatch.setattr(campaign, "prepare_modules", lambda *a, **k: bad)
    with pytest.raises(campaign.CampaignError, match="every task fails on the workers"):
        campaign.run(spec, client=client, results=tmp_path / "r", cache=cache, progress=False)
    assert len(campaign.load_results(tmp_path / "r")) == 0


def test_interrupted_campaign_resumes_without_recomputing(cache, serial, tmp_path):
    n = 20
    spec = spec_from_dict(_spec_doc(n=n), base_dir=EXAMPLES / "campaigns", source="twenty.yaml")

    class Stop(KeyboardInterrupt):
        pass

    def stop(row):
        if row["id"] == 12:
            raise Stop

    with pytest.raises(Stop):
        campaign.run(spec, workers=0, results=tmp_path, cache=cache, progress=False, part_size=5, on_row=stop)
    assert sorted(campaign.load_results(tmp_path)["id"]) == list(range(13))      # rows 0..12 recorded
    res = campaign.run(spec, workers=0, results=tmp_path, cache=cache, progress=False)
    assert (res.computed, res.skipped) == (n - 13, 13)
    again = campaign.run(spec, workers=0, results=tmp_path, cache=cache, progress=False)
    assert (again.computed, again.skipped) == (0, n)
    out = campaign.load_results(tmp_path)
    assert len(out) == n and out["id"].is_unique
    assert campaign.identical_rows(out, serial[serial["id"] < n])         # scenario i does not depend on n
    other = spec_from_dict(_spec_doc(n=n, seed=7), base_dir=EXAMPLES / "campaigns", source="other.yaml")
    with pytest.raises(CampaignSpecError, match="holds a different campaign"):
        campaign.run(other, workers=0, results=tmp_path, cache=cache, progress=False)


def test_replay_reproduces_a_recorded_row(serial, tmp_path, cache):
    spec = spec_from_dict(_spec_doc(n=5), base_dir=EXAMPLES / "campaigns", source="five.yaml")
    campaign.run(spec, workers=0, results=tmp_path, cache=cache, progress=False, trajectories=True)
    for sid in (1, 4):
        row, traj = campaign.replay(tmp_path, sid)
        rec = serial.loc[serial["id"] == sid].iloc[0]
        for k in campaign.SUMMARY_FIELDS:
            if k not in campaign.TIMING_FIELDS:
                assert row[k] == rec[k] or (row[k] != row[k] and rec[k] != rec[k]), k
        import zarr

        stored = zarr.open_group(str(tmp_path / "trajectories.zarr"), mode="r")[f"s{sid:07d}"]
        assert np.array_equal(stored["q"][:], traj["q"]) and np.array_equal(stored["tau"][:], traj["tau"])
        assert set(np.unique(traj["phase"])) == {0, 1}


def test_failing_scenarios_are_recorded_and_do_not_stop_the_others(spec, cache, tmp_path):
    bad_setup = replace(spec.setup, gains={"dmc": {"K_v": 1e5}, "rnsc": spec.setup.gains["rnsc"]})
    scs = [replace(spec.scenario(i), setup=bad_setup) for i in range(8)]
    res = campaign.run(scs, workers=0, results=tmp_path, cache=cache, progress=False)
    df = campaign.load_results(tmp_path)
    dmc = df[df["controller"] == "dmc"]
    assert len(df) == 8 and len(dmc) > 0 and res.failed == len(dmc)
    assert (dmc["status"] == "failed").all() and dmc["error"].str.contains("diverged").all()
    assert (df[df["controller"] == "rnsc"]["status"] == "ok").all()


def _cli(argv, capsys):
    from soadyn.cli.main import main

    code = main(argv)
    return code, capsys.readouterr()


@pytest.mark.parametrize("change, field", [
    ({"sample": {"controller": {"choice": ["dmc", "pid"]}}}, "sample.controller"),
    ({"arm_deg": [0, 0, 0, 0, 0, 0]}, "arm_deg"),
    ({"robot": "no_such_robot.yaml"}, "robot"),
    ({"target": {"mass": 200, "inertia": [[1, 2], [3, 4]], "grasp_xyz": [0, 0, 1]}}, "target.inertia"),
    ({"controllers": {"lqr": {}}}, "controllers.lqr"),
])
def test_bad_spec_is_one_line_before_anything_starts(change, field, tmp_path, capsys, monkeypatch):
    import distributed

    def forbidden(*a, **k):
        raise AssertionError("a cluster or a compilation started for a bad spec")

    monkeypatch.setattr(distributed, "LocalCluster", forbidden)
    monkeypatch.setattr(campaign, "prepare_modules", forbidden)
    doc = _spec_doc(**change)
    if doc["robot"] != "no_such_robot.yaml":
        doc["robot"] = str(EXAMPLES / "campaigns" / doc["robot"])
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    code, out = _cli(["campaign", str(path), "-o", str(tmp_path / "res")], capsys)
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in out.err
    assert str(path) in lines[0] and f"field '{field}'" in lines[0]
    assert not (tmp_path / "res").exists()


def test_missing_spec_file_is_one_line(tmp_path, capsys):
    code, out = _cli(["campaign", str(tmp_path / "nope.yaml")], capsys)
    assert code == 2 and out.err.count("\n") == 1 and "not found" in out.err


def test_report_plots_and_table(serial, tmp_path, capsys):
    code, out = _cli(["campaign", "report", str(serial.attrs["dir"]), "--out", str(tmp_path / "rep")], capsys)
    assert code == 0
    for name in ("distributions.png", "by_case.png", "summary.txt"):
        assert (tmp_path / "rep" / name).stat().st_size > 1000 or name == "summary.txt"
    table = (tmp_path / "rep" / "summary.txt").read_text().splitlines()[2:]
    counts = serial.groupby(["case", "controller"]).size()
    assert [(ln.split()[0], ln.split()[1], int(ln.split()[2])) for ln in table] == \
        [(c, k, int(n)) for (c, k), n in counts.items()]


def test_cli_runs_a_spec_and_resumes(tmp_path, capsys, cache):
    doc = _spec_doc(n=4)
    doc["robot"] = str(EXAMPLES / "campaigns" / doc["robot"])
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(doc))
    args = ["campaign", str(path), "-o", str(tmp_path / "res"), "--workers", "0", "--cache", str(cache),
            "--no-progress"]
    code, out = _cli(args, capsys)
    assert code == 0 and "4 scenarios computed, 0 already recorded" in out.out
    code, out = _cli(args, capsys)
    assert code == 0 and "0 scenarios computed, 4 already recorded" in out.out


def test_batch_evaluation_over_a_chunked_dask_array(cache, rng):
    import dask.array as da

    from soadyn.codegen import compile as compile_robot
    from soadyn.runtime.batch import evaluate

    m = compile_robot(EXAMPLES / "dimitrov_7dof_rw.yaml", out_dir=cache, functions=campaign.CHASER_FUNCTIONS,
                      progress=False)
    Q = rng.normal(size=(1000, m.nq))
    V = rng.normal(size=(1000, m.nv))
    dQ = da.from_array(Q, chunks=(300, m.nq))
    M = evaluate(m, "mass_matrix", dQ)
    assert M.shape == (1000, m.nv, m.nv) and M.numblocks[0] == 4
    assert np.array_equal(M.compute(scheduler="threads"), m.mass_matrix(Q))
    assert np.array_equal(evaluate(m, "momentum", dQ, V).compute(), m.momentum(Q, V))
    assert np.array_equal(evaluate(m, "kinetic_energy", dQ, V).compute(), m.kinetic_energy(Q, V))
    J = evaluate(m, "jacobian", dQ, frame="ee", world_aligned=True).compute()
    assert np.array_equal(J, m.jacobian(Q, "ee", world_aligned=True))
    with pytest.raises(ValueError, match="no function"):
        evaluate(m, "teleport", dQ)
    with pytest.raises(ValueError, match="same leading"):
        evaluate(m, "momentum", dQ, V[:10])


def test_example_spec_loads():
    s = load_spec(EXAMPLES / "campaigns" / "capture.yaml")
    assert s.n == 1000 and s.payload_levels() == [0.8, 1.0, 1.2]
    assert s.scenario(5) == s.scenario(5) and s.scenario(5).seed != s.scenario(6).seed
