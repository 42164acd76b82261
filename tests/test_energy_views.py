"""Energy where the results are read: the report (runs table, accuracy-vs-energy plot, inference energy, why a run
has none) and the leaderboard's train-energy and inference-energy objectives (bounds, plausibility, a running
server on SQLite and PostgreSQL, the schema-3 upgrade of a version-2 database)."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import pytest


from daybreak.leaderboard.ingest.importer import import_paths
from daybreak.leaderboard.ranking.objectives import OBJECTIVES, format_joules, leaderboard
from daybreak.leaderboard.ingest.runs_import import parse_inference, parse_run
from daybreak.leaderboard.web.pages import Site
from daybreak.leaderboard.store.database import Store
from daybreak.leaderboard.ingest.submission import SubmissionError

from test_leaderboard_trust import (  # noqa: E402 - the trust tests' consistent records and servers
    _pg_schema_url, dawnbench_doc, dawnbench_tsv, make_store, post_json, serving, synth_run, upload,
)

COVERS = ["gpu", "cpu_package"]


# --- records with energy --------------------------------------------------------------------------------------


def with_energy(run, watts: float = 100.0, covers=COVERS):
    """``run`` as if its counters had drawn a steady ``watts``: every evaluation's joules under each rule set are
    watts x that rule set's clock, as the recorder writes them."""
    for h in run.history:
        h.energy_j = {name: round(watts * seconds, 6) for name, seconds in h.clock_s.items()}
    e = run.energy
    e.available, e.covers, e.unavailable = True, list(covers), {}
    e.joules_at_end = dict(run.history[-1].energy_j)
    first = next((h for h in run.history if h.accuracy >= run.target), None)
    e.joules_to_target = dict(first.energy_j) if first else {}
    e.idle_power_w, e.idle_seconds = watts / 4, 2.0
    return run


def energy_run_doc(seed=0, watts=100.0, epoch_s=1.0, **kw) -> dict:
    return json.loads(with_energy(synth_run(seed=seed, epoch_s=epoch_s, **kw), watts).model_dump_json())


def inference_doc(*, joules_per_10k: float | None = 4.0, mean_ms=1.0, seed=0) -> dict:
    """An inference.json of 450 batch-1 queries, with the energy `daybreak infer` writes (or none)."""
    from daybreak.measure.system import system_info
    from daybreak.records.inference import (EnergyWindow, InferenceEnergy, InferenceResult, InferenceSettings,
                                            LatencyStats)

    n, total = 450, 450 * mean_ms / 1000
    lat = LatencyStats(n=n, total_s=total, mean_ms=mean_ms, min_ms=mean_ms / 2, p50_ms=mean_ms, p90_ms=mean_ms,
                       p99_ms=mean_ms, max_ms=2 * mean_ms, std_ms=0.1)
    energy = InferenceEnergy(unavailable={"cpu_package": "powercap: /sys/class/powercap does not exist"})
    if joules_per_10k is not None:
        joules = joules_per_10k * n / 10_000
        seconds = total * 1.01
        energy = InferenceEnergy(available=True, covers=["gpu"], latency=EnergyWindow(
            examples=n, seconds=seconds, timed_s=total, joules=joules, joules_per_10k=joules_per_10k,
            mean_power_w=joules / seconds, per_kind_j={"gpu": joules}))
    r = InferenceResult(
        run_id=f"r{seed}", task="digits", recipe="digits", model="digits_cnn", framework="PyTorch 2.13.0",
        metric="top1", checkpoint="checkpoint.pt", n_examples=n, latency=lat, accuracy=0.99, top1=0.99, target=0.98,
        valid=True, settings=InferenceSettings(device="cuda:0", amp="bf16", compile=False, threads=1, warmup=5),
        system=system_info(), created_at=datetime(2026, 1, 3, 0, 0, seed, tzinfo=timezone.utc), energy=energy)
    return json.loads(r.model_dump_json())


# --- the report ---------------------------------------------------------------------------------------------------


def test_report_plots_accuracy_against_energy_and_says_why_a_run_has_none(fake_rapl, tmp_path, monkeypatch,
                                                                           capsys):
    import torch

    from daybreak.cli import main
    from daybreak.train.runner import RunConfig, run

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        measured = run(RunConfig(out=tmp_path / "measured", quiet=True, idle_power_s=0))
        monkeypatch.setenv("DAYBREAK_POWERCAP_ROOT", str(tmp_path / "nothing-here"))
        unmeasured = run(RunConfig(out=tmp_path / "unmeasured", quiet=True, seed=1))
    finally:
        torch.set_num_threads(old)
    assert measured.energy.available and not unmeasured.energy.available
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "measured"), str(tmp_path / "unmeasured"), "--no-roofline",
                 "--out", str(out)]) == 0
    capsys.readouterr()
    md, page = (out / "report.md").read_text(), (out / "index.html").read_text()
    runs = md.split("## Runs", 1)[1].split("\n## ", 1)[0]
    assert "| energy to target |" in runs
    from daybreak.analysis.report import joules

    assert f"{joules(measured.energy.joules_to_target[measured.rules])} (cpu_package)" in runs
    assert (out / "energy.png").stat().st_size > 0 and "![accuracy against the energy" in runs
    assert "energy.png" in json.loads((out / "report.json").read_text())["images"]
    lines = [line for line in runs.splitlines() if line.startswith("No energy for")]
    assert len(lines) == 1 and "unmeasured" in lines[0] and "does not exist" in lines[0]
    assert "energy.png" in page and "No energy for" in page


def test_report_without_any_energy_has_no_plot_but_the_reason(tmp_path, monkeypatch, capsys):
    from daybreak.analysis.report import energy_notes, run_table
    from daybreak.analysis.sources import AnalyzedRun

    run = synth_run(seed=5)
    run.energy.unavailable = {"gpu": "nvml: the nvidia-ml-py package is not installed"}
    loaded = [AnalyzedRun(path=tmp_path / "r", result=run)]
    header, body = run_table(loaded)
    assert body[0][header.index("energy to target")] == "-"
    (note,) = energy_notes(loaded)
    assert note.startswith("No energy for") and "nvidia-ml-py" in note
    run2 = with_energy(synth_run(seed=6), watts=50.0)
    loaded2 = [AnalyzedRun(path=tmp_path / "r2", result=run2)]
    header, body = run_table(loaded2)
    from daybreak.analysis.report import joules

    assert body[0][header.index("energy to target")] == (
        f"{joules(run2.energy.joules_to_target['dawnbench'])} (gpu+cpu_package)")
    assert energy_notes(loaded2) == []


def test_report_shows_the_inference_energy(tmp_path):
    from daybreak.analysis.report import inference_section
    from daybreak.analysis.sources import AnalyzedRun
    from daybreak.records.inference import INFERENCE_FILE

    folder = tmp_path / "run"
    folder.mkdir()
    run = synth_run(seed=7)
    run.save(folder)
    (folder / INFERENCE_FILE).write_text(json.dumps(inference_doc(joules_per_10k=12.5)))
    section = inference_section([AnalyzedRun(path=folder, result=run)])
    (header, body), = [v for k, v in section.parts if k == "table"]
    assert body[0][header.index("energy per 10,000")] == "12.5 J (gpu)"
    (folder / INFERENCE_FILE).write_text(json.dumps(inference_doc(joules_per_10k=None)))
    section = inference_section([AnalyzedRun(path=folder, result=run)])
    (header, body), = [v for k, v in section.parts if k == "table"]
    assert body[0][header.index("energy per 10,000")] == "-"
    assert any(k == "text" and "no inference energy" in v and "does not exist" in v for k, v in section.parts)


# --- the leaderboard: reading records -------------------------------------------------------------------------


def test_objectives_and_their_display():
    assert OBJECTIVES["train-energy"].column == "train_energy_j" and OBJECTIVES["train-energy"].kind == "train"
    assert OBJECTIVES["inference-energy"].column == "inference_energy_10k_j"
    assert [format_joules(j) for j in (812.0, 12_345.0, 4.2e6, 7e9)] == ["812 J", "12.35 kJ", "4.2 MJ", "7 GJ"]
    assert format_joules(float("inf")) == "\u2014"


def test_a_run_ranks_on_its_dawnbench_joules_to_the_leaderboards_target():
    doc = energy_run_doc(watts=100.0)
    sub = parse_run(doc, source="r")
    run = synth_run()
    assert sub.time_to_target_s == pytest.approx(run.clocks["dawnbench"].time_to_target_s)
    assert sub.train_energy_j == pytest.approx(100.0 * sub.time_to_target_s, rel=1e-6)
    assert sub.train_energy_j == doc["energy"]["joules_to_target"]["dawnbench"]
    assert sub.energy_covers == "gpu+cpu_package" and any("energy to target" in n for n in sub.notes)
    plain = parse_run(json.loads(run.model_dump_json()), source="p")
    assert plain.train_energy_j is None and any("not ranked on train-energy" in n for n in plain.notes)


def test_an_inference_record_ranks_on_its_batch_1_joules_per_10k():
    sub = parse_inference(inference_doc(joules_per_10k=4.0), source="i")
    assert sub.inference_energy_10k_j == pytest.approx(4.0) and sub.energy_covers == "gpu"
    none = parse_inference(inference_doc(joules_per_10k=None), source="n")
    assert none.inference_energy_10k_j is None and any("does not exist" in n for n in none.notes)


def _bad_run(change):
    doc = energy_run_doc()
    change(doc)
    return doc


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d["history"][-1]["energy_j"].update(dawnbench=1e13), "out of range"),
    (lambda d: d["history"][-1]["energy_j"].update(dawnbench=-1.0), "energy_j.dawnbench: must be >= 0, not -1"),
    (lambda d: d["history"][1]["energy_j"].update(dawnbench=0.0), "goes back"),
    (lambda d: d["energy"]["joules_to_target"].update(dawnbench=1.0), "is not the history's"),
    # 1 uJ over a second of training: no counter reads that low; 1 MJ in a couple of seconds: no process draws it
    (lambda d: [h["energy_j"].update(dawnbench=1e-6 * (i + 1)) for i, h in enumerate(d["history"])],
     "below the 0.05 W"),
    (lambda d: [h["energy_j"].update(dawnbench=1e6 * (i + 1)) for i, h in enumerate(d["history"])],
     "above the 5000 W 1 process(es) can draw"),
    (lambda d: d["energy"].update(idle_power_w=1e300), "energy.idle_power_w"),
])
def test_implausible_energy_is_refused_in_one_line(change, fragment):
    doc = _bad_run(change)
    if fragment.startswith(("below", "above")):  # consistent with the history: only the power is wrong
        doc["energy"]["joules_to_target"] = dict(next(h for h in doc["history"] if h["accuracy"] >= 0.98)["energy_j"])
    with pytest.raises(SubmissionError) as err:
        parse_run(doc, source="bad")
    assert fragment in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("change, fragment", [
    (lambda w, r: w.update(joules_per_10k=1e13), "out of range"),
    (lambda w, r: w.update(joules_per_10k=w["joules_per_10k"] / 10), "is not joules / examples x 10,000"),
    (lambda w, r: w.update(examples=100), "does not cover the timed batch-1 pass"),
    (lambda w, r: w.update(seconds=w["timed_s"] * 50), "plus its loop's bookkeeping"),
    (lambda w, r: w.update(joules=1e-9, joules_per_10k=1e-9 / 450 * 10_000), "below the 0.05 W"),
])
def test_implausible_inference_energy_is_refused(change, fragment):
    doc = inference_doc()
    change(doc["energy"]["latency"], doc)
    with pytest.raises(SubmissionError) as err:
        parse_inference(doc, source="bad")
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_a_repeat_ranks_on_the_olympic_mean_of_its_runs_joules(tmp_path):
    from daybreak.analysis.repeat import seed_dir_name, summarize
    from daybreak.analysis.stats import olympic_mean

    folder = tmp_path / "rep"
    done = []
    for i, (speed, watts) in enumerate([(1.0, 100.0), (1.1, 90.0), (0.9, 120.0), (1.2, 80.0)]):
        r = with_energy(synth_run(seed=i, epoch_s=speed, run_id=f"rep-seed-{i}"), watts)
        (folder / seed_dir_name(i)).mkdir(parents=True)
        r.save(folder / seed_dir_name(i))
        done.append((seed_dir_name(i), r, False))
    summarize(done, inputs=[str(folder)]).save(folder)
    with Store(f"sqlite:///{tmp_path / 'rep.sqlite'}") as store:
        report = import_paths(store, [folder])
        assert report.stored == 1, report.to_json()
        (row,) = leaderboard(store, "digits", "train-energy")
        expected = olympic_mean([r.energy.joules_to_target["dawnbench"] for _, r, _ in done])
        assert row["value"] == pytest.approx(expected) and row["runs"]["n"] == 4
        assert row["display"].endswith("(gpu+cpu_package)") and row["energy_covers"] == "gpu+cpu_package"


# --- the leaderboard: a running server ---------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def srv(request, tmp_path_factory):
    store = make_store(request.param, tmp_path_factory.mktemp(f"energy-{request.param}"))
    with serving(store) as served:
        served.kind = request.param
        yield served
    store.close()


def test_entries_with_energy_rank_on_it_and_the_others_do_not_appear(srv):
    with srv.client() as c:
        frugal = post_json(c, json.dumps(energy_run_doc(seed=201, watts=50.0, epoch_s=1.2)).encode())
        hungry = post_json(c, json.dumps(energy_run_doc(seed=202, watts=300.0, epoch_s=0.8)).encode())
        plain = post_json(c, json.dumps(json.loads(synth_run(seed=203, epoch_s=0.7).model_dump_json())).encode())
        for r in (frugal, hungry, plain):
            assert r.status_code == 201, r.text
        dawn = upload(c, dawnbench_doc("No energy DB", date="2019-03-04"), dawnbench_tsv(), task="cifar10")
        assert dawn.status_code == 201, dawn.text
        times = [r["entry_id"] for r in c.get("/api/leaderboard/digits/train-time").json()]
        energy = c.get("/api/leaderboard/digits/train-energy").json()
        ids = [r["entry_id"] for r in energy]
        # the fastest entry has no energy: it ranks on time only; the slower, frugal one ranks first on energy
        assert plain.json()["id"] in times and plain.json()["id"] not in ids
        assert ids.index(frugal.json()["id"]) < ids.index(hungry.json()["id"])
        assert all(r["unit"] == "J" and r["value"] > 0 and r["energy_covers"] == "gpu+cpu_package" for r in energy)
        assert c.get("/api/leaderboard/cifar10/train-energy").json() == []  # DAWNBench files carry no energy
        entry = c.get(f"/api/entries/{frugal.json()['id']}").json()
        assert entry["train_energy_j"] == pytest.approx(energy[ids.index(frugal.json()["id"])]["value"])
        assert entry["energy_covers"] == "gpu+cpu_package"
        page = c.get("/tasks/digits/train-energy").text
        assert "Energy to target" in page and "(gpu+cpu_package)" in page
        assert "Training energy" in c.get(f"/entries/{frugal.json()['id']}").text

        fast = post_json(c, json.dumps(inference_doc(joules_per_10k=2.0, seed=1)).encode())
        slow = post_json(c, json.dumps(inference_doc(joules_per_10k=9.0, seed=2)).encode())
        none = post_json(c, json.dumps(inference_doc(joules_per_10k=None, seed=3)).encode())
        for r in (fast, slow, none):
            assert r.status_code == 201, r.text
        rows = c.get("/api/leaderboard/digits/inference-energy").json()
        assert [r["entry_id"] for r in rows][:2] == [fast.json()["id"], slow.json()["id"]]
        assert none.json()["id"] not in [r["entry_id"] for r in rows]
        assert rows[0]["display"] == "2 J (gpu)"
        # implausible energy: refused in one line, nothing stored
        before = len(c.get("/api/leaderboard/digits/train-time?top=1000").json())
        bad = energy_run_doc(seed=204)
        bad["history"][-1]["energy_j"]["dawnbench"] = 1e13  # under the JSON bound, over the energy bound
        r = post_json(c, json.dumps(bad).encode())
        assert r.status_code == 422 and "energy_j.dawnbench" in r.json()["error"], r.text
        bad_inf = inference_doc(seed=5)
        bad_inf["energy"]["latency"]["joules_per_10k"] = 1e13
        r = post_json(c, json.dumps(bad_inf).encode())
        assert r.status_code == 422 and "joules_per_10k" in r.json()["error"], r.text
        assert len(c.get("/api/leaderboard/digits/train-time?top=1000").json()) == before


# --- the leaderboard: upgrading a version-2 database ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_version_2_database_gets_its_energy_columns_filled_in_place(kind, tmp_path):
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'v2.sqlite'}" if kind == "sqlite" else _pg_schema_url("daybreak_energy_v2")
    runs = tmp_path / "runs"
    for name, doc in (("a", energy_run_doc(seed=301, watts=80.0)), ("b", energy_run_doc(seed=302, watts=20.0)),
                      ("c", json.loads(synth_run(seed=303).model_dump_json()))):
        (runs / name).mkdir(parents=True)
        (runs / name / "result.json").write_text(json.dumps(doc))
    (runs / "a" / "inference.json").write_text(json.dumps(inference_doc(joules_per_10k=3.0)))
    with Store(url) as store:
        assert import_paths(store, [runs]).stored == 4
        expected = {r["entry_id"]: r["value"] for r in leaderboard(store, "digits", "train-energy")}
        assert len(expected) == 2
        with store.engine.begin() as conn:  # what a version-2 daybreak left: no energy columns, v2 in the meta
            for column in ("train_energy_j", "inference_energy_10k_j", "energy_covers"):
                conn.execute(text(f"ALTER TABLE daybreak_leaderboard_entries DROP COLUMN {column}"))
            conn.execute(text("UPDATE daybreak_leaderboard_meta SET value = '2' WHERE key = 'schema_version'"))
            # a provenance the host set (a reproduction): the upgrade must keep it
            conn.execute(text("UPDATE daybreak_leaderboard_entries SET provenance = 'reproduced' "
                              f"WHERE id = {min(expected)}"))
    with Store(url) as store:
        assert store.migrated and "from schema v2 to v6" in store.migrated[0] and "energy" in store.migrated[0]
        got = {r["entry_id"]: r["value"] for r in leaderboard(store, "digits", "train-energy")}
        assert got == pytest.approx(expected)
        (inf,) = leaderboard(store, "digits", "inference-energy")
        assert inf["value"] == pytest.approx(3.0) and inf["display"] == "3 J (gpu)"
        assert store.get(min(expected)).provenance == "reproduced"
        assert Site(store).index_html()
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT value FROM daybreak_leaderboard_meta WHERE key = 'schema_version'")
                                ).scalar() == "6"
    with Store(url) as store:
        assert not store.migrated  # once
        assert all(math.isfinite(r["value"]) for r in leaderboard(store, "digits", "train-energy"))
