"""A 1 MB string without a space through ingest, import and one chat request to a real `localpager serve`.

    .venv/bin/python benchmarks/pathological.py [--json FILE]      (benchmarks/faults.py reports it too)

The string is one unbroken run of what made keyword extraction quadratic (issue 22: a 25 KB turn took 7.6 s,
1 MB never finished, and one 50 KB message stalled the server's /health for 31 s): letters, digits, dots,
dashes and their mixtures (a.a.a…, 1,000,000…, aaaa@aaaa…, a@a@…, x@x.x-…), 1 MB in all. ``ingest`` and
``import`` (a plain interchange line, paged afresh) run the CLI on a fresh store each; the chat request sends it
as a history message to a server on loopback (one llama.cpp thread) while a thread polls ``/health``.
Reports the wall time of each path in ms (``pathological_input_ms``) and whether ``/health`` kept answering
(every poll within ``HEALTH_LIMIT_S``), with its slowest answer.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from retries import KEY, free_port, stop  # noqa: E402

SIZE = 1_000_000
# a tenth of the run each, one after the other: (what opens it, the unit repeated to fill it)
KINDS = (("", "a"), ("", "7"), ("", "a."), ("1", ",000"), ("", "a-"), ("", "a1.-"), ("a" * 50_000 + "@", "a"),
         ("", "a@"), ("x@", "x.x-"), ("", "1."))
HEALTH_LIMIT_S = 2.0
ENV = {**os.environ, "LOCALPAGER_THREADS": os.environ.get("LOCALPAGER_THREADS", "1"), "HF_HUB_OFFLINE": "1"}


def unbroken_run(size: int = SIZE) -> str:
    """``size`` characters without a space: letters, digits, a.a.a…, 1,000,000…, aaaa@aaaa…, a@a@…, x@x.x-…"""
    part = size // len(KINDS)
    return "".join((head + unit * part)[:part] for head, unit in KINDS).ljust(size, "a")


def conversation_line(conv_id: str, run: str) -> str:
    turns = [{"role": "user", "text": "I pasted something long below."}, {"role": "assistant", "text": "Go ahead."},
             {"role": "user", "text": run}, {"role": "assistant", "text": "Received."}]
    return json.dumps({"id": conv_id, "turns": turns}) + "\n"


def timed_cli(store: Path, *args: str, log) -> int:
    """Run ``localpager --store STORE ARGS``; its wall time in ms (a failure is logged)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "localpager.cli", "--store", str(store), *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True)
    elapsed = round((time.monotonic() - start) * 1000)
    if proc.returncode:
        log(f"pathological input, {args[0]}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return elapsed


def start_server(store: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    """`localpager serve` on a free loopback port with a body limit that lets 1 MB through; once preloaded."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port", str(port),
                             "--max-tokens", "16", "--max-body", str(4 * SIZE)], env={**ENV, "LOCALPAGER_API_KEY": KEY},
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
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


class HealthPoller(threading.Thread):
    """Polls ``/health`` every 0.2 s until stopped; notes the slowest answer and any poll not answered in time."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done = url, threading.Event()
        self.polls, self.missed, self.slowest_ms = 0, 0, 0

    def run(self) -> None:
        while not self.done.is_set():
            start = time.monotonic()
            try:
                ok = httpx.get(f"{self.url}/health", timeout=HEALTH_LIMIT_S).status_code == 200
            except httpx.HTTPError:
                ok = False
            self.polls += 1
            self.missed += not ok
            self.slowest_ms = max(self.slowest_ms, round((time.monotonic() - start) * 1000))
            self.done.wait(0.2)


def chat_request(url: str, run: str, log) -> int:
    """One chat request whose history holds the run; its wall time in ms."""
    messages = [{"role": "user", "content": run}, {"role": "assistant", "content": "Received."},
                {"role": "user", "content": "What did I paste?"}]
    headers = {"Authorization": f"Bearer {KEY}", "X-Conversation-Id": "pathological"}
    start = time.monotonic()
    response = httpx.post(f"{url}/v1/chat/completions", json={"model": "localpager", "max_tokens": 16,
                                                              "messages": messages}, headers=headers, timeout=600)
    elapsed = round((time.monotonic() - start) * 1000)
    if response.status_code != 200:
        log(f"pathological input, chat: HTTP {response.status_code} {response.text[:200]}")
    return elapsed


def pathological_input(log=lambda s: None) -> dict:
    """The figures for faults.py's report."""
    run = unbroken_run()
    assert len(run) == SIZE and not any(c.isspace() for c in run)
    ms: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "long.jsonl"
        path.write_text(conversation_line("pasted", run))
        ms["ingest"] = timed_cli(Path(d) / "ingest.db", "ingest", str(path), log=log)
        ms["import"] = timed_cli(Path(d) / "import.db", "import", str(path), log=log)
        proc, url = start_server(Path(d) / "serve.db", Path(d) / "server.log")
        poller = HealthPoller(url)
        try:
            poller.start()
            ms["chat"] = chat_request(url, run, log)
        finally:
            poller.done.set()
            poller.join()
            stop(proc)
    return {"pathological_input_ms": ms, "pathological_health_polls": poller.polls,
            "pathological_health_kept_answering": poller.polls > 0 and poller.missed == 0,
            "pathological_health_slowest_ms": poller.slowest_ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    result = pathological_input(lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
