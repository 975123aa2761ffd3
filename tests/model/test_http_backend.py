"""The openai-http backend against a real server: llama-cpp-python's own OpenAI-compatible server on the
default GGUF (one thread, loopback, a free port), started once for the module and stopped by its process
group. Grammar-constrained recall, what the server reports about its prompt cache, token counts equal to
the local tokenizer's, a server killed mid-answer and a server that is not there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from fakes import allows
from helpers import free_port, run_cli

from localpager.backends import load_backend
from localpager.backends.base import BackendError, Message
from localpager.backends.constraints import OneOf, RecallChoice
from localpager.runtime.grammar import WORTH, keyword_list, page_list, parse_decision
from localpager.runtime.settings import RecallSettings

pytestmark = [pytest.mark.model, pytest.mark.slow]
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")


def start_server(log_path) -> tuple[subprocess.Popen, str]:
    from localpager.core.modelpaths import chat_model_path

    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(chat_model_path()), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--n_threads_batch", "1"]
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode}; see {log_path}", pytrace=False)
        try:
            if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    stop_server(proc)
    pytest.fail(f"llama_cpp.server did not answer within 60 s; see {log_path}", pytrace=False)


def stop_server(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    proc, url = start_server(tmp_path_factory.mktemp("server") / "server.log")
    yield url
    stop_server(proc)


@pytest.fixture(scope="module")
def http(server):
    return load_backend("openai-http", base_url=server, n_ctx=2048)


def test_discovers_llama_cpp_python_and_its_grammar(http):
    assert (http.kind, http.constraint) == ("llama-cpp-python", "gbnf")
    assert http.model_name == "SmolLM2-135M-Instruct.Q4_1.gguf"  # the in-process counter's name: no recount


def test_token_counts_equal_the_local_tokenizer(http, counter):
    texts = ["I'm allergic to peanuts, I carry an EpiPen.", "Budget: $23,500 — not a cent more!",
             "東京で会いましょう", "  leading spaces\nand lines\n"]
    for text in texts:
        assert http.tokenize(text) == counter.tokenize(text)
        assert http.count_tokens(text) == counter.count(text)


def test_grammar_constrained_recall_names_only_evicted_pages(http):
    evicted = [2, 5]
    system = ("Older parts of this conversation were moved to numbered pages. Bookmarks (page: keywords):\n"
              "[p2:allergy,peanut,EpiPen]\n[p5:kitchen,budget,$23500]\n"
              "To read pages before answering, reply only with recall(page_ids=[N]).")
    prompt = http.render([Message("system", system), Message("user", "What is my kitchen budget?")])
    gen = http.generate(prompt, max_tokens=24, constraint=RecallChoice(tuple(evicted), 2, allow_answer=False))
    decision = parse_decision(gen.text)
    assert decision.is_recall and set(decision.page_ids) <= set(evicted)


def test_consecutive_turns_share_the_prefix_and_the_server_reuses_it(http):
    history = [Message("system", "You are a helpful assistant. " + "Remember what the user tells you. " * 30)]
    first = http.render(history + [Message("user", "My sister Priya lives in Cape Town.")])
    cold = http.generate(first, max_tokens=1)
    history += [Message("user", "My sister Priya lives in Cape Town."), Message("assistant", "Noted.")]
    second = http.render(history + [Message("user", "Where does she live?")])
    assert second[:len(first) - 3] == first[:len(first) - 3]  # only the generation prompt differs
    warm = http.generate(second, max_tokens=1)
    # llama-cpp-python's server reports no cache figures: marked unknown, every prompt token counted as evaluated
    assert cold.timings["reported"] == warm.timings["reported"] == 0.0
    assert (warm.evaluated, warm.reused, warm.prompt_tokens) == (len(second), 0, len(second))
    # but it does reuse its prefix: the second prompt, longer, is read in a fraction of the time
    assert warm.prefill_ms < 0.6 * cold.prefill_ms, (cold.prefill_ms, warm.prefill_ms)


def test_server_killed_mid_answer_stores_the_question_and_no_answer(tmp_path, fake_pager):
    proc, url = start_server(tmp_path / "server.log")
    try:
        lp = fake_pager(backend=load_backend("openai-http", base_url=url, n_ctx=2048))
        chat = lp.conversation("c", create=True)
        chat.add_turn("user", "I'm planning a trip to Lisbon.")
        chat.add_turn("assistant", "Lovely, when are you going?")
        question = "Tell me a long story about a lighthouse keeper and his cat, with many details."

        def kill(piece):
            stop_server(proc)

        with pytest.raises(BackendError) as info:
            chat.ask(question, on_text=kill)
        assert "\n" not in str(info.value) and "model server" in str(info.value)
        turns = lp.store.turns("c")
        asked = [t.index for t in turns if t.text == question]
        assert len(asked) == 1
        after = turns[asked[0] + 1:]
        # nothing of the answer: at most the store's note that it is missing
        assert all(t.role == "assistant" and t.text.startswith("(no answer") for t in after)
    finally:
        stop_server(proc)


def test_connection_refused_is_one_line():
    port = free_port()  # nothing listens there now
    with pytest.raises(BackendError, match="connection refused") as info:
        load_backend("openai-http", base_url=f"http://127.0.0.1:{port}/v1")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("constraint, user", [
    (OneOf(("7 May 2023", "8 May 2023")), "I repaired the fence yesterday [7 May 2023]. When did I repair it?"),
    (WORTH, "I am allergic to peanuts. Is this worth remembering? Answer yes or no."),
    (keyword_list(["EpiPen", "peanut", "allergy"], 2), "I carry an EpiPen. Reply with a JSON list of 2 keywords."),
    (page_list([1, 4]), "p1: garden\np4: kitchen\nWhich pages are not needed? Reply with a JSON list."),
], ids=["dates", "worth", "keywords", "pages"])
def test_every_constraint_reaches_the_server_as_gbnf_and_holds(http, constraint, user):
    """The answer's and the side work's constraints, not only the decision: rendered to GBNF, enforced by the
    server (any output its grammar allows passes)."""
    prompt = http.render([Message("system", "You are a helpful assistant."), Message("user", user)])
    gen = http.generate(prompt, max_tokens=16, constraint=constraint)
    assert gen.stopped == "eos" and allows(constraint.gbnf(), gen.text), gen.text


# -- every answer path through the served model, with no --tokenizer (issue 39) ---------------------------------
SMALL_TALK = [
    ("Any tips for keeping basil alive on a windowsill?", "Water it when the top of the soil is dry."),
    ("I watched a documentary about octopuses.", "Each arm has its own cluster of neurons."),
    ("The hallway could use a lighter colour.", "A lighter colour makes a narrow hallway feel wider."),
    ("Pancakes or waffles, which is easier?", "Pancakes: no special iron needed."),
]
SESAME = "I'm seriously allergic to sesame, even a trace sets me off."
LAPTOP = "My budget for the new laptop is $900."


@pytest.fixture
def served_chat(tmp_path, http):
    """A conversation whose statements about the user are evicted, answered by the served model."""
    from localpager.core.pager import PagingConfig
    from localpager.memory.api import LocalPager

    lp = LocalPager(tmp_path / "s.db", backend=http, recall=RecallSettings(max_answer_tokens=16))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_4", budget=256))
    planted = {2: SESAME, 8: LAPTOP}
    for i in range(24):
        user, assistant = SMALL_TALK[(i // 2) % len(SMALL_TALK)]
        chat.add_turn(*(("user", planted.get(i, user)) if i % 2 == 0 else
                        ("assistant", "Noted." if i - 1 in planted else assistant)))
    assert all(chat.pager.page_of_turn(t).evicted for t in (2, 8)), "the precondition of these tests"
    yield lp, chat
    lp.close()


@pytest.mark.embedder
def test_every_answer_path_runs_on_the_served_model_without_a_tokenizer(served_chat):
    """The served model takes text: every prompt an answer path makes (a rendered prompt, one with the focused
    answer's lead tokenized after it, one continuing the decision's tokens) reaches it without --tokenizer."""
    lp, chat = served_chat
    assert lp.backend.tokenizer.kind == "llama-cpp-python"  # the server's own tokenizer, no local file given
    fact = chat.ask("I'm packing snacks for a long flight. Anything I should stay away from?").trace
    assert fact.decision == "fact" and fact.answer.startswith(f'You told me: "{SESAME}"')
    assert chat.ask("What do you remember about me?").trace.decision == "overview"
    recall = chat.ask("What did I say my laptop budget was?", mode="always").trace
    assert recall.decision in ("recall", "unknown")  # "unknown": what it found is below the relevance floor
    decided = chat.ask("How long should I boil an egg for a runny yolk?", mode="auto").trace  # the model decides
    assert decided.decision in ("answer", "recall", "unknown") and decided.answer
    assert chat.ask("Is Rust hard to learn?", mode="never").trace.decision == "answer"


@pytest.mark.embedder
def test_ask_on_the_command_line_answers_from_a_fact_without_a_tokenizer(served_chat, server, tmp_path):
    """``localpager --backend openai-http ask`` (what issue 39 ran): a fact's answer, its lead after the prompt."""
    lp, _ = served_chat
    lp.close()
    proc = run_cli("--backend", "openai-http", "--base-url", server, "ask", "c",
                   "I'm packing snacks for a long flight. Anything I should stay away from?", "--json",
                   store=tmp_path / "s.db")
    trace = json.loads(proc.stdout)
    assert trace["decision"] == "fact" and trace["answer"].startswith(f'You told me: "{SESAME}"')


def test_a_slice_of_a_rendered_prompt_is_sent_through_the_served_files_own_vocabulary(http, counter):
    """A prompt cut short (a kept prefix is read as ``prompt[:n + 1]``) was never rendered whole: the served
    model's GGUF on this machine turns it back into text, control tokens and all."""
    prompt = http.render([Message("system", "Be brief."), Message("user", "Name a colour.")])
    assert http.tokenizer.local is not None
    cut = prompt[:len(prompt) - 3]
    assert http._text_of(cut) == counter._llama.detokenize(cut, special=True).decode()
    assert http.generate(cut, max_tokens=2).stopped in ("eos", "length")
