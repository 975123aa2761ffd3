"""Helpers shared by tests in both folders (``tests/fast`` and ``tests/model``): paths, data and small builders.

Imported as ``from helpers import ...`` (``tests/conftest.py`` puts ``tests/`` on ``sys.path``); nothing here
loads a model."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent  # tests/: fakes.py, faultkit.py, helpers.py
ROOT = TESTS.parent  # the repository
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
needs_locomo = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not beside the repository")


def benchmark_module(name: str):
    """``benchmarks/<name>.py`` imported as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- keywords and eviction -----------------------------------------------------------------------------
CHINESE = [
    "user: 我对花生过敏，上次吃了花生酱差点进医院。\nassistant: 记住了，你对花生过敏，点菜时要避开花生。",
    "user: 我下周三要去上海出差，住在外滩附近的酒店。\nassistant: 好的，下周三去上海，住外滩附近。",
    "user: 我女儿叫小敏，今年七岁，喜欢画画和游泳。\nassistant: 小敏七岁，喜欢画画和游泳，记下了。",
]


def paged_turns(turn_texts: list[str], per_page: int = 2):
    """(pages, turns): turns alternating user/assistant, cut into pages of ``per_page`` turns (10 tokens each)."""
    from localpager.core.records import Page, Turn

    turns = [Turn("user" if i % 2 == 0 else "assistant", t, i) for i, t in enumerate(turn_texts)]
    pages = [Page(i // per_page + 1, i, min(i + per_page, len(turns)) - 1, token_count=10)
             for i in range(0, len(turns), per_page)]
    return pages, turns


# -- the command line ----------------------------------------------------------------------------------
BOOKMARK = re.compile(r"^\[p\d+(:[^\[\]\n]+)?\]$")  # one line of `localpager bookmarks`


def run_cli(*args, store=None, check=True) -> subprocess.CompletedProcess:
    """``localpager [--store STORE] ARGS`` in a new process; ``check``: its exit status must be 0."""
    cmd = [sys.executable, "-m", "localpager.cli"] + (["--store", str(store)] if store else []) + list(map(str, args))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@dataclass
class CliRun:
    """A command run in this process (``run_cli_here``), read as a ``subprocess.CompletedProcess`` is."""
    args: list[str]
    returncode: int
    stdout: str
    stderr: str


class _LastResort(logging.StreamHandler):
    """What Python does with a warning logged where no handler is set (a command in a process of its own): the
    message alone, on the stderr of the moment. Under pytest the root logger has handlers of its own, so a warning
    the command logs would otherwise not reach its stderr."""

    def __init__(self):
        super().__init__()
        self.setLevel(logging.WARNING)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


def run_cli_here(*args, store=None, input: str | None = None, env: dict[str, str | None] | None = None,
                 check: bool = True) -> CliRun:
    """``localpager [--store STORE] ARGS`` in this process (click's ``CliRunner``), for a test about what the
    command does, not about the process (signals, start-up imports, stdout of the MCP stdio server: ``run_cli``).
    ``env``: variables set (None: unset) for the run only. What a process would print is on ``stderr``: click's
    one-line errors, a warning logged with no handler set, and the traceback of an exception the command let
    through (exit status 1, as Python's). The command's ``LocalPager`` is closed by click when the command
    ends (``ctx.call_on_close``). ``check``: its exit status must be 0."""
    import traceback

    from click.testing import CliRunner

    from localpager.cli import cli

    argv = (["--store", str(store)] if store else []) + list(map(str, args))
    handler = _LastResort()
    logging.getLogger().addHandler(handler)
    try:
        result = CliRunner().invoke(cli, argv, input=input, env=env, prog_name="python -m localpager.cli")
    finally:
        logging.getLogger().removeHandler(handler)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(*result.exc_info))
    run = CliRun(argv, result.exit_code, result.stdout, stderr)
    if check:
        assert run.returncode == 0, run.stderr
    return run


# -- property tests (hypothesis) ---------------------------------------------------------------------------
def examples(*, fast: int, full: int) -> int:
    """A property test's ``max_examples``: ``full`` under the hypothesis profile ``full`` (``HYPOTHESIS_PROFILE=full``
    or ``--hypothesis-profile=full``), ``fast`` under the profile every other run loads (tests/conftest.py). Read
    when the test module is imported, after the profile is loaded."""
    from hypothesis import settings

    return full if settings.get_current_profile_name() == "full" else fast


# -- ranking -------------------------------------------------------------------------------------------
def speaker_turns(lines: list[tuple[str, str]]):
    """(speaker, text) pairs as LoCoMo-style turns: two named speakers taking turns."""
    from localpager.core.records import Turn

    speakers = list(dict.fromkeys(s for s, _ in lines))
    return [Turn("user" if s == speakers[0] else "assistant", text, i, speaker=s)
            for i, (s, text) in enumerate(lines)]


def pages_of(turns, size: int):
    """Pages of ``size`` turns each over ``turns``."""
    from localpager.core.records import Page

    return [Page(i // size + 1, i, min(i + size, len(turns)) - 1) for i in range(0, len(turns), size)]


# -- pages with text (retrievers) ----------------------------------------------------------------------
def page(page_id: int, lines: list[str], first: int = 0):
    """A page of ``lines`` (one turn each, "who: text"), its text set."""
    from localpager.core.records import Page

    first = first or (page_id - 1) * len(lines)
    return Page(page_id, first, first + len(lines) - 1, text="\n".join(lines))


def filler_pages() -> list:
    """Four pages of small talk on four topics, two turns each."""
    topics = [
        ["user: the weather was rainy all weekend", "assistant: hopefully it clears up soon"],
        ["user: did you watch the football match", "assistant: the second half was thrilling"],
        ["user: I repainted the garden fence", "assistant: a fresh coat makes a difference"],
        ["user: my train was late again this morning", "assistant: commuting can be stressful"],
    ]
    return [page(i + 1, lines) for i, lines in enumerate(topics)]


# -- a paged chat on the fakes (tests/fast/test_runtime.py, tests/fast/test_trace.py) ------------------------
# Two turns a page (boundary fixed_2), about 30 fake tokens a page: with a budget of 160, pages 1-3 are
# evicted once the twelve turns are in, pages 4-6 stay, and so they are when a question is added.
TALK = [
    ("user", "My dog is called Biscuit."),
    ("assistant", "Biscuit is a lovely name for a puppy."),
    ("user", "I repaired the garden fence on Sunday."),
    ("assistant", "A sturdy fence keeps the garden tidy."),
    ("user", "The Lisbon flight leaves at seven."),
    ("assistant", "Seven is early, so set an alarm."),
    ("user", "My sister Hartley plays the cello."),
    ("assistant", "The cello has a warm sound."),
    ("user", "The kitchen budget is tight this month."),
    ("assistant", "Cooking at home saves money."),
    ("user", "The piano lessons start next week."),
    ("assistant", "Practice a little every day."),
]
DOG = "What is my dog called?"
STATEMENT = "Say something nice about the weather."  # not a question: the retrieval trigger stays off


def open_chat(fake_pager, script=(), *, talk=TALK, budget=160, evicted=(1, 2, 3), **options):
    """A conversation of ``talk`` (role, text[, time]) paged two turns a page; asserts which pages are
    evicted before anything is asked."""
    from localpager.core.pager import PagingConfig

    lp = fake_pager(script, **options)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_2", budget=budget))
    for role, text, *when in talk:  # a transcript: a turn without a time keeps none
        chat.add_turn(role, text, time=when[0] if when else None, stamp=False)
    assert [p.page_id for p in chat.pager.evicted] == list(evicted), "the precondition of this test"
    return lp, chat


# -- paging --------------------------------------------------------------------------------------------
def chatter(n: int) -> list:
    """``n`` turns alternating user/assistant, ten in a row on each topic."""
    from localpager.core.records import Turn

    return [Turn(role="user" if i % 2 == 0 else "assistant", text=f"message number {i} about topic {i // 10}", index=i)
            for i in range(n)]


# -- a real `localpager serve` ----------------------------------------------------------------------------
def free_port() -> int:
    """A loopback port nothing listens on now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    url: str
    proc: subprocess.Popen
    lines: list[str]  # its stderr, as read so far
    reader: threading.Thread  # reads ``lines`` until the process closes stderr


PORT_ATTEMPTS = 3


def _port_taken(proc: subprocess.Popen, reader: threading.Thread, lines: list[str]) -> bool:
    """Whether ``localpager serve`` exited because its port was in use (it binds before it loads anything: it has
    either said so or begun to start within seconds)."""
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        if any("listening at" in line for line in lines):
            return False
        time.sleep(0.05)
    if proc.poll() is None:
        return False
    reader.join(5)
    return any("is using the port" in line for line in lines)


@contextmanager
def serving(store, *options: str, env: dict[str, str] | None = None, preloaded: bool = True, seconds: float = 180):
    """``localpager serve`` on ``store`` in a subprocess, on a free loopback port, yielded (``Served``) once
    ``/health`` answers (with ``preloaded``, once the models are loaded; a preload error fails the test).
    Stopped by its PID: terminated, and killed if it has not left within 60 s."""
    import httpx

    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "localpager.cli", "--store", str(store), "serve", "--port",
                                 str(port), *options], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
        reader.start()
        # free_port's port may be taken before the server binds it (by another pytest-xdist worker's server, or any
        # program's): the server then exits saying so, and another free port is tried
        if attempt + 1 < PORT_ATTEMPTS and _port_taken(proc, reader, lines):
            continue
        break
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + seconds
    try:
        while True:
            assert proc.poll() is None, f"the server exited: {''.join(lines)}"
            assert time.monotonic() < deadline, f"the server did not start: {''.join(lines)}"
            try:
                health = httpx.get(f"{url}/health", timeout=2).json()
            except httpx.HTTPError:
                health = None
            if health is not None:
                assert not health.get("preload_error"), health
                if health.get("preloaded") or not preloaded:
                    break
            time.sleep(0.3)
        yield Served(url, proc, lines, reader)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- side effects --------------------------------------------------------------------------------------
ENV_KEYS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM")


def clean_env() -> dict[str, str]:
    """This environment without the offline switches the test session sets for itself (conftest)."""
    return {k: v for k, v in os.environ.items() if k not in ENV_KEYS}


# -- the real backend, recorded ------------------------------------------------------------------------
class Recording:
    """A backend (the real one) recording every prompt it is asked to continue and the constraint it was given;
    its fork records into ``side``. ``force``: a constraint every unconstrained generation (an answer) is held
    to, so that a test makes the model say what it needs whatever the build's greedy output would be."""

    def __init__(self, backend, force=None):
        self.inner = backend
        self.force = force
        self.prompts: list[list[int]] = []
        self.constraints: list = []
        self.side: Recording | None = None

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, prompt, **kwargs):
        self.prompts.append(list(prompt))
        self.constraints.append(kwargs.get("constraint"))
        if self.force is not None and kwargs.get("constraint") is None:
            kwargs["constraint"] = self.force
        return self.inner.generate(prompt, **kwargs)

    def fork(self):
        self.side = Recording(self.inner.fork(), self.force)
        return self.side


def leaks(lp, word: str) -> list[str]:
    """The files of a SQLite store still holding ``word`` (UTF-8, BM25's UTF-32, KV tokens); none on PostgreSQL."""
    if lp.store.kind != "sqlite":
        return []
    from derivedkit import word_leaks
    from faultkit import leaks as byte_leaks

    lp.store.erase()
    return sorted(set(byte_leaks(lp.store.path, word) + word_leaks(lp.store.path, word)))


def stored_words(lp, word: str) -> list[str]:
    """The conversations whose turns, traces or facts still hold ``word``, read through the store (both engines)."""
    import json

    out = []
    for info in lp.conversations():
        said = [t.text for t in lp.store.turns(info.id)] + [json.dumps(t) for t in lp.store.traces(info.id)]
        said += [f.text for f in lp.store.facts(info.id)]
        if any(word.lower() in s.lower() for s in said):
            out.append(info.id)
    return sorted(out)


@contextmanager
def serving_in_thread(lp, options):
    """``serve``'s own uvicorn server (``serving.app.uvicorn_server``) for ``lp`` under ``options``, on a free
    loopback port, in a thread of this process; yields its port; stopped and its socket closed at the end."""
    from localpager.serving.app import create_app, listen, uvicorn_server

    sock = listen("127.0.0.1", 0)
    server = uvicorn_server(create_app(lp, options), "127.0.0.1", 0, options)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
