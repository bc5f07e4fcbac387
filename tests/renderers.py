"""The prompt renderer exactly as the llama backend builds it, from a GGUF's own metadata.

Prompt and runtime tests render with the model fixtures' real chat templates; loading only the
vocabulary (``vocab_only``) keeps that cheap.
"""

from __future__ import annotations

from pathlib import Path

import llama_cpp

from agent.prompt import PromptRenderer


def renderer_for(path: Path, *, enable_thinking: bool = False, tool_block: str = "full") -> PromptRenderer:
    """The renderer exactly as the llama backend builds it, from the GGUF's own metadata."""
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    return PromptRenderer.from_metadata(llm.metadata, llm._model.token_get_text, enable_thinking=enable_thinking,
                                        tool_block=tool_block)
