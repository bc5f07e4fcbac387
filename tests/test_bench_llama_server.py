"""The llama-server peer of the bench's figure 4, without building it (the build takes ~40 minutes
and runs only on request): where the binary is absent the figure says "not measured"; the command
line the bench would run; the build's cache, idempotence, unpacking and missing-tool error; and
how evaluated tokens are read from llama-server's ``timings``.
"""

from __future__ import annotations

import io
import os
import tarfile
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.bench import llama_server_build as build
from agent.bench import peers
from agent.bench.client_loop import _count_tokens
from agent.bench.peer_server import HERMES_TEMPLATE, ServerUnavailable, native_llama_server, native_server_command
from agent.bench.context import Bench, BenchConfig
from agent.eval.trace import EpisodeTrace, Exchange
from agent.records import CallRecord, CallStatus, StepRecord, Turn


@pytest.fixture
def empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache root with nothing built: the default location follows XDG_CACHE_HOME."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "iljeong" / "llama-server"


def test_binary_and_templates_live_in_the_user_cache_per_version(empty_cache: Path) -> None:
    version = build.installed_version()
    assert build.binary() == empty_cache / version / "src" / "build" / "bin" / "llama-server"
    assert build.templates_dir() == empty_cache / version / "src" / "models" / "templates"


def test_peers_figure_says_not_measured_where_llama_server_is_not_built(empty_cache: Path, tmp_path: Path) -> None:
    bench = Bench(BenchConfig(model_path=str(tmp_path / "model.gguf"), n_ctx=2048, n_threads=1, quick=True,
                              settings=None))
    runs = {key: peers.PeerRun() for key, _ in peers.PEERS}
    with ExitStack() as stack, pytest.raises(ServerUnavailable, match="not measured: llama-server is not built"):
        peers._start_native(bench, stack, SimpleNamespace(n_threads=1, n_threads_batch=1))
    runs["llama_server"].skipped = "not measured: llama-server is not built (python -m agent bench --build-llama-server)"
    peers._report(bench, runs, [], peers.QUICK)
    forced = {key: peers.PeerRun(skipped=runs[key].skipped) for key in peers.EVALUATED_BY}
    peers._report_evaluated(bench.report, runs, forced)
    report = bench.report.as_json()
    keys = [k for k in report["figures"] if k.endswith("llama_server")]
    assert set(keys) >= {"valid_call_rate_llama_server", "seconds_per_episode_llama_server",
                         "seconds_per_episode_ratio_llama_server", "calls_per_episode_llama_server",
                         "success_rate_llama_server", "evaluated_per_step_llama_server",
                         "evaluated_after_call_llama_server", "evaluated_after_call_ratio_llama_server"}
    for key in keys:
        assert report["figures"][key] is None, key
        assert "skipped: not measured" in report["notes"][key], key
    assert "not measured" in bench.report.table()


def test_native_server_refuses_a_missing_binary_before_starting_anything(tmp_path: Path) -> None:
    with pytest.raises(ServerUnavailable, match="not measured"):
        with native_llama_server(tmp_path / "llama-server", "m.gguf", n_ctx=2048, n_threads=1,
                                 template=tmp_path / HERMES_TEMPLATE, log_path=tmp_path / "log"):
            pass
    assert not (tmp_path / "log").exists()


def test_llama_server_command_has_jinja_the_hermes_template_one_slot_and_the_runtime_engine_settings() -> None:
    command = native_server_command(Path("/c/llama-server"), "/m/smol.gguf", port=8081, n_ctx=8192, n_threads=1,
                                    template=Path("/t/Qwen.jinja"))
    assert command[0] == "/c/llama-server"
    assert command.count("--jinja") == 1 and "--no-webui" in command
    switches = ("--jinja", "--no-webui")
    options = {c: command[i + 1] for i, c in enumerate(command) if c.startswith("--") and c not in switches}
    assert options["--chat-template-file"] == "/t/Qwen.jinja"
    assert options["--model"] == "/m/smol.gguf"
    assert options["--host"] == "127.0.0.1" and options["--port"] == "8081"
    assert options["--ctx-size"] == "8192" and options["--parallel"] == "1"  # one slot: the context is not split
    assert options["--threads"] == "1" and options["--threads-batch"] == "1"
    assert options["--batch-size"] == "512" and options["--seed"] == "0"
    assert options["--flash-attn"] == "off"  # the runtime's Llama runs without flash attention
    assert options["--fit"] == "off"


def test_threads_batch_follows_its_own_setting() -> None:
    command = native_server_command(Path("s"), "m", port=1, n_ctx=4096, n_threads=1, n_threads_batch=2,
                                    template=Path("t"))
    assert command[command.index("--threads-batch") + 1] == "2"
    assert command[command.index("--threads") + 1] == "1"


def test_build_commands_are_not_native_and_build_only_the_server_on_one_job() -> None:
    source = Path("/x/src")
    configure = build.configure_command(source)
    assert configure[:5] == ["cmake", "-S", "/x/src", "-B", "/x/src/build"]
    assert "-DGGML_NATIVE=OFF" in configure and "-DLLAMA_BUILD_SERVER=ON" in configure
    assert "-DLLAMA_CURL=OFF" in configure and "-DCMAKE_BUILD_TYPE=Release" in configure
    assert build.build_command(source) == ["cmake", "--build", "/x/src/build", "--target", "llama-server", "-j1"]


def test_build_is_skipped_when_the_binary_of_that_version_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = build.binary("9.9.9", tmp_path)
    target.parent.mkdir(parents=True)
    target.write_bytes(b"#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))  # a build would fail: nothing to build with
    assert build.build("9.9.9", tmp_path) == target
    assert sorted(p.name for p in build.version_dir("9.9.9", tmp_path).iterdir()) == ["src"]  # no log, no download


def test_build_without_cmake_or_compiler_fails_in_one_line_saying_what_to_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    with pytest.raises(build.BuildError) as caught:
        build.build("9.9.9", tmp_path)
    message = str(caught.value)
    assert "\n" not in message
    assert "cmake" in message and "C++ compiler" in message and "install" in message
    assert not build.version_dir("9.9.9", tmp_path).exists()  # nothing half-made is left


def test_main_prints_a_one_line_error_and_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-tools"))
    assert build.main() == 1
    err = capsys.readouterr().err
    assert err.startswith("error: building llama-server needs cmake") and err.count("\n") == 1


def _sdist(path: Path, version: str) -> Path:
    """A tarball shaped like the llama-cpp-python sdist: the package, and vendor/llama.cpp."""
    top = f"llama_cpp_python-{version}"
    tarball = path / f"{top}.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for name, data in ((f"{top}/pyproject.toml", b"[project]\n"),
                           (f"{top}/vendor/llama.cpp/CMakeLists.txt", b"project(llama)\n"),
                           (f"{top}/vendor/llama.cpp/tools/server/server.cpp", b"int main() {}\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return tarball


def test_unpack_keeps_only_the_vendored_llama_cpp(tmp_path: Path) -> None:
    source = tmp_path / "src"
    build._unpack(_sdist(tmp_path, "9.9.9"), source)
    files = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
    assert files == ["CMakeLists.txt", os.path.join("tools", "server", "server.cpp")]
    assert not (tmp_path / "src.partial").exists()


def test_unpack_refuses_a_tarball_without_llama_cpp(tmp_path: Path) -> None:
    tarball = tmp_path / "llama_cpp_python-9.9.9.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        info = tarfile.TarInfo("llama_cpp_python-9.9.9/README.md")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(build.BuildError, match="no vendor/llama.cpp"):
        build._unpack(tarball, tmp_path / "src")
    assert not (tmp_path / "src").exists()


# The response of the real llama-server (this llama.cpp built by ``--build-llama-server``, SmolLM2, the
# Hermes template, one thread) to the first step of a calendar chat, content shortened: ``timings``
# says how many prompt tokens it evaluated (``prompt_n``) and how many it took from its cache.
LLAMA_SERVER_RESPONSE = {
    "choices": [{"finish_reason": "length", "index": 0,
                 "message": {"role": "assistant", "content": "```\n{\n  \"type\": \"function-name\", ..."}}],
    "created": 1796144445, "model": "peer", "system_fingerprint": "b0-unknown", "object": "chat.completion",
    "usage": {"completion_tokens": 96, "prompt_tokens": 2958, "total_tokens": 3054,
              "prompt_tokens_details": {"cached_tokens": 0}},
    "id": "chatcmpl-ji9EXreHYqwTCuJWbszfEZa6GhTpD2Xi",
    "timings": {"cache_n": 0, "prompt_n": 2958, "prompt_ms": 77286.16, "prompt_per_token_ms": 26.127843137254903,
                "prompt_per_second": 38.27334674151232, "predicted_n": 96, "predicted_ms": 7224.374,
                "predicted_per_token_ms": 76.04604210526315, "predicted_per_second": 13.149928284443746},
}


def _after_a_call(response: dict, evaluated: int, cached: int) -> dict:
    """The same response with the counts of a later step, most of whose prompt was cached."""
    timings = {**response["timings"], "prompt_n": evaluated, "cache_n": cached}
    usage = {**response["usage"], "prompt_tokens": evaluated + cached}
    return {**response, "timings": timings, "usage": usage}


def test_client_loop_reads_evaluated_and_cached_tokens_from_llama_server_timings() -> None:
    step = StepRecord(index=0, raw_output="")
    _count_tokens(step, LLAMA_SERVER_RESPONSE)
    assert (step.prompt_tokens, step.evaluated_tokens, step.reused_tokens, step.generated_tokens) == (2958, 2958, 0, 96)
    later = StepRecord(index=1, raw_output="")
    _count_tokens(later, _after_a_call(LLAMA_SERVER_RESPONSE, evaluated=223, cached=2900))
    assert (later.prompt_tokens, later.evaluated_tokens, later.reused_tokens) == (3123, 223, 2900)
    assert later.timings["prompt_n"] == 223 and later.timings["predicted_n"] == 96


def test_a_server_without_timings_leaves_evaluated_unknown() -> None:
    step = StepRecord(index=0, raw_output="")
    _count_tokens(step, {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 2}})
    assert step.prompt_tokens == 50 and step.evaluated_tokens == 0 and "prompt_n" not in step.timings
    run = peers.PeerRun(evaluated_from="timings")
    run.count_evaluated(_trace([[step]]))
    assert run.evaluated == []  # unknown is not counted as zero


def _step(index: int, evaluated: int, prompt: int, calls: int, timings: bool) -> StepRecord:
    step = StepRecord(index=index, raw_output="", prompt_tokens=prompt, evaluated_tokens=evaluated)
    step.calls = [CallRecord("list_events", {}, CallStatus.OK, "[]") for _ in range(calls)]
    if timings:
        step.timings = {"prompt_n": float(evaluated), "cache_n": float(prompt - evaluated)}
    return step


def _trace(turns: list[list[StepRecord]]) -> EpisodeTrace:
    exchanges = [Exchange(user_text=f"message {i}", turn=Turn(session_id=None, user_text="", steps=steps))
                 for i, steps in enumerate(turns)]
    return EpisodeTrace(scenario=None, exchanges=exchanges, initial={}, final={}, tool_names=())  # type: ignore[arg-type]


@pytest.mark.parametrize("source", ["backend", "timings"])
def test_steps_after_a_tool_call_are_those_whose_previous_step_in_the_turn_called(source: str) -> None:
    timings = source == "timings"
    trace = _trace([
        [_step(0, 2000, 2000, 1, timings), _step(1, 40, 2060, 0, timings)],  # a call, then the reply
        [_step(0, 30, 2100, 0, timings)],  # a new user message: not after a call
        [_step(0, 25, 2150, 2, timings), _step(1, 300, 2300, 1, timings), _step(2, 60, 2400, 0, timings)],
    ])
    run = peers.PeerRun(evaluated_from=source)
    run.count_evaluated(trace)
    assert run.evaluated == [2000, 40, 30, 25, 300, 60]
    assert run.evaluated_after_call == [40, 300, 60]
    assert run.prompt_after_call == [2060, 2300, 2400]
    assert run.appended_after_call == [60, 150, 100]


def test_a_forced_first_call_asks_llama_server_for_required_once() -> None:
    sent: list[dict] = []
    chat = peers._required_first(lambda request: sent.append(request) or LLAMA_SERVER_RESPONSE)
    for _ in range(3):
        chat({"messages": [], "tool_choice": "auto"})
    assert [r["tool_choice"] for r in sent] == ["required", "auto", "auto"]


def test_evaluated_ratio_is_llama_server_over_runtime_after_a_tool_call(tmp_path: Path) -> None:
    bench = Bench(BenchConfig(model_path="m.gguf", n_ctx=2048, n_threads=1, quick=True, settings=None))
    runs = {key: peers.PeerRun() for key, _ in peers.PEERS}
    forced = {key: peers.PeerRun() for key in peers.EVALUATED_BY}
    forced["runtime"].evaluated_after_call = [40, 60]
    forced["runtime"].prompt_after_call = [2000, 2100]
    forced["runtime"].appended_after_call = [60, 80]
    forced["llama_server"].evaluated_after_call = [150, 250]
    forced["llama_server"].prompt_after_call = [1800, 1900]
    forced["llama_server"].appended_after_call = [70, 90]
    peers._report_evaluated(bench.report, runs, forced)
    figures = bench.report.as_json()["figures"]
    assert figures["evaluated_after_call_runtime"] == 50
    assert figures["evaluated_after_call_llama_server"] == 200
    assert figures["evaluated_after_call_ratio_llama_server"] == 4


def test_a_peer_that_never_reported_evaluated_tokens_says_so(tmp_path: Path) -> None:
    bench = Bench(BenchConfig(model_path="m.gguf", n_ctx=2048, n_threads=1, quick=True, settings=None))
    runs = {key: peers.PeerRun() for key, _ in peers.PEERS}
    forced = {key: peers.PeerRun() for key in peers.EVALUATED_BY}
    peers._report_evaluated(bench.report, runs, forced)
    report = bench.report.as_json()
    for key, value in report["figures"].items():  # the bench's own rule: no value means a note saying why
        assert value is None and report["notes"][key].startswith("skipped: "), key
