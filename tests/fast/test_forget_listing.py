"""Issue 39 (c): what ``forget --match`` takes, and how it lists it. An answer that only quotes the matched text (a
fact answer, the overview of what is remembered) goes whole, other facts' lines and all, since no word of the text
may stay in any file; the dry run says which turns those are and shows every turn whole (past ``LISTED``
characters: how many more). On the fakes: seconds."""

from __future__ import annotations

from click.testing import CliRunner

from localpager.cli import cli
from localpager.memory.controls import LISTED

ALLERGY = "I'm allergic to sesame."
SISTER = "My sister lives in Porto."
OVERVIEW = f'Here is what I remember about you:\n- You told me: "{ALLERGY}"\n- You told me: "{SISTER}"'
TALK = [("user", ALLERGY), ("assistant", "Noted."), ("user", SISTER), ("assistant", "Porto is lovely."),
        ("user", "Anything I should avoid at the bakery?"), ("assistant", f'You told me: "{ALLERGY}"'),
        ("user", "What do you remember about me?"), ("assistant", OVERVIEW),
        ("user", "Is sesame oil good for cooking?"), ("assistant", "Sesame oil is fine for a quick stir-fry.")]


def conversation(fake_pager, talk=TALK):
    lp = fake_pager()
    chat = lp.conversation("c", create=True)
    for role, text in talk:
        chat.add_turn(role, text, stamp=False)
    return lp, chat


def test_a_dry_run_names_the_answers_that_quoted_it_and_shows_every_turn_whole(fake_pager):
    _, chat = conversation(fake_pager)
    dry = chat.forget(match="Sesame", dry_run=True)
    assert dry.turns == [0, 5, 7, 8, 9] and dry.quoted == [5, 7]  # 9 says it in its own words: no quotation
    assert dry.roles == ["user", "assistant", "assistant", "user", "assistant"]
    lines = dry.lines()
    assert lines[1:] == [
        f"  turn 0 (user): {ALLERGY}",
        f'  turn 5 (assistant, an answer that quoted it): You told me: "{ALLERGY}"',
        "  turn 7 (assistant, an answer that quoted it): Here is what I remember about you:",
        f'    - You told me: "{ALLERGY}"',
        f'    - You told me: "{SISTER}"',  # the rest of the answer goes with it, and the dry run shows it
        "  turn 8 (user): Is sesame oil good for cooking?",
        "  turn 9 (assistant): Sesame oil is fine for a quick stir-fry.",
        "  note: an answer that quoted it goes whole, with whatever else it says (other facts stay, from their own "
        "turns): no word of the text may be left in any file"]


def test_the_answer_goes_whole_and_the_other_facts_it_listed_stay(fake_pager):
    _, chat = conversation(fake_pager)
    report = chat.forget(match="sesame")
    assert report.turns == [0, 5, 7, 8, 9] and report.erased
    assert all(not chat.turns[i].text for i in report.turns)  # whole: no line of the overview is left
    assert [f.text for f in chat.facts()] == [SISTER]  # Porto stays a standing fact, from its own turn
    assert not any("turn 7 (assistant" in line for line in report.lines())  # only a dry run labels the turns


def test_a_turn_too_long_to_list_says_how_much_is_not_shown(fake_pager):
    long = "My grandmother's recipe uses sesame. " + "Then stir it slowly. " * 100
    _, chat = conversation(fake_pager, [("user", long)])
    lines = chat.forget(match="sesame", dry_run=True).lines()
    shown = lines[1].removeprefix("  turn 0 (user): ")
    assert long.startswith(shown) and len(shown) <= LISTED
    assert lines[2] == f"    … ({len(long) - len(shown):,} more characters not shown)"


def test_the_cli_dry_run_lists_a_multi_line_answer_whole(fake_pager):
    lp, _ = conversation(fake_pager)
    path = lp.store.path
    lp.close()
    result = CliRunner().invoke(cli, ["--store", str(path), "forget", "c", "--match", "sesame", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f'    - You told me: "{SISTER}"\n' in result.output
    assert "turn 7 (assistant, an answer that quoted it): Here is what I remember about you:\n" in result.output
