"""How the server behaves, as plain data: the guard, the namespace router and the routes all read it,
and it needs no web framework."""

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .protocol import USER_HEADER

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 1_000_000
MAX_TOKENS_CAP = 512
MODEL_ID = "localpager"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
KEEP_ALIVE_S = 5  # an idle connection is closed this long after its last response (uvicorn's keep-alive)
REQUEST_HEAD_S = 10  # a connection must send a whole request head this soon after opening or its last response
REQUEST_BODY_S = 30  # and a request's whole body this soon after its head
SHUTDOWN_GRACE_S = 120  # stopping, requests in flight (streamed ones too) get this long to be answered and stored


@dataclass
class ServerOptions:
    """How the app behaves; the CLI fills it from its flags."""

    api_key: str | None = None
    cors_origins: Sequence[str] = ()
    allowed_hosts: Sequence[str] | None = None  # Host header check (DNS rebinding); None: any host
    max_body_bytes: int = MAX_BODY_BYTES
    max_tokens_cap: int = MAX_TOKENS_CAP
    default_conversation: str | None = None
    user: str | None = None  # whose a chat request is when it sends no X-Localpager-User header (None: nobody's)
    # the headers that say whose a request is, the first sent counting: X-Localpager-User, then any the server is
    # told to read (--user-header: Open WebUI's X-OpenWebUI-User-Id, or a proxy's)
    user_headers: Sequence[str] = (USER_HEADER,)
    budget: int | None = None  # memory budget for the conversations it answers, while it runs (not stored)
    model_id: str = MODEL_ID
    preload: bool = False  # load the chat model and the embedder at start-up, not on the first request
    log: Callable[[str], None] | None = None  # one line per request; default: stderr
    # a keys file: {key: namespace}. A request's key chooses the namespace (a store of its own) it can reach
    api_keys: Mapping[str, str] | None = None
    namespace: str | None = None  # the whole server in this namespace (one user's --api-key)
    # idle connections are closed: seconds after a response, for a request's head, and for its body
    keep_alive_s: float = KEEP_ALIVE_S
    head_timeout_s: float = REQUEST_HEAD_S
    body_timeout_s: float = REQUEST_BODY_S
