"""The bench's peers with an adapter (``python -m agent bench --adapter FILE``): every peer gets the
same weights as the runtime. The exact argv and settings each peer gets with and without one; a
pair the runtime would refuse never reaches a peer (llama-cpp-python segfaults on it instead of
refusing it); the figure's notes name the adapter; and a real ``llama_cpp.server`` started the
bench's way applies it (SmolLM2 and the test LoRA). No llama-server build: its argv is checked only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import pytest

from agent.backends.llama import ModelFiles, ModelRefused
from agent.bench import peers
from agent.bench.peer_server import (ServerUnavailable, llama_server, native_llama_server, native_server_command,
                                     python_server_command)
from agent.bench.context import Bench, BenchConfig
from agent.config import load_settings

if TYPE_CHECKING:
    from agent.eval.trace import EpisodeTrace

ADAPTER = "/a/adapter.gguf"


def _native(**adapter: object) -> list[str]:
    return native_server_command(Path("/c/llama-server"), "/m/smol.gguf", port=8081, n_ctx=8192, n_threads=1,
                                 template=Path("/t/Qwen.jinja"), **adapter)  # type: ignore[arg-type]


def _python(**adapter: object) -> list[str]:
    return python_server_command("/m/smol.gguf", port=8081, n_ctx=8192, n_threads=1,
                                 chat_format=peers.CHAT_FORMAT, **adapter)  # type: ignore[arg-type]


def test_llama_server_gets_the_adapter_as_lora_at_scale_1_and_as_lora_scaled_otherwise() -> None:
    base = _native()
    assert not any(arg.startswith("--lora") for arg in base)
    assert _native(lora_path=ADAPTER) == base + ["--lora", ADAPTER]
    assert _native(lora_path=ADAPTER, lora_scale=1.0) == base + ["--lora", ADAPTER]
    assert _native(lora_path=ADAPTER, lora_scale=0.5) == base + ["--lora-scaled", f"{ADAPTER}:0.5"]
    assert _native(lora_path=ADAPTER, lora_scale=0.123456789) == base + ["--lora-scaled", f"{ADAPTER}:0.123456789"]


@pytest.mark.parametrize(("path", "scale"), [("/a/one,two.gguf", 1.0), ('/a/"q".gguf', 1.0), ("/a/x:y.gguf", 0.5)])
def test_llama_server_refuses_an_adapter_path_its_flags_would_split(path: str, scale: float) -> None:
    with pytest.raises(ServerUnavailable, match="not measured: llama-server would split the adapter path"):
        _native(lora_path=path, lora_scale=scale)


def test_a_colon_in_the_adapter_path_is_fine_at_scale_1() -> None:
    assert _native(lora_path="/a/x:y.gguf")[-2:] == ["--lora", "/a/x:y.gguf"]


def test_llama_cpp_server_gets_lora_path_and_cannot_take_another_scale() -> None:
    base = _python()
    assert "--lora_path" not in base and "--lora_scale" not in base
    assert _python(lora_path=ADAPTER) == base + ["--lora_path", ADAPTER]
    with pytest.raises(ServerUnavailable, match="not measured: llama_cpp.server has no lora_scale setting"):
        _python(lora_path=ADAPTER, lora_scale=0.5)


def test_the_reason_llama_cpp_server_takes_no_scale_is_its_settings() -> None:
    """Pins why a scale other than 1 is refused: if a later llama-cpp-python adds the setting, this
    fails, and the bench should pass it instead."""
    from llama_cpp.server.settings import ModelSettings

    assert "lora_path" in ModelSettings.model_fields
    assert "lora_scale" not in ModelSettings.model_fields


def _config(model: str, lora: str | None = None, scale: float = 1.0, settings: object = None) -> BenchConfig:
    return BenchConfig(model_path=model, n_ctx=4096, n_threads=1, quick=True, settings=settings, lora_path=lora,
                       lora_scale=scale)


def test_the_in_process_peer_gets_the_model_adapter_and_scale_of_the_checked_files() -> None:
    base = peers.in_process_settings(ModelFiles("/m/smol.gguf"), _config("/m/smol.gguf"))
    assert base == {"model_path": "/m/smol.gguf", "n_ctx": 4096, "n_batch": 512, "n_threads": 1, "n_threads_batch": 1,
                    "seed": 0, "verbose": False, "chat_format": peers.CHAT_FORMAT, "lora_path": None, "lora_scale": 1.0}
    adapted = peers.in_process_settings(ModelFiles("/m/smol.gguf", ADAPTER), _config("/m/smol.gguf", ADAPTER, 0.5))
    assert adapted == {**base, "lora_path": ADAPTER, "lora_scale": 0.5}


def test_both_servers_refuse_a_mismatched_adapter_before_starting_anything(
        smollm2: Path, tiny_qwen3_lora: Path, tmp_path: Path) -> None:
    binary, template = tmp_path / "llama-server", tmp_path / "Qwen.jinja"
    binary.write_text("not a program: it must never be started\n")
    template.write_text("{{ messages }}")
    starts = {
        "llama_cpp.server": lambda log: llama_server(str(smollm2), n_ctx=512, n_threads=1,
                                                     lora_path=str(tiny_qwen3_lora), log_path=log),
        "llama-server": lambda log: native_llama_server(binary, str(smollm2), n_ctx=512, n_threads=1, template=template,
                                                        lora_path=str(tiny_qwen3_lora), log_path=log),
    }
    for name, start in starts.items():
        log = tmp_path / f"{name}.log"
        with pytest.raises(ServerUnavailable) as caught:
            with start(log):
                pass
        message = str(caught.value)
        assert message.startswith(f"not measured: error: {tiny_qwen3_lora}"), (name, message)
        assert "\n" not in message
        assert not log.exists(), name  # the log is opened only when the process starts


def test_the_peers_figure_refuses_a_mismatched_adapter_before_any_model_loads(
        smollm2: Path, tiny_qwen3_lora: Path) -> None:
    bench = Bench(_config(str(smollm2), str(tiny_qwen3_lora)))
    with pytest.raises(ModelRefused, match=str(tiny_qwen3_lora)):
        peers.peers(bench, backend=None)  # refused before the suite, the Llama or any server


def test_bench_with_a_mismatched_adapter_is_one_line_and_exit_2(smollm2: Path, tiny_qwen3_lora: Path,
                                                                  tmp_path: Path) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "HF_"))}
    environ.update(AGENT_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1")
    result = subprocess.run([sys.executable, "-m", "agent", "bench", "--only", "peers", "--model", str(smollm2),
                             "--adapter", str(tiny_qwen3_lora)], capture_output=True, text=True, env=environ,
                            timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {tiny_qwen3_lora}"), lines


def test_the_figure_notes_name_the_adapter_by_file_and_sha256_prefix(smollm2: Path, smollm2_lora: Path) -> None:
    digest = hashlib.sha256(smollm2_lora.read_bytes()).hexdigest()
    for lora, expected in ((str(smollm2_lora), f"adapter {smollm2_lora.name} (sha256 {digest[:12]}) at scale 1"),
                           (None, "base weights, no adapter")):
        bench = Bench(_config(str(smollm2), lora))
        runs = {key: peers.PeerRun() for key, _ in peers.PEERS}
        runs["chatml_fc"].skipped = "not run in this measurement (--peers runtime,llama_server)"
        for key in ("runtime", "llama_server"):
            runs[key].attempted, runs[key].valid = [1], 1
        peers._report(bench, runs, [], peers.QUICK)
        notes = bench.report.as_json()["notes"]
        assert expected in notes["valid_call_rate_runtime"]
        assert expected in notes["valid_call_rate_llama_server"]
        assert expected not in notes["valid_call_rate_chatml_fc"]  # a peer that did not run ran no weights


def test_the_runtime_peer_runs_the_adapter_with_the_settings_tool_block(smollm2: Path, smollm2_lora: Path,
                                                                         tmp_path: Path) -> None:
    settings = load_settings({"data_dir": str(tmp_path), "tool_block": "compact"}, environ={})
    backend = Bench(_config(str(smollm2), str(smollm2_lora), 0.5, settings)).build_peer_backend()
    identity = backend.identity()
    assert identity["adapter_sha256"] == hashlib.sha256(smollm2_lora.read_bytes()).hexdigest()
    assert identity["lora_scale"] == 0.5
    assert backend.renderer.tool_block == "compact"


def test_every_peer_gets_the_system_prompt_of_the_settings(tmp_path: Path) -> None:
    from agent.eval.dialogue import system_message
    from agent.eval.suite import load_eval_suite

    settings = load_settings({"data_dir": str(tmp_path), "prompt_style": "short", "date_grounding": True}, environ={})
    suite = load_eval_suite(settings)
    scenario = suite.scenarios(split="dev")[0]
    environment = peers._environment(suite, scenario, settings)
    try:
        assert (environment.prompt_settings.prompt_style, environment.prompt_settings.date_grounding) == ("short", True)
        default = suite.make_environment(scenario)
        try:
            assert system_message(scenario, environment) != system_message(scenario, default)
        finally:
            default.close()
    finally:
        environment.close()


PROMPT = "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"


def _greedy(model: Path, lora: Path | None) -> str:
    from llama_cpp import Llama

    llama = Llama(str(model), n_ctx=512, n_batch=512, n_threads=1, n_threads_batch=1, seed=0, verbose=False,
                  lora_path=str(lora) if lora else None)
    try:
        out = llama.create_completion(PROMPT, max_tokens=12, temperature=0.0, repeat_penalty=1.0)
        return str(out["choices"][0]["text"])
    finally:
        llama.close()


@pytest.mark.slow
def test_llama_cpp_server_started_the_bench_way_applies_the_adapter(smollm2: Path, smollm2_lora: Path,
                                                                     tmp_path: Path) -> None:
    """Same prompt, greedy: the server with the adapter writes what an in-process ``Llama`` with the
    same adapter writes, and the strong test LoRA moves it away from the base model's text."""
    with llama_server(str(smollm2), n_ctx=512, n_threads=1, lora_path=str(smollm2_lora),
                      log_path=tmp_path / "server.log") as base_url:
        response = httpx.post(f"{base_url}/v1/completions", timeout=300, json={
            "prompt": PROMPT, "max_tokens": 12, "temperature": 0.0, "repeat_penalty": 1.0})
        response.raise_for_status()
        served = response.json()["choices"][0]["text"]
    assert served == _greedy(smollm2, smollm2_lora)
    assert served != _greedy(smollm2, None)


def _after_call_trace(*pairs: tuple[tuple[int, int], tuple[int, int]]) -> EpisodeTrace:
    """One turn per pair: a step that called (prompt, generated), then the next step (prompt, evaluated)."""
    from agent.eval.trace import EpisodeTrace, Exchange
    from agent.records import CallRecord, CallStatus, StepRecord, Turn

    exchanges = []
    for (prompt, generated), (next_prompt, evaluated) in pairs:
        call = StepRecord(index=0, raw_output="", prompt_tokens=prompt, evaluated_tokens=prompt,
                          generated_tokens=generated)
        call.calls = [CallRecord("delete_event", {"event_id": 2}, CallStatus.OK, "{}")]
        after = StepRecord(index=1, raw_output="", prompt_tokens=next_prompt, evaluated_tokens=evaluated)
        for step in (call, after):
            step.timings = {"prompt_n": float(step.evaluated_tokens)}
        exchanges.append(Exchange(user_text="", turn=Turn(session_id=None, user_text="", steps=[call, after])))
    return EpisodeTrace(scenario=None, exchanges=exchanges, initial={}, final={}, tool_names=())  # type: ignore[arg-type]


def test_re_evaluated_after_a_call_is_what_was_evaluated_beyond_what_the_engine_held() -> None:
    """The two after-call steps of a real llama-server run (SmolLM2 + the demo adapter): the model wrote
    ``{"attendees": [...],"duration_minutes": 60}`` and the template rendered it back with ``], "``: 92
    evaluated where 75 were new; ``{"event_id": 2}`` came back as written: 128 for 127 (the stop token)."""
    run = peers.PeerRun(evaluated_from="timings")
    run.count_evaluated(_after_call_trace(((3090, 53), (3218, 92)), ((3084, 32), (3243, 128))))
    assert run.new_after_call == [75, 127]
    assert peers.reevaluated(run) == [17, 1]
    bench = Bench(_config("m.gguf"))
    runs = {key: peers.PeerRun() for key, _ in peers.PEERS}
    runs["llama_server"] = run
    forced = {key: peers.PeerRun() for key in peers.EVALUATED_BY}
    peers._report_evaluated(bench.report, runs, forced)
    report = bench.report.as_json()
    assert report["figures"]["reevaluated_after_call_llama_server"] == 9
    assert "2 steps after a call" in report["notes"]["reevaluated_after_call_llama_server"]
    assert "1 of them above 1" in report["notes"]["reevaluated_after_call_llama_server"]
    assert report["figures"]["reevaluated_after_call_runtime"] is None
    assert report["notes"]["reevaluated_after_call_runtime"].startswith("skipped: no step followed a tool call")
