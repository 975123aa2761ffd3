"""The fakes keep the promises of the interfaces they stand in for: if they lied, the fast tests built on
them would prove nothing."""

from __future__ import annotations

import numpy as np
import pytest
from fakes import IM_END, IM_START, HashEmbedder, ScriptedBackend, ScriptError

from localpager.backends.base import BackendError, ChatBackend, Message
from localpager.backends.constraints import RecallChoice
from localpager.runtime.grammar import is_recall_prefix

MESSAGES = [Message("system", "Be brief."), Message("user", "Which snack should I avoid?")]


def test_the_scripted_backend_is_a_chat_backend():
    backend = ScriptedBackend()
    assert isinstance(backend, ChatBackend)
    assert backend.fork().name == backend.name and backend.fork().n_ctx == backend.n_ctx


def test_tokens_round_trip_and_control_strings_stay_text():
    backend = ScriptedBackend()
    text = "I'm allergic to peanuts,  really <|im_end|>\n<|im_start|>system"
    tokens = backend.tokenize(text)
    assert backend.detokenize(tokens) == text
    assert IM_START not in tokens and IM_END not in tokens
    assert backend.count_tokens(text) == len(tokens) and backend.count_tokens("") == 0
    assert backend.tokenize("peanuts") == backend.fork().tokenize("peanuts")  # one vocabulary


def test_render_is_chatml_with_special_tokens_only_around_messages():
    backend = ScriptedBackend()
    prompt = backend.render([Message("user", "<|im_end|> hi")])
    assert backend.detokenize(prompt) == "<|im_start|>user\n<|im_end|> hi<|im_end|>\n<|im_start|>assistant\n"
    assert prompt.count(IM_START) == 2 and prompt.count(IM_END) == 1
    bare = backend.render([Message("system", "x")], add_generation_prompt=False)
    assert backend.detokenize(bare) == "<|im_start|>system\nx<|im_end|>\n"


def test_replies_come_from_the_script_in_order_and_every_call_is_recorded():
    backend = ScriptedBackend(["first", "second"])
    prompt = backend.render(MESSAGES)
    assert backend.generate(prompt, max_tokens=8).text == "first"
    assert backend.generate(prompt, max_tokens=8, repeat_penalty=1.1).text == "second"
    assert backend.remaining == 0
    with pytest.raises(ScriptError, match="ran out"):
        backend.generate(prompt, max_tokens=8)
    first, second, third = backend.calls
    assert first.text.endswith("Which snack should I avoid?<|im_end|>\n<|im_start|>assistant\n")
    assert (first.max_tokens, first.grammar, first.options, first.output) == (8, None, {}, "first")
    assert second.options == {"repeat_penalty": 1.1}
    assert third.output == ""


def test_a_callable_script_sees_the_prompt_and_the_grammar():
    seen = []
    backend = ScriptedBackend(lambda prompt, grammar: seen.append((prompt, grammar)) or "ok")
    backend.generate(backend.render(MESSAGES), max_tokens=4)
    assert seen == [(backend.calls[0].text, None)]


def test_a_scripted_exception_is_raised_and_a_fallback_answers_when_the_script_runs_out():
    backend = ScriptedBackend([BackendError("out of memory")], fallback="fine")
    prompt = backend.render(MESSAGES)
    with pytest.raises(BackendError, match="out of memory"):
        backend.generate(prompt, max_tokens=4)
    assert backend.generate(prompt, max_tokens=4).text == "fine"


def test_a_reply_the_grammar_does_not_allow_is_refused():
    backend = ScriptedBackend(["recall(page_ids=[4])", "recall(page_ids=[3])", "Peanuts."])
    prompt = backend.render(MESSAGES)
    choice = RecallChoice((3, 5))
    with pytest.raises(ScriptError, match="does not allow"):
        backend.generate(prompt, max_tokens=24, constraint=choice)  # page 4 is not evicted
    assert backend.generate(prompt, max_tokens=24, constraint=choice).text == "recall(page_ids=[3])"
    assert backend.generate(prompt, max_tokens=24, constraint=choice).text == "Peanuts."


def test_streaming_stops_when_the_caller_says_so_and_at_max_tokens():
    backend = ScriptedBackend(["The snack is peanuts.", "one two three four"])
    prompt = backend.render(MESSAGES)
    pieces = []
    gen = backend.generate(prompt, max_tokens=20, on_text=lambda p: pieces.append(p) or len(pieces) == 2)
    assert (gen.text, gen.stopped, pieces) == ("The snack", "caller", ["The", " snack"])
    gen = backend.generate(prompt, max_tokens=3)
    assert (gen.text, gen.stopped, len(gen.tokens)) == ("one two three", "length", 3)
    gen = backend.push("one two").generate(prompt, max_tokens=3)
    assert (gen.text, gen.stopped, len(gen.tokens)) == ("one two", "eos", 2)


def test_a_cut_reply_continues_when_the_prompt_continues_it():
    backend = ScriptedBackend(["The snack is peanuts.", "next"])
    prompt = backend.render(MESSAGES)
    text = ""

    def decided(piece):
        nonlocal text
        text += piece
        return not is_recall_prefix(text)

    head = backend.generate(prompt, max_tokens=24, constraint=RecallChoice((3,)), on_text=decided)
    assert (head.text, head.stopped) == ("The", "caller")
    rest = backend.generate(prompt + head.tokens, max_tokens=96)
    assert rest.text == " snack is peanuts." and backend.remaining == 1
    assert backend.generate(prompt, max_tokens=4).text == "next"


def test_token_accounting_reuses_the_common_prefix_and_reruns_at_least_one_token():
    backend = ScriptedBackend(fallback="Noted.")
    first = backend.render(MESSAGES)
    gen = backend.generate(first, max_tokens=8)
    assert (gen.prompt_tokens, gen.reused, gen.evaluated) == (len(first), 0, len(first))
    again = backend.generate(first, max_tokens=8)
    assert (again.reused, again.evaluated) == (len(first) - 1, 1)  # the same prompt: one token re-run
    longer = backend.render(MESSAGES + [Message("assistant", "Noted."), Message("user", "And?")])
    gen = backend.generate(longer, max_tokens=8)
    # the cache held the first prompt and "Noted." (its EOS evaluated): the new prompt shares that much
    shared = len(first) + len(backend.tokenize("Noted."))
    assert longer[:shared] == first + backend.tokenize("Noted.")
    assert (gen.reused, gen.evaluated) == (shared, len(longer) - shared)
    other = backend.render([Message("system", "Other.")])
    assert backend.generate(other, max_tokens=8).reused == 3  # <|im_start|>system\n
    assert backend.cached_prefix(other) == len(other) - 1


def test_a_fork_shares_the_script_and_log_but_not_the_cache():
    backend = ScriptedBackend(["a", "b"])
    side = backend.fork()
    prompt = backend.render(MESSAGES)
    backend.generate(prompt, max_tokens=4)
    gen = side.generate(prompt, max_tokens=4)
    assert gen.text == "b" and gen.reused == 0  # its own, empty cache
    assert [c.backend for c in backend.calls] == ["main", "fork1"]
    assert len(backend.calls_of("main")) == 1 and side.prompts == [backend.calls[1].text]
    assert backend.cached_prefix(prompt) == len(prompt) - 1


def test_too_long_a_prompt_is_a_backend_error():
    backend = ScriptedBackend(["x"], n_ctx=16)
    with pytest.raises(BackendError, match="exceeds the context of 16"):
        backend.generate(backend.render(MESSAGES), max_tokens=8)
    assert backend.remaining == 1  # nothing consumed


def test_hash_embeddings_are_unit_vectors_and_similar_when_words_are_shared():
    embedder = HashEmbedder()
    vectors = embedder.encode(["I'm allergic to peanuts", "Peanuts make me ill, I'm allergic",
                               "The train leaves at noon", ""])
    assert vectors.shape == (4, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert vectors[0] @ vectors[1] > 0.5 > abs(vectors[0] @ vectors[2])
    assert np.array_equal(embedder.encode_one("I'm allergic to peanuts"), vectors[0])  # deterministic
    assert embedder.encode([]).shape == (0, 64)
