"""Real CalDAV servers on 127.0.0.1 for the sync tests: Radicale and Xandikos, a phone, a fault proxy.

``start_server(kind, root)`` runs Radicale 3.x or Xandikos 0.4 as a **subprocess** (so a test can
stop, restart or ``kill -9`` it) on a free loopback port, with its data under ``root`` and HTTP
Basic auth against an htpasswd file. One user (``USERNAME``, a random password) owns one calendar
collection (``calendar_url``), made with a ``caldav`` client's ``make_calendar`` at start.
``phone()`` is a second, independent ``caldav`` client on that calendar: tests create, edit and
delete events with it straight on the server, as the user's phone would.

Both servers are plain HTTP on 127.0.0.1. Radicale reads a config file written here (htpasswd,
``plain`` encryption, rights ``owner_only``). Xandikos's own ``--htpasswd`` refuses to run without
``--autocert`` (HTTPS with a self-signed certificate made by the ``cryptography`` package, which
is not a dependency here), so a small launcher (``_XANDIKOS_LAUNCHER``) runs Xandikos's own
``main`` with ``--htpasswd --autocert`` and only swaps the certificate for plain HTTP: the
authentication is still Xandikos's ``basic_auth_middleware`` (entries in ``{SHA}`` form, no
bcrypt needed).

What each server offers a sync client (measured on caldav 3.6.0, Radicale 3.9.0, Xandikos 0.4.10;
``tests/test_caldav_servers.py`` pins what a sync client relies on; ``PROBED`` has it as data):

- **RFC 6578 sync-collection** (``Calendar.get_objects_by_sync_token(token, disable_fallback=True)``):
  both. Radicale's token is ``http://radicale.org/ns/sync/<64 hex>``; Xandikos's is a bare git
  commit id (40 hex), the same value as its ctag. After one phone edit, an incremental report
  returns only that event; a deleted event comes back in ``deleted_urls`` (404 in the report).
  An unknown or expired token is refused with ``DAV:valid-sync-token`` in ``preconditions``:
  Radicale answers **403** (caldav raises ``AuthorizationError``, status 403, even though it is no
  auth problem), Xandikos **412** (``ReportError``). Without ``disable_fallback`` caldav falls back
  to a full listing with a made-up token ``fake-<hex>``.
- **ETags**: strong on both (``getetag`` in PROPFIND/REPORT, ``ETag`` on GET and PUT); Radicale's
  are sha256, Xandikos's sha1. A PUT or DELETE with a stale ``If-Match`` gets **412** on both (caldav
  ``save(precondition="etag")``: ``ETagMismatchError``, status 412); so does ``If-Match`` on a
  missing href. ``If-None-Match: *`` on an existing href: **412** on both (caldav's
  ``save(no_overwrite=True)`` searches first and raises ``ConsistencyError``, status None, without
  sending the PUT). The same UID under another href: Radicale **409**, Xandikos **412**, both with
  ``CALDAV:no-uid-conflict`` (caldav: ``UidConflictError``). A body that is not iCalendar:
  Radicale 400, Xandikos 412.
- **ctag** (``{http://calendarserver.org/ns/}getctag``, ``collection_ctag()``): both, changed by
  every change. Radicale's is quoted like an ETag; Xandikos's is the bare commit id.
- **hrefs with '@'** (a UID like ``x@example.com``): Radicale's hrefs always spell it ``%40``;
  Xandikos's hrefs spell it ``@`` (whether the PUT said ``@`` or ``%40``). Both serve either
  spelling. caldav canonicalizes both to ``%40`` in ``obj.url``; compare hrefs unquoted.
- **Errors as caldav raises them**: wrong password 401 and 403 -> ``caldav.lib.error.AuthorizationError``
  (``.status`` 401/403); 412 on a save -> ``ETagMismatchError``; 5xx/507 -> the error of the
  operation (``PutError`` on a save, ``ReportError`` on a REPORT such as ``events()``,
  ``DeleteError``, ``PropfindError``, ``NotFoundError`` for 404), ``.status`` the code; 429, or
  503 with ``Retry-After``, -> ``RateLimitError``; every one a ``caldav.lib.error.DAVError``.
  Connection refused or reset -> ``niquests.exceptions.ConnectionError``; a timeout ->
  ``niquests.exceptions.ReadTimeout`` (both ``niquests.exceptions.RequestException``, an ``OSError``).
- **caldav's own retries** (count them when counting requests): a new ``DAVClient`` sends its first
  request without credentials and repeats it after the 401 challenge (``auth_type="basic"`` sends
  them at once); once signed in, a 401/403 raises at once, no retry. A save whose PUT fails with
  anything but 412 (5xx, 507) is sent once more before ``PutError`` is raised (not with
  ``save(raw_data=...)``, ``no_overwrite`` or ``no_create``).
- **Where the calendar is**: Radicale ``/<user>/calendar/``, Xandikos ``/<user>/calendars/calendar/``
  (its calendar-home-set); both found from the root by ``principal().calendars()``.

``FaultProxy(server)`` is a threaded HTTP reverse proxy on 127.0.0.1 in front of a server: point
the client under test at ``proxy.url`` / ``proxy.calendar_url``. It forwards every request as it
came (method, path, headers, body; the ``Host`` header too, so any absolute URL the server builds
points back at the proxy), and can instead answer an injected status (``fail``), delay requests
(``slow``), rewrite what the server answered (``rewrite``), or stop listening and reset every
open connection (``down``/``up``). It records each request (``requests``: method, path, status,
bytes in, bytes out), so tests and the bench count requests and bytes.

Fixtures for test modules (import them: ``from tests.caldav_servers import dav_server  # noqa: F401``):

- ``dav_server``: a fresh server per test, parametrized over ``SERVER_KINDS`` (ids ``radicale``,
  ``xandikos``), closed after the test;
- ``dav_server_module``: the same, shared by a module (use a fresh calendar per test with
  ``make_calendar``, or tolerate what earlier tests left);
- ``dav_proxy``: a ``FaultProxy`` in front of ``dav_server``.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import hashlib
import http.client
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

import pytest

SERVER_KINDS = ("radicale", "xandikos")
USERNAME = "phone-user"
HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0  # a server that does not answer by then is an error (with its log tail)
STOP_TIMEOUT_S = 10.0  # SIGTERM, then SIGKILL
CLIENT_TIMEOUT_S = 30  # every caldav client made here
PROXY_SOCKET_TIMEOUT_S = 30.0  # every socket operation of the proxy, both sides
MAX_DELAY_S = 30.0  # FaultProxy.slow is bounded by this
MAX_BODY = 64_000_000  # a request body larger than this is refused (413) by the proxy
CALENDAR_ID = "calendar"

# Measured with caldav 3.6.0, Radicale 3.9.0, Xandikos 0.4.10 (tests/test_caldav_servers.py pins them).
PROBED: dict[str, dict[str, Any]] = {
    "radicale": {
        "sync_collection": True,
        "bad_sync_token_status": 403,  # caldav: AuthorizationError, preconditions ["{DAV:}valid-sync-token"]
        "stale_if_match_status": 412,
        "if_none_match_existing_status": 412,
        "uid_conflict_status": 409,
        "at_in_href": "%40",
        "ctag": True,
    },
    "xandikos": {
        "sync_collection": True,
        "bad_sync_token_status": 412,  # caldav: ReportError, preconditions include "{DAV:}valid-sync-token"
        "stale_if_match_status": 412,
        "if_none_match_existing_status": 412,
        "uid_conflict_status": 412,
        "at_in_href": "@",
        "ctag": True,
    },
}

# Xandikos's --htpasswd requires --autocert (HTTPS). This runs Xandikos's own main() with both
# flags, but swaps the self-signed certificate (which would need the `cryptography` package) for
# plain HTTP on loopback. Everything else, Basic auth included, is Xandikos's own code.
_XANDIKOS_LAUNCHER = """
import asyncio, sys
import aiohttp.web
import xandikos.autocert
from xandikos.__main__ import main

_PLAIN = object()
xandikos.autocert.ensure_self_signed = lambda cert_dir, hostname="localhost": ("", "")
xandikos.autocert.make_ssl_context = lambda cert_path, key_path: _PLAIN
_TCPSite = aiohttp.web.TCPSite

class _PlainTCPSite(_TCPSite):
    def __init__(self, *args, ssl_context=None, **kwargs):
        super().__init__(*args, ssl_context=None if ssl_context is _PLAIN else ssl_context, **kwargs)

aiohttp.web.TCPSite = _PlainTCPSite
sys.exit(asyncio.run(main(sys.argv[1:])))
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_answers(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


_RUNNING: set[DavServer] = set()  # started and not yet stopped: killed at exit


@atexit.register
def _kill_leftovers() -> None:
    """No server outlives the test process (a test that forgot close(), or pytest interrupted)."""
    for server in list(_RUNNING):
        server.kill()


try:  # looked up here: the child between fork and exec must not dlopen anything
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):
    _PRCTL = None


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGKILL it when the thread that started it (the test
    process's main thread) dies, even by kill -9. Elsewhere the ``atexit`` hook has to do."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def collection_ctag(calendar: Any) -> str | None:
    """The calendar collection's ctag (``{http://calendarserver.org/ns/}getctag``), as the server spells it."""
    from caldav.elements.base import ValuedBaseElement

    class GetCtag(ValuedBaseElement):
        tag = "{http://calendarserver.org/ns/}getctag"

    value = calendar.get_properties([GetCtag()]).get(GetCtag.tag)
    return None if value is None else str(value)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


# --------------------------------------------------------------------------- the servers


@dataclass(eq=False)
class DavServer:
    """One CalDAV server process on 127.0.0.1 with one user and one calendar.

    ``url`` is the server root (``http://127.0.0.1:PORT/``), ``calendar_url`` the user's calendar
    collection (ends with ``/``). ``stop()`` ends the process and keeps the data; ``start()`` runs
    it again on the same port with the same data; ``kill()`` is ``kill -9``; ``close()`` stops it
    for good. The server's stdout and stderr go to ``log_path`` (appended across restarts)."""

    kind: str
    root: Path
    port: int
    username: str
    password: str
    url: str = ""
    calendar_url: str = ""
    log_path: Path = field(init=False)
    startup_s: float = field(default=0.0, init=False)  # of the last start(), to the first answer
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _log: Any = field(default=None, init=False, repr=False)
    _clients: list[Any] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in SERVER_KINDS:
            raise ValueError(f"unknown CalDAV server kind {self.kind!r} (one of {SERVER_KINDS})")
        self.root.mkdir(parents=True, exist_ok=True)
        self.log_path = self.root / "server.log"
        self.url = f"http://{HOST}:{self.port}/"
        self._write_htpasswd()

    # ------------------------------------------------------------------ process

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Start the server process (again) and wait until its port answers.

        Raises ``RuntimeError`` with the server's log tail when it exits or does not answer
        within ``START_TIMEOUT_S``."""
        if self.running:
            return
        if port_answers(self.port):
            raise RuntimeError(f"cannot start {self.kind}: something else already listens on {HOST}:{self.port}")
        self._close_log()
        self._log = open(self.log_path, "ab")
        began = time.monotonic()
        self._process = subprocess.Popen(
            self._command(), stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=self.root, env=self._env(), preexec_fn=_die_with_parent,
        )
        _RUNNING.add(self)
        deadline = began + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                _RUNNING.discard(self)
                self._close_log()
                raise RuntimeError(f"{self.kind} exited with status {code} at start on port {self.port}:\n"
                                   f"{_tail(self.log_path)}")
            if port_answers(self.port, timeout=0.2):
                self.startup_s = time.monotonic() - began
                return
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"{self.kind} did not answer on port {self.port} within {START_TIMEOUT_S:.0f} s:\n"
                           f"{_tail(self.log_path)}")

    def stop(self) -> None:
        """End the process (SIGTERM, SIGKILL after ``STOP_TIMEOUT_S``); the data stays."""
        process, self._process = self._process, None
        _RUNNING.discard(self)
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)
        self._close_log()

    def kill(self) -> None:
        """``kill -9`` the server process; the data stays as the server left it."""
        process, self._process = self._process, None
        _RUNNING.discard(self)
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)
        self._close_log()

    def close(self) -> None:
        """Stop the server and close every client made by ``client()``/``phone()``."""
        clients, self._clients = self._clients, []
        for client in clients:
            try:
                client.close()
            except Exception:  # noqa: BLE001 - closing a client must not hide the test's outcome
                pass
        self.stop()

    def __enter__(self) -> DavServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env.pop(name, None)
        env["XDG_DATA_HOME"] = str(self.root / "xdg")
        env["HOME"] = str(self.root)
        return env

    def _write_htpasswd(self) -> None:
        path = self.root / "htpasswd"
        if self.kind == "radicale":
            line = f"{self.username}:{self.password}\n"  # htpasswd_encryption = plain
        else:
            digest = base64.b64encode(hashlib.sha1(self.password.encode("utf-8")).digest()).decode("ascii")
            line = f"{self.username}:{{SHA}}{digest}\n"
        path.write_text(line, encoding="utf-8")
        path.chmod(0o600)

    def _command(self) -> list[str]:
        if self.kind == "radicale":
            config = self.root / "radicale.conf"
            config.write_text(
                "[server]\n"
                f"hosts = {HOST}:{self.port}\n"
                "[auth]\n"
                "type = htpasswd\n"
                f"htpasswd_filename = {self.root / 'htpasswd'}\n"
                "htpasswd_encryption = plain\n"
                "delay = 0\n"
                "[rights]\n"
                "type = owner_only\n"
                "[storage]\n"
                f"filesystem_folder = {self.root / 'collections'}\n"
                "[web]\n"
                "type = none\n"
                "[logging]\n"
                "level = warning\n"
                "mask_passwords = True\n",
                encoding="utf-8",
            )
            return [sys.executable, "-m", "radicale", "--config", str(config)]
        return [
            sys.executable, "-c", _XANDIKOS_LAUNCHER, "serve",
            "--directory", str(self.root / "collections"), "--state-dir", str(self.root / "state"),
            "--listen-address", HOST, "--port", str(self.port), "--autocreate",
            "--current-user-principal", f"/{self.username}/",
            "--htpasswd", str(self.root / "htpasswd"), "--autocert", "--no-detect-systemd",
        ]

    # ------------------------------------------------------------------ clients

    def client(self, *, url: str | None = None, username: str | None = None, password: str | None = None,
               timeout: int = CLIENT_TIMEOUT_S, auth_type: str | None = None) -> Any:
        """A new ``caldav.DAVClient`` on this server (or on ``url``, e.g. a proxy's), as this user
        (or as ``username``/``password``); ``close()`` closes it.

        With ``auth_type=None`` (caldav's default) the client's first request goes without
        credentials and takes the server's 401 as the challenge (one extra round trip per new
        client); ``auth_type="basic"`` sends them from the first request."""
        import caldav

        client = caldav.DAVClient(
            url=url or self.url, username=self.username if username is None else username,
            password=self.password if password is None else password, timeout=timeout,
            auth_type=auth_type, enable_rfc6764=False,
        )
        self._clients.append(client)
        return client

    def phone(self, calendar_url: str | None = None) -> Any:
        """"The phone": a ``caldav.Calendar`` of its own ``DAVClient`` on ``calendar_url`` (default:
        the user's calendar). Tests create, edit and delete events with it straight on the server."""
        target = calendar_url or self.calendar_url
        return self.client(url=target).calendar(url=target)

    def make_calendar(self, name: str, cal_id: str | None = None) -> str:
        """Create another calendar collection for the user; returns its URL (ending with ``/``)."""
        principal = self.client().principal()
        calendar = principal.make_calendar(name=name, cal_id=cal_id or uuid.uuid4().hex)
        made = str(calendar.url)
        return made if made.endswith("/") else made + "/"

    def password_file(self, directory: Path) -> Path:
        """Write the password to ``directory/caldav-password`` (mode 0600) and return its path."""
        path = Path(directory) / "caldav-password"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(self.password + "\n")
        path.chmod(0o600)
        return path


def start_server(kind: str, root: Path, *, port: int | None = None, username: str = USERNAME,
                 password: str | None = None) -> DavServer:
    """Start a ``kind`` server (``"radicale"`` or ``"xandikos"``) with its data under ``root``, make
    the user's calendar (display name "Calendar", id ``CALENDAR_ID``) and return it, running.

    The port is a free one unless given; the password is random unless given."""
    for attempt in range(3):
        server = DavServer(kind=kind, root=Path(root), port=port or free_port(), username=username,
                           password=password or secrets.token_urlsafe(16))
        try:
            server.start()
        except RuntimeError:
            server.close()
            if port is not None or attempt == 2 or port_answers(server.port):
                raise
            continue  # the free port was taken in between: try another
        break
    try:
        server.calendar_url = server.make_calendar("Calendar", CALENDAR_ID)
    except BaseException:
        server.close()
        raise
    return server


# --------------------------------------------------------------------------- the fault proxy


class ProxyRequest(NamedTuple):
    """One request through a ``FaultProxy``: bytes as on the wire between the client and the proxy,
    request line/status line and headers included."""

    method: str
    path: str
    status: int
    request_bytes: int
    response_bytes: int


@dataclass
class _Rule:
    status: int  # 0: a delay rule
    methods: frozenset[str] | None
    times: int | None
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    after: bool = False  # a delay rule applied after forwarding: the server has acted, the answer waits
    skip: int = 0  # matching requests let through untouched before the rule starts to apply

    def matches(self, method: str) -> bool:
        return (self.methods is None or method in self.methods) and (self.times is None or self.times > 0)


_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailers",
               "transfer-encoding", "upgrade", "content-length"}
_METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS", "PROPFIND", "PROPPATCH", "REPORT",
            "MKCALENDAR", "MKCOL", "MOVE", "COPY", "LOCK", "UNLOCK", "ACL", "PATCH")


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, proxy: FaultProxy, port: int) -> None:
        self.proxy = proxy
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__((HOST, port), _ProxyHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (timeout, reset, ``down()``) is no error worth a traceback."""
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return
        super().handle_error(request, client_address)

    def reset_connections(self) -> None:
        with self.connections_lock:
            connections = list(self.connections)
            self.connections.clear()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                conn.close()
            except OSError:
                pass


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = PROXY_SOCKET_TIMEOUT_S
    server: _ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            size = 0
            while True:
                line = self.rfile.readline(1024)
                length = int(line.split(b";")[0].strip() or b"0", 16)
                if length == 0:
                    while self.rfile.readline(1024).strip():
                        pass  # trailers
                    return b"".join(chunks)
                size += length
                if size > MAX_BODY:
                    return None
                chunks.append(self.rfile.read(length))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return None
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        proxy = self.server.proxy
        head_bytes = len(self.requestline) + 2 + len(bytes(self.headers)) if self.headers else 0
        body = self._read_body()
        if body is None:
            self._answer(413, {}, b"request body too large for the fault proxy\n", head_bytes, close=True)
            return
        request_bytes = head_bytes + len(body)
        delay = proxy._take_rule(self.command, delay=True)
        if delay is not None and proxy._closing.wait(delay.delay_s):
            self.close_connection = True
            return
        rule = proxy._take_rule(self.command, delay=False)
        if rule is not None:
            self._answer(rule.status, rule.headers, rule.body, request_bytes)
            return
        try:
            status, headers, payload = self._forward(body)
        except (OSError, http.client.HTTPException) as exc:
            self._answer(502, {"Content-Type": "text/plain"},
                         f"fault proxy: upstream {proxy.target} failed: {type(exc).__name__}\n".encode(),
                         request_bytes)
            return
        edit = proxy._edit
        if edit is not None:
            payload = edit(self.command, self.path, payload)
        held = proxy._take_rule(self.command, delay=True, after=True)
        if held is not None:
            proxy._held.append((self.command, self.path))
            if proxy._closing.wait(held.delay_s):
                self.close_connection = True
                return
        self._answer(status, headers, payload, request_bytes)

    def _forward(self, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        host, port = self.server.proxy.target
        conn = http.client.HTTPConnection(host, port, timeout=PROXY_SOCKET_TIMEOUT_S)
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() in _HOP_BY_HOP or (name.lower() == "accept-encoding" and self.server.proxy._edit):
                    continue  # an answer to rewrite is asked for uncompressed
                conn.putheader(name, value)
            if "Host" not in self.headers:
                conn.putheader("Host", f"{host}:{port}")
            if body or self.command in ("PUT", "POST", "PROPFIND", "PROPPATCH", "REPORT", "MKCALENDAR", "MKCOL"):
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body if body else None)
            response = conn.getresponse()
            payload = response.read()
            headers = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP]
            return response.status, headers, payload
        finally:
            conn.close()

    def _answer(self, status: int, headers: dict[str, str] | list[tuple[str, str]], body: bytes,
                request_bytes: int, *, close: bool = False) -> None:
        items = list(headers.items()) if isinstance(headers, dict) else list(headers)
        if self.command == "HEAD" or status in (204, 304) or 100 <= status < 200:
            send_body = b""
        else:
            send_body = body
        lines = [f"HTTP/1.1 {status} {http.client.responses.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in items]
        if not (status in (204, 304) or 100 <= status < 200):
            lines.append(f"Content-Length: {len(body)}")
        if close:
            lines.append("Connection: close")
            self.close_connection = True
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        self.server.proxy._record(ProxyRequest(self.command, self.path, status, request_bytes,
                                               len(head) + len(send_body)))
        self.wfile.write(head + send_body)
        self.wfile.flush()


for _method in _METHODS:
    setattr(_ProxyHandler, f"do_{_method}", _ProxyHandler._handle)


class FaultProxy:
    """A threaded HTTP reverse proxy on 127.0.0.1 in front of a ``DavServer`` (or any ``(host, port)``).

    ``url`` is the proxy's root; ``calendar_url`` the server's calendar seen through the proxy.
    Controls (thread-safe, effective for the next request):

    - ``fail(status, methods=None, times=None, body=b"", headers=None)``: answer ``status`` instead
      of forwarding, for requests whose method is in ``methods`` (all if None), ``times`` times
      (for ever if None). A 401 carries ``WWW-Authenticate: Basic`` unless ``headers`` say otherwise.
      The newest rule that matches wins.
    - ``slow(seconds, methods=None, times=None)``: hold matching requests that long (at most
      ``MAX_DELAY_S``) before forwarding them (or answering a ``fail`` rule).
    - ``down()``: stop listening and reset every open connection (new ones are refused);
      ``up()``: listen again on the same port. ``clear()`` removes the rules.

    ``requests`` is the list of ``ProxyRequest`` (method, path, status, request bytes, response
    bytes) answered so far, injected failures included; ``reset_counts()`` empties it. If the
    server behind is down, the proxy answers 502. ``close()`` stops it for good."""

    def __init__(self, target: DavServer | tuple[str, int], *, port: int | None = None) -> None:
        if isinstance(target, DavServer):
            self.server: DavServer | None = target
            self.target: tuple[str, int] = (HOST, target.port)
        else:
            self.server = None
            self.target = (target[0], int(target[1]))
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._held: list[tuple[str, str]] = []  # requests whose answer hold_answer held
        self._edit: Callable[[str, str, bytes], bytes] | None = None  # see rewrite()
        self._requests: list[ProxyRequest] = []
        self._closing = threading.Event()
        self._httpd: _ProxyServer | None = None
        self._thread: threading.Thread | None = None
        self.port = port or 0
        self.up()

    # ------------------------------------------------------------------ where

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/"

    @property
    def calendar_url(self) -> str:
        """The server's calendar URL with the proxy's host and port."""
        if self.server is None or not self.server.calendar_url:
            raise ValueError("this proxy has no DavServer with a calendar behind it")
        return self.via(self.server.calendar_url)

    def via(self, url: str) -> str:
        """``url`` (on the server behind) as seen through the proxy."""
        host, port = self.target
        prefix = f"http://{host}:{port}"
        if not url.startswith(prefix):
            raise ValueError(f"{url!r} is not on {prefix}")
        return f"http://{HOST}:{self.port}" + url[len(prefix):]

    # ------------------------------------------------------------------ controls

    def fail(self, status: int, methods: set[str] | None = None, times: int | None = None, body: bytes = b"",
             headers: dict[str, str] | None = None) -> None:
        if not 100 <= status <= 599:
            raise ValueError(f"not an HTTP status: {status}")
        answer_headers = dict(headers or {})
        if status == 401 and headers is None:
            answer_headers["WWW-Authenticate"] = 'Basic realm="fault proxy"'
        if body and not any(k.lower() == "content-type" for k in answer_headers):
            answer_headers["Content-Type"] = "text/plain"
        self._add(_Rule(status=status, methods=self._methods(methods), times=times, body=bytes(body),
                        headers=answer_headers))

    def slow(self, seconds: float, methods: set[str] | None = None, times: int | None = None) -> None:
        if not 0 < seconds <= MAX_DELAY_S:
            raise ValueError(f"a delay must be in (0, {MAX_DELAY_S}] seconds, not {seconds}")
        self._add(_Rule(status=0, methods=self._methods(methods), times=times, delay_s=float(seconds)))

    def hold_answer(self, seconds: float, methods: set[str] | None = None, times: int | None = None,
                    skip: int = 0) -> None:
        """Forward matching requests at once but hold the server's answer that long: the server
        has acted and the client does not know yet (the moment a kill -9 hurts most). The first
        ``skip`` matching requests pass untouched. ``held`` lists the requests held so far."""
        if not 0 < seconds <= MAX_DELAY_S:
            raise ValueError(f"a delay must be in (0, {MAX_DELAY_S}] seconds, not {seconds}")
        self._add(_Rule(status=0, methods=self._methods(methods), times=times, delay_s=float(seconds), after=True,
                        skip=skip))

    def rewrite(self, edit: Callable[[str, str, bytes], bytes] | None) -> None:
        """Answer every forwarded request with ``edit(method, path, body)`` in place of the server's
        body (headers, ETag included, as the server sent them); None: as it came. Plays a server
        that serves what it never checked (e.g. an object carrying a second UID)."""
        self._edit = edit

    @property
    def held(self) -> list[tuple[str, str]]:
        return list(self._held)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def down(self) -> None:
        """Stop listening (connections are refused) and reset every connection open now."""
        with self._lock:
            httpd, thread = self._httpd, self._thread
            self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        httpd.reset_connections()
        if thread is not None:
            thread.join(timeout=PROXY_SOCKET_TIMEOUT_S)

    def up(self) -> None:
        """Listen (again) on the proxy's port."""
        if self._closing.is_set():
            raise RuntimeError("this FaultProxy is closed")
        with self._lock:
            if self._httpd is not None:
                return
            httpd = self._new_server(self.port)
            self.port = int(httpd.server_address[1])
            thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                      name=f"{type(self).__name__}-{self.port}", daemon=True)
            self._httpd, self._thread = httpd, thread
        thread.start()

    def _new_server(self, port: int) -> _ProxyServer:
        """The listening server ``up`` starts; a proxy that checks requests itself brings its own."""
        return _ProxyServer(self, port)

    @property
    def is_up(self) -> bool:
        return self._httpd is not None

    def close(self) -> None:
        self._closing.set()
        self.down()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ counters

    @property
    def requests(self) -> list[ProxyRequest]:
        with self._lock:
            return list(self._requests)

    def reset_counts(self) -> None:
        with self._lock:
            self._requests.clear()

    def bytes_total(self) -> int:
        """Request and response bytes of every request so far."""
        return sum(r.request_bytes + r.response_bytes for r in self.requests)

    # ------------------------------------------------------------------ internals

    @staticmethod
    def _methods(methods: set[str] | None) -> frozenset[str] | None:
        return None if methods is None else frozenset(m.upper() for m in methods)

    def _add(self, rule: _Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    def _take_rule(self, method: str, *, delay: bool, after: bool = False) -> _Rule | None:
        """The newest matching delay rule (``delay``; held before forwarding, or ``after``) or
        fail rule, its ``times`` used once."""
        with self._lock:
            for rule in reversed(self._rules):
                if (rule.status == 0) == delay and rule.after == after and rule.matches(method):
                    if rule.skip > 0:
                        rule.skip -= 1
                        continue
                    if rule.times is not None:
                        rule.times -= 1
                    return rule
        return None

    def _record(self, entry: ProxyRequest) -> None:
        with self._lock:
            self._requests.append(entry)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(params=SERVER_KINDS)
def dav_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DavServer]:
    """A fresh CalDAV server (each of ``SERVER_KINDS`` in turn) with one user and one calendar,
    data under ``tmp_path/<kind>``, closed after the test."""
    server = start_server(str(request.param), tmp_path / str(request.param))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module", params=SERVER_KINDS)
def dav_server_module(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DavServer]:
    """One CalDAV server of each kind for a whole test module. Tests that need a clean calendar
    make their own with ``make_calendar``; a test that stops the server must start it again."""
    server = start_server(str(request.param), tmp_path_factory.mktemp(f"dav-{request.param}"))
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def dav_proxy(dav_server: DavServer) -> Iterator[FaultProxy]:
    """A ``FaultProxy`` in front of ``dav_server``, closed after the test."""
    proxy = FaultProxy(dav_server)
    try:
        yield proxy
    finally:
        proxy.close()
