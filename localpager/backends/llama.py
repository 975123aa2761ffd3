"""The llama.cpp backend (llama-cpp-python), for any GGUF chat model on the CPU."""

from __future__ import annotations

import os
import threading
import time
import uuid
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..modelpaths import chat_model_path
from .base import BackendError, Generation, Message, TextCallback

DEFAULT_N_CTX = 2048


def cpu_threads() -> int:
    """The cores this process may run on (llama-cpp-python's default is half of them)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


def load_llama(path: Path, **kwargs: Any):
    """A ``Llama`` for ``path`` with llama.cpp's console output silenced; a one-line error if it fails."""
    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    try:
        with suppress_stdout_stderr(disable=False):
            return llama_cpp.Llama(str(path), verbose=False, **kwargs)
    except (ValueError, RuntimeError, OSError) as exc:
        raise BackendError(f"cannot load model {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None


class ChatTemplate:
    """Renders messages with the model's own Jinja chat template, but tokenizes their contents as plain
    text, so that a user typing ``<|im_end|>`` gets those characters, not a control token.

    The template is rendered with a unique marker in place of each message's content; the text between
    markers is template (tokenized with special tokens on), the contents are user data (special off).
    """

    def __init__(self, template: str, tokenize_special, tokenize_plain, bos: list[int]):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        self._template = env.from_string(template)
        self._special = lru_cache(maxsize=256)(lambda s: tuple(tokenize_special(s)))
        self._plain = lru_cache(maxsize=4096)(lambda s: tuple(tokenize_plain(s)))
        self._bos = bos

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        markers = [f"\x00{uuid.uuid4().hex}\x00" for _ in messages]
        text = self._template.render(
            messages=[{"role": m.role, "content": mark} for m, mark in zip(messages, markers)],
            add_generation_prompt=add_generation_prompt,
            bos_token="",
            eos_token="",
        )
        tokens = list(self._bos)
        for message, mark in zip(messages, markers):
            head, sep, text = text.partition(mark)
            if not sep:
                raise BackendError("the model's chat template dropped a message; use a chat model")
            tokens += self._special(head) if head else ()
            tokens += self._plain(message.content) if message.content else ()
        tokens += self._special(text) if text else ()
        return tokens


CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


class LlamaCppBackend:
    """One GGUF model in one llama.cpp context; a lock makes it safe to share between threads."""

    name = "llama-cpp"

    def __init__(self, model_path: str | os.PathLike | None = None, n_ctx: int = DEFAULT_N_CTX,
                 n_threads: int | None = None):
        self.model_path = chat_model_path(model_path)
        # All cores by default; LOCALPAGER_THREADS lowers it when other work shares the machine: two
        # llama.cpp processes each using every core slow each other down by an order of magnitude.
        self.n_threads = n_threads or int(os.environ.get("LOCALPAGER_THREADS", 0)) or cpu_threads()
        self.n_ctx = n_ctx
        self.lock = threading.RLock()
        self._llm = load_llama(
            self.model_path, n_ctx=n_ctx, n_threads=self.n_threads, n_threads_batch=self.n_threads,
            n_batch=min(512, n_ctx),
        )
        self.model_name = self.model_path.name
        bos = [self._llm.token_bos()] if self._llm.metadata.get("tokenizer.ggml.add_bos_token") == "true" else []
        self.eos = {self._llm.token_eos()}
        template = self._llm.metadata.get("tokenizer.chat_template") or CHATML
        self.template = ChatTemplate(template, self._tokenize_special, self.tokenize, bos)

    def fork(self) -> "LlamaCppBackend":
        """Another context on the same model file (llama.cpp maps the weights, so they are shared):
        side work such as keyword extraction runs there and leaves this context's KV cache alone."""
        return LlamaCppBackend(self.model_path, n_ctx=self.n_ctx, n_threads=self.n_threads)

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
            reused = self.cached_prefix(prompt)
            tokens: list[int] = []
            text = ""
            stopped = "length"
            start = time.perf_counter()
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
            prefill_ms=(first - start) * 1000,
            decode_ms=(end - first) * 1000,
            stopped=stopped,
        )
