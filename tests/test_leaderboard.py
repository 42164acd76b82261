"""Leaderboard records, import and ranking: the 187 real DAWNBench v1 files, hand-made entries, daybreak records."""

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from daybreak.cli import main
from daybreak.leaderboard.ingest.dawnbench_import import parse_tsv
from daybreak.leaderboard.ingest.importer import import_paths, parse_submission
from daybreak.leaderboard.ranking.objectives import format_hms, format_ms, format_usd, leaderboard, rank_entries, get_objective
from daybreak.leaderboard.store.database import Store
from daybreak.leaderboard.ingest.submission import SubmissionError

from conftest import single_line

ENTRIES = Path(os.environ.get("DAYBREAK_DAWNBENCH_ENTRIES")
               or Path(__file__).resolve().parents[2] / "shared/data/dawnbench-entries")
needs_entries = pytest.mark.skipif(not ENTRIES.is_dir(), reason=f"DAWNBench entries not found at {ENTRIES}")

# What the 187 real files hold: (task, kind) -> entries. Training entries are a JSON + its TSV (69 pairs = 138
# files); inference entries are a JSON alone (49 files). None of them is refused: every training TSV reaches its
# task's target with increasing hours, and every inference accuracy is at or above it. What the reader has to
# tolerate: a UTF-8 BOM + CRLF TSV (KRes34), CRLF TSVs (lambda BaiduNet9, google resnet50 tpu 17/18/pod,
# fastfusionnet), trailing blank lines (Intel ResNet50/56, fastai 4-machine, google tpu 111 fastai), `hours`
# before `epoch` (dawn resnet152 4M60/8k80, ppwwyyxx), `f1Score` before `hours` with spaces around cells (DrQA),
# timestamps without zero padding (2018-4-18, 2019-7-22, 2019-6-27), costPerHour/cost null or missing (then the
# entry is ranked on time/latency only), codeURL missing or null, `misc` as a string (ppwwyyxx), and SQuAD F1 as a
# fraction everywhere except one inference file that writes it in percent (FastFusionNet, 82.52).
REAL_COUNTS = {("cifar10", "train"): 31, ("cifar10", "inference"): 21, ("imagenet", "train"): 27,
               ("imagenet", "inference"): 22, ("squad", "train"): 11, ("squad", "inference"): 6}
# Ranked rows per task and objective (train-cost / inference-cost only where the file gives a price).
REAL_RANKED = {
    "cifar10": {"train-time": 31, "train-cost": 20, "latency": 21, "inference-cost": 13},
    "imagenet": {"train-time": 27, "train-cost": 17, "latency": 22, "inference-cost": 10},
    "squad": {"train-time": 11, "train-cost": 7, "latency": 6, "inference-cost": 3},
}
TARGET = {"CIFAR10": ("top1Accuracy", 94.0), "ImageNet": ("top5Accuracy", 93.0), "SQuAD": ("f1Score", 0.75)}


def db_url(tmp_path: Path, name: str = "lb.sqlite") -> str:
    return f"sqlite:///{tmp_path / name}"


@pytest.fixture
def store(tmp_path):
    with Store(db_url(tmp_path)) as s:
        yield s


# --- hand-made DAWNBench submissions ------------------------------------------------------------------------


def train_json(model="Net", date="2018-01-01", cost_per_hour=2.0, **extra) -> dict:
    doc = {"version": "v1.0", "author": "Someone", "authorEmail": "a@example.com", "framework": "PyTorch 2.0",
           "codeURL": "https://example.com/code", "model": model, "hardware": "1 GPU", "timestamp": date,
           "misc": {}}
    if cost_per_hour is not None:
        doc["costPerHour"] = cost_per_hour
    doc.update(extra)
    return doc


def tsv(rows, header=("epoch", "hours", "top1Accuracy"), sep="\t", newline="\n") -> bytes:
    lines = [sep.join(header)] + [sep.join(str(c) for c in r) for r in rows]
    return (newline.join(lines) + newline).encode()


def infer_json(model="Net", date="2018-01-01", latency=1.5, cost=1e-6, accuracy=94.5, field="top1Accuracy") -> dict:
    doc = {"version": "v1.0", "author": "Someone", "authorEmail": "a@example.com", "framework": "PyTorch 2.0",
           "codeURL": "https://example.com/code", "model": model, "hardware": "1 GPU", "timestamp": date,
           "latency": latency, "cost": cost, field: accuracy, "misc": {}}
    return doc


def parse(doc, tsv_bytes=None, task="cifar10"):
    return parse_submission(json.dumps(doc).encode(), tsv_bytes, source="test", task=task)


def write_pair(folder: Path, name: str, doc: dict, tsv_bytes: bytes | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(doc))
    if tsv_bytes is not None:
        (folder / f"{name}.tsv").write_bytes(tsv_bytes)
    return folder / f"{name}.json"


# --- formatting ---------------------------------------------------------------------------------------------


def test_display_formats_are_dawnbench_s():
    assert format_hms(0) == "0:00:00.000"
    assert format_hms(0.4) == "0:00:00.400"  # sub-second entries show milliseconds (not all 0:00:00)
    assert format_hms(9.43) == "0:00:09.430"
    assert format_hms(59.5) == "0:00:59.500"
    assert format_hms(59.9996) == "0:01:00"
    assert format_hms(60.4) == "0:01:00"
    assert format_hms(2 * 3600 + 3 * 60 + 4) == "2:03:04"
    assert format_hms(322.69 * 3600) == "322:41:24"  # hours are not wrapped at 24
    assert format_usd(1.005) in ("$1.00", "$1.01") and format_usd(7.4318) == "$7.43" and format_usd(0.01) == "$0.01"
    assert format_usd(1234.5) == "$1,234.50" and format_usd(0) == "$0.00"
    # under a cent: three significant digits, not "$0.00" for all of them (issue 29)
    assert format_usd(0.004) == "$0.00400" and format_usd(0.0042149) == "$0.00421"
    assert format_usd(2.078e-7 * 10_000) == "$0.00208" and format_usd(2.078e-7) == "$0.000000208"
    assert format_ms(0.0739278) == "0.0739" and format_ms(100) == "100.0000"


# --- the real DAWNBench v1 submissions ----------------------------------------------------------------------


def _reaches(tsv_path: Path, column: str, target: float) -> bool:
    """An independent, deliberately simple reading of a real TSV: does any row reach the target?"""
    lines = [l.split() for l in tsv_path.read_text(encoding="utf-8-sig").splitlines() if l.strip()]
    i = lines[0].index(column)
    values = [float(r[i]) for r in lines[1:]]
    scale = 100.0 if max(values) > 1 else 1.0
    return any(v / scale >= target / (100.0 if target > 1 else 1.0) for v in values)


@needs_entries
def test_all_187_real_entries_import(store):
    files = sorted(p for p in ENTRIES.rglob("*") if p.is_file())
    assert len(files) == 187
    report = import_paths(store, [ENTRIES])
    # every file is accounted for: stored (a training JSON carries its TSV) or reported with a reason
    assert report.files == 187
    assert [(o.path, o.reason) for o in report.problems()] == []  # none of the real files is refused
    assert (report.stored, report.duplicates, report.skipped) == (118, 0, 0)
    entries = store.entries()
    counts: dict = {}
    for e in entries:
        counts[(e.task, e.kind)] = counts.get((e.task, e.kind), 0) + 1
    assert counts == REAL_COUNTS
    for task, per_objective in REAL_RANKED.items():
        assert {o: len(leaderboard(store, task, o)) for o in per_objective} == per_objective

    # every real training entry whose TSV reaches the target is stored
    stored_sources = {e.source for e in entries}
    reaching = []
    for folder, (column, target) in TARGET.items():
        for tsv_path in sorted((ENTRIES / folder / "train").glob("*.tsv")):
            if _reaches(tsv_path, column, target):
                reaching.append(f"{ENTRIES.name}/{folder}/train/{tsv_path.stem}.json")
    assert len(reaching) == 69
    assert set(reaching) <= stored_sources


@needs_entries
def test_real_entries_are_read_right(store):
    import_paths(store, [ENTRIES])
    top = leaderboard(store, "cifar10", "train-time", top=1)[0]
    assert top["display"] == "0:00:09.429" and top["model"] == "Custom Resnet 9" and top["date"] == "2019-12-11"
    assert top["source"].endswith("CIFAR10/train/apple_resnet9_8v100_pytorch.json")
    imagenet = leaderboard(store, "imagenet", "train-time", top=1)[0]
    assert imagenet["display"] == "0:02:38" and imagenet["value"] == pytest.approx(0.043763889 * 3600)
    cost = leaderboard(store, "imagenet", "train-cost", top=1)[0]
    assert cost["display"] == "$7.43" and cost["value"] == pytest.approx(0.360461111 * 20.6)
    latency = leaderboard(store, "imagenet", "latency", top=1)[0]
    assert latency["display"] == "0.0739" and latency["unit"] == "ms"
    squad = leaderboard(store, "squad", "inference-cost")
    assert squad[0]["value"] == pytest.approx(1.4805555555555557e-05 * 10_000) and squad[0]["display"] == "$0.15"
    by_source = {e.source.split("/", 1)[1]: e for e in store.entries()}
    # units: SQuAD F1 is a fraction in most files, in percent in one; CIFAR-10/ImageNet accuracies are percent
    ffn = by_source["SQuAD/inference/dawn_fastfusionnet-1080ti.json"]
    assert ffn.accuracy_unit == "percent" and ffn.accuracy == pytest.approx(0.8252085997573373)
    bidaf = by_source["SQuAD/inference/dawn_bidaf_1k80-gc_tensorflow.json"]
    assert bidaf.accuracy_unit == "fraction" and bidaf.accuracy == pytest.approx(0.7524165511)
    # odd spellings: a BOM + CRLF TSV, columns in another order, spaces around cells, 'YYYY-M-D' dates
    kres = by_source["CIFAR10/train/KRes34_1GTX1080Ti_pytorch.json"]
    assert kres.time_to_target_s == pytest.approx(0.593383 * 3600)
    dawn152 = by_source["ImageNet/train/dawn_resnet152_b_4M60_ec2_tensorflow.json"]
    assert dawn152.time_to_target_s == pytest.approx(322.6934347160657 * 3600) and dawn152.epochs_to_target == 91
    drqa = by_source["SQuAD/train/dawn_drqa_1k80-ec2.json"]
    assert drqa.time_to_target_s == pytest.approx(1.3650755286111111 * 3600)
    haifan = by_source["ImageNet/inference/HaifanData_resnet50_1GTX1080Ti_tensorflow.json"]
    assert haifan.submitted_at == datetime(2019, 7, 22)
    # null or missing prices: ranked on time/latency, not on cost
    assert by_source["CIFAR10/train/dawn_resnet164_b_1p100-dawn_pytorch.json"].train_cost_usd is None
    assert by_source["CIFAR10/inference/dawn_resnet164_b_1p100-dawn_pytorch.json"].inference_cost_10k_usd is None


@needs_entries
def test_reimport_stores_nothing_twice(tmp_path, capsys):
    url = db_url(tmp_path)
    assert main(["leaderboard", "import", str(ENTRIES), "--db", url, "-q"]) == 0
    assert "118 stored, 0 already stored, 0 skipped (187 files)" in capsys.readouterr().out
    # the same tree again, and one file named on its own: no new rows
    single = ENTRIES / "CIFAR10" / "train" / "basenet.json"
    assert main(["leaderboard", "import", str(ENTRIES), str(single), "--db", url, "-q"]) == 0
    assert "0 stored, 118 already stored, 0 skipped" in capsys.readouterr().out
    with Store(url) as s:
        assert s.count() == 118


@needs_entries
def test_a_crlf_copy_of_a_real_file_is_the_same_entry(tmp_path, store):
    src = ENTRIES / "CIFAR10" / "train" / "basenet"
    dst = tmp_path / "CIFAR10" / "train"
    dst.mkdir(parents=True)
    (dst / "copy.json").write_bytes(src.with_suffix(".json").read_bytes())
    text = src.with_suffix(".tsv").read_text()
    (dst / "copy.tsv").write_bytes(text.replace("\n", " \r\n").replace("\t", " \t ").encode())
    first = import_paths(store, [src.with_suffix(".json")])
    second = import_paths(store, [dst / "copy.json"])
    assert (first.stored, second.stored, second.duplicates) == (1, 0, 1)


# --- ranking: ties and unit variants ------------------------------------------------------------------------


def test_ranking_ties_go_to_the_earlier_submission_and_units_are_normalized(tmp_path, store):
    root = tmp_path / "CIFAR10"
    rows_pct = [(1, 0.25, 80.0), (2, 0.5, 94.0), (3, 0.75, 94.5)]
    rows_frac = [(1, 0.25, 0.80), (2, 0.5, 0.94), (3, 0.75, 0.945)]
    write_pair(root / "train", "a_percent_later", train_json("A", "2018-01-02", 2.0), tsv(rows_pct))
    write_pair(root / "train", "b_fraction_earlier", train_json("B", "2018-01-01", 2.0), tsv(rows_frac))
    write_pair(root / "train", "c_fast_crlf_spaces", train_json("C", "2019-5-7", 4.0),
               tsv([(1, 0.1, 90), (2, 0.2, 94.2)], sep=" \t ", newline="\r\n"))
    write_pair(root / "train", "d_never", train_json("D"), tsv([(1, 0.1, 93.9), (2, 0.2, 93.99)]))
    write_pair(root / "train", "e_same_day_as_b", train_json("E", "2018-01-01", 2.0),
               tsv([(1, 0.5, 94.0)], header=("epoch", "hours", "top1Accuracy")))
    write_pair(root / "inference", "f_fraction", infer_json("F", "2018-03-02", 1.5, 1e-6, 0.945))
    write_pair(root / "inference", "g_percent_earlier", infer_json("G", "2018-03-01", 1.5, 2e-6, 94.5))
    write_pair(root / "inference", "h_below", infer_json("H", accuracy=93.99))
    write_pair(root / "inference", "i_no_cost", infer_json("I", latency=0.5, cost=None, accuracy=0.95))
    report = import_paths(store, [tmp_path / "CIFAR10"])
    reasons = {Path(o.path).name: o.reason for o in report.problems()}
    assert set(reasons) == {"d_never.json", "h_below.json"}
    assert "never reaches the target 94% top1 (best 93.99%)" in reasons["d_never.json"]
    assert "top1Accuracy 93.99% is below the target 94% top1" in reasons["h_below.json"]
    assert report.stored == 7

    time_rows = leaderboard(store, "cifar10", "train-time")
    # B and E tie A's time: the earlier date first, then the order they were stored in
    assert [r["model"] for r in time_rows] == ["C", "B", "E", "A"]
    assert [r["rank"] for r in time_rows] == [1, 2, 3, 4]
    assert [r["display"] for r in time_rows] == ["0:12:00", "0:30:00", "0:30:00", "0:30:00"]
    assert time_rows[1]["value"] == time_rows[3]["value"] == 1800.0
    cost_rows = leaderboard(store, "cifar10", "train-cost")
    assert [(r["model"], r["display"]) for r in cost_rows] == [("C", "$0.80"), ("B", "$1.00"), ("E", "$1.00"),
                                                               ("A", "$1.00")]
    latency_rows = leaderboard(store, "cifar10", "latency")
    assert [(r["model"], r["display"]) for r in latency_rows] == [("I", "0.5000"), ("G", "1.5000"), ("F", "1.5000")]
    infer_cost = leaderboard(store, "cifar10", "inference-cost")
    assert [(r["model"], r["value"], r["display"]) for r in infer_cost] == [
        ("F", pytest.approx(0.01), "$0.01"), ("G", pytest.approx(0.02), "$0.02")]
    assert leaderboard(store, "cifar10", "train-time", top=2) == time_rows[:2]
    # the store's SQL order and the pure-Python ranking agree
    assert rank_entries(store.entries("cifar10"), get_objective("train-time")) == time_rows
    by_model = {e.model: e for e in store.entries()}
    assert by_model["A"].accuracy_unit == "percent" and by_model["B"].accuracy_unit == "fraction"
    assert by_model["A"].accuracy == pytest.approx(0.94) and by_model["B"].accuracy == pytest.approx(0.94)
    assert by_model["G"].accuracy == pytest.approx(by_model["F"].accuracy)


def test_show_prints_tables_and_json(tmp_path, capsys):
    root = tmp_path / "SQuAD" / "train"
    # F1 as a fraction, columns in the order some real SQuAD files use
    write_pair(root, "x", train_json("BiDAF<script>", cost_per_hour=1.0),
               tsv([(1, 0.7, 1.0), (2, 0.751, 2.0)], header=("epoch", "f1Score", "hours")))
    url = db_url(tmp_path)
    assert main(["leaderboard", "import", str(tmp_path / "SQuAD"), "--db", url]) == 0
    assert "1 stored" in capsys.readouterr().out
    assert main(["leaderboard", "show", "--task", "squad", "--objective", "train-time", "--db", url]) == 0
    out = capsys.readouterr().out
    assert "2:00:00" in out and "BiDAF<script>" in out
    assert main(["leaderboard", "show", "--task", "squad", "--objective", "train-cost", "--json", "--db", url]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["rank"] == 1 and rows[0]["value"] == pytest.approx(2.0) and rows[0]["display"] == "$2.00"
    assert {"rank", "value", "display", "model", "hardware", "framework", "date", "source"} <= set(rows[0])
    assert rows[0]["source"] == "SQuAD/train/x.json" and rows[0]["date"] == "2018-01-01"
    assert main(["leaderboard", "show", "--task", "squad", "--objective", "latency", "--db", url]) == 0
    assert "no entries" in capsys.readouterr().out


@pytest.mark.parametrize("argv, fragment", [
    (["leaderboard", "show", "--task", "nope", "--objective", "latency"], "unknown leaderboard task 'nope'"),
    (["leaderboard", "show", "--task", "squad", "--objective", "latency", "--top", "0"], "--top must be at least 1"),
    (["leaderboard", "show", "--task", "squad", "--objective", "latency", "--db", "nosuchdriver://x"],
     "cannot use database"),
    (["leaderboard", "import", "x.json", "--task", "nope"], "unknown leaderboard task 'nope'"),
])
def test_cli_errors_are_one_line(capsys, argv, fragment):
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert single_line(err) and fragment in err, err


def test_default_db_is_the_env_var_then_the_user_data_dir(monkeypatch, tmp_path):
    from daybreak.leaderboard.store.database import default_db_url, normalize_url

    monkeypatch.setenv("DAYBREAK_DB", "sqlite:///x.sqlite")
    assert default_db_url() == "sqlite:///x.sqlite"
    monkeypatch.delenv("DAYBREAK_DB")
    assert default_db_url().endswith("leaderboard.sqlite") and "daybreak" in default_db_url()
    assert normalize_url("postgresql://u:p@h/db") == "postgresql+psycopg://u:p@h/db"
    assert normalize_url(str(tmp_path / "f.sqlite")) == f"sqlite:///{tmp_path / 'f.sqlite'}"


# --- validation: one clear line per problem, nothing stored -------------------------------------------------

GOOD_TSV = tsv([(1, 0.1, 90.0), (2, 0.2, 94.5)])


@pytest.mark.parametrize("doc, tsv_bytes, fragment", [
    ({k: v for k, v in train_json().items() if k != "model"}, GOOD_TSV, "required field 'model' is missing"),
    (train_json(model=None), GOOD_TSV, "required field 'model' is null"),
    (train_json(hardware=""), GOOD_TSV, "required field 'hardware' is empty"),
    (train_json(framework=3), GOOD_TSV, "'framework' must be a string, not a number"),
    (train_json(timestamp="2018/01/01"), GOOD_TSV, "'timestamp' '2018/01/01' is not a date (expected YYYY-MM-DD)"),
    (train_json(timestamp="2018-02-30"), GOOD_TSV, "is not a date"),
    (train_json(timestamp="2999-01-01"), GOOD_TSV, "is in the future"),
    (train_json(version="v2.0"), GOOD_TSV, "is not DAWNBench v1"),
    (train_json(costPerHour="cheap"), GOOD_TSV, "'costPerHour' must be a number, not 'cheap'"),
    (train_json(costPerHour=-1), GOOD_TSV, "'costPerHour' must be greater than 0"),
    (train_json(costPerHour=True), GOOD_TSV, "must be a number, not a boolean"),
    (train_json(model="x" * 1001), GOOD_TSV, "more than the 1,000 allowed"),
    (train_json(model="a\nb"), GOOD_TSV, "contains control characters"),
    (train_json(), b"", "empty file"),
    (train_json(), b"1\t0.1\t95\n", "expected a header"),
    (train_json(), b"epoch\thour\ttop1Accuracy\n1\t0.1\t95\n", "unknown column 'hour'"),
    (train_json(), b"epoch\ttop1Accuracy\n1\t95\n", "no 'hours' column"),
    (train_json(), b"epoch\thours\ttop5Accuracy\n1\t0.1\t95\n", "no top1Accuracy column"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t0.1\n", "line 2: 2 cells, expected 3"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t0,1\t95\n", "line 2: hours '0,1' is not a number"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\tnan\t95\n", "hours 'nan' is not a number"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t0.2\t90\n2\t0.2\t95\n", "line 3: hours 0.2 is not after"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t0.1\t90\n2\t0.2\t101\n", "top1Accuracy 101 is out of range"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t-0.1\t95\n", "hours -0.1 is negative"),
    (train_json(), b"epoch\thours\ttop1Accuracy\n1\t0.1\t0.5\n2\t0.2\t0.9\n", "never reaches the target 94% top1"),
    (train_json(), b"\xff\xfe" + GOOD_TSV, "not UTF-8"),
    (infer_json(accuracy=None), None, "required field 'top1Accuracy' is null"),
    (infer_json(latency=0), None, "'latency' must be greater than 0"),
    (infer_json(latency=None), None, "required field 'latency' is null"),
    (infer_json(field="top5Accuracy"), None, "(it has 'top5Accuracy': is it really a cifar10 submission?)"),
    (infer_json(accuracy=150), None, "150: out of range"),
    ({k: v for k, v in infer_json().items() if k != "latency"}, None, "neither training"),
    ([1, 2], None, "expected a JSON object"),
])
def test_invalid_submissions_are_refused_with_one_line(doc, tsv_bytes, fragment):
    with pytest.raises(SubmissionError) as err:
        parse(doc, tsv_bytes)
    message = str(err.value)
    assert single_line(message) and fragment in message, message


@pytest.mark.parametrize("raw, fragment", [
    (b"{", "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    (b'{"latency": NaN}', "invalid JSON: NaN is not a number JSON allows"),
    (b"[" * 100 + b"]" * 100, "nested more than 32 levels"),
    (b"[" * 100_000, "invalid JSON"),
    (b" ", "empty file"),
    (b"{}" + b" " * (1024 * 1024), "more than the 1,048,576 allowed"),
])
def test_unreadable_json_is_refused(raw, fragment):
    with pytest.raises(SubmissionError) as err:
        parse_submission(raw, None, source="x.json", task="cifar10")
    assert single_line(str(err.value)) and fragment in str(err.value), str(err.value)


def test_task_comes_from_the_folder_the_option_or_the_file(tmp_path, store):
    doc = infer_json(field="f1Score", accuracy=0.8)
    with pytest.raises(SubmissionError, match="cannot tell the task"):
        parse_submission(json.dumps(doc).encode(), source="x")
    assert parse(doc, task="squad").task == "squad"
    daybreak_doc = train_json(misc={"daybreakTask": "digits"})
    sub = parse_submission(json.dumps(daybreak_doc).encode(), tsv([(1, 0.01, 98.5)]), source="x")
    assert sub.task == "digits" and sub.target == 0.98
    with pytest.raises(SubmissionError, match="misc.daybreakTask says 'digits'"):
        parse(daybreak_doc, tsv([(1, 0.01, 98.5)]), task="mnist")
    loose = write_pair(tmp_path / "loose", "entry", doc)
    report = import_paths(store, [loose])
    assert report.skipped == 1 and "cannot tell the task" in report.problems()[0].reason
    assert import_paths(store, [loose], task="squad").stored == 1


def test_stray_files_are_reported(tmp_path, store):
    tree = tmp_path / "CIFAR10" / "train"
    write_pair(tree, "good", train_json(), GOOD_TSV)
    (tree / "orphan.tsv").write_bytes(GOOD_TSV)
    (tree / "notes.txt").write_text("hello")
    (tree / "broken.json").write_text("{nope")
    report = import_paths(store, [tmp_path / "CIFAR10", tmp_path / "missing.json"])
    reasons = {Path(o.path).name: o.reason for o in report.problems()}
    assert report.stored == 1 and report.files == 5
    assert reasons["orphan.tsv"] == "a TSV without its JSON (same name, .json)"
    assert reasons["notes.txt"].startswith("not a submission file")
    assert reasons["broken.json"].startswith("invalid JSON")
    assert reasons["missing.json"] == "no such file or directory"
    assert store.count() == 1


def test_import_cli_reports_each_problem_on_its_own_line(tmp_path, capsys):
    tree = tmp_path / "ImageNet" / "train"
    write_pair(tree, "ok", train_json(), tsv([(1, 0.1, 70, 93.5)], header=("epoch", "hours", "top1Accuracy",
                                                                            "top5Accuracy")))
    write_pair(tree, "bad", train_json(), tsv([(1, 0.1, 70, 92.5)], header=("epoch", "hours", "top1Accuracy",
                                                                             "top5Accuracy")))
    assert main(["leaderboard", "import", str(tmp_path / "ImageNet"), "--db", db_url(tmp_path)]) == 1
    captured = capsys.readouterr()
    err_lines = captured.err.strip().splitlines()
    assert len(err_lines) == 1 and "bad.json" in err_lines[0]
    assert "never reaches the target 93% top5 (best 92.50%)" in err_lines[0]
    assert "1 stored, 0 already stored, 1 skipped (4 files)" in captured.out


# --- daybreak's own records ---------------------------------------------------------------------------------


def _run_result(task="digits", accuracies=(0.9, 0.985, 0.99), official=True, cost=3.6):
    from daybreak.measure.system import system_info
    from daybreak.records.run import EpochRecord, RunResult

    from daybreak.tasks import get_task

    target = get_task(task).target
    history = [EpochRecord(epoch=i + 1, step=(i + 1) * 10, elapsed_s=2.0 * (i + 1), accuracy=a, top1=a, eval_s=0.1)
               for i, a in enumerate(accuracies)]
    first = next((h for h in history if h.accuracy >= target), None)  # a consistent record: totals = history
    return RunResult(
        run_id="r1", task=task, recipe=task, model="tiny-cnn", framework="PyTorch 2.13.0", metric="top1",
        target=target, target_is_default=True, official=official,
        unofficial_reasons=[] if official else ["data does not match the official checksums (--allow-custom-data)"],
        hyperparameters={}, seed=0, device="cpu", amp="off", compile=False,
        status="reached" if first else "not_reached", reached=first is not None,
        time_to_target_s=first and first.elapsed_s, epochs_to_target=first and first.epoch,
        steps_to_target=first and first.step, history=history, cost_per_hour=cost, system=system_info(),
        started_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), steps_per_epoch=10, per_device_batch_size=64,
        global_batch_size=64, effective_batch_size=64, train_examples=647,
    )


def _inference_doc(accuracy=0.99, valid=True, price=True) -> dict:
    from daybreak.measure.system import system_info
    from daybreak.records.inference import InferenceResult, InferenceSettings, LatencyStats

    lat = LatencyStats(n=450, total_s=0.45, mean_ms=1.0, min_ms=0.5, p50_ms=1.0, p90_ms=1.2, p99_ms=1.5,
                       max_ms=2.0, std_ms=0.1)
    r = InferenceResult(
        run_id="r1", task="digits", recipe="digits", model="tiny-cnn", framework="PyTorch 2.13.0", metric="top1",
        checkpoint="checkpoint.pt", n_examples=450, latency=lat, accuracy=accuracy, top1=accuracy, target=0.98,
        valid=valid, reason=None if valid else "accuracy below target", cost_per_hour=3.6 if price else None,
        cost_per_example_usd=1e-6 if price else None, cost_per_10k_usd=0.01 if price else None,
        settings=InferenceSettings(device="cpu", amp="off", compile=False, threads=1, warmup=5),
        system=system_info(), created_at=datetime(2026, 1, 3, tzinfo=timezone.utc),
    )
    return json.loads(r.model_dump_json())


def test_daybreak_run_directories_import(tmp_path, store):
    run_dir = tmp_path / "runs" / "digits-1"
    run_dir.mkdir(parents=True)
    _run_result().save(run_dir)
    (run_dir / "inference.json").write_text(json.dumps(_inference_doc()))
    (run_dir / "dawnbench.json").write_text("{}")  # other files of a run dir are not submissions
    report = import_paths(store, [tmp_path / "runs"])
    assert (report.stored, report.skipped) == (2, 0), report.to_json()
    rows = leaderboard(store, "digits", "train-time")
    assert rows[0]["value"] == 4.0 and rows[0]["display"] == "0:00:04.000"  # first evaluation >= 98%
    assert leaderboard(store, "digits", "train-cost")[0]["value"] == pytest.approx(4.0 / 3600 * 3.6)
    assert leaderboard(store, "digits", "latency")[0]["display"] == "1.0000"
    assert leaderboard(store, "digits", "inference-cost")[0]["display"] == "$0.01"
    assert import_paths(store, [run_dir]).duplicates == 2


@pytest.mark.parametrize("change, fragment", [
    (dict(accuracies=(0.9, 0.97)), "never reached the target 98% top1 (best 97.00%)"),
    (dict(official=False), "unofficial run (data does not match the official checksums"),
    (dict(task="cifar10", accuracies=(0.95,)), None),
])
def test_daybreak_runs_are_checked(tmp_path, change, fragment):
    result = _run_result(**change)
    raw = result.model_dump_json().encode()
    if fragment is None:
        assert parse_submission(raw, source="r").time_to_target_s == 2.0
        return
    with pytest.raises(SubmissionError) as err:
        parse_submission(raw, source="r")
    assert single_line(str(err.value)) and fragment in str(err.value), str(err.value)


def test_daybreak_inference_records_are_checked():
    assert parse_submission(json.dumps(_inference_doc(price=False)).encode(), source="i").inference_cost_10k_usd is None
    for doc, fragment in [(_inference_doc(accuracy=0.97), "below the target 98% top1"),
                          (_inference_doc(valid=False), "not valid: accuracy below target"),
                          ({**_inference_doc(), "latency": {}}, "invalid inference record: latency.n")]:
        with pytest.raises(SubmissionError) as err:
            parse_submission(json.dumps(doc).encode(), source="i")
        assert fragment in str(err.value), str(err.value)


def test_tsv_reader_tolerates_what_the_real_files_do():
    table = parse_tsv("\ufeffhours \t epoch\ttop5Accuracy\r\n3.5\t1\t19.7\r\n\r\n7.1\t2\t45.6  \r\n\r\n".encode(),
                      "t")
    assert table.columns == ["hours", "epoch", "top5accuracy"] and table.rows == [[3.5, 1, 19.7], [7.1, 2, 45.6]]


def test_problems_name_the_file_at_fault(tmp_path, store):
    tree = tmp_path / "CIFAR10" / "train"
    write_pair(tree, "e", train_json(), b"epoch\thours\ttop1Accuracy\n1\t0.1\t95\n2\t0.1\t96\n")
    write_pair(tree, "u", train_json(misc={"daybreakTask": "cifar10", "official": False}), GOOD_TSV)
    report = import_paths(store, [tmp_path / "CIFAR10"])
    reasons = {Path(o.path).name: o.reason for o in report.problems()}
    assert reasons["e.json"] == "e.tsv: line 3: hours 0.1 is not after the previous row's 0.1 (hours must increase)"
    assert reasons["u.json"].startswith("unofficial daybreak run (misc.official is false)")


@pytest.mark.parametrize("raw, fragment", [
    (b'{"model": "\\ud800"}', "invalid Unicode in a string"),
    (json.dumps(train_json(costPerHour=1e300)).encode(), "the number 1e+300 is out of range"),
    (json.dumps(train_json(costPerHour=1e12)).encode(), "'costPerHour' 1e+12 is out of range"),
    (json.dumps(infer_json(latency=1e12)).encode(), "'latency' 1e+12 is out of range"),
])
def test_values_that_could_not_be_stored_or_shown_are_refused(raw, fragment):
    with pytest.raises(SubmissionError) as err:
        parse_submission(raw, GOOD_TSV if b"costPerHour" in raw else None, source="x", task="cifar10")
    assert fragment in str(err.value), str(err.value)
    with pytest.raises(SubmissionError, match="hours 1e\\+300 is out of range"):
        parse(train_json(), b"epoch\thours\ttop1Accuracy\n1\t1e300\t95\n")


def test_a_task_given_for_a_record_that_names_none_says_so():
    """Issue 38: "the record is for 'None'"."""
    record = {"kind": "daybreak.run", "schema_version": 1}
    with pytest.raises(SubmissionError) as info:
        parse_submission(json.dumps(record).encode(), None, source="x", task="cifar10")
    assert "task 'cifar10' was given but the record names no task" in str(info.value)
    assert "None" not in str(info.value)
