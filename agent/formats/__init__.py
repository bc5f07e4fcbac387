"""Chat formats: how a model family writes tool calls, and everything that depends on it.

``hermes.HERMES`` (Hermes / Qwen3 ``<tool_call>``) is the one in use; a second family is one new
module beside it with the same methods. ``reply`` holds the parsed types every format returns,
``json_calls`` reads a JSON call body, ``gbnf`` builds a bounded call grammar from tool schemas,
``tool_view`` decides what a model is shown of its tools (``full`` or ``compact``), ``wire_text``
breaks chat-control spellings in data sent to a remote server (it tokenizes with specials parsed).
"""

from agent.formats.hermes import HERMES, HermesFormat
from agent.formats.reply import ParsedReply, ToolCall

__all__ = ["HERMES", "HermesFormat", "ParsedReply", "ToolCall", "parse_reply", "format_tool_call"]

# The two calls almost every caller needs, bound to the format in use.
parse_reply = HERMES.parse_reply
format_tool_call = HERMES.format_tool_call
