"""The order the figure families run in: one loaded model, every family in turn, the table's
order. The shared state they all build on is ``agent.bench.context.Bench``.
"""

from __future__ import annotations

from agent.bench import grammar, jump, long_chat, memory, overhead, peers, prefix, tool_block, warm_start
from agent.bench.context import Bench
from agent.bench.report import Report, machine


def run_all(bench: Bench) -> Report:
    """Every family in turn (or the one ``config.only`` names), filling ``bench.report``."""
    cfg = bench.config
    bench.report.info.update(machine())
    bench.report.info.update({"model": cfg.model_path, "n_ctx": cfg.n_ctx, "quick": cfg.quick,
                              "repeats": cfg.repeats, "max_tokens_per_step": cfg.max_tokens,
                              "tool_block": bench.tool_block,
                              "peers_weights": peers.weights_note(cfg.lora_path, cfg.lora_scale)})
    if cfg.only == "peers":
        peers.peers(bench, bench.build_peer_backend())
        return bench.report
    if cfg.only in ("grammar", "jump"):
        backend = bench.build_backend(cfg.model_path)
        if cfg.only == "grammar":
            grammar.constrained(bench, backend, "49k", f"vocab {backend.engine.n_vocab}")
        jump.figure(bench, backend, "49k", f"vocab {backend.engine.n_vocab}")
        grammar.qwen3(bench, constrained_figures=cfg.only == "grammar")
        return bench.report
    backend = memory.startup(bench)
    memory.isolated(bench)  # two child processes; this one waits
    warm_start.figure(bench)  # three more: cold, first and warm start
    steps = overhead.loop_overhead(bench, backend)
    prefix.episode_reuse(bench.report, steps)
    prefix.state_copy(bench.report, backend)
    prefix.interleaved(bench, backend)
    long_chat.long_chat(bench, backend)
    grammar.constrained(bench, backend, "49k", f"vocab {backend.engine.n_vocab}")
    jump.figure(bench, backend, "49k", f"vocab {backend.engine.n_vocab}")
    grammar.qwen3(bench)
    tool_block.sizes(bench, backend)
    same = cfg.lora_path is None  # the figures' backend is the peers' runtime (same tool block)
    peers.peers(bench, backend if same else bench.build_peer_backend())
    return bench.report
