"""Reading the agent's words cheaply and deterministically: times, dates, events named, script.

The verifier uses these to check a reply against what happened (``reply`` reward component) and
to see which event a question named. No model judges anything; the forms are the ones the
scenario's languages use: ``15:00``, ``3 pm``/``3:30pm``, ``오후 3시``/``오후 3시 반``/``15시``.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")
_LATIN = re.compile(r"[A-Za-z]")
_AMPM = re.compile(r"\b(1[0-2]|0?[1-9])(?:[:.]([0-5]\d))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
_KO_TIME = re.compile(r"(오전|오후|낮|저녁|밤|아침|새벽)?\s*(\d{1,2})\s*시(?:\s*(반)|\s*(\d{1,2})\s*분)?")
_CLOCK = re.compile(r"(?<![\d:])([01]?\d|2[0-3]):([0-5]\d)(?![\d:])")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
           "october", "november", "december")
_WEEKDAYS_EN = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAYS_KO = ("월요일", "화요일", "수요일", "목요일", "금요일", "토요일", "일요일")
_AFTERNOON_KO = ("오후", "저녁", "밤")


def times_mentioned(text: str) -> list[set[int]]:
    """Every time of day the text states, each as its possible minutes after midnight (a bare
    Korean "3시" may be 03:00 or 15:00). Dates such as 2026-12-05 are not times."""
    found: list[set[int]] = []
    rest = text
    for match in _AMPM.finditer(text):
        hour, minute = int(match.group(1)) % 12, int(match.group(2) or 0)
        found.append({(hour + (12 if match.group(3).lower() == "p" else 0)) * 60 + minute})
    rest = _AMPM.sub(" ", rest)
    for match in _KO_TIME.finditer(rest):
        part, hour = match.group(1), int(match.group(2))
        minute = 30 if match.group(3) else int(match.group(4) or 0)
        if hour > 24 or minute > 59:
            continue
        if part in _AFTERNOON_KO and hour < 12:
            options = {hour + 12}
        elif part in ("오전", "아침", "새벽") or hour >= 12:
            options = {hour % 24}
        elif part == "낮":
            options = {hour if hour >= 11 else hour + 12}
        else:
            options = {hour, hour + 12} if hour < 12 else {hour}
        found.append({h * 60 + minute for h in options})
    rest = _KO_TIME.sub(" ", rest)
    for match in _CLOCK.finditer(rest):
        found.append({int(match.group(1)) * 60 + int(match.group(2))})
    return found


def minutes_of(hhmm: str) -> int:
    hour, minute = hhmm.split(":")[:2]
    return int(hour) * 60 + int(minute)


def states_time(text: str, hhmm: str) -> bool:
    wanted = minutes_of(hhmm)
    return any(wanted in options for options in times_mentioned(text))


def states_date(text: str, day: date, today: date | None = None) -> bool:
    """The text names ``day``: ISO, "December 5"/"Dec 5"/"5 December", "12월 5일", "12/5", its
    weekday, or today/tomorrow/the day after tomorrow (오늘/내일/모레) relative to ``today``."""
    low = text.casefold()
    month = _MONTHS[day.month - 1]
    patterns = [
        re.escape(day.isoformat()),
        rf"\b(?:{month}|{month[:3]})\.?\s+0?{day.day}(?!\d)",
        rf"(?<!\d)0?{day.day}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{month}|{month[:3]})\b",
        rf"(?<!\d)0?{day.month}\s*월\s*0?{day.day}\s*일",
        rf"(?<![\d/]){day.month}/{day.day}(?![\d/])",
        rf"\b{_WEEKDAYS_EN[day.weekday()]}\b|\b{_WEEKDAYS_EN[day.weekday()][:3]}\b",
        _WEEKDAYS_KO[day.weekday()],
    ]
    if today is not None:
        offset = (day - today).days
        patterns += {0: [r"\btoday\b", "오늘"], 1: [r"\btomorrow\b", "내일"],
                     2: [r"\bday after tomorrow\b", "모레"]}.get(offset, [])
    return any(re.search(p, low) for p in patterns)


def dates_mentioned(text: str, today: date) -> set[date]:
    """The calendar days the text names: ISO dates, "12월 5일", "December 5"/"Dec 5", and
    today/tomorrow/the day after tomorrow (오늘/내일/모레). A month without a year is taken in
    the year that puts it nearest to ``today``."""
    low = text.casefold()
    found: set[date] = set()

    def add(month: int, day: int) -> None:
        options = []
        for year in (today.year - 1, today.year, today.year + 1):
            try:
                options.append(date(year, month, day))
            except ValueError:
                continue
        if options:
            found.add(min(options, key=lambda d: abs((d - today).days)))

    for match in re.finditer(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)", low):
        try:
            found.add(date(int(match.group(1)), int(match.group(2)), int(match.group(3))))
        except ValueError:
            continue
    for match in re.finditer(r"(?<!\d)(\d{1,2})\s*월\s*(\d{1,2})\s*일", low):
        add(int(match.group(1)), int(match.group(2)))
    for number, month in enumerate(_MONTHS, start=1):
        for match in re.finditer(rf"\b(?:{month}|{month[:3]})\.?\s+(\d{{1,2}})(?!\d)", low):
            add(number, int(match.group(1)))
    relative = {"day after tomorrow": 2, "모레": 2, "tomorrow": 1, "내일": 1, "today": 0, "오늘": 0}
    rest = low
    for word, offset in relative.items():
        if word in rest:
            found.add(today + timedelta(days=offset))
            rest = rest.replace(word, " ")
    return found


def in_language(text: str, language: str) -> bool:
    """Script detection: a Korean reply is mostly Hangul letters, an English one has none."""
    hangul, latin = len(_HANGUL.findall(text)), len(_LATIN.findall(text))
    if hangul + latin == 0:
        return False
    if language == "ko":
        return hangul >= latin
    return hangul == 0


def names_event_id(text: str, event_id: int) -> bool:
    """The text names event ``event_id``: "#3", "id 3", "ID: 3", "event 3", "3번"."""
    n = str(int(event_id))
    return re.search(rf"#\s*{n}(?!\d)|\b(?:id|event)\s*[:#]?\s*{n}(?!\d)|(?<!\d){n}\s*번", text, re.IGNORECASE) is not None


def fold(text: str) -> str:
    return " ".join(text.split()).casefold()


def names_title_and_time(text: str, title: str, hhmm: str) -> bool:
    """The text names an event by its title and its start time (in any form above)."""
    squeezed = fold(text).replace(" ", "")
    return fold(title).replace(" ", "") in squeezed and states_time(text, hhmm)


# Words that say what a destructive call will do, so that "Shall I keep #3?" is no consent to delete it.
_ACTION_WORDS = {
    "delete_event": (r"delet", r"remov", r"cancel", r"get rid", r"drop", r"eras", r"clear", r"삭제", r"지울", r"지워",
                     r"취소", r"빼", r"없앨", r"없애"),
    "update_event": (r"move", r"chang", r"reschedul", r"push", r"shift", r"updat", r"set", r"mak", r"edit", r"modif",
                     r"옮", r"바꿀", r"바꿔", r"변경", r"미룰", r"미뤄", r"당길", r"당겨", r"수정", r"조정", r"로 할"),
}


def names_action(text: str, tool: str) -> bool:
    """The text says the kind of change the call makes (any tool not listed needs no word)."""
    words = _ACTION_WORDS.get(tool)
    return words is None or re.search("|".join(words), text, re.IGNORECASE) is not None


# -- what a reply says was done ----------------------------------------------------------------

# The change tools and the kind of change each reports (the receipt's entries, the verifier's
# ``changes_made``): one table, so a claim's kind and a call's kind are the same words.
CHANGE_TOOL_KINDS = {"create_event": "created", "update_event": "moved", "delete_event": "deleted"}
CHANGE_KINDS = tuple(CHANGE_TOOL_KINDS.values())
DONE = "done"  # a claim that something was done, of no named kind ("Done: …", "updated", "변경했어요")
# Words that report a change as done (past or perfect forms, not "shall I delete"), per kind.
_DONE_WORDS = {
    "created": (r"\bcreated\b", r"\badded\b", r"\bscheduled\b", r"\bbooked\b", r"\bput (?:it )?(?:on|in)\b",
                r"추가했", r"추가해\s*(?:드렸|놨|두었)", r"추가(?:됐|되었)", r"등록했", r"등록(?:됐|되었)", r"잡았",
                r"잡아\s*(?:드렸|놨|두었)", r"잡혔", r"만들었", r"생성했"),
    "moved": (r"\bmoved\b", r"\brescheduled\b", r"\bshifted\b", r"\bpushed\b",
              r"옮겼", r"옮겨\s*(?:드렸|놨|두었)", r"미뤘", r"당겼"),
    "deleted": (r"\bdeleted\b", r"\bremoved\b", r"\bcancell?ed\b", r"\bcleared\b", r"\berased\b",
                r"삭제했", r"삭제해\s*(?:드렸|놨)", r"삭제(?:됐|되었)", r"지웠", r"취소했", r"취소(?:됐|되었)", r"없앴"),
}
_CHANGE_STEMS = r"(?:chang|delet|creat|mov|add|remov|cancel|book|schedul|updat|reschedul|touch|modif)\w*"
# A change of no named kind: "Done: …", "Your calendar is updated", "변경했어요", "완료했어요".
_DONE_ANY = (r"^\s*(?:done|all set)\b", r"\bchanged\b", r"\bupdated\b", r"완료(?:했|됐|되었)", r"^\s*완료",
             r"변경했", r"변경(?:됐|되었)", r"바꿨", r"바꾸었", r"바꿔\s*(?:드렸|놨)", r"수정했", r"수정(?:됐|되었)", r"조정했")
# Words that say a change was not done: "nothing was changed", "did not delete", "삭제하지 않았어요".
_DENIAL = re.compile(
    r"\bnothing\b[^.!?\n]{0,20}\b(?:changed|deleted|created|moved|added|removed)\b|\bno changes?\b"
    rf"|(?:\bnot|n't|\bnever)\s+(?:been\s+|yet\s+|actually\s+)?{_CHANGE_STEMS}"
    r"|(?:변경|삭제|추가|수정|등록|취소|이동)(?:을|는|를)?\s*(?:하지|되지)\s*않"
    r"|아무것도[^.!?\n]{0,20}(?:않|없)|바뀐\s*(?:것|건|게)\s*없|변경\s*(?:사항|된 것|된 건)?\s*없"
    r"|안\s*(?:바꿨|지웠|옮겼|했어요)",
    re.IGNORECASE,
)
# Any negated word ("was not deleted", "couldn't add"): a claim word inside one is no claim.
_NEGATED = re.compile(r"(?:\bnot|n't|\bnever)\s+(?:been\s+|yet\s+|actually\s+)?\w+", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?。\n]+[.!?。]?")


def _statements(text: str) -> list[str]:
    """The text's sentences, without the questions ("Shall I delete it?" reports nothing)."""
    return [s for s in (m.group(0).strip() for m in _SENTENCE.finditer(text)) if s and not s.endswith(("?", "？"))]


def claimed_changes(text: str) -> set[str]:
    """The kinds of change (``CHANGE_KINDS``) the text reports as done: "I deleted …",
    "삭제했어요", "has been moved"; ``DONE`` for a bare "Done: …" / "완료했어요". Questions and
    negated forms ("was not deleted", "삭제하지 않았어요") claim nothing."""
    found: set[str] = set()
    for sentence in _statements(text):
        affirmed = _NEGATED.sub(" ", _DENIAL.sub(" ", sentence))
        for kind, words in (*_DONE_WORDS.items(), (DONE, _DONE_ANY)):
            if re.search("|".join(words), affirmed, re.IGNORECASE):
                found.add(kind)
    return found


def denies_changes(text: str) -> bool:
    """The text says that nothing was changed ("Nothing was changed", "바뀐 것 없어요",
    "삭제하지 않았어요")."""
    return any(_DENIAL.search(sentence) and not claimed_changes(sentence) for sentence in _statements(text))
