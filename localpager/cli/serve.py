"""Memory for other programs: ``serve`` (an OpenAI-compatible chat API with memory, and the inspector) and
``mcp`` (memory as MCP tools over stdio). Each needs its extra; the server itself is in ``localpager.serving``."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import NoReturn

import click

from .options import user_option
from .session import friendly_errors, open_pager, store_key, user_name
from .settings import global_options

SERVER_MODULES = ("fastapi", "uvicorn", "sse_starlette", "starlette", "pydantic", "anyio")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on (loopback only "
              "unless --allow-remote)")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--api-key", envvar="LOCALPAGER_API_KEY", default=None,
              help="require Authorization: Bearer KEY on /v1; better from the environment (LOCALPAGER_API_KEY) or "
                   "--api-key-file, since other users of the machine see a command line (ps)")
@click.option("--api-key-file", type=click.Path(dir_okay=False), default=None,
              help="read the API key from this file (one line; keep it readable by you only)")
@click.option("--api-keys-file", type=click.Path(dir_okay=False), default=None,
              help="one NAMESPACE KEY a line: a request's key reaches its namespace's conversations only (each "
                   "namespace a store of its own: docs/deployment.md)")
@click.option("--namespace", default=None,
              help="serve one namespace's conversations only (a store of its own; e.g. one user's --api-key)")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="allow this browser origin to call the API and change memory (repeatable; default none: only "
                   "loopback pages and the inspector may change anything; '*' needs an API key)")
@click.option("--allow-remote", is_flag=True, help="allow a --host reachable from other machines")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="memory budget in model tokens for every conversation the server answers, while it runs "
                   "(the stored budget stays; `localpager budget` stores one)")
@click.option("--max-tokens", type=click.IntRange(min=1), default=512, show_default=True,
              help="cap on a request's max_tokens")
@click.option("--max-body", type=click.IntRange(min=1024), default=1_000_000, show_default=True,
              help="largest request body in bytes")
@click.option("--default-conversation", default=None,
              help="conversation for requests that name none (default: such a request is a 400)")
@click.option("--user-header", envvar="LOCALPAGER_USER_HEADER", default=None, metavar="NAME",
              help="also read whose a request is from this header when it sends no X-Localpager-User (Open WebUI "
                   "with ENABLE_FORWARD_USER_INFO_HEADERS: X-OpenWebUI-User-Id); trust it only from a client that "
                   "sets it itself")
@click.option("--model", type=click.Path(), envvar="LOCALPAGER_MODEL",
              help="GGUF chat model (default: SmolLM2-135M-Instruct; env LOCALPAGER_MODEL)")
@click.option("--n-ctx", type=click.IntRange(min=128), default=2048, show_default=True, help="model context size")
@click.option("--no-preload", is_flag=True, help="load the models on the first request, not at start-up")
@user_option
@click.pass_context
def serve(ctx, host, port, api_key, api_key_file, api_keys_file, namespace, cors_origins, allow_remote, budget,
          max_tokens, max_body, default_conversation, user_header, model, n_ctx, no_preload):
    """Serve an OpenAI-compatible chat API with memory (/v1/chat/completions) and a memory inspector (/).

    Name the conversation with the header X-Conversation-Id (or X-OpenWebUI-Chat-Id); an id outside ASCII
    goes percent-encoded as UTF-8 (%C5%81ukasz), and the server's headers send ids the same way. The header
    X-Localpager-User: NAME (default --user) makes a new conversation NAME's, answered from NAME's facts;
    --user-header X-OpenWebUI-User-Id gives each Open WebUI account its own memory.

    The API key: LOCALPAGER_API_KEY=KEY localpager serve, or --api-key-file FILE."""
    from ..serving.protocol import USER_HEADER, check_bind, check_conversation_id, check_cors, check_header_name
    from ..store.base import check_user

    api_key = serve_api_key(ctx, api_key, api_key_file)
    api_keys = serve_api_keys(ctx, api_keys_file, api_key_file, namespace)
    try:
        check_cors(cors_origins, api_key or api_keys)
        user_headers = (USER_HEADER,) if user_header is None else (USER_HEADER, check_header_name(user_header))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if budget is not None and budget >= n_ctx:
        raise click.UsageError(f"--budget {budget} leaves no room in a context of {n_ctx} tokens (--n-ctx) for the "
                               "question and the answer")
    server_options, run_server = server_parts(ctx)
    with friendly_errors():
        warning = check_bind(host, allow_remote)
        if default_conversation:
            check_conversation_id(default_conversation, "--default-conversation")
        user = user_name(ctx)
        if user is not None:
            check_user(user)
        lp = open_pager(ctx, model, n_ctx=n_ctx)
    if warning:
        click.echo(warning, err=True)
    options = server_options(api_key=None if api_keys else api_key, api_keys=api_keys, namespace=namespace,
                             cors_origins=cors_origins, max_tokens_cap=max_tokens, budget=budget,
                             max_body_bytes=max_body, default_conversation=default_conversation, user=user,
                             user_headers=user_headers, preload=not no_preload)
    with friendly_errors():
        stopped_by = run_server(lp, host, port, options)
    if stopped_by is not None:
        leave(ctx, 128 + stopped_by)


def leave(ctx: click.Context, status: int) -> NoReturn:
    """After SIGTERM or SIGINT stopped the server (the requests in flight answered, their answers stored): close
    the store (the KV cache and deferred FAISS indexes saved for the next process), say "stopped" on stderr, and
    end the process at once with ``status`` (128 + the signal, as the shell reports a process the signal ended).
    Everything the process owns is closed by then; what ``os._exit`` skips is the interpreter freeing its objects
    one by one (the models' among them), which took 0.3-1.4 s more on two busy cores."""
    with friendly_errors():
        ctx.close()  # ctx.call_on_close: lp.close
    click.echo("localpager serve: stopped", err=True)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def server_parts(ctx: click.Context):
    """(``ServerOptions``, ``serve``) of ``localpager.serving.app``, or exit 1 saying which extra it needs."""
    try:
        from ..serving.app import ServerOptions
        from ..serving.app import serve as run_server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in SERVER_MODULES:
            click.echo("localpager serve needs the server extra: pip install 'localpager[server]'", err=True)
            ctx.exit(1)
        raise
    return ServerOptions, run_server


def serve_api_keys(ctx: click.Context, keys_file: str | None, key_file: str | None,
                   namespace: str | None) -> dict[str, str] | None:
    """``--api-keys-file``: {key: namespace}; None without it."""
    from click.core import ParameterSource

    if keys_file is None:
        if namespace is not None:
            from ..store.naming import check_namespace

            try:
                check_namespace(namespace)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
        return None
    if key_file is not None or ctx.get_parameter_source("api_key") == ParameterSource.COMMANDLINE or namespace:
        raise click.UsageError("--api-keys-file names every key and its namespace: give no --api-key, "
                               "--api-key-file or --namespace with it")
    from ..serving.protocol import parse_api_keys

    try:
        return parse_api_keys(Path(keys_file).read_text(encoding="utf-8"), f"--api-keys-file {keys_file}")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


def serve_api_key(ctx: click.Context, api_key: str | None, key_file: str | None) -> str | None:
    """The server's key: from ``--api-key-file``, ``LOCALPAGER_API_KEY`` or ``--api-key`` (with a warning:
    other users of the machine can read a command line)."""
    from click.core import ParameterSource

    on_command_line = api_key is not None and ctx.get_parameter_source("api_key") == ParameterSource.COMMANDLINE
    if key_file is not None:
        if on_command_line:
            raise click.UsageError("give --api-key or --api-key-file, not both")
        try:
            api_key = Path(key_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise click.UsageError(f"cannot read --api-key-file {key_file}: {exc}") from None
    elif on_command_line:
        click.echo("warning: --api-key on the command line is visible to other users of this machine (ps); "
                   "use LOCALPAGER_API_KEY or --api-key-file", err=True)
    if api_key is None or (key_file is None and not api_key):
        return None  # an empty LOCALPAGER_API_KEY means no key, as before
    if not api_key or not api_key.isascii() or not api_key.isprintable() or " " in api_key:
        raise click.UsageError("the API key must be one word of visible ASCII characters"
                               + (f" (in {key_file})" if key_file else ""))
    return api_key


@click.command(name="mcp")
@click.option("--conversation", default=None,
              help="serve this conversation only: the tools take no conversation argument (for an app without "
                   "conversations)")
@click.option("--read-only", is_flag=True, help="only recall, search, bookmarks, conversations and facts: nothing "
              "is added, corrected or erased")
@user_option
@click.pass_context
def mcp_cmd(ctx, conversation, read_only):
    """Serve memory as MCP tools over stdio, for an app whose own model answers (Claude Desktop, LM Studio,
    Jan, Cursor, Continue): recall, search, bookmarks, conversations, facts, remember, forget, correct,
    edit_fact, delete_fact. With --user NAME the tools act on NAME's memory, and conversation defaults to NAME's
    own.

    Loads no GGUF model; stdout carries protocol messages only. Setup per app: docs/mcp.md."""
    try:
        from ..serving.mcp import open_store, serve_stdio
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in ("mcp", "mcp_types"):
            raise click.ClickException("localpager mcp needs the mcp extra: pip install 'localpager[mcp]'") from None
        raise
    from ..store.base import check_user
    from ..store.location import store_location

    with friendly_errors():
        path = store_location(global_options(ctx).store)
        if (user := user_name(ctx)) is not None:
            check_user(user)
    if read_only and isinstance(path, Path) and not path.exists():
        raise click.ClickException(f"no store at {path} (--read-only opens an existing store)")
    with friendly_errors():
        lp = open_store(path, key=store_key(ctx))
        ctx.call_on_close(lp.close)
        serve_stdio(lp, conversation=conversation, read_only=read_only, user=user)


COMMANDS = (serve, mcp_cmd)
