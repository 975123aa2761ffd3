"""benchmarks/new_chat.py runs end to end on the real models (five questions of each list, among them advice the
chat model answers): every chat and list is reported, and a question about the user in a chat with nothing said is
answered "not remembered" by the product itself, never by the model (its classifiers and the empty recall decide,
so no generated text is compared)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.model, pytest.mark.embedder, pytest.mark.slow]


def test_new_chat_reports_each_chat_and_never_invents_in_an_empty_one(tmp_path):
    out = tmp_path / "new_chat.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "new_chat.py"), "--limit", "5", "--json", str(out)],
                   check=True, capture_output=True, text=True, timeout=900)
    data = json.loads(out.read_text())
    assert set(data) == {f"{chat}/{kind}" for chat in ("empty", "told", "said") for kind in ("advice", "personal")}
    for row in data.values():
        assert row["n"] == 5 and len(row["answers"]) == 5 and 0 <= row["not_remembered"] <= 1
        assert all(a["answer"] and a["decision"] for a in row["answers"])
    assert any(a["decision"] == "answer" for row in data.values() for a in row["answers"])  # the model wrote some
    empty = data["empty/personal"]
    assert empty["not_remembered"] == 1.0 and all(a["decision"] == "unknown" for a in empty["answers"]), empty
