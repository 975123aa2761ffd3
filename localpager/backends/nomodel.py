"""A chat backend with no model: memory stored and searched in a process where another app's model answers.

``LocalPager(path, backend=NoChatModel())`` adds turns, pages, bookmarks, embeds, searches, recalls (without
the model), forgets and corrects without loading a GGUF file, not even its tokenizer: token counts are
``core.tokens.ApproxTokenCounter``'s estimate (four characters a token). The counter's name, ``approx``, is
stored with each conversation a turn is added to, so the first ``ask`` in a process with a real model
recounts its pages under that model's tokenizer, as it does for counts made by any other tokenizer
(``memory.conversation.Conversation.counted``). Anything that needs the model (``ask``, model keywords, eviction
advice, ``maintain``) gets a one-line ``BackendError``; eviction advice falls back to its rule and FIFO
(the default policy asks no model), and model keyword work waits for the next ``ask`` elsewhere.

``localpager mcp`` opens its store this way (``localpager.serving.mcp``).
"""

from __future__ import annotations

from typing import Sequence

from ..core.tokens import ApproxTokenCounter
from .base import BackendError, ChatBackend, Generation, Message

NO_MODEL = ("this process has no chat model (LocalPager(backend=NoChatModel())): it stores and searches memory; "
            "answers come from the app's own model, or from `localpager ask` in a process with one")


class NoChatModel(ChatBackend):
    """A ``ChatBackend`` that counts tokens with an estimate and generates nothing."""

    name = "no-model"
    model_name = ApproxTokenCounter.name  # whose tokens the stored counts are: ``BackendTokenCounter`` reads it
    estimated = True  # token counts are an estimate (a trace says so)

    def __init__(self, model_path=None, n_ctx: int = 2048, **_options):
        self.n_ctx = n_ctx
        self._counter = ApproxTokenCounter()

    def count_tokens(self, text: str) -> int:
        return self._counter.count(text)

    def tokenize(self, text: str) -> list[int]:
        raise BackendError(NO_MODEL)

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> list[int]:
        raise BackendError(NO_MODEL)

    def generate(self, prompt: Sequence[int], **_kwargs) -> Generation:
        raise BackendError(NO_MODEL)
