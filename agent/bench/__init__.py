"""``python -m agent bench``: the runtime measured against llama.cpp itself, in one process.

Why ratios: the machines are shared and noisy, so every timing figure is the runtime divided
by a baseline run side by side in the same process (interleaved, repeated, median). Token
counts (prefix reuse) are exact and need no repetition.

What is measured (docs/performance.md has the figures and the exact definitions), one module
per family, run in this order by ``runner.run_all``:

1. loop overhead (``overhead``): one 6-step episode through ``Runtime.handle`` (render, parse,
   validate, approval, tools on a temp SQLite calendar, session store, trajectory log) ÷ a bare
   ``llama_cpp.Llama`` replaying exactly the token sequences that episode evaluated and sampled.
   The episode (``episode``) is made deterministic by starting each reply with a fixed
   ``assistant_prefix`` (step 0: ``<tool_call>`` and the model writes the call under the
   grammar; steps 1-4: whole scripted calls; step 5: free text), greedy sampling.
2. prefix reuse (``prefix``): evaluated ÷ new prompt tokens per step, alone and for two
   interleaved chats with and without per-session saved states.
3. constrained decoding (``grammar``): tokens/s with the tool-call grammar (llama-cpp-python's
   full-vocabulary mask, and the runtime's path: the sampled token, then the top candidates,
   then the full mask) ÷ unconstrained, same prompt, same length; for the model's own choice
   and for a model steered to write a valid call.
4. peers (``peers``): the same eval scenarios played end to end by this runtime, llama-cpp-python's
   ``chatml-function-calling`` handler, ``llama_cpp.server`` and llama.cpp's ``llama-server --jinja``
   (one OpenAI-style client loop; llama-server only once built with ``--build-llama-server``).
   ``--adapter FILE`` (checked against the model first) is loaded by every peer; the other
   figures measure the base model, as their baseline (a bare ``llama_cpp.Llama``) has no adapter.
5. memory and start-up (``memory``).

The instruments live in ``recording``, the figures and their table/JSON in ``report``. This
module is the CLI surface ``agent/__main__.py`` expects (``add_parser`` + ``run``).
"""

from __future__ import annotations

import time

# Taken first thing at import, before llama.cpp loads: the fallback for "process start" when
# /proc cannot say (see ``memory.process_started_at``).
_IMPORTED_AT = time.time()

import argparse  # noqa: E402  (after the timestamp on purpose)
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from agent.bench.report import Report, progress  # noqa: E402
from agent.bench.context import Bench, BenchConfig  # noqa: E402
from agent.bench.runner import run_all  # noqa: E402

__all__ = ["Bench", "BenchConfig", "Report", "add_arguments", "add_parser", "default_model", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure")
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, shorter outputs, one peer scenario: checks that everything runs")
    parser.add_argument("--grammar-model", metavar="GGUF", type=Path,
                        help="a model with Qwen3's 151k vocabulary for the constrained-decoding figure "
                             "(default: the tiny qwen3 test fixture, built from tests/ in a checkout)")
    parser.add_argument("--build-llama-server", action="store_true",
                        help="only build llama.cpp's llama-server for the peers figure from the installed "
                             "llama-cpp-python's sdist, into ~/.cache/iljeong (~40 min on one core; skipped "
                             "when already built), then exit")
    parser.add_argument("--only", choices=("peers", "grammar", "jump"),
                        help="only one figure family: peers (figure 4), grammar (constrained decoding and "
                             "jump-forward, both vocabularies) or jump (jump-forward alone)")
    parser.add_argument("--peer-scenarios", type=int, metavar="N",
                        help="how many dev scenarios the peers play (default 6; --quick 1)")
    parser.add_argument("--peers", type=_peer_keys, metavar="KEYS",
                        help="which peers play, comma-separated (default all: runtime,chatml_fc,server,llama_server); "
                             "the others are reported as not run")


def _peer_keys(text: str) -> tuple[str, ...]:
    from agent.bench.peers import PEERS

    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    unknown = [k for k in keys if k not in dict(PEERS)]
    if unknown or not keys:
        raise argparse.ArgumentTypeError(f"unknown peer {unknown[0] if unknown else '(none)'}: "
                                         f"choose from {','.join(dict(PEERS))}")
    return keys


def add_parser(subparsers: Any, parents: list[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Same shape as the other subcommand modules (``add_parser`` + ``run``)."""
    parser = subparsers.add_parser("bench", parents=parents,
                                   help="measure the runtime against llama.cpp itself and a peer (ratios)")
    add_arguments(parser)
    return parser


def default_model(settings: Any) -> str:
    """The configured model, else SmolLM2 (installed on demand): the bench's figures (``_49k``) are
    SmolLM2's, whichever demo pair the chat starts."""
    if settings.model_path:
        return str(Path(settings.model_path).expanduser())
    from models.resolve import resolve_demo

    resolved = resolve_demo(name="smollm2")
    if resolved.model_path is None:
        raise SystemExit(f"error: {resolved.error}")
    return str(resolved.model_path)


def _checked_grammar_model(path: Path | None) -> str | None:
    """The extra model goes through the same check as every model llama.cpp loads."""
    if path is None:
        return None
    from models.check import check_model

    result = check_model(path.expanduser())
    if not result.ok:
        print(result.error_line(), file=sys.stderr)
        raise SystemExit(2)
    return str(path.expanduser())


def _checked_adapter(model_path: str, settings: Any) -> str | None:
    """``--adapter`` (or ``AGENT_LORA_PATH``) for the peers figure, checked against the model as the
    runtime checks it, before any peer sees it: one line and exit 2 for a file llama.cpp must not
    load (llama-cpp-python would segfault on it)."""
    if settings.no_adapter or not settings.lora_path:
        return None
    from models.check import require_loadable

    path = str(Path(settings.lora_path).expanduser())
    require_loadable(model_path, path)
    return path


def run(args: argparse.Namespace, settings: Any) -> int:
    if args.build_llama_server:  # a build, not a measurement: nothing else runs
        from agent.bench import llama_server_build

        return llama_server_build.main()
    model_path = default_model(settings)
    config = BenchConfig(
        model_path=model_path, n_ctx=settings.n_ctx, n_threads=settings.n_threads,
        quick=args.quick, settings=settings, grammar_model=_checked_grammar_model(args.grammar_model),
        only=args.only, peer_scenarios=args.peer_scenarios, peers=args.peers,
        lora_path=_checked_adapter(model_path, settings), lora_scale=settings.lora_scale,
    )
    adapter = f", adapter {config.lora_path} (peers)" if config.lora_path else ""
    progress(f"model {config.model_path}{adapter}, n_ctx {config.n_ctx}, {'quick' if args.quick else 'full'} run")
    report = run_all(Bench(config))
    report.info["only"] = args.only
    report.info["command"] = "python -m agent " + " ".join(sys.argv[1:])
    if args.json:
        print(json.dumps(report.as_json(), ensure_ascii=False, indent=2))
    else:
        print(report.table())
        print("\n" + json.dumps(report.info, ensure_ascii=False))
    return 0
