"""Where a secret (an API key, a password) may be sent: checked on the URL, before any byte goes.

Why here and not in the HTTP libraries: httpx and niquests send whatever they are given,
credentials included, over plain http to any host, and both read a ``user:pass@`` in the URL as
the login. So every owner of a secret-bearing URL (the OpenAI-compatible backend, a domain's
remote server) asks these questions first:

- ``credentials_problem``: a user name or password written into the URL is refused. A URL is a
  setting, and settings are printed (``doctor``, status lines, log lines) and written into
  the launchd plist, which other local users can read; the secret belongs in its owner-only file.
- ``plain_http_problem``: plain http carries the secret readable by anyone on the path, so it
  may go only to this machine (``localhost``, 127.0.0.0/8, ``::1``, judged on the literal host,
  no DNS) or to a host the user named in ``allow_plain_http_hosts``
  (``AGENT_ALLOW_PLAIN_HTTP_HOSTS``), e.g. a server on a home LAN.

The lines these return never contain the URL's userinfo: a refusal is printed, and printing the
password to say that it should not be printed would defeat the point.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

ALLOW_ENV = "AGENT_ALLOW_PLAIN_HTTP_HOSTS"
ALLOW_KEY = "allow_plain_http_hosts"
DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port as a browser compares them (default ports filled in, host lower-case)."""

    scheme: str
    host: str
    port: int | None

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = DEFAULT_PORTS.get(self.scheme)
        return f"{self.scheme}://{host}" + ("" if self.port in (None, default) else f":{self.port}")


def origin_of(url: str) -> Origin:
    """The origin of ``url``; a port that is not a number makes no origin (ValueError)."""
    parts = urlsplit(str(url).strip())
    scheme = parts.scheme.lower()
    port = parts.port  # ValueError for a port out of range or not a number
    return Origin(scheme, normal_host(parts.hostname or ""), port if port is not None else DEFAULT_PORTS.get(scheme))


def normal_host(host: str) -> str:
    """``host`` lower-case, without IPv6 brackets or a trailing dot (``Example.COM.`` is ``example.com``)."""
    return host.strip().strip("[]").rstrip(".").lower()


def is_this_machine(host: str) -> bool:
    """``localhost``, 127.0.0.0/8 or ``::1``, by the literal name: a name that merely resolves
    there (or does today) is another host as far as a secret is concerned."""
    host = normal_host(host)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _authority(url: str) -> str:
    """The URL's authority (``user:pass@host:port``); read by hand when the URL does not parse
    (``http://[::1``), so that a broken URL is refused as broken by its owner, not here, and
    a broken URL with a password in it is still found."""
    text = str(url).strip()
    try:
        return urlsplit(text).netloc
    except ValueError:
        rest = text.split("//", 1)[1] if "//" in text else text
        for end in "/?#":
            rest = rest.split(end, 1)[0]
        return rest


def has_credentials(url: str) -> bool:
    """Whether the URL's authority holds userinfo (``user@`` or ``user:pass@``), however spelled."""
    return "@" in _authority(url)


def credentials_problem(url: str, what: str, instead: str) -> str | None:
    """One line if ``url`` carries a user name or password (never the URL itself: it holds them)."""
    if not has_credentials(url):
        return None
    host = _authority(url).rpartition("@")[2] or "the server"
    return (f"the {what} for {host} has a user name or password in it, which would be written into the launchd "
            f"plist and shown in status lines: remove them from the URL and {instead}")


def plain_http_problem(url: str, allowed: Iterable[str], secret: str) -> str | None:
    """One line if sending ``secret`` (e.g. "the API key") to ``url`` would cross the network in
    plain http to a host that is neither this machine nor one the user allowed by name. A URL
    that does not parse is its owner's "not a valid URL" (no client can send anything to it)."""
    try:
        parts = urlsplit(str(url).strip())
        parts.hostname  # noqa: B018  (raises on a broken port or IPv6 literal)
    except ValueError:
        return None
    if parts.scheme.lower() != "http":
        return None
    host = normal_host(parts.hostname or "")
    if is_this_machine(host) or host in {normal_host(h) for h in allowed}:
        return None
    return (f"refusing to send {secret} over plain http to another host ({host or 'no host'}): use https://, "
            f"or, on a network you trust, name the host in {ALLOW_ENV} ({ALLOW_KEY} in config.toml)")


def without_credentials(url: str) -> str:
    """``url`` as it may be shown: any userinfo replaced by ``***@``."""
    try:
        parts = urlsplit(str(url))
    except ValueError:  # a URL that does not parse is shown only if it holds no userinfo
        return "(a URL that does not parse, with a user name or password)" if has_credentials(url) else str(url)
    if "@" not in parts.netloc:
        return str(url)
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()


def allowed_hosts(value: Any) -> tuple[str, ...]:
    """The ``allow_plain_http_hosts`` setting: host names or IP addresses, comma- or space-separated
    in the environment, an array in the file. ValueError (one line) for anything that is not a
    bare host, so that ``*``, a URL or ``host:port`` does not silently allow more, or nothing."""
    items = value.replace(";", ",").replace(" ", ",").split(",") if isinstance(value, str) else list(value or ())
    hosts: list[str] = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        host = normal_host(text)
        try:
            ipaddress.ip_address(host)
            is_ip = True
        except ValueError:
            is_ip = False
        if not is_ip and (not host or any(c in host for c in "*/@:?#\\") or not all(
                part and part.replace("-", "").replace("_", "").isalnum() for part in host.split("."))):
            raise ValueError(f"{text!r} is not a host name or IP address: name each host alone, "
                             "e.g. nas.local,192.168.1.20 (no scheme, port or wildcard)")
        hosts.append(host)
    return tuple(dict.fromkeys(hosts))
