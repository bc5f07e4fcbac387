"""The rows a train command reads, and the refusal of rows made for another serving setup.

An adapter is served with one tool block, one system prompt style, one date-grounding setting
and one assistant format (what the base's chat template renders); rows made with another would
train it on prompts it is never shown. So before anything heavy loads, each check reads what a
row recorded (or, for rows from before it was recorded, what its messages show) and refuses a
mismatch with a line that says which setting to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.train.trainer import TrainError


def read_rows(data: Path, split: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of an SFT export: a folder holding ``sft.jsonl`` or the file itself."""
    path = data / "sft.jsonl" if data.is_dir() else data
    if not path.is_file():
        raise TrainError(f"{data}: no sft.jsonl (pass the folder python -m agent export sft wrote, or the file)")
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise TrainError(f"{path}:{n}: not JSON ({exc})") from exc
            if not isinstance(row, dict) or not isinstance(row.get("messages"), list):
                raise TrainError(f"{path}:{n}: a row needs a 'messages' list")
            if split in (None, "all") or row.get("split") in (None, split):
                rows.append(row)
    if not rows:
        raise TrainError(f"{path}: no rows" + (f" in split {split!r} (use --split all?)" if split not in (None, "all") else ""))
    return rows[:limit] if limit else rows


def check_tool_block(rows: list[dict[str, Any]], tool_block: str) -> None:
    """Refuse rows exported with another tool block than the one the runtime will serve.

    An adapter trained on the compact block and served with the full one (or the reverse) sees
    a prompt it never saw in training: the tool-block setting must be the same for both.
    Rows from before the setting existed were made with the full block.
    """
    made_with = sorted({str(row.get("tool_block", "full")) for row in rows} - {tool_block})
    if made_with:
        raise TrainError(f"the rows were exported with tool_block={made_with[0]} but this setup serves "
                         f"tool_block={tool_block}; export again with the same setting, or set "
                         f"tool_block={made_with[0]} (AGENT_TOOL_BLOCK or config.toml)")


def check_prompt_style(rows: list[dict[str, Any]], prompt_style: str) -> None:
    """Refuse rows whose conversations were played with another system prompt style than the
    one the runtime serves (the ``prompt_style`` setting): the system prompt is most of a row,
    so an adapter trained on one style and served with the other sees a prompt it never saw.
    A row's recorded style wins; rows from before it was recorded are read from their system
    message (``agent.prompt.prompt_style_of``), and a system message no style wrote is left alone."""
    from agent.prompt import prompt_style_of

    styles = {row.get("prompt_style") or prompt_style_of(row.get("messages") or []) for row in rows}
    made_with = sorted(s for s in styles - {prompt_style, None})
    if made_with:
        raise TrainError(f"the rows were played with prompt_style={made_with[0]} but this setup serves "
                         f"prompt_style={prompt_style}; run the eval and export again with the same setting, "
                         f"or set prompt_style={made_with[0]} (AGENT_PROMPT_STYLE or config.toml)")


def check_date_grounding(rows: list[dict[str, Any]], date_grounding: bool) -> None:
    """Refuse rows played with the list of days ahead in the system prompt for a runtime that
    serves none (or the other way round): ~300 tokens of every row an adapter learned to read,
    or never saw. A row's recorded value wins, else its system message is read
    (``agent.prompt.date_grounding_of``); a system message no style wrote is left alone."""
    from agent.prompt import date_grounding_of

    def grounded(row: dict[str, Any]) -> bool | None:
        recorded = row.get("date_grounding")
        return recorded if isinstance(recorded, bool) else date_grounding_of(row.get("messages") or [])

    made_with = {grounded(row) for row in rows} - {date_grounding, None}
    if made_with:
        other = str(not date_grounding).lower()
        raise TrainError(f"the rows were played with date_grounding={other} but this setup serves "
                         f"date_grounding={str(date_grounding).lower()}; run the eval and export again with "
                         f"the same setting, or set date_grounding={other} (AGENT_DATE_GROUNDING or config.toml)")


def row_format(row: dict[str, Any]) -> str | None:
    """The assistant format a row was exported in: the row's own record, else what its messages show.

    ``structured`` rows carry calls in ``tool_calls`` and results as ``tool`` messages; ``exact``
    rows carry the call text in ``content`` and the tool block in the system message. A row
    with neither (a greeting exported before rows named their format) could be either: None.
    """
    recorded = row.get("assistant_format")
    if recorded in ("exact", "structured"):
        return str(recorded)
    messages = row.get("messages") or []
    if any(m.get("tool_calls") or m.get("role") == "tool" for m in messages):
        return "structured"
    if any(m.get("role") == "system" and "<tools>" in str(m.get("content") or "") for m in messages):
        return "exact"
    if any(m.get("role") == "user" and "<tool_response>" in str(m.get("content") or "") for m in messages):
        return "exact"
    return None


def check_row_format(rows: list[dict[str, Any]], base: Path) -> None:
    """Refuse rows whose assistant format the base's chat template does not render as the runtime does.

    A template that ignores ``tools`` (SmolLM2's ChatML) drops ``tool_calls`` and ``tool``
    messages: ``structured`` rows would train the model on conversations with the calls cut
    out. A template that renders tools (Qwen3) would show ``exact`` rows' results as user
    turns, which the runtime never does. Either way the adapter learns another prompt than
    the one it is served.
    """
    from agent.export.sft import template_renders_tools

    try:
        native = template_renders_tools(base)
    except Exception as exc:  # an unreadable template is check_model's business; say so here too
        raise TrainError(f"{base}: could not read its chat template ({exc})") from exc
    wanted = "structured" if native else "exact"
    found = sorted({f for f in (row_format(r) for r in rows) if f is not None} - {wanted})
    if found:
        renders = "renders" if native else "ignores"
        raise TrainError(f"the rows are in the {found[0]} assistant format but the chat template of {base} {renders} "
                         f"tools, which needs {wanted}: export again with --model {base} "
                         f"(or --assistant-format {wanted})")
