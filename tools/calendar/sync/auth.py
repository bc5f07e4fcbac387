"""The CalDAV login goes to the configured server only, whatever the server's answers point at.

Why: a CalDAV server's answers name the URLs a client visits next (current-user-principal,
calendar-home-set, a calendar's href, a 3xx ``Location``), and caldav visits them with the
client's one auth object. With the library's own ``HTTPBasicAuth`` a hostile or compromised
server, or one an attacker can inject a response into, gets the password sent wherever it
names: ``<href>https://collector.example/</href>`` is enough. niquests (the HTTP library caldav
uses when it is installed, ``requests`` otherwise) strips ``Authorization`` on a redirect to
another host itself, but only for redirects, and reapplies ``.netrc`` credentials there.

So the client gets ``OriginBoundAuth`` instead: it writes the Basic header on a request only when
the request's scheme, host and port are the configured URL's (default ports counted as given),
and takes any ``Authorization`` off every other request. A discovery that leaves the server then
meets a 401 there, which the sync reports as a refused login, and the password stays home.

One exception, by name: iCloud. Its principal lives on ``caldav.icloud.com`` and the calendars on
``pNN-caldav.icloud.com``, so a login for one host of ``icloud.com`` also goes to another host of
that domain over https on 443. Apple owns every name under it; a domain where strangers get
their own subdomains (hosting, tunnels) must never be on ``SINGLE_OWNER_DOMAINS``.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import caldav
from caldav.lib.http_sync import AuthBase, HTTPBasicAuth

from agent.url_policy import Origin, is_this_machine, origin_of
from tools.calendar.sync.settings import Account, check_url

if TYPE_CHECKING:
    from tools.calendar.sync.google_token import GoogleToken

log = logging.getLogger(__name__)

SINGLE_OWNER_DOMAINS = ("icloud.com",)


class BearerAuth(AuthBase):
    """``Authorization: Bearer`` with a Google access token, fresh at each request (see google_token)."""

    def __init__(self, token: GoogleToken) -> None:
        self.token = token

    def __call__(self, request: Any) -> Any:
        request.headers["Authorization"] = f"Bearer {self.token.bearer()}"
        return request


class OriginBoundAuth(AuthBase):
    """The login (HTTP Basic, or a bearer token) for the configured origin only; ``withheld``
    lists the origins refused it."""

    def __init__(self, url: str, username: str, password: str, token: GoogleToken | None = None) -> None:
        self.home = origin_of(url)
        self._login: AuthBase = BearerAuth(token) if token is not None else HTTPBasicAuth(username, password)
        self._lock = threading.Lock()
        self.withheld: list[str] = []  # origins a request went to without the login, first time each

    def __repr__(self) -> str:  # the default repr would show nothing secret, but say so explicitly
        return f"OriginBoundAuth(home={str(self.home)!r})"

    def may_receive(self, origin: Origin) -> bool:
        """Whether a request to ``origin`` may carry the login (see the module docstring)."""
        if origin == self.home:
            return True
        return (origin.scheme == self.home.scheme == "https" and origin.port == self.home.port == 443
                and any(_within(origin.host, d) and _within(self.home.host, d) for d in SINGLE_OWNER_DOMAINS))

    def __call__(self, request: Any) -> Any:
        try:
            origin = origin_of(request.url)
        except ValueError:  # a port that is not a number: no origin, so no login
            origin = Origin("", "", None)
        if self.may_receive(origin):
            return self._login(request)
        request.headers.pop("Authorization", None)
        with self._lock:
            first = str(origin) not in self.withheld
            if first:
                self.withheld.append(str(origin))
        if first:
            log.warning("CalDAV: the server pointed at %s; the login is sent only to %s, so not there",
                        origin, self.home)
        return request


def _within(host: str, domain: str) -> bool:
    return host == domain or host.endswith("." + domain)


def dav_client(account: Account, timeout_s: float | None = None) -> caldav.DAVClient:
    """A caldav client for ``account`` whose login cannot leave the configured server.

    The URL is checked once more here (credentials in it; plain http to another machine that
    ``allow_plain_http_hosts`` does not name), so an ``Account`` made any other way than by
    ``settings.account`` is refused before a connection, not after."""
    check_url(account.url, account.plain_http_hosts)
    local = is_this_machine(origin_of(account.url).host)
    return caldav.DAVClient(
        url=account.url, auth=OriginBoundAuth(account.url, account.username, account.password, account.token),
        timeout=int(max(1, timeout_s if timeout_s is not None else account.timeout_s)),
        require_tls=not local, rate_limit_handle=False,
        enable_rfc6764=False,  # the URL is a URL: no DNS SRV/TXT lookup may pick another server
    )
