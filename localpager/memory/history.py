"""A chat history from another service brought into the store: ChatGPT's or Claude's export, or a message list.

The file is read twice, each time as a stream (``store.exports``): the first pass reads every conversation to the
file's end, so a truncated or foreign file stores nothing and the bar knows the totals; the second stores. One
conversation that cannot be read is left out with a warning naming it; the rest are stored, each as ``ingest``
stores a conversation (paged, standing facts, bookmarks) and under the ``--user`` whose history it is.

Importing again is safe, since people download a fresh export now and then: a conversation already stored (the
same stable id) is continued with the messages the export has past the stored ones, appended as a chat's new
turns are, so nothing stored is paged again; the same file adds nothing. ChatGPT's custom instructions (what the
person says about themselves) become one conversation of their own, a turn for each version in time order, so
the newest version is the newest statement.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from ..core.checks import MAX_ID_LENGTH
from ..core.dates import parse_time
from ..core.pager import PagingConfig
from ..core.records import Transcript, Turn
from ..store.base import Store, check_owners, check_user
from ..store.export_formats import ExportedConversation, Profile, SkippedConversation
from ..store.exports import EXPECTED, ExportSource
from ..store.loaders import ConversationFileError
from .conversation import Conversation
from .held import Held
from .ingest import IngestOptions, IngestReport, store_transcript

PROFILE_ID = "chatgpt-custom-instructions"  # the conversation of a user's custom instructions (+ "-" + user)
PROFILE_TITLE = "ChatGPT custom instructions"
_EARLIEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass
class _Survey:
    """What the first pass found: the ids to store (the first conversation of each id that has text), the
    number of turns they hold, the custom instructions seen, and a warning for each conversation left out."""

    ids: set[str] = field(default_factory=set)
    named: dict[str, Turn] = field(default_factory=dict)  # ids named after the file (no id of their own): 1st turn
    turns: int = 0
    profiles: list[Profile] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def import_history(held: Held, source: ExportSource, options: IngestOptions) -> IngestReport:
    """Store every readable conversation of ``source`` (see ``LocalPager.ingest``) as ``options.user``'s; one
    stored before is continued (or, with ``options.replace``, replaced by the export's)."""
    user = options.user if options.user is None else check_user(options.user)
    survey = _survey(source, options)
    profile = _profile_transcript(survey.profiles, user, source.name)
    if not survey.ids and profile is None:
        raise ConversationFileError(source.name, "holds no conversation with user or assistant text: expected "
                                                 f"{EXPECTED[source.format]}")
    store = held.store
    renamed = _apart(store, survey, source.name)
    survey.ids = {renamed.get(conv_id, conv_id) for conv_id in survey.ids}
    wanted = survey.ids | ({profile.id} if profile else set())
    taken = {conv_id for conv_id in wanted if store.has_conversation(conv_id)}
    check_owners(store, [(conv_id, user) for conv_id in sorted(taken)])  # before anything is written
    config, counter = options.config or PagingConfig(), held.models.counter()
    report = IngestReport(warnings=survey.warnings)
    replaced: list[str] = []
    progress = _Progress(options, len(survey.ids), survey.turns)
    for item in source.conversations():
        if not isinstance(item, ExportedConversation):
            continue  # left out, with the survey's warning
        conv = item.transcript
        if conv.id in renamed:
            new = renamed.pop(conv.id)
            if new not in taken:  # said once, when it is first stored apart; later imports continue it quietly
                report.warnings.append(f"{source.name}: conversation {item.name} is not the stored {conv.id!r}, "
                                       f"which came from another file: stored as {new!r}")
            conv = replace(conv, id=new)
        if conv.id not in survey.ids:
            continue  # left out, with the survey's warning
        survey.ids.discard(conv.id)  # a later conversation with the same id was left out by the survey
        if conv.id in taken and not options.replace:
            _continue(held, conv, item.name, report)
        else:
            store_transcript(held, conv, conv.turns, source.name, config, counter, replace=conv.id in taken,
                             user=user, report=report, embed=options.embed)
            replaced += [conv.id] if conv.id in taken else []
        progress.stored(len(conv.turns))
    if profile is not None:
        if profile.id in taken:
            _continue_profile(held, profile, report)
        else:
            store_transcript(held, profile, profile.turns, source.name, config, counter, replace=False, user=user,
                             report=report, embed=options.embed)
    if replaced:  # what was replaced is erased from the files, as an import's replace is
        store.erase()
        held.after_erase()
        held.invalidate(replaced)
    return report


def _survey(source: ExportSource, options: IngestOptions) -> _Survey:
    """The first pass: every conversation read, none stored; the file's errors raise here."""
    survey = _Survey()
    n = 0
    for n, item in enumerate(source.conversations(), start=1):
        if isinstance(item, SkippedConversation):
            survey.warnings.append(f"{source.name}: conversation {item.name} left out: {item.reason}")
            continue
        survey.profiles += item.profiles
        conv = item.transcript
        if not conv.turns:
            survey.warnings.append(f"{source.name}: conversation {item.name} left out: no user or assistant text")
        elif conv.id in survey.ids:
            survey.warnings.append(f"{source.name}: conversation {item.name} left out: a conversation before it "
                                   f"has the same id ({conv.id})")
        else:
            survey.ids.add(conv.id)
            survey.turns += len(conv.turns)
            if conv.meta.get("export") == "messages" and "export_id" not in conv.meta:
                survey.named[conv.id] = conv.turns[0]
        if options.on_conversations is not None:
            options.on_conversations("read", n, n)
    return survey


def _apart(store: Store, survey: _Survey, source: str) -> dict[str, str]:
    """New ids for the conversations named after their file (a message list with no id of its own: ``stem``) whose
    name a stored conversation of another file already has: two folders' ``messages.json`` are two conversations.
    A stored one is another file's when its first turn differs and it came from another path; the next free
    ``stem-N`` is taken then (the same one on the next import: it continues there). Same path, first turn
    different: the file was edited since, and ``_continue`` says so."""
    renamed: dict[str, str] = {}
    used = set(survey.ids)
    for conv_id, first in sorted(survey.named.items()):
        new, n = conv_id, 1
        while store.has_conversation(new) and _another_files(store, new, first, source):
            n += 1
            new = f"{conv_id}-{n}"
            while new in used:
                n += 1
                new = f"{conv_id}-{n}"
        if new != conv_id:
            renamed[conv_id] = new
            used.add(new)
    return renamed


def _another_files(store: Store, conv_id: str, first: Turn, source: str) -> bool:
    stored = store.turns(conv_id)
    if not stored or (stored[0].role == first.role and (not stored[0].text or stored[0].text == first.text)):
        return False  # the same conversation, grown or not (a forgotten first turn matches anything)
    return store.conversation_record(conv_id)["source"] != source


def _continue(held: Held, conv: Transcript, name: str, report: IngestReport) -> None:
    """Append the turns the export has past the stored ones, if the stored ones are its first turns (a forgotten
    turn matches anything); a conversation that differs is kept as stored, with a warning."""
    stored = held.store.turns(conv.id)
    differs = next((a.index for a, b in zip(stored, conv.turns) if a.role != b.role or (a.text and a.text != b.text)),
                   None)
    if differs is not None:
        report.warnings.append(f"conversation {name} ({conv.id}) differs from the stored one at turn {differs} "
                               "(edited since it was imported?): kept as stored; --replace takes the export's")
        report.unchanged += 1
        return
    new = conv.turns[len(stored):]
    if not new:
        report.unchanged += 1
        return
    chat = Conversation(held, conv.id)
    for turn in new:
        chat.add_turn(turn.role, turn.text, turn.time, stamp=False)
    report.turns += len(new)
    report.continued.append(conv.id)
    report.ids.append(conv.id)


# --- custom instructions ----------------------------------------------------------------------------------------


def _profile_transcript(profiles: list[Profile], user: str | None, source: str) -> Transcript | None:
    """One conversation of the user's custom instructions: each version once, oldest first, as the user's turns."""
    versions: list[Profile] = []
    for profile in sorted(profiles, key=_when):
        if not versions or versions[-1].text != profile.text:
            versions.append(profile)
    if not versions:
        return None
    turns = [Turn("user", p.text, i, time=p.time) for i, p in enumerate(versions)]
    return Transcript(profile_id(user), turns, source=source, meta={"export": "chatgpt", "title": PROFILE_TITLE})


def profile_id(user: str | None) -> str:
    """The id of ``user``'s custom-instructions conversation (a digest of a name too long to follow it)."""
    if user is None:
        return PROFILE_ID
    conv_id = f"{PROFILE_ID}-{user}"
    return conv_id if len(conv_id) <= MAX_ID_LENGTH else f"{PROFILE_ID}-{hashlib.sha256(user.encode()).hexdigest()[:16]}"


def _continue_profile(held: Held, profile: Transcript, report: IngestReport) -> None:
    """Append the versions newer than the stored newest one: those after it in the export, or, when the export
    does not hold it, those from a later time."""
    stored = held.store.turns(profile.id)
    latest = next((t for t in reversed(stored) if t.text), None)
    versions = profile.turns
    if latest is not None:
        same = [i for i, t in enumerate(versions) if t.text == latest.text]
        newer = _when(Profile(latest.text, latest.time))
        versions = versions[same[-1] + 1:] if same else [t for t in versions if _when(Profile(t.text, t.time)) > newer]
    if not versions:
        report.unchanged += 1
        return
    chat = Conversation(held, profile.id)
    for turn in versions:
        chat.add_turn("user", turn.text, turn.time, stamp=False)
    report.turns += len(versions)
    report.continued.append(profile.id)
    report.ids.append(profile.id)


def _when(profile: Profile) -> datetime:
    moment = parse_time(profile.time)
    if moment is None:
        return _EARLIEST
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class _Progress:
    """The second pass's progress: conversations and turns stored, told to the caller's hooks."""

    def __init__(self, options: IngestOptions, conversations: int, turns: int):
        self.options, self.total, self.total_turns = options, conversations, turns
        self.done = self.done_turns = 0

    def stored(self, turns: int) -> None:
        self.done += 1
        self.done_turns += turns
        if self.options.on_conversations is not None:
            self.options.on_conversations("store", self.done, self.total)
        if self.options.on_turns is not None:
            self.options.on_turns(self.done_turns, self.total_turns)
