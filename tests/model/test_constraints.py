"""Every output constraint on the real model (SmolLM2-135M GGUF, llama.cpp): as GBNF in process, and as the JSON
schema a server that takes no GBNF gets.

The JSON-schema server is Ollama's protocol (``httpx.MockTransport``) over the real model: each schema is turned
into a grammar by llama-cpp-python's own JSON-schema converter (``LlamaGrammar.from_json_schema``, a port of
llama.cpp's, which llama-server and Ollama use) and the model generates under it, so what comes back is what
such a server would send. Assertions hold for any greedy output (no test expects one exact output): the
output keeps to the constraint and reads back into text its grammar allows."""

from __future__ import annotations

import json

import httpx
import pytest
from fakes import allows

from localpager.backends.base import Message
from localpager.backends.constraints import OneOf, RecallChoice
from localpager.backends.openai_http import OpenAIHTTPBackend
from localpager.runtime.assist import parse_batch, parse_keywords
from localpager.runtime.grammar import SEARCH_QUERY, WORTH, keyword_batch, keyword_list, page_list, parse_decision

pytestmark = pytest.mark.model

BOOKMARKS = ("Older parts of this conversation were moved to numbered pages. Bookmarks (page: keywords):\n"
             "[p2:allergy,peanut,EpiPen]\n[p5:kitchen,budget,23500]\n"
             "To read pages before answering, reply only with recall(page_ids=[N]).")
# (system, user, constraint, max_tokens): each as the runtime or the assistant asks it
CASES = {
    "decision": (BOOKMARKS, "What is my kitchen budget?", RecallChoice((2, 5), 2), 24),
    "forced": (BOOKMARKS, "What is my kitchen budget?", RecallChoice((2, 5), 2, allow_answer=False), 24),
    "dates": ("You are a helpful assistant.", "I repaired the fence yesterday [7 May 2023].\n"
              "Question: When did I repair the fence?", OneOf(("7 May 2023", "8 May 2023")), 12),
    "worth": ("You decide what a conversation should remember long-term.",
              "I am allergic to peanuts.\n\nDoes this hold something worth remembering later? Answer yes or no.",
              WORTH, 2),
    "search": ("Write a search query.", "Who should fix the dripping tap?", SEARCH_QUERY, 40),
    "keywords": ("You index a long conversation.", "I carry an EpiPen for my peanut allergy.\n\nCandidate keywords: "
                 "EpiPen, peanut, allergy, carry\n\nReply with a JSON list of 2 of the candidate keywords.",
                 keyword_list(["EpiPen", "peanut", "allergy", "carry"], 2), 16),
    "batch": ("You index a long conversation.", "p3: peanut, EpiPen\np7: Lisbon, flight, seven\n\nReply with a JSON "
              "object giving every page 1 of its own words.", keyword_batch([(3, ["peanut", "EpiPen"]),
                                                                             (7, ["Lisbon", "flight", "seven"])], 1), 24),
    "pages": ("You manage the memory of a conversation.", "p1: garden, fence\np4: kitchen, budget\n\nNew message: "
              "How much can I spend on the kitchen?\n\nWhich pages are not needed? Reply with a JSON list of their "
              "numbers.", page_list([1, 4]), 12),
}


def check(name: str, constraint, text: str) -> None:
    """What the runtime does with the output holds: the grammar allows it and its parser reads it."""
    if name == "decision" and text == "":  # a JSON server's "answer": nothing generated yet
        return
    if name == "decision" and not parse_decision(text).is_recall:  # an answer's first piece
        assert not text.startswith("recall(")
        return
    assert allows(constraint.gbnf(), text), (name, text)
    if name in ("decision", "forced"):
        assert set(parse_decision(text).page_ids) <= {2, 5} and parse_decision(text).is_recall
    elif name == "keywords":
        assert len(parse_keywords(text, constraint.items, 2)) >= 1
    elif name == "batch":
        assert set(parse_batch(text, [(3, ["peanut", "EpiPen"]), (7, ["Lisbon", "flight", "seven"])], 1)) <= {3, 7}


@pytest.mark.parametrize("name", CASES)
def test_the_llama_cpp_backend_holds_the_model_to_each_constraint(backend, name):
    system, user, constraint, max_tokens = CASES[name]
    prompt = backend.render([Message("system", system), Message("user", user)])
    gen = backend.generate(prompt, max_tokens=max_tokens, constraint=constraint)
    if name != "decision":  # (a decision's answer may run on: the runtime stops it once it is no recall)
        assert gen.stopped == "eos", (name, gen.text)  # the grammar ended it: within the runtime's budget
    check(name, constraint, gen.text)


class GrammarOf:
    """A constraint whose GBNF is given (the server's own conversion of a JSON schema)."""

    def __init__(self, gbnf: str):
        self._gbnf = gbnf

    def gbnf(self) -> str:
        return self._gbnf


class SchemaServer:
    """Ollama's protocol over the real model: ``format`` (a JSON schema) becomes a grammar by llama-cpp-python's
    converter, as a server that takes only JSON schemas converts it."""

    def __init__(self, model, model_path):
        self.model, self.model_path = model, model_path
        self.schemas: list[dict] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        from llama_cpp.llama_grammar import json_schema_to_gbnf

        path = request.url.path
        body = json.loads(request.content) if request.content else None
        if path == "/api/version":
            return httpx.Response(200, json={"version": "0.5.7"})
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": str(self.model_path)}]})
        if path == "/api/generate":
            prompt = self.model._tokenize_special(body["prompt"])
            schema = body.get("format")
            grammar = GrammarOf(json_schema_to_gbnf(json.dumps(schema))) if schema else None
            if schema:
                self.schemas.append(schema)
            gen = self.model.generate(prompt, max_tokens=body["options"]["num_predict"], constraint=grammar)
            lines = [json.dumps({"response": gen.text, "done": False}),
                     json.dumps({"response": "", "done": True, "done_reason": "stop" if gen.stopped == "eos" else
                                 "length", "prompt_eval_count": gen.evaluated})]
            return httpx.Response(200, content="\n".join(lines).encode())
        return httpx.Response(404, json={"error": "not found"})


@pytest.fixture(scope="module")
def schema_server(backend):
    server = SchemaServer(backend, backend.model_path)
    http = OpenAIHTTPBackend(base_url="http://ollama.test/v1", transport=httpx.MockTransport(server.handle),
                             tokenizer=backend.model_path)
    return server, http


def test_the_json_schema_server_is_found_and_enforces_schemas(schema_server):
    server, http = schema_server
    assert (http.kind, http.constraint) == ("ollama", "json-schema")  # its probe ran on the real model


@pytest.mark.parametrize("name", CASES)
def test_a_json_schema_server_holds_the_model_to_each_constraint(schema_server, name):
    server, http = schema_server
    system, user, constraint, max_tokens = CASES[name]
    before = len(server.schemas)
    gen = http.generate(http.render([Message("system", system), Message("user", user)]), max_tokens=max_tokens,
                        constraint=constraint)
    assert server.schemas[before:] == [constraint.json_schema()]  # the server got the schema, nothing else
    check(name, constraint, gen.text)  # read back into the grammar's text, within the runtime's budget
