"""The boundary drill: training-only bookings that say a time the time drill's ways and are not one call.

What each row expects is checked against arithmetic written here (who is busy when, what overlaps
the asked slot), the times against the time drill test's hand-written reader, and the Korean
particle against a table; the oracle is run end to end through the eval CLI.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.eval import cli
from agent.eval.suite import Scenario
from tests.test_time_drill import read_time, said_date
from tools.calendar.lab.boundary_drill import KINDS, TEMPLATE, build_drill, drill_scenarios, person_title
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.template_kit import PEOPLE
from tools.calendar.lab.time_probe import load_openings

SUITE = load_eval_suite()
DRILL = drill_scenarios("train")  # the default 100 of seed 0


def _span(row: dict[str, str]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(row["start"]), datetime.fromisoformat(row["end"])


def _new_event(s: Scenario) -> dict:
    (new,) = [e for e in s.expected["events"] if e["id"] is None]
    return new


def _overlaps(a: tuple[datetime, datetime], b: tuple[datetime, datetime]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _taken(s: Scenario, start: datetime, minutes: int) -> bool:
    """Whether anything of the user's or the attendees' that day overlaps ``start`` for ``minutes``."""
    slot = (start, start + timedelta(minutes=minutes))
    return any(_overlaps(slot, _span(row)) for row in [*s.initial["events"], *s.initial["busy"]])


def _asked(s: Scenario) -> datetime:
    hhmm = s.task["after"] if s.task["kind"] == "meeting" else s.task["start_time"]
    return datetime.fromisoformat(f"{s.task['date']}T{hhmm}").replace(tzinfo=ZoneInfo(s.tz))


def test_the_same_seed_and_index_give_the_same_scenario_and_another_seed_another() -> None:
    assert drill_scenarios("train") == DRILL and build_drill(7, seed=2) == build_drill(7, seed=2)
    other = drill_scenarios("train", seed=1)
    assert sum(a.opening != b.opening for a, b in zip(DRILL, other)) >= 95


def test_the_three_kinds_come_in_both_languages_in_equal_shares() -> None:
    assert len({s.id for s in DRILL}) == 100
    assert Counter((s.task["kind"], s.language) for s in DRILL) == {
        (kind, lang): n for kind in KINDS for lang, n in (("en", 16 if kind == "clash" else 17),
                                                           ("ko", 16 if kind == "person" else 17))}
    for s in DRILL:
        assert (s.template, s.split, s.consent_after) == (TEMPLATE, "train", None)
        assert f'"{s.task["title"]}"' in s.opening and s.opening.count(s.task["said"]) == 1, s.id
        assert read_time(s.task["said"], s.language) == _asked(s).strftime("%H:%M"), (s.id, s.task["said"])
        assert said_date(s.opening, s.now_datetime().date()).isoformat() == s.task["date"], s.id
    assert len({s.task["form"] for s in DRILL}) == 14  # every form family of the time drill


def test_a_meeting_cannot_go_at_the_asked_time_and_goes_at_the_first_time_all_are_free_from_it() -> None:
    meetings = [s for s in DRILL if s.task["kind"] == "meeting"]
    for s in meetings:
        new, asked, minutes = _new_event(s), _asked(s), s.task["duration"]
        a, b = s.task["attendees"]
        assert a in s.opening and b in s.opening and sorted(new["attendees"]) == sorted([a, b]), s.id
        assert any(row["person"] == a for row in s.initial["busy"]), s.id
        assert _taken(s, asked, minutes), s.id  # creating at the said time is wrong
        start = _span(new)[0]
        assert start > asked and not _taken(s, start, minutes), s.id
        earlier = [asked + timedelta(minutes=m) for m in range(0, int((start - asked).total_seconds() // 60), 15)]
        assert all(_taken(s, t, minutes) for t in earlier), s.id  # and nothing from it on is earlier
        assert start + timedelta(minutes=minutes) <= start.replace(hour=18, minute=0), s.id


def test_a_clash_moves_the_booking_to_the_end_of_what_is_in_the_way_and_a_near_miss_does_not() -> None:
    clashes = [s for s in DRILL if s.task["kind"] == "clash"]
    moved = 0
    for s in clashes:
        new, asked, minutes = _new_event(s), _asked(s), s.task["duration"]
        blocker = next(e for e in s.initial["events"] if _span(e)[0].date() == asked.date())
        if _taken(s, asked, minutes):
            moved += 1
            assert _span(new)[0] == _span(blocker)[1], s.id
        else:
            assert _span(new)[0] == asked, s.id
    assert 15 <= moved <= 28, moved  # most clash, some only lie beside the asked slot


def test_a_booking_that_names_a_person_is_a_plain_create_on_an_empty_day() -> None:
    persons = [s for s in DRILL if s.task["kind"] == "person"]
    for s in persons:
        new, asked = _new_event(s), _asked(s)
        assert any(p in s.task["title"] for p in PEOPLE[s.language]), s.id
        assert _span(new)[0] == asked and "attendees" not in s.task, s.id
        assert not any(_span(e)[0].date() == asked.date() for e in s.initial["events"]) and not s.initial["busy"]


@pytest.mark.parametrize("person, particle", [("민수", "랑"), ("준호", "랑"), ("지영", "이랑"), ("서연", "이랑"),
                                              ("하은", "이랑")])
def test_a_korean_title_takes_the_particle_the_name_ends_in(person: str, particle: str) -> None:
    import random

    titles = {person_title(random.Random(i), "ko") for i in range(400)}
    assert any(t.startswith(f"{person}{particle} ") for t in titles)
    assert not any(t.startswith(f"{person}{'랑' if particle == '이랑' else '이랑'} ") for t in titles)


def test_no_drill_opening_is_a_probe_opening() -> None:
    _, probe = load_openings()
    openings = {o.opening for o in probe}
    for seed in range(3):
        assert not openings & {s.opening for s in drill_scenarios("train", seed=seed)}, seed


def test_the_drill_is_served_only_when_named_and_only_for_train() -> None:
    for split in ("train", "dev", "test", None):
        assert all(s.template != TEMPLATE for s in SUITE.scenarios(split=split, per_template=2)), split
    for split in ("dev", "test"):
        with pytest.raises(ValueError, match="training data only"):
            SUITE.scenarios(split=split, templates=[TEMPLATE])
    assert SUITE.scenarios(split="train", templates=[TEMPLATE]) == DRILL
    assert SUITE.scenarios(split="train", per_template=5, seed=3, templates=[TEMPLATE]) == [
        build_drill(i, seed=3) for i in range(5)]


def test_the_oracle_solves_all_100_through_the_eval_cli_each_kind_with_its_own_calls(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    assert cli.main(["--policy", "oracle", "--split", "train", "--templates", TEMPLATE, "--no-progress",
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (row,) = [r for r in summary["rows"] if r["group"] == TEMPLATE]
    assert (row["episodes"], row["task_success"], row["incorrect_action"], row["false_claims"]) == (100, 100.0, 0.0, 0.0)
    first_calls: dict[str, Counter] = {kind: Counter() for kind in KINDS}
    for path in sorted((out / "episodes").glob("*.json")):
        episode = json.loads(path.read_text(encoding="utf-8"))
        first_calls[episode["scenario"]["task"]["kind"]][episode["calls"][0]["name"]] += 1
    assert first_calls["meeting"] == {"find_common_free_time": 34}
    assert first_calls["clash"] == {"search_events": 33}
    assert first_calls["person"] == {"create_event": 33}
