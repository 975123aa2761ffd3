"""`localpager serve` for real: the command in a subprocess on a free loopback port, the default models
(SmolLM2-135M, all-MiniLM-L6-v2), the official ``openai`` client, and the inspector in headless Chromium.

One server for the module (its start-up, mostly importing torch, is most of the time); small budgets and
``max_tokens`` keep each answer under a second.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
from helpers import ROOT, serving

pytestmark = [pytest.mark.model, pytest.mark.embedder, pytest.mark.slow]

openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
from localpager.serving.protocol import header_id  # noqa: E402

KEY = "test-key-5d1f"
# an event told with its day, not a standing fact (the long-term layer would answer a standing fact without a
# recall): what this module tests is a recall through the server
FACT = "Last Saturday at the Lisbon aquarium the octopus tank was the best part of my birthday; we stayed an hour."
FILLER = [
    "My sister Hartley moved to Lisbon last spring for a new job.",
    "The router in the hall keeps dropping the Wi-Fi on Saturdays.",
    "We repainted the garden fence a dark green colour this weekend.",
    "My piano lessons moved to Thursday evenings at half past six.",
    "The car needs its yearly service before the long trip in June.",
    "The dentist appointment is on Tuesday morning at nine.",
    "I started reading a long novel about sailors in the Arctic.",
    "Our neighbours adopted a grey cat called Pebble last month.",
]
RESULTS = ROOT / "results"


def build_store(path: Path) -> None:
    """Conversation ``facts``: the aquarium visit in its first page, evicted under a small budget by later talk."""
    from localpager.core.pager import PagingConfig
    from localpager.memory.api import LocalPager

    lp = LocalPager(path)
    chat = lp.conversation("facts", create=True, config=PagingConfig(boundary="fixed_5", budget=160))
    chat.add_turn("user", FACT)
    assert not chat.facts(), "the visit should be no standing fact for this test to mean anything"
    chat.add_turn("assistant", "What a lovely birthday.")
    for i, text in enumerate(FILLER * 2):
        chat.add_turn("user" if i % 2 == 0 else "assistant", text)
    assert chat.pages[0].evicted, "the fact's page should be evicted for this test to mean anything"
    lp.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``localpager serve`` with an API key read from a file and a memory budget of 160 (the ``facts``
    conversation's own); yields (base URL, store path, stderr lines); stopped by PID."""
    folder = tmp_path_factory.mktemp("serve")
    store = folder / "store.db"
    build_store(store)
    key_file = folder / "key"
    key_file.write_text(KEY + "\n")
    env = {**os.environ, "LOCALPAGER_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    env.pop("LOCALPAGER_API_KEY", None)
    with serving(store, "--api-key-file", str(key_file), "--max-tokens", "24", "--budget", "160", env=env) as served:
        yield served.url, store, served.lines


def client(url: str, conv: str | None = None, key: str = KEY):
    headers = {"X-Conversation-Id": conv} if conv else {}
    return openai.OpenAI(base_url=f"{url}/v1", api_key=key, default_headers=headers, max_retries=0, timeout=60)


def turns(url: str, conv: str) -> list[dict]:
    r = httpx.get(f"{url}/v1/conversations/{conv}/turns", headers={"Authorization": f"Bearer {KEY}"})
    return r.json()["data"] if r.status_code == 200 else []


def test_non_streaming_answer_is_stored_with_its_trace(server):
    url, _, _ = server
    raw = client(url, "plain").chat.completions.with_raw_response.create(
        model="localpager", messages=[{"role": "user", "content": "Hello! What is a good name for a cat?"}],
        max_tokens=16)
    completion = raw.parse()
    answer = completion.choices[0].message.content
    assert answer and raw.headers["x-localpager-trace-id"] == "plain:0"
    assert completion.model_extra["localpager"]["turn"] == 0
    assert [(t["role"], t["text"]) for t in turns(url, "plain")] == [
        ("user", "Hello! What is a good name for a cat?"), ("assistant", answer)]


def test_streaming_answer_matches_what_is_stored(server):
    url, _, _ = server
    stream = client(url, "streamed").chat.completions.create(
        model="localpager", messages=[{"role": "user", "content": "Say something about the sea."}],
        max_tokens=16, stream=True)
    pieces, memory = [], None
    for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            memory = (chunk.model_extra or {}).get("localpager") or memory
    text = "".join(pieces)
    assert text.strip() and memory and memory["trace_id"] == "streamed:0"
    stored = turns(url, "streamed")
    assert " ".join(stored[1]["text"].split()) == " ".join(text.split())


@pytest.fixture(scope="module")
def recalled(server):
    """A question about the evicted fact, asked once for the tests that look at the recall."""
    url, _, _ = server
    completion = client(url, "facts").chat.completions.create(
        model="localpager", messages=[{"role": "user", "content": "Which tank did I love at the aquarium?"}],
        max_tokens=16)
    return completion


def test_a_recall_injects_the_evicted_fact_and_the_log_shows_it(server, recalled):
    url, _, _ = server
    memory = recalled.model_extra["localpager"]
    assert 1 in memory["injected_page_ids"]
    log = httpx.get(f"{url}{memory['log']}", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]
    assert len(log) == 1 and log[0]["injected_page_ids"] == memory["injected_page_ids"]
    if memory["decision"] == "recall":
        assert any(c["text"] == FACT for c in memory["citations"])
    else:  # the model named a tank the turn does not (greedy output differs between CPUs): not memory
        assert memory["decision"] == "unknown" and not log[0]["grounding"]["grounded"]
    assert 0 in log[0]["injected_turns"]
    assert any(c["injected"] and c["page_id"] == 1 for c in log[0]["candidates"])
    hits = httpx.get(f"{url}/v1/conversations/facts/search", params={"q": "octopus"},
                     headers={"Authorization": f"Bearer {KEY}"}).json()["data"]
    assert 0 in [h["turn"] for h in hits[:2]]  # (the answer may repeat the word, and rank beside it)


def test_two_clients_on_two_conversations_at_once(server):
    url, _, _ = server
    results: dict[str, str] = {}

    def talk(conv: str, question: str) -> None:
        c = client(url, conv)
        results[conv] = c.chat.completions.create(
            model="localpager", messages=[{"role": "user", "content": question}], max_tokens=12).choices[0].message.content

    threads = [threading.Thread(target=talk, args=(f"pair-{i}", f"Name a colour, please ({i}).")) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i in range(2):
        stored = turns(url, f"pair-{i}")
        assert [(t["role"], t["text"]) for t in stored] == [
            ("user", f"Name a colour, please ({i})."), ("assistant", results[f"pair-{i}"])]


def test_a_client_that_drops_mid_stream_loses_no_turn(server):
    url, _, lines = server
    body = {"model": "localpager", "stream": True, "max_tokens": 24,
            "messages": [{"role": "user", "content": "Tell me a short story about a fox."}]}
    headers = {"Authorization": f"Bearer {KEY}", "X-Conversation-Id": "dropped"}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                break  # the first event: leave
    deadline = time.monotonic() + 60
    while len(turns(url, "dropped")) < 2:
        assert time.monotonic() < deadline, "the answer was never stored"
        time.sleep(0.2)
    stored = turns(url, "dropped")
    assert [t["role"] for t in stored] == ["user", "assistant"] and stored[1]["text"].strip()
    # the client comes back with the full history: nothing is stored twice
    again = client(url, "dropped").chat.completions.with_raw_response.create(
        model="localpager", max_tokens=8, messages=[
            {"role": "user", "content": stored[0]["text"]}, {"role": "assistant", "content": stored[1]["text"]},
            {"role": "user", "content": "And then?"}])
    assert again.headers["x-localpager-history"] == "in-sync"
    assert [t["role"] for t in turns(url, "dropped")] == ["user", "assistant", "user", "assistant"]


def test_a_wrong_key_is_401(server):
    url, _, _ = server
    with pytest.raises(openai.AuthenticationError):
        client(url, "nope", key="wrong").chat.completions.create(
            model="localpager", messages=[{"role": "user", "content": "hi"}])
    assert turns(url, "nope") == []


def test_a_malformed_request_is_a_4xx_json_error(server):
    url, _, _ = server
    r = httpx.post(f"{url}/v1/chat/completions", content=b'{"messages": [', timeout=10,
                   headers={"Authorization": f"Bearer {KEY}", "X-Conversation-Id": "bad",
                            "Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    with pytest.raises(openai.BadRequestError, match="X-Conversation-Id"):
        client(url).chat.completions.create(model="localpager", messages=[{"role": "user", "content": "hi"}])


def test_one_log_line_per_request(server, recalled):
    _, _, lines = server
    chat = [line for line in lines if "chat conv=facts" in line]
    assert len(chat) == 1 and "recall p1" in chat[0] and " ms " in chat[0]


def auth(conv: str | None = None) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}", **({"X-Conversation-Id": quote(conv, safe="")} if conv else {})}


def test_ids_outside_latin1_work_and_a_retry_stores_nothing(server):
    url, _, _ = server
    oa = client(url)
    ask = dict(model="localpager", user="Łukasz", max_tokens=12,
               messages=[{"role": "user", "content": "Name a fruit, please."}])
    first = oa.chat.completions.with_raw_response.create(**ask)
    assert first.http_response.status_code == 200 and header_id(first.headers["x-conversation-id"]) == "Łukasz"
    retry = oa.chat.completions.with_raw_response.create(**ask)  # as if the first had been a 500
    assert retry.headers["x-localpager-history"] == "retry"
    assert retry.parse().choices[0].message.content == first.parse().choices[0].message.content
    stream = oa.chat.completions.create(model="localpager", user="田中", max_tokens=12, stream=True,
                                        messages=[{"role": "user", "content": "Name a colour, please."}])
    streamed = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert streamed.strip()
    assert [t["role"] for t in turns(url, quote("Łukasz", safe=""))] == ["user", "assistant"]
    export = httpx.get(f"{url}/v1/conversations/{quote('田中', safe='')}/export", headers=auth(), timeout=10)
    assert export.status_code == 200 and json.loads(export.text)["id"] == "田中"
    assert "filename*=UTF-8''%E7%94%B0%E4%B8%AD.jsonl" in export.headers["content-disposition"]


def test_a_client_that_timed_out_and_resends_gets_one_answer(server):
    url, _, _ = server
    ask = dict(model="localpager", max_tokens=16, messages=[{"role": "user", "content": "Describe a quiet harbour."}])
    with pytest.raises(openai.APITimeoutError):
        openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, default_headers={"X-Conversation-Id": "impatient"},
                      max_retries=0, timeout=0.05).chat.completions.create(**ask)
    again = client(url, "impatient").chat.completions.with_raw_response.create(**ask)  # queued, then replayed
    assert again.headers["x-localpager-history"] == "retry" and again.parse().choices[0].message.content
    assert [t["role"] for t in turns(url, "impatient")] == ["user", "assistant"]


def test_finish_reason_says_length_when_max_tokens_cut_the_answer(server):
    url, _, _ = server
    ask = dict(model="localpager", max_tokens=2,
               messages=[{"role": "user", "content": "Write three long paragraphs about the history of the sea."}])
    cut = client(url, "cut").chat.completions.create(**ask)
    assert cut.choices[0].finish_reason == "length"
    stream = client(url, "cut-stream").chat.completions.create(**ask, stream=True)
    assert [c.choices[0].finish_reason for c in stream if c.choices and c.choices[0].finish_reason] == ["length"]


def test_a_foreign_web_page_changes_nothing_and_the_log_cannot_be_forged(server):
    url, _, lines = server
    client(url, "guarded").chat.completions.create(
        model="localpager", max_tokens=8, messages=[{"role": "user", "content": "My locker code is 4417."}])
    forged = httpx.post(f"{url}/v1/conversations/guarded/forget", content=b'{"match": "4417"}', timeout=10,
                        headers={**auth(), "Origin": "http://evil.example"})  # no content type: no preflight
    assert forged.status_code == 403 and forged.json()["error"]["code"] == "forbidden_origin"
    assert "4417" in turns(url, "guarded")[0]["text"]
    preview = httpx.post(f"{url}/v1/conversations/guarded/forget", json={"match": "4417", "dry_run": True},
                         headers={**auth(), "Origin": url}, timeout=10).json()  # the inspector's own origin
    assert preview["turns"] == [0] and preview["erased"] is False
    httpx.get(f"{url}/v1/conversations/x%0alocalpager serve: FORGED 200 1 ms%1b[2K/pages", headers=auth())
    time.sleep(0.3)
    assert not any(line.startswith("localpager serve: FORGED") for line in lines)
    assert any("x\\nlocalpager serve: FORGED 200 1 ms\\x1b[2K/pages 404" in line for line in lines)
    assert not any("visible to other users" in line for line in lines)  # the key came from a file
    page = httpx.get(url, timeout=10)
    assert page.headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in page.headers["content-security-policy"]


def test_a_refused_first_question_leaves_no_conversation(server):
    url, _, _ = server
    with pytest.raises(openai.BadRequestError, match="tokens"):
        client(url, "too-big").chat.completions.create(
            model="localpager", messages=[{"role": "user", "content": "lorem ipsum " * 17_000}])  # ~200 KB
    listed = httpx.get(f"{url}/v1/conversations", headers=auth(), timeout=10).json()["data"]
    assert "too-big" not in {c["id"] for c in listed}


def test_serve_budget_pages_a_new_conversation_and_the_inspector_shows_an_oversized_turn(server):
    url, store, _ = server
    from localpager.store.sqlite import SQLiteStore

    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(FILLER * 3)]
    huge = "The harbour log for the year lists " + "boats and tides " * 800  # more than any 2,048-token prompt
    history += [{"role": "user", "content": huge}, {"role": "assistant", "content": "That is a long log."}]
    answer = client(url, "budgeted").chat.completions.create(
        model="localpager", max_tokens=8, messages=[*history, {"role": "user", "content": "Where did Hartley move?"}])
    assert answer.choices[0].message.content
    pages = httpx.get(f"{url}/v1/conversations/budgeted/pages", headers=auth(), timeout=30).json()["data"]
    assert any(p["evicted"] for p in pages)  # under the server's budget of 160 tokens...
    with SQLiteStore(store) as s:
        assert s.settings("budgeted")["budget"] == 512  # ...which is not stored with the conversation
    long = [p for p in pages if p["too_long_turns"]]
    assert [p["too_long_turns"] for p in long] == [[24]] and not long[0]["in_prompt"] and long[0]["state"] == "too long"


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(not Path(CHROMIUM).exists() and not shutil.which("chromium"),
                    reason="chromium is not installed (make setup installs Debian's package as root)")
def test_the_inspector_shows_the_recalled_page_in_a_real_browser(server, recalled):
    sync_api = pytest.importorskip("playwright.sync_api")
    url, _, _ = server
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium"),
                                    args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1100})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.add_init_script(f"sessionStorage.setItem('localpager-key', {json.dumps(KEY)})")
            page.goto(f"{url}/?conversation=facts")
            page.wait_for_selector("tr.recalled[data-page='1']", timeout=15_000)
            assert "recalled p1" in page.inner_text("#traces")
            assert page.locator("#chart svg rect").count() >= 2
            assert page.locator("tr.evicted").count() >= 1 and page.locator("tr.resident").count() >= 1
            RESULTS.mkdir(exist_ok=True)
            page.screenshot(path=str(RESULTS / "inspector.png"), full_page=True)
            page.locator("tr.resident button:text('pin')").last.click()  # pin a page in the prompt
            page.wait_for_selector("tr.resident .badge:text('pinned')", timeout=10_000)
            assert page.locator("#facts tr[data-fact]").count() >= 1  # the standing facts, with their turns
            page.locator("#facts tr[data-fact] button:text('pin')").first.click()
            page.wait_for_selector("#facts .badge:text('pinned')", timeout=10_000)
            page.fill("#search-query", "octopus")
            page.click("#search")
            page.wait_for_selector("#search-results li:has-text('octopus')", timeout=10_000)
        finally:
            browser.close()
    assert errors == []
