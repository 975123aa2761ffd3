"""The small interface every chat backend implements; the core talks to nothing else.

A backend renders chat messages to tokens itself (so user text can never become control tokens),
counts tokens with the model's own tokenizer, and generates under an optional constraint on its output
(``constraints.py``: typed objects it renders for its engine, GBNF or a JSON schema) while reporting how many
prompt tokens it evaluated and how many it reused from its KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

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


class ChatBackend:
    """What the core asks of a chat model. Every backend subclasses it: ``name``, ``n_ctx``, ``tokenize``,
    ``count_tokens``, ``render`` and ``generate`` are its own; the optional abilities below are declared here
    with the answer of a backend that lacks them, and a backend that has one overrides it."""

    name: str
    n_ctx: int

    # -- what the backend carries (a backend sets those it knows) ---------------------------------------
    model_name: str | None = None  # whose tokens the counts are (a model file's name); None: ``name`` says
    estimated: bool = False  # token counts are an estimate, not the model's tokenizer's (a trace says so)
    constraint: str | None = None  # the output-constraint format a served model takes ("gbnf", "json-schema",
    # or "none": it holds output to nothing, and the runtime does not ask it for decisions); None: in process
    n_threads: int | None = None  # CPU threads it generates on, when it runs the model in this process
    # The store and conversation whose prompt the KV cache holds, and the erase generation it was built under
    # (``store.kvstate.PrefixStates`` sets it: a backend may be shared by several ``LocalPager``s).
    cache_owner: tuple | None = None
    # ``generate(..., keep=(n, ...))`` saves the KV cache of ``prompt[:n]`` and puts it back for a later prompt
    # beginning with it, even after other prompts ran there (the focused answer's fixed part on a side context
    # that also does the model's side work); then ``has_kept`` and ``kept_fits`` answer.
    keeps_prefixes: bool = False
    # The KV cache saved to a file and read back by a later process (``store.kvstate``): ``state_key``,
    # ``save_state``, ``load_state`` and ``cached_tokens`` below are then the backend's own.
    saves_state: bool = False

    def tokenize(self, text: str) -> list[int]:
        """Tokens of plain text; control-token strings in it stay text."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int:
        raise NotImplementedError

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        """The prompt tokens of ``messages`` in the model's chat template."""
        raise NotImplementedError

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
        raise NotImplementedError

    # -- optional abilities ------------------------------------------------------------------------------
    def expresses(self, constraint: Constraint) -> bool:
        """Whether the backend can hold its output to ``constraint``: yes, unless it says otherwise (a model
        server that takes neither GBNF nor a JSON schema)."""
        return True

    def fork(self) -> ChatBackend:
        """A second context on the same model for side work (keywords, eviction advice); a backend that has
        none shares its one context, and side work costs the chat its cache."""
        return self

    def has_kept(self, tokens: Sequence[int]) -> bool:
        """Whether exactly ``tokens`` are kept (``keeps_prefixes``)."""
        return False

    def kept_fits(self, n_tokens: int) -> bool:
        """Whether ``n_tokens`` more would be kept without pushing another prefix out (``keeps_prefixes``)."""
        return False

    def clear_cache(self) -> None:
        """Forget every cached token (it may hold erased text); nothing to do for a backend that keeps none."""

    def state_key(self) -> str:
        """What a saved state is valid for (model, build, context shape): part of its file name (``saves_state``)."""
        raise NotImplementedError

    def cached_tokens(self) -> list[int]:
        """The tokens the KV cache holds now, in order (``saves_state``)."""
        raise NotImplementedError

    def save_state(self, path: Path) -> bool:
        """Write the KV cache to ``path``; False when there was nothing to write (``saves_state``)."""
        raise NotImplementedError

    def load_state(self, path: Path) -> int:
        """Replace the KV cache with the one saved at ``path``; the tokens it holds, 0 if it could not be read
        (``saves_state``)."""
        raise NotImplementedError
