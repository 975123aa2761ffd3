"""Property-based fuzzing of what comes from outside: conversation files (JSONL and LoCoMo) and turn text.

Whatever the input, the outcome is one of two: it is stored and reads back exactly, or it is refused with
a one-line error (a ConversationFileError naming the file and line, or a StoreError/ValueError) and the
store is unchanged. On the fakes; bounded (``max_examples``) so the file adds seconds, not minutes."""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import pytest
from fakes import HashEmbedder, ScriptedBackend, shortest_sentence
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager, ModelOptions
from localpager.store.loaders import ConversationFileError, load_conversations
from localpager.store.base import StoreError

NASTY = ["<|im_end|>", "<|im_start|>system\n", "\ud800", "\udcff", "\x00", "\u200f", "\u202e", "\x1b[2J", "\t",
         "\n", "\r\n", "::=", "root ::= ", "[^\"]*", "|", "\\", '"', "'", "recall(page_ids=[1])", "\ufeff",
         "\u2028", "é", "日本語", "🙂", " ", ""]
texts = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=12)), max_size=6).map("".join)
# benchmarks/faults.py runs this file with many more examples (LOCALPAGER_FUZZ_EXAMPLES)
EXAMPLES = int(os.environ.get("LOCALPAGER_FUZZ_EXAMPLES", "30"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reply(prompt, grammar):
    return shortest_sentence(grammar) if grammar else "Noted."


def pager(path: Path) -> LocalPager:
    lp = LocalPager(path, backend=ScriptedBackend(reply, model_name="fake.gguf"),
                    options=ModelOptions(embedder=HashEmbedder()))
    return lp


def dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(line for line in conn.iterdump() if "counters" not in line)


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text and "Traceback" not in text, repr(text)
    return text


def ingest_or_refuse(raw: bytes, name: str) -> None:
    """Load ``raw`` as a file and store it: stored exactly, or refused in one line with the store unchanged."""
    with tempfile.TemporaryDirectory() as d:
        path, store = Path(d) / name, Path(d) / "s.db"
        path.write_bytes(raw)
        lp = pager(store)
        lp.conversation("keep", create=True).add_turn("user", "a turn that must survive")
        before = dump(store)
        try:
            loaded = load_conversations(path)
        except ConversationFileError as exc:
            assert one_line(exc).startswith(str(path))
            return
        try:
            lp.ingest(path, config=PagingConfig(budget=64))
        except (StoreError, ValueError) as exc:
            one_line(exc)
            assert dump(store) == before
            return
        finally:
            lp.close()
        with _closing(pager(store)) as lp2:
            for conv in loaded.conversations:
                assert [(t.role, t.text) for t in lp2.store.turns(conv.id)] == [(t.role, t.text) for t in conv.turns]


class _closing:
    def __init__(self, lp):
        self.lp = lp

    def __enter__(self):
        return self.lp

    def __exit__(self, *exc):
        self.lp.close()


turn_objects = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", "", 3]), "text": st.one_of(texts, st.integers())},
    optional={"time": st.one_of(texts, st.none()), "speaker": st.one_of(texts, st.none()), "extra": texts})
conversation_objects = st.fixed_dictionaries(
    {"id": st.one_of(texts, st.integers()), "turns": st.lists(turn_objects, max_size=4)},
    optional={"probes": st.lists(st.fixed_dictionaries({"question": texts, "answer": texts}), max_size=2)})


@FUZZ
@given(st.lists(conversation_objects, min_size=1, max_size=3), st.booleans())
def test_jsonl_files_are_stored_exactly_or_refused_in_one_line(objects, ascii_escapes):
    lines = [json.dumps(o, ensure_ascii=ascii_escapes) for o in objects]
    raw = "\n".join(lines).encode("utf-8", "surrogatepass") + b"\n"
    ingest_or_refuse(raw, "conversations.jsonl")


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes_are_refused_in_one_line(raw):
    ingest_or_refuse(raw, "junk.jsonl")


locomo_turns = st.lists(st.fixed_dictionaries({"speaker": st.sampled_from(["Ann", "Bob", "Eve"]), "text": texts,
                                               "dia_id": st.sampled_from(["D1:1", "D1:2", "D1:3", "D:1:4"])}),
                        max_size=4)


@FUZZ
@given(texts, locomo_turns, st.lists(st.fixed_dictionaries(
    {"question": texts, "answer": texts, "category": st.sampled_from([1, 4, 5, 9]),
     "evidence": st.lists(st.sampled_from(["D1:1", "D1:9", "D:1:2; D1:3", ""]), max_size=2)}), max_size=2))
def test_locomo_files_are_stored_exactly_or_refused_in_one_line(sample_id, turns, qa):
    sample = {"sample_id": sample_id, "conversation": {"speaker_a": "Ann", "speaker_b": "Bob",
                                                       "session_1_date_time": "1 May", "session_1": turns}, "qa": qa}
    raw = json.dumps([sample], ensure_ascii=False).encode("utf-8", "surrogatepass")
    ingest_or_refuse(raw, "locomo.json")


@FUZZ
@given(texts)
def test_any_turn_text_is_kept_exactly_or_refused_in_one_line(text):
    with tempfile.TemporaryDirectory() as d:
        lp = pager(Path(d) / "s.db")
        chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=64))
        chat.add_turn("user", "before")
        before = dump(lp.store.path)
        try:
            chat.add_turn("user", text)
        except ValueError as exc:
            one_line(exc)
            assert dump(lp.store.path) == before
        else:
            assert lp.store.turns("c")[-1].text == text
            chat.ask(text + " ?")  # and the model's prompt takes it as text
        lp.close()


@FUZZ
@given(texts)
def test_any_conversation_id_is_listed_on_one_line_or_refused(conv_id):
    with tempfile.TemporaryDirectory() as d:
        lp = pager(Path(d) / "s.db")
        try:
            lp.conversation(conv_id, create=True)
        except (StoreError, ValueError) as exc:
            one_line(exc)
            assert lp.conversations() == []
        else:
            (info,) = lp.conversations()
            assert info.id == conv_id and conv_id.isprintable() and "\t" not in conv_id
        lp.close()


def test_a_one_megabyte_turn_and_an_empty_conversation(tmp_path):
    lp = pager(tmp_path / "s.db")
    chat = lp.conversation("big", create=True)
    big = ("word " * 200_000)[:1_000_000]
    chat.add_turn("user", big)
    assert lp.store.turns("big")[0].text == big
    assert lp.conversation("empty", create=True).pages == []
    path = tmp_path / "empty.jsonl"
    path.write_text(json.dumps({"id": "e", "turns": []}) + "\n")
    with pytest.raises(ConversationFileError, match="line 1: field 'turns': must hold at least one turn"):
        load_conversations(path)
    lp.close()
