"""The runtime writes its prompt in English; a domain's ``Language`` (agent.language) adds the rest.

A domain without one gets English lines only and its users' messages stored as typed. The
calendar's language (tools.calendar.language) must write exactly what the runtime wrote itself
before it knew no language: the expected texts below were dumped from the runtime before the
hooks existed, and every adapter and recorded run was made with them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from agent.app import system_prompt_factory, user_stamp_factory
from agent.config import Settings
from agent.domain import Domain
from agent.language import ENGLISH, DateLabels
from agent.prompt import PROMPT_STYLES, date_list, stamp_user_text, system_prompt
from agent.repl import TerminalApprover
from agent.repl_help import help_text
from agent.tools import Registry
from tools.calendar.language import CALENDAR_LANGUAGE

THURSDAY = datetime(2026, 12, 3, 9, 0)  # local time in Seoul
SAID = ("내일 오후 3시에 치과 예약 추가해줘", "Add lunch tomorrow at 3pm.", "다음 주 화요일 저녁 7시")

# --- the runtime's own text before the hooks (byte for byte), now the calendar's ---------------
DAYS_AHEAD = (
    "Days ahead (look the day up, do not count):\n"
    "이번 주 this week: 2026-12-04 (금 Fri, 내일 tomorrow), 2026-12-05 (토 Sat, 모레 day after tomorrow), "
    "2026-12-06 (일 Sun)\n"
    "다음 주 next week: 2026-12-07 (월 Mon), 2026-12-08 (화 Tue), 2026-12-09 (수 Wed), 2026-12-10 (목 Thu), "
    "2026-12-11 (금 Fri), 2026-12-12 (토 Sat), 2026-12-13 (일 Sun)\n"
    "다다음 주 week after next: 2026-12-14 (월 Mon), 2026-12-15 (화 Tue), 2026-12-16 (수 Wed), 2026-12-17 (목 Thu)\n"
)
FULL_GROUNDED = (
    "Calendar.\n"
    "Today: 2026-12-03 Thursday (Asia/Seoul, UTC+09:00).\n"
    "오늘: 2026년 12월 3일 목요일 (Asia/Seoul).\n"
    + DAYS_AHEAD +
    "Each user message begins with the local time it was sent, e.g. [14:05].\n"
    "사용자 메시지 앞의 [14:05] 같은 표시는 그 메시지를 보낸 현지 시각입니다.\n"
    "If required information is missing, ask the user; never guess it.\n"
    "필요한 정보가 없으면 추측하지 말고 사용자에게 물어보세요.\n"
    "Before deleting or changing anything, ask the user to confirm.\n"
    "삭제하거나 변경하기 전에 반드시 사용자에게 확인하세요.\n"
    "Keep answers short. 답변은 짧게 하세요."
)
SHORT_GROUNDED = (
    "Calendar.\n"
    "Today: 2026-12-03 Thursday (Asia/Seoul).\n"
    + DAYS_AHEAD +
    "Each user message starts with its local time, e.g. [14:05].\n"
    "If a needed detail is missing, ask; never guess.\n"
    "Ask the user to confirm before deleting or changing anything.\n"
    "Answer briefly, in the user's language."
)
NOTED = ("[09:00] 2026-12-04 15:00에 치과 예약 추가해줘", "[09:00] Add lunch tomorrow (2026-12-04) at 3pm (15:00).",
         "[09:00] 2026-12-08 19:00")

# --- what a domain without a language gets --------------------------------------------------
ENGLISH_FULL = (
    "Calendar.\n"
    "Today: 2026-12-03 Thursday (Asia/Seoul, UTC+09:00).\n"
    "Days ahead (look the day up, do not count):\n"
    "this week: 2026-12-04 (Fri, tomorrow), 2026-12-05 (Sat, day after tomorrow), 2026-12-06 (Sun)\n"
    "next week: 2026-12-07 (Mon), 2026-12-08 (Tue), 2026-12-09 (Wed), 2026-12-10 (Thu), 2026-12-11 (Fri), "
    "2026-12-12 (Sat), 2026-12-13 (Sun)\n"
    "week after next: 2026-12-14 (Mon), 2026-12-15 (Tue), 2026-12-16 (Wed), 2026-12-17 (Thu)\n"
    "Each user message begins with the local time it was sent, e.g. [14:05].\n"
    "If required information is missing, ask the user; never guess it.\n"
    "Before deleting or changing anything, ask the user to confirm.\n"
    "Keep answers short."
)


def bare_domain() -> Domain:
    return Domain(name="plain", registry=Registry.of([]), prompt="Calendar.")


def test_a_domain_without_a_language_gets_an_english_only_prompt_and_its_messages_as_typed() -> None:
    domain = bare_domain()
    assert domain.language is ENGLISH
    clock = lambda: THURSDAY  # noqa: E731
    for style in PROMPT_STYLES:
        for grounding in (False, True):
            settings = Settings(tz="Asia/Seoul", prompt_style=style, date_grounding=grounding,
                                time_notes=True, date_notes=True)
            text = system_prompt_factory(settings, domain, clock)()
            assert text.isascii(), text
            assert ("Days ahead (look the day up, do not count):" in text) is grounding
            stamp = user_stamp_factory(settings, domain, clock)
            for said in SAID:  # both notes are asked for, and nothing knows how to write them
                assert stamp(said) == f"[09:00] {said}"
    settings = Settings(tz="Asia/Seoul", date_grounding=True)
    assert system_prompt_factory(settings, domain, clock)() == ENGLISH_FULL


def test_the_calendar_language_writes_the_runtimes_former_text_byte_for_byte() -> None:
    assert system_prompt(THURSDAY, "Asia/Seoul", "Calendar.", "full", "", True, language=CALENDAR_LANGUAGE) == FULL_GROUNDED
    assert system_prompt(THURSDAY, "Asia/Seoul", "Calendar.", "short", "", True, language=CALENDAR_LANGUAGE) == SHORT_GROUNDED
    ungrounded = system_prompt(THURSDAY, "Asia/Seoul", "Calendar.", language=CALENDAR_LANGUAGE)
    assert ungrounded == FULL_GROUNDED.replace(DAYS_AHEAD, "")
    for said, noted in zip(SAID, NOTED):
        assert stamp_user_text(THURSDAY, "Asia/Seoul", said, time_notes=True, date_notes=True,
                               language=CALENDAR_LANGUAGE) == noted
        assert stamp_user_text(THURSDAY, "Asia/Seoul", said, language=CALENDAR_LANGUAGE) == f"[09:00] {said}"


def test_the_calendar_serves_and_evaluates_with_its_language(tmp_path: Path) -> None:
    from agent.domain import load_domain
    from agent.eval.dialogue import system_message, user_message
    from tools.calendar.lab.eval_suite import load_eval_suite

    settings = Settings(data_dir=tmp_path, tz="Asia/Seoul", date_grounding=True, time_notes=True, date_notes=True)
    domain = load_domain(settings)
    try:
        served = system_prompt_factory(settings, domain, lambda: THURSDAY)()
        assert served == FULL_GROUNDED.replace("Calendar.", domain.prompt.strip(), 1)
        assert user_stamp_factory(settings, domain, lambda: THURSDAY)(SAID[0]) == NOTED[0]
    finally:
        domain.close()
    suite = load_eval_suite(settings)
    scenario = suite.scenarios(split=None, per_template=1)[0]
    environment = suite.make_environment(scenario)
    try:
        environment.prompt_settings = settings.prompt_settings
        assert "오늘: " in system_message(scenario, environment)["content"]
        assert "15:00에" in user_message(scenario, environment, "내일 오후 3시에")["content"]
    finally:
        environment.close()


def test_the_bfcl_domain_is_served_in_english_only(tmp_path: Path) -> None:
    from tools.bfcl.domain import load_domain

    settings = Settings(data_dir=tmp_path, tz="Asia/Seoul", date_grounding=True, domain="tools.bfcl.domain")
    domain = load_domain(settings)
    try:
        served = system_prompt_factory(settings, domain, lambda: THURSDAY)()
    finally:
        domain.close()
    assert served.startswith(domain.prompt.strip() + "\nToday: 2026-12-03 Thursday")
    assert not any("\uac00" <= ch <= "\ud7a3" for ch in served)


def test_the_date_list_uses_the_languages_labels_and_refuses_a_broken_set() -> None:
    labels = DateLabels(weekdays=("L", "Ma", "Me", "J", "V", "S", "D"), weeks=("cette semaine", "plus tard"),
                        near=("demain",))
    lines = date_list(THURSDAY, "Asia/Seoul", labels=labels)
    assert lines[0] == "cette semaine: 2026-12-04 (V, demain), 2026-12-05 (S), 2026-12-06 (D)"
    assert lines[1].startswith("plus tard: 2026-12-07 (L), ") and lines[1].endswith("2026-12-17 (J)")
    assert len(lines) == 2  # every later week under the last label
    with pytest.raises(ValueError, match="7 weekdays"):
        DateLabels(weekdays=("Mon",))


def test_the_terminal_takes_only_the_domains_yes_words_and_its_help_names_its_day_words() -> None:
    from agent.approval import ApprovalRequest

    request = ApprovalRequest(tool="delete_event", arguments={}, description="delete it")
    plain = [TerminalApprover(ask=lambda _q, t=t: t).decide(request).approved for t in ("yes", "Y", "네", "ㅇ", "no")]
    assert plain == [True, True, False, False, False]
    calendar = [TerminalApprover(ask=lambda _q, t=t: t, yes_words=CALENDAR_LANGUAGE.yes_words).decide(request).approved
                for t in ("yes", " 네 ", "ㅇ", "예", "아니요")]
    assert calendar == [True, True, True, True, False]
    plain_help, calendar_help = (" ".join(help_text(language).split()) for language in (ENGLISH, CALENDAR_LANGUAGE))
    assert plain_help.isascii() and "without the model: today (default), tomorrow, a weekday (friday, fri) or" in plain_help
    assert "tomorrow, 내일, 모레, a weekday (friday, fri, 금요일) or YYYY-MM-DD" in calendar_help


def test_a_language_may_leave_a_rule_without_a_companion() -> None:
    from dataclasses import replace

    only_today = replace(ENGLISH, companions=lambda local, tz: {"today": f"Heute: {local:%d.%m.%Y}."})
    lines = system_prompt(THURSDAY, "Europe/Berlin", "", "full", "", True, language=only_today).splitlines()
    assert lines[:3] == ["Today: 2026-12-03 Thursday (Europe/Berlin, UTC+01:00).", "Heute: 03.12.2026.",
                         "Days ahead (look the day up, do not count):"]
    assert lines[-1] == "Keep answers short."
    assert system_prompt(datetime(2026, 12, 3, 9, 0, tzinfo=timezone.utc), "UTC", language=only_today).count("Heute") == 1
