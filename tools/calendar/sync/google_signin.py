"""``python -m agent calendar login google`` and ``logout google``: Google's installed-app sign-in.

The flow is Google's own for desktop apps (google-auth-oauthlib's ``InstalledAppFlow``): PKCE
(S256) and a redirect to a one-shot server on 127.0.0.1; the out-of-band "copy this code" flow is
gone (Google blocked it, which is what broke vdirsyncer's). With no browser here (the bot's Mac mini
over ssh) the URL is printed, the user opens it anywhere, and pastes back the address their browser
ended on (it fails to load, since 127.0.0.1 is this machine, but it carries the code).

The OAuth client is the user's own "Desktop app" client, from the JSON file Google Cloud Console
downloads (mode 0600, like every secret here). A "Web application" client is refused at once: it
gets no refresh token. Its endpoints are pinned: https on Google's hosts, or https on this machine
(a local stand-in, as the tests run). A client file that names another host cannot send the
user's code or refresh token there.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import webbrowser
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlsplit

from agent.apikey import read_secret_file
from agent.url_policy import is_this_machine, normal_host
from tools.calendar.sync.google_token import (CLIENT_HELP, GOOGLE_HOSTS, Grant, check_endpoint, expiry_text,
                                               load_grant, save_grant)

SCOPES = ("openid", "https://www.googleapis.com/auth/userinfo.email", "https://www.googleapis.com/auth/calendar")
GOOGLE_REVOKE_URI = "https://oauth2.googleapis.com/revoke"
CALDAV_HOST = "apidata.googleusercontent.com"
CALDAV_ROOT = f"https://{CALDAV_HOST}/caldav/v2/"


def primary_calendar_url(account: str) -> str:
    """The primary calendar's collection: Google names it by the account's e-mail."""
    return f"{CALDAV_ROOT}{quote(account, safe='@')}/events/"


def principal_url(account: str) -> str:
    """The account's principal, where its other calendars are found by name."""
    return f"{CALDAV_ROOT}{quote(account, safe='@')}/user"


def check_caldav_url(url: str) -> str:
    """A Google access token goes to Google's CalDAV host only (or this machine, for a stand-in)."""
    host = normal_host(urlsplit(url).hostname or "")
    if host != CALDAV_HOST and not is_this_machine(host):
        raise ValueError(f"you are signed in to Google, but caldav_url points at {host or url!r}: unset "
                         f"AGENT_CALDAV_URL (Google's is found from your account), or run "
                         f"`python -m agent calendar logout google` to use another server")
    return url


def read_client(path: Path) -> dict[str, str]:
    """The "installed" block of Google's client JSON in ``path``; ValueError (one line, no secret)."""
    text = read_secret_file(path, "Google OAuth client file")
    if text is None:
        raise ValueError(f"no Google OAuth client file at {path}: download your Desktop app client's JSON there "
                         f"(or name it with AGENT_GOOGLE_CLIENT_FILE) and chmod 600 it; README: \"Google Calendar\" "
                         "shows how to make the client")
    try:
        data = json.loads(text)
    except ValueError:
        raise ValueError(f"the Google OAuth client file {path} is not JSON: download it again ({CLIENT_HELP})") from None
    if isinstance(data, dict) and "web" in data:
        raise ValueError(f"{path} is a \"Web application\" client, which gets no refresh token: make a "
                         f"\"Desktop app\" client instead ({CLIENT_HELP})")
    client = data.get("installed") if isinstance(data, dict) else None
    if not isinstance(client, dict) or not all(isinstance(client.get(k), str) and client.get(k)
                                               for k in ("client_id", "client_secret", "auth_uri", "token_uri")):
        raise ValueError(f"{path} is not a Desktop app client's JSON (no \"installed\" block with client_id, "
                         f"client_secret, auth_uri and token_uri): {CLIENT_HELP}")
    check_endpoint(client["auth_uri"], "auth_uri")
    check_endpoint(client["token_uri"], "token_uri")
    return {k: client[k] for k in ("client_id", "client_secret", "auth_uri", "token_uri")}


def has_browser() -> bool:
    """A browser that would open on the user's screen: not over ssh (a Mac would open it on the
    console of a machine nobody is looking at), on Linux not without a display (``webbrowser``
    would pick lynx or w3m, where Google's page cannot work), unless ``BROWSER`` names one; and
    one that Python can find."""
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    if (sys.platform.startswith("linux") and not os.environ.get("BROWSER")
            and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))):
        return False
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def login(client_file: Path, grant_file: Path, *, browser: bool | None = None,
          read_line: Callable[[str], str] = input, say: Callable[[str], None] = print) -> str:
    """Sign in and keep the grant in ``grant_file`` (0600); the one line to print at the end.
    ValueError (one line, no secret) for everything the user can fix."""
    from google_auth_oauthlib.flow import InstalledAppFlow

    client = read_client(client_file)
    flow = InstalledAppFlow.from_client_config({"installed": client}, scopes=list(SCOPES))
    # offline + consent: a refresh token every time, also for an account that has signed in before
    options = {"access_type": "offline", "prompt": "consent"}
    try:
        if browser if browser is not None else has_browser():
            say("Opening Google's sign-in page in your browser (waiting up to 5 minutes)...")
            flow.run_local_server(host="127.0.0.1", port=0, open_browser=True, timeout_seconds=300,
                                  authorization_prompt_message="If it did not open, visit: {url}",
                                  success_message="Signed in: you can close this tab and go back to the terminal.",
                                  **options)
        else:
            flow.redirect_uri = f"http://127.0.0.1:{_free_port()}/"
            url, _state = flow.authorization_url(**options)
            say("Open this address in a browser on any device and allow access:\n\n" + url + "\n\n"
                "The browser then ends on a page that does not load (http://127.0.0.1:...). "
                "Copy that page's whole address and paste it here.")
            pasted = read_line("address: ").strip()
            flow.fetch_token(**_pasted_answer(pasted, flow.redirect_uri))
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - oauthlib, requests and the loopback server raise many types
        raise ValueError(f"Google sign-in failed: {_reason(exc)}") from None
    return _keep(flow, client, grant_file)


def _pasted_answer(pasted: str, redirect_uri: str) -> dict[str, str]:
    """What fetch_token needs from the pasted address (or from a bare code)."""
    if not pasted:
        raise ValueError("nothing was pasted: run the command again and paste the address your browser ended on")
    if "://" not in pasted:
        return {"code": pasted}
    if not pasted.startswith(redirect_uri):
        raise ValueError(f"that address does not start with {redirect_uri}: paste the address the browser ended on")
    # oauthlib insists on https for the redirect it parses; the loopback answer is http by design
    return {"authorization_response": "https://" + pasted[len("http://"):]}


def _keep(flow: object, client: dict[str, str], grant_file: Path) -> str:
    credentials = flow.credentials  # type: ignore[attr-defined]
    token = dict(getattr(flow, "oauth2session").token or {})
    if not credentials.refresh_token:
        raise ValueError("Google gave no refresh token: the OAuth client must be a \"Desktop app\" "
                         f"client ({CLIENT_HELP})")
    account = _account_of(credentials.id_token)
    if not account:
        raise ValueError("Google did not say which account signed in (no e-mail in the answer): "
                         "allow the e-mail permission when asked")
    now = datetime.now(timezone.utc)
    lifetime = token.get("refresh_token_expires_in")
    signin_ends = now + timedelta(seconds=int(lifetime)) if isinstance(lifetime, (int, float, str)) and str(lifetime).isdigit() else None
    grant = Grant(account=account, client_id=client["client_id"], client_secret=client["client_secret"],
                  refresh_token=credentials.refresh_token, token_uri=client["token_uri"],
                  revoke_uri=_revoke_uri(client["token_uri"]), scopes=tuple(credentials.granted_scopes or SCOPES),
                  access_token=credentials.token or "", expiry=expiry_text(credentials),
                  refresh_expiry=signin_ends.isoformat() if signin_ends else "")
    save_grant(grant_file, grant)
    line = f"signed in to Google as {account}; calendar sync is on: try `python -m agent calendar sync`"
    if signin_ends is not None:
        line += (f"\nnote: this sign-in ends on {signin_ends:%Y-%m-%d} (the OAuth app is in \"testing\"; "
                 "publish it in Google Cloud Console to keep it)")
    return line


def logout(grant_file: Path) -> str:
    """Tell Google to revoke the grant, then forget it here (even if Google cannot be reached)."""
    import requests

    try:
        grant = load_grant(grant_file)
    except ValueError:  # broken, or readable by others: signing out is what mends it, so it must not stop here
        grant_file.unlink(missing_ok=True)
        return ("signed out here (the sign-in file could not be read, so Google was not told): remove iljeong's "
                "access at https://myaccount.google.com/permissions")
    if grant is None:
        return "not signed in to Google"
    told, why = False, "its revoke address is not Google's"
    try:  # the refresh token goes where a refresh may send it, whatever the file says
        revoke_uri = check_endpoint(grant.revoke_uri, "revoke_uri")
    except ValueError:
        revoke_uri = ""
    if revoke_uri:
        try:
            answer = requests.post(revoke_uri, data={"token": grant.refresh_token}, timeout=15)
            # "invalid_token": already revoked, the same end
            told = answer.status_code == 200 or "invalid_token" in answer.text
            why = f"HTTP {answer.status_code}"
        except requests.RequestException as exc:
            why = type(exc).__name__
    grant_file.unlink(missing_ok=True)
    if told:
        return f"signed out of Google ({grant.account}): access revoked and forgotten here"
    return (f"signed out here ({grant.account}), but Google could not be told ({why}): remove iljeong's "
            "access at https://myaccount.google.com/permissions")


def _revoke_uri(token_uri: str) -> str:
    """Google's revoke endpoint; a stand-in on this machine keeps it beside its token endpoint."""
    host = normal_host(urlsplit(token_uri).hostname or "")
    return GOOGLE_REVOKE_URI if host in GOOGLE_HOSTS else token_uri.rsplit("/", 1)[0] + "/revoke"


def _account_of(id_token: str | None) -> str:
    """The e-mail in the ID token. Not verified by signature: it came straight from the token
    endpoint over TLS (OpenID Connect Core 3.1.3.7), and it only names the calendar to open."""
    if not id_token:
        return ""
    from google.auth import jwt

    try:
        claims = jwt.decode(id_token, verify=False)
    except Exception:  # noqa: BLE001 - a malformed token names no account
        return ""
    email = claims.get("email")
    return email if isinstance(email, str) and "@" in email and len(email) <= 254 and email.isprintable() else ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _reason(exc: BaseException) -> str:
    """One line for what the OAuth libraries raised, never the code, a token or the secret."""
    name = type(exc).__name__
    if name == "MismatchingStateError":
        return "the pasted address belongs to another sign-in attempt: run the command again"
    if isinstance(exc, Warning) and str(exc).startswith("Scope has changed"):  # oauthlib: fewer boxes ticked
        return ("Google's page was left with a permission unticked (calendar or e-mail): run the command again "
                "and allow access to your calendar")
    if name == "WSGITimeoutError":
        return "no answer from the browser within 5 minutes: run the command again (or add --no-browser)"
    error = getattr(exc, "error", None) or getattr(exc, "description", None)
    text = str(error) if error else str(exc).splitlines()[0] if str(exc) else name
    return f"{text[:200]} ({name})"
