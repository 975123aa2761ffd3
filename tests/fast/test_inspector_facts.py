"""The inspector's controls over a user's standing facts (issue 40, item 4), in a real browser: pick a user, add a fact
(remember), edit one (a prompt for the new words, then a confirm naming how many turns go), delete one; each calls
the /v1/users endpoints, and the old words leave the store. On the fakes, with ``serve``'s own uvicorn server in a
thread; skipped without chromium or playwright (tests/model/test_server.py drives the rest of the inspector)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from fakes import ScriptedBackend, shortest_sentence
from helpers import serving_in_thread

pytest.importorskip("fastapi")
from localpager.serving.app import ServerOptions  # noqa: E402

CHROMIUM = "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else shutil.which("chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SECRET = "Quillonfrazzle"
ALLERGY = f"I'm allergic to {SECRET}."
SISTER = "My sister Zorbavelle lives in Porto."
KEY = "the spare key is under the blue flowerpot"

pytestmark = pytest.mark.skipif(not CHROMIUM, reason="chromium is not installed (make setup installs it as root)")


@pytest.fixture
def running(fake_pager):
    """The server on a free loopback port, in a thread, stopped at the end; (url, lp)."""
    lp = fake_pager(backend=ScriptedBackend(fallback=lambda p, g: shortest_sentence(g) if g else "Noted."))
    conv = lp.conversation("mon", create=True, user="alice")
    conv.add_turn("user", f"Hi! {ALLERGY} {SISTER}")
    conv.add_turn("assistant", "Noted.")
    with serving_in_thread(lp, ServerOptions(log=lambda line: None)) as port:
        yield f"http://127.0.0.1:{port}", lp


def test_a_users_facts_are_added_edited_and_deleted_from_the_inspector(running):
    sync_api = pytest.importorskip("playwright.sync_api")
    url, lp = running
    errors: list[str] = []
    answers: list[str | None] = []  # what each dialog is answered, in order (None: accepted as it is)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("dialog", lambda d: d.accept(answers.pop(0)) if answers and answers[0] is not None
                    else (answers.pop(0) if answers else None, d.accept()))
            page.goto(f"{url}/?user=alice")
            facts = "#user-facts tr[data-fact]"
            page.wait_for_selector(f"{facts}:has-text('Zorbavelle')", timeout=15_000)
            assert page.locator(facts).count() == 2

            page.fill("#user-remember-text", KEY)
            page.click("#user-remember")
            page.wait_for_selector(f"{facts}:has-text('blue flowerpot')", timeout=10_000)
            assert lp.store.conversation_user("alice-memory") == "alice"

            answers[:] = ["I'm allergic to peanuts.", None]  # the prompt's new words, then the confirm
            page.locator(f"{facts}:has-text('{SECRET}') button:text('edit')").click()
            page.wait_for_selector(f"{facts}:has-text('peanuts')", timeout=10_000)
            assert page.locator(f"{facts}:has-text('{SECRET}')").count() == 0

            answers[:] = [None]  # the confirm
            page.locator(f"{facts}:has-text('Zorbavelle') button:text('delete')").click()
            page.wait_for_selector(f"{facts}:has-text('Zorbavelle')", state="detached", timeout=10_000)
            # the list is drawn again before the status says what was done: wait for the status, not the list only
            page.wait_for_selector("#status:has-text('deleted fact')", timeout=10_000)
            assert "deleted fact" in page.inner_text("#status")
        finally:
            browser.close()
    assert errors == []
    texts = [f.text for f in lp.user("alice").facts()]
    assert sorted(texts) == sorted([KEY, "I'm allergic to peanuts."])  # (said within the same second)
    said = " ".join(t.text for i in lp.conversations() for t in lp.store.turns(i.id))
    assert SECRET not in said and "Zorbavelle" not in said
