"""Evictions without re-reading the prompt: the KV splice of the llama.cpp backend on the real model.

A splice drops the evicted page's tokens from the KV cache, evaluates the new bookmark and moves the
resident turns after it (as llama.cpp's context shift does); the moved tokens keep what they computed
while the evicted page was still there, so the next-token distribution is close to, not equal to, a
fresh read of the same prompt. These tests bound how close, and what it saves."""

from __future__ import annotations

import llama_cpp
import numpy as np
import pytest

from localpager.backends import load_backend
from localpager.core.pager import PagingConfig
from localpager.lab.bench import replayed_prompts
from localpager.lab.synthetic import generate_conversation
from localpager.memory.api import LocalPager

pytestmark = [pytest.mark.model, pytest.mark.slow]


def last_logits(backend) -> np.ndarray:
    llm = backend._llm
    return np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm._n_vocab,)).copy()


@pytest.fixture(scope="module")
def first_eviction(tmp_path_factory):
    """The chat prompt before and right after the first eviction of a generated conversation paged at
    budget 1024, read by a splicing backend (which had read the prompt before) and by a plain one."""
    backend = load_backend(n_ctx=2048)
    lp = LocalPager(tmp_path_factory.mktemp("kv") / "s.db", backend=backend)
    chat = lp.conversation("kv", create=True, config=PagingConfig(budget=1024))
    for pager, prompt in replayed_prompts(lp, chat, generate_conversation(4, n_turns=200).turns):
        gen = backend.generate(prompt, max_tokens=1)
        if pager.evicted and gen.shifted:
            spliced = last_logits(backend)
            memory = llama_cpp.llama_get_memory(backend._llm._ctx.ctx)
            cache = {"tokens": backend._llm._input_ids.tolist(),
                     "last_pos": [llama_cpp.llama_memory_seq_pos_max(memory, s) for s in (0, 1)]}
            break
    else:
        pytest.fail("no eviction in 200 turns at budget 1024")
    plain = load_backend(n_ctx=2048, kv_shift=False)
    fresh = plain.generate(prompt, max_tokens=1)
    yield {"gen": gen, "spliced": spliced, "fresh": last_logits(plain), "fresh_gen": fresh, "prompt": prompt,
           "cache": cache}
    lp.close()


def test_an_eviction_evaluates_a_fraction_of_the_prompt(first_eviction):
    gen, fresh = first_eviction["gen"], first_eviction["fresh_gen"]
    assert gen.evaluated + gen.reused == gen.prompt_tokens
    assert fresh.shifted == 0 and fresh.evaluated > 0.5 * fresh.prompt_tokens  # the plain backend re-read it
    assert gen.shifted > 0
    assert gen.evaluated <= 0.25 * (gen.evaluated + gen.shifted)


def test_the_spliced_prediction_matches_a_fresh_read_within_tolerance(first_eviction):
    spliced, fresh = first_eviction["spliced"], first_eviction["fresh"]
    assert np.corrcoef(spliced, fresh)[0, 1] >= 0.95
    assert int(fresh.argmax()) in np.argsort(-spliced)[:5]


def test_the_cache_holds_exactly_the_prompt_after_a_splice(first_eviction):
    prompt, cache = first_eviction["prompt"], first_eviction["cache"]
    assert cache["tokens"] == list(prompt)
    # one sequence again, positions 0..len-1, the parking sequence empty
    assert cache["last_pos"] == [len(prompt) - 1, -1]
