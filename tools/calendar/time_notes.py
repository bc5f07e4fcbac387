"""Time notes: each clock time a user says in words reaches the model written the 24-hour way.

Why: a 135M model copies a written ``15:00`` into its call nearly always, but turns "오후 3시",
"3pm" or "half past three in the afternoon" into its favourite afternoon hour (the time
probe: 22.5 % of 40 openings booked at the asked time). The conversion is arithmetic a regular
expression does without error, so the runtime does it, as the date line does the calendar
arithmetic for days.

How it is shown was measured on the probe with the shipped demo adapter (docs/training.md): English keeps
the words and gets ``(HH:MM)`` after them (``at 3pm (15:00)``: 18 of 20 exact). In Korean anything
inserted into the sentence threw the model (``오후 3시(15:00)에``: an event for only 10 of 20
openings, against 16 without), so there the words are replaced by ``HH:MM`` (``내일 15:00에``: 19
created, 13 exact).

Only times that say which half of the day they are in are rewritten: ``오후 3시``, ``저녁 7시``,
``15시``, ``3pm``, ``noon``, ``seven in the evening``. A bare ``3시`` or ``at 3`` is left as it is,
since either reading may be meant, and so is a time already written ``HH:MM`` and anything inside
double quotes, a title the user chose ("3pm prep", as date notes keep "오늘의 회고"). It happens once,
when the message enters the conversation (``agent.prompt.stamp_user_text`` calls the calendar's
``tools.calendar.language.annotate``), and the message is stored so, so the history and the
training rows hold what the model saw.
"""

from __future__ import annotations

import re

# A title in double quotes is the user's name for an event ("3pm prep", "오늘의 회고"): neither time
# nor date notes rewrite inside it, or the event would be created under another name.
QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|「[^」\n]*」')

_KO_NUMBERS = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10,
               "열한": 11, "열두": 12}
_EN_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
               "nine": 9, "ten": 10, "eleven": 11, "twelve": 12}
_EN_MINUTES = {"five": 5, "ten": 10, "twenty": 20, "twenty-five": 25, "twenty five": 25}

# -- Korean ----------------------------------------------------------------------------------------

_KO_HOUR = "|".join(sorted(_KO_NUMBERS, key=len, reverse=True))
_KO_CLOCK = rf"(?P<hour{{n}}>\d{{{{1,2}}}}|{_KO_HOUR})\s*시(?:\s*(?P<half{{n}}>반)|\s*(?P<minute{{n}}>\d{{{{1,2}}}})\s*분)?"
_KO = re.compile(
    r"(?:(?P<part>오전|오후|아침|낮|저녁|밤|새벽)\s*)?" + _KO_CLOCK.format(n=1)
    # a range's end takes the start's half of the day: 오후 3시부터 5시까지 is 15:00-17:00
    + r"(?:(?P<link>\s*(?:부터|에서|~|-|–)\s*)" + _KO_CLOCK.format(n=2) + ")?"
    + r"(?!\s*(?:간|전|\d|분))"  # 3시간 is a length; 5시 15분 전 may be 4:45 or "before 5:15": left alone
)
_KO_NOON = re.compile(r"정오(?:\s*12\s*시)?")


def _ko_hour(part: str | None, hour: int) -> int | None:
    """The 24-hour hour of a said hour under ``part`` (오후, 저녁, ...); None where the day or the
    half of it is unclear: a bare 1-12, and midnight and the hours after it (밤 12시, 밤 1시, 24시),
    which people put on the evening before ("오늘 밤 1시"), so an HH:MM would move them a day."""
    if part is None:
        return hour if 13 <= hour <= 23 else None  # 15시: already 24-hour; 3시: either half; 24시: a shop
    if hour > 12:
        return hour if part in ("오후", "저녁", "밤", "낮") and hour <= 23 else None  # 오후 15시: said twice
    if part in ("오전", "아침"):
        return hour if hour != 12 else None  # 오전 12시: midnight
    if part == "새벽":
        return hour if 1 <= hour <= 6 else None
    if part == "낮":  # 낮 12시 is noon, 낮 2시 is 14:00, 낮 11시 is 11:00
        return hour if hour >= 11 else hour + 12
    if hour == 12:  # 오후 12시 is noon; 저녁/밤 12시 is midnight
        return 12 if part == "오후" else None
    if part == "밤" and hour <= 4:
        return None
    return hour + 12  # 오후, 저녁, 밤


def _ko_clock(match: re.Match[str], n: int, part: str | None) -> tuple[int, int] | None:
    """(hour, minute) of the ``n``-th clock in ``match`` under ``part``; None if it is not clear."""
    said = match[f"hour{n}"]
    hour = _ko_hour(part, int(said) if said.isdigit() else _KO_NUMBERS[said])
    minute = 30 if match[f"half{n}"] else int(match[f"minute{n}"] or 0)
    return None if hour is None or minute > 59 else (hour, minute)


def _ko_rewrite(match: re.Match[str]) -> str | None:
    """The Korean time (or range) as ``HH:MM`` (``HH:MM부터 HH:MM``); None to leave it as said."""
    start = _ko_clock(match, 1, match["part"])
    if start is None:
        return None
    if not match["link"]:
        return "%02d:%02d" % start
    end = _ko_clock(match, 2, match["part"])
    if end is not None and end <= start and match["part"] == "오전":
        end = _ko_clock(match, 2, "오후")  # 오전 11시부터 1시까지: the end is after noon
    if end is None or end <= start:
        return None  # 오후 3시부터 2시: not a range read the one way
    return "%02d:%02d" % start + match["link"] + "%02d:%02d" % end


# -- English ---------------------------------------------------------------------------------------

_EN_HOUR = "|".join(_EN_NUMBERS)
# A lead in digits needs "minutes" or "past": "10 minutes to 4pm" is 15:50 and "10 past 4pm" 16:10,
# but "from 2 to 4pm" is a range and "on December 12 to 4pm" or "December 12 after 4pm" a date.
_EN_LEAD = (r"(?:a\s+)?quarter|half|\d{1,2}(?:\s+minutes?|(?=\s+past\s))"
            r"|(?:twenty[-\s]five|twenty|ten|five)(?:\s+minutes?)?")
_EN_PART = r"in\s+the\s+(?P<part>morning|afternoon|evening)|at\s+(?P<night>night)"
_EN_MERIDIEM = r"(?:(?P<meridiem>[ap])\.m\.|(?P<meridiem2>[ap])\s?m\b)"  # p.m. with its dot, pm, PM
_EN_AFTER = ("at", "by", "from", "until", "till", "til", "to", "around", "about", "before", "after", "and")
_EN = re.compile(
    r"(?<![\w:.])"  # not the minutes of 3:10 or 3.10
    rf"(?:(?P<lead>{_EN_LEAD})\s+(?P<rel>past|after|to)\s+)?"
    rf"(?P<hour>\d{{1,2}}|{_EN_HOUR}|noon|midday)"
    r"(?:[:.](?P<minute>\d{2}))?"
    r"(?:\s*o'clock)?"
    rf"(?:\s*{_EN_MERIDIEM}|\s+(?:{_EN_PART}))?",
    re.IGNORECASE,
)


def _en_hhmm(match: re.Match[str]) -> str | None:
    """The English time as ``HH:MM``; None to leave it as said (either half of the day, a number
    that is not a time, midnight, which people put on the day before)."""
    said = match["hour"].lower()
    named = said in ("noon", "midday")
    hour = 12 if named else int(said) if said.isdigit() else _EN_NUMBERS[said]
    minute = int(match["minute"] or 0)
    meridiem = (match["meridiem"] or match["meridiem2"] or "").lower()
    part = (match["part"] or match["night"] or "").lower()
    before = match.string[:match.start()].rsplit(None, 1)[-1:]  # the word before the time, if any
    if before and before[-1].lower() in ("past", "after"):
        return None  # "a few minutes past 3pm": a lead this does not read
    if not named and not said.isdigit() and not match["lead"] and "o'clock" not in match.group().lower():
        if not before or before[-1].lower() not in _EN_AFTER:
            return None  # "I have one in the evening" is an event, not a time
    if named:
        if meridiem or match["minute"]:
            return None  # "noon pm" and "noon:30" are not times
    elif meridiem or part:
        if hour > 12 or hour == 0:
            return None  # "15pm" is not a time
        evening = meridiem == "p" or part in ("afternoon", "evening", "night")
        if hour == 12 and (meridiem == "a" or part in ("evening", "night")):
            return None  # 12am, 12 at night: midnight
        if part == "night" and hour <= 4:
            return None  # "2 at night": after midnight, on which day?
        hour = (hour % 12) + (12 if evening else 0)
    elif not match["lead"] or match["minute"] or not 13 <= hour <= 23:
        return None  # "at 3", "3:30": either half of the day; "15:00": already written so
    if minute > 59:
        return None
    if match["lead"]:
        if match["minute"]:
            return None
        lead = re.sub(r"\s+minutes?$", "", match["lead"].lower())  # "10 minutes" -> "10", "twenty five"
        offset = (30 if lead == "half" else 15 if lead.endswith("quarter")
                  else int(lead) if lead.isdigit() else _EN_MINUTES.get(lead, 0))
        if not 0 < offset < 60 or (lead == "half" and match["rel"].lower() == "to"):
            return None
        total = hour * 60 + (offset if match["rel"].lower() in ("past", "after") else -offset)
        hour, minute = divmod(total % (24 * 60), 60)
    return f"{hour:02d}:{minute:02d}"


# -- both ------------------------------------------------------------------------------------------


def note_times(text: str) -> str:
    """``text`` as the model is shown it: English clock times with ``(HH:MM)`` after them, Korean
    ones replaced by ``HH:MM`` (see the module's docstring for why they differ).

    Each pattern's matches are collected with their replacement, then applied left to right; where
    two readings overlap (an English pattern inside a Korean phrase), the one that starts first wins.
    A quoted title is its own span, so that a time inside it is never rewritten."""
    found: list[tuple[int, int, str]] = [(m.start(), m.end(), m.group()) for m in QUOTED.finditer(text)]
    found += [(m.start(), m.end(), "12:00") for m in _KO_NOON.finditer(text)]
    for match in _KO.finditer(text):
        rewritten = _ko_rewrite(match)
        if rewritten is not None:
            found.append((match.start(), match.end(), rewritten))
    for match in _EN.finditer(text):
        hhmm = _en_hhmm(match)
        if hhmm is None:
            continue
        end = match.start() + len(match.group().rstrip())
        if not text[end:].lstrip().startswith(f"({hhmm})"):  # noted already (a message re-sent)
            found.append((match.start(), end, f"{text[match.start():end]} ({hhmm})"))
    out: list[str] = []
    at = 0
    for start, end, replacement in sorted(found):
        if start < at:
            continue
        out += [text[at:start], replacement]
        at = end
    out.append(text[at:])
    return "".join(out)
