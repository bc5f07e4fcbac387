"""The fake Google (tests/google_fakes.py, tests/fake_google_oauth.py) refuses what Google refuses:
each refusal is sent here with plain ``requests``/``httpx``/``http.client`` calls, the way a wrong
(or hostile) client would, next to the request that passes, so every test can fail. One test
drives the real google-auth-oauthlib login and google-auth refresh against it; one reads
``GoogleDav.grant_file`` with the production ``GoogleToken``."""

from __future__ import annotations

import base64
import http.client
import json
import secrets
import webbrowser
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
import requests

from tests.caldav_servers import FaultProxy
from tests.google_fakes import (CALENDAR_SCOPE, TESTING_REFRESH_LIFETIME_S, FakeGoogleOAuth, GoogleDav,
                                google_dav, google_oauth, s256)  # noqa: F401 (fixtures)

REDIRECT = "http://127.0.0.1:54321/"


def auth_params(oauth: FakeGoogleOAuth, verifier: str, **changes: str | None) -> dict[str, str]:
    params: dict[str, str | None] = {
        "response_type": "code", "client_id": oauth.client_id, "redirect_uri": REDIRECT, "scope": CALENDAR_SCOPE,
        "state": "st-" + secrets.token_urlsafe(8), "code_challenge": s256(verifier), "code_challenge_method": "S256",
        "access_type": "offline", **changes,
    }
    return {k: v for k, v in params.items() if v is not None}


def sign_in(oauth: FakeGoogleOAuth, **changes: str | None) -> tuple[str, str, dict[str, list[str]]]:
    """Through the consent screen: (verifier, the auth URL, the redirect's query)."""
    verifier = secrets.token_urlsafe(48)
    url = oauth.auth_uri + "?" + urlencode(auth_params(oauth, verifier, **changes))
    location = oauth.browser_approve(url)
    assert location.startswith(REDIRECT + "?")
    return verifier, url, parse_qs(urlsplit(location).query)


def post_token(oauth: FakeGoogleOAuth, form: dict[str, str], *, basic: bool = True, **kwargs: Any) -> requests.Response:
    auth = (oauth.client_id, oauth.client_secret) if basic else None
    return requests.post(oauth.token_uri, data=form, auth=auth, verify=str(oauth.ca_bundle), timeout=10, **kwargs)


def exchange_form(oauth: FakeGoogleOAuth) -> dict[str, str]:
    verifier, _url, reply = sign_in(oauth)
    return {"grant_type": "authorization_code", "code": reply["code"][0], "redirect_uri": REDIRECT,
            "code_verifier": verifier}


def refresh(oauth: FakeGoogleOAuth, refresh_token: str, **extra: str) -> requests.Response:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": oauth.client_id,
            "client_secret": oauth.client_secret, **extra}
    return post_token(oauth, form, basic=False)


def claims(jwt: str) -> dict[str, Any]:
    payload = jwt.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.fixture
def oauth(tmp_path: Path) -> Iterator[FakeGoogleOAuth]:
    with FakeGoogleOAuth(tmp_path / "oauth") as fake:
        yield fake


# -- the sign-in ---------------------------------------------------------------------------------


def test_a_pkce_sign_in_gives_google_shaped_tokens_and_a_refresh_gives_no_new_refresh_token(
        oauth: FakeGoogleOAuth) -> None:
    verifier, _url, reply = sign_in(oauth)
    assert reply["scope"] == [CALENDAR_SCOPE] and reply["state"][0].startswith("st-")
    answer = post_token(oauth, {"grant_type": "authorization_code", "code": reply["code"][0],
                                "redirect_uri": REDIRECT, "code_verifier": verifier})
    assert answer.status_code == 200, answer.text
    tokens = answer.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3599 and tokens["scope"] == CALENDAR_SCOPE
    assert "refresh_token_expires_in" not in tokens
    assert claims(tokens["id_token"])["email"] == "owner@example.com"
    assert claims(tokens["id_token"])["aud"] == oauth.client_id
    assert oauth.token_valid(tokens["access_token"]) and oauth.issued == [tokens["access_token"]]
    renewed = refresh(oauth, tokens["refresh_token"])
    assert renewed.status_code == 200 and "refresh_token" not in renewed.json()
    fresh = renewed.json()["access_token"]
    assert fresh != tokens["access_token"] and oauth.token_valid(fresh)
    assert [grant for grant, _form in oauth.token_requests] == ["authorization_code", "refresh_token"]


def test_the_user_pressing_cancel_or_unticking_the_calendar_comes_back_to_the_app(oauth: FakeGoogleOAuth) -> None:
    verifier = secrets.token_urlsafe(48)
    params = auth_params(oauth, verifier, scope=f"openid {CALENDAR_SCOPE}")
    url = oauth.auth_uri + "?" + urlencode(params)
    denied = parse_qs(urlsplit(oauth.browser_approve(url, deny=True)).query)
    assert denied == {"error": ["access_denied"], "state": [params["state"]]}
    partial = parse_qs(urlsplit(oauth.browser_approve(url, scopes=("openid",))).query)
    assert partial["scope"] == ["openid"]


BAD_AUTHORIZATIONS = [
    ({"redirect_uri": "https://127.0.0.1:54321/"}, 400, "redirect_uri_mismatch"),
    ({"redirect_uri": "http://collector.example:54321/"}, 400, "redirect_uri_mismatch"),
    ({"redirect_uri": "http://127.0.0.1.collector.example:54321/"}, 400, "redirect_uri_mismatch"),
    ({"redirect_uri": "http://127.0.0.1@collector.example:54321/"}, 400, "redirect_uri_mismatch"),
    ({"redirect_uri": "urn:ietf:wg:oauth:2.0:oob"}, 400, "redirect_uri_mismatch"),  # retired by Google in 2022
    ({"code_challenge_method": "plain"}, 400, "invalid_request"),
    ({"code_challenge_method": None}, 400, "invalid_request"),
    ({"code_challenge": None}, 400, "invalid_request"),
    ({"code_challenge": "a" * 42}, 400, "invalid_request"),
    ({"code_challenge": "a" * 42 + "+"}, 400, "invalid_request"),
    ({"client_id": "someone-else.apps.googleusercontent.com"}, 401, "invalid_client"),
    ({"scope": "openid email"}, 400, "invalid_scope"),
    ({"response_type": "token"}, 400, "unsupported_response_type"),
    ({"state": None}, 400, "invalid_request"),
    ({"client_secret": "leaked-into-the-url"}, 400, "invalid_request"),
]


def test_the_authorization_endpoint_takes_a_correct_request(oauth: FakeGoogleOAuth) -> None:
    answer = requests.get(oauth.auth_uri, params=auth_params(oauth, secrets.token_urlsafe(48)), allow_redirects=False,
                          verify=str(oauth.ca_bundle), timeout=10)
    assert answer.status_code == 302 and answer.headers["Location"].startswith(REDIRECT + "?state=st-")


@pytest.mark.parametrize(("changes", "status", "error"), BAD_AUTHORIZATIONS)
def test_the_authorization_endpoint_refuses_what_google_refuses(
        oauth: FakeGoogleOAuth, changes: dict[str, str | None], status: int, error: str) -> None:
    answer = requests.get(oauth.auth_uri, params=auth_params(oauth, secrets.token_urlsafe(48), **changes),
                          allow_redirects=False, verify=str(oauth.ca_bundle), timeout=10)
    assert (answer.status_code, "Location" in answer.headers) == (status, False)
    assert f"Error {status}: {error}" in answer.text
    assert oauth.authorizations[-1].get("code_challenge_method") == changes.get("code_challenge_method", "S256")


def test_a_second_redirect_uri_smuggled_after_the_first_is_refused(oauth: FakeGoogleOAuth) -> None:
    query = urlencode(auth_params(oauth, secrets.token_urlsafe(48))) + "&redirect_uri=http%3A%2F%2Fcollector.example%2F"
    answer = requests.get(oauth.auth_uri + "?" + query, allow_redirects=False, verify=str(oauth.ca_bundle), timeout=10)
    assert answer.status_code == 400 and "invalid_request" in answer.text and "Location" not in answer.headers


# -- the token endpoint ------------------------------------------------------------------------------


def test_the_token_endpoint_takes_the_secret_in_the_body_as_well(oauth: FakeGoogleOAuth) -> None:
    form = {**exchange_form(oauth), "client_id": oauth.client_id, "client_secret": oauth.client_secret}
    assert post_token(oauth, form, basic=False).status_code == 200


def _tamper(name: str, oauth: FakeGoogleOAuth, form: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(form, extra keyword arguments of requests.post) for the refusal ``name``."""
    if name == "json body":
        return {}, {"json": form, "data": None}
    if name == "wrong secret":
        return form, {"auth": (oauth.client_id, "not-the-secret")}
    if name == "no secret":
        return {**form, "client_id": oauth.client_id}, {"auth": None}
    if name == "secret twice":
        return {**form, "client_secret": oauth.client_secret}, {}
    if name == "other redirect":
        return {**form, "redirect_uri": "http://127.0.0.1:54322/"}, {}
    if name == "wrong verifier":
        return {**form, "code_verifier": secrets.token_urlsafe(48)}, {}
    if name == "no verifier":
        return {k: v for k, v in form.items() if k != "code_verifier"}, {}
    if name == "other grant":
        return {**form, "grant_type": "password"}, {}
    if name == "params in url":
        return form, {"params": {"code": form["code"]}}
    raise AssertionError(name)


@pytest.mark.parametrize(("name", "status", "error"), [
    ("json body", 400, "invalid_request"),
    ("wrong secret", 401, "invalid_client"),
    ("no secret", 401, "invalid_client"),
    ("secret twice", 400, "invalid_request"),
    ("other redirect", 400, "redirect_uri_mismatch"),
    ("wrong verifier", 400, "invalid_grant"),
    ("no verifier", 400, "invalid_request"),
    ("other grant", 400, "unsupported_grant_type"),
    ("params in url", 400, "invalid_request"),
])
def test_the_token_endpoint_refuses_a_wrong_code_exchange(oauth: FakeGoogleOAuth, name: str, status: int,
                                                          error: str) -> None:
    form, extra = _tamper(name, oauth, exchange_form(oauth))
    options = {"data": form, "auth": (oauth.client_id, oauth.client_secret), **extra}
    answer = requests.post(oauth.token_uri, verify=str(oauth.ca_bundle), timeout=10, **options)
    assert (answer.status_code, answer.json()["error"]) == (status, error)
    assert "access_token" not in answer.json() and oauth.issued == []


def test_a_code_is_good_once_even_when_its_first_use_was_wrong(oauth: FakeGoogleOAuth) -> None:
    form = exchange_form(oauth)
    assert post_token(oauth, form).status_code == 200
    again = post_token(oauth, form)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_grant")
    guessed = exchange_form(oauth)
    assert post_token(oauth, {**guessed, "code_verifier": secrets.token_urlsafe(48)}).json()["error"] == "invalid_grant"
    assert post_token(oauth, guessed).json()["error"] == "invalid_grant"  # the right verifier, too late
    assert len(oauth.issued) == 1


def test_an_unknown_refresh_token_or_an_ungranted_scope_is_refused(oauth: FakeGoogleOAuth) -> None:
    unknown = refresh(oauth, "1//0not-a-token")
    assert unknown.status_code == 400
    assert unknown.json() == {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}
    grant = oauth.mint_grant()
    wider = refresh(oauth, grant, scope=f"{CALENDAR_SCOPE} https://www.googleapis.com/auth/gmail.readonly")
    assert (wider.status_code, wider.json()["error"]) == (400, "invalid_scope")
    assert refresh(oauth, grant, scope=CALENDAR_SCOPE).status_code == 200


def test_revoking_an_access_token_ends_the_whole_grant(oauth: FakeGoogleOAuth) -> None:
    grant = oauth.mint_grant()
    other = oauth.mint_grant()
    first, second = (refresh(oauth, grant).json()["access_token"] for _ in range(2))
    revoked = requests.post(oauth.revoke_uri, data={"token": first}, verify=str(oauth.ca_bundle), timeout=10)
    assert (revoked.status_code, revoked.json()) == (200, {})
    assert not oauth.token_valid(first) and not oauth.token_valid(second)
    assert refresh(oauth, grant).json()["error"] == "invalid_grant"
    again = requests.post(oauth.revoke_uri, data={"token": grant}, verify=str(oauth.ca_bundle), timeout=10)
    assert (again.status_code, again.json()["error"]) == (400, "invalid_token")
    assert refresh(oauth, other).status_code == 200  # another sign-in is untouched
    oauth.revoke_all()
    assert refresh(oauth, other).json()["error"] == "invalid_grant"


def test_expired_access_tokens_are_invalid_and_a_refresh_still_works(tmp_path: Path) -> None:
    with FakeGoogleOAuth(tmp_path / "a") as oauth:
        grant = oauth.mint_grant()
        token = oauth.mint_access(grant)
        assert oauth.token_valid(token)
        oauth.expire_access_tokens()
        assert not oauth.token_valid(token)
        assert oauth.token_valid(refresh(oauth, grant).json()["access_token"])
    with FakeGoogleOAuth(tmp_path / "b", access_lifetime_s=0, testing_mode=True) as short:
        tokens = post_token(short, exchange_form(short)).json()
        assert tokens["expires_in"] == 0 and not short.token_valid(tokens["access_token"])
        assert tokens["refresh_token_expires_in"] == TESTING_REFRESH_LIFETIME_S


def test_an_injected_token_failure_is_answered_once(oauth: FakeGoogleOAuth) -> None:
    grant = oauth.mint_grant()
    oauth.fail_token(503, "temporarily_unavailable")
    failed = refresh(oauth, grant)
    assert (failed.status_code, failed.json()["error"]) == (503, "temporarily_unavailable")
    assert refresh(oauth, grant).status_code == 200


def test_a_client_that_does_not_trust_the_fake_ca_cannot_talk_to_it(oauth: FakeGoogleOAuth) -> None:
    with pytest.raises(requests.exceptions.SSLError):
        requests.post(oauth.token_uri, data={}, verify=True, timeout=10)  # the system's CAs only


def test_the_client_file_is_googles_shape_and_private(oauth: FakeGoogleOAuth, tmp_path: Path) -> None:
    path = oauth.client_file(tmp_path)
    assert path.stat().st_mode & 0o777 == 0o600
    installed = json.loads(path.read_text())["installed"]
    assert (installed["token_uri"], installed["client_secret"]) == (oauth.token_uri, oauth.client_secret)
    (tmp_path / "web").mkdir()
    assert list(json.loads(oauth.client_file(tmp_path / "web", kind="web", mode=0o644).read_text())) == ["web"]


def test_the_real_google_libraries_sign_in_and_refresh_against_the_fake(
        google_oauth: FakeGoogleOAuth, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from google.auth.transport.requests import Request
    from google_auth_oauthlib.flow import InstalledAppFlow

    browser = google_oauth.browser()
    monkeypatch.setattr(webbrowser, "get", lambda using=None: browser)
    flow = InstalledAppFlow.from_client_secrets_file(str(google_oauth.client_file(tmp_path)), scopes=[CALENDAR_SCOPE])
    credentials = flow.run_local_server(host="127.0.0.1", port=0, authorization_prompt_message="",
                                        timeout_seconds=30)
    browser.join()
    assert browser.errors == [] and browser.statuses == [200]
    assert google_oauth.authorizations[-1]["code_challenge_method"] == "S256"
    assert google_oauth.token_valid(credentials.token)
    first = credentials.token
    google_oauth.expire_access_tokens()
    credentials.refresh(Request())
    assert credentials.token != first and google_oauth.token_valid(credentials.token)
    assert google_oauth.token_requests[-1][0] == "refresh_token"


# -- Google's CalDAV front -------------------------------------------------------------------------

PROPFIND = b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop><d:getetag/></d:prop></d:propfind>'
EVENT = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VEVENT\r\nUID:{uid}\r\n"
         "DTSTAMP:20261201T000000Z\r\nDTSTART:20261207T010000Z\r\nDTEND:20261207T020000Z\r\nSUMMARY:x\r\n"
         "END:VEVENT\r\nEND:VCALENDAR\r\n")
TODO = ("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\nBEGIN:VT\r\n ODO\r\nUID:{uid}\r\n"
        "DTSTAMP:20261201T000000Z\r\nSUMMARY:x\r\nEND:VTODO\r\nEND:VCALENDAR\r\n")  # folded, as a dodge


def dav(method: str, url: str, auth: str | None, body: bytes = b"", **headers: str) -> requests.Response:
    sent = {"Depth": "1", "Content-Type": "application/xml", **headers}
    if auth is not None:
        sent["Authorization"] = auth
    return requests.request(method, url, data=body, headers=sent, timeout=10)


def test_the_front_passes_a_valid_bearer_and_refuses_every_other_login(google_dav: GoogleDav) -> None:
    url, oauth = google_dav.calendar_url, google_dav.oauth
    token = google_dav.access_token()
    assert dav("PROPFIND", url, f"Bearer {token}", PROPFIND).status_code == 207  # Radicale took the swapped Basic
    nothing = dav("PROPFIND", url, None, PROPFIND)
    assert nothing.status_code == 401
    assert nothing.headers["WWW-Authenticate"] == 'Bearer realm="https://accounts.google.com/"'
    phones = base64.b64encode(f"{google_dav.username}:{google_dav.password}".encode()).decode()
    for refused in (f"Basic {phones}", "Bearer ya29.guessed", f"bearer{token}", "Bearer "):
        answer = dav("PROPFIND", url, refused, PROPFIND)
        assert answer.status_code == 401, refused
        assert 'error="invalid_token"' in answer.headers["WWW-Authenticate"]
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED"
    narrow = oauth.mint_access(oauth.mint_grant(("openid",)))
    assert dav("PROPFIND", url, f"Bearer {narrow}", PROPFIND).status_code == 403
    oauth.expire_access_tokens()
    assert dav("PROPFIND", url, f"Bearer {token}", PROPFIND).status_code == 401
    revoked = google_dav.access_token()
    oauth.revoke_all()
    assert dav("PROPFIND", url, f"Bearer {revoked}", PROPFIND).status_code == 401
    schemes = [r.auth_scheme for r in google_dav.proxy.requests]
    assert schemes[:3] == ["Bearer", "", "Basic"] and google_dav.proxy.requests[0].status == 207


def test_a_valid_bearer_with_a_second_authorization_header_is_refused(google_dav: GoogleDav) -> None:
    token = google_dav.access_token()
    phones = base64.b64encode(f"{google_dav.username}:{google_dav.password}".encode()).decode()
    path = urlsplit(google_dav.calendar_url).path
    for second in (None, f"Basic {phones}"):
        conn = http.client.HTTPConnection("127.0.0.1", google_dav.port, timeout=10)
        conn.putrequest("PROPFIND", path)
        conn.putheader("Authorization", f"Bearer {token}")
        if second:
            conn.putheader("Authorization", second)
        conn.putheader("Depth", "0")
        conn.putheader("Content-Length", str(len(PROPFIND)))
        conn.endheaders(PROPFIND)
        status = conn.getresponse().status
        conn.close()
        assert status == (401 if second else 207)


def test_the_front_refuses_what_google_calendar_does_not_do(google_dav: GoogleDav) -> None:
    bearer = f"Bearer {google_dav.access_token()}"
    url = google_dav.calendar_url
    home = url.rstrip("/").rsplit("/", 1)[0] + "/"
    made = dav("MKCALENDAR", home + "made-by-the-client/", bearer)
    assert made.status_code == 403 and "does not make calendars" in made.text  # Radicale itself would say 201
    free_busy = (b'<?xml version="1.0"?><C:free-busy-query xmlns:C="urn:ietf:params:xml:ns:caldav">'
                 b'<C:time-range start="20261201T000000Z" end="20261231T000000Z"/></C:free-busy-query>')
    assert dav("REPORT", url, bearer, free_busy).status_code == 403
    todo = dav("PUT", url + "t.ics", bearer, TODO.format(uid="t").encode(), **{"Content-Type": "text/calendar"})
    assert todo.status_code == 400
    event = dav("PUT", url + "e.ics", bearer, EVENT.format(uid="e").encode(), **{"Content-Type": "text/calendar"})
    assert event.status_code == 201
    assert [str(e.icalendar_component["uid"]) for e in google_dav.phone().events()] == ["e"]


def test_a_rate_limit_is_googles_403_json_and_then_passes(google_dav: GoogleDav) -> None:
    headers = {"Authorization": f"Bearer {google_dav.access_token()}", "Depth": "0"}
    google_dav.proxy.rate_limit(2)
    with httpx.Client(timeout=10) as client:
        answers = [client.request("PROPFIND", google_dav.calendar_url, headers=headers, content=PROPFIND)
                   for _ in range(3)]
    assert [a.status_code for a in answers] == [403, 403, 207]
    assert answers[0].headers["Content-Type"].startswith("application/json")
    assert answers[0].json()["error"]["errors"][0]["reason"] == "rateLimitExceeded"


def test_google_dav_stands_in_for_a_dav_server_behind_a_fault_proxy(google_dav: GoogleDav) -> None:
    import caldav

    with FaultProxy(google_dav) as proxy:
        client = caldav.DAVClient(url=proxy.calendar_url, auth=caldav.requests.HTTPBearerAuth(
            google_dav.access_token()), timeout=10, enable_rfc6764=False)
        calendar = client.calendar(url=proxy.calendar_url)
        calendar.save_event(EVENT.format(uid="through-both@example.com"))
        [seen] = calendar.events()
        assert str(seen.url).startswith(proxy.url)  # the href came back on the outer proxy's port
        assert [m for m, *_ in proxy.requests].count("PUT") == 1
        client.close()
    work = google_dav.make_calendar("Work", "work")
    assert work.startswith(google_dav.url) and google_dav.phone(work).events() == []
    assert [str(e.icalendar_component["uid"]) for e in google_dav.phone().events()] == ["through-both@example.com"]


def test_the_grant_file_is_what_the_production_token_reads_and_its_tokens_pass_the_front(
        google_dav: GoogleDav, tmp_path: Path) -> None:
    from tools.calendar.sync.google_token import GoogleToken

    held = GoogleToken(google_dav.grant_file(tmp_path / "held"))
    assert held.account == google_dav.email and held.bearer() == google_dav.oauth.issued[-1]
    assert google_dav.oauth.token_requests == []  # the token in the file was still good
    renewed = GoogleToken(google_dav.grant_file(tmp_path / "renewed", with_access=False)).bearer()
    assert google_dav.oauth.token_requests[-1][0] == "refresh_token"
    assert dav("PROPFIND", google_dav.calendar_url, f"Bearer {renewed}", PROPFIND).status_code == 207
