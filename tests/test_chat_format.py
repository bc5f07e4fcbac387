"""One chat format per model, chosen once from its template family, and Gemma's turn format as
the second one: the registry, the Gemma template under the runtime's renderer, and the layers
that take the format from the backend (the loop, the REPL's view, export)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from agent.approval import ApproveAll
from agent.backends.scripted import ScriptedBackend
from agent.formats.chat_format import FORMATS, format_for, format_named, format_of
from agent.formats.gemma import GEMMA
from agent.formats.hermes import HERMES, HermesFormat
from agent.loop import Agent
from agent.prompt import PromptError, PromptRenderer
from agent.tools import Registry, Tool, ToolResult
from models.templates import FAMILIES, template_family

SYSTEM = "You manage a calendar."


class NoArguments(BaseModel):
    pass


TOOLS = [{"type": "function", "function": {
    "name": "search_events", "description": "Search events on a day.",
    "parameters": {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}}}]


# -- the registry -------------------------------------------------------------------------------


def test_every_template_family_maps_to_a_format() -> None:
    expected = {"2507": "hermes", "hybrid": "hermes", "chatml": "hermes", "gemma": "gemma", "unknown": "hermes"}
    assert set(FAMILIES) == set(expected)
    assert {family: format_for(family).name for family in FAMILIES} == expected


def test_a_gguf_without_a_template_gets_its_architectures_format() -> None:
    assert format_for("unknown", "gemma3") is GEMMA
    assert format_for("unknown", "qwen3") is HERMES
    assert format_for("chatml", "gemma3") is HERMES  # a template that names its family wins


def test_an_unknown_family_or_format_name_is_an_error_naming_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known families are 2507, hybrid, chatml"):
        format_for("mistral")
    with pytest.raises(ValueError, match="unknown chat format 'gemma2': known formats are gemma, hermes"):
        format_named("gemma2")
    assert format_named("gemma") is GEMMA and set(FORMATS) == {"gemma", "hermes"}


def test_the_gemma_template_is_detected_as_the_gemma_family_without_tools() -> None:
    family = template_family(GEMMA.template)
    assert (family.name, family.renders_tools) == ("gemma", False)
    assert PromptRenderer(GEMMA.template or "").chat_format is GEMMA


# -- Gemma's turns under the runtime's renderer ---------------------------------------------------


def gemma_renderer(tool_block: str = "full") -> PromptRenderer:
    return PromptRenderer(GEMMA.template or "", bos_token="<bos>", eos_token="<eos>", tool_block=tool_block)


def call(name: str, arguments: dict[str, Any]) -> str:
    return GEMMA.format_tool_call(name, arguments)


# A conversation as the loop stores it: each assistant turn the model's exact text (spaces,
# newlines and a call included), two results after a two-call reply, then a second user turn.
REPLIES = [
    "Let me look.\n" + call("search_events", {"date": "2026-12-08"}) + "\n" + call("search_events", {"date": "2026-12-09"}),
    "  You have a dentist at 10:00 on the 8th.  \n",
    call("search_events", {"date": "2026-12-10"}),
    "Nothing on the 10th.",
]


def conversation() -> list[dict[str, Any]]:
    result = lambda day: ToolResult.success({"date": day, "events": []}).to_text()  # noqa: E731
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "[09:00] What is on the 8th and the 9th?"},
        {"role": "assistant", "content": REPLIES[0]},
        {"role": "tool", "tool_call_id": "c0", "name": "search_events", "content": result("2026-12-08")},
        {"role": "tool", "tool_call_id": "c1", "name": "search_events", "content": result("2026-12-09")},
        {"role": "assistant", "content": REPLIES[1]},
        {"role": "user", "content": "[09:05] And the 10th?"},
        {"role": "assistant", "content": REPLIES[2]},
        {"role": "tool", "tool_call_id": "c2", "name": "search_events", "content": result("2026-12-10")},
        {"role": "assistant", "content": REPLIES[3]},
    ]


def test_each_gemma_prompt_and_reply_is_a_prefix_of_the_next_prompt() -> None:
    renderer = gemma_renderer()
    messages = conversation()
    steps = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    prompts = [renderer.render(messages[:i], TOOLS) for i in steps]
    for k, (i, prompt) in enumerate(zip(steps, prompts)):
        assert prompt.endswith("<start_of_turn>model\n")
        seen = prompt + messages[i]["content"]  # what the model read, then exactly what it wrote
        later = prompts[k + 1] if k + 1 < len(prompts) else renderer.render(messages, TOOLS)
        assert later.startswith(seen), f"step {k}"
    whole = renderer.render(messages, TOOLS, add_generation_prompt=False)
    assert all(whole.count(reply) == 1 for reply in REPLIES)  # each turn byte for byte, once


def test_the_system_text_and_tool_block_open_the_first_user_turn() -> None:
    text = gemma_renderer("compact").render(conversation()[:2], TOOLS)
    block = GEMMA.tool_block(TOOLS, "compact")
    assert text == (f"<bos><start_of_turn>user\n{SYSTEM}\n\n{block}\n\n[09:00] What is on the 8th and the 9th?"
                    "<end_of_turn>\n<start_of_turn>model\n")
    assert "system" not in text.replace(SYSTEM, "")  # no turn of its own


def test_tool_results_become_user_turns_in_tool_response_tags() -> None:
    text = gemma_renderer().render(conversation()[:5], TOOLS)
    result = ToolResult.success({"date": "2026-12-09", "events": []}).to_text()
    assert text.endswith(REPLIES[0] + "<end_of_turn>\n<start_of_turn>user\n<tool_response>\n"
                         + ToolResult.success({"date": "2026-12-08", "events": []}).to_text()
                         + "\n</tool_response><end_of_turn>\n<start_of_turn>user\n<tool_response>\n"
                         + result + "\n</tool_response><end_of_turn>\n<start_of_turn>model\n")


def test_a_gemma_reply_with_a_hermes_call_is_read_as_that_call() -> None:
    parsed = GEMMA.parse_reply("I'll check.\n<tool_call>\n{\"name\": \"search_events\", \"arguments\": "
                               "{\"date\": \"2026-12-08\"}}\n</tool_call>")
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("search_events", {"date": "2026-12-08"})]
    assert parsed.content == "I'll check." and parsed.problems == []
    assert GEMMA.stop_markers == ("<end_of_turn>",) and HERMES.stop_markers == ("<|im_end|>",)


def test_a_gguf_without_a_template_is_served_with_its_architectures_template_or_refused() -> None:
    names = {2: "<bos>", 1: "<eos>"}
    metadata = {"general.architecture": "gemma3", "tokenizer.ggml.bos_token_id": "2", "tokenizer.ggml.eos_token_id": "1"}
    renderer = PromptRenderer.from_metadata(metadata, names.__getitem__)
    assert renderer.chat_format is GEMMA and renderer.template_source == GEMMA.template
    assert renderer.render([{"role": "user", "content": "hi"}]).startswith("<bos><start_of_turn>user\nhi")
    with pytest.raises(PromptError, match="no chat template .* architecture 'llama'"):
        PromptRenderer.from_metadata({**metadata, "general.architecture": "llama"}, names.__getitem__)


# -- the layers take it from the backend ---------------------------------------------------------


def test_the_loop_reads_calls_in_the_backends_format() -> None:
    """A format whose call tags differ proves the loop asks the backend rather than Hermes."""
    other = HermesFormat(name="angle", call_open="<fn>", call_close="</fn>")
    registry = Registry.of([Tool("probe", "Probe.", NoArguments, lambda _: ToolResult.success({"ok": 1}))])
    reply = other.format_tool_call("probe", {})
    backend = ScriptedBackend([reply, "Done."])
    backend.chat_format = other
    turn = Agent(backend, registry).run_turn([{"role": "user", "content": "go"}], ApproveAll())
    assert [c.name for s in turn.steps for c in s.calls] == ["probe"]
    hermes_only = ScriptedBackend([reply, "Done."])  # the same text under Hermes is no call
    turn = Agent(hermes_only, registry).run_turn([{"role": "user", "content": "go"}], ApproveAll())
    assert [c.name for s in turn.steps for c in s.calls] == []


def test_backends_name_their_format_and_a_backend_without_one_runs_hermes() -> None:
    assert ScriptedBackend([], chat_format="gemma").identity()["chat_format"] == "gemma"
    assert format_of(ScriptedBackend([], chat_format="gemma")) is GEMMA
    assert format_of(object()) is HERMES
    with pytest.raises(ValueError, match="known formats"):
        ScriptedBackend([], chat_format="chatml")


def test_the_repl_hides_gemmas_turn_end_and_calls() -> None:
    from agent.repl import VisibleText

    view = VisibleText(GEMMA)
    shown = "".join(view.feed(p) for p in ["Sure.", "<tool", "_call>{\"name\": 1}</tool_call> Done", "<end_of", "_turn>"])
    assert shown + view.flush() == "Sure. Done"


def test_export_rows_are_written_in_the_format_the_episode_was_played_in() -> None:
    from agent.export.episodes import Episode
    from agent.export.sft import Selection, build_rows

    messages = conversation()[:5]
    episode = Episode(messages=messages, scenario_id="s", template="t", split="train", chat_format="gemma")
    [row] = build_rows([episode], Selection(), "exact", TOOLS).rows
    assert row["chat_format"] == "gemma"
    assert row["messages"][3] == {"role": "user", "content": GEMMA.tool_response(messages[3]["content"])}
    old = Episode(messages=messages, scenario_id="s", template="t", split="train")  # before formats were named
    assert build_rows([old], Selection(), "exact", TOOLS).rows[0]["chat_format"] == "hermes"
    with pytest.raises(ValueError, match="unknown chat format"):
        build_rows([Episode(messages=messages, scenario_id="s", template="t", split="train", chat_format="x")],
                   Selection(), "exact", TOOLS)
    assert json.dumps(row, ensure_ascii=False)  # the row stays plain JSON


# Google's published Gemma 3 chat template (what a Hugging Face Gemma 3 checkpoint carries):
# system folded into the first user turn, content trimmed, roles made to alternate (its branches
# for text content; the image branch left out).
GOOGLE_GEMMA3 = (
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n    {%- set loop_messages = messages -%}\n{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- else -%}\n        {{ raise_exception(\"Invalid content type\") }}\n    {%- endif -%}\n"
    "    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n"
)


def test_googles_own_gemma3_template_is_the_gemma_family_and_is_served_with_ours() -> None:
    """A GGUF converted from a Hugging Face Gemma 3 carries Google's template, which raises on two
    user turns in a row (two tool results of one step): the format's own template serves it."""
    family = template_family(GOOGLE_GEMMA3)
    assert (family.name, family.renders_tools) == ("gemma", False)
    first = conversation()[:3]
    google = PromptRenderer(GOOGLE_GEMMA3, bos_token="<bos>", chat_format=HERMES)  # Google's, served as it is
    assert google.render(first, TOOLS) == gemma_renderer().render(first, TOOLS)
    whole = conversation()  # its first step has two results, so two user turns in a row
    with pytest.raises(PromptError, match="alternate"):
        google.render(whole, TOOLS)
    served = PromptRenderer(GOOGLE_GEMMA3, bos_token="<bos>")
    assert served.chat_format is GEMMA and served.template_source == GEMMA.template
    assert served.render(whole, TOOLS) == gemma_renderer().render(whole, TOOLS)
