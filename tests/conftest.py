"""Shared fixtures. The real default models are loaded once per test session; the fakes of
``tests/fakes.py`` stand in for them in the fast layer (``make test-fast``).

Tests live in two folders, by what they need: ``tests/fast/`` (neither real model; ``make test-fast`` runs
this folder) and ``tests/model/`` (the real GGUF or the real embedder). Helpers both use are in
``tests/helpers.py``, ``tests/fakes.py`` and ``tests/faultkit.py`` (this file puts ``tests/`` on ``sys.path``).

Markers (pyproject.toml): ``model`` for every test that loads the GGUF file (the chat model or only its
tokenizer), ``embedder`` for every test that runs the real sentence-transformers embedder, ``slow`` for
tests of more than a few seconds. The run stops before any test when a test under ``tests/fast/`` is marked
``model`` or ``embedder``, one under ``tests/model/`` is marked neither, or a test file is outside both
folders. A test without ``model`` that reaches for the GGUF file, or without ``embedder`` that loads the
real embedder (or imports torch), fails here with a message saying which marker it lacks; subprocesses
(the CLI tests) are caught by ``make test-fast`` pointing ``LOCALPAGER_MODEL`` and ``LOCALPAGER_EMBEDDER``
at nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # `from fakes import ...`, `from helpers import ...` in test modules

from fakes import HashEmbedder, ScriptedBackend  # noqa: E402

# -- pytest-xdist: `make test` and `make test-fast` run `pytest -n auto --dist loadfile --no-loadscope-reorder` --
# Each worker is a process with its own session fixtures (the models, the PostgreSQL cluster: one per worker, on a
# free port and a folder of its own) and its own tmp_path root. The workers share the cores: llama.cpp's threads
# spin while they wait, so a worker whose model took both cores of two while the other worker paused answered about
# ten times slower once the other resumed (2 threads: 48 tokens in 33-48 s, 1 thread: 4.4 s, on this 2-core VM
# under load). Each worker's models take the cores divided among the workers (LOCALPAGER_THREADS, inherited by the
# CLI and server subprocesses); a test that sets its own count keeps it, and tests/fast/test_threads.py tests the
# default with the variable removed.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")  # "gw0", "gw1"... in a worker; None in a plain run
if XDIST_WORKER:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    os.environ.setdefault("LOCALPAGER_THREADS", str(max(1, _cores // max(1, _workers))))

# -- hypothesis: a lighter count of examples unless the full one is asked for ---------------------------------
# A property test says both counts (helpers.examples(fast=..., full=...)): `make test-fast` and `make test` run the
# fast one, HYPOTHESIS_PROFILE=full (or --hypothesis-profile=full) the full one; a property test that says no count
# runs the profile's. Each run draws new examples, so the full count is reached over a few runs too.
from hypothesis import settings as hypothesis_settings  # noqa: E402

hypothesis_settings.register_profile("fast", max_examples=50)
hypothesis_settings.register_profile("full", max_examples=100)  # hypothesis's own default
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or "fast")

MODEL_FIXTURES = {"backend", "counter"}
HEAVY_MODULES = ("torch", "sentence_transformers", "transformers")
REAL_MODELS = ("model", "embedder")  # the markers of tests/model/


def misplaced(item) -> str | None:
    """Why ``item`` is in the wrong folder for its markers, or None."""
    marked = [m for m in REAL_MODELS if item.get_closest_marker(m)]
    folder = item.path.relative_to(TESTS).parts[0] if TESTS in item.path.parents else None
    if folder == "fast" and marked:
        return f"is marked {' and '.join(marked)}: it belongs in tests/model/"
    if folder == "model" and not marked:
        return "is marked neither model nor embedder: it belongs in tests/fast/ (or lacks its marker)"
    if folder not in ("fast", "model"):
        return "is outside tests/fast/ and tests/model/: put it in the folder of what it needs"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Before any selection (``-m``) or test runs: every test is in the folder its markers say."""
    wrong = [f"  {item.nodeid} {why}" for item in items if (why := misplaced(item))]
    if wrong:
        raise pytest.UsageError("tests in the wrong folder (tests/fast: neither real model; tests/model: marked "
                                "model or embedder):\n" + "\n".join(wrong))


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_slowest_first(config, items):  # pytest reads only names that begin pytest_
    """Under pytest-xdist, the modules that take longest come first (each module is one unit of --dist loadfile,
    handed out in this order): the tests/model modules with a test marked ``slow``, then the other tests/model
    modules, then the tests/fast modules with a test marked ``slow`` or run on PostgreSQL (the longest there: 15-35 s
    of the fast layer's 2-3 minutes here for test_server.py, which ended one worker 15 s after the other when it came
    in its alphabetical place), then tests/fast's many short ones, which even out the workers' ends. A module keeps
    its tests together and in their order; every worker sorts the same way (xdist checks that their collections
    agree)."""
    if not XDIST_WORKER:
        return
    rank: dict = {}
    for item in items:
        folder = item.path.relative_to(TESTS).parts[0] if TESTS in item.path.parents else ""
        long = item.get_closest_marker("slow") is not None or (
            folder == "fast" and item.get_closest_marker("postgres") is not None)
        rank[item.path] = min(rank.get(item.path, 3), (0 if long else 1) if folder == "model" else 2 if long else 3)
    items.sort(key=lambda item: rank[item.path])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if item.get_closest_marker("model") is None:
        used = sorted(MODEL_FIXTURES & set(item.fixturenames))
        if used:
            pytest.fail(f"{item.nodeid} uses the real model (fixture {', '.join(used)}) but is not marked "
                        "@pytest.mark.model", pytrace=False)


@pytest.fixture(autouse=True)
def _models_only_when_marked(request, monkeypatch):
    """Refuse the real GGUF file in tests not marked ``model`` and the real embedder (and torch) in tests
    not marked ``embedder``."""
    node = request.node
    if node.get_closest_marker("model") is None:
        import localpager.backends.llama as llama

        def no_gguf(path, **kwargs):
            pytest.fail(f"{node.nodeid} loads the GGUF model {path} but is not marked @pytest.mark.model",
                        pytrace=False)

        monkeypatch.setattr(llama, "load_llama", no_gguf)
    heavy_before = {m for m in HEAVY_MODULES if m in sys.modules}
    if node.get_closest_marker("embedder") is None:
        import localpager.retrieval.embedder as embedder

        def no_embedder(self):
            pytest.fail(f"{node.nodeid} loads the real embedder but is not marked @pytest.mark.embedder",
                        pytrace=False)

        monkeypatch.setattr(embedder.Embedder, "_load", no_embedder)
    yield
    if node.get_closest_marker("embedder") is None and node.get_closest_marker("model") is None:
        imported = sorted(m for m in HEAVY_MODULES if m in sys.modules and m not in heavy_before)
        if imported:
            pytest.fail(f"{node.nodeid} imported {', '.join(imported)} but is marked neither embedder nor model",
                        pytrace=False)


# -- the real models ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def backend():
    """The real SmolLM2-135M GGUF in llama.cpp."""
    from localpager.backends import load_backend

    return load_backend(n_ctx=2048)


@pytest.fixture(scope="session")
def counter():
    """The real SmolLM2 tokenizer (vocabulary only)."""
    from localpager.backends.tokenizers import counter_for

    return counter_for()


# -- stores: SQLite, and PostgreSQL too in a module marked ``both_stores`` ---------------------------------
STORE_KINDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))
PG_TEMPLATE = "localpager_template"


def pytest_generate_tests(metafunc):
    """A test of a module marked ``both_stores`` that uses a store runs once on each (``store_kind``), unless
    it is marked ``sqlite_only`` (it is about SQLite's own files: encryption, permissions, a SQLite file)."""
    marked = metafunc.definition.get_closest_marker
    if "store_kind" in metafunc.fixturenames and marked("both_stores") and not marked("sqlite_only"):
        metafunc.parametrize("store_kind", STORE_KINDS)


@pytest.fixture
def store_kind() -> str:
    """``sqlite``; ``sqlite`` and ``postgresql`` in a module marked ``both_stores``."""
    return "sqlite"


@pytest.fixture(scope="session")
def postgres_cluster():
    """One throwaway PostgreSQL cluster for the session (for each pytest-xdist worker: tests/postgres_cluster.py,
    a folder and a free port of its own), with a template database
    already migrated; skips (one line: why) where none can be started. Stopped by its PID at the end."""
    from postgres_cluster import ClusterUnavailable, start_cluster

    try:
        cluster = start_cluster(prefix=f"localpager-pg-{XDIST_WORKER or 'main'}-")
    except ClusterUnavailable as exc:
        pytest.skip(str(exc))
    try:
        from localpager.store.postgres import PostgresStore

        cluster.sql(f"CREATE DATABASE {PG_TEMPLATE}")
        PostgresStore(cluster.url(PG_TEMPLATE)).close()  # the schema, once: each test's database copies it
        yield cluster
    finally:
        cluster.stop()


# What a database holds beside its rows, in the schemas of its own (not PostgreSQL's): a database that differs from
# the template in any of these is not handed to another test.
PG_USER_SCHEMA = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'"
PG_OBJECTS = f"""
SELECT 'schema', n.nspname::text, '' FROM pg_namespace n WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'relation ' || c.relkind::text, n.nspname, c.relname
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'column', n.nspname, c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
        || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped AND {PG_USER_SCHEMA}
UNION ALL SELECT 'constraint', n.nspname, c.conname || ' ' || pg_get_constraintdef(c.oid)
    FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'index', n.nspname, pg_get_indexdef(i.indexrelid)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'function', n.nspname, pg_get_functiondef(p.oid)
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'trigger', n.nspname, pg_get_triggerdef(t.oid)
    FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE NOT t.tgisinternal AND {PG_USER_SCHEMA}
UNION ALL SELECT 'type', n.nspname, t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE {PG_USER_SCHEMA}
UNION ALL SELECT 'database setting', '', array_to_string(s.setconfig, ',') FROM pg_db_role_setting s
    WHERE s.setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY 1, 2, 3
"""


class DatabasePool:
    """The test databases of a worker's cluster, each made from the migrated template. A test's database goes to a
    later test only as the template left it: no session on it, the same schemas, tables, columns, indexes,
    functions and triggers, every table truncated and the template's rows put back, the sequences where the
    template left them, no planner statistics. Else it is dropped, as every test's database was before: CREATE
    DATABASE copies the whole catalog (0.3 s of the server's CPU a test; emptying one takes 0.05 s)."""

    def __init__(self, cluster):
        import psycopg

        self.cluster, self.free = cluster, []
        with psycopg.connect(cluster.url(PG_TEMPLATE), autocommit=True) as conn:
            self.objects = conn.execute(PG_OBJECTS).fetchall()
            self.tables = [(schema, name) for kind, schema, name in self.objects if kind == "relation r"]
            self.rows = {}  # the template's rows (JSON) of the tables that have any
            for table in self.tables:
                rows = conn.execute(self._sql("SELECT json_agg(t)::text FROM {}.{} t", *table)).fetchone()[0]
                if rows:
                    self.rows[table] = rows
            self.sequences = {(schema, name): conn.execute(self._sql("SELECT last_value, is_called FROM {}.{}",
                                                                     schema, name)).fetchone()
                              for kind, schema, name in self.objects if kind == "relation S"}

    @staticmethod
    def _sql(template: str, *names):
        from psycopg import sql

        return sql.SQL(template).format(*map(sql.Identifier, names))

    def take(self) -> str:
        """A database as the template left it: one a test gave back, or a new copy."""
        if self.free:
            return self.free.pop()
        import uuid

        name = f"t_{uuid.uuid4().hex[:16]}"
        self.cluster.sql(f"CREATE DATABASE {name} TEMPLATE {PG_TEMPLATE}")
        return name

    def give_back(self, name: str) -> None:
        """After a test: ``name`` emptied for the next test, or dropped."""
        if self._emptied(name):
            self.free.append(name)
        else:
            self.cluster.sql(f"DROP DATABASE {name} WITH (FORCE)")

    def _emptied(self, name: str) -> bool:
        import psycopg

        try:
            with psycopg.connect(self.cluster.url(name), autocommit=True) as conn:
                # the sessions the test left (its servers, its other processes) end, as DROP DATABASE WITH (FORCE)
                # ends them (10 s at most)
                others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                conn.execute(f"SELECT pg_terminate_backend(pid) {others}")
                deadline = time.monotonic() + 10
                while conn.execute(f"SELECT count(*) {others}").fetchone()[0] and time.monotonic() < deadline:
                    time.sleep(0.01)
                conn.execute("SET lock_timeout = '10s'")
                with conn.transaction():
                    if conn.execute(PG_OBJECTS).fetchall() != self.objects:
                        return False
                    conn.execute(self._sql("TRUNCATE " + ", ".join(["{}.{}"] * len(self.tables)),
                                           *[part for table in self.tables for part in table]))
                    for table, rows in self.rows.items():
                        put_back = "INSERT INTO {}.{} SELECT * FROM json_populate_recordset(NULL::{}.{}, %s)"
                        conn.execute(self._sql(put_back, *table, *table), (rows,))
                    for (schema, sequence), (value, called) in self.sequences.items():
                        conn.execute("SELECT setval(%s::regclass, %s, %s)",
                                     (self._sql("{}.{}", schema, sequence).as_string(conn), value, called))
                    conn.execute(f"DELETE FROM pg_statistic WHERE starelid IN (SELECT c.oid FROM pg_class c "
                                 f"JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {PG_USER_SCHEMA})")
            return True
        except psycopg.Error:
            return False


@pytest.fixture(scope="session")
def postgres_databases(postgres_cluster):
    """The test databases of this worker's cluster (``DatabasePool``)."""
    return DatabasePool(postgres_cluster)


@pytest.fixture
def store_location(store_kind, tmp_path, request):
    """Where a test's store is: ``tmp_path/store.db``, or a database of the session's cluster as the migrated
    template left it (a new copy, or one an earlier test used, emptied: ``DatabasePool``)."""
    if store_kind == "sqlite":
        yield tmp_path / "store.db"
        return
    pool = request.getfixturevalue("postgres_databases")
    name = pool.take()
    yield pool.cluster.url(name)
    pool.give_back(name)


@pytest.fixture
def store(store_location):
    from localpager.store.location import open_store

    s = open_store(store_location)
    yield s
    s.close()


# -- the fakes (tests/fakes.py) ----------------------------------------------------------------------
@pytest.fixture
def fake_backend():
    """A ScriptedBackend with an empty script: ``fake_backend.push("reply", ...)`` before it is called."""
    return ScriptedBackend()


@pytest.fixture
def fake_embedder():
    return HashEmbedder()


@pytest.fixture
def fake_pager(tmp_path, store_location):
    """A factory of ``LocalPager`` on a store in ``tmp_path`` with a ScriptedBackend and a HashEmbedder.

    ``fake_pager(script=(), *, backend=None, path=None, embedder=None, **LocalPager_options)``; a
    second call with the same ``path`` reopens the store (as another process would). The store is
    ``store_location``'s: a PostgreSQL database too in a module marked ``both_stores``."""
    from localpager.memory.api import LocalPager, ModelOptions

    opened = []
    location = store_location

    def make(script=(), *, backend=None, path=None, embedder=None, **options):
        lp = LocalPager(path or location, backend=backend or ScriptedBackend(script),
                        options=ModelOptions(embedder=embedder or HashEmbedder()), **options)
        opened.append(lp)
        return lp

    yield make
    for lp in opened:
        lp.close()


@pytest.fixture
def fake_models(monkeypatch):
    """The command line in this process, on the fakes: the scripted backend (and its tokenizer) for any
    model, the hashing embedder."""
    from fakes import HashEmbedder, ScriptedBackend, shortest_sentence

    import localpager.memory.models as api
    import localpager.retrieval.embedder as embedder
    from localpager.backends.tokenizers import BackendTokenCounter

    backend = ScriptedBackend(lambda p, g: shortest_sentence(g) if g else "Noted.")
    monkeypatch.setattr(api, "load_backend", lambda name, **options: backend)
    monkeypatch.setattr(api, "counter_for", lambda path=None: BackendTokenCounter(backend))
    monkeypatch.setattr(embedder, "default_embedder", lambda path=None: HashEmbedder())
    return backend


# -- no network: every test runs with outbound sockets refused (loopback and AF_UNIX only) --------------
class NetworkRefused(OSError):
    """A test tried to reach a non-loopback address: localpager must work with no network at all."""


def _loopback(family, address) -> bool:
    import ipaddress
    import socket

    if family == getattr(socket, "AF_UNIX", None):
        return True
    host = address[0] if isinstance(address, tuple) else address
    if isinstance(host, bytes):
        host = host.decode()
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(str(host).split("%")[0])
    except ValueError:  # a host name other than localhost: resolving it would already use the network
        return False
    return ip.is_loopback or bool(getattr(ip, "ipv4_mapped", None) and ip.ipv4_mapped.is_loopback)


@pytest.fixture(scope="session", autouse=True)
def _no_network():
    """``socket.connect``/``connect_ex``, ``create_connection`` and ``getaddrinfo`` (so httpx and asyncio
    too) refuse any address or name that is not loopback for the whole session; tests/fast/test_reliability.py
    proves it fires."""
    import socket

    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    def connect(self, address):
        if not _loopback(self.family, address):
            raise NetworkRefused(f"network access refused in tests: {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not _loopback(self.family, address):
            raise NetworkRefused(f"network access refused in tests: {address!r}")
        return real_connect_ex(self, address)

    real_create, real_getaddrinfo = socket.create_connection, socket.getaddrinfo

    def create_connection(address, *args, **kwargs):
        if not _loopback(None, address):  # before the name is resolved: a DNS query is network use too
            raise NetworkRefused(f"network access refused in tests: {address!r}")
        return real_create(address, *args, **kwargs)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not _loopback(None, (host,)):
            raise NetworkRefused(f"name lookup refused in tests: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", connect)
        mp.setattr(socket.socket, "connect_ex", connect_ex)
        mp.setattr(socket, "create_connection", create_connection)
        mp.setattr(socket, "getaddrinfo", getaddrinfo)
        yield
