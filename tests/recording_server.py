"""A listener that records every connection and request it gets, for tests of where secrets go.

``RecordingServer(answer, host)`` listens on ``host`` (any local address: 127.0.0.1, 127.0.0.2,
or this machine's own non-loopback address) and a free port. ``connections`` counts accepted TCP
connections, including ones that never send a request, so "nothing was sent" can be asserted
as "no connection was made". ``requests`` keeps each request's method, path, headers and body;
``answer(request, server)`` says what to send back (status, headers, body).
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

MAX_BODY = 1_000_000


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


Answerer = Callable[[Seen, "RecordingServer"], Answer]


class RecordingServer:
    def __init__(self, answer: Answerer | None = None, host: str = "127.0.0.1") -> None:
        self.answer = answer or (lambda _seen, _server: Answer(404))
        self.requests: list[Seen] = []
        self.connections = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
                seen = Seen(self.command, self.path, dict(self.headers.items()), self.rfile.read(length))
                with outer._lock:
                    outer.requests.append(seen)
                reply = outer.answer(seen, outer)
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            do_GET = do_POST = do_PUT = do_DELETE = do_PROPFIND = do_REPORT = do_OPTIONS = _any  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

            def verify_request(self, request: object, client_address: object) -> bool:
                with outer._lock:
                    outer.connections += 1
                return True

        self.server = Server((host, 0), Handler)
        self.host = host
        self.port = self.server.server_address[1]
        self.origin = f"http://{f'[{host}]' if ':' in host else host}:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> RecordingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorizations(self) -> list[str]:
        """Every Authorization header received, in order."""
        with self._lock:
            return [a for s in self.requests if (a := s.header("Authorization")) is not None]


def non_loopback_address() -> str | None:
    """An address of this machine that is not 127.0.0.0/8 (to stand for "another host" without
    a network), or None if it has none that a socket can bind to."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: connect() on UDP only picks a route
            address = probe.getsockname()[0]
    except OSError:
        return None
    if address.startswith("127."):
        return None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((address, 0))
    except OSError:
        return None
    return address
