"""Imports are checked as strictly as turns (issue 22, item 6): an export whose pages overlap or leave a gap,
or whose ``localpager`` fields have the wrong type, is refused in one line naming the file, the line and
the field, and the store is left as it was. Before, such a file was stored and every later ``ask`` failed
with an IndexError, or the import stopped with a traceback. On the fakes."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import ScriptedBackend, shortest_sentence

from localpager.cli import cli
from localpager.core.pager import PagingConfig
from localpager.store.loaders import ConversationFileError

SMALL = PagingConfig(boundary="fixed_5", budget=60)


@pytest.fixture
def export(fake_pager, tmp_path) -> dict:
    """An export line of a 15-turn conversation in 3 pages of 5 turns, with its vectors."""
    lp = fake_pager(path=tmp_path / "source.db")
    chat = lp.conversation("c", create=True, config=SMALL)
    for i in range(15):
        chat.add_turn("user" if i % 2 == 0 else "assistant", f"Turn {i} is about zebra{i} and topic{i // 5}.")
    chat.search("zebra3")  # embeds the evicted pages: the export has vectors
    out = tmp_path / "source.jsonl"
    lp.export(out, vectors=True)
    line = json.loads(out.read_text())
    assert [(p["first_turn"], p["last_turn"]) for p in line["localpager"]["pages"]] == [(0, 4), (5, 9), (10, 14)]
    assert line["localpager"]["vectors"]
    return line


def reply(prompt: str, grammar) -> str:
    return shortest_sentence(grammar) if grammar else "Zebras."


def dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(line for line in conn.iterdump() if "counters" not in line)


def refused(fake_pager, tmp_path, lines: list[dict], field: str, message: str, line_number: int = 2) -> None:
    """Importing ``lines`` (after a good first line) is refused with one line naming the file, the line and the
    field; the store is unchanged."""
    lp = fake_pager(path=tmp_path / "target.db")
    lp.conversation("kept", create=True).add_turn("user", "a turn that must survive")
    before = dump(lp.store.path)
    good = {"id": "first", "turns": [{"role": "user", "text": "hello"}]}
    path = tmp_path / "import.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in [good, *lines]))
    with pytest.raises(ConversationFileError) as caught:
        lp.import_file(path)
    text = str(caught.value)
    assert "\n" not in text and text.startswith(f"{path} line {line_number}: field '{field}': "), text
    assert message in text, text
    assert dump(lp.store.path) == before
    assert [c.id for c in lp.conversations()] == ["kept"]


def pages(line: dict) -> list[dict]:
    return line["localpager"]["pages"]


def test_pages_that_overlap_are_refused(fake_pager, tmp_path, export):
    pages(export)[1]["first_turn"] = 3  # pages 1 and 2 both hold turns 3 and 4
    refused(fake_pager, tmp_path, [export], "localpager.pages[1].first_turn",
            "pages must cover turns 0-14 in order, each once: page 2 starts at turn 3, expected 5")


def test_pages_that_leave_a_gap_are_refused(fake_pager, tmp_path, export):
    pages(export)[2]["first_turn"] = 12  # turns 10 and 11 on no page
    refused(fake_pager, tmp_path, [export], "localpager.pages[2].first_turn", "starts at turn 12, expected 10")


def test_pages_that_stop_short_or_run_past_the_turns_are_refused(fake_pager, tmp_path, export):
    pages(export)[2]["last_turn"] = 13
    refused(fake_pager, tmp_path, [export], "localpager.pages[2].last_turn", "the last page ends at turn 13, expected 14")
    pages(export)[2]["last_turn"] = 20
    refused(fake_pager, tmp_path, [export], "localpager.pages[2].last_turn", "ends at turn 20, past the last turn (14)")


def test_a_page_that_ends_before_it_starts_is_refused(fake_pager, tmp_path, export):
    pages(export)[1]["last_turn"] = 4
    refused(fake_pager, tmp_path, [export], "localpager.pages[1].last_turn", "ends at turn 4, before it starts (5)")


def test_page_ids_must_count_from_one(fake_pager, tmp_path, export):
    pages(export)[1]["page_id"] = 7  # a page added later would be numbered 4, then 7 again
    refused(fake_pager, tmp_path, [export], "localpager.pages[1].page_id", "must be 2 (pages are numbered 1, 2, 3, ...")


@pytest.mark.parametrize(("change", "field", "message"), [
    (lambda s: s.update(pages=5), "localpager.pages", "must be a list"),
    (lambda s: s["pages"].__setitem__(0, "p1"), "localpager.pages[0]", "must be a page object"),
    (lambda s: s["pages"][0].update(first_turn="0"), "localpager.pages[0].first_turn", "must be an integer, got '0'"),
    (lambda s: s["pages"][0].update(evicted="yes"), "localpager.pages[0].evicted", "must be true or false, got 'yes'"),
    (lambda s: s["pages"][0].update(keywords="peanut"), "localpager.pages[0].keywords", "must be a list of strings"),
    (lambda s: s["pages"][0].update(keywords=[3]), "localpager.pages[0].keywords[0]", "must be a string, got 3"),
    (lambda s: s["pages"][0].update(worth=2), "localpager.pages[0].worth", "must be true, false or null, got 2"),
    (lambda s: s["pages"][0].update(token_count=-1), "localpager.pages[0].token_count", "must be 0 or more, got -1"),
    (lambda s: s["pages"][0].update(access_count=10**30), "localpager.pages[0].access_count", "must fit in 64 bits"),
    (lambda s: s["pages"][0].update(colour="red"), "localpager.pages[0].colour", "unknown field"),
    (lambda s: s["pages"][0].pop("last_turn"), "localpager.pages[0].last_turn", "missing"),
    (lambda s: s.update(settings=[]), "localpager.settings", "must be an object"),
    (lambda s: s["settings"].update(budget="512"), "localpager.settings.budget", "must be an integer, got '512'"),
    (lambda s: s["settings"].update(budget=0), "localpager.settings", "budget must be a positive number of tokens"),
    (lambda s: s["settings"].update(low_watermark="high"), "localpager.settings.low_watermark", "must be a number"),
    (lambda s: s["settings"].update(worth=1), "localpager.settings.worth", "must be true or false, got 1"),
    (lambda s: s["settings"].update(boundary="sometimes"), "localpager.settings", "sometimes"),
    (lambda s: s["settings"].update(tokenizer=5), "localpager.settings.tokenizer", "must be a string or null"),
    (lambda s: s.update(forgotten=5), "localpager.forgotten", "must be a list"),
    (lambda s: s.update(forgotten=["3"]), "localpager.forgotten[0]", "must be a turn index (integer)"),
    (lambda s: s.update(forgotten=[15]), "localpager.forgotten[0]", "turn index 15 out of range"),
    (lambda s: s.update(superseded=[1, 2]), "localpager.superseded", "must be an object"),
    (lambda s: s.update(superseded={"x": 4}), "localpager.superseded.x", "must be a turn index"),
    (lambda s: s.update(superseded={"9" * 5000: 4}), "localpager.superseded." + "9" * 5000, "must be a turn index"),
    (lambda s: s.update(superseded={"3": "4"}), "localpager.superseded.3", "must be a turn index (integer), got '4'"),
    (lambda s: s.update(superseded={"3": 2}), "localpager.superseded.3", "a later turn (4..14), got 2"),
    (lambda s: s.update(version="1"), "localpager.version", "must be 1"),
    (lambda s: s.update(version=2), "localpager.version", "a newer localpager"),
    (lambda s: s.update(source=3), "localpager.source", "must be a string or null"),
    (lambda s: s.update(created_at="yesterday"), "localpager.created_at", "must be a number or null"),
    (lambda s: s.update(colour="red"), "localpager.colour", "unknown field"),
    (lambda s: s.update(vectors={}), "localpager.vectors", "must be a list"),
    (lambda s: s["vectors"][0].update(vector="not base64!"), "localpager.vectors[0].vector", "must be base64"),
    (lambda s: s["vectors"][0].update(vector="AAAA"), "localpager.vectors[0].vector", "float32"),
    (lambda s: s["vectors"][0].update(page_id=9), "localpager.vectors[0].page_id", "no page 9"),
    (lambda s: s["vectors"][0].update(kind="turn:99"), "localpager.vectors[0].kind", "turn:99"),
    (lambda s: s["vectors"][0].update(model=None), "localpager.vectors[0].model", "must be a non-empty string"),
])
def test_malformed_localpager_fields_are_refused_in_one_line(fake_pager, tmp_path, export, change, field, message):
    change(export["localpager"])
    refused(fake_pager, tmp_path, [export], field, message)


def test_the_localpager_object_itself_must_be_an_object(fake_pager, tmp_path, export):
    export["localpager"] = ["pages"]
    refused(fake_pager, tmp_path, [export], "localpager", "must be an object")


def test_an_empty_conversation_is_checked_too(fake_pager, tmp_path):
    refused(fake_pager, tmp_path, [{"id": "e", "turns": [], "meta": "x"}], "meta", "must be an object")
    refused(fake_pager, tmp_path, [{"id": "e\tf", "turns": []}], "id", "control or invisible character")
    refused(fake_pager, tmp_path, [{"id": "e", "turns": [], "localpager": {"pages": [{"page_id": 1}]}}],
            "localpager.pages", "an empty conversation has no pages")


def test_a_checked_import_round_trips_and_answers(fake_pager, tmp_path, export):
    path = tmp_path / "good.jsonl"
    path.write_text(json.dumps(export) + "\n")
    lp = fake_pager(path=tmp_path / "target.db", backend=ScriptedBackend(reply))
    assert lp.import_file(path).ids == ["c"]
    chat = lp.conversation("c")
    assert [(p.first_turn, p.last_turn) for p in chat.pages] == [(0, 4), (5, 9), (10, 14)]
    assert chat.ask("What was turn 3 about?").answer is not None


def test_the_cli_says_which_line_and_field_and_leaves_the_store(fake_pager, tmp_path, export):
    pages(export)[1]["first_turn"] = 3
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(export) + "\n")
    store = tmp_path / "cli.db"
    result = CliRunner().invoke(cli, ["--store", str(store), "import", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        f"Error: {path} line 1: field 'localpager.pages[1].first_turn': pages must cover turns 0-14 in order, "
        "each once: page 2 starts at turn 3, expected 5"]
