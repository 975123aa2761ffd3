"""A throwaway PostgreSQL cluster for the tests and the replica benchmark: ``initdb`` in a temporary folder,
``pg_ctl start`` on a free loopback port (and a socket in that folder), stopped by the postmaster's PID.

Debian's ``postgresql`` package (``make setup`` installs it) puts the programs in
``/usr/lib/postgresql/VERSION/bin``, off the PATH. ``initdb`` refuses to run as root: as root the cluster
belongs to the ``postgres`` user the package creates, and its programs run through ``runuser``. Durability is
off (``fsync``, ``full_page_writes``, ``synchronous_commit``): the cluster lives for one run.

``start_cluster()`` returns a ``Cluster`` or raises ``ClusterUnavailable`` with a one-line reason (the tests
skip with it).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import free_port


PORT_ATTEMPTS = 3


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (one line: why)."""


def find_program(name: str) -> str | None:
    """``name`` on the PATH, else in the newest ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    return candidates[-1] if candidates else None


@dataclass
class Cluster:
    folder: Path
    port: int
    pid: int
    as_user: list[str]  # the prefix that runs a program as the cluster's owner ([] when not root)

    @property
    def data(self) -> Path:
        return self.folder / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cur = conn.execute(statement)
            return cur.fetchall() if cur.description else []

    def database_files(self, database: str) -> list[Path]:
        """Every file under ``base/<oid>`` of ``database``, after a checkpoint (so what the server holds in
        memory is in them): what a forget's erase check reads."""
        self.sql("CHECKPOINT")
        oid = self.sql(f"SELECT oid FROM pg_database WHERE datname = '{database}'")[0][0]
        return sorted(p for p in (self.data / "base" / str(oid)).rglob("*") if p.is_file())

    def stop(self) -> None:
        """Stop the postmaster by its PID (fast shutdown, then kill), and delete the folder."""
        try:
            os.kill(self.pid, signal.SIGINT)  # fast shutdown: sessions end, then the server
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _alive(self.pid):
            time.sleep(0.05)
        if _alive(self.pid):
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of ours is dead too
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def start_cluster(prefix: str = "localpager-pg-") -> Cluster:
    """A new cluster, running; ``ClusterUnavailable`` when the programs, the user or the start fail."""
    initdb, pg_ctl = find_program("initdb"), find_program("pg_ctl")
    if not initdb or not pg_ctl:
        raise ClusterUnavailable("PostgreSQL is not installed (no initdb/pg_ctl; `make setup` installs Debian's "
                                 "postgresql)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise ClusterUnavailable("psycopg is not installed: pip install 'localpager[postgres]'") from None
    as_user: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    if os.geteuid() == 0:  # initdb refuses root: the package's postgres user owns the cluster
        import pwd

        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            raise ClusterUnavailable("running as root and there is no postgres user to own a cluster") from None
        runuser = shutil.which("runuser")
        if not runuser:
            raise ClusterUnavailable("running as root and runuser is missing (initdb refuses root)")
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        as_user = [runuser, "-u", "postgres", "--"]
    folder.chmod(0o700)
    data = folder / "data"
    try:
        subprocess.run([*as_user, initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8",
                        "--locale=C", "--no-sync"], check=True, capture_output=True, timeout=120)
        for attempt in range(PORT_ATTEMPTS):
            # free_port's port may be taken before the server binds it (another pytest-xdist worker's server, any
            # program's): then the start fails saying so, and another free port is tried
            port = free_port()
            options = (f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
                       "-c synchronous_commit=off -c max_connections=200 -c shared_buffers=32MB")
            try:
                subprocess.run([*as_user, pg_ctl, "-D", str(data), "-o", options, "-l", str(folder / "server.log"),
                                "-w", "-t", "60", "start"], check=True, capture_output=True, timeout=90)
                break
            except subprocess.CalledProcessError:
                log = folder / "server.log"
                if attempt + 1 == PORT_ATTEMPTS or "Address already in use" not in (
                        log.read_text(errors="replace") if log.exists() else ""):
                    raise
                log.unlink()
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        log = folder / "server.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
        shutil.rmtree(folder, ignore_errors=True)
        reason = (detail.decode(errors="replace").strip().splitlines() or tail or [str(exc)])[-1]
        raise ClusterUnavailable(f"could not start a PostgreSQL cluster: {reason}") from None
    pid = int((data / "postmaster.pid").read_text().split()[0])
    return Cluster(folder, port, pid, as_user)


def database_leaks(store, needle: str) -> list[str]:
    """The files under ``base/<oid>`` of a PostgreSQL store's database that hold ``needle`` (UTF-8), after a
    checkpoint (what the server holds in memory is written first): a forget's erase check on PostgreSQL.
    Needs the test's superuser connection."""
    with store._connection() as conn:
        conn.execute("CHECKPOINT")
        data = Path(conn.execute("SHOW data_directory").fetchone()[0])
        oid = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()[0]
    found = []
    for path in sorted((data / "base" / str(oid)).rglob("*")):
        if path.is_file() and needle.encode() in path.read_bytes():
            found.append(f"base/{oid}/{path.name}")
    return found
