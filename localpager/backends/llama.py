"""The llama.cpp backend (llama-cpp-python), for any GGUF chat model on the CPU.

It uses ``Llama``'s public API; what it needs beyond that (KV-cache moves, saved sequences, a second
sequence) is in ``llama_internals``, behind a check of the installed llama-cpp-python version."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from contextlib import nullcontext
from collections import OrderedDict
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .base import BackendError, ChatBackend, Generation, Message, TextCallback
from .constraints import Constraint
from .cores import free_cores
from ..core.modelpaths import chat_model_path
from .template import ChatTemplate, chosen_template

DEFAULT_N_CTX = 2048
# A splice moves a cached run of at least this many tokens instead of re-evaluating it: below that, the
# bookkeeping is not worth it.
MIN_SPLICE = 32
# Saved prompt prefixes a context keeps (``KeptPrefixes``): the focused answer's fixed part, the last recalls' notes
# and the notes read ahead (``Runtime.read_ahead``), at most this many and this many bytes: SmolLM2-135M holds 23 KB
# of keys and values a token, so a 50-token prefix takes 1.1 MB; a 1.7B model's take ten times that, and fewer fit.
KEPT_PREFIXES = 48
KEPT_BYTES = 64 << 20


def thread_counts(n_threads: int | None = None, *, chosen: int | None = None) -> tuple[int, int]:
    """(generation threads, prompt-reading threads): ``n_threads`` for both if given; else ``chosen`` (the
    ``--threads`` option, ``ModelOptions.threads``), else ``LOCALPAGER_THREADS``, for both, and
    ``LOCALPAGER_BATCH_THREADS`` for prompt reading; else the cores other work leaves free when the model loads
    (``free_cores``).

    llama.cpp's threads spin while they wait: two processes that each take every core slow each other down
    by an order of magnitude (benchmarks/threads.py measures the defaults idle and beside a busy process)."""
    if n_threads:
        return n_threads, n_threads
    generation = chosen or _env_threads("LOCALPAGER_THREADS")
    batch = _env_threads("LOCALPAGER_BATCH_THREADS") or generation
    if not (generation and batch):  # the cores are sampled only when the environment leaves a count open
        free = free_cores()
        generation, batch = generation or free, batch or free
    return generation, batch


def loader_options(threads: int | None = None, chat_template: str | None = None) -> dict[str, Any]:
    """``LlamaCppBackend``'s keyword arguments for ``threads`` chosen as ``LOCALPAGER_THREADS`` chooses them
    (``LOCALPAGER_BATCH_THREADS`` still sets prompt reading apart) and for a ``chat_template``; what is not given
    is left out, for the backend's own default (the environment, else the free cores and the model's template)."""
    options: dict[str, Any] = {"chat_template": chat_template} if chat_template else {}
    if threads:
        options["n_threads"], options["n_threads_batch"] = thread_counts(chosen=threads)
    return options


def _env_threads(name: str) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return 0
    if not value.isdigit() or int(value) < 1:
        raise BackendError(f"{name} must be a positive number of threads, got {value!r}")
    return int(value)


_OPEN: "weakref.WeakSet[Any]" = weakref.WeakSet()


@atexit.register
def _close_open_models() -> None:
    """Free every model this process still holds before the interpreter tears its modules down:
    llama-cpp-python's finalizer run later finds its C bindings gone and prints a traceback."""
    for llm in list(_OPEN):
        try:
            llm.close()
        except Exception:  # noqa: BLE001 - exiting anyway
            pass


def internals():
    """``llama_internals``: llama-cpp-python beyond its public API, imported (and its version checked) on first
    use, so that importing this module needs no llama-cpp-python."""
    from . import llama_internals

    return llama_internals


def load_llama(path: Path, *, sequences: int = 1, **kwargs: Any):
    """A ``Llama`` for ``path`` with llama.cpp's console output silenced; a one-line error if it fails
    (a llama-cpp-python outside the supported range included). ``sequences``: 2 gives its context the
    second sequence a KV splice needs."""
    raw = internals()
    import llama_cpp

    try:
        with raw.quiet(), (raw.two_sequences() if sequences == 2 else nullcontext()):
            llm = llama_cpp.Llama(str(path), verbose=False, **kwargs)
    except (ValueError, RuntimeError, OSError) as exc:
        raise BackendError(f"cannot load model {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    _OPEN.add(llm)
    return llm


@dataclass(frozen=True)
class Splice:
    """How to turn the cached tokens into a new prompt's without re-reading what both share.

    The new prompt is ``cached[:keep] + prompt[keep:insert] + cached[moved:moved+size] + …``: the cache
    keeps its first ``keep`` tokens, drops ``cached[keep:moved]`` (an evicted page), evaluates the
    ``insert - keep`` new tokens (a bookmark), and shifts the ``size`` cached tokens that follow to their
    new positions, as llama.cpp's own context shift does."""

    keep: int
    moved: int
    insert: int
    size: int

    @property
    def reused(self) -> int:
        return self.keep + self.size


def plan_splice(cached: Sequence[int], prompt: Sequence[int], min_size: int = MIN_SPLICE) -> Splice | None:
    """The splice that reuses the longest cached run after the common prefix, if one of ``min_size``
    tokens or more exists (None: plain prefix reuse is as good)."""
    keep = 0
    for a, b in zip(cached, prompt):
        if a != b:
            break
        keep += 1
    if keep >= len(cached) - min_size or keep >= len(prompt) - min_size:
        return None
    match = SequenceMatcher(None, cached, prompt, autojunk=False).find_longest_match(
        keep, len(cached), keep, len(prompt))
    if match.size < min_size or match.a < keep or match.b < keep:
        return None
    return Splice(keep=keep, moved=match.a, insert=match.b, size=match.size)


class KeptPrefixes:
    """The KV cache of a few prompt prefixes, saved so that a context which ran other prompts in between
    (keyword extraction, a worth verdict) gets them back by a copy instead of re-reading them. Least recently
    used first out. A saved prefix is only ever restored for a prompt that begins with exactly its tokens."""

    def __init__(self, capacity: int = KEPT_PREFIXES, max_bytes: int = KEPT_BYTES):
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, tokens: tuple[int, ...]) -> bool:
        return tokens in self._states

    def longest(self, prompt: Sequence[int], than: int) -> tuple[tuple[int, ...], bytes] | None:
        """The longest saved prefix of ``prompt`` longer than ``than`` tokens (what the live cache shares)."""
        best = None
        for tokens, state in self._states.items():
            if len(tokens) > than and len(tokens) <= len(prompt) and tuple(prompt[:len(tokens)]) == tokens:
                if best is None or len(tokens) > len(best[0]):
                    best = (tokens, state)
        if best is not None:
            self._states.move_to_end(best[0])
        return best

    def touch(self, tokens: tuple[int, ...]) -> bool:
        """Mark ``tokens`` as just used; False if they are not saved."""
        if tokens not in self._states:
            return False
        self._states.move_to_end(tokens)
        return True

    def add(self, tokens: tuple[int, ...], state: bytes) -> None:
        self._bytes += len(state) - len(self._states.get(tokens, b""))
        self._states[tokens] = state
        self._states.move_to_end(tokens)
        while len(self._states) > 1 and (len(self._states) > self.capacity or self._bytes > self.max_bytes):
            self._bytes -= len(self._states.popitem(last=False)[1])

    @property
    def nbytes(self) -> int:
        return self._bytes

    def fits(self, n_tokens: int) -> bool:
        """Whether a prefix of ``n_tokens`` would fit without pushing another out (its size estimated from the
        bytes a token of those kept takes)."""
        if not self._states:
            return True
        per_token = self._bytes / max(1, sum(len(t) for t in self._states))
        return len(self._states) < self.capacity and self._bytes + per_token * n_tokens <= self.max_bytes

    def clear(self) -> None:
        self._states.clear()
        self._bytes = 0


class LlamaCppBackend(ChatBackend):
    """One GGUF model in one llama.cpp context; a lock makes it safe to share between threads."""

    name = "llama-cpp"
    keeps_prefixes = True  # ``generate(..., keep=...)`` saves those prefixes (``KeptPrefixes``)
    saves_state = True  # its sequence's KV cache, to a file (``store.kvstate``)

    def __init__(self, model_path: str | os.PathLike | None = None, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: int | None = None, kv_shift: bool | None = None, n_threads_batch: int | None = None,
                 chat_template: str | None = None):
        """``kv_shift``: when a prompt drops a run of cached tokens (an evicted page) and inserts a few (its
        bookmark), move the cached tokens after it instead of re-reading them (see ``Splice``). The moved
        tokens keep what they computed while the dropped ones were there, as after llama.cpp's context
        shift; off, every such change re-evaluates the rest of the prompt. Default: on, unless the
        environment says ``LOCALPAGER_KV_SHIFT=0``. ``chat_template``: ``chatml`` or a Jinja file instead of
        the model's own (``template.chosen_template``; a GGUF without one is refused unless it is given)."""
        if kv_shift is None:
            kv_shift = os.environ.get("LOCALPAGER_KV_SHIFT", "1").strip().lower() not in ("0", "false", "no", "off")
        self.model_path = chat_model_path(model_path)
        self.n_threads, self.n_threads_batch = thread_counts(n_threads)
        self.n_threads_batch = n_threads_batch or self.n_threads_batch
        self.n_ctx = n_ctx
        self.lock = threading.RLock()
        self.kept = KeptPrefixes()
        self._sequences = 2 if kv_shift else 1
        self._llm = load_llama(
            self.model_path, n_ctx=n_ctx, n_threads=self.n_threads, n_threads_batch=self.n_threads_batch,
            n_batch=min(512, n_ctx), sequences=self._sequences,
        )
        self.model_name = self.model_path.name
        self.chat_template = chat_template
        self.kv_shift = kv_shift and internals().can_shift(self._llm)
        bos = [self._llm.token_bos()] if self._llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" else []
        self.eos = {self._llm.token_eos()}
        try:
            template = chosen_template(self._llm.metadata.get("tokenizer.chat_template"), self.model_name, chat_template)
        except BackendError:
            self._llm.close()
            raise
        self.template = ChatTemplate(template, lru_cache(maxsize=256)(lambda t: tuple(self._tokenize_special(t))),
                                     lru_cache(maxsize=4096)(lambda t: tuple(self.tokenize(t))), bos)

    def fork(self) -> "LlamaCppBackend":
        """Another context on the same model file (llama.cpp maps the weights, so they are shared):
        side work such as keyword extraction runs there and leaves this context's KV cache alone."""
        return LlamaCppBackend(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, kv_shift=self.kv_shift,
                               n_threads_batch=self.n_threads_batch, chat_template=self.chat_template)

    # -- the KV cache on disk -------------------------------------------------------------------
    def state_key(self) -> str:
        """What a saved state is only valid for: this model file (path, size, modification time), the
        llama.cpp build and the context's shape."""
        import hashlib

        import llama_cpp

        stat = self.model_path.stat()
        parts = (str(self.model_path.resolve()), stat.st_size, stat.st_mtime_ns, llama_cpp.__version__, self.n_ctx)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]

    def has_kept(self, tokens: Sequence[int]) -> bool:
        """Whether exactly ``tokens`` are kept (``KeptPrefixes``)."""
        with self.lock:
            return tuple(tokens) in self.kept

    def kept_fits(self, n_tokens: int) -> bool:
        """Whether a prefix of ``n_tokens`` would be kept without pushing another out."""
        with self.lock:
            return self.kept.fits(n_tokens)

    def cached_tokens(self) -> list[int]:
        """The tokens whose keys and values the context holds now, in order."""
        with self.lock:
            return internals().cached_tokens(self._llm)

    def save_state(self, path: Path) -> bool:
        """Write the chat sequence's KV cache and its tokens to ``path`` (owner-only, replaced atomically)."""
        with self.lock:
            return internals().save_sequence(self._llm, path)

    def load_state(self, path: Path) -> int:
        """Replace the KV cache with the one saved at ``path``; the number of tokens it holds (0: the file
        could not be read, and the cache is empty). Generation then reuses only the leading tokens it
        shares with the next prompt, so a state saved before the conversation changed costs nothing but
        the part that still matches."""
        with self.lock:
            return internals().load_sequence(self._llm, path, self.n_ctx)

    def clear_cache(self) -> None:
        """Forget every cached token (after the conversation it came from was erased)."""
        with self.lock:
            internals().clear(self._llm)
            self.kept.clear()

    # -- tokens -------------------------------------------------------------------------------
    def _tokenize_special(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def tokenize(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def count_tokens(self, text: str) -> int:
        return internals().count_tokens(self._llm, text.encode("utf-8")) if text else 0

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._llm.detokenize(list(tokens)).decode("utf-8", errors="replace")

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        return self.template.render(messages, add_generation_prompt)

    # -- generation ---------------------------------------------------------------------------
    def cached_prefix(self, prompt: Sequence[int]) -> int:
        """How many leading prompt tokens are already in the KV cache (at least one is re-run)."""
        return min(self._shared(prompt), len(prompt) - 1)

    def _shared(self, prompt: Sequence[int]) -> int:
        """The leading tokens the KV cache and ``prompt`` have in common."""
        n = 0
        for a, b in zip(internals().cached_tokens(self._llm), prompt):
            if a != b:
                break
            n += 1
        return n

    def _splice(self, prompt: Sequence[int]) -> tuple[int, int]:
        """Apply ``plan_splice`` to the KV cache: the tokens it moved instead of re-evaluating and the new
        tokens it evaluated in between ((0, 0): nothing to splice).

        Afterwards the cache holds ``prompt[:insert + size]`` at positions 0.., so llama-cpp-python's
        own prefix reuse takes over from there."""
        plan = plan_splice(internals().cached_tokens(self._llm), prompt)
        if plan is None:
            return 0, 0
        inserted = internals().splice(self._llm, prompt, plan.keep, plan.moved, plan.insert, plan.size)
        return (0, 0) if inserted < 0 else (plan.size, inserted)

    def _restore(self, prompt: Sequence[int]) -> int:
        """Put back the longest kept prefix of ``prompt`` when the live cache shares less of it: the tokens
        restored (0: none)."""
        saved = self.kept.longest(prompt, than=self.cached_prefix(prompt))
        if saved is None or len(saved[0]) >= len(prompt):
            return 0
        return len(saved[0]) if internals().restore_sequence(self._llm, saved[1], saved[0]) else 0

    def _to_keep(self, prompt: Sequence[int], lengths: Sequence[int]) -> list[int]:
        """The lengths of ``lengths`` whose prefix is not kept yet (those that are count as just used)."""
        return [n for n in sorted(set(lengths)) if 0 < n < len(prompt) and not self.kept.touch(tuple(prompt[:n]))]

    def _keep_after(self, prompt: Sequence[int], lengths: Sequence[int]) -> None:
        """Save ``prompt[:n]`` for each ``n`` of ``lengths`` from the cache the generation left (the prompt read
        in one batch, as without keeping; a context with two sequences copies the part to the second)."""
        for n in self._to_keep(prompt, lengths):
            if self._shared(prompt) >= n:
                state = internals().sequence_state(self._llm, n)
                if state is not None:
                    self.kept.add(tuple(prompt[:n]), state)

    def _keep_before(self, prompt: Sequence[int], lengths: Sequence[int]) -> None:
        """On a context with one sequence: evaluate up to each ``n`` of ``lengths`` and save it before the
        generation reads the rest. A prefix the cache already holds more of is left for a later call (saving it
        would cut what the generation reuses)."""
        for n in self._to_keep(prompt, lengths):
            if self._shared(prompt) <= n:
                internals().extend_to(self._llm, prompt, n)
                state = internals().sequence_state(self._llm)
                if state is not None:
                    self.kept.add(tuple(prompt[:n]), state)

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        constraint: Constraint | None = None,
        on_text: TextCallback | None = None,
        repeat_penalty: float = 1.0,
        keep: Sequence[int] = (),
    ) -> Generation:
        """``constraint`` is rendered to GBNF (``Constraint.gbnf``) and compiled by llama.cpp. ``keep``: prompt
        lengths whose prefix this context saves (``KeptPrefixes``) and restores for a later prompt that begins
        with it, whatever ran in between (``Generation.restored`` counts the tokens it gave back)."""
        from llama_cpp import LlamaGrammar

        if len(prompt) + max_tokens > self.n_ctx:
            raise BackendError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} to generate exceeds the context of {self.n_ctx}"
            )
        with self.lock:
            compiled = LlamaGrammar.from_string(constraint.gbnf(), verbose=False) if constraint is not None else None
            start = time.perf_counter()
            restored = self._restore(prompt) if self.kept else 0
            shifted, inserted = self._splice(prompt) if self.kv_shift else (0, 0)
            reused = self.cached_prefix(prompt) - inserted
            if keep and self._sequences == 1:
                self._keep_before(prompt, keep)
            tokens: list[int] = []
            text = ""
            stopped = "length"
            first = None
            generator = self._llm.generate(
                list(prompt), top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=repeat_penalty, grammar=compiled
            )
            for token in generator:
                if first is None:
                    first = time.perf_counter()
                if token in self.eos:
                    stopped = "eos"
                    break
                tokens.append(token)
                new_text = self.detokenize(tokens)
                piece, text = new_text[len(text):], new_text
                if on_text is not None and piece and on_text(piece):
                    stopped = "caller"
                    break
                if len(tokens) >= max_tokens:
                    break
            generator.close()
            if keep and self._sequences == 2:
                self._keep_after(prompt, keep)  # a few milliseconds, counted with the decoding
            end = time.perf_counter()
        first = first or end
        return Generation(
            text=text,
            tokens=tokens,
            prompt_tokens=len(prompt),
            evaluated=len(prompt) - reused,
            reused=reused,
            shifted=shifted,
            restored=restored,
            prefill_ms=(first - start) * 1000,
            decode_ms=(end - first) * 1000,
            stopped=stopped,
        )
