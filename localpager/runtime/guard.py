"""Stopping degenerate answers: a small model that repeats itself until its token limit, or turn after turn.

Greedy decoding of a 135M model loops: a sentence ("That's a great question. In your conversation, I
was referring to …" again and again) or a phrase inside one ("Mali, Morocco, Morocco, Morocco, …",
"I'm so glad you're here, I'm so glad you're here, …"). The guard watches the streamed text and stops
the generation as soon as a sentence comes round a second time, or the same run of words a third
time in a row; the answer keeps everything before the repeat. It passes text on word by word, holding
back only what a repeat could still cut off, so a streaming client sees what the answer keeps, as it
is generated.

A model answering from its own prompt also copies how a fact answer opens ("You told me: ...", the replies
before it) and then quotes what nobody said; given that opening (``claims``), the guard holds an answer back while
it may still begin so and says when it did (``claims_memory``): it is generated again as a repeat is, and what
still opens so loses the opening.

Nor may such an answer say what only memory's verdict says: after the replies before it, a small model goes on
from its own answer into "I don't remember that: it was not mentioned in our conversation..." (a general question
answered, then the verdict copied). Given that verdict (``verdicts``), the guard stops where it begins after other
text and keeps what came before (``dropped_verdict``), holding back the words that may still turn out to begin it.
An answer that opens with it is left alone: it states nothing made up.

It also loops across turns: in a chat, SmolLM2 gave "I'm sorry for any confusion, but as a dental
professional…" word for word to four different questions in a row. Given the conversation's last replies
(``earlier_replies``), the guard holds an answer back while it is still word for word the beginning of one
of them, and says when it turned out the same (``repeats_earlier``): the runtime then generates it again
with a penalty on repeated tokens (``RETRY_PENALTY``), and the client sees only that one.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..backends.base import TextCallback

# A sentence ends at . ! ? or a line break; only pieces longer than this count as a repeat, so that
# "Yes. Yes." or a repeated short list item does not stop a good answer.
MIN_SENTENCE_CHARS = 15
# The same run of 1 to MAX_LOOP_WORDS words three times in a row is a loop ("Morocco, Morocco, Morocco").
MAX_LOOP_WORDS = 12
LOOP_REPEATS = 3
_BREAK = re.compile(r"[.!?\n]")
_WORD = re.compile(r"\w+")
# An answer that is word for word one of the conversation's last this many replies (to other questions) is
# generated again, with this penalty on repeated tokens (llama.cpp's repeat_penalty).
EARLIER_REPLIES = 4
RETRY_PENALTY = 1.3


def _normal(text: str) -> str:
    """``text`` as answers are compared across turns: case and white space folded."""
    return " ".join(_fold(text.lower()).split())


def earlier_replies(turns: Sequence, question: str, last: int = EARLIER_REPLIES) -> tuple[str, ...]:
    """The conversation's last ``last`` replies (assistant turns of ``turns``), as ``RepetitionGuard`` compares
    an answer with them; a reply to this same ``question`` is left out (the same answer to the same question
    is no loop)."""
    asked, found, seen = _normal(question), [], 0
    for i in range(len(turns) - 1, -1, -1):
        turn = turns[i]
        if turn.role != "assistant" or not turn.text.strip():
            continue
        seen += 1
        if seen > last:
            break
        before = turns[i - 1] if i > 0 else None
        if before is None or before.role != "user" or _normal(before.text) != asked:
            found.append(_normal(turn.text))
    return tuple(found)


def loop_start(text: str) -> int | None:
    """Where the second copy of a run of words repeated ``LOOP_REPEATS`` times at the end of ``text``
    begins (what to cut), or None."""
    words = list(_WORD.finditer(text.lower()))
    keys = [w.group() for w in words]
    for n in range(1, MAX_LOOP_WORDS + 1):
        if len(keys) < n * LOOP_REPEATS:
            break
        tail = keys[-n:]
        if all(keys[-n * (r + 1) : len(keys) - n * r] == tail for r in range(1, LOOP_REPEATS)):
            return words[len(keys) - n * (LOOP_REPEATS - 1)].start()
    return None


def _pieces(text: str) -> list[str]:
    return [p.strip().lower() for p in _BREAK.split(text)]


def repeated_sentence(text: str) -> str | None:
    """The first sentence (longer than ``MIN_SENTENCE_CHARS``) that occurs twice in ``text``, or None.

    This is the definition ``eval`` reports as ``repeated_answer_rate``: split at ``.``, ``!``, ``?`` or a
    line break, compared case-insensitively."""
    seen: set[str] = set()
    for piece in _pieces(text):
        if len(piece) <= MIN_SENTENCE_CHARS:
            continue
        if piece in seen:
            return piece
        seen.add(piece)
    return None


# What a stop strips from the end of the kept text besides white space (``loop_start``'s cut).
_CUT_TRAIL = ",;:-"


def _lowered(text: str) -> str:
    """``text`` lowered and folded (``_fold``), a typographic apostrophe as a plain one ("don\u2019t": "don't")."""
    return _fold(text.lower()).replace("\u2019", "'")


def _fold(lowered: str) -> str:
    """``lowered`` with final sigma as sigma: ``str.lower`` picks "ς" or "σ" by what follows, the only
    lowering that depends on context, so comparing folded text ignores what has not arrived yet."""
    return lowered.replace("\u03c2", "\u03c3")


def _loop_hold(lowered: str) -> int | None:
    """Where the earliest word of ``lowered`` that could still begin the second copy of a run repeated
    ``LOOP_REPEATS`` times (``loop_start``'s cut) starts, whatever text follows; None if none can.

    Words before the last are final; the last grows while the text ends inside it; words after it are
    anything. A run of ``n`` words with its second copy at word ``j`` is possible when each of its
    three copies agrees word for word with what is already known."""
    words = list(_WORD.finditer(lowered))
    m = len(words)
    keys = [w.group() for w in words]
    open_last = m > 0 and words[-1].end() == len(lowered)  # the last word may still grow

    def possible(j: int, n: int) -> bool:
        for t in range(n):
            fixed = prefix = None
            for p in range(j - n + t, j + n * (LOOP_REPEATS - 1) + t, n):
                if p >= m:
                    continue
                if p == m - 1 and open_last:
                    prefix = keys[p]
                elif fixed is None:
                    fixed = keys[p]
                elif fixed != keys[p]:
                    return False
            if prefix is not None and fixed is not None and not fixed.startswith(prefix):
                return False
        return True

    # the loop is found when the text ends with its last copy: at word count m or more, so j + 2n >= m
    span = LOOP_REPEATS - 1
    for j in range(max(1, m - span * MAX_LOOP_WORDS), m):
        for n in range(max(1, -(-(m - j) // span)), min(MAX_LOOP_WORDS, j) + 1):
            if possible(j, n):
                return words[j].start()
    return None


class RepetitionGuard:
    """An ``on_text`` callback that stops the generation when a finished sentence repeats one before it,
    or a run of words comes round a third time in a row.

    ``text`` is what was generated up to (and without) the repeat. The wrapped callback gets text as soon
    as it cannot be cut off any more: the guard holds back only the shortest tail that could still turn
    out part of a repetition (the unfinished sentence while it is the beginning of an earlier sentence,
    a run of words that is repeating the run before it, and trailing spaces or punctuation a cut would
    drop) and releases it once the text diverges. What the callback saw is therefore always the
    beginning of ``text``, and after ``flush`` all of it; a streaming client never shows the loop."""

    def __init__(self, inner: TextCallback | None = None, earlier: Sequence[str] = (), claims: Sequence[str] = (),
                 verdicts: Sequence[str] = ()):
        self.inner = inner
        self.earlier = tuple(earlier)  # ``earlier_replies``: held back while the answer may be one of them
        self.claims = tuple(_normal(c) for c in claims)  # openings it must not begin with (see ``claims_memory``)
        self.verdicts = tuple(_lowered(v) for v in verdicts)  # what it must not go on into (``dropped_verdict``)
        self.dropped_verdict = False
        self.raw = ""  # everything the model produced
        self.text = ""  # what the answer keeps
        self.tripped = False
        self._sent = 0  # characters of ``text`` already passed to ``inner``
        self._seen: set[str] = set()
        self._folded: list[str] = []  # the sentences of ``_seen``, case-folded as ``_fold`` does
        self._done = 0  # characters of ``raw`` whose sentences were checked

    def __call__(self, piece: str) -> bool:
        self.raw += piece
        # check every sentence that is now complete
        while (match := _BREAK.search(self.raw, self._done)) is not None:
            sentence = self.raw[self._done : match.start()].strip().lower()
            if len(sentence) > MIN_SENTENCE_CHARS:
                if sentence in self._seen:
                    self.tripped = True
                    self.text = self.raw[: self._done].rstrip()
                    return True
                self._seen.add(sentence)
                self._folded.append(_fold(sentence))
            self._done = match.end()
        cut = self._verdict_start()
        if cut is not None:
            self.tripped = self.dropped_verdict = True
            self.text = self.raw[:cut].rstrip().rstrip(_CUT_TRAIL).rstrip()
            self._flush_unless_claimed()
            return True
        cut = loop_start(self.raw)
        if cut is not None:
            self.tripped = True
            self.text = self.raw[:cut].rstrip(" ,;:-")
            self._flush_unless_claimed()
            return True
        self.text = self.raw
        safe = self._safe()
        if safe > self._sent:
            stop = self._emit(self.raw[self._sent : safe])
            self._sent = safe
            return stop
        return False

    def _safe(self) -> int:
        """How much of ``raw`` every possible continuation keeps: no later stop can cut before it."""
        raw = self.raw
        hold = len(raw)
        # a sentence stop keeps ``raw[:start of the unfinished sentence]``: hold that sentence while it
        # could still grow into one seen before
        partial = _fold(raw[self._done :].strip().lower())
        if any(seen.startswith(partial) for seen in self._folded):
            hold = self._done
        # a loop stop cuts at the start of a run's second copy: hold from the earliest word that could
        # still begin one (an offset in the lowered text, as ``loop_start``'s cut is)
        start = _loop_hold(_fold(raw.lower()))
        if start is not None:
            hold = min(hold, start)
        # an answer that may still turn out word for word an earlier reply is held whole (see ``repeats_earlier``)
        if self.earlier and self._sent == 0 and any(e.startswith(_normal(raw)) for e in self.earlier):
            return 0
        if self.claims and self._sent == 0 and any(c.startswith(_normal(raw)[: len(c)]) for c in self.claims):
            return 0  # it may still open as a quote of the user's words (``claims_memory``)
        begun = self._verdict_begun()
        if begun is not None:  # the words that may still turn out to begin a verdict (``dropped_verdict``)
            hold = min(hold, begun)
        # both stops strip what ends the kept text (spaces, line breaks, " ,;:-"): never send that yet
        while hold > self._sent and (raw[hold - 1].isspace() or raw[hold - 1] in _CUT_TRAIL):
            hold -= 1
        return hold

    def _verdict_start(self) -> int | None:
        """Where a verdict begins after other text (an offset in the lowered text, as ``loop_start``'s cut is)."""
        if not self.verdicts:  # most answers are given none: no lowering of the whole text at every piece
            return None
        lowered = _lowered(self.raw)
        found = [m.start() for v in self.verdicts for m in re.finditer(re.escape(v), lowered)
                 if m.start() > 0 and not lowered[m.start() - 1].isalnum()]
        return min(found) if found else None

    def _verdict_begun(self) -> int | None:
        """The start of the last words of ``raw`` that begin a verdict (after other text), or None."""
        if not self.verdicts:
            return None
        lowered = _lowered(self.raw)
        longest = max(len(v) for v in self.verdicts)
        for m in _WORD.finditer(lowered, max(1, len(lowered) - longest)):
            if any(v.startswith(lowered[m.start():]) for v in self.verdicts):
                return m.start()
        return None

    @property
    def repeats_earlier(self) -> bool:
        """The answer is word for word one of the ``earlier`` replies (nothing of it was passed on)."""
        return self._sent == 0 and _normal(self.text) in self.earlier

    @property
    def claims_memory(self) -> bool:
        """The answer opens as only a fact answer may ("You told me: ..."): a model answering from its own prompt
        copies that opening from the replies before it and then quotes what nobody said (nothing of it was
        passed on)."""
        return self._sent == 0 and any(_normal(self.text).startswith(c) for c in self.claims)

    def _flush_unless_claimed(self) -> None:
        """Pass on what is kept at a stop, unless it opens as a fact answer (``claims_memory``): the runtime
        generates that again or drops the opening, and only then passes it on. Flushed at a loop's stop, 'You
        told me: "no no no ...' reached the client as a quote of the user's."""
        if not self.claims_memory:
            self.flush()

    def flush(self) -> None:
        """Pass on what is still held back once the generation has ended."""
        if self._sent < len(self.text):
            self._emit(self.text[self._sent :])
            self._sent = len(self.text)

    def _emit(self, text: str) -> bool:
        return bool(self.inner(text)) if self.inner is not None and text else False
