"""The API key goes over plain http to this machine only, or to a host the user named; a base URL
with a user name or password in it is refused; neither refusal echoes the secret.

Written the way an attacker (or a hurried user) tries it: ``--base-url http://api.invalid/v1``
with a key set, userinfo in the URL, spellings that make a remote host look local, and a real
listener on this machine's own non-loopback address standing for "another host" to prove that
no connection is made, not merely that an error comes back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agent.backends.openai import OpenAIBackend
from agent.config import load_settings
from agent.url_policy import ALLOW_ENV, allowed_hosts, has_credentials, is_this_machine, origin_of
from tests.recording_server import Answer, RecordingServer, non_loopback_address

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-0123456789abcdef"
PASSWORD = "hunter2-Secret-pass"
REPLY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "hello"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1}}).encode()


def env_for(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "AGENT_", "OPENAI_"))}
    env.update(AGENT_DATA_DIR=str(data_dir), PYTHONPATH=str(ROOT), **extra)
    return env


def doctor(data_dir: Path, base_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent", "doctor", "--backend", "openai", "--base-url", base_url, "--model", "m"]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env_for(data_dir, **env))


def chat_completions(_seen, _server) -> Answer:
    return Answer(200, {"Content-Type": "application/json"}, REPLY)


# ---- the backend itself -------------------------------------------------------------------------


def test_a_key_for_a_plain_http_remote_host_is_refused_before_the_transport_is_touched() -> None:
    touched: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda request: touched.append(request) or httpx.Response(200, content=REPLY))
    with pytest.raises(ValueError) as refused:
        OpenAIBackend("http://api.invalid/v1", "m", KEY, transport=transport)
    line = str(refused.value)
    assert "\n" not in line and ALLOW_ENV in line and "api.invalid" in line
    assert KEY not in line
    assert touched == []


def test_without_a_key_nothing_secret_goes_so_plain_http_to_a_remote_host_is_not_refused() -> None:
    backend = OpenAIBackend("http://api.invalid/v1", "m", None,
                            transport=httpx.MockTransport(lambda r: httpx.Response(200, content=REPLY)))
    assert backend.complete([{"role": "user", "content": "hi"}], []).text == "hello"


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost"])
def test_a_key_goes_over_plain_http_to_this_machine(host: str) -> None:
    listen = "127.0.0.1" if host == "localhost" else host
    with RecordingServer(chat_completions, listen) as server:
        backend = OpenAIBackend(f"http://{host}:{server.port}/v1", "m", KEY, max_retries=0)
        completion = backend.complete([{"role": "user", "content": "hi"}], [])
        backend.close()
    assert completion.error is None and completion.text == "hello"
    assert server.authorizations() == [f"Bearer {KEY}"]


def test_the_explicit_setting_lets_the_key_reach_a_named_plain_http_host(tmp_path: Path) -> None:
    settings = load_settings(environ={"AGENT_DATA_DIR": str(tmp_path), ALLOW_ENV: "nas.local, 192.168.1.20"})
    assert settings.allow_plain_http_hosts == ("nas.local", "192.168.1.20")
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda request: seen.append(request) or httpx.Response(200, content=REPLY))
    backend = OpenAIBackend("http://NAS.local:8080/v1", "m", KEY, transport=transport,
                            allow_plain_http_hosts=settings.allow_plain_http_hosts)
    assert backend.complete([{"role": "user", "content": "hi"}], []).text == "hello"
    assert [r.url.host for r in seen] == ["nas.local"] and seen[0].headers["Authorization"] == f"Bearer {KEY}"
    with pytest.raises(ValueError, match=ALLOW_ENV):  # naming one host allows that host only
        OpenAIBackend("http://nas.local.evil.example/v1", "m", KEY, transport=transport,
                      allow_plain_http_hosts=settings.allow_plain_http_hosts)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1.nip.io/v1",  # a name that resolves to loopback is still a name
    "http://localhost.evil.example/v1",
    "http://api.invalid#@127.0.0.1/v1",  # the fragment, not the host, holds the loopback address
    "http://0.0.0.0:8080/v1",
    "http://[::ffff:8.8.8.8]/v1",
])
def test_spellings_that_only_look_local_are_remote(url: str) -> None:
    with pytest.raises(ValueError, match=ALLOW_ENV):
        OpenAIBackend(url, "m", KEY, transport=httpx.MockTransport(lambda r: httpx.Response(599)))


@pytest.mark.parametrize("url", [
    f"https://user:{PASSWORD}@api.example.com/v1",
    f"http://{PASSWORD}@127.0.0.1:8080/v1",
    f"https://127.0.0.1:{PASSWORD}@api.example.com/v1",  # the host a reader sees first is not the host
])
def test_a_base_url_with_credentials_is_refused_without_repeating_them(tmp_path: Path, url: str) -> None:
    with pytest.raises(ValueError) as refused:
        OpenAIBackend(url, "m", None, transport=httpx.MockTransport(lambda r: httpx.Response(599)))
    assert PASSWORD not in str(refused.value) and "AGENT_API_KEY_FILE" in str(refused.value)
    with pytest.raises(ValueError) as at_load:
        load_settings(environ={"AGENT_DATA_DIR": str(tmp_path), "AGENT_BASE_URL": url})
    assert PASSWORD not in str(at_load.value) and "\n" not in str(at_load.value)


# ---- the command line: refused before a connection, one line naming the setting ---------------


def test_doctor_refuses_the_key_to_a_plain_http_remote_host_and_no_connection_is_made(tmp_path: Path) -> None:
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address to stand for another host")
    with RecordingServer(chat_completions, address) as server:
        refused = doctor(tmp_path, f"{server.origin}/v1", AGENT_API_KEY=KEY)
        assert server.connections == 0
        allowed = doctor(tmp_path, f"{server.origin}/v1", AGENT_API_KEY=KEY, **{ALLOW_ENV: address})
        assert server.connections >= 1  # the same listener, reachable: the refusal was the policy's
    assert refused.returncode == 2
    errors = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and ALLOW_ENV in errors[0] and address in errors[0], refused.stderr
    assert KEY not in refused.stdout + refused.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert server.authorizations() == [f"Bearer {KEY}"]


def test_doctor_with_credentials_in_the_base_url_exits_2_and_prints_them_nowhere(tmp_path: Path) -> None:
    result = doctor(tmp_path, f"https://me:{PASSWORD}@api.example.com/v1", AGENT_API_KEY=KEY)
    assert result.returncode == 2
    assert PASSWORD not in result.stdout + result.stderr
    assert "base URL" in result.stderr and len(result.stderr.strip().splitlines()) == 1


# ---- the policy's pieces -------------------------------------------------------------------------


@pytest.mark.parametrize("host,local", [
    ("localhost", True), ("LOCALHOST", True), ("127.0.0.1", True), ("127.255.0.9", True), ("::1", True),
    ("[::1]", True), ("localhost.", True), ("0.0.0.0", False), ("10.0.0.1", False), ("127.0.0.1.nip.io", False),
    ("::ffff:8.8.8.8", False), ("", False),
])
def test_this_machine_is_localhost_127_8_and_ipv6_loopback_by_the_literal_name(host: str, local: bool) -> None:
    assert is_this_machine(host) is local


@pytest.mark.parametrize("value", ["*", "nas.local:8080", "http://nas.local", "user@nas", "*.lan"])
def test_the_allow_list_takes_bare_hosts_only(value: str) -> None:
    with pytest.raises(ValueError, match="host name or IP address"):
        allowed_hosts(value)


def test_origins_compare_with_default_ports_filled_in() -> None:
    assert origin_of("https://Cal.Example.com/dav/") == origin_of("https://cal.example.com:443/other")
    assert origin_of("http://cal.example.com/") != origin_of("https://cal.example.com/")
    assert origin_of("http://127.0.0.1:8080/") != origin_of("http://127.0.0.1:8081/")
    assert has_credentials("https://a@b/") and not has_credentials("https://b/a@c")


def test_a_url_that_does_not_parse_is_left_to_its_owner_but_its_password_is_still_refused() -> None:
    """``http://[::1`` is the owner's "not a valid URL", not a crash here; the same broken URL
    with a password in it is still refused, and the password is never echoed."""
    from agent.url_policy import credentials_problem, has_credentials, plain_http_problem, without_credentials

    assert not has_credentials("http://[::1") and plain_http_problem("http://[::1", (), "the API key") is None
    assert has_credentials("http://me:hunter22@[::1/v1")
    line = credentials_problem("http://me:hunter22@[::1/v1", "base URL", "use the key file")
    assert line is not None and "hunter22" not in line
    assert "hunter22" not in without_credentials("http://me:hunter22@[::1/v1")
