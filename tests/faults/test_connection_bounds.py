"""Connection bounds against a real server (api/http_protocol.py, api/middleware.py Admission):
idle, header-trickling and body-trickling connections are closed within the configured times,
and requests past the concurrency or connection limit are answered 503 with Retry-After.

Every bound is small here (1-4 s); each check waits for the server to close the socket with a
generous ceiling (the bound + CEILING), never for a tight time: without the bounds these
connections stay open for as long as the client keeps them.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable

import pytest

from api.tokens import mint_token
from tests.e2e.test_server_e2e import SECRET
from tests.faults.harness import FaultServer, timed

pytestmark = [pytest.mark.integration, pytest.mark.faults]

KEEP_ALIVE, HEADER, BODY = 1.0, 1.5, 4.0
CEILING = 10.0
"""Seconds a busy machine may add before a closed socket is seen."""


def bounded(make_server: Callable[..., FaultServer], **env: str) -> FaultServer:
    server = make_server()
    server.env |= {
        "MEMLEDGER_KEEP_ALIVE_TIMEOUT": str(KEEP_ALIVE),
        "MEMLEDGER_HEADER_TIMEOUT": str(HEADER),
        "MEMLEDGER_BODY_TIMEOUT": str(BODY),
    } | env
    server.start()
    return server


def connect(server: FaultServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=CEILING)


def closed_by_server(sock: socket.socket, within: float) -> bytes:
    """Everything the server sent until it closed the socket (AssertionError if it did not
    within `within` seconds)."""
    sock.settimeout(within)
    received = b""
    try:
        while chunk := sock.recv(4096):
            received += chunk
    except TimeoutError:
        pytest.fail(f"the server kept the connection open for {within}s; sent {received!r}")
    except ConnectionResetError:
        pass
    return received


def trickle(sock: socket.socket, first: bytes, then: bytes, stop: threading.Event) -> int:
    """Send `first`, then `then` every 0.2 s until the socket fails or `stop`; bytes sent."""
    sent = 0
    try:
        sock.sendall(first)
        while not stop.wait(0.2):
            sock.sendall(then)
            sent += len(then)
    except OSError:
        pass
    return sent


def head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    return ("\r\n".join(lines) + "\r\n").encode()


def test_idle_and_trickling_connections_are_closed_and_past_the_cap_is_503(
    make_server: Callable[..., FaultServer],
) -> None:
    server = bounded(make_server, MEMLEDGER_MAX_CONCURRENCY="2")

    # connected, nothing sent
    with connect(server) as idle:
        assert closed_by_server(idle, KEEP_ALIVE + CEILING) == b""

    # idle after a response (keep-alive)
    with connect(server) as kept:
        kept.sendall(head("GET", "/healthz") + b"\r\n")
        assert b" 200 " in closed_by_server(kept, KEEP_ALIVE + CEILING).split(b"\r\n")[0]

    # a head trickled a header line at a time, forever unless closed
    stop = threading.Event()
    with connect(server) as slow_head:
        sender = threading.Thread(
            target=trickle, args=(slow_head, head("GET", "/healthz"), b"X-Slow: 1\r\n", stop)
        )
        sender.start()
        try:
            assert closed_by_server(slow_head, HEADER + CEILING) == b""
        finally:
            stop.set()
            sender.join(timeout=CEILING)

    # a body trickled a byte at a time
    stop = threading.Event()
    token = mint_token(SECRET, "trickler")
    with connect(server) as slow_body:
        start = head(
            "POST",
            "/me/core-memories",
            f"Authorization: Bearer {token}",
            "Content-Type: application/json",
            "Content-Length: 4000",
        )
        sender = threading.Thread(target=trickle, args=(slow_body, start + b"\r\n{", b" ", stop))
        sender.start()
        try:
            closed_by_server(slow_body, BODY + CEILING)
        finally:
            stop.set()
            sender.join(timeout=CEILING)

    # two requests held in flight (waiting for their bodies): a third is 503 with Retry-After
    held = [connect(server), connect(server)]
    try:
        auth = f"Authorization: Bearer {token}"
        for sock in held:
            sock.sendall(head("POST", "/me/core-memories", "Content-Length: 100", auth) + b"\r\n{")
        with server.client("third") as client:
            for _ in range(20):  # until the server has taken the two heads in
                call, body = timed(client, "GET", "/me/core-memories")
                if call.status == 503:
                    break
                time.sleep(0.05)
        assert call.status == 503, (call, body)
        assert call.retry_after == "1" and isinstance(body["detail"], str)
        assert "concurrency limit" in body["detail"]
    finally:
        for sock in held:
            sock.close()
    with server.client("third") as client:  # the cap frees up with them
        for _ in range(100):
            call, _ = timed(client, "GET", "/me/core-memories")
            if call.status == 200:
                break
            time.sleep(0.1)
        assert call.status == 200


def test_a_connection_past_the_connection_limit_is_answered_503_and_closed(
    make_server: Callable[..., FaultServer],
) -> None:
    server = bounded(make_server, MEMLEDGER_MAX_CONNECTIONS="3", MEMLEDGER_KEEP_ALIVE_TIMEOUT="8")
    opened = [connect(server) for _ in range(3)]
    try:
        with connect(server) as extra:
            extra.sendall(head("GET", "/readyz") + b"\r\n")
            answer = closed_by_server(extra, CEILING)  # answered, then closed
        status, _, rest = answer.partition(b"\r\n")
        assert b" 503 " in status, answer
        headers, _, body = rest.partition(b"\r\n\r\n")
        assert b"retry-after: 1" in headers.lower()
        assert "connection limit" in json.loads(body)["detail"]
    finally:
        for sock in opened:
            sock.close()
