"""The typed output constraints (``backends.constraints``): the GBNF each renders is byte for byte the grammar
localpager sent llama.cpp before the constraints were typed (so the llama.cpp backend's outputs are unchanged),
the JSON schema each gives a server, and how a server's JSON is read back into the grammar's text.

The expected GBNF below was printed by the grammar builders of ``runtime/grammar.py`` as they were at commit
7f53853 (``recall_grammar``, ``choice_grammar``, ``WORTH_GRAMMAR``, ``SEARCH_GRAMMAR``, ``keywords_grammar``,
``batch_grammar``, ``pages_grammar``); 3,000 random inputs of each gave identical text when they moved."""

from __future__ import annotations

import json

import pytest
from fakes import allows, shortest_sentence

from localpager.backends.base import ChatBackend
from localpager.backends.constraints import JsonList, JsonObject, OneOf, Phrase, RecallChoice, expresses
from localpager.runtime.grammar import SEARCH_QUERY, WORTH, keyword_batch, keyword_list, page_list, parse_decision

ANSWER_RULE = ('answer ::= [^r] rest | "r" [^e] rest | "re" [^c] rest | "rec" [^a] rest | "reca" [^l] rest | '
               '"recal" [^l] rest | "recall" [^(] rest | "r" | "re" | "rec" | "reca" | "recal" | "recall"\n'
               'rest ::= [^\\x00]*\n')

BEFORE = [  # (constraint, the grammar text of before)
    (RecallChoice((3, 5, 7), 2),
     'root ::= recall | answer\nrecall ::= "recall(page_ids=[" id ("," id)? "])"\nid ::= "3" | "5" | "7"\n'
     + ANSWER_RULE),
    (RecallChoice((9, 2, 9), 1, allow_answer=False),
     'root ::= recall\nrecall ::= "recall(page_ids=[" id "])"\nid ::= "2" | "9"\n'),
    (RecallChoice(tuple(range(1, 6)), 3),
     'root ::= recall | answer\nrecall ::= "recall(page_ids=[" id ("," id ("," id)?)? "])"\n'
     'id ::= "1" | "2" | "3" | "4" | "5"\n' + ANSWER_RULE),
    (OneOf(("7 May 2023", 'say "hi"', "7 May 2023", "東京 \\ x")),
     'root ::= "7 May 2023" | "say \\"hi\\"" | "東京 \\\\ x"\n'),
    (WORTH, 'root ::= "yes" | "no"\n'),
    (SEARCH_QUERY, 'root ::= "search(\\"" [a-zA-Z0-9 ,\'-]{2,60} "\\")"\n'),
    (keyword_list(["peanuts", 'say "hi"', "a\\b", "東京", "EpiPen"], 3),
     'root ::= "[" kw ", " kw ", " kw "]"\nkw ::= "\\"peanuts\\"" | "\\"say \\\\\\"hi\\\\\\"\\"" | '
     '"\\"a\\\\\\\\b\\"" | "\\"東京\\"" | "\\"EpiPen\\""\n'),
    (keyword_list(["one", "two"], 4), 'root ::= "[" kw ", " kw "]"\nkw ::= "\\"one\\"" | "\\"two\\""\n'),
    (keyword_batch([(3, ["peanuts", "EpiPen"]), (12, ["budget", "$23,500", 'x"y'])], 2),
     'root ::= "{" "\\"3\\": " l3 ", " "\\"12\\": " l12 "}"\nl3 ::= "[" k3 ", " k3 "]"\n'
     'k3 ::= "\\"peanuts\\"" | "\\"EpiPen\\""\nl12 ::= "[" k12 ", " k12 "]"\n'
     'k12 ::= "\\"budget\\"" | "\\"$23,500\\"" | "\\"x\\\\\\"y\\""\n'),
    (page_list([3, 1, 3, 7]), 'root ::= "[" id (", " id (", " id)?)? "]" | "[]"\nid ::= "1" | "3" | "7"\n'),
]


@pytest.mark.parametrize("constraint, before", BEFORE, ids=lambda x: type(x).__name__ if not isinstance(x, str) else "")
def test_the_llama_cpp_grammar_is_the_one_of_before(constraint, before):
    assert constraint.gbnf() == before


# -- JSON schemas: what a server that takes no GBNF gets -------------------------------------------------
def obj(key: str, value: dict) -> dict:
    return {"type": "object", "additionalProperties": False, "required": [key], "properties": {key: value}}


SCHEMAS = [
    (RecallChoice((7, 3), 2), obj("recall", {"type": "array", "items": {"type": "integer", "enum": [3, 7]},
                                             "minItems": 0, "maxItems": 2})),
    (RecallChoice((4,), 1, allow_answer=False),
     obj("recall", {"type": "array", "items": {"type": "integer", "enum": [4]}, "minItems": 1, "maxItems": 1})),
    (OneOf(("7 May 2023", "8 May 2023")), obj("answer", {"type": "string", "enum": ["7 May 2023", "8 May 2023"]})),
    (WORTH, obj("answer", {"type": "string", "enum": ["yes", "no"]})),
    (SEARCH_QUERY, obj("query", {"type": "string", "pattern": "^[a-zA-Z0-9 ,'-]{2,60}$"})),
    (keyword_list(["peanuts", "EpiPen", "peanuts"], 2),
     obj("keywords", {"type": "array", "items": {"type": "string", "enum": ["peanuts", "EpiPen"]},
                      "minItems": 2, "maxItems": 2})),
    (page_list([5, 2]), obj("pages", {"type": "array", "items": {"type": "integer", "enum": [5, 2]},
                                      "minItems": 0, "maxItems": 2})),
    (keyword_batch([(3, ["a", "b"]), (12, ["c"])], 2),
     {"type": "object", "additionalProperties": False, "required": ["3", "12"], "properties": {
         "3": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "minItems": 2, "maxItems": 2},
         "12": {"type": "array", "items": {"type": "string", "enum": ["c"]}, "minItems": 1, "maxItems": 1}}}),
]


@pytest.mark.parametrize("constraint, schema", SCHEMAS,
                         ids=lambda x: type(x).__name__ if not isinstance(x, dict) else "")
def test_every_constraint_has_a_json_schema_with_an_object_at_the_top(constraint, schema):
    assert constraint.json_schema() == schema
    json.dumps(schema)  # plain JSON


READ_BACK = [  # (constraint, a server's JSON, the text the grammar would have produced)
    (RecallChoice((3, 7), 2), '{"recall": [7, 3]}', "recall(page_ids=[7,3])"),
    (RecallChoice((3, 7), 2), '{ "recall":[] }', ""),  # answer: the answer starts afresh
    (OneOf(("7 May 2023", "8 May 2023")), '{"answer": "8 May 2023"}', "8 May 2023"),
    (WORTH, '{"answer":"no"}', "no"),
    (SEARCH_QUERY, '{"query": "dripping tap"}', 'search("dripping tap")'),
    (keyword_list(['say "hi"', "café", "EpiPen"], 2), '{"keywords": ["café","say \\"hi\\""]}',
     '["café", "say \\"hi\\""]'),
    (page_list([2, 5]), '{"pages": [5]}', "[5]"),
    (page_list([2, 5]), '{"pages": []}', "[]"),
    (keyword_batch([(3, ["a", "b"]), (12, ["c"])], 2), '{"3": ["b","a"], "12": ["c"]}',
     '{"3": ["b", "a"], "12": ["c"]}'),
]


@pytest.mark.parametrize("constraint, sent, text", READ_BACK)
def test_json_reads_back_into_the_text_the_grammar_allows(constraint, sent, text):
    assert constraint.read_json(sent) == text
    if text:  # (an empty recall decision is the answer's start: nothing was generated)
        assert allows(constraint.gbnf(), text)


def test_the_runtime_parses_a_decision_read_from_json():
    assert parse_decision(RecallChoice((3, 7), 2).read_json('{"recall": [3]}')).page_ids == (3,)
    assert not parse_decision(RecallChoice((3, 7), 2).read_json('{"recall": []}')).is_recall


@pytest.mark.parametrize("constraint, sent", [
    (RecallChoice((3, 7), 2), '{"recall": [4]}'),  # not offered
    (RecallChoice((3, 7), 1), '{"recall": [3, 7]}'),  # more than max_pages
    (RecallChoice((3,), 1, allow_answer=False), '{"recall": []}'),  # must recall
    (RecallChoice((1, 3), 2), '{"recall": [true]}'),  # a bool is not a page id
    (RecallChoice((3,), 2), '{"recall": ["3"]}'),
    (RecallChoice((3,), 2), '{"pages": [3]}'),
    (RecallChoice((3,), 2), "recall(page_ids=[3])"),  # free text is never a decision
    (OneOf(("yes", "no")), '{"answer": "maybe"}'),
    (OneOf(("yes", "no")), '"yes"'),
    (SEARCH_QUERY, '{"query": "say \\"hi\\""}'),
    (SEARCH_QUERY, '{"query": "x"}'),
    (keyword_list(["a", "b", "c"], 2), '{"keywords": ["a"]}'),  # exactly k
    (keyword_list(["a", "b", "c"], 2), '{"keywords": ["a", "z"]}'),
    (keyword_list(["a", "b"], 2), '{"keywords": ["a", "b"'),  # cut short
    (page_list([2, 5]), '{"pages": [2, 5, 2]}'),
    (keyword_batch([(3, ["a"]), (12, ["c"])], 1), '{"3": ["a"]}'),  # every page
    (keyword_batch([(3, ["a"]), (12, ["c"])], 1), '{"3": ["c"], "12": ["c"]}'),  # its own words only
])
def test_json_that_breaks_the_schema_is_refused(constraint, sent):
    with pytest.raises((ValueError, TypeError)):
        constraint.read_json(sent)


# -- what a constraint is -----------------------------------------------------------------------------------
def test_constraints_normalise_and_compare_by_value():
    assert RecallChoice((7, 3, 7)) == RecallChoice([3, 7]) and RecallChoice((7, 3)).page_ids == (3, 7)
    assert OneOf(["a", "b", "a"]).options == ("a", "b")
    assert keyword_list(["x", "y"], 2) == JsonList(("x", "y"), 2, 2, key="keywords")
    assert hash(page_list([1, 2])) == hash(page_list((1, 2)))


@pytest.mark.parametrize("build, message", [
    (lambda: RecallChoice(()), "at least one evicted page"),
    (lambda: RecallChoice((1,), max_pages=0), "max_pages"),
    (lambda: OneOf(()), "at least one option"),
    (lambda: JsonList(()), "at least one candidate"),
    (lambda: JsonList(("a", 1)), "all strings or all integers"),
    (lambda: JsonList(("a",), least=2, most=1), "least <= most"),
    (lambda: JsonObject(()), "fields"),
    (lambda: JsonObject((("a", JsonList(("x",))), ("a", JsonList(("y",))))), "distinct"),
    (lambda: Phrase("a-z]", 1, 2), "class body"),
    (lambda: keyword_list([], 3), "at least one candidate"),
    (lambda: keyword_batch([(1, [])], 2), "at least one candidate"),
    (lambda: page_list([]), "at least one page"),
])
def test_a_constraint_that_could_allow_nothing_or_break_a_grammar_is_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_object_fields_that_are_not_plain_names_get_rule_names_of_their_own():
    both = JsonObject((("a b", JsonList(("x",))), ("ab", JsonList(("y",)))))
    grammar = both.gbnf()
    assert allows(grammar, '{"a b": ["x"], "ab": ["y"]}') and not allows(grammar, '{"a b": ["y"], "ab": ["y"]}')
    assert both.read_json('{"ab": ["y"], "a b": ["x"]}') == '{"a b": ["x"], "ab": ["y"]}'  # in the fields' order


def test_a_phrase_without_prefix_or_suffix():
    phrase = Phrase("a-z", 1, 3, key="word")
    assert phrase.gbnf() == "root ::= [a-z]{1,3}\n"
    assert allows(phrase.gbnf(), "abc") and not allows(phrase.gbnf(), "abcd")
    assert phrase.read_json('{"word": "ab"}') == "ab"


def test_the_shortest_sentence_of_every_grammar_reads_back_from_its_json():
    """Whatever a model may stop at under a grammar is what the same constraint reads from JSON."""
    cases = {
        RecallChoice((2, 9), 1, allow_answer=False): '{"recall": [2]}',
        WORTH: '{"answer": "no"}',
        keyword_list(["a", "b"], 1): '{"keywords": ["a"]}',
        page_list([4, 6]): '{"pages": []}',
        keyword_batch([(1, ["a"]), (2, ["b"])], 1): '{"1": ["a"], "2": ["b"]}',
    }
    for constraint, sent in cases.items():
        assert constraint.read_json(sent) == shortest_sentence(constraint.gbnf())


def test_expresses_asks_the_backend_and_defaults_to_yes():
    class Nothing(ChatBackend):
        def expresses(self, constraint):
            return False

    assert expresses(ChatBackend(), WORTH) and not expresses(Nothing(), WORTH)
