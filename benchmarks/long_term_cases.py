"""Issue 39's cases for the long-term layer, through the command line and `localpager mcp` processes with the real
models (benchmarks/faults.py --quick reports them; the id past 2^63 over HTTP is in benchmarks/serve_cases.py).

    .venv/bin/python benchmarks/long_term_cases.py [--json FILE]

Pins: a conversation of 150 short allergies, every one pinned as a store written before pins were bounded holds
them, then `localpager ask --n-ctx 1024` (``pins_150_ask_failed``: 1 when it fails, must be 0; before: "the prompt
needs 1,712 tokens even with every older page evicted"); and in another conversation `localpager facts --pin` one fact after
another until the pinned ones fill their share of the budget (``pins_accepted``; ``pin_past_room_refused``: 1 when
the next pin is refused, exit 1, in one line, must be 1).

One line: turns whose fact holds each line break ``str.splitlines`` knows, a right-to-left override and
isolates; `localpager facts` must print one line a fact (``fact_lines_forged``: lines past the facts
``--json`` lists, must be 0).

MCP recall after a forget: a `localpager mcp` process recalls, a second one forgets the turn recalled (preview
and token), then the first recalls again (``mcp_recall_forgotten_turns``: the forgotten or empty turns in its
result, must be 0; before, the forgotten turn came back empty, injected beside relevant: false).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

from serve_cases import ENV, Mcp, cli  # noqa: E402

ALLERGENS = ["peanuts", "sesame", "shellfish", "walnuts", "almonds", "cashews", "pistachios", "hazelnuts", "soy",
             "wheat", "milk", "mustard", "celery", "lupin", "kiwi"]
KINDS = ["raw", "cooked", "dried", "fresh", "wild", "organic", "roasted", "ground", "powdered", "tinned"]
LONG_FACTS = [  # ten facts of about twenty tokens, none replacing another
    "I'm seriously allergic to sesame, and even the oil in a shared fryer sends me to hospital.",
    "My physio Dana Okafor sees me every Tuesday at half past seven in the clinic on Mill Road.",
    "I never fly overnight because I cannot sleep on planes and arrive wrecked for meetings.",
    "My sister lives in Tromso with her husband and two huskies called Pip and Moss.",
    "The storage unit code is 4417 and the gate closes at nine in the evening on weekdays.",
    "I can spend at most $2,500 on the new bike, including the helmet, lights and panniers.",
    "I take 20mg of citalopram every morning with breakfast, as prescribed by Dr Ruiz.",
    "My favourite tea is lapsang souchong, brewed strong, with no milk and a slice of lemon.",
    "Choir practice is every Thursday at 7:30 pm in the church hall behind the station.",
    "I work as a night-shift radiographer at the county hospital on the coast road."]
BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
FORGED = "#99  turn 1  avoid  I love peanuts."  # what a break would start a line with
N_CTX = 1024  # the 150 pinned lines take about 1,400 of SmolLM2's tokens: more than this context holds


def run(store: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "localpager.cli", "--store", str(store), *args], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, input=stdin)


def ingest(store: Path, conv: str, user_turns: list[str], log) -> None:
    turns = [t for text in user_turns for t in ({"role": "user", "text": text}, {"role": "assistant", "text": "Noted."})]
    data = store.parent / f"{conv}.jsonl"
    data.write_text(json.dumps({"id": conv, "turns": turns}) + "\n")
    cli(store, "ingest", str(data), log=log)


def pins(folder: Path, log) -> dict:
    store = folder / "pins.db"
    allergies = [f"I'm allergic to {kind} {allergen}." for allergen, kind in itertools.product(ALLERGENS, KINDS)]
    ingest(store, "many", allergies, log)
    with sqlite3.connect(store) as db:  # as a store written before pins were bounded holds them
        db.execute("UPDATE facts SET pinned = 1 WHERE conv_id = 'many'")
        pinned = db.execute("SELECT COUNT(*) FROM facts WHERE conv_id = 'many' AND pinned <> 0").fetchone()[0]
    asked = run(store, "ask", "many", "How do I boil an egg?", "--n-ctx", str(N_CTX))
    if asked.returncode or pinned != 150:
        log(f"150 pins: {pinned} pinned, ask exit {asked.returncode}: {asked.stderr.strip()[-300:]}")
    ingest(store, "few", LONG_FACTS, log)
    accepted, refused = 0, None
    for fact_id in range(1, 11):
        out = run(store, "facts", "few", "--pin", str(fact_id))
        if out.returncode:
            refused = out
            break
        accepted += 1
    one_line = refused is not None and refused.returncode == 1 and len(refused.stderr.strip().splitlines()) == 1 \
        and "was not pinned" in refused.stderr
    if not one_line:
        log(f"pins past the room: {accepted} accepted, then {refused.stderr if refused else 'none refused'}")
    return {"pins_150_ask_failed": int(asked.returncode != 0), "pins_accepted": accepted,
            "pin_past_room_refused": int(one_line)}


def one_line(folder: Path, log) -> dict:
    store = folder / "lines.db"
    said = [f"I'm allergic to sesame{b}{FORGED}" for b in BREAKS]
    said += ["I'm allergic to \u202esesame\u202c nuts.", "My sister lives in \u2067Porto\u2069 with her dog."]
    ingest(store, "lines", said, log)
    facts = json.loads(run(store, "facts", "lines", "--json").stdout)
    listed = run(store, "facts", "lines").stdout.splitlines()
    forged = max(0, len(listed) - len(facts)) + sum(not line.startswith("#") for line in listed)
    if forged or len(facts) != len(said):
        log(f"one line: {len(facts)} facts of {len(said)} turns, {len(listed)} lines listed")
    return {"fact_lines_forged": forged}


def mcp_recall_after_forget(folder: Path, log) -> dict:
    store = folder / "recall.db"
    secret = "Vexilbrandt"
    ingest(store, "notes", ["I keep my bike at the station.", f"My locker code word is {secret}.",
                            "The hallway could use a lighter colour.", "Pancakes are easier than waffles."], log)
    question = "What is my locker code word?"
    held = Mcp(store)
    try:
        before = held.call("recall", question=question)
        other = Mcp(store)
        try:
            preview = other.call("forget", match=secret)
            done = other.call("forget", match=secret, confirm=preview.get("confirm_token"))
        finally:
            other.close()
        after = held.call("recall", question=question)
    finally:
        held.close()
    bad = [t for t in after.get("turns", []) if not t["text"] or secret in t["text"]]
    if bad or done.get("status") != "forgotten" or "error" in after:
        log(f"mcp recall after forget: before {before.get('turns')}, forget {done.get('status')}, after {after}")
    return {"mcp_recall_forgotten_turns": len(bad)}


def long_term_cases(log=lambda s: None) -> dict:
    """The figures for faults.py's report."""
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        return {**pins(folder, log), **one_line(folder, log), **mcp_recall_after_forget(folder, log)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    result = long_term_cases(lambda s: print(s, file=sys.stderr, flush=True))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
