"""Which store a ``--store`` value, ``$LOCALPAGER_STORE`` or ``LocalPager(...)`` names: a SQLite file (a path,
the default) or a PostgreSQL database (``postgresql://USER@HOST:PORT/DB``), and opening it.

A value that looks like a URL is never taken for a file name: ``postgresql://…`` opens the PostgreSQL store
(extra ``postgres``), any other scheme is a one-line error (before, ``--store postgresql://…`` silently made
a SQLite file in a folder named ``postgresql:``). Standard library only until a store is opened.
"""

from __future__ import annotations

import os
from pathlib import Path

from .naming import check_namespace, is_url

POSTGRES_SCHEMES = ("postgresql", "postgres")


def store_location(value: str | os.PathLike | None) -> Path | str:
    """A SQLite file as a ``Path``, or a database URL as a ``str`` (with the ``//`` a ``Path`` dropped put
    back); ``None``: ``$LOCALPAGER_STORE``, else the default file in the user's data directory."""
    if value is None:
        from .sqlite import STORE_ENV, default_store_path

        env = os.environ.get(STORE_ENV)
        if env and is_url(env):
            value = env
        else:
            return default_store_path()
    text = os.fspath(value)
    if not is_url(text):
        return Path(text).expanduser()
    scheme, rest = text.split(":", 1)
    if not rest.startswith("//"):
        rest = "/" + rest  # Path("postgresql://u@h/db") is postgresql:/u@h/db
    if scheme.lower() not in POSTGRES_SCHEMES:
        from .base import StoreError

        raise StoreError(f"unsupported store URL {scheme}://…: a store is a SQLite file path or "
                         "postgresql://USER@HOST:PORT/DB")
    return f"{scheme}:{rest}"


def is_postgres(location: Path | str) -> bool:
    return isinstance(location, str) and is_url(location)


def open_store(value=None, *, key: str | None = None, create: bool = True):
    """The store ``value`` names (see ``store_location``). ``create=False``: it must exist already (no file
    is created; a PostgreSQL database must hold localpager's tables)."""
    from .base import Store, StoreError
    from .sqlite import SQLiteStore

    if isinstance(value, Store):
        return value
    location = store_location(value)
    if is_postgres(location):
        from .postgres import PostgresStore

        return PostgresStore(location, key=key, create=create)
    if not create and not location.exists():
        raise StoreError(f"no store at {location} (ingest a file or start a chat to create one)")
    return SQLiteStore(location, key=key)



def namespace_store(store, name: str):
    """The store of namespace ``name`` beside ``store``: a schema of its own in a PostgreSQL database, a file of
    its own (``<store>.namespaces/NAME.db``) beside a SQLite store. Either way its tables, counters and locks
    are its own: nothing in it can name another namespace's rows."""
    check_namespace(name)
    return store.namespace(name)
