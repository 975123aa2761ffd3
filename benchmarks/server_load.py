"""Load on `localpager serve`: N concurrent clients (the official openai client, one thread each) for a
bounded time on loopback, on the default models.

    .venv/bin/python benchmarks/server_load.py [--quick] [--clients 4] [--seconds 60] [--json FILE]

Each client holds its own conversation (created beforehand with a small budget, so pages are evicted and
questions recall them) and, like a chat app, resends its whole history on every request; odd clients
stream. Reported: the server's start-up, the very first request (cold: it waits for the models to load)
against every later one (warm), p50/p95 per request end to end and the server's own answer time, time to
first token when streaming, recalls, and turns lost: after the server has stopped, the store must hold
every question and answer the clients were given, in order (it must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import openai

from localpager.lab.bench import quantile

STATEMENTS = [
    "I'm allergic to peanuts, so I always carry an EpiPen.",
    "My sister Hartley moved to Lisbon last spring for a new job.",
    "The router in the hall keeps dropping the Wi-Fi on Saturdays.",
    "We repainted the garden fence a dark green colour this weekend.",
    "My piano lessons moved to Thursday evenings at half past six.",
    "For the kitchen remodel I've set aside $23,500, and not a cent more.",
    "The dentist appointment is on Tuesday morning at nine.",
    "Our neighbours adopted a grey cat called Pebble last month.",
]
QUESTIONS = [
    "Which snack should I avoid?",
    "Where did my sister move?",
    "What keeps dropping on Saturdays?",
    "What colour is the fence now?",
    "When are my piano lessons?",
    "How much can I spend on the kitchen?",
]


@dataclass
class Request:
    client: int
    index: int  # the client's n-th request
    stream: bool
    started: float  # seconds since the load began
    ms: float = 0.0
    first_token_ms: float | None = None
    server_ms: float | None = None  # the answer's own time (trace timings total)
    recall: bool = False
    ok: bool = True
    error: str = ""


@dataclass
class Client:
    index: int
    conv: str
    history: list[dict] = field(default_factory=list)  # what the client was given: it must all be stored
    requests: list[Request] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_store(path: Path, clients: int, budget: int) -> None:
    """One empty conversation per client with a small budget (no model needed to create them)."""
    from localpager.core.pager import PagingConfig
    from localpager.memory.api import LocalPager

    lp = LocalPager(path)
    for i in range(clients):
        lp.conversation(f"load-{i}", create=True, config=PagingConfig(boundary="fixed_5", budget=budget))
    lp.close()


def next_message(n: int) -> str:
    """Statements first, then a question every third message (by then the early pages are evicted)."""
    if n < len(STATEMENTS) or n % 3 != 2:
        return STATEMENTS[n % len(STATEMENTS)]
    return QUESTIONS[(n // 3) % len(QUESTIONS)]


def run_client(c: Client, url: str, key: str, t0: float, deadline: float, max_tokens: int,
               limit: int | None = None) -> None:
    api = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=600,
                        default_headers={"X-Conversation-Id": c.conv})
    stream = c.index % 2 == 1
    n = len(c.requests)
    while time.monotonic() < deadline and (limit is None or n < limit):
        text = next_message(n)
        messages = c.history + [{"role": "user", "content": text}]
        req = Request(c.index, n, stream, time.monotonic() - t0)
        start = time.perf_counter()
        try:
            if stream:
                pieces, memory = [], {}
                for chunk in api.chat.completions.create(model="localpager", messages=messages, stream=True,
                                                         max_tokens=max_tokens):
                    if chunk.choices and chunk.choices[0].delta.content:
                        if req.first_token_ms is None:
                            req.first_token_ms = (time.perf_counter() - start) * 1000
                        pieces.append(chunk.choices[0].delta.content)
                    memory = (chunk.model_extra or {}).get("localpager") or memory
                answer = "".join(pieces).strip()
            else:
                completion = api.chat.completions.create(model="localpager", messages=messages, max_tokens=max_tokens)
                answer = completion.choices[0].message.content
                memory = completion.model_extra["localpager"]
            req.ms = (time.perf_counter() - start) * 1000
            req.server_ms = memory.get("timings_ms", {}).get("total")
            req.recall = bool(memory.get("injected_page_ids"))
            c.history = messages + [{"role": "assistant", "content": answer}]
        except Exception as exc:  # noqa: BLE001 - a benchmark reports failures, it does not stop on them
            req.ms = (time.perf_counter() - start) * 1000
            req.ok, req.error = False, f"{type(exc).__name__}: {str(exc)[:200]}"
        c.requests.append(req)
        n += 1


def lost_turns(store: Path, clients: list[Client]) -> tuple[int, list[str]]:
    """Turns a client was given that the store does not hold, in order; read after the server stopped."""
    from localpager.store.sqlite import SQLiteStore

    lost, notes = 0, []
    with SQLiteStore(store) as s:
        for c in clients:
            stored = [(t.role, " ".join(t.text.split())) for t in s.turns(c.conv)]
            expected = [(m["role"], " ".join(m["content"].split())) for m in c.history]
            if stored[:len(expected)] != expected:
                missing = sum(1 for e in expected if e not in stored)
                lost += max(missing, 1)
                notes.append(f"{c.conv}: {len(expected)} turns given, {len(stored)} stored, {missing} missing")
            if len(stored) > len(expected) + 2:  # at most one question in flight at the deadline
                notes.append(f"{c.conv}: {len(stored) - len(expected)} turns stored beyond what the client saw")
    return lost, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 clients for 20 s")
    parser.add_argument("--clients", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None, help="how long the clients keep asking")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--budget", type=int, default=160, help="memory budget of each client's conversation")
    parser.add_argument("--threads", default=os.environ.get("LOCALPAGER_THREADS", "1"), help="llama.cpp threads")
    parser.add_argument("--json", dest="json_out", help="write the figures here")
    args = parser.parse_args()
    n_clients = args.clients or (2 if args.quick else 4)
    seconds = args.seconds or (20 if args.quick else 60)

    work = Path(tempfile.mkdtemp(prefix="localpager-load-"))
    store = work / "store.db"
    prepare_store(store, n_clients, args.budget)
    port, key = free_port(), "load-test-key"
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "LOCALPAGER_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    t_launch = time.monotonic()
    server = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port",
                               str(port), "--api-key", key, "--max-tokens", str(args.max_tokens)],
                              env=env, stderr=open(work / "server.log", "w"))
    try:
        while True:  # listening; the models may still be loading: the first request waits for them (cold)
            if server.poll() is not None:
                sys.exit(f"the server exited; see {work / 'server.log'}")
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        listening_s = time.monotonic() - t_launch
        clients = [Client(i, f"load-{i}") for i in range(n_clients)]
        t0 = time.monotonic()
        start = time.perf_counter()  # the cold request: client 0's first, alone, before the others start
        run_client(clients[0], url, key, t0, float("inf"), args.max_tokens, limit=1)
        cold_ms = (time.perf_counter() - start) * 1000
        deadline = time.monotonic() + seconds
        threads = [threading.Thread(target=run_client, args=(c, url, key, t0, deadline, args.max_tokens))
                   for c in clients]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
    finally:
        server.terminate()  # graceful: an answer being generated is stored before it exits
        try:
            server.wait(120)
        except subprocess.TimeoutExpired:
            server.kill()
    lost, notes = lost_turns(store, clients)

    requests = [r for c in clients for r in c.requests]
    warm = [r for c in clients for r in (c.requests[1:] if c.index == 0 else c.requests) if r.ok]
    result = {
        "clients": n_clients, "seconds": seconds, "max_tokens": args.max_tokens, "budget": args.budget,
        "llama_threads": int(args.threads), "server_listening_s": round(listening_s, 2),
        "requests": len(requests), "errors": sum(not r.ok for r in requests),
        "error_samples": [r.error for r in requests if not r.ok][:3],
        "requests_per_s": round(len(requests) / wall, 2) if wall else None,
        "cold_first_request_ms": round(cold_ms, 1),
        "warm_p50_ms": quantile([r.ms for r in warm], 0.5, empty=None),
        "warm_p95_ms": quantile([r.ms for r in warm], 0.95, empty=None),
        "warm_server_p50_ms": quantile([r.server_ms for r in warm if r.server_ms is not None], 0.5, empty=None),
        "warm_server_p95_ms": quantile([r.server_ms for r in warm if r.server_ms is not None], 0.95, empty=None),
        "stream_first_token_p50_ms": quantile([r.first_token_ms for r in warm if r.first_token_ms], 0.5, empty=None),
        "recalls": sum(r.recall for r in requests),
        "turns_stored_per_client": [len(c.history) for c in clients],
        "turns_lost": lost, "notes": notes,
        "requests_detail": [asdict(r) for r in requests],
    }
    summary = {k: v for k, v in result.items() if k != "requests_detail"}
    print(json.dumps(summary, indent=2))
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json_out).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json_out}")
    if lost:
        sys.exit(f"{lost} turns lost")


if __name__ == "__main__":
    main()
