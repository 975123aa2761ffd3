"""The command line on the real tokenizer: ingest counts every page's tokens with the GGUF model's (the rest of
the command line, on the fakes: tests/fast/test_cli.py)."""

from __future__ import annotations

import json
import re

import pytest
from helpers import BOOKMARK, LOCOMO, needs_locomo, run_cli


@pytest.mark.model  # ingest counts tokens with the GGUF tokenizer
def test_generated_conversations_ingest_and_bookmark(tmp_path):
    data, store = tmp_path / "gen.jsonl", tmp_path / "s.db"
    run_cli("lab", "generate", data, "--n", 2, "--seed", 1)
    out = run_cli("ingest", data, "--boundary", "fixed_10", store=store).stdout
    assert re.search(r"stored 2 conversations, \d+ turns, \d+ pages", out)
    listing = json.loads(run_cli("conversations", "--json", store=store).stdout)
    assert [c["id"] for c in listing] == ["synthetic-1-000", "synthetic-1-001"]
    lines = run_cli("bookmarks", "synthetic-1-000", store=store).stdout.splitlines()
    assert len(lines) == listing[0]["pages"] and all(BOOKMARK.match(line) for line in lines)
    structured = run_cli("bookmarks", "synthetic-1-000", "--format", "structured", store=store).stdout
    assert structured.startswith("[p1:t=0-9;e=")
    pages = json.loads(run_cli("pages", "synthetic-1-000", "--json", store=store).stdout)
    assert pages[0]["first_turn"] == 0 and pages[-1]["evicted"] is False


@pytest.mark.model  # ingest counts tokens with the GGUF tokenizer
@needs_locomo
def test_locomo_ingest_and_bookmarks(tmp_path):
    store = tmp_path / "s.db"
    proc = run_cli("ingest", LOCOMO, store=store)
    assert "stored 10 conversations, 5882 turns" in proc.stdout and "1986 probes" in proc.stdout
    assert proc.stderr.count("warning:") == 9
    lines = run_cli("bookmarks", "conv-26", store=store).stdout.splitlines()
    assert len(lines) > 10 and all(BOOKMARK.match(line) for line in lines)
