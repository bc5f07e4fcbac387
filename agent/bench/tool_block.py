"""Tool-block size (``tool_block``): prompt tokens of the full and the compact rendering.

Exact token counts, no timing: the block is paid at every step of every turn and in every
training row, and SmolLM2's 49k vocabulary and Qwen3's 151k split the same text differently,
so both are counted. Goal: compact ≤ 40 % of full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent.bench.report import progress
from agent.formats.chat_format import ChatFormat, format_of

if TYPE_CHECKING:
    from agent.bench.context import Bench


def _domain_tools(bench: Bench) -> list[dict[str, Any]]:
    """The configured domain's tools (the calendar's by default), on a temp data folder."""
    from dataclasses import replace

    from agent.domain import load_domain

    domain = load_domain(replace(bench.config.settings, data_dir=bench.tmp / "tool-block"))
    try:
        return domain.registry.schemas()
    finally:
        domain.close()


def _count(bench: Bench, fmt: ChatFormat, tokenize: Any, tag: str, label: str) -> None:
    tools = _domain_tools(bench)
    full, compact = (len(tokenize(fmt.tool_block(tools, block))) for block in ("full", "compact"))
    bench.report.add(f"tool_block_full_tokens_{tag}", f"{label}: tool block tokens, full", full)
    bench.report.add(f"tool_block_compact_tokens_{tag}", f"{label}: tool block tokens, compact", compact)
    bench.report.add(f"tool_block_compact_share_{tag}", f"{label}: compact ÷ full tool block", compact / full, "<= 0.4")


def sizes(bench: Bench, backend: Any) -> None:
    """Both renderings in the loaded model's vocabulary, then in Qwen3's (``--grammar-model`` or the fixture)."""
    progress("tool block: counting tokens, full and compact")
    fmt = format_of(backend)  # the loaded model's block, counted in both vocabularies
    _count(bench, fmt, lambda text: backend.tokenize(text, add_bos=False), "49k", f"vocab {backend.engine.n_vocab}")
    path = bench.config.grammar_model
    if path is None:
        try:
            from tests import model_fixtures as mf

            path = str(mf.tiny_qwen3_path())
        except Exception as exc:  # fixtures are a test-only dependency; absent in an installed copy
            for key in ("tool_block_full_tokens_151k", "tool_block_compact_tokens_151k", "tool_block_compact_share_151k"):
                bench.report.add(key, f"vocab 151936: {key}", None,
                                 note=f"skipped: no --grammar-model and no tiny qwen3 fixture ({type(exc).__name__})")
            return
    from agent.backends.llama.engine import Engine, ModelFiles

    vocab = Engine(ModelFiles(str(path)), n_ctx=512, vocab_only=True)
    try:
        _count(bench, fmt, lambda text: vocab.tokenize(text.encode("utf-8"), add_bos=False), "151k",
               f"vocab {vocab.n_vocab}")
    finally:
        vocab.llm.close()
