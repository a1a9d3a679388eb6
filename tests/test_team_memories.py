"""Many memories on one shared PostgreSQL server (issue 38 item 4, docs/deploy.md "Many memories on one
server"): one project per memory, each with its own database on the server (its own Dagster tables), its
own deployment folder and daemon, its own records and its own MCP token. Nothing of one memory is found
through another's commands or accepted by another's MCP server.

A database per memory, not one database for all: a Dagster instance's asset keys and its ``branch`` and
``period`` dynamic partitions (synthex_assets/partitions.py) are instance-wide names, so two projects in
one database would share them (``synthex branch delete`` in one would remove the other's partition key).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import PIPELINE_PY, env_without_openai, write_json, write_project
from test_hostile_mcp import INITIALIZE, post

from evals.postgres_server import PostgresServer, free_port
from synthex.core.demo.generate import generate

RUN_TIMEOUT_S = 300
MARKERS = {"alpha": "quokkalpha", "beta": "axolotlbeta"}  # a word only that memory's export contains


def marked_export(path: Path, marker: str, seed: int) -> Path:
    """The small generated export with ``marker`` appended to every user message."""
    conversations = generate(conversations=2, months=1, seed=seed)
    for conversation in conversations:
        for node in conversation["mapping"].values():
            message = node.get("message")
            if message and message["author"]["role"] == "user" and message["content"]["parts"][0]:
                message["content"]["parts"][0] += f" ({marker})"
    return write_json(path, conversations)


def synthex(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *args], capture_output=True, text=True,
                          env=env, timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 0, f"synthex {args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def memory_env(server: PostgresServer, home: Path, project: Path, db: str) -> dict[str, str]:
    """What the memory's synthex.env says: the shared server, the memory's own database and folder."""
    return {**env_without_openai(), **server.env(), "DAGSTER_PG_DB": db, "SYNTHEX_DAGSTER_HOME": str(home),
            "DAGSTER_HOME": str(home), "SYNTHEX_PROJECT": str(project)}


def start(args: list[str], env: dict[str, str], cwd: Path, log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(args, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def serve_mcp(project: Path, env: dict[str, str]) -> tuple[subprocess.Popen, str, list[str]]:
    """`synthex mcp --http` of one memory: the process, its URL, its stderr lines so far."""
    proc = subprocess.Popen([sys.executable, "-m", "synthex.surfaces.cli", "mcp", "--project", str(project),
                             "--http", "--port", "0"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
    deadline = time.monotonic() + 120
    while not (found := re.search(r"http://127\.0\.0\.1:\d+/mcp", "".join(log))):
        assert proc.poll() is None, "".join(log)
        assert time.monotonic() < deadline, "the MCP server printed no URL"
        time.sleep(0.05)
    return proc, found.group(0), log


@pytest.mark.deployment
def test_two_memories_on_one_postgres_server_see_nothing_of_each_other(tmp_path, postgres):
    """Two memories (same pipeline name, different exports) on one PostgreSQL server, each in its own
    database: both runs succeed, each memory's runs, records and search are its own, and each MCP server
    accepts only its own memory's token."""
    from dagster import DagsterInstance, DagsterRunStatus

    memories: dict[str, dict] = {}
    services: list[subprocess.Popen] = []
    try:
        for seed, (name, marker) in enumerate(MARKERS.items(), start=3):
            root = tmp_path / name
            project = write_project(root / "memory", marked_export(root / "exports" / "conversations.json",
                                                                   marker, seed), PIPELINE_PY)
            home = root / "deploy"
            synthex(env_without_openai(), "deploy", "init", str(home), "--project", str(project),
                    "--grpc-host", "127.0.0.1", "--grpc-port", str(free_port()))
            postgres.create_database(f"memory_{name}")
            env = memory_env(postgres, home, project, f"memory_{name}")
            services.append(start([sys.executable, "-m", "dagster._daemon", "run", "-w", str(home / "workspace.yaml")],
                                  env, project, root / "daemon.log"))
            memories[name] = {"project": project, "home": home, "env": env, "marker": marker}
        runs = {name: start([sys.executable, "-m", "synthex.surfaces.cli", "run", "--project", str(m["project"])],
                            m["env"], m["project"], m["project"].parent / "run.log") for name, m in memories.items()}
        services.extend(runs.values())  # stopped in `finally` too, if the test fails before they end
        for name, proc in runs.items():  # both at once: each memory's queue is its own
            code = proc.wait(timeout=RUN_TIMEOUT_S)
            assert code == 0, (memories[name]["project"].parent / "run.log").read_text()[-3000:]

        for m in memories.values():
            m["runs"] = json.loads(synthex(m["env"], "runs", "--json", "--project", str(m["project"])).stdout)
            assert m["runs"] and all(r["status"] == "completed" for r in m["runs"])
            with pytest.MonkeyPatch.context() as patch:  # the instance reads its credentials when opened
                for key in ("DAGSTER_PG_DB", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USERNAME",
                            "DAGSTER_PG_PASSWORD"):
                    patch.setenv(key, m["env"][key])
                instance = DagsterInstance.from_config(str(m["home"]))
                try:
                    m["dagster_runs"] = {r.run_id: r.status for r in instance.get_runs()}
                finally:
                    instance.dispose()
            # the memory's own database holds its runs and only them; nothing went to a SQLite instance
            assert set(m["dagster_runs"]) == {r["id"] for r in m["runs"]}
            assert set(m["dagster_runs"].values()) == {DagsterRunStatus.SUCCESS}
            assert not (m["project"] / ".synthex" / "dagster").exists()
        alpha, beta = memories["alpha"], memories["beta"]
        assert not {r["id"] for r in alpha["runs"]} & {r["id"] for r in beta["runs"]}

        for m in memories.values():
            other = beta if m is alpha else alpha
            own = json.loads(synthex(m["env"], "search", m["marker"], "--exact", "--json",
                                     "--project", str(m["project"])).stdout)["hits"]
            assert own and all(m["marker"] in h["content"] for h in own)  # its own word is found
            m["own_ids"] = {h["id"] for h in own}
            exact = json.loads(synthex(m["env"], "search", other["marker"], "--exact", "--json",
                                       "--project", str(m["project"])).stdout)["hits"]
            assert exact == []  # the other memory's word: no record of it here
            hybrid = json.loads(synthex(m["env"], "search", other["marker"], "--json", "-k", "50",
                                        "--project", str(m["project"])).stdout)["hits"]
            assert hybrid and not [h for h in hybrid if other["marker"] in h["content"]]
        for m in memories.values():
            other = beta if m is alpha else alpha
            for record_id in other["own_ids"]:  # another memory's record id names nothing here
                got = subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", "get", record_id, "--project",
                                      str(m["project"])], env=m["env"], capture_output=True, text=True,
                                     timeout=RUN_TIMEOUT_S)
                assert got.returncode != 0 and "no record with id" in got.stderr, got

        # Each memory's MCP server: its own token (its own file), and the other memory's token is refused.
        servers = {}
        for name, m in memories.items():
            env = {k: v for k, v in m["env"].items() if k != "SYNTHEX_MCP_TOKEN"}
            proc, url, log = serve_mcp(m["project"], env)
            services.append(proc)
            servers[name] = (url, (m["project"] / ".synthex" / "mcp-token").read_text().strip(), log)
        (url_a, token_a, _), (url_b, token_b, _) = servers["alpha"], servers["beta"]
        assert token_a != token_b
        assert post(url_a, INITIALIZE, token_a)[0] == 200 and post(url_b, INITIALIZE, token_b)[0] == 200
        for url, token in ((url_b, token_a), (url_a, token_b)):
            status, text = post(url, INITIALIZE, token)
            assert status == 401 and "invalid_token" in text
    finally:
        for proc in reversed(services):
            stop(proc)
