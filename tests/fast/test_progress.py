"""Progress of long ingests and imports: what the library reports (the CLI draws it with tqdm on stderr,
shown after a second, never with --json)."""

from __future__ import annotations

from localpager.lab.synthetic import generate_conversation
from localpager.store.loaders import dump_jsonl


def test_ingest_reports_turns_paged_and_import_reports_lines_and_turns(fake_pager, tmp_path, monkeypatch):
    conversations = [generate_conversation(s, n_turns=700, conv_id=f"c{s}") for s in (1, 2)]
    source = tmp_path / "in.jsonl"
    dump_jsonl(conversations, source)
    lp = fake_pager()
    seen = []
    lp.ingest(source, on_turns=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (1400, 1400) and (500, 1400) in seen and (700, 1400) in seen
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    out = tmp_path / "out.jsonl"
    lp.export(out)
    stages = []
    other = fake_pager(path=tmp_path / "other.db")
    other.import_file(out, progress=lambda stage, done, total: stages.append((stage, done, total)))
    assert ("store", 1400, 1400) in stages and ("store", 700, 1400) in stages
    assert [s for s in stages if s[0] == "read"][-1][1] == [s for s in stages if s[0] == "read"][-1][2]


def test_prepare_embeds_what_a_first_recall_would_and_says_how_far_it_got(fake_pager):
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    for t in generate_conversation(3, n_turns=300).turns:
        chat.add_turn(t.role, t.text, stamp=False)
    seen = []
    computed = chat.prepare(progress=lambda done, total: seen.append((done, total)), chunk=5)
    evicted = sum(len(p.turn_range) for p in chat.pager.evicted)
    assert computed > 0 and seen[-1] == (evicted, evicted) and len(seen) > 1
    assert chat.prepare() == 0  # done: nothing computed again


def test_no_bar_with_json(tmp_path, fake_models, monkeypatch):
    """``ingest --json`` draws no bar (its stdout is for a program); without it, the bars are on."""
    from click.testing import CliRunner

    import localpager.cli.store as commands
    from localpager.cli import cli

    made = []

    class Recorded(commands.Bars):
        def __init__(self, disabled: bool = False, unit: str = "turn"):
            super().__init__(disabled, unit)
            made.append(disabled)

    monkeypatch.setattr(commands, "Bars", Recorded)
    source = tmp_path / "in.jsonl"
    dump_jsonl([generate_conversation(4, n_turns=600)], source)
    for flags, store in ((["--json"], "a.db"), ([], "b.db")):
        result = CliRunner().invoke(cli, ["--store", str(tmp_path / store), "ingest", str(source), *flags])
        assert result.exit_code == 0, result.output
    assert made == [True, False]
    assert "%" not in CliRunner().invoke(cli, ["--store", str(tmp_path / "c.db"), "ingest", str(source),
                                               "--json"]).stderr
