"""Stopping degenerate answers: a small model that repeats itself until its token limit.

Greedy decoding of a 135M model loops: a sentence ("That's a great question. In your conversation, I
was referring to …" again and again) or a phrase inside one ("Mali, Morocco, Morocco, Morocco, …",
"I'm so glad you're here, I'm so glad you're here, …"). The guard watches the streamed text and stops
the generation as soon as a sentence comes round a second time, or the same run of words a third
time in a row; the answer keeps everything before the repeat.
"""

from __future__ import annotations

import re

from .backends.base import TextCallback

# A sentence ends at . ! ? or a line break; only pieces longer than this count as a repeat, so that
# "Yes. Yes." or a repeated short list item does not stop a good answer.
MIN_SENTENCE_CHARS = 15
# The same run of 1 to MAX_LOOP_WORDS words three times in a row is a loop ("Morocco, Morocco, Morocco").
MAX_LOOP_WORDS = 12
LOOP_REPEATS = 3
_BREAK = re.compile(r"[.!?\n]")
_WORD = re.compile(r"\w+")


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


class RepetitionGuard:
    """An ``on_text`` callback that stops the generation when a finished sentence repeats one before it.

    ``text`` is what was generated up to (and without) the repeated sentence; the wrapped callback
    sees only that, so a streaming client never shows the loop."""

    def __init__(self, inner: TextCallback | None = None):
        self.inner = inner
        self.raw = ""  # everything the model produced
        self.text = ""  # what the answer keeps
        self.tripped = False
        self._sent = 0  # characters of ``text`` already passed to ``inner``
        self._seen: set[str] = set()
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
            self._done = match.end()
        cut = loop_start(self.raw)
        if cut is not None:
            self.tripped = True
            self.text = self.raw[:cut].rstrip(" ,;:-")
            self.flush()
            return True
        self.text = self.raw
        # pass on text only up to the last sentence break: an unfinished sentence may turn out a repeat
        safe = self._done
        if safe > self._sent:
            stop = self._emit(self.raw[self._sent : safe])
            self._sent = safe
            return stop
        return False

    def flush(self) -> None:
        """Pass on the unfinished last sentence once the generation has ended."""
        if self._sent < len(self.text):
            self._emit(self.text[self._sent :])
            self._sent = len(self.text)

    def _emit(self, text: str) -> bool:
        return bool(self.inner(text)) if self.inner is not None and text else False
