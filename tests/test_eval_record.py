"""The typed episode record: files written before it existed load unchanged, the runner still
writes the same shape, and a file that is not a record is refused in one line with its place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.config import Settings
from agent.eval import cli
from agent.eval.compare import compare_dirs
from agent.eval.metrics import OVERALL, summarize
from agent.eval.record import EPISODES_DIR, EpisodeFileError, EpisodeRecord, parse_episode, read_episode
from agent.eval.report import error_rows
from agent.eval.runner import RunOptions, load_episodes, run_eval
from agent.export import cli as export_cli
from agent.export.episodes import read_episodes
from agent.records import CallStatus, StopReason
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.scenarios import build_scenario
from tests.export_helpers import parse

# Written by the runner of main at c2eb4cd (before the typed record): the oracle on a delete that
# needs a yes, a policy that guesses the missing time, and one that uses tools for a greeting.
OLD_RESULTS = Path(__file__).parent / "data" / "eval-results-c2eb4cd"
OLD_FILES = sorted((OLD_RESULTS / EPISODES_DIR).glob("*.json"))
PLAYED_BY = {"delete_request": "oracle", "missing_info": "guesses_missing_time", "no_tool": "tools_for_greetings"}
SUITE = load_eval_suite()


def test_episodes_written_before_the_typed_record_load_and_round_trip() -> None:
    records = load_episodes(OLD_RESULTS)
    assert [r.template for r in records] == ["delete_request", "missing_info", "no_tool"]
    for path, record in zip(OLD_FILES, records):
        assert record.to_json() == json.loads(path.read_text(encoding="utf-8")), path.name
    delete, guess, greeting = records
    assert delete.verdict.success and delete.verdict.reward == 1.0
    assert delete.stop_reasons == [StopReason.ASKED_USER, StopReason.FINAL_REPLY]
    assert [c.name for c in delete.calls] == ["search_events", "delete_event"] and delete.calls[1].approved
    assert delete.exchanges[1].turn.steps[0].calls[0].status is CallStatus.OK
    assert delete.scenario == build_scenario("delete_request", 0)
    assert not guess.verdict.success and guess.verdict.incorrect_action
    assert not greeting.verdict.policy_ok and greeting.verdict.components["no_tools"] == 0.0


def test_summary_compare_and_export_read_the_old_files() -> None:
    records = load_episodes(OLD_RESULTS)
    overall = {r.group: r for r in summarize(records)}[OVERALL]
    assert (overall.episodes, overall.task_success) == (3, pytest.approx(100 / 3))
    columns, rows = error_rows(records)
    assert "safety_info" in columns and {r["tool_name"] for r in rows} >= {"search_events", "delete_event"}
    same = compare_dirs(OLD_RESULTS, OLD_RESULTS)
    assert (same.paired, same.both_success, same.both_failure) == (3, 1, 2)
    episodes = read_episodes(OLD_RESULTS)
    assert [(e.scenario_id, e.success, e.seed) for e in episodes] == [
        (r.scenario_id, r.verdict.success, r.scenario.seed) for r in records]
    assert all(e.calls == len(r.calls) and e.extra["sample"] == 0 for e, r in zip(episodes, records))


def shape(record: dict[str, Any]) -> dict[str, Any]:
    """The field names at every level of the record's own structure (not of the data inside it)."""
    turns = [e["turn"] for e in record["exchanges"]]
    steps = [s for t in turns for s in t["steps"]]
    return {
        "record": sorted(record), "scenario": sorted(record["scenario"]), "verdict": sorted(record["verdict"]),
        "exchanges": sorted({k for e in record["exchanges"] for k in e}), "turns": sorted({k for t in turns for k in t}),
        "steps": sorted({k for s in steps for k in s}),
        "step_calls": sorted({k for s in steps for c in s["calls"] for k in c}),
        "calls": sorted({k for c in record["calls"] for k in c}),
    }


def test_the_runner_writes_the_same_shape_as_before(tmp_path: Path) -> None:
    for path in OLD_FILES:
        old = json.loads(path.read_text(encoding="utf-8"))
        scenario = build_scenario(old["template"], int(old["scenario_id"].rsplit("-", 1)[1]))
        policy = SUITE.policies[PLAYED_BY[old["template"]]]
        out = tmp_path / old["template"]
        [record] = run_eval(SUITE, [scenario], lambda s, k: ScriptedBackend(policy(s)),
                            RunOptions(out_dir=out, progress=False))
        new = json.loads((out / EPISODES_DIR / path.name).read_text(encoding="utf-8"))
        # one field more, on purpose: each turn's 📅 receipt beside its reply (agent.receipt)
        grown = {**shape(old), "turns": sorted([*shape(old)["turns"], "receipt"])}
        assert shape(new) == grown, path.name
        assert new == record.to_json()


# -- malformed files ---------------------------------------------------------------------------

DELETE_TEXT = OLD_FILES[0].read_text(encoding="utf-8")


def line_of(text: str, needle: str, after: str = "") -> int:
    """1-based number of the first line holding ``needle`` at or after the first line holding ``after``."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if after in line)
    return next(i for i in range(start, len(lines)) if needle in lines[i]) + 1


def refusal(text: str, tmp_path: Path) -> str:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EpisodeFileError) as caught:
        read_episode(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{path}:")
    return message.removeprefix(f"{path}:")


def test_a_wrong_value_is_named_with_its_line(tmp_path: Path) -> None:
    text = DELETE_TEXT.replace('"success": true', '"success": "maybe"', 1)
    assert '"success": "maybe"' in text
    line = line_of(text, '"success": "maybe"')
    assert refusal(text, tmp_path) == f'{line}: verdict.success: Input should be a valid boolean, unable to interpret input (got "maybe")'


def test_an_unknown_field_deep_inside_is_named_with_its_line(tmp_path: Path) -> None:
    data = json.loads(DELETE_TEXT)
    data["exchanges"][1]["turn"]["steps"][0]["calls"][0]["bogus"] = 1
    text = json.dumps(data, ensure_ascii=False, indent=1)
    line = line_of(text, '"bogus"')
    assert refusal(text, tmp_path) == f"{line}: exchanges.1.turn.steps.0.calls.0.bogus: unexpected field"


def test_a_missing_field_a_cut_short_file_and_a_non_object(tmp_path: Path) -> None:
    data = json.loads(DELETE_TEXT)
    del data["verdict"]
    assert refusal(json.dumps(data, indent=1), tmp_path) == "1: verdict: missing"
    cut = DELETE_TEXT[: len(DELETE_TEXT) // 2]
    message = refusal(cut, tmp_path)
    assert message.startswith(f"{cut.count(chr(10)) + 1}: not valid JSON (")
    with pytest.raises(EpisodeFileError) as caught:
        parse_episode(cut)
    assert caught.value.cut_short
    assert refusal("[1, 2]", tmp_path).startswith("1: the file: Input should be a valid dictionary")


def test_compare_and_export_refuse_a_folder_holding_a_malformed_file(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(OLD_RESULTS, broken)
    bad = broken / EPISODES_DIR / OLD_FILES[1].name
    bad.write_text(OLD_FILES[1].read_text(encoding="utf-8").replace('"sample": 0', '"sample": "first"'),
                   encoding="utf-8")
    assert cli.main(["compare", str(OLD_RESULTS), str(broken)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {bad}:") and "sample: Input should be a valid integer" in error
    assert error.count("\n") == 1
    assert export_cli.run(parse(["export", "stats", "--from", str(broken)]), Settings()) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}:")


def test_resuming_into_a_folder_with_a_foreign_file_refuses_and_keeps_it(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    foreign = out / EPISODES_DIR / "delete_request-s0-000__s0.json"
    foreign.parent.mkdir(parents=True)
    foreign.write_text('{"key": "delete_request-s0-000__s0", "note": "mine"}', encoding="utf-8")
    argv = ["--policy", "oracle", "--templates", "delete_request", "--per-template", "1", "--no-progress",
            "--out", str(out)]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.startswith(f"error: {foreign}:1: ")
    assert foreign.read_text(encoding="utf-8") == '{"key": "delete_request-s0-000__s0", "note": "mine"}'


def test_a_record_is_what_the_runner_returns_and_what_it_reads_back(tmp_path: Path) -> None:
    scenario = build_scenario("reschedule", 0)
    [record] = run_eval(SUITE, [scenario], lambda s, k: ScriptedBackend(SUITE.policies["oracle"](s)),
                        RunOptions(out_dir=tmp_path, progress=False))
    assert isinstance(record, EpisodeRecord) and record.verdict.success
    assert load_episodes(tmp_path) == [record]
