"""Continued-chat scenarios: a task that starts after 1-3 earlier tasks were finished in the same
conversation, with their turns in the history and their events in the store.

Why: every generated task starts a fresh conversation, so no figure measured what a model does
with a chat behind it (the demo model, asked for a weekly meeting after booking a dentist, tried
to move the dentist). Here the history is real: the earlier tasks are the generator's own
scenarios (``build_scenario``), played by the oracle through the real loop on one store that holds
every task's events, and what the runtime would have kept of them -- user messages, the
assistant's raw text with its calls, the tool results -- becomes ``Scenario.history``.

How a continued scenario is made from a last task ``L`` (deterministic in the generator seed and
``L``'s id):
- the earlier tasks are scenarios of other templates, of ``L``'s language and split (their
  phrasings never leak into another split), whose drawn "now" is ``L``'s: one chat, one clock;
- about half of the chats have an earlier task whose own event shares a title or a day with
  ``L``'s request (``task["history"]["link"]``), the rest share neither;
- the store starts with every task's initial events (``L``'s first, so they keep ``L``'s ids),
  the earlier tasks are played in order, and the last task starts from that store;
- the expected final store is ``L``'s expected events plus the earlier tasks' events unchanged;
- a combination in which another task's events change an earlier task's outcome, or ``L``'s
  right answer (a clash, a twin event, a busy friend), is drawn again: the earlier outcomes are
  compared with their own scenarios', and ``L`` is played by the oracle on the rebuilt store.

The store of an episode is rebuilt, not copied: ``chat_store`` loads the calendar as it was
before the chat and replays the history's own assistant outputs through the loop, with the
approval answers recorded when it was made, and refuses a history that does not replay to the
same messages. So ids in the history's results are the store's ids, and nothing else is trusted.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from functools import cache, lru_cache
from typing import Any, Iterable

from agent.approval import ApprovalRequest, Approver, Decision
from agent.backends.scripted import ScriptedBackend
from agent.eval.dialogue import ScenarioApprover, play_dialogue
from agent.eval.suite import Environment, PolicyFactory, Scenario
from agent.loop import Agent
from agent.prompt import unstamp_user_text
from agent.records import StopReason, Turn
from agent.tools import Registry
from tools.calendar.language import CALENDAR_LANGUAGE
from tools.calendar.lab.continued_policies import last_task_only
from tools.calendar.lab.policies import POLICIES, SOLVERS, oracle
from tools.calendar.lab.scenario_state import load_state
from tools.calendar.lab.scenarios import (SLOTS_PER_LANGUAGE, SPLIT_OF_PHRASING, TEMPLATES, build_scenario,
                                          draw_now, phrasing_of, scenario_seed)
from tools.calendar.lab.snapshot_diff import event_diff, fold, normalized
from tools.calendar.prompt_text import DOMAIN_PROMPT, DOMAIN_PROMPT_SHORT
from tools.calendar.receipt import CalendarReceipt
from tools.calendar.store import CalendarStore
from tools.calendar.tools import build_registry

MAX_EARLIER = 3
SCAN = 4000  # indices of a template looked at for an earlier task with the same "now"
ATTEMPTS = 12  # combinations drawn for one last task before it is given up
REPLAY_KEY = "replay_approvals"  # in ``initial``: the approval answers of the history, in order


class HistoryMismatch(ValueError):
    """A scenario's history does not replay on its store: the scenario is not what it claims."""


# -- the store of a chat ----------------------------------------------------------------------------


@dataclass
class ApprovalTape:
    """Approval answers given back in order (the replay), or recorded as they are given (the play)."""

    answers: list[list[Any]] = field(default_factory=list)
    inner: Approver | None = None
    position: int = 0

    def decide(self, request: ApprovalRequest) -> Decision:
        if self.inner is not None:
            decision = self.inner.decide(request)
            self.answers.append([decision.approved, decision.reason])
            return decision
        if self.position >= len(self.answers):
            raise HistoryMismatch(f"the history asks for approval {self.position + 1}, but only "
                                  f"{len(self.answers)} were recorded")
        approved, reason = self.answers[self.position]
        self.position += 1
        return Decision(bool(approved), str(reason))


def _turns(history: Iterable[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(user message, what the turn produced) for each user message of a history."""
    out: list[tuple[dict[str, Any], list[dict[str, Any]]]] = []
    for message in history:
        if message.get("role") == "user":
            out.append((message, []))
        elif out:
            out[-1][1].append(message)
        else:
            raise HistoryMismatch("the history does not start with a user message")
    return out


def _registry(store: CalendarStore, now: Any) -> Registry:
    """The calendar's tools on ``store``, their schemas made once: a scripted backend never reads
    them, and the loop asks for them every turn (pydantic builds each anew, ~45 ms a turn)."""
    registry = build_registry(store, now=lambda: now)
    schemas = registry.schemas()
    registry.schemas = lambda: schemas  # type: ignore[method-assign]
    return registry


def chat_store(scenario: Scenario) -> CalendarStore:
    """The store a scenario starts from: its initial calendar, and for a continued chat what the
    earlier tasks did to it, by replaying the history's assistant outputs through the loop."""
    store = CalendarStore(":memory:", tz=scenario.tz)
    try:
        load_state(store, scenario.initial)
        if scenario.history:
            _replay(store, scenario)
    except BaseException:
        store.close()
        raise
    return store


def _replay(store: CalendarStore, scenario: Scenario) -> None:
    now = scenario.now_datetime()
    turns = _turns(scenario.history)
    outputs = [m["content"] for _, produced in turns for m in produced if m.get("role") == "assistant"]
    agent = Agent(ScriptedBackend(outputs), _registry(store, now))
    approver = ApprovalTape(answers=[list(a) for a in scenario.initial.get(REPLAY_KEY, [])])
    conversation: list[dict[str, Any]] = [{"role": "system", "content": ""}]
    for index, (user, produced) in enumerate(turns):
        messages = [*conversation, dict(user)]
        turn = agent.run_turn(messages, approver)
        again = messages[len(conversation) + 1:]
        if again != produced:
            raise HistoryMismatch(f"{scenario.id}: turn {index + 1} of the history replays differently "
                                  f"({turn.stop_reason.value}): the store is not the one it was made on")
        conversation = messages
    if approver.position != len(approver.answers):
        raise HistoryMismatch(f"{scenario.id}: {len(approver.answers) - approver.position} recorded approvals unused")


def environment_of(store: CalendarStore, scenario: Scenario, fast: bool = False) -> Environment:
    """The eval environment around a store (``eval_suite.make_environment``'s, on a given store);
    ``fast``: tool schemas made once, for scripted play only."""
    now = scenario.now_datetime()
    return Environment(
        registry=_registry(store, now) if fast else build_registry(store, now=lambda: now),
        prompt=DOMAIN_PROMPT, short_prompt=DOMAIN_PROMPT_SHORT, now=now,
        snapshot=lambda: store.snapshot(with_ids=True), close=store.close,
        receipt=CalendarReceipt(store), language=CALENDAR_LANGUAGE,
    )


# -- choosing earlier tasks -------------------------------------------------------------------------


CYCLE = 2 * SLOTS_PER_LANGUAGE  # the index slots a scenario's language and split repeat with


def _slots(language: str, split: str) -> list[int]:
    """The slots (index modulo ``CYCLE``) whose scenarios, of any template, say ``language`` in ``split``."""
    said = [phrasing_of(slot) for slot in range(CYCLE)]
    return [slot for slot, (lang, phrasing) in enumerate(said) if lang == language and SPLIT_OF_PHRASING[phrasing] == split]


def _now_of(template: str, index: int, seed: int) -> str:
    """The "now" ``build_scenario`` draws for this scenario, without building it (its first draws)."""
    return draw_now(random.Random(scenario_seed(template, index, seed))).isoformat()


def snapshot_of(initial: dict[str, Any]) -> dict[str, Any]:
    """A scenario's initial calendar as a store snapshot (with ids), as the run's store has it."""
    return json.loads(_snapshot_text(json.dumps(initial, sort_keys=True, ensure_ascii=False)))


@lru_cache(maxsize=4096)
def _snapshot_text(initial: str) -> str:
    with CalendarStore(":memory:") as store:
        load_state(store, json.loads(initial))
        return json.dumps(store.snapshot(with_ids=True), ensure_ascii=False)


def _own_events(scenario: Scenario) -> list[dict[str, Any]]:
    """The events a task is about: those it creates, changes or removes, and its target."""
    removed, added = event_diff(normalized(snapshot_of(scenario.initial)), normalized(scenario.expected))
    events = [json.loads(k) for k in (removed + added)]
    target = scenario.task.get("target")
    if target:
        events.append({"title": target["title"], "start": f"{target['date']}T{target['start']}"})
    return events


def _asks_about(scenario: Scenario) -> tuple[set[str], set[str]]:
    """(titles, days) a request names: the task's title, target and date."""
    task = scenario.task
    titles = {fold(t) for t in (task.get("title"), (task.get("target") or {}).get("title")) if t}
    days = {d for d in (task.get("date"), (task.get("target") or {}).get("date")) if d}
    return titles, days


def link_of(earlier: Scenario, last: Scenario) -> str | None:
    """How the last request mentions an earlier task's own event: "title", "day" or None."""
    titles, days = _asks_about(last)
    own = _own_events(earlier)
    if any(fold(e["title"]) in titles for e in own):
        return "title"
    if any(e["start"][:10] in days for e in own):
        return "day"
    return None


def _candidates(last: Scenario, template: str, seed: int, rng: random.Random) -> Iterable[Scenario]:
    """Scenarios of ``template`` in ``last``'s language and split with ``last``'s "now"."""
    slots = _slots(last.language, last.split)
    if not slots:
        return
    start = rng.randrange(1000) * CYCLE
    for block in range(SCAN // CYCLE):
        for variant in slots:
            index = start + block * CYCLE + variant
            if _now_of(template, index, seed) != last.now:
                continue
            built = build_scenario(template, index, seed)
            if built.now == last.now:
                yield built


def draw_earlier(last: Scenario, count: int, seed: int, rng: random.Random,
                 templates: tuple[str, ...] = TEMPLATES) -> tuple[list[Scenario], str | None]:
    """``count`` earlier tasks of other templates (no template twice, no opening twice) and how the
    last request mentions one of their events ("title", "day" or None, ``link_of``). Half of the
    chats want such a mention (the first earlier task gives it), the other half want none at all."""
    want_link = rng.random() < 0.5
    pool = [t for t in templates if t != last.template]
    out: list[Scenario] = []
    openings = {last.opening}
    for position, template in enumerate(rng.sample(pool, count)):
        fallback: Scenario | None = None
        pick: Scenario | None = None
        for candidate in _candidates(last, template, seed, rng):
            if candidate.opening in openings:
                continue
            linked = link_of(candidate, last) is not None
            if (linked if want_link and position == 0 else not linked or want_link):
                pick = candidate
                break
            fallback = fallback or candidate
        pick = pick or fallback
        if pick is None:
            raise LookupError(f"no {template} scenario shares the now of {last.id}")
        openings.add(pick.opening)
        out.append(pick)
    return out, next((kind for e in out if (kind := link_of(e, last)) is not None), None)


# -- playing the chat -----------------------------------------------------------------------------


def merged_initial(tasks: list[Scenario]) -> dict[str, Any]:
    """Every task's initial calendar in one: people once, all busy times, all events (in order)."""
    people: list[str] = []
    for task in tasks:
        people += [p for p in task.initial.get("people", []) if p not in people]
    return {"people": people, "busy": [b for t in tasks for b in t.initial.get("busy", [])],
            "events": [e for t in tasks for e in t.initial.get("events", [])]}


def _effect(before: dict[str, Any], after: dict[str, Any]) -> tuple[Any, Any, Any]:
    """What changed between two snapshots, ids aside: (removed events, added events, rest changed)."""
    a, b = normalized(before), normalized(after)
    removed, added = event_diff(a, b)
    return removed, added, (a["busy"] != b["busy"], a["people"] != b["people"], a["agenda"] != b["agenda"])


def _history_message(message: dict[str, Any]) -> dict[str, Any]:
    """A produced message as ``Scenario.history`` keeps it: a user message as typed (unstamped)."""
    if message.get("role") == "user":
        return {"role": "user", "content": unstamp_user_text(str(message.get("content", "")))}
    return message


Played = tuple[list[dict[str, Any]], list[list[Any]], dict[str, Any]]  # history, approval answers, store after


def play_history(earlier: list[Scenario], last: Scenario, policy: PolicyFactory = oracle) -> Played | None:
    """The earlier tasks played by the oracle (or ``policy``, a variant of it) on one store holding
    every task's events: (history, approval answers, the store's snapshot after them); None when one
    of them came out otherwise than its own scenario says (another task's events were in the way)."""
    initial = merged_initial([last, *earlier])
    store = CalendarStore(":memory:", tz=last.tz)
    try:
        load_state(store, initial)
        environment = environment_of(store, last, fast=True)
        history: list[dict[str, Any]] = []
        answers: list[list[Any]] = []
        for task in earlier:
            scenario = replace(task, history=tuple(history))
            agent = Agent(ScriptedBackend(last_task_only(policy)(scenario)), environment.registry)

            def run_turn(messages: list[dict[str, Any]], approver: ScenarioApprover) -> Turn:
                recorder = ApprovalTape(inner=approver)
                turn = agent.run_turn(messages, recorder)
                answers.extend(recorder.answers)
                return turn

            trace = play_dialogue(scenario, environment, run_turn)
            ended = trace.exchanges[-1].turn.stop_reason if trace.exchanges else None
            if ended not in (StopReason.FINAL_REPLY, StopReason.ASKED_USER) or trace.error:
                return None
            if _effect(trace.initial, trace.final) != _effect(snapshot_of(task.initial), task.expected):
                return None
            history += [_history_message(m) for m in trace.messages[1 + len(history):]]
        return history, answers, store.snapshot(with_ids=True)
    finally:
        store.close()


def continued(last: Scenario, earlier: list[Scenario], link: str | None = None,
              history_by: str = "oracle") -> Scenario | None:
    """``last`` after ``earlier`` in one chat, or None when the tasks get in each other's way.
    ``history_by`` names the scripted policy that plays the earlier tasks; a chat whose history is
    not the oracle's carries that name in its id, so it never pairs with the oracle-history chat."""
    played = play_history(earlier, last, POLICIES[history_by])
    if played is None:
        return None
    history, answers, after = played
    own_ids = {e["id"] for e in normalized_ids(last.initial)}
    earlier_events = [e for e in after["events"] if e["id"] not in own_ids]
    expected = {**after, "events": earlier_events + list(last.expected["events"])}
    if _effect(snapshot_of(last.initial), last.expected)[2] != (False, False, False):
        return None  # no template changes these; a chat would have to merge them otherwise
    return replace(
        last, id=f"{last.id}~h{len(earlier)}" + ("" if history_by == "oracle" else f"~{history_by}"),
        history=tuple(history),
        initial={**merged_initial([last, *earlier]), REPLAY_KEY: answers}, expected=expected,
        task={**last.task, "history": {"tasks": [e.id for e in earlier], "templates": [e.template for e in earlier],
                                        "link": link, "event_ids": sorted(e["id"] for e in earlier_events)}},
    )


def normalized_ids(initial: dict[str, Any]) -> list[dict[str, Any]]:
    """A task's initial events with the ids a fresh store gives them (1, 2, ... in load order)."""
    return [{**e, "id": i} for i, e in enumerate(initial.get("events", []), start=1)]


# -- the scenarios ---------------------------------------------------------------------------------


def oracle_solves(scenario: Scenario) -> bool:
    """The oracle, shown only the last task, solves it on the rebuilt store with full marks: the
    earlier tasks left the last task's right answer what its own scenario says."""
    from agent.eval.dialogue import run_episode
    from tools.calendar.lab.verify import CalendarVerifier

    environment = environment_of(chat_store(scenario), scenario, fast=True)
    try:
        trace = run_episode(scenario, ScriptedBackend(last_task_only(oracle)(scenario)), environment)
    finally:
        environment.close()
    verdict = CalendarVerifier().verify(trace)
    return verdict.success and verdict.policy_ok and verdict.reward == 1.0 and not verdict.unasked_changes


def continue_scenario(last: Scenario, fewest: int, most: int, seed: int = 0, history_by: str = "oracle") -> Scenario:
    """``last`` after ``fewest``..``most`` earlier tasks (how many and which: drawn from its id and
    ``seed`` alone, so a chat whose history another policy played has the same earlier tasks)."""
    rng = random.Random(f"{seed}:history:{last.id}:{fewest}-{most}")
    count = rng.randint(fewest, most)
    for _ in range(ATTEMPTS):
        earlier, link = draw_earlier(last, count, seed, rng)
        made = continued(last, earlier, link, history_by)
        if made is not None and oracle_solves(made):
            return made
    raise LookupError(f"{last.id}: no {count} earlier tasks found that leave it as it is ({ATTEMPTS} tries)")


def continue_scenarios(base: Iterable[Scenario], fewest: int, most: int, seed: int = 0,
                       history_by: str = "oracle") -> list[Scenario]:
    """Each scenario of ``base`` as the last task of a chat with ``fewest``..``most`` earlier ones
    (``EvalSuite.continued``); its split is the last task's, its earlier tasks are of that split.
    ``history_by``: the oracle variant that plays the earlier tasks (``eval --history-by``). Why:
    in use a chat's history is the model's own turns, and a model trained to look events up another
    way copies the style of the history in front of it."""
    if not 1 <= fewest <= most <= MAX_EARLIER:
        raise ValueError(f"earlier tasks: between 1 and {MAX_EARLIER} (got {fewest}-{most})")
    if history_by not in SOLVERS:
        raise ValueError(f"--history-by: the earlier tasks are played by one of {', '.join(SOLVERS)} "
                         f"(got {history_by!r})")
    return [continue_scenario(s, fewest, most, seed, history_by) for s in base]
