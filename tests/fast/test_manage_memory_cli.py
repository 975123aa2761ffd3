"""The user manages their memory from the command line (issue 40, item 4): ``localpager remember``, ``facts --edit``
and ``--delete`` (``CONV:N`` at a user's scope, ``--dry-run``), and in a chat ``/remember``, ``/correct N TEXT``,
``/forget fact N`` and a user's ``/facts``. The fakes for the models."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from localpager.cli import cli
from tests.fast.test_manage_memory import ALLERGY, KEY, SECRET, SISTER, say, stored_words

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL


# -- the command line ----------------------------------------------------------------------------------------
def run(store_location, *args, input=None):
    return CliRunner().invoke(cli, ["--store", str(store_location), *args], input=input)


def test_cli_remember_edit_and_delete(fake_pager, store_location, fake_models):
    lp = fake_pager()
    say(lp.conversation("c", create=True), f"Hi! {ALLERGY} {SISTER}")
    lp.close()
    out = run(store_location, "remember", "c", KEY)
    assert out.exit_code == 0 and out.output.startswith("remembered in c: #3  turn 2  stated"), out.output
    assert run(store_location, "remember", KEY).exit_code == 2  # no CONV_ID and no --user
    dry = run(store_location, "facts", "c", "--delete", "1", "--dry-run")
    assert dry.exit_code == 0 and dry.output.startswith(f"would delete standing fact #1 of c: {ALLERGY}"), dry.output
    assert SECRET in run(store_location, "facts", "c").output
    edit = run(store_location, "facts", "c", "--edit", "#1", "I'm allergic to peanuts.", "--json")
    assert edit.exit_code == 0, edit.output
    assert [f["text"] for f in json.loads(edit.output)["facts"]] == ["I'm allergic to peanuts."]
    listing = run(store_location, "facts", "c").output
    assert SECRET not in listing and "peanuts" in listing and SISTER in listing
    bad = run(store_location, "facts", "c", "--delete", "99")
    assert bad.exit_code == 1 and bad.output.strip() == "Error: no standing fact 99 in conversation 'c'"
    both = run(store_location, "facts", "c", "--delete", "1", "--pin", "2")
    assert both.exit_code == 2
    assert not fake_models.calls


def test_cli_at_a_users_scope(fake_pager, store_location, fake_models):
    lp = fake_pager()
    say(lp.conversation("mon", create=True, user="alice"), ALLERGY)
    lp.close()
    out = run(store_location, "--user", "alice", "remember", KEY)
    assert out.exit_code == 0 and out.output.startswith("remembered in alice-memory: #1"), out.output
    new_user = run(store_location, "--user", "dave", "remember", KEY)
    assert new_user.exit_code == 0 and "dave-memory" in new_user.output
    listing = run(store_location, "--user", "alice", "facts").output
    assert "alice-memory  #1" in listing and "mon  #1" in listing
    bare = run(store_location, "--user", "alice", "facts", "--delete", "1")
    assert bare.exit_code == 2 and "CONV:N" in bare.output
    done = run(store_location, "--user", "alice", "facts", "--delete", "mon:1")
    assert done.exit_code == 0 and done.output.startswith(f"deleted standing fact #1 of mon: {ALLERGY}"), done.output
    edit = run(store_location, "--user", "alice", "facts", "--edit", "alice-memory:1", "Spare key: red flowerpot.")
    assert edit.exit_code == 0, edit.output
    assert [line.split("  ")[-1] for line in run(store_location, "--user", "alice", "facts").output.splitlines()] == [
        "Spare key: red flowerpot."]
    other = run(store_location, "--user", "bob", "facts", "--delete", "mon:1")
    assert other.exit_code == 1 and "belongs to user 'alice', not to user 'bob'" in other.output


def test_chat_remember_correct_forget_fact_and_the_users_facts(fake_pager, store_location, fake_models):
    lp = fake_pager()
    say(lp.conversation("mon", create=True, user="alice"), SISTER)
    lp.close()
    lines = [f"/remember {KEY}", f"/remember {ALLERGY}", "/facts", "/correct 2 I'm allergic to peanuts.", "y",
             "/forget fact mon:1", "n", "/forget fact mon:1", "y", "/facts", "/correct x", "/forget fact bob:1",
             "/quit"]
    out = run(store_location, "--user", "alice", "chat", "tue", input="\n".join(lines) + "\n")
    assert out.exit_code == 0, out.output
    text = out.output
    assert "remembered: #1  turn 0  stated" in text and "remembered: #2  turn 1  avoid" in text
    listed, _, after = text.partition("would change standing fact #2 of tue")
    # /facts in a user's chat: every fact of theirs, each naming its conversation
    assert f"mon  #1  turn 0  family" in listed and f"tue  #2  turn 1  avoid" in listed and SECRET in listed
    # the corrected fact takes a new id: #2 is never given again (an app may hold it)
    assert "changed standing fact #2 of tue" in after and "now: #3  turn 2  avoid" in after
    assert after.count("would delete standing fact #1 of mon") == 2 and after.count("deleted standing fact") == 1
    final = after.rpartition("deleted standing fact #1 of mon")[2]
    assert "tue  #1" in final and "tue  #3  turn 2" in final and "mon  #" not in final and SECRET not in final
    assert "error: /correct N TEXT" in text and "conversation 'bob' in" in text  # bob: no conversation of that id
    lp = fake_pager()
    assert [f.text for f in lp.user("alice").facts()] == [KEY, "I'm allergic to peanuts."]
    assert stored_words(lp, SECRET) == [] and stored_words(lp, "Zorbavelle") == []
    assert [t.role for t in lp.conversation("tue").turns] == ["user", "user", "user"]  # no reply to any of them
    assert all(c.max_tokens <= 1 for c in fake_models.calls)  # the warm-up's prefill only: nothing answered
