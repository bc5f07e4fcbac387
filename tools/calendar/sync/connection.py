"""The connection to one account's CalDAV server: the client, the calendars found there, and
each request's failure said in one line.

Kept once per process (inside ``CalDAVSync``), so discovery and the HTTP session are paid for
once and a later sync costs only what changed. Every request is counted (requests, bytes each
way) for the report's traffic figure. What the library and the network raise becomes a
``SyncFailed`` with a kind and a line that tells the user what to do, never the password.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caldav.elements import dav
from caldav.lib import error as dav_error
from caldav.lib.url import URL

from tools.calendar.sync.auth import dav_client
from tools.calendar.sync.google_limits import answered, refusal
from tools.calendar.sync.identity import url_key as _key
from tools.calendar.sync.report import SyncFailed
from tools.calendar.sync.settings import Account


class Connection:
    """One account's server as the sync sees it: the counted client, the chosen calendars,
    requests whose failures are classified."""

    def __init__(self, account: Account) -> None:
        self.account = account
        self._client: Any = None
        self._calendars: list[Any] | None = None
        self.counts = [0, 0, 0]  # requests, bytes sent, bytes received (since the client was made)

    def client(self) -> Any:
        if self._client is None:
            # the password with the first request (no 401 round trip), to the configured origin only
            client = dav_client(self.account)
            original = client.session.request

            def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
                self.counts[0] += 1
                body = kwargs.get("data") or b""
                self.counts[1] += len(body) if isinstance(body, (bytes, str)) else 0
                response = original(method, url, *args, **kwargs)
                self.counts[2] += len(response.content or b"")
                return response

            client.session.request = lambda *a, **kw: answered(counted, self.account, *a, **kw)
            self._client = client
        return self._client

    def collections(self) -> list[Any]:
        """The calendars to sync, found once per process: the URL itself if it is a calendar,
        else the principal's calendars (RFC 6764 discovery from a server root), filtered by
        ``caldav_calendars`` (display names or URLs), in that order; the first gets new events."""
        if self._calendars is not None:
            return self._calendars
        client = self.client()
        wanted = [w.strip() for w in self.account.calendars if w.strip()]
        try:
            found = client.principal().calendars()
        except dav_error.AuthorizationError:
            raise
        except dav_error.DAVError:
            found = []
        own = _key(self.account.url)
        direct = [c for c in found if _key(c.url) == own]
        if direct:
            chosen = direct
        elif wanted:
            chosen = []
            for want in wanted:
                match = [c for c in found if _key(c.url) == _key(want) or _name(c) == want]
                if not match:
                    names = ", ".join(sorted(filter(None, (_name(c) for c in found)))) or "none"
                    raise SyncFailed("refused", f"no calendar named {want!r} on the server (found: {names})")
                chosen.append(match[0])
        elif found:
            chosen = [c for c in found if _holds_events(c)] or found  # not iCloud's Reminders lists
        else:
            chosen = [client.calendar(url=self.account.url)]  # no principal: take the URL as the calendar
        self._calendars = chosen
        return chosen

    def request(self, href: str, method: str, body: str, headers: dict[str, str]) -> Any:
        """One request; a 403 to a PUT or DELETE is that object refused (a read-only calendar;
        iCloud refuses a UID another calendar holds), not the login, so it comes back as a status."""
        try:
            return self.client().request(href, method, body, headers)
        except dav_error.AuthorizationError as exc:
            if method in ("PUT", "DELETE") and getattr(exc, "status", None) in (403, "403"):
                return _Refused(403)
            raise self.classify(exc) from None
        except Exception as exc:  # noqa: BLE001
            raise self.classify(exc) from None

    def etag_of(self, href: str) -> str | None:
        """A server that answers a PUT without an ETag: ask for it (one more request)."""
        response = self.request(href, "GET", "", {})
        return header(response, "ETag") if response.status == 200 else None

    def classify(self, exc: BaseException) -> SyncFailed:
        if isinstance(exc, SyncFailed):
            return exc
        withheld = list(getattr(self._client.auth, "withheld", None) or []) if self._client is not None else []
        if isinstance(exc, dav_error.AuthorizationError) and withheld:
            return SyncFailed("auth", f"the server sent the sync on to {withheld[0]}, which never gets the login: "
                                      "check caldav_url (it should be your calendar's own server)")
        if isinstance(exc, dav_error.AuthorizationError) and self.account.token is not None:
            return refusal(getattr(exc, "status", None), getattr(exc, "body", None))
        if isinstance(exc, dav_error.AuthorizationError):
            return SyncFailed("auth", "the server refused the login: check caldav_username and the password "
                                      "(an app-specific password for iCloud and Fastmail)")
        if isinstance(exc, dav_error.RateLimitError):
            return SyncFailed("unreachable", "the server is busy or unavailable (HTTP 503/429); changes stay queued")
        name = type(exc).__name__
        text = str(exc).splitlines()[0] if str(exc) else name
        if isinstance(exc, dav_error.DAVError):
            return SyncFailed("unreachable", f"the server answered with an error: {text[:200]}")
        if isinstance(exc, (OSError, ConnectionError, TimeoutError)) or "Connection" in name or "Timeout" in name:
            return SyncFailed("unreachable", f"cannot reach {URL.objectify(self.account.url).hostname}: {text[:160]}")
        return SyncFailed("unreachable", f"{name}: {text[:200]}")

    def clean(self, text: str) -> str:
        """Never let the password into a message, whatever a library put in its exception."""
        return text.replace(self.account.password, "***") if self.account.password else text


@dataclass(frozen=True)
class _Refused:
    """A refusal the library raised, as the response it stands for."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)


def _name(calendar: Any) -> str | None:
    try:
        return calendar.get_display_name()
    except Exception:  # noqa: BLE001 - a calendar without a name is matched by URL only
        return None


def _holds_events(calendar: Any) -> bool:
    """Whether a calendar takes events (a task list does not); True when the server will not say."""
    try:
        return "VEVENT" in calendar.get_supported_components()
    except Exception:  # noqa: BLE001 - the property is optional (RFC 4791 5.2.3: all types then)
        return True


def etag(obj: Any) -> str | None:
    """The ETag a listed or fetched object came with (None when the server sent none)."""
    props = getattr(obj, "props", None) or {}
    value = props.get(dav.GetEtag.tag)
    return str(value) if value else None


def header(response: Any, name: str) -> str | None:
    """A response's header, or None (a refusal the library raised has none)."""
    headers = getattr(response, "headers", None) or {}
    value = headers.get(name)
    return str(value) if value else None


def body(response: Any) -> str:
    """A response's body as text (the server's copy of an object)."""
    raw = getattr(response, "_raw", None) or getattr(response, "raw", "")
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
