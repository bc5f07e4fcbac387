"""Prompt rendering with the model's own chat template, keeping earlier turns byte-identical.

Why this is not just "render the template": templates re-format history. Qwen3's template
drops or moves ``<think>`` blocks of earlier assistant turns and its generation prompt (with
``enable_thinking=False``) adds an empty think block that the history form of the same turn
does not have. Either breaks the KV prefix and costs a full re-evaluation every step.

So the renderer *splices*: the text of a history is the prompt the model saw at its last
assistant step, plus the exact raw text the model produced there, plus whatever the template
renders after that turn (found by rendering the turn with a sentinel as its content). The
prompt for step k is therefore a textual prefix of every later prompt, by construction, for
any template. The price: when a template would rewrite an earlier turn (e.g. strip its
reasoning), we keep what the model really saw and wrote instead. That is deliberate.

Templates that ignore ``tools`` (SmolLM2's plain ChatML, Gemma 3's turns) get the chat format's
own rendering (``ChatFormat.plain_chat``: its tool block written into the system message, ``tool``
messages as user turns in its result tags, as Qwen's template does). Which tools are shown, and
how (``full`` or ``compact``), is ``agent.formats.tool_view``'s decision.

The renderer is where a model's chat format is chosen (``agent.formats.chat_format.format_for``):
from the family of its template, or, for a GGUF without one, from its architecture, whose format
then brings the template (Gemma 3's). The backend hands that one format to everything else.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import jinja2

from agent.formats.chat_format import ChatFormat, format_for
from agent.formats.tool_view import shown_tools
from agent.language import ENGLISH, DateLabels, Language
from agent.segments import Rendered, mark, mark_except
from models.templates import compile_template, family_of

_SENTINEL = "\x00IJ_SPLICE_7f3a\x00"


class PromptError(ValueError):
    """The chat template cannot be used as it is (missing, raises, or drops content)."""


def _raise_exception(message: str) -> None:
    raise PromptError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class PromptRenderer:
    """Renders OpenAI-style messages + tools into prompt text with one chat template."""

    def __init__(self, template: str, *, bos_token: str = "", eos_token: str = "",
                 enable_thinking: bool = False, tool_block: str = "full",
                 chat_format: ChatFormat | None = None, architecture: str = "") -> None:
        """``chat_format``: the format to serve with (None: the one ``format_for`` gives this
        template's family and the model's ``architecture``)."""
        if not template:
            raise PromptError("the model has no chat template (tokenizer.chat_template is empty)")
        try:
            self._template = compile_template(template)
        except jinja2.TemplateError as exc:
            raise PromptError(f"chat template does not compile: {exc}") from exc
        self.template_source = template
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.enable_thinking = enable_thinking
        shown_tools([], tool_block)  # refuse an unknown setting here, not at the first turn
        self.tool_block = tool_block
        # Which template this is (``models.templates``), and whether it renders ``tools``: the
        # same probe that ``models verify`` and ``agent doctor`` report.
        self.family = family_of(self._template)
        self.chat_format: ChatFormat = chat_format or format_for(self.family.name, architecture)
        own = self.chat_format.template
        if own and template != own:
            # A format that brings a template serves with it, whatever its family's GGUF carries:
            # Google's Gemma 3 template raises when two user turns follow each other, which two
            # tool results in one step (or a turn that ended without a reply) always make.
            self._template, self.template_source = compile_template(own), own
            self.family = family_of(self._template)
        self.native_tools = self.family.renders_tools

    @classmethod
    def from_metadata(cls, metadata: dict[str, str], token_text: Any, *,
                      enable_thinking: bool = False, tool_block: str = "full") -> PromptRenderer:
        """Build from GGUF metadata (``Llama.metadata``); ``token_text(id) -> str`` names specials.

        A GGUF without ``tokenizer.chat_template`` is served with the template its architecture's
        chat format brings (Gemma 3's); for any other architecture it stays a ``PromptError``."""
        template = metadata.get("tokenizer.chat_template", "")
        architecture = ""  # asked only for a GGUF without a template: a template names its own family
        if not template:
            architecture = str(metadata.get("general.architecture") or "")
            template = format_for("unknown", architecture).template or ""
            if not template:
                raise PromptError(f"the model has no chat template (tokenizer.chat_template is empty) and no "
                                  f"chat format here brings one for its architecture {architecture or '(none)'!r}")

        def special(key: str) -> str:
            value = metadata.get(key)
            return token_text(int(value)) if value not in (None, "") else ""

        return cls(template, bos_token=special("tokenizer.ggml.bos_token_id"),
                   eos_token=special("tokenizer.ggml.eos_token_id"), enable_thinking=enable_thinking,
                   tool_block=tool_block, architecture=architecture)

    # -- template calls -------------------------------------------------------------------

    def _call(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
              add_generation_prompt: bool) -> str:
        try:
            return self._template.render(
                messages=messages, tools=tools or None, add_generation_prompt=add_generation_prompt,
                enable_thinking=self.enable_thinking, bos_token=self.bos_token, eos_token=self.eos_token,
                raise_exception=_raise_exception, strftime_now=_strftime_now,
            )
        except PromptError:
            raise
        except Exception as exc:  # template bugs surface as one clear error
            raise PromptError(f"chat template failed: {type(exc).__name__}: {exc}") from exc

    # -- message preparation --------------------------------------------------------------

    def _prepare(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Messages as the template should see them, each content marked as data
        (``agent.segments``): only the template's scaffolding may become special tokens.

        Assistant turns keep only their raw ``content`` (calls are already in it as text), marked
        but for the tags the model wrote. For templates without tool support, see
        ``ChatFormat.plain_chat`` (its tool block and result tags stay scaffolding).
        """
        own_tags = self.chat_format.own_tags
        marked: list[dict[str, Any]] = []
        for m in messages:
            content = str(m.get("content") or "")
            if m.get("role") == "assistant":
                marked.append({"role": "assistant", "content": mark_except(content, own_tags)})
            else:
                keep = {k: v for k, v in m.items() if k in ("role", "content", "name", "tool_call_id")}
                marked.append(keep | {"content": mark(content)})
        if not self.native_tools:
            return self.chat_format.plain_chat(marked, tools, self.tool_block)
        return marked

    def _after(self, msgs: list[dict[str, Any]], index: int, tools: list[dict[str, Any]] | None,
               add_generation_prompt: bool) -> str:
        """What the template renders after assistant turn ``index`` (sentinel as its content)."""
        probe = list(msgs)
        probe[index] = {"role": "assistant", "content": _SENTINEL}
        text = self._call(probe, tools, add_generation_prompt)
        if text.count(_SENTINEL) != 1:
            raise PromptError("the chat template drops or repeats an assistant turn's content; "
                              "history cannot be kept byte-identical with it")
        return text.split(_SENTINEL, 1)[1]

    # -- public ---------------------------------------------------------------------------

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
               *, add_generation_prompt: bool = True) -> str:
        """Prompt text for ``messages``; earlier assistant turns appear exactly as produced."""
        return self.render_parts(messages, tools, add_generation_prompt=add_generation_prompt).text

    def render_parts(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                     *, add_generation_prompt: bool = True) -> Rendered:
        """``render``'s text together with the spans of it that are data (``agent.segments``):
        what the tokenizers (llama.cpp here, Hugging Face in training) read as plain text."""
        tools = list(tools or [])
        msgs = self._prepare(messages, tools)
        native = shown_tools(tools, self.tool_block) if self.native_tools else None
        assistants = [i for i, m in enumerate(msgs) if m["role"] == "assistant"]
        if not assistants:
            return Rendered.split(self._call(msgs, native, add_generation_prompt))
        text = self._call(msgs[: assistants[0]], native, True)
        for prev, cur in zip(assistants, assistants[1:] + [None]):
            text += msgs[prev]["content"]
            if cur is None:
                text += self._after(msgs, prev, native, add_generation_prompt)
            else:
                text += self._after(msgs[:cur], prev, native, True)
        return Rendered.split(text)


_STAMP = re.compile(r"\[\d{2}:\d{2}\] ")  # what stamp_user_text puts in front
STAMP_EXAMPLE = "[14:05]"  # how the system prompt shows a stamp (a domain's companion line may too)


def _local(now: datetime, tz: str) -> datetime:
    """``now`` in the zone ``tz`` (a naive ``now`` is taken as already local there)."""
    return now.astimezone(ZoneInfo(tz)) if now.tzinfo else now.replace(tzinfo=ZoneInfo(tz))


def stamp_user_text(now: datetime, tz: str, text: str, *, time_notes: bool = False, date_notes: bool = False,
                    language: Language = ENGLISH) -> str:
    """A user message as it enters a conversation: ``[HH:MM] text``, the local time it was sent.

    The time of day lives in the user messages, not in the system prompt, so everything before
    the newest user message (system prompt, tool block, history) stays byte-identical from turn
    to turn and stays in the KV cache. The stamp is stored with the message, never re-rendered.
    ``time_notes`` (clock times said in words shown the 24-hour way) and ``date_notes`` (days
    named relative to today shown as dates) are the domain's to honour: its ``language.annotate``
    gets both flags and the local time; without one the message is stored as typed.
    """
    local = _local(now, tz)
    return f"[{local:%H:%M}] {language.annotate(text, local, time_notes, date_notes)}"


def unstamp_user_text(text: str) -> str:
    """What the user typed: ``text`` without the leading ``[HH:MM] `` stamp, if it has one."""
    found = _STAMP.match(text)
    return text[found.end():] if found else text


# The system prompt's styles (the ``prompt_style`` setting): ``full`` for capable models (each
# rule in English, and beside it in the users' language when the domain gives one), ``short``
# for SmolLM2-class models, whose rows must stay short enough to train on a CPU (each rule
# once, in English; the date once).
PROMPT_STYLES = ("full", "short")

DATE_LIST_DAYS = 14
DATE_LIST_HEADER = "Days ahead (look the day up, do not count):"  # the line before the list


def date_list(now: datetime, tz: str, days: int = DATE_LIST_DAYS, labels: DateLabels = ENGLISH.date_labels) -> list[str]:
    """The next ``days`` days after today, one line per Monday-to-Sunday week, each day with its
    weekday: ``next week: 2039-07-10 (Mon), 2039-07-11 (Tue), …``, tomorrow and the day after
    marked (``2039-07-06 (Thu, tomorrow)``); the words are the domain's ``labels``
    (``Language.date_labels``), which may name each day in two languages.

    Small models get weekdays wrong ("next Wednesday" became a Sunday in 5 of 12 dev failures
    of base SmolLM2): counting days from a date is arithmetic a 135M model cannot do, but
    finding Wed in the line that says next week is a lookup. "next X" is the X of the week after
    this one, which is how the calendar's scenarios read it (they are set on Thursdays to
    Saturdays). Grouped by week, each label is written once: the list costs ~300 SmolLM2 tokens
    (a date alone is 11). Only the date of ``now`` matters, so like the "Today" line the list
    changes once a day and the prefix cache keeps it.
    """
    today = _local(now, tz).date()
    week_of_today = today - timedelta(days=today.weekday())
    weeks: dict[int, list[str]] = {}
    for ahead in range(1, days + 1):
        day = today + timedelta(days=ahead)
        week = min((day - timedelta(days=day.weekday()) - week_of_today).days // 7, len(labels.weeks) - 1)
        near = f", {labels.near[ahead - 1]}" if ahead <= len(labels.near) else ""
        weeks.setdefault(week, []).append(f"{day.isoformat()} ({labels.weekdays[day.weekday()]}{near})")
    return [f"{labels.weeks[week]}: " + ", ".join(entries) for week, entries in weeks.items()]


# The ``full`` style's rules, in order, by the keys a domain's ``Language.companions`` uses to
# write a rule again in its users' language: on the line after the English one, but for
# ``brief``, whose companion shares its line (one short rule, one line).
FULL_RULES = ("today", "stamp", "missing", "confirm", "brief")
_FULL_STAMP_LINE = f"Each user message begins with the local time it was sent, e.g. {STAMP_EXAMPLE}."
_SHORT_STAMP_LINE = f"Each user message starts with its local time, e.g. {STAMP_EXAMPLE}."


def _full_lines(local: datetime, tz: str, language: Language) -> tuple[list[str], int]:
    """The ``full`` style's lines, each rule followed by its companion if the domain has one;
    and how many lines the date takes (the days-ahead list goes right after them)."""
    offset = local.strftime("%z")
    english = {
        "today": f"Today: {local:%Y-%m-%d} {local:%A} ({tz}, UTC{offset[:3]}:{offset[3:]}).",
        "stamp": _FULL_STAMP_LINE,
        "missing": "If required information is missing, ask the user; never guess it.",
        "confirm": "Before deleting or changing anything, ask the user to confirm.",
        "brief": "Keep answers short.",
    }
    companions = language.companions(local, tz)
    lines: list[str] = []
    dated = 1
    for key in FULL_RULES:
        companion = companions.get(key, "")
        if not companion:
            lines.append(english[key])
        elif key == "brief":
            lines.append(f"{english[key]} {companion}")
        else:
            lines += [english[key], *companion.split("\n")]
        if key == "today":
            dated = len(lines)
    return lines, dated


def system_prompt(now: datetime, tz: str, domain_prompt: str = "", style: str = "full",
                  short_domain_prompt: str = "", date_grounding: bool = False, *,
                  language: Language = ENGLISH) -> str:
    """The runtime's system message: the user's local date and zone, and how to behave.

    The model has no clock; small models guess dates and fill in missing details unless told
    not to. Only day-granularity facts are here (the text changes once a day, or when the UTC
    offset changes): the time of day is the stamp at the start of each user message
    (``stamp_user_text``). In the ``full`` style, the domain's ``language`` may write each rule
    again in its users' language, next to the English one. The ``short`` style says each rule
    once, in English: a 135M model reads a line in a non-Latin script as ~3 tokens per syllable,
    and in training every prompt token is paid for in every row (the duplicates were ~380 of
    ~640 tokens). ``short_domain_prompt`` is the domain's own short text, used by that style
    when the domain has one. ``date_grounding`` adds the next 14 days with their weekdays after
    the date line(s) (``date_list``, in the words of ``language.date_labels``), for small models.
    """
    if style not in PROMPT_STYLES:
        raise ValueError(f"unknown prompt style {style!r}: expected one of {', '.join(PROMPT_STYLES)}")
    local = _local(now, tz)
    if style == "short":
        lines = [
            f"Today: {local:%Y-%m-%d} {local:%A} ({tz}).",
            _SHORT_STAMP_LINE,
            "If a needed detail is missing, ask; never guess.",
            "Ask the user to confirm before deleting or changing anything.",
            "Answer briefly, in the user's language.",
        ]
        dated = 1
        domain_prompt = short_domain_prompt or domain_prompt
    else:
        lines, dated = _full_lines(local, tz, language)
    if date_grounding:
        lines[dated:dated] = [DATE_LIST_HEADER, *date_list(now, tz, labels=language.date_labels)]
    if domain_prompt:
        lines.insert(0, domain_prompt.strip())
    return "\n".join(lines)


@dataclass(frozen=True)
class PromptSettings:
    """What the model is shown besides the conversation: the runtime's four prompt settings as one
    value (``Settings.prompt_settings``), carried whole from the configuration to every place that
    renders a prompt (serving, eval, export, expert iteration, the bench), so that a new setting
    is a field here and one in ``agent.config.Settings``, not a parameter in every layer between.

    ``prompt_style`` and ``date_grounding`` shape the system prompt (``system_prompt``);
    ``time_notes`` and ``date_notes`` the user messages (``stamp_user_text``). The tool block is
    not here: it belongs to the backend's renderer.
    """

    prompt_style: str = "full"
    date_grounding: bool = False
    time_notes: bool = False
    date_notes: bool = False

    def system_prompt(self, now: datetime, tz: str, domain_prompt: str = "", short_domain_prompt: str = "",
                      language: Language = ENGLISH) -> str:
        """``system_prompt`` with these settings, in the domain's ``language``."""
        return system_prompt(now, tz, domain_prompt, self.prompt_style, short_domain_prompt, self.date_grounding,
                             language=language)

    def stamp(self, now: datetime, tz: str, text: str, language: Language = ENGLISH) -> str:
        """``stamp_user_text`` with these settings, annotated by the domain's ``language``."""
        return stamp_user_text(now, tz, text, time_notes=self.time_notes, date_notes=self.date_notes, language=language)

    def to_dict(self) -> dict[str, Any]:
        """One flat key per setting, as eval's ``run.json`` and ``train ei``'s options record them
        (so runs written before this class existed still compare key by key); the keys of
        ``PromptSettings().to_dict()`` are what a record from before a setting existed ran with."""
        return asdict(self)


# The line about the time stamp, as each style writes it: what tells the styles apart in a
# recorded conversation (``prompt_style_of``).
_STYLE_MARKERS = {"full": _FULL_STAMP_LINE, "short": _SHORT_STAMP_LINE}


def prompt_style_of(messages: list[dict[str, Any]]) -> str | None:
    """The style of the system prompt a recorded conversation was played with, or None when its
    system message is not one ``system_prompt`` wrote (none, or another program's). Exports
    record it per row, so that training can refuse rows made with another prompt than the one
    the runtime serves."""
    first = messages[0] if messages else {}
    if first.get("role") != "system":
        return None
    lines = str(first.get("content") or "").split("\n")
    found = [style for style, marker in _STYLE_MARKERS.items() if marker in lines]
    return found[0] if len(found) == 1 else None


def date_grounding_of(messages: list[dict[str, Any]]) -> bool | None:
    """Whether a recorded conversation's system prompt listed the days ahead (the
    ``date_grounding`` setting), or None when its system message is not one ``system_prompt``
    wrote. Like the style, exports record it so training can refuse a mismatch."""
    if prompt_style_of(messages) is None:
        return None
    return DATE_LIST_HEADER in str(messages[0].get("content") or "").split("\n")
