"""Counting a text's tokens with the GGUF's own vocabulary (``LlamaTokenCounter.count``): the count
``llama_internals.count_tokens`` reads into one reused buffer is the length of the list ``Llama.tokenize`` gives,
whatever the text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.model

TEXTS = ["", " ", "I'm allergic to peanuts.", "héllo wörld ☃ 🎉 " * 40, "x" * 20000, "short again",
         "<|im_start|>user\nhi<|im_end|>", "日本語のテキスト" * 300, "nul \x00 byte", "\n\n\t  "]


def test_a_count_is_the_length_of_the_tokenization_short_long_and_short_again(counter):
    assert [counter.count(t) for t in TEXTS] == [len(counter.tokenize(t)) if t else 0 for t in TEXTS]
    assert counter.count("x" * 20000) > 1000  # past the first buffer: it grew, and counts all of it


def test_the_loaded_model_counts_as_its_vocabulary_does(backend, counter):
    assert [backend.count_tokens(t) for t in TEXTS] == [counter.count(t) for t in TEXTS]
    assert [backend.count_tokens(t) for t in TEXTS] == [len(backend.tokenize(t)) for t in TEXTS]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_counts_as_many_tokens_as_it_tokenizes_to(counter, text):
    assert counter.count(text) == (len(counter.tokenize(text)) if text else 0)
