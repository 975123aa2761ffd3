"""The files beside a store, attacked: written back after another process's forget, damaged, or brought in by a
crafted import. On the fakes (ScriptedBackend or faultkit's StatefulBackend, HashEmbedder: no model).

- ``run_write_back``: a worker process (``python tests/derivedkit.py hold-big STORE SECRET``) holds a large
  conversation whose FAISS index has unsaved rows (its save deferred to close, as an index of 20,000+ vectors
  is: ``SAVE_NOW_BELOW`` is lowered in the worker); this process forgets the secret; the worker closes. A
  vector of the forgotten turn in a FAISS file after that is a leak.
- ``damage``: the ways a file beside the store can be damaged or foreign (``DAMAGES``), each applied to a copy
  of a store made by ``make_store``; ``run_damaged`` opens it in a new process that searches and asks, and
  says whether it crashed and how many warning lines it printed.
- ``crafted_import``: an export of one conversation with its id changed and every vector cut to 8 floats,
  imported into a store with other conversations; which of those can still search and answer after.

Used by tests/fast/test_derived_files.py and benchmarks/faults.py (``faiss_write_back_leaks``,
``damaged_files_crashes``, ``import_breaks_others``).
"""

from __future__ import annotations

import base64
import json
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECRET_TEXT = "My locker code is {secret} and nobody else knows it."
CONV = "big"


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE), env.get("PYTHONPATH", "")])
    env.setdefault("LOCALPAGER_LOCK_TIMEOUT", "60")
    return env


def config():
    from localpager.core.pager import PagingConfig

    return PagingConfig(boundary="fixed_5", budget=120)


def pager(store, *, states: bool = False):
    """A LocalPager on the fakes (``states``: a backend that saves and loads KV caches)."""
    from fakes import HashEmbedder, ScriptedBackend
    from faultkit import StatefulBackend, _reply

    from localpager.memory.api import LocalPager, ModelOptions

    backend = (StatefulBackend if states else ScriptedBackend)(_reply, model_name="fake.gguf")
    return LocalPager(store, backend=backend, options=ModelOptions(embedder=HashEmbedder()))


def filler(i: int) -> str:
    return f"Turn {i} is about the zebra{i} in the garden and topic{i // 5}."


# -- a FAISS index written back after another process's forget ------------------------------------------------
def hold_big(store: str, secret: str, turns: int = 120) -> None:
    """The worker: a conversation of ``turns`` turns, one saying ``secret``, searched (its index built and
    saved); 60 more turns and another search (the index now has unsaved rows: its save is deferred to close,
    ``SAVE_NOW_BELOW``, lowered to 40 for fewer than 20,000 turns); READY; then ``close`` on stdin closes the
    LocalPager (CLOSED)."""
    from localpager.retrieval import index

    if turns < index.SAVE_NOW_BELOW:
        index.SAVE_NOW_BELOW = 40
    lp = pager(store)
    if turns > 1000:  # stored whole, as ``localpager ingest`` does: 20,000 turns one by one would take minutes
        from localpager.core.records import Transcript, Turn
        from localpager.store.loaders import dump_jsonl

        said = [Turn("user", SECRET_TEXT.format(secret=secret) if i == 3 else filler(i), i) for i in range(turns)]
        path = Path(store).with_name("big.jsonl")
        dump_jsonl([Transcript(CONV, said)], path)
        lp.ingest(path, config=config())
        chat = lp.conversation(CONV)
    else:
        chat = lp.conversation(CONV, create=True, config=config())
        for i in range(turns):
            chat.add_turn("user", SECRET_TEXT.format(secret=secret) if i == 3 else filler(i))
    chat.search("where is the zebra3?")
    for i in range(turns, turns + 60):
        chat.add_turn("user", filler(i))
    chat.search("where is the zebra3?")
    signal = lp.held.index.signal("turn")
    assert signal.dirty and signal.index.ntotal >= index.SAVE_NOW_BELOW, "the worker's index has no deferred save"
    _say("READY")
    for line in sys.stdin:
        if line.strip() == "close":
            lp.close()
            _say("CLOSED")
            return


def _say(word: str) -> None:
    sys.stdout.write(word + "\n")
    sys.stdout.flush()


def faiss_vectors(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of a saved FAISS file, read as whatever index it is."""
    import faiss

    index = faiss.read_index(str(path))
    if hasattr(index, "id_map"):
        ids, inner = faiss.vector_to_array(index.id_map), faiss.downcast_index(index.index)
    else:
        ids, inner = np.arange(index.ntotal, dtype=np.int64), index
    if not index.ntotal:
        return ids, np.zeros((0, index.d), dtype=np.float32)
    return ids, inner.reconstruct_n(0, index.ntotal)


def vector_leaks(store: Path, text: str) -> list[str]:
    """The FAISS files beside ``store`` holding a vector of ``text`` (cosine 0.999 or more, with the fakes'
    embedder) or an id the store has no row for."""
    import sqlite3

    from fakes import HashEmbedder

    wanted = HashEmbedder().encode_one(text)
    with sqlite3.connect(store) as conn:
        rowids = {r[0] for r in conn.execute("SELECT rowid FROM embeddings")}
    found = []
    for path in sorted(Path(store).parent.glob(Path(store).name + ".*.faiss")):
        ids, vectors = faiss_vectors(path)
        if len(vectors) and vectors.shape[1] == len(wanted) and float((vectors @ wanted).max()) >= 0.999:
            found.append(f"{path.name} (a vector of the forgotten turn)")
        if set(ids.tolist()) - rowids:
            found.append(f"{path.name} (ids the store has no row for)")
    return found


def word_leaks(store: Path, word: str) -> list[str]:
    """The files of ``store`` holding ``word`` (any case) as UTF-8 or as UTF-32 (how numpy stores strings: a
    BM25 file's terms, which a grep for the word's UTF-8 bytes never finds)."""
    from faultkit import store_files

    needles = {form.encode(codec) for form in (word, word.lower()) for codec in ("utf-8", "utf-32-le")}
    return [p.name for p in store_files(store) if any(n in p.read_bytes() for n in needles)]


@dataclass
class WriteBack:
    """One run of ``run_write_back``: where the forgotten turn's vector was before the forget (it must be
    found there: the check sees it) and after the worker closed (must be nowhere)."""

    before: list[str]
    after: list[str]


def run_write_back(store: Path, secret: str, turns: int = 120) -> WriteBack:
    """The issue's two processes: the worker holds a conversation of ``turns`` turns with a deferred FAISS save
    (``hold_big``); this process forgets ``secret`` (``--match``); the worker closes. Where the forgotten turn's
    vector is before and after."""
    from faultkit import leaks

    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "hold-big", str(store), secret,
                             str(turns)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    try:
        _expect(proc, "READY")
        text = SECRET_TEXT.format(secret=secret)
        before = vector_leaks(store, text)
        lp = pager(store)
        try:
            lp.conversation(CONV).forget(match=secret)
        finally:
            lp.close()
        proc.stdin.write("close\n")
        proc.stdin.flush()
        _expect(proc, "CLOSED")
        proc.stdin.close()
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream and not stream.closed:
                stream.close()
    return WriteBack(before, vector_leaks(store, text) + leaks(store, secret) + word_leaks(store, secret))


def _expect(proc: subprocess.Popen, word: str) -> None:
    line = proc.stdout.readline().strip()
    if line != word:
        proc.kill()
        raise RuntimeError(f"worker said {line!r}, not {word}: {proc.stderr.read()[-800:]}")


# -- damaged and foreign files ------------------------------------------------------------------------------
def make_store(store: Path, turns: int = 120) -> None:
    """A store whose every kind of derived file exists: the FAISS index of turns (and its ``.json``), a BM25
    postings file (``LexicalIndex.SAVE_AFTER`` is lowered: whoever opens it must lower it too, as
    ``run_damaged`` does) and a saved KV cache with its checksum."""
    from localpager.retrieval.ranking import LexicalIndex

    before, LexicalIndex.SAVE_AFTER = LexicalIndex.SAVE_AFTER, 50
    try:
        lp = pager(store, states=True)
        lp.conversation("other", create=True, config=config()).ask("Anything new?")
        chat = lp.conversation(CONV, create=True, config=config())
        for i in range(turns):
            chat.add_turn("user", filler(i))
        chat.search("where is the zebra3?")
        chat.ask("What did I say about the zebra3?")
        lp.close()  # saves the chat's KV cache: this conversation's
    finally:
        LexicalIndex.SAVE_AFTER = before


def kv_file(store: Path) -> Path:
    """The saved KV cache of the conversation ``make_store`` asked in last."""
    import hashlib

    mine = hashlib.sha256(CONV.encode()).hexdigest()[:16]
    return next(p for p in store.parent.glob(f"{store.name}.kv-{mine}-*") if not p.name.endswith(".tmp"))


def lexical_file(store: Path) -> Path:
    return next(store.parent.glob(store.name + ".lexical-*.npz"))


def _forge_faiss(store: Path, index) -> None:
    """Write ``index`` as the store's turn index, with a ``.json`` that vouches for it (the fingerprint, width
    and erase generation of the real one, and the new file's checksum, when the real one has one): only a
    check of what the file is can tell."""
    import hashlib

    import faiss

    path = Path(f"{store}.turn.faiss")
    meta_path = path.with_suffix(".json")
    faiss.write_index(index, str(path))
    meta = json.loads(meta_path.read_text())
    if "sha256" in meta:
        meta["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    meta_path.write_text(json.dumps(meta))


def _faiss_flat(store: Path) -> None:
    """A plain ``IndexFlatIP`` (no id map) of the same vectors."""
    import faiss

    _, vectors = faiss_vectors(Path(f"{store}.turn.faiss"))
    flat = faiss.IndexFlatIP(vectors.shape[1])
    flat.add(vectors)
    _forge_faiss(store, flat)


def _faiss_hnsw(store: Path) -> None:
    """An ``IndexIDMap2`` over an HNSW graph, same vectors and ids."""
    import faiss

    ids, vectors = faiss_vectors(Path(f"{store}.turn.faiss"))
    hnsw = faiss.IndexIDMap2(faiss.IndexHNSWFlat(vectors.shape[1], 16, faiss.METRIC_INNER_PRODUCT))
    hnsw.add_with_ids(vectors, ids)
    _forge_faiss(store, hnsw)


def _faiss_width(store: Path) -> None:
    """The right kind and ids, vectors of 8 numbers (the ``.json`` still says the embedder's width)."""
    import faiss

    ids, vectors = faiss_vectors(Path(f"{store}.turn.faiss"))
    narrow = faiss.IndexIDMap2(faiss.IndexFlatIP(8))
    narrow.add_with_ids(np.ascontiguousarray(vectors[:, :8]), ids)
    _forge_faiss(store, narrow)


def _faiss_ids(store: Path) -> None:
    """The right kind and width, ids the store has no row for."""
    import faiss

    ids, vectors = faiss_vectors(Path(f"{store}.turn.faiss"))
    other = faiss.IndexIDMap2(faiss.IndexFlatIP(vectors.shape[1]))
    other.add_with_ids(vectors, ids + 1_000_000)
    _forge_faiss(store, other)


def _faiss_bytes(store: Path) -> None:
    """2,000 bytes of the vectors changed (past the header: the file still reads)."""
    _flip(Path(f"{store}.turn.faiss"), 200, 2000)


def _faiss_meta(store: Path) -> None:
    Path(f"{store}.turn.json").write_text("[1, 2, 3]")


def _kv_bytes(store: Path) -> None:
    """2,000 bytes changed after the header of the saved KV cache (the issue's item 2)."""
    _flip(kv_file(store), 64, 2000)


def _kv_no_sum(store: Path) -> None:
    """A KV cache without its checksum (written by something else)."""
    for path in store.parent.glob(store.name + ".kvsum-*"):
        path.unlink()  # every checksum: an earlier localpager wrote none
    data = bytearray(kv_file(store).read_bytes())
    data[12:16] = struct.pack("<i", 0x7FFFFFFF)  # its first token id, far outside any vocabulary
    kv_file(store).write_bytes(bytes(data))


def _lexical_rows(store: Path) -> None:
    """A BM25 file whose postings point past the conversation's turns, its checksum made to match (only a
    check of the rows can tell)."""
    path = lexical_file(store)
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["p_col0"] = arrays["p_col0"] + 10_000
    if "digest" in arrays:
        from localpager.retrieval.lexfile import _digest

        arrays["digest"] = np.array([_digest(arrays)], dtype=str)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _lexical_bytes(store: Path) -> None:
    _flip(lexical_file(store), 300, 2000)


def _flip(path: Path, start: int, count: int) -> None:
    data = bytearray(path.read_bytes())
    end = min(len(data), start + count)
    for i in range(start, end):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


DAMAGES = {
    "faiss: a plain IndexFlatIP": _faiss_flat,
    "faiss: an IndexIDMap2 over HNSW": _faiss_hnsw,
    "faiss: vectors of another width": _faiss_width,
    "faiss: ids the store has no row for": _faiss_ids,
    "faiss: 2,000 bytes changed": _faiss_bytes,
    "faiss: a .json that is not an object": _faiss_meta,
    "kv: 2,000 bytes changed after the header": _kv_bytes,
    "kv: no checksum": _kv_no_sum,
    "bm25: rows past the turns": _lexical_rows,
    "bm25: 2,000 bytes changed": _lexical_bytes,
}


@dataclass
class Damaged:
    """A damaged store opened by a new process: whether it crashed (a non-zero exit, a traceback), its
    warning lines, whether the search and the answer equal the undamaged store's, and whether a damaged KV
    cache was handed to the model."""

    case: str
    crashed: bool
    warnings: list[str] = field(default_factory=list)
    same: bool = False
    loaded_damaged: bool = False
    detail: str = ""


def open_and_use(store: str) -> None:
    """The process ``run_damaged`` starts: search and ask on the fakes; print the results as JSON, then the KV
    files the backend was asked to load."""
    import logging

    from faultkit import StatefulBackend

    from localpager.retrieval.ranking import LexicalIndex

    logging.basicConfig(level=logging.WARNING, format="WARNING %(name)s: %(message)s", stream=sys.stderr)
    LexicalIndex.SAVE_AFTER = 50
    loaded, load = [], StatefulBackend.load_state

    def spy(self, path):
        loaded.append(Path(path).name)
        return load(self, path)

    StatefulBackend.load_state = spy
    lp = pager(store, states=True)
    chat = lp.conversation(CONV)
    hits = [(h.turn, round(h.score, 4)) for h in chat.search("where is the zebra7 in the garden?", 5)]
    answer = chat.ask("What did I say about the zebra7?", remember=False)
    lp.close()
    print(json.dumps({"hits": hits, "answer": answer.answer}))
    print(json.dumps({"loaded": loaded}))


def _open(store: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(Path(__file__).resolve()), "open", str(store)], check=False,
                          capture_output=True, text=True, env=_env(), timeout=300)


def run_damaged(pristine: Path, work: Path, case: str, clean: subprocess.CompletedProcess | None = None) -> Damaged:
    """Copy ``pristine``'s folder, apply ``DAMAGES[case]`` and open it in a new process (``open_and_use``);
    compare with the same on an undamaged copy (``clean``: that process's outcome, if already run)."""
    if clean is None:
        folder = work / "clean"
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(pristine.parent, folder)
        clean = _open(folder / pristine.name)
    folder = work / "damaged"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(pristine.parent, folder)
    store = folder / pristine.name
    kv = kv_file(store).name
    DAMAGES[case](store)
    damaged = _open(store)
    crashed = damaged.returncode != 0 or "Traceback" in damaged.stderr
    warnings = [line for line in damaged.stderr.splitlines() if line.startswith("WARNING")]
    results = [_lines(p.stdout) for p in (clean, damaged)]
    same = not crashed and clean.returncode == 0 and results[0][:1] == results[1][:1]
    loaded = results[1][1]["loaded"] if len(results[1]) > 1 else []
    detail = "" if not crashed else f"exit {damaged.returncode}: {damaged.stderr.strip()[-400:]}"
    return Damaged(case, crashed, warnings, same, case.startswith("kv") and kv in loaded, detail)


def _lines(text: str) -> list:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


# -- a crafted import ---------------------------------------------------------------------------------------
def crafted_export(store: Path, out: Path, conv: str, new_id: str, floats: int = 8) -> Path:
    """``conv`` exported with its vectors, renamed ``new_id``, every vector replaced by ``floats`` float32s."""
    lp = pager(store)
    try:
        lp.export(out, [conv], vectors=True)
    finally:
        lp.close()
    line = json.loads(out.read_text())
    line["id"] = new_id
    vector = base64.b64encode(np.full(floats, 1 / np.sqrt(floats), dtype=np.float32).tobytes()).decode()
    for row in line["localpager"]["vectors"]:
        row["vector"] = vector
    out.write_text(json.dumps(line) + "\n")
    return out


@dataclass
class CraftedImport:
    """What ``crafted_import`` saw: the import's own outcome (``refused``: a one-line error naming the field,
    and nothing stored; else what happened) and the other conversations that could no longer search or answer
    after it."""

    refused: bool
    message: str
    broken: list[str]


def crafted_import(folder: Path) -> CraftedImport:
    """A store with conversations ``a`` and ``b`` (searched: their vectors stored); ``a`` exported, renamed and
    cut to 8-float vectors, imported; then ``a`` and ``b`` are searched and asked in a new LocalPager."""
    store = folder / "s.db"
    lp = pager(store)
    for conv in ("a", "b"):
        chat = lp.conversation(conv, create=True, config=config())
        for i in range(40):
            chat.add_turn("user", f"{conv} {filler(i)}")
        chat.search("where is the zebra3?")
    lp.close()
    path = crafted_export(store, folder / "crafted.jsonl", "a", "evil")
    from localpager.store.loaders import ConversationFileError

    lp = pager(store)
    try:
        lp.import_file(path)
        refused, message = False, "imported"
    except Exception as exc:  # noqa: BLE001 - the refusal is what is measured
        refused, message = isinstance(exc, ConversationFileError), f"{type(exc).__name__}: {exc}"
    finally:
        lp.close()
    broken = []
    lp = pager(store)
    refused = refused and "evil" not in {c.id for c in lp.conversations()}  # refused before anything was stored
    try:
        for conv in ("a", "b"):
            try:
                chat = lp.conversation(conv)
                chat.search("where is the zebra7?")
                chat.ask("What did I say about the zebra7?", remember=False)
            except Exception as exc:  # noqa: BLE001 - a broken conversation is what is measured
                broken.append(f"{conv}: {type(exc).__name__}: {str(exc)[:200]}")
    finally:
        lp.close()
    return CraftedImport(refused, message, broken)


# -- the figures of benchmarks/faults.py --------------------------------------------------------------------
def figures(folder: Path, rounds: int, log, big: bool = False) -> dict:
    """``faiss_write_back_*`` over ``rounds`` runs of ``run_write_back`` (``big``: the last one on 20,600
    turns, the issue's size, the save deferred as it is in use, about a minute and a half), ``damaged_files_*``
    over every case of ``DAMAGES`` and ``import_*`` from ``crafted_import``, with a line on ``log`` for
    anything that went wrong."""
    out = {"faiss_write_back_runs": 0, "faiss_write_back_seen_before": 0, "faiss_write_back_leaks": 0}
    for r in range(rounds):
        turns = 20_600 if big and r == rounds - 1 else 120
        run = run_write_back(folder / f"w{r}.db", f"Plimquartz{r}", turns)
        out["faiss_write_back_runs"] += 1
        out["faiss_write_back_seen_before"] += bool(run.before)
        out["faiss_write_back_leaks"] += len(run.after)
        if run.after:
            log(f"faiss write-back, round {r}: the forgotten turn is still in {run.after}")
    pristine = folder / "pristine" / "s.db"
    pristine.parent.mkdir(parents=True, exist_ok=True)
    make_store(pristine)
    clean_folder = folder / "clean"
    shutil.copytree(pristine.parent, clean_folder)
    clean = _open(clean_folder / pristine.name)
    cases = [run_damaged(pristine, folder, case, clean) for case in DAMAGES]
    out.update({"damaged_files_cases": len(cases), "damaged_files_crashes": sum(c.crashed for c in cases),
                "damaged_files_wrong_results": sum(not c.crashed and not c.same for c in cases),
                "damaged_files_kv_loaded": sum(c.loaded_damaged for c in cases),
                "damaged_files_not_one_warning": sum(len(c.warnings) != 1 for c in cases)})
    for c in cases:
        if c.crashed or not c.same or c.loaded_damaged or len(c.warnings) != 1:
            log(f"damaged file, {c.case}: crashed={c.crashed} same={c.same} loaded={c.loaded_damaged} "
                f"warnings={c.warnings[:2]} {c.detail}")
    (folder / "import").mkdir(exist_ok=True)
    result = crafted_import(folder / "import")
    out.update({"import_refused": int(result.refused), "import_breaks_others": len(result.broken)})
    if result.broken or not result.refused:
        log(f"crafted import: {result.message[:200]}; broken after it: {result.broken}")
    return out


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(HERE)]
    if sys.argv[1] == "hold-big":
        hold_big(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "open":
        open_and_use(sys.argv[2])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
