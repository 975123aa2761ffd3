"""A forget is final while `localpager serve` holds the conversation: the real server in a subprocess (loopback,
a free port, the default models), a secret said in a chat through it, forgotten with the CLI from another
process, then the server made to switch conversations and stopped. No file the store owns holds the secret,
as bytes or as the tokens of a saved KV cache (decoded with the model's own tokenizer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest
from faultkit import kv_tokens, leaks, model_decoder, store_files
from helpers import serving

pytestmark = [pytest.mark.model, pytest.mark.embedder, pytest.mark.slow]
pytest.importorskip("fastapi")

SECRET = "Quillonfrazzle"


def env() -> dict[str, str]:
    out = {**os.environ, "LOCALPAGER_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    out.pop("LOCALPAGER_API_KEY", None)
    return out


@pytest.fixture
def server(tmp_path):
    """``localpager serve`` on a new store; yields (URL, store path, process, stderr lines); stopped by PID."""
    store = tmp_path / "served.db"
    with serving(store, "--max-tokens", "8", env=env()) as served:
        yield served.url, store, served.proc, served.lines


def chat(url: str, conv: str, text: str) -> str:
    r = httpx.post(f"{url}/v1/chat/completions", timeout=120, headers={"X-Conversation-Id": conv},
                   json={"model": "localpager", "max_tokens": 8, "messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def test_a_secret_forgotten_from_the_cli_is_not_written_back_by_a_running_server(server):
    url, store, proc, lines = server
    decode = model_decoder()
    chat(url, "secret", f"My code word is {SECRET}, please keep it in mind.")
    chat(url, "other", "Name a colour, please.")  # the model moves: the server saves the secret's cache
    before = leaks(store, SECRET, decode)
    assert any(found.endswith("(KV tokens)") for found in before), before  # the check sees it...
    assert not any(SECRET.encode() in p.read_bytes() for p in store_files(store) if ".kv-" in p.name)  # ...grep never
    chat(url, "secret", "Thanks. What should I keep in mind?")  # back: the server's live cache holds it again

    forget = subprocess.run([sys.executable, "-m", "localpager.cli", "--store", str(store), "forget", "secret",
                             "--match", SECRET], env=env(), capture_output=True, text=True, timeout=300)
    assert forget.returncode == 0, forget.stdout + forget.stderr
    assert "exports written before this forget still hold" in forget.stdout

    chat(url, "other", "And another colour?")  # the server switches conversations...
    proc.send_signal(signal.SIGINT)  # ...and stops as Ctrl-C stops it, saving the cache it holds
    proc.wait(120)

    assert leaks(store, SECRET, decode) == []
    caches = [decode(kv_tokens(p)) for p in store_files(store) if ".kv-" in p.name and kv_tokens(p)]
    assert caches and any("another colour" in text for text in caches)  # what was saved is read, and clean
