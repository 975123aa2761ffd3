"""Issue 32 (6, 7): `localpager mcp` as separate processes on its stdio. A line that is not a JSON-RPC message
(invalid JSON, a lone surrogate, a bare array) gets a JSON-RPC error instead of leaving the client waiting for
ever; a forget confirmed in another process than the one that previewed it erases (the token is kept in the
store), once. Subprocesses with no model file and no embedder: nothing here loads either."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

import pytest
from faultkit import leaks
from helpers import run_cli_here

pytest.importorskip("mcp", reason="the mcp extra: pip install 'localpager[mcp]'")

SECRET = "Plimquartz"
PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes
NO_MODELS = {"LOCALPAGER_MODEL": "/nonexistent.gguf", "LOCALPAGER_EMBEDDER": "/nonexistent-embedder"}
ENV = {**os.environ, **NO_MODELS}


class McpProcess:
    """``localpager mcp`` on ``store``, spoken to one line at a time (initialized on entry)."""

    def __init__(self, store):
        self.proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "mcp"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)

    def __enter__(self) -> "McpProcess":
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        assert self.receive(60)["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return self

    def __exit__(self, *exc) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()

    def send(self, message) -> None:
        line = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def receive(self, seconds: float = 10) -> dict | None:
        ready, _, _ = select.select([self.proc.stdout], [], [], seconds)
        return json.loads(self.proc.stdout.readline()) if ready else None

    def call(self, call_id: int, name: str, **arguments) -> dict:
        self.send({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                   "params": {"name": name, "arguments": arguments}})
        reply = self.receive(60)
        assert reply is not None and reply["id"] == call_id, reply
        return reply["result"]


MALFORMED = [
    (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "search", "arguments": '
     b'{"conversation": "c", "query": "\\ud800"}}}', 7, INVALID_REQUEST),  # a lone surrogate
    (b'{"jsonrpc": "2.0", "id": 8, "method": ', None, PARSE_ERROR),  # invalid JSON
    (b'[]', None, INVALID_REQUEST),  # a bare array
    (b'[{"jsonrpc": "2.0", "id": 9, "method": "ping"}]', 9, INVALID_REQUEST),  # a batch
    (b'"ping"', None, INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 10, "params": {}}', 10, INVALID_REQUEST),  # no method
]


def test_every_malformed_line_gets_a_json_rpc_error_and_the_server_goes_on(tmp_path):
    with McpProcess(tmp_path / "s.db") as server:
        for line, request_id, code in MALFORMED:
            server.send(line)
            reply = server.receive()
            assert reply is not None, f"no answer to {line!r}: the client would wait for ever"
            assert reply["jsonrpc"] == "2.0" and reply["id"] == request_id and reply["error"]["code"] == code, reply
        # a malformed notification is answered by nothing, as JSON-RPC says; the next request is answered
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/x", "params": 5}')
        server.send({"jsonrpc": "2.0", "id": 11, "method": "ping"})
        assert server.receive() == {"jsonrpc": "2.0", "id": 11, "result": {}}


def test_a_malformed_response_or_notification_from_the_client_is_not_answered():
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    from localpager.serving.mcp import malformed_answers

    for line in (b'{"jsonrpc": "2.0", "id": 3, "result": 5, "error": 6}', b'{"jsonrpc": "2.0", "method": 5}'):
        with pytest.raises(ValidationError) as problem:
            jsonrpc_message_adapter.validate_json(line)
        assert malformed_answers(problem.value) == []


def seeded(tmp_path):
    """A store whose conversation "c" holds the secret in turn 1 (written in this process, with no model)."""
    from fakes import HashEmbedder

    from localpager.backends.nomodel import NoChatModel
    from localpager.memory.api import LocalPager, ModelOptions

    path = tmp_path / "s.db"
    lp = LocalPager(path, backend=NoChatModel(), options=ModelOptions(embedder=HashEmbedder()))
    conv = lp.conversation("c", create=True)
    conv.add_turn("user", "I keep my bike at the station.")
    conv.add_turn("user", f"My locker code word is {SECRET}.")
    lp.close()
    return path


def test_a_forget_previewed_in_one_process_is_confirmed_in_another_once(tmp_path):
    store = seeded(tmp_path)
    args = {"conversation": "c", "match": SECRET.lower()}
    with McpProcess(store) as first:  # a client that starts the server for each call
        preview = first.call(1, "forget", **args)["structuredContent"]
    assert preview["status"] == "confirm" and [t["turn"] for t in preview["turns"]] == [1]
    assert leaks(store, SECRET)  # nothing erased yet
    with McpProcess(store) as second:
        wrong = second.call(1, "forget", conversation="c", turn=0, confirm=preview["confirm_token"])
        assert wrong["isError"] and "issued for another call" in wrong["content"][0]["text"]
        again = second.call(2, "forget", **args)["structuredContent"]
        done = second.call(3, "forget", **args, confirm=again["confirm_token"])["structuredContent"]
    assert done["status"] == "forgotten" and done["erased"], done
    assert leaks(store, SECRET) == []
    with McpProcess(store) as third:
        replay = third.call(1, "forget", **args, confirm=again["confirm_token"])
    assert replay["isError"] and "already used" in replay["content"][0]["text"]


def test_the_store_keeps_no_token_and_no_text_of_a_confirmation(tmp_path):
    import sqlite3

    store = seeded(tmp_path)
    with McpProcess(store) as server:
        token = server.call(1, "forget", conversation="c", match=SECRET)["structuredContent"]["confirm_token"]
    rows = sqlite3.connect(store).execute("SELECT token, conv_id, binding, preview FROM confirmations").fetchall()
    assert len(rows) == 1 and rows[0][1] == "c"
    assert not any(token in str(value) or SECRET.lower() in str(value).lower() for value in rows[0])
    # a forget in the conversation (here from the command line) drops the tokens its previews were issued with
    run_cli_here("forget", "c", "--turn", "0", "--yes", store=store, env=NO_MODELS)  # its exit status must be 0
    assert sqlite3.connect(store).execute("SELECT count(*) FROM confirmations").fetchone()[0] == 0
