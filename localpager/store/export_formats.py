"""What one conversation of an export from another service holds, as a :class:`Transcript`.

Only what the person saw and said becomes a turn, so that the memory holds their history and not the service's
machinery: user and assistant text. ChatGPT keeps every edited or regenerated message as a branch of a tree;
only the path from the root to ``current_node`` (what the person last saw) is kept, so an abandoned draft never
reaches the store. Hidden system messages, tool and browsing traffic, code runs, reasoning and image pointers are
left out; the text parts of a ``multimodal_text`` message stay. ChatGPT's custom instructions
(``user_editable_context``: ``user_profile``) are the person's own statements about themselves: they are handed
back as a ``Profile``, not as a turn of the chat they were attached to (the person never wrote them there).

Every turn gets its message's own time (ChatGPT: epoch seconds; Claude: ISO 8601), in local time with its
offset as ``core.dates.now_stamp`` writes it, so "yesterday" said in a chat of 3 March 2024 means 2 March.
Ids are stable, made from the export's own conversation id, so importing again finds the same conversations.
A conversation that cannot be read is a ``SkippedConversation`` saying why, never an error for the whole file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import partial
from typing import Any, Callable

from ..core.checks import id_problem, text_problem
from ..core.records import ROLES, Transcript, Turn

CHATGPT_TEXT = ("text", "multimodal_text")  # the content types that are what was written or said
SPOKEN = "audio_transcription"  # a part of a multimodal_text message: the text of what was said aloud
CUSTOM_INSTRUCTIONS = "user_editable_context"
CLAUDE_ROLES = {"human": "user", "assistant": "assistant"}
CLAUDE_ROOT = "00000000-0000-4000-8000-000000000000"  # the parent_message_uuid of a first message
FENCE = "```"


@dataclass(frozen=True)
class Profile:
    """What a person told ChatGPT about themselves in its custom instructions, and from when."""

    text: str
    time: str | None


@dataclass
class ExportedConversation:
    """One conversation of an export: its ``transcript`` (id, turns, and ``meta``: title, export, export_id) and
    the custom instructions seen in it."""

    transcript: Transcript
    name: str  # how a message names it: its position, title and the export's id
    profiles: list[Profile] = field(default_factory=list)


@dataclass(frozen=True)
class SkippedConversation:
    """A conversation of an export that could not be read, and why: it is left out, the rest are read."""

    name: str
    reason: str


class _Unreadable(ValueError):
    """Why one conversation cannot be read (becomes a ``SkippedConversation``)."""


# --- ChatGPT ----------------------------------------------------------------------------------------------------


def chatgpt_conversation(obj: Any, position: int, path: str) -> ExportedConversation | SkippedConversation:
    """One conversation of ChatGPT's ``conversations.json`` (the ``position``-th of file ``path``)."""
    return _or_skipped(_chatgpt, obj, _name(obj, position, "title", ("conversation_id", "id")), path)


def _chatgpt(obj: Any, name: str, path: str) -> ExportedConversation:
    if not isinstance(obj, dict):
        raise _Unreadable("not a conversation (JSON object)")
    raw_id = obj.get("conversation_id") or obj.get("id")
    conv_id = _stable_id("chatgpt", raw_id)
    mapping = obj.get("mapping")
    if not isinstance(mapping, dict):
        raise _Unreadable("no message tree ('mapping' is not an object)")
    started = stamp(obj.get("create_time"))
    turns: list[Turn] = []
    profiles: list[Profile] = []
    last = started
    for node_id, node in _visible_path(mapping, obj.get("current_node")):
        message = node.get("message")
        if not isinstance(message, dict):
            continue  # the root: no message
        last = stamp(message.get("create_time")) or last
        content = message.get("content") if isinstance(message.get("content"), dict) else {}
        kind = content.get("content_type")
        if kind == CUSTOM_INSTRUCTIONS:
            if text := profile_text(content.get("user_profile")):
                profiles.append(Profile(text, last or started))
            continue
        metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
        role = (message.get("author") or {}).get("role") if isinstance(message.get("author"), dict) else None
        if (metadata.get("is_visually_hidden_from_conversation") or role not in ROLES or kind not in CHATGPT_TEXT
                or message.get("recipient", "all") not in ("all", None)):
            continue  # hidden, system or tool, code, browsing, reasoning, or addressed to a tool
        text = _chatgpt_parts(content.get("parts"))
        if text:
            turns.append(Turn(role, _storable(text, node_id), len(turns), time=last))
    title = obj.get("title") if isinstance(obj.get("title"), str) else None
    return ExportedConversation(_transcript(conv_id, turns, path, title, "chatgpt", raw_id), name, profiles)


def _visible_path(mapping: dict[str, Any], current: Any) -> list[tuple[str, dict[str, Any]]]:
    """The nodes from the root to ``current`` (what the person last saw), root first; the other branches (edited
    or regenerated messages) are never visited."""
    if not isinstance(current, str) or current not in mapping:
        raise _Unreadable("'current_node' names no message of its 'mapping'")
    path, seen, node_id = [], set(), current
    while node_id is not None:
        if node_id in seen:
            raise _Unreadable("its message tree loops back on itself")
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, dict):
            raise _Unreadable(f"message {node_id!r} has a parent missing from its 'mapping'")
        path.append((node_id, node))
        node_id = node.get("parent")
    return path[::-1]


def _chatgpt_parts(parts: Any) -> str:
    """The text of a message's parts: strings, and the text of a spoken part; image and file pointers are left."""
    if not isinstance(parts, list):
        return ""
    texts = [p if isinstance(p, str) else p.get("text") if isinstance(p, dict) and p.get("content_type") == SPOKEN
             else None for p in parts]
    return "\n\n".join(t.strip() for t in texts if isinstance(t, str) and t.strip())


def profile_text(value: Any) -> str | None:
    """The person's own words in a custom-instructions field: ChatGPT wraps them in a preamble of its own and a
    code fence; without a fence the field is taken whole."""
    if not isinstance(value, str):
        return None
    start, end = value.find(FENCE), value.rfind(FENCE)
    text = value[start + len(FENCE):end] if 0 <= start < end else value
    return text.strip() or None


# --- Claude -----------------------------------------------------------------------------------------------------


def claude_conversation(obj: Any, position: int, path: str) -> ExportedConversation | SkippedConversation:
    """One conversation of Claude's ``conversations.json`` (the ``position``-th of file ``path``)."""
    return _or_skipped(_claude, obj, _name(obj, position, "name", ("uuid",)), path)


def _claude(obj: Any, name: str, path: str) -> ExportedConversation:
    if not isinstance(obj, dict):
        raise _Unreadable("not a conversation (JSON object)")
    raw_id = obj.get("uuid")
    conv_id = _stable_id("claude", raw_id)
    messages = obj.get("chat_messages")
    if not isinstance(messages, list):
        raise _Unreadable("'chat_messages' is not a list")
    turns: list[Turn] = []
    last = stamp(obj.get("created_at"))
    for message in _claude_path([m for m in messages if isinstance(m, dict)]):
        last = stamp(message.get("created_at")) or last
        role = CLAUDE_ROLES.get(message.get("sender"))
        text = _claude_text(message)
        if role and text:
            turns.append(Turn(role, _storable(text, message.get("uuid")), len(turns), time=last))
    title = obj.get("name") if isinstance(obj.get("name"), str) else None
    return ExportedConversation(_transcript(conv_id, turns, path, title, "claude", raw_id), name)


def _claude_path(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages from the first to the last one of the list, following ``parent_message_uuid`` when every
    message has one (an export with edited messages holds their branches); the list as it is otherwise."""
    if not messages or not all(isinstance(m.get("parent_message_uuid"), str) for m in messages):
        return messages
    by_id = {m.get("uuid"): m for m in messages}
    path, seen, message = [], set(), messages[-1]
    while message is not None and id(message) not in seen:
        seen.add(id(message))
        path.append(message)
        parent = message["parent_message_uuid"]
        message = None if parent == CLAUDE_ROOT else by_id.get(parent)
    return path[::-1]


def _claude_text(message: dict[str, Any]) -> str:
    """The text blocks of ``content`` (tool use, tool results and thinking are left), or ``text`` without them."""
    content = message.get("content")
    if isinstance(content, list) and content:
        blocks = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n\n".join(t.strip() for t in blocks if isinstance(t, str) and t.strip())
    text = message.get("text")
    return text.strip() if isinstance(text, str) else ""


# --- OpenAI-style message lists ---------------------------------------------------------------------------------


def message_list_conversation(value: Any, position: int, path: str, stem: str
                              ) -> ExportedConversation | SkippedConversation:
    """A list of ``{"role", "content"}`` messages, or ``{"messages": [...]}`` (with an optional ``id`` and
    ``title``): the ``position``-th conversation of file ``path``. Without an id it is named after the file
    (``stem``; ``stem-2``, ``stem-3`` for the next ones), which stays the same when the file grows."""
    holder = value if isinstance(value, dict) else {}
    return _or_skipped(partial(_message_list, position=position, stem=stem), value,
                       _name(holder, position, "title", ("id", "conversation_id")), path)


def _message_list(value: Any, name: str, path: str, *, position: int, stem: str) -> ExportedConversation:
    holder = value if isinstance(value, dict) else {}
    messages = holder.get("messages") if isinstance(value, dict) else value
    if not isinstance(messages, list):
        raise _Unreadable("'messages' is not a list")
    raw_id = holder.get("id") or holder.get("conversation_id")
    own = stem if id_problem(stem) is None else "messages"
    conv_id = _stable_id(None, raw_id) if raw_id else (own if position == 1 else f"{own}-{position}")
    turns: list[Turn] = []
    last = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _Unreadable(f"message {i} is not a JSON object")
        last = stamp(message.get("created_at", message.get("timestamp", message.get("time")))) or last
        text = _message_text(message.get("content"))
        if message.get("role") in ROLES and text:
            turns.append(Turn(message["role"], _storable(text, i), len(turns), time=last))
    title = holder.get("title") if isinstance(holder.get("title"), str) else None
    return ExportedConversation(_transcript(conv_id, turns, path, title, "messages", raw_id), name)


def _message_text(content: Any) -> str:
    """A message's ``content``: a string, or parts of which those with text count (``text``, ``input_text``...)."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    texts = [p.get("text") for p in content if isinstance(p, dict) and str(p.get("type", "text")).endswith("text")]
    return "\n\n".join(t.strip() for t in texts if isinstance(t, str) and t.strip())


# --- shared -----------------------------------------------------------------------------------------------------


def stamp(value: Any) -> str | None:
    """A message's time as a turn's: epoch seconds or ISO 8601 (a time without an offset is UTC, as both services
    write them) in local time with its offset, to the second; None for a time that is missing or unreadable."""
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, timezone.utc)
        elif isinstance(value, str) and value.strip():
            moment = datetime.fromisoformat(value.strip())
            moment = moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
        else:
            return None
        return moment.astimezone().isoformat(timespec="seconds")
    except (ValueError, OverflowError, OSError):
        return None


def _stable_id(prefix: str | None, raw: Any) -> str:
    """The stored id of an export's conversation: the export's own id, after the service's name."""
    if not isinstance(raw, str) or not raw.strip():
        raise _Unreadable("no conversation id")
    conv_id = f"{prefix}-{raw}" if prefix else raw
    if problem := id_problem(conv_id):
        raise _Unreadable(f"its id {raw!r} cannot name a conversation: it {problem}")
    return conv_id


def _storable(text: str, where: Any) -> str:
    if problem := text_problem(text):
        raise _Unreadable(f"message {where}: its text {problem}")
    return text


def _transcript(conv_id: str, turns: list[Turn], path: str, title: str | None, export: str,
                raw_id: Any) -> Transcript:
    meta = {"export": export, "export_id": raw_id}
    if title and title.strip() and text_problem(title) is None:
        meta["title"] = title.strip()
    return Transcript(conv_id, turns, source=path, meta={k: v for k, v in meta.items() if v is not None})


def _or_skipped(read: Callable[[Any, str, str], ExportedConversation], obj: Any, name: str, path: str
                ) -> ExportedConversation | SkippedConversation:
    """``read(obj, name, path)``, or the conversation ``name`` skipped with why it cannot be read: one bad
    conversation in a good export is left out with a warning, not the export."""
    try:
        return read(obj, name, path)
    except _Unreadable as exc:
        return SkippedConversation(name, str(exc))


def _name(obj: Any, position: int, title_key: str, id_keys: tuple[str, ...]) -> str:
    """``#3 'Trip to Lisbon' (id)``: how a warning names a conversation, with what of it can be read."""
    if not isinstance(obj, dict):
        return f"#{position}"
    title = obj.get(title_key)
    raw_id = next((obj[k] for k in id_keys if isinstance(obj.get(k), str) and obj[k]), None)
    shown = f"#{position}" + (f" {title.strip()[:60]!r}" if isinstance(title, str) and title.strip() else "")
    return shown + (f" ({raw_id[:60]})" if raw_id else "")
