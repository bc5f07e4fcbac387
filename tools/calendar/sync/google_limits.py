"""What Google's CalDAV answers that a plain CalDAV server does not, handled at the HTTP layer.

Why here, under every request the library makes (discovery, REPORT, PUT, DELETE): these answers
can come to any of them, and caldav knows neither.

- **401 with a bearer token**: the access token was revoked or the clocks disagree. It is renewed
  once and the request sent once more; a second 401 is a refused login (see ``Connection.classify``).
- **403 ``rateLimitExceeded``** (also ``userRateLimitExceeded``, ``quotaExceeded``): Google's quota,
  not a refusal. It is sent again after 1, 2 and 4 seconds, as Google asks (exponential backoff);
  if the limit holds, the sync stops with kind ``limited`` and the changes stay queued. The service
  then waits for its interval (or /sync) rather than trying again at every turn.
- **other 403s** are no lapsed sign-in (no renewal mends them): the project's CalDAV API is off,
  or the sign-in left out calendar access, or the calendar is not the user's to change. Each is
  told as its own fix (``refusal``), so a user is not sent to sign in again for nothing.
"""

from __future__ import annotations

from time import sleep  # by name: a test replaces this one, not every sleep in the process
from typing import Any, Callable

from tools.calendar.sync.google_token import LOGIN_COMMAND
from tools.calendar.sync.report import SyncFailed
from tools.calendar.sync.settings import Account

RATE_LIMIT_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)
LIMIT_REASONS = (b"ratelimitexceeded", b"userratelimitexceeded", b"quotaexceeded")
DISABLED_MARKS = ("service_disabled", "accessnotconfigured", "has not been used in project")
SCOPE_MARKS = ("insufficientpermissions", "insufficient authentication scopes", "access_token_scope_insufficient")
LIMITED = ("Google's rate limit was reached (HTTP 403 rateLimitExceeded): changes stay queued and go out "
           "at the next sync")


def answered(send: Callable[..., Any], account: Account, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
    """``send(method, url, ...)``, with the 401 and 403 above handled; the response otherwise as it came."""
    response = send(method, url, *args, **kwargs)
    rejected = _bearer_of(response) if response.status_code == 401 and account.token is not None else None
    if rejected is not None:  # a 401 where the token was withheld (another origin) is no reason to renew it
        account.token.refresh(rejected=rejected)
        response = send(method, url, *args, **kwargs)
    for wait in RATE_LIMIT_WAITS:
        if not rate_limited(response):
            return response
        sleep(wait)
        response = send(method, url, *args, **kwargs)
    if rate_limited(response):
        raise SyncFailed("limited", LIMITED)
    return response


def rate_limited(response: Any) -> bool:
    if response.status_code not in (403, 429):
        return False
    content = (response.content or b"")[:4096].lower()
    return any(reason in content for reason in LIMIT_REASONS)


def _bearer_of(response: Any) -> str | None:
    request = getattr(response, "request", None)
    value = str((getattr(request, "headers", None) or {}).get("Authorization", ""))
    return value[len("Bearer "):] if value.startswith("Bearer ") else None


def refusal(status: Any, body: bytes | str | None) -> SyncFailed:
    """What a 401 or 403 from Google's CalDAV (a bearer token sent, renewed once on a 401) asks the
    user to do; ``body`` is Google's JSON error, read for its reason only, never shown."""
    text = (body.decode("utf-8", "replace") if isinstance(body, bytes) else body or "")[:4096].lower()
    if str(status) != "403":
        return SyncFailed("signin", f"Google refused access to the calendar (HTTP 401) with a renewed token: "
                                    f"run `{LOGIN_COMMAND}` again")
    if any(mark in text for mark in DISABLED_MARKS):
        return SyncFailed("refused", "Google's CalDAV API is off for your OAuth client's project: enable "
                                     "\"CalDAV API\" in Google Cloud Console (README: \"Google Calendar\", step 1)")
    if any(mark in text for mark in SCOPE_MARKS):
        return SyncFailed("signin", f"your Google sign-in does not allow calendar access: run `{LOGIN_COMMAND}` "
                                    "again and allow access to your calendar")
    return SyncFailed("refused", "Google refused access to the calendar (HTTP 403): check that caldav_calendars "
                                 "names a calendar of yours")
