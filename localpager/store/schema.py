"""The store's schema, once for both engines: the migrations, written in the SQL SQLite and PostgreSQL share,
and the few words where they differ (``DIALECTS``).

``migrations("sqlite")`` is, character for character, the list the SQLite store has always run (each shipped
entry's text is checked by ``test_the_sqlite_migrations_are_the_shipped_ones`` in tests/fast/test_postgres_store.py);
``migrations("postgresql")`` is the same schema on PostgreSQL. Where a dialect needs more than a word (SQLite's
per-row triggers, PostgreSQL's trigger functions, which columns keep no planner statistics), the whole difference
is one entry of ``DIALECTS``.
Standard library only.
"""

from __future__ import annotations

from string import Template

# Each entry moves the schema up one version; never edit an entry that has shipped, add one.
TEMPLATES: tuple[str, ...] = (
    # 1: conversations, turns, pages, probes
    """
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        source TEXT,
        settings TEXT NOT NULL DEFAULT '{}',
        meta TEXT NOT NULL DEFAULT '{}',
        created_at ${real} NOT NULL
    );
    CREATE TABLE turns (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        role TEXT NOT NULL,
        text TEXT NOT NULL,
        time TEXT,
        speaker TEXT,
        PRIMARY KEY (conv_id, idx)
    );
    CREATE TABLE pages (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        page_id INTEGER NOT NULL,
        first_turn INTEGER NOT NULL,
        last_turn INTEGER NOT NULL,
        token_count INTEGER NOT NULL,
        keywords TEXT NOT NULL DEFAULT '[]',
        access_count INTEGER NOT NULL DEFAULT 0,
        last_access INTEGER NOT NULL DEFAULT -1,
        pinned INTEGER NOT NULL DEFAULT 0,
        evicted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conv_id, page_id)
    );
    CREATE TABLE probes (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        question TEXT NOT NULL,
        answers TEXT NOT NULL,
        evidence TEXT NOT NULL,
        type TEXT,
        at INTEGER,
        extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (conv_id, idx)
    );
    """,
    # 2: per-turn traces of the runtime
    """
    CREATE TABLE traces (
        id ${serial_key},
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        turn_idx INTEGER NOT NULL,
        created_at ${real} NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX traces_conv ON traces(conv_id, id);
    """,
    # 3: embeddings of page bookmarks and texts (the FAISS index is rebuilt from these)
    """
    CREATE TABLE embeddings (${embedding_rowid}
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        page_id INTEGER NOT NULL,
        kind TEXT NOT NULL,
        model TEXT NOT NULL,
        source TEXT NOT NULL,
        vector ${blob} NOT NULL,
        PRIMARY KEY (conv_id, page_id, kind)
    );
    """,
    # 4: who chose a page's keywords (model strategies replace their fallback's later), and its worth
    """
    ALTER TABLE pages ADD COLUMN keywords_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE pages ADD COLUMN worth INTEGER;
    """,
    # 5: a corrected turn points at the turn that replaced it (Conversation.correct: newest wins)
    """
    ALTER TABLE turns ADD COLUMN superseded_by INTEGER;
    """,
    # 6: generations. Every change to a conversation's turns, pages, vectors or settings sets its
    # ``generation`` to the store's next ``changes`` count (never reused, even after a delete and a
    # re-create), so an open Conversation sees another process's writes. Every change to a vector bumps
    # ``embeddings``, which a saved FAISS index is checked against: a delete followed by a re-insert can
    # leave the count and the rowids of the vectors as they were.
    """
    ALTER TABLE conversations ADD COLUMN generation ${counter} NOT NULL DEFAULT 0;
    CREATE TABLE counters (name TEXT PRIMARY KEY, value ${counter} NOT NULL);
    INSERT INTO counters (name, value) VALUES ('changes', 0), ('embeddings', 0);
    ${generation_triggers}    """,
    # 7: erasures. Every forget, and every delete or replace of a conversation, bumps ``erasures`` in the
    # transaction that deletes the text: another process compares it with the count its memory (pagers,
    # BM25 and FAISS caches, live KV caches) was built under and drops that memory instead of serving or
    # saving it. ``erase_pending`` is 1 from a forget until ``Store.erase`` has rewritten the files.
    """
    ${insert_or_ignore} counters (name, value) VALUES ('erasures', 0), ('erase_pending', 0)${or_ignore};
${private_columns}    """,
    # 8: standing facts (core/facts.py): the durable facts a turn states, one row each, derived from the turns as
    # they are stored; ``superseded_by`` names the newer fact of the same slot. ``conversations.facts`` is the
    # version of the extractor the conversation's rows were made by (0: never made; they are made again when the
    # extractor changes). A change to a fact (a pin) is a change to its conversation, as a page's is.
    """
    CREATE TABLE facts (
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        fact_id INTEGER NOT NULL,
        turn_idx INTEGER NOT NULL,
        kind TEXT NOT NULL,
        subject TEXT NOT NULL,
        text TEXT NOT NULL,
        superseded_by INTEGER,
        pinned INTEGER NOT NULL DEFAULT 0,
        asked INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (conv_id, fact_id)
    );
    ALTER TABLE conversations ADD COLUMN facts INTEGER NOT NULL DEFAULT 0;
${facts_triggers}    """,
    # 9: confirmations. A forget over MCP erases only with the token its preview returned, in a later call that
    # may come from another process (a client that starts the server per call): the token is kept here, as its
    # SHA-256 (``token``), with the conversation, HMACs keyed by the token of the call's arguments (``binding``)
    # and of the preview it showed (``preview``), and its expiry (``expires``, seconds since the epoch). Taken
    # once; deleted with the conversation, and by any forget in it. No row holds text of the conversation.
    """
    CREATE TABLE confirmations (
        token TEXT PRIMARY KEY,
        conv_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        binding TEXT NOT NULL,
        preview TEXT NOT NULL,
        expires ${real} NOT NULL
    );
    CREATE INDEX confirmations_conv ON confirmations(conv_id);
${confirmations_private}    """,
    # 10: users. A conversation may belong to a user (``user_name``; ``user`` is a reserved word in PostgreSQL), so
    # that what a person said in one chat is theirs in the next (``memory.users``). NULL: no user, as every
    # conversation stored before this migration is.
    """
    ALTER TABLE conversations ADD COLUMN user_name TEXT;
    CREATE INDEX conversations_user ON conversations(user_name);
${users_private}    """,
    # 11: remembered turns. A turn the user asked to be kept (``Conversation.remember``) is a standing fact even
    # when the extractor finds none in it (``core.facts.extract``), so the mark is kept with the turn, where a
    # rebuild of the facts and an export read it.
    """
    ALTER TABLE turns ADD COLUMN remembered INTEGER NOT NULL DEFAULT 0;
    """,
    # 12: fact ids are never given twice. ``last_fact`` is the highest fact id a conversation has ever had: a
    # deleted fact's id stays unused (an app may hold it, and a retried delete must not reach another fact),
    # across a rebuild of the facts and a replace of the conversation as well.
    """
    ALTER TABLE conversations ADD COLUMN last_fact INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations
        SET last_fact = COALESCE((SELECT MAX(f.fact_id) FROM facts f WHERE f.conv_id = conversations.id), 0);
    """,
)

SQLITE_GENERATION_TRIGGERS = (
    'CREATE TRIGGER turns_insert AFTER INSERT ON turns BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; END;\n"
    '    CREATE TRIGGER turns_update AFTER UPDATE ON turns BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; END;\n"
    '    CREATE TRIGGER turns_delete AFTER DELETE ON turns BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = OLD.conv_id; END;\n"
    '    CREATE TRIGGER pages_insert AFTER INSERT ON pages BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; END;\n"
    '    CREATE TRIGGER pages_update AFTER UPDATE ON pages BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; END;\n"
    '    CREATE TRIGGER pages_delete AFTER DELETE ON pages BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = OLD.conv_id; END;\n"
    '    CREATE TRIGGER embeddings_insert AFTER INSERT ON embeddings BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; UPDATE counters SET value = value + 1 WHERE name = 'embeddings'; END;\n"
    '    CREATE TRIGGER embeddings_update AFTER UPDATE ON embeddings BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.conv_id; UPDATE counters SET value = value + 1 WHERE name = 'embeddings'; END;\n"
    '    CREATE TRIGGER embeddings_delete AFTER DELETE ON embeddings BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = OLD.conv_id; UPDATE counters SET value = value + 1 WHERE name = 'embeddings'; END;\n"
    '    CREATE TRIGGER settings_update AFTER UPDATE OF settings ON conversations BEGIN\n'
    "        UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = (SELECT value FROM counters WHERE name = 'changes') WHERE id = NEW.id; END;\n"
)

_SQLITE_BUMP = ("UPDATE counters SET value = value + 1 WHERE name = 'changes'; UPDATE conversations SET generation = "
                "(SELECT value FROM counters WHERE name = 'changes') WHERE id = {row}.conv_id;")
SQLITE_FACTS_TRIGGERS = "".join(
    f"    CREATE TRIGGER facts_{op.lower()} AFTER {op} ON facts BEGIN\n        {_SQLITE_BUMP.format(row=row)} END;\n"
    for op, row in (("INSERT", "NEW"), ("UPDATE", "NEW"), ("DELETE", "OLD")))
POSTGRES_FACTS_TRIGGERS = """    CREATE TRIGGER facts_changed AFTER INSERT OR UPDATE OR DELETE ON facts
        FOR EACH ROW EXECUTE FUNCTION localpager_changed();
    ALTER TABLE facts ALTER COLUMN conv_id SET STATISTICS 0, ALTER COLUMN subject SET STATISTICS 0, ALTER COLUMN text SET STATISTICS 0;
"""

# PostgreSQL: the generation of a conversation comes from a sequence (never reused, and no row that every
# writer of every conversation would update: different conversations commit in parallel). ``vectors`` is
# the conversation's own vector version (the sequence's value at its last vector change), which a FAISS
# index built from its rows in memory is checked against (retrieval/index.py, one index per conversation).
POSTGRES_GENERATION_TRIGGERS = """CREATE SEQUENCE changes_seq;
    ALTER TABLE conversations ADD COLUMN vectors BIGINT NOT NULL DEFAULT 0;
    CREATE FUNCTION localpager_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
    DECLARE
        n BIGINT := nextval('changes_seq');
        conv TEXT;
    BEGIN
        IF TG_TABLE_NAME = 'conversations' THEN conv := NEW.id;
        ELSIF TG_OP = 'DELETE' THEN conv := OLD.conv_id;
        ELSE conv := NEW.conv_id;
        END IF;
        UPDATE conversations SET generation = n,
            vectors = CASE WHEN TG_TABLE_NAME = 'embeddings' THEN n ELSE vectors END
            WHERE id = conv;
        RETURN NULL;
    END $$;
    CREATE TRIGGER turns_changed AFTER INSERT OR UPDATE OR DELETE ON turns
        FOR EACH ROW EXECUTE FUNCTION localpager_changed();
    CREATE TRIGGER pages_changed AFTER INSERT OR UPDATE OR DELETE ON pages
        FOR EACH ROW EXECUTE FUNCTION localpager_changed();
    CREATE TRIGGER embeddings_changed AFTER INSERT OR UPDATE OR DELETE ON embeddings
        FOR EACH ROW EXECUTE FUNCTION localpager_changed();
    CREATE TRIGGER settings_changed AFTER UPDATE OF settings ON conversations
        FOR EACH ROW EXECUTE FUNCTION localpager_changed();
"""

# PostgreSQL: columns that hold what people said (or their conversations' names) keep no planner statistics.
# ANALYZE copies sample values of a column into pg_statistic (most common values, histogram bounds), a
# catalog file that a forget's rewrite of the tables would not reach.
PRIVATE_COLUMNS = {
    "conversations": ("id", "source", "settings", "meta"),
    "turns": ("conv_id", "text", "time", "speaker"),
    "pages": ("conv_id", "keywords"),
    "probes": ("conv_id", "question", "answers", "evidence", "type", "extra"),
    "traces": ("conv_id", "data"),
    "embeddings": ("conv_id", "kind", "model", "source"),
}
POSTGRES_PRIVATE_COLUMNS = "".join(
    f"    ALTER TABLE {table} " + ", ".join(f"ALTER COLUMN {c} SET STATISTICS 0" for c in columns) + ";\n"
    for table, columns in PRIVATE_COLUMNS.items())

# Where the two engines' SQL differs: one word (or one block) each.
DIALECTS: dict[str, dict[str, str]] = {
    "sqlite": {
        "real": "REAL",
        "blob": "BLOB",
        "counter": "INTEGER",
        "serial_key": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "embedding_rowid": "",  # SQLite's own rowid keys a vector in FAISS
        "insert_or_ignore": "INSERT OR IGNORE INTO",
        "or_ignore": "",
        "generation_triggers": SQLITE_GENERATION_TRIGGERS,
        "private_columns": "",
        "facts_triggers": SQLITE_FACTS_TRIGGERS,
        "confirmations_private": "",
        "users_private": "",
    },
    "postgresql": {
        "real": "DOUBLE PRECISION",  # PostgreSQL's REAL is 4 bytes: a timestamp would lose minutes
        "blob": "BYTEA",
        "counter": "BIGINT",
        "serial_key": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        # a column named rowid, as SQLite's: a replaced vector gets a new one (PostgresStore.save_embeddings)
        "embedding_rowid": "\n        rowid BIGSERIAL NOT NULL UNIQUE,",
        "insert_or_ignore": "INSERT INTO",
        "or_ignore": " ON CONFLICT DO NOTHING",
        "generation_triggers": POSTGRES_GENERATION_TRIGGERS,
        "private_columns": POSTGRES_PRIVATE_COLUMNS,
        "facts_triggers": POSTGRES_FACTS_TRIGGERS,
        "confirmations_private": "    ALTER TABLE confirmations ALTER COLUMN conv_id SET STATISTICS 0;\n",
        "users_private": "    ALTER TABLE conversations ALTER COLUMN user_name SET STATISTICS 0;\n",  # a person's name
    },
}


def migrations(dialect: str) -> tuple[str, ...]:
    """Every migration, in order, in ``dialect``'s SQL (a key of ``DIALECTS``)."""
    words = DIALECTS[dialect]
    return tuple(Template(t).substitute(words) for t in TEMPLATES)
