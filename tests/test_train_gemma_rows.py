"""Training rows for a Gemma base: the turns the runtime serves, though the GGUF has no template.

Google's Gemma 3 270M GGUF carries no chat template; the runtime serves it with the Gemma chat
format's own (``agent.formats.gemma``). A base prepared for training gets the same template
(``agent.train.base.served_template``), so a row trains on the bytes that are served, and the
model learns to end its turn with ``<end_of_turn>``, the format's stop.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from agent.formats.chat_format import format_for
from agent.train.base import served_template
from agent.train.sft import assistant_spans
from tests import model_fixtures as mf

CALL = '<tool_call>\n{"name": "search_events", "arguments": {"date": "2026-12-07"}}\n</tool_call>'


def test_a_gguf_without_a_template_trains_with_its_formats_template(smollm2: Path) -> None:
    gemma = format_for("unknown", "gemma3")
    assert served_template(mf.gemma_base_test_path()) == gemma.template and gemma.template
    assert served_template(smollm2) is None  # its own template is used; Hermes brings none


def test_gemma_rows_train_each_model_turn_and_its_end_of_turn() -> None:
    tokenizer = SimpleNamespace(chat_template=served_template(mf.gemma_base_test_path()),
                                bos_token="<bos>", eos_token="<eos>")
    messages = [{"role": "system", "content": "You manage the calendar.\n\n# Tools"},
                {"role": "user", "content": "[08:00] 내일 일정 뭐야?"},
                {"role": "assistant", "content": CALL},
                {"role": "user", "content": '<tool_response>\n{"ok": true, "data": {"count": 0}}\n</tool_response>'},
                {"role": "assistant", "content": "내일은 일정이 없어요."}]
    [(rendered, spans)] = assistant_spans(tokenizer, messages, None)
    assert rendered.text.startswith("<bos><start_of_turn>user\nYou manage the calendar.\n\n# Tools\n\n[08:00] 내일")
    assert [rendered.text[a:b] for a, b in spans] == [CALL + "<end_of_turn>\n", "내일은 일정이 없어요.<end_of_turn>\n"]
    assert rendered.text.count("<start_of_turn>model\n") == 2 and "system" not in rendered.text
