"""The command line, as a user runs it: real files, real store, real tokenizer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
BOOKMARK = re.compile(r"^\[p\d+(:[^\[\]\n]+)?\]$")


def run(*args, store=None, check=True):
    cmd = [sys.executable, "-m", "localpager.cli"] + (["--store", str(store)] if store else []) + list(map(str, args))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_help_is_fast_and_imports_nothing_heavy():
    code = ("import sys, localpager.cli; heavy = {'torch', 'llama_cpp', 'sentence_transformers', 'faiss', 'numpy'}; "
            "print(sorted(heavy & set(sys.modules)))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "[]"
    assert "ingest" in run("--help").stdout


@pytest.mark.model  # ingest counts tokens with the GGUF tokenizer
def test_generated_conversations_ingest_and_bookmark(tmp_path):
    data, store = tmp_path / "gen.jsonl", tmp_path / "s.db"
    run("generate", data, "--n", 2, "--seed", 1)
    out = run("ingest", data, "--boundary", "fixed_10", store=store).stdout
    assert re.search(r"stored 2 conversations, \d+ turns, \d+ pages", out)
    listing = json.loads(run("conversations", "--json", store=store).stdout)
    assert [c["id"] for c in listing] == ["synthetic-1-000", "synthetic-1-001"]
    lines = run("bookmarks", "synthetic-1-000", store=store).stdout.splitlines()
    assert len(lines) == listing[0]["pages"] and all(BOOKMARK.match(line) for line in lines)
    structured = run("bookmarks", "synthetic-1-000", "--format", "structured", store=store).stdout
    assert structured.startswith("[p1:t=0-9;e=")
    pages = json.loads(run("pages", "synthetic-1-000", "--json", store=store).stdout)
    assert pages[0]["first_turn"] == 0 and pages[-1]["evicted"] is False


@pytest.mark.model  # ingest counts tokens with the GGUF tokenizer
def test_locomo_ingest_and_bookmarks(tmp_path):
    store = tmp_path / "s.db"
    proc = run("ingest", LOCOMO, store=store)
    assert "stored 10 conversations, 5882 turns" in proc.stdout and "1986 probes" in proc.stdout
    assert proc.stderr.count("warning:") == 9
    lines = run("bookmarks", "conv-26", store=store).stdout.splitlines()
    assert len(lines) > 10 and all(BOOKMARK.match(line) for line in lines)


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
    proc = run("ingest", bad, store=store, check=False)
    assert proc.returncode == 1
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(run("conversations", "--json", store=store).stdout) == []


def test_unknown_conversation_and_missing_file(tmp_path):
    store = tmp_path / "s.db"
    proc = run("bookmarks", "nope", store=store, check=False)
    assert proc.returncode == 1 and "no conversation 'nope'" in proc.stderr
    proc = run("ingest", tmp_path / "missing.jsonl", store=store, check=False)
    assert proc.returncode == 1 and "missing.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_corrupt_store_is_a_clear_error(tmp_path):
    store = tmp_path / "s.db"
    store.write_bytes(b"garbage" * 1000)
    proc = run("conversations", store=store, check=False)
    assert proc.returncode == 1 and "cannot open store" in proc.stderr
    assert store.read_bytes() == b"garbage" * 1000
