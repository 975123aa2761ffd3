"""The per-turn trace: what the pager showed, what the model decided, what it cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

STAGES = (
    "tokenize",
    "prefill",
    "decision_decode",
    "recall_fetch",
    "rerank",
    "injection_prefill",
    "answer_decode",
)


@dataclass
class Candidate:
    """A page considered for injection, with its score and why it was or wasn't injected."""

    page_id: int
    score: float
    similarity: float | None = None
    named_by_model: bool = False
    injected: bool = False
    reason: str = ""


@dataclass
class Citation:
    """A recalled turn shown to the model for this answer, so an app can show "from memory: …" beside it.

    ``used``: the answer shares a content word with the turn (what the answer most likely drew on)."""

    page_id: int
    turn: int
    text: str
    speaker: str
    time: str | None = None
    label: str = ""  # "latest" or "changed later" when the turn states something that changed
    used: bool = False


@dataclass
class Trace:
    turn: int
    question: str
    bookmarks: list[str] = field(default_factory=list)
    decision: str = "answer"  # "recall" or "answer"
    # what started the recall: "retrieval" (the ranking of evicted turns), "model" (it asked), "forced"
    # (recall mode always), "selector" (recall mode selector) or "none"
    trigger: str = "none"
    model_page_ids: list[int] = field(default_factory=list)
    injected_page_ids: list[int] = field(default_factory=list)
    injected_turns: list[int] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    rounds: int = 0
    answer: str = ""
    citations: list[Citation] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "evaluated": 0, "reused": 0, "generated": 0})
    timings_ms: dict[str, float] = field(default_factory=lambda: {s: 0.0 for s in STAGES})

    def add_tokens(self, evaluated: int, reused: int, generated: int, prompt: int) -> None:
        self.tokens["evaluated"] += evaluated
        self.tokens["reused"] += reused
        self.tokens["generated"] += generated
        self.tokens["prompt"] = max(self.tokens["prompt"], prompt)

    def cite(self, answer: str) -> None:
        """Mark the citations whose content words the answer repeats."""
        from .text import content_words

        said = set(content_words(answer))
        for c in self.citations:
            c.used = bool(said.intersection(content_words(c.text)))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["timings_ms"] = {k: round(v, 2) for k, v in self.timings_ms.items()}
        data["timings_ms"]["total"] = round(sum(self.timings_ms.values()), 2)
        return data


def format_trace(data: dict[str, Any]) -> str:
    """A few readable lines for one stored trace."""
    t = data["timings_ms"]
    tok = data["tokens"]
    lines = [
        f"turn {data['turn']}: {data['question'][:70]!r}",
        f"  decision {data['decision']} (trigger {data.get('trigger', 'model')}); model named "
        f"{data['model_page_ids'] or '-'}; injected {data['injected_page_ids'] or '-'}",
        f"  tokens: prompt {tok['prompt']}, evaluated {tok['evaluated']}, reused {tok['reused']}, "
        f"generated {tok['generated']}",
        "  ms: " + ", ".join(f"{k} {v:.0f}" for k, v in t.items() if v) ,
    ]
    for c in data.get("candidates", []):
        lines.append(
            f"  candidate p{c['page_id']}: score {c['score']:.3f}"
            f"{' (named)' if c['named_by_model'] else ''} -> {'injected' if c['injected'] else 'skipped'}"
            f"{': ' + c['reason'] if c['reason'] else ''}"
        )
    lines.append(f"  answer: {data['answer'][:200]!r}")
    lines += [f"  {line}" for line in citation_lines(data.get("citations", []))]
    return "\n".join(lines)


def citation_lines(citations: list[dict[str, Any]]) -> list[str]:
    """``from memory: p3 turn 54 [8 May, 2023] Caroline: …`` for each cited turn the answer used (or all,
    if it used none visibly)."""
    shown = [c for c in citations if c.get("used")] or citations
    lines = []
    for c in shown:
        when = f" [{c['time']}]" if c.get("time") else ""
        label = f" ({c['label']})" if c.get("label") else ""
        lines.append(f"from memory: p{c['page_id']} turn {c['turn']}{when} {c['speaker']}: {c['text'][:160]}{label}")
    return lines
