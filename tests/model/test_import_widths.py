"""Issue 32, item 3, on the real embedder and the real command line: an export with its id changed and every
vector cut to 8 float32s is refused by ``localpager import`` in one line before anything is stored (it used
to say "imported 1", and search on every other conversation then failed with "all input arrays must have
the same shape"). The embedder's width is known without loading it."""

from __future__ import annotations

import os
import subprocess
import sys

import derivedkit
import pytest
from fakes import ScriptedBackend

from localpager.core.pager import PagingConfig
from localpager.memory.api import LocalPager

pytestmark = pytest.mark.embedder


def localpager(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "LOCALPAGER_EMBEDDER"}
    return subprocess.run([sys.executable, "-c", "from localpager.cli import main; main()", *args],
                          check=False, capture_output=True, text=True, env=env, timeout=600)


def test_the_embedders_width_is_known_without_loading_it():
    from localpager.retrieval.embedder import Embedder

    embedder = Embedder()
    assert embedder.known_dim == 384 and embedder._model is None


def test_a_crafted_import_with_8_float_vectors_is_refused_in_one_line(tmp_path):
    store = tmp_path / "s.db"
    lp = LocalPager(store, backend=ScriptedBackend(fallback="Noted."))
    for conv in ("a", "b"):
        chat = lp.conversation(conv, create=True, config=PagingConfig(boundary="fixed_5", budget=80))
        for i in range(30):
            chat.add_turn("user", f"{conv}: {derivedkit.filler(i)}")
        chat.search("where is the zebra3?")
    lp.close()
    crafted = derivedkit.crafted_export(store, tmp_path / "crafted.jsonl", "a", "evil")
    result = localpager("--store", str(store), "import", str(crafted))
    assert result.returncode == 1 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "field 'localpager.vectors[0].vector': holds 8 numbers; this store's embedder (" in result.stderr
    assert result.stderr.strip().endswith(") makes 384")
    for conv in ("a", "b"):
        search = localpager("--store", str(store), "search", conv, "zebra7")
        assert search.returncode == 0 and "zebra7" in search.stdout, search.stderr
    listed = localpager("--store", str(store), "conversations")
    assert "evil" not in listed.stdout
