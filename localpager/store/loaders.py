"""Read conversation files into :class:`~localpager.core.records.Transcript` records.

Two formats are read: the interchange format (JSONL, one conversation per line, written by
:func:`dump_jsonl`) and the LoCoMo benchmark file (``locomo10.json``). A whole file is checked
before anything is returned, so a caller never works on a half-read file: every problem raises a
:class:`ConversationFileError` that names the file, the line or conversation, and the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from localpager.core.checks import id_problem, text_problem
from localpager.core.choices import choose
from localpager.core.records import ROLES, UNANSWERED_PROBES, Probe, Transcript, Turn

from .choices import FileFormat

LOCOMO_CATEGORIES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL_ANSWER = "not mentioned"

# "localpager": what an export (localpager.memory.interchange) adds; reading a conversation keeps only what says what
# its turns are (``turn_marks``), the rest is import's. "user": whose conversation it is (optional: a user name,
# checked as an id is)
TOP_KEYS = {"id", "turns", "probes", "meta", "localpager", "user"}
_TURN_KEYS = {"role", "text", "time", "speaker"}
_PROBE_KEYS = {"question", "answer", "evidence", "type", "at"}
_SESSION_KEY = re.compile(r"session_(\d+)")
_DIA_ID = re.compile(r"D:?(\d+):(\d+)")
_ID_SEPARATORS = re.compile(r"[;,\s]+")


class ConversationFileError(ValueError):
    """A clear, one-line error naming the file, the line (JSONL) or conversation, and the field."""

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        line: int | None = None,
        field: str | None = None,
        conversation: str | None = None,
    ) -> None:
        self.path = str(path)
        self.line = line
        self.field = field
        self.conversation = conversation
        self.message = message
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path
        if self.line is not None:
            where += f" line {self.line}"
        if self.conversation is not None:
            where += f" conversation {self.conversation!r}"
        what = f"field '{self.field}': " if self.field else ""
        return f"{where}: {what}{self.message}"


@dataclass
class LoadResult:
    """The conversations of a file and the repairs made on the way (for the caller to show)."""

    conversations: list[Transcript]
    warnings: list[str] = field(default_factory=list)
    users: dict[str, str] = field(default_factory=dict)  # conversation id: the user the file says it belongs to


@dataclass(frozen=True)
class Where:
    """Where a value sits in the file, so that every error can say so."""

    path: str
    line: int | None = None
    conversation: str | None = None

    def error(self, field_name: str | None, message: str) -> ConversationFileError:
        return ConversationFileError(
            self.path, message, line=self.line, field=field_name, conversation=self.conversation
        )


# --- public API -----------------------------------------------------------------------------


def load_conversations(path: str | Path, format: str = FileFormat.AUTO) -> LoadResult:
    """Read and check a whole file (``format``: a ``FileFormat``, ``auto``, ``jsonl`` or ``locomo``).

    Nothing is returned unless every line is valid, so callers never evaluate half a file.
    """
    format = choose(FileFormat, format, "file format")
    text = read_text(path)
    detected = format == FileFormat.AUTO
    if detected:
        format = _detect(text, str(path))
    if format == FileFormat.JSONL:
        conversations, users = _parse_jsonl(text, str(path))
        return LoadResult(conversations, users=users)
    return _parse_locomo(text, str(path), detected)


def detect_format(path: str | Path) -> FileFormat:
    """``jsonl`` or ``locomo``, from the file's first character (``{`` or ``[``)."""
    return _detect(read_text(path), str(path))


def dump_jsonl(conversations: Iterable[Transcript], path: str | Path) -> None:
    """Write conversations in the interchange format; :func:`load_conversations` reads them back."""
    lines = [json.dumps(conversation_to_json(c), ensure_ascii=False) for c in conversations]
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# --- reading the file -----------------------------------------------------------------------


def read_text(path: str | Path) -> str:
    """The file's text, or an error for the ways a file can be unreadable before parsing."""
    where = Where(str(path))
    p = Path(path)
    if not p.exists():
        raise where.error(None, "no such file")
    if p.is_dir():
        raise where.error(None, "is a directory, not a file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise where.error(None, f"cannot be read: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise ConversationFileError(
            path, f"not UTF-8 (byte 0x{data[e.start]:02x})", line=line
        ) from e
    if not text.strip():
        raise where.error(None, "file is empty")
    return text


def _detect(text: str, path: str) -> FileFormat:
    """Tell the formats apart by content, not by file name, since both often end in .json."""
    first = text.lstrip()[:1]
    if first == "{":
        return FileFormat.JSONL
    if first == "[":
        return FileFormat.LOCOMO
    raise ConversationFileError(
        path, f"unknown format: expected '{{' (jsonl) or '[' (locomo) first, got {first!r}; "
        "or a ChatGPT or Claude export (conversations.json, its .zip or folder) or a message list"
    )


# --- interchange format (JSONL) -------------------------------------------------------------


def _parse_jsonl(text: str, path: str) -> tuple[list[Transcript], dict[str, str]]:
    """Every line is parsed and checked before the list is returned, with the users lines name."""
    conversations: list[Transcript] = []
    users: dict[str, str] = {}
    first_line: dict[str, int] = {}
    # split on "\n" only: JSON strings may hold raw U+2028, which str.splitlines would cut.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        where = Where(path, line=number)
        obj = json_line(raw, where)
        conversation = conversation_from_json(obj, where, path)
        if (user := conversation_user(obj, where)) is not None:
            users[conversation.id] = user
        if conversation.id in first_line:
            raise where.error(
                "id",
                f"duplicate conversation id {conversation.id!r} "
                f"(first on line {first_line[conversation.id]})",
            )
        first_line[conversation.id] = number
        conversations.append(conversation)
    return conversations, users


def json_line(raw: str, where: Where) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise where.error(None, f"invalid JSON: {e.msg} (column {e.colno})") from e


def conversation_from_json(obj: Any, where: Where, path: str) -> Transcript:
    object_of(obj, where, None, "a conversation")
    no_unknown_keys(obj, TOP_KEYS, where, "", hint="put extra data under 'meta'")
    conversation_id = checked_conversation_id(required_string(obj, "id", where), where, "id")
    turns = [
        _turn_from_json(t, i, where)
        for i, t in enumerate(list_of(required_field(obj, "turns", where, "turns"), where, "turns"))
    ]
    if not turns:
        raise where.error("turns", "must hold at least one turn")
    probes = [
        _probe_from_json(p, f"probes[{i}]", len(turns), where)
        for i, p in enumerate(list_of(obj.get("probes", []), where, "probes"))
    ]
    meta = object_of(obj.get("meta", {}), where, "meta", "an object")
    conversation_user(obj, where)
    turn_marks(obj.get("localpager"), turns, where)
    return Transcript(conversation_id, turns, probes, source=path, meta=dict(meta))


def checked_superseded(value: Any, where: Where, n_turns: int) -> dict[int, int]:
    """{turn: the later turn that corrected it}; keys are turn indices written as strings (JSON)."""
    marks: dict[int, int] = {}
    for key, later in object_of(value, where, "localpager.superseded", "an object").items():
        name = f"localpager.superseded.{key}"
        if not (key.isascii() and key.isdigit() and len(key) < 19):
            raise where.error(name, f"each key must be a turn index, got {show_value(key)}")
        turn = checked_turn_index(int(key), n_turns, where, name)
        later = checked_turn_index(later, n_turns, where, name)
        if later <= turn:
            raise where.error(name, f"must name a later turn ({turn + 1}..{n_turns - 1}), got {later}")
        marks[turn] = later
    return marks


def turn_marks(state: Any, turns: list[Turn], where: Where) -> None:
    """What an export says its turns are, kept by any reader of the file (``ingest`` as well as ``import``): a
    turn the user asked to be remembered is a standing fact even where the extractor finds none, a corrected turn
    points at its correction (its facts no longer stand), and a forgotten turn is empty, not its placeholder
    ``[forgotten]`` read as words. (``ingest`` lost all three.)"""
    if not isinstance(state, dict):
        return  # a plain interchange line; a malformed object is import's to report
    for turn, later in checked_superseded(state.get("superseded", {}), where, len(turns)).items():
        turns[turn].superseded_by = later
    for name in ("remembered", "forgotten"):
        for i, value in enumerate(list_of(state.get(name, []), where, f"localpager.{name}")):
            turn = turns[checked_turn_index(value, len(turns), where, f"localpager.{name}[{i}]")]
            if name == "remembered":
                turn.remembered = True
            else:
                turn.text = ""


def conversation_user(obj: dict[str, Any], where: Where) -> str | None:
    """The user a conversation line says it belongs to (``"user"``, optional), checked as an id is."""
    value = obj.get("user")
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.error("user", f"must be a user name (a string) or null, got {show_value(value)}")
    if problem := id_problem(value):
        raise where.error("user", f"user name {show_value(value)} {problem}")
    return value


def _turn_from_json(obj: Any, index: int, where: Where) -> Turn:
    name = f"turns[{index}]"
    object_of(obj, where, name, "a turn object")
    no_unknown_keys(obj, _TURN_KEYS, where, f"{name}.")
    role = required_field(obj, "role", where, f"{name}.role")
    if role not in ROLES:
        raise where.error(f"{name}.role", f"must be 'user' or 'assistant', got {show_value(role)}")
    return Turn(
        role=role,
        text=required_string(obj, "text", where, name),
        index=index,
        time=optional_string(obj.get("time"), where, f"{name}.time"),
        speaker=optional_string(obj.get("speaker"), where, f"{name}.speaker"),
    )


def _probe_from_json(obj: Any, name: str, n_turns: int, where: Where) -> Probe:
    object_of(obj, where, name, "a probe object")
    evidence = list_of(obj.get("evidence", []), where, f"{name}.evidence")
    at = obj.get("at")
    probe_type = optional_string(obj.get("type"), where, f"{name}.type")
    # a general question (GENERAL_PROBE) needs nothing said before and a question about something never said
    # (ABSENT_PROBE) has nothing to find: neither has an answer to check, only the expectation that nothing is
    # paged in for a general question and that "not remembered" is the reply to the other
    general = probe_type in UNANSWERED_PROBES and obj.get("answer", []) == [] and not evidence
    return Probe(
        question=required_string(obj, "question", where, name),
        answers=[] if general else _answers(required_field(obj, "answer", where, f"{name}.answer"), where, name),
        evidence=[
            checked_turn_index(e, n_turns, where, f"{name}.evidence[{i}]") for i, e in enumerate(evidence)
        ],
        type=probe_type,
        at=None if at is None else checked_turn_index(at, n_turns, where, f"{name}.at"),
        extra={k: v for k, v in obj.items() if k not in _PROBE_KEYS},
    )


def _answers(value: Any, where: Where, probe: str) -> list[str]:
    """A single answer or a list of accepted ones; numbers count, as LoCoMo has integer answers."""
    name = f"{probe}.answer"
    if not isinstance(value, list):
        return [_answer_text(value, where, name)]
    if not value:
        raise where.error(name, "must hold at least one accepted answer")
    return [_answer_text(v, where, f"{name}[{i}]") for i, v in enumerate(value)]


def _answer_text(value: Any, where: Where, name: str) -> str:
    if is_number(value):
        return str(value)
    return _string(value, where, name, expected="a non-empty string or a number")


def conversation_to_json(conversation: Transcript) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "id": conversation.id,
        "turns": [_turn_to_json(t) for t in conversation.turns],
        "probes": [_probe_to_json(p) for p in conversation.probes],
    }
    if conversation.meta:
        obj["meta"] = conversation.meta
    return obj


def _turn_to_json(turn: Turn) -> dict[str, Any]:
    obj = {"role": turn.role, "text": turn.text, "time": turn.time, "speaker": turn.speaker}
    return {k: v for k, v in obj.items() if v is not None}


def _probe_to_json(probe: Probe) -> dict[str, Any]:
    clash = _PROBE_KEYS & probe.extra.keys()
    if clash:
        raise ValueError(f"probe {probe.question!r}: extra keys clash with fields: {sorted(clash)}")
    obj: dict[str, Any] = {
        "question": probe.question,
        "answer": probe.answers,
        "evidence": probe.evidence,
    }
    if probe.type is not None:
        obj["type"] = probe.type
    if probe.at is not None:
        obj["at"] = probe.at
    return obj | probe.extra


# --- LoCoMo ---------------------------------------------------------------------------------


LOCOMO_KEYS = ("sample_id", "conversation", "qa")  # what a LoCoMo sample holds
FOREIGN_LIST = ("expected a ChatGPT or Claude export (conversations.json, its .zip or folder), a message list "
                "([{\"role\", \"content\"}, ...] or {\"messages\": [...]}) or LoCoMo (samples with 'sample_id', "
                "'conversation' and 'qa')")


def _parse_locomo(text: str, path: str, detected: bool = False) -> LoadResult:
    """Map every LoCoMo sample; evidence repairs are reported as warnings, not errors. ``detected``: the format
    was told by the file's first character only (a JSON list), so a list whose first item is no LoCoMo sample is
    a foreign file: the error says what a JSON list may be, not which LoCoMo field it lacks."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConversationFileError(
            path, f"invalid JSON: {e.msg} (column {e.colno})", line=e.lineno
        ) from e
    samples = list_of(data, Where(path), None)
    if detected and samples and not (isinstance(samples[0], dict) and any(k in samples[0] for k in LOCOMO_KEYS)):
        first = (f"an object with {', '.join(repr(k) for k in list(samples[0])[:4]) or 'no keys'}"
                 if isinstance(samples[0], dict) else f"a JSON {type(samples[0]).__name__}")
        raise Where(path).error(None, f"is a JSON list of something else (its first item is {first}): "
                                      f"{FOREIGN_LIST}")
    result = LoadResult([])
    seen: set[str] = set()
    for i, sample in enumerate(samples):
        conversation = _locomo_sample(sample, i, path, result.warnings)
        if conversation.id in seen:
            raise Where(path, conversation=conversation.id).error(
                "sample_id", "duplicate conversation id"
            )
        seen.add(conversation.id)
        result.conversations.append(conversation)
    return result


def _locomo_sample(sample: Any, position: int, path: str, warnings: list[str]) -> Transcript:
    where = Where(path, conversation=f"#{position}")
    object_of(sample, where, None, "a LoCoMo sample object")
    sample_id = checked_conversation_id(required_string(sample, "sample_id", where), where, "sample_id")
    where = Where(path, conversation=sample_id)
    body = required_field(sample, "conversation", where, "conversation")
    object_of(body, where, "conversation", "an object")
    speakers = {
        required_string(body, key, where, "conversation"): role
        for key, role in (("speaker_a", "user"), ("speaker_b", "assistant"))
    }
    turns, dia_index = _locomo_turns(body, speakers, where)
    qa = list_of(required_field(sample, "qa", where, "qa"), where, "qa")
    probes = [_locomo_probe(q, i, dia_index, where, warnings) for i, q in enumerate(qa)]
    meta = {"speaker_a": body["speaker_a"], "speaker_b": body["speaker_b"]}
    return Transcript(sample_id, turns, probes, source=path, meta=meta)


def _locomo_sessions(body: dict[str, Any]) -> list[tuple[int, list[Any]]]:
    """Sessions are found by their lists: some samples have date keys for missing sessions."""
    sessions = [
        (int(m.group(1)), value)
        for key, value in body.items()
        if (m := _SESSION_KEY.fullmatch(key)) and isinstance(value, list)
    ]
    return sorted(sessions, key=lambda s: s[0])


def _locomo_turns(
    body: dict[str, Any], speakers: dict[str, str], where: Where
) -> tuple[list[Turn], dict[str, int]]:
    """Turns in session order, and the dia_id -> global index map taken from the ids seen."""
    turns: list[Turn] = []
    dia_index: dict[str, int] = {}
    for number, session in _locomo_sessions(body):
        date_key = f"session_{number}_date_time"
        time = optional_string(body.get(date_key), where, f"conversation.{date_key}")
        for j, raw in enumerate(session):
            name = f"conversation.session_{number}[{j}]"
            turn, dia_id = _locomo_turn(raw, len(turns), time, speakers, where, name)
            if dia_id in dia_index:
                raise where.error(f"{name}.dia_id", f"duplicate dia_id {dia_id!r}")
            dia_index[dia_id] = turn.index
            turns.append(turn)
    if not turns:
        raise where.error("conversation", "has no session with turns")
    return turns, dia_index


def _locomo_turn(
    raw: Any, index: int, time: str | None, speakers: dict[str, str], where: Where, name: str
) -> tuple[Turn, str]:
    object_of(raw, where, name, "a turn object")
    speaker = required_string(raw, "speaker", where, name)
    if speaker not in speakers:
        raise where.error(
            f"{name}.speaker", f"must be one of {sorted(speakers)}, got {show_value(speaker)}"
        )
    text = required_string(raw, "text", where, name)
    caption = optional_string(raw.get("blip_caption"), where, f"{name}.blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    dia_id = required_string(raw, "dia_id", where, name)
    return Turn(speakers[speaker], text, index, time=time, speaker=speaker), dia_id


def _locomo_probe(
    raw: Any, i: int, dia_index: dict[str, int], where: Where, warnings: list[str]
) -> Probe:
    name = f"qa[{i}]"
    object_of(raw, where, name, "a question object")
    question = required_string(raw, "question", where, name)
    category = required_field(raw, "category", where, f"{name}.category")
    if type(category) is not int or category not in LOCOMO_CATEGORIES:
        raise where.error(f"{name}.category", f"must be an integer 1-5, got {show_value(category)}")
    label = f"{where.conversation} {name} ({question!r})"
    evidence_ids = list_of(raw.get("evidence", []), where, f"{name}.evidence")
    evidence = _locomo_evidence(evidence_ids, dia_index, where, f"{name}.evidence", label, warnings)
    answers, extra = _locomo_answers(raw, category, where, name)
    extra = {"category": category, **extra}
    return Probe(question, answers, evidence, type=LOCOMO_CATEGORIES[category], extra=extra)


def _locomo_answers(
    raw: dict[str, Any], category: int, where: Where, name: str
) -> tuple[list[str], dict[str, Any]]:
    """Adversarial questions are about things never said, so the right reply is 'not mentioned'.

    Two adversarial questions also carry an ``answer``; it is kept as ``extra["locomo_answer"]``
    rather than lost (``extra["answer"]`` would clash with the probe's own field on dump).
    """
    if category != 5:
        answer = required_field(raw, "answer", where, f"{name}.answer")
        return [_answer_text(answer, where, f"{name}.answer")], {}
    adversarial = required_field(raw, "adversarial_answer", where, f"{name}.adversarial_answer")
    extra = {"adversarial_answer": _answer_text(adversarial, where, f"{name}.adversarial_answer")}
    if "answer" in raw:
        extra["locomo_answer"] = _answer_text(raw["answer"], where, f"{name}.answer")
    return [ADVERSARIAL_ANSWER], extra


def _locomo_evidence(
    ids: list[Any],
    dia_index: dict[str, int],
    where: Where,
    name: str,
    label: str,
    warnings: list[str],
) -> list[int]:
    """Turn indices for the evidence ids, repairing typos; duplicates are kept once."""
    indices: list[int] = []
    for j, raw in enumerate(ids):
        raw = _string(raw, where, f"{name}[{j}]", expected="a dia_id string")
        if raw in dia_index:
            found = [dia_index[raw]]
        else:
            found = _repair_evidence(raw, dia_index, label, warnings)
        indices.extend(k for k in found if k not in indices)
    return indices


def _repair_evidence(
    raw: str, dia_index: dict[str, int], label: str, warnings: list[str]
) -> list[int]:
    """Split several ids, drop a stray colon and leading zeros; warn of each change or loss."""
    repaired: list[str] = []
    dropped: list[str] = []
    for token in filter(None, _ID_SEPARATORS.split(raw)):
        m = _DIA_ID.fullmatch(token)
        normal = f"D{int(m.group(1))}:{int(m.group(2))}" if m else token
        (repaired if normal in dia_index else dropped).append(normal)
    if not repaired:
        warnings.append(f"{label}: evidence {raw!r} dropped (no such turn)")
    elif not dropped:
        warnings.append(f"{label}: evidence {raw!r} repaired to {', '.join(repaired)}")
    else:
        warnings.append(
            f"{label}: evidence {raw!r} repaired to {', '.join(repaired)}; "
            f"dropped {', '.join(dropped)} (no such turn)"
        )
    return [dia_index[d] for d in repaired]


# --- field checks ---------------------------------------------------------------------------


def show_value(value: Any) -> str:
    """A short, one-line picture of a bad value for an error message."""
    if value is None or isinstance(value, (str, int, float, bool)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a {type(value).__name__}"


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def required_field(obj: dict[str, Any], key: str, where: Where, name: str) -> Any:
    if key not in obj:
        raise where.error(name, "missing")
    return obj[key]


def object_of(value: Any, where: Where, name: str | None, expected: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise where.error(name, f"must be {expected} (JSON object), got {show_value(value)}")
    return value


def list_of(value: Any, where: Where, name: str | None) -> list[Any]:
    if not isinstance(value, list):
        raise where.error(name, f"must be a list, got {show_value(value)}")
    return value


def _string(value: Any, where: Where, name: str, expected: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.error(name, f"must be {expected}, got {show_value(value)}")
    return storable_text(value, where, name)


def storable_text(value: str, where: Where, name: str) -> str:
    """Text the store can hold: no lone surrogate (a JSON ``"\\ud800"``) and no NUL."""
    if problem := text_problem(value):
        raise where.error(name, problem)
    return value


def checked_conversation_id(value: str, where: Where, name: str) -> str:
    """An id a listing can show on one line: printable, no control characters (see localpager.core.checks)."""
    if problem := id_problem(value):
        raise where.error(name, f"conversation id {show_value(value)} {problem}")
    return value


def required_string(obj: dict[str, Any], key: str, where: Where, parent: str = "") -> str:
    name = f"{parent}.{key}" if parent else key
    return _string(required_field(obj, key, where, name), where, name)


def optional_string(value: Any, where: Where, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise where.error(name, f"must be a string or null, got {show_value(value)}")
    return storable_text(value, where, name)


def checked_turn_index(value: Any, n_turns: int, where: Where, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise where.error(name, f"must be a turn index (integer), got {show_value(value)}")
    if not 0 <= value < n_turns:
        raise where.error(
            name, f"turn index {value} out of range: the conversation has turns 0..{n_turns - 1}"
        )
    return value


def no_unknown_keys(
    obj: dict[str, Any], known: set[str], where: Where, prefix: str, hint: str = ""
) -> None:
    """Reject unknown keys so a typo ('probe' for 'probes') is not silently ignored."""
    unknown = sorted(set(obj) - known)
    if unknown:
        message = f"unknown field (known: {', '.join(sorted(known))})"
        raise where.error(prefix + unknown[0], message + (f"; {hint}" if hint else ""))

