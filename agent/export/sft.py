"""SFT export: verified episodes → rows TRL's ``SFTTrainer`` reads (``messages`` + ``tools``).

Two ways to write an assistant turn, because the tokens trained on must be the tokens the
runtime shows the model at inference:

- ``structured`` (templates that render tools, e.g. Qwen3): ``content`` is the visible text
  without the call blocks, calls go to ``tool_calls`` with ``arguments`` as a dict (Qwen3's
  template accepts a dict or a string), results are ``tool`` messages. The template then
  re-renders the calls; turns whose raw text is not exactly that canonical rendering are
  counted (``noncanonical_turns``) so a mismatch is visible, not silent.
- ``exact`` (templates that ignore tools, e.g. SmolLM2's ChatML): the messages as the runtime
  prepares them for such a template — the Hermes tool block appended to the system message,
  each assistant turn's exact raw text in ``content``, tool results as user turns in
  ``<tool_response>`` tags — so rendering the row with the plain template gives the runtime's prompt.

Each episode is read and written in the chat format it was played with: its record names it
(``Episode.chat_format``, from the backend's ``identity()``; records from before formats were
named were all Hermes), and each row names it too (``chat_format``).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from agent.export.episodes import Episode
from agent.formats.chat_format import DEFAULT_FORMAT, ChatFormat, format_named
from agent.formats.tool_view import shown_tools
from agent.prompt import date_grounding_of, prompt_style_of

FORMATS = ("exact", "structured")


class NotRepresentable(ValueError):
    """The conversation cannot be written in the structured format without changing it."""


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _format(chat_format: ChatFormat | None) -> ChatFormat:
    return chat_format or format_named(DEFAULT_FORMAT)


def canonical_text(content: str, calls: list[tuple[str, Any]], chat_format: ChatFormat | None = None) -> str:
    """How a Qwen-style template re-renders (content, tool_calls): content, then one block per call
    (in ``chat_format``'s tags; None: the default format's)."""
    fmt = _format(chat_format)
    return "\n".join(([content] if content else []) + [fmt.format_tool_call(n, a) for n, a in calls])


def to_structured(messages: list[dict[str, Any]],
                  chat_format: ChatFormat | None = None) -> tuple[list[dict[str, Any]], int]:
    """OpenAI-format messages with parsed calls; also the number of non-canonical assistant turns."""
    fmt = _format(chat_format)
    out: list[dict[str, Any]] = []
    noncanonical = 0
    for m in messages:
        role = m.get("role")
        content = m.get("content") or ""
        if role == "assistant":
            parsed = fmt.parse_reply(content)
            listed = m.get("tool_calls")
            if listed is None and fmt.call_open in content and not parsed.tool_calls and parsed.problems:
                raise NotRepresentable("an assistant turn holds a tool call the parser could not read")
            if listed is not None:
                calls = [(c["function"]["name"], _arguments(c["function"]["arguments"])) for c in listed]
                ids = [c.get("id", f"call_{i}") for i, c in enumerate(listed)]
            else:
                calls = [(c.name, c.arguments) for c in parsed.tool_calls]
                ids = [f"call_{i}" for i in range(len(calls))]
            message: dict[str, Any] = {"role": "assistant", "content": parsed.content}
            if parsed.reasoning:
                message["reasoning_content"] = parsed.reasoning
            if calls:
                message["tool_calls"] = [
                    {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                    for i, (n, a) in zip(ids, calls)
                ]
            if parsed.reasoning or content.strip() != canonical_text(parsed.content, calls, fmt):
                noncanonical += 1
            out.append(message)
        elif role == "tool":
            out.append({"role": "tool", "content": content, "tool_call_id": m.get("tool_call_id", ""),
                        "name": m.get("name", "")})
        else:
            out.append({"role": str(role), "content": content})
    return out, noncanonical


def served_messages(structured: list[dict[str, Any]], chat_format: ChatFormat | None = None) -> list[dict[str, Any]]:
    """The inverse of ``to_structured``: each assistant turn back as the raw text the runtime keeps.

    The runtime's history holds what the model wrote (reasoning, content, call blocks), and its
    renderer splices that text into later prompts; training renders rows through the same
    renderer (``agent.train.sft.assistant_spans``), so it needs the same text back. For the
    turns ``to_structured`` found canonical (``noncanonical_turns`` counts the others) this is
    byte for byte what the model wrote."""
    fmt = _format(chat_format)
    out: list[dict[str, Any]] = []
    for m in structured:
        if m.get("role") != "assistant":
            out.append(dict(m))
            continue
        calls = [(c["function"]["name"], _arguments(c["function"]["arguments"])) for c in m.get("tool_calls") or []]
        text = canonical_text(str(m.get("content") or ""), calls, fmt)
        reasoning = m.get("reasoning_content")
        if reasoning:
            text = f"{fmt.think_open}\n{reasoning}\n{fmt.think_close}\n\n{text}"
        out.append({"role": "assistant", "content": text})
    return out


def to_exact(messages: list[dict[str, Any]], tools: list[dict[str, Any]],
             tool_block: str = "full", chat_format: ChatFormat | None = None) -> list[dict[str, Any]]:
    """The messages a tool-less template must see to render exactly the runtime's prompt."""
    return _format(chat_format).plain_chat(messages, tools, tool_block)


@dataclass
class Selection:
    """Which episodes to keep, by verifier outcome, split and template."""

    min_reward: float | None = None
    success_only: bool = False
    split: str | None = None
    per_template_cap: int | None = None

    def wants_outcome(self) -> bool:
        return self.min_reward is not None or self.success_only

    def admits(self, episode: Episode) -> str | None:
        """None if kept, else the reason it is dropped (for the report)."""
        if self.split and episode.split != self.split:
            return "other split"
        if self.wants_outcome() and episode.reward is None and episode.success is None:
            return "not scored"
        if self.success_only and not episode.success:
            return "not a success"
        if self.success_only and episode.policy_ok is False:
            return "succeeded but broke a rule"  # e.g. tried to delete before consent: not to be imitated
        if self.min_reward is not None and (episode.reward is None or episode.reward < self.min_reward):
            return "reward below minimum"
        return None


@dataclass
class SftReport:
    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)
    noncanonical_turns: int = 0
    assistant_format: str = "structured"

    def summary(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "assistant_format": self.assistant_format,
            "per_split": dict(Counter(r["split"] for r in self.rows)),
            "per_template": dict(Counter(r["template"] for r in self.rows)),
            "dropped": dict(self.dropped),
            "noncanonical_turns": self.noncanonical_turns,
        }


def conversation_key(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    """Identical conversations (same messages and tools) get the same key: repeats train nothing new."""
    text = json.dumps([messages, tools], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_rows(episodes: Iterable[Episode], selection: Selection, assistant_format: str,
               default_tools: list[dict[str, Any]] | None = None, progress: bool = False,
               tool_block: str = "full") -> SftReport:
    """Select, convert, dedupe and cap. Best rewards first within a template, so caps keep the best.

    ``tool_block`` is the runtime's setting: the rows show the tools as the runtime would
    (``exact`` writes the block into the system message; ``structured`` rows carry the shown
    schemas, which the template renders), and each row names the block it was made with."""
    if assistant_format not in FORMATS:
        raise ValueError(f"assistant format must be one of {FORMATS}, got {assistant_format!r}")
    report = SftReport(assistant_format=assistant_format)
    episodes = list(episodes)
    ranked = sorted(episodes, key=lambda e: (-(e.reward if e.reward is not None else -1.0), e.scenario_id, e.source))
    seen: set[str] = set()
    per_template: Counter[str] = Counter()
    if progress:
        from tqdm import tqdm

        ranked = tqdm(ranked, desc="export sft", unit="episode")
    for episode in ranked:
        reason = selection.admits(episode)
        if reason:
            report.dropped[reason] += 1
            continue
        tools = episode.tools if episode.tools is not None else list(default_tools or [])
        fmt = format_named(episode.chat_format)
        try:
            if assistant_format == "structured":
                messages, noncanonical = to_structured(episode.messages, fmt)
            else:
                messages, noncanonical = to_exact(episode.messages, tools, tool_block, fmt), 0
        except NotRepresentable:
            report.dropped["not representable as structured"] += 1
            continue
        key = conversation_key(messages, tools)
        if key in seen:
            report.dropped["duplicate conversation"] += 1
            continue
        if selection.per_template_cap is not None and per_template[episode.template] >= selection.per_template_cap:
            report.dropped["over the per-template cap"] += 1
            continue
        seen.add(key)
        per_template[episode.template] += 1
        report.noncanonical_turns += noncanonical
        report.rows.append({
            "messages": messages,
            "tools": shown_tools(tools, tool_block),
            "tool_block": tool_block,
            "prompt_style": prompt_style_of(episode.messages),
            "date_grounding": date_grounding_of(episode.messages),
            "assistant_format": assistant_format,
            "chat_format": fmt.name,
            "split": episode.split,
            "template": episode.template,
            "scenario_id": episode.scenario_id,
            "seed": episode.seed,
            "reward": episode.reward,
            "success": episode.success,
        })
    return report


def _arrow_safe(row: dict[str, Any]) -> dict[str, Any]:
    """Row for a ``datasets`` table: ``tools`` and call ``arguments`` as JSON strings.

    Arrow turns a column of differently-shaped dicts into one struct holding every key, so a
    dict-valued column would come back with ``null`` for the keys a row lacked and the template
    would render them. TRL reads ``tools`` given as a JSON string; Qwen3's template writes a
    string ``arguments`` verbatim, which is the same text ``json.dumps`` of the dict gives.
    """
    messages = []
    for m in row["messages"]:
        if m.get("tool_calls"):
            m = {**m, "tool_calls": [
                {**c, "function": {**c["function"], "arguments": c["function"]["arguments"]
                                   if isinstance(c["function"]["arguments"], str)
                                   else json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
                for c in m["tool_calls"]]}
        messages.append(m)
    return {**row, "messages": messages, "tools": json.dumps(row["tools"], ensure_ascii=False)}


def write_sft(report: SftReport, out: Path) -> dict[str, Any]:
    """``out/sft.jsonl`` always; ``out/dataset`` (a DatasetDict by split) when ``datasets`` is installed."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "sft.jsonl").open("w", encoding="utf-8") as f:
        for row in report.rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    summary = report.summary()
    try:
        import datasets
    except ImportError:
        summary["dataset"] = None
    else:
        by_split: dict[str, list[dict[str, Any]]] = {}
        for row in report.rows:
            by_split.setdefault(row["split"], []).append(_arrow_safe(row))
        dataset = datasets.DatasetDict({s: datasets.Dataset.from_list(rows) for s, rows in by_split.items()})
        dataset.save_to_disk(str(out / "dataset"))
        summary["dataset"] = str(out / "dataset")
    (out / "sft_summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return summary


def template_renders_tools(model_path: Path) -> bool:
    """Does this GGUF's chat template render ``tools``? (Decides the default assistant format.)"""
    from models.check import chat_template_of
    from models.gguf_header import HeaderReader
    from models.templates import template_family

    reader = HeaderReader(model_path)
    try:
        return template_family(chat_template_of(reader)).renders_tools
    finally:
        reader.close()
