"""Issue 39 (a): `localpager serve` says when it is ready and when it has stopped, stops at once when nothing is in
flight, and finishes a streamed answer in flight before it stops. On the fakes, or a real process with no model
(``--no-preload``): seconds in all. How fast it stops, with the real models: benchmarks/serve_cases.py
(``serve_stop_*``)."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from fakes import ScriptedBackend, shortest_sentence
from helpers import serving

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import ServerOptions, create_app, listen, uvicorn_server  # noqa: E402
from localpager.store.sqlite import SQLiteStore  # noqa: E402

ANSWER = "Noted, thanks for telling me all of that."


def reply(prompt: str, grammar: str | None) -> str:
    return shortest_sentence(grammar) if grammar else ANSWER


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "Ctrl-C"])
def test_serve_says_ready_then_stopped_and_exits_with_the_signal_s_status(tmp_path, sig):
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    with serving(path, "--no-preload", preloaded=False) as served:
        assert Path(f"{path}-wal").exists()  # the store is open
        served.proc.send_signal(sig)
        served.proc.wait(10)  # generous: nothing is in flight (how fast: benchmarks/serve_cases.py)
        served.reader.join(10)
    lines = [line.rstrip("\n") for line in served.lines]
    said = [line.removeprefix("localpager serve: ").split(" ")[0] for line in lines if " /health " not in line]
    assert said == ["listening", "ready", "stopped"], lines  # the helper's /health requests left out
    assert served.proc.returncode == 128 + sig  # as the shell reports a process the signal ended
    assert not Path(f"{path}-wal").exists()  # the store was closed: its log checkpointed and removed


def test_ready_is_said_once_the_models_are_loaded(fake_pager):
    logs: list[str] = []
    lp = fake_pager(backend=ScriptedBackend(fallback=reply))
    with TestClient(create_app(lp, preload=True, log=logs.append)) as client:
        deadline = time.monotonic() + 10
        while not client.get("/health").json()["preloaded"]:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    loaded = [line for line in logs if "models" in line]
    assert len(loaded) == 1 and loaded[0].startswith("ready: models loaded in "), logs


class Forks(ScriptedBackend):
    forks = 0

    def fork(self):
        self.forks += 1
        return super().fork()


def test_a_preload_the_server_stopped_loads_nothing_more(fake_pager):
    from localpager.serving.jobs import ModelRunner

    backend = Forks(fallback=reply)
    lp = fake_pager(backend=backend)
    lp.held.closed = True  # what LocalPager.close says first, before it waits for the model lock
    try:
        ModelRunner(lp).preload()
    finally:
        lp.held.closed = False
    assert backend.forks == 0 and lp.models._runtime is None  # no side context, no runtime
    ModelRunner(lp).preload()
    assert backend.forks == 1 and lp.models._runtime is not None  # what it loads when the server is not stopping


class Slow(ScriptedBackend):
    """Writes its answer slowly, a piece at a time, once ``go`` is set."""

    def __init__(self, **options):
        super().__init__(**options)
        self.go = threading.Event()

    def generate(self, prompt, **options):
        if options.get("constraint") is None:
            self.go.wait(30)
        return super().generate(prompt, **options)


def test_a_stream_in_flight_when_the_server_stops_is_finished_and_stored(fake_pager, capfd):
    from sse_starlette.sse import AppStatus

    backend = Slow(fallback=reply)
    lp = fake_pager(backend=backend)
    options = ServerOptions(log=lambda line: None)
    sock = listen("127.0.0.1", 0)
    server = uvicorn_server(create_app(lp, options), "127.0.0.1", 0, options)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    chunks: list[dict] = []
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with httpx.stream("POST", f"{url}/v1/chat/completions", headers={"X-Conversation-Id": "c"}, timeout=30,
                          json={"model": "localpager", "stream": True,
                                "messages": [{"role": "user", "content": "Tell me something nice."}]}) as r:
            lines = r.iter_lines()
            assert next(line for line in lines if line.startswith("data:"))  # the stream has begun
            server.handle_exit(signal.SIGTERM, None)  # what a SIGTERM does (the signal itself goes to the main thread)
            time.sleep(1.5)  # sse-starlette looks for a shutdown every 0.5 s, and used to cut the stream then
            backend.go.set()
            chunks = [json.loads(line[5:]) for line in lines if line.startswith("data:") and "[DONE]" not in line]
        thread.join(30)
    finally:
        AppStatus.should_exit = False  # sse-starlette's, for the whole process
        backend.go.set()
        server.should_exit = True
        thread.join(10)
        sock.close()
    assert not thread.is_alive()
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices"))
    assert " ".join(text.split()) == ANSWER and "localpager" in chunks[-1]  # whole, with its memory field
    assert [(t.role, t.text) for t in lp.store.turns("c")] == [("user", "Tell me something nice."),
                                                               ("assistant", ANSWER)]
    assert "stopping: 1 answer in progress, finished and stored first" in capfd.readouterr().err
