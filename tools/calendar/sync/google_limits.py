"""What Google's CalDAV answers that a plain CalDAV server does not, handled at the HTTP layer.

Why here, under every request the library makes (discovery, REPORT, PUT, DELETE): these answers
can come to any of them, and caldav knows neither.

- **401 with a bearer token**: the access token was revoked or the clocks disagree. It is renewed
  once and the request sent once more; a second 401 is a refused login (see ``Connection.classify``).
- **403 ``rateLimitExceeded``** (also ``userRateLimitExceeded``, ``quotaExceeded``): Google's quota,
  not a refusal. It is sent again after 1, 2 and 4 seconds, as Google asks (exponential backoff);
  if the limit holds, the sync stops with kind ``limited`` and the changes stay queued. The service
  then waits for its interval (or /sync) rather than trying again at every turn.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from tools.calendar.sync.report import SyncFailed
from tools.calendar.sync.settings import Account

RATE_LIMIT_WAITS: tuple[float, ...] = (1.0, 2.0, 4.0)
LIMIT_REASONS = (b"ratelimitexceeded", b"userratelimitexceeded", b"quotaexceeded")
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
        time.sleep(wait)
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
