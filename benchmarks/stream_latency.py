"""Time to first streamed text against the whole answer, on the default model, in process.

    LOCALPAGER_THREADS=1 .venv/bin/python benchmarks/stream_latency.py [--questions 10] [--json FILE]

One conversation holds a few statements; each question is answered with ``ask(on_text=...)`` as
``localpager chat`` and the server's SSE stream it. Every answer is watched by two repetition guards fed
the same model text at the same moments: the real one (it streams words as soon as no repeat can cut
them) and a shadow that releases text only at sentence breaks, as the guard did before it streamed by
the word. Reported per guard: time from the question to the first streamed text, its share of the
whole answer time, and the model's own first text (the floor for both).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server_load import STATEMENTS as SERVER_STATEMENTS  # noqa: E402  (beside this script)

from localpager.runtime import recall as runtime_module  # noqa: E402
from localpager.runtime.guard import RepetitionGuard  # noqa: E402

STATEMENTS = SERVER_STATEMENTS[:6]  # the server benchmark's facts, so both measure the same conversations
QUESTIONS = [
    "Which snack should I avoid?",
    "Where did my sister move, and why?",
    "What keeps dropping on Saturdays?",
    "What colour is the fence now?",
    "When are my piano lessons?",
    "How much can I spend on the kitchen?",
    "Tell me about my week.",
    "Can you suggest a dinner I could cook tonight?",
    "What should I pack for a trip to Lisbon?",
    "Explain how Wi-Fi works in simple terms.",
    "Give me three tips for learning the piano.",
    "What is a good name for a grey cat?",
]


class SentenceGuard(RepetitionGuard):
    """The same stop decisions, text released only at sentence breaks (the guard before word streaming)."""

    def _safe(self) -> int:
        return self._done


class Clock:
    def __init__(self):
        self.start = time.perf_counter()
        self.first: dict[str, float] = {}

    def mark(self, what: str):
        def on_text(piece: str) -> None:
            if piece and what not in self.first:
                self.first[what] = (time.perf_counter() - self.start) * 1000
        return on_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--json", dest="json_out", help="write the figures here")
    args = parser.parse_args()

    from localpager.memory.api import LocalPager

    clock: list[Clock] = [Clock()]

    class Watched(RepetitionGuard):  # the runtime's guard, plus the shadow and the raw model text
        def __init__(self, inner=None):
            super().__init__(inner)
            c = clock[-1]
            self.shadow = SentenceGuard(c.mark("sentence"))
            self.model = c.mark("model")

        def __call__(self, piece: str) -> bool:
            self.model(piece)
            if not self.shadow.tripped:
                self.shadow(piece)
            return super().__call__(piece)

        def flush(self) -> None:
            self.shadow.flush()
            super().flush()

    runtime_module.RepetitionGuard = Watched
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        lp = LocalPager(Path(tmp) / "store.db")
        conv = lp.conversation("stream", create=True)
        for s in STATEMENTS:
            conv.add_turn("user", s)
        conv.ask("Hello!", remember=False)  # load the models: not part of any figure
        for q in QUESTIONS[: args.questions]:
            c = Clock()
            clock.append(c)
            shown: list[str] = []
            word = c.mark("word")
            answer = conv.ask(q, remember=False, on_text=lambda p: (word(p), shown.append(p)) and None)
            total = (time.perf_counter() - c.start) * 1000
            if "".join(shown).strip() != answer.answer:
                print(f"streamed text differs from the answer: {''.join(shown)!r} / {answer.answer!r}")
            rows.append({"question": q, "answer_chars": len(answer.answer), "total_ms": round(total, 1),
                         **{f"first_{k}_ms": round(c.first.get(k, total), 1)
                            for k in ("model", "word", "sentence")}})
            print(f"{rows[-1]['first_model_ms']:7.0f} {rows[-1]['first_word_ms']:7.0f} "
                  f"{rows[-1]['first_sentence_ms']:7.0f} {total:7.0f}  {answer.answer[:60]!r}", flush=True)
        lp.close()

    def p50(key):
        return round(statistics.median(r[key] for r in rows), 1)

    def share(key):
        return round(statistics.median(r[key] / r["total_ms"] for r in rows), 3)

    figures = {"questions": len(rows), "total_p50_ms": p50("total_ms"),
               "model_first_text_p50_ms": p50("first_model_ms"),
               "ttft_word_p50_ms": p50("first_word_ms"), "ttft_sentence_p50_ms": p50("first_sentence_ms"),
               "ttft_word_share_p50": share("first_word_ms"), "ttft_sentence_share_p50": share("first_sentence_ms"),
               "rows": rows}
    print(json.dumps({k: v for k, v in figures.items() if k != "rows"}, indent=1))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
