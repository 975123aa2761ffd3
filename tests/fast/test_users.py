"""Users (issue 40): a conversation may belong to a user, in the store (migration 10, both engines), the library
(``LocalPager.conversation(..., user=)``, ``LocalPager.user``), the interchange format and the command line; one
user's memory never shows in another's, or in a conversation of nobody's. The fakes for the models."""

from __future__ import annotations

import json
import sqlite3
import uuid

import pytest

from localpager.core.records import Page, Turn
from localpager.store.base import SCHEMA_VERSION, StoreError
from localpager.store.location import open_store
from localpager.store.sqlite import MIGRATIONS, SQLiteStore

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL


def one_turn(text: str = "I'm allergic to sesame."):
    return [Turn("user", text, 0)], [Page(1, 0, 0, token_count=8)]


# -- the store ----------------------------------------------------------------------------------------
def test_a_conversation_may_belong_to_a_user(store):
    store.create_conversation("mon", user="alice")
    store.create_conversation("tue", user="alice")
    store.create_conversation("bob-1", user="bob")
    store.create_conversation("nobody")
    assert [(c.id, c.user) for c in store.list_conversations()] == [
        ("mon", "alice"), ("tue", "alice"), ("bob-1", "bob"), ("nobody", None)]
    assert [c.id for c in store.list_conversations(user="alice")] == ["mon", "tue"]
    assert [c.id for c in store.list_conversations(user="carol")] == []
    assert store.conversation_user("bob-1") == "bob" and store.conversation_user("nobody") is None
    assert store.conversation_record("tue")["user"] == "alice"
    assert store.users() == ["alice", "bob"]
    with pytest.raises(StoreError, match="no conversation 'gone'"):
        store.conversation_user("gone")


def test_a_user_name_is_checked_as_an_id_is(store):
    for bad, why in (("", "non-empty"), ("al\nice", "control or invisible"), (" alice", "space"),
                     ("a" * 201, "at most 200")):
        with pytest.raises(StoreError, match=f"user name .*{why}") as caught:
            store.create_conversation("c", user=bad)
        assert len(str(caught.value).splitlines()) == 1
    assert not store.has_conversation("c")


def test_a_replaced_conversation_keeps_its_user_and_another_users_is_not_replaced(store):
    turns, pages = one_turn()
    store.save_conversation("c", turns, pages, user="alice")
    store.save_conversation("c", turns, pages, replace=True)  # no user given: still alice's
    assert store.conversation_user("c") == "alice"
    with pytest.raises(StoreError, match="belongs to user 'alice', not 'bob'"):
        store.save_conversation("c", turns, pages, replace=True, user="bob")
    assert store.conversation_user("c") == "alice" and [t.text for t in store.turns("c")] == [turns[0].text]


def test_migrating_a_store_copies_its_users(store, tmp_path):
    from localpager.store.migrate import migrate_store

    turns, pages = one_turn()
    store.save_conversation("a", turns, pages, user="alice")
    store.save_conversation("n", turns, pages)
    with SQLiteStore(tmp_path / "copy.db") as target:
        migrate_store(store, target)
        assert [(c.id, c.user) for c in target.list_conversations()] == [("a", "alice"), ("n", None)]


def test_an_existing_sqlite_store_migrates_with_every_conversation_userless(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for migration in MIGRATIONS[:9]:  # the store as localpager left it before users
        conn.executescript(migration)
    conn.execute("PRAGMA user_version = 9")
    conn.execute("INSERT INTO conversations (id, created_at) VALUES ('old-1', 1), ('old-2', 2)")
    conn.commit()
    conn.close()
    with SQLiteStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION == 12
        assert [(c.id, c.user) for c in s.list_conversations()] == [("old-1", None), ("old-2", None)]
        assert s.users() == [] and s.list_conversations(user="alice") == []
        names = [r[1] for r in s._query("PRAGMA index_list(conversations)")]
        assert "conversations_user" in names


@pytest.mark.postgres
def test_an_existing_postgres_store_migrates_with_every_conversation_userless(postgres_cluster):
    import psycopg

    from localpager.store.postgres import PG_MIGRATIONS

    name = f"u_{uuid.uuid4().hex[:16]}"
    postgres_cluster.sql(f"CREATE DATABASE {name}")
    try:
        with psycopg.connect(postgres_cluster.url(name), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA localpager")
            conn.execute("SET search_path TO localpager")
            conn.execute("CREATE TABLE localpager_schema (version INTEGER NOT NULL)")
            for migration in PG_MIGRATIONS[:9]:
                conn.execute(migration)
            conn.execute("INSERT INTO localpager_schema (version) VALUES (9)")
            conn.execute("INSERT INTO conversations (id, created_at) VALUES ('old-1', 1), ('old-2', 2)")
        with open_store(postgres_cluster.url(name)) as s:
            assert s.schema_version == SCHEMA_VERSION
            assert [(c.id, c.user) for c in s.list_conversations()] == [("old-1", None), ("old-2", None)]
        stats = postgres_cluster.sql(
            "SELECT attstattarget FROM pg_attribute WHERE attrelid = 'localpager.conversations'::regclass"
            " AND attname = 'user_name'", name)
        assert stats == [(0,)]  # a person's name keeps no planner statistics
    finally:
        postgres_cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")


# -- the library --------------------------------------------------------------------------------------
UTRECHT, LYON = "I live in Utrecht with my partner.", "We live in Lyon now."
SESAME, BUDGET_OLD, BUDGET_NEW = ("I'm allergic to sesame.", "My budget for the laptop is $1,200.",
                                  "Actually my budget for the laptop changed to $1,500.")


def say(conv, *texts, time=None):
    for text in texts:
        conv.add_turn("user", text, time)
        conv.add_turn("assistant", "Noted.", time)


@pytest.fixture
def lp(fake_pager):
    return fake_pager()


def test_a_conversation_is_created_under_a_user_and_opens_only_as_theirs(lp):
    mon = lp.conversation("mon", create=True, user="alice")
    assert mon.user == "alice" and lp.conversation("mon").user == "alice"  # no user: opens as today
    assert lp.conversation("mon", user="alice").id == "mon"
    with pytest.raises(StoreError, match="conversation 'mon' .* belongs to user 'alice', not to user 'bob'") as e:
        lp.conversation("mon", user="bob")
    assert len(str(e.value).splitlines()) == 1
    with pytest.raises(StoreError, match="conversation 'mon' .* belongs to user 'alice', not to user 'bob'"):
        lp.conversation("mon", create=True, user="bob")
    free = lp.conversation("free", create=True)
    assert free.user is None
    with pytest.raises(StoreError, match="conversation 'free' .* belongs to no user, not to user 'alice'"):
        lp.conversation("free", user="alice")
    with pytest.raises(StoreError, match="no conversation 'nope'"):
        lp.conversation("nope", user="alice")
    with pytest.raises(ValueError, match="user name 'a\\\\tb' holds the control"):
        lp.conversation("x", create=True, user="a\tb")
    assert not lp.store.has_conversation("x")
    assert [(c.id, c.user) for c in lp.conversations()] == [("mon", "alice"), ("free", None)]
    assert [c.id for c in lp.conversations("alice")] == ["mon"]


def test_a_missing_user_is_one_line_that_names_the_close_ones(lp):
    from localpager.store.base import UserNotFound

    lp.conversation("mon", create=True, user="alice")
    with pytest.raises(UserNotFound, match="no user 'Alice' in .*no conversation belongs to them; did you mean 'alice'"):
        lp.user("Alice")
    assert [c.id for c in lp.user("alice").conversations()] == ["mon"]


def test_the_newest_value_wins_across_conversations_and_each_fact_names_its_conversation(lp):
    mon = lp.conversation("mon", create=True, user="alice")
    say(mon, UTRECHT, SESAME, BUDGET_OLD)
    tue = lp.conversation("tue", create=True, user="alice")
    say(tue, LYON, BUDGET_NEW)
    alice = lp.user("alice")
    current = {(f.conv_id, f.text) for f in alice.facts()}
    assert current == {("mon", SESAME), ("tue", LYON), ("tue", BUDGET_NEW)}
    # each conversation alone still has its own newest value
    assert UTRECHT in [f.text for f in mon.facts()] and BUDGET_OLD in [f.text for f in mon.facts()]
    every = alice.facts(all=True)
    assert [f.text for f in every] == [UTRECHT, SESAME, BUDGET_OLD, LYON, BUDGET_NEW]  # in the order said
    utrecht = next(f for f in every if f.text == UTRECHT)
    lyon = next(f for f in every if f.text == LYON)
    assert not utrecht.current and utrecht.superseded_by == lyon.fact_id
    assert alice.replacements()[("mon", utrecht.fact_id)] == ("tue", lyon.fact_id)
    lines = alice.fact_lines(all=True)
    assert lines[0].startswith(f"mon  #{utrecht.fact_id}  turn 0") and f"(replaced by tue #{lyon.fact_id})" in lines[0]
    assert alice.facts()[0].to_dict()["conv_id"] == "mon"
    assert "conv_id" not in mon.facts()[0].to_dict()  # one conversation's listing reads as it did


def test_the_order_is_the_time_said_not_the_order_stored(lp):
    """A conversation stored later whose turns were said earlier (an import of last week's chat) does not
    replace what was said since."""
    today = lp.conversation("today", create=True, user="alice")
    say(today, LYON, time="2026-03-10T09:00:00+01:00")
    old = lp.conversation("last-week", create=True, user="alice")
    say(old, UTRECHT, time="2026-03-03T09:00:00+01:00")
    assert {f.text for f in lp.user("alice").facts()} == {LYON}
    assert [f.conv_id for f in lp.user("alice").facts(all=True)] == ["last-week", "today"]


def test_a_users_facts_never_show_in_another_users_or_a_userless_listing(lp):
    say(lp.conversation("a1", create=True, user="alice"), SESAME)
    say(lp.conversation("b1", create=True, user="bob"), UTRECHT)
    say(lp.conversation("n1", create=True), BUDGET_OLD)
    assert [f.text for f in lp.user("alice").facts(all=True)] == [SESAME]
    assert [f.text for f in lp.user("bob").facts(all=True)] == [UTRECHT]
    assert [f.text for f in lp.conversation("n1").facts(all=True)] == [BUDGET_OLD]
    assert {h.conversation for h in lp.user("bob").search("sesame allergic")} <= {"b1"}


def test_search_merges_their_conversations_each_hit_naming_its_own(lp):
    say(lp.conversation("mon", create=True, user="alice"), "My sister Ines lives in Porto.", "I like tea.")
    say(lp.conversation("tue", create=True, user="alice"), "Ines is visiting in June.", "The cat is asleep.")
    say(lp.conversation("bob", create=True, user="bob"), "Ines is my neighbour.")
    hits = lp.user("alice").search("Ines", limit=10)
    assert {h.conversation for h in hits if "Ines" in h.text} == {"mon", "tue"}
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.line().startswith(f"{h.score:.3f}  {h.conversation}  p") for h in hits)
    assert len(lp.user("alice").search("Ines", limit=1)) == 1
    with pytest.raises(ValueError, match="search needs some words"):
        lp.user("alice").search("  ")


def test_forget_at_a_users_scope_reaches_every_one_of_theirs_and_no_one_elses(lp):
    from localpager.retrieval.choices import Signal  # noqa: F401 - the index is built by search below

    secret = "Quillonfrazzle"
    for conv_id, user in (("mon", "alice"), ("tue", "alice"), ("bob-1", "bob"), ("free", None)):
        say(lp.conversation(conv_id, create=True, user=user), f"My code word is {secret}.", "I like tea.")
    alice = lp.user("alice")
    assert {h.conversation for h in alice.search(secret) if secret in h.text} == {"mon", "tue"}
    dry = alice.forget(match=secret.lower(), dry_run=True)
    assert dry.dry_run and dry.turns == 2 and [r.conversation for r in dry.reports] == ["mon", "tue"]
    assert all(secret in t.text for c in ("mon", "tue") for t in lp.conversation(c).turns[:1])  # nothing changed
    report = alice.forget(match=secret.lower())
    assert report.turns == 2 and not report.rewrite_pending
    assert report.lines()[0] == "forgot 2 turns in 2 conversations of user alice"
    for conv_id in ("mon", "tue"):
        conv = lp.conversation(conv_id)
        assert all(secret not in t.text for t in conv.turns) and conv.turns[2].text == "I like tea."
        assert conv.search(secret, 3) == [] or all(secret not in h.text for h in conv.search(secret, 3))
    for conv_id in ("bob-1", "free"):  # the same words, another user's and nobody's: left alone
        assert lp.conversation(conv_id).turns[0].text == f"My code word is {secret}."
    if lp.store.kind == "sqlite":
        from faultkit import leaks

        lp.store.erase()
        assert leaks(lp.store.path, secret)  # bob's and the user-less conversation's words are still stored
    with pytest.raises(ValueError, match="exactly one of"):
        alice.forget()


def test_forget_one_conversation_or_one_fact_of_theirs(lp):
    say(lp.conversation("mon", create=True, user="alice"), SESAME, UTRECHT)
    say(lp.conversation("tue", create=True, user="alice"), BUDGET_OLD)
    say(lp.conversation("bob-1", create=True, user="bob"), SESAME)
    alice = lp.user("alice")
    with pytest.raises(StoreError, match="belongs to user 'bob', not to user 'alice'"):
        alice.forget(conversation="bob-1")
    assert lp.store.has_conversation("bob-1")
    sesame = next(f for f in alice.facts() if f.text == SESAME)
    report = alice.forget(fact=(sesame.conv_id, sesame.fact_id))
    assert report.turns == 1 and [f.text for f in alice.facts()] == [UTRECHT, BUDGET_OLD]
    assert [f.text for f in lp.conversation("bob-1").facts()] == [SESAME]
    with pytest.raises(ValueError, match="no standing fact 99"):
        alice.forget(fact=("mon", 99))
    gone = alice.forget(conversation="tue")
    assert gone.reports[0].whole and not lp.store.has_conversation("tue")
    assert [c.id for c in alice.conversations()] == ["mon"]


# -- interchange --------------------------------------------------------------------------------------
def test_export_and_import_keep_the_user(lp, fake_pager, tmp_path):
    say(lp.conversation("mon", create=True, user="alice"), SESAME)
    say(lp.conversation("free", create=True), UTRECHT)
    path = tmp_path / "all.jsonl"
    assert lp.export(path) == 2
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("user") for line in lines] == ["alice", None] and list(lines[0])[:2] == ["id", "user"]
    assert lp.user("alice").export(tmp_path / "alice.jsonl") == 1
    assert [json.loads(x)["id"] for x in (tmp_path / "alice.jsonl").read_text().splitlines()] == ["mon"]

    other = fake_pager(path=tmp_path / "other.db")
    other.import_file(path, user="carol")  # carol's: the conversation the file names no user for
    assert [(c.id, c.user) for c in other.conversations()] == [("mon", "alice"), ("free", "carol")]
    assert [f.text for f in other.user("alice").facts()] == [SESAME]
    third = fake_pager(path=tmp_path / "third.db")
    third.ingest(path)  # ingest reads the same format, users included
    assert [(c.id, c.user) for c in third.conversations()] == [("mon", "alice"), ("free", None)]
    third.ingest(path, replace=True, user="dave")  # mon's line names alice; free, nobody's, becomes dave's
    assert [(c.id, c.user) for c in third.conversations()] == [("mon", "alice"), ("free", "dave")]


def test_an_import_never_takes_another_users_conversation(lp, tmp_path):
    say(lp.conversation("c", create=True, user="alice"), SESAME)
    path = tmp_path / "c.jsonl"
    lp.export(path)
    line = json.loads(path.read_text())
    line["user"] = "bob"
    path.write_text(json.dumps(line) + "\n")
    for mode in ("replace", "merge"):
        with pytest.raises(StoreError, match="'c' .* belongs to user 'alice', not 'bob'; nothing was stored"):
            lp.import_file(path, mode=mode)
    with pytest.raises(StoreError, match="'c' .* belongs to user 'alice', not 'bob'; nothing was stored"):
        lp.ingest(path, replace=True)
    assert lp.store.conversation_user("c") == "alice"
    line.pop("user")
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(StoreError, match="belongs to user 'alice', not 'bob'"):
        lp.import_file(path, mode="replace", user="bob")
    lp.import_file(path, mode="replace")  # no user anywhere: stays alice's
    assert lp.store.conversation_user("c") == "alice"


@pytest.mark.parametrize("value, why", [(7, "must be a user name"), ("", "non-empty"), ("a\u0007b", "control")])
def test_a_bad_user_in_a_file_is_one_line_naming_the_line_and_field(lp, tmp_path, value, why):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "ok", "turns": [{"role": "user", "text": "hi"}]}) + "\n"
                    + json.dumps({"id": "c", "user": value, "turns": [{"role": "user", "text": "hi"}]}) + "\n")
    for read in (lp.ingest, lp.import_file):
        with pytest.raises(ValueError, match=f"bad.jsonl line 2: field 'user': .*{why}") as e:
            read(path)
        assert len(str(e.value).splitlines()) == 1
    assert lp.conversations() == []


# -- the command line ---------------------------------------------------------------------------------
def run(store_location, *args, input=None, env=None):
    from click.testing import CliRunner

    from localpager.cli import cli

    return CliRunner().invoke(cli, ["--store", str(store_location), *args], input=input, env=env)


@pytest.fixture
def users_store(fake_pager, store_location):
    lp = fake_pager()
    say(lp.conversation("mon", create=True, user="alice"), UTRECHT, SESAME, "My code word is Quillonfrazzle.")
    say(lp.conversation("tue", create=True, user="alice"), LYON)
    say(lp.conversation("bob-1", create=True, user="bob"), BUDGET_OLD, "My code word is Quillonfrazzle.")
    say(lp.conversation("free", create=True), "My code word is Quillonfrazzle.")
    lp.close()
    return store_location


def test_cli_facts_at_a_users_scope(users_store):
    out = run(users_store, "--user", "alice", "facts")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert [line.split("  ")[0] for line in lines] == ["mon", "mon", "tue"]
    assert SESAME in lines[0] and "Quillonfrazzle" in lines[1] and LYON in lines[2]
    assert UTRECHT not in out.output and BUDGET_OLD not in out.output  # replaced; bob's
    every = run(users_store, "facts", "--all", "--user", "alice")  # --user after the command too
    assert "(replaced by tue #1)" in every.output and UTRECHT in every.output
    as_json = json.loads(run(users_store, "--user", "alice", "facts", "--all", "--json").output)
    assert [(f["conv_id"], f.get("superseded_in")) for f in as_json] == [
        ("mon", "tue"), ("mon", None), ("mon", None), ("tue", None)]
    assert run(users_store, "facts", env={"LOCALPAGER_USER": "bob"}).output.startswith("bob-1  #1")
    assert run(users_store, "--user", "alice", "facts", "mon").output.startswith("#1")  # one of theirs, as ever


@pytest.mark.parametrize("args, message", [
    (["--user", "carol", "facts"], "Error: no user 'carol' in .*: no conversation belongs to them"),
    (["--user", "alicee", "search", "code"], "did you mean 'alice'"),
    (["--user", "bob", "facts", "mon"], "Error: conversation 'mon' in .* belongs to user 'alice', not to user 'bob'"),
    (["--user", "alice", "ask", "free", "Where do I live?"], "belongs to no user, not to user 'alice'"),
    (["--user", "bob", "forget", "mon", "--yes"], "belongs to user 'alice', not to user 'bob'"),
    (["--user", "bob", "export", "mon", "-o", "x.jsonl"], "belongs to user 'alice', not to user 'bob'"),
    (["--user", "bad\tname", "facts"], "user name 'bad\\\\tname' holds the control"),
])
def test_cli_a_missing_user_or_another_users_conversation_is_one_line(users_store, fake_models, args, message):
    import re

    out = run(users_store, *args)
    assert out.exit_code == 1 and len(out.output.strip().splitlines()) == 1, out.output
    assert re.search(message, out.output), out.output
    assert not fake_models.calls


def test_cli_without_conv_id_or_user_is_a_usage_error(users_store):
    for args in (["facts"], ["search", "code"], ["forget", "--match", "code"]):
        out = run(users_store, *args)
        assert out.exit_code == 2 and ("CONV_ID" in out.output or "QUERY" in out.output), out.output
    out = run(users_store, "--user", "alice", "forget", "--turn", "1")
    assert out.exit_code == 2 and "--match" in out.output


def test_cli_search_and_forget_at_a_users_scope(users_store, fake_pager, fake_models):
    out = run(users_store, "--user", "alice", "search", "Quillonfrazzle")
    assert out.exit_code == 0, out.output
    assert "mon  p1 turn 4" in out.output and "bob-1" not in out.output and "free" not in out.output
    dry = run(users_store, "--user", "alice", "forget", "--match", "quillonfrazzle", "--dry-run")
    assert dry.exit_code == 0 and dry.output.startswith("would forget 1 turns in 1 conversations of user alice")
    done = run(users_store, "--user", "alice", "forget", "--match", "quillonfrazzle", "--json")
    assert done.exit_code == 0 and json.loads(done.output)["turns"] == 1
    lp = fake_pager()
    assert all("Quillonfrazzle" not in t.text for c in ("mon", "tue") for t in lp.conversation(c).turns)
    assert sum("Quillonfrazzle" in t.text for c in ("bob-1", "free") for t in lp.conversation(c).turns) == 2


def test_cli_ingest_chat_export_import_with_a_user(users_store, fake_models, tmp_path, fake_pager):
    path = tmp_path / "alice.jsonl"
    assert run(users_store, "--user", "alice", "export", "-o", str(path)).output.startswith("exported 2 conversations")
    assert [json.loads(x)["user"] for x in path.read_text().splitlines()] == ["alice", "alice"]
    plain = tmp_path / "plain.jsonl"
    plain.write_text(json.dumps({"id": "wed", "turns": [{"role": "user", "text": BUDGET_NEW}]}) + "\n"
                     + json.dumps({"id": "thu", "turns": [{"role": "user", "text": "hi"}]}) + "\n")
    assert run(users_store, "--user", "alice", "ingest", str(plain)).exit_code == 0
    out = run(users_store, "--user", "carol", "chat", "fri", input="I'm vegetarian.\n/quit\n")
    assert out.exit_code == 0, out.output
    other = tmp_path / "other.db"
    assert run(other, "import", str(path), "--user", "dave").exit_code == 0  # the file names alice: hers
    lp = fake_pager()
    assert {c.id: c.user for c in lp.conversations()} == {
        "mon": "alice", "tue": "alice", "bob-1": "bob", "free": None, "wed": "alice", "thu": "alice", "fri": "carol"}
    listing = run(users_store, "--user", "alice", "conversations").output.splitlines()
    assert [line.split("\t")[0] for line in listing] == ["mon", "tue", "wed", "thu"]
    assert all(line.endswith("\tuser alice") for line in listing)
    assert run(users_store, "conversations").output.splitlines()[3].startswith("free\t")
    assert not run(users_store, "conversations").output.splitlines()[3].endswith("user alice")
    assert [c.user for c in fake_pager(path=other).conversations()] == ["alice", "alice"]


def test_cli_ask_with_a_user_and_a_new_id_is_a_new_chat_of_theirs(users_store, fake_models):
    out = run(users_store, "--user", "alice", "ask", "wed", "Where do we live now?")
    assert out.exit_code == 0, out.output
    listed = run(users_store, "conversations")
    assert any(line.startswith("wed") and "user alice" in line for line in listed.output.splitlines())
    out = run(users_store, "ask", "thu", "Where do we live now?")  # no user: an unknown id stays an error
    assert out.exit_code == 1 and "no conversation 'thu'" in out.output
