"""GRPO export: prompt rows, the calendar environment rebuilt from them, tool schemas, scored rollouts."""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from agent.config import Settings
from agent.export import cli
from agent.export.grpo import needs_dialogue, prompt_rows, write_grpo
from agent.formats import parse_reply
from agent.prompt import PromptSettings
from tests.export_helpers import parse, suite
from tools.calendar.lab.grpo_env import CONTROL_METHODS, CalendarGRPOEnv, final_text, reward_func
from tools.calendar.lab.scenarios import build_scenario


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return prompt_rows(suite(), split="train", per_template=4)


def tool_methods() -> dict[str, Any]:
    return {name: fn for name, fn in inspect.getmembers(CalendarGRPOEnv, inspect.isfunction)
            if not name.startswith("_") and name not in CONTROL_METHODS}


# -- a small reader of the format transformers.utils.get_json_schema expects ------------------


def google_docstring(fn: Any) -> tuple[str, dict[str, str], str]:
    """(description, {arg: text}, returns) the way get_json_schema splits a Google-style docstring."""
    doc = inspect.getdoc(fn) or ""
    match = re.match(r"(?s)(.*?)\n\s*\nArgs:\n(.*?)\n\s*\nReturns:\n(.*)", doc)
    assert match, f"{fn.__name__}: docstring needs a description, an Args: and a Returns: section"
    description, args_block, returns = match.groups()
    args: dict[str, str] = {}
    for line in args_block.splitlines():
        found = re.match(r"\s{4}(\w+): (.+)", line)
        assert found, f"{fn.__name__}: not an 'name: description' line: {line!r}"
        args[found.group(1)] = found.group(2)
    return description.strip(), args, returns.strip()


JSON_TYPES = {str: "string", int: "integer", bool: "boolean", float: "number"}


def json_type(hint: Any) -> tuple[str, bool]:
    """(JSON type, nullable) of a type hint, as get_json_schema maps it."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        assert len(inner) == 1, hint
        return json_type(inner[0])[0], True
    if typing.get_origin(hint) is list:
        assert args and args[0] in (str, int), hint
        return "array", False
    if typing.get_origin(hint) is dict:  # create_event's repeat object
        return "object", False
    return JSON_TYPES[hint], False


def schema_of(fn: Any) -> dict[str, Any]:
    description, docs, _ = google_docstring(fn)
    hints = typing.get_type_hints(fn)
    signature = inspect.signature(fn)
    properties, required = {}, []
    for name, parameter in list(signature.parameters.items())[1:]:
        assert name in hints, f"{fn.__name__}.{name} has no type hint"
        assert name in docs, f"{fn.__name__}.{name} is not described under Args:"
        properties[name] = {"type": json_type(hints[name])[0], "description": docs[name]}
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
    assert set(docs) == set(properties), f"{fn.__name__}: Args: lists unknown parameters"
    assert hints.get("return") is str
    return {"name": fn.__name__, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}}


def test_every_calendar_tool_is_a_method_with_a_schema_matching_the_registry() -> None:
    environment = suite().make_environment(suite().scenarios(per_template=1)[0])
    registry = {s["function"]["name"]: s["function"] for s in environment.registry.schemas()}
    environment.close()
    methods = tool_methods()
    assert set(methods) == set(registry)
    for name, fn in methods.items():
        ours, theirs = schema_of(fn), registry[name]
        assert ours["description"] == theirs["description"]
        assert set(ours["parameters"]["properties"]) == set(theirs["parameters"]["properties"])
        assert set(ours["parameters"]["required"]) == set(theirs["parameters"].get("required", []))
        for prop, spec in ours["parameters"]["properties"].items():
            registry_types = json.dumps(theirs["parameters"]["properties"][prop])
            assert f'"type": "{spec["type"]}"' in registry_types, (name, prop)


def test_rows_name_their_scenario_and_leave_out_dialogue_tasks(rows: list[dict[str, Any]]) -> None:
    assert rows and all(r["split"] == "train" and not r["needs_dialogue"] for r in rows)
    assert {r["template"] for r in rows} == {"conflict_create", "delete_after_approval", "multi_attendee", "no_tool",
                                             "conflict_free", "multi_attendee_one_busy", "recurring_create",
                                             "delete_series_after_approval", "create_over_series", "all_day_create"}
    for row in rows:
        scenario = build_scenario(row["template"], row["index"], row["seed"])
        assert scenario.id == row["scenario_id"] and scenario.seed == row["scenario_seed"]
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        local = datetime.fromisoformat(scenario.now).astimezone(ZoneInfo(scenario.tz))
        assert row["prompt"][1]["content"] == f"[{local:%H:%M}] {scenario.opening}"  # stamped as in eval and runtime
        assert scenario.now[:10] in row["prompt"][0]["content"]  # the scenario's fixed "now"
        assert "expected" not in row and "task" not in row
    everything = prompt_rows(suite(), split="all", per_template=4, include_dialogue=True)
    assert any(r["needs_dialogue"] for r in everything) and {r["split"] for r in everything} == {"train", "dev", "test"}
    assert all(needs_dialogue(build_scenario(r["template"], r["index"], r["seed"])) == r["needs_dialogue"]
               for r in everything)


def oracle_rollout(row: dict[str, Any]) -> tuple[CalendarGRPOEnv, list[dict[str, Any]]]:
    """What GRPOTrainer does with the environment, with the oracle as the model: reset, then the
    calls it writes run as method calls, results go back, until it answers without a call."""
    environment = CalendarGRPOEnv()
    assert environment.reset(**row) is None  # TRL would append a returned string to the opening
    scenario = build_scenario(row["template"], row["index"], row["seed"])
    policy = suite().policies["oracle"](scenario)
    messages = list(row["prompt"])
    completion: list[dict[str, Any]] = []
    for _ in range(8):
        parsed = parse_reply(policy(messages))
        reply = {"role": "assistant", "content": parsed.content,
                 "tool_calls": [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                for c in parsed.tool_calls]}
        messages.append(reply)
        completion.append(reply)
        if not parsed.tool_calls:
            reply.pop("tool_calls")
            break
        for call in parsed.tool_calls:
            result = {"role": "tool", "name": call.name, "content": getattr(environment, call.name)(**call.arguments)}
            messages.append(result)
            completion.append(result)
    return environment, completion


def test_oracle_rollouts_through_the_environment_score_full_reward(rows: list[dict[str, Any]]) -> None:
    for template in ("conflict_create", "delete_after_approval", "multi_attendee", "no_tool"):
        row = next(r for r in rows if r["template"] == template)
        environment, completion = oracle_rollout(row)
        assert final_text(completion)
        [reward] = reward_func([completion], [environment])
        assert reward == pytest.approx(1.0), (template, environment._verdict())
        assert environment._verdict().success


def test_a_wrong_rollout_scores_less(rows: list[dict[str, Any]]) -> None:
    row = next(r for r in rows if r["template"] == "delete_after_approval")
    environment = CalendarGRPOEnv()
    environment.reset(**row)
    result = json.loads(environment.delete_event(event_id=9999))
    assert result["ok"] is False
    [reward] = reward_func([[{"role": "assistant", "content": "Deleted."}]], [environment])
    assert 0.0 <= reward < 1.0 and not environment._verdict().success


def test_a_delete_without_consent_in_the_opening_is_refused() -> None:
    row = next(r for r in prompt_rows(suite(), split="train", per_template=4, include_dialogue=True)
               if r["template"] == "delete_request")
    environment = CalendarGRPOEnv()
    environment.reset(**row)
    before = environment._environment.snapshot()
    events = json.loads(environment.search_events(query=build_scenario(row["template"], row["index"], row["seed"])
                                                  .task["target"]["title"]))
    event_id = events["data"]["events"][0]["id"]
    refused = json.loads(environment.delete_event(event_id=event_id))
    assert refused["ok"] is False and refused["error"] == "denied"
    assert environment._environment.snapshot() == before
    assert any("before the user agreed" in v for v in environment._verdict().violations)


def test_invalid_arguments_are_reported_not_raised(rows: list[dict[str, Any]]) -> None:
    environment = CalendarGRPOEnv()
    environment.reset(**rows[0])
    result = json.loads(environment.create_event(title="x", date="tomorrow", start_time="25:00"))
    assert result["ok"] is False and result["error"] == "invalid_arguments"


def test_reset_refuses_a_row_that_does_not_rebuild(rows: list[dict[str, Any]]) -> None:
    environment = CalendarGRPOEnv()
    with pytest.raises(ValueError):
        environment.reset(**{**rows[0], "seed": rows[0]["seed"] + 1})
    with pytest.raises(KeyError):
        environment.reset(prompt=rows[0]["prompt"])
    with pytest.raises(RuntimeError):
        CalendarGRPOEnv().get_reward()


def test_write_grpo_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import datasets  # the test extra installs it: a broken install fails here, it is not skipped
    out = tmp_path / "grpo"
    assert cli.run(parse(["export", "grpo", "--out", str(out), "--per-template", "4"]), Settings()) == 0
    summary = json.loads(capsys.readouterr().out)
    lines = (out / "grpo.jsonl").read_text(encoding="utf-8").splitlines()
    assert summary["rows"] == len(lines) > 0 and summary["per_split"] == {"train": len(lines)}
    loaded = datasets.load_from_disk(str(out / "grpo_dataset"))
    row = dict(loaded["train"][0])
    assert row == json.loads(lines[0])
    environment = CalendarGRPOEnv()
    assert environment.reset(**row) is None  # a dataset row is reset's input as is
    assert environment._turn.user_text == row["prompt"][1]["content"]
    assert write_grpo([], tmp_path / "empty")["rows"] == 0
    assert cli.run(parse(["export", "grpo", "--out", str(tmp_path / "x"), "--split", "nope"]), Settings()) == 2


def test_a_row_exported_with_time_notes_is_scored_on_the_opening_it_shows() -> None:
    """The verifier's turn holds the user's message as the row's prompt shows it (the model saw it
    so), not as the environment would stamp it without the run's settings."""
    plain = {r["scenario_id"]: r["prompt"][-1]["content"] for r in prompt_rows(suite(), split="train", per_template=6)}
    noted = prompt_rows(suite(), split="train", per_template=6, prompt_settings=PromptSettings(time_notes=True))
    row = next(r for r in noted if r["prompt"][-1]["content"] != plain[r["scenario_id"]])  # a clock time was noted
    environment = CalendarGRPOEnv()
    environment.reset(**row)
    assert environment._require_turn().user_text == row["prompt"][-1]["content"]
