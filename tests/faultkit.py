"""Fault injection for the store: workers that write and acknowledge, killers, and the checks after.

A worker (``python tests/faultkit.py OP STORE ...``) runs the library on the fakes (ScriptedBackend,
HashEmbedder: no model) and prints ``ACK <conv> <index> <text>`` on stdout, flushed, after each turn the
library has returned from storing: what a user was told is saved. ``run_killed`` starts a worker and
SIGKILLs it at a random moment; ``check_store`` then reopens the store and checks that SQLite is intact,
every acknowledged turn is there exactly once and in order, questions without answers are marked, the
pages cover the turns, and the FAISS indexes load or are rebuilt. ``run_concurrent`` runs several
workers at once. Used by tests/fast/test_faults.py (a few runs) and benchmarks/faults.py (many).

The erase check (``leaks``) reads every file a store owns for a text, as bytes and, in saved KV caches, as
the text their token ids decode to; ``hold`` workers keep a conversation (and its live KV cache) open
while another process forgets it (``run_forget_across``).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import struct
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fakes import ScriptedBackend

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


def _pager(store: str, *, states: bool = False):
    """A LocalPager on the fakes; ``states``: its backend saves and loads KV caches (``StatefulBackend``)."""
    from fakes import HashEmbedder

    from localpager.memory.api import LocalPager, ModelOptions

    backend = (StatefulBackend if states else ScriptedBackend)(_reply, model_name="fake.gguf")
    lp = LocalPager(store, backend=backend, options=ModelOptions(embedder=HashEmbedder()))
    return lp


def _config(keywords: str = "heuristic"):
    from localpager.core.pager import PagingConfig

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
        from localpager.lab.synthetic import generate_dataset
        from localpager.store.loaders import dump_jsonl

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


def hold(store: str, conv: str, secret: str) -> None:
    """Say ``secret`` in ``conv`` and keep it: the pager, the BM25 and FAISS caches and the live KV cache,
    as a running ``serve`` would. Then, one command a line on stdin, each acknowledged on stdout:
    ``switch`` asks in another conversation (the model moves: the held cache is saved, unless a forget
    came in between), ``back`` asks in ``conv`` again, ``close`` closes the LocalPager (saving its cache)."""
    lp = _pager(store, states=True)
    chat = lp.conversation(conv, create=True, config=_config())
    chat.add_turn("user", f"Keep this safe: my code word is {secret}.")
    chat.ask(f"What do you make of {secret}?")
    chat.search(secret)
    _say("READY")
    for line in sys.stdin:
        command = line.strip()
        if command == "switch":
            lp.conversation(f"{conv}-other", create=True, config=_config()).ask("What is a good name for a cat?")
        elif command == "back":
            chat.ask("And what else did I tell you?")
        elif command == "close":
            lp.close()
            _say("CLOSED")
            return
        _say(command.upper())


def _say(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


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


def start(op: str, store: Path, conv: str, n: int, tag: str, stdin: int | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(Path(__file__).resolve()), op, str(store), conv, str(n), tag],
                            stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())


class Holder:
    """A ``hold`` worker in its own process, driven one command at a time."""

    def __init__(self, store: Path, conv: str, secret: str):
        self.proc = start("hold", store, conv, 0, secret, stdin=subprocess.PIPE)
        self._expect("READY")

    def _expect(self, word: str) -> None:
        line = self.proc.stdout.readline().strip()
        if line != word:
            self.proc.kill()
            raise RuntimeError(f"hold worker said {line!r}, not {word}: {self.proc.stderr.read()[-600:]}")

    def command(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        self._expect("CLOSED" if word == "close" else word.upper())
        if word == "close":
            self.proc.stdin.close()
            self.proc.wait(60)

    def stop(self) -> None:
        """Kill it if it is still running (a failed run), by its own PID."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream and not stream.closed:
                stream.close()


@dataclass
class ForgetAcross:
    """One run of ``run_forget_across``: where the secret was found before the forget (the check must see
    the held cache once it is saved) and after it (must be nowhere)."""

    before: list[str]
    after: list[str]


def run_forget_across(store: Path, secret: str, whole: bool = False) -> ForgetAcross:
    """A ``hold`` worker says ``secret``; its cache is saved once (``switch``) and the check must find it
    there; it takes the conversation back (``back``: the secret is in its live cache again); this process
    forgets the secret (or, ``whole``, the conversation); the worker switches away and closes. Where the
    secret is on disk before and after."""
    conv = "held"
    holder = Holder(store, conv, secret)
    try:
        holder.command("switch")
        before = leaks(store, secret, decode_fake)
        holder.command("back")
        lp = _pager(str(store))
        try:
            if whole:
                lp.forget_conversation(conv)
            else:
                lp.conversation(conv).forget(match=secret)
        finally:
            lp.close()
        holder.command("switch")
        holder.command("close")
    finally:
        holder.stop()
    return ForgetAcross(before, leaks(store, secret, decode_fake))


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
            # worker-made: one of a kind (an answer may quote one, as a standing fact: "You told me: ...")
            unique = role == "user" and (" says thing " in text or f" {QUESTION_MARK} " in text)
            if unique and len(where) != 1:
                check.lost.append(f"{conv}: acknowledged {text!r} stored {len(where)} times")
            elif index >= len(turns) or turns[index].text != text:
                check.lost.append(f"{conv}: acknowledged turn {index} {text!r} is not there")
            elif index <= last[conv]:
                check.lost.append(f"{conv}: acknowledged turn {index} out of order")
            last[conv] = max(last[conv], index)


def _check_indexes(lp, check: Check) -> None:
    """Every signal's FAISS index loads from its file or is rebuilt from the store, and holds what the store holds."""
    from localpager.retrieval.choices import Signal
    from localpager.retrieval.index import SignalIndex

    for kind in Signal:
        stored = lp.store.embedding_rows(kind)
        index = SignalIndex.__new__(SignalIndex)
        # the vectors' own width: a killed real `ask` may have stored 384-wide ones, the fakes embed narrower
        dim = len(stored[0][6]) // 4 if stored else lp.index.embedder.dim
        index.store, index.signal, index.dim = lp.store, kind, dim
        index.path = Path(f"{lp.store.path}.{kind}.faiss")
        index.meta_path = index.path.with_suffix(".json")
        index.rows, index.fingerprint = {}, []
        index.conv_id, index.files, index.dirty, index.changes, index.moved, index._turns = None, True, False, 0, 0, {}
        loaded = index._load()
        if loaded is None:
            check.index_rebuilds += 1
            loaded = index._rebuild()
        rows = lp.store.embedding_rows(kind, vectors=False)
        if loaded.ntotal != len(rows):
            check.problems.append(f"index {kind}: {loaded.ntotal} vectors, store has {len(rows)}")


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


# -- the erase check -----------------------------------------------------------------------------------------
KV_SEQ_MAGIC = 0x67677371  # llama.cpp's LLAMA_STATE_SEQ_MAGIC ("ggsq"): a saved sequence state file


def store_files(store: Path) -> list[Path]:
    """Every file a store owns: the database and its ``-wal``/``-shm``/``-journal``, and every file whose
    name starts with the store's (FAISS indexes and their metadata, saved KV caches, temporary files), and
    the files in folders so named (the lock files in ``<store>.locks/``)."""
    base = Path(store)
    files: list[Path] = []
    for path in sorted(base.parent.iterdir()):
        if path.name.startswith(base.name):
            files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    return files


def kv_tokens(path: Path) -> list[int] | None:
    """The token ids of a saved sequence state (three little-endian uint32: magic, version, token count,
    then the ids as int32); None if the file is not one."""
    data = Path(path).read_bytes()
    if len(data) < 12:
        return None
    magic, _version, n = struct.unpack_from("<III", data)
    if magic != KV_SEQ_MAGIC or 12 + 4 * n > len(data):
        return None
    return list(struct.unpack_from(f"<{n}i", data, 12))


def leaks(store: Path, needle: str, decode: Callable[[list[int]], str] | None = None) -> list[str]:
    """Where ``needle`` survives in the files ``store`` owns: ``<file>`` when its bytes hold it (UTF-8),
    ``<file> (KV tokens)`` when a saved KV cache's token ids decode (``decode``) to text holding it. A grep
    cannot see the second: the ids are int32s. Without ``decode`` a KV cache that holds tokens at all
    counts as a leak (a check that cannot read a file must not pass it)."""
    found = []
    for path in store_files(store):
        if needle.encode() in path.read_bytes():
            found.append(path.name)
        tokens = kv_tokens(path)
        if tokens and (decode is None or needle in decode(tokens)):
            found.append(f"{path.name} (KV tokens)")
    return found


def model_decoder() -> Callable[[list[int]], str]:
    """Token ids to text with the default chat model's tokenizer (vocabulary only): what a real saved KV
    cache holds."""
    from localpager.backends.tokenizers import counter_for

    vocab = counter_for()._llama
    return lambda ids: vocab.detokenize(ids).decode("utf-8", errors="replace")


def decode_fake(ids: list[int]) -> str:
    """What a ``StatefulBackend`` cache file holds: the bytes of its text, one id each."""
    return bytes(i & 0xFF for i in ids).decode("utf-8", errors="replace")


class StatefulBackend(ScriptedBackend):
    """A ScriptedBackend whose KV cache is saved and loaded in llama.cpp's sequence state layout (see
    ``kv_tokens``), so the erase check reads both alike. The fakes' token ids are numbered per process,
    so the ids it writes are the bytes of the cached text (``decode_fake``), and a loaded cache is that
    text tokenized again."""

    saves_state = True

    def state_key(self) -> str:
        return "fake"

    def cached_tokens(self) -> list[int]:
        return list(self._cache)

    def save_state(self, path: Path) -> bool:
        if not self._cache:
            return False
        data = self.detokenize(self._cache).encode("utf-8")
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<III", KV_SEQ_MAGIC, 2, len(data)) + struct.pack(f"<{len(data)}i", *data))
        os.replace(tmp, path)
        return True

    def load_state(self, path: Path) -> int:
        tokens = kv_tokens(path)
        self._cache = self.tokenize(decode_fake(tokens)) if tokens else []
        return len(self._cache)

    def clear_cache(self) -> None:
        self._cache, self._pending = [], None

    def fork(self) -> "StatefulBackend":
        twin = super().fork()
        twin.__class__ = StatefulBackend
        return twin


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(HERE)]
    op, store, conv, n, tag = sys.argv[1:6]
    if op == "hold":
        hold(store, conv, tag)
    else:
        worker(op, store, conv, int(n), tag)
