"""Issue 32's server cases against a real `localpager serve` and real `localpager mcp` processes.

    .venv/bin/python benchmarks/serve_cases.py [--json FILE]      (benchmarks/faults.py --quick reports them too)

History matching: a conversation of 24,000 one-word turns (the last the assistant's "ok") and the issue's 782 KB
request, a history of 16,000 "x", one "y" and 7,000 "x" (the history cannot be matched, so nothing of it is
stored): its wall time (``history_match_ms_782kb``, the model's answer included; 82 s before, when matching was
quadratic and ran under the model lock), the server's own time for reading the stored turns and matching
(``history_match_server_match_ms``, from its log line), and the wall time of a small request on another
conversation sent while it runs (``history_match_other_ms``) beside that request's time alone
(``history_match_other_alone_ms``): it waits for the model's answer to the big one, no longer (before, it
waited behind the whole match, 81 s). The machine's load average is reported with them.

CORS null: ``serve --cors-origin null`` without a key (``cors_null_without_key_served``: 1 if the server
started, must be 0), and a state-changing request with ``Origin: null`` to a server allowing no origin
(``cors_null_forget_status``: must be 403, with a message that does not suggest allowing it:
``cors_null_suggested``, must be 0).

MCP token across processes: one `localpager mcp` process previews a forget and returns its confirmation token, a
second process confirms it (``mcp_token_across_processes_erased``: 1 when the second erased the turn;
``mcp_token_across_processes_leaks``: files of the store still holding the text after, must be 0), a third
presents it again (``mcp_token_replays_accepted``: must be 0).

Ids past 2^63 (issue 39): a standing fact's pin, a page's pin, a correction and forgets naming an id one past a
64-bit integer (``fact_id_2_63_status``, the fact pin's, a 4xx; ``big_ids_not_4xx``, must be 0). The rest of
issue 39's cases, on the command line and MCP: benchmarks/long_term_cases.py.

Stopping (issue 39): SIGTERM after an answer (``serve_stop_idle_s``) and while a streamed answer is being written
(``serve_stop_after_inflight_s``, from the end of that stream at its client; the stream must arrive whole:
``serve_stop_inflight_whole``); each under 1 s, and the server's last line "stopped" (``serve_stop_said_stopped``,
must be 2). ``--stop-only`` runs these alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

from retries import KEY, free_port, stop  # noqa: E402

ENV = {**os.environ, "LOCALPAGER_THREADS": os.environ.get("LOCALPAGER_THREADS", "1"), "HF_HUB_OFFLINE": "1"}
STORED_TURNS = 24_000
SECRET = "Plimquartz"
BIG_ID = 2**63  # one past SQLite's and PostgreSQL's 64-bit integers


def alternating(texts: list[str]) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


def cli(store: Path, *args: str, log) -> bool:
    proc = subprocess.run([sys.executable, "-m", "localpager.cli", "--store", str(store), *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True)
    if proc.returncode:
        log(f"serve cases, {args[0]}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    return proc.returncode == 0


def start_server(store: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    """`localpager serve` on a free loopback port (a body limit that lets the 782 KB request in), preloaded."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port",
                             str(port), "--max-tokens", "16", "--max-body", "4000000"], env={**ENV, "LOCALPAGER_API_KEY": KEY},
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=open(log_path, "w"))
    url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 300
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


def chat(url: str, conv: str, messages: list[dict], timeout: float = 600) -> tuple[int, float, httpx.Response]:
    """(status, ms, response) of one chat request."""
    start = time.monotonic()
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "localpager", "max_tokens": 16, "messages": messages},
                   headers={"Authorization": f"Bearer {KEY}", "X-Conversation-Id": conv}, timeout=timeout)
    return r.status_code, round((time.monotonic() - start) * 1000), r


def history_match(url: str, server_log: Path, log) -> dict:
    """The 782 KB request, and a request on another conversation sent while it runs."""
    big = alternating(["x"] * 16_000 + ["y"] + ["x"] * 7_000)
    size = len(json.dumps({"model": "localpager", "max_tokens": 16, "messages": big}))
    # each conversation opened and searched once before anything is timed: the first search of a conversation
    # builds its indexes (seconds for 24,000 turns), which is not matching. Not with the big request's own "x": an
    # empty answer to it would be a stored turn without text, which matches any client turn of its role (as a
    # forgotten one does), and the history would then overlap the store's tail and be appended, not refused
    chat(url, "big", alternating(["Hello, what do you know?"]))
    chat(url, "big", alternating(["What do you know about x?"]))
    chat(url, "other", alternating(["Hello, what do you know?"]))
    other = alternating(["I water the ferns on Sundays.", "Noted.", "When do I water the ferns?"])
    alone = min(chat(url, "other", other)[1] for _ in range(2))
    result: dict = {}

    def send_big() -> None:
        status, ms, r = chat(url, "big", big)
        result.update(status=status, ms=ms, history=r.headers.get("x-localpager-history"))

    sender = threading.Thread(target=send_big)
    sender.start()
    time.sleep(0.3)  # the big request is being read and matched
    status, other_ms, _ = chat(url, "other", other)
    sender.join()
    if result.get("status") != 200 or status != 200:
        log(f"history match: big request {result}, other request {status}")
    # the server's own log line for it: how long reading the stored turns and matching took
    lines = [line for line in server_log.read_text().splitlines() if "conv=big" in line and "diverged" in line]
    matched = re.search(r"matched in (\d+) ms", lines[-1]) if lines else None
    return {"history_match_ms_782kb": result.get("ms"), "history_match_request_bytes": size,
            "history_match_status": result.get("status"), "history_match_history": result.get("history"),
            "history_match_server_match_ms": int(matched.group(1)) if matched else None,
            "history_match_other_ms": other_ms, "history_match_other_alone_ms": alone,
            "load_average_1min": round(os.getloadavg()[0], 1)}


def cors_null(url: str, store: Path, log) -> dict:
    """``--cors-origin null`` without a key; ``Origin: null`` against a server that allows no origin."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port",
                             str(port), "--cors-origin", "null", "--no-preload"], cwd=ROOT,
                            env={**ENV, "LOCALPAGER_API_KEY": ""}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:
        code = None
        stop(proc)
    served = code is None or code == 0
    r = httpx.post(f"{url}/v1/conversations/other/forget", json={"match": "ferns", "dry_run": True},
                   headers={"Authorization": f"Bearer {KEY}", "Origin": "null"}, timeout=60)
    suggested = "--cors-origin" in r.text
    if served or r.status_code != 403 or suggested:
        log(f"cors null: served without a key {served}; forget with Origin null {r.status_code} {r.text[:200]}")
    return {"cors_null_without_key_served": int(served), "cors_null_forget_status": r.status_code,
            "cors_null_suggested": int(suggested)}


class Mcp:
    """One `localpager mcp` process on ``store``, called one tool at a time over its stdio."""

    def __init__(self, store: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "mcp"], cwd=ROOT,
                                     env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self._send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "faults", "version": "1"}}})
        self._receive()
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _receive(self) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], 300)
        if not ready:
            raise RuntimeError("localpager mcp did not answer in 300 s")
        return json.loads(self.proc.stdout.readline())

    def call(self, tool: str, **arguments) -> dict:
        """One tool's structured result on conversation ``notes`` (``{"error": text}`` for a tool error)."""
        self._send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": tool, "arguments": {"conversation": "notes", **arguments}}})
        result = self._receive()["result"]
        return result.get("structuredContent") or {"error": result["content"][0]["text"]}

    def forget(self, **arguments) -> dict:
        return self.call("forget", **arguments)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            stop(self.proc)


def mcp_token(folder: Path, log) -> dict:
    """Preview in one process, confirm in a second, present the token again in a third."""
    from faultkit import leaks

    data, store = folder / "notes.jsonl", folder / "mcp.db"
    turns = [{"role": "user", "text": "I keep my bike at the station."},
             {"role": "user", "text": f"My locker code word is {SECRET}."}]
    data.write_text(json.dumps({"id": "notes", "turns": turns}) + "\n")
    cli(store, "ingest", str(data), log=log)
    outcomes = []
    for arguments in ({"match": SECRET}, None, None):
        server = Mcp(store)
        try:
            if arguments is None:  # the second and third: the token the first one's preview returned
                arguments = {"match": SECRET, "confirm": outcomes[0].get("confirm_token")}
            outcomes.append(server.forget(**arguments))
        finally:
            server.close()
    preview, confirmed, replayed = outcomes
    erased = confirmed.get("status") == "forgotten"
    found = leaks(store, SECRET)
    if not erased or found or "error" not in replayed:
        log(f"mcp token across processes: preview {preview.get('status')}, confirm {confirmed}, replay {replayed}, "
            f"leaks {found}")
    return {"mcp_token_across_processes_erased": int(erased), "mcp_token_across_processes_leaks": len(found),
            "mcp_token_replays_accepted": int("error" not in replayed)}


def big_ids(url: str, log) -> dict:
    """Issue 39: an id one past a 64-bit integer on each memory endpoint that takes one (a standing fact's pin was
    a 500, ``OverflowError``): ``fact_id_2_63_status``, the fact pin's status (must be a 4xx), and
    ``big_ids_not_4xx``, the requests of the six not answered with a 4xx (must be 0)."""
    calls = [(f"facts/{BIG_ID}/pin", {"pinned": True}), (f"facts/{BIG_ID}/pin", {"pinned": False}),
             (f"pages/{BIG_ID}/pin", {"pinned": True}), ("correct", {"turn": BIG_ID, "text": "I water them daily."}),
             ("forget", {"turn": BIG_ID}), ("forget", {"page": BIG_ID})]
    statuses = [httpx.post(f"{url}/v1/conversations/other/{path}", json=body, timeout=60,
                           headers={"Authorization": f"Bearer {KEY}"}).status_code for path, body in calls]
    wrong = sum(not 400 <= status < 500 for status in statuses)
    if wrong:
        log(f"ids past 2^63: {list(zip([c[0] for c in calls], statuses))}")
    return {"fact_id_2_63_status": statuses[0], "big_ids_not_4xx": wrong}


def stop_times(folder: Path, log) -> dict:
    """Issue 39: how soon `serve` stops after SIGTERM, once with nothing in flight (``serve_stop_idle_s``, after one
    answer) and once with a streamed answer in flight (``serve_stop_after_inflight_s``: from the end of that stream
    at its client to the process's exit; ``serve_stop_inflight_whole``: 1 when the stream ended with its memory
    field and ``[DONE]``, not cut). Both must be under 1 s; the last line it prints must be "stopped"
    (``serve_stop_said_stopped``, of the two runs)."""
    store, said, result = folder / "stop.db", 0, {}
    for run in ("idle", "inflight"):
        server_log = folder / f"stop-{run}.log"
        proc, url = start_server(store, server_log)
        stream_end: list[float] = []
        whole: list[bool] = []

        def stream() -> None:
            body = {"model": "localpager", "max_tokens": 64, "stream": True,
                    "messages": [{"role": "user", "content": "Tell me a long story about a cat."}]}
            with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600,
                              headers={"Authorization": f"Bearer {KEY}", "X-Conversation-Id": "stop"}) as r:
                lines = [line for line in r.iter_lines() if line.startswith("data:")]
            stream_end.append(time.monotonic())
            whole.append(len(lines) >= 2 and lines[-1] == "data: [DONE]" and "\"localpager\"" in lines[-2])

        try:
            if run == "idle":
                chat(url, "stop", alternating(["I'm allergic to shellfish."]))
                client = None
            else:
                client = threading.Thread(target=stream)
                client.start()
                time.sleep(1.0)  # the answer is being written
            sent = time.monotonic()
            proc.terminate()
            proc.wait(300)
            exited = time.monotonic()
            if client is not None:
                client.join(60)
        finally:
            stop(proc)
        lines = server_log.read_text().splitlines()
        said += bool(lines) and lines[-1] == "localpager serve: stopped"
        if run == "idle":
            result["serve_stop_idle_s"] = round(exited - sent, 2)
        else:
            result["serve_stop_after_inflight_s"] = round(exited - stream_end[0], 2) if stream_end else None
            result["serve_stop_inflight_whole"] = int(bool(whole and whole[0]))
        if lines and lines[-1] != "localpager serve: stopped":
            log(f"serve stop ({run}): the last line was {lines[-1]!r}")
    result["serve_stop_said_stopped"] = said
    return result


def serve_cases(log=lambda s: None) -> dict:
    """The figures for faults.py's report."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        data, store = folder / "big.jsonl", folder / "serve.db"
        texts = ["x"] * (STORED_TURNS - 1) + ["ok"]
        data.write_text(json.dumps({"id": "big", "turns": [{"role": m["role"], "text": m["content"]}
                                                           for m in alternating(texts)]}) + "\n")
        cli(store, "ingest", str(data), log=log)
        proc, url = start_server(store, folder / "server.log")
        try:
            result = {**history_match(url, folder / "server.log", log), **cors_null(url, folder / "cors.db", log),
                      **big_ids(url, log)}
        finally:
            stop(proc)
        result.update(mcp_token(folder, log))
        result.update(stop_times(folder, log))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--stop-only", action="store_true", help="only how soon the server stops (issue 39)")
    args = parser.parse_args()
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    if args.stop_only:
        with tempfile.TemporaryDirectory() as d:
            result = {**stop_times(Path(d), log), "load_average_1min": round(os.getloadavg()[0], 1)}
    else:
        result = serve_cases(log)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
