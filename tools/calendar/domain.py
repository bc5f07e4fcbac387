"""The calendar as a runtime domain: the store under AGENT_DATA_DIR, its tools, /today, /week and /ics."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from agent.domain import Document, Domain
from agent.visible import visible_line
from tools.calendar import shown
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.receipt import CalendarReceipt
from tools.calendar.reminders import CalendarNotifier
from tools.calendar.settings import CalendarSettings, load_settings as calendar_settings
from tools.calendar.store import CalendarStore
from tools.calendar.sync.settings import Account, account as caldav_account, load_caldav_settings
from tools.calendar.event_views import event_words, events_on_day
from tools.calendar.prompt_text import DOMAIN_PROMPT, DOMAIN_PROMPT_SHORT
from tools.calendar.tools import build_registry

if TYPE_CHECKING:
    from agent.config import Settings


# Day words /events and /week understand, besides YYYY-MM-DD (offsets from today).
RELATIVE_DAYS = {"today": 0, "오늘": 0, "tomorrow": 1, "내일": 1, "모레": 2, "yesterday": -1, "어제": -1}
WEEKDAY_NAMES = (
    ("monday", "mon", "월요일", "월"), ("tuesday", "tue", "tues", "화요일", "화"), ("wednesday", "wed", "수요일", "수"),
    ("thursday", "thu", "thur", "thurs", "목요일", "목"), ("friday", "fri", "금요일", "금"),
    ("saturday", "sat", "토요일", "토"), ("sunday", "sun", "일요일", "일"),
)
DAY_HINT = "use today, tomorrow, 내일, 모레, a weekday (friday, fri, 금요일) or YYYY-MM-DD"


def parse_day(text: str, today: date) -> date | None:
    """A day the user typed after /events or /week; a weekday name is its next occurrence
    (today if today is that day, ``next friday`` skips today). None if it is not a day."""
    words = text.strip().lower().split()
    if not words:
        return today
    skip_today = words[0] in ("next", "다음주", "다음")
    word = " ".join(words[1:] if skip_today else words)
    if word in RELATIVE_DAYS and not skip_today:
        return today + timedelta(days=RELATIVE_DAYS[word])
    for weekday, names in enumerate(WEEKDAY_NAMES):
        if word in names:
            ahead = (weekday - today.weekday()) % 7
            return today + timedelta(days=ahead or (7 if skip_today else 0))
    try:
        return date.fromisoformat(word) if not skip_today else None
    except ValueError:
        return None


def agenda(store: CalendarStore, day_text: str = "", now: datetime | None = None) -> str:
    """The events of one day as plain lines, without the model (``/today``, ``/events DAY``)."""
    zone = ZoneInfo(store.tz)
    day = parse_day(day_text, (now or datetime.now(zone)).astimezone(zone).date())
    if day is None:
        return f"Not a day: {day_text!r}. {DAY_HINT[0].upper()}{DAY_HINT[1:]}."
    events = events_on_day(store, day)
    if not events:
        return f"No events on {day.isoformat()}."
    return "\n".join([f"{day.isoformat()}:"] + [f"  {event_words(e, zone, to_person=True)}" for e in events])


def week(store: CalendarStore, day_text: str = "", now: datetime | None = None) -> str:
    """Seven days from DAY (default today), every day listed, each event with place and attendees."""
    zone = ZoneInfo(store.tz)
    first = parse_day(day_text, (now or datetime.now(zone)).astimezone(zone).date())
    if first is None:
        return f"Not a day: {day_text!r}. {DAY_HINT[0].upper()}{DAY_HINT[1:]}."
    lines = [f"Week of {first.isoformat()} ({store.tz}):"]
    for offset in range(7):
        day = first + timedelta(days=offset)
        events = events_on_day(store, day)
        lines.append(f"{WEEKDAY_NAMES[day.weekday()][0].capitalize()[:3]} {day.isoformat()}" + ("" if events else ": nothing"))
        for e in events:
            details = [f"@ {shown.place(e.location)}"] if e.location else []
            if e.attendees:
                details.append("with " + shown.names(e.attendees))
            lines.append(f"  {event_words(e, zone, to_person=True)}" + (f"  {'; '.join(details)}" if details else ""))
    return "\n".join(lines)


SKIPPED_LIMIT = 200  # characters of one "skipped" line: a title and why


def import_file(store: CalendarStore, path_text: str) -> str:
    """``python -m agent calendar import FILE``: ValueError (one line) for a missing or broken file."""
    from tools.calendar.ics import import_ics

    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        report = import_ics(store, path)
    except ValueError as exc:  # icalendar's parse errors are ValueErrors
        raise ValueError(f"{path}: not a readable .ics file ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})") from exc
    lines = [f"imported {report.count} event{'s' if report.count != 1 else ''} from {path}"
             + (f", updated {report.updated} already here (same UID)" if report.updated else "")
             + (f", {report.exceptions} changed occurrence{'s' if report.exceptions != 1 else ''}" if report.exceptions else "")]
    lines += [f"  skipped {visible_line(reason, SKIPPED_LIMIT)}" for reason in report.skipped]  # a title in a file is outside text
    lines += [f"  kept {visible_line(note, SKIPPED_LIMIT)}" for note in report.notes]  # read by a rule its file broke
    return "\n".join(lines)


def export_file(store: CalendarStore, path_text: str) -> str:
    """``python -m agent calendar export FILE``: every event, as iCalendar."""
    from tools.calendar.ics import export_ics

    path = Path(path_text).expanduser()
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; name the .ics file to write")
    count = export_ics(store, path)
    return f"exported {count} event{'s' if count != 1 else ''} to {path}"


ICS_FILENAME = "iljeong-calendar.ics"


def ics_document(store: CalendarStore) -> Document:
    """/ics in a chat: every event as one .ics file, to open in Apple Calendar or Google Calendar.

    It takes no argument and reads only the store, so it is safe to offer to chat users (unlike
    ``export_file``, which writes wherever it is told)."""
    from tools.calendar.ics import ics_bytes

    content, count = ics_bytes(store)
    caption = (f"Your calendar: {count} event{'s' if count != 1 else ''} ({store.tz}). "
               "Open the file to add them to Apple Calendar, Google Calendar or Outlook.")
    return Document(ICS_FILENAME, content, caption)


NOT_SET_UP = ("CalDAV sync is not set up: set AGENT_CALDAV_URL, AGENT_CALDAV_USERNAME and "
              "AGENT_CALDAV_PASSWORD_FILE (README: \"Your real calendar\")")


def load_settings(settings: Settings) -> CalendarSettings:
    """The calendar's settings, and the CalDAV account checked (URL, https, the password file's
    mode), so that a bad value is one line before anything starts (``check_domain_settings``)."""
    own = calendar_settings(settings)
    caldav_account(settings)
    return own


def sync_once(store: CalendarStore, account: Account | None) -> str:
    """``python -m agent calendar sync``: one line; ValueError (exit 2) when not in step."""
    from tools.calendar.sync.engine import CalDAVSync

    if account is None:
        raise ValueError(NOT_SET_UP)
    report = CalDAVSync(store, account).sync()
    if not report.ok:
        raise ValueError(report.line())
    return report.line() + "".join(f"\n  skipped {visible_line(why, SKIPPED_LIMIT)}" for why in report.skipped)


def sync_status(store: CalendarStore, account: Account | None) -> str:
    """``python -m agent calendar status``: the last sync, what waits to be sent, the conflicts."""
    from tools.calendar.sync.service import describe_status

    if account is None:
        return NOT_SET_UP
    return describe_status(store, account)


def sign_in(settings: Settings, provider: str, browser: bool | None = None) -> str:
    """``python -m agent calendar login google``: before the domain loads, so a sign-in that no
    longer works can always be replaced."""
    from tools.calendar.sync.google_signin import login
    from tools.calendar.sync.google_token import grant_path
    from tools.calendar.sync.settings import google_client_file

    _only_google(provider, "login")
    return login(google_client_file(settings), grant_path(settings.data_dir), browser=browser)


def sign_out(settings: Settings, provider: str, browser: bool | None = None) -> str:
    """``python -m agent calendar logout google``: revoke the grant at Google and forget it here."""
    from tools.calendar.sync.google_signin import logout
    from tools.calendar.sync.google_token import grant_path

    _only_google(provider, "logout")
    return logout(grant_path(settings.data_dir))


def _only_google(provider: str, action: str) -> None:
    if provider.strip().lower() != "google":
        raise ValueError(f"calendar {action} knows one provider, google (python -m agent calendar {action} google); "
                         "iCloud, Fastmail and Nextcloud sign in with a password file (README: \"Your real calendar\")")


# Commands that run before the domain loads (agent/__main__.py finds them by this name).
SETUP_COMMANDS = {"login": sign_in, "logout": sign_out}


def load_domain(settings: Settings) -> Domain:
    own = calendar_settings(settings)  # both before the store opens: a bad value loses nothing
    account = caldav_account(settings)  # load_settings checks it too: called apart, the password file is read once
    store = CalendarStore(settings.store_path, tz=settings.tz)
    notifier = CalendarNotifier(store, own.agenda_time, timedelta(minutes=own.reminder_grace_minutes))
    remote = None
    if account is not None:
        from tools.calendar.sync.service import SyncService

        remote = SyncService(store, account, load_caldav_settings(settings))

    def close() -> None:
        if remote is not None:
            remote.close()
        store.close()

    return Domain(
        name="calendar",
        registry=build_registry(store, default_reminders=own.remind_minutes,
                                also_on=account.provider if account else None),
        prompt=DOMAIN_PROMPT,
        short_prompt=DOMAIN_PROMPT_SHORT,
        commands={
            "today": lambda arg: agenda(store, arg),
            "week": lambda arg: week(store, arg),
            # /sync only where a server is set up: a chat's menu offers nothing that cannot work
            **({"sync": lambda _arg: remote.sync_now()} if remote is not None else {}),
        },
        documents={"ics": lambda _arg: ics_document(store)},
        descriptions={
            "today": "today's events",
            "week": "seven days from today (or /week DAY)",
            "ics": "your calendar as an .ics file",
            **({"sync": f"sync with your {account.provider} calendar now"} if account is not None else {}),
        },
        local_commands={"import": lambda arg: import_file(store, arg), "export": lambda arg: export_file(store, arg),
                        "sync": lambda _arg: sync_once(store, account), "status": lambda _arg: sync_status(store, account)},
        close=close,
        remote=remote,
        notifier=notifier,
        receipt=CalendarReceipt(store),
        language=CALENDAR_LANGUAGE,
    )
