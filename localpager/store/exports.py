"""Chat histories exported from other services, found by content and read as a stream.

People bring years of conversations from ChatGPT or Claude: each service's export is a ``.zip`` holding a
``conversations.json`` that can be hundreds of MB. It is read one conversation at a time with ``ijson``, never
loaded whole, so memory stays bounded by the largest single conversation. What one conversation of each format
means (which messages are kept) is ``export_formats``; this module finds the file (a ``.zip`` as downloaded, the
unzipped folder, the JSON itself, or an OpenAI-style message list as JSON or JSONL), tells the format by the
keys of its first conversation (both services name the file the same), and turns a broken stream into one
:class:`~localpager.store.loaders.ConversationFileError` naming the file and what was expected.
"""

from __future__ import annotations

import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import IO, Any, Iterator

from .choices import FileFormat
from .export_formats import (
    ExportedConversation,
    SkippedConversation,
    chatgpt_conversation,
    claude_conversation,
    message_list_conversation,
)
from .loaders import ConversationFileError, Where

EXPORT_FILE = "conversations.json"  # the name both services give the file inside their export


class ExportFormat(StrEnum):
    """A chat history from another service, told apart by content (``find_export``)."""

    CHATGPT = "chatgpt"  # ChatGPT's conversations.json: message trees (mapping, current_node)
    CLAUDE = "claude"  # Claude's conversations.json: chat_messages with sender human/assistant
    MESSAGES = "messages"  # an OpenAI-style message list: [{"role", "content"}] or {"messages": [...]}, JSON or JSONL


EXPECTED = {
    ExportFormat.CHATGPT: "a ChatGPT export (a JSON list of conversations with 'mapping' and 'current_node')",
    ExportFormat.CLAUDE: "a Claude export (a JSON list of conversations with 'chat_messages')",
    ExportFormat.MESSAGES: "a message list ([{\"role\", \"content\"}] or {\"messages\": [...]}, JSON or JSONL)",
}
# the first key of the first conversation (prefix "item": in a JSON list; "": a top-level object, one a line in
# JSONL) that tells the file's format; the interchange and LoCoMo keys say "not an export" (loaders reads those)
_TELLING = {
    "item": {"mapping": ExportFormat.CHATGPT, "current_node": ExportFormat.CHATGPT,
             "chat_messages": ExportFormat.CLAUDE, "role": ExportFormat.MESSAGES, "messages": ExportFormat.MESSAGES,
             "qa": FileFormat.LOCOMO, "sample_id": FileFormat.LOCOMO, "conversation": FileFormat.LOCOMO},
    "": {"role": ExportFormat.MESSAGES, "messages": ExportFormat.MESSAGES,
         "turns": FileFormat.JSONL, "probes": FileFormat.JSONL, "localpager": FileFormat.JSONL},
}


@dataclass(frozen=True)
class ExportSource:
    """Where an export's conversations are: ``path`` as the user named it, ``member`` the file inside a ``.zip``
    or folder (None: ``path`` itself), and its ``format``. Opened afresh for each pass over it."""

    path: str
    format: ExportFormat
    member: str | None = None

    @property
    def name(self) -> str:
        """The file as messages name it (``export.zip:conversations.json``)."""
        return f"{self.path}:{self.member}" if self.member and Path(self.path).suffix == ".zip" else (
            str(Path(self.path) / self.member) if self.member else self.path)

    @contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with open(self.path, "rb") as f:
                yield f
        elif Path(self.path).is_dir():
            with open(Path(self.path) / self.member, "rb") as f:
                yield f
        else:
            with zipfile.ZipFile(self.path) as archive, archive.open(self.member) as f:
                yield f

    def conversations(self) -> Iterator[ExportedConversation | SkippedConversation]:
        """Every conversation of the export, in file order, read as a stream; one that cannot be read is a
        ``SkippedConversation`` saying why. A file that breaks off (truncated) or is not of its format raises a
        ``ConversationFileError`` when the stream reaches the break."""
        import ijson

        where = Where(self.name)
        count = 0
        try:
            with self.open() as f:
                if self.format == ExportFormat.MESSAGES:
                    yield from _message_lists(ijson.items(f, "", multiple_values=True, use_float=True),
                                              self.name, Path(self.path).stem)
                    return
                read = chatgpt_conversation if self.format == ExportFormat.CHATGPT else claude_conversation
                for count, obj in enumerate(ijson.items(f, "item", use_float=True), start=1):
                    yield read(obj, count, self.name)
        except ijson.IncompleteJSONError as exc:
            raise where.error(None, f"ends before its JSON does (truncated?) after {count} conversations: "
                                    f"expected {EXPECTED[self.format]}") from exc
        except ijson.JSONError as exc:
            raise where.error(None, f"invalid JSON after {count} conversations ({_short(exc)}): "
                                    f"expected {EXPECTED[self.format]}") from exc
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise where.error(None, f"cannot be read ({_short(exc)}): expected {EXPECTED[self.format]}") from exc


def find_export(path: str | Path) -> ExportSource | None:
    """The export at ``path`` (a ``.zip``, a folder holding ``conversations.json``, or a file), or None when the
    file is something ``loaders`` reads (localpager's JSONL, LoCoMo) or nothing recognisable (``loaders`` then
    says what it expected). A ``.zip`` or folder without an export in it is an error naming what was expected."""
    p = Path(path)
    if p.is_dir():
        member = EXPORT_FILE if (p / EXPORT_FILE).is_file() else None
        if member is None:
            raise ConversationFileError(path, f"is a folder without {EXPORT_FILE}: expected an unzipped ChatGPT "
                                              "or Claude export, or a conversation file")
        return _told(ExportSource(str(path), ExportFormat.CHATGPT, member), p / member)
    if not p.is_file():
        return None  # loaders says "no such file"
    with open(p, "rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"
    if zipped:
        return _zipped(p)
    with open(p, "rb") as f:
        told = sniff(f)
    return ExportSource(str(path), told) if isinstance(told, ExportFormat) else None


def _zipped(p: Path) -> ExportSource:
    try:
        with zipfile.ZipFile(p) as archive:
            names = [n for n in archive.namelist() if n == EXPORT_FILE or n.endswith("/" + EXPORT_FILE)]
            if not names:
                raise ConversationFileError(p, f"is a zip without {EXPORT_FILE}: expected a ChatGPT or Claude "
                                               "export as downloaded")
            member = min(names, key=len)
            with archive.open(member) as f:
                told = sniff(f)
    except zipfile.BadZipFile as exc:
        raise ConversationFileError(p, f"is not a readable zip ({_short(exc)}): expected a ChatGPT or Claude "
                                       "export as downloaded") from exc
    return _known(ExportSource(str(p), ExportFormat.CHATGPT, member), told)


def _told(source: ExportSource, file: Path) -> ExportSource:
    with open(file, "rb") as f:
        return _known(source, sniff(f))


def _known(source: ExportSource, told: FileFormat | ExportFormat | None) -> ExportSource:
    """``source`` with the format its ``conversations.json`` has, which must be one of the two services'."""
    if told not in (ExportFormat.CHATGPT, ExportFormat.CLAUDE):
        raise ConversationFileError(source.name, "is neither a ChatGPT nor a Claude conversations.json: expected "
                                                 f"{EXPECTED[ExportFormat.CHATGPT]} or {EXPECTED[ExportFormat.CLAUDE]}")
    return ExportSource(source.path, told, source.member)


def sniff(stream: IO[bytes]) -> FileFormat | ExportFormat | None:
    """The format the first conversation's keys tell (see ``_TELLING``), read as a stream up to the first key that
    tells; None when the first conversation ends (or the file breaks off) without one."""
    import ijson

    try:
        for prefix, event, value in ijson.parse(stream, multiple_values=True):
            if event == "map_key" and prefix in _TELLING:
                told = _TELLING[prefix].get(value)
                if told is not None:
                    return told
            elif event == "end_map" and prefix in _TELLING:
                return None
            elif prefix == "" and event not in ("start_array", "start_map", "map_key"):
                return None  # a scalar, or a list of something other than objects
            elif prefix == "item" and event not in ("start_map", "map_key", "end_map"):
                return None
    except (ijson.JSONError, UnicodeDecodeError, ValueError):
        return None
    return None


def _message_lists(values: Iterator[Any], path: str, stem: str) -> Iterator[ExportedConversation | SkippedConversation]:
    """The conversations of a message-list file: each top-level list or ``{"messages": [...]}`` is one, and a
    run of top-level messages (JSONL, one a line) is one; ids come from the file's name when none is given."""
    loose: list[Any] = []
    count = 0
    for value in values:
        if isinstance(value, dict) and "messages" not in value:
            loose.append(value)
            continue
        count += 1
        yield message_list_conversation(value, count, path, stem)
    if loose:
        yield message_list_conversation(loose, count + 1, path, stem)
    elif count == 0:
        raise Where(path).error(None, f"holds no messages: expected {EXPECTED[ExportFormat.MESSAGES]}")


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


__all__ = ["EXPORT_FILE", "ExportFormat", "ExportSource", "find_export", "sniff"]
