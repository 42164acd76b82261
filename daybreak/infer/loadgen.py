"""Optional MLCommons LoadGen backend (`daybreak infer --backend loadgen`, extra ``daybreak[loadgen]``).

Runs LoadGen's SingleStream and Offline scenarios (performance mode) on the very model and prepared inputs
that daybreak's own measurement used, and reads LoadGen's own numbers back from its summary file
(``mlperf_log_summary.txt``) in ``<run dir>/loadgen/<scenario>/``: SingleStream's 90th percentile latency
and Offline's samples per second, stored next to daybreak's figures in inference.json.

The system under test answers each query synchronously inside LoadGen's issue callback: for SingleStream
one batch-1 query from host memory to the label on the host (as daybreak times it); for Offline the one big
query is split into batches of ``--batch-size`` (gathered from host memory, so the gather counts).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import torch

from daybreak.errors import ConfigError, DaybreakError
from daybreak.measure.device import synchronize
from daybreak.records.inference import LoadgenResult, LoadgenScenario

LOADGEN_DIR = "loadgen"
SUMMARY_FILE = "mlperf_log_summary.txt"
INSTALL_HINT = "pip install 'daybreak[loadgen]' (PyPI package mlcommons-loadgen)"


def loadgen_available() -> bool:
    try:
        import mlperf_loadgen  # noqa: F401
    except ImportError:
        return False
    return True


def require_loadgen() -> Any:
    """The ``mlperf_loadgen`` module, or a one-line ConfigError saying how to install it."""
    try:
        import mlperf_loadgen
    except ImportError:
        raise ConfigError(f"--backend loadgen needs MLCommons LoadGen, which is not installed: {INSTALL_HINT}") from None
    return mlperf_loadgen


def loadgen_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("mlcommons-loadgen")
    except Exception:  # noqa: BLE001 - informational only
        return None


# --- LoadGen's summary file ---------------------------------------------------------------------------------

_NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text, flags=re.MULTILINE)
    return m.group(1) if m else None


def parse_summary(text: str) -> dict[str, Any]:
    """The figures daybreak keeps from an ``mlperf_log_summary.txt``. Missing lines give None."""
    scenario = _find(r"^Scenario\s*:\s*(\w+)", text)
    result = _find(r"^Result is\s*:\s*(\w+)", text)
    # SingleStream's headline "90.0th percentile latency (ns) : N"; else the additional stats' "90.00 percentile"
    p90 = _find(r"^\s*90(?:\.0+)?th percentile latency \(ns\)\s*:\s*(\d+)", text) or \
        _find(r"^\s*90\.0+ percentile latency \(ns\)\s*:\s*(\d+)", text)
    mean = _find(r"^\s*Mean latency \(ns\)\s*:\s*(\d+)", text)
    samples_per_s = _find(r"^\s*Samples per second\s*:\s*" + _NUM, text) or \
        _find(r"^\s*QPS w/ loadgen overhead\s*:\s*" + _NUM, text)
    queries = _find(r"Processed at least \d+ queries \((\d+)\)", text)
    if scenario == "Offline" or queries is None:
        queries = _find(r"^\s*samples_per_query\s*:\s*(\d+)", text) if scenario == "Offline" else queries
    return {
        "scenario": scenario,
        "valid": None if result is None else result.upper() == "VALID",
        "p90_ms": None if p90 is None else int(p90) / 1e6,
        "mean_ms": None if mean is None else int(mean) / 1e6,
        "samples_per_s": None if samples_per_s is None else float(samples_per_s),
        "queries": None if queries is None else int(queries),
    }


# --- running it ---------------------------------------------------------------------------------------------


Scenario = Literal["SingleStream", "Offline"]  # LoadGen's scenarios daybreak runs (LoadgenScenario.scenario)


def run_loadgen(loaded: Any, classify: Any, run_dir: Path, *, min_query_count: int = 1024, min_duration_ms: int = 0,
                expected_latency_ns: int = 1_000_000, expected_qps: float = 1000.0,
                batch_size: int = 256,
                scenarios: tuple[Scenario, ...] = ("SingleStream", "Offline")) -> LoadgenResult:
    """Run LoadGen's scenarios on ``loaded`` (a daybreak.infer.latency.LoadedRun) with its ``classify``
    (daybreak.infer.latency.make_classifier); logs in run_dir/loadgen/."""
    lg = require_loadgen()
    queries = loaded.queries()
    inputs = loaded.inputs
    device = loaded.device
    n = loaded.n
    bs = max(1, min(batch_size, n))
    errors: list[BaseException] = []

    def issue_single(samples: list[Any]) -> None:  # LoadGen's QuerySample objects
        responses = []
        try:
            with torch.inference_mode():
                for s in samples:
                    classify(queries[s.index])
                    synchronize(device)
                    responses.append(lg.QuerySampleResponse(s.id, 0, 0))
        except BaseException as e:  # noqa: BLE001 - never let an exception cross into LoadGen's C++ thread
            errors.append(e)
            responses = [lg.QuerySampleResponse(s.id, 0, 0) for s in samples]
        lg.QuerySamplesComplete(responses)

    def issue_offline(samples: list[Any]) -> None:
        i = 0
        try:
            with torch.inference_mode():
                for i in range(0, len(samples), bs):
                    chunk = samples[i : i + bs]
                    idx = torch.tensor([s.index for s in chunk], dtype=torch.long)
                    classify(inputs.index_select(0, idx))
                    synchronize(device)
                    lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in chunk])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples[i:]])

    def flush() -> None:
        return None

    def load_samples(indices: list[int]) -> None:  # the eval set already lives in host memory
        return None

    out: dict[str, LoadgenScenario] = {}
    qsl = lg.ConstructQSL(n, n, load_samples, load_samples)
    try:
        for name in scenarios:
            sut = lg.ConstructSUT(issue_single if name == "SingleStream" else issue_offline, flush)
            try:
                settings = lg.TestSettings()
                settings.scenario = getattr(lg.TestScenario, name)
                settings.mode = lg.TestMode.PerformanceOnly
                settings.min_query_count = int(min_query_count)
                settings.min_duration_ms = int(min_duration_ms)
                if name == "SingleStream":
                    settings.single_stream_expected_latency_ns = int(max(expected_latency_ns, 1))
                else:
                    settings.offline_expected_qps = float(max(expected_qps, 1.0))
                log_dir = Path(run_dir) / LOADGEN_DIR / name
                log_dir.mkdir(parents=True, exist_ok=True)
                output = lg.LogOutputSettings()
                output.outdir = str(log_dir)
                output.copy_summary_to_stdout = False
                log_settings = lg.LogSettings()
                log_settings.log_output = output
                log_settings.enable_trace = False
                lg.StartTestWithLogSettings(sut, qsl, settings, log_settings)
            finally:
                lg.DestroySUT(sut)
            if errors:
                e = errors[0]
                raise DaybreakError(f"LoadGen {name}: the model failed during a query: {type(e).__name__}: "
                                    f"{(str(e).splitlines() or [''])[0][:200]}")
            summary = log_dir / SUMMARY_FILE
            if not summary.exists():
                raise DaybreakError(f"LoadGen {name}: no {SUMMARY_FILE} was written in {log_dir}")
            figures = parse_summary(summary.read_text(encoding="utf-8", errors="replace"))
            figures.pop("scenario", None)
            if name == "Offline":  # the one query's latency is no per-sample latency; keep only samples/s
                figures["p90_ms"] = figures["mean_ms"] = None
            out[name] = LoadgenScenario(scenario=name, log_dir=f"{LOADGEN_DIR}/{name}", **figures)
    finally:
        lg.DestroyQSL(qsl)
    return LoadgenResult(version=loadgen_version(), min_query_count=int(min_query_count),
                         min_duration_ms=int(min_duration_ms), single_stream=out.get("SingleStream"),
                         offline=out.get("Offline"))
