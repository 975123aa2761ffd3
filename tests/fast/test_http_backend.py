"""The openai-http backend's protocol logic against mock servers (httpx.MockTransport): which server it
is, what it can constrain, how a prompt and a decision travel, token counting, and every failure as one
line. No model, no socket."""

from __future__ import annotations

import json
import logging
import sys

import httpx
import pytest
from fakes import allows, shortest_sentence

from localpager.backends import available_backends
from localpager.backends.base import BackendError, Message
from localpager.backends.constraints import OneOf, RecallChoice
from localpager.backends.openai_http import PROBE_GRAMMAR, OpenAIHTTPBackend
from localpager.core.pager import PagingConfig
from localpager.runtime.grammar import SEARCH_QUERY, WORTH, keyword_batch, keyword_list, page_list, parse_decision

CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")
SPECIAL = {"<|im_start|>": 1, "<|im_end|>": 2}
BASE = "http://model.test/v1"


def tokenize(text: str, special: bool) -> list[int]:
    """The mock model's tokenizer: a token a character, control tokens when parsed as special."""
    out, i = [], 0
    while i < len(text):
        for s, tid in SPECIAL.items():
            if special and text.startswith(s, i):
                out.append(tid)
                i += len(s)
                break
        else:
            out.append(1000 + ord(text[i]))
            i += 1
    return out


def sse(events, done=True) -> bytes:
    lines = [f"data: {json.dumps(e)}\n\n" for e in events] + (["data: [DONE]\n\n"] if done else [])
    return "".join(lines).encode()


class MockServer:
    """A scripted model server of one ``kind``; ``reply`` is what the next completion says. It records
    every request; ``grammar``/``schema`` say whether it enforces them (the probe checks)."""

    def __init__(self, kind="llama-server", reply="Fine.", grammar=True, schema=True, tokenize_endpoint=True):
        self.kind, self.reply, self.grammar, self.schema = kind, reply, grammar, schema
        self.tokenize_endpoint = tokenize_endpoint
        self.requests: list[tuple[str, str, dict | None]] = []
        self.fail: int | None = None  # answer completions with this HTTP status
        self.drop = False  # end the completion stream mid-answer
        self.usage: dict | None = None

    def transport(self):
        return httpx.MockTransport(self.handle)

    def output(self, body: dict) -> str:
        if self.grammar and body.get("grammar") == PROBE_GRAMMAR:
            return "7"
        schema = body.get("json_schema") or body.get("format") or (body.get("response_format") or {}).get(
            "json_schema", {}).get("schema")
        if self.schema and schema and "n" in schema.get("properties", {}):
            return '{"n": 7}'
        return self.reply(body) if callable(self.reply) else self.reply

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, path, body))
        k = self.kind
        if path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "/models/served-model.gguf"}, {"id": "other"}]})
        if k == "llama-server" and path == "/props":
            return httpx.Response(200, json={"chat_template": CHATML, "default_generation_settings": {"n_ctx": 4096}})
        if k == "ollama" and path == "/api/version":
            return httpx.Response(200, json={"version": "0.5.7"})
        if k == "ollama" and path == "/api/show":
            return httpx.Response(200, json={"modelfile": "FROM /nonexistent/blob"})
        if path == "/openapi.json" and k in ("llama-cpp-python", "openai"):
            paths = {"/extras/tokenize": {}} if k == "llama-cpp-python" else (
                {"/tokenize": {}} if self.tokenize_endpoint else {})
            return httpx.Response(200, json={"paths": {"/v1/completions": {}, **paths}})
        if path == "/tokenize" and k == "llama-server":
            tokens = tokenize(body["content"], body.get("parse_special", True))
            return httpx.Response(200, json={"tokens": tokens})
        if path == "/tokenize" and k == "openai" and self.tokenize_endpoint:  # vLLM
            return httpx.Response(200, json={"tokens": tokenize(body["prompt"], True), "count": 0})
        if path == "/extras/tokenize" and k == "llama-cpp-python":
            return httpx.Response(200, json={"tokens": tokenize(body["input"], True)})
        if path in ("/completion", "/v1/completions", "/api/generate"):
            if self.fail:
                return httpx.Response(self.fail, json={"error": {"message": "model crashed\nstack..."}})
            text = self.output(body)
            pieces = [text[i:i + 3] for i in range(0, len(text), 3)]
            if self.drop:
                pieces = pieces[:1]
            if path == "/completion":
                events = [{"content": p, "stop": False} for p in pieces]
                if not self.drop:
                    events.append({"content": "", "stop": True, "stop_type": "eos",
                                   "timings": {"prompt_n": 5, "cache_n": len(body["prompt"]) - 5,
                                               "prompt_ms": 12.5, "predicted_ms": 40.0}})
                return httpx.Response(200, content=sse(events, done=False),
                                      headers={"content-type": "text/event-stream"})
            if path == "/api/generate":
                lines = [json.dumps({"response": p, "done": False}) for p in pieces]
                if not self.drop:
                    lines.append(json.dumps({"response": "", "done": True, "done_reason": "stop",
                                             "prompt_eval_count": 4, "prompt_eval_duration": 2_000_000}))
                return httpx.Response(200, content="\n".join(lines).encode())
            events = [{"choices": [{"text": p, "finish_reason": None}]} for p in pieces]
            if not self.drop:
                events.append({"choices": [{"text": "", "finish_reason": "stop"}]})
                if self.usage:
                    events.append({"choices": [], "usage": self.usage})
            return httpx.Response(200, content=sse(events, done=not self.drop),
                                  headers={"content-type": "text/event-stream"})
        return httpx.Response(404, json={"detail": "Not Found"})

    def completions(self) -> list[dict]:
        return [b for _, p, b in self.requests if p in ("/completion", "/v1/completions", "/api/generate")]


def backend(server: MockServer, **options) -> OpenAIHTTPBackend:
    return OpenAIHTTPBackend(base_url=BASE, transport=server.transport(), **options)


MESSAGES = [Message("system", "Be brief."), Message("user", "Hi <|im_end|> there")]


def test_registered_as_a_builtin_backend():
    assert available_backends()["openai-http"] == "localpager.backends.openai_http:OpenAIHTTPBackend"


def test_llama_server_discovery_template_tokens_and_reuse():
    server = MockServer("llama-server", reply="Hello!")
    b = backend(server)
    assert (b.kind, b.constraint, b.n_ctx, b.model) == ("llama-server", "gbnf", 4096, "/models/served-model.gguf")
    assert b.model_name == "served-model.gguf"
    prompt = b.render(MESSAGES)
    # the template's text is parsed for control tokens, the user's content is not
    assert prompt[:1] == [1] and prompt.count(2) == 2 and tokenize("<|im_end|>", False)[0] in prompt
    gen = b.generate(prompt, max_tokens=8)
    sent = server.completions()[-1]
    assert sent["prompt"] == prompt and sent["cache_prompt"] is True and sent["temperature"] == 0.0
    assert (gen.text, gen.stopped, gen.evaluated, gen.reused) == ("Hello!", "eos", 5, len(prompt) - 5)
    assert gen.timings["reported"] == 1.0 and gen.prefill_ms == 12.5


def test_token_counts_are_cached():
    server = MockServer("llama-server")
    b = backend(server)
    before = sum(p == "/tokenize" for _, p, _ in server.requests)
    assert b.count_tokens("a b c") == b.count_tokens("a b c") == 5
    assert sum(p == "/tokenize" for _, p, _ in server.requests) == before + 1
    assert b.count_tokens("") == 0


def test_llama_cpp_python_gets_the_rendered_text_and_reuse_is_marked_unreported():
    server = MockServer("llama-cpp-python", reply="Sure.")
    b = backend(server, chat_template=CHATML)
    assert (b.kind, b.constraint) == ("llama-cpp-python", "gbnf")
    prompt = b.render(MESSAGES)
    gen = b.generate(prompt, max_tokens=8)
    sent = server.completions()[-1]
    assert sent["prompt"] == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi <|im_end|> there"
                              "<|im_end|>\n<|im_start|>assistant\n")
    assert (gen.text, gen.evaluated, gen.reused, gen.timings["reported"]) == ("Sure.", len(prompt), 0, 0.0)
    # a continuation after the decision's tokens is sent as the same text plus what was generated
    b.generate(prompt + gen.tokens, max_tokens=4)
    assert server.completions()[-1]["prompt"] == sent["prompt"] + "Sure."


def test_a_rendered_prompt_with_tokenized_text_after_it_is_sent_as_that_text():
    """A focused answer from a standing fact appends its lead, ``tokenize(lead)``, to a rendered prompt: a server
    that takes text gets the prompt's text and the lead's, with no local tokenizer (issue 39)."""
    server = MockServer("llama-cpp-python", reply="Sure.")
    b = backend(server, chat_template=CHATML)
    prompt = b.render(MESSAGES)
    rendered = b._text_of(prompt)
    lead, more = 'You told me: "peanuts".', " And"
    gen = b.generate(prompt + b.tokenize(lead) + b.tokenize(more), max_tokens=8)
    assert server.completions()[-1]["prompt"] == rendered + lead + more
    b.generate(prompt + b.tokenize(lead) + b.tokenize(more) + gen.tokens, max_tokens=4)  # and what followed it
    assert server.completions()[-1]["prompt"] == rendered + lead + more + "Sure."
    with pytest.raises(BackendError, match="--tokenizer"):  # tokens this backend never handed out
        b.generate(prompt[:-1], max_tokens=4)


def test_gbnf_recall_decision_is_sent_as_a_grammar():
    server = MockServer("llama-server", reply="recall(page_ids=[3])")
    b = backend(server)
    choice = RecallChoice((1, 3), 2)
    gen = b.generate(b.render(MESSAGES), max_tokens=24, constraint=choice)
    assert server.completions()[-1]["grammar"] == choice.gbnf()
    assert parse_decision(gen.text).page_ids == (3,)


def test_json_schema_server_decides_through_a_schema():
    server = MockServer("ollama", reply='{"recall": [3]}', grammar=False)
    b = backend(server, chat_template=CHATML, allow_estimate=True)
    assert (b.kind, b.constraint) == ("ollama", "json-schema")
    seen = []
    gen = b.generate(b.render(MESSAGES), max_tokens=24, constraint=RecallChoice((1, 3), 2),
                     on_text=lambda piece: seen.append(piece))
    sent = server.completions()[-1]
    assert sent["raw"] is True and sent["format"]["properties"]["recall"]["items"]["enum"] == [1, 3]
    assert gen.text == "recall(page_ids=[3])" and seen == [gen.text]
    assert parse_decision(gen.text).page_ids == (3,)
    server.reply = '{"recall": []}'  # answer directly: no decision text, the answer starts fresh
    assert b.generate(b.render(MESSAGES), max_tokens=24, constraint=RecallChoice((1, 3), 2)).text == ""
    server.reply = '{"recall": [9]}'  # a page not offered: never taken as a decision
    with pytest.raises(BackendError, match="JSON schema of the recall decision"):
        b.generate(b.render(MESSAGES), max_tokens=24, constraint=RecallChoice((1, 3), 2))
    server.reply = '{"answer": "yes"}'  # side work keeps to a schema too (tests/fast/test_constraints.py)
    assert b.generate(b.render(MESSAGES), max_tokens=2, constraint=WORTH).text == "yes"


def test_openai_server_schema_goes_in_response_format():
    server = MockServer("openai", reply='{"recall": [1]}', grammar=False)
    b = backend(server, chat_template=CHATML)  # /tokenize in its API: vLLM, token ids
    assert (b.kind, b.constraint) == ("openai", "json-schema")
    b.generate(b.render(MESSAGES), max_tokens=24, constraint=RecallChoice((1,), 1, allow_answer=False))
    fmt = server.completions()[-1]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["properties"]["recall"]["minItems"] == 1


def test_no_constraint_means_no_decision_and_selector_only_recall(fake_pager, caplog):
    server = MockServer("llama-cpp-python", grammar=False, schema=False)
    b = backend(server, chat_template=CHATML)
    assert b.constraint == "none"
    with pytest.raises(BackendError, match="cannot constrain"):
        b.generate(b.render(MESSAGES), max_tokens=8, constraint=RecallChoice((1,), 1))
    lp = fake_pager(backend=b)
    with caplog.at_level(logging.WARNING, logger="localpager"):
        assert lp.runtime.settings.mode == "selector"
    assert len([r for r in caplog.records if "selector" in r.getMessage()]) == 1
    forced = backend(MockServer("llama-server", grammar=False), constraint="none")
    assert forced.constraint == "none"


def test_estimate_only_when_allowed_and_flagged():
    server = MockServer("openai", tokenize_endpoint=False)
    with pytest.raises(BackendError, match="--allow-estimate") as info:
        backend(server, chat_template=CHATML)
    assert "\n" not in str(info.value)
    b = backend(server, chat_template=CHATML, allow_estimate=True)
    assert b.estimated and b.model_name.startswith("estimate:")
    prompt = b.render(MESSAGES)
    gen = b.generate(prompt, max_tokens=8)
    assert gen.timings["estimated"] == 1.0
    assert server.completions()[-1]["prompt"].startswith("<|im_start|>system\nBe brief.")


def test_estimate_flag_reaches_the_trace(fake_pager):
    server = MockServer("openai", tokenize_endpoint=False, reply="Hello.")
    lp = fake_pager(backend=backend(server, chat_template=CHATML, allow_estimate=True))
    chat = lp.conversation("c", create=True)
    answer = chat.ask("Good morning")
    assert answer.answer == "Hello." and answer.trace.tokens.get("estimated") == 1


def test_usage_with_cached_tokens_is_reported():
    server = MockServer("openai", reply="Ok.")
    server.usage = {"prompt_tokens": 30, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 24}}
    gen = backend(server, chat_template=CHATML).generate(list(range(1100, 1130)), max_tokens=4)
    assert (gen.evaluated, gen.reused, gen.timings["reported"]) == (6, 24, 1.0)


def test_caller_stops_the_stream():
    server = MockServer("llama-server", reply="one two three four five")
    b = backend(server)
    gen = b.generate(b.render(MESSAGES), max_tokens=20, on_text=lambda piece: True)
    assert gen.stopped == "caller" and gen.text == "one"


def test_choose_the_served_model():
    server = MockServer("llama-server")
    assert backend(server, model_path="other").model == "other"
    assert backend(server, model_path="served-model").model == "/models/served-model.gguf"
    with pytest.raises(BackendError, match="does not serve 'nope'; it serves"):
        backend(server, model_path="nope")


def test_api_key_is_sent_as_a_bearer_token():
    server = MockServer("llama-server")
    seen = []
    transport = httpx.MockTransport(lambda r: seen.append(r.headers.get("authorization")) or server.handle(r))
    OpenAIHTTPBackend(base_url=BASE, transport=transport, api_key="s3cret")
    assert seen and set(seen) == {"Bearer s3cret"}


@pytest.mark.parametrize("failure, message", [
    (httpx.ConnectError("[Errno 111] Connection refused"), "cannot reach the model server at .*: connection refused"),
    (httpx.ReadTimeout("timed out"), "did not answer within 120 s"),
])
def test_unreachable_server_is_one_line(failure, message):
    def refuse(request):
        raise failure

    with pytest.raises(BackendError, match=message) as info:
        OpenAIHTTPBackend(base_url=BASE, transport=httpx.MockTransport(refuse))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("status, message", [(500, "HTTP 500 /completion: model crashed"),
                                             (503, "HTTP 503"), (401, "rejected the API key")])
def test_http_errors_are_one_line(status, message):
    server = MockServer("llama-server")
    b = backend(server)
    server.fail = status
    with pytest.raises(BackendError, match=message) as info:
        b.generate(b.render(MESSAGES), max_tokens=8)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kind", ["llama-server", "llama-cpp-python", "ollama"])
def test_a_dropped_stream_is_an_error_not_half_an_answer(kind):
    server = MockServer(kind, reply="a long answer that is cut")
    b = backend(server, chat_template=CHATML, allow_estimate=True)
    server.drop = True
    with pytest.raises(BackendError, match="closed the stream mid-answer"):
        b.generate(b.render(MESSAGES), max_tokens=20)


def test_failed_answer_keeps_the_question_and_stores_no_answer(fake_pager):
    server = MockServer("llama-server", reply="Hello.")
    lp = fake_pager(backend=backend(server))
    chat = lp.conversation("c", create=True)
    chat.ask("First question?")
    server.reply, server.drop = "zebra crossing", True
    with pytest.raises(BackendError, match="mid-answer"):
        chat.ask("Second question?")
    stored = [t.text for t in lp.store.turns("c")]
    assert stored[:3] == ["First question?", "Hello.", "Second question?"]
    assert not any("zeb" in text for text in stored)  # no half answer


def test_missing_httpx_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(BackendError, match=r"pip install 'localpager\[http\]'"):
        OpenAIHTTPBackend(base_url=BASE)


# -- typed constraints: what each server gets, and what comes back --------------------------------------------
CONSTRAINTS = [RecallChoice((3, 7), 2), RecallChoice((4,), 1, allow_answer=False), OneOf(("7 May 2023", "8 May 2023")),
               WORTH, SEARCH_QUERY, keyword_list(["peanuts", "EpiPen", "café"], 2),
               keyword_batch([(3, ["a", "b"]), (12, ["c"])], 1), page_list([5, 2])]


def instance(schema: dict):
    """A value that keeps to ``schema`` (the JSON schemas localpager sends): a server's answer."""
    if "enum" in schema:
        return schema["enum"][-1]
    if schema.get("type") == "object":
        return {key: instance(value) for key, value in schema["properties"].items()}
    if schema.get("type") == "array":
        items = schema["items"]["enum"]
        return [items[i % len(items)] for i in range(max(schema.get("minItems", 0), 1 if items else 0))][
            :schema.get("maxItems")]
    if "pattern" in schema:
        return "dripping tap"
    raise AssertionError(f"no instance for {schema}")


def schema_of(body: dict) -> dict | None:
    return body.get("json_schema") or body.get("format") or (body.get("response_format") or {}).get(
        "json_schema", {}).get("schema")


def json_server(kind="ollama", **options) -> MockServer:
    """A server that takes JSON schemas only and answers each with a value that keeps to it."""
    server = MockServer(kind, grammar=False, **options)
    server.reply = lambda body: json.dumps(instance(schema_of(body))) if schema_of(body) else "Free text."
    return server


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=lambda c: type(c).__name__)
@pytest.mark.parametrize("kind, constraint_option, field", [
    ("llama-server", None, "grammar"), ("llama-cpp-python", None, "grammar"), ("ollama", None, "format"),
    ("openai", None, "response_format"), ("llama-server", "json-schema", "json_schema"),
])
def test_each_server_gets_each_constraint_in_the_form_it_takes(constraint, kind, constraint_option, field):
    gbnf = field == "grammar"
    server = MockServer(kind) if gbnf else json_server(kind)
    b = backend(server, chat_template=CHATML, allow_estimate=True, constraint=constraint_option)
    assert b.expresses(constraint)
    expected = shortest_sentence(constraint.gbnf()) if gbnf else constraint.read_json(
        json.dumps(instance(constraint.json_schema())))
    if gbnf:
        server.reply = expected  # what a server holding to the grammar says
    seen = []
    gen = b.generate(b.render(MESSAGES), max_tokens=24, constraint=constraint, on_text=seen.append)
    sent = server.completions()[-1]
    assert sent[field] == {
        "grammar": constraint.gbnf(), "format": constraint.json_schema(), "json_schema": constraint.json_schema(),
        "response_format": {"type": "json_schema", "json_schema": {
            "name": constraint.schema_name, "strict": True, "schema": constraint.json_schema()}}}[field]
    others = {"grammar", "json_schema", "format", "response_format"} - {field}
    assert not others & set(sent)  # one form of the constraint, never two
    assert gen.text == expected and "".join(seen) == expected
    if expected:
        assert allows(constraint.gbnf(), gen.text)  # the runtime reads one format whatever the server


def test_json_gets_room_for_its_keys_and_never_past_the_context():
    server = json_server("ollama")
    b = backend(server, chat_template=CHATML, allow_estimate=True)
    b.generate(b.render(MESSAGES), max_tokens=2, constraint=WORTH)  # "yes" is 2 tokens; {"answer": "yes"} more
    assert server.completions()[-1]["options"]["num_predict"] > 2 + b.count_tokens('"answer"')
    prompt = b.render(MESSAGES)
    b.generate(prompt, max_tokens=b.n_ctx - len(prompt), constraint=WORTH)
    assert server.completions()[-1]["options"]["num_predict"] == b.n_ctx - len(prompt)


@pytest.mark.parametrize("constraint", CONSTRAINTS, ids=lambda c: type(c).__name__)
def test_a_server_that_constrains_nothing_names_the_constraint_it_cannot_give(constraint):
    b = backend(MockServer("llama-cpp-python", grammar=False, schema=False), chat_template=CHATML)
    assert b.constraint == "none" and not b.expresses(constraint)
    with pytest.raises(BackendError) as info:
        b.generate(b.render(MESSAGES), max_tokens=8, constraint=constraint)
    message = str(info.value)
    assert "cannot constrain output" in message and constraint.what in message
    assert type(constraint).__name__ in message and "\n" not in message


def test_side_work_runs_on_a_server_that_takes_only_json_schemas(fake_pager):
    """Keywords chosen by the model, worth verdicts and cooperative eviction advice, all on an Ollama-like server
    (before the typed constraints, each was refused there: "takes JSON schemas, not GBNF grammars")."""
    server = json_server("ollama")
    lp = fake_pager(backend=backend(server, chat_template=CHATML, allow_estimate=True))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", keywords="llm-batch", worth=True,
                                                                 eviction="cooperative", budget=400))
    for i in range(30):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i}: the {['fence', 'Lisbon', 'cello'][i % 3]} "
                      f"plan number {i * 7} with Hartley and the budget of {i * 100} euros.", stamp=False)
    changed = chat.maintain()
    assert changed and all(p.keywords_by == "llm-batch" for p in changed)
    schemas = [schema_of(body) for body in server.completions()]
    asked = {next(iter(s["properties"])) if len(s["properties"]) == 1 else "batch" for s in schemas if s}
    assert {"batch", "answer"} <= asked  # keyword batches and worth verdicts, as JSON schemas
    assert [p.worth for p in chat.pages if p.worth is not None]  # verdicts came back and were stored
    offered = {int(k): v["items"]["enum"] for s in schemas if s and all(k.isdigit() for k in s["properties"])
               for k, v in s["properties"].items()}
    assert all(set(p.keywords) <= set(offered[p.page_id]) for p in changed)  # each page's own words


def test_cooperative_eviction_asks_a_json_schema_server(fake_pager):
    server = json_server("ollama")
    lp = fake_pager(backend=backend(server, chat_template=CHATML, allow_estimate=True))
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", eviction="cooperative",
                                                                 budget=200))
    for i in range(40):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} about the garden and the fence.", stamp=False)
    advice = [schema_of(b) for b in server.completions() if schema_of(b) and "pages" in schema_of(b)["properties"]]
    assert advice and chat.pager.evicted  # asked, and it evicted (the answer [] names no page: FIFO decides)


@pytest.mark.parametrize("kind, constrained", [("ollama", True), ("none", False)])
def test_a_when_question_is_answered_with_one_of_the_recalled_dates_where_the_server_can_hold_it(
        fake_pager, kind, constrained):
    server = json_server("ollama") if kind == "ollama" else MockServer("llama-cpp-python", grammar=False, schema=False,
                                                                        reply="Yesterday.")
    b = backend(server, chat_template=CHATML, allow_estimate=True)
    lp = fake_pager(backend=b)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=120))
    chat.add_turn("user", "I repaired the garden fence yesterday.", time="2023-05-08T10:00:00", stamp=False)
    chat.add_turn("assistant", "Well done on the fence.", time="2023-05-08T10:00:05", stamp=False)
    for i in range(8):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"The piano lesson number {i} went fine.", stamp=False)
    assert chat.pager.page(1).evicted, "the precondition of this test"
    answer = chat.ask("When did I repair the garden fence?")
    schemas = [schema_of(body) for body in server.completions() if schema_of(body)]
    dates = [s for s in schemas if "2023" in json.dumps(s)]
    if constrained:
        assert answer.trace.trigger != "none" and dates
        assert "7 May 2023" in dates[-1]["properties"]["answer"]["enum"]
        assert answer.answer in dates[-1]["properties"]["answer"]["enum"]
    else:
        assert not dates and answer.answer == "Yesterday."


@pytest.mark.both_stores
def test_two_messages_of_a_namespaced_client_through_serve_are_both_answered(fake_pager):
    """benchmarks/replicas.py's client (issue 39, item 8): through ``serve`` with API-key namespaces, on a served
    model that takes text, "please remember the number N", then a question about it. The question bears on the
    standing fact the first message left, so it is answered from it (it was a 503 "pass --tokenizer PATH" on every
    replica while a fact answer sent the quoted lead's tokens after its prompt; it is now written with no model)."""
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from localpager.serving.app import ServerOptions, create_app

    key = "alice-key-0123456789"
    lp = fake_pager(backend=backend(MockServer("llama-cpp-python", reply="Sure, I will."), chat_template=CHATML))
    history, decisions = [], []
    with TestClient(create_app(lp, ServerOptions(api_keys={key: "alice"}, log=lambda line: None))) as client:
        for i, question in enumerate(("client0 message 0: please remember the number 4821.",
                                      "client0 message 1: which number did I ask you to remember?")):
            r = client.post("/v1/chat/completions", json={
                "model": "localpager", "messages": [*history, {"role": "user", "content": question}], "max_tokens": 8},
                headers={"Authorization": f"Bearer {key}", "X-Conversation-Id": "conv-0"})
            assert r.status_code == 200, r.text
            answer = r.json()["choices"][0]["message"]["content"]
            decisions.append(r.json()["localpager"]["decision"])
            history += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    assert decisions[1] == "fact", "the path this test is about"
    turns = [(t.role, t.text) for t in lp.namespace("alice").store.turns("conv-0")]
    assert turns == [(m["role"], m["content"]) for m in history]
