"""Many `serve` replicas over one PostgreSQL database, no sticky routing, one replica killed mid-run.

    .venv/bin/python benchmarks/replicas.py [--quick] [--store postgresql://USER@HOST:PORT/DB] [--json FILE]

Without ``--store`` it starts a throwaway cluster (tests/postgres_cluster.py: ``initdb`` + ``pg_ctl`` on a free
loopback port, stopped by its PID at the end). The model is one shared ``python -m llama_cpp.server`` on the
default GGUF, reached by every replica through ``--backend openai-http``, so the replicas measure the store
and not three copies of the model.

Three ``localpager serve`` processes (``--api-keys-file``: two namespaces, ``alice`` and ``bob``) on one
database; clients, half of each namespace, each send their own conversation's requests one after the other,
every request to a replica chosen at random. A request that fails (connection refused or cut, a 5xx) is sent
again, the same history and question, to another replica. Mid-run one replica is killed with SIGKILL and
restarted on its port. Between requests each client also asks, with its own key, for a conversation of the
other namespace by id (turns, search, export): every such answer that is not a 404 counts in
``cross_namespace_reads``.

At the end the database is read directly: every acknowledged request's question must be stored as a user turn
followed by the acknowledged answer (``turns_lost`` counts the acknowledged turns missing), and each
conversation's acknowledged exchanges must be stored in the order they were acknowledged (``order_violations``).
``turns_acknowledged`` counts turns: a question and its answer, two a request. The same workload then runs on
one replica (no kill) for comparison. Writes results/replicas.json (or ``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from localpager.lab.bench import quantile

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the throwaway cluster the tests use

from helpers import free_port  # noqa: E402
from postgres_cluster import start_cluster  # noqa: E402

LOCALPAGER = [sys.executable, "-m", "localpager.cli"]
KEYS = {"alice": "alice-" + uuid.uuid4().hex, "bob": "bob-" + uuid.uuid4().hex}
MAX_TOKENS = 8


# -- processes ----------------------------------------------------------------------------------------
def start_model_server(folder: Path) -> tuple[subprocess.Popen, str]:
    from localpager.core.modelpaths import chat_model_path

    port = free_port()
    log = open(folder / "model-server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(chat_model_path()),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1",
                             "--n_threads_batch", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    wait_until(lambda: httpx.get(f"{url}/models", timeout=2).status_code == 200, proc, 120, "llama_cpp.server")
    return proc, url


def wait_until(check, proc: subprocess.Popen, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            if check():
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not answer within {seconds:g} s")


@dataclass
class Replica:
    port: int
    store: str
    model_url: str
    keys_file: Path
    log_path: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        env = {**os.environ, "LOCALPAGER_THREADS": "1"}
        env.pop("LOCALPAGER_API_KEY", None)
        cmd = [*LOCALPAGER, "--store", self.store, "--backend", "openai-http", "--base-url", self.model_url,
               "serve", "--port", str(self.port), "--api-keys-file", str(self.keys_file), "--max-tokens", "16"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log_path, "ab"), env=env,
                                     start_new_session=True)
        wait_until(lambda: httpx.get(f"{self.url}/health", timeout=2).json().get("preloaded"), self.proc, 180,
                   f"replica on port {self.port}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


# -- clients ------------------------------------------------------------------------------------------
@dataclass
class Ack:
    conversation: str
    namespace: str
    question: str
    answer: str
    ms: float


@dataclass
class Run:
    replicas: list[Replica]
    acks: list[Ack] = field(default_factory=list)
    failures: int = 0  # requests sent again after a replica failed them
    cross_namespace_reads: int = 0
    cross_namespace_attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked(self) -> int:
        with self.lock:
            return len(self.acks)


def client(run: Run, name: str, namespace: str, conversation: str, other: str, exchanges: int,
           rng: random.Random) -> None:
    key = KEYS[namespace]
    headers = {"Authorization": f"Bearer {key}", "X-Conversation-Id": conversation}
    history: list[dict] = []
    with httpx.Client(timeout=300) as http:
        for i in range(exchanges):
            question = f"{name} message {i}: please remember the number {rng.randint(1000, 9999)}."
            body = {"model": "localpager", "messages": [*history, {"role": "user", "content": question}],
                    "max_tokens": MAX_TOKENS}
            started = time.perf_counter()
            for attempt in range(40):
                replica = rng.choice(run.replicas)
                try:
                    r = http.post(f"{replica.url}/v1/chat/completions", json=body, headers=headers)
                except httpx.HTTPError:
                    r = None
                if r is not None and r.status_code == 200:
                    break
                with run.lock:
                    run.failures += 1
                time.sleep(0.2 + 0.1 * attempt)
            else:
                raise RuntimeError(f"{name}: no replica answered message {i}")
            answer = r.json()["choices"][0]["message"]["content"]
            ms = (time.perf_counter() - started) * 1000
            with run.lock:
                run.acks.append(Ack(conversation, namespace, question, answer, ms))
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            probe_other_namespace(run, http, rng, key, other)


def probe_other_namespace(run: Run, http: httpx.Client, rng: random.Random, key: str, other: str) -> None:
    """Ask, with this client's key, for a conversation of the other namespace by its id."""
    path = rng.choice([f"/v1/conversations/{other}/turns", f"/v1/conversations/{other}/search?q=number",
                       f"/v1/conversations/{other}/export"])
    for _ in range(10):
        replica = rng.choice(run.replicas)
        try:
            r = http.get(f"{replica.url}{path}", headers={"Authorization": f"Bearer {key}"})
        except httpx.HTTPError:
            continue  # the killed replica: ask another
        if r.status_code >= 500:
            continue
        with run.lock:
            run.cross_namespace_attempts += 1
            if r.status_code != 404:
                run.cross_namespace_reads += 1
        return


# -- checking what the store holds --------------------------------------------------------------------
def check(store_url: str, acks: list[Ack]) -> dict:
    from localpager.store.location import open_store

    lost = violations = 0
    with open_store(store_url) as root:
        by_conv: dict[tuple[str, str], list[Ack]] = {}
        for ack in acks:
            by_conv.setdefault((ack.namespace, ack.conversation), []).append(ack)
        for (namespace, conversation), expected in by_conv.items():
            turns = root.namespace(namespace).turns(conversation)
            found = []  # the turn index each acknowledged exchange is stored at
            for ack in expected:
                at = next((t.index for t in turns[:-1] if t.role == "user" and t.text == ack.question
                           and turns[t.index + 1].role == "assistant" and turns[t.index + 1].text == ack.answer), None)
                if at is None:
                    lost += 2
                else:
                    found.append(at)
            violations += sum(1 for a, b in zip(found, found[1:]) if b <= a)
    return {"turns_lost": lost, "order_violations": violations}


def run_workload(store_url: str, model_url: str, folder: Path, replicas: int, clients: int, exchanges: int,
                 kill: bool, seed: int) -> dict:
    keys_file = folder / "keys"
    keys_file.write_text("".join(f"{ns} {key}\n" for ns, key in KEYS.items()))
    keys_file.chmod(0o600)
    fleet = [Replica(free_port(), store_url, model_url, keys_file, folder / f"replica-{i}.log") for i in range(replicas)]
    started = time.perf_counter()
    for replica in fleet:
        replica.start()
    run = Run(fleet)
    rng = random.Random(seed)
    tag = uuid.uuid4().hex[:6]
    names = [f"client{i}" for i in range(clients)]
    namespaces = ["alice" if i % 2 == 0 else "bob" for i in range(clients)]
    convs = [f"conv-{tag}-{i}" for i in range(clients)]
    threads = []
    for i in range(clients):
        other = convs[(i + 1) % clients] if namespaces[(i + 1) % clients] != namespaces[i] else convs[(i + 3) % clients]
        threads.append(threading.Thread(target=client, args=(run, names[i], namespaces[i], convs[i], other, exchanges,
                                                             random.Random(rng.random())), daemon=True))
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    killed_at = None
    if kill:
        total = clients * exchanges
        while run.acked() < total * 0.35 and any(t.is_alive() for t in threads):
            time.sleep(0.1)
        victim = fleet[rng.randrange(len(fleet))]
        victim.kill()
        killed_at = run.acked()
        time.sleep(2.0)
        victim.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for replica in fleet:
        replica.stop()
    ms = [a.ms for a in run.acks]
    result = {"replicas": replicas, "clients": clients, "requests": len(run.acks), "retried_requests": run.failures,
              "p50_ms": quantile(ms, 0.5, empty=None), "p95_ms": quantile(ms, 0.95, empty=None),
              "mean_ms": round(statistics.fmean(ms), 1) if ms else None,
              "requests_per_s": round(len(run.acks) / wall, 2) if wall else None,
              "turns_acknowledged": 2 * len(run.acks),
              "cross_namespace_reads": run.cross_namespace_reads,
              "cross_namespace_attempts": run.cross_namespace_attempts,
              "killed": kill, "killed_after_acknowledged": killed_at,
              "seconds": round(time.perf_counter() - started, 1)}
    result.update(check(store_url, run.acks))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 clients, 8 requests each (64 turns)")
    parser.add_argument("--store", help="postgresql://USER@HOST:PORT/DB (default: a throwaway cluster)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--json", default=str(ROOT / "results" / "replicas.json"))
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args()
    clients, exchanges = (4, 8) if args.quick else (8, 15)
    folder = Path(tempfile.mkdtemp(prefix="localpager-replicas-"))
    cluster = None
    model = None
    try:
        if args.store:
            stores = [args.store, args.store]
        else:
            cluster = start_cluster()
            for name in ("replicas", "single"):
                cluster.sql(f"CREATE DATABASE {name}")
            stores = [cluster.url("replicas"), cluster.url("single")]
        model, model_url = start_model_server(folder)
        print(f"model server {model_url}; store {stores[0]}", file=sys.stderr)
        many = run_workload(stores[0], model_url, folder, args.replicas, clients, exchanges, kill=True, seed=args.seed)
        print(json.dumps(many), file=sys.stderr)
        one = run_workload(stores[1], model_url, folder, 1, clients, exchanges, kill=False, seed=args.seed + 1)
        print(json.dumps(one), file=sys.stderr)
    finally:
        if model is not None and model.poll() is None:
            os.killpg(model.pid, signal.SIGTERM)
            model.wait(30)
        if cluster is not None:
            cluster.stop()
    result = {**{k: many[k] for k in ("replicas", "clients", "requests", "p50_ms", "p95_ms", "turns_acknowledged",
                                      "turns_lost", "order_violations", "cross_namespace_reads")},
              "replica_killed": True, "many_replicas": many, "one_replica": one,
              "quick": args.quick, "store": "given" if args.store else "throwaway cluster",
              "commands": ["benchmarks/replicas.py" + (" --quick" if args.quick else "")]}
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in list(result)[:9]}, indent=2))


if __name__ == "__main__":
    main()
