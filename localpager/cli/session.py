"""What a command opens, from the global options (``settings.GlobalOptions``): the ``LocalPager`` of ``--store``
(with ``--key-env``'s key and the model's options), and known failures as one-line errors."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import click

from .settings import global_options, invocation

# optional dependencies by top-level module, and the extra (pyproject.toml) that installs each
OPTIONAL_MODULES = {"matplotlib": "eval", "fastapi": "server", "uvicorn": "server", "sse_starlette": "server",
                    "starlette": "server", "httpx": "http", "sqlcipher3": "encrypt", "psycopg": "postgres",
                    "psycopg_pool": "postgres"}


@contextmanager
def friendly_errors():
    """Known failures become one-line errors; anything else stays a traceback (a bug to report)."""
    from ..backends.base import BackendError
    from ..core.modelpaths import ModelNotFoundError
    from ..store.base import ConversationNotFound, StoreError
    from ..store.loaders import ConversationFileError

    try:
        yield
    except ConversationNotFound as exc:  # a mistyped id: the ids close to it, as click does for commands
        raise click.ClickException(f"{str(exc).splitlines()[0]}{_close_ids()}") from None
    except ModuleNotFoundError as exc:  # an optional dependency: say which extra brings it
        extra = OPTIONAL_MODULES.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        raise click.ClickException(f"this needs {exc.name}, which is not installed: "
                                   f"pip install 'localpager[{extra}]'") from None
    except (BackendError, ConversationFileError, ModelNotFoundError, StoreError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from None


def _close_ids() -> str:
    """``"; did you mean 'x'?"`` for the conversation id the running command was given (its ``conv_id``) among
    the ids of the store it opened; ``""`` when it gave none or opened none."""
    from ..core.checks import did_you_mean
    from ..store.base import StoreError

    ctx = click.get_current_context(silent=True)
    wanted = ctx.params.get("conv_id") if ctx is not None else None
    store = invocation(ctx).opened_store if ctx is not None else None
    if not isinstance(wanted, str) or store is None:
        return ""
    try:
        return did_you_mean(wanted, [info.id for info in store.list_conversations()])
    except StoreError:
        return ""


def open_pager(ctx: click.Context, model: str | None = None, *, create: bool = True, n_ctx: int | None = None,
               recall=None):
    """The LocalPager of ``--store``, its models loading with the global options and ``model``, ``n_ctx``
    and ``recall`` (a ``RecallSettings``). Without ``create`` the store must exist: commands that only read it,
    or need a conversation already in it, never leave an empty store behind."""
    from ..memory.api import LocalPager
    from ..store.base import StoreError
    from ..store.location import open_store

    try:  # a SQLite file, or postgresql://USER@HOST:PORT/DB (store.location)
        store = open_store(global_options(ctx).store, key=store_key(ctx), create=create)
    except StoreError as exc:
        raise click.ClickException(str(exc)) from None
    invocation(ctx).opened_store = store  # a mistyped conversation id is answered with the ids close to it
    lp = LocalPager(store, options=global_options(ctx).model_options(model, n_ctx), recall=recall)
    ctx.call_on_close(lp.close)  # saves the chat's KV cache for the next command (localpager.store.kvstate)
    return lp


def new_store_path(ctx: click.Context) -> Path | None:
    """The SQLite file ``--store`` names when nothing is there yet, else None (a store that exists, or a
    database URL): a command that creates it and fails before storing anything removes it again
    (``store.sqlite.remove_empty``), so that a malformed file leaves no empty store behind."""
    from ..store.location import store_location

    value = global_options(ctx).store
    location = store_location(value) if value is None or isinstance(value, (str, os.PathLike)) else None
    return location if isinstance(location, Path) and not location.exists() else None


def open_conversation(ctx: click.Context, conv_id: str):
    """An existing conversation of an existing store (with ``--user``, one of that user's); no model loads until a
    command needs one."""
    return open_pager(ctx, create=False).conversation(conv_id, user=user_name(ctx))


def user_name(ctx: click.Context) -> str | None:
    """``--user``: whose conversations the command creates, opens and lists (None: anyone's)."""
    return global_options(ctx).user


def open_user(ctx: click.Context, lp=None):
    """The ``User`` of ``--user`` in the store (a user no conversation belongs to: one line, the close names)."""
    return (lp or open_pager(ctx, create=False)).user(user_name(ctx))


def scope(ctx: click.Context, conv_id: str | None, command: str) -> None:
    """A command that acts on CONV_ID, or with ``--user`` and no CONV_ID on all of that user's conversations: one
    of the two."""
    if conv_id is None and user_name(ctx) is None:
        raise click.UsageError(f"give CONV_ID, or --user NAME to {command} all of a user's conversations")


def store_key(ctx: click.Context) -> str | None:
    """The encryption key named by ``--key-env`` (read from that environment variable), or None."""
    name = global_options(ctx).key_env
    if not name:
        return None
    key = os.environ.get(name)
    if not key:
        raise click.ClickException(f"--key-env {name}: the environment variable {name} is not set or empty")
    return key
