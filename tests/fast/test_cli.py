"""The command line, as a user runs it: real files and a real store, on the fakes or with no model at all (ingest
on the real tokenizer: tests/model/test_cli.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import run_cli, run_cli_here

HEAVY = ("torch", "faiss", "llama_cpp", "sentence_transformers")
NO_MODELS = {"LOCALPAGER_MODEL": "/nonexistent.gguf", "LOCALPAGER_EMBEDDER": "/nonexistent-embedder"}
# Runs the command line given after it, then says on its last stderr line which heavy modules it imported.
HEAVY_PROBE = (
    "import atexit, sys\n"
    f"atexit.register(lambda: print('heavy:' + ','.join(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr))\n"
    "from localpager.cli import main\n"
    "sys.argv[0] = 'localpager'\n"
    "main()\n"
)


def run_probed(*args, store):
    """``localpager --store STORE ARGS`` with no usable model: (the process, the heavy modules it imported)."""
    env = {**os.environ, **NO_MODELS}
    proc = subprocess.run([sys.executable, "-c", HEAVY_PROBE, "--store", str(store), *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env)
    *rest, last = proc.stderr.splitlines() or [""]
    assert last.startswith("heavy:"), proc.stderr
    return proc, [m for m in last[len("heavy:"):].split(",") if m], "\n".join(rest)


def test_help_is_fast_and_imports_nothing_heavy():
    for module in ("localpager", "localpager.cli"):
        code = (f"import sys, {module}; heavy = {{'torch', 'llama_cpp', 'sentence_transformers', 'faiss', 'numpy'}}; "
                "print(sorted(heavy & set(sys.modules)))")
        assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
    assert "ingest" in run_cli("--help").stdout


PRODUCT_COMMANDS = ["ask", "bench", "bookmarks", "budget", "chat", "conversations", "correct", "eval", "export",
                    "facts", "forget", "import", "ingest", "log", "mcp", "migrate-store", "pages", "pin", "remember",
                    "search", "serve"]


def help_sections(text: str) -> dict[str, list[str]]:
    """``--help`` output as {section title: the names its rows start with}."""
    sections: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            sections[line[:-1]] = rows = []
        elif line.startswith("  ") and not line.startswith("   ") and sections:
            rows.append(line.split()[0])
    return sections


def test_help_lists_the_product_commands_and_the_lab_group():
    from click.testing import CliRunner

    from localpager.cli import cli

    top = help_sections(CliRunner().invoke(cli, ["--help"]).output)
    assert top["Commands"] == sorted([*PRODUCT_COMMANDS, "lab"])
    lab = help_sections(CliRunner().invoke(cli, ["lab", "--help"]).output)
    assert lab["Commands"] == ["generate", "simulate"]
    assert CliRunner().invoke(cli, ["generate", "--help"]).exit_code == 2  # only under lab now


@pytest.mark.parametrize("command,product,experiment", [
    ("eval", ["--format", "--budget", "--model", "--json"],
     ["--strategy", "--page-choice", "--signal", "--trigger", "--keywords", "--layout", "--no-oracle", "--repeat-penalty"]),
    ("bench", ["--quick", "--turns", "--warm", "--json"], ["--cold-turns", "--eviction-budgets"]),
])
def test_the_experiment_options_are_listed_apart(command, product, experiment):
    from click.testing import CliRunner

    from localpager.cli import cli

    sections = help_sections(CliRunner().invoke(cli, [command, "--help"]).output)
    assert list(sections)[-2:] == ["Options", "Experiment options"]
    assert set(product) <= set(sections["Options"]) and not set(experiment) & set(sections["Options"])
    assert set(experiment) <= set(sections["Experiment options"])
    assert {"-h,", "--help"} & set(sections["Options"])  # help is an option of the command's own
    for name in PRODUCT_COMMANDS:  # only eval and bench have experiment options
        if name not in ("eval", "bench"):
            assert "Experiment options" not in CliRunner().invoke(cli, [name, "--help"]).output, name


@pytest.fixture
def small_store(tmp_path, fake_pager):
    """A store with conversation 'c' (40 turns, pages evicted, one answered question), made on the fakes:
    its counts are the scripted model's, so recounting them would need a model."""
    from fakes import ScriptedBackend, shortest_sentence

    from localpager.core.pager import PagingConfig

    path = tmp_path / "s.db"
    lp = fake_pager(backend=ScriptedBackend(lambda p, g: shortest_sentence(g) if g else "Noted."), path=path)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=200))
    for i in range(40):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} is about the Lisbon flight number {i}.")
    chat.ask("Which flight was it?")
    assert chat.pager.evicted and lp.store.traces("c")
    lp.close()
    return path


def store_rows(path) -> list:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return sorted(conn.iterdump())


@pytest.mark.parametrize("args,expect", [
    (["conversations"], "c\t42 turns"),
    (["conversations", "--json"], '"id": "c"'),
    (["pages", "c"], "p1\tturns 0-4"),
    (["pages", "c", "--json"], '"first_turn": 0'),
    (["bookmarks", "c"], "[p1:"),
    (["bookmarks", "c", "--format", "structured", "--json"], '"bookmark": "[p1:t=0-4;'),
    (["log", "c"], "turn 40: 'Which flight was it?'"),
    (["log", "c", "--json"], '"question": "Which flight was it?"'),
])
def test_read_only_commands_need_no_model_import_nothing_heavy_and_write_nothing(small_store, args, expect):
    before = store_rows(small_store)
    proc, heavy, stderr = run_probed(*args, store=small_store)
    assert proc.returncode == 0, stderr
    assert expect in proc.stdout and heavy == []
    assert store_rows(small_store) == before


@pytest.mark.parametrize("args", [["conversations"], ["pages", "c"], ["bookmarks", "c"], ["log", "c"],
                                  ["pin", "c", "1"], ["ask", "c", "hello?"]])
def test_a_missing_store_is_a_one_line_error_and_is_not_created(tmp_path, args):
    store = tmp_path / "nothing" / "s.db"
    proc, heavy, stderr = run_probed(*args, store=store)
    assert proc.returncode == 1 and heavy == []
    assert stderr.strip() == f"Error: no store at {store} (ingest a file or start a chat to create one)"
    assert not store.exists() and not store.parent.exists()


def test_pin_needs_no_model(small_store):
    proc, heavy, stderr = run_probed("pin", "c", "2", store=small_store)
    assert proc.returncode == 0 and heavy == [], stderr
    assert proc.stdout.strip() == "p2 pinned (it is evicted; it stays evicted)"
    pages = json.loads(run_cli_here("pages", "c", "--json", store=small_store).stdout)
    assert [p["page_id"] for p in pages if p["pinned"]] == [2]


@pytest.mark.parametrize("content,message", [
    ('{"id": "a", "turns": [{"role": "user", "text": "hi"}]}\n{"id": "b", "turns": [{"role": "bot", "text": "x"}]}\n',
     "line 2"),
    ("not json at all\n", "unknown format"),
    ('{"id": "a", "turns": [{"role": "user", "text": "hi"}]}\n{"id": "b", "turns": [\n', "line 2"),
    ("", "empty"),
])
def test_bad_files_are_one_line_errors_and_store_nothing(tmp_path, content, message):
    bad, store = tmp_path / "bad.jsonl", tmp_path / "s.db"
    bad.write_text(content)
    proc = run_cli_here("ingest", bad, store=store, check=False)
    assert proc.returncode == 1
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]  # the store it made, empty, is gone again
    from localpager.store.sqlite import SQLiteStore

    SQLiteStore(store).close()
    proc = run_cli_here("ingest", bad, store=store, check=False)  # a store that was there stays, empty or not
    assert proc.returncode == 1 and store.exists()
    assert json.loads(run_cli_here("conversations", "--json", store=store).stdout) == []


def test_unknown_conversation_and_missing_file(tmp_path):
    from localpager.store.sqlite import SQLiteStore

    store = tmp_path / "s.db"
    SQLiteStore(store).close()
    proc = run_cli_here("bookmarks", "nope", store=store, check=False)
    assert proc.returncode == 1 and "no conversation 'nope'" in proc.stderr
    proc = run_cli_here("ingest", tmp_path / "missing.jsonl", store=store, check=False)
    assert proc.returncode == 1 and "missing.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_corrupt_store_is_a_clear_error(tmp_path):
    store = tmp_path / "s.db"
    store.write_bytes(b"garbage" * 1000)
    proc = run_cli_here("conversations", store=store, check=False)
    assert proc.returncode == 1 and "cannot open store" in proc.stderr
    assert store.read_bytes() == b"garbage" * 1000


# -- budgets on the command line, on the fakes ---------------------------------------------------------------
def invoke(*args, store, input=None):
    from click.testing import CliRunner

    from localpager.cli import cli

    return CliRunner().invoke(cli, ["--store", str(store), *map(str, args)], input=input)


def stored_budget(path) -> int:
    from localpager.store.sqlite import SQLiteStore

    with SQLiteStore(path) as s:
        return s.settings("c")["budget"]


@pytest.mark.parametrize("command,input", [(["ask", "c", "Which flight was it?"], None), (["chat", "c"], "hello\n/quit\n")])
def test_a_budget_on_the_command_line_is_for_that_command_unless_saved(small_store, fake_models, command, input):
    result = invoke(*command, "--budget", 120, store=small_store, input=input)
    assert result.exit_code == 0, result.output
    assert stored_budget(small_store) == 200
    assert fake_models.calls or "You told me" in result.output  # it answered: the model, or a standing fact quoted
    result = invoke(*command, "--budget", 120, "--save", store=small_store, input=input)
    assert result.exit_code == 0, result.output
    assert stored_budget(small_store) == 120


@pytest.mark.parametrize("command", [["ask", "c", "Which flight was it?"], ["chat", "c"]])
@pytest.mark.parametrize("budget", [0, -3])
def test_a_budget_below_one_is_a_usage_error_and_nothing_is_stored(small_store, fake_models, command, budget):
    before = store_rows(small_store)
    for extra in ([], ["--save"]):
        result = invoke(*command, "--budget", budget, *extra, store=small_store, input="hello\n/quit\n")
        assert result.exit_code == 2 and "Invalid value for '--budget'" in result.output
    assert fake_models.calls == [] and store_rows(small_store) == before


def test_save_needs_a_budget(small_store, fake_models):
    before = store_rows(small_store)
    result = invoke("ask", "c", "Which flight was it?", "--save", store=small_store)
    assert result.exit_code == 2 and "--save stores --budget" in result.output
    assert fake_models.calls == [] and store_rows(small_store) == before


def test_ingest_refuses_a_budget_below_one(tmp_path):
    data, store = tmp_path / "gen.jsonl", tmp_path / "s.db"
    data.write_text('{"id": "a", "turns": [{"role": "user", "text": "hi"}]}\n')
    proc = run_cli_here("ingest", data, "--budget", 0, store=store, check=False)
    assert proc.returncode == 2 and "Invalid value for '--budget'" in proc.stderr and not store.exists()
