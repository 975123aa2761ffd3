"""The words the synthetic generator (``synthetic.py``) draws from: JSON files under ``data/``.

Every file has an ``"about"`` key: free text, a list of lines, saying what the file is and how it was written
(never read by the code). Lists keep their order: the generator draws from them by position, so reordering a
list changes what a seed generates.

``phrasing_<name>.json``, one per phrasing set (``--phrasing <name>``, a member of ``choices.Phrasing``), the
words facts are stated, corrected and asked in, and the general questions:

- ``"kinds"``: every fact kind of ``facts.json`` by name, each with four lists of templates:
  ``"says"`` (statements of the fact), ``"asks"`` (questions about it), ``"updates"`` (corrections of it;
  ``[]`` for the kinds the tuning set never corrects) and ``"implicit"`` (questions that depend on the fact
  without asking about the past: a present need or plan in the first person whose good answer names the
  value, "I'm packing snacks for a long flight tomorrow. Anything I should stay away from?"; never "did I
  say", "remind me", "again", "earlier"... and never the kind's obvious keyword). Statements and corrections
  hold ``{v}`` (the value) once, plus the fields of the kind's value maker: ``{day}`` (``clock``), ``{dose}``
  (``drug``), ``{phone}`` and ``{email}`` (``person``); they are filled by ``str.format``, so a literal brace
  is written twice. Questions (asks and implicit) are used as written: no field, and no digit, so they never
  contain their answer.
- ``"general"``: questions that need nothing said before, as probes of type ``general``, grouped under
  headings of your choosing (``"near allergies": [...]``); the groups are only for the reader and are read
  as one list, in order.

A new set is a new file plus a member of ``choices.Phrasing`` with the same name; ``tests/fast/test_synthetic.py``
checks that every set has every kind with the four lists, with corrections where the tuning set has them.

``facts.json``, what the facts are:

- ``"kinds"``: name -> ``{"type": ..., "value": [maker, arguments...]}``: the fact type (one of
  ``synthetic.FACT_TYPES``) and the value maker that draws its value (``synthetic.VALUE_MAKERS``), with the
  maker's arguments: ``["pool", <word pool>]``, ``["drug", <word pool>]`` (the drug and a dose),
  ``["money", low, high, step]``, or ``[maker]`` alone for ``date``, ``clock``, ``person``, ``units``,
  ``room``, ``locker``, ``flight``, ``spot`` and ``code`` (a four-digit number). The order of the kinds is
  ``synthetic.FACT_KINDS``'s.
- ``"word_pools"``: name -> list of alternatives; the first word of each is written in the conversation,
  all of them are accepted answers.
- ``"months"``, ``"weekdays"``, ``"first_names"``, ``"last_names"``, ``"mail_domains"``, ``"airlines"``,
  ``"doses"`` (lists) and ``"parking_levels"`` (a string of letters): what the other makers draw from.

``kinds_<name>.json``, a kind set (``--kinds <name>``, one of ``KIND_SETS`` but ``trained``): fact kinds of its
own, never those of ``facts.json``, each its own fact type and with its own words, for measuring how the memory
does on kinds nothing was written or tuned for: ``heldout`` (the check set, never tuned on), ``dev`` (a
development set of other kinds, none of the held-out ones, that settings may be tuned on) and ``train`` (more
kinds, none of either's, written without reading the held-out set, that models are fitted on):

- ``"kinds"``: name -> ``{"value": [maker, arguments...], "says", "asks", "updates", "implicit"}``: the value
  maker as in ``facts.json`` (``["pool", <word pool>]`` draws from this file's own pools) and the four template
  lists as in a phrasing set (every kind has corrections).
- ``"word_pools"``: as ``facts.json``'s, with names of their own; ``"general"``: as a phrasing set's.

``filler.json``, the small talk around the facts:

- ``"lead_ins"``: said before a statement (``""``: none); ``"acks"`` and ``"update_acks"``: the assistant's
  reply to a statement and to a correction.
- ``"topics"``: name -> ``{"slots": {field: [values...]}, "exchanges": [{"user": ..., "assistant": ...}]}``;
  exchanges are drawn a few at a time from one topic, their ``{field}`` filled from ``slots`` (which a topic
  without fields leaves out).
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

TEMPLATE_KEYS = ("says", "asks", "updates", "implicit")
TRAINED_KINDS = "trained"  # the kind set of facts.json, worded by a phrasing set
KIND_SETS = (TRAINED_KINDS, "heldout", "dev", "train")
# "heldout": kinds_heldout.json, written apart and never tuned on (the check set); "dev": kinds_dev.json, other
# new kinds written apart from both, which settings may be tuned on to generalise to kinds nobody wrote cues for;
# "train": kinds_train.json, more such kinds, written apart from the held-out ones, that models are fitted on


@cache
def load(name: str) -> dict[str, Any]:
    """``data/<name>.json`` with its lists made tuples; read once per process, shared: do not modify it."""
    text = files(__package__).joinpath("data").joinpath(f"{name}.json").read_text(encoding="utf-8")
    return _frozen(json.loads(text))


@cache
def phrasing_set(name: str) -> tuple[dict[str, dict[str, tuple[str, ...]]], tuple[str, ...]]:
    """The templates of phrasing set ``name`` by fact kind, and its general questions in one tuple."""
    data = load(f"phrasing_{name}")
    for kind, templates in data["kinds"].items():
        if set(templates) != set(TEMPLATE_KEYS):
            raise ValueError(f"phrasing_{name}.json: kind {kind!r} has {sorted(templates)}, "
                             f"wants exactly {list(TEMPLATE_KEYS)}")
    return data["kinds"], tuple(q for group in data["general"].values() for q in group)


@cache
def kind_set(name: str) -> tuple[dict[str, dict[str, tuple]], dict[str, tuple], tuple[str, ...]]:
    """Kind set ``name``'s kinds (value maker and templates), word pools, and general questions in one tuple."""
    if name not in KIND_SETS or name == TRAINED_KINDS:
        raise ValueError(f"kind set {name!r}: not one of {[k for k in KIND_SETS if k != TRAINED_KINDS]}")
    data = load(f"kinds_{name}")
    for kind, spec in data["kinds"].items():
        if set(spec) != {"value", *TEMPLATE_KEYS} or not all(spec[key] for key in TEMPLATE_KEYS):
            raise ValueError(f"kinds_{name}.json: kind {kind!r} has {sorted(spec)}, wants 'value' and a "
                             f"non-empty {list(TEMPLATE_KEYS)}")
    return data["kinds"], data["word_pools"], tuple(q for group in data["general"].values() for q in group)


def _frozen(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return {k: _frozen(v) for k, v in value.items()}
    return value
