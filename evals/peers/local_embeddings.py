"""A loopback OpenAI-compatible ``/v1/embeddings`` server backed by Synthex's offline embedder.

Peers such as Mem0 speak the OpenAI embeddings API; pointing them here makes them use exactly the
vectors Synthex uses, with no network and no hub download.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from synthex_resources.embedder import Embedder, EmbedderConfig


class LocalEmbeddingServer:
    def __init__(self, embedder: Embedder | None = None) -> None:
        embed = embedder or EmbedderConfig().create()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                vectors = embed.embed([str(t) for t in texts])
                payload = {"object": "list", "model": body.get("model", embed.name),
                           "data": [{"object": "embedding", "index": i, "embedding": v.tolist()}
                                    for i, v in enumerate(vectors)],
                           "usage": {"prompt_tokens": 0, "total_tokens": 0}}
                raw = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.dim = embed.dim
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> LocalEmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
