"""The calendar's users write Korean and English: what the runtime's prompt gets for them.

The runtime writes its prompt in English and knows no other language (``agent.language``); this
module is the calendar's ``Language``: each rule of the ``full`` system prompt again in Korean,
the days-ahead list with Korean and English weekdays, the time and date notes on a user's message
(``tools.calendar.time_notes``, ``tools.calendar.date_notes``), and the Korean yes-words and day
words of the terminal. The texts are what the runtime wrote itself before it was domain-free,
byte for byte: every trained adapter and recorded run saw them so.
"""

from __future__ import annotations

from datetime import datetime
from typing import Mapping

from agent.language import DateLabels, Language
from agent.prompt import STAMP_EXAMPLE
from tools.calendar.date_notes import note_days
from tools.calendar.time_notes import note_times

_WEEKDAYS_KO = ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일")

# Both languages on each day: the prompt is rendered before the user writes, and a small model
# finds 수 in the line that says 다음 주 as it finds Wed in the line that says next week.
DATE_LABELS = DateLabels(
    weekdays=("월 Mon", "화 Tue", "수 Wed", "목 Thu", "금 Fri", "토 Sat", "일 Sun"),
    weeks=("이번 주 this week", "다음 주 next week", "다다음 주 week after next"),
    near=("내일 tomorrow", "모레 day after tomorrow"),
)


def companions(local: datetime, tz: str) -> Mapping[str, str]:
    """The ``full`` style's rules in Korean (keys: ``agent.prompt.FULL_RULES``), since the users
    write in both languages."""
    return {
        "today": f"오늘: {local.year}년 {local.month}월 {local.day}일 {_WEEKDAYS_KO[local.weekday()]} ({tz}).",
        "stamp": f"사용자 메시지 앞의 {STAMP_EXAMPLE} 같은 표시는 그 메시지를 보낸 현지 시각입니다.",
        "missing": "필요한 정보가 없으면 추측하지 말고 사용자에게 물어보세요.",
        "confirm": "삭제하거나 변경하기 전에 반드시 사용자에게 확인하세요.",
        "brief": "답변은 짧게 하세요.",
    }


def annotate(text: str, local_now: datetime, time_notes: bool, date_notes: bool) -> str:
    """A user's message as the model is shown it: days named relative to today as dates
    (``date_notes``), clock times said in words the 24-hour way (``time_notes``)."""
    if date_notes:  # first: an after-midnight time read as words ("내일 새벽 1시") keeps its day unnoted
        text = note_days(text, local_now)
    if time_notes:
        text = note_times(text)
    return text


CALENDAR_LANGUAGE = Language(
    annotate=annotate,
    companions=companions,
    date_labels=DATE_LABELS,
    yes_words=frozenset({"y", "yes", "예", "네", "ㅇ"}),
    day_words="today (default), tomorrow, 내일, 모레, a weekday (friday, fri, 금요일) or YYYY-MM-DD",
)
