"""Passive detection: does the model's answer NLL tell that a needed fact is missing from its context?

If the local model were measurably less sure of its answer when the fact it needs has been paged out,
that uncertainty would be a free recall trigger. For every probe of a generated dataset, three short
contexts are built around the turn that states the answer (the 4 nearest small-talk exchanges, then the
question as the user turn):

    present  the fact's user turn as it was said
    gist     that turn replaced, in place, by its bookmark (heuristic keywords, ``[p3:allergic,peanuts]``)
    absent   the fact's exchange removed

In each, two NLLs (mean negative log-likelihood per token, nats) of an assistant reply are computed by
teacher forcing: of the correct answer ("It's peanuts."), and of the model's own greedy answer, which
is all a run-time trigger could look at (it does not know the correct answer).

How to read it: ROC AUC is the chance that a missing-fact context (gist or absent) gets a higher NLL
than a fact-present one, across probes, as a fixed threshold would have to tell them apart. 0.5 is
chance, 1.0 perfect; the best-threshold balanced accuracy is fitted on the same data, so optimistic.
The paired column says how often, for the same question, the NLL rose when the fact was removed: a
difference the model cannot see at run time, where it has only one context. Bookmarks often contain
the answer itself, so the gist is also reported over the probes whose bookmark does not state it.

    .venv/bin/python benchmarks/passive_detection.py [--n 10] [--seed 0] [--json results/passive_detection.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from localpager.backends.base import Message
from localpager.backends.llama import LlamaCppBackend, load_llama
from localpager.core.bookmarks import render_minimal
from localpager.core.keywords import extract_keywords
from localpager.core.records import Page, Probe, Transcript
from localpager.lab.synthetic import generate_dataset, mentions
from localpager.runtime.prompts import SYSTEM_PROMPT

CONDITIONS = ("present", "gist", "absent")
N_FILLER = 4  # small-talk exchanges around the fact: enough that the fact is not simply the last thing said
OWN_ANSWER_TOKENS = 32
# AUC bands for the printed verdict: below 0.65 a threshold would misfire about as often as it helps.
NO_SIGNAL, USEFUL = 0.65, 0.8


def load_scorer(model_path: str | None = None, n_ctx: int = 1024, n_threads: int = 2) -> LlamaCppBackend:
    """The chat backend with a Llama that keeps every position's logits (teacher forcing needs them).

    LlamaCppBackend has no ``logits_all`` option, so its Llama is swapped for one that has; the file is
    memory-mapped, so the second load is cheap (~0.2 s), and rendering and generation stay the backend's.
    """
    backend = LlamaCppBackend(model_path, n_ctx=n_ctx, n_threads=n_threads)
    backend._llm.close()
    backend._llm = load_llama(backend.model_path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads,
                              n_batch=min(512, n_ctx), logits_all=True)
    return backend


def answer_nll(backend: LlamaCppBackend, messages: Sequence[Message], answer: str) -> float:
    """Mean per-token NLL (nats) of ``answer`` as the assistant's reply to ``messages``, by teacher forcing.

    Only the tokens after the prefix already in the KV cache are evaluated, so scoring several answers
    to one prompt, or contexts that differ late, costs little.
    """
    llm = backend._llm
    if not llm._logits_all:
        raise ValueError("answer_nll needs a Llama loaded with logits_all=True; use load_scorer()")
    prompt = backend.render(messages)
    target = backend.tokenize(answer)
    tokens = prompt + target
    if not target or len(tokens) > backend.n_ctx:
        raise ValueError(f"need a non-empty answer and at most {backend.n_ctx} tokens, got {len(tokens)}")
    with backend.lock:
        llm.n_tokens = backend.cached_prefix(tokens)  # eval() drops the KV cache from here on
        llm.eval(tokens[llm.n_tokens:])
        logits = llm.scores[len(prompt) - 1:len(tokens) - 1].astype(np.float64)  # row i predicts token i + 1
    top = logits.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return float(np.mean(log_z - logits[np.arange(len(target)), target]))


def roc_auc(positive: Sequence[float], negative: Sequence[float]) -> float:
    """P(a positive scores higher than a negative), ties counting half: the area under the ROC curve."""
    p = np.asarray(positive, dtype=float)[:, None]
    n = np.asarray(negative, dtype=float)[None, :]
    return float(np.mean((p > n) + 0.5 * (p == n)))


def best_threshold_accuracy(positive: Sequence[float], negative: Sequence[float]) -> float:
    """The best balanced accuracy of "positive if score >= t" over every threshold t (fitted in-sample)."""
    p, n = np.asarray(positive, dtype=float), np.asarray(negative, dtype=float)
    thresholds = np.append(np.union1d(p, n), np.inf)
    return float(max(((p >= t).mean() + (n < t).mean()) / 2 for t in thresholds))


def bookmark(conv: Transcript, turn: int) -> str:
    """The bookmark the pager would write for the exchange starting at ``turn``: its heuristic keywords."""
    text = "\n".join(conv.turns[i].render() for i in (turn, turn + 1))
    keywords = extract_keywords([text], "heuristic")[0]
    return render_minimal(Page(page_id=turn // 2, first_turn=turn, last_turn=turn + 1, keywords=keywords))


def contexts(conv: Transcript, probe: Probe) -> tuple[dict[str, list[Message]], str]:
    """The three conditions' messages for ``probe``, and the gist used.

    The filler is the nearest exchanges that state no fact at all, so an older value of a corrected
    fact, or another fact, cannot stand in for the one removed.
    """
    fact = probe.evidence[0]
    stated = {t for p in conv.probes for t in p.extra.get("stated", p.evidence)}
    filler = [t for t in range(0, len(conv.turns) - 1, 2) if t not in stated]
    window = sorted(sorted(filler, key=lambda t: abs(t - fact))[:N_FILLER] + [fact])
    gist = bookmark(conv, fact)
    built = {}
    for condition in CONDITIONS:
        messages = [Message("system", SYSTEM_PROMPT)]
        for t in window:
            if t == fact and condition == "absent":
                continue
            user = gist if t == fact and condition == "gist" else conv.turns[t].text
            messages += [Message("user", user), Message("assistant", conv.turns[t + 1].text)]
        built[condition] = messages + [Message("user", probe.question)]
    return built, gist


def measure_probe(backend: LlamaCppBackend, conv: Transcript, probe: Probe) -> dict:
    """NLLs of the correct and of the model's own answer in each condition, for one probe."""
    built, gist = contexts(conv, probe)
    correct = f"It's {probe.answers[0]}."
    record = {"conversation": conv.id, "question": probe.question, "answer": probe.answers[0], "type": probe.type,
              "bookmark": gist, "gist_states_answer": mentions(gist, probe.answers)}
    for condition, messages in built.items():
        own = backend.generate(backend.render(messages), max_tokens=OWN_ANSWER_TOKENS).text.strip() or "."
        record[condition] = {
            "correct_nll": answer_nll(backend, messages, correct),
            "own_answer": own,
            "own_nll": answer_nll(backend, messages, own),
            "own_right": mentions(own, probe.answers),
        }
    return record


def separation(records: list[dict], condition: str, signal: str) -> dict:
    """How well ``signal`` NLL tells ``condition`` (fact missing) from present over ``records``."""
    missing = [r[condition][signal] for r in records]
    present = [r["present"][signal] for r in records]
    diff = np.subtract(missing, present)
    return {"n": len(records), "auc": roc_auc(missing, present), "best_threshold_accuracy":
            best_threshold_accuracy(missing, present), "mean_diff": float(diff.mean()),
            "paired_higher": float(np.mean(diff > 0))}


def summarize(records: list[dict]) -> dict:
    """Per-condition means and every present-vs-missing separation."""
    means = {c: {"correct_nll": float(np.mean([r[c]["correct_nll"] for r in records])),
                 "own_nll": float(np.mean([r[c]["own_nll"] for r in records])),
                 "own_right": float(np.mean([r[c]["own_right"] for r in records]))} for c in CONDITIONS}
    subsets = {"gist": records, "absent": records,
               "gist_without_answer": [r for r in records if not r["gist_states_answer"]]}
    sep = {f"{name}/{signal}": separation(subset, name.split("_")[0], signal)
           for signal in ("correct_nll", "own_nll") for name, subset in subsets.items() if subset}
    return {"probes": len(records), "means": means, "separation": sep}


def verdict(auc: float) -> str:
    """The AUC in words, so the printed conclusion cannot oversell a weak signal."""
    if auc >= USEFUL:
        return "yes"
    if auc >= NO_SIGNAL:
        return "weakly"
    return "no: about chance" if auc > 1 - NO_SIGNAL else "no: the NLL is lower when the fact is missing"


def report(summary: dict) -> str:
    """The Markdown tables and an honest one-line conclusion."""
    lines = [f"{summary['probes']} probes", "",
             "| condition | NLL of correct answer | NLL of own answer | own answer right |", "|---|---|---|---|"]
    for c, m in summary["means"].items():
        lines.append(f"| {c} | {m['correct_nll']:.3f} | {m['own_nll']:.3f} | {m['own_right']:.0%} |")
    lines += ["", "| missing vs present | signal | probes | AUC | best-threshold acc. | mean diff | paired higher |",
              "|---|---|---|---|---|---|---|"]
    for key, s in summary["separation"].items():
        name, signal = key.split("/")
        lines.append(f"| {name} | {signal} | {s['n']} | {s['auc']:.2f} | {s['best_threshold_accuracy']:.2f} | "
                     f"{s['mean_diff']:+.3f} | {s['paired_higher']:.0%} |")
    sep = summary["separation"]
    lines += ["", f"Can the own-answer NLL (what is known at run time) tell that the fact is missing? "
              f"absent: {verdict(sep['absent/own_nll']['auc'])} (AUC {sep['absent/own_nll']['auc']:.2f}); "
              f"gist: {verdict(sep['gist/own_nll']['auc'])} (AUC {sep['gist/own_nll']['auc']:.2f}). "
              f"With the correct answer known: absent AUC {sep['absent/correct_nll']['auc']:.2f}, "
              f"gist AUC {sep['gist/correct_nll']['auc']:.2f}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10, help="generated conversations (all their probes are used)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the summary and every probe's record here")
    parser.add_argument("--model", help="GGUF file (default: the manifest's chat model)")
    args = parser.parse_args()
    start = time.perf_counter()
    backend = load_scorer(args.model)
    records = []
    for conv in generate_dataset(args.n, seed=args.seed):
        for probe in conv.probes:
            records.append(measure_probe(backend, conv, probe))
            print(f"{conv.id} probe {len(records)}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    summary = summarize(records)
    summary["seconds"] = round(time.perf_counter() - start, 1)
    print(report(summary))
    print(f"\n{summary['seconds']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        run = {"n": args.n, "seed": args.seed, "model": backend.model_name}
        args.json.write_text(json.dumps({**run, **summary, "records": records}, indent=1))


if __name__ == "__main__":
    main()
