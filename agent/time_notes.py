"""Time notes: each clock time a user says in words reaches the model written the 24-hour way.

Why: a 135M model copies a written ``15:00`` into its call nearly always, but turns "오후 3시",
"3pm" or "half past three in the afternoon" into its favourite afternoon hour (issue 32's time
probe: 22.5 % of 40 openings booked at the asked time). The conversion is arithmetic a regular
expression does without error, so the runtime does it, as the date line does the calendar
arithmetic for days.

How it is shown was measured on the probe with the shipped demo adapter (README): English keeps
the words and gets ``(HH:MM)`` after them (``at 3pm (15:00)``: 18 of 20 exact). In Korean anything
inserted into the sentence threw the model (``오후 3시(15:00)에``: an event for only 10 of 20
openings, against 16 without), so there the words are replaced by ``HH:MM`` (``내일 15:00에``: 19
created, 13 exact).

Only times that say which half of the day they are in are rewritten: ``오후 3시``, ``저녁 7시``,
``15시``, ``3pm``, ``noon``, ``seven in the evening``. A bare ``3시`` or ``at 3`` is left as it is,
since either reading may be meant, and so is a time already written ``HH:MM``. It happens once,
when the message enters the conversation (``agent.prompt.stamp_user_text``), and the message is
stored so, so the history and the training rows hold what the model saw.
"""

from __future__ import annotations

import re

_KO_NUMBERS = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10,
               "열한": 11, "열두": 12}
_EN_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
               "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}

# -- Korean ----------------------------------------------------------------------------------------

_KO_HOUR = "|".join(sorted(_KO_NUMBERS, key=len, reverse=True))
_KO = re.compile(
    r"(?:(?P<part>오전|오후|아침|낮|저녁|밤|새벽)\s*)?"
    rf"(?P<hour>\d{{1,2}}|{_KO_HOUR})\s*시"
    r"(?:\s*(?P<half>반)|\s*(?P<minute>\d{1,2})\s*분(?P<before>\s*전)?)?"
    r"(?!\s*간)"  # "3시간" is a length, not a time
)
_KO_WORDS = re.compile(r"정오|자정")


def _ko_hour(part: str | None, hour: int) -> int | None:
    """The 24-hour hour of ``part`` (오후, 저녁, ...) and a said hour 1-12; None if not a clock time."""
    if part is None:
        return hour if 13 <= hour <= 24 else None  # 15시: already 24-hour; 3시: either half
    if hour > 12:
        return hour if part in ("오후", "저녁", "밤", "낮") else None  # 오후 15시: said twice, fine
    if part in ("오전", "아침", "새벽"):
        return 0 if hour == 12 else hour
    if part == "낮":  # 낮 12시 is noon, 낮 2시 is 14:00, 낮 11시 is 11:00
        return hour if hour >= 11 else hour + 12
    if part == "밤" and hour <= 4:  # 밤 1시 is after midnight; 밤 12시 is midnight
        return hour
    if part == "밤" and hour == 12:
        return 0
    return 12 if hour == 12 else hour + 12  # 오후, 저녁, 밤


def _ko_note(match: re.Match[str]) -> str | None:
    said = match["hour"]
    hour = _ko_hour(match["part"], int(said) if said.isdigit() else _KO_NUMBERS[said])
    if hour is None:
        return None
    minute = 30 if match["half"] else int(match["minute"] or 0)
    if minute > 59:
        return None
    if match["before"]:  # 4시 15분 전: 3:45
        if minute == 0:
            return None
        hour, minute = (hour - 1) % 24, 60 - minute
    return f"{hour % 24:02d}:{minute:02d}"


# -- English ---------------------------------------------------------------------------------------

_EN_HOUR = "|".join(_EN_NUMBERS)
_EN_PART = r"in\s+the\s+(?P<part>morning|afternoon|evening)|at\s+(?P<night>night)"
_EN_MERIDIEM = r"(?:(?P<meridiem>[ap])\.m\.|(?P<meridiem2>[ap])\s?m\b)"  # p.m. with its dot, pm, PM
_EN_AFTER = ("at", "by", "from", "until", "till", "til", "to", "around", "about", "before", "after", "and")
_EN = re.compile(
    r"(?<![\w:])"
    r"(?:(?P<lead>(?:a\s+)?quarter|half|\d{1,2}\s+minutes?)\s+(?P<rel>past|after|to)\s+)?"
    rf"(?P<hour>\d{{1,2}}|{_EN_HOUR}|noon|midday|midnight)"
    r"(?::(?P<minute>\d{2}))?"
    rf"(?:\s*o'clock)?"
    rf"(?:\s*{_EN_MERIDIEM}|\s+(?:{_EN_PART}))?",
    re.IGNORECASE,
)


def _en_note(match: re.Match[str]) -> str | None:
    said = match["hour"].lower()
    named = said in ("noon", "midday", "midnight")
    if named:
        hour = 0 if said == "midnight" else 12
    else:
        hour = int(said) if said.isdigit() else _EN_NUMBERS[said]
    minute = int(match["minute"] or 0)
    meridiem = (match["meridiem"] or match["meridiem2"] or "").lower()
    part = (match["part"] or match["night"] or "").lower()
    if not named and not said.isdigit() and not match["lead"] and "o'clock" not in match.group().lower():
        before = match.string[:match.start()].split()
        if not before or before[-1].lower() not in _EN_AFTER:
            return None  # "I have one in the evening" is an event, not a time
    if not named:
        if meridiem or part:
            if hour > 12 or hour == 0:
                return None  # "15pm" is not a time
            evening = meridiem == "p" or part in ("afternoon", "evening", "night")
            if part == "night" and hour <= 4:
                evening = False  # "2 at night" is after midnight
            hour = (hour % 12) + (12 if evening else 0)
        elif match["minute"] and 13 <= hour <= 23 and not match["lead"]:
            return None  # 15:00 is already written the way the model copies
        elif not 13 <= hour <= 23:
            return None  # "at 3", "3:30": either half of the day
        elif not match["lead"]:
            return None  # "15" alone is a number, not a time
    elif meridiem or match["minute"]:
        return None  # "noon pm" and "noon:30" are not times
    if minute > 59:
        return None
    if match["lead"]:
        if match["minute"]:
            return None
        lead = match["lead"].lower()
        offset = 30 if lead == "half" else 15 if "quarter" in lead else int(lead.split()[0])
        if offset >= 60 or (lead == "half" and match["rel"].lower() == "to"):
            return None
        total = hour * 60 + (offset if match["rel"].lower() in ("past", "after") else -offset)
        hour, minute = divmod(total % (24 * 60), 60)
    return f"{hour:02d}:{minute:02d}"


# -- both ------------------------------------------------------------------------------------------


def note_times(text: str) -> str:
    """``text`` as the model is shown it: English clock times with ``(HH:MM)`` after them, Korean
    ones replaced by ``HH:MM`` (see the module's docstring for why they differ)."""
    found: list[tuple[int, int, str]] = []
    for match in _KO_WORDS.finditer(text):
        found.append((match.start(), match.end(), "12:00" if match.group() == "정오" else "00:00"))
    for pattern, note in ((_KO, _ko_note), (_EN, _en_note)):
        for match in pattern.finditer(text):
            hhmm = note(match)
            if hhmm is not None:
                found.append((match.start(), match.end(), hhmm))
    out, at = [], 0
    for start, end, hhmm in sorted(found):
        if start < at:
            continue  # overlapping readings: the first one stands
        end = start + len(text[start:end].rstrip())
        out.append(text[at:start])
        said = text[start:end]
        at = end
        if "\uac00" <= said[-1] <= "\ud7a3":
            out.append(hhmm)
        elif text[end:].lstrip().startswith(f"({hhmm})"):  # noted already (a message re-sent)
            out.append(said)
        else:
            out.append(f"{said} ({hhmm})")
    out.append(text[at:])
    return "".join(out)
