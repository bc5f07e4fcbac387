"""The time probe: 40 fixed create requests that state a time, and the share of created
events that start at exactly that time, read from the episodes' final store.

The probe's own data is checked against tables written here by hand (what each way of saying a
time means, what each day word means), not against a parser; the figure is checked end to end
through the eval runner with scripted backends that book right, book an hour late, or book nothing.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval import cli
from agent.eval.runner import RunOptions, run_eval
from agent.eval.suite import PolicyFn, Scenario
from agent.formats import format_tool_call
from tools.calendar.lab import time_probe
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.policies import tool_results
from tools.calendar.lab.time_probe import TEMPLATE, load_openings, measure, probe_scenarios, totals

SUITE = load_eval_suite()
NOW, OPENINGS = load_openings()

# What each way of saying a time in the probe means, written out by hand.
MEANS = {
    "오후 3시": "15:00", "오전 10시": "10:00", "저녁 7시": "19:00", "밤 9시": "21:00", "아침 8시": "08:00",
    "새벽 5시": "05:00", "낮 12시": "12:00", "정오": "12:00", "오후 2시 반": "14:30", "오전 11시 30분": "11:30",
    "15시": "15:00", "16시 30분": "16:30", "오후 세 시": "15:00", "오후 세시 반": "15:30", "저녁 여섯 시": "18:00",
    "아침 일곱 시 반": "07:30", "오전 열한 시": "11:00", "오후 4시 15분": "16:15", "오후 1시 45분": "13:45",
    "오후 두 시": "14:00",
    "3pm": "15:00", "10 AM": "10:00", "3:30pm": "15:30", "15:00": "15:00", "noon": "12:00",
    "half past three in the afternoon": "15:30", "quarter past four in the afternoon": "16:15",
    "15 minutes past two in the afternoon": "14:15", "3 in the afternoon": "15:00",
    "7 o'clock in the evening": "19:00", "9:45 AM": "09:45", "4 PM": "16:00", "6am": "06:00", "12:30pm": "12:30",
    "17:30": "17:30", "9 pm": "21:00", "eight in the morning": "08:00", "1:00 p.m.": "13:00",
    "a quarter past nine in the morning": "09:15", "2 o'clock in the afternoon": "14:00",
}
# The probe's "now" is Thursday 2026-12-03 09:00 (Asia/Seoul); what each day word means from there.
DAYS = {
    "내일": date(2026, 12, 4), "모레": date(2026, 12, 5), "12월 7일": date(2026, 12, 7), "12월 8일": date(2026, 12, 8),
    "다음 주 수요일": date(2026, 12, 9),
    "tomorrow": date(2026, 12, 4), "the day after tomorrow": date(2026, 12, 5), "on December 7": date(2026, 12, 7),
    "on December 8": date(2026, 12, 8), "next Monday": date(2026, 12, 7), "next Wednesday": date(2026, 12, 9),
}
DURATIONS = {
    "ko": {30: ("30분",), 60: ("1시간",), 90: ("1시간 반",), 120: ("2시간",)},
    "en": {30: ("30 minutes",), 60: ("an hour", "one hour", "1-hour"), 90: ("an hour and a half",),
           120: ("two hours",)},
}


def test_the_probe_has_40_complete_openings_in_both_languages() -> None:
    assert datetime.fromisoformat(NOW) == datetime.fromisoformat("2026-12-03T09:00:00+09:00")
    assert len(OPENINGS) == 40
    assert sum(o.language == "ko" for o in OPENINGS) == 20 and sum(o.language == "en" for o in OPENINGS) == 20
    assert len({o.id for o in OPENINGS}) == len({o.opening for o in OPENINGS}) == 40
    for o in OPENINGS:  # title, day, time and duration all stated: nothing to ask
        assert f'"{o.title}"' in o.opening, o.id
        assert o.opening.count(o.said) == 1, o.id
        assert sum(word in o.opening for word in DURATIONS[o.language][o.minutes]) == 1, o.id
        assert any(word in o.opening for word in DAYS), o.id
    assert len({o.said for o in OPENINGS}) >= 38  # many ways of saying a time, not one pattern


def test_each_expected_time_and_day_is_what_the_opening_says() -> None:
    for o in OPENINGS:
        assert o.time == MEANS[o.said], o.id
        said_days = [word for word in DAYS if word in o.opening]
        longest = max(said_days, key=len)  # "the day after tomorrow" also contains "tomorrow"
        assert o.date == DAYS[longest].isoformat(), o.id


def test_each_opening_is_a_calendar_scenario_expecting_one_event_at_the_asked_time() -> None:
    scenarios = probe_scenarios()
    assert [s.id for s in scenarios] == [f"time_probe-{o.id}" for o in OPENINGS]
    for s, o in zip(scenarios, OPENINGS):
        assert (s.template, s.split, s.language, s.now, s.opening) == (TEMPLATE, "test", o.language, NOW, o.opening)
        assert s.initial["events"] == [] and s.user_script == () and s.mutation_after == 1
        (event,) = s.expected["events"]
        start, end = datetime.fromisoformat(event["start"]), datetime.fromisoformat(event["end"])
        assert (event["id"], event["title"]) == (None, o.title)
        assert (start.date().isoformat(), start.strftime("%H:%M")) == (o.date, o.time)
        assert end - start == timedelta(minutes=o.minutes)


def test_the_probe_is_never_in_train_or_dev() -> None:
    for split in ("train", "dev", "test", "all", None):  # the default set never holds it
        assert all(s.template != TEMPLATE for s in SUITE.scenarios(split=split, per_template=2)), split
    assert TEMPLATE not in SUITE.templates
    for split in ("train", "dev"):
        with pytest.raises(ValueError, match="measurement"):
            SUITE.scenarios(split=split, templates=[TEMPLATE])
    assert len(SUITE.scenarios(split="test", templates=[TEMPLATE])) == 40
    mixed = SUITE.scenarios(templates=["no_tool", TEMPLATE], per_template=2)
    assert [s.template for s in mixed] == ["no_tool", TEMPLATE, TEMPLATE]  # extra templates get half


def run_probe(tmp_path: Path, policy: Any) -> list[Any]:
    """The 40 probe episodes through the eval runner with a scripted policy (built per scenario)."""
    records = run_eval(SUITE, probe_scenarios(), lambda scenario, _sample: ScriptedBackend(policy(scenario)),
                       RunOptions(out_dir=tmp_path, progress=False))
    assert len(records) == 40
    return records


def test_the_oracle_books_all_40_at_the_asked_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "oracle"
    assert cli.main(["--policy", "oracle", "--templates", TEMPLATE, "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "time probe" in printed and "exact/created" in printed
    figure = json.loads((out / time_probe.REPORT_JSON).read_text(encoding="utf-8"))
    overall = figure["totals"][0]
    assert (overall["group"], overall["openings"], overall["created"], overall["exact"], overall["exact_day"]) == (
        "all", 40, 40, 40, 40)
    assert overall["exact_of_created_pct"] == overall["exact_of_all_pct"] == 100.0
    assert [t["group"] for t in figure["totals"]] == ["all", "en", "ko"]
    assert all(row["exact"] and len(row["created"]) == 1 for row in figure["openings"])
    assert (out / time_probe.REPORT_TXT).read_text(encoding="utf-8").startswith("time probe")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    overall_row = summary["rows"][-1]  # the verifier agrees: every task is solvable as stated
    assert (overall_row["task_success"], overall_row["mean_reward"]) == (100.0, 1.0)

    # The stand-alone reader gives the same figure from the folder.
    assert time_probe.main([str(out)]) == 0
    assert "100.0 %" in capsys.readouterr().out


def one_hour_late(scenario: Scenario) -> PolicyFn:
    """Books every event an hour after the asked time, and says it booked the asked time."""
    task = scenario.task

    def policy(messages: list[dict[str, Any]]) -> str:
        if not any(name == "create_event" for name, _ in tool_results(messages)):
            hour, minute = map(int, task["start_time"].split(":"))
            return format_tool_call("create_event", {"title": task["title"], "date": task["date"],
                                                     "start_time": f"{hour + 1:02d}:{minute:02d}",
                                                     "duration_minutes": task["duration"]})
        return f"Done: '{task['title']}' is on {task['date']} at {task['start_time']}."

    return policy


def test_a_backend_one_hour_late_is_never_exact(tmp_path: Path) -> None:
    records = run_probe(tmp_path, one_hour_late)
    results = measure(records)
    overall = totals(results)[0]
    assert (overall.openings, overall.created, overall.exact, overall.exact_day) == (40, 40, 0, 0)
    assert overall.share_of_created == overall.share_of_all == 0.0
    for r in results:  # the store's time, not the reply's words
        (created,) = r.created
        asked = datetime.fromisoformat(f"{r.asked_date}T{r.asked_time}")
        assert created == (asked + timedelta(hours=1)).strftime("%Y-%m-%d %H:%M")
    assert not any(r.verdict.success for r in records)


def test_an_agent_that_creates_nothing_has_nothing_created(tmp_path: Path) -> None:
    records = run_probe(tmp_path, lambda _scenario: lambda _messages: "Sorry, I cannot do that.")
    overall = totals(measure(records))[0]
    assert (overall.openings, overall.created, overall.exact) == (40, 0, 0)
    assert overall.share_of_created is None and overall.share_of_all == 0.0
    text = time_probe.report(tmp_path, records)
    assert text is not None and "(none)" in text


def test_a_run_without_the_probe_writes_no_probe_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "other"
    assert cli.main(["--policy", "oracle", "--templates", "no_tool", "--per-template", "2", "--no-progress",
                     "--out", str(out)]) == 0
    assert "time probe" not in capsys.readouterr().out
    assert not (out / time_probe.REPORT_JSON).exists()
    assert time_probe.main([str(out)]) == 2
    assert "no time_probe episodes" in capsys.readouterr().err
