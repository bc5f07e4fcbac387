"""Backends: llama.cpp in-process, OpenAI-compatible HTTP, and scripted replay."""

from agent.backends.base import Backend, Completion

__all__ = ["Backend", "Completion"]
