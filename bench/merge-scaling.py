#!/usr/bin/env python3
"""The Spark merge's scaling table (docs/spark.md, "Scaling: the load generator"): a real Kafka
broker on 127.0.0.1 (python/tests/kafka_broker.py), simulated probes (bench/merge-load.py) and
`python -m sonde.spark merge` run by its command line, read back through its `_job.json` and
its Parquet changelogs only.

    .venv/bin/python bench/merge-scaling.py                       # both parts, defaults below
    .venv/bin/python bench/merge-scaling.py --skip-live --rounds 2
    .venv/bin/python bench/merge-scaling.py --skip-throughput --live-probes 1000 --live-duration 600

**Throughput.** The generator preloads a backlog (--probes × --backlog intervals, packet time
from a fixed epoch) into topics of --partitions partitions; then the job reads it from the
earliest offsets with `--until-idle`, once per configuration and round, interleaved (local[1],
local[2], a standalone master with two 1-core workers on 127.0.0.1, then again), each with a
fresh output and checkpoint. `_job.json` is sampled every 0.25 s: contributions per second are
(messages read after the first batch) ÷ (the time from the end of the first batch to the last
message counted), so the JVM's and the session's start and the first batch (Kafka consumers
made, code generated) are left out and shown apart; Spark's own figure (Σ messages ÷ Σ
triggerExecution of the batches after the first, from `recent[].spark_ms`) beside it. After
each run the merged view (the newest row per key of `intervals/` and `quantiles/`) is compared
with the sums the generator expects: every interval's counters and every distribution's count,
min and max.

**Latency and state.** Fresh topics; the job at --live-master (default local[2]) with trigger
1 s; a few warm-up probes until the job has merged something (its first batch is slow);
then --live-probes probes, one interval per --live-interval each, for --live-duration seconds.
An interval's latency is the time its merged rows are on disk complete (for every key of it,
the first changelog file whose row has the expected packets, or count for a distribution,
timed by the file's ctime: the rename that made it visible) less the interval's end. The
job's state size (`state` in `_job.json`, every numeric field) is sampled every
--sample-every seconds into state.csv.

Everything the harness starts it stops (by process id), broker included. Results: a markdown
report printed and written to OUT/report.md, with the raw samples beside it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
VENV_PY = REPO / ".venv" / "bin" / "python"
JARS = REPO / "target" / "tmp" / "spark-kafka-4.2.0" / "lib"
LOAD = REPO / "bench" / "merge-load.py"
PYTHON_DIR = [REPO / "python"]  # where the job's `sonde` package is (--python-path)
SCALE = {"ms": 1_000_000, "%": 10_000}
INTERVAL_KEY = ("start", "proto", "net")
DIST_KEY = ("start", "metric", "dir", "net")


def log(msg: str) -> None:
    print(f"merge-scaling {time.strftime('%H:%M:%S')}: {msg}", file=sys.stderr, flush=True)


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


STARTED: List[subprocess.Popen] = []  # every process this run started, stopped at its end


def popen(*args, **kwargs) -> subprocess.Popen:
    p = subprocess.Popen(*args, **kwargs)
    STARTED.append(p)
    return p


def stop_proc(p: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM, then SIGKILL, to one process we started."""
    if p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def job_env() -> Dict[str, str]:
    py = str(VENV_PY)
    return {**os.environ, "PYTHONPATH": str(PYTHON_DIR[0]), "PYSPARK_PYTHON": py, "PYSPARK_DRIVER_PYTHON": py,
            "SPARK_LOCAL_IP": "127.0.0.1"}


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- a standalone Spark cluster on 127.0.0.1 ---

class Standalone:
    """A standalone master and `workers` workers of one core each, from pyspark's own install
    (its bin/spark-class), all on 127.0.0.1."""

    def __init__(self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "2g"):
        import pyspark
        self.home = Path(pyspark.__file__).parent
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port, self.ui = free_port(), free_port()
        env = {**job_env(), "SPARK_HOME": str(self.home), "SPARK_NO_DAEMONIZE": "1"}
        self.procs: List[subprocess.Popen] = []
        cls = str(self.home / "bin" / "spark-class")
        self.procs.append(self._start(env, "master", [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                                      "--port", str(self.port), "--webui-port", str(self.ui)]))
        self._wait(lambda s: True, "the master's web UI")
        for i in range(workers):
            wd = self.dir / f"worker{i}"
            wd.mkdir(exist_ok=True)
            self.procs.append(self._start(env, f"worker{i}", [
                cls, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", str(cores),
                "--memory", memory, "--webui-port", str(free_port()), "--work-dir", str(wd), self.url]))
        self._wait(lambda s: sum(1 for w in s.get("workers", []) if w.get("state") == "ALIVE") >= workers,
                   f"{workers} workers ALIVE")

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, env, name: str, cmd: List[str]) -> subprocess.Popen:
        out = open(self.dir / f"{name}.log", "ab")
        return popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def status(self) -> Dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui}/json/", timeout=2) as r:
            return json.loads(r.read())

    def _wait(self, ok, what: str) -> None:
        deadline = time.monotonic() + 120
        while True:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited while waiting for {what}; see {self.dir}")
            try:
                if ok(self.status()):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"standalone cluster: no {what} in 120 s; see {self.dir}")
            time.sleep(0.5)

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers (and their executors) first, the master last
            stop_proc(p)


# --- the job ---

def flatten(value: Any, prefix: str, out: Dict[str, float]) -> None:
    if isinstance(value, bool):
        out[prefix] = float(value)
    elif isinstance(value, (int, float)):
        out[prefix] = float(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, f"{prefix}.{i}", out)


def state_size(state: Dict[str, float]) -> Tuple[Optional[float], Optional[float]]:
    """(rows, bytes) of a flattened `state`: Spark's stateOperators' numRowsTotal and
    memoryUsedBytes summed, else `rows` (and `memory_bytes`) as the job names them."""
    rows = [v for k, v in state.items() if k.endswith("numRowsTotal")]
    mem = [v for k, v in state.items() if k.endswith("memoryUsedBytes")]
    if rows:
        return sum(rows), (sum(mem) if mem else None)
    if not mem and "state.memory_bytes" in state:
        mem = [state["state.memory_bytes"]]
    return state.get("state.rows", state.get("rows")), (sum(mem) if mem else None)


class Job:
    """`python -m sonde.spark merge` on `master`, sampled through its `_job.json`."""

    def __init__(self, name: str, brokers: str, out: Path, master: str, args: List[str], sample_every: float = 0.25,
                 cpus: Optional[str] = None):
        self.name = name
        self.out = out
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        # `cpus`: the job (its JVM, Python workers and all they start) kept to these CPUs.
        self.cmd = (["taskset", "-c", cpus] if cpus else []) + [str(VENV_PY), "-m", "sonde.spark", "merge", "--kafka", brokers, str(out / "view"),
                    "--checkpoint", str(out / "checkpoint"), "--master", master, "--jars", str(JARS), *args]
        self.samples: List[Dict[str, Any]] = []
        self.batches: Dict[int, Dict[str, Any]] = {}  # every `recent` entry seen, by batch id
        self.last: Dict[str, Any] = {}
        self.started = time.time()
        self.load_start = loadavg()
        self._stderr = open(out / "job.log", "ab")
        self.proc = popen(self.cmd, cwd=REPO, env=job_env(), stdout=self._stderr,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self._stop = threading.Event()
        self._sample_every = sample_every
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def status(self) -> Optional[Dict[str, Any]]:
        try:
            return json.loads((self.out / "view" / "_job.json").read_text())
        except (OSError, ValueError):
            return None

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.take_sample()
            self._stop.wait(self._sample_every)

    def take_sample(self) -> None:
        st = self.status()
        if st is None:
            return
        self.last = st
        for b in st.get("recent") or []:
            if isinstance(b, dict) and "batch" in b:
                self.batches[b["batch"]] = b
        flat: Dict[str, float] = {}
        flatten(st.get("state"), "state", flat)
        rows, mem = state_size(flat)
        self.samples.append({"t": time.time(), "messages": st.get("messages", 0), "batches": st.get("batches", 0),
                             "state_rows": rows, "state_bytes": mem, "load": loadavg(), **flat})

    def wait(self, timeout: float) -> int:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log(f"{self.name}: still running after {timeout:.0f} s; stopped")
            stop_proc(self.proc, 30)
            rc = -1
        self.ended = time.time()
        self.load_end = loadavg()
        self._stop.set()
        self._thread.join()
        self.take_sample()
        self._stderr.close()
        return rc

    def messages(self) -> int:
        return int(self.last.get("messages", 0) or 0)

    def write_samples(self, path: Path) -> None:
        cols: List[str] = []
        for s in self.samples:
            cols += [k for k in s if k not in cols]
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            for s in self.samples:
                w.writerow({**s, "t": round(s["t"] - self.started, 3)})


def spark_seconds(entry: Dict[str, Any]) -> Optional[float]:
    ms = entry.get("spark_ms")
    if isinstance(ms, dict):
        ms = ms.get("triggerExecution")
    return ms / 1000.0 if isinstance(ms, (int, float)) else None


# --- the merged view ---

def read_view(directory: Path, key: Tuple[str, ...], columns: List[str], since: Dict[str, Tuple[float, float]],
              seen: Dict[tuple, List[Tuple[float, int]]], value: str) -> int:
    """Reads the changelog files of `directory` not read yet (`since`: name -> ctime): for each
    key, (ctime, value) of each row. Returns the files read."""
    import pyarrow.parquet as pq

    n = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for e in entries:
        if e.name.startswith(("_", ".")) or not e.name.endswith(".parquet"):
            continue
        try:
            st = e.stat()
        except OSError:
            continue
        if since.get(e.name) == (st.st_ctime, st.st_size):
            continue
        try:
            t = pq.read_table(e.path, columns=list(key) + [value])
        except Exception:  # noqa: BLE001 — a file replaced under us: read again next time
            continue
        since[e.name] = (st.st_ctime, st.st_size)
        cols = [t.column(c).to_pylist() for c in list(key) + [value]]
        for row in zip(*cols):
            seen.setdefault(tuple(row[:-1]), []).append((st.st_ctime, row[-1]))
        n += 1
    return n


def newest_view(directory: Path, key: Tuple[str, ...]) -> Dict[tuple, Dict[str, Any]]:
    """The merged view: the row with the highest `batch` per key."""
    import pyarrow.parquet as pq

    rows: Dict[tuple, Dict[str, Any]] = {}
    if not directory.is_dir():
        return rows
    for p in directory.iterdir():
        if p.name.startswith(("_", ".")) or not p.name.endswith(".parquet"):
            continue
        for r in pq.read_table(p).to_pylist():
            k = tuple(r[c] for c in key)
            if k not in rows or r["batch"] > rows[k]["batch"]:
                rows[k] = r
    return rows


def check_view(view: Path, expected: Dict[str, Any]) -> Dict[str, Any]:
    """The merged view against the generator's sums: counters, counts, min, max exactly."""
    ints = newest_view(view / "intervals", INTERVAL_KEY)
    dists = newest_view(view / "quantiles", DIST_KEY)
    bad_i = bad_d = 0
    packets = hist = 0
    for s, proto, net, *c in expected["intervals"]:
        r = ints.get((s, proto, net))
        if r is None or [r[k] for k in ("packets", "bytes", "flows_opened", "flows_closed", "flows_active")] != c:
            bad_i += 1
        else:
            packets += r["packets"]
    for s, metric, d, net, unit, count, total, lo, hi in expected["distributions"]:
        r = dists.get((s, metric, d, net))
        scale = SCALE.get(unit, 1)
        if (r is None or r["count"] != count or round(r["min"] * scale) != lo or round(r["max"] * scale) != hi
                or abs(r["mean"] * r["count"] * scale - total) > max(1.0, abs(total) * 1e-9)):
            bad_d += 1
        else:
            hist += r["count"]
    extra = (len(ints) - len(expected["intervals"]), len(dists) - len(expected["distributions"]))
    return {"interval_keys_wrong": bad_i, "distribution_keys_wrong": bad_d, "extra_keys": extra,
            "packets": packets, "histogram_count": hist,
            "exact": bad_i == 0 and bad_d == 0 and extra == (0, 0)
            and packets == expected["totals"]["packets"] and hist == expected["totals"]["histogram_count"]}


# --- the two parts ---

def generate(brokers: str, args: List[str], expect: Path, logfile: Path) -> Dict[str, Any]:
    cmd = [str(VENV_PY), str(LOAD), "--kafka", brokers, "--expect", str(expect), *args]
    with open(logfile, "ab") as err:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}); see {logfile}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def throughput(brokers: str, broker, a, out: Path, help_text: str) -> Dict[str, Any]:
    broker.create_topics(("sonde-intervals", a.partitions), ("sonde-histograms", a.partitions))
    log(f"preloading {a.probes} probes x {a.backlog} intervals")
    pub = generate(brokers, ["--probes", str(a.probes), "--backlog", str(a.backlog), "--seed", str(a.seed)],
                   out / "backlog-expected.json", out / "generator.log")
    expected = json.loads((out / "backlog-expected.json").read_text())
    total = pub["messages"]
    log(f"preloaded {total} messages in {pub['seconds']} s ({pub['messages_per_s']}/s)")
    job_args = ["--starting-offsets", "earliest", "--until-idle", str(a.until_idle), "--trigger", str(a.trigger)]
    if a.batch_messages and "--max-messages-per-batch" in help_text:
        job_args += ["--max-messages-per-batch", str(a.batch_messages)]
    job_args += a.job_arg
    cluster = None
    runs: List[Dict[str, Any]] = []
    try:
        for rnd in range(a.rounds):
            for conf in a.configs:
                if conf == "standalone" and cluster is None:
                    log("starting a standalone master and two 1-core workers on 127.0.0.1")
                    cluster = Standalone(out / "standalone")
                master = cluster.url if conf == "standalone" else conf
                name = f"{conf.replace('[', '').replace(']', '')}-r{rnd + 1}"
                log(f"{name}: the job on {master}")
                job = Job(name, brokers, out / name, master, job_args, cpus=pinned(conf, a.pin))
                deadline = time.monotonic() + a.job_timeout
                while job.proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.5)
                rc = job.wait(max(1.0, deadline - time.monotonic()))
                job.write_samples(out / name / "samples.csv")
                runs.append(summarize_throughput(job, conf, rnd + 1, rc, total, expected))
                log(f"{name}: {json.dumps(runs[-1])}")
    finally:
        if cluster is not None:
            cluster.stop()
    return {"publish": pub, "runs": runs, "messages": total, "expected_totals": expected["totals"]}


def pinned(conf: str, pin: bool) -> Optional[str]:
    """--pin: the CPUs a `local[N]` job is kept to, 0 … N-1 (a standalone cluster's are not pinned)."""
    if not pin or not conf.startswith("local["):
        return None
    n = int(conf[len("local["):-1])
    return ",".join(str(c) for c in range(n))


def summarize_throughput(job: Job, conf: str, rnd: int, rc: int, total: int, expected) -> Dict[str, Any]:
    s = job.samples
    first = next((x for x in s if x["messages"] > 0), None)
    done = next((x for x in s if x["messages"] >= total), None)
    r: Dict[str, Any] = {"config": conf, "round": rnd, "rc": rc, "messages": job.messages(),
                         "load_start": job.load_start, "load_end": job.load_end}
    if first and done and done["t"] > first["t"]:
        r["first_batch_done_s"] = round(first["t"] - job.started, 2)
        r["steady_messages"] = done["messages"] - first["messages"]
        r["steady_s"] = round(done["t"] - first["t"], 2)
        r["per_s"] = round(r["steady_messages"] / r["steady_s"], 1)
        r["overall_s"] = round(done["t"] - job.started, 2)
        r["overall_per_s"] = round(done["messages"] / r["overall_s"], 1)
    batches = sorted(job.batches.values(), key=lambda b: b["batch"])
    with_msgs = [b for b in batches if b.get("messages")]
    r["batches"] = len(with_msgs)
    later = with_msgs[1:]
    secs = [spark_seconds(b) for b in later]
    if later and all(x is not None for x in secs) and sum(secs) > 0:
        r["spark_per_s"] = round(sum(b["messages"] for b in later) / sum(secs), 1)
        r["spark_batches"] = len(later)
    sizes = [x["state_rows"] for x in s if x.get("state_rows") is not None]
    r["state_rows_max"] = max(sizes) if sizes else None
    try:
        r["check"] = check_view(job.out / "view", expected)
    except Exception as e:  # noqa: BLE001 — report, do not hide the figures
        r["check"] = {"error": f"{type(e).__name__}: {e}"}
    return r


def live(brokers: str, broker, a, out: Path, help_text: str) -> Dict[str, Any]:
    it, ht = "sonde-live-intervals", "sonde-live-histograms"
    broker.create_topics((it, a.partitions), (ht, a.partitions))
    job_args = ["--interval-topic", it, "--histogram-topic", ht, "--starting-offsets", "earliest",
                "--trigger", "1", "--until-idle", str(a.until_idle)]
    if a.live_max_age and "--max-age" in help_text:
        job_args += ["--max-age", str(a.live_max_age)]
    job_args += a.job_arg
    name = f"live-{a.live_master.replace('[', '').replace(']', '')}"
    d = out / name
    job = Job(name, brokers, d, a.live_master, job_args, sample_every=a.sample_every)
    topics = ["--interval-topic", it, "--histogram-topic", ht, "--interval", str(a.live_interval)]
    try:
        log(f"{name}: warming the job up (a few probes until it has merged something)")
        warm_deadline = time.monotonic() + 240
        warm = popen([str(VENV_PY), str(LOAD), "--kafka", brokers, "--live", "--probes", "5", "--probe-prefix",
                                 "warm", "--duration", "4", *topics], stdout=subprocess.DEVNULL,
                                stderr=open(d / "generator.log", "ab"), cwd=REPO)
        warm.wait()
        while job.messages() == 0:
            if job.proc.poll() is not None or time.monotonic() > warm_deadline:
                raise RuntimeError(f"the job merged nothing in 240 s; see {d / 'job.log'}")
            time.sleep(0.5)
        log(f"{name}: {a.live_probes} probes, one interval per {a.live_interval} s, for {a.live_duration} s")
        seen: Dict[str, Dict[tuple, List[Tuple[float, int]]]] = {"intervals": {}, "quantiles": {}}
        since: Dict[str, Dict[str, Tuple[float, float]]] = {"intervals": {}, "quantiles": {}}
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                read_view(d / "view" / "intervals", INTERVAL_KEY, [], since["intervals"], seen["intervals"], "packets")
                read_view(d / "view" / "quantiles", DIST_KEY, [], since["quantiles"], seen["quantiles"], "count")
                stop.wait(0.25)
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        t_gen = time.time()
        load_gen_start = loadavg()
        pub = generate(brokers, ["--live", "--probes", str(a.live_probes), "--duration", str(a.live_duration),
                                 "--seed", str(a.seed), *topics], d / "expected.json", d / "generator.log")
        load_gen_end = loadavg()
        log(f"{name}: published {pub['messages']} messages ({pub['messages_per_s']}/s); waiting for the job to go idle")
        rc = job.wait(a.live_duration + a.job_timeout)
        stop.set()
        watcher.join()
        read_view(d / "view" / "intervals", INTERVAL_KEY, [], since["intervals"], seen["intervals"], "packets")
        read_view(d / "view" / "quantiles", DIST_KEY, [], since["quantiles"], seen["quantiles"], "count")
    finally:
        if job.proc.poll() is None:
            stop_proc(job.proc, 30)
    job.write_samples(d / "state.csv")
    expected = json.loads((d / "expected.json").read_text())
    return summarize_live(job, rc, pub, expected, seen, t_gen, a, load_gen_start, load_gen_end)


def summarize_live(job: Job, rc: int, pub, expected, seen, t_gen: float, a, load0: str, load1: str) -> Dict[str, Any]:
    interval = expected["interval_s"]
    done_at: Dict[float, float] = {}
    missing: Dict[float, int] = {}

    def complete(table: str, key: tuple, want: int, start: float) -> None:
        hits = [t for t, v in seen[table].get(key, []) if v == want]
        if hits:
            done_at[start] = max(done_at.get(start, 0.0), min(hits))
        else:
            missing[start] = missing.get(start, 0) + 1

    for s, proto, net, packets, *_ in expected["intervals"]:
        complete("intervals", (s, proto, net), packets, s)
    for s, metric, dr, net, unit, count, *_ in expected["distributions"]:
        complete("quantiles", (s, metric, dr, net), count, s)
    published = dict((float(s), t) for s, t in expected["published_at"])
    lat = sorted((s, done_at[s] - (s + interval)) for s in done_at if s not in missing)
    r: Dict[str, Any] = {"rc": rc, "publish": pub, "intervals": len({s for s, *_ in expected["intervals"]}),
                         "complete": len(lat), "incomplete": len(missing), "load_start": load0, "load_end": load1}
    if lat:
        v = [x for _, x in lat]
        q = statistics.quantiles(v, n=20) if len(v) >= 20 else [max(v)] * 19
        r["latency_s"] = {"min": round(min(v), 2), "median": round(statistics.median(v), 2), "p95": round(q[18], 2),
                          "max": round(max(v), 2),
                          "within_2_intervals": round(sum(1 for x in v if x <= 2 * interval) / len(v), 4)}
        pubs = [published[s] - (s + interval) for s, _ in lat if s in published]
        if pubs:
            r["last_publication_after_end_s"] = {"median": round(statistics.median(pubs), 2), "max": round(max(pubs), 2)}
        with open(job.out / "latency.csv", "w") as f:
            f.write("start,latency_s,published_after_end_s\n")
            for s, x in lat:
                p = published.get(s)
                f.write(f"{s:.6f},{x:.3f},{'' if p is None else round(p - (s + interval), 3)}\n")
    lb = [b["latency_s"] for b in job.batches.values() if isinstance(b.get("latency_s"), dict) and b.get("messages")]
    if lb:
        r["job_batch_latency_s"] = {"median_of_medians": round(statistics.median(x["median"] for x in lb), 2),
                                    "max_of_max": round(max(x["max"] for x in lb), 2), "batches": len(lb)}
    # State: over the run, and flat once the oldest interval it holds has aged out.
    ss = [(x["t"] - t_gen, x["state_rows"], x.get("state_bytes")) for x in job.samples
          if x.get("state_rows") is not None and 0 <= x["t"] - t_gen <= a.live_duration]
    if ss:
        def at(frac: float):
            target = frac * a.live_duration
            return min(ss, key=lambda x: abs(x[0] - target))
        r["state_rows_at"] = {f"{int(f * 100)}%": at(f)[1] for f in (0.1, 0.25, 0.5, 0.75, 1.0)}
        if ss[-1][2] is not None:
            r["state_bytes_at"] = {f"{int(f * 100)}%": at(f)[2] for f in (0.1, 0.25, 0.5, 0.75, 1.0)}
        settle = (a.live_max_age or 0) + 30
        tail = [x[1] for x in ss if x[0] >= settle]
        if len(tail) >= 6:
            third = len(tail) // 3
            first, last = statistics.mean(tail[:third]), statistics.mean(tail[-third:])
            r["state_after_settle"] = {"from_s": settle, "min": min(tail), "max": max(tail),
                                       "first_third_mean": round(first), "last_third_mean": round(last),
                                       "drift": round(last / first - 1, 4) if first else None}
    return r


# --- report ---

def fmt(x: Any, digits: int = 0) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    if isinstance(x, int):
        return f"{x:,}"
    return str(x)


def report(result: Dict[str, Any], a) -> str:
    lines = [f"commit {result['commit']}, {result['machine']}; load average at start {result['load_start']}", ""]
    tp = result.get("throughput")
    if tp:
        pub = tp["publish"]
        lines += [f"**Throughput**: backlog of {a.probes} probes × {a.backlog} intervals = {fmt(tp['messages'])} "
                  f"contributions ({pub['messages_per_s']:,.0f}/s published, {pub['mb_per_s']} MB/s), "
                  f"{a.partitions} partitions a topic; the job's `--trigger {a.trigger}`"
                  + (f", `--max-messages-per-batch {a.batch_messages}`" if a.batch_messages else "")
                  + ("; `--pin`: local[N] kept to CPUs 0…N-1, the broker to the last" if a.pin else "") + ".", "",
                  "| run | contributions | first batch done (s) | seconds after it | contributions/s | "
                  "Spark's (Σ msgs ÷ Σ trigger) | ratio to local[1] | exact | load avg (start → end) |",
                  "|---|---:|---:|---:|---:|---:|---:|---|---|"]
        base = [r["per_s"] for r in tp["runs"] if r["config"] == "local[1]" and r.get("per_s")]
        base_v = statistics.mean(base) if base else None
        for r in tp["runs"]:
            ratio = r["per_s"] / base_v if base_v and r.get("per_s") else None
            chk = r.get("check", {})
            exact = "yes" if chk.get("exact") else (chk.get("error") or f"no ({chk})")
            name = "standalone 2×1 core" if r["config"] == "standalone" else r["config"]
            lines.append(f"| {name} (round {r['round']}) | {fmt(r['messages'])} | {fmt(r.get('first_batch_done_s'), 1)} | "
                         f"{fmt(r.get('steady_s'), 1)} | {fmt(r.get('per_s'))} | {fmt(r.get('spark_per_s'))} | "
                         f"{fmt(ratio, 2)} | {exact} | {r['load_start']} → {r['load_end']} |")
        by: Dict[str, List[float]] = {}
        for r in tp["runs"]:
            if r.get("per_s"):
                by.setdefault(r["config"], []).append(r["per_s"])
        if by:
            lines += ["", "| configuration | contributions/s (mean of rounds) | ratio to local[1] |", "|---|---:|---:|"]
            for c, v in by.items():
                m = statistics.mean(v)
                lines.append(f"| {'standalone 2×1 core' if c == 'standalone' else c} | {fmt(m)} | "
                             f"{fmt(m / base_v if base_v else None, 2)} |")
        lines.append("")
    lv = result.get("live")
    if lv:
        pub = lv["publish"]
        lat = lv.get("latency_s", {})
        lines += [f"**Latency and state**: {a.live_probes} probes, one interval per {a.live_interval} s, "
                  f"{a.live_duration:.0f} s ({fmt(pub['messages'])} contributions, {pub['messages_per_s']:,.0f}/s; "
                  f"the generator at most {pub.get('behind_schedule_max_s')} s behind its schedule); "
                  f"the job at {a.live_master}, trigger 1 s" + (f", `--max-age {a.live_max_age}`" if a.live_max_age else "")
                  + f"; load average {lv['load_start']} → {lv['load_end']}.", "",
                  "| intervals | complete in the view | latency min / median / p95 / max (s) | within 2 intervals | "
                  "probes' last publication after the end, median / max (s) |",
                  "|---:|---:|---|---:|---|"]
        pa = lv.get("last_publication_after_end_s", {})
        lines.append(f"| {lv['intervals']} | {lv['complete']} | {lat.get('min')} / {lat.get('median')} / {lat.get('p95')} / "
                     f"{lat.get('max')} | {fmt(100 * lat['within_2_intervals'], 1) + ' %' if lat else '–'} | "
                     f"{pa.get('median')} / {pa.get('max')} |")
        if lv.get("state_rows_at"):
            lines += ["", "| state | " + " | ".join(lv["state_rows_at"]) + " |",
                      "|---|" + "---:|" * len(lv["state_rows_at"])]
            lines.append("| rows | " + " | ".join(fmt(v) for v in lv["state_rows_at"].values()) + " |")
            if lv.get("state_bytes_at"):
                lines.append("| bytes | " + " | ".join(fmt(v) for v in lv["state_bytes_at"].values()) + " |")
            if lv.get("state_after_settle"):
                s = lv["state_after_settle"]
                lines += ["", f"After {s['from_s']} s: rows {fmt(s['min'])}–{fmt(s['max'])}, mean of the first third "
                          f"{fmt(s['first_third_mean'])}, of the last {fmt(s['last_third_mean'])} (drift {s['drift']})."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("/tmp/sonde-merge-scaling"))
    ap.add_argument("--partitions", type=int, default=4, help="partitions of each topic (default 4)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--until-idle", type=float, default=10.0, help="the job's --until-idle (default 10)")
    ap.add_argument("--job-timeout", type=float, default=900.0, help="a job run's limit, s (default 900)")
    ap.add_argument("--job-arg", action="append", default=[], help="more arguments for the job (repeatable; --job-arg=--x)")
    g = ap.add_argument_group("throughput")
    g.add_argument("--skip-throughput", action="store_true")
    g.add_argument("--probes", type=int, default=1000)
    g.add_argument("--backlog", type=int, default=20, help="intervals per probe preloaded (default 20)")
    g.add_argument("--configs", default="local[1],local[2],standalone",
                   help="comma-separated: local[N] and/or standalone (default local[1],local[2],standalone)")
    g.add_argument("--rounds", type=int, default=2, help="each configuration this often, interleaved (default 2)")
    g.add_argument("--trigger", type=float, default=1.0, help="the job's --trigger for the backlog (default 1)")
    g.add_argument("--pin", action="store_true",
                   help="keep a local[N] job to CPUs 0…N-1 (taskset) and the broker to the last CPU: one core means one")
    g.add_argument("--batch-messages", type=int, default=50_000,
                   help="the job's --max-messages-per-batch when it has it (default 50000; 0: the job's default)")
    g = ap.add_argument_group("latency and state")
    g.add_argument("--skip-live", action="store_true")
    g.add_argument("--live-probes", type=int, default=1000)
    g.add_argument("--live-interval", type=float, default=1.0)
    g.add_argument("--live-duration", type=float, default=120.0, help="seconds (default 120; the issue's: 600)")
    g.add_argument("--live-master", default="local[2]")
    g.add_argument("--live-max-age", type=float, default=60.0,
                   help="the job's --max-age in the live run when it has it (default 60; 0: the job's default)")
    g.add_argument("--sample-every", type=float, default=2.0, help="_job.json sampling in the live run, s (default 2)")
    ap.add_argument("--python-path", type=Path, default=REPO / "python",
                    help="the directory holding the `sonde` package the job runs (default python/ of this checkout)")
    a = ap.parse_args()
    PYTHON_DIR[0] = a.python_path.resolve()
    a.configs = [c.strip() for c in a.configs.split(",") if c.strip()]

    if not VENV_PY.exists():
        sys.exit("merge-scaling: no .venv (make python-env)")
    if not JARS.is_dir():
        done = subprocess.run([str(REPO / "tests/spark/fetch.sh"), str(JARS.parent)])
        if done.returncode != 0:
            sys.exit("merge-scaling: cannot fetch Spark's Kafka source jars")
    help_text = subprocess.run([str(VENV_PY), "-m", "sonde.spark", "merge", "--help"], cwd=REPO, env=job_env(),
                               capture_output=True, text=True).stdout
    if "--kafka" not in help_text:
        sys.exit("merge-scaling: `python -m sonde.spark merge --help` fails (is python/sonde/_sonde.abi3.so built?)")
    a.out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h %s"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "python/sonde/spark"], capture_output=True,
                           text=True).stdout.strip()
    if PYTHON_DIR[0] != (REPO / "python").resolve():
        label = f"the job from {PYTHON_DIR[0]} (--python-path); this checkout at {commit[:100]}"
    else:
        label = commit[:100] + (" (python/sonde/spark modified in the tree)" if dirty else "")
    result: Dict[str, Any] = {"commit": label,
                              "machine": f"{os.cpu_count()} cores", "load_start": loadavg(), "args": dict(vars(a))}
    result["args"]["out"] = str(a.out)

    sys.path.insert(0, str(REPO / "python" / "tests"))
    from kafka_broker import Broker  # noqa: E402

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally below runs
    log("starting a Kafka broker on 127.0.0.1")
    broker = Broker()
    try:
        brokers = broker.address
        if a.pin:
            last = os.cpu_count() - 1
            subprocess.run(["taskset", "-a", "-p", "-c", str(last), str(broker.proc.pid)], check=True,
                           stdout=subprocess.DEVNULL)
            log(f"the broker kept to CPU {last}; local[N] jobs to CPUs 0…N-1")
        if not a.skip_throughput:
            result["throughput"] = throughput(brokers, broker, a, a.out, help_text)
            (a.out / "result.json").write_text(json.dumps(result, indent=1, default=str))
        if not a.skip_live:
            result["live"] = live(brokers, broker, a, a.out, help_text)
    finally:
        for p in reversed(STARTED):
            stop_proc(p)
        broker.stop()
    result["load_end"] = loadavg()
    (a.out / "result.json").write_text(json.dumps(result, indent=1, default=str))
    text = report(result, a)
    (a.out / "report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
