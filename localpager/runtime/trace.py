"""The per-turn trace: what the pager showed, what the model decided, what it cost."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from ..core.choices import choose
from .choices import Fired

STAGES = (
    "tokenize",
    "prefill",
    "decision_decode",
    "recall_fetch",
    "rerank",
    "injection_prefill",
    "answer_decode",
)


class Pass(StrEnum):
    """The model's passes over a turn, each counted in ``Trace.tokens``."""

    DECISION = "decision"  # the constrained first output on the chat's context (once, or once an inline round)
    ANSWER = "answer"  # the answer (continuing on the chat's context, or in a focused prompt on the side context)


class Timings(dict):
    """Milliseconds spent in each of ``STAGES``; ``timings["total"]`` (and ``.total``) is their sum, always
    current, so the library and the JSON (``Trace.to_dict``) report the same total."""

    @property
    def total(self) -> float:
        return sum(dict.values(self))

    def __getitem__(self, key: str) -> float:
        return self.total if key == "total" else dict.__getitem__(self, key)

    def get(self, key: str, default=None):
        return self.total if key == "total" else dict.get(self, key, default)

    def __setitem__(self, key: str, value: float) -> None:
        if key == "total":
            raise KeyError("total is the sum of the stages; set a stage")
        dict.__setitem__(self, key, value)


def _new_tokens() -> dict[str, Any]:
    counts = {"prompt": 0, "evaluated": 0, "reused": 0, "generated": 0}
    return {**counts, **{name.value: dict(counts) for name in Pass}}


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

    ``used``: the answer shares a content word with the turn (what the answer most likely drew on);
    ``conversation``: the user's other conversation the turn is in (its ``page_id`` is None then), or None: this
    one."""

    page_id: int | None
    turn: int
    text: str
    speaker: str
    time: str | None = None
    label: str = ""  # "latest" or "changed later" when the turn states something that changed
    used: bool = False
    conversation: str | None = None


@dataclass
class Trace:
    """What one turn did, as ``ask`` returns and the store keeps it.

    ``tokens``, per pass (``tokens["decision"]``, ``tokens["answer"]``; see ``Pass``): ``prompt`` is the
    tokens the pass generated after, ``evaluated`` those run through the model, ``reused`` those taken from
    that context's KV cache (``evaluated + reused == prompt``, so ``reused`` never exceeds ``prompt``), and
    ``generated`` the tokens sampled; a pass that ran more than once (inline rounds) sums its runs. At the top
    level, ``evaluated``, ``reused`` and ``generated`` are the sums over the passes (what the turn cost), and
    ``prompt`` is the chat's own prompt this turn, whether or not a pass read it (a focused answer reads only
    its own prompt, on the side context): compare ``reused`` with ``prompt`` within a pass, not across.
    """

    turn: int
    question: str
    bookmarks: list[str] = field(default_factory=list)
    # "answer" (from the chat's prompt), "recall" (from recalled turns), "fact" (from standing facts), "unknown"
    # (nothing recalled answers it: not remembered) or "overview" (what is remembered, listed)
    decision: str = "answer"
    # what started the recall (a ``Fired``): the trigger that fired, "gate" or "question" (as the setting
    # ``RerankSettings.trigger`` names it), "model" (it asked), "forced" (recall mode always), "selector" (a
    # selector's rule of its own: the lab's baselines) or "none"
    trigger: Fired = Fired.NONE
    # the recall gate's verdict (trigger "gate"): whether memory is relevant, its probability and what it saw
    gate: dict[str, Any] | None = None
    # the standing facts the prompt's prefix showed, and the ones judged to bear on the question (given to the
    # answer: id, turn, text, probability)
    facts_shown: list[int] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    # the relevance floor's verdict on what a recall found (below it: "unknown")
    answerable: dict[str, Any] | None = None
    # an answer about the user checked against what it was shown (``runtime.grounding``): a value nothing shown
    # holds makes it "unknown"
    grounding: dict[str, Any] | None = None
    model_page_ids: list[int] = field(default_factory=list)
    injected_page_ids: list[int] = field(default_factory=list)
    injected_turns: list[int] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    rounds: int = 0
    answer: str = ""
    # why the answer's generation ended: "eos", "length" (its max tokens cut it), "grammar" or "caller"
    stopped: str = ""
    # "regenerated": the answer came out word for word one of the conversation's last replies (to other questions)
    # and was generated again with a penalty on repeated tokens (``runtime.guard``); "sent again": so did that one;
    # "quote opening dropped": it still opened as a fact answer; "verdict dropped": it went on into "I don't remember
    # that" and was ended where that began
    repeated: str = ""
    citations: list[Citation] = field(default_factory=list)
    tokens: dict[str, Any] = field(default_factory=_new_tokens)
    timings_ms: Timings = field(default_factory=lambda: Timings({s: 0.0 for s in STAGES}))

    def add_tokens(self, evaluated: int, reused: int, generated: int, prompt: int, *, kind: str) -> None:
        """Count one generation of pass ``kind`` (a ``Pass``) from a prompt of ``prompt`` tokens.

        A backend that reports fewer prompt tokens than it evaluated and reused (or none) is taken at its
        evaluated plus reused, so a pass never reuses more than its prompt."""
        done = self.tokens[choose(Pass, kind, "pass").value]
        done["prompt"] += max(prompt, evaluated + reused)
        for key, n in (("evaluated", evaluated), ("reused", reused), ("generated", generated)):
            done[key] += n
            self.tokens[key] += n

    @property
    def total_ms(self) -> float:
        """The time of every stage together."""
        return self.timings_ms.total

    def cite(self, answer: str) -> None:
        """Mark the citations whose content words the answer repeats."""
        from ..core.text import content_words

        said = set(content_words(answer))
        for c in self.citations:
            c.used = bool(said.intersection(content_words(c.text)))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["timings_ms"] = {k: round(v, 2) for k, v in self.timings_ms.items()}
        data["timings_ms"]["total"] = round(self.timings_ms.total, 2)
        return data


def format_trace(data: dict[str, Any]) -> str:
    """A few readable lines for one stored trace."""
    t = data["timings_ms"]
    tok = data["tokens"]
    lines = [
        f"turn {data['turn']}: {data['question'][:70]!r}",
        f"  decision {data['decision']} (trigger {data.get('trigger', 'model')}); model named "
        f"{data['model_page_ids'] or '-'}; injected {data['injected_page_ids'] or '-'}",
        *([f"  gate: memory {'relevant' if g['recall'] else 'not relevant'} (p {g['probability']:.2f}, "
           f"threshold {g['threshold']:.2f})"
           + (f"; messages like it needed no fact ({g['needed']:.2f})" if g.get("needed") is not None else "")]
          if (g := data.get("gate")) else []),
        *([f"  standing fact {f['fact_id']} (turn {f['turn']}, p {f['probability']:.2f}): {f['text'][:100]}"
           for f in data.get("facts", [])]),
        *([f"  floor: {'answered' if a['answer'] else 'not remembered'} (p {a['probability']:.2f}, threshold "
           f"{a['threshold']:.2f})"] if (a := data.get("answerable")) else []),
        *([f"  grounding: {'every value shown' if g['grounded'] else 'not remembered: it stated '}"
           + ", ".join(g["unsupported"])] if (g := data.get("grounding")) else []),
        f"  tokens: prompt {tok['prompt']}, evaluated {tok['evaluated']}, reused {tok['reused']}, "
        f"generated {tok['generated']}"
        + "".join(f"; {kind} pass: prompt {p['prompt']}, evaluated {p['evaluated']}, reused {p['reused']}"
                  for kind in Pass if (p := tok.get(kind)) and p.get("prompt")),
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
        where = f"{c['conversation']} turn" if c.get("conversation") else f"p{c['page_id']} turn"
        lines.append(f"from memory: {where} {c['turn']}{when} {c['speaker']}: {c['text'][:160]}{label}")
    return lines
