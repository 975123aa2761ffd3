"""What the OpenAI-compatible server decides before any model runs, kept apart from the web framework:
errors in OpenAI's shape, which conversation a request names, how a client's resent history lines up with
the stored conversation (``reconcile``), and whether an address is loopback. Imports nothing heavy, so the
logic is tested (and usable) without the ``server`` extra.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

CONVERSATION_HEADERS = ("x-conversation-id", "x-openwebui-chat-id")


class ApiError(ValueError):
    """An error answered in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param

    def body(self) -> dict:
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict:
    return {"error": {"message": " ".join(message.split()), "type": type, "param": param, "code": code}}


def check_conversation_id(value: str, source: str) -> str:
    """A conversation id from a client: 1-200 visible characters, no slash (it goes into URLs)."""
    value = value.strip()
    if not value or len(value) > 200 or any(c.isspace() or c in "/\\" or not c.isprintable() for c in value):
        raise ApiError(400, f"{source} must be 1-200 visible characters without spaces or slashes",
                       code="invalid_conversation_id", param=source)
    return value


def resolve_conversation_id(headers: Mapping[str, str], body: dict[str, Any],
                            default: str | None = None) -> str:
    """Which conversation a request belongs to: the ``X-Conversation-Id`` header, else
    ``X-OpenWebUI-Chat-Id``, else the body's ``metadata.conversation_id``, else its ``user``, else the
    server's default; none of these is a 400 that says what to send."""
    for name in CONVERSATION_HEADERS:
        if value := headers.get(name):
            return check_conversation_id(value, name)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("conversation_id"), str) and metadata["conversation_id"]:
        return check_conversation_id(metadata["conversation_id"], "metadata.conversation_id")
    if isinstance(body.get("user"), str) and body["user"]:
        return check_conversation_id(body["user"], "user")
    if default:
        return default
    raise ApiError(400, "no conversation named: send the header X-Conversation-Id (or X-OpenWebUI-Chat-Id), "
                        "or metadata.conversation_id or user in the body", code="missing_conversation_id",
                   param="X-Conversation-Id")


@dataclass(frozen=True)
class Msg:
    """One user or assistant message, compared by role and whitespace-normalised text."""

    role: str
    text: str

    @property
    def key(self) -> tuple[str, str]:
        return self.role, " ".join(self.text.split())


@dataclass
class Reconciliation:
    """What to do with a client's history: ``status`` is ``in-sync`` (the store has all of it),
    ``appended`` (the store lacked its last ``len(new)`` turns) or ``diverged`` (it disagrees with the
    store, which wins: nothing of it is stored); ``matched`` is how many client turns matched."""

    status: str
    new: list[Msg] = field(default_factory=list)
    matched: int = 0


def reconcile(stored: Sequence[Msg], client: Sequence[Msg]) -> Reconciliation:
    """Match the client's history (before its question) against the stored conversation's tail.

    The client's turns, from their start, must be the store's last turns (a client may send a trailing
    window; a turn forgotten in the store matches whatever the client still shows of it, and stays
    forgotten); whatever follows them is new and is appended. Anything else has diverged (an edited or
    foreign history): the store is the truth and no turn of it is stored, so no turn is ever duplicated.
    """
    if not client:
        return Reconciliation("in-sync")
    if not stored:
        return Reconciliation("appended", list(client))
    stored_keys = [m.key for m in stored]
    client_keys = [m.key for m in client]

    def same(a: tuple[str, str], b: tuple[str, str]) -> bool:  # a forgotten turn (no text) stays forgotten
        return a == b or (a[0] == b[0] and not a[1])

    for j in range(min(len(client), len(stored)), 0, -1):  # the longest overlap first
        if all(same(x, y) for x, y in zip(stored_keys[-j:], client_keys[:j])):
            new = list(client[j:])
            return Reconciliation("appended" if new else "in-sync", new, j)
    return Reconciliation("diverged")


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, or the text parts of a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost: it may resolve anywhere


def check_bind(host: str, allow_remote: bool) -> str | None:
    """Refuse a non-loopback address unless ``allow_remote``; the warning to print when it is allowed."""
    if is_loopback(host):
        return None
    if not allow_remote:
        raise ValueError(f"refusing to serve on {host}: it is reachable from other machines and your "
                         "conversations are private; use --allow-remote (with --api-key) if you mean it")
    return (f"warning: serving on {host}, reachable from other machines; anyone who can reach it can use the "
            "model and read your conversations unless --api-key is set")
