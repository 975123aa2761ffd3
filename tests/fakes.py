"""Fakes for the fast test layer: a scripted chat backend, a hashing embedder, a GBNF checker.

Nothing here loads a model or imports torch or llama_cpp, so tests built on these run in milliseconds
and need no model file.

``ScriptedBackend`` implements ``localpager.backends.base.ChatBackend`` with honest token accounting
(a KV cache of the tokens it "evaluated", reused as a common prefix with at least one token re-run, as
the llama.cpp backend does), replies from a script, refuses a scripted reply that the call's constraint
(rendered to GBNF, as the llama.cpp backend renders it) does not allow, and records every call.
``HashEmbedder`` is a deterministic stand-in for ``localpager.retrieval.embedder.Embedder``: texts sharing
words are similar.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from localpager.backends.base import BackendError, ChatBackend, Generation, Message, TextCallback
from localpager.backends.constraints import Constraint
from localpager.retrieval.embedder import TextEmbedder

__all__ = [
    "Call", "Grammar", "GrammarError", "HashEmbedder", "ScriptError", "ScriptedBackend", "allows",
    "shortest_sentence",
]


# =====================================================================================================
# GBNF: enough of llama.cpp's grammar language to check what the fake model may say
# =====================================================================================================
class GrammarError(ValueError):
    """A grammar this checker cannot read (which llama.cpp would most likely reject too)."""


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "^": "^",
            "/": "/"}


def _escape(text: str, i: int) -> tuple[str, int]:
    """The character of the escape at ``text[i]`` (just after the backslash) and the index after it."""
    c = text[i]
    if c in "xuU":
        n = {"x": 2, "u": 4, "U": 8}[c]
        digits = text[i + 1:i + 1 + n]
        if len(digits) != n or not re.fullmatch(r"[0-9a-fA-F]+", digits):
            raise GrammarError(f"bad \\{c} escape at {i}")
        return chr(int(digits, 16)), i + 1 + n
    if c in _ESCAPES:
        return _ESCAPES[c], i + 1
    raise GrammarError(f"unknown escape \\{c} at {i}")


@dataclass(frozen=True)
class _Node:
    kind: str  # lit, cls, any, ref, seq, alt, rep
    value: Any = None  # lit: str; cls: (negated, ((lo, hi), ...)); ref: name
    items: tuple["_Node", ...] = ()  # seq / alt / rep (one item)
    least: int = 0  # rep
    most: int | None = None  # rep; None: unbounded


class _Parser:
    def __init__(self, text: str):
        self.text, self.i = text, 0

    def skip(self) -> None:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif c == "#":
                while self.i < len(self.text) and self.text[self.i] != "\n":
                    self.i += 1
            else:
                break

    def peek_rule_start(self) -> bool:
        return re.compile(r"[A-Za-z][A-Za-z0-9_-]*\s*::=").match(self.text, self.i) is not None

    def rules(self) -> dict[str, _Node]:
        rules: dict[str, _Node] = {}
        self.skip()
        while self.i < len(self.text):
            m = re.compile(r"([A-Za-z][A-Za-z0-9_-]*)\s*::=").match(self.text, self.i)
            if not m:
                raise GrammarError(f"expected a rule at {self.i}: {self.text[self.i:self.i + 30]!r}")
            self.i = m.end()
            if m.group(1) in rules:
                raise GrammarError(f"rule {m.group(1)} defined twice")
            rules[m.group(1)] = self.alternatives(top=True)
            self.skip()
        if "root" not in rules:
            raise GrammarError("no root rule")
        for node in rules.values():
            _check_refs(node, rules)
        return rules

    def alternatives(self, top: bool = False) -> _Node:
        options = [self.sequence(top)]
        while True:
            self.skip()
            if self.i < len(self.text) and self.text[self.i] == "|":
                self.i += 1
                options.append(self.sequence(top))
            else:
                break
        return options[0] if len(options) == 1 else _Node("alt", items=tuple(options))

    def sequence(self, top: bool) -> _Node:
        items = []
        while True:
            self.skip()
            if self.i >= len(self.text) or self.text[self.i] in "|)" or (top and self.peek_rule_start()):
                break
            items.append(self.postfix(self.atom()))
        return items[0] if len(items) == 1 else _Node("seq", items=tuple(items))

    def atom(self) -> _Node:
        t, c = self.text, self.text[self.i]
        if c == '"':
            self.i += 1
            out = []
            while True:
                if self.i >= len(t):
                    raise GrammarError("unterminated string")
                c = t[self.i]
                if c == '"':
                    self.i += 1
                    break
                if c == "\\":
                    ch, self.i = _escape(t, self.i + 1)
                    out.append(ch)
                else:
                    out.append(c)
                    self.i += 1
            return _Node("lit", "".join(out))
        if c == "[":
            self.i += 1
            negated = t.startswith("^", self.i)
            self.i += negated
            ranges = []
            while True:
                if self.i >= len(t):
                    raise GrammarError("unterminated character class")
                if t[self.i] == "]":
                    self.i += 1
                    break
                lo, self.i = self.class_char()
                hi = lo
                if t.startswith("-", self.i) and not t.startswith("-]", self.i):
                    hi, self.i = self.class_char(self.i + 1)
                ranges.append((lo, hi))
            return _Node("cls", (negated, tuple(ranges)))
        if c == "(":
            self.i += 1
            inner = self.alternatives()
            self.skip()
            if not t.startswith(")", self.i):
                raise GrammarError(f"expected ) at {self.i}")
            self.i += 1
            return inner
        if c == ".":
            self.i += 1
            return _Node("any")
        m = re.compile(r"[A-Za-z][A-Za-z0-9_-]*").match(t, self.i)
        if m:
            self.i = m.end()
            return _Node("ref", m.group(0))
        raise GrammarError(f"unexpected {c!r} at {self.i}")

    def class_char(self, i: int | None = None) -> tuple[str, int]:
        i = self.i if i is None else i
        if self.text[i] == "\\":
            return _escape(self.text, i + 1)
        return self.text[i], i + 1

    def postfix(self, node: _Node) -> _Node:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in "*+?":
                self.i += 1
                node = _Node("rep", items=(node,), least=int(c == "+"), most=1 if c == "?" else None)
            elif c == "{":
                m = re.compile(r"\{\s*(\d+)\s*(,\s*(\d*)\s*)?\}").match(self.text, self.i)
                if not m:
                    raise GrammarError(f"bad repetition at {self.i}")
                self.i = m.end()
                least = int(m.group(1))
                most = least if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                node = _Node("rep", items=(node,), least=least, most=most)
            else:
                break
        return node


def _check_refs(node: _Node, rules: dict[str, _Node]) -> None:
    if node.kind == "ref" and node.value not in rules:
        raise GrammarError(f"undefined rule {node.value}")
    for item in node.items:
        _check_refs(item, rules)


class Grammar:
    """A parsed GBNF grammar: ``allows(text)`` (the whole text is a sentence of ``root``) and
    ``shortest()`` (a shortest sentence, first alternative on ties)."""

    def __init__(self, source: str):
        self.source = source
        self.rules = _Parser(source).rules()

    # -- recognising ------------------------------------------------------------------------------
    def allows(self, text: str) -> bool:
        memo: dict[tuple[int, int], frozenset[int]] = {}
        return len(text) in self._ends(_Node("ref", "root"), text, 0, memo, set())

    def _ends(self, node: _Node, text: str, pos: int, memo, active) -> frozenset[int]:
        key = (id(node), pos)
        if key in memo:
            return memo[key]
        if key in active:  # left recursion: no grammar here uses it
            raise GrammarError("left-recursive grammar")
        active.add(key)
        kind = node.kind
        if kind == "lit":
            out = frozenset([pos + len(node.value)]) if text.startswith(node.value, pos) else frozenset()
        elif kind in ("cls", "any"):
            out = frozenset([pos + 1]) if pos < len(text) and _class_allows(node, text[pos]) else frozenset()
        elif kind == "ref":
            out = self._ends(self.rules[node.value], text, pos, memo, active)
        elif kind == "seq":
            current = frozenset([pos])
            for item in node.items:
                current = frozenset(e for p in current for e in self._ends(item, text, p, memo, active))
                if not current:
                    break
            out = current
        elif kind == "alt":
            out = frozenset(e for item in node.items for e in self._ends(item, text, pos, memo, active))
        else:  # rep
            item, result, seen = node.items[0], set(), {pos}
            if node.least == 0:
                result.add(pos)
            frontier, count = {pos}, 0
            while frontier and (node.most is None or count < node.most):
                count += 1
                reached = {e for p in frontier for e in self._ends(item, text, p, memo, active)}
                if count >= node.least:
                    result |= reached
                    frontier = reached - seen  # reached with fewer repeats: no fewer options left
                    seen |= reached
                else:
                    frontier = reached
            out = frozenset(result)
        active.discard(key)
        memo[key] = out
        return out

    # -- generating -------------------------------------------------------------------------------
    def shortest(self) -> str:
        lengths = self._min_lengths()
        return self._build(_Node("ref", "root"), lengths, 0)

    def _min_lengths(self) -> dict[str, float]:
        lengths = {name: float("inf") for name in self.rules}
        changed = True
        while changed:
            changed = False
            for name, node in self.rules.items():
                n = self._min_len(node, lengths)
                if n < lengths[name]:
                    lengths[name], changed = n, True
        return lengths

    def _min_len(self, node: _Node, lengths) -> float:
        kind = node.kind
        if kind == "lit":
            return len(node.value)
        if kind in ("cls", "any"):
            return 1 if _first_char(node) is not None else float("inf")
        if kind == "ref":
            return lengths[node.value]
        if kind == "seq":
            return sum(self._min_len(i, lengths) for i in node.items)
        if kind == "alt":
            return min(self._min_len(i, lengths) for i in node.items)
        return node.least * self._min_len(node.items[0], lengths) if node.least else 0

    def _build(self, node: _Node, lengths, depth: int) -> str:
        if depth > 200:
            raise GrammarError("grammar too deep to generate from")
        kind = node.kind
        if kind == "lit":
            return node.value
        if kind in ("cls", "any"):
            return _first_char(node)
        if kind == "ref":
            return self._build(self.rules[node.value], lengths, depth + 1)
        if kind == "seq":
            return "".join(self._build(i, lengths, depth + 1) for i in node.items)
        if kind == "alt":
            best = min(node.items, key=lambda i: self._min_len(i, lengths))  # first on ties
            return self._build(best, lengths, depth + 1)
        return "".join(self._build(node.items[0], lengths, depth + 1) for _ in range(node.least))


def _class_allows(node: _Node, ch: str) -> bool:
    if node.kind == "any":
        return ch != "\n"
    negated, ranges = node.value
    inside = any(lo <= ch <= hi for lo, hi in ranges)
    return inside != negated


_PREFERRED = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ .,"


def _first_char(node: _Node) -> str | None:
    for ch in _PREFERRED:
        if _class_allows(node, ch):
            return ch
    for code in range(1, 0x3000):
        if _class_allows(node, chr(code)):
            return chr(code)
    return None


@lru_cache(maxsize=256)
def _grammar(source: str) -> Grammar:
    return Grammar(source)


def allows(grammar: str, text: str) -> bool:
    """Whether the GBNF ``grammar`` (source text) allows exactly ``text``."""
    return _grammar(grammar).allows(text)


def shortest_sentence(grammar: str) -> str:
    """A shortest text the GBNF ``grammar`` allows (for a recall grammar: a one-character answer)."""
    return _grammar(grammar).shortest()


def answering(reply: str) -> Callable[[str, str | None], str]:
    """A script entry that answers ``reply`` and takes every decision step (a call with a grammar) with the
    shortest text its grammar allows: a chat whose model never asks to recall."""
    return lambda prompt, grammar: shortest_sentence(grammar) if grammar else reply


# =====================================================================================================
# The scripted chat backend
# =====================================================================================================
class ScriptError(AssertionError):
    """The script cannot answer this call: it ran out, or its reply breaks the call's grammar."""


IM_START, IM_END = 1, 2  # the two special tokens of the fake ChatML template; IM_END is the EOS
_SPECIAL = {IM_START: "<|im_start|>", IM_END: "<|im_end|>"}
_FIRST_ID = 16
# One token per word or punctuation mark, each carrying the whitespace before it: text round-trips.
_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")

Script = Callable[[str, "str | None"], "str | BaseException"]
ScriptEntry = "str | BaseException | Script"


class _Vocabulary:
    """Token strings to ids, growing as new pieces appear; shared by a backend and its forks."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.pieces: dict[int, str] = dict(_SPECIAL)

    def id(self, piece: str) -> int:
        if piece not in self.ids:
            self.ids[piece] = _FIRST_ID + len(self.ids)
            self.pieces[self.ids[piece]] = piece
        return self.ids[piece]


@dataclass
class Call:
    """One ``generate`` call as the backend saw it."""

    backend: str  # "main" or "fork1", "fork2", ...: which context ran it
    prompt: list[int]
    text: str  # the prompt detokenized: ChatML with <|im_start|> / <|im_end|>
    grammar: str | None  # the call's constraint rendered to GBNF (what the llama.cpp backend compiles)
    max_tokens: int
    options: dict[str, Any]
    output: str = ""  # the generated text
    generation: Generation | None = None
    constraint: Constraint | None = None


@dataclass
class _Shared:
    """What a backend shares with its forks: the vocabulary, the script, the log of calls."""

    vocab: _Vocabulary = field(default_factory=_Vocabulary)
    script: deque = field(default_factory=deque)
    calls: list[Call] = field(default_factory=list)
    forks: int = 0


class ScriptedBackend(ChatBackend):
    """A chat backend whose replies come from a script.

    ``script`` is a list of replies consumed one per ``generate`` call (by this backend and its forks,
    in call order), or a single callable ``(prompt_text, grammar) -> reply`` used for every call. A list
    entry may itself be such a callable; a reply that is an exception instance is raised instead (for
    a failing model). When the list runs out, ``fallback`` answers (a reply or a callable, as above);
    without one, the call fails with ``ScriptError``.

    A call with a grammar fails with ``ScriptError`` unless the grammar allows the whole reply. The reply
    is tokenized and streamed token by token through ``on_text`` (a True return stops it, "caller");
    ``max_tokens`` cuts it ("length"); otherwise it ends at EOS ("eos"). A call whose prompt is exactly
    the previous call's prompt plus the tokens it generated, cut short, continues that reply instead of
    taking a new one, as a deterministic model would.

    Tokens: one per word or punctuation mark (with its leading whitespace), ids from a vocabulary that
    grows as text is seen; the chat template is ChatML with two special tokens that no text can produce.
    Accounting: the backend keeps the tokens it evaluated last (prompt and generated tokens but the
    last, as llama.cpp does) and reports ``reused`` = the common prefix with the new prompt, at least
    one token re-run, and ``evaluated`` = the rest. Fake clock: 1 ms per evaluated token
    (``prefill_ms``) and per generated token (``decode_ms``).
    """

    name = "scripted"

    def __init__(self, script: Iterable[ScriptEntry] | Script = (), *, fallback: ScriptEntry | None = None,
                 n_ctx: int = 2048, model_name: str = "scripted.gguf", _shared: _Shared | None = None,
                 _label: str = "main"):
        self._shared = _shared or _Shared()
        self.n_ctx = n_ctx
        self.model_name = model_name
        self.label = _label
        self.eos = {IM_END}
        self.fallback = fallback
        self._script_fn: Script | None = None
        if callable(script):
            self._script_fn = script
        elif _shared is None:
            self._shared.script.extend(script)
        self._cache: list[int] = []
        self._pending: tuple[tuple[int, ...], str] | None = None  # (prompt + generated, rest of the reply)

    # -- the script -------------------------------------------------------------------------------
    def push(self, *replies: ScriptEntry) -> "ScriptedBackend":
        """Append replies to the shared script."""
        self._shared.script.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        return len(self._shared.script)

    @property
    def calls(self) -> list[Call]:
        """Every generate call of this backend and of its forks, in order."""
        return self._shared.calls

    def calls_of(self, label: str | None = None) -> list[Call]:
        """The calls run on one context (default: this one)."""
        return [c for c in self._shared.calls if c.backend == (label or self.label)]

    @property
    def prompts(self) -> list[str]:
        """The prompt text of every call of this context."""
        return [c.text for c in self.calls_of()]

    def fork(self) -> "ScriptedBackend":
        """A second context sharing the vocabulary, the script and the call log, with a cache of its own."""
        self._shared.forks += 1
        twin = ScriptedBackend(fallback=self.fallback, n_ctx=self.n_ctx, model_name=self.model_name,
                               _shared=self._shared, _label=f"fork{self._shared.forks}")
        twin._script_fn = self._script_fn
        return twin

    def _reply(self, prompt_text: str, grammar: str | None) -> str:
        if self._script_fn is not None:
            entry: Any = self._script_fn
        elif self._shared.script:
            entry = self._shared.script.popleft()
        elif self.fallback is not None:
            entry = self.fallback
        else:
            raise ScriptError(f"the script ran out at call {len(self.calls) + 1}; prompt ends "
                              f"{prompt_text[-200:]!r}")
        if callable(entry) and not isinstance(entry, BaseException):
            entry = entry(prompt_text, grammar)
        if isinstance(entry, BaseException):
            raise entry
        if not isinstance(entry, str):
            raise ScriptError(f"a scripted reply must be a string, got {entry!r}")
        if grammar is not None and not allows(grammar, entry):
            raise ScriptError(f"the grammar of this call does not allow the scripted reply {entry!r}:\n{grammar}")
        return entry

    # -- tokens -----------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        """Tokens of plain text; ``<|im_end|>`` in it stays text (several ordinary tokens)."""
        return [self._shared.vocab.id(piece) for piece in _TOKEN.findall(text)]

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text)) if text else 0

    def detokenize(self, tokens: Sequence[int]) -> str:
        pieces = self._shared.vocab.pieces
        unknown = [t for t in tokens if t not in pieces]
        if unknown:
            raise BackendError(f"tokens {unknown[:5]} are not in this model's vocabulary")
        return "".join(pieces[t] for t in tokens)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        tokens: list[int] = []
        for m in messages:
            tokens += [IM_START, *self.tokenize(f"{m.role}\n"), *self.tokenize(m.content), IM_END,
                       *self.tokenize("\n")]
        if add_generation_prompt:
            tokens += [IM_START, *self.tokenize("assistant\n")]
        return tokens

    def cached_prefix(self, prompt: Sequence[int]) -> int:
        """How many leading prompt tokens are already evaluated (at least one is re-run)."""
        n = 0
        for a, b in zip(self._cache, prompt):
            if a != b:
                break
            n += 1
        return max(0, min(n, len(prompt) - 1))

    # -- generation -------------------------------------------------------------------------------
    def generate(self, prompt: Sequence[int], *, max_tokens: int, constraint: Constraint | None = None,
                 on_text: TextCallback | None = None, **options: Any) -> Generation:
        prompt = list(prompt)
        grammar = constraint.gbnf() if constraint is not None else None  # what the llama.cpp backend compiles
        if not prompt:
            raise BackendError("an empty prompt")
        if len(prompt) + max_tokens > self.n_ctx:
            raise BackendError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} to generate exceeds the context of {self.n_ctx}")
        text = self.detokenize(prompt)
        call = Call(self.label, prompt, text, grammar, max_tokens, dict(options), constraint=constraint)
        self._shared.calls.append(call)
        if self._pending is not None and tuple(prompt) == self._pending[0]:
            reply = self._pending[1]  # the same model continues where it was stopped
        else:
            reply = self._reply(text, grammar)
        self._pending = None
        reused = self.cached_prefix(prompt)
        pieces = _TOKEN.findall(reply)
        tokens: list[int] = []
        out = ""
        stopped = "eos"
        for piece in pieces:
            tokens.append(self._shared.vocab.id(piece))
            out += piece
            if on_text is not None and on_text(piece):
                stopped = "caller"
                break
            if len(tokens) >= max_tokens:
                stopped = "length"
                break
        # llama.cpp evaluates a sampled token only when it samples the next one: the last is not in the cache
        self._cache = prompt + (tokens if stopped == "eos" else tokens[:-1])
        if stopped != "eos" and len(out) < len(reply):
            self._pending = (tuple(prompt + tokens), reply[len(out):])
        gen = Generation(text=out, tokens=tokens, prompt_tokens=len(prompt), evaluated=len(prompt) - reused,
                         reused=reused, prefill_ms=float(len(prompt) - reused), decode_ms=float(max(0, len(tokens) - 1)),
                         stopped=stopped)
        call.output, call.generation = out, gen
        return gen


# =====================================================================================================
# The hashing embedder
# =====================================================================================================
_WORD = re.compile(r"\w+")


class HashEmbedder(TextEmbedder):
    """Deterministic bag-of-words embeddings: each lower-cased word hashed to one of ``dim`` dimensions
    (with a sign), L2-normalised float32. Texts sharing words are similar; no torch, no model."""

    def __init__(self, dim: int = 64, name: str = "hash-64"):
        self.dim = dim
        self.name = name
        self.encoded = 0  # texts embedded so far (a test can check what was recomputed)

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()) or [""]:
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            vec[value % self.dim] += 1.0 if (value >> 32) & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0:  # words cancelling out exactly: still a unit vector, as a real embedder gives
            vec[0], norm = 1.0, 1.0
        return vec / norm

    def encode(self, texts: list[str], batch_size: int = 16) -> np.ndarray:
        self.encoded += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vector(t) for t in texts]).astype(np.float32)

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]
