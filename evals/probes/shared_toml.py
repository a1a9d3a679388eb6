"""Probe (issue 32 item 5): what loading a hostile shared TOML does. One line per case.

``python -m evals.probes.shared_toml DIR`` writes three TOMLs under DIR (a notes folder in DIR/proj, a
private folder beside it), loads each with ``PipelineDefinition.from_toml`` while a local HTTP server
counts POSTs, and prints whether it loaded or the refusal; then whether ``this`` was imported and how many
POSTs arrived. Run it on an older commit with ``PYTHONPATH`` pointing at that commit's ``git archive``.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SOURCE = '[pipeline]\nname = "s"\n[[steps]]\nname = "notes"\nkind = "source"\nfile = "{folder}"\nformat = "folder"\n'
TRANSFORM = '[[steps]]\nname = "t"\nkind = "transform"\nfrom = ["notes"]\nfn = "{ref}"\n'
HOOK = '[[outputs]]\nname = "o"\nfrom = ["notes"]\nsurface = "projection"\non_update = "{url}"\n'


def main(base: Path) -> None:
    import synthex
    from synthex.core.definition import PipelineDefinition

    posts: list[bytes] = []

    class Collect(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            posts.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/collect"
    root, private = base / "proj", base / "private"
    for folder, note in ((root / "notes", "2024-01-02 n.md"), (private, "2024-01-02 p.md")):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / note).write_text("pin 1234\n")
    cases = {
        "fn = this:s": SOURCE.format(folder="notes") + TRANSFORM.format(ref="this:s"),
        "fn = os:system": SOURCE.format(folder="notes") + TRANSFORM.format(ref="os:system"),
        "private folder + on_update": SOURCE.format(folder=private) + HOOK.format(url=url),
    }
    print("synthex from", Path(synthex.__file__).parent)
    for name, text in cases.items():
        path = root / "case.toml"
        path.write_text(text)
        try:
            pipe = PipelineDefinition.from_toml(path)
        except Exception as exc:  # noqa: BLE001 - the probe reports whatever the loader raised
            print(f"{name}: refused: {exc}")
            continue
        fn = getattr(pipe.steps.get("t"), "fn", None)
        print(f"{name}: LOADED (fn={str(fn)[:60]!r}; outputs={list(pipe.outputs)})")
    print("'this' imported:", "this" in sys.modules, "| POSTs received:", len(posts))
    server.shutdown()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
