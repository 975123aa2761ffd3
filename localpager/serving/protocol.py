"""What the OpenAI-compatible server decides before any model runs, kept apart from the web framework:
errors in OpenAI's shape, which conversation a request names, how a client's resent history lines up with
the stored conversation (``reconcile``) and when a request is a retry (``retried``), ids in headers and
file names, which origins may change state, log lines that cannot be forged, and whether an address is
loopback. Imports nothing heavy, so the logic is tested (and usable) without the ``server`` extra.
"""

from __future__ import annotations

import ipaddress
import unicodedata
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence
from urllib.parse import quote, unquote, urlsplit

from ..core.checks import id_problem

CONVERSATION_HEADERS = ("x-conversation-id", "x-openwebui-chat-id")
USER_HEADER = "X-Localpager-User"  # whose request it is (issue 40): a new conversation is that user's
# what a header value may carry as it is: visible ASCII and the space, but not "%" (the escape itself)
_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


class ApiError(ValueError):
    """An error answered in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param = status, message, type, code, param

    def body(self) -> dict:
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict:
    return {"error": {"message": " ".join(message.split()), "type": type, "param": param, "code": code}}


def check_conversation_id(value: str, source: str) -> str:
    """A conversation id from a client, checked as the store checks ids (printable text of any script, up
    to 200 characters), so every stored conversation can be named over HTTP and none is refused after
    its question is stored."""
    value = value.strip()
    if problem := id_problem(value):
        raise ApiError(400, f"{source} {problem}", code="invalid_conversation_id", param=source)
    return value


def header_id(raw: str) -> str:
    """An id read from a header. Header values are bytes (Starlette hands them over as Latin-1): raw
    UTF-8 is read as UTF-8, then ``%XX`` escapes are decoded, so ``%C5%81ukasz`` and ``Łukasz`` sent as
    UTF-8 both name ``Łukasz`` (an id that itself holds ``%XX`` must be sent escaped: ``%25XX``)."""
    try:
        raw = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass  # not UTF-8 bytes: the Latin-1 reading stands
    return unquote(raw, errors="strict") if "%" in raw else raw


def header_value(text: str) -> str:
    """``text`` as a response header value: visible ASCII as it is, everything else (non-ASCII, control
    characters and ``%`` itself) percent-encoded as UTF-8; ``header_id`` reads it back. A header holds
    Latin-1 only: a raw ``田中`` in one made the response a 500 after the answer was stored."""
    return quote(text, safe=_HEADER_SAFE)


def content_disposition(filename: str) -> str:
    """An attachment header for any file name (RFC 6266): an ASCII ``filename`` for old clients and the
    exact name as RFC 5987 ``filename*``; path separators become ``_`` (an id may hold a slash)."""
    name = filename.replace("/", "_").replace("\\", "_")
    fallback = "".join(c if " " <= c < "\x7f" and c not in '"%' else "_" for c in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def resolve_conversation_id(headers: Mapping[str, str], body: dict[str, Any],
                            default: str | None = None) -> str:
    """Which conversation a request belongs to: the ``X-Conversation-Id`` header, else
    ``X-OpenWebUI-Chat-Id`` (both read by ``header_id``), else the body's ``metadata.conversation_id``,
    else its ``user``, else the server's default; none of these is a 400 that says what to send."""
    for name in CONVERSATION_HEADERS:
        if value := headers.get(name):
            try:
                value = header_id(value)
            except UnicodeDecodeError:
                raise ApiError(400, f"{name} holds a %-escape that is not UTF-8", code="invalid_conversation_id",
                               param=name) from None
            return check_conversation_id(value, name)
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("conversation_id"), str) and metadata["conversation_id"]:
        return check_conversation_id(metadata["conversation_id"], "metadata.conversation_id")
    if isinstance(body.get("user"), str) and body["user"]:
        return check_conversation_id(body["user"], "user")
    if default:
        return default
    raise ApiError(400, "no conversation named: send the header X-Conversation-Id (or X-OpenWebUI-Chat-Id), "
                        "or metadata.conversation_id or user in the body", code="missing_conversation_id",
                   param="X-Conversation-Id")


_TOKEN_CHARS = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def check_header_name(name: str) -> str:
    """``name`` as a header a request may send (an HTTP token), or a ``ValueError`` saying it is not one."""
    name = name.strip()
    if not name or not set(name) <= _TOKEN_CHARS:
        raise ValueError(f"--user-header {name!r} is not a header name (letters, digits and !#$%&'*+-.^_`|~ only)")
    return name


def user_header(headers: Mapping[str, str], names: Sequence[str] = (USER_HEADER,)) -> str | None:
    """The first of the header ``names`` (``ServerOptions.user_headers``) the request sends, if any (``headers``:
    a request's, which match names in any case)."""
    return next((name for name in names if name in headers), None)


def resolve_user(headers: Mapping[str, str], default: str | None = None,
                 names: Sequence[str] = (USER_HEADER,)) -> str | None:
    """Whose request it is: the first of the headers ``names`` it sends (``X-Localpager-User``, then any the server
    was told to read, such as Open WebUI's ``X-OpenWebUI-User-Id``; read by ``header_id``), else the server's
    ``--user`` (None: nobody's, as before users). The name is checked as the store checks it (``check_user``); a
    bad one, an empty header included, is a 400 rather than a request of nobody's or of the default user."""
    from ..store.base import check_user

    name = user_header(headers, names)
    if name is None:
        return default
    try:
        return check_user(header_id(headers[name].strip()))
    except UnicodeDecodeError:
        raise ApiError(400, f"{name} holds a %-escape that is not UTF-8", code="invalid_user", param=name) from None
    except ValueError as exc:
        raise ApiError(400, f"{name}: {exc}", code="invalid_user", param=name) from None


def not_theirs(conv_id: str, owner: str | None, user: str, param: str = USER_HEADER) -> ApiError:
    """The 403 for a request of ``user`` naming a conversation of another user (``owner``) or of nobody (None):
    one user's memory is theirs, and a conversation of nobody's stays nobody's. ``param``: what named the user (the
    header the request sent, ``--user-header``'s too) or the conversation (a body's field)."""
    whose = f"user {owner!r}" if owner is not None else "no user"
    return ApiError(403, f"conversation {conv_id!r} belongs to {whose}, not to user {user!r}: name a conversation "
                         "of theirs, or a new one", type="permission_error", code="conversation_of_another_user",
                    param=param)


@dataclass(frozen=True)
class Msg:
    """One user or assistant message, compared by role and whitespace-normalised text."""

    role: str
    text: str

    @cached_property
    def key(self) -> tuple[str, str]:  # computed once: a history is matched more than once (retry, reconcile)
        return self.role, " ".join(self.text.split())


@dataclass
class Reconciliation:
    """What to do with a client's history: ``status`` is ``in-sync`` (the store has all of it),
    ``appended`` (the store lacked its last ``len(new)`` turns) or ``diverged`` (it disagrees with the
    store, which wins: nothing of it is stored); ``matched`` is how many client turns matched."""

    status: str
    new: list[Msg] = field(default_factory=list)
    matched: int = 0


def reconcile(stored: Sequence[Msg], client: Sequence[Msg]) -> Reconciliation:
    """Match the client's history (before its question) against the stored conversation's tail.

    The client's turns, from their start, must be the store's last turns (a client may send a trailing
    window; a turn forgotten in the store matches whatever the client still shows of it, and stays
    forgotten); whatever follows them is new and is appended. Anything else has diverged (an edited or
    foreign history): the store is the truth and no turn of it is stored, so no turn is ever duplicated.
    The longest such overlap is found in time about linear in the two histories (``longest_overlap``).
    """
    if not client:
        return Reconciliation("in-sync")
    if not stored:
        return Reconciliation("appended", list(client))
    j = longest_overlap(stored, client)
    if not j:
        return Reconciliation("diverged")
    new = list(client[j:])
    return Reconciliation("appended" if new else "in-sync", new, j)


def _same(stored: Msg, client: Msg) -> bool:
    """A stored turn and a client's turn are the same message; a forgotten one (no text) is any of its role."""
    return stored.key == client.key or (stored.role == client.role and not stored.key[1])


def _overlaps(stored: Sequence[Msg], client: Sequence[Msg], j: int) -> bool:
    """Whether the client's first ``j`` turns are the store's last ``j``."""
    start = len(stored) - j
    return all(_same(stored[start + i], client[i]) for i in range(j))


def longest_overlap(stored: Sequence[Msg], client: Sequence[Msg]) -> int:
    """The largest ``j`` such that the client's first ``j`` turns are the store's last ``j`` (``_same``), or 0.

    Trying every ``j`` from the largest, each compared turn by turn, is quadratic: 24,000 stored one-word turns
    and a 782 KB history took 82 s. Here every ``j`` is scored at once by three correlations computed with FFTs
    (O(N log N) for N = both histories): each distinct message gets a random value, and for each ``j`` the sum
    over its turns of ``(stored - client)**2`` (a forgotten stored turn compared by its role only) is 0 exactly
    when they all match, or when different messages drew the same value. The best ``j`` scored 0 is checked turn
    by turn, and a false one draws new values. The full overlap, the common case, is checked first, directly."""
    n, m = len(stored), len(client)
    top = min(n, m)
    if _overlaps(stored, client, top):
        return top
    stored = stored[n - top:]  # an overlap is never longer than the client's history
    for _ in range(8):
        for j in _scored_overlaps(stored, client):
            if _overlaps(stored, client, j):
                return j
            break  # values collided (1 chance in 127 a message): draw new ones
        else:
            return 0
    return next((j for j in range(top - 1, 0, -1) if _overlaps(stored, client, j)), 0)  # never in practice


def _scored_overlaps(stored: Sequence[Msg], client: Sequence[Msg]):
    """The ``j`` whose score (see ``longest_overlap``) is 0, largest first, under one draw of values (from the
    operating system's entropy: a client cannot choose messages whose values collide)."""
    import numpy as np

    rng = np.random.default_rng()
    ids: dict[Any, int] = {}
    s_ids = [ids.setdefault(msg.key, len(ids)) if msg.key[1] else -1 for msg in stored]
    c_ids = [ids.setdefault(msg.key, len(ids)) for msg in client]
    roles: dict[str, int] = {}
    s_roles = [roles.setdefault(msg.role, len(roles)) for msg in stored]
    c_roles = [roles.setdefault(msg.role, len(roles)) for msg in client]
    values = rng.integers(1, 128, size=len(ids) + 1).astype(np.float64)  # values[-1]: unused
    role_values = rng.integers(1, 128, size=len(roles)).astype(np.float64)
    s_ids, s_roles = np.array(s_ids), np.array(s_roles)
    forgotten = (s_ids < 0).astype(np.float64)
    a = np.where(s_ids >= 0, values[s_ids], 0.0)  # a stored message's value; 0 for a forgotten turn
    r = forgotten * role_values[s_roles]  # a forgotten turn's role value; 0 for the others
    b, rc = values[np.array(c_ids)], role_values[np.array(c_roles)]
    n, m = len(stored), len(client)
    size = 1 << (n + m).bit_length()
    fft, ifft = np.fft.rfft, np.fft.irfft
    reverse = lambda x: fft(x[::-1], size)  # noqa: E731 - correlation as a convolution with the client reversed
    # sum over the window starting at stored turn d of (a - b)**2 for kept turns, (r - rc)**2 for forgotten ones
    cross = ifft(fft(a, size) * reverse(-2 * b) + fft((a > 0).astype(np.float64), size) * reverse(b * b)
                 + fft(r, size) * reverse(-2 * rc) + fft(forgotten, size) * reverse(rc * rc), size)[m - 1 : m - 1 + n]
    suffix = np.cumsum((a * a + r * r)[::-1])[::-1]  # the stored side's own squares, from d to the end
    score = suffix + cross  # score[d]: the overlap j = n - d
    for d in np.flatnonzero(np.abs(score) < 0.5):
        if n - d <= m:
            yield int(n - d)


def retried(stored: Sequence[Msg], client: Sequence[Msg], question: str) -> int | None:
    """The index of the stored question that this request asks again, or None: the idempotency rule.

    A client that got no answer (a 500, a timeout, a dropped stream) resends the same history and
    question. If the store ends with that question and an answer to it, and the client's history lines
    up with the store just before that question (``reconcile`` finds it in sync), the request is a retry:
    the stored answer is the answer, and nothing is stored again. A client that shows the answer and asks
    the same question once more sends a longer history: that is a new question."""
    if len(stored) < 2 or stored[-1].role != "assistant" or stored[-2].key != Msg("user", question).key:
        return None
    if reconcile(stored[:-2], client).status != "in-sync":
        return None
    return len(stored) - 2


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, or the text parts of a list of parts. A text
    part whose ``text`` is not a string is a client's error (400), not the server's."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise ApiError(400, "a text part's text must be a string", param="messages")
    return "\n".join(texts)


def is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost: it may resolve anywhere


def origin_allowed(origin: str, host: str, cors_origins: Sequence[str]) -> bool:
    """May a request from the web page at ``origin`` (its ``Origin`` header) change state? Yes from a
    loopback origin, from this server's own origin (the inspector, on whatever address it is served) and
    from a ``--cors-origin``; no from any other web page (an ``Origin`` of ``null`` included), whatever
    the request's content type."""
    if "*" in cors_origins or origin in cors_origins:
        return True
    try:
        parts = urlsplit(origin)
        hostname = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not hostname:
        return False
    return is_loopback(hostname) or parts.netloc.lower() == host.lower()


def opaque_origin(origin: str) -> bool:
    """An origin that names no site: ``null`` (a sandboxed iframe, a ``data:`` page) or one without a host
    (``file://``). Any web page can make a frame or a page that sends it."""
    origin = origin.strip().lower()
    if origin in ("null", ""):
        return True
    try:
        return not urlsplit(origin).netloc
    except ValueError:
        return True


def check_cors(cors_origins: Sequence[str], api_key: str | None) -> None:
    """``*`` lets every web page read the answers, and so does an opaque origin (``null``: any page can send
    ``Origin: null`` from a sandboxed iframe). Both only behind a key."""
    for origin in cors_origins:
        if (origin.strip() == "*" or opaque_origin(origin)) and not api_key:
            who = "any web page" + ("" if origin.strip() == "*" else " (a sandboxed frame sends Origin: null)")
            raise ValueError(f"--cors-origin {origin.strip()!r} lets {who} use the server and read your "
                             "conversations: it needs --api-key (or --api-key-file, or LOCALPAGER_API_KEY)")


def forbidden_origin_message(origin: str) -> str:
    """Why a request from the page at ``origin`` may not change anything, and how to allow a site; an opaque
    origin (``null``) could be any page, so nothing suggests allowing it."""
    if opaque_origin(origin):
        return (f"requests from a web page without a site of its own (Origin {origin!r}: a sandboxed frame, a data: "
                "or file: page, which any web page can make) may not change anything here")
    return (f"requests from the web page at {origin!r} may not change anything here; start the server with "
            f"--cors-origin {origin} to allow it")


def escape_controls(line: str) -> str:
    """``line`` with every control, format or unassigned character and every line or paragraph separator
    written as an escape (``\\n``, ``\\x1b``, ``\\u202e``, ``\\u2028``), so that text from a request (a path
    with ``%0a``, an escape sequence) can neither start a forged log line, for a terminal or for any reader
    that splits lines as ``str.splitlines`` does, nor drive the terminal."""
    return "".join(c.encode("unicode_escape").decode("ascii") if _escaped(c) else c for c in line)


def _escaped(c: str) -> bool:
    category = unicodedata.category(c)
    return category[0] == "C" or category in ("Zl", "Zp")  # Zl, Zp: U+2028 and U+2029, breaks to splitlines


def finish_reason(stopped: str | None) -> str:
    """OpenAI's ``finish_reason`` for why the answer's generation ended (``Trace.stopped``)."""
    return "length" if stopped == "length" else "stop"


def check_bind(host: str, allow_remote: bool) -> str | None:
    """Refuse a non-loopback address unless ``allow_remote``; the warning to print when it is allowed."""
    if is_loopback(host):
        return None
    if not allow_remote:
        raise ValueError(f"refusing to serve on {host}: it is reachable from other machines and your "
                         "conversations are private; use --allow-remote (with --api-key) if you mean it")
    return (f"warning: serving on {host}, reachable from other machines; anyone who can reach it can use the "
            "model and read your conversations unless --api-key is set")


def parse_api_keys(text: str, source: str = "the keys file") -> dict[str, str]:
    """An API keys file: one ``NAMESPACE KEY`` a line (blank lines and ``#`` comments skipped) as
    ``{key: namespace}``. A namespace names a store of its own (``LocalPager.namespace``: lower-case letters,
    digits and ``_``); a key is one word of visible ASCII, at most one namespace's; a namespace may have
    several keys. Any problem is one ``ValueError`` naming the line."""
    from ..store.naming import check_namespace

    keys: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ValueError(f"{source}, line {number}: expected NAMESPACE KEY")
        namespace, key = parts
        try:
            check_namespace(namespace)
        except ValueError as exc:
            raise ValueError(f"{source}, line {number}: {exc}") from None
        if not key.isascii() or not key.isprintable():
            raise ValueError(f"{source}, line {number}: the key must be one word of visible ASCII characters")
        if key in keys:
            raise ValueError(f"{source}, line {number}: this key is already {keys[key]!r}'s (a key opens one namespace)")
        keys[key] = namespace
    if not keys:
        raise ValueError(f"{source} holds no key (one NAMESPACE KEY a line)")
    return keys
