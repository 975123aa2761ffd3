"""The store options where people put them (issue 22, item 9): ``localpager bookmarks X --store m.db`` was
"No such option"; every command that opens the store now takes ``--store`` and ``--key-env`` after its name
as well as before it. On the fakes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from localpager.cli import StoreGroup, cli
from localpager.core.pager import PagingConfig


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, list(args), env=env)


@pytest.fixture
def store(fake_pager, tmp_path):
    path = tmp_path / "m.db"
    lp = fake_pager(path=path)
    chat = lp.conversation("c", create=True, config=PagingConfig(boundary="fixed_5", budget=60))
    for i in range(12):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} mentions the zebra{i}.")
    lp.close()
    return path


def test_store_after_the_command_is_the_store_before_it(store):
    before = run("--store", str(store), "bookmarks", "c")
    after = run("bookmarks", "c", "--store", str(store))
    assert after.exit_code == 0, after.output
    assert after.output == before.output and after.output.startswith("[p1:")
    assert run("conversations", "--json", "--store", str(store)).output == run("--store", str(store), "conversations",
                                                                                "--json").output


def test_after_the_command_wins(store, tmp_path):
    result = run("--store", str(tmp_path / "elsewhere.db"), "conversations", "--store", str(store))
    assert result.exit_code == 0 and result.output.startswith("c\t")
    assert not (tmp_path / "elsewhere.db").exists()


def test_key_env_after_the_command(fake_pager, tmp_path):
    path = tmp_path / "enc.db"
    lp = fake_pager(path=path, key="k1")
    lp.conversation("c", create=True)
    lp.close()
    ok = run("conversations", "--store", str(path), "--key-env", "LP_KEY", env={"LP_KEY": "k1"})
    assert ok.exit_code == 0 and ok.output.startswith("c\t")
    bad = run("conversations", "--key-env", "LP_KEY", "--store", str(path), env={"LP_KEY": "k2"})
    assert bad.exit_code == 1 and "wrong key" in bad.output


@pytest.mark.parametrize("name", sorted(set(cli.commands) - set(StoreGroup.WITHOUT_STORE)))
def test_every_command_that_opens_the_store_takes_the_store_options(name):
    options = {opt for param in cli.commands[name].params for opt in param.opts}
    assert {"--store", "--key-env"} <= options
    assert "--store" in run(name, "--help").output


def test_a_command_without_a_store_says_so(tmp_path):
    result = run("lab", "generate", str(tmp_path / "g.jsonl"), "--store", "m.db")
    assert result.exit_code == 2 and "No such option '--store'" in result.output
