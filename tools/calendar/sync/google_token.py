"""A Google sign-in at run time: the grant kept on disk, and an access token that stays fresh.

Why its own module: Google's CalDAV takes OAuth 2.0 bearer tokens only, and a bearer token
lives an hour. ``caldav`` takes any auth object but refreshes nothing, so the sync holds a
``GoogleToken`` that refreshes (google-auth's ``Credentials.refresh``, not a hand-written
token request) a minute before the token runs out, and once more when the server answers 401
(the token was revoked or the clock is off). A grant Google no longer honours (``invalid_grant``:
expired, revoked, or an app left in "testing" for over 7 days) stops the sync with one line that
says to sign in again; the local calendar goes on and queues its changes, as in an outage.

The grant (client id and secret, refresh token, the last access token and when it ends) is one
JSON file with mode 0600 in the data directory, written whole and atomically: it never appears
in argv, the launchd plist, a log line or a status line, and every secret in it is registered
with ``agent.known_secrets`` as it is read, so a masked log masks it.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agent.apikey import read_secret_file
from agent.known_secrets import remember
from agent.url_policy import is_this_machine, normal_host
from tools.calendar.sync.report import SyncFailed

GRANT_FILENAME = "google-signin.json"
LOGIN_COMMAND = "python -m agent calendar login google"
SIGNIN_EXPIRED = f"Google sign-in expired or was revoked: run `{LOGIN_COMMAND}`"
EARLY = timedelta(seconds=60)  # refresh this long before the token ends: a request in flight must not outlive it
REFRESH_TIMEOUT_S = 15.0
GOOGLE_HOSTS = frozenset({"accounts.google.com", "oauth2.googleapis.com", "www.googleapis.com"})
CLIENT_HELP = "README: \"Google Calendar\" says how to make a Desktop app client and download its JSON"
REFUSALS = ("invalid_client", "unauthorized_client", "invalid_scope")  # answers only a new sign-in mends


@dataclass(frozen=True)
class Grant:
    """What one Google sign-in leaves on disk. ``repr`` shows no secret."""

    account: str  # the Google account's e-mail: the primary calendar's id, shown in status lines
    client_id: str
    client_secret: str = field(repr=False)
    refresh_token: str = field(repr=False)
    token_uri: str
    revoke_uri: str
    scopes: tuple[str, ...] = ()
    access_token: str = field(default="", repr=False)
    expiry: str = ""  # ISO 8601, UTC: when ``access_token`` ends
    refresh_expiry: str = ""  # ISO 8601, UTC: when the sign-in itself ends ("testing" apps: 7 days); "" if never said

    def expires_at(self) -> datetime | None:
        return _parse(self.expiry)

    def signin_ends_at(self) -> datetime | None:
        return _parse(self.refresh_expiry)


def grant_path(data_dir: Path) -> Path:
    return Path(data_dir).expanduser() / GRANT_FILENAME


def load_grant(path: Path) -> Grant | None:
    """The grant in ``path``, or None if there is none; ValueError (one line) for a file that is
    readable by others, broken, or missing a field, naming the fix."""
    text = read_secret_file(path, "Google sign-in file")
    if text is None:
        return None
    try:
        data = json.loads(text)
        grant = Grant(**{**data, "scopes": tuple(data.get("scopes", ()))})
        if not all(isinstance(v, str) for v in (*(v for k, v in data.items() if k != "scopes"), *grant.scopes)):
            raise TypeError("a field is not text")  # a hand-edited file: said as a broken file, not a traceback
    except (ValueError, TypeError) as exc:
        raise ValueError(f"the Google sign-in file {path} cannot be read ({type(exc).__name__}): "
                         f"run `{LOGIN_COMMAND}` again") from None
    if not (grant.refresh_token and grant.client_id and grant.token_uri):
        raise ValueError(f"the Google sign-in file {path} is incomplete: run `{LOGIN_COMMAND}` again")
    for secret in (grant.refresh_token, grant.client_secret, grant.access_token):
        remember(secret, "<google token>")
    return grant


def save_grant(path: Path, grant: Grant) -> None:
    """Write ``grant`` whole, mode 0600 from the first byte, replacing the old file atomically (the
    bot and ``calendar sync`` may both refresh; a reader sees one grant or the other, never half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, (json.dumps({**asdict(grant), "scopes": list(grant.scopes)}, indent=1) + "\n").encode())
            os.fsync(fd)  # on disk before the rename: a power cut leaves the old grant, not an empty file
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)  # a full disk leaves no half-written copy of the secrets beside the grant
        raise


def check_endpoint(url: str, what: str) -> str:
    """``url`` if it is https on one of Google's sign-in hosts or on this machine; ValueError else."""
    parts = urlsplit(str(url).strip())
    host = normal_host(parts.hostname or "")
    if parts.scheme != "https" or not (host in GOOGLE_HOSTS or is_this_machine(host)):
        raise ValueError(f"the OAuth client's {what} {url!r} is not Google's (https on "
                         f"{', '.join(sorted(GOOGLE_HOSTS))}): {CLIENT_HELP}")
    return str(url).strip()


class GoogleToken:
    """The access token for one grant file: ``bearer()`` for each request, ``refresh()`` after a 401."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        grant = load_grant(self.path)
        if grant is None:
            raise ValueError(f"not signed in to Google (no {self.path}): run `{LOGIN_COMMAND}`")
        self.grant = grant
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GoogleToken(account={self.grant.account!r})"

    @property
    def account(self) -> str:
        return self.grant.account

    def bearer(self) -> str:
        """A token good for at least ``EARLY`` more: the one held, or a new one."""
        with self._lock:
            ends = self.grant.expires_at()
            if self.grant.access_token and ends is not None and ends - EARLY > datetime.now(timezone.utc):
                return self.grant.access_token
            return self._refresh()

    def refresh(self, rejected: str | None = None) -> str:
        """A new access token, after the server refused ``rejected`` (401). If another thread has
        already replaced that token, its replacement is used: one refresh per 401, not one per thread."""
        with self._lock:
            if rejected is not None and self.grant.access_token and self.grant.access_token != rejected:
                return self.grant.access_token
            return self._refresh()

    def _refresh(self) -> str:
        from google.auth import exceptions as google_errors
        from google.auth.transport.requests import Request
        from google.oauth2.credentials import Credentials

        grant = self.grant = self._as_on_disk()
        try:  # the file is ours and 0600, but the refresh token must reach Google (or a local stand-in) only
            check_endpoint(grant.token_uri, "token_uri")
        except ValueError:
            raise SyncFailed("signin", f"the Google sign-in file {self.path} names a token endpoint that is not "
                                       f"Google's: run `{LOGIN_COMMAND}` again") from None
        credentials = Credentials(token=None, refresh_token=grant.refresh_token, token_uri=grant.token_uri,
                                  client_id=grant.client_id, client_secret=grant.client_secret,
                                  scopes=list(grant.scopes) or None)
        try:
            credentials.refresh(_Bounded(Request()))
        except google_errors.RefreshError as exc:
            error = _error_code(exc)
            if error == "invalid_grant":
                raise SyncFailed("signin", SIGNIN_EXPIRED) from None
            if error in REFUSALS:  # the client itself was deleted or changed in Google Cloud Console
                raise SyncFailed("signin", f"Google refused to renew the sign-in ({error}): "
                                           f"run `{LOGIN_COMMAND}`") from None
            raise SyncFailed("unreachable", f"Google's sign-in server failed ({_first_line(exc)}); "
                                            "changes stay queued") from None
        except google_errors.TransportError as exc:
            raise SyncFailed("unreachable", f"cannot reach Google's sign-in server: {_first_line(exc)}; "
                                            "changes stay queued") from None
        self.grant = replace(grant, access_token=credentials.token or "", expiry=expiry_text(credentials))
        remember(self.grant.access_token, "<google token>")
        try:
            save_grant(self.path, self.grant)
        except OSError:  # a read-only data dir costs one refresh per process, not the sync
            pass
        return self.grant.access_token

    def _as_on_disk(self) -> Grant:
        """The grant as the file holds it now. ``calendar login google`` in another process may have
        replaced it (the new refresh token that "sign in again" asked for) and ``logout`` may have
        removed it: a running bot follows both, and never writes the old grant back over them."""
        try:
            on_disk = load_grant(self.path)
        except (ValueError, OSError):  # unreadable now: keep the grant read at the start (rewritten below)
            return self.grant
        if on_disk is None:
            raise SyncFailed("signin", f"signed out of Google (no {self.path}): run `{LOGIN_COMMAND}` to sync again")
        if on_disk.account != self.grant.account:
            raise SyncFailed("signin", "the Google sign-in file now names another account: restart the chat "
                                       "or the bot to sync that account's calendar")
        return on_disk


class _Bounded:
    """google-auth's transport with a timeout of our own per request (it waits 120 s by default).
    google-auth tries a failing refresh up to three times, so a renewal against a dead sign-in
    server can take about a minute: a turn never waits on it (the service waits
    ``caldav_refresh_wait_s`` at most), only ``calendar sync`` and the background thread do."""

    def __init__(self, request: Any) -> None:
        self._request = request

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["timeout"] = REFRESH_TIMEOUT_S
        return self._request(*args, **kwargs)


def expiry_text(credentials: Any) -> str:
    """When google-auth's ``credentials.token`` ends, as the grant keeps it: ISO 8601 in UTC, ""
    if unknown (google-auth's ``expiry`` is a naive UTC datetime)."""
    expiry = credentials.expiry
    return expiry.replace(tzinfo=timezone.utc).isoformat() if expiry else ""


def _error_code(exc: BaseException) -> str:
    """The OAuth error code of a failed refresh ("invalid_grant", ...); "" when the server said none
    (a 5xx page, a proxy's answer): then it is an outage, not a verdict on the sign-in."""
    details = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
    code = details.get("error")
    if isinstance(code, str):
        return code
    head = str(exc.args[0] if exc.args else "")
    return next((c for c in ("invalid_grant", *REFUSALS) if head.startswith(c)), "")


def _first_line(exc: BaseException) -> str:
    text = str(exc.args[0] if exc.args else exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def _parse(text: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)
