"""SFT export on real episodes: scripted policies through the real loop, eval dialogue and verifier."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from agent.backends.scripted import ScriptedBackend
from agent.config import Settings
from agent.export import cli
from agent.export.episodes import Episode, read_episodes
from agent.export.sft import Selection, build_rows, to_exact, to_structured, write_sft
from agent.loop import Agent
from agent.prompt import PromptRenderer
from agent.trajectory import TrajectoryLog
from models.gguf_header import HeaderReader
from tests import model_fixtures as mf
from tests.export_helpers import BROKEN, BROKEN_SAMPLE, parse, run, suite


def is_oracle(episode: Episode) -> bool:
    return episode.extra.get("sample") != BROKEN_SAMPLE


def standard_results(folder: Path) -> Path:
    """Oracle runs on four scenarios per template (train, train, dev, test); for the templates in
    ``BROKEN`` also a repeated oracle run and the rule-breaking policy: the verifier fails those,
    or (a delete before consent, refused by the gate) lets them succeed with a broken rule."""
    s = suite()
    scenarios = s.scenarios(per_template=4)
    run(s, folder, scenarios)
    run(s, folder, [sc for sc in scenarios if sc.template in BROKEN], samples=3)
    return folder


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return standard_results(tmp_path_factory.mktemp("results"))


def tools_schemas() -> list[dict[str, Any]]:
    return cli._default_tools(Settings())


def render_plain(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """Render like transformers' apply_chat_template (non-ASCII kept by tojson)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    return env.from_string(template).render(messages=messages, tools=tools, add_generation_prompt=False,
                                            bos_token="", eos_token="")


def test_reader_skips_non_episodes_and_reads_outcomes(results: Path) -> None:
    (results / "summary.json").write_text(json.dumps({"episodes": 3, "success_rate": 0.5}))
    episodes = read_episodes(results)
    assert len(episodes) == len(list((results / "episodes").glob("*.json")))  # summary.json is not an episode
    oracle = [e for e in episodes if is_oracle(e)]
    assert oracle and all(e.success is True and e.reward == 1.0 for e in oracle)
    broken = [e for e in episodes if not is_oracle(e)]
    assert broken and all(e.reward < 1.0 and not (e.success and e.policy_ok) for e in broken)
    assert any(e.success and e.policy_ok is False for e in broken)  # deleted only after the gate refused once
    assert {e.split for e in episodes} == {"train", "dev", "test"}
    assert all(e.calls == sum(1 for m in e.messages if m["role"] == "tool") for e in episodes)


def test_a_file_in_another_shape_stops_the_export_with_one_line(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """No lenient reading: fields at the top level instead of in ``scenario`` and ``verdict`` are
    not what the runner writes, so the file is named with its problem instead of being guessed at."""
    flat = tmp_path / "flat" / "episodes" / "x.json"
    flat.parent.mkdir(parents=True)
    flat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}], "scenario_id": "x-1",
                                "template": "t", "split": "dev", "reward": {"total": 0.5}, "success": False}))
    with pytest.raises(ValueError, match=r"x\.json:1: key: missing \(and \d+ more problems\)"):
        read_episodes(tmp_path / "flat")
    assert cli.run(parse(["export", "stats", "--from", str(tmp_path / "flat")]), Settings()) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {flat}:1: ") and error.count("\n") == 1


def test_success_only_drops_failures_and_identical_conversations(results: Path) -> None:
    episodes = read_episodes(results)
    report = build_rows(episodes, Selection(success_only=True), "structured", default_tools=tools_schemas())
    failures = sum(1 for e in episodes if not e.success)
    violators = sum(1 for e in episodes if e.success and e.policy_ok is False)
    assert failures and violators
    assert report.dropped["not a success"] == failures
    assert report.dropped["succeeded but broke a rule"] == violators
    assert report.dropped["duplicate conversation"] == sum(1 for e in episodes if e.extra.get("sample") == 1)
    assert len(report.rows) == len(episodes) - failures - violators - report.dropped["duplicate conversation"]
    assert all(r["success"] and r["reward"] == 1.0 for r in report.rows)
    assert all(r["tools"] == tools_schemas() for r in report.rows)


def test_structured_rows_are_openai_format_with_dict_arguments(results: Path) -> None:
    report = build_rows(read_episodes(results), Selection(success_only=True), "structured",
                        default_tools=tools_schemas())
    calls = 0
    for row in report.rows:
        messages = row["messages"]
        assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
        for i, m in enumerate(messages):
            if m["role"] != "assistant":
                continue
            assert "<tool_call>" not in m["content"]
            for j, call in enumerate(m.get("tool_calls", [])):
                calls += 1
                assert call["type"] == "function" and isinstance(call["function"]["arguments"], dict)
                answer = messages[i + 1 + j]
                assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]
                assert answer["name"] == call["function"]["name"]
    assert calls > 0


@pytest.mark.parametrize("variant", mf.QWEN3_VARIANTS)
def test_structured_rows_render_to_the_models_exact_text_with_the_qwen3_templates(results: Path, variant: str) -> None:
    """Training tokens = inference tokens: each real template re-renders each call as the model wrote it.

    With the hybrid template the last assistant turn comes after an empty think block, as it does
    in the runtime's prompt with thinking off; the 2507 template writes none anywhere.
    """
    episodes = [e for e in read_episodes(results) if e.success]
    report = build_rows(episodes, Selection(success_only=True), "structured", default_tools=tools_schemas())
    assert report.noncanonical_turns == 0
    by_id = {}
    for e in episodes:
        by_id.setdefault(e.scenario_id, e)
    think = "<think>\n\n</think>\n\n"
    for row in report.rows:
        rendered = render_plain(mf.qwen3_chat_template(variant), row["messages"], row["tools"])
        assert (think in rendered) == (variant == "hybrid")
        for m in by_id[row["scenario_id"]].messages:
            if m["role"] == "assistant":
                assert (f"<|im_start|>assistant\n{m['content']}<|im_end|>" in rendered
                        or f"<|im_start|>assistant\n{think}{m['content']}<|im_end|>" in rendered)


def test_exact_rows_render_like_the_runtime_prompt_for_smollm2(results: Path) -> None:
    """For a template without tools, the row rendered plainly is the runtime's own prompt text."""
    template = str(HeaderReader(mf.smollm2_path()).value("tokenizer.chat_template"))
    renderer = PromptRenderer(template)
    assert not renderer.native_tools
    episodes = [e for e in read_episodes(results) if e.success]
    report = build_rows(episodes, Selection(success_only=True), "exact", default_tools=tools_schemas())
    by_id = {e.scenario_id: e for e in reversed(episodes)}
    checked = 0
    for row in report.rows:
        original = by_id[row["scenario_id"]].messages
        expected = renderer.render(original, row["tools"], add_generation_prompt=False)
        assert render_plain(template, row["messages"]) == expected
        assistants = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        assert assistants == [m["content"] for m in original if m["role"] == "assistant"]
        checked += 1
    assert checked == len(report.rows) > 5


def test_unreadable_call_cannot_be_structured_but_is_kept_exactly() -> None:
    broken = '<tool_call>\n{"name": "search_events", "arguments": {"date": \n</tool_call>'
    messages = [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "what's on?"},
        {"role": "assistant", "content": broken},
        {"role": "tool", "tool_call_id": "call_unreadable", "name": "invalid_call", "content": '{"ok": false}'},
        {"role": "assistant", "content": "Sorry."},
    ]
    episode = Episode(messages=messages, scenario_id="x", template="t", split="train", reward=0.6, success=True)
    structured = build_rows([episode], Selection(), "structured", default_tools=[])
    assert structured.rows == [] and structured.dropped["not representable as structured"] == 1
    exact = build_rows([episode], Selection(), "exact", default_tools=[])
    assert exact.rows[0]["messages"][2]["content"] == broken


def test_reasoning_is_split_out_and_counted_as_noncanonical() -> None:
    raw = '<think>\nlook it up\n</think>\n\n<tool_call>\n{"name": "search_events", "arguments": {"query": "치과"}}\n</tool_call>'
    messages, noncanonical = to_structured([{"role": "assistant", "content": raw, "tool_calls": [
        {"id": "c0", "type": "function", "function": {"name": "search_events", "arguments": '{"query": "치과"}'}}]}])
    assert messages[0]["reasoning_content"] == "look it up" and messages[0]["content"] == ""
    assert messages[0]["tool_calls"][0]["function"]["arguments"] == {"query": "치과"}
    assert noncanonical == 1


def test_exact_inserts_the_tool_block_when_there_is_no_system_message() -> None:
    tools = tools_schemas()
    out = to_exact([{"role": "user", "content": "hi"}], tools)
    assert out[0]["role"] == "system" and "<tools>" in out[0]["content"] and "create_event" in out[0]["content"]


def test_min_reward_split_and_per_template_cap(results: Path) -> None:
    episodes = read_episodes(results)
    capped = build_rows(episodes, Selection(min_reward=0.99, per_template_cap=1, split="train"), "structured",
                        default_tools=tools_schemas())
    templates = [r["template"] for r in capped.rows]
    assert len(templates) == len(set(templates)) == len({e.template for e in episodes if e.split == "train"})
    assert all(r["split"] == "train" and r["reward"] >= 0.99 for r in capped.rows)
    assert capped.dropped["over the per-template cap"] > 0 and capped.dropped["other split"] > 0
    low = build_rows(episodes, Selection(min_reward=0.0), "structured", default_tools=tools_schemas())
    assert any(not r["success"] for r in low.rows)


def test_write_sft_jsonl_and_datasets_folder_keep_the_split(results: Path, tmp_path: Path) -> None:
    import datasets  # the test extra installs it: a broken install fails here, it is not skipped
    report = build_rows(read_episodes(results), Selection(success_only=True), "structured",
                        default_tools=tools_schemas())
    summary = write_sft(report, tmp_path / "out")
    lines = (tmp_path / "out" / "sft.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == summary["rows"] == len(report.rows)
    assert json.loads(lines[0]) == report.rows[0]
    loaded = datasets.load_from_disk(str(tmp_path / "out" / "dataset"))
    assert set(loaded.keys()) == {"train", "dev", "test"}
    assert sum(len(loaded[s]) for s in loaded) == len(report.rows)
    row = loaded["train"][0]
    assert json.loads(row["tools"]) == tools_schemas()
    original = next(r for r in report.rows if r["scenario_id"] == row["scenario_id"])
    for got, want in zip(row["messages"], original["messages"]):
        assert got["role"] == want["role"] and got["content"] == want["content"]
        for gc, wc in zip(got.get("tool_calls") or [], want.get("tool_calls") or []):
            assert json.loads(gc["function"]["arguments"]) == wc["function"]["arguments"]
    rendered = render_plain(mf.qwen3_chat_template("2507"), row["messages"], json.loads(row["tools"]))
    assert "null" not in rendered.split("</tools>", 1)[1]  # no Arrow-union nulls reach the model's text


def test_trajectory_log_sessions_are_unscored_episodes(tmp_path: Path) -> None:
    s = suite()
    scenario = next(sc for sc in s.scenarios(per_template=1) if sc.template == "multi_attendee")
    environment = s.make_environment(scenario)
    log = TrajectoryLog(tmp_path / "trajectories.sqlite")
    agent = Agent(ScriptedBackend(s.policies["oracle"](scenario)), environment.registry)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": scenario.opening}]
    turn = agent.run_turn(messages, approver=None, session_id="s1")  # type: ignore[arg-type]
    log.record(turn, agent.backend.identity())
    log.close()
    environment.close()
    [episode] = read_episodes(tmp_path / "trajectories.sqlite")
    assert episode.template == "log" and episode.reward is None and episode.calls == len(turn.calls) > 0
    assert episode.messages == messages[1:]
    assert build_rows([episode], Selection(success_only=True), "structured").dropped["not scored"] == 1
    assert len(build_rows([episode], Selection(), "structured").rows) == 1


def test_cli_sft_writes_the_export(results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sft"
    args = parse(["export", "sft", "--from", str(results), "--out", str(out), "--success-only",
                  "--assistant-format", "exact", "--split", "train"])
    assert cli.run(args, Settings()) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["assistant_format"] == "exact" and summary["per_split"] == {"train": summary["rows"]}
    rows = [json.loads(line) for line in (out / "sft.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rows and all("<tools>" in r["messages"][0]["content"] for r in rows)
    assert cli.run(parse(["export", "sft", "--from", str(tmp_path / "missing"), "--out", str(out)]), Settings()) == 2


def test_cli_sft_reads_several_sources_as_one_set(results: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """``train demo --drills`` exports the recipe's oracle run and the drills' as one set: rows of
    both, and a conversation found in two sources is one row."""
    def export(*sources: Path) -> list[str]:
        out = tmp_path / f"sft{len(list(tmp_path.iterdir()))}"
        args = parse(["export", "sft", *(a for s in sources for a in ("--from", str(s))), "--out", str(out),
                      "--success-only", "--assistant-format", "exact", "--split", "train"])
        assert cli.run(args, Settings()) == 0
        capsys.readouterr()
        return sorted(json.loads(line)["scenario_id"] for line in (out / "sft.jsonl").read_text("utf-8").splitlines())

    everything = export(results)
    files = sorted((results / "episodes").glob("*.json"))
    halves = tmp_path / "first", tmp_path / "second"
    for half, chosen in zip(halves, (files[::2], files[1::2])):
        (half / "episodes").mkdir(parents=True)
        for f in chosen:
            shutil.copy(f, half / "episodes" / f.name)
    assert len(export(halves[0])) < len(everything)
    assert export(*halves) == everything
    assert export(results, results) == everything
    missing = parse(["export", "sft", "--from", str(results), "--from", str(tmp_path / "missing"), "--out",
                     str(tmp_path / "none")])
    assert cli.run(missing, Settings()) == 2 and not (tmp_path / "none").exists()


def test_cli_auto_format_follows_the_models_template(tmp_path: Path, gemma3: Path, smollm2: Path) -> None:
    assert cli._assistant_format("auto", Settings(model_path=str(mf.smollm2_path())))[0] == "exact"
    for variant in mf.QWEN3_VARIANTS:
        tiny = mf.tiny_qwen3_path(variant)
        assert cli._assistant_format("auto", Settings(model_path=str(tiny)))[0] == "structured"
    assert cli._assistant_format("auto", Settings(), demo=True)[0] == "exact"  # --demo is Gemma: no template in its file
    assert cli._assistant_format("auto", Settings(demo="smollm2"), demo=True)[0] == "exact"
    nowhere = Settings(model_path=str(tmp_path / "missing.gguf"))
    assert cli._assistant_format("auto", nowhere)[0] == "structured"
    assert cli._assistant_format("exact", nowhere) == ("exact", "as asked")


def test_cli_help_explains_the_formats(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["export", "sft", "--help"])
    text = capsys.readouterr().out
    assert "--assistant-format" in text and "SmolLM2" in text and "--per-template-cap" in text


class ToolsSeen(ScriptedBackend):
    """The oracle, keeping the tool schemas each step was given."""

    def __init__(self, outputs: Any, seen: list[list[dict[str, Any]]]) -> None:
        super().__init__(outputs)
        self.seen = seen

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **kwargs: Any):  # type: ignore[override]
        self.seen.append(tools)
        return super().complete(messages, tools, **kwargs)


def test_rows_carry_the_tools_every_episode_and_the_runtime_were_served(tmp_path: Path) -> None:
    """Neither an eval record nor the trajectory log stores the schemas (``Episode.tools`` is None),
    and export fills in the domain's: that loses nothing while every scenario and the runtime are
    served one and the same list, which this pins (a domain whose tools differ per scenario, or a
    user setting that changed them, would have to record them)."""
    from agent.app import build_runtime
    from agent.config import load_settings
    from agent.eval.runner import RunOptions, run_eval

    s = suite()
    seen: list[list[dict[str, Any]]] = []
    scenarios = s.scenarios(per_template=1)
    run_eval(s, scenarios, lambda sc, k: ToolsSeen(s.policies["oracle"](sc), seen), RunOptions(out_dir=tmp_path / "r", progress=False))
    episodes = read_episodes(tmp_path / "r")
    assert len(episodes) == len(scenarios) and all(e.tools is None for e in episodes)
    report = build_rows(episodes, Selection(), "structured", default_tools=tools_schemas())
    assert seen and all(tools == seen[0] for tools in seen)
    assert report.rows and all(row["tools"] == seen[0] for row in report.rows)

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "config.toml").write_text("remind_minutes = [30, 60]\n", encoding="utf-8")  # a user's own
    runtime = build_runtime(load_settings({"data_dir": str(tmp_path / "data")}, environ={}), ScriptedBackend(["Hi."]))
    served = runtime.domain.registry.schemas()
    runtime.close()
    assert served == seen[0] == tools_schemas()
