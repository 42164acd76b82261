"""Load on the leaderboard's server: p50/p99 latency and throughput of its reads, with Locust, on SQLite and
PostgreSQL, against a board of real size, the page cache on (as `serve` runs) and off (the baseline).

    pip install -e '.[loadtest]'                                   # Locust (not a dependency of daybreak itself)
    python benchmarks/leaderboard_load.py --pg postgresql://USER:PASS@127.0.0.1/DB   # docs/results/leaderboard-load.md
    python benchmarks/leaderboard_load.py --quick                  # a rehearsal: small, SQLite, seconds per point

The board: the 187 real DAWNBench v1 files (118 entries, ``../shared/data/dawnbench-entries`` or
``$DAYBREAK_DAWNBENCH_ENTRIES``) and MLPerf Training rounds v2.1, v3.0, v3.1 and v4.0, ``--systems`` systems each,
ResNet-50 (on the imagenet board beside DAWNBench) and BERT (its own board): results trees in the published layout
(``<submitter>/systems/<system>.json``, ``<submitter>/results/<system>/<benchmark>/result_<n>.txt``, MLPerf logs
with the round's run count, a third of the systems in the open division), written here with seeded random times
and imported through `leaderboard import-mlperf`'s own reader (daybreak.leaderboard.mlperf_import), RCP check and
all. 250 systems a round: 2,118 entries. The seeded database is kept in ``--work-dir`` and reused.

Each point is one endpoint at one number of concurrent clients: Locust users (each its own loopback address,
127.0.2.N, as separate readers are; each one request at a time, no think time) asking for it for ``--seconds``
after ``--warmup`` seconds not counted: the home page ``/``, a board (``/tasks/imagenet/train-time``: DAWNBench and
MLPerf ResNet-50 together, the largest), an entry (``/entries/ID``, each request a random entry of the board; the
cached server has read each once before) and
the JSON API (``/api/leaderboard/imagenet/train-time?top=100``). Latency is measured by Locust per request (its
request event: the time from sending to the whole body read), reported as the median and 99th percentile of every
request in the window; throughput is requests completed per second; server CPU is the server process's user+system
time over the window (psutil) per request. The server is started fresh for each database and mode, with `serve`'s
limits but the per-client budgets off (``--client-rate 0 --client-work 0``: a Locust user sends requests back to
back; the budgets are tested by tests/test_leaderboard_load.py) and ``--max-connections 400``; the load generator
runs on the same machine (its CPU competes with the server's: the figures are for this machine as a whole).

Cached and uncached points alternate (cached, uncached, cached, ... for each endpoint and client count), each
mode's server a fresh process; the ratio printed is uncached / cached of the median latency and of server CPU per
request, with the machine's load average at each point. ``--repeats R`` measures each point R times (interleaved)
and gives the ratio's 95% interval over the repeats (a t-interval of the log ratios).

Exit status 0; the figures are printed and written as JSON to ``--out`` (default: the work dir).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ENTRIES = Path(os.environ.get("DAYBREAK_DAWNBENCH_ENTRIES") or REPO.parents[0] / "shared/data/dawnbench-entries")
ROUNDS = ("v2.1", "v3.0", "v3.1", "v4.0")
BOARD = "/tasks/imagenet/train-time"
ENDPOINTS = {"home": "/", "board": BOARD, "entry": "/entries/{id}",
             "api": "/api/leaderboard/imagenet/train-time?top=100"}
SERVER_FLAGS = ["--client-rate", "0", "--client-work", "0", "--max-connections", "400"]


# --- the board: DAWNBench's files and synthesized MLPerf rounds, through the real importers ----------------------

def _record(key: str, value: Any, time_ms: int, kind: str = "POINT_IN_TIME", **metadata: Any) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": kind, "key": key,
                                     "value": value, "metadata": {"file": "train.py", "lineno": 1, **metadata}})


HYPERPARAMETERS = {  # the closed division's required hyperparameters (what the RCP check reads)
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
RUNS = {"resnet": 5, "bert": 10}
T0_MS = {"v2.1": 1_665_000_000_000, "v3.0": 1_680_000_000_000, "v3.1": 1_697_000_000_000,
         "v4.0": 1_715_000_000_000}


def mlperf_log(benchmark: str, org: str, system: str, division: str, start_ms: int, duration_ms: int) -> str:
    """One run's MLPerf log: init, run_start, three epochs each ending with an evaluation (the last at the round's
    target), run_stop ``duration_ms`` after run_start."""
    t_init = start_ms - 120_000
    lines = [_record(k, v, t_init) for k, v in (("submission_org", org), ("submission_platform", system),
                                                 ("submission_division", division), ("submission_status", "onprem"),
                                                 ("submission_benchmark", benchmark), ("cache_clear", True))]
    lines.append(_record("init_start", None, t_init + 10, "INTERVAL_START"))
    lines += [_record(k, v, t_init + 20) for k, v in HYPERPARAMETERS[benchmark]]
    lines += [_record("seed", 1234, t_init + 30), _record("init_stop", None, start_ms - 1_000, "INTERVAL_END"),
              _record("run_start", None, start_ms, "INTERVAL_START")]
    ends = [start_ms + duration_ms // 3, start_ms + 2 * duration_ms // 3, start_ms + duration_ms - 500]
    begin = start_ms
    for epoch, (end, accuracy) in enumerate(zip(ends, ACCURACIES[benchmark]), start=1):
        lines += [_record("epoch_start", None, begin, "INTERVAL_START", epoch_num=epoch),
                  _record("epoch_stop", None, end - 2_000, "INTERVAL_END", epoch_num=epoch),
                  _record("eval_start", None, end - 2_000, "INTERVAL_START", epoch_num=epoch),
                  _record("eval_accuracy", accuracy, end, epoch_num=epoch),
                  _record("eval_stop", None, end, "INTERVAL_END", epoch_num=epoch)]
        begin = end
    lines.append(_record("run_stop", None, start_ms + duration_ms, "INTERVAL_END", status="success"))
    return "\n".join(lines) + "\n"


ACCELERATORS = ("NVIDIA H100-SXM5-80GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H200-SXM-141GB", "Google TPU v5p",
                "Intel Gaudi 2", "AMD Instinct MI300X")
FRAMEWORKS = ("PyTorch NVIDIA Release 24.04", "MXNet NVIDIA Release 23.04", "JAX 0.4.20", "PaddlePaddle 2.5")


def write_round(root: Path, round_: str, systems: int, rng: random.Random) -> Path:
    """A results tree of ``systems`` systems (in submitters of 10), each with ResNet-50 and BERT results."""
    tree = root / f"training_results_{round_}"
    for i in range(systems):
        submitter, system = f"Org{i // 10:03d}", f"system_{round_.replace('.', '')}_{i:04d}"
        division = "open" if i % 3 == 2 else "closed"
        nodes, per_node = rng.choice((1, 2, 4, 8, 16, 64)), rng.choice((4, 8))
        folder = tree / submitter / "systems"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{system}.json").write_text(json.dumps({
            "submitter": submitter, "division": division, "status": rng.choice(("available", "preview",
                                                                                  "Available cloud")),
            "system_name": system, "number_of_nodes": str(nodes), "host_processors_per_node": "2",
            "host_processor_model_name": "Intel(R) Xeon(R) Platinum 8480C", "host_processor_core_count": "56",
            "host_memory_capacity": "2 TB", "accelerators_per_node": str(per_node),
            "accelerator_model_name": rng.choice(ACCELERATORS), "accelerator_memory_capacity": "80 GB",
            "framework": rng.choice(FRAMEWORKS), "other_software_stack": {}, "operating_system": "Ubuntu 22.04",
            "sw_notes": ""}))
        speed = nodes * per_node
        for benchmark in ("resnet", "bert"):
            base_ms = (3_600_000 if benchmark == "resnet" else 1_500_000) * 8 / speed ** 0.8
            results = tree / submitter / "results" / system / benchmark
            results.mkdir(parents=True, exist_ok=True)
            for run in range(RUNS[benchmark]):
                start = T0_MS[round_] + 3_600_000 * (i * 20 + run)
                duration = max(60_000, int(base_ms * rng.uniform(0.9, 1.15)))
                (results / f"result_{run}.txt").write_text(mlperf_log(benchmark, submitter, system, division,
                                                                       start, duration))
    return tree


def seed(url: str, trees: list[tuple[str, Path]]) -> dict[str, Any]:
    """The DAWNBench files and every MLPerf tree imported into ``url`` -> counts and seconds."""
    from daybreak.leaderboard.ingest.importer import import_paths
    from daybreak.leaderboard.mlperf_import import import_mlperf
    from daybreak.leaderboard.store.database import Store

    started = time.perf_counter()
    with Store(url) as store:
        if not ENTRIES.is_dir():
            raise SystemExit(f"the DAWNBench entries are not at {ENTRIES} (set DAYBREAK_DAWNBENCH_ENTRIES)")
        dawnbench = import_paths(store, [ENTRIES])
        stored = {"dawnbench": dawnbench.stored + dawnbench.duplicates}
        for round_, tree in trees:
            _, report = import_mlperf(store, tree, round_)
            if report.skipped:
                raise SystemExit(f"{tree}: {report.skipped} folders skipped: {report.problems()[0].reason}")
            stored[round_] = report.stored + report.duplicates
        total = store.count()
    return {"entries": total, "by_source": stored, "seconds": round(time.perf_counter() - started, 1)}


def seeded_sqlite(work: Path, systems: int, trees: list[tuple[str, Path]]) -> tuple[str, dict[str, Any]]:
    """The seeded SQLite database of this size, made once and kept in ``work``."""
    path = work / f"board-{systems}.sqlite"
    info = work / f"board-{systems}.json"
    if path.is_file() and info.is_file():
        return f"sqlite:///{path}", json.loads(info.read_text())
    partial = path.with_suffix(".partial")
    for leftover in work.glob(f"{partial.name}*"):
        leftover.unlink()
    counts = seed(f"sqlite:///{partial}", trees)
    partial.rename(path)
    info.write_text(json.dumps(counts))
    return f"sqlite:///{path}", counts


def seeded_postgresql(url: str, systems: int, trees: list[tuple[str, Path]]) -> tuple[str, dict[str, Any]]:
    """A schema of its own in the PostgreSQL database ``url`` (made anew), seeded the same way."""
    from sqlalchemy import create_engine, text

    from daybreak.leaderboard.store.database import normalize_url

    schema = f"daybreak_load_{systems}"
    engine = create_engine(normalize_url(url))
    with engine.begin() as conn:
        conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    engine.dispose()
    scoped = f"{normalize_url(url)}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    return scoped, seed(scoped, trees)


def entry_ids(url: str) -> list[int]:
    """The entries of the board the entry point reads (DAWNBench's ImageNet entries and MLPerf's ResNet-50)."""
    from daybreak.leaderboard.store.database import Store

    with Store(url, create=False) as store:
        return [r.entry.id for r in store.ranked("imagenet", "time_to_target_s")]


# --- the server under test: a fresh process per database and mode -------------------------------------------------

def serve_main(argv: list[str]) -> int:
    """``_serve --db URL --port P [--no-cache] [serve's limit flags]``: `serve`'s app and HTTP server, the page
    cache on or off."""
    import uvicorn

    from daybreak.leaderboard.store.database import Store
    from daybreak.leaderboard.web.app import create_app, server_config
    from daybreak.leaderboard.web.limits import Limits
    from daybreak.options import add_dataclass_flags, dataclass_from_args

    p = argparse.ArgumentParser(prog="leaderboard_load.py _serve")
    p.add_argument("--db", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--no-cache", action="store_true")
    add_dataclass_flags(p, Limits, "limits")
    args = p.parse_args(argv)
    limits = dataclass_from_args(Limits, args).check()
    store = Store(args.db, create=False)
    app = create_app(store, limits=limits, page_cache=not args.no_cache)
    uvicorn.Server(server_config(app, "127.0.0.1", args.port, limits, log_level="warning",
                                 access_log=False)).run()
    return 0


class Server:
    def __init__(self, url: str, cached: bool) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        command = [sys.executable, __file__, "_serve", "--db", url, "--port", str(self.port), *SERVER_FLAGS]
        self.process = subprocess.Popen(command + ([] if cached else ["--no-cache"]), stderr=subprocess.PIPE,
                                        text=True)
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the server did not start: {self.process.stderr.read()[-2000:]}")  # type: ignore
            time.sleep(0.1)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# --- the load: Locust, in a process of its own (gevent patches the interpreter) ------------------------------------

def locust_main(argv: list[str]) -> int:
    """``_locust HOST PATH USERS WARMUP SECONDS IDS_FILE SERVER_PID``: USERS Locust users, each from its own
    loopback address, asking for PATH back to back; prints the window's latencies, counts and the server process's
    CPU time over the window as JSON."""
    from gevent import monkey

    monkey.patch_all()
    import gevent
    from locust import HttpUser, constant, task
    from locust.env import Environment
    from requests.adapters import HTTPAdapter

    import psutil

    host, path, users, warmup, seconds, ids_file, server_pid = argv
    server = psutil.Process(int(server_pid))

    def cpu_s() -> float:
        t = server.cpu_times()
        return float(t.user + t.system)

    ids = json.loads(Path(ids_file).read_text())
    counter = [0]
    window: dict[str, Any] = {"on": False, "times_ms": [], "failures": 0, "statuses": {}}

    class FromAddress(HTTPAdapter):
        def __init__(self, address: str) -> None:
            self.address = address
            super().__init__(pool_connections=1, pool_maxsize=1)

        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            kwargs["source_address"] = (self.address, 0)
            super().init_poolmanager(*args, **kwargs)

    class Reader(HttpUser):
        wait_time = constant(0)

        def on_start(self) -> None:
            counter[0] += 1
            n = counter[0]
            self.client.mount("http://", FromAddress(f"127.0.2.{n}" if n < 255 else f"127.0.3.{n - 254}"))

        @task
        def read(self) -> None:
            target = path.replace("{id}", str(random.choice(ids))) if "{id}" in path else path
            with self.client.get(target, name=path, catch_response=True) as r:
                if r.status_code != 200:
                    r.failure(f"status {r.status_code}")

    env = Environment(user_classes=[Reader], host=host)

    def on_request(response_time: float, exception: Any = None, response: Any = None, **_: Any) -> None:
        if not window["on"]:
            return
        status = getattr(response, "status_code", None)
        window["statuses"][str(status)] = window["statuses"].get(str(status), 0) + 1
        if exception is not None or status != 200:
            window["failures"] += 1
        else:
            window["times_ms"].append(response_time)

    env.events.request.add_listener(on_request)
    runner = env.create_local_runner()
    runner.start(int(users), spawn_rate=max(1, int(users)))
    gevent.sleep(float(warmup))
    window["on"], started, cpu_before = True, time.perf_counter(), cpu_s()
    gevent.sleep(float(seconds))
    window["on"], elapsed, cpu_window = False, time.perf_counter() - started, cpu_s() - cpu_before
    runner.quit()
    times = sorted(window["times_ms"])
    print(json.dumps({"n": len(times), "failures": window["failures"], "statuses": window["statuses"],
                      "seconds": elapsed, "rps": len(times) / elapsed, "server_cpu_s": cpu_window,
                      "server_cpu_ms_per_request": cpu_window * 1000 / len(times) if times else None,
                      "p50_ms": _percentile(times, 50), "p99_ms": _percentile(times, 99),
                      "max_ms": times[-1] if times else None}))
    return 0


def _percentile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank percentile of sorted values."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def measure(server: Server, path: str, users: int, warmup_s: float, seconds: float, ids_file: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    done = subprocess.run([sys.executable, __file__, "_locust", server.base, path, str(users), str(warmup_s),
                           str(seconds), str(ids_file), str(server.process.pid)], capture_output=True, text=True,
                          timeout=warmup_s + seconds + 120)
    if done.returncode != 0:
        raise SystemExit(f"locust failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_before"], result["load_after"] = load_before, os.getloadavg()
    return result


def warm(server: Server, ids: list[int]) -> None:
    """Each entry's page read once (the cache holds them all: 10,000 answers)."""
    import urllib.request

    for entry_id in ids:
        with urllib.request.urlopen(f"{server.base}/entries/{entry_id}", timeout=60) as r:
            r.read()


# --- the experiment ----------------------------------------------------------------------------------------------

def log_ratio_interval(ratios: list[float]) -> tuple[float, float] | None:
    from daybreak.analysis.stats import log_confidence_interval

    return log_confidence_interval(ratios)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_serve":
        return serve_main(sys.argv[2:])
    if len(sys.argv) > 1 and sys.argv[1] == "_locust":
        return locust_main(sys.argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "daybreak-leaderboard-load")
    p.add_argument("--systems", type=int, default=250, help="MLPerf systems a round (4 rounds, 2 benchmarks each; "
                                                            "0: the DAWNBench entries alone)")
    p.add_argument("--pg", metavar="URL", default=os.environ.get("DAYBREAK_TEST_PG_URL", ""),
                   help="PostgreSQL database to seed a schema of and serve from (default: $DAYBREAK_TEST_PG_URL)")
    p.add_argument("--clients", default="1,10,100")
    p.add_argument("--endpoints", default=",".join(ENDPOINTS))
    p.add_argument("--seconds", type=float, default=20.0, help="the measured window of each point")
    p.add_argument("--warmup", type=float, default=5.0, help="seconds of load before the window (not counted)")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--no-baseline", action="store_true", help="the cached server only")
    p.add_argument("--quick", action="store_true", help="a rehearsal: 10 systems a round, 1 and 10 clients, "
                                                        "3 s points, SQLite only")
    p.add_argument("--out", type=Path, help="the JSON of every point (default: WORK_DIR/results-*.json)")
    args = p.parse_args()
    if args.quick:
        args.systems, args.clients, args.seconds, args.warmup, args.pg = 10, "1,10", 3.0, 1.0, ""
    clients = [int(c) for c in args.clients.split(",")]
    endpoints = [e for e in args.endpoints.split(",")]
    args.work_dir.mkdir(parents=True, exist_ok=True)

    trees: list[tuple[str, Path]] = []
    tree_dir = args.work_dir / f"trees-{args.systems}"
    need_trees = not (args.work_dir / f"board-{args.systems}.sqlite").is_file() or bool(args.pg)
    if need_trees:
        shutil.rmtree(tree_dir, ignore_errors=True)
        rng = random.Random(38)
        trees = [(r, write_round(tree_dir, r, args.systems, rng)) for r in ROUNDS] if args.systems else []
    databases: list[tuple[str, str, dict[str, Any]]] = [("sqlite", *seeded_sqlite(args.work_dir, args.systems,
                                                                                   trees))]
    if args.pg:
        databases.append(("postgresql", *seeded_postgresql(args.pg, args.systems, trees)))
    shutil.rmtree(tree_dir, ignore_errors=True)
    for kind, _, counts in databases:
        print(f"{kind}: {counts['entries']:,} entries ({counts['by_source']}; seeded in {counts['seconds']} s)")

    system = {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version(),
              "platform": platform.platform(), "load_at_start": os.getloadavg()}
    print(f"machine: {system['cpus']} CPUs, {system['platform']}, load {system['load_at_start']}")
    modes = ["cached"] if args.no_baseline else ["cached", "uncached"]
    points: list[dict[str, Any]] = []
    for kind, url, counts in databases:
        ids_file = args.work_dir / f"ids-{kind}-{args.systems}.json"
        ids_file.write_text(json.dumps(entry_ids(url)))
        servers = {mode: Server(url, cached=mode == "cached") for mode in modes}
        try:
            for endpoint in endpoints:
                if endpoint == "entry" and "cached" in servers:  # every entry read once: the points are warm
                    warm(servers["cached"], json.loads(ids_file.read_text()))
                for users in clients:
                    for repeat in range(args.repeats):
                        for mode in modes:  # interleaved: cached, uncached, cached, ...
                            r = measure(servers[mode], ENDPOINTS[endpoint], users, args.warmup, args.seconds,
                                        ids_file)
                            r.update(database=kind, entries=counts["entries"], endpoint=endpoint,
                                     path=ENDPOINTS[endpoint], clients=users, mode=mode, repeat=repeat)
                            points.append(r)
                            print(_line(r), flush=True)
        finally:
            for server in servers.values():
                server.stop()
    print()
    print(_summary(points, modes))
    out = args.out or args.work_dir / f"results-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"system": system, "config": {k: str(v) for k, v in vars(args).items()},
                               "points": points}, indent=2))
    print(f"\nwrote {out}")
    return 0


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _line(r: dict[str, Any]) -> str:
    return (f"{r['database']:10} {r['mode']:8} {r['endpoint']:5} {r['clients']:4} clients: p50 {_fmt(r['p50_ms'])} ms"
            f"  p99 {_fmt(r['p99_ms'])} ms  {r['rps']:7.1f} req/s  server CPU "
            f"{_fmt(r['server_cpu_ms_per_request'], 2)} ms/req  failures {r['failures']}  "
            f"load {r['load_before'][0]:.1f}->{r['load_after'][0]:.1f}")


def _summary(points: list[dict[str, Any]], modes: list[str]) -> str:
    """The table of the cached points (medians over repeats) and, with the baseline, uncached / cached."""
    lines = [f"{'database':10} {'endpoint':8} {'clients':>7} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8} "
             f"{'CPU ms/req':>10}" + ("  uncached/cached: p50, CPU per request [95% interval]"
                                      if "uncached" in modes else "")]
    keys = sorted({(p["database"], p["endpoint"], p["clients"]) for p in points},
                  key=lambda k: (k[0], list(ENDPOINTS).index(k[1]), k[2]))
    for key in keys:
        def of(mode: str, field: str) -> list[float]:
            return [p[field] for p in points if (p["database"], p["endpoint"], p["clients"]) == key
                    and p["mode"] == mode and p[field] is not None]

        row = f"{key[0]:10} {key[1]:8} {key[2]:7d}"
        for field, digits in (("p50_ms", 1), ("p99_ms", 1), ("rps", 1), ("server_cpu_ms_per_request", 2)):
            values = of("cached", field)
            row += f" {_fmt(statistics.median(values) if values else None, digits):>8}"
        if "uncached" in modes:
            for field in ("p50_ms", "server_cpu_ms_per_request"):
                ratios = [u / c for u, c in zip(of("uncached", field), of("cached", field)) if c]
                ci = log_ratio_interval(ratios) if len(ratios) > 1 else None
                row += f"  {_fmt(statistics.median(ratios) if ratios else None, 1)}x" + (
                    f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
        lines.append(row)
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
