"""Every use of llama-cpp-python beyond its public ``Llama`` API, behind one version check.

The llama.cpp backend moves tokens inside the KV cache (a splice after an eviction), saves and loads one
sequence's cache to a file, and gives a context room for a second sequence. llama-cpp-python has no public API
for any of that: it takes llama.cpp's C functions (``llama_memory_seq_*``, ``llama_get_memory``,
``llama_state_seq_*``), the ``Llama`` object's private context and batch (``_ctx``, ``_batch``), its token
bookkeeping (``input_ids[:n_tokens]``, which its own prefix reuse reads, so it must follow every move) and an
amendment of its default context parameters (``n_seq_max``, ``kv_unified``). These change between releases, so
they live here only, for the releases they were written against: importing this module checks the installed
version and fails with one line naming the supported range (``tests/`` check that no other module reaches them).

``localpager.backends.llama`` uses ``Llama``'s public API and this module; it imports this module only when a
model loads, so ``import localpager`` never needs llama-cpp-python.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Sequence

from .base import BackendError

SUPPORTED = "~=0.3.36"
LOWEST, BELOW = (0, 3, 36), (0, 4)  # ~=0.3.36: 0.3.36 up to, not including, 0.4


def installed_version() -> str | None:
    """llama-cpp-python's version as installed (its distribution's metadata; None when it is not installed)."""
    for name in ("llama-cpp-python", "llama_cpp_python"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def check_version(version: str | None) -> None:
    """A one-line ``BackendError`` unless ``version`` is in the range these internals were written for."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", re.split(r"[^\d.]", version or "", maxsplit=1)[0])[:3])
    if version is None or not numbers or not LOWEST <= numbers < BELOW:
        raise BackendError(f"localpager needs llama-cpp-python {SUPPORTED} (0.3.36 up to 0.4); found "
                           f"{version or 'none'}: pip install 'llama-cpp-python{SUPPORTED}'")


VERSION = installed_version()
check_version(VERSION)

import llama_cpp  # noqa: E402 - only once the version is known to fit
import llama_cpp.llama_cpp as _raw  # noqa: E402
from llama_cpp._utils import suppress_stdout_stderr  # noqa: E402


# -- loading -------------------------------------------------------------------------------------------
def quiet():
    """llama.cpp's console output (model loading, warnings) silenced for the duration."""
    return suppress_stdout_stderr(disable=False)


_PARAMS_LOCK = threading.Lock()


@contextmanager
def two_sequences() -> Iterator[None]:
    """Contexts created inside have room for a second sequence in one shared KV buffer (``splice`` parks the
    tokens it moves there). ``Llama()`` takes no such option, so its default parameters are amended for the
    duration of the call, under a lock."""
    default = _raw.llama_context_default_params

    def amended():
        params = default()
        params.n_seq_max = 2
        params.kv_unified = True
        return params

    with _PARAMS_LOCK:
        _raw.llama_context_default_params = amended
        try:
            yield
        finally:
            _raw.llama_context_default_params = default


def system_info() -> str:
    """llama.cpp's build and CPU features, as it prints them."""
    info = llama_cpp.llama_print_system_info()
    return info.decode() if isinstance(info, bytes) else str(info)


# -- counting tokens ---------------------------------------------------------------------------------
class _Counting(threading.local):
    """This thread's token buffer for ``count_tokens``, grown as texts need."""

    size = 0
    buffer: Any = None


_COUNTING = _Counting()


def count_tokens(llm: Any, text: bytes) -> int:
    """How many tokens ``text`` is in ``llm``'s vocabulary (no BOS, special tokens as text), as ``Llama.tokenize``
    would list them. That allocates a buffer the size of the model's training context (8,192 tokens for SmolLM2)
    and copies the tokens into a list on every call: the turns of 60 generated conversations (9,607 texts) took
    2.3 s so and 1.4 s counted into this thread's one buffer, sized for the text (a token is a byte at least)."""
    need = len(text) + 8
    if _COUNTING.size < need:
        _COUNTING.size = max(need, 2 * _COUNTING.size, 1024)
        _COUNTING.buffer = (llama_cpp.llama_token * _COUNTING.size)()
    n = llama_cpp.llama_tokenize(llm._model.vocab, text, len(text), _COUNTING.buffer, _COUNTING.size, False, False)
    if n < 0:  # a vocabulary whose token is shorter than a byte: what it asks for
        return len(llm.tokenize(text, add_bos=False, special=False))
    return n


# -- the KV cache -------------------------------------------------------------------------------------
def _memory(llm: Any):
    return llama_cpp.llama_get_memory(llm._ctx.ctx)


def can_shift(llm: Any) -> bool:
    """Whether the context's KV cache can move tokens to new positions (a splice needs it)."""
    memory = _memory(llm)
    return memory is not None and bool(llama_cpp.llama_memory_can_shift(memory))


def cached_tokens(llm: Any) -> list[int]:
    """The tokens whose keys and values the context holds, in order (what ``Llama`` reuses as a prefix)."""
    return llm.input_ids[: llm.n_tokens].tolist()


def clear(llm: Any) -> None:
    """Forget every cached token."""
    llama_cpp.llama_memory_clear(_memory(llm), True)
    llm.n_tokens = 0


def save_sequence(llm: Any, path: Path) -> bool:
    """Write sequence 0's KV cache and its tokens to ``path`` (owner-only, replaced atomically); False when
    the cache is empty or llama.cpp could not write it."""
    n = llm.n_tokens
    if n == 0:
        return False
    tokens = (llama_cpp.llama_token * n)(*llm.input_ids[:n].tolist())
    tmp = path.with_name(path.name + ".tmp")
    os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600))
    if not llama_cpp.llama_state_seq_save_file(llm._ctx.ctx, str(tmp).encode(), 0, tokens, n):
        tmp.unlink(missing_ok=True)
        return False
    os.replace(tmp, path)
    return True


def load_sequence(llm: Any, path: Path, n_ctx: int) -> int:
    """Replace the KV cache with the sequence saved at ``path``; the tokens it holds (0: unreadable, and the
    cache is left empty)."""
    memory = _memory(llm)
    llama_cpp.llama_memory_clear(memory, True)
    llm.n_tokens = 0
    tokens = (llama_cpp.llama_token * n_ctx)()
    count = ctypes.c_size_t(0)
    read = llama_cpp.llama_state_seq_load_file(llm._ctx.ctx, str(path).encode(), 0, tokens, n_ctx, ctypes.byref(count))
    if not read or not 0 < count.value <= n_ctx:
        llama_cpp.llama_memory_clear(memory, True)
        return 0
    n = count.value
    llm.input_ids[:n] = tokens[:n]
    llm.n_tokens = n
    llm._requires_eval = True
    return n


def splice(llm: Any, prompt: Sequence[int], keep: int, moved: int, insert: int, size: int) -> int:
    """Turn the cache into ``prompt[:insert + size]``: keep its first ``keep`` tokens, drop
    ``cached[keep:moved]``, evaluate ``prompt[keep:insert]`` and shift the ``size`` cached tokens from ``moved``
    to ``insert`` (``llama.Splice`` plans it). The new tokens evaluated; -1 when it failed and the cache was
    emptied (the prompt is then read in full)."""
    memory = _memory(llm)
    end = moved + size
    # llama.cpp appends to a sequence only after its last position, so the kept run is parked in
    # sequence 1 while the new tokens are appended to sequence 0, then moved and handed back.
    llama_cpp.llama_memory_seq_cp(memory, 0, 1, moved, end)
    if not llama_cpp.llama_memory_seq_rm(memory, 0, keep, -1):
        llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
        llm.reset()  # a partial removal failed: start from an empty cache rather than a wrong one
        return -1
    inserted = list(prompt[keep:insert])
    try:
        for i in range(0, len(inserted), llm.n_batch):
            chunk = inserted[i:i + llm.n_batch]
            llm._batch.set_batch(batch=chunk, n_past=keep + i, logits_all=False)
            llm._ctx.decode(llm._batch)
    except RuntimeError:  # the cache is half spliced: empty it
        clear(llm)
        return -1
    if insert != moved:
        llama_cpp.llama_memory_seq_add(memory, 1, moved, end, insert - moved)
    llama_cpp.llama_memory_seq_cp(memory, 1, 0, insert, insert + size)
    llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
    held = insert + size
    llm.input_ids[:held] = prompt[:held]
    llm.n_tokens = held
    llm._requires_eval = True
    return len(inserted)


# -- saved prefixes ------------------------------------------------------------------------------------
def extend_to(llm: Any, prompt: Sequence[int], upto: int) -> int:
    """Make the cache hold exactly ``prompt[:upto]``: keep the tokens it already shares with it and evaluate the
    rest (``Llama.eval`` drops every cell after what is kept). The tokens evaluated."""
    held = llm.input_ids[: llm.n_tokens].tolist()
    keep = 0
    for a, b in zip(held, prompt[:upto]):
        if a != b:
            break
        keep += 1
    if keep == upto and llm.n_tokens == upto:
        return 0
    llm.n_tokens = keep
    if keep < upto:
        llm.eval(list(prompt[keep:upto]))
    else:
        llm._ctx.kv_cache_seq_rm(-1, upto, -1)
    llm._requires_eval = True
    return upto - keep


def sequence_state(llm: Any, upto: int | None = None) -> bytes | None:
    """The KV cells (keys, values, positions) of sequence 0's first ``upto`` tokens (all: None) as bytes, what
    ``restore_sequence`` puts back. A part of the sequence is copied to sequence 1 first (a context made under
    ``two_sequences``; None without one), so nothing is re-evaluated and the cache stays as it was."""
    ctx = llm._ctx.ctx
    seq = 0
    if upto is not None and upto < llm.n_tokens:
        if llama_cpp.llama_n_seq_max(ctx) < 2:
            return None
        memory = _memory(llm)
        llama_cpp.llama_memory_seq_rm(memory, 1, -1, -1)
        llama_cpp.llama_memory_seq_cp(memory, 0, 1, 0, upto)
        seq = 1
    try:
        size = llama_cpp.llama_state_seq_get_size(ctx, seq)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, seq)
        return ctypes.string_at(buffer, written) if written else None
    finally:
        if seq:
            llama_cpp.llama_memory_seq_rm(_memory(llm), 1, -1, -1)


def restore_sequence(llm: Any, state: bytes, tokens: Sequence[int]) -> bool:
    """Replace the cache with ``state`` (from ``sequence_state``), which holds ``tokens``; False (and an empty
    cache) when llama.cpp refuses it."""
    memory = _memory(llm)
    llama_cpp.llama_memory_clear(memory, True)
    llm.n_tokens = 0
    buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
    if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buffer, len(state), 0) != len(state):
        llama_cpp.llama_memory_clear(memory, True)
        return False
    n = len(tokens)
    llm.input_ids[:n] = list(tokens)
    llm.n_tokens = n
    llm._requires_eval = True
    return True
