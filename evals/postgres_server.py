"""A real PostgreSQL server for the shared-deployment tests and benchmarks (tests/test_deploy.py,
evals/bench/instance.py): ``initdb`` + ``pg_ctl`` on a temporary data dir
and a free loopback port, password-authenticated (scram), no Unix socket outside its own folder.

PostgreSQL refuses to run as root; as root the server runs as the ``postgres`` system user (``runuser``),
which owns the data dir. Debian installs the binaries in /usr/lib/postgresql/<major>/bin (not on PATH);
.ci/run installs the ``postgresql`` package when they are missing. ``stop`` is immediate (a test's database is
thrown away) and removes the folder; the fixture calls it however the test ended.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 60


def find_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)
    return candidates[0] if candidates else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class PostgresServer:
    root: Path
    port: int
    user: str = "synthex"
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    db: str = "synthex"
    _run_as: list[str] = field(default_factory=list)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def env(self) -> dict[str, str]:
        """The variables the deployment's dagster.yaml reads (synthex_assets/deployment.py PG_ENV)."""
        return {"DAGSTER_PG_HOST": "127.0.0.1", "DAGSTER_PG_PORT": str(self.port), "DAGSTER_PG_USERNAME": self.user,
                "DAGSTER_PG_PASSWORD": self.password, "DAGSTER_PG_DB": self.db}

    def _run(self, *args: str, timeout: float = START_TIMEOUT_S) -> None:
        subprocess.run([*self._run_as, *args], check=True, timeout=timeout, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, cwd=self.root)

    def start(self) -> PostgresServer:
        initdb, pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("PostgreSQL's initdb/pg_ctl not found (Debian: apt-get install postgresql)")
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if os.geteuid() == 0:  # postgres will not run as root: the system user owns the folder and the server
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
            self._run_as = ["runuser", "-u", "postgres", "--"]
        self._run(initdb, "-D", str(self.data), "-U", self.user, f"--pwfile={pwfile}", "--auth=scram-sha-256",
                  "-E", "UTF8", "--no-sync")
        pwfile.unlink()
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
                   "-c fsync=off -c max_connections=60")
        self._run(pg_ctl, "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w",
                  "-t", str(START_TIMEOUT_S), "start", timeout=START_TIMEOUT_S + 10)
        self._createdb()
        return self

    def _createdb(self) -> None:
        self.create_database(self.db)

    def create_database(self, name: str) -> None:
        """A new, empty database ``name`` on this server (a memory's own Dagster tables, docs/deploy.md)."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, password=self.password,
                                dbname="postgres", connect_timeout=10)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()

    def stop(self) -> None:
        pg_ctl = find_bin("pg_ctl")
        try:
            if pg_ctl and (self.data / "postmaster.pid").exists():
                self._run(pg_ctl, "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def start_postgres() -> PostgresServer:
    # Not under pytest's tmp_path: its parents are root-only (0700), the postgres user could not reach them.
    root = Path(tempfile.mkdtemp(prefix="synthex-pg-"))
    server = PostgresServer(root=root, port=free_port())
    try:
        return server.start()
    except BaseException:
        server.stop()
        raise
