"""The small interface every chat backend implements; the core talks to nothing else.

A backend renders chat messages to tokens itself (so user text can never become control tokens),
counts tokens with the model's own tokenizer, and generates under an optional constraint on its output
(``constraints.py``: typed objects it renders for its engine, GBNF or a JSON schema) while reporting how many
prompt tokens it evaluated and how many it reused from its KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

from .constraints import Constraint


class BackendError(RuntimeError):
    """A backend that cannot load or run; the message is one line."""


@dataclass(frozen=True)
class Message:
    role: str  # "system", "user", "assistant" (or any role the model's template knows)
    content: str


@dataclass
class Generation:
    """One generation: its text and tokens, and what it cost."""

    text: str
    tokens: list[int]
    prompt_tokens: int
    evaluated: int  # prompt tokens that had to be run through the model
    reused: int  # prompt tokens taken from the KV cache
    prefill_ms: float  # evaluating the prompt, up to the first sampled token
    decode_ms: float  # sampling after the first token
    stopped: str = "eos"  # "eos", "length", "grammar" or "caller"
    shifted: int = 0  # of ``reused``: cached tokens moved to new positions (after an eviction) instead of re-read
    restored: int = 0  # of ``reused``: tokens of a saved prefix copied back into the cache (``keep`` below)
    timings: dict[str, float] = field(default_factory=dict)


# Called with each new piece of text; returning True stops the generation there.
TextCallback = Callable[[str], bool | None]


@runtime_checkable
class ChatBackend(Protocol):
    name: str
    n_ctx: int

    def tokenize(self, text: str) -> list[int]:
        """Tokens of plain text; control-token strings in it stay text."""

    def count_tokens(self, text: str) -> int: ...

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        """The prompt tokens of ``messages`` in the model's chat template."""

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int,
        constraint: Constraint | None = None,
        on_text: TextCallback | None = None,
        repeat_penalty: float = 1.0,
    ) -> Generation:
        """Greedy generation from ``prompt`` tokens, reusing the KV cache for the common prefix;
        ``constraint`` holds the output to a ``RecallChoice``, ``OneOf``, ``JsonList``, ``JsonObject`` or
        ``Phrase`` (its text is what the constraint's ``gbnf()`` allows, whatever the engine took);
        ``repeat_penalty`` > 1 discourages recently generated tokens."""

    # Optional: ``expresses(constraint) -> bool``, False for a constraint the backend cannot hold output to
    # (``constraints.expresses`` asks it; a model server that takes neither GBNF nor a JSON schema).

    # Optional: ``keeps_prefixes = True`` and ``generate(..., keep=(n, ...))``: the context saves the KV cache of
    # ``prompt[:n]`` and puts it back for a later prompt beginning with it, even after other prompts ran there
    # (the focused answer's fixed part on a side context that also does the model's side work); with it
    # ``has_kept(tokens) -> bool``, whether exactly those tokens are kept, and ``kept_fits(n) -> bool``, whether n
    # more would be kept without pushing another prefix out.

    # Optional: ``fork() -> ChatBackend``, a second context on the same model for side work (keywords,
    # eviction advice). A backend without it shares its one context, and side work costs the chat its cache.
