"""The record store on an object store: a pipeline whose ``store_uri`` is ``s3://bucket/prefix``.

moto serves S3 on loopback; LanceDB (writes, FTS, vector search) and pylance (filtered reads) find it
through the AWS_* environment variables alone (``RecordStore(storage_options=None)``):
AWS_ENDPOINT_URL (or AWS_ENDPOINT), AWS_ALLOW_HTTP=true for a plain-http endpoint, and keys.
"""

from __future__ import annotations

import urllib.request

import pytest
from conftest import load, write_project

from synthex.core.scope import BranchScope

BUCKET = "synthex-records"
PREFIX = "synthex"


@pytest.fixture
def s3_endpoint(monkeypatch):
    """A moto S3 server on 127.0.0.1 (free port) with one empty bucket; stopped and reset afterwards."""
    boto3 = pytest.importorskip("boto3")
    server_mod = pytest.importorskip("moto.server")

    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ENDPOINT"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")  # object_store refuses http:// endpoints otherwise
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")  # without keys it falls back to EC2 metadata
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_REGION", "us-east-1")
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket=BUCKET)
        yield client
    finally:
        try:  # moto keeps its backends in this process: drop the bucket for later tests
            urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10)
        finally:
            server.stop()


def test_a_pipeline_runs_searches_and_stays_incremental_on_s3(tmp_path, ran_project, s3_endpoint):
    # The reference: the same pipeline over the same export, run once on local disk (the session's shared
    # run, only read here).
    local = load(ran_project.root)
    local_run = ran_project.run
    remote = load(write_project(tmp_path / "proj-s3", ran_project.export))
    remote.store_uri = f"s3://{BUCKET}/{PREFIX}"
    try:
        run = remote.run()
        assert run.status == local_run.status == "completed" and run.dagster_run_ids
        counts = remote.app.store.records.counts(BranchScope.own())
        assert counts == local.app.store.records.counts(BranchScope.own()) and counts["chatgpt"] == 12
        assert {s: st.output for s, st in run.step_stats.items()} == {
            s: st.output for s, st in local_run.step_stats.items()}

        # The data is in the bucket, under the prefix, and nowhere on local disk.
        keys = [o["Key"] for page in s3_endpoint.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                for o in page.get("Contents", [])]
        assert keys and all(k.startswith(PREFIX + "/") for k in keys)
        assert any(k.startswith(f"{PREFIX}/records.lance/_versions/") for k in keys)
        assert any(k.startswith(f"{PREFIX}/records.lance/data/") for k in keys)
        assert any(k.startswith(f"{PREFIX}/records.lance/_indices/") for k in keys)  # the FTS index
        assert not (remote.data_dir / "lancedb").exists()

        # Hybrid (BM25 + dense) and exact search read the s3 store and rank as on the local store.
        query = "sourdough starter smells like acetone"
        assert remote.app.store.uri == f"s3://{BUCKET}/{PREFIX}"
        hits = remote.search(query, step="transcripts", mode="hybrid", k=3)
        assert hits and "sourdough" in hits[0].content.lower()
        assert [h.id for h in hits] == [h.id for h in local.search(query, step="transcripts", mode="hybrid", k=3)]
        assert [s.step for s in hits[0].leaves()] == ["chatgpt"]  # provenance drill-down reads s3 too
        exact = remote.search("TICKET #1003", exact=True)
        assert exact and all(h.step == "chatgpt" and "ticket #1003" in h.content for h in exact)
        assert sorted(h.id for h in exact) == sorted(h.id for h in local.search("TICKET #1003", exact=True))

        # Nothing changed: nothing planned, no Dagster run launched (a fresh app re-opens the store).
        remote.close()
        assert remote.plan().steps == []
        assert remote.run().dagster_run_ids == []
    finally:
        local.close()
        remote.close()
