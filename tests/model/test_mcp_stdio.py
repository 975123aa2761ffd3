"""`localpager mcp` as a desktop app runs it: the official MCP SDK's client spawns the command over stdio on a
real store (the real embedder, FAISS, SQLite) and calls every tool. A forget through it passes the CLI's erase
check; bad arguments are tool errors and the server goes on; stdout carries protocol messages only; the server
process maps no GGUF file and no llama.cpp library; it stops when the client closes it (else by its PID)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from faultkit import leaks

pytestmark = [pytest.mark.embedder, pytest.mark.slow]
pytest.importorskip("mcp", reason="the mcp extra: pip install 'localpager[mcp]'")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp_types import jsonrpc_message_adapter  # noqa: E402

from localpager.cli import cli  # noqa: E402

CONV = "synthetic-3-000"
MARKER = "Zorblaxquintessa"


def command() -> list[str]:
    """The installed ``localpager`` script, as an app's configuration names it (else ``python -m``)."""
    script = Path(sys.executable).parent / "localpager"
    return [str(script)] if script.exists() else [sys.executable, "-m", "localpager.cli"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A generated conversation (400 turns, planted facts and their probes), as a file."""
    folder = tmp_path_factory.mktemp("mcp")
    path = folder / "conv.jsonl"
    result = CliRunner().invoke(cli, ["lab", "generate", str(path), "--n", "1", "--seed", "3", "--turns", "400"])
    assert result.exit_code == 0, result.output
    return json.loads(path.read_text(encoding="utf-8").splitlines()[0]), path


@pytest.fixture
def store(data, tmp_path):
    """The conversation stored (paged under the token estimate: no GGUF in this process either)."""
    from localpager.serving.mcp import open_store

    path = tmp_path / "memory.db"
    lp = open_store(path)
    lp.ingest(data[1])
    lp.close()
    return path


def planted(conversation: dict) -> tuple[dict, str]:
    """A probe whose answer is one word said in exactly one turn, its evidence, on an evicted page."""
    texts = [t["text"].casefold() for t in conversation["turns"]]
    for probe in conversation["probes"]:
        word = probe["answer"][0]
        holders = [i for i, t in enumerate(texts) if word.casefold() in t]
        if re.fullmatch(r"[A-Za-z]{6,}", word) and holders == probe["evidence"] and holders[0] < 300:
            return probe, word
    raise AssertionError("no probe with a one-word answer said once")


def serve(store: Path, *args: str):
    """``run(calls)``: ``await calls(client, pid)`` against ``localpager mcp`` on ``store`` (``pid()``: the server's
    process id, from its stderr); returns (result, stderr, pid, what on its stdout was no protocol message: the
    lines the client could not read while the session ran, and any line of the whole stdout, copied by ``tee``
    up to the process's exit, that is no JSON-RPC message)."""
    def run(calls, mode: str = "legacy"):
        stamp = time.monotonic_ns()
        errlog, stdout = store.parent / f"mcp-stderr-{stamp}.log", store.parent / f"mcp-stdout-{stamp}.jsonl"
        argv = shlex.join([*command(), "mcp", "--store", str(store), *args])
        params = StdioServerParameters(command="/bin/sh", args=["-c", f"{argv} | tee {shlex.quote(str(stdout))}"],
                                       env={"LOCALPAGER_THREADS": "1", "HF_HUB_OFFLINE": "1"})
        transport_errors: list[Exception] = []

        async def on_message(message):
            if isinstance(message, Exception):  # a stdout line that is no protocol message
                transport_errors.append(message)

        def pid() -> int | None:
            found = re.search(r"pid (\d+)", errlog.read_text(encoding="utf-8")) if errlog.exists() else None
            return int(found.group(1)) if found else None

        async def main():
            with errlog.open("w") as err:
                async with Client(stdio_client(params, errlog=err), message_handler=on_message, mode=mode,
                                  read_timeout_seconds=300) as client:
                    return await calls(client, pid)

        try:
            result = asyncio.run(main())
        finally:
            server = pid()
            if server is not None and alive(server):  # the client stops it; if it did not, by its PID
                os.kill(server, signal.SIGKILL)
                pytest.fail(f"localpager mcp (pid {server}) outlived its client")
        lines = stdout.read_text(encoding="utf-8").splitlines()
        assert len(lines) >= 2, "tee copied no protocol messages: the whole-stdout check would see nothing"
        for line in lines:
            try:
                jsonrpc_message_adapter.validate_json(line)
            except ValueError as exc:
                transport_errors.append(exc)
        return result, errlog.read_text(encoding="utf-8"), server, transport_errors

    return run


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs after up to five seconds."""
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        status = Path(f"/proc/{pid}/stat")
        if status.exists() and status.read_text().rsplit(")", 1)[-1].split()[0] == "Z":
            return False  # exited, not yet reaped
        time.sleep(0.1)
    return True


def test_every_tool_over_stdio_on_a_real_store(store, data):
    conversation, _ = data
    probe, word = planted(conversation)
    evidence = probe["evidence"][0]

    async def calls(client, pid):
        out = {"tools": sorted(t.name for t in (await client.list_tools()).tools)}
        out["conversations"] = await client.call_tool("conversations", {})
        out["bookmarks"] = await client.call_tool("bookmarks", {"conversation": CONV})
        started = time.perf_counter()
        out["recall"] = await client.call_tool("recall", {"conversation": CONV, "question": probe["question"],
                                                          "max_turns": 5})
        out["first_recall_s"] = time.perf_counter() - started
        top = out["recall"].structured_content["turns"][0]["turn"]
        out["search"] = await client.call_tool("search", {"conversation": CONV, "query": word, "limit": 5})
        out["remember"] = await client.call_tool("remember", {"conversation": CONV,
                                                              "text": f"My locker code word is {MARKER}."})
        out["recall_new"] = await client.call_tool("recall", {"conversation": CONV,
                                                              "question": "What is my locker code word?"})
        out["correct"] = await client.call_tool("correct", {"conversation": CONV, "turn": top,
                                                            "text": "Correction: that changed, it is different now."})
        out["recall_corrected"] = await client.call_tool("recall", {"conversation": CONV, "question": probe["question"],
                                                                    "max_turns": 4})
        out["resources"] = [r.uri for r in (await client.list_resources()).resources]
        out["pages"] = (await client.read_resource(f"localpager://conversations/{CONV}/pages")).contents[0].text
        # errors a model can read; the server goes on
        out["bad"] = [await client.call_tool("recall", {"conversation": CONV}),
                      await client.call_tool("forget", {"conversation": CONV, "turn": 1, "page": 1}),
                      await client.call_tool("search", {"conversation": "nobody", "query": "x"}),
                      await client.call_tool("remember", {"conversation": CONV, "text": "x", "role": "robot"})]
        out["after_bad"] = await client.call_tool("conversations", {})
        return out

    out, stderr, pid, stray = serve(store)(calls)
    assert not stray, f"stdout held something other than protocol messages: {stray}"
    assert out["tools"] == ["bookmarks", "conversations", "correct", "delete_fact", "edit_fact", "facts", "forget",
                            "recall", "remember", "search"]
    plain = {k: v for k, v in out.items() if hasattr(v, "is_error")}
    assert not any(v.is_error for v in plain.values()), {k: v.content for k, v in plain.items() if v.is_error}
    info = out["conversations"].structured_content["conversations"][0]
    assert info["id"] == CONV and info["turns"] == 400 and info["evicted"] > 0
    assert len(out["bookmarks"].structured_content["bookmarks"]) == info["pages"]
    recall = out["recall"].structured_content
    assert recall["relevant"] and recall["turns"][0]["injected"] and len(recall["turns"]) == 5
    assert evidence in [t["turn"] for t in recall["turns"]]  # the ranking's quality is measured elsewhere
    first = next(t for t in recall["turns"] if t["turn"] == evidence)
    assert word in first["text"] and first["page"] >= 1 and isinstance(first["dates"], list) and first["score"] > 0
    scores = [t["score"] for t in recall["turns"] if not t["injected"]]
    assert scores == sorted(scores, reverse=True)
    assert evidence in [h["turn"] for h in out["search"].structured_content["hits"]]
    remembered = out["remember"].structured_content
    assert remembered["turn"] == 400 and not remembered["created"]
    assert out["recall_new"].structured_content["turns"][0]["turn"] == 400
    new = out["correct"].structured_content["new_turn"]
    corrected = out["recall_corrected"].structured_content["turns"]
    assert corrected[0]["turn"] == new and corrected[0]["label"] == "latest"
    assert f"localpager://conversations/{CONV}/bookmarks" in out["resources"]
    assert MARKER in out["pages"]
    assert [b.is_error for b in out["bad"]] == [True] * 4 and not out["after_bad"].is_error
    texts = [b.content[0].text for b in out["bad"]]
    assert "question" in texts[0] and "exactly one of match, turn or page" in texts[1]
    assert "no conversation 'nobody'" in texts[2] and "role" in texts[3]
    assert "Traceback" not in stderr
    print(f"first recall in the new process, 400 turns never embedded: {out['first_recall_s']:.2f} s")


def test_a_forget_through_mcp_passes_the_clis_erase_check(store, data):
    conversation, _ = data
    probe, word = planted(conversation)
    assert leaks(store, word)  # the store's files hold it before

    async def calls(client, pid):
        found = await client.call_tool("search", {"conversation": CONV, "query": word})  # vectors and FAISS files
        first = await client.call_tool("forget", {"conversation": CONV, "match": word})
        assert leaks(store, word), "a forget without its confirmation token erased something"
        done = await client.call_tool("forget", {"conversation": CONV, "match": word,
                                                 "confirm": first.structured_content["confirm_token"]})
        during = leaks(store, word)  # the server still has the store open
        recall = await client.call_tool("recall", {"conversation": CONV, "question": probe["question"]})
        return found, first, done, during, recall

    (found, first, done, during, recall), _, _, stray = serve(store)(calls)
    assert not stray
    assert probe["evidence"][0] in [h["turn"] for h in found.structured_content["hits"]]
    assert first.structured_content["status"] == "confirm"
    assert [t["turn"] for t in first.structured_content["turns"]] == probe["evidence"]
    assert done.structured_content["status"] == "forgotten" and done.structured_content["erased"]
    assert during == [] and leaks(store, word) == []
    assert all(word not in t["text"] for t in recall.structured_content["turns"])


def test_read_only_and_pinned_and_no_gguf_in_the_process(store, data):
    """A pinned, read-only server: five tools without a conversation argument; its process maps no GGUF file
    and no llama.cpp library, with the real default model reachable (nothing was kept from loading it)."""
    conversation, _ = data
    probe, word = planted(conversation)

    async def calls(client, pid):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        recall = await client.call_tool("recall", {"question": probe["question"], "max_turns": 5})
        forget = await client.call_tool("forget", {"match": word})
        return tools, recall, forget, Path(f"/proc/{pid()}/maps").read_text()

    (tools, recall, forget, maps), stderr, pid, stray = serve(store, "--conversation", CONV, "--read-only")(calls)
    assert not stray and pid is not None
    assert set(tools) == {"recall", "search", "bookmarks", "conversations", "facts"}
    assert all("conversation" not in t.input_schema["properties"] for t in tools.values())
    assert probe["evidence"][0] in [t["turn"] for t in recall.structured_content["turns"]]
    assert forget.is_error and "forget" in forget.content[0].text
    assert maps and ".gguf" not in maps and "llama" not in maps, "the MCP server loaded llama.cpp or a GGUF file"
    assert "read-only" in stderr and repr(CONV) in stderr


def test_the_discovery_handshake_works_too(store):
    """Apps speak the initialize handshake (``legacy``); the SDK's client default probes ``server/discover``."""
    async def calls(client, pid):
        return await client.call_tool("conversations", {})

    result, _, _, stray = serve(store)(calls, mode="auto")
    assert not stray and result.structured_content["conversations"][0]["id"] == CONV


def test_a_store_that_will_not_open_is_one_line_on_stderr_and_nothing_on_stdout(tmp_path):
    import subprocess

    missing = tmp_path / "none.db"
    done = subprocess.run([*command(), "mcp", "--store", str(missing), "--read-only"], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == f"Error: no store at {missing} (--read-only opens an existing store)"
