"""The assistant's logic (keyword strategies, eviction advice, worth, maintain) on a scripted backend: which
calls it makes, what it offers the model, and what it does with any output its constraint allows."""

from __future__ import annotations

import json
import re

import pytest
from fakes import ScriptedBackend, shortest_sentence
from helpers import CHINESE, paged_turns

from localpager.core.eviction import Cooperative, EvictionContext
from localpager.core.choices import MODEL_STRATEGIES
from localpager.core.keywords import candidate_terms, extract_keywords, keyword_information
from localpager.core.pager import Pager, PagingConfig, page_conversation
from localpager.core.records import Page, Turn
from localpager.core.text import term_key
from localpager.core.tokens import ApproxTokenCounter
from localpager.lab.synthetic import generate_conversation
from localpager.runtime.assist import Assistant, fill_keywords, maintain, parse_batch, parse_keywords
from localpager.runtime.grammar import WORTH, keyword_batch, keyword_list, page_list

def shortest(prompt: str, grammar: str | None) -> str:
    return shortest_sentence(grammar) if grammar else "ok"


@pytest.fixture(scope="module")
def english_pages() -> list[str]:
    conv = generate_conversation(seed=11, n_turns=60)
    return [p.text for p in page_conversation(conv.turns, ApproxTokenCounter(), PagingConfig(boundary="fixed_10")).pages]


def listed_candidates(prompt: str) -> dict[int, list[str]]:
    """Page id -> the candidate words a batch prompt lists for it."""
    return {int(pid): words.split(", ") for pid, words in re.findall(r"^p(\d+): (.*)$", prompt, re.M)}


# -- keyword strategies ------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", MODEL_STRATEGIES)
@pytest.mark.parametrize("language", ["english", "chinese"])
def test_every_strategy_gives_every_target_one_to_k_of_its_own_terms(english_pages, strategy, language):
    pages = english_pages if language == "english" else CHINESE
    backend = ScriptedBackend(shortest)
    assistant = Assistant(backend)
    out = assistant.keywords(pages, range(len(pages)), strategy, k=4)
    assert sorted(out) == list(range(len(pages)))
    own = candidate_terms(pages, 200)
    heuristic = extract_keywords(pages, "heuristic", 4)
    for i, keywords in out.items():
        assert 1 <= len(keywords) <= 4 and len({term_key(k) for k in keywords}) == len(keywords), keywords
        assert set(keywords) <= set(own[i]) | set(heuristic[i]), (i, keywords)
    assert all(c.grammar for c in backend.calls)
    assert sum(s.unparsed for s in assistant.stats.values()) == 0
    if strategy == "llm-contextual":  # one call per page
        assert len(backend.calls) == len(pages)
    else:  # one call for the conversation
        assert len(backend.calls) == 1


def test_batch_keywords_are_the_models_choice_and_never_shared_between_pages(english_pages):
    def last_candidates(prompt, grammar):
        return json.dumps({str(pid): words[-2:] for pid, words in listed_candidates(prompt).items()},
                          ensure_ascii=False)

    backend = ScriptedBackend(last_candidates)
    out = Assistant(backend).keywords(english_pages, range(len(english_pages)), "llm-batch", k=2)
    offered = listed_candidates(backend.calls[0].text)
    assert [out[i] for i in range(len(english_pages))] == [offered[i + 1][-2:] for i in range(len(english_pages))]
    keys = [term_key(kw) for kws in out.values() for kw in kws]
    assert len(keys) == len(set(keys))  # each page chose from terms no other page has


def test_repeated_choices_are_filled_from_the_pages_best_candidates(english_pages):
    backend = ScriptedBackend(shortest)  # the shortest output names the first candidate k times
    out = Assistant(backend).keywords(english_pages, [0], "llm-contextual", k=3)
    offered = re.search(r"Candidate keywords: (.*)", backend.calls[0].text).group(1).split(", ")
    assert out[0][0] == min(offered, key=lambda c: len(json.dumps(c, ensure_ascii=False)))
    assert len(out[0]) == 3 and len({term_key(k) for k in out[0]}) == 3


def test_the_longest_output_the_grammar_allows_fits_in_max_tokens(english_pages):
    """The assistant's token budget holds the longest choice, else a keyword list would be cut off."""
    def longest_contextual(prompt, grammar):
        offered = re.search(r"Candidate keywords: (.*)", prompt).group(1).split(", ")
        k = int(re.search(r"JSON list of 1 to (\d+)", prompt).group(1))
        return json.dumps(sorted(offered, key=lambda c: len(backend.tokenize(json.dumps(c))))[-k:],
                          ensure_ascii=False, separators=(", ", ": "))

    def longest_batch(prompt, grammar):
        k = int(re.search(r"giving every page 1 to (\d+)", prompt).group(1))
        return json.dumps({str(pid): sorted(words, key=lambda c: len(backend.tokenize(json.dumps(c))))[-k:]
                           for pid, words in listed_candidates(prompt).items()},
                          ensure_ascii=False, separators=(", ", ": "))

    for strategy, script in (("llm-contextual", longest_contextual), ("llm-batch", longest_batch)):
        backend = ScriptedBackend(script)
        Assistant(backend).keywords(english_pages, range(len(english_pages)), strategy, k=4)
        assert [c.generation.stopped for c in backend.calls] == ["eos"] * len(backend.calls), strategy


def test_contextual_prompts_show_the_page_its_neighbours_and_only_its_candidates(english_pages):
    backend = ScriptedBackend(shortest)
    Assistant(backend).keywords(english_pages, [2], "llm-contextual", k=2, ids=[10 + i for i in range(len(english_pages))])
    (call,) = backend.calls
    assert "This page (p12):" in call.text and "p11: " in call.text and "p13: " in call.text
    assert "p12: " not in call.text  # the page itself is not one of the other pages
    offered = re.search(r"Candidate keywords: (.*)", call.text).group(1).split(", ")
    assert offered == candidate_terms(english_pages, 24)[2]
    assert call.constraint == keyword_list(offered, 2)


def test_a_small_context_splits_the_batch_into_calls_that_cover_every_page(english_pages):
    backend = ScriptedBackend(shortest, n_ctx=420)
    out = Assistant(backend).keywords(english_pages, range(len(english_pages)), "llm-batch", k=4)
    assert len(backend.calls) > 1 and all(len(c.prompt) + c.max_tokens <= 420 for c in backend.calls)
    listed = [pid for c in backend.calls for pid in listed_candidates(c.text)]
    assert listed == list(range(1, len(english_pages) + 1))  # each page once, in order
    assert sorted(out) == list(range(len(english_pages)))


def test_hybrid_keeps_the_heuristic_keywords_and_adds_one_from_the_model(english_pages):
    backend = ScriptedBackend(shortest)
    out = Assistant(backend).keywords(english_pages, range(len(english_pages)), "hybrid", k=4)
    base = extract_keywords(english_pages, "heuristic", 3)
    for i, keywords in out.items():
        assert keywords[:3] == base[i][:3] and len(keywords) == min(4, len(base[i]) + 1)
    (call,) = backend.calls
    assert call.constraint == keyword_batch(list(listed_candidates(call.text).items()), 1)  # one word per page


def test_auto_chooses_hybrid_only_when_the_heuristic_keywords_tell_pages_apart():
    distinct = ["user: my sister Hartley lives in Lisbon", "user: the EpiPen is for my peanut allergy"]
    alike = ["user: coffee and tea with milk", "user: tea and coffee without milk"]
    assistant = Assistant(ScriptedBackend(shortest), auto_threshold=0.9)
    assert assistant.choose(distinct, 2) == "hybrid"
    assert assistant.choose(alike, 2) == "llm-batch"
    assert [choice for _, choice in assistant.auto_choices] == ["hybrid", "llm-batch"]
    assistant.keywords(alike, [0, 1], "auto", k=2)
    assert assistant.auto_choices[-1][1] == "llm-batch" and assistant.stats["keywords:auto"].calls == 1


def test_no_targets_no_call_and_unknown_strategies_are_refused():
    backend = ScriptedBackend()
    assistant = Assistant(backend)
    assert assistant.keywords(["user: hello Lisbon"], [], "llm-batch") == {}
    with pytest.raises(ValueError, match="not a model strategy"):
        assistant.keywords(["user: hello Lisbon"], [0], "heuristic")
    assert backend.calls == []


def test_a_page_without_candidate_terms_is_not_sent_to_the_model():
    pages = ["", "user: my sister Hartley lives in Lisbon"]
    backend = ScriptedBackend(shortest)
    out = Assistant(backend).keywords(pages, [0, 1], "llm-contextual", k=2)
    assert len(backend.calls) == 1 and "This page (p2)" in backend.calls[0].text
    assert out[0] == ["…"]  # a placeholder, so that the bookmark still has a keyword
    assert len(out[1]) == 2 and set(out[1]) <= {"Hartley", "Lisbon", "sister", "lives"}


# -- eviction advice and worth -----------------------------------------------------------------------------
def _pages(n: int) -> list[tuple[Page, str]]:
    return [(Page(i, 2 * i, 2 * i + 1, keywords=[f"topic{i}"]), f"topic{i}") for i in range(1, n + 1)]


def test_eviction_advice_names_only_candidates_once_each():
    backend = ScriptedBackend(["[3, 3]", "[]"])
    assistant = Assistant(backend)
    assert assistant.advise_eviction(_pages(3), "When do I fly?") == [3]
    (call,) = backend.calls
    assert call.constraint == page_list([1, 2, 3])
    assert "p1: topic1\np2: topic2\np3: topic3" in call.text and "New message: When do I fly?" in call.text
    assert assistant.advise_eviction(_pages(2), "x") == []
    assert assistant.advise_eviction([], "x") == [] and len(backend.calls) == 2  # no candidates: no call
    assert assistant.stats["evict"].calls == 2 and assistant.stats["evict"].pages == 5


def test_worth_is_decided_by_rule_for_small_talk_and_by_the_model_otherwise():
    backend = ScriptedBackend(["yes", "no"])
    assistant = Assistant(backend)
    assert assistant.worth("user: hi!\nassistant: hello, how can I help?") is False
    assert backend.calls == []
    assert assistant.worth("user: my locker number is 4417") is True
    assert assistant.worth("user: the weather in Lisbon was nice") is False
    assert [(c.constraint, c.max_tokens) for c in backend.calls] == [(WORTH, 2)] * 2
    assert assistant.stats["worth"].calls == 2


def test_long_pages_are_clipped_to_the_assistants_page_tokens():
    backend = ScriptedBackend(["yes"])
    assistant = Assistant(backend, page_tokens=20)
    text = "user: " + " ".join(f"fact{i} about Lisbon" for i in range(100))
    assistant.worth(text)
    shown = re.search(r"<\|im_start\|>user\n(.*)\n\nDoes this part", backend.calls[0].text, re.S).group(1)
    assert text.startswith(shown) and 10 <= backend.count_tokens(shown) <= 20


def test_stats_report_calls_pages_and_time_per_kind():
    assistant = Assistant(ScriptedBackend(["[]"]))
    assistant.advise_eviction(_pages(4), "x")
    stats = assistant.stats_dict()
    assert list(stats) == ["evict"]
    assert stats["evict"]["calls"] == 1 and stats["evict"]["pages"] == 4 and stats["evict"]["unparsed"] == 0
    assert stats["evict"]["ms_per_page"] == pytest.approx(assistant.stats["evict"].ms / 4, abs=0.05)


# -- maintain and cooperative eviction ---------------------------------------------------------------------
def test_maintain_gives_closed_pages_model_keywords_and_verdicts_in_one_batch():
    conv = generate_conversation(seed=13, n_turns=60)
    pager = page_conversation(conv.turns, ApproxTokenCounter(),
                              PagingConfig(boundary="fixed_10", keywords="hybrid", worth=True))
    backend = ScriptedBackend(lambda prompt, grammar: "yes" if grammar == WORTH.gbnf() else shortest_sentence(grammar))
    assistant = Assistant(backend)
    changed = maintain(pager, assistant)
    closed = pager.closed()
    assert {p.page_id for p in changed} == {p.page_id for p in closed}
    assert all(p.keywords_by == "hybrid" for p in closed) and pager.pages[-1].keywords_by != "hybrid"
    assert assistant.stats["keywords:hybrid"].calls == 1  # one call for the whole conversation
    assert all(p.worth is not None for p in closed) and pager.pending_worth() == []
    assert maintain(pager, assistant) == []  # nothing left: no more calls
    assert len(backend.calls) == 1 + assistant.stats["worth"].calls


def test_worthless_pages_leave_first():
    conv = generate_conversation(seed=3, n_turns=60)
    pager = Pager(ApproxTokenCounter(), PagingConfig(boundary="fixed_10", budget=10_000))
    for turn in conv.turns:
        pager.add_turn(turn)
    pager.pages[2].worth = False
    pager.config.budget = 300
    evicted = pager.enforce_budget()
    assert evicted[0].page_id == 3 and [p.page_id for p in evicted[1:3]] == [1, 2]


def test_cooperative_eviction_with_the_assistant_as_advisor():
    texts = ["My flight to Lisbon is on May 3rd", "Noted: May 3rd, Lisbon.", "hi!", "hello!",
             "My locker number is 4417", "Locker 4417, noted.", "The dentist is on Tuesday", "Tuesday, noted."]
    turns = [Turn("user" if i % 2 == 0 else "assistant", t, i) for i, t in enumerate(texts)]
    pages = [Page(i // 2 + 1, i, i + 1, token_count=10, keywords=[f"k{i // 2 + 1}"]) for i in range(0, 8, 2)]
    backend = ScriptedBackend(["[4]"])
    policy = Cooperative(advisor=Assistant(backend).advise_eviction)
    order = policy.order(pages, 8, EvictionContext(turns, tokens_to_free=25))
    assert [p.page_id for p in order] == [2, 4, 1, 3]  # small talk by rule, then the model's choice, then FIFO
    assert "p2:" not in backend.calls[0].text  # the small-talk page was never offered


# -- parsing, keyword information and eviction ordering on plain data (grammars: test_grammar.py) -------
def test_repeated_choices_are_filled_from_the_candidates():
    assert fill_keywords(["b", "b"], ["a", "b", "c"], 3) == ["b", "a", "c"]
    assert fill_keywords([], ["a"], 2) == []


def test_parsing_keeps_only_candidates_without_repeats():
    assert parse_keywords('["Hartley", "Hartley", "nope", "café"]', ["Hartley", "café"], 5) == ["Hartley", "café"]
    assert parse_keywords('["a", "b", "c"]', ["a", "b", "c"], 2) == ["a", "b"]
    text = '{"3": ["peanut", "EpiPen"], "7": ["Lisbon"'  # cut off: the pages it reached still count
    assert parse_batch(text, [(3, ["peanut", "EpiPen"]), (7, ["Lisbon"])], 4) == {3: ["peanut", "EpiPen"],
                                                                                 7: ["Lisbon"]}


def test_keyword_information_is_high_for_distinct_keywords():
    pages = ["user: my sister Hartley lives in Lisbon", "user: the EpiPen is for my peanut allergy"]
    assert keyword_information(pages, [["Hartley", "Lisbon"], ["EpiPen", "peanut"]]) == 1.0
    same = ["user: coffee coffee tea", "user: coffee and tea again"]
    assert keyword_information(same, [["coffee"], ["coffee"]]) == 0.0


def test_cooperative_evicts_small_talk_first_without_asking():
    pages, turns = paged_turns(["My flight to Lisbon is on May 3rd", "Noted: May 3rd, Lisbon.",
                           "hi!", "hello, how can I help?", "Thanks!", "You're welcome.", "What now?", "ok"])
    asked = []
    policy = Cooperative(advisor=lambda cands, msg: asked.append(cands) or [])
    order = policy.order(pages[:3], 8, EvictionContext(turns, tokens_to_free=15))
    assert [p.page_id for p in order] == [2, 3, 1]
    assert not asked  # the two small-talk pages free enough: no model call
    order = policy.order(pages[:3], 8, EvictionContext(turns, tokens_to_free=25))
    assert len(asked) == 1 and [p.page_id for p, _ in asked[0]] == [1]


def test_chinese_candidates_are_words_of_the_page():
    cands = candidate_terms(CHINESE)
    assert any("花生" in c for c in cands[0]) and any("上海" in c for c in cands[1])
