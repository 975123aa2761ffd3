"""Issue 32 (8): what a new user is told. A store in a folder that cannot be written, an ingest of ids already
stored, a mistyped conversation id, and a GGUF without a chat template (a base model) each get one line that
names what to do. In this process, on the fakes."""

from __future__ import annotations

import errno
import json
import os

import pytest
from click.testing import CliRunner

from localpager.backends.base import BackendError
from localpager.cli import cli


def one_line_error(result) -> str:
    assert result.exit_code != 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


# -- a store in a read-only folder --------------------------------------------------------------------------
def test_a_store_that_cannot_be_created_names_store_and_its_variable(tmp_path, monkeypatch, fake_models):
    import localpager.store.sqlite as sqlite

    def read_only(path):  # what a read-only mount answers (no such mount needed to test the message)
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path.parent))

    monkeypatch.setattr(sqlite, "_create_private", read_only)
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps({"id": "c", "turns": [{"role": "user", "text": "Hello."}]}) + "\n")
    line = one_line_error(CliRunner().invoke(cli, ["--store", str(tmp_path / "ro" / "s.db"), "ingest", str(data)]))
    assert "Errno" not in line and "Read-only file system" in line
    assert "--store" in line and "LOCALPAGER_STORE" in line and str(tmp_path / "ro") in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_store_in_a_folder_without_write_permission(tmp_path, fake_models):
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o500)
    try:
        line = one_line_error(CliRunner().invoke(cli, ["--store", str(folder / "s.db"), "conversations"]))
    finally:
        folder.chmod(0o700)
    assert "--store" in line and "LOCALPAGER_STORE" in line


# -- ingest of ids already stored ---------------------------------------------------------------------------
def test_ingesting_ids_already_stored_names_the_replace_flag(tmp_path, fake_models):
    data = tmp_path / "c.jsonl"
    data.write_text(json.dumps({"id": "trip", "turns": [{"role": "user", "text": "Hello."}]}) + "\n")
    store = ["--store", str(tmp_path / "s.db")]
    assert CliRunner().invoke(cli, [*store, "ingest", str(data)]).exit_code == 0
    line = one_line_error(CliRunner().invoke(cli, [*store, "ingest", str(data)]))
    assert "already in the store: trip" in line and "--replace" in line
    assert CliRunner().invoke(cli, [*store, "ingest", str(data), "--replace"]).exit_code == 0


# -- a mistyped conversation id -------------------------------------------------------------------------------
@pytest.fixture
def two_conversations(tmp_path, fake_models):
    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"id": conv, "turns": [{"role": "user", "text": f"About {conv}."}]}) + "\n"
                            for conv in ("holiday-plans", "work")))
    store = ["--store", str(tmp_path / "s.db")]
    assert CliRunner().invoke(cli, [*store, "ingest", str(data)]).exit_code == 0
    return store


@pytest.mark.parametrize("args", [["pages", "holiday-plnas"], ["search", "holiday-plnas", "x"],
                                  ["forget", "holiday-plnas", "--turn", "0", "--dry-run"],
                                  ["log", "Holiday-Plans"], ["ask", "holiday-plan", "Where?"]])
def test_a_mistyped_conversation_id_gets_did_you_mean(two_conversations, args):
    line = one_line_error(CliRunner().invoke(cli, [*two_conversations, *args]))
    assert f"no conversation {args[1]!r}" in line and line.endswith("did you mean 'holiday-plans'?")


def test_an_id_close_to_nothing_gets_no_guess(two_conversations):
    line = one_line_error(CliRunner().invoke(cli, [*two_conversations, "pages", "zzz"]))
    assert "did you mean" not in line


def test_did_you_mean_is_click_s_rule_for_ids():
    from localpager.core.checks import did_you_mean

    assert did_you_mean("wrok", ["work", "holiday"]) == "; did you mean 'work'?"
    assert did_you_mean("notes-2024", ["notes-2023", "notes-2025", "x"]) in (
        "; did you mean one of 'notes-2023', 'notes-2025'?", "; did you mean one of 'notes-2025', 'notes-2023'?")
    assert did_you_mean("x", ["work"]) == "" and did_you_mean("work", ["work"]) == ""


# -- a GGUF without a chat template ------------------------------------------------------------------------------
class BaseModel:
    """What llama-cpp-python's ``Llama`` shows of a base model's GGUF: no ``tokenizer.chat_template``."""

    metadata = {"general.name": "gemma-3-270m", "tokenizer.ggml.add_bos_token": "true"}
    closed = False

    def token_bos(self) -> int:
        return 2

    def token_eos(self) -> int:
        return 1

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def base_gguf(tmp_path, monkeypatch):
    import localpager.backends.llama as llama

    path = tmp_path / "gemma-3-270m.gguf"
    path.write_bytes(b"GGUF" + bytes(16))
    model = BaseModel()
    monkeypatch.setattr(llama, "load_llama", lambda *a, **k: model)
    monkeypatch.setenv("LOCALPAGER_CHAT_TEMPLATE", "")  # none chosen (and restored after the test)
    return path, model


def test_a_gguf_without_a_chat_template_is_refused_in_one_line_naming_the_option(base_gguf):
    from localpager.backends.llama import LlamaCppBackend

    path, model = base_gguf
    with pytest.raises(BackendError) as refused:
        LlamaCppBackend(path, kv_shift=False)
    message = str(refused.value)
    assert len(message.splitlines()) == 1 and "gemma-3-270m.gguf has no chat template" in message
    assert "--chat-template" in message and "base model" in message and model.closed


def test_chat_template_chatml_or_a_file_lets_it_load(base_gguf, tmp_path, monkeypatch):
    from localpager.backends.llama import LlamaCppBackend
    from localpager.backends.template import CHATML

    path, _ = base_gguf
    assert LlamaCppBackend(path, kv_shift=False, chat_template="chatml").template is not None
    template = tmp_path / "t.jinja"
    template.write_text(CHATML)
    assert LlamaCppBackend(path, kv_shift=False, chat_template=str(template)).fork().template is not None
    monkeypatch.setenv("LOCALPAGER_CHAT_TEMPLATE", "ChatML")  # what the global --chat-template sets
    assert LlamaCppBackend(path, kv_shift=False).template is not None
    with pytest.raises(BackendError, match="not one of chatml and not a readable Jinja file"):
        LlamaCppBackend(path, kv_shift=False, chat_template=str(tmp_path / "missing.jinja"))


def test_the_global_option_reaches_the_backend(two_conversations, fake_models, monkeypatch):
    import localpager.memory.models as models

    for name in ("LOCALPAGER_BACKEND", "LOCALPAGER_CHAT_TEMPLATE", "LOCALPAGER_THREADS", "LOCALPAGER_BATCH_THREADS"):
        monkeypatch.delenv(name, raising=False)
    given = {}
    monkeypatch.setattr(models, "load_backend", lambda name, **options: given.update(options) or fake_models)
    environ = dict(os.environ)
    result = CliRunner().invoke(cli, ["--chat-template", "chatml", "--threads", "2", *two_conversations,
                                      "ask", "work", "Where?"])
    assert result.exit_code == 0, result.output
    # an argument of the model's loader, not a variable of this process's environment
    assert given["chat_template"] == "chatml" and given["n_threads"] == given["n_threads_batch"] == 2
    assert dict(os.environ) == environ
    assert "--chat-template" in CliRunner().invoke(cli, ["--help"]).output
