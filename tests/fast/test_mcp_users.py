"""`localpager mcp --user NAME` (issue 40, item 5) on the fakes, through the official SDK's client in-process:
the tools reach NAME's conversations only, a call naming no conversation uses NAME's own (made as theirs by the
first remember), search without one looks through all of theirs, and the descriptions say so. Without --user the
tools are as they were (tests/fast/test_mcp.py)."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("mcp", reason="the mcp extra: pip install 'localpager[mcp]'")

from click.testing import CliRunner  # noqa: E402
from mcp import Client  # noqa: E402

from localpager.backends.nomodel import NoChatModel  # noqa: E402
from localpager.cli import cli  # noqa: E402
from localpager.serving.mcp import build_server  # noqa: E402
from localpager.serving.mcp.tools import own_conversation  # noqa: E402

SECRET = "Zorblaxquintessa"
OWN = "alice-memory"


def run(server, calls):
    async def main():
        async with Client(server) as client:
            return await calls(client)

    return asyncio.run(main())


@pytest.fixture
def lp(fake_pager):
    lp = fake_pager(backend=NoChatModel())
    lp.conversation("webui-1", create=True, user="alice").add_turn("user", f"My locker code word is {SECRET}.")
    lp.conversation("bob-1", create=True, user="bob").add_turn("user", f"Bob's code word is {SECRET} too.")
    lp.conversation("old", create=True).add_turn("user", "Nobody's words.")
    return lp


def test_a_users_tools_need_no_conversation_and_reach_theirs_only(lp):
    async def calls(client):
        out = {"tools": {t.name: t for t in (await client.list_tools()).tools}}
        out["empty"] = await client.call_tool("recall", {"question": "Where do I live?"})
        out["marks0"] = await client.call_tool("bookmarks", {})
        out["unstarted"] = lp.store.has_conversation(OWN)
        out["remember"] = await client.call_tool("remember", {"text": "I live in Utrecht with my partner."})
        out["again"] = await client.call_tool("remember", {"text": "I'm allergic to sesame."})
        out["recall"] = await client.call_tool("recall", {"question": "Where do I live?"})
        out["recall_other"] = await client.call_tool("recall", {"question": "What is my locker code word?"})
        out["search"] = await client.call_tool("search", {"query": f"locker code word {SECRET}"})
        out["search_own"] = await client.call_tool("search", {"query": "Utrecht", "conversation": OWN})
        out["listed"] = await client.call_tool("conversations", {})
        out["bob"] = await client.call_tool("recall", {"question": "code word?", "conversation": "bob-1"})
        out["old"] = await client.call_tool("remember", {"text": "mine now?", "conversation": "old"})
        out["forget"] = await client.call_tool("forget", {"match": "sesame", "dry_run": True})
        out["resources"] = [r.uri for r in (await client.list_resources()).resources]
        out["facts"] = json.loads((await client.read_resource("localpager://users/alice/facts")).contents[0].text)
        return out

    server = build_server(lp, user="alice")
    out = run(server, calls)
    tools = out["tools"]
    for name in ("recall", "search", "bookmarks", "remember", "forget", "correct"):
        schema = tools[name].input_schema
        assert "conversation" in schema["properties"] and "conversation" not in schema.get("required", []), name
        assert "user 'alice'" in tools[name].description and "leave out `conversation`" in tools[name].description
        assert OWN in schema["properties"]["conversation"]["description"]
    assert tools["recall"].input_schema["required"] == ["question"]
    assert "all of their conversations" in tools["search"].description
    assert "user 'alice'" in server.instructions and OWN in server.instructions

    empty = out["empty"].structured_content  # her own is not made yet: her latest chat answers, and names itself
    assert not out["empty"].is_error and empty["conversation"] == OWN
    assert empty["turns"] and {t["conversation"] for t in empty["turns"]} == {"webui-1"}
    assert out["marks0"].structured_content["bookmarks"] == []
    assert out["unstarted"] is False  # reading made nothing
    remembered = out["remember"].structured_content
    assert (remembered["conversation"], remembered["created"], remembered["turn"]) == (OWN, True, 0)
    assert lp.store.conversation_user(OWN) == "alice"
    assert out["again"].structured_content["created"] is False
    recall = out["recall"].structured_content
    assert recall["conversation"] == OWN and "Utrecht" in recall["turns"][0]["text"]
    assert recall["turns"][0]["conversation"] is None  # her own conversation's turn
    other = out["recall_other"].structured_content  # what she said in another chat of hers, named; never bob's
    assert other["turns"][0]["conversation"] == "webui-1" and SECRET in other["turns"][0]["text"]
    assert all("Bob" not in t["text"] for t in other["turns"])

    search = out["search"].structured_content  # all of hers: the Open WebUI chat's words too, never bob's
    assert search["conversation"] is None and search["hits"][0]["conversation"] == "webui-1"
    assert {h["conversation"] for h in search["hits"]} <= {"webui-1", OWN}
    own = out["search_own"].structured_content
    assert own["conversation"] == OWN and "Utrecht" in own["hits"][0]["text"]
    assert {h["conversation"] for h in own["hits"]} == {None} and len(own["hits"]) == 2  # its two turns only
    assert [c["id"] for c in out["listed"].structured_content["conversations"]] == ["webui-1", OWN]

    for refused, whose in ((out["bob"], "user 'bob'"), (out["old"], "no user")):
        assert refused.is_error and f"belongs to {whose}, not to user 'alice'" in refused.content[0].text
    assert [t.text for t in lp.store.turns("old")] == ["Nobody's words."]
    forget = out["forget"].structured_content
    assert forget["conversation"] == OWN and forget["status"] == "preview" and len(forget["turns"]) == 1
    assert "localpager://users/alice/facts" in out["resources"]
    assert not any("bob-1" in uri or "/old/" in uri for uri in out["resources"])
    assert {f["conv_id"] for f in out["facts"]["facts"]} <= {"webui-1", OWN}
    assert any("sesame" in f["text"] for f in out["facts"]["facts"])


def test_a_user_server_pinned_to_a_conversation_makes_it_theirs(lp):
    async def calls(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        made = await client.call_tool("remember", {"text": "Kiwi is the parrot's name."})
        return tools, made

    tools, made = run(build_server(lp, user="alice", conversation="desk"), calls)
    assert all("conversation" not in t.input_schema["properties"] for t in tools.values())
    assert made.structured_content["conversation"] == "desk" and lp.store.conversation_user("desk") == "alice"

    async def other(client):
        return await client.call_tool("remember", {"text": "x"})

    refused = run(build_server(lp, user="alice", conversation="bob-1"), other)
    assert refused.is_error and "belongs to user 'bob'" in refused.content[0].text


def test_without_a_user_a_conversation_is_still_required(lp):
    async def calls(client):
        tools = {t.name: t for t in (await client.list_tools()).tools}
        return tools, await client.call_tool("remember", {"text": "x"})

    tools, result = run(build_server(lp), calls)
    assert tools["recall"].input_schema["required"] == ["conversation", "question"]
    assert "This server serves user" not in tools["recall"].description
    assert result.is_error and "conversation" in result.content[0].text


def test_own_conversation_is_stable_and_always_a_valid_id():
    from localpager.core.checks import id_problem

    assert own_conversation("alice") == OWN == own_conversation("alice")
    long = own_conversation("x" * 200)
    assert id_problem(long) is None and long != own_conversation("y" * 200)


def test_the_mcp_command_takes_a_user(tmp_path, monkeypatch):
    import localpager.serving.mcp as served

    seen = {}
    monkeypatch.setattr(served, "serve_stdio", lambda lp, **options: seen.update(options))
    monkeypatch.delenv("LOCALPAGER_USER", raising=False)
    store = ["--store", str(tmp_path / "m.db")]
    assert CliRunner().invoke(cli, ["mcp", *store, "--user", "alice"]).exit_code == 0
    assert seen == {"conversation": None, "read_only": False, "user": "alice"}
    assert CliRunner().invoke(cli, ["mcp", *store]).exit_code == 0 and seen["user"] is None
    bad = CliRunner().invoke(cli, ["mcp", *store, "--user", "al\nice"])
    assert bad.exit_code == 1 and "control or invisible" in bad.output
