"""Issue 32 (5, 6, 8): `localpager serve` against a page with no site of its own (``Origin: null``), log lines
forged with Unicode line separators, connections held open doing nothing, a port already taken, and a
mistyped conversation id. On the fakes (tests/fakes.py): seconds in all."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, shortest_sentence
from helpers import free_port, serving_in_thread

from localpager.cli import cli
from localpager.serving.protocol import check_cors, escape_controls, origin_allowed

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from localpager.serving.app import ServerOptions, create_app  # noqa: E402

ANSWER = "Noted, thanks for telling me."
SEPARATORS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # every break str.splitlines() knows


@pytest.fixture
def lp(fake_pager):
    return fake_pager(backend=ScriptedBackend(fallback=lambda p, g: shortest_sentence(g) if g else ANSWER))


# -- Origin: null --------------------------------------------------------------------------------------
@pytest.mark.parametrize("origin", ["null", "NULL", " null", "file://"])
def test_an_origin_any_page_can_send_needs_a_key_as_star_does(origin):
    with pytest.raises(ValueError, match="needs --api-key"):
        check_cors([origin], None)
    check_cors([origin], "a-key")  # behind a key, as '*'
    check_cors(["http://app.example"], None)  # a site needs none


def test_serve_refuses_cors_origin_null_without_a_key(tmp_path):
    env = {**os.environ, "LOCALPAGER_API_KEY": "", "LOCALPAGER_MODEL": "/nonexistent.gguf"}
    command = [sys.executable, "-m", "localpager.cli", "--store", str(tmp_path / "s.db"), "serve", "--cors-origin",
               "null", "--port", str(free_port()), "--no-preload"]
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("serve started with --cors-origin null and no key")
    assert proc.returncode == 2 and "needs --api-key" in proc.stderr, proc.stderr


def test_a_page_without_a_site_is_refused_and_not_told_to_allow_itself(lp):
    with TestClient(create_app(lp, log=lambda line: None)) as client:
        r = client.post("/v1/conversations/c/forget", json={"turn": 0}, headers={"Origin": "null"})
    assert r.status_code == 403
    assert "--cors-origin" not in r.json()["error"]["message"] and "sandboxed" in r.json()["error"]["message"]
    assert not origin_allowed("null", "testserver", ["http://app.example"])


def test_with_a_key_cors_origin_null_lets_the_page_in(lp):
    with TestClient(create_app(lp, log=lambda line: None, api_key="k", cors_origins=["null"])) as client:
        r = client.post("/v1/chat/completions", headers={"Origin": "null", "Authorization": "Bearer k",
                                                         "X-Conversation-Id": "c"},
                        json={"model": "localpager", "messages": [{"role": "user", "content": "Hi."}]})
    assert r.status_code == 200


# -- log lines --------------------------------------------------------------------------------------------
def test_no_line_separator_reaches_a_log_line():
    line = "GET /a" + "".join(f"{c}forged {i}" for i, c in enumerate(SEPARATORS)) + " é 田中"
    escaped = escape_controls(line)
    assert len(escaped.splitlines()) == 1 and escaped.isprintable()
    assert "\\u2028forged 8" in escaped and "\\u2029forged 9" in escaped and escaped.endswith(" é 田中")


def test_a_request_path_with_a_paragraph_separator_logs_one_line(lp):
    logs: list[str] = []
    with TestClient(create_app(lp, log=logs.append)) as client:
        client.get("/v1/conversations/x%E2%80%A8POST%20/v1/chat/completions%20200%201%20ms%E2%80%A9/pages")
    assert logs and all(len(line.splitlines()) == 1 for line in logs)
    assert any("x\\u2028POST" in line for line in logs)


# -- idle connections ---------------------------------------------------------------------------------
class Slow(ScriptedBackend):
    """Answers after ``delay`` seconds: a request that takes longer than the head timeout is not cut."""

    delay = 0.0

    def generate(self, prompt, **options):
        time.sleep(self.delay)
        return super().generate(prompt, **options)


@pytest.fixture
def running(fake_pager):
    """``serve``'s own uvicorn server (``uvicorn_server``) with short timeouts, in a thread; its port."""
    backend = Slow(fallback=lambda p, g: shortest_sentence(g) if g else ANSWER)
    lp = fake_pager(backend=backend)
    options = ServerOptions(keep_alive_s=0.5, head_timeout_s=0.6, body_timeout_s=0.6, log=lambda line: None)
    with serving_in_thread(lp, options) as port:
        yield port, backend


def closed_within(conn: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed ``conn`` within ``seconds`` (reading what it sent meanwhile)."""
    conn.settimeout(0.1)
    got, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            data = conn.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True, got
        if not data:
            return True, got
        got += data
    return False, got


@pytest.mark.parametrize("sends", [b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"G"],
                         ids=["nothing", "half a head", "one byte"])
def test_a_connection_that_sends_no_whole_request_is_closed(running, sends):
    port, _ = running
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(sends)
        closed, _ = closed_within(conn, 5)
    assert closed, "the connection was held open"


def test_a_kept_alive_connection_is_closed_when_idle_even_after_a_byte_more(running):
    port, _ = running
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        time.sleep(0.2)
        conn.sendall(b"GE")  # uvicorn's keep-alive timer stops at the first byte of the next request
        closed, got = closed_within(conn, 5)
    assert closed and got.startswith(b"HTTP/1.1 200")


def test_a_body_that_never_ends_gets_a_408_and_the_connection_closed(running):
    port, _ = running
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\nX-Conversation-Id: c\r\n\r\n{\"model\": ")
        closed, got = closed_within(conn, 5)
    assert closed and got.startswith(b"HTTP/1.1 408") and b"request_timeout" in got


def test_a_request_slower_than_the_timeouts_is_answered(running):
    import httpx

    port, backend = running
    backend.delay = 1.5
    r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", headers={"X-Conversation-Id": "c"}, timeout=30,
                   json={"model": "localpager", "messages": [{"role": "user", "content": "Hi."}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ANSWER


# -- a port already taken -----------------------------------------------------------------------------
def test_serve_on_a_taken_port_says_so_in_one_line_and_never_that_it_listens(tmp_path, fake_models):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(cli, ["--store", str(tmp_path / "s.db"), "serve", "--port", str(port),
                                          "--no-preload"])
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output and "--port" in result.output
    assert "listening" not in result.output and f"http://127.0.0.1:{port}" not in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- a mistyped conversation id -----------------------------------------------------------------------------
def test_the_server_s_404_names_the_ids_close_to_a_mistyped_one(lp):
    for conv in ("holiday-plans", "work"):
        lp.conversation(conv, create=True).add_turn("user", "Hello.")
    with TestClient(create_app(lp, log=lambda line: None)) as client:
        near = client.get("/v1/conversations/holiday-plnas/pages")
        far = client.get("/v1/conversations/zzz/pages")
    assert near.status_code == 404 and "did you mean 'holiday-plans'?" in near.json()["error"]["message"]
    assert far.status_code == 404 and "did you mean" not in far.json()["error"]["message"]
