"""The language's words as data (``core/data/english.json``) and their one loader (``core.lexicon``)."""

from __future__ import annotations

import re
from pathlib import Path

from localpager.core import answer_types, facts, lexicon

CORE = Path(lexicon.__file__).parent


def test_every_entry_says_what_it_matches_and_compiles() -> None:
    for name, entry in lexicon.entries().items():
        assert entry.get("about"), f"{name}: no 'about'"
        assert "words" in entry or "pattern" in entry, f"{name}: neither words nor a pattern"
        assert set(entry) <= {"about", "words", "pattern", "case_sensitive"}, f"{name}: {sorted(entry)}"
        assert all(isinstance(w, str) and w for w in entry.get("words", ())), f"{name}: an empty word"
        if name != "generic":  # a list of words, not a pattern
            assert isinstance(lexicon.pattern(name), re.Pattern)


def test_every_entry_is_used_and_every_name_in_a_pattern_is_an_entry() -> None:
    entries = lexicon.entries()
    named: set[str] = set()
    for name, entry in entries.items():
        pattern = entry.get("pattern", "")
        text = "|".join(entry.get("words", ())) + "".join(pattern if isinstance(pattern, list) else [pattern])
        for ref in re.findall(r"<([a-z][a-z0-9_]*)>", text):
            assert ref == "words" and "words" in entry or ref in entries, f"{name} names <{ref}>"
            named.add(ref)
    readers = ("facts.py", "answer_types.py", "changes.py", "claims.py", "text.py", "syntax.py", "../retrieval/gate.py",
               "../retrieval/facts.py", "../runtime/grounding.py")
    source = "".join((CORE / f).read_text(encoding="utf-8") for f in readers)
    by_code = {n for n in entries if f'"{n}"' in source or n.split("_")[0] in ("cue", "asks", "states")}
    assert set(entries) - named - by_code == set()


def test_patterns_are_built_from_the_words() -> None:
    assert lexicon.pattern("first_person").pattern.startswith(r"\b(?:i|i'm|")
    assert lexicon.pattern("first_person").flags & re.I
    assert not lexicon.pattern("value").flags & re.I  # case_sensitive
    assert "(?:never|no longer|" in lexicon.pattern("cue_avoid").pattern  # another entry named in it
    assert facts._LEAD_IN.sub("", "Oh, by the way, I'm vegan.") == "I'm vegan."
    assert facts._CUES[0] == ("avoid", lexicon.pattern("cue_avoid"))
    assert answer_types.asked_types("How much can I spend?") >= {"money"}
    assert answer_types.stated_types("Dr Ames, 7pm on March 6") >= {"person", "time", "date"}


def test_how_a_message_asks_is_read_from_the_data_file_not_from_regex_literals() -> None:
    """Issue 38, item 6: the recall gate's and the fact model's word lists are entries of the data file."""
    from localpager.retrieval import facts as fact_model, gate

    assert gate._MEMORY_CUE is lexicon.pattern("memory_cue") and fact_model._NEED is lexicon.pattern("own_sake")
    for module in (gate, fact_model):
        assert "re.compile(" not in Path(module.__file__).read_text(encoding="utf-8")
    assert gate.message_features("Remind me: what's my locker number?").memory_cue == 1.0
    assert gate.message_features("How do I boil an egg?").general_form == 1.0
