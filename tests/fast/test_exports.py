"""Issue 41, "bring your history": ChatGPT and Claude exports and plain message lists ingested into a user's memory,
on the fakes. The fixtures under tests/fixtures/exports/ are written by hand from the formats' documentation (and
the variants here built in code); none holds anyone's real data."""

from __future__ import annotations

import copy
import json
import shutil
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest
from helpers import run_cli_here

from localpager.core.dates import parse_time, resolve
from localpager.memory.history import profile_id
from localpager.store.exports import ExportFormat, find_export

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "exports"
CHATGPT = FIXTURES / "chatgpt_conversations.json"
CLAUDE = FIXTURES / "claude_conversations.json"
CAT = "chatgpt-6f1c2a10-0000-4000-8000-000000000001"
PORTO = "chatgpt-6f1c2a10-0000-4000-8000-000000000002"
MARATHON = "claude-0a7e5c3e-0000-4000-8000-00000000000a"
GIFTS = "claude-0a7e5c3e-0000-4000-8000-00000000000b"
# text of every message the import must leave out of the ChatGPT fixture
LEFT_OUT = ("ABANDONED", "HIDDEN-SYSTEM", "TOOL-CALL", "TOOL-OUTPUT", "BROWSING-RESULT", "IMAGEPOINTER",
            "INSTRUCTIONS-NOT-A-FACT")


def texts(lp, conv_id):
    return [(t.role, t.text) for t in lp.store.turns(conv_id)]


def store_bytes(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*") if p.is_file())


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


# --- building exports in code -----------------------------------------------------------------------------------


def chatgpt_conversation(conv_id: str, messages: list[tuple[str, str]], start: float = 1709467200.0,
                         title: str = "A chat") -> dict:
    """A ChatGPT conversation whose visible path is ``messages`` ((role, text) each, a minute apart)."""
    mapping = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
    parent = "root"
    for i, (role, text) in enumerate(messages):
        node = f"{conv_id}-m{i}"
        mapping[node] = {"id": node, "parent": parent, "children": [],
                         "message": {"id": node, "author": {"role": role}, "create_time": start + 60 * (i + 1),
                                     "content": {"content_type": "text", "parts": [text]}, "metadata": {},
                                     "recipient": "all"}}
        mapping[parent]["children"].append(node)
        parent = node
    return {"title": title, "create_time": start, "update_time": start, "mapping": mapping, "current_node": parent,
            "conversation_id": conv_id, "id": conv_id}


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def chat(n: int, prefix: str = "msg") -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", f"{prefix} {i}: the number is {i * 7}.") for i in range(n)]


# --- ChatGPT ----------------------------------------------------------------------------------------------------


@pytest.fixture
def imported(fake_pager, tmp_path):
    path = tmp_path / "s.db"
    lp = fake_pager(path=path)
    report = lp.ingest(CHATGPT, user="alice")
    return lp, report, path


def test_chatgpt_keeps_the_path_to_current_node_and_only_user_and_assistant_text(imported):
    lp, report, path = imported
    assert texts(lp, CAT) == [
        ("user", "Yesterday I adopted a cat named Biscuit."),
        ("assistant", "Congratulations on adopting Biscuit!"),
        ("user", "Here is a photo of Biscuit on the sofa."),  # the text part of a multimodal message
        ("assistant", "What a lovely tabby."),
    ]
    assert texts(lp, PORTO) == [("user", "My sister Amara lives in Porto. What should we see?"),
                                ("assistant", "Walk along the Ribeira and ride the tram to Foz.")]
    lp.close()
    data = store_bytes(path)
    assert b"Biscuit" in data
    for left_out in LEFT_OUT:  # abandoned branches, hidden, tool, browsing, image pointers: in no byte
        assert left_out.encode() not in data, left_out


def test_every_conversation_is_the_users_with_its_title_and_stable_id(imported):
    lp, report, _ = imported
    assert set(report.ids) == {CAT, PORTO, profile_id("alice")}
    assert {c.id for c in lp.user("alice").conversations()} == {CAT, PORTO, profile_id("alice")}
    record = lp.store.conversation_record(CAT)
    assert record["user"] == "alice"
    assert record["meta"]["title"] == "Adopting a cat"
    assert record["meta"]["export_id"] == "6f1c2a10-0000-4000-8000-000000000001"


def test_turn_times_are_the_messages_so_yesterday_is_the_day_before_the_chat(imported):
    lp, _, _ = imported
    first = lp.store.turns(CAT)[0]
    assert parse_time(first.time) == utc(2024, 3, 3, 12, 1)
    assert [d.label for d in resolve(first.text, first.time)] == ["2 March 2024"]
    assert parse_time(lp.store.turns(PORTO)[1].time) == utc(2024, 3, 4, 12, 0, 30)


def test_custom_instructions_are_the_users_own_statements(imported):
    lp, _, _ = imported
    assert texts(lp, profile_id("alice")) == [("user", "I work as a night nurse in Leipzig.")]
    assert any("Leipzig" in f.text for f in lp.user("alice").facts())
    assert lp.store.conversation_record(profile_id("alice"))["user"] == "alice"


def test_a_bad_conversation_is_left_out_with_a_warning_naming_it(imported):
    _, report, _ = imported
    [warning] = report.warnings
    assert "'Broken one'" in warning and "current_node" in warning
    assert report.conversations == 3


def test_importing_the_same_file_again_adds_nothing(imported):
    lp, first, _ = imported
    again = lp.ingest(CHATGPT, user="alice")
    assert again.turns == 0 and again.conversations == 0 and again.unchanged == 3
    assert len(lp.store.turns(CAT)) == 4


def test_a_newer_export_appends_only_new_messages_and_new_conversations(fake_pager, tmp_path):
    lp = fake_pager(path=tmp_path / "s.db")
    old = [chatgpt_conversation("a", chat(4, "a")), chatgpt_conversation("b", chat(2, "b"))]
    lp.ingest(write_json(tmp_path / "old.json", old), user="alice")
    pages_before = lp.store.pages("chatgpt-a")
    newer = [chatgpt_conversation("a", chat(7, "a")), chatgpt_conversation("b", chat(2, "b")),
             chatgpt_conversation("c", chat(3, "c"), start=1709900000.0)]
    report = lp.ingest(write_json(tmp_path / "new.json", newer), user="alice")
    assert report.turns == 3 + 3 and report.continued == ["chatgpt-a"] and report.unchanged == 1
    assert report.conversations == 1 and "chatgpt-c" in report.ids
    assert texts(lp, "chatgpt-a") == [(r, t) for r, t in chat(7, "a")]
    assert lp.store.turns("chatgpt-a")[6].time is not None
    after = lp.store.pages("chatgpt-a")
    assert [(p.first_turn, p.last_turn) for p in after[:len(pages_before) - 1]] == \
        [(p.first_turn, p.last_turn) for p in pages_before[:-1]]  # appended, not paged again
    assert lp.store.conversation_user("chatgpt-c") == "alice"


def test_a_conversation_edited_since_the_import_is_kept_as_stored_with_a_warning(fake_pager, tmp_path):
    lp = fake_pager(path=tmp_path / "s.db")
    lp.ingest(write_json(tmp_path / "old.json", [chatgpt_conversation("a", chat(4, "a"))]))
    edited = chat(6, "a")
    edited[2] = ("user", "an edited question")
    report = lp.ingest(write_json(tmp_path / "new.json", [chatgpt_conversation("a", edited)]))
    assert report.turns == 0 and "differs from the stored one at turn 2" in report.warnings[0]
    assert texts(lp, "chatgpt-a") == chat(4, "a")


def test_changed_custom_instructions_add_the_newer_version(fake_pager, tmp_path):
    lp = fake_pager(path=tmp_path / "s.db")
    data = json.loads(CHATGPT.read_text())
    lp.ingest(write_json(tmp_path / "old.json", data), user="alice")
    newer = copy.deepcopy(data)
    later = chatgpt_conversation("later", chat(2), start=1710000000.0)
    ctx = copy.deepcopy(data[0]["mapping"]["ctx"])
    ctx["message"]["content"]["user_profile"] = "```I work as a day nurse in Dresden now.```"
    later["mapping"]["ctx"] = {**ctx, "parent": "root", "children": ["later-m0"]}
    later["mapping"]["root"]["children"] = ["ctx"]
    later["mapping"]["later-m0"]["parent"] = "ctx"
    newer.append(later)
    report = lp.ingest(write_json(tmp_path / "new.json", newer), user="alice")
    assert profile_id("alice") in report.continued
    assert [t for _, t in texts(lp, profile_id("alice"))] == ["I work as a night nurse in Leipzig.",
                                                               "I work as a day nurse in Dresden now."]
    assert lp.ingest(write_json(tmp_path / "new.json", newer), user="alice").turns == 0


# --- Claude -----------------------------------------------------------------------------------------------------


def test_claude_text_and_content_blocks(fake_pager, tmp_path):
    path = tmp_path / "s.db"
    lp = fake_pager(path=path)
    report = lp.ingest(CLAUDE, user="bob")
    assert report.ids == [MARATHON, GIFTS] and report.turns == 4
    assert texts(lp, MARATHON) == [("user", "Yesterday I ran 18 km along the Elbe."),
                                   ("assistant", "That is a strong long run.\n\nKeep the pace easy next week.")]
    assert texts(lp, GIFTS)[0] == ("user", "My brother Tomasz turns 40 in June.")
    first = lp.store.turns(MARATHON)[0]
    assert parse_time(first.time) == utc(2024, 3, 3, 9, 0, 10)
    assert [d.label for d in resolve(first.text, first.time)] == ["2 March 2024"]
    assert lp.store.conversation_record(GIFTS)["meta"]["title"] == "Gift ideas"
    assert lp.store.conversation_user(GIFTS) == "bob"
    lp.close()
    data = store_bytes(path)
    assert b"THINKING-BLOCK" not in data and b"TOOL-RESULT" not in data


def test_claude_branches_follow_the_parent_links_to_the_last_message(fake_pager, tmp_path):
    root = "00000000-0000-4000-8000-000000000000"
    messages = [
        {"uuid": "1", "parent_message_uuid": root, "sender": "human", "text": "First question."},
        {"uuid": "2", "parent_message_uuid": "1", "sender": "assistant", "text": "ABANDONED answer."},
        {"uuid": "3", "parent_message_uuid": "1", "sender": "assistant", "text": "Kept answer."},
        {"uuid": "4", "parent_message_uuid": "3", "sender": "human", "text": "Thanks."},
    ]
    conv = {"uuid": "u-1", "name": "Branches", "created_at": "2024-03-03T10:00:00Z", "chat_messages": messages}
    lp = fake_pager(path=tmp_path / "s.db")
    lp.ingest(write_json(tmp_path / "conversations.json", [conv]))
    assert [t for _, t in texts(lp, "claude-u-1")] == ["First question.", "Kept answer.", "Thanks."]


# --- message lists ----------------------------------------------------------------------------------------------


def test_a_json_message_list_is_one_conversation_named_after_the_file(fake_pager, tmp_path):
    lp = fake_pager(path=tmp_path / "s.db")
    report = lp.ingest(FIXTURES / "messages.json", user="carol")
    assert report.ids == ["messages"]
    assert texts(lp, "messages") == [("user", "I keep my spare key with the neighbour at number 12."),
                                     ("assistant", "Good to know: the neighbour at number 12."),
                                     ("user", "This is the key ring.")]


def test_two_folders_message_lists_of_one_name_are_two_conversations(fake_pager, tmp_path):
    """A message list with no id of its own is named after its file: another folder's file of the same name is
    another conversation (it was kept out as "edited" before), and each import continues its own."""
    lp = fake_pager(path=tmp_path / "s.db")
    flat = [{"role": "user", "content": "I live in Utrecht."}, {"role": "assistant", "content": "Nice."}]
    dog = [{"role": "user", "content": "My dog is called Rex."}, {"role": "assistant", "content": "Cute."}]
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    lp.ingest(write_json(tmp_path / "a" / "messages.json", flat))
    report = lp.ingest(write_json(tmp_path / "b" / "messages.json", dog))
    assert report.ids == ["messages-2"] and "came from another file: stored as 'messages-2'" in report.warnings[0]
    assert texts(lp, "messages")[0] == ("user", "I live in Utrecht.")
    assert texts(lp, "messages-2")[0] == ("user", "My dog is called Rex.")
    again = lp.ingest(write_json(tmp_path / "b" / "messages.json", dog + [{"role": "user", "content": "He is 3."}]))
    assert again.continued == ["messages-2"] and again.turns == 1 and again.warnings == []
    assert lp.ingest(tmp_path / "a" / "messages.json").turns == 0 and len(lp.conversations()) == 2
    flat[0]["content"] = "I live in Lyon now."  # the same file, edited since: kept as stored, as before
    edited = lp.ingest(write_json(tmp_path / "a" / "messages.json", flat))
    assert "differs from the stored one at turn 0" in edited.warnings[0] and len(lp.conversations()) == 2


def test_jsonl_message_lists_one_conversation_a_line(fake_pager, tmp_path):
    lp = fake_pager(path=tmp_path / "s.db")
    report = lp.ingest(FIXTURES / "messages.jsonl")
    assert report.ids == ["messages", "dentist-chat"]
    assert lp.store.conversation_record("messages")["meta"]["title"] == "Bikes"
    assert texts(lp, "dentist-chat")[0] == ("user", "My dentist appointment is on Thursday.")


def test_jsonl_of_single_messages_and_a_messages_object(fake_pager, tmp_path):
    lines = [{"role": "user", "content": "I drink my coffee black.", "created_at": 1709467200},
             {"role": "assistant", "content": "Black it is."}]
    loose = tmp_path / "coffee.jsonl"
    loose.write_text("".join(json.dumps(m) + "\n" for m in lines))
    wrapped = write_json(tmp_path / "tea.json", {"messages": lines, "id": "tea-chat"})
    lp = fake_pager(path=tmp_path / "s.db")
    assert lp.ingest(loose).ids == ["coffee"]
    assert [t.time is not None for t in lp.store.turns("coffee")] == [True, True]  # a message without a time: the last
    assert lp.ingest(wrapped).ids == ["tea-chat"]
    grown = tmp_path / "coffee.jsonl"
    grown.write_text(loose.read_text() + json.dumps({"role": "user", "content": "And no sugar."}) + "\n")
    assert lp.ingest(grown).turns == 1  # the same file, grown: only the new message


# --- zip and folder ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("source", [CHATGPT, CLAUDE])
def test_the_zip_as_downloaded_and_the_unzipped_folder(fake_pager, tmp_path, source):
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(source, "conversations.json")
        z.writestr("user.json", json.dumps({"id": "user-x"}))
        z.writestr("chat.html", "<html></html>")
    folder = tmp_path / "unzipped"
    folder.mkdir()
    shutil.copy(source, folder / "conversations.json")
    (folder / "user.json").write_text("{}")
    kind = ExportFormat.CHATGPT if source == CHATGPT else ExportFormat.CLAUDE
    assert find_export(archive).format == kind and find_export(folder).format == kind
    direct = fake_pager(path=tmp_path / "a.db").ingest(source)
    zipped = fake_pager(path=tmp_path / "b.db")
    from_zip = zipped.ingest(archive)
    assert from_zip.ids == direct.ids and from_zip.turns == direct.turns
    assert zipped.ingest(folder).turns == 0  # the same conversations: nothing new
    assert fake_pager(path=tmp_path / "c.db").ingest(folder).ids == direct.ids


def test_files_localpager_reads_itself_are_not_exports(tmp_path):
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "hi"}]}) + "\n")
    locomo = write_json(tmp_path / "locomo.json", [{"qa": [], "conversation": {}, "sample_id": "x"}])
    assert find_export(jsonl) is None and find_export(locomo) is None


# --- bad input, through the command line ------------------------------------------------------------------------


def conversations_in(store: Path) -> list:
    return json.loads(run_cli_here("conversations", "--json", store=store).stdout)


@pytest.mark.parametrize("cut", [0.3, 0.97])
def test_a_truncated_export_is_one_line_exit_1_and_nothing_stored(fake_models, tmp_path, cut):
    data = CHATGPT.read_bytes()
    bad, store = tmp_path / "conversations.json", tmp_path / "s.db"
    bad.write_bytes(data[:int(len(data) * cut)])
    proc = run_cli_here("--user", "alice", "ingest", bad, store=store, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert str(bad) in proc.stderr and "truncated" in proc.stderr and "ChatGPT export" in proc.stderr
    assert not store.exists() or conversations_in(store) == []


@pytest.mark.parametrize("name,content,says", [
    ("export.zip", b"PK\x03\x04 not really a zip", "not a readable zip"),
    ("picture.json", b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
    ("notes.json", b"Dear diary, not JSON at all", "or a ChatGPT or Claude export"),
    ("other.json", b'[{"name": "a shopping list", "items": ["milk"]}]',
     "is a JSON list of something else (its first item is an object with 'name', 'items'): expected a ChatGPT or "
     "Claude export (conversations.json, its .zip or folder), a message list"),
    ("numbers.json", b'[1, 2, 3]', "its first item is a JSON int): expected a ChatGPT or Claude export"),
])
def test_a_foreign_file_is_one_line_exit_1_and_nothing_stored(fake_models, tmp_path, name, content, says):
    bad, store = tmp_path / name, tmp_path / "s.db"
    bad.write_bytes(content)
    proc = run_cli_here("ingest", bad, store=store, check=False)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert name in proc.stderr and says in proc.stderr and "Traceback" not in proc.stderr
    assert not store.exists() or conversations_in(store) == []


def test_a_zip_or_folder_without_an_export(fake_models, tmp_path):
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.txt", "hello")
    (tmp_path / "empty").mkdir()
    for bad in (archive, tmp_path / "empty"):
        proc = run_cli_here("ingest", bad, store=tmp_path / "s.db", check=False)
        assert proc.returncode == 1 and "conversations.json" in proc.stderr and str(bad) in proc.stderr


def test_an_export_of_only_bad_conversations_is_an_error(fake_pager, tmp_path):
    from localpager.store.loaders import ConversationFileError

    bad = write_json(tmp_path / "conversations.json", [{"title": "x", "mapping": {}, "current_node": "n"}])
    lp = fake_pager(path=tmp_path / "s.db")
    with pytest.raises(ConversationFileError, match="no conversation with user or assistant text"):
        lp.ingest(bad)
    assert lp.store.list_conversations() == []


def test_the_command_line_imports_says_what_is_new_and_a_bar_is_offered(fake_models, tmp_path):
    store = tmp_path / "s.db"
    first = run_cli_here("--user", "alice", "ingest", CHATGPT, store=store)
    assert "stored 3 conversations, 7 turns" in first.stdout
    assert "'Broken one'" in first.stderr and first.stderr.startswith("warning:")
    again = run_cli_here("--user", "alice", "ingest", CHATGPT, store=store)
    assert "stored 0 conversations, 0 turns" in again.stdout and "3 unchanged" in again.stdout
    assert {c["user"] for c in conversations_in(store)} == {"alice"}


# --- forgetting what was imported -------------------------------------------------------------------------------


def test_forget_imported_erases_every_imported_conversation_of_the_user_with_one_rewrite(fake_pager, tmp_path):
    path = tmp_path / "s.db"
    lp = fake_pager(path=path)
    lp.ingest(CHATGPT, user="alice")
    lp.conversation("alice-own", create=True, user="alice").add_turn("user", "My own note: the quince jam recipe.")
    lp.ingest(CLAUDE, user="bob")
    imported = {CAT, PORTO, profile_id("alice")}
    assert {c.id for c in lp.user("alice").imported()} == imported

    preview = lp.user("alice").forget(imported=True, dry_run=True)
    assert {r.conversation for r in preview.reports} == imported and preview.turns == 7
    assert {c.id for c in lp.user("alice").conversations()} == imported | {"alice-own"}  # a dry run changes nothing

    erases = []
    real_erase = lp.store.erase
    lp.store.erase = lambda: erases.append(1) or real_erase()
    report = lp.user("alice").forget(imported=True)
    assert len(erases) == 1  # the files are rewritten once, not once a conversation
    assert {r.conversation for r in report.reports} == imported and not report.rewrite_pending
    assert [c.id for c in lp.user("alice").conversations()] == ["alice-own"]
    assert {c.id for c in lp.user("bob").conversations()} == {MARATHON, GIFTS}  # another user's stay
    assert lp.user("alice").facts() and all("Leipzig" not in f.text for f in lp.user("alice").facts())
    lp.close()
    data = store_bytes(path)
    for gone in (b"Biscuit", b"Amara", b"Ribeira", b"night nurse in Leipzig"):  # the imported text: in no byte
        assert gone not in data, gone
    assert b"quince jam" in data and b"Tomasz" in data


def test_forget_imported_on_the_command_line(fake_models, tmp_path):
    store = tmp_path / "s.db"
    run_cli_here("--user", "alice", "ingest", CHATGPT, store=store)
    dry = run_cli_here("--user", "alice", "forget", "--imported", "--dry-run", store=store)
    assert "would forget 7 turns in 3 conversations of user alice" in dry.stdout and CAT in dry.stdout
    done = run_cli_here("--user", "alice", "forget", "--imported", "--yes", "--json", store=store)
    assert {c["conversation"] for c in json.loads(done.stdout)["conversations"]} == {CAT, PORTO, profile_id("alice")}
    assert conversations_in(store) == []
    for args in (("forget", "--imported"), ("--user", "alice", "forget", CAT, "--imported"),
                 ("--user", "alice", "forget", "--imported", "--match", "x")):
        proc = run_cli_here(*args, store=store, check=False)
        assert proc.returncode == 2 and "--imported" in proc.stderr
