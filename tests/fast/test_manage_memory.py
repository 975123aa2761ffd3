"""The user manages their memory directly (issue 40, item 4): remember a fact without a reply, edit a fact's words,
delete one, in one conversation and at a user's scope, from the library (the command line and a chat:
test_manage_memory_cli.py). An edited or deleted fact's old words are left in no file of the store. The fakes for
the models."""

from __future__ import annotations

import json

import pytest
from helpers import leaks, stored_words

from localpager.core.facts import MAX_FACT_CHARS, STATED, extract
from localpager.core.pager import PagingConfig
from localpager.core.records import Turn
from localpager.runtime.prompts import FACTS_PROMPT
from localpager.store.base import StoreError
from localpager.memory.users import memory_conversation

pytestmark = pytest.mark.both_stores  # the tests that take a store run on SQLite and on PostgreSQL

SECRET = "Quillonfrazzle"
ALLERGY = f"I'm allergic to {SECRET}."
SISTER = "My sister Zorbavelle lives in Porto."
KEY = "the spare key is under the blue flowerpot"  # no cue, no claim the fact model finds: stated only when remembered
SMALL = PagingConfig(boundary="fixed_5", budget=60)


@pytest.fixture
def lp(fake_pager):
    from fakes import shortest_sentence

    return fake_pager(lambda prompt, grammar: shortest_sentence(grammar) if grammar else "Noted.")


def say(conv, *texts):
    for text in texts:
        conv.add_turn("user", text)
        conv.add_turn("assistant", "Noted.")


def filled(lp, conv_id="c", user=None):
    """A conversation whose first turn states the secret fact and another, then enough turns to evict it, a
    question whose answer quotes it (a trace, an assistant turn), and a search (FAISS and BM25 files)."""
    conv = lp.conversation(conv_id, create=True, config=SMALL, user=user)
    say(conv, f"Hi! {ALLERGY} {SISTER}")
    for i in range(12):
        say(conv, f"Turn {i} is about topic{i // 4} with zebra{i}.")
    conv.ask("What do you remember about me?")
    conv.search(SECRET)
    return conv


# -- remember ------------------------------------------------------------------------------------------------
def test_remember_makes_a_fact_with_no_model_call_and_no_reply(fake_pager):
    from fakes import shortest_sentence

    lp = fake_pager(lambda prompt, grammar: shortest_sentence(grammar) if grammar else "Noted.")
    conv = lp.conversation("c", create=True)
    say(conv, "Hello there!")
    assert extract(Turn("user", KEY, 0)) == []  # the extractor alone finds nothing in it
    made = conv.remember(KEY)
    assert [(f.kind, f.text, f.turn) for f in made] == [(STATED, KEY, 2)]
    assert lp.backend.calls == []  # no model was asked
    last = conv.turns[-1]
    assert (last.role, last.text, last.remembered) == ("user", KEY, True) and len(conv.turns) == 3  # no reply
    allergy = conv.remember(f"Oh, by the way, {ALLERGY}")  # a fact the extractor finds: its kind, its line
    assert [(f.kind, f.text) for f in allergy] == [("avoid", ALLERGY)]
    assert [f.text for f in conv.facts()] == [KEY, ALLERGY]
    with pytest.raises(ValueError, match="nothing to remember"):
        conv.remember("   ")
    # the next question follows it as any turn, and the prompt shows the remembered fact in its prefix
    answer = conv.ask("How do I boil an egg?")
    prompt = lp.backend.calls[-1].text
    assert answer.answer == "Noted." and FACTS_PROMPT.format(facts="").strip() in prompt and f"- {KEY}" in prompt
    assert [t.role for t in conv.turns] == ["user", "assistant", "user", "user", "user", "assistant"]


def test_a_remembered_fact_is_one_line_and_no_longer_than_a_fact(lp):
    conv = lp.conversation("c", create=True)
    long = "spare keys: " + " and ".join(f"box {i} holds the key to shed {i}" for i in range(30))
    (fact,) = conv.remember(long)
    assert fact.kind == STATED and len(fact.text) <= MAX_FACT_CHARS + 1 and fact.text.endswith("…")
    (two,) = conv.remember("spare key:\nblue\u202eflowerpot")
    assert two.text == "spare key: blueflowerpot" and conv.turns[-1].text == "spare key:\nblue\u202eflowerpot"


def test_a_remembered_fact_survives_a_rebuild_an_export_an_import_and_a_merge(lp, fake_pager, tmp_path):
    conv = lp.conversation("c", create=True)
    say(conv, "Hello there!")
    conv.remember(KEY)
    lp.store.rebuild_facts("c")  # what a new extractor version does
    assert [(f.kind, f.text) for f in conv.facts()] == [(STATED, KEY)]
    lp.export(tmp_path / "c.jsonl", ["c"])
    assert json.loads((tmp_path / "c.jsonl").read_text())["localpager"]["remembered"] == [2]
    other = fake_pager(path=tmp_path / "other.db")
    other.import_file(tmp_path / "c.jsonl")
    assert [(f.kind, f.text) for f in other.conversation("c").facts()] == [(STATED, KEY)]
    assert other.conversation("c").turns[2].remembered and not other.conversation("c").turns[0].remembered
    third = fake_pager(path=tmp_path / "third.db")
    say(third.conversation("c", create=True), "Hello there!")
    third.import_file(tmp_path / "c.jsonl", mode="merge")
    assert [(f.kind, f.text) for f in third.conversation("c").facts()] == [(STATED, KEY)]
    conv.forget(turn=2)  # forgotten as any turn: the fact goes with it
    assert conv.facts() == [] and not conv.turns[2].text


def test_an_export_ingested_keeps_what_its_turns_are(lp, fake_pager, tmp_path):
    """``ingest`` of an export (paged again, unlike ``import``) reads what its turns are, as ``import`` does: the
    statement the user asked to keep stays a fact, a corrected statement's fact stays replaced, a forgotten turn
    stays empty (before: the first two were lost, and the forgotten turn's placeholder became a turn's words)."""
    conv = lp.conversation("c", create=True)
    say(conv, "Hello there!", "The weather is grey.", "My locker code is 4471.")
    conv.remember(KEY)
    conv.correct(4, "My locker code is 7734.")
    conv.forget(turn=2)
    current = [(f.kind, f.text) for f in conv.facts()]
    assert current == [(STATED, KEY), ("number", "My locker code is 7734.")]
    lp.export(tmp_path / "c.jsonl", ["c"])
    other = fake_pager(path=tmp_path / "other.db")
    other.ingest(tmp_path / "c.jsonl")
    again = other.conversation("c")
    assert [(f.kind, f.text) for f in again.facts()] == current and again.turns[6].remembered
    assert again.turns[4].superseded_by == 7 and other.store.turns("c")[4].superseded_by == 7
    assert again.turns[2].text == "" and "forgotten" not in " ".join(t.text for t in again.turns)


def test_a_bad_remembered_list_in_an_export_is_one_line(lp, tmp_path):
    conv = lp.conversation("c", create=True)
    conv.remember(KEY)
    lp.export(tmp_path / "c.jsonl", ["c"])
    line = json.loads((tmp_path / "c.jsonl").read_text())
    line["localpager"]["remembered"] = [7]
    (tmp_path / "bad.jsonl").write_text(json.dumps(line) + "\n")
    lp.forget_conversation("c")
    with pytest.raises(Exception, match=r"localpager.remembered\[0\]") as e:
        lp.import_file(tmp_path / "bad.jsonl")
    assert len(str(e.value).splitlines()) == 1 and not lp.store.has_conversation("c")


# -- edit and delete -----------------------------------------------------------------------------------------
def test_an_edited_facts_old_words_are_in_no_file_and_the_new_words_answer(lp):
    conv = filled(lp)
    fact = next(f for f in conv.facts() if f.text == ALLERGY)
    quoted = [t.index for t in conv.turns if t.role == "assistant" and SECRET in t.text]
    assert quoted and SECRET in json.dumps(conv.traces())  # the overview quoted it, its trace holds it
    source = conv.turns[0].text
    if lp.store.kind == "sqlite":
        from derivedkit import vector_leaks

        assert vector_leaks(lp.store.path, source) and leaks(lp, SECRET)  # what the check below could find
    dry = conv.edit_fact(fact.fact_id, "I'm allergic to peanuts.", dry_run=True)
    assert dry.dry_run and dry.reports[0].turns == [0, *quoted] and [f.text for f in dry.kept] == [SISTER]
    assert conv.turns[0].text.startswith("Hi!") and stored_words(lp, SECRET) == ["c"]  # nothing changed

    done = conv.edit_fact(fact.fact_id, "I'm allergic to peanuts.")
    assert not done.rewrite_pending and done.reports[0].turns == [0, *quoted]
    assert [(f.kind, f.text) for f in done.facts] == [("avoid", "I'm allergic to peanuts.")]
    assert [f.text for f in done.kept] == [SISTER]  # the turn's other fact stands, in its words
    assert [f.text for f in conv.facts()] == [SISTER, "I'm allergic to peanuts."]
    assert stored_words(lp, SECRET) == [] and leaks(lp, SECRET) == []
    if lp.store.kind == "sqlite":
        assert vector_leaks(lp.store.path, source) == []
    overview = conv.ask("What do you remember about me?").answer
    assert "I'm allergic to peanuts." in overview and SISTER in overview and SECRET not in overview
    assert [h for h in conv.search(SECRET, 5) if SECRET in h.text] == []


def test_a_deleted_fact_is_gone_likewise_and_the_others_stay(lp):
    conv = filled(lp)
    fact = next(f for f in conv.facts() if f.text == ALLERGY)
    assert lp.store.kind != "sqlite" or leaks(lp, SECRET)
    done = conv.delete_fact(fact.fact_id)
    assert done.text is None and done.facts == [] and [f.text for f in done.kept] == [SISTER]
    assert done.lines()[0] == f"deleted standing fact #{fact.fact_id} of c: {ALLERGY}"
    assert [f.text for f in conv.facts()] == [SISTER]
    assert stored_words(lp, SECRET) == [] and leaks(lp, SECRET) == []
    assert "Zebra3" in " ".join(t.text for t in conv.turns).title()  # the rest of the conversation stays
    with pytest.raises(ValueError, match="no standing fact 99 in conversation 'c'"):
        conv.delete_fact(99)


def test_a_deleted_facts_id_is_never_given_again(lp):
    """An app keeps fact ids, and a delete may be retried after a timeout: the newest fact deleted, the next
    fact must not take its number (and the retry must not delete it)."""
    conv = lp.conversation("c", create=True)
    (first,) = conv.remember("My locker code is 4471.")
    (newest,) = conv.remember(SISTER)
    conv.delete_fact(newest.fact_id)
    (after,) = conv.remember(ALLERGY)
    assert after.fact_id > newest.fact_id > first.fact_id
    with pytest.raises(ValueError, match=f"no standing fact {newest.fact_id} in conversation 'c'"):
        conv.delete_fact(newest.fact_id)
    assert [f.text for f in conv.facts()] == ["My locker code is 4471.", ALLERGY]


def test_a_rebuild_of_the_facts_keeps_their_ids_and_gives_no_deleted_one_again(lp):
    """A new extractor makes the facts again (``Store.rebuild_facts``): the facts it makes as before keep their
    ids, and none takes the id of a fact deleted before."""
    conv = lp.conversation("c", create=True)
    kept = [conv.remember(t)[0] for t in ("My locker code is 4471.", SISTER)]
    (gone,) = conv.remember(ALLERGY)
    conv.delete_fact(gone.fact_id)
    lp.store.rebuild_facts("c")
    assert [(f.fact_id, f.text) for f in lp.store.facts("c")] == [(f.fact_id, f.text) for f in kept]
    (new,) = lp.conversation("c").remember("My blood type is O negative.")
    assert new.fact_id > gone.fact_id


def test_deleting_a_short_fact_takes_its_words_not_longer_words_holding_them(lp):
    conv = lp.conversation("c", create=True)
    (tea,) = conv.remember("Tea.")
    say(conv, "I had a steak. Tea. is fine")
    done = conv.delete_fact(tea.fact_id)
    assert done.reports[0].turns == [0, 1] and conv.turns[1].text == "" and conv.turns[2].text == "Noted."


# -- a user's scope ------------------------------------------------------------------------------------------
def test_a_users_remember_goes_to_their_memory_conversation_created_as_theirs(lp):
    carol = lp.user("carol", create=True)
    (made,) = carol.remember(KEY)
    assert made.conv_id == memory_conversation("carol") == "carol-memory"
    assert lp.store.conversation_user("carol-memory") == "carol"
    carol.remember(ALLERGY)
    assert [(f.conv_id, f.text) for f in lp.user("carol").facts()] == [("carol-memory", KEY), ("carol-memory", ALLERGY)]
    lp.conversation("bob-memory", create=True, user="alice")
    with pytest.raises(StoreError, match="belongs to user 'alice', not to user 'bob'"):
        lp.user("bob", create=True).remember(KEY)
    say(lp.conversation("mon", create=True, user="carol"), "Hello there!")
    assert carol.remember(SISTER, conversation="mon")[0].conv_id == "mon"
    with pytest.raises(StoreError, match="belongs to user 'alice'"):
        carol.remember(KEY, conversation="bob-memory")
    long = "x" * 199
    assert len(memory_conversation(long)) <= 200 and memory_conversation(long) != memory_conversation(long[:-1] + "y")


def test_a_users_fact_edited_or_deleted_is_erased_from_all_their_conversations(lp):
    filled(lp, "mon", user="alice")
    tue = lp.conversation("tue", create=True, user="alice")
    assert SECRET in tue.ask("What do you remember about me?").answer  # quoted from monday's fact
    say(lp.conversation("bob-1", create=True, user="bob"), ALLERGY)  # the same words, someone else's
    alice = lp.user("alice")
    fact = next(f for f in alice.facts() if f.text == ALLERGY)
    dry = alice.delete_fact((fact.conv_id, fact.fact_id), dry_run=True)
    assert [r.conversation for r in dry.reports] == ["mon", "tue"] and stored_words(lp, SECRET) == ["bob-1", "mon",
                                                                                                     "tue"]
    done = alice.delete_fact((fact.conv_id, fact.fact_id))
    assert [r.conversation for r in done.reports] == ["mon", "tue"] and not done.rewrite_pending
    assert stored_words(lp, SECRET) == ["bob-1"]
    assert [f.text for f in alice.facts()] == [SISTER]
    edited = alice.edit_fact(("mon", alice.facts()[0].fact_id), "My sister Ana lives in Lisbon.")
    assert [(f.text, f.conv_id) for f in alice.facts()] == [("My sister Ana lives in Lisbon.", "mon")]
    assert edited.facts[0].kind == "family" and stored_words(lp, "Zorbavelle") == []
    with pytest.raises(StoreError, match="belongs to user 'bob'"):
        alice.delete_fact(("bob-1", 1))
    if lp.store.kind == "sqlite":
        from faultkit import leaks as byte_leaks

        lp.store.erase()
        assert byte_leaks(lp.store.path, SECRET)  # bob's words stay
        assert leaks(lp, "Zorbavelle") == []
