"""The REPL, eval and a session moving between backends, all over the strict local OpenAI server.

The server plays scripted policies through *native* tool calls (as DeepSeek would answer), with
arguments written compactly so that any re-serialisation by the client would show. A correct
client gets zero 400s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent.approval import ApproveAll, DenyAll
from agent.prompt import unstamp_user_text
from tests.openai_server import Reply, Request, StrictOpenAIServer, policy_script
from tests.toy_domain import CALL, titles
from tests.toy_openai import KEY, MODEL, toy_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def toy_server():
    with StrictOpenAIServer(toy_script, api_key=KEY) as server:
        yield server


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELEGRAM_", "AGENT_", "OPENAI_"))}
    env.update(AGENT_DATA_DIR=str(data_dir), PYTHONPATH=str(ROOT), **extra)
    return env


def toy_data_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.toml").write_text('domain = "tests.toy_domain"\n')
    return path


def repl(data_dir: Path, url: str, stdin: str, *flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agent", "--backend", "openai", "--base-url", url, "--model", MODEL, *flags]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=clean_env(data_dir, **env))


def files_hold(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


# ---- REPL -------------------------------------------------------------------------------------


def test_repl_conversation_over_the_api_with_approvals_gating_the_delete(tmp_path: Path, toy_server) -> None:
    data = toy_data_dir(tmp_path / "data")
    piped = repl(data, toy_server.url, "add Dentist\n/events\ndelete Dentist\n", AGENT_API_KEY=KEY)
    assert piped.returncode == 0, piped.stderr
    out = piped.stdout
    assert '✓ create_event({"title": "Dentist"})' in out and "Created: Dentist" in out
    assert "Today:\n12:00 Dentist" in out
    assert "✗ delete_event" in out and "denied" in out  # piped, no --yes: nobody said yes
    assert titles(data) == ["Dentist"]

    yes = repl(data, toy_server.url, "delete Dentist\n", "--yes", AGENT_API_KEY=KEY)
    assert yes.returncode == 0, yes.stderr
    assert "✓ delete_event" in yes.stdout and titles(data) == []

    assert toy_server.rejected == [] and len(toy_server.answered()) == 6
    denied = toy_server.requests[3].messages  # the step after the refused delete
    assert denied[-1]["role"] == "tool" and '"error":"denied"' in denied[-1]["content"].replace(" ", "")
    # The same conversation continued in the second process: its first request holds the first's turns.
    assert toy_server.requests[4].messages[:len(toy_server.requests[3].messages)] == toy_server.requests[3].messages
    assert all(r.authorization == f"Bearer {KEY}" for r in toy_server.requests)
    assert files_hold(data, KEY) == [] and KEY not in out + piped.stderr + yes.stdout + yes.stderr


def test_the_terminal_approver_asks_before_a_remote_models_delete(tmp_path: Path, toy_server) -> None:
    """The REPL's own y/N question, in-process: no without a yes, the delete only after one."""
    from agent.app import build_runtime
    from agent.backends.openai import OpenAIBackend
    from agent.config import load_settings
    from agent.repl import TerminalApprover, format_turn

    settings = load_settings({"data_dir": str(toy_data_dir(tmp_path / "data")), "domain": "tests.toy_domain"},
                             environ={})
    runtime = build_runtime(settings, OpenAIBackend(toy_server.url, MODEL, KEY))
    asked: list[str] = []
    answers = ["n", "y"]
    approver = TerminalApprover(ask=lambda question: asked.append(question) or answers.pop(0))
    try:
        runtime.handle("repl", "add Dentist", approver)
        refused = runtime.handle("repl", "delete Dentist", approver)
        assert titles(settings.data_dir) == ["Dentist"] and "denied" in format_turn(refused)
        runtime.handle("repl", "delete Dentist", approver)
    finally:
        runtime.close()
    assert titles(settings.data_dir) == []
    assert asked == ["  ⚠ Delete the event 'Dentist'\n  Approve? [y/N] "] * 2  # asked once per delete, never for add
    assert toy_server.rejected == []


def test_repl_reads_the_key_file_and_refuses_one_others_can_read(tmp_path: Path, toy_server) -> None:
    data = toy_data_dir(tmp_path / "data")
    key_file = data / "api_key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o644)
    refused = repl(data, toy_server.url, "hello\n")
    assert refused.returncode == 2 and refused.stderr.strip() == (
        f"error: the API key file {key_file} is readable by others (mode 644): run chmod 600 {key_file}")
    assert toy_server.requests == []
    key_file.chmod(0o600)
    ok = repl(data, toy_server.url, "hello\n")
    assert ok.returncode == 0 and "You said: hello" in ok.stdout
    assert toy_server.requests[-1].authorization == f"Bearer {KEY}"


def test_repl_says_what_is_missing_for_the_openai_backend(tmp_path: Path) -> None:
    data = toy_data_dir(tmp_path / "data")
    result = subprocess.run([sys.executable, "-m", "agent", "--backend", "openai", "--model", MODEL], input="hi\n",
                            capture_output=True, text=True, timeout=60, cwd=ROOT, env=clean_env(data))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1
    assert "--base-url or AGENT_BASE_URL" in result.stderr


@pytest.mark.parametrize("flags, says", [
    (["--base-url", "http://[::1"], "is not a valid URL"),
    (["--base-url", "http://127.0.0.1:9/v1", "--demo"], "cannot be combined with --model, --backend openai"),
])
def test_repl_refuses_a_broken_url_or_demo_with_a_remote_backend_in_one_line(tmp_path: Path, flags: list[str], says: str) -> None:
    data = toy_data_dir(tmp_path / "data")
    result = subprocess.run([sys.executable, "-m", "agent", "--backend", "openai", "--model", MODEL, *flags], input="hi\n",
                            capture_output=True, text=True, timeout=60, cwd=ROOT, env=clean_env(data, AGENT_API_KEY=KEY))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr


def test_repl_shows_a_refused_key_in_one_line_and_a_server_fault_without_losing_the_message(tmp_path: Path, toy_server) -> None:
    data = toy_data_dir(tmp_path / "data")
    (data / "config.toml").write_text('domain = "tests.toy_domain"\nremote_retries = 1\n')
    wrong = repl(data, toy_server.url, "hello\n", AGENT_API_KEY="sk-wrong")
    assert wrong.returncode == 0 and "the API key was refused (HTTP 401" in wrong.stdout
    flaky = repl(data, toy_server.url, "flaky add Tea\nadd Tea\n", AGENT_API_KEY=KEY)
    assert "stopped: the model failed: gave up after 2 attempts: HTTP 503" in flaky.stdout
    assert "Created: Tea" in flaky.stdout
    last = toy_server.requests[-1].messages
    users = [unstamp_user_text(m["content"]) for m in last if m["role"] == "user"]
    assert users == ["hello", "flaky add Tea", "add Tea"]  # nothing said was lost
    assert toy_server.rejected == []


def test_doctor_shows_the_backend_hides_the_key_and_makes_one_round_trip(tmp_path: Path, toy_server) -> None:
    data = toy_data_dir(tmp_path / "data")
    argv = [sys.executable, "-m", "agent", "doctor", "--backend", "openai", "--base-url", toy_server.url, "--model", MODEL]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env=clean_env(data, AGENT_API_KEY=KEY))
    assert result.returncode == 0, result.stderr
    assert "backend: openai" in result.stdout and f"model: {MODEL}" in result.stdout
    assert "API key: from AGENT_API_KEY (hidden)" in result.stdout and KEY not in result.stdout
    assert "smoke generation" in result.stdout and "You said: Say hello" in result.stdout
    assert len(toy_server.requests) == 1 and toy_server.rejected == []
    assert "adapter:" not in result.stdout  # the model/adapter file checks are the llama backend's


# ---- eval -------------------------------------------------------------------------------------


def eval_scenarios(limit: int) -> tuple[Any, list[Any]]:
    from agent.config import load_settings
    from agent.eval.cli import balanced
    from agent.eval.suite import load_eval_suite

    suite = load_eval_suite(load_settings({}, environ={}))
    return suite, balanced(suite.scenarios(split="all", per_template=None, seed=0, templates=None), limit)


def test_eval_over_the_api_plays_the_oracle_and_concurrency_changes_nothing(tmp_path: Path, monkeypatch) -> None:
    from agent.eval import cli
    from agent.eval.runner import load_episodes

    suite, scenarios = eval_scenarios(5)
    by_opening = {s.opening: suite.policies["oracle"](s) for s in scenarios}
    assert len(by_opening) == 5

    def policy_for(messages: list[dict[str, Any]]):
        first = next(m for m in messages if m["role"] == "user")
        return by_opening.get(unstamp_user_text(first["content"]))

    oracle = policy_script(policy_for)
    concurrent = {"on": False}
    together = threading.Barrier(4, timeout=30)  # the first four requests must be in flight at once
    started = {"n": 0}
    lock = threading.Lock()

    def script(request: Request) -> Reply:
        with lock:
            started["n"] += 1
            first_four = started["n"] <= 4
        if first_four and concurrent["on"]:
            try:
                together.wait()
            except threading.BrokenBarrierError:
                return Reply.error(500, "fewer than four requests were in flight")
        return oracle(request)

    monkeypatch.setenv("AGENT_API_KEY", KEY)
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    base = ["--backend", "openai", "--base-url", "", "--model", MODEL, "--limit", "5", "--no-progress"]
    runs = {}
    with StrictOpenAIServer(script, api_key=KEY) as server:
        base[3] = server.url
        assert cli.main([*base, "--out", str(tmp_path / "one")]) == 0
        concurrent["on"] = True
        started["n"] = 0
        assert cli.main([*base, "--concurrency", "4", "--out", str(tmp_path / "four")]) == 0
    assert server.rejected == [] and all(r.status == 200 for r in server.requests)
    assert cli.main(["--policy", "oracle", "--limit", "5", "--no-progress", "--out", str(tmp_path / "oracle")]) == 0
    for name in ("one", "four", "oracle"):
        runs[name] = {e.key: e for e in load_episodes(tmp_path / name)}
    assert len(runs["one"]) == len(runs["four"]) == 5 and runs["one"].keys() == runs["oracle"].keys()
    for key, one in runs["one"].items():
        four, scripted = runs["four"][key], runs["oracle"][key]
        assert one.error is None and four.error is None
        assert one.verdict == four.verdict == scripted.verdict and one.verdict.success
        assert one.messages == four.messages  # each episode saw only its own conversation
        assert one.final_snapshot == four.final_snapshot == scripted.final_snapshot
        assert one.stop_reasons == four.stop_reasons == scripted.stop_reasons
    assert json.loads((tmp_path / "four" / "run.json").read_text())["backend"] == "openai"


def test_a_server_that_quotes_the_key_leaves_it_in_no_episode_run_json_or_log_line(
        tmp_path: Path, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """A proxy that echoes the Authorization header: in a body that is not JSON (logged and
    returned as the step's error) and in a 400 (returned); eval writes both into its files."""
    import logging

    from agent.eval import cli
    from agent.eval.runner import load_episodes

    def echo(request: Request) -> Reply:  # one episode each way (the error ends the episode)
        quoted = f"bad credentials 'Authorization: {request.authorization}'"
        return Reply.raw(quoted.encode()) if len(server.requests) == 1 else Reply.error(400, quoted)

    monkeypatch.setenv("AGENT_API_KEY", KEY)
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "run"
    with caplog.at_level(logging.DEBUG), StrictOpenAIServer(echo, api_key=KEY) as server:
        argv = ["--backend", "openai", "--base-url", server.url, "--model", MODEL, "--templates", "delete_request",
                "--limit", "2", "--max-user-turns", "2", "--no-progress", "--out", str(out)]
        assert cli.main(argv) == 0
    assert {r.status for r in server.requests} == {200, 400}
    assert "answered with something that is not JSON: bad credentials 'Authorization: Bearer <api key>'" in caplog.text
    errors = [e.turn.error or "" for episode in load_episodes(out) for e in episode.exchanges]
    assert len(errors) == 2 and all("Bearer <api key>" in error for error in errors)
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8"), path.name
    assert KEY not in caplog.text


# ---- one session, two backends ----------------------------------------------------------------


@pytest.mark.slow
def test_a_session_moves_from_llama_to_openai_and_back(tmp_path: Path, smollm2: Path, toy_server) -> None:
    from agent.app import build_runtime
    from agent.backends.llama import LlamaBackend
    from agent.backends.openai import OpenAIBackend
    from agent.backends.scripted import ScriptedBackend
    from agent.config import load_settings
    from agent.loop import Budgets

    settings = load_settings({"data_dir": str(toy_data_dir(tmp_path / "data")), "domain": "tests.toy_domain"},
                             environ={})
    # 1. the local format: the call as text the model wrote (scripted, so the call is certain)
    local = build_runtime(settings, ScriptedBackend([CALL.format(tool="create_event").replace("{title}", "Dentist"), "Created."]))
    assert local.handle("repl", "add Dentist", ApproveAll()).reply == "Created."
    local.close()
    # 2. on the API: the history so far goes out structured, the new call comes back native
    remote = build_runtime(settings, OpenAIBackend(toy_server.url, MODEL, KEY))
    assert remote.handle("repl", "add Gym", ApproveAll()).reply == "Created: Gym"
    remote.close()
    first = toy_server.requests[0].messages
    assert [m["role"] for m in first] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert first[2]["tool_calls"][0]["function"] == {"name": "create_event", "arguments": '{"title": "Dentist"}'}
    assert titles(settings.data_dir) == ["Dentist", "Gym"]
    # 3. back on llama.cpp (the real SmolLM2): it renders the API's call as the text it stored
    llama = LlamaBackend(str(smollm2), n_ctx=4096, n_threads=2)
    back = build_runtime(settings, llama)
    back.agent.budgets = Budgets(max_steps=2, max_tokens=32)  # whatever SmolLM2 writes, keep it short
    session = back.sessions.current("repl")
    stored = back.sessions.history(session)
    prompt = llama.render([{"role": "system", "content": "s"}, *stored], back.domain.registry.schemas())
    assert '{"name": "create_event", "arguments": {"title":"Gym"}}' in prompt  # the server's bytes
    turn = back.handle("repl", "thanks", DenyAll())
    assert turn.error is None and turn.steps and turn.steps[0].prompt_tokens > 0
    back.close()
    # 4. and on the API once more, with everything the three runs stored
    again = build_runtime(settings, OpenAIBackend(toy_server.url, MODEL, KEY))
    again.handle("repl", "add Tea", ApproveAll())
    again.close()
    assert toy_server.rejected == [] and titles(settings.data_dir)[-1] == "Tea"
