"""Tests for localpager.store.loaders: LoCoMo mapping and repairs, JSONL round-trip, clear errors."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import LOCOMO, needs_locomo

from localpager.core.records import Probe, Transcript, Turn
from localpager.store.loaders import ConversationFileError, LoadResult, detect_format, dump_jsonl, load_conversations


# --- LoCoMo ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def locomo() -> LoadResult:
    return load_conversations(LOCOMO)


@pytest.fixture(scope="module")
def locomo_raw() -> dict[str, dict[str, Any]]:
    return {s["sample_id"]: s for s in json.loads(LOCOMO.read_text(encoding="utf-8"))}


def _conv(result: LoadResult, conversation_id: str) -> Transcript:
    return next(c for c in result.conversations if c.id == conversation_id)


def _raw_turn(raw: dict[str, Any], dia_id: str) -> dict[str, Any]:
    session = re.fullmatch(r"D(\d+):\d+", dia_id).group(1)
    return next(t for t in raw["conversation"][f"session_{session}"] if t["dia_id"] == dia_id)


def _probe(conversation: Transcript, question: str) -> Probe:
    return next(p for p in conversation.probes if p.question == question)


@needs_locomo
def test_locomo_totals(locomo: LoadResult) -> None:
    assert len(locomo.conversations) == 10
    assert sum(len(c.turns) for c in locomo.conversations) == 5882
    assert sum(len(c.probes) for c in locomo.conversations) == 1986


@needs_locomo
def test_locomo_categories(locomo: LoadResult) -> None:
    probes = [p for c in locomo.conversations for p in c.probes]
    assert Counter(p.type for p in probes) == {
        "multi-hop": 282,
        "temporal": 321,
        "open-domain": 96,
        "single-hop": 841,
        "adversarial": 446,
    }
    assert Counter(p.extra["category"] for p in probes) == {1: 282, 2: 321, 3: 96, 4: 841, 5: 446}


@needs_locomo
def test_locomo_turn_fields(locomo: LoadResult, locomo_raw: dict[str, Any]) -> None:
    conv, raw = _conv(locomo, "conv-26"), locomo_raw["conv-26"]["conversation"]
    first = conv.turns[0]
    assert (first.speaker, first.role, first.index) == ("Caroline", "user", 0)
    assert first.time == raw["session_1_date_time"]
    assert first.text == raw["session_1"][0]["text"]
    assert {t.role for t in conv.turns if t.speaker == "Melanie"} == {"assistant"}
    assert conv.meta == {"speaker_a": "Caroline", "speaker_b": "Melanie"}
    assert conv.source == str(LOCOMO)
    assert [t.index for t in conv.turns] == list(range(len(conv.turns)))


@needs_locomo
def test_locomo_sessions_in_numeric_order(locomo: LoadResult, locomo_raw: dict[str, Any]) -> None:
    # conv-41 has 32 sessions: a string sort would put session_10 before session_2.
    raw = locomo_raw["conv-41"]["conversation"]
    times = [t.time for t in _conv(locomo, "conv-41").turns]
    distinct = [time for i, time in enumerate(times) if i == 0 or times[i - 1] != time]
    assert distinct == [raw[f"session_{n}_date_time"] for n in range(1, 33)]


@needs_locomo
def test_locomo_photo_caption_is_appended(locomo: LoadResult, locomo_raw: dict[str, Any]) -> None:
    raw = _raw_turn(locomo_raw["conv-50"], "D30:5")
    probe = _probe(_conv(locomo, "conv-50"), "When did Dave buy a vintage camera?")
    turn = _conv(locomo, "conv-50").turns[probe.evidence[0]]
    assert turn.text == f"{raw['text']} [shares a photo: {raw['blip_caption']}]"


@needs_locomo
@pytest.mark.parametrize(
    ("conversation_id", "question", "dia_ids"),
    [
        ("conv-50", "When did Dave buy a vintage camera?", ["D30:5"]),  # was 'D30:05'
        ("conv-26", "What did Melanie paint recently?", ["D8:6", "D9:17"]),  # 'D8:6; D9:17'
    ],
)
def test_locomo_repaired_evidence_points_at_the_right_turn(
    locomo: LoadResult,
    locomo_raw: dict[str, Any],
    conversation_id: str,
    question: str,
    dia_ids: list[str],
) -> None:
    conv = _conv(locomo, conversation_id)
    probe = _probe(conv, question)
    texts = [conv.turns[i].text for i in probe.evidence]
    expected = [_raw_turn(locomo_raw[conversation_id], d)["text"] for d in dia_ids]
    assert len(texts) == len(expected)
    assert all(t.startswith(e) for t, e in zip(texts, expected))


@needs_locomo
def test_locomo_stray_colon_is_repaired(locomo: LoadResult, locomo_raw: dict[str, Any]) -> None:
    conv = _conv(locomo, "conv-43")
    probe = _probe(conv, "What authors has Tim read books from?")
    texts = [conv.turns[i].text for i in probe.evidence]
    assert _raw_turn(locomo_raw["conv-43"], "D11:26")["text"] in texts  # was 'D:11:26'
    assert len(probe.evidence) == 7


@needs_locomo
def test_locomo_warnings(locomo: LoadResult) -> None:
    # 9 malformed evidence strings: 6 repaired (4 split, 'D:11:26', 'D30:05'), 3 dropped.
    assert len(locomo.warnings) == 9
    repaired = [w for w in locomo.warnings if "repaired to" in w]
    dropped = [w for w in locomo.warnings if "dropped" in w]
    assert len(repaired) == 6 and len(dropped) == 3
    for conversation_id, raw_id in [("conv-42", "'D'"), ("conv-42", "'D10:19'"),
                                    ("conv-47", "'D4:36'")]:
        assert any(w.startswith(conversation_id) and f"evidence {raw_id} dropped" in w
                   for w in dropped)
    assert any("'D9:1 D4:4 D4:6' repaired to D9:1, D4:4, D4:6" in w for w in repaired)


@needs_locomo
def test_locomo_unusable_evidence_is_dropped(locomo: LoadResult) -> None:
    probe = _probe(_conv(locomo, "conv-42"), "What is one of Joanna's favorite movies?")
    assert len(probe.evidence) == 2  # ['D1:18', 'D', 'D1:20']


@needs_locomo
def test_locomo_answers(locomo: LoadResult) -> None:
    conv = _conv(locomo, "conv-26")
    assert _probe(conv, "How many children does Melanie have?").answers == ["3"]
    adversarial = [p for c in locomo.conversations for p in c.probes if p.type == "adversarial"]
    assert all(p.answers == ["not mentioned"] for p in adversarial)
    assert all(isinstance(p.extra["adversarial_answer"], str) for p in adversarial)
    bowl = _probe(conv, "Did Caroline make the black and white bowl in the photo?")
    assert bowl.extra == {"category": 5, "adversarial_answer": "Yes", "locomo_answer": "No"}


@needs_locomo
def test_locomo_evidence_edge_cases(locomo: LoadResult) -> None:
    probes = [p for c in locomo.conversations for p in c.probes]
    assert sum(1 for p in probes if not p.evidence) == 4
    assert all(len(set(p.evidence)) == len(p.evidence) for p in probes)  # conv-50 lists D4:5 twice


@needs_locomo
def test_locomo_round_trips_through_jsonl(locomo: LoadResult, tmp_path: Path) -> None:
    out = tmp_path / "locomo.jsonl"
    dump_jsonl(locomo.conversations, out)
    again = load_conversations(out)
    assert again.warnings == []
    for before, after in zip(locomo.conversations, again.conversations, strict=True):
        assert after.source == str(out)
        assert (after.id, after.turns, after.probes, after.meta) == (
            before.id, before.turns, before.probes, before.meta
        )


# --- interchange format (JSONL) -------------------------------------------------------------


def _write(tmp_path: Path, *lines: Any, name: str = "conv.jsonl") -> Path:
    """Write objects as JSON lines (strings are written as they are)."""
    path = tmp_path / name
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def _conversation(conversation_id: str = "conv-1", **changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": conversation_id,
        "turns": [
            {"role": "user", "text": "I am allergic to peanuts.", "time": "2024-01-01"},
            {"role": "assistant", "text": "Noted."},
            {"role": "user", "text": "What snack should I buy?"},
        ],
        "probes": [
            {"question": "What is the user allergic to?", "answer": "peanuts",
             "evidence": [0], "type": "allergy", "at": 2},
        ],
    }
    return obj | changes


def test_jsonl_fields(tmp_path: Path) -> None:
    path = _write(tmp_path, _conversation())
    (conv,) = load_conversations(path).conversations
    assert conv.id == "conv-1" and conv.source == str(path)
    assert conv.turns[0] == Turn("user", "I am allergic to peanuts.", 0, time="2024-01-01")
    assert [t.index for t in conv.turns] == [0, 1, 2]
    assert conv.probes == [
        Probe("What is the user allergic to?", ["peanuts"], [0], type="allergy", at=2)
    ]


def test_jsonl_answers_extras_and_optional_fields(tmp_path: Path) -> None:
    probes = [
        {"question": "Which year?", "answer": [2022, "in 2022"], "source": "manual"},
        {"question": "How many?", "answer": 3},
    ]
    conv_a = _conversation(probes=probes)
    conv_b = {"id": "conv-2", "turns": [{"role": "user", "text": "hi"}]}
    path = _write(tmp_path, conv_a, "", "   ", conv_b)  # blank lines are allowed
    first, second = load_conversations(path, format="jsonl").conversations
    assert first.probes[0].answers == ["2022", "in 2022"]
    assert first.probes[0].extra == {"source": "manual"}
    assert (first.probes[0].evidence, first.probes[0].at, first.probes[0].type) == ([], None, None)
    assert first.probes[1].answers == ["3"]
    assert second.probes == [] and second.turns[0].time is None


def test_jsonl_round_trip(tmp_path: Path) -> None:
    conversations = [
        Transcript(
            "a",
            [Turn("user", "Ünïcode\u2028line", 0, time="t0", speaker="Ann"),
             Turn("assistant", "ok", 1)],
            [Probe("q?", ["x", "y"], [0, 1], type="t", at=1, extra={"note": [1, 2]}),
             Probe("q2?", ["z"])],
            meta={"speaker_a": "Ann"},
        ),
        Transcript("b", [Turn("user", "only", 0)]),
    ]
    path = tmp_path / "out.jsonl"
    dump_jsonl(conversations, path)
    loaded = load_conversations(path)
    assert loaded.warnings == []
    for conversation in conversations:
        conversation.source = str(path)
    assert loaded.conversations == conversations


def test_dump_refuses_extras_that_clash_with_fields(tmp_path: Path) -> None:
    conv = Transcript("a", [Turn("user", "x", 0)], [Probe("q", ["a"], extra={"answer": "b"})])
    with pytest.raises(ValueError, match="clash"):
        dump_jsonl([conv], tmp_path / "out.jsonl")


# --- format detection -----------------------------------------------------------------------


@needs_locomo
def test_detect_locomo() -> None:
    assert detect_format(LOCOMO) == "locomo"


def test_detect_jsonl_and_explicit_format(tmp_path: Path) -> None:
    path = _write(tmp_path, _conversation(), name="data.json")  # detected by content, not name
    assert detect_format(path) == "jsonl"
    with pytest.raises(ConversationFileError, match="field 'sample_id': missing"):
        load_conversations(_write(tmp_path, f"[{json.dumps(_conversation())}]"), format="locomo")


def test_detect_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n", encoding="utf-8")
    with pytest.raises(ConversationFileError, match="unknown format"):
        detect_format(path)


def test_bad_format_argument(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown file format .csv.; use one of auto, jsonl, locomo"):
        load_conversations(_write(tmp_path, _conversation()), format="csv")


# --- errors ---------------------------------------------------------------------------------


def _turns(*changes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "text": "hello"} | c for c in changes]


def _probes(**changes: Any) -> list[dict[str, Any]]:
    return [{"question": "q?", "answer": "a", "evidence": [0]} | changes]


BAD_LINES = [
    pytest.param("{not json", None, "invalid JSON", id="invalid-json"),
    pytest.param("[1, 2]", None, "must be a conversation", id="not-an-object"),
    pytest.param(_conversation(7), "id", "must be a non-empty string, got 7", id="id-type"),
    pytest.param(_conversation(""), "id", "non-empty string", id="id-empty"),
    pytest.param({"turns": _turns({})}, "id", "missing", id="id-missing"),
    pytest.param(_conversation(turns={}), "turns", "must be a list, got a dict", id="turns-type"),
    pytest.param(_conversation(turns=[]), "turns", "at least one turn", id="turns-empty"),
    pytest.param(_conversation(turns=_turns({}, {"role": "bot"})), "turns[1].role",
                 "must be 'user' or 'assistant', got 'bot'", id="role"),
    pytest.param(_conversation(turns=_turns({"text": ""})), "turns[0].text",
                 "non-empty string", id="text-empty"),
    pytest.param(_conversation(turns=_turns({"text": ["a"]})), "turns[0].text",
                 "got a list", id="text-type"),
    pytest.param(_conversation(turns=["hi"]), "turns[0]", "must be a turn object", id="turn-type"),
    pytest.param(_conversation(turns=_turns({"time": 5})), "turns[0].time",
                 "string or null", id="time-type"),
    pytest.param(_conversation(turns=_turns({"txt": "x"})), "turns[0].txt",
                 "unknown field", id="turn-unknown-key"),
    pytest.param(_conversation(probe=[]), "probe", "unknown field", id="top-unknown-key"),
    pytest.param(_conversation(probes={}), "probes", "must be a list", id="probes-type"),
    pytest.param(_conversation(meta=[]), "meta", "must be an object", id="meta-type"),
    pytest.param(_conversation(probes=_probes(question=None)), "probes[0].question",
                 "non-empty string", id="question"),
    pytest.param(_conversation(probes=[{"question": "q"}]), "probes[0].answer", "missing",
                 id="answer-missing"),
    pytest.param(_conversation(probes=_probes(answer=[])), "probes[0].answer",
                 "at least one", id="answer-empty-list"),
    pytest.param(_conversation(probes=_probes(answer=["a", None])), "probes[0].answer[1]",
                 "string or a number, got None", id="answer-item-type"),
    pytest.param(_conversation(probes=_probes(answer=True)), "probes[0].answer",
                 "got True", id="answer-bool"),
    pytest.param(_conversation(probes=_probes(evidence=[0, 3])), "probes[0].evidence[1]",
                 "turn index 3 out of range: the conversation has turns 0..2", id="evidence-range"),
    pytest.param(_conversation(probes=_probes(evidence=[-1])), "probes[0].evidence[0]",
                 "out of range", id="evidence-negative"),
    pytest.param(_conversation(probes=_probes(evidence=["0"])), "probes[0].evidence[0]",
                 "must be a turn index", id="evidence-type"),
    pytest.param(_conversation(probes=_probes(at=57)), "probes[0].at",
                 "turn index 57 out of range", id="at-range"),
    pytest.param(_conversation(probes=_probes(at=True)), "probes[0].at",
                 "must be a turn index", id="at-bool"),
    pytest.param(_conversation(probes=_probes(type=1)), "probes[0].type",
                 "string or null", id="type-type"),
]


@pytest.mark.parametrize(("line", "field", "message"), BAD_LINES)
def test_bad_line_names_line_and_field(
    tmp_path: Path, line: Any, field: str | None, message: str
) -> None:
    path = _write(tmp_path, _conversation("ok-1"), line)
    with pytest.raises(ConversationFileError) as caught:
        load_conversations(path)
    error = caught.value
    assert (error.path, error.line, error.field) == (str(path), 2, field)
    assert str(error).startswith(f"{path} line 2: ")
    if field is not None:
        assert f"field '{field}': " in str(error)
    assert message in str(error)
    assert "\n" not in str(error)


def test_error_message_format(tmp_path: Path) -> None:
    bad = _conversation("c3", turns=_turns({}, {}, {"role": "bot"}))
    path = _write(tmp_path, _conversation("c1"), _conversation("c2"), bad)
    with pytest.raises(ConversationFileError) as caught:
        load_conversations(path)
    assert str(caught.value) == (
        f"{path} line 3: field 'turns[2].role': must be 'user' or 'assistant', got 'bot'"
    )


def test_bad_last_line_returns_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, _conversation("c1"), _conversation("c2"), '{"id": "c3", "turns": [}')
    with pytest.raises(ConversationFileError, match="line 3: invalid JSON") as caught:
        load_conversations(path)  # raises: the two good conversations before it are not returned
    assert caught.value.line == 3


def test_duplicate_conversation_id(tmp_path: Path) -> None:
    path = _write(tmp_path, _conversation("a"), _conversation("b"), "", _conversation("a"))
    with pytest.raises(ConversationFileError) as caught:
        load_conversations(path)
    assert (caught.value.line, caught.value.field) == (4, "id")
    assert "duplicate conversation id 'a' (first on line 1)" in str(caught.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConversationFileError, match="no such file") as caught:
        load_conversations(tmp_path / "absent.jsonl")
    assert caught.value.path == str(tmp_path / "absent.jsonl")


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(ConversationFileError, match="is a directory"):
        load_conversations(tmp_path)


@pytest.mark.parametrize("content", ["", "\n  \n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConversationFileError, match="file is empty"):
        load_conversations(path)


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    good = json.dumps(_conversation()).encode()
    latin1 = json.dumps(_conversation("b")).encode().replace(b"Noted", b"N\xf6ted")
    path.write_bytes(good + b"\n" + latin1)
    with pytest.raises(ConversationFileError, match=r"line 2: not UTF-8 \(byte 0xf6\)"):
        load_conversations(path)


# --- LoCoMo errors --------------------------------------------------------------------------


def _locomo_sample(**qa_changes: Any) -> dict[str, Any]:
    return {
        "sample_id": "s-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "later"}],
            "session_2_date_time": "day 2",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "first"}],
            "session_1_date_time": "day 1",
            "session_3_date_time": "a session that does not exist",
        },
        "qa": [{"question": "q?", "answer": "a", "evidence": ["D2:1"], "category": 4} | qa_changes],
    }


def test_small_locomo_sample(tmp_path: Path) -> None:
    path = _write(tmp_path, f"[{json.dumps(_locomo_sample(evidence=['D02:1', 'D3:1']))}]")
    result = load_conversations(path)
    (conv,) = result.conversations
    assert [(t.text, t.role, t.speaker, t.time) for t in conv.turns] == [
        ("first", "user", "Ann", "day 1"),
        ("later", "assistant", "Bob", "day 2"),
    ]
    assert conv.probes[0].evidence == [1]
    assert result.warnings == [
        "s-1 qa[0] ('q?'): evidence 'D02:1' repaired to D2:1",
        "s-1 qa[0] ('q?'): evidence 'D3:1' dropped (no such turn)",
    ]


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"category": 9}, "qa[0].category", "must be an integer 1-5, got 9"),
        ({"question": ""}, "qa[0].question", "non-empty string"),
        ({"answer": None}, "qa[0].answer", "got None"),
        ({"category": 5}, "qa[0].adversarial_answer", "missing"),
        ({"evidence": "D2:1"}, "qa[0].evidence", "must be a list"),
        ({"evidence": [7]}, "qa[0].evidence[0]", "must be a dia_id string"),
    ],
)
def test_bad_locomo_question_names_conversation_and_field(
    tmp_path: Path, changes: dict[str, Any], field: str, message: str
) -> None:
    path = _write(tmp_path, f"[{json.dumps(_locomo_sample(**changes))}]", name="lc.json")
    with pytest.raises(ConversationFileError) as caught:
        load_conversations(path)
    error = caught.value
    assert (error.conversation, error.field, error.line) == ("s-1", field, None)
    assert str(error).startswith(f"{path} conversation 's-1': field '{field}': ")
    assert message in str(error)


def test_bad_locomo_turn_and_duplicates(tmp_path: Path) -> None:
    sample = _locomo_sample()
    sample["conversation"]["session_2"][0]["speaker"] = "Eve"
    path = _write(tmp_path, f"[{json.dumps(sample)}]", name="lc.json")
    with pytest.raises(ConversationFileError, match=r"field 'conversation.session_2\[0\].speaker'"):
        load_conversations(path)
    path = _write(tmp_path, json.dumps([_locomo_sample(), _locomo_sample()]), name="lc.json")
    with pytest.raises(ConversationFileError, match="'s-1': field 'sample_id': duplicate"):
        load_conversations(path)


def test_invalid_locomo_json_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "lc.json"
    path.write_text('[\n{"sample_id": "s-1",\n "qa": ]\n', encoding="utf-8")
    with pytest.raises(ConversationFileError, match="line 3: invalid JSON") as caught:
        load_conversations(path)
    assert caught.value.line == 3
