"""The time probe: does an event the agent creates start at the time the user said?

40 fixed openings (``data/time_probe.json``, half Korean, half English), each a complete create
request — title, day, start time and duration stated, on a day with nothing else — so the right
action is just to create, and the one thing measured is the start time. Each is a calendar
scenario of the template ``time_probe`` (built with the generator's own helpers, scored by the
verifier as any other), served by the calendar suite only when asked for by name
(``--templates time_probe``), always in the ``test`` split: it is a measurement, never training
or development data.

The figure is read from the episodes, never from the model's words: the events in the final
store that were not there at the start, and their start times. An opening counts as *exact*
when it created at least one event and every event it created starts at the asked ``HH:MM``.

    python -m agent eval --demo --templates time_probe --out runs/time-probe     # prints the figure too
    python -m tools.calendar.lab.time_probe runs/time-probe [runs/other ...]         # read it again
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any, Iterable, Sequence
from zoneinfo import ZoneInfo

from agent.eval.record import EpisodeRecord
from agent.eval.suite import Scenario
from tools.calendar.lab.scenario_state import TZ, event_state, expected_snapshot, load_state
from tools.calendar.store import CalendarStore

TEMPLATE = "time_probe"
SPLIT = "test"
DATA = Path(__file__).with_name("data") / "time_probe.json"
REPORT_JSON = "time_probe.json"
REPORT_TXT = "time_probe.txt"


@dataclass(frozen=True)
class ProbeOpening:
    id: str
    language: str  # "ko" | "en"
    opening: str
    said: str  # the time as the opening says it ("오후 세시 반", "quarter past four in the afternoon")
    title: str
    date: str  # YYYY-MM-DD the opening's day means, seen from the probe's "now"
    time: str  # HH:MM the opening's time means
    minutes: int


def load_openings(path: Path = DATA) -> tuple[str, list[ProbeOpening]]:
    """The probe's fixed "now" and its openings, in file order."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return data["now"], [ProbeOpening(**row) for row in data["openings"]]


def scenario_of(now: str, o: ProbeOpening) -> Scenario:
    """One opening as a calendar scenario: an empty calendar, one event expected at the asked time."""
    initial: dict[str, Any] = {"events": [], "busy": []}
    new = event_state(o.title, date.fromisoformat(o.date), time.fromisoformat(o.time), o.minutes)
    return Scenario(
        id=f"{TEMPLATE}-{o.id}", template=TEMPLATE, variant=f"{TEMPLATE}/{o.id}", split=SPLIT, seed=0,
        language=o.language, now=now, tz=TZ, opening=o.opening, call_budget=3, initial=initial,
        expected=expected_snapshot(initial, add=[new]),
        task={"title": o.title, "date": o.date, "start_time": o.time, "duration": o.minutes, "said": o.said},
    )


def probe_scenarios(split: str | None = None, per_template: int | None = None) -> list[Scenario]:
    """The probe's scenarios (the first ``per_template`` of them, if given). They are all ``test``:
    asking for them in ``train`` or ``dev`` is an error, not an empty run."""
    if split not in (None, "all", SPLIT):
        raise ValueError(f"the {TEMPLATE} set is a measurement: it has no {split} scenarios (use --split test or all)")
    now, openings = load_openings()
    return [scenario_of(now, o) for o in openings[: per_template if per_template is not None else len(openings)]]


# -- the figure ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpeningResult:
    key: str  # the episode (scenario id + sample)
    language: str
    said: str
    asked_date: str
    asked_time: str
    created: tuple[str, ...]  # "YYYY-MM-DD HH:MM" of each event the episode created, from the final store
    exact: bool  # created something, and everything it created starts at the asked HH:MM
    right_day: bool  # ... and on the asked day
    error: str | None = None  # the runner failed (not the model)


def created_starts(record: EpisodeRecord) -> list[datetime]:
    """Start of each event in the final store that was not in the initial one (by id), in the
    scenario's zone."""
    scenario = record.scenario
    with CalendarStore(":memory:", tz=scenario.tz) as store:
        load_state(store, scenario.initial)
        initial_ids = {e["id"] for e in store.snapshot(with_ids=True)["events"]}
    zone = ZoneInfo(scenario.tz)
    return sorted(datetime.fromisoformat(e["start"]).astimezone(zone)
                  for e in record.final_snapshot.get("events", []) if e.get("id") not in initial_ids)


def result_of(record: EpisodeRecord) -> OpeningResult:
    task = record.scenario.task
    starts = created_starts(record)
    exact = bool(starts) and all(s.strftime("%H:%M") == task["start_time"] for s in starts)
    return OpeningResult(
        key=record.key, language=record.language, said=str(task.get("said", "")), asked_date=task["date"],
        asked_time=task["start_time"], created=tuple(s.strftime("%Y-%m-%d %H:%M") for s in starts), exact=exact,
        right_day=exact and all(s.date().isoformat() == task["date"] for s in starts), error=record.error,
    )


@dataclass(frozen=True)
class Totals:
    group: str  # all | en | ko
    openings: int
    created: int  # openings (episodes) that left at least one new event
    exact: int  # ... all of them at the asked time
    exact_day: int  # ... and on the asked day

    @property
    def share_of_created(self) -> float | None:
        return 100.0 * self.exact / self.created if self.created else None

    @property
    def share_of_all(self) -> float | None:
        return 100.0 * self.exact / self.openings if self.openings else None


def totals(results: Sequence[OpeningResult]) -> list[Totals]:
    groups = [("all", list(results))] + [(lang, [r for r in results if r.language == lang]) for lang in ("en", "ko")]
    return [Totals(group=name, openings=len(rs), created=sum(bool(r.created) for r in rs),
                   exact=sum(r.exact for r in rs), exact_day=sum(r.right_day for r in rs))
            for name, rs in groups if rs]


def measure(records: Iterable[EpisodeRecord]) -> list[OpeningResult]:
    """One result per probe episode in ``records`` (other templates' episodes are left out)."""
    return [result_of(r) for r in sorted(records, key=lambda r: r.key) if r.template == TEMPLATE]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def format_figure(results: Sequence[OpeningResult]) -> str:
    lines = ["time probe: created events at exactly the asked time (from the final store)", ""]
    lines.append(f"{'episode':<24} {'asked':<16}  {'created':<23} {'exact':<5}  {'day':<5}  said")
    for r in results:
        created = ", ".join(r.created) if r.created else "(none)"
        day = "-" if not r.created else ("ok" if all(c[:10] == r.asked_date for c in r.created) else "wrong")
        note = f"  [runner error: {r.error}]" if r.error else ""
        lines.append(f"{r.key:<24} {r.asked_date} {r.asked_time}  {created:<23} {'yes' if r.exact else 'no':<5}  "
                     f"{day:<5}  {r.said}{note}")
    lines += ["", f"{'':<5} {'openings':>8} {'created':>8} {'exact':>6} {'exact+day':>9} {'exact/created':>14} {'exact/all':>10}"]
    for t in totals(results):
        lines.append(f"{t.group:<5} {t.openings:>8} {t.created:>8} {t.exact:>6} {t.exact_day:>9} "
                     f"{_pct(t.share_of_created):>14} {_pct(t.share_of_all):>10}")
    return "\n".join(lines)


def figure_json(results: Sequence[OpeningResult]) -> dict[str, Any]:
    return {
        "totals": [{**asdict(t), "exact_of_created_pct": t.share_of_created, "exact_of_all_pct": t.share_of_all}
                   for t in totals(results)],
        "openings": [asdict(r) for r in results],
    }


def report(out_dir: Path, records: Sequence[EpisodeRecord]) -> str | None:
    """The eval's extra report (``EvalSuite.reports``): for a run with probe episodes, write
    ``time_probe.json`` and ``time_probe.txt`` into the results folder and return the table;
    None (nothing written) for a run without any."""
    results = measure(records)
    if not results:
        return None
    text = format_figure(results)
    (Path(out_dir) / REPORT_TXT).write_text(text + "\n", encoding="utf-8")
    (Path(out_dir) / REPORT_JSON).write_text(json.dumps(figure_json(results), ensure_ascii=False, indent=1) + "\n",
                                             encoding="utf-8")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tools.calendar.lab.time_probe RESULTS_DIR [RESULTS_DIR ...]``: the figure of each
    eval results folder (written into it too), then one line per folder to compare them."""
    import argparse

    from agent.eval.record import EpisodeFileError
    from agent.eval.runner import load_episodes

    parser = argparse.ArgumentParser(prog="python -m tools.calendar.lab.time_probe",
                                     description="The time probe's figure from eval results folders "
                                                 "(python -m agent eval --templates time_probe --out DIR).")
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args(argv)
    summary: list[tuple[Path, Totals]] = []
    for folder in args.folders:
        if not folder.is_dir():
            print(f"error: {folder}: not a results folder", file=sys.stderr)
            return 2
        try:
            records = load_episodes(folder)
        except (OSError, EpisodeFileError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        text = report(folder, records)
        if text is None:
            print(f"error: {folder}: no {TEMPLATE} episodes (run: python -m agent eval --templates {TEMPLATE} "
                  f"--out {folder})", file=sys.stderr)
            return 2
        print(f"{folder}\n{text}\n")
        summary.append((folder, totals(measure(records))[0]))
    if len(summary) > 1:
        for folder, t in summary:
            print(f"{folder}: {t.exact} of {t.created} created exact ({_pct(t.share_of_created)}), "
                  f"{t.exact} of {t.openings} openings ({_pct(t.share_of_all)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
