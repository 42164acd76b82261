"""`daybreak leaderboard import-mlperf`: a results tree in the published MLPerf Training layout -> scored entries.

The tree is written here, small, in the exact layout of github.com/mlcommons/training_results_v4.0:
``<submitter>/systems/<system>.json`` and ``<submitter>/results/<system>/<benchmark>/result_<n>.txt``, each log a
complete closed-division log as MLPerf's compliance checker wants it (so mlperf-logging's own summarizer can score
the same folders). Two submitters, three systems:

- Alpha/alpha_n1 (1 x 8 H100, available): resnet, 5 runs with one fast and one slow; bert, 10 runs of which one
  stops ``aborted`` below the target (a non-converged run: it counts as the slowest and is dropped);
- Alpha/alpha_n2 (2 x 8 H100, in the cloud): resnet, 5 runs; bert, 10 runs of which one log is malformed (reported,
  and counted as a run that did not converge, as MLPerf's summarizer drops a log that does not parse);
- Beta/beta_box (1 x 4 RTX 4090, preview): resnet with 4 result files where v4.0 requires 5 (stored, not scored).
"""

import json
import math
from pathlib import Path

import pytest

from daybreak.cli import main
from daybreak.leaderboard.ingest.importer import import_paths
from daybreak.leaderboard.mlperf_import import import_mlperf, mlperf_score
from daybreak.leaderboard.ingest.submission import PROVENANCE_SELF
from daybreak.leaderboard.ranking.objectives import leaderboard
from daybreak.leaderboard.store.database import Store
from daybreak.leaderboard.web.pages import Site
from daybreak.mlperf_benchmarks import benchmark_of
from daybreak.leaderboard.tasks import leaderboard_task
from daybreak.records.run import RunResult

from conftest import single_line

T0 = 1_715_000_000_000  # 2024-05-06, epoch milliseconds
ROUND = "training_results_v4.0"

# (run_start - T0, run_stop - run_start) in milliseconds for each result file; the expected scores below are
# computed by hand from exactly these numbers.
ALPHA_N1_RESNET = [1_800_500, 1_500_000, 1_700_250, 2_400_000, 1_650_000]  # one fast (1500 s), one slow (2400 s)
ALPHA_N2_RESNET = [900_000, 950_500, 1_000_250, 870_000, 1_200_000]
BETA_RESNET = [3_000_000, 3_100_000, 3_200_000, 3_300_000]  # 4 files: v4.0 requires 5
ALPHA_N1_BERT = [600_000, 610_500, 620_000, 590_000, 605_000, 615_250, 700_000, 598_000, 640_000, 650_000]
ALPHA_N1_BERT_ABORTED = 9  # result_9 stops "aborted" at 71.0%: did not converge
ALPHA_N2_BERT = [400_000, 410_000, 420_000, 430_000, 440_000, 450_000, 460_000, 470_000, 480_000, 300_000]
ALPHA_N2_BERT_MALFORMED = 9  # result_9 has a broken record (it would have been the fastest, 300 s)

# MLPerf's olympic mean, by hand:
# resnet (5 runs): drop the fastest and the slowest, average the 3 left
ALPHA_N1_RESNET_SCORE = (1650.0 + 1700.25 + 1800.5) / 3  # 1500 and 2400 dropped -> 1716.916...
ALPHA_N2_RESNET_SCORE = (900.0 + 950.5 + 1000.25) / 3  # 870 and 1200 dropped -> 950.25
# bert (10 runs), one run did not converge: it is the slowest dropped; the fastest converged run (590 s) is dropped
ALPHA_N1_BERT_SCORE = (598.0 + 600.0 + 605.0 + 610.5 + 615.25 + 620.0 + 640.0 + 700.0) / 8  # 623.59375
# bert with a malformed log: likewise (the malformed run is the dropped slowest; 400 s is the dropped fastest)
ALPHA_N2_BERT_SCORE = (410.0 + 420.0 + 430.0 + 440.0 + 450.0 + 460.0 + 470.0 + 480.0) / 8  # 445.0


# --- writing the tree ---------------------------------------------------------------------------------------------
def record(key, value, time_ms, event_type="POINT_IN_TIME", **metadata) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": event_type, "key": key,
                                     "value": value, "metadata": {"file": "train.py", "lineno": 1, **metadata}})


HYPERPARAMETERS = {
    "resnet": [("global_batch_size", 3264), ("opt_name", "lars"), ("gradient_accumulation_steps", 1),
               ("lars_opt_base_learning_rate", 10.5), ("lars_opt_end_learning_rate", 0.0001),
               ("lars_opt_learning_rate_decay_poly_power", 2), ("lars_opt_learning_rate_decay_steps", 36),
               ("lars_epsilon", 0.0), ("lars_opt_learning_rate_warmup_epochs", 2), ("lars_opt_momentum", 0.9),
               ("lars_opt_weight_decay", 0.0002), ("train_samples", 1281167), ("eval_samples", 50000)],
    "bert": [("global_batch_size", 448), ("gradient_accumulation_steps", 1), ("opt_base_learning_rate", 0.00096),
             ("opt_lamb_epsilon", 1e-06), ("opt_learning_rate_training_steps", 7100),
             ("opt_learning_rate_warmup_steps", 0), ("num_warmup_steps", 0), ("start_warmup_step", 0),
             ("opt_lamb_beta_1", 0.6), ("opt_lamb_beta_2", 0.7), ("opt_lamb_weight_decay_rate", 0.1),
             ("train_samples", 156725653), ("eval_samples", 10000)],
}
ACCURACIES = {"resnet": (0.52, 0.71, 0.7601), "bert": (0.55, 0.69, 0.7205)}


def result_log(benchmark: str, org: str, platform: str, start_ms: int, duration_ms: int, *, status="success",
               reach=True, broken=False) -> str:
    """A closed-division MLPerf v4.0 log: init, run_start, three epochs each ending with an evaluation, run_stop
    ``duration_ms`` after run_start (the last evaluation 500 ms before it)."""
    t_init = start_ms - 120_000
    lines = [record(k, v, t_init) for k, v in (("submission_org", org), ("submission_platform", platform),
                                                ("submission_division", "closed"), ("submission_status", "onprem"),
                                                ("submission_benchmark", benchmark), ("cache_clear", True))]
    lines.append(record("init_start", None, t_init + 10, "INTERVAL_START"))
    lines += [record(k, v, t_init + 20) for k, v in HYPERPARAMETERS[benchmark]]
    lines.append(record("seed", 1234, t_init + 30))
    lines.append(record("init_stop", None, start_ms - 1_000, "INTERVAL_END"))
    lines.append(record("run_start", None, start_ms, "INTERVAL_START"))
    accuracies = ACCURACIES[benchmark] if reach else (0.52, 0.69, 0.71)
    ends = [start_ms + duration_ms // 3, start_ms + 2 * duration_ms // 3, start_ms + duration_ms - 500]
    begin = start_ms
    for epoch, (end, accuracy) in enumerate(zip(ends, accuracies), start=1):
        lines.append(record("epoch_start", None, begin, "INTERVAL_START", epoch_num=epoch))
        lines.append(record("epoch_stop", None, end - 2_000, "INTERVAL_END", epoch_num=epoch))
        lines.append(record("eval_start", None, end - 2_000, "INTERVAL_START", epoch_num=epoch))
        lines.append(record("eval_accuracy", accuracy, end, epoch_num=epoch))
        lines.append(record("eval_stop", None, end, "INTERVAL_END", epoch_num=epoch))
        begin = end
    if broken:
        lines.insert(len(lines) // 2, ':::MLLOG {"namespace": "", "time_ms": ' + str(start_ms) + ', "key": "eval_')
    lines.append(record("run_stop", None, start_ms + duration_ms, "INTERVAL_END", status=status))
    return "\n".join(lines) + "\n"


def system_json(name: str, *, status: str, nodes: int, per_node: int, accelerator: str, cpu: str,
                framework: str, submitter: str) -> dict:
    return {"submitter": submitter, "division": "closed", "status": status, "system_name": name,
            "number_of_nodes": str(nodes), "host_processors_per_node": "2", "host_processor_model_name": cpu,
            "host_processor_core_count": "56", "host_memory_capacity": "2 TB", "accelerators_per_node": str(per_node),
            "accelerator_model_name": accelerator, "accelerator_memory_capacity": "80 GB", "framework": framework,
            "other_software_stack": {"cuda_version": "12.4"}, "operating_system": "Ubuntu 22.04", "sw_notes": ""}


def write_results(root: Path, submitter: str, system: str, benchmark: str, durations: list[int],
                  special: dict[int, dict] | None = None) -> None:
    folder = root / submitter / "results" / system / benchmark
    folder.mkdir(parents=True, exist_ok=True)
    for i, duration in enumerate(durations):
        start = T0 + 3_600_000 * (i + 1) + (0 if benchmark == "resnet" else 100_000_000)
        kwargs = (special or {}).get(i, {})
        (folder / f"result_{i}.txt").write_text(result_log(benchmark, submitter, system, start, duration, **kwargs))


def write_tree(base: Path) -> Path:
    root = base / ROUND
    systems = {
        ("Alpha", "alpha_n1"): dict(status="available", nodes=1, per_node=8, accelerator="NVIDIA H100-SXM5-80GB",
                                    cpu="Intel(R) Xeon(R) Platinum 8480C", framework="PyTorch 2.2.0"),
        ("Alpha", "alpha_n2"): dict(status="Available cloud", nodes=2, per_node=8, accelerator="NVIDIA H100-SXM5-80GB",
                                    cpu="Intel(R) Xeon(R) Platinum 8480C", framework="MXNet NVIDIA Release 24.04"),
        ("Beta", "beta_box"): dict(status="preview", nodes=1, per_node=4, accelerator="NVIDIA GeForce RTX 4090",
                                   cpu="AMD EPYC 7532 32-Core Processor", framework="tinygrad, commit 0123abcd"),
    }
    for (submitter, system), fields in systems.items():
        (root / submitter / "systems").mkdir(parents=True, exist_ok=True)
        doc = system_json(system, submitter=submitter, **fields)
        (root / submitter / "systems" / f"{system}.json").write_text(json.dumps(doc, indent=4))
    (root / "Alpha" / "benchmarks" / "resnet" / "implementations").mkdir(parents=True)  # source code: not read
    (root / "Alpha" / "benchmarks" / "resnet" / "implementations" / "README.md").write_text("the code\n")
    (root / "README.md").write_text("MLPerf Training v4.0 results\n")
    write_results(root, "Alpha", "alpha_n1", "resnet", ALPHA_N1_RESNET)
    write_results(root, "Alpha", "alpha_n1", "bert", ALPHA_N1_BERT,
                  {ALPHA_N1_BERT_ABORTED: {"status": "aborted", "reach": False}})
    write_results(root, "Alpha", "alpha_n2", "resnet", ALPHA_N2_RESNET)
    write_results(root, "Alpha", "alpha_n2", "bert", ALPHA_N2_BERT, {ALPHA_N2_BERT_MALFORMED: {"broken": True}})
    write_results(root, "Beta", "beta_box", "resnet", BETA_RESNET)
    return root


@pytest.fixture
def tree(tmp_path):
    return write_tree(tmp_path)


@pytest.fixture
def store(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'lb.sqlite'}") as s:
        yield s


def by_source(store) -> dict:
    return {e.source.split("/results/")[1]: e for e in store.entries() if e.source_format == "mlperf-training"}


# --- the import -------------------------------------------------------------------------------------------------
def test_import_ranks_systems_by_mlperfs_olympic_mean(tree, store):
    round_, report = import_mlperf(store, tree)
    assert round_ == "v4.0"  # from the folder's name
    assert report.stored == 5 and report.duplicates == 0
    # the malformed log, one line, and nothing else skipped (benchmarks/ and README.md are not part of results/)
    assert [(Path(o.path).relative_to(tree).as_posix(), o.status) for o in report.problems()] == [
        ("Alpha/results/alpha_n2/bert/result_9.txt", "skipped")]
    assert "invalid JSON" in report.problems()[0].reason and single_line(report.problems()[0].reason)

    entries = by_source(store)
    assert set(entries) == {"alpha_n1/resnet", "alpha_n1/bert", "alpha_n2/resnet", "alpha_n2/bert", "beta_box/resnet"}
    assert entries["alpha_n1/resnet"].time_to_target_s == pytest.approx(ALPHA_N1_RESNET_SCORE, abs=1e-9)
    assert entries["alpha_n2/resnet"].time_to_target_s == pytest.approx(ALPHA_N2_RESNET_SCORE, abs=1e-9)
    assert entries["alpha_n1/bert"].time_to_target_s == pytest.approx(ALPHA_N1_BERT_SCORE, abs=1e-9)
    assert entries["alpha_n2/bert"].time_to_target_s == pytest.approx(ALPHA_N2_BERT_SCORE, abs=1e-9)
    assert entries["beta_box/resnet"].time_to_target_s is None  # 4 of the 5 required files: not a valid result

    # the ranking: ResNet-50 on the imagenet board, BERT on its own
    rows = leaderboard(store, "imagenet", "train-time")
    assert [(r["model"], r["value"]) for r in rows] == [
        ("MLPerf ResNet-50 v1.5 (Alpha, alpha_n2)", pytest.approx(950.25)),
        ("MLPerf ResNet-50 v1.5 (Alpha, alpha_n1)", pytest.approx(ALPHA_N1_RESNET_SCORE))]
    rows = leaderboard(store, "mlperf-bert", "train-time")
    assert [(r["model"], r["value"]) for r in rows] == [
        ("MLPerf BERT-large (Alpha, alpha_n2)", pytest.approx(445.0)),
        ("MLPerf BERT-large (Alpha, alpha_n1)", pytest.approx(623.59375))]
    assert leaderboard(store, "squad", "train-time") == []  # MLPerf BERT is not SQuAD

    # each run's time, run_stop - run_start, and the multi-run statistics
    n1 = entries["alpha_n1/resnet"]
    assert n1.run_times == [d / 1000.0 for d in ALPHA_N1_RESNET]
    assert (n1.runs_n, n1.runs_reached) == (5, 5)
    bert = entries["alpha_n1/bert"]
    assert (bert.runs_n, bert.runs_reached) == (10, 9)
    assert bert.run_times == [d / 1000.0 for i, d in enumerate(ALPHA_N1_BERT) if i != ALPHA_N1_BERT_ABORTED]
    assert (entries["alpha_n2/bert"].runs_n, entries["alpha_n2/bert"].runs_reached) == (10, 9)


def test_entries_say_their_rules_round_division_and_system(tree, store):
    import_mlperf(store, tree)
    entries = by_source(store)
    n1, n2, beta = entries["alpha_n1/resnet"], entries["alpha_n2/resnet"], entries["beta_box/resnet"]
    for e in entries.values():
        assert (e.clock_rules, e.mlperf_round, e.division) == ("mlperf", "v4.0", "closed")
        assert e.provenance == PROVENANCE_SELF and "MLPerf Training v4.0 closed division" in e.provenance_detail
        assert e.source_format == "mlperf-training" and e.kind == "train"
    assert (n1.task, n1.metric, n1.target, n1.accuracy) == ("imagenet", "top1", 0.759, 0.7601)
    assert entries["alpha_n1/bert"].task == "mlperf-bert" and entries["alpha_n1/bert"].target == 0.72
    # the structured system, from systems/<system>.json
    assert (n1.accelerator, n1.accelerator_count, n1.cpu) == ("NVIDIA H100", 8, "Intel(R) Xeon(R) Platinum 8480C")
    assert (n1.framework_name, n1.framework_version, n1.cloud_instance) == ("PyTorch", "2.2.0", None)
    assert n1.hardware == ("alpha_n1; 1 node x 8 NVIDIA H100-SXM5-80GB; 2 x Intel(R) Xeon(R) Platinum 8480C per "
                           "node")
    assert (n2.accelerator_count, n2.framework_name, n2.framework_version) == (16, "MXNet", None)  # no version
    assert n2.cloud_instance == "alpha_n2" and n2.availability == "available"
    assert (beta.availability, beta.accelerator, beta.framework_name) == ("preview", "NVIDIA GeForce RTX 4090",
                                                                          "tinygrad")
    assert n1.author == "Alpha" and n1.model == "MLPerf ResNet-50 v1.5 (Alpha, alpha_n1)"

    # the notes: the scoring, the rule-set difference, what did not converge, why an entry is not scored
    notes = " | ".join(n1.notes)
    assert "olympic mean 1716.917 s (28.615 min) of 3 runs, the fastest and the slowest dropped" in notes
    assert "MLPerf rules, not DAWNBench's: target 75.9% top-1 accuracy" in notes
    assert "93% top-5" in notes and "evaluation included" in notes and "evaluation and checkpoints excluded" in notes
    bert = " | ".join(entries["alpha_n1/bert"].notes)
    assert "result_9.txt did not converge: run_stop status 'aborted'" in bert
    assert "of 8 runs, the fastest and the run that did not converge (counted as the slowest) dropped" in bert
    assert "DAWNBench" not in bert  # BERT is not ranked beside a DAWNBench task
    malformed = " | ".join(entries["alpha_n2/bert"].notes)
    assert "result_9.txt did not converge: malformed log (line" in malformed
    assert any(n.startswith("not scored: 4 result files; MLPerf Training v4.0 requires exactly 5 for ResNet-50 v1.5")
               for n in beta.notes)
    assert all(single_line(n) for e in entries.values() for n in e.notes)


def test_each_runs_time_is_daybreak_times_reading(tree, store, tmp_path):
    """The time stored for a run is what `daybreak time --log` reads from the same file under MLPerf's rules."""
    import_mlperf(store, tree)
    n1 = by_source(store)["alpha_n1/resnet"]
    log = tree / "Alpha" / "results" / "alpha_n1" / "resnet" / "result_3.txt"
    assert main(["time", "--rules", "mlperf", "--log", str(log), "--out", str(tmp_path / "timed"), "-q"]) == 0
    assert RunResult.load(tmp_path / "timed").time_to_target_s == n1.run_times[3] == 2400.0


def test_reimport_stores_nothing_new(tree, store):
    import_mlperf(store, tree)
    count = store.count()
    _, again = import_mlperf(store, tree, "v4.0")
    assert again.stored == 0 and again.duplicates == 5 and store.count() == count == 5


def test_the_imagenet_board_mixes_dawnbench_and_mlperf_rows_with_their_rules(tree, store, tmp_path):
    dawn = tmp_path / "dawnbench" / "ImageNet" / "train"
    dawn.mkdir(parents=True)
    doc = {"version": "v1.0", "author": "Someone", "authorEmail": "a@example.com", "framework": "PyTorch 1.0",
           "codeURL": "https://example.com", "model": "ResNet-50 DAWN", "hardware": "8 V100", "timestamp": "2018-04-20",
           "costPerHour": 24.0, "misc": {}}
    (dawn / "resnet50.json").write_text(json.dumps(doc))
    (dawn / "resnet50.tsv").write_text("epoch\thours\ttop5Accuracy\n1\t0.5\t80.0\n2\t1.0\t93.1\n")
    assert import_paths(store, [tmp_path / "dawnbench"]).stored == 1
    import_mlperf(store, tree)

    rows = leaderboard(store, "imagenet", "train-time")
    assert [(r["value"], r["rule_set"]["clock_rules"]) for r in rows] == [
        (pytest.approx(950.25), "mlperf"), (pytest.approx(ALPHA_N1_RESNET_SCORE), "mlperf"), (3600.0, "dawnbench")]
    assert rows[0]["rule_set"]["label"] == "MLPerf Training v4.0 closed division"
    assert rows[0]["rule_set"]["target_label"] == "75.9% top-1 accuracy"

    site = Site(store)
    board = site.board_html("imagenet", "train-time")
    note = leaderboard_task("imagenet").notes[0]
    assert "75.9% top-1" in note and "93% top-5" in note and "run_start" in note and "olympic mean" in note
    assert "beside DAWNBench&#39;s entries" in board and "DAWNBench v1" in board
    assert board.count("MLPerf v4.0 closed<br><span class=\"muted\">target 75.9% top-1 accuracy</span>") == 2
    mlperf_board = site.board_html("mlperf-bert", "train-time")
    assert "Not SQuAD" in mlperf_board and "masked-LM accuracy" in mlperf_board and "F1 0.75" in mlperf_board
    index = site.index_html()
    assert "MLPerf BERT-large" in index and "MLPerf RetinaNet" not in index  # empty MLPerf boards stay off the index

    entry = by_source(store)["beta_box/resnet"]
    page = site.entry_html(store.get(entry.id))
    assert "not ranked (not scored: 4 result files" in page and "76.01% top-1 accuracy" in page
    assert "MLPerf Training v4.0 closed division (preview)" in page

    # the static export renders every board holding entries and every entry
    assert main(["leaderboard", "export", str(tmp_path / "site"), "--db", store.url]) == 0
    assert (tmp_path / "site" / "tasks" / "mlperf-bert" / "train-time.html").is_file()
    assert not (tmp_path / "site" / "tasks" / "mlperf-retinanet").exists()
    exported = json.loads((tmp_path / "site" / "api" / "leaderboard" / "imagenet" / "train-time.json").read_text())
    assert [r["rule_set"]["clock_rules"] for r in exported] == ["mlperf", "mlperf", "dawnbench"]


def test_mlperf_loggings_own_summarizer_gives_the_same_scores(tree, store):
    """mlperf-logging's result summarizer (compliance check of each log, olympic scoring) on the same folders."""
    summarizer = pytest.importorskip("mlperf_logging.result_summarizer.result_summarizer")
    import_mlperf(store, tree)
    for source, entry in by_source(store).items():
        if entry.time_to_target_s is None:
            continue
        system, benchmark = source.split("/")
        folder = tree / ("Beta" if system.startswith("beta") else "Alpha") / "results" / system / benchmark
        minutes, _, _ = summarizer._compute_strong_score_standalone(benchmark, system, False, str(folder),
                                                                     "training", "4.0.0")
        assert minutes * 60 == pytest.approx(entry.time_to_target_s, abs=1e-6), source


# --- the scoring rule -------------------------------------------------------------------------------------------
def test_score_rule():
    resnet, unet = benchmark_of("resnet", "v4.0"), benchmark_of("unet3d", "v4.0")
    assert mlperf_score([5.0, 1.0, 3.0, 4.0, 2.0], 0, resnet, 5, "v4.0").seconds == 3.0
    assert mlperf_score([1.0, 2.0, 3.0, 4.0], 1, resnet, 5, "v4.0").seconds == 3.0  # the failed one: the slowest
    assert mlperf_score([1.0, 2.0, 3.0], 2, resnet, 5, "v4.0").seconds is None  # two did not converge: invalid
    assert mlperf_score([2.0, 3.0, 4.0], 0, resnet, 3, "v4.0").seconds is None  # too few files
    assert mlperf_score([2.0, 3.0, 4.0, 5.0, 6.0], 0, resnet, 5, "v4.0", scaling_factor=1.5).seconds == 6.0
    assert "too few" not in mlperf_score([1.0] * 6, 0, resnet, 6, "v4.0").why_not
    times = [float(t) for t in range(1, 41)]
    assert mlperf_score(times, 0, unet, 40, "v4.0").seconds == sum(range(5, 37)) / 32  # 4 dropped at each end
    assert mlperf_score(times[:36], 4, unet, 40, "v4.0").seconds == sum(range(5, 37)) / 32
    assert mlperf_score(times[:35], 5, unet, 40, "v4.0").seconds is None
    assert benchmark_of("bert", "v0.7").target("v0.7", 8192) == 0.706
    assert benchmark_of("bert", "v0.7").target("v0.7", 4096) == 0.712
    assert benchmark_of("ssd", "v1.0").board == "mlperf-ssd" and benchmark_of("ssd", "v4.0").board == "mlperf-retinanet"
    assert benchmark_of("resnet", "v4.1") is None  # ResNet-50 left the suite after v4.0


def test_scaling_json_multiplies_the_score(tree, store):
    folder = tree / "Alpha" / "results" / "alpha_n2" / "resnet"
    (folder / "scaling.json").write_text(json.dumps({"scaling_factor": 1.1}))
    import_mlperf(store, tree)
    entry = by_source(store)["alpha_n2/resnet"]
    assert entry.time_to_target_s == pytest.approx(950.25 * 1.1)
    assert any("scaling factor 1.1 (scaling.json)" in n for n in entry.notes)


# --- the command ------------------------------------------------------------------------------------------------
def test_command_reports_each_problem_on_one_line(tree, tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    stray = tree / "Beta" / "results" / "beta_box" / "result_7.txt"
    stray.write_text("misplaced\n")
    (tree / "Beta" / "results" / "beta_box" / "maskrcnn").mkdir()
    assert main(["leaderboard", "import-mlperf", str(tree), "--db", db]) == 1
    out, err = capsys.readouterr()
    problems = err.strip().splitlines()
    assert len(problems) == 3 and all(line.startswith("skipped ") for line in problems)
    assert any("alpha_n2/bert/result_9.txt: line" in p and "counted as a run that did not converge" in p
               for p in problems)
    assert any("beta_box/result_7.txt: a file directly under a system folder" in p for p in problems)
    assert any("beta_box/maskrcnn: 'maskrcnn' is not a benchmark of MLPerf Training v4.0" in p for p in problems)
    assert "(entry 5; not scored: 4 result files" in out
    assert out.strip().splitlines()[-1].startswith("imported MLPerf Training v4.0 into")
    assert "5 stored, 0 already stored, 3 skipped" in out

    assert main(["leaderboard", "import-mlperf", str(tree), "--db", db, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert (report["round"], report["stored"], report["duplicates"]) == ("v4.0", 0, 5)

    assert main(["leaderboard", "show", "--task", "imagenet", "--objective", "train-time", "--db", db]) == 0
    table = capsys.readouterr().out
    assert "MLPerf v4.0 closed" in table and "alpha_n2" in table


@pytest.mark.parametrize("args, message", [
    (["--round", "v3.1"], "--round v3.1 but the folder"),
    (["--round", "0.6"], "':::MLL <seconds> key: ...' lines"),
    (["--round", "v9.9"], "not one daybreak knows the rules of"),
    (["--round", "latest"], "give an MLPerf Training round such as v4.0"),
])
def test_command_errors_are_one_line(tree, tmp_path, capsys, args, message):
    db = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    assert main(["leaderboard", "import-mlperf", str(tree), "--db", db, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("daybreak: error: ") and message in err and single_line(err.strip())


def test_dawnbench_import_does_not_take_an_mlperf_board(tmp_path, capsys):
    (tmp_path / "x.json").write_text("{}")
    assert main(["leaderboard", "import", str(tmp_path / "x.json"), "--task", "mlperf-bert",
                 "--db", f"sqlite:///{tmp_path / 'cli.sqlite'}"]) == 2
    assert "import-mlperf" in capsys.readouterr().err


def test_a_folder_that_is_not_a_results_tree(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    (tmp_path / "training_results_v4.0" / "Alpha" / "benchmarks").mkdir(parents=True)
    assert main(["leaderboard", "import-mlperf", str(tmp_path / "training_results_v4.0"), "--db", db]) == 2
    err = capsys.readouterr().err
    assert "not an MLPerf Training results tree" in err and single_line(err.strip())
    assert main(["leaderboard", "import-mlperf", str(tmp_path), "--db", db]) == 2
    assert "give the round with --round" in capsys.readouterr().err


def test_one_submitters_folder_and_a_missing_systems_json(tree, store):
    (tree / "Beta" / "systems" / "beta_box.json").unlink()
    _, report = import_mlperf(store, tree / "Alpha")  # the round from the parent's name
    assert report.stored == 4 and len(report.problems()) == 1  # the malformed log
    _, report = import_mlperf(store, tree / "Beta")
    assert report.stored == 0 and [o.reason for o in report.problems()] == [
        f"{tree / 'Beta' / 'systems' / 'beta_box.json'}: missing: every results/<system> needs its "
        "systems/<system>.json"]


def test_finite_everything(tree, store):
    """Every stored number is finite: the entries' documents are plain JSON."""
    import_mlperf(store, tree)
    for e in store.entries():
        json.dumps(e.document, allow_nan=False)
        assert all(math.isfinite(t) for t in e.run_times)


def test_a_dawnbench_file_cannot_land_on_an_mlperf_board():
    from daybreak.leaderboard.ingest.importer import parse_submission
    from daybreak.leaderboard.ingest.submission import SubmissionError

    doc = {"version": "v1.0", "author": "x", "model": "m", "hardware": "h", "framework": "PyTorch",
           "timestamp": "2019-01-01", "misc": {"daybreakTask": "mlperf-bert"}}
    tsv = b"epoch\thours\ttop1Accuracy\n1\t0.1\t95\n"
    for task in ("mlperf-bert", None):
        with pytest.raises(SubmissionError, match="mlperf-bert is an MLPerf benchmark's board: it takes MLPerf "
                                                  "results only"):
            parse_submission(json.dumps(doc).encode(), tsv, source="x.json", task=task)


def test_a_system_of_several_frameworks_is_stored_with_its_benchmarks(tree, store):
    """A systems JSON listing several frameworks (Dell's v3.1 'NGC MXNet 23.09, NGC PyTorch 23.09, NGC HugeCTR
    23.09'): each benchmark's entry gets the one its implementation folder names (resnet: mxnet, bert: pytorch),
    and, where no folder tells, all of them with a note; never the first alone."""
    listed = "NGC MXNet 23.09, NGC PyTorch 23.09, NGC HugeCTR 23.09"
    doc_path = tree / "Alpha" / "systems" / "alpha_n1.json"
    doc = json.loads(doc_path.read_text())
    doc_path.write_text(json.dumps({**doc, "framework": listed}))
    (tree / "Alpha" / "benchmarks" / "resnet" / "implementations" / "mxnet").mkdir()
    (tree / "Alpha" / "benchmarks" / "bert" / "implementations" / "pytorch").mkdir(parents=True)
    import_mlperf(store, tree)
    entries = by_source(store)
    resnet, bert = entries["alpha_n1/resnet"], entries["alpha_n1/bert"]
    assert (resnet.framework, resnet.framework_name) == ("NGC MXNet 23.09", "MXNet")
    assert (bert.framework, bert.framework_name) == ("NGC PyTorch 23.09", "PyTorch")
    assert any("bert's is NGC PyTorch 23.09, the one its implementation folder benchmarks/bert/implementations/pytorch"
               in n for n in bert.notes)
    # the other system lists one framework: as before, no note
    assert entries["alpha_n2/resnet"].framework_name == "MXNet" and not any("frameworks" in n
                                                                          for n in entries["alpha_n2/resnet"].notes)


def test_a_system_of_several_frameworks_without_a_folder_that_tells_keeps_them_all(tree, store):
    doc_path = tree / "Alpha" / "systems" / "alpha_n1.json"
    doc_path.write_text(json.dumps({**json.loads(doc_path.read_text()), "framework": "PyTorch 2.2.0, JAX 0.4.26"}))
    import_mlperf(store, tree)
    bert = by_source(store)["alpha_n1/bert"]
    assert (bert.framework, bert.framework_name) == ("PyTorch 2.2.0, JAX 0.4.26", "PyTorch / JAX")
    assert any("lists 2 frameworks (PyTorch 2.2.0, JAX 0.4.26) and the tree has no benchmarks/bert/implementations/ "
               "folder to tell which bert used: all are kept" in n for n in bert.notes)
