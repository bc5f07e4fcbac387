"""Google's OAuth 2.0 server for installed apps, played on https://127.0.0.1 for the Google sign-in tests.

Why: the Google Calendar sync signs in with google-auth-oauthlib (``InstalledAppFlow``: PKCE,
a loopback redirect) and renews its bearer token with google-auth (``Credentials.refresh``); both
talk to Google's authorization, token and revocation endpoints over HTTPS with ``requests``.
``FakeGoogleOAuth`` serves those endpoints as strictly as
https://developers.google.com/identity/protocols/oauth2/native-app describes them (stricter where
its docstring says), with a certificate from a ``trustme`` CA: put ``ca_bundle`` in
``REQUESTS_CA_BUNDLE`` (the ``google_oauth`` fixture does) and both libraries trust it.
``browser_approve``/``browser_visit``/``browser()`` play the user's browser and the consent
screen; ``mint_grant`` skips them. ``tests.google_fakes`` puts Google's CalDAV front beside it.

Everything is on 127.0.0.1; nothing here opens a connection elsewhere.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
import ssl
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, NamedTuple
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import pytest
import requests
import trustme

from tests.caldav_servers import HOST

CALENDAR_SCOPE = "https://www.googleapis.com/auth/calendar"
EVENTS_SCOPE = "https://www.googleapis.com/auth/calendar.events"
CALDAV_SCOPES = frozenset({CALENDAR_SCOPE, EVENTS_SCOPE})  # either lets a token use CalDAV here
TESTING_REFRESH_LIFETIME_S = 604799  # an app in "Testing" publishing status: refresh tokens live 7 days
SOCKET_TIMEOUT_S = 10.0
MAX_FORM = 1_000_000
# What Google's authorization endpoint takes for an installed app; anything else is refused there
# ("Parameter not allowed for this message type").
AUTH_PARAMS = frozenset({"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge",
                         "code_challenge_method", "access_type", "prompt", "include_granted_scopes", "login_hint",
                         "enable_granular_consent", "nonce", "hd"})
_PKCE = re.compile(r"[A-Za-z0-9._~-]{43,128}")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
CONSENT_HEADER = "X-Fake-Google-Consent"  # only FakeGoogleOAuth.browser_approve sends it: the user's choice



def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def s256(verifier: str) -> str:
    """RFC 7636's S256 code challenge of ``verifier``."""
    return _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def _params(text: str) -> tuple[dict[str, str], str | None]:
    """Query/form parameters, and the first name given more than once (RFC 6749 section 3.1/3.2:
    parameters MUST NOT repeat; a repeated one is refused rather than guessed at)."""
    out: dict[str, str] = {}
    repeated = None
    for name, value in parse_qsl(text, keep_blank_values=True):
        if name in out and repeated is None:
            repeated = name
        out[name] = value
    return out, repeated


def loopback_redirect(uri: str) -> bool:
    """Google's rule for an installed app's redirect: plain http to a loopback address, any port
    and path. No userinfo (``http://127.0.0.1@evil.example/`` is evil.example), no fragment."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - raises ValueError for a port that is no number
    except ValueError:
        return False
    return (parts.scheme == "http" and parts.hostname in _LOOPBACK and "@" not in parts.netloc
            and not parts.fragment)


class Answer(NamedTuple):
    status: int
    headers: dict[str, str]
    body: bytes


def _json(status: int, data: dict[str, Any], headers: dict[str, str] | None = None) -> Answer:
    """A JSON answer with the headers Google's token endpoint sends (never cached)."""
    return Answer(status, {"Content-Type": "application/json; charset=utf-8", "Pragma": "no-cache",
                           "Cache-Control": "no-cache, no-store, max-age=0, must-revalidate", **(headers or {})},
                  json.dumps(data).encode())


def _error(status: int, error: str, description: str, headers: dict[str, str] | None = None) -> Answer:
    return _json(status, {"error": error, "error_description": description}, headers)


def _page(status: int, error: str, detail: str) -> Answer:
    """Google's sign-in error page: the user sees "Error 400: redirect_uri_mismatch"; nothing
    goes back to the app."""
    body = f"<!doctype html><title>Error {status}: {error}</title><h1>Error {status}: {error}</h1><p>{detail}</p>"
    return Answer(status, {"Content-Type": "text/html; charset=utf-8"}, body.encode())


@dataclass
class _Grant:
    """One user consent: the refresh token and every access token made from it die together."""

    refresh_token: str
    scopes: tuple[str, ...]
    revoked: bool = False


@dataclass
class _Access:
    grant: _Grant
    scopes: tuple[str, ...]
    expires_at: float  # time.monotonic()
    expired: bool = False


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    scopes: tuple[str, ...]
    used: bool = False


@dataclass
class _Failure:
    status: int
    error: str
    times: int


class FakeGoogleOAuth:
    """Google's OAuth 2.0 server for installed apps, on https://127.0.0.1:PORT (see the module docstring).

    Strict where Google is: loopback-only redirects, single-use codes bound to their redirect_uri
    and PKCE challenge, client authentication on every token request, no new refresh token on a
    refresh, revocation of a whole grant by any of its tokens. Stricter on purpose: PKCE S256 and
    ``state`` are required, a calendar scope is required, parameters in the token endpoint's URL
    and repeated parameters are refused.

    Records: ``authorizations`` (each authorization request's query, refused ones too),
    ``token_requests`` (``(grant_type, form)``), ``issued`` (access tokens in order)."""

    def __init__(self, tmp_dir: Path, *, client_id: str = "fake-client.apps.googleusercontent.com",
                 client_secret: str | None = None, email: str = "owner@example.com",
                 access_lifetime_s: float = 3599, testing_mode: bool = False) -> None:
        self.client_id = client_id
        self.client_secret = client_secret if client_secret is not None else "GOCSPX-" + secrets.token_urlsafe(21)
        self.email = email
        self.access_lifetime_s = access_lifetime_s
        self.testing_mode = testing_mode
        self.authorizations: list[dict[str, str]] = []
        self.token_requests: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self._codes: dict[str, _Code] = {}
        self._grants: dict[str, _Grant] = {}
        self._access: dict[str, _Access] = {}
        self._issued: list[str] = []
        self._failures: list[_Failure] = []
        tmp_dir = Path(tmp_dir)
        tmp_dir.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        self.ca_bundle = tmp_dir / "fake-google-ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_bundle))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert(HOST, "localhost").configure_cert(context)
        self._httpd = _TLSServer(self, context)
        self.port = int(self._httpd.server_address[1])
        self.url = f"https://{HOST}:{self.port}"
        self.auth_uri = self.url + "/o/oauth2/auth"
        self.token_uri = self.url + "/token"
        self.revoke_uri = self.url + "/revoke"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=f"fake-google-oauth-{self.port}", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ life

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=SOCKET_TIMEOUT_S)

    def __enter__(self) -> FakeGoogleOAuth:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ controls

    @property
    def issued(self) -> list[str]:
        with self._lock:
            return list(self._issued)

    def mint_grant(self, scopes: tuple[str, ...] = (CALENDAR_SCOPE,)) -> str:
        """A refresh token as if the user had signed in and agreed to ``scopes`` (no browser)."""
        with self._lock:
            return self._new_grant(tuple(scopes)).refresh_token

    def mint_access(self, refresh_token: str) -> str:
        """A fresh access token of the grant ``refresh_token`` (what a refresh would return)."""
        with self._lock:
            grant = self._grants[refresh_token]
            return self._issue(grant, grant.scopes)

    def expire_access_tokens(self) -> None:
        """Every access token issued so far stops being valid (an hour has passed); refresh tokens live on."""
        with self._lock:
            for access in self._access.values():
                access.expired = True

    def revoke_all(self) -> None:
        """The user removed the app's access (myaccount.google.com/permissions): every grant dies."""
        with self._lock:
            for grant in self._grants.values():
                grant.revoked = True

    def access_scopes(self, access_token: str) -> tuple[str, ...] | None:
        """The scopes ``access_token`` carries, or None if it is unknown, expired or revoked."""
        with self._lock:
            access = self._access.get(access_token)
            if access is None or access.expired or access.grant.revoked or time.monotonic() >= access.expires_at:
                return None
            return access.scopes

    def token_valid(self, access_token: str) -> bool:
        return self.access_scopes(access_token) is not None

    def fail_token(self, status: int, error: str = "server_error", times: int = 1) -> None:
        """The next ``times`` token requests answer ``status`` with ``{"error": error}`` (Google
        having a bad moment: 500 ``server_error``, 503 ``temporarily_unavailable``, ...)."""
        with self._lock:
            self._failures.append(_Failure(status, error, times))

    def client_file(self, directory: Path, kind: str = "installed", mode: int = 0o600) -> Path:
        """Google Cloud console's downloaded client JSON (``client_secret_<id>.json``) for this
        server; ``kind="web"`` is a "Web application" client's file (which a desktop login must refuse)."""
        path = Path(directory) / f"client_secret_{self.client_id}.json"
        data = {kind: {"client_id": self.client_id, "project_id": "iljeong-test", "auth_uri": self.auth_uri,
                       "token_uri": self.token_uri,
                       "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
                       "client_secret": self.client_secret, "redirect_uris": ["http://localhost"]}}
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        path.chmod(mode)
        return path

    # ------------------------------------------------------------------ the browser

    def browser_approve(self, auth_url: str, *, deny: bool = False, scopes: tuple[str, ...] | None = None) -> str:
        """Be the user's browser: open ``auth_url`` (only on this server, CA-verified), agree (or
        press Cancel: ``deny``; or untick some scopes: ``scopes`` is what the user grants), and
        return the ``Location`` Google sends the browser to: the app's loopback redirect with
        ``state`` and ``code`` (or ``error=access_denied``). AssertionError if Google refused."""
        if not auth_url.startswith(self.url + "/"):
            raise ValueError(f"{auth_url[:80]!r} is not on the fake Google ({self.url})")
        consent = "deny" if deny else ("grant " + " ".join(scopes) if scopes is not None else "grant")
        with requests.Session() as browser:
            browser.trust_env = False  # no proxy, no .netrc: straight to 127.0.0.1
            answer = browser.get(auth_url, allow_redirects=False, verify=str(self.ca_bundle),
                                 headers={CONSENT_HEADER: consent}, timeout=SOCKET_TIMEOUT_S)
        if answer.status_code != 302:
            raise AssertionError(f"Google's sign-in page refused: {answer.status_code} {answer.text[:300]}")
        return answer.headers["Location"]

    def browser_visit(self, auth_url: str, **consent: Any) -> int:
        """``browser_approve``, then follow the redirect to the app's loopback server (the login
        command's own); the status of the page it shows."""
        location = self.browser_approve(auth_url, **consent)
        if not loopback_redirect(location):
            raise AssertionError(f"the redirect left this machine: {location[:80]!r}")
        with requests.Session() as browser:
            browser.trust_env = False
            return browser.get(location, timeout=SOCKET_TIMEOUT_S).status_code

    def browser(self) -> FakeBrowser:
        """A stand-in for ``webbrowser.get()``'s controller: its ``open(url)`` visits in a thread."""
        return FakeBrowser(self)

    # ------------------------------------------------------------------ endpoints

    def _authorize(self, query: str, consent: str | None) -> Answer:
        """GET /o/oauth2/auth. Errors before the redirect is known good are pages for the user
        (never a redirect: an unchecked redirect_uri would be an open redirector)."""
        params, repeated = _params(query)
        with self._lock:
            self.authorizations.append(dict(params))
        if repeated:
            return _page(400, "invalid_request", f"Parameter appears more than once: {repeated}")
        if not params.get("client_id"):
            return _page(400, "invalid_request", "Missing required parameter: client_id")
        if params["client_id"] != self.client_id:
            return _page(401, "invalid_client", "The OAuth client was not found.")
        redirect_uri = params.get("redirect_uri", "")
        if not redirect_uri:
            return _page(400, "invalid_request", "Missing required parameter: redirect_uri")
        if not loopback_redirect(redirect_uri):
            return _page(400, "redirect_uri_mismatch", "You can't sign in to this app because it doesn't comply "
                         "with Google's OAuth 2.0 policy: a desktop app redirects to a loopback address.")
        unknown = sorted(set(params) - AUTH_PARAMS)
        if unknown:
            return _page(400, "invalid_request", f"Parameter not allowed for this message type: {unknown[0]}")
        if not params.get("response_type"):
            return _page(400, "invalid_request", "Missing required parameter: response_type")
        if params["response_type"] != "code":
            return _page(400, "unsupported_response_type", f"Invalid response_type: {params['response_type']}")
        scopes = tuple(params.get("scope", "").split())
        if not scopes:
            return _page(400, "invalid_request", "Missing required parameter: scope")
        if not set(scopes) & CALDAV_SCOPES:
            return _page(400, "invalid_scope", "No Google Calendar scope asked for (stricter than Google).")
        challenge, method = params.get("code_challenge"), params.get("code_challenge_method")
        if not challenge or method != "S256":
            return _page(400, "invalid_request", "PKCE with code_challenge_method=S256 is required here.")
        if not _PKCE.fullmatch(challenge):
            return _page(400, "invalid_request", "Invalid code_challenge: 43-128 characters of [A-Za-z0-9-._~].")
        if not params.get("state"):
            return _page(400, "invalid_request", "state is required here (stricter than Google).")
        if params.get("access_type", "offline") not in ("online", "offline"):
            return _page(400, "invalid_request", f"Invalid access_type: {params['access_type']}")
        reply: dict[str, str] = {"state": params["state"]}
        if consent == "deny":
            reply["error"] = "access_denied"
        else:
            granted = scopes
            if consent and consent.startswith("grant "):
                granted = tuple(s for s in consent[len("grant "):].split() if s in scopes)
            code = "4/0Fake" + secrets.token_urlsafe(32)
            with self._lock:
                self._codes[code] = _Code(self.client_id, redirect_uri, challenge, granted)
            reply.update(code=code, scope=" ".join(granted), authuser="0", prompt="consent")
        joiner = "&" if "?" in redirect_uri else "?"
        location = redirect_uri + joiner + urlencode(reply, quote_via=quote, safe="/:")
        return Answer(302, {"Location": location, "Content-Type": "text/html; charset=utf-8"}, b"")

    def _token(self, query: str, headers: Any, body: bytes) -> Answer:
        """POST /token: the code exchange and the refresh (RFC 6749 sections 4.1.3 and 6)."""
        if query:
            return _error(400, "invalid_request", "Parameters belong in the request body, not the URL.")
        if headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
            return _error(400, "invalid_request", "The body must be application/x-www-form-urlencoded.")
        try:
            form, repeated = _params(body.decode("utf-8"))
        except UnicodeDecodeError:
            return _error(400, "invalid_request", "The body is not UTF-8.")
        with self._lock:
            self.token_requests.append((form.get("grant_type", ""), dict(form)))
            failure = next((f for f in self._failures if f.times > 0), None)
            if failure is not None:
                failure.times -= 1
        if failure is not None:
            return _error(failure.status, failure.error, "Injected by the test.")
        if repeated:
            return _error(400, "invalid_request", f"Parameter appears more than once: {repeated}")
        refused = self._client_refused(headers.get("Authorization"), form)
        if refused is not None:
            return refused
        grant_type = form.get("grant_type")
        if not grant_type:
            return _error(400, "invalid_request", "Missing required parameter: grant_type")
        if grant_type == "authorization_code":
            return self._exchange(form)
        if grant_type == "refresh_token":
            return self._refresh(form)
        return _error(400, "unsupported_grant_type", f"Invalid grant_type: {grant_type}")

    def _client_refused(self, authorization: str | None, form: dict[str, str]) -> Answer | None:
        """Client authentication: the secret in the body or in HTTP Basic (RFC 6749 section 2.3.1,
        form-encoded before base64), never both ("MUST NOT use more than one method")."""
        challenge: dict[str, str] = {}
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() != "basic":
                return _error(401, "invalid_client", "Unauthorized", {"WWW-Authenticate": 'Basic realm="token"'})
            if "client_secret" in form:
                return _error(400, "invalid_request", "Client authentication given twice (header and body).")
            try:
                client_id, _, secret = base64.b64decode(value.strip(), validate=True).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                client_id, secret = "", ""
            client_id, secret = unquote(client_id), unquote(secret)
            if form.get("client_id", client_id) != client_id:
                return _error(400, "invalid_request", "client_id in the body differs from the header's.")
            challenge = {"WWW-Authenticate": 'Basic realm="token"'}
        else:
            client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if client_id != self.client_id or not hmac.compare_digest(secret.encode(), self.client_secret.encode()):
            return _error(401, "invalid_client", "Unauthorized", challenge)
        return None

    def _exchange(self, form: dict[str, str]) -> Answer:
        for name in ("code", "redirect_uri", "code_verifier"):
            if not form.get(name):
                return _error(400, "invalid_request", f"Missing required parameter: {name}")
        with self._lock:
            code = self._codes.get(form["code"])
            if code is None or code.used:
                return _error(400, "invalid_grant", "Malformed auth code.")
            code.used = True  # burnt by its first presentation, right or wrong
            if code.redirect_uri != form["redirect_uri"]:
                return _error(400, "redirect_uri_mismatch", "Bad Request")
            verifier = form["code_verifier"]
            if not _PKCE.fullmatch(verifier) or not hmac.compare_digest(s256(verifier), code.challenge):
                return _error(400, "invalid_grant", "Invalid code verifier.")
            grant = self._new_grant(code.scopes)
            access = self._issue(grant, grant.scopes)
        now = int(time.time())
        claims = {"iss": "https://accounts.google.com", "azp": self.client_id, "aud": self.client_id, "sub": "1234",
                  "email": self.email, "email_verified": True, "iat": now, "exp": now + 3600}
        id_token = ".".join([_b64url(json.dumps({"alg": "RS256", "kid": "fake", "typ": "JWT"}).encode()),
                             _b64url(json.dumps(claims).encode()), _b64url(secrets.token_bytes(256))])
        answer: dict[str, Any] = {"access_token": access, "expires_in": int(self.access_lifetime_s),
                                  "refresh_token": grant.refresh_token, "scope": " ".join(grant.scopes),
                                  "token_type": "Bearer", "id_token": id_token}
        if self.testing_mode:
            answer["refresh_token_expires_in"] = TESTING_REFRESH_LIFETIME_S
        return _json(200, answer)

    def _refresh(self, form: dict[str, str]) -> Answer:
        if not form.get("refresh_token"):
            return _error(400, "invalid_request", "Missing required parameter: refresh_token")
        with self._lock:
            grant = self._grants.get(form["refresh_token"])
            if grant is None or grant.revoked:
                return _error(400, "invalid_grant", "Token has been expired or revoked.")
            asked = tuple(form.get("scope", "").split()) or grant.scopes
            if not set(asked) <= set(grant.scopes):
                return _error(400, "invalid_scope", "Some requested scopes were not granted.")
            access = self._issue(grant, asked)
        return _json(200, {"access_token": access, "expires_in": int(self.access_lifetime_s),
                           "scope": " ".join(asked), "token_type": "Bearer"})

    def _revoke(self, query: str, headers: Any, body: bytes) -> Answer:
        """POST /revoke with ``token`` (in the form, or in the URL as Google's own example does):
        either kind of token ends the whole grant, as Google's does."""
        form, _ = _params(query)
        if body:
            if headers.get("Content-Type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
                return _error(400, "invalid_request", "The body must be application/x-www-form-urlencoded.")
            form.update(_params(body.decode("utf-8", "replace"))[0])
        token = form.get("token")
        if not token:
            return _error(400, "invalid_request", "Missing required parameter: token")
        with self._lock:
            grant = self._grants.get(token)
            if grant is None and token in self._access:
                grant = self._access[token].grant
            if grant is None or grant.revoked:
                return _error(400, "invalid_token", "Token expired or revoked")
            grant.revoked = True
        return _json(200, {})

    # ------------------------------------------------------------------ internals (under self._lock)

    def _new_grant(self, scopes: tuple[str, ...]) -> _Grant:
        grant = _Grant("1//0fake" + secrets.token_urlsafe(40), scopes)
        self._grants[grant.refresh_token] = grant
        return grant

    def _issue(self, grant: _Grant, scopes: tuple[str, ...]) -> str:
        token = "ya29.fake" + secrets.token_urlsafe(48)
        self._access[token] = _Access(grant, scopes, time.monotonic() + self.access_lifetime_s)
        self._issued.append(token)
        return token


class FakeBrowser:
    """What ``webbrowser.get()`` returns, for a login command that opens the user's browser:
    ``open(url)`` runs ``FakeGoogleOAuth.browser_visit(url)`` in a thread (the login command's
    loopback server must be listening to answer it). ``statuses``/``errors`` say what came of it."""

    def __init__(self, oauth: FakeGoogleOAuth, **consent: Any) -> None:
        self.oauth = oauth
        self.consent = consent
        self.opened: list[str] = []
        self.statuses: list[int] = []
        self.errors: list[BaseException] = []
        self._threads: list[threading.Thread] = []

    def open(self, url: str, new: int = 0, autoraise: bool = True) -> bool:
        self.opened.append(url)
        thread = threading.Thread(target=self._visit, args=(url,), daemon=True, name="fake-browser")
        self._threads.append(thread)
        thread.start()
        return True

    def join(self, timeout: float = 30.0) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def _visit(self, url: str) -> None:
        try:
            self.statuses.append(self.oauth.browser_visit(url, **self.consent))
        except BaseException as exc:  # noqa: BLE001 - kept for the test to look at
            self.errors.append(exc)


class _TLSServer(ThreadingHTTPServer):
    """HTTPS with the TLS handshake in the request's own thread, so a client that connects and
    says nothing cannot stall the accept loop."""

    daemon_threads = True

    def __init__(self, fake: FakeGoogleOAuth, context: ssl.SSLContext) -> None:
        self.fake = fake
        self.context = context
        super().__init__((HOST, 0), _OAuthHandler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(SOCKET_TIMEOUT_S)
        try:
            tls = self.context.wrap_socket(request, server_side=True)
        except (OSError, ValueError):
            return  # a client that does not trust the CA, or no TLS at all
        try:
            self.RequestHandlerClass(tls, client_address, self)
        finally:
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (OSError, ValueError)):
            return
        super().handle_error(request, client_address)


class _OAuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _TLSServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path in ("/o/oauth2/auth", "/o/oauth2/v2/auth"):
            self._send(self.server.fake._authorize(query, self.headers.get(CONSENT_HEADER)))
        else:
            self._send(_page(405 if path in ("/token", "/revoke") else 404, "not_found", path))

    def do_POST(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_FORM:
            self.close_connection = True
            self._send(_error(413, "invalid_request", "Request too large."))
            return
        body = self.rfile.read(length) if length else b""
        fake = self.server.fake
        if path == "/token":
            self._send(fake._token(query, self.headers, body))
        elif path == "/revoke":
            self._send(fake._revoke(query, self.headers, body))
        else:
            self._send(_page(405 if path.startswith("/o/oauth2/") else 404, "not_found", path))

    def _send(self, answer: Answer) -> None:
        self.send_response(answer.status)
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)
        self.wfile.flush()


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def google_oauth(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGoogleOAuth]:
    """A ``FakeGoogleOAuth`` whose CA ``requests`` trusts (``REQUESTS_CA_BUNDLE``) for this test."""
    with FakeGoogleOAuth(tmp_path / "google-oauth") as oauth:
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(oauth.ca_bundle))
        yield oauth
