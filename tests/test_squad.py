"""SQuAD v1.1: official-style EM/F1, WordPiece with offsets, the reader, windows and spans, the HF weight loader,
a tiny BERT trained end to end through the runner, `daybreak evaluate-squad` and `daybreak infer`."""

import io
import json
import random
from pathlib import Path

import pytest
import torch

from daybreak.cli import main
from daybreak.data import squad as sq
from daybreak.data import squad_features as sqf
from daybreak.data import squad_reader as sqr
from daybreak.data.wordpiece import WordPieceTokenizer, load_vocab
from daybreak.errors import ChecksumError, ConfigError, DataError
from daybreak.models.bert import BertConfig, bert_base
from daybreak.models.hf_weights import load_hf_bert, save_hf_bert
from daybreak.models.span_bert import SpanBert
from daybreak.data.squad_eval import evaluate_squad, exact_match_score, f1_score, normalize_answer
from daybreak.train.runner import RunConfig, run

from conftest import single_line

# --- tiny SQuAD-format files ----------------------------------------------------------------------------------------

COLORS = ["red", "green", "blue", "yellow", "purple", "orange", "black", "white"]
NOUNS = ["car", "house", "bird", "boat", "kite", "door", "lamp", "chair"]
FILLER = ["the", "a", "old", "small", "big", "near", "river", "town", "in", "was", "and", "of", "it", "very"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
TINY = dict(layers=1, hidden=32, heads=2, intermediate=64, max_seq_len=48, doc_stride=16, max_query_len=12,
            batch_size=16, epochs=8, lr=3e-3, warmup=0.05, dropout=0.0, eval_batch_size=8)


def squad_json(n_paragraphs: int, seed: int) -> dict:
    """Paragraphs like "small the kite is blue." with the question "What color is the kite?"."""
    rng = random.Random(seed)
    paragraphs = []
    for p in range(n_paragraphs):
        noun, color = rng.choice(NOUNS), rng.choice(COLORS)
        pre = " ".join(rng.choice(FILLER) for _ in range(rng.randint(0, 5)))
        context = (pre + " " if pre else "") + f"the {noun} is {color}."
        start = context.index(f"the {noun} is ") + len(f"the {noun} is ")
        answers = [{"text": color, "answer_start": start}]
        if p % 3 == 0:  # several ground truths, as in dev
            answers.append({"text": f"{color}.", "answer_start": start})
        paragraphs.append({"context": context, "qas": [
            {"id": f"s{seed}q{p}", "question": f"What color is the {noun}?", "answers": answers}]})
    return {"version": "1.1", "data": [{"title": "Colors", "paragraphs": paragraphs}]}


def write_tiny_squad(folder: Path, n_train: int = 120, n_dev: int = 12) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / sq.TRAIN_FILE).write_text(json.dumps(squad_json(n_train, 1)))
    (folder / sq.DEV_FILE).write_text(json.dumps(squad_json(n_dev, 2)))
    words = sorted(set(COLORS + NOUNS + FILLER + ["what", "color", "is", "?", ".", ","]))
    (folder / sq.VOCAB_FILE).write_text("\n".join(SPECIALS + words) + "\n")
    return folder


@pytest.fixture(scope="module")
def squad_dir(tmp_path_factory):
    return write_tiny_squad(tmp_path_factory.mktemp("squad"))


@pytest.fixture(scope="module")
def squad_run(squad_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("squad-runs") / "run"
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run(RunConfig(task="squad", data_dir=squad_dir, allow_custom_data=True, quiet=True, out=out,
                               target=0.9, overrides=dict(TINY)))
    finally:
        torch.set_num_threads(old)
    return out, result


# --- EM / F1 ---------------------------------------------------------------------------------------------------------


def test_normalization_follows_the_official_rules():
    assert normalize_answer("The  Cat, sat!") == "cat sat"
    assert normalize_answer("an apple a day") == "apple day"
    assert normalize_answer("theater ant") == "theater ant"  # articles only as whole words
    assert normalize_answer("A-B") == "ab"  # punctuation deleted, not replaced by a space
    assert normalize_answer("¡Olé!") == "¡olé"  # only string.punctuation (ASCII) is removed


def test_exact_match_and_f1_on_hand_computed_cases():
    assert exact_match_score("The Cat sat.", "cat sat") and f1_score("The Cat sat.", "cat sat") == 1.0
    assert not exact_match_score("a big cat", "the cat")
    assert f1_score("a big cat", "the cat") == pytest.approx(2 * 0.5 * 1.0 / 1.5)  # P 1/2, R 1
    assert f1_score("cat cat dog", "cat") == pytest.approx(2 * (1 / 3) / (1 / 3 + 1))  # overlap counted once
    assert f1_score("dog", "cat") == 0
    # the official quirk: an answer that normalizes to nothing matches "" exactly but has F1 0
    assert exact_match_score("", "the") and f1_score("", "the") == 0


def test_dataset_scores_take_the_best_ground_truth_and_count_unanswered_as_zero():
    data = [{"paragraphs": [{"context": "x", "qas": [
        {"id": "a", "answers": [{"text": "red"}, {"text": "Blue!"}]},
        {"id": "b", "answers": [{"text": "the cat"}]},
        {"id": "c", "answers": [{"text": "dog"}]},
    ]}]}]
    err = io.StringIO()
    scores = evaluate_squad(data, {"a": "blue", "b": "a big cat"}, stderr=err)
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    assert err.getvalue().strip() == "Unanswered question c will receive score 0."


def test_evaluate_squad_cli_prints_the_json_on_its_last_line(tmp_path, capsys):
    dataset = tmp_path / "dev.json"
    dataset.write_text(json.dumps({"version": "1.1", "data": [{"paragraphs": [{"context": "c", "qas": [
        {"id": "1", "question": "?", "answers": [{"text": "the red car", "answer_start": 0}]},
        {"id": "2", "question": "?", "answers": [{"text": "blue", "answer_start": 0}]}]}]}]}))
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps({"1": "red car"}))
    assert main(["evaluate-squad", str(dataset), str(preds)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out.strip().splitlines()[-1]) == {"exact_match": 50.0, "f1": 50.0}
    assert "Unanswered question 2 will receive score 0." in captured.err
    # bad inputs: one-line errors
    preds.write_text("{not json")
    assert main(["evaluate-squad", str(dataset), str(preds)]) == 2
    assert single_line(capsys.readouterr().err)
    preds.write_text(json.dumps({"1": 3}))
    assert main(["evaluate-squad", str(dataset), str(preds)]) == 2
    assert single_line(capsys.readouterr().err)
    dataset.write_text(json.dumps({"data": [{"paragraphs": [{"qas": [{"id": "1"}]}]}]}))
    assert main(["evaluate-squad", str(dataset), str(tmp_path / "none.json")]) == 2
    assert single_line(capsys.readouterr().err)


# --- WordPiece -------------------------------------------------------------------------------------------------------

VOCAB = SPECIALS + ["un", "##aff", "##able", "the", "cat", "##s", ",", ".", "hello", "run", "##ning", "!", "a", "é"]


def test_wordpiece_tokens_and_offsets_on_a_hand_made_vocabulary():
    tok = WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)})
    assert tok.lower_case  # no upper-case entry: an uncased vocabulary
    text = "UNaffable  cats, Héllo running!"
    ids, tokens, offsets = tok.tokenize_with_offsets(text)
    assert tokens == ["un", "##aff", "##able", "cat", "##s", ",", "hello", "run", "##ning", "!"]
    assert offsets == [(0, 2), (2, 5), (5, 9), (11, 14), (14, 15), (15, 16), (17, 22), (23, 26), (26, 30), (30, 31)]
    assert [text[a:b] for a, b in offsets][6] == "Héllo"  # accent stripped for matching, offsets into the original
    assert ids == [VOCAB.index(t) for t in tokens]


def test_wordpiece_cleaning_cjk_unknowns_and_long_words():
    tok = WordPieceTokenizer({t: i for i, t in enumerate(VOCAB)})
    # control characters vanish (joining their neighbours), soft hyphen (Cf) too; tab/newline separate
    assert tok.tokenize_with_offsets("the\x00cat\tcat\u00ad\ncat") == (
        [tok.vocab["[UNK]"], tok.vocab["cat"], tok.vocab["cat"]], ["[UNK]", "cat", "cat"],
        [(0, 7), (8, 11), (13, 16)])
    # every CJK ideograph is its own token; unmatched words are [UNK] as a whole
    assert tok.tokenize_with_offsets("猫cat") == ([1, tok.vocab["cat"]], ["[UNK]", "cat"], [(0, 1), (1, 4)])
    assert tok.tokenize("catz") == ["[UNK]"]
    long_word = "a" * 101  # over 100 characters: [UNK] even though "a" is in the vocabulary
    assert tok.tokenize_with_offsets(long_word)[1:] == (["[UNK]"], [(0, 101)])
    assert tok.tokenize("a" * 100) != ["[UNK]"] or "##a" not in tok.vocab


def test_cased_vocabulary_keeps_case_and_accents():
    vocab = SPECIALS + ["Hello", "hello", "é", "e"]
    tok = WordPieceTokenizer({t: i for i, t in enumerate(vocab)})
    assert not tok.lower_case
    assert tok.tokenize("Hello hello é") == ["Hello", "hello", "é"]


def test_vocab_file_problems_are_one_line_errors(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\ncat\n")
    with pytest.raises(DataError) as e:
        WordPieceTokenizer.from_file(path)
    assert "[CLS]" in str(e.value) and single_line(str(e.value))
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(DataError):
        load_vocab(path)


# --- reader, windows, spans ------------------------------------------------------------------------------------------


def test_reader_reports_bad_json_missing_keys_and_counts_bad_offsets(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"data": [')
    with pytest.raises(DataError) as e:
        sqr.read_squad_file(bad, training=True)
    assert "not valid JSON" in str(e.value) and single_line(str(e.value))
    bad.write_text(json.dumps({"data": [{"paragraphs": [{"context": "abc", "qas": [{"id": "1", "answers": []}]}]}]}))
    with pytest.raises(DataError) as e:
        sqr.read_squad_file(bad, training=True)
    assert "data[0].paragraphs[0].qas[0]" in str(e.value) and "question" in str(e.value)
    good = {"id": "1", "question": "q", "answers": [{"text": "abc", "answer_start": 0}]}
    shifted = {"id": "2", "question": "q", "answers": [{"text": "abc", "answer_start": 1}]}
    outside = {"id": "3", "question": "q", "answers": [{"text": "abc", "answer_start": 99}]}
    obj = {"data": [{"paragraphs": [{"context": "abc def", "qas": [good, shifted, outside]}]}]}
    train = sqr.parse_squad(obj, "train.json", training=True)
    assert [q.qid for q in train.questions] == ["1"] and train.bad_offsets == 2 and train.skipped == 2
    assert "2 training question(s) skipped" in train.note()
    dev = sqr.parse_squad(obj, "dev.json", training=False)
    assert [q.qid for q in dev.questions] == ["1", "2", "3"] and dev.skipped == 0
    assert dev.questions[1].answer_span is None and dev.questions[0].answer_span == (0, 3)


def _split(context: str, question: str, answer: str) -> tuple[sqr.SquadSplit, WordPieceTokenizer]:
    words = sorted({w for w in (context + " " + question).replace(".", " . ").split()})
    tok = WordPieceTokenizer({t: i for i, t in enumerate(SPECIALS + words)})
    obj = {"data": [{"paragraphs": [{"context": context, "qas": [
        {"id": "q", "question": question, "answers": [{"text": answer, "answer_start": context.index(answer)}]}]}]}]}
    split = sqr.parse_squad(obj, "x.json", training=True)
    sqr.tokenize_split(split, tok)
    return split, tok


def test_windows_with_stride_targets_and_max_context():
    context = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"  # 10 context tokens
    split, tok = _split(context, "w3", "w7 w8")
    # L = 10: [CLS] q [SEP] + 6 context + [SEP]; windows start every 3 tokens: [0,6) [3,9) [6,10)
    feats = sqf.featurize(split, tok, sqf.WindowConfig(max_seq_len=10, doc_stride=3, max_query_len=4))
    assert len(feats) == 3 and feats.question.tolist() == [0, 0, 0]
    assert feats.x.dtype == torch.int64 and feats.x.shape == (3, 3, 10)
    row = feats.x[1]
    assert row[0, :3].tolist() == [tok.cls_id, tok.vocab["w3"], tok.sep_id]
    assert row[0, 3:9].tolist() == [tok.vocab[f"w{i}"] for i in range(3, 9)] and row[0, 9] == tok.sep_id
    assert row[1].tolist() == [0, 0, 0] + [1] * 7 and row[2].tolist() == [1] * 10
    last = feats.x[2]
    assert last[2].tolist() == [1] * 8 + [0, 0] and last[0, 8:].tolist() == [tok.pad_id] * 2
    # the answer w7 w8 = context tokens 7..8: not inside window 0, at positions 3 + 4, 5 of window 1 and 3 + 1, 2 of 2
    assert feats.y.tolist() == [[0, 0], [7, 8], [4, 5]]
    # offsets point into the context; -1 outside the context tokens
    assert feats.offsets[1, 3].tolist() == [9, 11] and context[9:11] == "w3"
    assert feats.offsets[1, :3].tolist() == [[-1, -1]] * 3 and feats.offsets[1, 9].tolist() == [-1, -1]
    # max context: token 4 (window 0: min(4, 1) = 1; window 1: min(1, 4) = 1, + 0.01 x 6 both: first wins)
    # token 5: window 0 min(5,0)=0, window 1 min(2,3)=2 -> window 1; token 8: window 1 min(5,0)=0, window 2 min(2,1)=1
    mc = feats.max_context
    assert mc[0, 3 + 4] and not mc[1, 3 + 1]
    assert mc[1, 3 + 2] and not mc[0, 3 + 5]
    assert mc[2, 3 + 2] and not mc[1, 3 + 5]


def test_best_span_respects_validity_length_and_max_context():
    L = 8
    logits = torch.full((1, L, 2), -1.0)
    logits[0, 0] = torch.tensor([9.0, 9.0])  # [CLS]: highest, but not a context token
    logits[0, 6, 0] = 5.0  # start after end: invalid
    logits[0, 2, 1] = 4.0
    logits[0, 3, 0] = 3.0
    logits[0, 4, 1] = 2.0
    valid = torch.tensor([[False, False, True, True, True, True, True, False]])
    score, start, end = sqf.best_spans(logits, valid, valid, n_best=20, max_answer_len=30)
    assert (start.item(), end.item()) == (3, 4) and score.item() == pytest.approx(5.0)
    score, start, end = sqf.best_spans(logits, valid, valid, n_best=20, max_answer_len=1)  # spans of one token
    assert start.item() == end.item()
    no_start = valid.clone()
    no_start[0, 3] = False  # token 3 has its max context in another window
    _, start, _ = sqf.best_spans(logits, no_start, valid, n_best=20, max_answer_len=30)
    assert start.item() != 3
    score, _, _ = sqf.best_spans(logits, torch.zeros_like(valid), valid, n_best=20, max_answer_len=30)
    assert score.item() == float("-inf")


# --- HF-format weights ----------------------------------------------------------------------------------------------

SMALL = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                   max_position_embeddings=64)


@pytest.mark.parametrize("safetensors", [True, False])
def test_hf_weights_round_trip_into_the_span_model(tmp_path, safetensors):
    if safetensors:
        pytest.importorskip("safetensors")
    torch.manual_seed(1)
    mlm = bert_base(**{f: getattr(SMALL, f) for f in ("vocab_size", "hidden_size", "num_hidden_layers",
                                                      "num_attention_heads", "intermediate_size",
                                                      "max_position_embeddings")})
    path = save_hf_bert(mlm, tmp_path / "ckpt", safetensors=safetensors)
    assert path.name == ("model.safetensors" if safetensors else "pytorch_model.bin")
    torch.manual_seed(2)
    model = SpanBert(SMALL)
    head = model.qa_outputs.weight.detach().clone()
    report = load_hf_bert(model, tmp_path / "ckpt")
    theirs = mlm.state_dict()
    for name, value in model.state_dict().items():
        if name.startswith("bert."):
            assert torch.equal(value, theirs[name]), name
    assert torch.equal(model.qa_outputs.weight, head)  # a fresh head keeps its initialization
    assert report.missing == ["qa_outputs.bias", "qa_outputs.weight"]
    assert report.ignored and all(n.startswith("cls.") for n in report.ignored)
    line = report.summary()
    assert single_line(line) and "newly initialized: qa_outputs.* (2)" in line and "ignored: cls.* (" in line


def test_hf_loader_maps_legacy_and_bare_names_and_refuses_mismatches(tmp_path):
    torch.manual_seed(3)
    src = SpanBert(SMALL)
    save_hf_bert(src, tmp_path / "ok", safetensors=False)
    # a bare BertModel with TF-era LayerNorm names: embeddings.LayerNorm.gamma, encoder.layer.0....beta
    state = {}
    for k, v in src.state_dict().items():
        if k.startswith("bert."):
            k = k[len("bert."):].replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        state[k] = v.clone()
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    torch.save(state, legacy / "pytorch_model.bin")
    (legacy / "config.json").write_text((tmp_path / "ok" / "config.json").read_text())
    dst = SpanBert(SMALL)
    report = load_hf_bert(dst, legacy)
    assert not report.missing and not report.ignored
    assert all(torch.equal(a, b) for a, b in zip(src.state_dict().values(), dst.state_dict().values()))
    # config.json of another architecture: one line naming the field and the hyperparameter
    cfg = json.loads((tmp_path / "ok" / "config.json").read_text())
    cfg["num_hidden_layers"] = 3
    (tmp_path / "ok" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError) as e:
        load_hf_bert(SpanBert(SMALL), tmp_path / "ok", hint={"num_hidden_layers": "layers"})
    assert "num_hidden_layers=3" in str(e.value) and "--set layers=3" in str(e.value) and single_line(str(e.value))
    with pytest.raises(ConfigError):
        load_hf_bert(SpanBert(SMALL), tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ConfigError) as e:
        load_hf_bert(SpanBert(SMALL), tmp_path / "empty")
    assert "neither model.safetensors nor pytorch_model.bin" in str(e.value)


def test_span_model_shapes():
    model = SpanBert(SMALL).eval()
    x = torch.zeros(2, 3, 10, dtype=torch.long)
    x[:, 2] = 1
    assert model(x).shape == (2, 10, 2)
    with pytest.raises(ValueError):
        model(torch.zeros(2, 10, dtype=torch.long))


# --- end to end ----------------------------------------------------------------------------------------------------


def test_tiny_bert_trains_to_target_and_records_f1(squad_run, squad_dir):
    out, r = squad_run
    assert r.status == "reached" and r.metric == "f1" and not r.official
    last = r.history[-1]
    assert last.accuracy == last.metrics["f1"] >= 0.9 and "exact_match" in last.metrics and last.top1 is None
    assert any("vocab.txt" in n and "uncased" in n for n in r.data_notes)
    assert (out / "dawnbench.tsv").read_text().splitlines()[0] == "epoch\thours\tf1Score"
    assert (out / "checkpoint.pt").exists()


def test_predictions_scored_by_evaluate_squad_match_the_runs_evaluation(squad_run, squad_dir, tmp_path, capsys):
    from daybreak.recipes import get_recipe
    from daybreak.tasks import get_task

    out, r = squad_run
    ckpt = torch.load(out / "checkpoint.pt", weights_only=True)
    data = get_task("squad").load(squad_dir, True, False)
    setup = get_recipe("squad_bert_base").build(ckpt["hyperparameters"], data, torch.device("cpu"))
    setup.model.load_state_dict(ckpt["state_dict"])
    setup.model.eval()
    with torch.no_grad():
        logits = setup.model(setup.prepare(data.eval_x))
    predictions = data.predict_answers(logits)
    assert len(predictions) == 12 and all(isinstance(v, str) for v in predictions.values())
    assert data.score_predictions(logits)["f1"] == pytest.approx(ckpt["accuracy"])
    preds = tmp_path / "predictions.json"
    preds.write_text(json.dumps(predictions))
    assert main(["evaluate-squad", str(squad_dir / sq.DEV_FILE), str(preds)]) == 0
    official = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert official["f1"] / 100 == pytest.approx(ckpt["accuracy"])
    assert official["exact_match"] / 100 == pytest.approx(r.history[-1].metrics["exact_match"])


def test_infer_times_each_window_and_checks_f1(squad_run, squad_dir, capsys):
    out, r = squad_run
    code = main(["infer", str(out), "--data-dir", str(squad_dir), "--allow-custom-data", "--warmup", "2",
                 "--throughput-repeats", "1", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["metric"] == "f1" and result["valid"] and result["accuracy"] == pytest.approx(r.best_accuracy)
    assert result["n_examples"] == 12 and result["latency"]["n"] == 12 and result["latency"]["mean_ms"] > 0
    assert result["top1"] is None and result["metrics"]["f1"] == result["accuracy"] and "exact_match" in result["metrics"]
    dawn = json.loads((out / "dawnbench_inference.json").read_text())
    assert dawn["f1Score"] == result["accuracy"] and "top1Accuracy" not in dawn


def test_bad_squad_inputs_are_one_line_errors(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["run", "squad", "--data-dir", str(empty), "--out", str(tmp_path / "r1"), "-q"]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "vocab.txt" in err
    (empty / "vocab.txt").write_text("\n".join(SPECIALS) + "\n")
    assert main(["run", "squad", "--data-dir", str(empty), "--no-download", "--out", str(tmp_path / "r2"), "-q"]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "train-v1.1.json" in err
    custom = write_tiny_squad(tmp_path / "custom", n_train=6, n_dev=2)
    assert main(["run", "squad", "--data-dir", str(custom), "--out", str(tmp_path / "r3"), "-q"]) == 2
    err = capsys.readouterr().err
    assert single_line(err) and "--allow-custom-data" in err
    with pytest.raises(ChecksumError):
        sq.load_squad(custom)
    code = main(["run", "squad", "--data-dir", str(custom), "--allow-custom-data", "--set", "max_seq_len=8",
                 "--set", "max_query_len=6", "--out", str(tmp_path / "r4"), "-q"])
    assert code == 2
    assert single_line(capsys.readouterr().err)
    code = main(["run", "squad", "--data-dir", str(custom), "--allow-custom-data", "--set", "init_from=" +
                 str(tmp_path / "no-such-model"), "--out", str(tmp_path / "r5"), "-q"])
    assert code == 2
    err = capsys.readouterr().err
    assert single_line(err) and "init_from" in err


def test_gradient_clipping_sees_unscaled_gradients_under_the_fp16_grad_scaler():
    from daybreak.train.step import Backend, TrainStep

    torch.manual_seed(0)
    layer = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.0)  # lr 0: the weights stay, the gradients are kept
    backend = Backend(torch.device("cpu"), "off")  # fp32 math; the scaler below scales the loss as fp16 would
    step = TrainStep(layer, optimizer, lambda out, y: (out * 100).pow(2).mean(), backend, clip_grad_norm=1.0)
    step.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    step(torch.randn(8, 4), None)
    norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in layer.parameters()]))
    assert norm.item() == pytest.approx(1.0, rel=1e-4)  # clipped after unscaling, not before


def test_init_from_loads_hf_weights_into_the_recipe_model_and_checks_the_vocabulary(squad_dir, tmp_path, capsys):
    from daybreak.recipes import get_recipe
    from daybreak.recipes.squad import bert_config_from

    recipe = get_recipe("squad_bert_base")
    data = sq.load_squad(squad_dir, allow_custom_data=True)
    hp = recipe.hyperparameters(dict(TINY))
    torch.manual_seed(7)
    pretrained = SpanBert(bert_config_from(hp, len(data.tokenizer)))
    save_hf_bert(pretrained, tmp_path / "hf", safetensors=False)
    setup = recipe.build(dict(hp, init_from=str(tmp_path / "hf")), data, torch.device("cpu"))
    assert all(torch.equal(a, b) for a, b in zip(pretrained.state_dict().values(), setup.model.state_dict().values()))
    err = capsys.readouterr().err
    assert single_line(err) and "loaded" in err and "pytorch_model.bin" in err
    (tmp_path / "hf" / "vocab.txt").write_text("\n".join(SPECIALS + ["zzz"]) + "\n")  # another model's vocabulary
    with pytest.raises(ConfigError) as e:
        recipe.build(dict(hp, init_from=str(tmp_path / "hf")), data, torch.device("cpu"))
    assert "vocab.txt" in str(e.value) and single_line(str(e.value))
    with pytest.raises(ConfigError) as e:  # config.json says 1 layer, the recipe asks for 2
        recipe.build(dict(hp, layers=2, init_from=str(tmp_path / "hf")), data, torch.device("cpu"))
    assert "--set layers=1" in str(e.value)
