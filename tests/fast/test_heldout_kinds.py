"""The held-out kind set (lab/data/kinds_heldout.json): the generator plants its kinds, in its own words, and
nothing it generates for the trained kinds changes."""

from __future__ import annotations

import re

import pytest

from localpager.core.records import GENERAL_PROBE
from localpager.lab.synthetic import (
    ABSENT_PROBE,
    FACT_KINDS,
    FACT_TYPES,
    generate_conversation,
    generate_dataset,
    mentions,
    set_kinds,
)
from localpager.lab.synthetic_data import KIND_SETS, kind_set, load


@pytest.fixture(scope="module")
def heldout():
    return generate_dataset(24, seed=5, kinds="heldout", questions="both", absent=4)


def test_the_file_has_enough_new_kinds_each_fully_worded():
    kinds, pools, general = kind_set("heldout")
    assert len(kinds) >= 12 and len(general) >= 12
    assert not set(kinds) & {k.name for k in FACT_KINDS} and not set(kinds) & set(FACT_TYPES)
    assert not set(pools) & set(load("facts")["word_pools"])
    for name, spec in kinds.items():
        assert spec["value"][0] == "pool" and spec["value"][1] in pools, name
        assert len(spec["says"]) >= 4 and len(spec["updates"]) >= 2, name
        assert len(spec["asks"]) >= 3 and len(spec["implicit"]) >= 3, name
        for template in spec["says"] + spec["updates"]:
            assert template.count("{v}") == 1 and "{" not in template.replace("{v}", ""), template
        for question in spec["asks"] + spec["implicit"]:
            assert not re.search(r"[\d{}]", question), question


def test_generated_conversations_plant_held_out_kinds_only(heldout):
    names = {k.name for k in set_kinds("heldout")}
    planted = set()
    for conv in heldout:
        assert conv.meta["kinds"] == "heldout"
        facts = [p for p in conv.probes if p.type not in (GENERAL_PROBE, ABSENT_PROBE)]
        assert 12 <= len(facts) <= 16  # 6-8 facts, an explicit and an implicit question each
        by_index = {t.index: t for t in conv.turns}
        for probe in facts:
            assert probe.type == probe.extra["kind"] and probe.type in names
            planted.add(probe.type)
            # the newest statement says the answer, and no other turn does
            assert mentions(by_index[probe.evidence[0]].text, probe.answers)
            others = [t for t in conv.turns if t.index not in probe.extra["stated"]]
            assert not any(mentions(t.text, probe.answers) for t in others), probe.question
        general = [p for p in conv.probes if p.type == GENERAL_PROBE]
        assert len(general) == 6 and set(p.question for p in general) <= set(kind_set("heldout")[2])
        absent = [p for p in conv.probes if p.type == ABSENT_PROBE]
        assert len(absent) == 4 and not {p.extra["kind"] for p in absent} & {p.type for p in facts}
    assert planted == names  # every kind is planted somewhere
    assert any(p.extra["old_answers"] for conv in heldout for p in conv.probes if p.extra.get("old_answers"))


def test_held_out_kinds_are_seeded_and_leave_the_trained_kinds_alone():
    assert generate_conversation(11, kinds="heldout") == generate_conversation(11, kinds="heldout")
    trained = generate_conversation(11)
    assert trained == generate_conversation(11, kinds="trained") and "kinds" not in trained.meta
    assert {p.type for p in trained.probes} <= set(FACT_TYPES) | {GENERAL_PROBE}
    assert KIND_SETS == ("trained", "heldout")
    with pytest.raises(ValueError, match="own words"):
        generate_conversation(11, kinds="heldout", phrasing="dev")
    with pytest.raises(ValueError, match="kinds must be one of"):
        generate_conversation(11, kinds="other")
