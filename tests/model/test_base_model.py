"""Issue 32 (8): a GGUF without a chat template (a base model, such as gemma-3-270m) silently got ChatML and
answered ``<|im_end|>`` garbage. The real SmolLM2 file with its template's key renamed stands in for one: it
is refused in one line naming --chat-template, and loads and answers with --chat-template chatml."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.model

KEY = b"tokenizer.chat_template"


@pytest.fixture(scope="module")
def base_gguf(tmp_path_factory):
    """A copy of the default GGUF whose chat template's key is renamed (same length: nothing else moves)."""
    from localpager.core.modelpaths import chat_model_path

    data = chat_model_path().read_bytes()
    assert data.count(KEY) == 1
    path = tmp_path_factory.mktemp("base") / "no-template.gguf"
    path.write_bytes(data.replace(KEY, b"tokenizer.chat_templat_"))
    return path


def test_the_backend_refuses_a_gguf_without_a_template_unless_one_is_named(base_gguf, monkeypatch):
    from localpager.backends.base import BackendError, Message
    from localpager.backends.llama import LlamaCppBackend

    monkeypatch.setenv("LOCALPAGER_CHAT_TEMPLATE", "")
    with pytest.raises(BackendError, match="no-template.gguf has no chat template.*--chat-template chatml"):
        LlamaCppBackend(base_gguf, n_ctx=512, n_threads=1)
    backend = LlamaCppBackend(base_gguf, n_ctx=512, n_threads=1, chat_template="chatml")
    prompt = backend.render([Message("user", "Say hello.")])
    assert backend.generate(prompt, max_tokens=8).tokens


def test_ask_with_a_base_model_is_one_line_naming_the_option(base_gguf, tmp_path):
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "I live in Porto."}]}) + "\n")
    env = {**os.environ, "LOCALPAGER_MODEL": str(base_gguf), "LOCALPAGER_THREADS": "1"}
    env.pop("LOCALPAGER_CHAT_TEMPLATE", None)
    run = lambda *args: subprocess.run([sys.executable, "-m", "localpager.cli", "--store", str(tmp_path / "s.db"),  # noqa: E731
                                        *args], env=env, capture_output=True, text=True, timeout=600)
    assert run("ingest", str(data)).returncode == 0
    refused = run("ask", "c", "Where do I live?")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no chat template" in lines[0] and "--chat-template" in lines[0]
    answered = run("--chat-template", "chatml", "ask", "c", "Where do I live?")
    assert answered.returncode == 0, answered.stderr
