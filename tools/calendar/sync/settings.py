"""CalDAV settings: read like every other setting (flags > environment > config file).

The password is never a setting's value: it comes from a file only its owner can read
(``AGENT_CALDAV_PASSWORD_FILE``, refused unless mode 0600, as the bot token is) or, on a Mac,
from the Keychain through ``keyring`` (``pip install keyring``, or the checkout's ``keychain`` extra), under the service
name ``iljeong-caldav`` and the user name. So it never appears in argv, a plist or a log line.
A URL with ``user:pass@`` in it is refused for the same reason, and the password is registered
with ``agent.known_secrets`` as it is read, so the bot's log masks mask it.

Where the password may go (``agent.url_policy``): https, or plain http to this machine or to a
host named in ``allow_plain_http_hosts``; and only to the configured URL's own origin
(``tools.calendar.sync.auth``), whatever discovery or a redirect points at.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass as plain_dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator
from pydantic.dataclasses import dataclass

from agent.apikey import read_secret_file
from agent.config import load_section
from agent.known_secrets import remember
from agent.url_policy import credentials_problem, plain_http_problem, without_credentials

if TYPE_CHECKING:
    from agent.config import Settings
    from tools.calendar.sync.google_token import GoogleToken

KEYRING_SERVICE = "iljeong-caldav"
PASSWORD_LABEL = "<caldav password>"  # what a masked log shows in its place
CREDENTIALS_ELSEWHERE = ("set AGENT_CALDAV_USERNAME, and put the password in a mode-600 file named by "
                         "AGENT_CALDAV_PASSWORD_FILE (or in the Keychain)")

ENV_NAMES: dict[str, str] = {
    "caldav_url": "AGENT_CALDAV_URL",
    "caldav_username": "AGENT_CALDAV_USERNAME",
    "caldav_password_file": "AGENT_CALDAV_PASSWORD_FILE",
    "caldav_calendars": "AGENT_CALDAV_CALENDARS",
    "caldav_interval_s": "AGENT_CALDAV_INTERVAL_S",
    "google_client_file": "AGENT_GOOGLE_CLIENT_FILE",
}


def _names(value: Any) -> tuple[str, ...]:
    """Calendars by display name or URL: commas (or semicolons) separate them in an environment
    variable, not spaces, since "My Calendar" is one name; a TOML array as given."""
    parts = value.replace(";", ",").split(",") if isinstance(value, str) else value
    return tuple(str(p).strip() for p in parts if str(p).strip())


def _no_credentials(url: str) -> str:
    """Refused as it is read, so that neither ``calendar status`` nor the plist ever shows it."""
    problem = credentials_problem(url, "CalDAV URL", CREDENTIALS_ELSEWHERE)
    if problem:
        raise ValueError(problem)
    return url


@dataclass(frozen=True)
class CalDAVSettings:
    # a calendar collection, or a server root to discover calendars from
    caldav_url: Annotated[str, AfterValidator(_no_credentials)] | None = None
    caldav_username: str | None = None
    caldav_password_file: str | None = None  # mode 0600; else the Keychain (keyring), else refused
    # which collections to sync (display names or URLs); the first gets new events; empty: all
    caldav_calendars: Annotated[tuple[str, ...], BeforeValidator(_names)] = field(default=())
    caldav_interval_s: float = 300.0  # the bot (and the REPL) sync this often
    caldav_timeout_s: float = 10.0  # one request; a turn never waits on a dead server longer
    caldav_refresh_after_s: float = 60.0  # before a turn, pull again when the last pull is older
    caldav_refresh_wait_s: float = 3.0  # ... but wait at most this long for it
    # Google: the "Desktop app" OAuth client's JSON (mode 0600); read by ``calendar login google`` only
    google_client_file: str | None = None  # default <data_dir>/google-client.json


@plain_dataclass(frozen=True)
class Account:
    """What the engine needs to reach the server. ``repr`` leaves the password out."""

    url: str
    username: str
    password: str = field(repr=False)
    calendars: tuple[str, ...] = ()
    timeout_s: float = 10.0
    plain_http_hosts: tuple[str, ...] = ()  # allow_plain_http_hosts: LAN hosts the password may reach over http
    token: GoogleToken | None = field(default=None, repr=False, compare=False)  # a Google sign-in instead of a password

    @property
    def provider(self) -> str:
        """The name a user knows the server by, for prompts: "iCloud", "Fastmail", or the host."""
        if self.token is not None:
            return "Google"
        host = (urlsplit(self.url).hostname or "").lower()
        for suffix, name in (("icloud.com", "iCloud"), ("fastmail.com", "Fastmail"), ("google.com", "Google"),
                             ("googleusercontent.com", "Google")):
            if host == suffix or host.endswith("." + suffix):
                return name
        return "Nextcloud" if "nextcloud" in host else host or "CalDAV"


def load_caldav_settings(settings: Settings) -> CalDAVSettings:
    """The CalDAV settings from the sources ``settings`` came from; ValueError (one line) if bad."""
    return load_section(CalDAVSettings, ENV_NAMES, settings.sources)


def check_url(url: str, plain_http_hosts: tuple[str, ...] = ()) -> str:
    """https for every host but this machine's own and those named in ``allow_plain_http_hosts``:
    a password over plain http to another host could be read on the way. No user name or password
    in the URL. ValueError (one line, never the URL's userinfo) otherwise."""
    problem = credentials_problem(url, "CalDAV URL", CREDENTIALS_ELSEWHERE)
    if problem:
        raise ValueError(problem)
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"caldav_url {without_credentials(url)!r} is not an http(s) URL, e.g. https://caldav.icloud.com/")
    problem = plain_http_problem(url, plain_http_hosts, "the CalDAV password")
    if problem:
        raise ValueError(problem)
    return url.strip()


def read_password_file(path: Path) -> str:
    """The password in ``path``; ValueError (one line, never the password) if it cannot be used."""
    password = read_secret_file(path, "CalDAV password file")
    if password is None:
        raise ValueError(f"the CalDAV password file {path} does not exist")
    if not password:
        raise ValueError(f"the CalDAV password file {path} is empty")
    return password


def keychain_password(username: str) -> str | None:
    """The password the Keychain holds for ``username`` (``keyring``), or None without keyring."""
    try:
        import keyring  # optional: the 'keychain' extra
    except ImportError:
        return None
    try:
        return keyring.get_password(KEYRING_SERVICE, username) or None
    except Exception:  # noqa: BLE001 - no usable backend (e.g. a Linux box without one)
        return None


def account(settings: Settings) -> Account | None:
    """The configured account, or None when CalDAV is not configured; ValueError (one line)
    for a configuration that cannot work, so it stops before anything starts."""
    own = load_caldav_settings(settings)
    signed_in = google_account(settings, own)
    if signed_in is not None:
        return signed_in
    if not own.caldav_url:
        return None
    allowed = settings.allow_plain_http_hosts
    url = check_url(own.caldav_url, allowed)
    if not own.caldav_username:
        raise ValueError("caldav_url is set but caldav_username is not (AGENT_CALDAV_USERNAME)")
    if own.caldav_password_file:
        password = read_password_file(Path(own.caldav_password_file).expanduser())
    else:
        password = keychain_password(own.caldav_username) or ""
        if not password:
            raise ValueError("no CalDAV password: write it to a file with mode 600 and set "
                             "AGENT_CALDAV_PASSWORD_FILE, or store it in the Keychain under "
                             f"'{KEYRING_SERVICE}' (pip install keyring)")
    remember_password(own.caldav_username, password)
    return Account(url, own.caldav_username, password, own.caldav_calendars, own.caldav_timeout_s, allowed)


def google_account(settings: Settings, own: CalDAVSettings) -> Account | None:
    """The Google account when ``calendar login google`` left a sign-in in the data directory:
    its primary calendar (or ``caldav_calendars`` by name), reached with a bearer token that goes
    to Google's CalDAV host only."""
    from tools.calendar.sync.google_signin import check_caldav_url, primary_calendar_url, principal_url
    from tools.calendar.sync.google_token import GoogleToken, grant_path

    path = grant_path(settings.data_dir)
    if not path.exists():
        return None
    token = GoogleToken(path)
    if own.caldav_url:
        url = check_url(check_caldav_url(own.caldav_url), settings.allow_plain_http_hosts)
    else:  # names pick among the account's calendars, found from its principal; else the primary one
        url = principal_url(token.account) if own.caldav_calendars else primary_calendar_url(token.account)
    return Account(url, token.account, "", own.caldav_calendars, own.caldav_timeout_s,
                   settings.allow_plain_http_hosts, token=token)


def google_client_file(settings: Settings) -> Path:
    """The OAuth client JSON ``calendar login google`` reads: the setting, else in the data directory."""
    own = load_caldav_settings(settings)
    return Path(own.google_client_file).expanduser() if own.google_client_file else settings.data_dir / "google-client.json"


def remember_password(username: str, password: str) -> None:
    """Have every masked log mask the password, and the Basic ``Authorization`` value that carries
    it (a debug dump of a request shows that, not the password)."""
    remember(password, PASSWORD_LABEL)
    remember(base64.b64encode(f"{username}:{password}".encode()).decode("ascii"), PASSWORD_LABEL)
