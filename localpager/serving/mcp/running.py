"""Running the MCP server as ``localpager mcp``, a process a desktop app launches and talks to over stdin and
stdout. Its store is opened with no chat model (``backends.nomodel.NoChatModel``): the app keeps its own model,
so ``recall`` and ``search`` load the embedder only, and ``remember``/``correct`` count tokens with the
four-characters estimate, stored as the conversation's tokenizer (``approx``) so that the next ``ask`` with a
model recounts. stdout carries protocol messages only (the SDK's stdio transport moves fd 1 to stderr while it
serves; logs and progress bars go to stderr)."""

from __future__ import annotations

import logging
import os
import sys
import threading

from ...backends.nomodel import NoChatModel
from ...memory.api import LocalPager
from .server import build_server

log = logging.getLogger("localpager.mcp")

QUIET_ENV = {"TQDM_DISABLE": "1", "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
             "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def quiet() -> None:
    """Progress bars off and logs to stderr, before anything that could print is imported (stdout is the
    protocol's: one stray line there breaks the client)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)  # at the handler: bm25s sets DEBUG on its own logger when imported
    handler.setFormatter(logging.Formatter("localpager mcp: %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


def open_store(path: str | os.PathLike, key: str | None = None) -> LocalPager:
    """The store opened with no chat model (``NoChatModel``): nothing loads a GGUF file."""
    return LocalPager(path, backend=NoChatModel(), key=key)


def warm_up(lp: LocalPager, conversation: str | None = None) -> None:
    """In the background, so that the first call waits for less of it: the embedder loads, and for a pinned
    conversation what its first recall would build (its BM25 index, its FAISS index, its resident turns'
    vectors). A call that comes first simply waits for the ``LocalPager``'s lock."""
    lp.warm_embedder()
    if conversation is None or not lp.store.has_conversation(conversation):
        return

    def search() -> None:
        try:
            lp.conversation(conversation).search("what did I say", 1)
        except Exception as exc:  # noqa: BLE001 - a warm-up: the first call reports any real problem itself
            log.debug("warm-up of %r: %s", conversation, exc)

    threading.Thread(target=search, name="localpager-mcp-warm-up", daemon=True).start()


def serve_stdio(lp: LocalPager, *, conversation: str | None = None, read_only: bool = False,
                user: str | None = None) -> None:
    """Serve ``lp`` over stdin/stdout until the client closes stdin. One line to stderr when it starts."""
    quiet()
    server = build_server(lp, conversation=conversation, read_only=read_only, user=user)
    own = server.memory.default
    scope = (f"conversation {conversation!r}" if conversation else
             f"user {user!r}'s conversations (their own: {own!r})" if user is not None else "every conversation")
    what = [f"store {lp.store.path}", scope, "read-only" if read_only else "read-write", f"pid {os.getpid()}"]
    print(f"localpager mcp: serving {', '.join(what)} over stdio", file=sys.stderr, flush=True)
    warm_up(lp, own)
    sys.stdout.flush()
    if hasattr(sys.stdout, "reconfigure"):  # a stray print while serving reaches fd 1 (stderr then) at once
        sys.stdout.reconfigure(line_buffering=True)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        # the transport gave fd 1 back to the client's pipe: what is still buffered goes to stderr, not to it
        try:
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
