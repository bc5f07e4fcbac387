"""The runtime's last line of defence: no tool result, of any domain, fills the model's context."""

from __future__ import annotations

import json

from pydantic import BaseModel

from agent.gate import TurnLedger, run_call
from agent.formats import ToolCall
from agent.result_ceiling import MAX_RESULT_CHARS
from agent.tools import Registry, Tool, ToolResult


class _NoArgs(BaseModel):
    pass


def _flooding_registry(data: object) -> Registry:
    """A tool that forgot to bound its result, as a careless domain would write it."""
    return Registry.of([Tool("dump", "Return everything.", _NoArgs, lambda _args: ToolResult.success(data))])


def _run(registry: Registry) -> str:
    record = run_call(ToolCall("dump", {}), registry, approver=None, ledger=TurnLedger())  # type: ignore[arg-type]
    return record.result


def test_a_megabyte_result_reaches_the_model_cut_with_words_it_can_act_on() -> None:
    text = _run(_flooding_registry({"rows": ["\"quoted\" \\ row " * 8] * 10_000}))
    assert len(text) <= MAX_RESULT_CHARS
    body = json.loads(text)
    assert body["ok"] is True
    assert "This result was cut at" in body["message"] and "asking for less" in body["message"]
    assert body["partial"].startswith('{"ok": true, "data": {"rows": ["\\"quoted\\"')


def test_a_failure_too_long_keeps_its_stable_code() -> None:
    result = ToolResult.failure("not_found", "x" * (MAX_RESULT_CHARS * 3))
    body = json.loads(result.to_text())
    assert (body["ok"], body["error"]) == (False, "not_found")
    assert len(result.to_text()) <= MAX_RESULT_CHARS


def test_control_characters_that_escape_six_times_longer_still_fit() -> None:
    text = ToolResult.success({"blob": "\x01" * 50_000}).to_text()
    assert len(text) <= MAX_RESULT_CHARS and json.loads(text)["partial"]


def test_a_result_under_the_ceiling_is_untouched() -> None:
    result = ToolResult.success({"rows": ["a"] * 100}, message="fine")
    assert result.to_text() == json.dumps({"ok": True, "message": "fine", "data": {"rows": ["a"] * 100}},
                                          ensure_ascii=False, separators=(", ", ": "))


def test_a_result_whose_error_field_is_itself_a_flood_still_fits() -> None:
    """The error is meant to be a short code; a tool that puts data there must not get past the
    ceiling (the cut once kept nearly the whole text: a negative slice)."""
    text = ToolResult.failure("e" * 13_000, "x" * 30_000).to_text()
    assert len(text) <= MAX_RESULT_CHARS
    assert json.loads(text)["ok"] is False
