"""When sync runs, for a frontend (the bot, the REPL): at start and every ``caldav_interval_s``
in one background thread; before a turn when the last pull is older than
``caldav_refresh_after_s``; after a turn that left changes queued. A turn waits for either at
most ``caldav_refresh_wait_s``: it answers from the local store, never from a dead server.

It is the calendar's ``agent.domain.Remote``: the runtime calls ``before_turn``/``after_turn``,
the banner and /sync read ``status``, and the lines a user must be told once (a field the
phone changed too; that the server is unreachable and changes wait) come back from ``after_turn``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone
from zoneinfo import ZoneInfo

from agent.url_policy import without_credentials
from agent.visible import visible_line
from tools.calendar.store import CalendarStore
from tools.calendar.sync.engine import CalDAVSync
from tools.calendar.sync.google_token import Grant
from tools.calendar.sync.merge import conflict_line
from tools.calendar.sync.report import SyncReport
from tools.calendar.sync.settings import Account, CalDAVSettings

log = logging.getLogger(__name__)

# failures a retry at every turn cannot mend: a refused password, a sign-in to renew, a rate limit
HOLD_OFF = ("auth", "signin", "limited")


class SyncService:
    def __init__(self, store: CalendarStore, account: Account, settings: CalDAVSettings) -> None:
        self.engine = CalDAVSync(store, account)
        self.account = account
        self.settings = settings
        self.zone = ZoneInfo(store.tz)
        self._cond = threading.Condition()
        self._asked = 0  # runs asked for
        self._done = 0  # runs finished
        self._want_pull = False  # whether any asked run wants a pull (else a push alone)
        self._last: SyncReport | None = None
        self._last_auth_failure = 0.0
        self._stop = False
        self._thread: threading.Thread | None = None
        self._offline_told = False
        self._signin_told = False

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the background thread (a sync at once, then every interval); idempotent."""
        with self._cond:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="caldav-sync", daemon=True)
            self._thread.start()
        self._ask(pull=True)

    def close(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=self.account.timeout_s + 5)

    # -- the runtime's hooks -------------------------------------------------------------------

    def before_turn(self) -> None:
        """Pull first when the store may be stale, waiting a few seconds at most."""
        self.start()
        last = self.engine.state.last_pull()
        stale = last is None or (datetime.now(timezone.utc) - last).total_seconds() > self.settings.caldav_refresh_after_s
        if stale and not self._auth_refused_recently():
            self._wait(self._ask(pull=True), self.settings.caldav_refresh_wait_s)

    def after_turn(self) -> list[str]:
        """Push what the turn queued (waiting a few seconds at most); the lines to tell once."""
        if self.engine.state.status().queued and not self._auth_refused_recently():
            self._wait(self._ask(pull=False), self.settings.caldav_refresh_wait_s)
        return self.notices()

    def notices(self) -> list[str]:
        lines = []
        conflicts = self.engine.state.conflicts(untold_only=True)
        for c in conflicts:
            lines.append("📅 " + conflict_line(c.title, c.field, c.local_value, c.server_value,
                                               self.account.provider, self.zone))
        if conflicts:
            self.engine.state.told([c.id for c in conflicts])
        last = self._last
        if last is not None and last.kind == "signin":  # the one thing only the user can fix: said once
            if not self._signin_told:
                lines.append(f"📅 {last.error}. Your calendar here keeps working; changes wait until then.")
                self._signin_told = True
            return lines
        self._signin_told = False
        status = self.engine.state.status()
        if status.offline_since is not None and status.queued:
            if not self._offline_told:
                lines.append(f"📅 saved here; {self.account.provider} is offline since "
                             f"{status.offline_since.astimezone(self.zone):%H:%M}: {status.queued} change"
                             f"{'s' if status.queued != 1 else ''} will go out when it is back")
                self._offline_told = True
        else:
            self._offline_told = False
        return lines

    def status(self) -> str:
        """One line: where, whether in step, since when not, what waits."""
        s = self.engine.state.status()
        where = f"{self.account.provider} calendar sync"
        queued = f", {s.queued} change{'s' if s.queued != 1 else ''} waiting" if s.queued else ""
        conflicts = f", {s.conflicts} conflict{'s' if s.conflicts != 1 else ''} kept (calendar status)" if s.conflicts else ""
        if s.offline_since is not None:
            return (f"{where}: offline since {s.offline_since.astimezone(self.zone):%H:%M} ({visible_line(s.last_error, 300)})"
                    f"{queued}{conflicts}")
        if s.ok_at is None:
            return f"{where}: not synced yet{queued}"
        return f"{where}: in step at {s.ok_at.astimezone(self.zone):%H:%M}{queued}{conflicts}"

    def describe(self) -> str:
        """``calendar status``'s lines, for ``agent doctor``."""
        return describe_status(self.engine.store, self.account)

    def sync_now(self, wait_s: float | None = None) -> str:
        """/sync: a full sync now; its one line, or the status if it takes longer than ``wait_s``."""
        self.start()
        asked = self._ask(pull=True)
        if self._wait(asked, wait_s if wait_s is not None else self.account.timeout_s * 3) and self._last is not None:
            return "\n".join([self._last.line(), *self.notices()])
        return self.status()

    # -- the thread ------------------------------------------------------------------------------

    def _ask(self, pull: bool) -> int:
        with self._cond:
            self._asked += 1
            self._want_pull = self._want_pull or pull
            self._cond.notify_all()
            return self._asked

    def _wait(self, asked: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._done < asked and not self._stop:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self._done >= asked

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._done >= self._asked and not self._stop:
                    self._cond.wait(self.settings.caldav_interval_s)
                    if self._done >= self._asked and not self._stop:
                        self._asked += 1  # the interval passed with nothing asked: a periodic sync
                        self._want_pull = True
                if self._stop:
                    return
                target, pull = self._asked, self._want_pull
                self._want_pull = False
            try:
                report = self.engine.sync(push_only=not pull, lock_wait_s=self.settings.caldav_refresh_wait_s)
            except Exception:  # noqa: BLE001 - the thread must outlive any bug; the status says it failed
                log.exception("calendar sync failed")
                report = SyncReport(error="internal error (see the log)", kind="unreachable")
            if report.kind in HOLD_OFF:
                self._last_auth_failure = time.monotonic()
            elif report.ok:  # mended (a new login, /sync after the limit): turns sync again at once
                self._last_auth_failure = 0.0
            if not report.ok:
                log.warning("calendar sync: %s", report.error)
            with self._cond:
                self._last = report
                self._done = max(self._done, target)
                self._cond.notify_all()

    def _auth_refused_recently(self) -> bool:
        """After a refused login or a rate limit, only the interval (or /sync) tries again: no request per turn."""
        return bool(self._last_auth_failure) and time.monotonic() - self._last_auth_failure < self.settings.caldav_interval_s


def describe_status(store: CalendarStore, account: Account) -> str:
    """``calendar status``: the last sync, the changes waiting to go out, the conflicts kept."""
    from tools.calendar.sync.state import SyncState

    state = SyncState(store)
    s = state.status()
    zone = ZoneInfo(store.tz)
    lines = [f"server: {account.provider} ({without_credentials(account.url)}) as {account.username}"]
    if account.token is not None:
        lines.append(signin_line(account.token.grant, zone))
    lines.append(f"last sync: {s.ok_at.astimezone(zone):%Y-%m-%d %H:%M}" + (f" ({visible_line(s.last_report, 300)})" if s.last_report else "")
                 if s.ok_at else "last sync: never")
    if s.offline_since is not None:
        lines.append(f"offline since {s.offline_since.astimezone(zone):%Y-%m-%d %H:%M}: {visible_line(s.last_error, 300)}")
    queued = state.queued()
    lines.append(f"waiting to be sent: {len(queued)}")
    for uid, _seq in queued[:20]:
        event = store.find_uid(uid)
        lines.append(f"  {'deleted' if event is None else repr(visible_line(event.title))} ({visible_line(uid)})")
    conflicts = state.conflicts(limit=20)
    lines.append(f"conflicts kept: {s.conflicts}" + (" (newest 20)" if s.conflicts > 20 else ""))
    for c in conflicts:
        lines.append(f"  {c.at.astimezone(zone):%m-%d %H:%M} " + conflict_line(
            c.title, c.field, c.local_value, c.server_value, account.provider, zone))
        if c.field == "deleted" and c.local_value:
            lines.append("    yours was: " + " ".join(c.local_value.split())[:300])
    return "\n".join(lines)


def signin_line(grant: Grant, zone: ZoneInfo) -> str:
    """When the access token and the sign-in end: what a user needs to know before sync stops."""
    token = grant.expires_at()
    ends = grant.signin_ends_at()
    token_text = f"token valid until {token.astimezone(zone):%Y-%m-%d %H:%M} (renewed on its own)" if token else \
        "no access token yet (one is fetched at the next sync)"
    signin_text = f"sign-in ends {ends.astimezone(zone):%Y-%m-%d}: publish the OAuth app to keep it" if ends else \
        "sign-in kept until revoked"
    return f"Google sign-in: {grant.account}, {token_text}; {signin_text}"
