"""The time drill: training-only create requests that say the time in many ways.

What each opening's time means is checked against things written here by hand: a table of known
phrasings and a small reader of Korean and English times (numerals, parts of the day, "half past",
"15분 전"), not the generator's own code; the days against what each day word means from the
scenario's "now". The oracle is run end to end through the eval CLI.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from agent.eval import cli
from tools.calendar.lab.eval_suite import load_eval_suite
from tools.calendar.lab.time_drill import FAMILIES, TEMPLATE, build_drill, drill_scenarios
from tools.calendar.lab.time_probe import load_openings

SUITE = load_eval_suite()
DRILL = drill_scenarios("train")  # the default 200 of seed 0

# Known phrasings and what they mean, written out by hand.
MEANS = {
    "정오": "12:00", "오후 3시": "15:00", "오후 1시 반": "13:30", "오후 2시 30분": "14:30", "오후 4시 15분": "16:15",
    "오후 1시 45분": "13:45", "오후 5시": "17:00", "오후 6시": "18:00", "오전 10시": "10:00", "오전 9시 반": "09:30",
    "오전 11시 30분": "11:30", "오전 7시": "07:00", "오전 8시 45분": "08:45", "저녁 7시": "19:00", "저녁 6시 반": "18:30",
    "저녁 8시": "20:00", "밤 9시": "21:00", "밤 10시": "22:00", "밤 9시 반": "21:30", "아침 8시": "08:00",
    "아침 7시 반": "07:30", "아침 6시": "06:00", "새벽 6시": "06:00", "새벽 6시 반": "06:30", "낮 12시": "12:00",
    "낮 1시": "13:00", "낮 2시": "14:00", "낮 3시": "15:00", "낮 2시 반": "14:30",
    "오후 세 시": "15:00", "오후 세시": "15:00", "오후 두 시": "14:00", "오후 두시 반": "14:30", "오후 네 시": "16:00",
    "오전 열한 시": "11:00", "오전 열한시": "11:00", "오전 열 시": "10:00", "오전 아홉 시": "09:00", "저녁 여섯 시": "18:00",
    "저녁 일곱 시": "19:00", "저녁 일곱시": "19:00", "밤 열 시": "22:00", "밤 아홉 시": "21:00", "아침 여덟 시": "08:00",
    "아침 일곱 시 반": "07:30", "낮 열두 시": "12:00", "낮 한 시": "13:00", "낮 한시": "13:00",
    "13시": "13:00", "14시": "14:00", "15시": "15:00", "16시": "16:00", "17시": "17:00", "18시": "18:00", "19시": "19:00",
    "20시": "20:00", "21시": "21:00", "22시": "22:00", "15시 30분": "15:30", "16시 반": "16:30", "14시 15분": "14:15",
    "오후 3시 15분 전": "14:45", "오후 세 시 15분 전": "14:45", "저녁 7시 15분 전": "18:45", "오전 10시 15분 전": "09:45",
    "아침 7시 15분 전": "06:45", "아침 9시 15분 전": "08:45", "밤 10시 15분 전": "21:45", "낮 12시 15분 전": "11:45",
    "noon": "12:00", "midday": "12:00", "12 noon": "12:00",
    "06:00": "06:00", "08:45": "08:45", "09:30": "09:30", "10:45": "10:45", "12:30": "12:30", "14:00": "14:00",
    "14:45": "14:45", "15:00": "15:00", "16:30": "16:30", "18:45": "18:45", "20:00": "20:00", "22:15": "22:15",
    "3pm": "15:00", "3 pm": "15:00", "3 PM": "15:00", "3 p.m.": "15:00", "3PM": "15:00",
    "10am": "10:00", "10 AM": "10:00",
    "7am": "07:00", "7 a.m.": "07:00", "9pm": "21:00", "9 PM": "21:00", "6pm": "18:00", "12pm": "12:00",
    "9:45 AM": "09:45", "9:45am": "09:45", "3:30pm": "15:30", "3:30 PM": "15:30", "7:30pm": "19:30",
    "1:00 p.m.": "13:00",
    "12:30pm": "12:30", "6:45pm": "18:45", "8:15 a.m.": "08:15", "10:30 am": "10:30",
    "3 in the afternoon": "15:00", "three in the afternoon": "15:00", "two in the afternoon": "14:00",
    "7 o'clock in the evening": "19:00", "seven in the evening": "19:00", "six o'clock in the evening": "18:00",
    "eight in the morning": "08:00", "8 in the morning": "08:00", "seven o'clock in the morning": "07:00",
    "ten at night": "22:00", "9 at night": "21:00", "8:30 in the morning": "08:30", "4:15 in the afternoon": "16:15",
    "half past three in the afternoon": "15:30", "half past noon": "12:30", "half past 8 pm": "20:30",
    "half past seven in the morning": "07:30", "half past 9am": "09:30", "half past six in the evening": "18:30",
    "quarter past four in the afternoon": "16:15", "a quarter past nine in the morning": "09:15",
    "quarter past noon": "12:15", "a quarter past noon": "12:15", "quarter to noon": "11:45",
    "a quarter to noon": "11:45",
    "a quarter to six in the evening": "17:45", "quarter to 9 am": "08:45", "quarter to five in the afternoon": "16:45",
    "15 minutes past two in the afternoon": "14:15", "fifteen minutes past one in the afternoon": "13:15",
    "15 minutes to 7am": "06:45", "fifteen minutes to noon": "11:45", "15 minutes to noon": "11:45",
    "30 minutes past seven in the morning": "07:30", "thirty minutes past noon": "12:30",
    "15 minutes past noon": "12:15",
}

# A small reader of the ways of saying a time, for the round trip over every scenario.
_KO_NUMERALS = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10,
                "열한": 11, "열두": 12}
_EN_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
               "ten": 10, "eleven": 11, "twelve": 12}
_KO = re.compile(r"(?:(오전|오후|아침|낮|저녁|밤|새벽) )?(\d{1,2}|열한|열두|한|두|세|네|다섯|여섯|일곱|여덟|아홉|열) ?시"
                 r"(?: (반|\d{2}분))?( 전)?")
_EN_HOUR = re.compile(r"(noon|\d{1,2}|[a-z]+)(?::(\d{2}))?(?: o'clock)?"
                      r"(?: ?(am|pm|a\.m\.|p\.m\.)| (in the morning|in the afternoon|in the evening|at night))?",
                      re.IGNORECASE)
_EN_OFFSET = re.compile(r"(half past|(?:a )?quarter past|(?:a )?quarter to|(\d+|fifteen|thirty) minutes (past|to)) ")


def _after_noon(word: str | None) -> bool:
    return (word or "").lower() in ("오후", "저녁", "밤", "낮", "pm", "p.m.", "in the afternoon", "in the evening",
                                   "at night")


def read_time(said: str, language: str) -> str:
    """HH:MM that ``said`` means, read by hand-written rules; fails the test on anything else."""
    if said in ("정오", "noon", "midday", "12 noon"):
        return "12:00"
    if re.fullmatch(r"\d{2}:\d{2}", said):
        return said
    if language == "ko":
        match = _KO.fullmatch(said)
        assert match, said
        part, hour_word, minute_word, before = match.groups()
        hour = int(hour_word) if hour_word.isdigit() else _KO_NUMERALS[hour_word]
        minutes = 0 if not minute_word else 30 if minute_word == "반" else int(minute_word[:-1])
        if before:
            minutes = -minutes
    else:
        offset = 0
        head = _EN_OFFSET.match(said)
        if head:
            phrase, count, direction = head.groups()
            step = 30 if phrase.startswith("half") else 15 if "quarter" in phrase else \
                {"fifteen": 15, "thirty": 30}.get(count, None) or int(count)
            offset = -step if (direction or phrase.split()[-1]) == "to" else step
            said = said[head.end():]
        match = _EN_HOUR.fullmatch(said)
        assert match, said
        hour_word, minute_word, am_pm, part = match.groups()
        hour = 12 if hour_word == "noon" else int(hour_word) if hour_word.isdigit() else _EN_NUMBERS[hour_word]
        assert hour_word == "noon" or am_pm or part, f"no am/pm or part of the day: {said}"
        minutes = offset + int(minute_word or 0)
        part = am_pm or part
    if _after_noon(part) and hour < 12:
        hour += 12
    total = hour * 60 + minutes
    return f"{total // 60:02d}:{total % 60:02d}"


_WEEKDAYS = {"Monday": 0, "Tuesday": 1, "Wednesday": 2, "월요일": 0, "화요일": 1, "수요일": 2}
_MONTHS = {"December": 12, "January": 1}


def said_date(opening: str, now: date) -> date:
    """The day the opening names, from ``now``: tomorrow, the day after, next Monday-Wednesday, a date."""
    if "the day after tomorrow" in opening or "모레" in opening:
        return now + timedelta(days=2)
    if "tomorrow" in opening or "내일" in opening:
        return now + timedelta(days=1)
    named = re.search(r"next (\w+day)|다음 주 (.요일)", opening)
    if named:
        weekday = _WEEKDAYS[named.group(1) or named.group(2)]
        return next(now + timedelta(days=n) for n in range(1, 8) if (now + timedelta(days=n)).weekday() == weekday)
    en, ko = re.search(r"on (December|January) (\d{1,2})\b", opening), re.search(r"(\d{1,2})월 (\d{1,2})일", opening)
    month, day = (_MONTHS[en.group(1)], int(en.group(2))) if en else (int(ko.group(1)), int(ko.group(2)))
    return date(now.year + (month < now.month), month, day)


DURATION_WORDS = {"en": {30: "30 minutes", 60: "an hour", 90: "an hour and a half", 120: "two hours"},
                  "ko": {30: "30분", 60: "1시간", 90: "1시간 반", 120: "2시간"}}


def test_the_same_seed_and_index_give_the_same_scenario_and_another_seed_another() -> None:
    assert drill_scenarios("train") == DRILL
    assert build_drill(17, seed=3) == build_drill(17, seed=3)
    other = drill_scenarios("train", seed=1)
    assert len({s.id for s in DRILL} | {s.id for s in other}) == 400
    assert sum(a.opening != b.opening for a, b in zip(DRILL, other)) >= 190


def test_each_scenario_is_a_train_create_request_in_either_language() -> None:
    assert len(DRILL) == 200 and len({s.id for s in DRILL}) == 200
    assert Counter(s.language for s in DRILL) == {"en": 100, "ko": 100}
    for s in DRILL:
        assert (s.template, s.split, s.mutation_after, s.user_script, s.consent_after) == (
            TEMPLATE, "train", 1, (), None)
        task = s.task
        assert f'"{task["title"]}"' in s.opening and s.opening.count(task["said"]) == 1, s.id
        assert DURATION_WORDS[s.language][task["duration"]] in s.opening, s.id
        (new,) = [e for e in s.expected["events"] if e["id"] is None]
        start, end = datetime.fromisoformat(new["start"]), datetime.fromisoformat(new["end"])
        assert (new["title"], start.date().isoformat(), start.strftime("%H:%M")) == (
            task["title"], task["date"], task["start_time"]), s.id
        assert end - start == timedelta(minutes=task["duration"]) and end.date() <= start.date() + timedelta(days=1)
        # the day holds nothing else, so creating at the asked time is the whole task
        assert all(datetime.fromisoformat(e["start"]).date() != start.date() for e in s.initial["events"]), s.id
        assert 1 <= len(s.initial["events"]) + 1 == len(s.expected["events"]) <= 3, s.id


def test_each_opening_names_the_day_the_scenario_expects() -> None:
    for s in DRILL:
        assert said_date(s.opening, s.now_datetime().date()).isoformat() == s.task["date"], s.id


def test_known_phrasings_mean_the_expected_time() -> None:
    sample = DRILL + drill_scenarios("train", seed=1) + drill_scenarios("train", seed=2)
    known = [s for s in sample if s.task["said"] in MEANS]
    for s in known:
        assert s.task["start_time"] == MEANS[s.task["said"]], (s.id, s.task["said"])
    # the table really covers a good part of the sample, of every form family, not just noon
    assert len([s for s in known if s.task["start_time"] != "12:00"]) >= 60, len(known)
    assert len({s.task["form"] for s in known}) == len(FAMILIES)


def test_every_opening_says_the_expected_hour_and_minute_in_a_recognized_form() -> None:
    for s in DRILL:
        assert read_time(s.task["said"], s.language) == s.task["start_time"], (s.id, s.task["said"])
    # the reader is no rubber stamp: it reads the table's phrasings right, and a wrong hour wrong
    for said, hhmm in MEANS.items():
        assert read_time(said, "ko" if re.search("[가-힣]", said) else "en") == hhmm, said
    assert read_time("오후 4시", "ko") != "15:00" and read_time("4pm", "en") != "15:00"


def test_all_form_families_occur_in_200() -> None:
    families = Counter(s.task["form"] for s in DRILL)
    assert set(families) == set(FAMILIES) and len(FAMILIES) == 14
    assert min(families.values()) >= 12, families
    surface = {  # ways of saying it, by hand: each shows up at least this often in 200
        "정오": (r"^정오$", 10), "오전/오후": (r"^(오전|오후) ", 20), "새벽": (r"^새벽 ", 1), "아침": (r"^아침 ", 3),
        "낮": (r"^낮 ", 3), "저녁": (r"^저녁 ", 3), "밤": (r"^밤 ", 3),
        "Korean numerals": (r"(한|두|세|네|다섯|여섯|일곱|여덟|아홉|열|열한|열두) ?시", 15), "반": (r"시 반", 5),
        "30분": (r"시 30분", 3), "15분": (r"시 15분$", 2), "45분": (r"시 45분", 2), "15분 전": (r"15분 전$", 10),
        "15시": (r"^1\d시|^2[0-2]시", 10), "HH:MM": (r"^\d{2}:\d{2}$", 25),
        "am/pm": (r"^\d{1,2}(:\d{2})? ?(am|pm|AM|PM|a\.m\.|p\.m\.)$", 12), "p.m./a.m.": (r"[ap]\.m\.", 1),
        "noon": (r"^(noon|midday|12 noon)$", 10), "in the morning": (r"in the morning$", 5),
        "in the afternoon": (r"in the afternoon$", 5), "in the evening": (r"in the evening$", 3),
        "at night": (r"at night$", 1), "o'clock": (r"o'clock", 1), "half past": (r"^half past ", 10),
        "quarter past": (r"quarter past ", 3), "quarter to": (r"quarter to ", 3),
        "minutes past": (r"minutes past ", 3), "minutes to": (r"minutes to ", 2),
    }
    for name, (pattern, least) in surface.items():
        seen = sum(bool(re.search(pattern, s.task["said"])) for s in DRILL)
        assert seen >= least, (name, seen)
    assert len({s.task["said"] for s in DRILL}) >= 120  # many phrasings, not a fixed list
    assert len({s.task["start_time"] for s in DRILL}) >= 40  # many times, not a fixed list


def test_hours_are_6_to_22_and_minutes_quarters() -> None:
    for s in DRILL:
        hour, minute = map(int, s.task["start_time"].split(":"))
        assert 6 <= hour <= 22 and minute in (0, 15, 30, 45), s.id
    assert len({s.task["start_time"][:2] for s in DRILL}) == 17
    assert {s.task["start_time"][3:] for s in DRILL} == {"00", "15", "30", "45"}


def test_no_drill_opening_is_a_probe_opening() -> None:
    _, probe = load_openings()
    probe_openings = {o.opening for o in probe}
    for seed in range(5):
        assert not probe_openings & {s.opening for s in drill_scenarios("train", seed=seed)}, seed


def test_the_drill_is_served_only_when_named_and_only_for_train() -> None:
    for split in ("train", "dev", "test", "all", None):  # the default set never holds it
        assert all(s.template != TEMPLATE for s in SUITE.scenarios(split=split, per_template=2)), split
    assert TEMPLATE not in SUITE.templates
    for split in ("dev", "test"):
        with pytest.raises(ValueError, match="training data only: it has no .* scenarios"):
            SUITE.scenarios(split=split, templates=[TEMPLATE])
    for split in ("train", "all", None):
        assert SUITE.scenarios(split=split, templates=[TEMPLATE]) == DRILL, split
    # what expert iteration asks for: N of them, seeded
    served = SUITE.scenarios(split="train", per_template=7, seed=3, templates=[TEMPLATE])
    assert served == [build_drill(i, seed=3) for i in range(7)]
    mixed = SUITE.scenarios(split="train", templates=["no_tool", TEMPLATE], per_template=4)
    assert Counter(s.template for s in mixed) == {"no_tool": 2, TEMPLATE: 4}  # no_tool: half, as ever
    with pytest.raises(ValueError, match="time_drill"):
        SUITE.scenarios(split="train", templates=["no_such_template", TEMPLATE])


def test_the_oracle_solves_all_200_through_the_eval_cli(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    assert cli.main(["--policy", "oracle", "--split", "train", "--templates", TEMPLATE, "--per-template", "200",
                     "--no-progress", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (row,) = [r for r in summary["rows"] if r["group"] == TEMPLATE]
    assert (row["episodes"], row["task_success"], row["mean_reward"], row["mean_tool_calls"]) == (200, 100.0, 1.0, 1.0)
    assert (row["policy_compliance"], row["incorrect_action"], row["false_claims"]) == (100.0, 0.0, 0.0)


def test_asking_the_cli_for_the_drill_in_dev_is_one_clear_error(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--policy", "oracle", "--split", "dev", "--templates", TEMPLATE, "--no-progress",
                     "--out", str(tmp_path / "dev")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "time_drill" in err and "training data only" in err and "--split train" in err
