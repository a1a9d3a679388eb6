"""S3 requests per `synthex run` with the records on object storage (``store_uri=s3://...``), counted by
moto's S3 server, which records every request it serves (its recorder: ``MOTO_ENABLE_RECORDING``).

    python -m evals.bench.s3_requests [--conversations 12] [--months 3]

The test project of the deployment benchmarks (evals/bench/instance.py), its records in a moto bucket on
127.0.0.1; counted separately: the first run, a no-change run, and one `synthex search`. Prints requests
by HTTP method and by the part of the table they touch (``_versions/`` manifests, ``data/`` fragments,
``_indices/``, ``_transactions/``), each phase's wall seconds, the load average, and a JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from evals.bench.instance import make_project

BUCKET = "synthex-records"


def table_part(url: str) -> str:
    """Which part of a Lance table (or of the bucket) a request's URL names."""
    path = url.split("?", 1)[0]
    for part in ("_versions/", "_transactions/", "_indices/", "data/", "_deletions/"):
        if f".lance/{part}" in path:
            return part.rstrip("/")
    return "list" if "list-type=2" in url else "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=12)
    parser.add_argument("--months", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="synthex-s3-"))
    recording = work / "moto_recording"
    os.environ["MOTO_ENABLE_RECORDING"] = "True"  # read when moto's recorder is created (on import)
    os.environ["MOTO_RECORDER_FILEPATH"] = str(recording)
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)
    project = make_project(work, conversations=args.conversations, months=args.months,
                           store_uri=f"s3://{BUCKET}/memory")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MOTO_", "OPENAI_"))} | keys
    env.pop("SYNTHEX_DAGSTER_HOME", None)

    def recorder(action: str) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/recorder/{action}", method="POST"),
                               timeout=30).read()

    phases = {"first run": ["run"], "no-change run": ["run"],
              "search": ["search", "sourdough starter smells like acetone", "--mode", "hybrid"]}
    out: dict[str, dict] = {}
    try:
        for phase, command in phases.items():
            recorder("reset-recording")
            recorder("start-recording")
            start = time.perf_counter()
            subprocess.run([sys.executable, "-m", "synthex.surfaces.cli", *command, "--project", str(project)],
                           env=env, check=True, capture_output=True, timeout=900)
            wall = time.perf_counter() - start
            recorder("stop-recording")
            entries = [json.loads(line) for line in recording.read_text().splitlines() if line.strip()]
            entries = [e for e in entries if "/moto-api/" not in e.get("url", "")]
            by_method = collections.Counter(e["method"] for e in entries)
            by_part = collections.Counter(f"{e['method']} {table_part(e['url'])}" for e in entries)
            out[phase] = {"requests": len(entries), "wall_s": round(wall, 1), "by_method": dict(by_method),
                          "by_part": dict(by_part.most_common())}
            print(f"{phase}: {len(entries)} requests in {wall:.1f} s  {dict(by_method)}", flush=True)
            print(f"  {dict(by_part.most_common())}", flush=True)
    finally:
        server.stop()
    print(f"load average: {os.getloadavg()}")
    print(json.dumps({"conversations": args.conversations, "months": args.months, **out}))


if __name__ == "__main__":
    main()
