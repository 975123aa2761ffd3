"""`localpager mcp` on the fakes: the official SDK's client talks to the server in-process (the stdio runs
with the real embedder are in tests/model/test_mcp_stdio.py). Tools and their schemas, the confirmation
token that stands between a model and an erase, errors a model can read, the backend with no model."""

from __future__ import annotations

import asyncio
import sys

import pytest

pytest.importorskip("mcp", reason="the mcp extra: pip install 'localpager[mcp]'")

from click.testing import CliRunner  # noqa: E402
from faultkit import leaks  # noqa: E402
from mcp import Client  # noqa: E402

from localpager.backends.base import BackendError  # noqa: E402
from localpager.backends.nomodel import NoChatModel  # noqa: E402
from localpager.cli import cli  # noqa: E402
from localpager.core.pager import PagingConfig  # noqa: E402
from localpager.serving.mcp import Confirmations, build_server  # noqa: E402

SECRET = "Zorblaxquintessa"
SMALL = PagingConfig(boundary="fixed_5", budget=60)
ALL_TOOLS = {"recall", "search", "bookmarks", "conversations", "facts", "remember", "forget", "correct", "edit_fact",
             "delete_fact"}


def store_with_memories(fake_pager):
    lp = fake_pager(backend=NoChatModel())
    conv = lp.conversation("c", create=True, config=SMALL)
    for i in range(30):
        text = f"Turn {i} is about topic{i // 5} with zebra{i}."
        if i == 7:
            text += f" My locker code word is {SECRET}."
        conv.add_turn("user" if i % 2 == 0 else "assistant", text)
    return lp


def run(server, calls):
    """``calls(client)`` (a coroutine function) against ``server`` through the official client, in-process."""
    async def main():
        async with Client(server) as client:
            return await calls(client)

    return asyncio.run(main())


# -- tools and schemas ---------------------------------------------------------------------------------
def test_every_tool_has_a_schema_and_a_description_and_the_options_narrow_them(fake_pager):
    lp = store_with_memories(fake_pager)

    async def listing(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = run(build_server(lp), listing)
    assert set(tools) == ALL_TOOLS
    for tool in tools.values():
        assert len(tool.description) > 100 and tool.input_schema["type"] == "object"
        assert tool.output_schema["type"] == "object"
        for name, prop in tool.input_schema["properties"].items():
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    assert tools["recall"].input_schema["required"] == ["conversation", "question"]
    assert tools["forget"].input_schema["required"] == ["conversation"]
    assert set(tools["forget"].input_schema["properties"]) == {"conversation", "match", "turn", "page", "dry_run",
                                                                "confirm"}
    assert tools["remember"].input_schema["properties"]["role"]["enum"] == ["user", "assistant"]
    assert tools["forget"].annotations.destructive_hint and tools["recall"].annotations.read_only_hint
    assert tools["correct"].annotations.destructive_hint is False

    pinned = run(build_server(lp, conversation="c", read_only=True), listing)
    assert set(pinned) == {"recall", "search", "bookmarks", "conversations", "facts"}
    for tool in pinned.values():
        assert "conversation" not in tool.input_schema["properties"]
    assert pinned["recall"].input_schema["required"] == ["question"]


def test_each_tool_answers_on_a_store(fake_pager):
    lp = store_with_memories(fake_pager)
    calls_before = lp.backend  # NoChatModel: nothing may generate

    async def calls(client):
        out = {}
        out["conversations"] = await client.call_tool("conversations", {})
        out["bookmarks"] = await client.call_tool("bookmarks", {"conversation": "c"})
        out["search"] = await client.call_tool("search", {"conversation": "c", "query": f"code word {SECRET}", "limit": 3})
        out["recall"] = await client.call_tool("recall", {"conversation": "c", "question": f"What is my {SECRET}?"})
        out["remember"] = await client.call_tool("remember", {"conversation": "c", "text": "Kiwi is the parrot's name."})
        out["correct"] = await client.call_tool("correct", {"conversation": "c", "turn": 7,
                                                             "text": "My locker code word is Quillfeather now."})
        out["recall2"] = await client.call_tool("recall", {"conversation": "c", "question": "What is my locker code word?",
                                                           "max_turns": 3})
        out["resources"] = [r.uri for r in (await client.list_resources()).resources]
        out["pages"] = (await client.read_resource("localpager://conversations/c/pages/2")).contents[0].text
        return out

    out = run(build_server(lp), calls)
    assert calls_before is lp.backend
    assert not any(r.is_error for k, r in out.items() if hasattr(r, "is_error")), out
    assert out["conversations"].structured_content["conversations"][0]["id"] == "c"
    marks = out["bookmarks"].structured_content["bookmarks"]
    assert marks[0]["bookmark"].startswith("[p1") and marks[0]["evicted"]
    assert out["search"].structured_content["hits"][0]["turn"] == 7
    recall = out["recall"].structured_content
    assert recall["turns"][0]["turn"] == 7 and recall["turns"][0]["injected"] and recall["turns"][0]["page"] == 2
    assert set(recall) >= {"relevant", "probability", "turns", "note"}
    assert out["recall"].content[0].text.startswith("{")  # what a client without structured content shows its model
    remembered = out["remember"].structured_content
    assert (remembered["turn"], remembered["created"]) == (30, False)
    assert out["correct"].structured_content["new_turn"] == 31
    first = out["recall2"].structured_content["turns"][0]
    assert (first["turn"], first["label"]) == (31, "latest")
    assert out["resources"] == ["localpager://conversations/c/bookmarks", "localpager://conversations/c/pages",
                                "localpager://conversations/c/facts"]
    assert SECRET in out["pages"]


def test_the_standing_facts_are_a_resource_and_in_recall_and_nothing_remembered_says_so(fake_pager):
    import json

    from localpager.retrieval.gate import GateModel
    from localpager.retrieval.rerank import RerankSettings

    fires, never = GateModel({}, 10.0), GateModel({}, -10.0)

    def store(rerank):
        lp = fake_pager(backend=NoChatModel(), rerank=rerank)
        conv = lp.conversation("c", create=True, config=SMALL)
        for i in range(30):
            text = "I'm allergic to sesame." if i == 4 else f"Turn {i} is about topic{i // 5} with zebra{i}."
            conv.add_turn("user" if i % 2 == 0 else "assistant", text)
        return lp

    async def calls(client):
        facts = (await client.read_resource("localpager://conversations/c/facts")).contents[0].text
        recall = await client.call_tool("recall", {"conversation": "c", "question": "Any snacks I should skip?"})
        return json.loads(facts), recall.structured_content

    facts, recall = run(build_server(store(RerankSettings(facts=fires))), calls)
    assert facts["facts"][0]["text"] == "I'm allergic to sesame." and facts["facts"][0]["turn"] == 4
    assert [(f["fact_id"], f["turn"]) for f in recall["facts"]] == [(1, 4)] and recall["relevant"]
    assert "told you this about themselves" in recall["note"]

    async def forgotten(client):
        return (await client.call_tool("recall", {"conversation": "c", "question": "What did I say my locker code "
                                                                                   "was?"})).structured_content

    nothing = run(build_server(store(RerankSettings(facts=never, answerable=never))), forgotten)
    assert nothing["relevant"] is False and nothing["facts"] == []
    assert not any(t["injected"] for t in nothing["turns"]) and "nothing about this is remembered" in nothing["note"]


def test_remember_creates_a_conversation_counted_with_the_estimate_that_a_real_model_recounts(fake_pager, tmp_path):
    from fakes import ScriptedBackend

    lp = fake_pager(backend=NoChatModel(), path=tmp_path / "m.db")

    async def calls(client):
        return await client.call_tool("remember", {"conversation": "diary", "text": "I moved to Porto in May.",
                                                   "role": "user"})

    result = run(build_server(lp), calls)
    assert result.structured_content["created"] and result.structured_content["turn"] == 0
    assert lp.store.settings("diary")["tokenizer"] == "approx"  # the estimate's name, stored
    lp.close()
    again = fake_pager(backend=ScriptedBackend(), path=tmp_path / "m.db")  # a process with a model
    conv = again.conversation("diary")
    conv.add_turn("user", "And I started a new job.")
    assert again.store.settings("diary")["tokenizer"] != "approx"  # recounted under the model's tokenizer
    assert conv.pages[0].token_count == sum(conv.pager.turn_tokens(t) for t in conv.turns)


def test_the_backend_with_no_model_generates_nothing():
    backend = NoChatModel()
    assert backend.count_tokens("four") == 1 and backend.model_name == "approx"
    for call in (lambda: backend.generate([1], max_tokens=4), lambda: backend.render([]), lambda: backend.tokenize("x")):
        with pytest.raises(BackendError, match="no chat model"):
            call()


# -- forgetting takes two calls --------------------------------------------------------------------------
def test_forget_erases_only_with_the_token_its_preview_returned(fake_pager):
    lp = store_with_memories(fake_pager)
    conv = lp.conversation("c")
    assert conv.search(SECRET, 1)[0].turn == 7 and leaks(lp.store.path, SECRET)  # vectors and FAISS files hold it

    async def calls(client):
        args = {"conversation": "c", "match": SECRET.lower()}
        dry = await client.call_tool("forget", {**args, "dry_run": True})
        first = await client.call_tool("forget", args)
        token = first.structured_content["confirm_token"]
        other = await client.call_tool("forget", {"conversation": "c", "turn": 7, "confirm": token})
        spent = await client.call_tool("forget", {**args, "confirm": token})  # the wrong call spent it
        second = await client.call_tool("forget", args)
        done = await client.call_tool("forget", {**args, "confirm": second.structured_content["confirm_token"]})
        replay = await client.call_tool("forget", {**args, "confirm": second.structured_content["confirm_token"]})
        return dry, first, other, spent, done, replay

    dry, first, other, spent, done, replay = run(build_server(lp), calls)
    assert dry.structured_content["status"] == "preview" and dry.structured_content["confirm_token"] is None
    assert first.structured_content["status"] == "confirm" and [t["turn"] for t in first.structured_content["turns"]] == [7]
    assert SECRET in first.structured_content["turns"][0]["text"] and "Show the user" in first.structured_content["message"]
    assert other.is_error and "issued for another call" in other.content[0].text
    assert spent.is_error and "already used" in spent.content[0].text
    assert done.structured_content["status"] == "forgotten" and done.structured_content["erased"]
    assert replay.is_error and "already used" in replay.content[0].text
    assert lp.store.turns("c")[7].text == ""
    assert leaks(lp.store.path, SECRET) == []  # the CLI's erase check: no file of the store holds it


def test_a_token_does_not_erase_what_its_preview_did_not_show(fake_pager):
    lp = store_with_memories(fake_pager)

    async def calls(client):
        args = {"conversation": "c", "match": "locker"}
        first = await client.call_tool("forget", args)
        await client.call_tool("remember", {"conversation": "c", "text": "The locker is number 12."})
        changed = await client.call_tool("forget", {**args, "confirm": first.structured_content["confirm_token"]})
        return first, changed

    first, changed = run(build_server(lp), calls)
    assert [t["turn"] for t in first.structured_content["turns"]] == [7]
    assert changed.structured_content["status"] == "changed" and changed.structured_content["confirm_token"]
    assert [t["turn"] for t in changed.structured_content["turns"]] == [7, 30]
    assert SECRET in lp.store.turns("c")[7].text  # nothing erased


def test_tokens_expire_and_are_bound_to_their_call_and_preview(fake_pager):
    lp = store_with_memories(fake_pager)
    lp.conversation("d", create=True).add_turn("user", "another conversation")
    now = [1e9]
    tokens = Confirmations(lp.store, ttl=300, clock=lambda: now[0])
    shown = [[3], ["Turn 3 is about topic0"]]
    token = tokens.issue("forget", "c", {"match": "x", "turn": None}, shown)
    assert tokens.redeem(token, "forget", "c", {"match": "x"}, shown) is True
    with pytest.raises(ValueError, match="already used"):
        tokens.redeem(token, "forget", "c", {"match": "x"}, shown)
    changed = tokens.issue("forget", "c", {"turn": 3}, shown)
    assert tokens.redeem(changed, "forget", "c", {"turn": 3}, [[3], ["Turn 3 is about topic1"]]) is False
    late = tokens.issue("forget", "c", {"turn": 3}, shown)
    now[0] += 301
    with pytest.raises(ValueError, match="expired"):
        tokens.redeem(late, "forget", "c", {"turn": 3}, shown)
    for conversation, arguments in (("d", {"turn": 3}), ("c", {"turn": 4}), ("c", {"match": "3"})):
        other = tokens.issue("forget", "c", {"turn": 3}, shown)
        with pytest.raises(ValueError, match="issued for another call"):
            tokens.redeem(other, "forget", conversation, arguments, shown)
    assert len({tokens.issue("forget", "c", {"turn": 1}, shown) for _ in range(100)}) == 100


# -- errors a model can read ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, arguments, says", [
    ("recall", {"conversation": "nope", "question": "x"}, "no conversation 'nope'"),
    ("recall", {"conversation": "c"}, "question"),
    ("recall", {"conversation": "c", "question": "x", "max_turns": 0}, "greater than or equal to 1"),
    ("recall", {"conversation": "c", "question": "   "}, "recall needs a question"),
    ("search", {"conversation": "c", "query": "x", "limit": "many"}, "limit"),
    ("remember", {"conversation": "c", "text": "x", "role": "system"}, "role"),
    ("remember", {"conversation": "c", "text": "bad \x00 byte"}, "turn text"),
    ("forget", {"conversation": "c"}, "exactly one of match, turn or page"),
    ("forget", {"conversation": "c", "turn": 3, "page": 1}, "exactly one of match, turn or page"),
    ("forget", {"conversation": "c", "turn": 999}, "no turn 999"),
    ("forget", {"conversation": "c", "turn": 3, "dry_run": True, "confirm": "abc"}, "dry_run only lists"),
    ("forget", {"conversation": "c", "turn": 3, "confirm": "made-up"}, "unknown or already used"),
    ("correct", {"conversation": "c", "turn": -1, "text": "x"}, "greater than or equal to 0"),
    ("correct", {"conversation": "c", "turn": 500, "text": "x"}, "no turn 500"),
    ("nosuchtool", {}, "nosuchtool"),
])
def test_bad_arguments_are_tool_errors_that_say_what_is_wrong(fake_pager, name, arguments, says):
    lp = store_with_memories(fake_pager)
    before = lp.store.turns("c")

    async def calls(client):
        result = await client.call_tool(name, arguments)
        alive = await client.call_tool("conversations", {})  # the server is still there
        return result, alive

    result, alive = run(build_server(lp), calls)
    assert result.is_error and says in result.content[0].text, result.content[0].text
    assert not alive.is_error
    assert lp.store.turns("c") == before


def test_a_pinned_server_serves_its_conversation_only(fake_pager):
    lp = store_with_memories(fake_pager)
    lp.conversation("other", create=True).add_turn("user", "Elsewhere.")

    async def calls(client):
        listed = await client.call_tool("conversations", {})
        recall = await client.call_tool("recall", {"question": f"my {SECRET}?", "conversation": "other"})
        resources = [r.uri for r in (await client.list_resources()).resources]
        try:
            await client.read_resource("localpager://conversations/other/bookmarks")
            read_other = None
        except Exception as exc:  # noqa: BLE001 - the SDK's protocol error
            read_other = str(exc)
        return listed, recall, resources, read_other

    listed, recall, resources, read_other = run(build_server(lp, conversation="c"), calls)
    assert [c["id"] for c in listed.structured_content["conversations"]] == ["c"]
    assert recall.structured_content["conversation"] == "c"  # no such argument: it cannot name another
    assert all("/c/" in uri for uri in resources)
    assert "serves conversation 'c' only" in read_other


# -- the extra ------------------------------------------------------------------------------------------
def test_without_the_extra_the_command_says_which_to_install(monkeypatch, tmp_path):
    for name in [m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types")] + ["mcp"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed
    for name in [m for m in sys.modules if m.split(".")[:3] == ["localpager", "serving", "mcp"]]:
        monkeypatch.delitem(sys.modules, name)  # the package and its rooms: imported again as if for the first time
    result = CliRunner().invoke(cli, ["mcp", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 1
    assert result.output.strip() == "Error: localpager mcp needs the mcp extra: pip install 'localpager[mcp]'"


# -- the stdout check of tests/model/test_mcp_stdio.py fires --------------------------------------------
NOISY_SERVER = """
print("a stray line on stdout", flush=True)  # before the transport takes fd 1 over
from mcp.server.mcpserver import MCPServer
server = MCPServer("noisy")

@server.tool()
def ping() -> str:
    return "pong"

server.run("stdio")
"""


def test_the_clients_stdout_check_sees_a_stray_line(tmp_path):
    """The official client hands a stdout line that is no protocol message to ``message_handler`` as an
    exception: what the stdio tests count (they expect none from ``localpager mcp``)."""
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    stray: list[Exception] = []

    async def on_message(message):
        if isinstance(message, Exception):
            stray.append(message)

    async def main():
        params = StdioServerParameters(command=sys.executable, args=["-c", NOISY_SERVER])
        with (tmp_path / "stderr.log").open("w") as err:
            async with Client(stdio_client(params, errlog=err), message_handler=on_message, mode="legacy") as client:
                return await client.call_tool("ping", {})

    result = asyncio.run(main())
    assert result.structured_content == {"result": "pong"}
    assert len(stray) == 1
