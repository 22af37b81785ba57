"""A fake `/rerank` endpoint on 127.0.0.1 for the reranker's tests and its benchmark.

It answers in the shape it was asked in: TEI's (`{"query", "texts"}` -> `[{"index",
"score"}]`) or Cohere/Jina's (`{"query", "documents", "top_n"}` -> `{"results": [{"index",
"relevance_score"}]}`, best first, as those servers sort it). A document's score is
`scores[content]` (default `default`), or with `descending` 0.99 - 0.01 x its place in the
request (the order it was sent in, kept). `delay` (seconds) holds each answer back; `answer`,
when set, replaces the body (bytes) and `status` the HTTP status, to play a broken server.
Every request's JSON body is kept in `requests`.

`python -m tests.rerank_server [--descending] [--delay-ms N]` serves one in a process of its
own until killed, its URL on the first line of stdout (scripts/bench_rerank.py: the benchmark
measures the search's process, not the fake's share of its interpreter).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeReranker", "fake_reranker"]


class FakeReranker:
    """What the fake server answers; change its fields between requests."""

    def __init__(self) -> None:
        self.scores: dict[str, float] = {}
        self.default = 0.5
        self.descending = False
        self.delay = 0.0
        self.status = 200
        self.answer: Callable[[dict[str, Any]], bytes] | None = None
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    def respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
        self.requests.append(body)
        if self.delay:
            time.sleep(self.delay)
        if self.answer is not None:
            return self.status, self.answer(body)
        texts = body["texts"] if "texts" in body else body["documents"]
        if self.descending:
            scored = [0.99 - 0.01 * i for i in range(len(texts))]
        else:
            scored = [self.scores.get(t, self.default) for t in texts]
        if "texts" in body:  # TEI
            out: Any = [{"index": i, "score": s} for i, s in enumerate(scored)]
        else:  # Cohere / Jina
            ranked = sorted(enumerate(scored), key=lambda pair: -pair[1])[: body["top_n"]]
            out = {"results": [{"index": i, "relevance_score": s} for i, s in ranked]}
        return self.status, json.dumps(out).encode()


@contextmanager
def fake_reranker() -> Iterator[FakeReranker]:
    """A fake reranker serving on a free port of 127.0.0.1 (its `url` ends in /rerank)."""
    fake = FakeReranker()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real servers
        disable_nagle_algorithm = True  # the body is a second write: no 40 ms delayed ACK

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            status, data = fake.respond(json.loads(self.rfile.read(length)))
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with suppress(OSError):  # the client may have given up waiting
                self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/rerank"
    # shutdown() waits for the loop's next poll: 0.5 s by default, paid by every test.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description="a fake /rerank server until killed")
    parser.add_argument("--descending", action="store_true", help="keep the order it is sent")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="each answer held back")
    args = parser.parse_args()
    with fake_reranker() as fake:
        fake.descending, fake.delay = args.descending, args.delay_ms / 1000
        fake.requests = _Discarded()
        print(fake.url, flush=True)
        threading.Event().wait()


class _Discarded(list[dict[str, Any]]):
    """A long-running server keeps no request."""

    def append(self, item: dict[str, Any]) -> None:
        pass


if __name__ == "__main__":
    main()
