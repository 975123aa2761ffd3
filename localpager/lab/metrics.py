"""Scoring answers: containment for generated probes, LoCoMo's own token F1 for LoCoMo.

LoCoMo's scorer (task_eval/evaluation.py) normalises (lower case, no punctuation, no articles),
Porter-stems tokens, and scores by category: multi-hop (1) by partial F1 over comma-separated
sub-answers, open-domain (3) against the part of the answer before ';', adversarial (5) as right
when the reply says the thing was not mentioned. Here tokens are stemmed with a small suffix
stripper (``f1_stem``) instead of NLTK's Porter stemmer, so scores can differ slightly from the
paper's.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Sequence

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
# An abstention, in a model's words or the product's own (``runtime.prompts.NOT_REMEMBERED``,
# ``NOT_IN_WHAT_I_FOUND``: "I don't remember that: ...")
_NOT_MENTIONED = ("not mentioned", "no information available", "no information", "not available",
                  "don't know", "do not know", "never mentioned", "wasn't mentioned", "was not mentioned",
                  "don't remember that")


def normalize(text: str) -> str:
    text = str(text).lower().replace(",", "")
    text = text.translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(output: str, answers: Sequence[str]) -> bool:
    """Whether any accepted answer appears in ``output`` as whole words, after normalising both."""
    haystack = f" {normalize(output)} "
    return any(f" {normalize(a)} " in haystack for a in answers if normalize(a))


def f1_stem(word: str) -> str:
    """The answer scorer's stemmer (``token_f1``): strips the first of -ing, -edly, -ed, -ly, -es, -s
    that leaves three letters.

    It is not ``core.text.light_stem`` on purpose: it stands in for the Porter stemming of LoCoMo's
    scorer and strips suffixes ``light_stem`` keeps (-ly, -es), while ``light_stem`` folds -ies and
    doubled consonants. Every F1 figure reported so far was computed with this one, so it stays as it is.
    """
    for suffix in ("ing", "edly", "ed", "ly", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def token_f1(prediction: str, answer: str) -> float:
    pred = [f1_stem(w) for w in normalize(prediction).split()]
    gold = [f1_stem(w) for w in normalize(answer).split()]
    common = sum((Counter(pred) & Counter(gold)).values())
    if not pred or not gold or common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def partial_f1(prediction: str, answer: str) -> float:
    """Multi-hop: each comma-separated part of the answer scored by its best-matching predicted part."""
    preds = [p for p in prediction.split(",") if p.strip()] or [prediction]
    golds = [g for g in str(answer).split(",") if g.strip()] or [str(answer)]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def says_not_mentioned(output: str) -> bool:
    text = output.lower()
    return any(phrase in text for phrase in _NOT_MENTIONED)


def locomo_score(output: str, answer: str, category: int) -> float:
    if category == 5:
        return float(says_not_mentioned(output))
    if category == 1:
        return partial_f1(output, answer)
    if category == 3:
        answer = str(answer).split(";")[0]
    return token_f1(output, answer)


def score_answer(output: str, answers: Sequence[str], extra: dict | None = None) -> float:
    """A probe's score in [0, 1]: LoCoMo F1 when the probe has a LoCoMo category, containment otherwise."""
    category = (extra or {}).get("category")
    if category is not None:
        return locomo_score(output, answers[0] if answers else "", int(category))
    return float(contains_answer(output, answers))
