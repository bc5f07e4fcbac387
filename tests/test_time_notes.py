"""Time notes (tools.calendar.time_notes): a clock time said in words reaches the model as HH:MM."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from agent.prompt import PromptSettings, stamp_user_text
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.time_notes import note_times

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("text", "noted"), [
    ("내일 오후 3시에 치과 예약 추가해줘", "내일 15:00에 치과 예약 추가해줘"),
    ("저녁 7시", "19:00"),
    ("새벽 5시", "05:00"),
    ("낮 12시", "12:00"),
    ("낮 2시", "14:00"),
    ("밤 9시", "21:00"),
    ("오후 2시 반에", "14:30에"),
    ("오전 11시 30분에", "11:30에"),
    ("15시에", "15:00에"),
    ("16시 30분", "16:30"),
    ("오후 세시 반", "15:30"),
    ("아침 일곱 시 반", "07:30"),
    ("오후 열두 시", "12:00"),
    ("정오에", "12:00에"),
    ("at 3pm.", "at 3pm (15:00)."),
    ("at 10 AM.", "at 10 AM (10:00)."),
    ("at 1:00 p.m. sharp", "at 1:00 p.m. (13:00) sharp"),
    ("at 9:45 AM", "at 9:45 AM (09:45)"),
    ("at noon", "at noon (12:00)"),
    ("at 3 in the afternoon", "at 3 in the afternoon (15:00)"),
    ("at eight in the morning", "at eight in the morning (08:00)"),
    ("7 o'clock in the evening", "7 o'clock in the evening (19:00)"),
    ("half past three in the afternoon", "half past three in the afternoon (15:30)"),
    ("a quarter past nine in the morning", "a quarter past nine in the morning (09:15)"),
    ("quarter to 5 pm", "quarter to 5 pm (16:45)"),
    ("a quarter to noon", "a quarter to noon (11:45)"),
    ("15 minutes past two in the afternoon", "15 minutes past two in the afternoon (14:15)"),
    ("from 2pm to 4pm", "from 2pm (14:00) to 4pm (16:00)"),
    ("10am-11am", "10am (10:00)-11am (11:00)"),
    ("at 3.10pm", "at 3.10pm (15:10)"),
    ("ten past 3pm", "ten past 3pm (15:10)"),
    ("10 minutes to 4pm", "10 minutes to 4pm (15:50)"),
    # a number before "to" in digits is a range's start or a date, not minutes
    ("from 2 to 4pm", "from 2 to 4pm (16:00)"),
    ("10 past 4pm", "10 past 4pm (16:10)"),
    ('Push "Budget meeting" on December 12 to 4pm, please.',
     'Push "Budget meeting" on December 12 to 4pm (16:00), please.'),
    ("December 12 after 4pm", "December 12 after 4pm"),  # "after 4pm" is left as said, and 12 is a day
    ("twenty to four in the afternoon", "twenty to four in the afternoon (15:40)"),
    ("오후 3시부터 5시까지", "15:00부터 17:00까지"),  # a range's end keeps the start's half of the day
    ("저녁 6시~8시", "18:00~20:00"),
    ("오전 11시부터 1시까지", "11:00부터 13:00까지"),
    ("정오 12시에", "12:00에"),
])
def test_a_time_that_says_its_half_of_the_day_is_shown_as_hh_mm(text: str, noted: str) -> None:
    """English keeps its words, with (HH:MM) after them; Korean words are replaced by HH:MM."""
    assert note_times(text) == noted




@pytest.mark.parametrize("text", [
    "3시에 만나",  # either half of the day
    "at 3 for two hours",
    "3시간 회의",  # a length
    "세 시간 동안",
    "at 15:00",  # already the way the model copies
    "17:30까지",
    "I have one in the evening",  # an event, not a time
    "in 3 minutes",
    "call me at 3:30",
    "15pm",
    "오전 13시",
    "네, 좋아요",
    # midnight and the hours after it: people put them on the day before, so HH:MM would move them
    "오늘 밤 12시에", "내일 자정까지", "오늘 밤 1시", "오전 12시", "저녁 12시", "at midnight", "at 12am", "at 2 at night",
    "ten minutes to midnight",
    "오후 5시 30분 전에 와",  # "before 17:30" or "15 minutes to 5"?
    "24시 편의점",  # a shop open all day
    "between 2 and 3",
    "",
])
def test_a_time_without_its_half_of_the_day_or_already_hh_mm_is_left_alone(text: str) -> None:
    assert note_times(text) == text


@pytest.mark.parametrize(("text", "noted"), [
    ('Add "3pm prep" tomorrow at 2pm', 'Add "3pm prep" tomorrow at 2pm (14:00)'),
    ('“Noon run” at noon', '“Noon run” at noon (12:00)'),
    ('"오후 3시 회의" 일정 오후 4시에 넣어줘', '"오후 3시 회의" 일정 16:00에 넣어줘'),
    ('「정오 미팅」 정오에', '「정오 미팅」 12:00에'),
])
def test_a_time_inside_a_quoted_title_is_kept_as_the_user_named_it(text: str, noted: str) -> None:
    """The title is the event's name: "3pm (15:00) prep" would be created under another name."""
    assert note_times(text) == noted


def test_a_noted_message_is_not_noted_twice() -> None:
    once = note_times("내일 오후 3시에, then at 4 pm")
    assert once == "내일 15:00에, then at 4 pm (16:00)"
    assert note_times(once) == once


def test_every_time_probe_opening_that_converts_gets_the_probes_own_answer() -> None:
    """The probe's 40 openings (tools/calendar/lab/data/time_probe.json) carry the asked time; the note
    must be that time for every opening whose time is said in words, and nothing else is noted."""
    data = json.loads((ROOT / "tools/calendar/lab/data/time_probe.json").read_text(encoding="utf-8"))
    openings = next(v for v in data.values() if isinstance(v, list))
    assert len(openings) == 40
    for item in openings:
        noted = note_times(item["opening"])
        if item["said"] == item["time"]:  # "15:00", "17:30": already HH:MM
            assert noted == item["opening"]
        elif item["language"] == "en":
            assert noted == item["opening"].replace(item["said"], f"{item['said']} ({item['time']})"), noted
        else:
            assert noted == item["opening"].replace(item["said"], item["time"]), noted


def test_the_stamp_notes_times_only_when_asked() -> None:
    now = datetime(2026, 12, 3, 9, 5, tzinfo=ZoneInfo("Asia/Seoul"))
    assert stamp_user_text(now, "Asia/Seoul", "내일 오후 3시에", language=CALENDAR_LANGUAGE) == "[09:05] 내일 오후 3시에"
    assert stamp_user_text(now, "Asia/Seoul", "내일 오후 3시에", time_notes=True, language=CALENDAR_LANGUAGE) == "[09:05] 내일 15:00에"


def test_the_runtime_stores_and_shows_the_noted_message_when_the_setting_is_on(tmp_path: Path) -> None:
    from agent.app import build_runtime
    from agent.approval import DenyAll
    from agent.backends.scripted import ScriptedBackend
    from agent.config import load_settings

    said = "내일 오후 3시에 치과 예약 추가해줘"
    shown = {}
    for on in (False, True):
        backend = ScriptedBackend(["Which day?"])
        settings = load_settings({"data_dir": str(tmp_path / str(on))}, environ={"AGENT_TIME_NOTES": str(on).lower()})
        runtime = build_runtime(settings, backend)
        runtime.handle("repl", said, DenyAll())
        history = runtime.sessions.history(runtime.sessions.current("repl"))
        runtime.close()
        shown[on] = (backend.calls[0][-1]["content"], history[0]["content"])
    assert shown[False][0].endswith("] " + said) and shown[False][1] == shown[False][0]
    assert shown[True][0].endswith("] 내일 15:00에 치과 예약 추가해줘") and shown[True][1] == shown[True][0]


def test_an_eval_run_with_time_notes_records_the_noted_opening(tmp_path: Path) -> None:
    from agent.backends.scripted import ScriptedBackend
    from agent.eval.runner import RunOptions, episode_path, run_eval
    from tools.calendar.lab.eval_suite import load_eval_suite

    suite = load_eval_suite()
    [scenario] = suite.scenarios(templates=["time_probe"], per_template=1, split="test")
    assert "오후 3시" in scenario.opening
    [record] = run_eval(suite, [scenario], lambda s, k: ScriptedBackend(["Done."]),
                        RunOptions(out_dir=tmp_path, progress=False, prompt_settings=PromptSettings(time_notes=True)))
    saved = json.loads(episode_path(tmp_path, record.key).read_text(encoding="utf-8"))
    opening = next(m["content"] for m in saved["messages"] if m["role"] == "user")
    assert "내일 15:00에" in opening and "오후" not in opening
