"""The llama.cpp backend (llama-cpp-python), for any GGUF chat model on the CPU."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from .base import BackendError, Generation, Message, TextCallback
from .modelpaths import chat_model_path
from .template import CHATML, ChatTemplate

DEFAULT_N_CTX = 2048
# A splice moves a cached run of at least this many tokens instead of re-evaluating it: below that, the
# bookkeeping is not worth it.
MIN_SPLICE = 32


def cpu_threads() -> int:
    """The cores this process may run on (llama-cpp-python's default is half of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def thread_counts(n_threads: int | None = None) -> tuple[int, int]:
    """(generation threads, prompt-reading threads): ``n_threads`` for both if given; else
    ``LOCALPAGER_THREADS`` (both) and ``LOCALPAGER_BATCH_THREADS`` (prompt reading); else the cores other
    work leaves free when the model loads (``free_cores``).

    llama.cpp's threads spin while they wait: two processes that each take every core slow each other down
    by an order of magnitude (benchmarks/threads.py measures the defaults idle and beside a busy process)."""
    if n_threads:
        return n_threads, n_threads
    free = free_cores()
    generation = _env_threads("LOCALPAGER_THREADS") or free
    return generation, _env_threads("LOCALPAGER_BATCH_THREADS") or _env_threads("LOCALPAGER_THREADS") or free


def free_cores() -> int:
    """The cores not kept busy by other work: this process's cores minus the machine's one-minute load average
    (rounded half up: a passing spike hardly moves it), at least one. On two cores with one other busy process, one
    thread answered in 533 ms p50 against 995 ms with two (idle: 559 and 331 ms; benchmarks/threads.py)."""
    cores = cpu_threads()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        return cores
    return max(1, cores - int(load + 0.5))


def _env_threads(name: str) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return 0
    if not value.isdigit() or int(value) < 1:
        raise BackendError(f"{name} must be a positive number of threads, got {value!r}")
    return int(value)


_PARAMS_LOCK = threading.Lock()


@contextmanager
def _two_sequences():
    """Contexts created inside have room for a second sequence in one shared KV buffer (``Splice`` parks
    the tokens it moves there). ``Llama()`` takes no such option, so its default parameters are
    amended for the duration of the call, under a lock."""
    import llama_cpp.llama_cpp as raw

    default = raw.llama_context_default_params

    def amended():
        params = default()
        params.n_seq_max = 2
        params.kv_unified = True
        return params

    with _PARAMS_LOCK:
        raw.llama_context_default_params = amended
        try:
            yield
        finally:
            raw.llama_context_default_params = default


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


def load_llama(path: Path, *, sequences: int = 1, **kwargs: Any):
    """A ``Llama`` for ``path`` with llama.cpp's console output silenced; a one-line error if it fails.
    ``sequences``: 2 gives its context the second sequence a KV splice needs."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    try:
        with suppress_stdout_stderr(disable=False), (_two_sequences() if sequences == 2 else nullcontext()):
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


class LlamaCppBackend:
    """One GGUF model in one llama.cpp context; a lock makes it safe to share between threads."""

    name = "llama-cpp"

    def __init__(self, model_path: str | os.PathLike | None = None, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: int | None = None, kv_shift: bool | None = None, n_threads_batch: int | None = None):
        """``kv_shift``: when a prompt drops a run of cached tokens (an evicted page) and inserts a few (its
        bookmark), move the cached tokens after it instead of re-reading them (see ``Splice``). The moved
        tokens keep what they computed while the dropped ones were there, as after llama.cpp's context
        shift; off, every such change re-evaluates the rest of the prompt. Default: on, unless the
        environment says ``LOCALPAGER_KV_SHIFT=0``."""
        if kv_shift is None:
            kv_shift = os.environ.get("LOCALPAGER_KV_SHIFT", "1").strip().lower() not in ("0", "false", "no", "off")
        self.model_path = chat_model_path(model_path)
        self.n_threads, self.n_threads_batch = thread_counts(n_threads)
        self.n_threads_batch = n_threads_batch or self.n_threads_batch
        self.n_ctx = n_ctx
        self.lock = threading.RLock()
        self._llm = load_llama(
            self.model_path, n_ctx=n_ctx, n_threads=self.n_threads, n_threads_batch=self.n_threads_batch,
            n_batch=min(512, n_ctx), sequences=2 if kv_shift else 1,
        )
        self.model_name = self.model_path.name
        import llama_cpp

        memory = llama_cpp.llama_get_memory(self._llm._ctx.ctx)
        self.kv_shift = kv_shift and memory is not None and bool(llama_cpp.llama_memory_can_shift(memory))
        bos = [self._llm.token_bos()] if self._llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" else []
        self.eos = {self._llm.token_eos()}
        template = self._llm.metadata.get("tokenizer.chat_template") or CHATML
        self.template = ChatTemplate(template, lru_cache(maxsize=256)(lambda t: tuple(self._tokenize_special(t))),
                                     lru_cache(maxsize=4096)(lambda t: tuple(self.tokenize(t))), bos)

    def fork(self) -> "LlamaCppBackend":
        """Another context on the same model file (llama.cpp maps the weights, so they are shared):
        side work such as keyword extraction runs there and leaves this context's KV cache alone."""
        return LlamaCppBackend(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads, kv_shift=self.kv_shift,
                               n_threads_batch=self.n_threads_batch)

    # -- the KV cache on disk -------------------------------------------------------------------
    def state_key(self) -> str:
        """What a saved state is only valid for: this model file (path, size, modification time), the
        llama.cpp build and the context's shape."""
        import hashlib

        import llama_cpp

        stat = self.model_path.stat()
        parts = (str(self.model_path.resolve()), stat.st_size, stat.st_mtime_ns, llama_cpp.__version__, self.n_ctx)
        return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]

    def cached_tokens(self) -> list[int]:
        """The tokens whose keys and values the context holds now, in order."""
        with self.lock:
            return self._llm._input_ids.tolist()

    def save_state(self, path: Path) -> bool:
        """Write the chat sequence's KV cache and its tokens to ``path`` (owner-only, replaced atomically)."""
        import llama_cpp

        with self.lock:
            n = self._llm.n_tokens
            if n == 0:
                return False
            tokens = (llama_cpp.llama_token * n)(*self._llm.input_ids[:n].tolist())
            tmp = path.with_name(path.name + ".tmp")
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
            if not llama_cpp.llama_state_seq_save_file(self._llm._ctx.ctx, str(tmp).encode(), 0, tokens, n):
                tmp.unlink(missing_ok=True)
                return False
            os.replace(tmp, path)
            return True

    def load_state(self, path: Path) -> int:
        """Replace the KV cache with the one saved at ``path``; the number of tokens it holds (0: the file
        could not be read, and the cache is empty). Generation then reuses only the leading tokens it
        shares with the next prompt, so a state saved before the conversation changed costs nothing but
        the part that still matches."""
        import ctypes

        import llama_cpp

        with self.lock:
            llm = self._llm
            memory = llama_cpp.llama_get_memory(llm._ctx.ctx)
            llama_cpp.llama_memory_clear(memory, True)
            llm.n_tokens = 0
            tokens = (llama_cpp.llama_token * self.n_ctx)()
            count = ctypes.c_size_t(0)
            read = llama_cpp.llama_state_seq_load_file(llm._ctx.ctx, str(path).encode(), 0, tokens, self.n_ctx,
                                                       ctypes.byref(count))
            if not read or not 0 < count.value <= self.n_ctx:
                llama_cpp.llama_memory_clear(memory, True)
                return 0
            n = count.value
            llm.input_ids[:n] = tokens[:n]
            llm.n_tokens = n
            llm._requires_eval = True
            return n

    def clear_cache(self) -> None:
        """Forget every cached token (after the conversation it came from was erased)."""
        import llama_cpp

        with self.lock:
            llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._llm._ctx.ctx), True)
            self._llm.n_tokens = 0

    # -- tokens -------------------------------------------------------------------------------
    def _tokenize_special(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    def tokenize(self, text: str) -> list[int]:
        return self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text)) if text else 0

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._llm.detokenize(list(tokens)).decode("utf-8", errors="replace")

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        return self.template.render(messages, add_generation_prompt)

    # -- generation ---------------------------------------------------------------------------
    def cached_prefix(self, prompt: Sequence[int]) -> int:
        """How many leading prompt tokens are already in the KV cache (at least one is re-run)."""
        cached = self._llm._input_ids
        n = 0
        for a, b in zip(cached, prompt):
            if a != b:
                break
            n += 1
        return min(n, len(prompt) - 1)

    def _splice(self, prompt: Sequence[int]) -> tuple[int, int]:
        """Apply ``plan_splice`` to the KV cache: the tokens it moved instead of re-evaluating and the new
        tokens it evaluated in between ((0, 0): nothing to splice).

        Afterwards the cache holds ``prompt[:insert + size]`` at positions 0.., so llama-cpp-python's
        own prefix reuse takes over from there."""
        import llama_cpp

        llm = self._llm
        cached = llm._input_ids.tolist()
        plan = plan_splice(cached, prompt)
        if plan is None:
            return 0, 0
        memory = llama_cpp.llama_get_memory(llm._ctx.ctx)
        end = plan.moved + plan.size
        # llama.cpp appends to a sequence only after its last position, so the kept run is parked in
        # sequence 1 while the new tokens are appended to sequence 0, then moved and handed back.
        llama_cpp.llama_memory_seq_cp(memory, 0, 1, plan.moved, end)
        if not llama_cpp.llama_memory_seq_rm(memory, 0, plan.keep, -1):
            llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
            llm.reset()  # a partial removal failed: start from an empty cache rather than a wrong one
            return 0, 0
        inserted = list(prompt[plan.keep:plan.insert])
        try:
            for i in range(0, len(inserted), llm.n_batch):
                chunk = inserted[i:i + llm.n_batch]
                llm._batch.set_batch(batch=chunk, n_past=plan.keep + i, logits_all=False)
                llm._ctx.decode(llm._batch)
        except RuntimeError:  # the cache is half spliced: empty it, and the prompt is read in full
            llama_cpp.llama_memory_clear(memory, True)
            llm.n_tokens = 0
            return 0, 0
        if plan.insert != plan.moved:
            llama_cpp.llama_memory_seq_add(memory, 1, plan.moved, end, plan.insert - plan.moved)
        llama_cpp.llama_memory_seq_cp(memory, 1, 0, plan.insert, plan.insert + plan.size)
        llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
        held = plan.insert + plan.size
        llm.input_ids[:held] = prompt[:held]
        llm.n_tokens = held
        llm._requires_eval = True
        return plan.size, len(inserted)

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        grammar: str | None = None,
        on_text: TextCallback | None = None,
        repeat_penalty: float = 1.0,
    ) -> Generation:
        from llama_cpp import LlamaGrammar

        if len(prompt) + max_tokens > self.n_ctx:
            raise BackendError(
                f"prompt of {len(prompt)} tokens plus {max_tokens} to generate exceeds the context of {self.n_ctx}"
            )
        with self.lock:
            compiled = LlamaGrammar.from_string(grammar, verbose=False) if grammar else None
            start = time.perf_counter()
            shifted, inserted = self._splice(prompt) if self.kv_shift else (0, 0)
            reused = self.cached_prefix(prompt) - inserted
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
            end = time.perf_counter()
        first = first or end
        return Generation(
            text=text,
            tokens=tokens,
            prompt_tokens=len(prompt),
            evaluated=len(prompt) - reused,
            reused=reused,
            shifted=shifted,
            prefill_ms=(first - start) * 1000,
            decode_ms=(end - first) * 1000,
            stopped=stopped,
        )
