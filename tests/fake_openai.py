"""A small OpenAI-compatible server on loopback for tests: chat completions and embeddings."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeOpenAI:
    def __init__(self, fail_first: int = 0, fail_status: int = 429, delay: float = 0.0,
                 echo_key: bool = False, answer=None) -> None:
        self.echo_key = echo_key
        self.answer = answer  # answer(prompt) -> text or None: a test's own model behaviour  # error bodies quote the Authorization header, as some providers do
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.delay = delay
        self.calls = 0
        self.failures = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer._lock:
                    outer.calls += 1
                    fail = outer.failures < outer.fail_first
                    if fail:
                        outer.failures += 1
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                try:
                    if outer.delay:
                        time.sleep(outer.delay)
                    if fail:
                        message = (f"bad credentials: {self.headers.get('Authorization')}" if outer.echo_key
                                   else "slow down")
                        self._send(outer.fail_status, {"error": {"message": message, "type": "rate_limit"}},
                                   {"retry-after": "0"})
                        return
                    if self.path.endswith("/embeddings"):
                        data = [{"object": "embedding", "index": i, "embedding": [1.0, 0.0, 0.0, 0.0]}
                                for i, _ in enumerate(body["input"])]
                        self._send(200, {"object": "list", "data": data, "model": body["model"],
                                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                        return
                    prompt = body["messages"][-1]["content"]
                    with outer._lock:
                        outer.prompts.append(prompt)
                    digest = hashlib.sha256(prompt.encode()).hexdigest()[:8]
                    if "CORRECT or WRONG" in prompt:  # the QA judge: correct when the gold text was answered
                        gold = prompt.split("Gold answer: ", 1)[1].split("\n", 1)[0]
                        given = prompt.split("Answer to grade: ", 1)[1].split("\n", 1)[0]
                        digest = "CORRECT" if gold.lower() in given.lower() else "WRONG"
                    self._send(200, {
                        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": digest if digest in ("CORRECT", "WRONG")
                                                 else self._answer(prompt, digest)}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
                    })
                finally:
                    with outer._lock:
                        outer.in_flight -= 1

            def _answer(self, prompt, digest):
                if outer.answer is not None and (text := outer.answer(prompt)) is not None:
                    return text
                # QA answers echo the first excerpt, so a judged answer is right exactly when retrieval was.
                if prompt.startswith("You answer questions") and "\n- " in prompt:
                    return prompt.split("\n- ", 1)[1].split("\n", 1)[0]
                return f"FAKE SUMMARY {digest}"

            def _send(self, status, payload, headers=None):
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
