"""Chat formats: how a model family writes tool calls, and everything that depends on it.

One format object per model (``chat_format.ChatFormat``) owns the rendering of tools and tool
results, the call tags, the grammar trigger, the stop text, the parser and, for a GGUF without a
chat template, the template. The backend chooses it once, from the template family
(``chat_format.format_for``), and the loop, eval, export and training take it from the backend or
from the record it wrote (``format_of``, ``format_named``). ``hermes`` (Hermes / Qwen3
``<tool_call>``) and ``gemma`` (the same calls in Gemma 3's turns) are the formats; a new one is a
module beside them plus its line in ``chat_format``. ``reply`` holds the parsed types every format
returns, ``json_calls`` reads a JSON call body, ``gbnf`` builds a bounded call grammar from tool
schemas, ``tool_view`` decides what a model is shown of its tools (``full`` or ``compact``),
``wire_text`` breaks chat-control spellings in data sent to a remote server (it tokenizes with
specials parsed).

``parse_reply`` and ``format_tool_call`` below are the default (Hermes) format's, for scripted
policies and tests of domains that only run Hermes-format models (the oracle, the lab's
policies); code that serves a model takes its format from the backend instead.
"""

from agent.formats.chat_format import DEFAULT_FORMAT, FORMATS, ChatFormat, format_for, format_named, format_of
from agent.formats.hermes import HERMES, HermesFormat
from agent.formats.reply import ParsedReply, ToolCall

__all__ = ["ChatFormat", "DEFAULT_FORMAT", "FORMATS", "HERMES", "HermesFormat", "ParsedReply", "ToolCall",
           "format_for", "format_named", "format_of", "parse_reply", "format_tool_call"]

# The default (Hermes) format's two calls, for scripted policies and tests (see above).
parse_reply = HERMES.parse_reply
format_tool_call = HERMES.format_tool_call
