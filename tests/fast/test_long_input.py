"""No input is quadratic: the regular expressions that read a turn's text take linear work on any text.

A pattern tried from every character of a long run, that scans to the run's end from each, is quadratic:
the e-mail pattern took 7.6 s on a 25 KB turn and never finished on 1 MB, and held the interpreter lock
meanwhile, so one pasted string stalled the server. The proofs here count, they do not time:

* keyword extraction hides every run longer than ``keywords._MAX_RUN`` characters without a space from its
  patterns (URLs are taken first, whole), so a pattern's work on a run is bounded by a constant, however
  long the text: checked by watching what each pattern is given;
* the patterns that were quadratic start only where a run starts, and a number takes at most six thousands
  groups, so they are linear on shorter runs too: checked position by position;
* on ordinary text they find exactly what they found before (hypothesis, against the patterns as they were).

The other patterns on user text were already linear: each start either fails after a bounded look or
matches to the end of what it scanned, so nothing is scanned twice (text._TOKEN and keywords._WORD, a
word and its joined parts; _URL, a literal start then the rest of the run; _DATE and _PHONE, bounded
pieces; _SPEAKER_PREFIX, matched once per line at its start; text.SENTENCE_BREAK and the question and
first-person cues, literal alternatives after a word boundary). ``benchmarks/faults.py`` sends 1 MB
through ingest, import and the server and reports the time (``pathological_input_ms``).
"""

from __future__ import annotations

import re

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from localpager.core import keywords as K
from localpager.core.text import tokenize_words

MB = 1_000_000


def unbroken(unit: str, size: int = MB) -> str:
    return (unit * (size // len(unit) + 1))[:size]


KB100 = MB // 10
RUNS = {  # runs without a space: letters, digits, dots, dashes and their mixtures (the bound does not depend
    # on the length past _MAX_RUN: 1 MB for three, 100 KB for the rest keeps the file fast)
    "dotted": unbroken("a."),
    "thousands": "1" + unbroken(",000", MB - 1),
    "at": unbroken("a", MB // 2) + "@" + unbroken("a", MB // 2),
    "letters": unbroken("a", KB100),
    "digits": unbroken("7", KB100),
    "dashes": unbroken("a-", KB100),
    "mixed": unbroken("a1.-", KB100),
    "ats": unbroken("a@", KB100),
    "domain": "x@" + unbroken("x.x-", KB100),
    "decimals": unbroken("1.", KB100),
    "www": unbroken("www.", KB100),
    "cjk-quantity": unbroken("1年", KB100),
}
LONGEST_RUN = re.compile(rf"[^\s{K._MASK}]+")


def longest_run(text: str) -> int:
    return max(map(len, LONGEST_RUN.findall(text)), default=0)


class Watched:
    """A pattern that notes the longest run without a space of every text it is given."""

    def __init__(self, pattern: re.Pattern[str]):
        self.pattern, self.longest, self.calls = pattern, 0, 0

    def finditer(self, text: str):
        self.calls += 1
        self.longest = max(self.longest, longest_run(text))
        return self.pattern.finditer(text)


@pytest.mark.parametrize("name", RUNS)
def test_no_keyword_pattern_reads_a_long_run(monkeypatch, name):
    """Whatever the run, the patterns after the URLs see none longer than _MAX_RUN: their work on it is
    bounded by a constant (at most _MAX_RUN characters from each of at most _MAX_RUN starts), so the
    whole turn costs linear work."""
    watched = [(p if p is K._URL else Watched(p), w) for p, w in K._PATTERNS]
    monkeypatch.setattr(K, "_PATTERNS", tuple(watched))
    K._extract_terms.cache_clear()
    keywords = K.extract_keywords([f"user: {RUNS[name]}", "assistant: noted"])
    assert all(len(k) <= K._MAX_CHARS for page in keywords for k in page)
    spies = [p for p, _ in watched if isinstance(p, Watched)]
    assert spies and all(s.calls >= 1 and s.longest <= K._MAX_RUN for s in spies), [
        (s.pattern.pattern[:30], s.longest) for s in spies]


def test_a_long_run_is_still_read_for_words_and_a_long_url_is_taken_whole():
    words = " ".join(f"item{i}" for i in range(60)).replace(" ", ",")  # a list pasted without spaces
    url = "https://shop.example.org/" + unbroken("q=1&", 400)
    (page,) = K.candidate_terms([f"user: {words} and {url}"], limit=100)
    assert "item59" in page and "shop.example.org" in page


def interior(run: str) -> range:
    return range(1, len(run) - 1)


@pytest.mark.parametrize("run", ["a" * 2000, "a.a-" * 500, "1" * 2000, "a+b_" * 500])
def test_the_email_pattern_starts_only_where_a_run_starts(run):
    text = run + "@" + run
    assert all(K._EMAIL.match(text, i) is None for i in interior(run))
    assert K._LONG_RUN.match(text, 1) is None and K._LONG_RUN.match(text, 0).end() == len(text)


@pytest.mark.parametrize("run", ["1" * 2000, "12.5" * 500, "1" + ",000" * 500])
def test_a_cjk_quantity_starts_only_where_its_digits_start(run):
    text = run + "年"
    assert all(K._CJK_QUANTITY.match(text, i) is None for i in interior(run) if text[i - 1].isdigit())


def test_a_number_takes_at_most_six_thousands_groups():
    chain = "1" + ",000" * 2000
    for start in (0, 2, 6, 4000):
        assert re.compile(K._NUM).match(chain, start).end() - start <= 3 + 4 * 6


# -- what they find is what they found ---------------------------------------------------------------
BEFORE_NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
BEFORE_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


def before(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """A number pattern as it was before bounding: any number of thousands groups, tried from any digit."""
    return re.compile(pattern.pattern.replace(K._NUM, BEFORE_NUM).replace(r"(?<!\d)", ""), pattern.flags)


PIECES = ["1", "12", "2023", ",", ",000", ",5", ".", ".5", " ", "年", "月", "上午", "公斤", "$", "€", " dollars",
          "k ", "million", " mg", "a", "Bo", "@", "+", "-", "_", "x.com", "日"]
snippets = st.lists(st.sampled_from(PIECES), max_size=8).map("".join)  # at most six thousands groups


def spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(text)]


@settings(max_examples=examples(fast=100, full=300), deadline=None)
@given(snippets)
def test_the_number_patterns_find_what_they_found(text):
    for name in ("_MONEY", "_CJK_QUANTITY", "_QUANTITY"):
        pattern = getattr(K, name, None)
        if pattern is not None:
            assert spans(pattern, text) == spans(before(pattern), text), name


@settings(max_examples=examples(fast=100, full=300), deadline=None)
@given(snippets)
def test_the_email_pattern_finds_what_it_found(text):
    """Except an address glued to the one before it ("a@b.com+c@d.com"): the old pattern went on from
    where the first ended, inside a run; the new one starts only where a run starts."""
    found = spans(BEFORE_EMAIL, text)
    if any(s > 0 and re.match(r"[\w.+-]", text[s - 1]) for s, _ in found):
        return
    assert spans(K._EMAIL, text) == found


def test_ordinary_contacts_and_amounts_are_unchanged():
    text = ("Mail maria.chen+work@example.co.uk or call +1 (555) 123-4567 about the $1,250,000 offer, "
            "3,200 dollars, 2023年5月12日 and 12公斤; a@b.c.d, not @home.")
    assert [m.group() for m in K._EMAIL.finditer(text)] == ["maria.chen+work@example.co.uk", "a@b.c.d"]
    assert [m.group() for m in K._MONEY.finditer(text)] == ["$1,250,000", "3,200 dollars"]
    assert [m.group() for m in K._CJK_QUANTITY.finditer(text)] == ["2023年5月12日", "12公斤"]


def test_tokenizing_a_long_run_yields_its_words():
    assert tokenize_words(unbroken("ab.", 30_000)) == ["ab"] * 10_000
    assert tokenize_words("1" + ",000" * 5_000) == ["1" + "000" * 5_000]
