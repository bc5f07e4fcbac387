"""Prompt rendering: the model's own template, tool blocks, and the prefix property across steps."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import llama_cpp
import pytest

from agent.formats import HERMES, format_tool_call
from agent.formats.tool_view import compact_tools, short_description
from agent.segments import Rendered
from agent.prompt import PromptError, PromptRenderer, PromptSettings, stamp_user_text, system_prompt, unstamp_user_text
from tools.calendar.language import CALENDAR_LANGUAGE
from tests import model_fixtures as mf
from tests.renderers import renderer_for

hermes_tool_block = HERMES.tool_block

TOOLS = [
    {"type": "function", "function": {
        "name": "create_event", "description": "Create a calendar event.",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "start": {"type": "string"}},
                       "required": ["title", "start"]}}},
    {"type": "function", "function": {
        "name": "list_events", "description": "List events on a day.",
        "parameters": {"type": "object", "properties": {"day": {"type": "string"}}, "required": ["day"]}}},
]


def history(thinking: bool = False) -> list[dict]:
    """A multi-step conversation: call, tool result, final answer, new request, two calls, answer."""
    think = "<think>\nThe user wants an event.\n</think>\n\n" if thinking else ""
    return [
        {"role": "system", "content": "You are a calendar assistant."},
        {"role": "user", "content": "Dentist tomorrow at 3pm, please. 내일 오후 3시 치과."},
        {"role": "assistant", "content": think + format_tool_call(
            "create_event", {"title": "Dentist", "start": "2026-12-01T15:00"}),
         # a structured copy that must NOT be re-serialised into the prompt
         "tool_calls": [{"type": "function", "function": {"name": "create_event", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"ok": True, "data": {"id": 7}})},
        {"role": "assistant", "content": think + "Done: Dentist, 1 Dec 15:00."},
        {"role": "user", "content": "What else is on that day and the next?"},
        {"role": "assistant", "content": format_tool_call("list_events", {"day": "2026-12-01"}) + "\n"
         + format_tool_call("list_events", {"day": "2026-12-02"})},
        {"role": "tool", "tool_call_id": "c2", "content": '{"ok": true, "data": []}'},
        {"role": "tool", "tool_call_id": "c3", "content": '{"ok": true, "data": []}'},
        {"role": "assistant", "content": "Nothing else."},
    ]


def assert_prefix_property(renderer: PromptRenderer, messages: list[dict]) -> int:
    """For every assistant step k: prompt(messages[:k]) + raw output is a prefix of every later prompt."""
    checked = 0
    for k, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        step_prompt = renderer.render(messages[:k], TOOLS) + message["content"]
        for later in range(k + 1, len(messages) + 1):
            full = renderer.render(messages[:later], TOOLS)
            assert full.startswith(step_prompt), (k, later, step_prompt[-80:], full[len(step_prompt) - 80:][:160])
        checked += 1
    return checked


def test_smollm2_template_has_no_tools_so_the_hermes_block_is_written(smollm2: Path) -> None:
    renderer = renderer_for(smollm2)
    assert renderer.native_tools is False
    text = renderer.render(history()[:4], TOOLS)
    system = text.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nYou are a calendar assistant.\n\n# Tools")
    for tool in TOOLS:
        assert json.dumps(tool, ensure_ascii=False, separators=(",", ":")) in system
    # the tool result is a user turn in <tool_response> tags, as Qwen renders it
    assert '<|im_start|>user\n<tool_response>\n{"ok": true, "data": {"id": 7}}\n</tool_response><|im_end|>' in text
    assert text.endswith("<|im_start|>assistant\n")
    # the instructions, plus the one call in the history: tool_calls is not re-serialised
    assert text.count("<tool_call>") == hermes_tool_block(TOOLS).count("<tool_call>") + 1


def test_smollm2_prefix_property(smollm2: Path) -> None:
    assert assert_prefix_property(renderer_for(smollm2), history()) == 4


def test_qwen3_templates_render_tools_natively(tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    renderer = renderer_for(tiny_qwen3_each)
    assert renderer.native_tools is True
    text = renderer.render(history()[:2], TOOLS)
    assert "You are provided with function signatures within <tools></tools>" in text
    assert "Function signatures:" not in text  # our own block is not added on top
    # enable_thinking=False: only the hybrid template writes an empty think block here
    assert text.endswith("<|im_end|>\n" + mf.QWEN3_GENERATION_PROMPT[qwen3_variant])


@pytest.mark.parametrize("thinking", [False, True])
def test_qwen3_prefix_property(tiny_qwen3_each: Path, qwen3_variant: str, thinking: bool) -> None:
    """The hybrid template alone breaks this: it drops the empty think block (and old reasoning)
    from earlier turns. The splice keeps what the model saw and wrote, with either template."""
    renderer = renderer_for(tiny_qwen3_each, enable_thinking=thinking)
    messages = history(thinking=thinking)
    assert assert_prefix_property(renderer, messages) == 4
    raw = Rendered.split(renderer._call(renderer._prepare(messages, TOOLS), TOOLS, True)).text
    step = renderer.render(messages[:2], TOOLS) + messages[2]["content"]
    # the raw hybrid template renders the first turn without the empty think block (or the
    # reasoning) the model saw; the 2507 one renders it as it was: it has neither to drop
    assert raw.startswith(step) == (qwen3_variant == "2507")


def test_qwen3_groups_consecutive_tool_results_in_one_user_turn(tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    text = renderer_for(tiny_qwen3_each).render(history()[:9], TOOLS)
    assert text.endswith("</tool_response>\n<tool_response>\n"
                         '{"ok": true, "data": []}\n</tool_response><|im_end|>\n' + mf.QWEN3_GENERATION_PROMPT[qwen3_variant])


def test_the_stored_history_renders_exactly_as_each_step_was_served(tiny_qwen3_each: Path, qwen3_variant: str) -> None:
    """The whole conversation, rendered from the stored history, is each step's prompt followed by
    what the model wrote there: for the hybrid template every assistant turn keeps the empty think
    block it was generated after, for the 2507 template none has one."""
    renderer = renderer_for(tiny_qwen3_each)
    messages = history()
    text = renderer.render(messages, TOOLS, add_generation_prompt=False)
    generation = mf.QWEN3_GENERATION_PROMPT[qwen3_variant]
    turns = [m["content"] for m in messages if m["role"] == "assistant"]
    assert text.count(generation) == len(turns) == 4
    for content in turns:
        assert f"{generation}{content}<|im_end|>\n" in text
    assert text.count("<think>") == (len(turns) if qwen3_variant == "hybrid" else 0)


def test_template_that_drops_assistant_content_is_refused() -> None:
    template = ("{% for m in messages %}{% if m.role != 'assistant' %}<{{ m.role }}>{{ m.content }}"
                "{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    renderer = PromptRenderer(template)
    assert renderer.render([{"role": "user", "content": "hi"}]) == "<user>hi<assistant>"
    with pytest.raises(PromptError, match="drops or repeats"):
        renderer.render([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"},
                         {"role": "user", "content": "again"}])


def test_template_raise_exception_becomes_prompt_error() -> None:
    renderer = PromptRenderer("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(PromptError, match="roles must alternate"):
        renderer.render([{"role": "user", "content": "hi"}])
    with pytest.raises(PromptError):
        PromptRenderer("")


def test_hermes_block_is_short() -> None:
    block = hermes_tool_block([])
    assert len(block) < 400
    assert block.endswith('<tool_call>{"name": <function-name>, "arguments": <args-json-object>}</tool_call>')


def test_system_prompt_uses_the_users_zone() -> None:
    now = datetime(2026, 11, 29, 20, 30, tzinfo=timezone.utc)  # Sunday in UTC, Monday in Seoul
    text = system_prompt(now, "Asia/Seoul", "You manage the user's calendar.")
    assert text.startswith("You manage the user's calendar.\n")
    assert "Today: 2026-11-30 Monday (Asia/Seoul, UTC+09:00)." in text
    assert "ask" in text and "confirm" in text
    # the domain's language writes the date again in its own words, for the same local day
    assert "오늘: 2026년 11월 30일 월요일 (Asia/Seoul)." in system_prompt(now, "Asia/Seoul", language=CALENDAR_LANGUAGE)
    assert "Today: 2026-11-29 Sunday (America/New_York, UTC-05:00)." in system_prompt(now, "America/New_York")


def test_system_prompt_is_the_same_all_day_and_changes_with_the_date() -> None:
    seoul = ZoneInfo("Asia/Seoul")
    morning = system_prompt(datetime(2026, 11, 30, 0, 1, tzinfo=seoul), "Asia/Seoul", "Calendar.")
    assert system_prompt(datetime(2026, 11, 30, 10, 7, tzinfo=seoul), "Asia/Seoul", "Calendar.") == morning
    assert system_prompt(datetime(2026, 11, 30, 23, 59, tzinfo=seoul), "Asia/Seoul", "Calendar.") == morning
    assert "00:01" not in morning and "10:07" not in morning  # no time of day at all
    next_day = system_prompt(datetime(2026, 12, 1, 0, 0, tzinfo=seoul), "Asia/Seoul", "Calendar.")
    assert next_day != morning and "2026-12-01 Tuesday" in next_day
    # the UTC offset is a day-level fact too: it changes on the day the clocks change
    berlin = ZoneInfo("Europe/Berlin")
    assert "UTC+02:00" in system_prompt(datetime(2026, 10, 24, 12, 0, tzinfo=berlin), "Europe/Berlin")
    assert "UTC+01:00" in system_prompt(datetime(2026, 10, 25, 12, 0, tzinfo=berlin), "Europe/Berlin")


def test_system_prompt_says_that_user_messages_carry_their_send_time() -> None:
    text = system_prompt(datetime(2026, 11, 30, 9, 0), "Asia/Seoul")
    assert "Each user message begins with the local time it was sent, e.g. [14:05]." in text
    assert "[14:05] 같은 표시는 그 메시지를 보낸 현지 시각" in system_prompt(
        datetime(2026, 11, 30, 9, 0), "Asia/Seoul", language=CALENDAR_LANGUAGE)
    assert unstamp_user_text("[14:05] hi") == "hi"  # the example is the stamp's own format


def test_a_user_message_is_stamped_with_its_local_send_time() -> None:
    now = datetime(2026, 11, 29, 20, 30, tzinfo=timezone.utc)
    assert stamp_user_text(now, "Asia/Seoul", "내일 3시 치과") == "[05:30] 내일 3시 치과"
    assert stamp_user_text(now, "America/New_York", "dentist") == "[15:30] dentist"
    assert stamp_user_text(datetime(2026, 11, 30, 9, 5), "Asia/Seoul", "x") == "[09:05] x"  # naive = local
    assert unstamp_user_text(stamp_user_text(now, "UTC", "[10:00] typed by the user")) == "[10:00] typed by the user"
    assert unstamp_user_text("no stamp [10:00] ") == "no stamp [10:00] "


# ------------------------------------------------------------------ the compact tool block


def calendar_tools() -> list[dict]:
    from tools.calendar.store import CalendarStore
    from tools.calendar.tools import build_registry

    store = CalendarStore(":memory:")
    try:
        return build_registry(store).schemas()
    finally:
        store.close()


@pytest.mark.parametrize("model", ["smollm2", "tiny_qwen3"])
def test_the_compact_block_costs_at_most_40_percent_of_the_full_one(model: str, request: pytest.FixtureRequest) -> None:
    llm = llama_cpp.Llama(str(request.getfixturevalue(model)), vocab_only=True, verbose=False)
    tools = calendar_tools()
    full, compact = (len(llm.tokenize(hermes_tool_block(tools, block).encode(), add_bos=False))
                     for block in ("full", "compact"))
    assert compact <= 0.4 * full, (full, compact)


def test_the_compact_block_keeps_names_types_and_what_is_required() -> None:
    [create] = [t for t in compact_tools(calendar_tools()) if t["function"]["name"] == "create_event"]
    parameters = create["function"]["parameters"]
    assert create["function"]["description"] == "Add an event."  # the rest of the sentence is a detail
    assert parameters["required"] == ["title", "date"]  # start_time: not for an all-day event
    assert parameters["properties"]["attendees"] == {"type": "array", "items": {"type": "string"}}
    text = json.dumps(parameters)
    assert not any(word in text for word in ('"pattern"', '"maxLength"', '"default"', '"maximum"', '"description"'))
    block = hermes_tool_block(calendar_tools(), "compact")
    assert ("create_event(title: string, date: string, start_time?: string, duration_minutes?: integer, "
            "end_time?: string, all_day?: boolean, end_date?: string, repeat?: {freq: "
            '"daily"|"weekly"|"monthly"|"yearly", interval?: integer, by_weekday?: '
            '"MO"|"TU"|"WE"|"TH"|"FR"|"SA"|"SU"[], until?: string, count?: integer}, attendees?: string[],') in block


def test_short_descriptions_drop_examples_and_later_sentences() -> None:
    assert short_description("One day, YYYY-MM-DD (내일 → e.g. 2026-12-01).") == "One day, YYYY-MM-DD."
    assert short_description("Short title, e.g. '치과 예약' or 'Team sync'.") == "Short title"
    assert short_description("Delete an event by id. Needs the user's confirmation.") == "Delete an event by id."


@pytest.mark.parametrize("model", ["smollm2", "tiny_qwen3"])
def test_the_renderer_shows_the_compact_tools_to_either_kind_of_template(model: str, request: pytest.FixtureRequest) -> None:
    """Qwen3's template renders the (compact) schemas itself; for SmolLM2 the block is ours."""
    path = request.getfixturevalue(model)
    messages = history()[:2]
    full = renderer_for(path).render(messages, calendar_tools())
    compact = renderer_for(path, tool_block="compact").render(messages, calendar_tools())
    assert '"pattern"' in full and '"pattern"' not in compact
    assert "create_event" in compact and len(compact) < len(full) / 2


def test_an_unknown_tool_block_is_a_configuration_error() -> None:
    from agent.config import load_settings

    assert load_settings(environ={"AGENT_TOOL_BLOCK": "compact", "AGENT_CONFIG": "/nonexistent"}).tool_block == "compact"
    with pytest.raises(ValueError, match="tool_block: expected one of full, compact"):
        load_settings(environ={"AGENT_TOOL_BLOCK": "tiny", "AGENT_CONFIG": "/nonexistent"})
    with pytest.raises(ValueError):
        PromptRenderer("{{ messages }}", tool_block="tiny")


def test_the_short_prompt_style_says_each_rule_once_in_english() -> None:
    """SmolLM2-class models get the short style: the date, the stamp, asking and confirming,
    each once and without the Korean duplicates (they were most of the full prompt's tokens)."""
    now = datetime(2026, 11, 29, 20, 30, tzinfo=timezone.utc)
    full = system_prompt(now, "Asia/Seoul", "Calendar, long.", "full", "Calendar.", language=CALENDAR_LANGUAGE)
    short = system_prompt(now, "Asia/Seoul", "Calendar, long.", "short", "Calendar.", language=CALENDAR_LANGUAGE)
    assert full.startswith("Calendar, long.\n") and short.startswith("Calendar.\n")
    assert "Today: 2026-11-30 Monday (Asia/Seoul)." in short
    assert "Each user message starts with its local time, e.g. [14:05]." in short
    assert "ask" in short and "confirm" in short
    assert not any("\uac00" <= ch <= "\ud7a3" for ch in short)  # no Hangul at all
    lines = short.splitlines()
    assert len(lines) == len(set(lines)) and len(short.encode()) < len(full.encode()) / 2  # bytes: ~tokens of Hangul
    # a domain without a short text keeps its own in the short style
    assert system_prompt(now, "Asia/Seoul", "Calendar, long.", "short").startswith("Calendar, long.\n")
    with pytest.raises(ValueError, match="unknown prompt style 'tiny'"):
        system_prompt(now, "Asia/Seoul", style="tiny")


def test_the_prompt_style_of_a_conversation_is_read_from_its_system_message() -> None:
    from agent.prompt import prompt_style_of

    now = datetime(2026, 11, 30, 9, 0)
    for style in ("full", "short"):
        system = {"role": "system", "content": system_prompt(now, "Asia/Seoul", "Calendar.", style)}
        assert prompt_style_of([system, {"role": "user", "content": "hi"}]) == style
    assert prompt_style_of([{"role": "user", "content": "hi"}]) is None
    assert prompt_style_of([{"role": "system", "content": "You are a pirate."}]) is None
    assert prompt_style_of([]) is None


def test_the_prompt_style_setting_is_checked_and_reaches_the_runtimes_system_prompt() -> None:
    from agent.app import system_prompt_factory
    from agent.config import load_settings
    from agent.domain import Domain
    from agent.tools import Registry

    env = {"AGENT_PROMPT_STYLE": "short", "AGENT_CONFIG": "/nonexistent"}
    settings = load_settings(environ=env)
    assert settings.prompt_style == "short"
    assert load_settings(environ={"AGENT_CONFIG": "/nonexistent"}).prompt_style == "full"
    with pytest.raises(ValueError, match="prompt_style: expected full or short"):
        load_settings(environ={**env, "AGENT_PROMPT_STYLE": "tiny"})
    domain = Domain(name="d", registry=Registry.of([]), prompt="Long domain text.", short_prompt="Short.")
    clock = lambda: datetime(2026, 11, 30, 0, 0, tzinfo=timezone.utc)  # noqa: E731
    text = system_prompt_factory(settings, domain, clock)()
    assert text == system_prompt(clock(), settings.tz, "Long domain text.", "short", "Short.")
    assert text.startswith("Short.\n")


def test_the_prompt_settings_are_the_settings_of_the_same_name_read_the_same_way() -> None:
    """``Settings.prompt_settings`` is the value every layer carries: each field comes from the setting of
    its name (its environment variable too), and the defaults agree, since old eval and ei runs
    that lack a key are compared as its ``PromptSettings`` default."""
    from agent.config import ENV_NAMES, Settings, load_settings

    assert Settings().prompt_settings == PromptSettings()
    env = {"AGENT_CONFIG": "/nonexistent", "AGENT_PROMPT_STYLE": "short", "AGENT_DATE_GROUNDING": "true",
           "AGENT_TIME_NOTES": "true", "AGENT_DATE_NOTES": "true"}
    assert load_settings(environ=env).prompt_settings == PromptSettings("short", True, True, True)
    assert set(PromptSettings().to_dict()) <= set(ENV_NAMES)


def test_the_date_list_names_each_of_the_next_14_days_by_week_weekday_and_language() -> None:
    from agent.prompt import date_list

    thursday = datetime(2039, 7, 7, 9, 30, tzinfo=ZoneInfo("Asia/Seoul"))
    lines = date_list(thursday, "Asia/Seoul", labels=CALENDAR_LANGUAGE.date_labels)
    assert lines[0] == ("이번 주 this week: 2039-07-08 (금 Fri, 내일 tomorrow), "
                        "2039-07-09 (토 Sat, 모레 day after tomorrow), 2039-07-10 (일 Sun)")
    assert lines[1].startswith("다음 주 next week: 2039-07-11 (월 Mon), 2039-07-12 (화 Tue), ")
    assert lines[1].endswith("2039-07-17 (일 Sun)")
    assert lines[2] == ("다다음 주 week after next: 2039-07-18 (월 Mon), 2039-07-19 (화 Tue), "
                        "2039-07-20 (수 Wed), 2039-07-21 (목 Thu)")
    assert sum(line.count("2039-") for line in lines) == 14
    # on a Sunday, tomorrow is already next week's Monday: it is listed there, marked as tomorrow
    sunday = date_list(datetime(2039, 7, 10, 12, 0), "Asia/Seoul", labels=CALENDAR_LANGUAGE.date_labels)
    assert sunday[0].startswith("다음 주 next week: 2039-07-11 (월 Mon, 내일 tomorrow), 2039-07-12 (화 Tue, 모레")


def test_next_weekday_in_the_date_list_is_the_day_the_calendar_scenarios_expect() -> None:
    """The scenarios say "next Monday/Tuesday/Wednesday" (다음 주 월/화/수요일) on Thursdays to
    Saturdays and mean the next such day (tools/calendar/lab/scenarios.py); looking it up in the
    list's 다음 주 line must give that day, or the list would teach the wrong answer."""
    from datetime import timedelta

    from agent.prompt import date_list

    for today_day in (7, 8, 9):  # Thursday .. Saturday, 2039-07
        today = datetime(2039, 7, today_day, 10, 0)
        next_week = date_list(today, "Asia/Seoul", labels=CALENDAR_LANGUAGE.date_labels)[1]
        for weekday, (ko, en) in enumerate((("월", "Mon"), ("화", "Tue"), ("수", "Wed"))):
            expected = today.date() + timedelta(days=(weekday - today.weekday()) % 7 or 7)
            assert f"{expected.isoformat()} ({ko} {en}" in next_week


def test_the_date_grounded_prompt_changes_once_a_local_day_so_the_prefix_cache_keeps_it() -> None:
    seoul = ZoneInfo("Asia/Seoul")
    calendar = {"language": CALENDAR_LANGUAGE}
    morning = system_prompt(datetime(2039, 7, 7, 0, 1, tzinfo=seoul), "Asia/Seoul", "Cal.", "short", "", True, **calendar)
    night = system_prompt(datetime(2039, 7, 7, 23, 59, tzinfo=seoul), "Asia/Seoul", "Cal.", "short", "", True, **calendar)
    assert morning == night
    # 15:30 UTC is already the next day in Seoul: the list moves with the user's day, not UTC's
    after_midnight = system_prompt(datetime(2039, 7, 7, 15, 30, tzinfo=timezone.utc), "Asia/Seoul", "Cal.", "short", "", True,
                                   **calendar)
    assert after_midnight != night and "2039-07-09 (토 Sat, 내일 tomorrow)" in after_midnight
    lines = morning.splitlines()
    assert lines[1] == "Today: 2039-07-07 Thursday (Asia/Seoul)."
    assert lines[2] == "Days ahead (look the day up, do not count):" and lines[3].startswith("이번 주 this week: ")
    # without the setting the prompt is exactly what it was
    assert "Days ahead" not in system_prompt(datetime(2039, 7, 7, 9, 0), "Asia/Seoul", "Cal.", "short")
    full = system_prompt(datetime(2039, 7, 7, 9, 0), "Asia/Seoul", "Cal.", "full", "", True, **calendar).splitlines()
    assert full[2].startswith("오늘: ") and full[3].startswith("Days ahead")  # after the date in both languages


def test_the_date_grounding_setting_is_checked_and_renders_the_same_prompt_in_runtime_eval_and_export(
        tmp_path: Path) -> None:
    """One scenario's system message, as the runtime (its system prompt factory, clock at the
    scenario's now), an eval episode (the real runner, scripted oracle) and a GRPO export row
    render it with date_grounding on: the same bytes, so what is trained is what is served."""
    from agent.app import system_prompt_factory
    from agent.backends.scripted import ScriptedBackend
    from agent.config import load_settings
    from agent.domain import load_domain
    from agent.eval.runner import RunOptions, run_eval
    from agent.eval.suite import load_eval_suite
    from agent.export.grpo import prompt_rows

    env = {"AGENT_DATE_GROUNDING": "true", "AGENT_PROMPT_STYLE": "short", "AGENT_CONFIG": "/nonexistent",
           "AGENT_DATA_DIR": str(tmp_path / "data")}
    settings = load_settings(environ=env)
    assert settings.date_grounding is True
    assert load_settings(environ={"AGENT_CONFIG": "/nonexistent"}).date_grounding is False
    with pytest.raises(ValueError, match="date_grounding"):
        load_settings(environ={**env, "AGENT_DATE_GROUNDING": "sometimes"})

    suite = load_eval_suite(settings)
    prompt_settings = PromptSettings(prompt_style="short", date_grounding=True)
    row = prompt_rows(suite, split="train", per_template=1, prompt_settings=prompt_settings)[0]
    scenario = next(s for s in suite.scenarios(split=None, per_template=1, seed=0) if s.id == row["scenario_id"])
    exported = row["prompt"][0]["content"]

    records = run_eval(suite, [scenario], lambda s, k: ScriptedBackend(suite.policies["oracle"](s)),
                       RunOptions(out_dir=tmp_path / "eval", progress=False, prompt_settings=prompt_settings))
    evaluated = records[0].messages[0]["content"]

    domain = load_domain(settings)
    try:
        served = system_prompt_factory(settings, domain, scenario.now_datetime)()
    finally:
        domain.close()
    assert served.encode() == evaluated.encode() == exported.encode()
    assert "Days ahead (look the day up, do not count):" in served
