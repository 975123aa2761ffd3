"""Fault injection for the store: workers that write and acknowledge, killers, and the checks after.

A worker (``python tests/faultkit.py OP STORE ...``) runs the library on the fakes (ScriptedBackend,
HashEmbedder: no model) and prints ``ACK <conv> <index> <text>`` on stdout, flushed, after each turn the
library has returned from storing: what a user was told is saved. ``run_killed`` starts a worker and
SIGKILLs it at a random moment; ``check_store`` then reopens the store and checks that SQLite is intact,
every acknowledged turn is there exactly once and in order, questions without answers are marked, the
pages cover the turns, and the FAISS indexes load or are rebuilt. ``run_concurrent`` runs several
workers at once. Used by tests/test_faults.py (a few runs) and benchmarks/faults.py (many).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
QUESTION_MARK = "question"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env.setdefault("LOCALPAGER_LOCK_TIMEOUT", "60")
    return env


# -- the worker (runs in a child process) ----------------------------------------------------------------
def _reply(prompt: str, grammar: str | None) -> str:
    from fakes import shortest_sentence

    return shortest_sentence(grammar) if grammar else "Noted, thanks."


def _pager(store: str):
    from fakes import HashEmbedder, ScriptedBackend

    from localpager.api import LocalPager
    from localpager.index import PageIndex

    lp = LocalPager(store, backend=ScriptedBackend(_reply, model_name="fake.gguf"))
    lp._index = PageIndex(lp.store, HashEmbedder())
    return lp


def _config(keywords: str = "heuristic"):
    from localpager.pager import PagingConfig

    return PagingConfig(boundary="fixed_5", budget=120, keywords=keywords)


def _ack(conv: str, turn) -> None:
    sys.stdout.write(f"ACK {json.dumps([conv, turn.index, turn.role, turn.text])}\n")
    sys.stdout.flush()


def worker(op: str, store: str, conv: str, n: int, tag: str) -> None:
    """``add``: n user turns; ``ask``: n questions answered (the index kept current on the way);
    ``maintain``: turns under a model keyword strategy, the model's keywords after each page closes;
    ``ingest``: a generated file of conversations ``<tag>-*``, acknowledged per conversation."""
    lp = _pager(store)
    if op == "ingest":
        from localpager.eval.synthetic import generate_dataset
        from localpager.loaders import dump_jsonl

        path = Path(store).with_name(f"{tag}.jsonl")
        conversations = generate_dataset(n, seed=len(tag), n_turns=60)
        for i, c in enumerate(conversations):
            c.id = f"{tag}-{i}"
        dump_jsonl(conversations, path)
        report = lp.ingest(path, config=_config())
        for conv_id in report.ids:
            for t in lp.store.turns(conv_id):
                _ack(conv_id, t)
        return
    chat = lp.conversation(conv, create=True, config=_config("llm-batch" if op == "maintain" else "heuristic"))
    for i in range(n):
        text = f"{tag} says thing {i} about the garden fence and the Lisbon flight number {i}"
        if op == "add":
            _ack(conv, chat.add_turn("user", text))
        elif op == "ask":
            answer = chat.ask(f"{tag} {QUESTION_MARK} {i}: what did I say about the fence?")
            turns = chat.store.turns(conv)
            question = turns[answer.trace.turn]
            _ack(conv, question)
            _ack(conv, turns[question.index + 1])
        elif op == "maintain":
            _ack(conv, chat.add_turn("user", text))
            chat.maintain()
        else:
            raise SystemExit(f"unknown op {op}")


# -- running workers (in the parent) ---------------------------------------------------------------------
@dataclass
class Acked:
    """Turns a worker acknowledged, in order: (conv, index, role, text)."""

    turns: list[tuple[str, int, str, str]] = field(default_factory=list)


def _parse(stdout: str) -> Acked:
    acked = Acked()
    for line in stdout.splitlines():
        if line.startswith("ACK "):
            try:
                acked.turns.append(tuple(json.loads(line[4:])))
            except ValueError:  # the last line, cut by the kill
                pass
    return acked


def start(op: str, store: Path, conv: str, n: int, tag: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), op, str(store), conv, str(n), tag],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


def run_killed(op: str, store: Path, conv: str, n: int, tag: str, rng: random.Random,
               window: tuple[float, float] = (0.3, 2.5)) -> tuple[Acked, bool, str]:
    """Start a worker, SIGKILL it after a random time in ``window``: (acknowledged, killed?, stderr)."""
    proc = start(op, store, conv, n, tag)
    try:
        proc.wait(timeout=rng.uniform(*window))
        killed = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        killed = True
    out, err = proc.communicate()
    return _parse(out), killed, err


def run_concurrent(jobs: list[tuple[str, str, int, str]], store: Path, timeout: float = 300) -> tuple[list[Acked], list[str]]:
    """Run every (op, conv, n, tag) at once; (acknowledged per job, errors of jobs that failed)."""
    procs = [start(op, store, conv, n, tag) for op, conv, n, tag in jobs]
    acked, errors = [], []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        acked.append(_parse(out))
        if proc.returncode != 0:
            errors.append(err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}")
    return acked, errors


# -- checking the store after -------------------------------------------------------------------------------
@dataclass
class Check:
    integrity_ok: bool = True
    acknowledged: int = 0
    lost: list[str] = field(default_factory=list)  # acknowledged turns missing, duplicated or out of order
    problems: list[str] = field(default_factory=list)  # anything else wrong
    index_rebuilds: int = 0

    @property
    def ok(self) -> bool:
        return self.integrity_ok and not self.lost and not self.problems


def check_store(store: Path, acked: list[Acked], *, ask_after: bool = True) -> Check:
    """Reopen the store as a new process would and check it (see the module's docstring). With
    ``ask_after``, one more question is asked in every conversation touched, on the fakes."""
    check = Check()
    with sqlite3.connect(store) as conn:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
        check.integrity_ok = rows == [("ok",)]
        if not check.integrity_ok:
            check.problems.append(f"integrity_check: {rows[:3]}")
        if fk := conn.execute("PRAGMA foreign_key_check").fetchall():
            check.problems.append(f"foreign_key_check: {fk[:3]}")
    if not check.integrity_ok:
        return check
    lp = _pager(str(store))
    try:
        _check_turns(lp, acked, check)
        _check_indexes(lp, check)
        if ask_after:
            for conv in sorted({t[0] for a in acked for t in a.turns} | _conversations(lp)):
                _check_next_ask(lp, conv, check)
    finally:
        lp.close()
    return check


def _conversations(lp) -> set[str]:
    return {c.id for c in lp.store.list_conversations()}


def _check_turns(lp, acked: list[Acked], check: Check) -> None:
    stored = {c: lp.store.turns(c) for c in _conversations(lp)}
    for conv, turns in stored.items():
        if [t.index for t in turns] != list(range(len(turns))):
            check.problems.append(f"{conv}: turn indexes not 0..{len(turns) - 1}")
        pages = lp.store.pages(conv, turns)
        covered = [i for p in pages for i in range(p.first_turn, p.last_turn + 1)]
        if turns and covered != list(range(len(turns))):
            check.problems.append(f"{conv}: pages cover {covered[:3]}..{covered[-3:]} of {len(turns)} turns")
        unanswered = set(lp.store.unanswered(conv))
        for t in turns:  # a question with no answer after it is marked
            if t.role == "user" and QUESTION_MARK in t.text and t.text.endswith("?"):
                nxt = turns[t.index + 1] if t.index + 1 < len(turns) else None
                if nxt is None or nxt.role != "assistant":
                    marked = t.index in unanswered or any(
                        d.get("turn") == t.index and d.get("status") == "interrupted" for d in lp.store.traces(conv))
                    if not marked:
                        check.problems.append(f"{conv}: question at turn {t.index} has no answer and no mark")
    for a in acked:
        check.acknowledged += len(a.turns)
        last: dict[str, int] = defaultdict(lambda: -1)
        for conv, index, role, text in a.turns:
            turns = stored.get(conv, [])
            where = [t.index for t in turns if t.text == text and t.role == role]
            unique = " says thing " in text or f" {QUESTION_MARK} " in text  # worker-made: one of a kind
            if unique and len(where) != 1:
                check.lost.append(f"{conv}: acknowledged {text!r} stored {len(where)} times")
            elif index >= len(turns) or turns[index].text != text:
                check.lost.append(f"{conv}: acknowledged turn {index} {text!r} is not there")
            elif index <= last[conv]:
                check.lost.append(f"{conv}: acknowledged turn {index} out of order")
            last[conv] = max(last[conv], index)


def _check_indexes(lp, check: Check) -> None:
    """Every FAISS family loads from its file or is rebuilt from the store, and holds what the store holds."""
    from localpager.index import FAMILIES, FamilyIndex

    for family in FAMILIES:
        stored = lp.store.embedding_rows(family)
        index = FamilyIndex.__new__(FamilyIndex)
        # the vectors' own width: a killed real `ask` may have stored 384-wide ones, the fakes embed narrower
        dim = len(stored[0][6]) // 4 if stored else lp.index.embedder.dim
        index.store, index.family, index.dim = lp.store, family, dim
        index.path = Path(f"{lp.store.path}.{family}.faiss")
        index.meta_path = index.path.with_suffix(".json")
        index.rows, index.fingerprint = {}, []
        loaded = index._load()
        if loaded is None:
            check.index_rebuilds += 1
            loaded = index._rebuild()
        rows = lp.store.embedding_rows(family, vectors=False)
        if loaded.ntotal != len(rows):
            check.problems.append(f"index {family}: {loaded.ntotal} vectors, store has {len(rows)}")


def _check_next_ask(lp, conv: str, check: Check) -> None:
    try:
        chat = lp.conversation(conv)
        answer = chat.ask("Is everything still there after the crash?")
        if not answer.answer:
            check.problems.append(f"{conv}: the next ask gave no answer")
        if lp.store.unanswered(conv):
            check.problems.append(f"{conv}: questions still unanswered after the next ask")
    except Exception as exc:  # noqa: BLE001 - any failure here is what the check reports
        check.problems.append(f"{conv}: the next ask failed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(HERE)]
    op, store, conv, n, tag = sys.argv[1:6]
    worker(op, store, conv, int(n), tag)
