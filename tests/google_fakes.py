"""Google Calendar over CalDAV, played on 127.0.0.1: Google's sign-in, Google's CalDAV front, and both
in the shape of a ``DavServer`` for the sync tests.

Google's CalDAV takes OAuth 2.0 bearer tokens only, so a sync against "Google" needs three things
that cannot run here: Google's OAuth server, a browser where the user says yes, and Google's
CalDAV front. They are played as strictly as Google (stricter where said), so that a client that
passes these tests has sent what Google would take:

- ``FakeGoogleOAuth`` (``tests.fake_google_oauth``, re-exported here): the authorization, token
  and revocation endpoints over HTTPS with a ``trustme`` CA, a browser that says yes (or no).
- ``BearerProxy``: a ``FaultProxy`` (so every fault it can inject too) that lets a request through
  to a real Radicale only with ``Authorization: Bearer <token>`` the fake OAuth server issued and
  still honours, refuses what Google's CalDAV refuses (making calendars, free-busy reports, tasks)
  and can answer Google's rate-limit 403.
- ``GoogleDav``: Radicale + ``FakeGoogleOAuth`` + ``BearerProxy`` in the shape of a ``DavServer``,
  so the sync tests (and ``FaultProxy(google_dav)``) run against "Google" unchanged; the phone
  goes straight to Radicale with Basic, as another client of the same calendar would.
  ``grant_file`` writes the sign-in file the production code reads.

Fixtures: ``google_oauth`` and ``google_dav`` (import them), each with its CA in
``REQUESTS_CA_BUNDLE`` for the test (child processes inherit it).

Everything is on 127.0.0.1; nothing here ever opens a connection elsewhere.
"""

from __future__ import annotations

import base64
import json
import re
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest

from tests.caldav_servers import (_METHODS, HOST, SERVER_KINDS, DavServer, FaultProxy, ProxyRequest, _ProxyHandler, _ProxyServer,
                                  start_server)
from tests.fake_google_oauth import (CALDAV_SCOPES, CALENDAR_SCOPE, EVENTS_SCOPE, TESTING_REFRESH_LIFETIME_S,
                                     Answer, FakeBrowser, FakeGoogleOAuth, google_oauth, loopback_redirect, s256)

__all__ = ["CALDAV_SCOPES", "CALENDAR_SCOPE", "EVENTS_SCOPE", "RATE_LIMIT_BODY", "TESTING_REFRESH_LIFETIME_S",
           "BearerProxy", "BearerRequest", "FakeBrowser", "FakeGoogleOAuth", "GoogleDav", "components", "dav_server", "google_dav", "sync_account",
           "google_oauth", "loopback_redirect", "s256"]

RATE_LIMIT_BODY = json.dumps({"error": {"errors": [{"domain": "usageLimits", "reason": "rateLimitExceeded",
                                                    "message": "Rate Limit Exceeded"}],
                                        "code": 403, "message": "Rate Limit Exceeded"}}).encode()


# --------------------------------------------------------------------------- Google's CalDAV front


class BearerRequest(NamedTuple):
    """One request through a ``BearerProxy``: the ``ProxyRequest`` fields and the auth scheme the
    client used ("Bearer", "Basic", "" for none)."""

    method: str
    path: str
    status: int
    auth_scheme: str
    request_bytes: int
    response_bytes: int


_UNSET = object()
_ALLOWED_COMPONENTS = frozenset({"VCALENDAR", "VEVENT", "VTIMEZONE", "STANDARD", "DAYLIGHT", "VALARM"})
_UNAUTHENTICATED = json.dumps({"error": {
    "code": 401, "status": "UNAUTHENTICATED",
    "message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
               "or other valid authentication credential."}}).encode()
_INSUFFICIENT = json.dumps({"error": {
    "code": 403, "status": "PERMISSION_DENIED", "message": "Request had insufficient authentication scopes.",
    "errors": [{"domain": "global", "reason": "insufficientPermissions",
                "message": "Insufficient Permission"}]}}).encode()


def components(ics: bytes) -> set[str]:
    """The component names a PUT body opens (``BEGIN:X``), lines unfolded first so a folded
    ``BEGIN:VT\\r\\n ODO`` is seen too."""
    text = re.sub(r"\r?\n[ \t]", "", ics.decode("utf-8", "replace"))
    return {m.group(1).upper() for m in re.finditer(r"(?im)^BEGIN[ \t]*:[ \t]*([^\r\n]*?)[ \t]*\r?$", text)}


class BearerProxy(FaultProxy):
    """Google's CalDAV front before a ``DavServer``: plain HTTP on 127.0.0.1, and a ``FaultProxy``
    (``fail``, ``slow``, ``hold_answer``, ``down``/``up`` ... act on requests that got past the front).

    A request passes only with one ``Authorization: Bearer <token>`` for which
    ``oauth.access_scopes(token)`` holds a calendar scope; it is forwarded with the server's own
    Basic login (the client's header never reaches the server). Refused, as Google does:

    - no, Basic, unknown, expired or revoked credentials: 401 with
      ``WWW-Authenticate: Bearer realm="https://accounts.google.com/"`` (plus ``error="invalid_token"``
      when credentials were given, RFC 6750 section 3.1) and Google's JSON error;
    - a token without a calendar scope: 403 ``insufficientPermissions``;
    - MKCALENDAR/MKCOL: 403 (Google's calendars are made in Google Calendar, not over CalDAV);
    - a REPORT with ``free-busy-query``: 403;
    - a PUT holding a component other than VEVENT/VTIMEZONE/VALARM (VTODO, VJOURNAL ...): 400.

    ``rate_limit(times)``: the next ``times`` requests past the front get Google's 403
    ``rateLimitExceeded`` JSON. ``requests`` lists ``BearerRequest``s, refusals included."""

    def __init__(self, server: DavServer, oauth: FakeGoogleOAuth, *, port: int | None = None) -> None:
        self.oauth = oauth
        login = base64.b64encode(f"{server.username}:{server.password}".encode()).decode("ascii")
        self._basic = f"Basic {login}"
        self._seen = threading.local()  # the auth scheme of the request this handler thread answers
        super().__init__(server, port=port)

    def _new_server(self, port: int) -> _ProxyServer:
        """The bearer check from the first request on (``FaultProxy.up`` starts it)."""
        return _BearerServer(self, port)

    def rate_limit(self, times: int) -> None:
        self.fail(403, times=times, body=RATE_LIMIT_BODY, headers={"Content-Type": "application/json; charset=UTF-8"})

    @property
    def requests(self) -> list[BearerRequest]:  # type: ignore[override]
        with self._lock:
            return list(self._requests)  # type: ignore[arg-type]

    def _record(self, entry: ProxyRequest) -> None:
        scheme = getattr(self._seen, "scheme", "")
        super()._record(BearerRequest(entry.method, entry.path, entry.status, scheme,  # type: ignore[arg-type]
                                      entry.request_bytes, entry.response_bytes))

    def _refusal(self, method: str, authorizations: list[str], body: bytes) -> Answer | None:
        """Google's answer to a request it does not let through, or None."""
        realm = 'Bearer realm="https://accounts.google.com/"'
        scheme, _, token = (authorizations[0] if authorizations else "").partition(" ")
        token = token.strip()
        if len(authorizations) != 1 or scheme.lower() != "bearer" or not token:
            challenge = realm if not authorizations else realm + ', error="invalid_token"'
            return Answer(401, {"WWW-Authenticate": challenge, "Content-Type": "application/json; charset=UTF-8"},
                          _UNAUTHENTICATED)
        scopes = self.oauth.access_scopes(token)
        if scopes is None:
            return Answer(401, {"WWW-Authenticate": realm + ', error="invalid_token"',
                                "Content-Type": "application/json; charset=UTF-8"}, _UNAUTHENTICATED)
        if not set(scopes) & CALDAV_SCOPES:
            return Answer(403, {"WWW-Authenticate": realm + ', error="insufficient_scope"',
                                "Content-Type": "application/json; charset=UTF-8"}, _INSUFFICIENT)
        if method in ("MKCALENDAR", "MKCOL"):
            return Answer(403, {"Content-Type": "text/plain"}, b"Google Calendar does not make calendars over CalDAV\n")
        if method == "REPORT" and b"free-busy-query" in body:
            return Answer(403, {"Content-Type": "text/plain"}, b"free-busy-query is not supported\n")
        if method == "PUT":
            other = components(body) - _ALLOWED_COMPONENTS
            if other:
                return Answer(400, {"Content-Type": "text/plain"},
                              f"unsupported component: {sorted(other)[0][:40]}\n".encode())
        return None


class _BearerServer(_ProxyServer):
    def __init__(self, proxy: BearerProxy, port: int) -> None:
        super().__init__(proxy, port)
        self.RequestHandlerClass = _BearerHandler


class _BearerHandler(_ProxyHandler):
    """The fault proxy's handler with Google's front before it: the body is read once (and
    kept for the fault proxy's own reading), checked, and the Bearer swapped for Basic."""

    _body: Any = _UNSET

    def _read_body(self) -> bytes | None:
        if self._body is _UNSET:
            self._body = super()._read_body()
        return self._body

    def _handle(self) -> None:
        proxy: BearerProxy = self.server.proxy  # type: ignore[assignment]
        self._body = _UNSET  # a kept-alive connection carries several requests
        authorizations = self.headers.get_all("Authorization") or []
        proxy._seen.scheme = authorizations[0].partition(" ")[0] if authorizations else ""
        body = self._read_body()
        if body is not None:
            refusal = proxy._refusal(self.command, authorizations, body)
            if refusal is not None:
                head = len(self.requestline) + 2 + len(bytes(self.headers))
                self._answer(refusal.status, refusal.headers, refusal.body, head + len(body))
                return
            del self.headers["Authorization"]
            self.headers["Authorization"] = proxy._basic
        _ProxyHandler._handle(self)  # a too-large body gets the fault proxy's own 413 there


for _method in _METHODS:  # the base class bound do_X to its own _handle
    setattr(_BearerHandler, f"do_{_method}", _BearerHandler._handle)


# --------------------------------------------------------------------------- "Google" as a DavServer


class GoogleDav(DavServer):
    """Google Calendar over CalDAV, in the shape of a ``DavServer`` (a subclass, so ``FaultProxy``
    takes it): Radicale behind a ``BearerProxy``, with a ``FakeGoogleOAuth`` issuing the tokens.

    ``url``/``port``/``calendar_url`` are the bearer proxy's: the client under test goes there.
    ``client()``, ``phone()`` and ``make_calendar()`` go straight to Radicale with Basic (the test's
    own hands and the user's phone are other clients; Google would not let ``make_calendar`` through);
    they take the proxy's URLs too. ``username``/``password`` are that Basic login (which the front
    refuses); ``password_file`` writes it. ``stop``/``start``/``kill`` act on Radicale (the front
    then answers 502). ``oauth``, ``proxy`` and ``radicale`` are the parts."""

    def __init__(self, root: Path, **oauth_options: Any) -> None:
        """Start the three parts (``oauth_options`` go to ``FakeGoogleOAuth``). Not the
        dataclass ``__init__``: the fields are the parts' own, and there is no process of its own."""
        root = Path(root)
        self.radicale = start_server("radicale", root / "radicale")
        try:
            self.oauth = FakeGoogleOAuth(root / "oauth", **oauth_options)
            try:
                self.proxy = BearerProxy(self.radicale, self.oauth)
            except BaseException:
                self.oauth.close()
                raise
        except BaseException:
            self.radicale.close()
            raise
        self.kind = "google"
        self.root = root
        self.port = self.proxy.port
        self.username = self.radicale.username
        self.password = self.radicale.password
        self.url = self.proxy.url
        self.calendar_url = self.proxy.calendar_url
        self.log_path = self.radicale.log_path
        self.startup_s = self.radicale.startup_s
        self._process = None
        self._log = None
        self._clients = []

    @property
    def email(self) -> str:
        return self.oauth.email

    @property
    def running(self) -> bool:  # type: ignore[override]
        return self.radicale.running

    @property
    def pid(self) -> int | None:  # type: ignore[override]
        return self.radicale.pid

    def start(self) -> None:
        self.radicale.start()

    def stop(self) -> None:
        self.radicale.stop()

    def kill(self) -> None:
        self.radicale.kill()

    def close(self) -> None:
        self.proxy.close()
        self.oauth.close()
        self.radicale.close()

    def direct(self, url: str | None) -> str | None:
        """``url`` as Radicale's own (a URL through the bearer proxy turned back; others as given)."""
        prefix = f"http://{HOST}:{self.proxy.port}"
        if url is not None and url.startswith(prefix):
            return f"http://{HOST}:{self.radicale.port}" + url[len(prefix):]
        return url

    def client(self, *, url: str | None = None, **options: Any) -> Any:
        return self.radicale.client(url=self.direct(url), **options)

    def phone(self, calendar_url: str | None = None) -> Any:
        return self.radicale.phone(self.direct(calendar_url))

    def make_calendar(self, name: str, cal_id: str | None = None) -> str:
        """Make it on Radicale (Google would refuse); its URL as seen through the front."""
        return self.proxy.via(self.radicale.make_calendar(name, cal_id))

    def access_token(self) -> str:
        """A valid access token of a fresh grant (a signed-in client, without the login)."""
        return self.oauth.mint_access(self.oauth.mint_grant())

    def grant_file(self, directory: Path, *, with_access: bool = True) -> Path:
        """The sign-in file the production code reads (``google_token.save_grant`` at
        ``grant_path(directory)``, mode 0600) for a fresh grant of this fake Google, as a login
        would leave it: with a valid access token and its expiry (``with_access=False``: none, so
        the first request refreshes), and in ``testing_mode`` the sign-in's own end."""
        from tools.calendar.sync.google_signin import SCOPES
        from tools.calendar.sync.google_token import Grant, grant_path, save_grant

        now = datetime.now(timezone.utc)
        refresh_token = self.oauth.mint_grant(tuple(SCOPES))
        access = self.oauth.mint_access(refresh_token) if with_access else ""
        ends = now + timedelta(seconds=TESTING_REFRESH_LIFETIME_S) if self.oauth.testing_mode else None
        grant = Grant(account=self.oauth.email, client_id=self.oauth.client_id,
                      client_secret=self.oauth.client_secret, refresh_token=refresh_token,
                      token_uri=self.oauth.token_uri, revoke_uri=self.oauth.revoke_uri, scopes=tuple(SCOPES),
                      access_token=access,
                      expiry=(now + timedelta(seconds=self.oauth.access_lifetime_s)).isoformat() if access else "",
                      refresh_expiry=ends.isoformat() if ends else "")
        path = grant_path(Path(directory))
        save_grant(path, grant)
        return path


def sync_account(server: DavServer, url: str | None = None, password: str | None = None, **options: Any) -> Any:
    """The account a user would have set up for ``server``: a password, or a Google sign-in (its
    grant file in the server's own directory, as ``calendar login google`` leaves it)."""
    from tools.calendar.sync.settings import Account

    options.setdefault("timeout_s", 5)
    if isinstance(server, GoogleDav):
        if password is not None:
            pytest.skip("a bearer-only server takes no password (test_google_calendar.py: a refused token)")
        grant = server.root / "signin" / "google-signin.json"
        from tools.calendar.sync.google_token import GoogleToken

        token = GoogleToken(grant if grant.exists() else server.grant_file(grant.parent))
        return Account(url or server.calendar_url, server.email, "", token=token, **options)
    return Account(url or server.calendar_url, server.username, password or server.password, **options)



# --------------------------------------------------------------------------- fixtures


@pytest.fixture(params=(*SERVER_KINDS, "google"))
def dav_server(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DavServer]:
    """``tests.caldav_servers.dav_server`` with "Google" as a third server: each real server in
    turn, then Google's front over Radicale (its sign-in CA trusted). A sync test module imports
    this one instead to run once more in bearer mode."""
    kind = str(request.param)
    server = GoogleDav(tmp_path / kind) if kind == "google" else start_server(kind, tmp_path / kind)
    try:
        if isinstance(server, GoogleDav):
            monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.oauth.ca_bundle))
        yield server
    finally:
        server.close()


@pytest.fixture
def google_dav(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GoogleDav]:
    """A ``GoogleDav`` (Radicale + fake Google sign-in + bearer front) for this test, its CA in
    ``REQUESTS_CA_BUNDLE`` (child processes inherit it), closed after the test."""
    server = GoogleDav(tmp_path / "google")
    try:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(server.oauth.ca_bundle))
        yield server
    finally:
        server.close()
