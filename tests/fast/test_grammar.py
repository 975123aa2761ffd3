"""The runtime's constraints rendered to GBNF, and the decision parser, checked against a GBNF recogniser
(tests/fakes.py): what each grammar lets the model say, not how its text looks (that it is byte for byte the
grammar of before the typed constraints: test_constraints.py)."""

from __future__ import annotations

import pytest
from fakes import Grammar, GrammarError, allows, shortest_sentence

from localpager.backends.constraints import RecallChoice
from localpager.runtime.grammar import (
    RECALL_PREFIX,
    SEARCH_QUERY,
    WORTH,
    Decision,
    is_recall_prefix,
    keyword_batch,
    keyword_list,
    page_list,
    parse_decision,
)

WORTH_GRAMMAR, SEARCH_GRAMMAR = WORTH.gbnf(), SEARCH_QUERY.gbnf()


def recall_grammar(page_ids, max_pages=2, allow_answer=True) -> str:
    return RecallChoice(tuple(page_ids), max_pages, allow_answer).gbnf()


def keywords_grammar(candidates, k) -> str:
    return keyword_list(candidates, k).gbnf()


def batch_grammar(pages, k) -> str:
    return keyword_batch(pages, k).gbnf()


def pages_grammar(page_ids) -> str:
    return page_list(page_ids).gbnf()


# -- the recall grammar --------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["recall(page_ids=[3])", "recall(page_ids=[7,3])", "recall(page_ids=[5,5])"])
def test_a_recall_of_listed_pages_is_allowed(text):
    assert allows(recall_grammar([3, 5, 7], max_pages=2), text)


@pytest.mark.parametrize("text", [
    "recall(page_ids=[4])",  # not evicted
    "recall(page_ids=[3,5,7])",  # more than max_pages
    "recall(page_ids=[])",
    "recall(page_ids=[3]) and more",  # nothing after the call
    "recall(page_ids=[ 3])",
    "recall(page_ids=[03])",
    "recall(",  # started a call, never finished it
    "recall(3)",
    "",  # the first output is never empty
])
def test_anything_else_that_starts_a_recall_is_refused(text):
    assert not allows(recall_grammar([3, 5, 7], max_pages=2), text)


@pytest.mark.parametrize("text", ["The snack is peanuts.", "r", "recall", "recalled nothing", "Recall(page_ids=[4])",
                                  " recall(page_ids=[4])", "x" * 300, "line one\nline two"])
def test_any_other_text_is_an_answer(text):
    assert allows(recall_grammar([3, 5, 7]), text)


def test_a_forced_recall_allows_no_answer():
    grammar = recall_grammar([2, 9], max_pages=1, allow_answer=False)
    assert allows(grammar, "recall(page_ids=[9])")
    assert not allows(grammar, "recall(page_ids=[2,9])")  # one page at most
    assert not allows(grammar, "I know the answer.")
    assert shortest_sentence(grammar) == "recall(page_ids=[2])"


def test_more_pages_per_recall_when_asked():
    grammar = recall_grammar(range(1, 6), max_pages=4)
    assert allows(grammar, "recall(page_ids=[1,2,3,4])")
    assert not allows(grammar, "recall(page_ids=[1,2,3,4,5])")


def test_page_ids_are_deduplicated_and_sorted_in_the_grammar():
    assert recall_grammar([7, 3, 7]) == recall_grammar([3, 7])
    assert allows(recall_grammar([12]), "recall(page_ids=[12])")
    assert not allows(recall_grammar([12]), "recall(page_ids=[1])")  # a prefix of an id is not an id


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="at least one evicted page"):
        recall_grammar([])
    with pytest.raises(ValueError, match="max_pages"):
        recall_grammar([1], max_pages=0)


# -- reading the decision --------------------------------------------------------------------------------
def test_a_complete_call_is_a_recall_with_ids_in_order_without_repeats():
    assert parse_decision("recall(page_ids=[5,3,5])") == Decision(page_ids=(5, 3))
    assert parse_decision("  recall(page_ids=[12])\n").page_ids == (12,)
    assert parse_decision("recall(page_ids=[1])").is_recall


@pytest.mark.parametrize("text", ["recall(page_ids=[", "recall(page_ids=[3]", "The answer", "", "recall(page_ids=[a])",
                                  "recall(page_ids=[3]) then"])
def test_anything_else_is_the_start_of_an_answer(text):
    decision = parse_decision(text)
    assert not decision.is_recall and decision.page_ids == () and decision.answer_start == text


def test_recall_prefix_tracks_whether_the_output_can_still_become_a_call():
    assert all(is_recall_prefix(RECALL_PREFIX[:n]) for n in range(len(RECALL_PREFIX) + 1))
    assert is_recall_prefix("recall(page_ids=[3,")
    assert not is_recall_prefix("recalled")
    assert not is_recall_prefix("The")
    assert not is_recall_prefix(" recall(")


def test_every_grammar_sentence_a_model_can_stop_at_parses():
    """A complete recall sentence parses as a recall naming only listed pages, whatever ids it names."""
    grammar = recall_grammar([4, 8], max_pages=2)
    for ids in ([4], [8], [4, 8], [8, 4], [8, 8]):
        text = f"recall(page_ids=[{','.join(map(str, ids))}])"
        assert allows(grammar, text)
        assert set(parse_decision(text).page_ids) <= {4, 8}


# -- the assistant's and the search baseline's grammars --------------------------------------------------
def test_keyword_grammar_takes_exactly_k_of_the_candidates_as_json_strings():
    grammar = keywords_grammar(['say "hi"', "café", "back\\slash"], 2)
    assert allows(grammar, '["say \\"hi\\"", "café"]')
    assert allows(grammar, '["café", "back\\\\slash"]')
    assert not allows(grammar, '["café"]')  # exactly k
    assert not allows(grammar, '["café", "tea"]')  # not a candidate
    assert allows(keywords_grammar(["only"], 4), '["only"]')  # fewer candidates than k: all of them


def test_grammars_quote_terms_as_json_strings():
    grammar = keywords_grammar(['say "hi"', "café", "back\\slash"], 2)
    assert r'"\"say \\\"hi\\\"\""' in grammar and '"\\"café\\""' in grammar
    assert 'root ::= "[" kw ", " kw "]"' in grammar  # exactly k (here 2): left to choose, it stops at one
    batch = batch_grammar([(3, ["a"]), (7, ["b", "c"])], 4)
    assert 'root ::= "{" "\\"3\\": " l3 ", " "\\"7\\": " l7 "}"' in batch
    assert 'l3 ::= "[" k3 "]"' in batch  # one candidate: at most one keyword
    assert '"[]"' in pages_grammar([2, 5])  # cooperative eviction may name no page
    with pytest.raises(ValueError):
        keywords_grammar([], 3)


def test_batch_grammar_names_every_page_in_order():
    grammar = batch_grammar([(3, ["a"]), (7, ["b", "c"])], 2)
    assert allows(grammar, '{"3": ["a"], "7": ["c", "b"]}')
    assert not allows(grammar, '{"7": ["c", "b"], "3": ["a"]}')
    assert not allows(grammar, '{"3": ["b"], "7": ["c", "b"]}')  # page 3 cannot take page 7's word
    with pytest.raises(ValueError):
        batch_grammar([(1, [])], 2)


def test_page_grammar_may_name_no_page_but_never_another():
    grammar = pages_grammar([2, 5])
    assert allows(grammar, "[]") and allows(grammar, "[5, 2]") and allows(grammar, "[2]")
    assert not allows(grammar, "[3]") and not allows(grammar, "[2, 5, 2]")
    assert shortest_sentence(grammar) == "[]"


def test_worth_and_search_grammars():
    assert allows(WORTH_GRAMMAR, "yes") and allows(WORTH_GRAMMAR, "no") and not allows(WORTH_GRAMMAR, "maybe")
    assert allows(SEARCH_GRAMMAR, 'search("dripping tap")')
    assert not allows(SEARCH_GRAMMAR, 'search("a")')  # at least two characters
    assert not allows(SEARCH_GRAMMAR, 'search("say \\"hi\\"")')
    assert not allows(SEARCH_GRAMMAR, 'search("' + "x" * 61 + '")')


def test_the_recogniser_rejects_what_llama_cpp_would():
    with pytest.raises(GrammarError, match="undefined rule"):
        Grammar("root ::= missing\n")
    with pytest.raises(GrammarError, match="no root"):
        Grammar('answer ::= "x"\n')
    with pytest.raises(GrammarError, match="unterminated"):
        Grammar('root ::= "x\n')
