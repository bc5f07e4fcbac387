"""The toy domain's scripted policy served over the strict OpenAI server, as native tool calls.

The REPL, eval and bot tests that put the model on the far side of an OpenAI-compatible API
share it: ``toy_script`` answers like DeepSeek would (compact ``arguments``, so a client that
re-serialises shows), ``KEY`` is the only key the server accepts, ``MODEL`` the model name sent.
"""

from __future__ import annotations

from agent.prompt import unstamp_user_text
from bot.scripted import rule_script
from tests.openai_server import Reply, Request, internal_messages, native_reply
from tests.toy_domain import ECHO, TOY_RULES

KEY = "sk-frontend-test-9f8e7d6c5b4a"
MODEL = "deepseek-chat"
TOY = {"rules": TOY_RULES, "default": ECHO}


def toy_script(request: Request) -> Reply:
    """The bot tests' toy policy, answered with native calls; "flaky ..." gets a 503, and
    "echo-key ..." an error that quotes the Authorization header, as some proxies do (400;
    "echo-key-5xx ...": a 502, which is retried)."""
    messages = internal_messages(request.messages)
    last_user = next(m for m in reversed(messages) if m["role"] == "user")
    text = unstamp_user_text(last_user["content"])
    if text.startswith("flaky"):
        return Reply.error(503, "overloaded")
    if text.startswith("echo-key"):
        return Reply.error(502 if text.startswith("echo-key-5xx") else 400,
                           f"upstream refused the header 'Authorization: {request.authorization}'")
    return native_reply(rule_script(TOY)(messages))
