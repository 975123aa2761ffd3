"""The kind sets of new kinds, held-out (lab/data/kinds_heldout.json, the check set) and dev (kinds_dev.json, which
may be tuned on): the generator plants their kinds, in their own words; the dev set shares no kind or word pool
with the held-out or the trained kinds; and nothing it generates for the trained kinds changes."""

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


NEW_SETS = ("heldout", "dev")


@pytest.fixture(scope="module", params=NEW_SETS)
def generated(request):
    return request.param, generate_dataset(24, seed=5, kinds=request.param, questions="both", absent=4)


@pytest.mark.parametrize("name", NEW_SETS)
def test_the_file_has_enough_new_kinds_each_fully_worded(name):
    kinds, pools, general = kind_set(name)
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


def test_generated_conversations_plant_the_set_s_kinds_only(generated):
    name, convs = generated
    names = {k.name for k in set_kinds(name)}
    planted = set()
    for conv in convs:
        assert conv.meta["kinds"] == name
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
        assert len(general) == 6 and set(p.question for p in general) <= set(kind_set(name)[2])
        absent = [p for p in conv.probes if p.type == ABSENT_PROBE]
        assert len(absent) == 4 and not {p.extra["kind"] for p in absent} & {p.type for p in facts}
    assert planted == names  # every kind is planted somewhere
    asked = {p.type for conv in convs for p in conv.probes if p.type in names}
    implicit = {p.type for conv in convs for p in conv.probes if p.extra.get("style") == "implicit"}
    assert asked == implicit == names  # and asked about, explicitly and implicitly
    assert any(p.extra["old_answers"] for conv in convs for p in conv.probes if p.extra.get("old_answers"))


def _answers(pools) -> list[set[str]]:
    """Each word pool's accepted answers, lower-cased, as a set."""
    return [{a.lower() for row in rows for a in row} for rows in pools.values()]


def _templates(kinds) -> set[str]:
    return {t for spec in kinds.values() for key in ("says", "updates", "asks", "implicit") for t in spec[key]}


@pytest.mark.parametrize("name", ["dev", "train"])
def test_the_sets_fitted_on_are_apart_from_the_held_out_and_trained_kinds(name):
    """Tuning on the dev set, or fitting on the train set, must not be tuning on the check set: no kind name,
    pool name or pool (its values as a set) of theirs is the held-out set's, facts.json's or the other's, no value
    is one of theirs, and no template or general question is the held-out set's."""
    own_kinds, own_pools, own_general = kind_set(name)
    other_kinds, other_pools, _ = kind_set("train" if name == "dev" else "dev")
    held_kinds, held_pools, held_general = kind_set("heldout")
    trained_pools = load("facts")["word_pools"]
    assert not set(own_kinds) & (set(held_kinds) | set(other_kinds) | {k.name for k in FACT_KINDS} | set(FACT_TYPES))
    assert not set(own_pools) & (set(held_pools) | set(other_pools) | set(trained_pools))
    others = _answers(held_pools) + _answers(trained_pools) + _answers(other_pools)
    for pool in _answers(own_pools):
        assert pool not in others and not pool & set().union(*others), sorted(pool)
    assert not _templates(own_kinds) & _templates(held_kinds) and not set(own_general) & set(held_general)


@pytest.mark.parametrize("name", ["dev", "train"])
def test_no_template_names_a_value_of_its_set(name):
    """A statement's own words name no value of the set (so every draw can be clear of the other facts), and no
    question names an answer of its own kind."""
    kinds, pools, _ = kind_set(name)
    every = [a for rows in pools.values() for row in rows for a in row]
    for kind, spec in kinds.items():
        own = [a for row in pools[spec["value"][1]] for a in row]
        for template in spec["says"] + spec["updates"]:
            assert not mentions(template.replace("{v}", ""), every), (kind, template)
        for question in spec["asks"] + spec["implicit"]:
            assert not mentions(question, own), (kind, question)


def test_held_out_kinds_are_seeded_and_leave_the_trained_kinds_alone():
    assert generate_conversation(11, kinds="heldout") == generate_conversation(11, kinds="heldout")
    trained = generate_conversation(11)
    assert trained == generate_conversation(11, kinds="trained") and "kinds" not in trained.meta
    assert {p.type for p in trained.probes} <= set(FACT_TYPES) | {GENERAL_PROBE}
    assert KIND_SETS == ("trained", "heldout", "dev", "train")
    assert generate_conversation(11, kinds="dev") == generate_conversation(11, kinds="dev")
    assert generate_conversation(11, kinds="train") == generate_conversation(11, kinds="train")
    assert generate_conversation(11, kinds="dev") != generate_conversation(11, kinds="heldout")
    with pytest.raises(ValueError, match="own words"):
        generate_conversation(11, kinds="heldout", phrasing="dev")
    with pytest.raises(ValueError, match="kinds must be one of"):
        generate_conversation(11, kinds="other")
