"""Retries against a real `localpager serve`: does a client that resends a request store anything twice?

    .venv/bin/python benchmarks/retries.py [--json FILE]      (benchmarks/faults.py reports it too)

The server runs the default models on loopback (one llama.cpp thread). Each case sends a request, makes it
fail on the client's side the way apps see failures (a timeout before the answer, a stream dropped after its
first words, two identical requests at once, an id outside Latin-1, which made the answer a 500 before),
then sends exactly the same request (history and question) again, as a client's retry does. After the
server has stopped, the store must hold each question and each answer once: ``duplicate_turns_on_retry``
counts the turns beyond that (it must be 0).
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
from pathlib import Path
from urllib.parse import quote

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "retry-bench-key"
HISTORY = [{"role": "user", "content": "My sister Hartley moved to Lisbon last spring."},
           {"role": "assistant", "content": "Lisbon is a lovely city."}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(store: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    """`localpager serve` on a free loopback port, key from the environment; returns once its models loaded."""
    port = free_port()
    env = {**os.environ, "LOCALPAGER_THREADS": os.environ.get("LOCALPAGER_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "LOCALPAGER_API_KEY": KEY}
    proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port",
                             str(port), "--max-tokens", "24"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=open(log_path, "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"the server did not start; see {log_path}")
        try:
            if httpx.get(f"{url}/health", timeout=1).json().get("preloaded"):
                return proc, url
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()  # graceful: an answer being generated is stored before it exits
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def body(question: str, history: list[dict] = (), **extra) -> dict:
    return {"model": "localpager", "max_tokens": 16, "messages": [*history, {"role": "user", "content": question}],
            **extra}


def post(url: str, conv: str, payload: dict, timeout: float = 120.0) -> httpx.Response:
    headers = {"Authorization": f"Bearer {KEY}", "X-Conversation-Id": quote(conv, safe="")}
    return httpx.post(f"{url}/v1/chat/completions", json=payload, headers=headers, timeout=timeout)


def timed_out(url: str, conv: str, payload: dict) -> None:
    """The client gives up before the answer comes (the server goes on and stores it)."""
    try:
        post(url, conv, payload, timeout=0.05)
    except httpx.TimeoutException:
        return


def dropped_stream(url: str, conv: str, payload: dict) -> None:
    """The client reads the first event of a streamed answer, then the connection drops."""
    headers = {"Authorization": f"Bearer {KEY}", "X-Conversation-Id": quote(conv, safe="")}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**payload, "stream": True}, headers=headers,
                      timeout=120) as r:
        for line in r.iter_lines():
            if line.startswith("data: "):
                return


def double_submit(url: str, conv: str, payload: dict) -> None:
    """Two identical requests at once (a double click, or a retry while the first is still queued)."""
    threads = [threading.Thread(target=post, args=(url, conv, payload)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


# (conversation id, history sent before the question, the failure before the retry, stream the retry)
CASES = [
    ("timeout", [], timed_out, False),
    ("timeout-history", HISTORY, timed_out, False),
    ("dropped-stream", [], dropped_stream, True),
    ("dropped-stream-history", HISTORY, dropped_stream, False),
    ("double-submit", HISTORY, double_submit, False),
    ("Łukasz", [], post, False),  # the answer was a 500 before ids outside Latin-1 went percent-encoded
    ("田中", HISTORY, post, True),
]


def run_cases(url: str, log) -> tuple[int, int]:
    """Each case: fail, then retry the same request; returns (retries, retries that got an error)."""
    errors = 0
    for conv, history, fail, stream in CASES:
        payload = body("Which city did my sister move to?", history)
        fail(url, conv, payload)
        retry = post(url, conv, {**payload, "stream": stream})
        if retry.status_code != 200:
            errors += 1
            log(f"retry of {conv!r}: HTTP {retry.status_code} {retry.text[:200]}")
    return len(CASES), errors


def duplicates(store: Path, log) -> tuple[int, int]:
    """Turns stored beyond one per history turn, question and answer, over all cases; and the turns stored."""
    sys.path.insert(0, str(ROOT))
    from localpager.store.sqlite import SQLiteStore

    extra = total = 0
    with SQLiteStore(store) as s:
        for conv, history, _, _ in CASES:
            turns = s.turns(conv) if s.has_conversation(conv) else []
            total += len(turns)
            expected = len(history) + 2
            if len(turns) != expected:
                log(f"{conv!r}: {len(turns)} turns stored, expected {expected}: "
                    f"{[(t.role, t.text[:40]) for t in turns]}")
            extra += max(0, len(turns) - expected)
    return extra, total


def duplicate_turns_on_retry(log=lambda s: None) -> dict:
    """Run every case against a fresh store and a real server; the figures for faults.py's report."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        store = Path(d) / "store.db"
        proc, url = start_server(store, Path(d) / "server.log")
        try:
            retries, errors = run_cases(url, log)
        finally:
            stop(proc)
        extra, total = duplicates(store, log)
    return {"retry_cases": retries, "retry_errors": errors, "retry_turns_stored": total,
            "duplicate_turns_on_retry": extra, "retry_seconds": round(time.monotonic() - start, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    result = duplicate_turns_on_retry(lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
