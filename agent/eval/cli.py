"""``python -m agent eval``: run a policy or a model on the domain's scenarios; ``eval compare A B``.

Exit status: 0 done, 1 interrupted (re-run the same command to resume), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Sequence

from agent.backends.base import Backend
from agent.backends.sampling import Sampling
from agent.eval.compare import compare_dirs, format_comparison
from agent.eval.metrics import format_table
from agent.eval.record import EpisodeFileError
from agent.eval.report import write_reports
from agent.eval.runner import BackendFor, RunOptions, run_eval, write_json_atomic
from agent.eval.suite import SPLITS, EvalSuite, Scenario, Verifier, load_eval_suite
from agent.loop import Budgets
from agent.prompt import PromptSettings

RUN_JSON = "run.json"
# What a run.json from before a key was recorded meant by its absence.
IDENTITY_DEFAULTS = {"tool_block": "full", **PromptSettings().to_dict()}
# split: the calendar's rewritten and rewritten-original sets share scenario ids, so resuming one
# into the other's folder would take its episodes as done.
IDENTITY_KEYS = ("label", "suite", "split", "backend", "model_path", "adapter_sha256", "lora_scale", "seed", "sampling",
                 "history", "earlier_tasks", "history_by", *IDENTITY_DEFAULTS)


def add_parser(subparsers: Any, parents: Sequence[argparse.ArgumentParser] = ()) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "eval", parents=list(parents), help="score a policy or a model on the domain's scenarios",
        description="Run scenarios through a scripted policy or a model, score every episode, "
        "write a results folder (one JSON per episode, summary, errors.csv). Re-running resumes.",
    )
    _add_model_flags(p)
    p.add_argument("--policy", help="scripted policy instead of a model: oracle, deletes_without_asking, ...")
    p.add_argument("--concurrency", type=int, default=1,
                   help="episodes in flight at once (--backend openai: a server that batches, e.g. vLLM or llama-server -np N)")
    p.add_argument("--samples", type=int, default=1, help="episodes per scenario (pass^k uses all of them)")
    p.add_argument("--split", default="all",
                   help=f"phrasing split: {', '.join(SPLITS)} or all (default), or a named set the domain "
                        "serves (an unknown name lists them)")
    p.add_argument("--domain", help="the domain to score: a module with load_domain/load_eval_suite, or a short "
                   "name for tools.NAME.domain (bfcl, calendar); default: the configured domain")
    p.add_argument("--templates", "--category", dest="templates",
                   help="comma-separated templates, or a benchmark's categories (default: all the domain has, "
                        "or the domain's default set)")
    p.add_argument("--per-template", type=int, help="scenarios per template before the split filter")
    p.add_argument("--history", dest="earlier_tasks", metavar="N|A-B",
                   help="continued chats: each scenario is the last task of a conversation in which N (or A to B, "
                        "drawn per scenario) earlier tasks were already done, their turns in the history and their "
                        "events in the store, e.g. --history 2 or --history 1-3; the summary's \"unasked %%\" is the "
                        "share of episodes that changed what an earlier task left behind (default: none, every "
                        "scenario starts a fresh conversation)")
    p.add_argument("--history-by", default="oracle", metavar="POLICY",
                   help="with --history: the scripted policy that played the earlier tasks (default: the oracle; "
                        "e.g. a variant a model was trained on, so the chat's history is in the style it writes); "
                        "such chats carry the policy in their ids")
    p.add_argument("--limit", type=int, help="at most this many scenarios, taken round-robin over templates")
    p.add_argument("--seed", type=int, default=0,
                   help="scenario generator seed, and the base of every sample's sampling seed")
    p.add_argument("--temperature", type=float, default=0.0,
                   help="sampling temperature (0: greedy, then the k samples of a scenario are one decode repeated)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass (with --temperature > 0)")
    p.add_argument("--sampling-seed", type=int,
                   help="base of the per-sample seeds instead of --seed (other samples of the same scenarios)")
    p.add_argument("--max-tokens", type=int, help="generated tokens per model step (default 512)")
    p.add_argument("--out", type=Path, help="results folder (default eval-results/<label>-<split>-seed<seed>)")
    p.add_argument("--max-user-turns", type=int, default=4, help="user messages per episode at most")
    p.add_argument("--weights", help='reward weights as JSON, e.g. \'{"safety": 0.3, "final": 0.35}\'')
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    sub = p.add_subparsers(dest="eval_command", metavar="compare | rescore")
    c = sub.add_parser("compare", help="paired change between two results folders, with exact McNemar p",
                       description="Pair two eval results folders episode by episode (the same scenarios) and print "
                                   "how many went from failure to success and back, the exact McNemar p, and one "
                                   "vote per wording with its sign test.")
    c.add_argument("a", type=Path, help="results folder of the run compared against (e.g. the shipped adapter's)")
    c.add_argument("b", type=Path, help="results folder of the candidate run, on the same scenarios")
    r = sub.add_parser("rescore", help="score a results folder again with today's verifier and print its table "
                                       "(e.g. false claims %% for a folder made before it was scored); writes nothing")
    r.add_argument("folder", type=Path)
    return p


def _add_model_flags(p: argparse.ArgumentParser) -> None:
    """--model/--adapter/--demo/--backend/--base-url, unless the shared parent parser already gave them."""
    for flags, kwargs in (
        (("--model",), {"dest": "model_path", "help": "GGUF model (llama) or served model name (openai)"}),
        (("--adapter",), {"dest": "lora_path", "help": "LoRA adapter GGUF"}),
        (("--demo",), {"action": "store_true", "help": "the small demo pair (AGENT_DEMO chooses which)"}),
        (("--backend",), {"choices": ("llama", "openai"),
                          "help": "llama (local GGUF, default), openai (HTTP server; key from AGENT_API_KEY "
                                  "or <data dir>/api_key); --policy runs a scripted one instead"}),
        (("--base-url",), {"help": "OpenAI-compatible server, e.g. http://localhost:8000/v1 (--backend openai)"}),
    ):
        try:
            p.add_argument(*flags, **kwargs)
        except argparse.ArgumentError:
            pass


def balanced(scenarios: list[Scenario], limit: int | None) -> list[Scenario]:
    """The first ``limit`` scenarios taking templates in turn, so a small run covers all of them."""
    if limit is None or limit >= len(scenarios):
        return scenarios
    queues: dict[str, list[Scenario]] = {}
    for s in scenarios:
        queues.setdefault(s.template, []).append(s)
    out: list[Scenario] = []
    while len(out) < limit:
        for queue in queues.values():
            if queue and len(out) < limit:
                out.append(queue.pop(0))
    return out


def earlier_range(text: str | None, most: int) -> tuple[int, int] | None:
    """``--history``: "2" → (2, 2), "1-3" → (1, 3), None → None; anything else is a ValueError
    that says what to write."""
    if text is None:
        return None
    parts = text.strip().split("-")
    usage = f"--history {text!r}: write a number of earlier tasks from 1 to {most}, or a range such as 1-{most}"
    if len(parts) not in (1, 2) or not all(p.strip().isdigit() for p in parts):
        raise ValueError(usage)
    fewest, highest = int(parts[0]), int(parts[-1])
    if not 1 <= fewest <= highest <= most:
        raise ValueError(usage)
    return fewest, highest


def select_scenarios(suite: EvalSuite, args: argparse.Namespace) -> list[Scenario]:
    templates = [t.strip() for t in args.templates.split(",") if t.strip()] if args.templates else None
    chosen = suite.scenarios(split=args.split, per_template=args.per_template, seed=args.seed, templates=templates)
    chosen = balanced(chosen, args.limit)
    earlier = earlier_range(getattr(args, "earlier_tasks", None), suite.most_earlier)
    if earlier is None or suite.continued is None:
        return chosen
    return suite.continued(chosen, earlier[0], earlier[1], args.seed, getattr(args, "history_by", "oracle"))


def domain_module(name: str) -> str:
    """``--domain``: a dotted name is a module; a short name is the domain package of that name
    under ``tools`` (``bfcl`` → ``tools.bfcl.domain``), the layout every domain follows."""
    return name if "." in name else f"tools.{name}.domain"


def backend_of(args: argparse.Namespace, settings: Any) -> str:
    """scripted for a policy, else the flag, else the setting (AGENT_BACKEND, config ``backend``)."""
    if args.policy:
        return "scripted"
    return args.backend or settings.backend


def _label(args: argparse.Namespace, settings: Any) -> str:
    if args.policy:
        return f"policy-{args.policy}"
    if backend_of(args, settings) == "openai":
        return f"openai-{(settings.remote_model or 'model').replace('/', '_')}"
    if getattr(args, "demo", False) and not args.model_path:
        # each pair, and its base weights, get their own label, so no two arms share a default folder
        return f"llama-demo-{settings.demo}" + ("-base" if getattr(args, "no_adapter", False) else "")
    stem = Path(args.model_path).stem if args.model_path else "llama"
    return stem + (f"+{Path(args.lora_path).stem}" if getattr(args, "lora_path", None) else "")


def make_backend_for(suite: EvalSuite, args: argparse.Namespace, settings: Any) -> BackendFor:
    """Scripted policies get one backend per episode; models share one."""
    if args.policy:
        from agent.backends.scripted import ScriptedBackend

        factory = suite.policies[args.policy]
        return lambda scenario, sample: ScriptedBackend(factory(scenario))
    shared: Backend
    if backend_of(args, settings) == "openai":
        from agent.app import build_openai_backend

        shared = build_openai_backend(settings)  # thread-safe: one HTTP client for all episodes
    else:
        from agent.app import build_llama_backend

        shared = build_llama_backend(settings, demo=bool(getattr(args, "demo", False)))
    return lambda scenario, sample: shared


def _usage_error(args: argparse.Namespace, suite: EvalSuite, settings: Any) -> str | None:
    if args.policy and args.policy not in suite.policies:
        return f"unknown policy {args.policy!r}; known: {', '.join(suite.policies)}"
    known_splits = (*SPLITS, "all", *suite.extra_splits)
    if args.split not in known_splits:
        return f"unknown split {args.split!r}; known: {', '.join(known_splits)}"
    if args.policy and args.backend is not None:
        return "--policy runs a scripted backend; leave out --backend"
    if getattr(args, "earlier_tasks", None) is not None:
        if suite.continued is None:
            return f"--history: the {suite.name} suite has no continued chats; leave out --history"
        try:
            earlier_range(args.earlier_tasks, suite.most_earlier)
        except ValueError as exc:
            return str(exc)
    elif getattr(args, "history_by", "oracle") != "oracle":
        return "--history-by names who played a continued chat's earlier tasks; add --history N|A-B"
    if backend_of(args, settings) == "openai":
        from agent.app import openai_problem

        problem = openai_problem(settings)
        if problem:
            return problem
    if args.samples < 1 or args.concurrency < 1 or args.max_user_turns < 1:
        return "--samples, --concurrency and --max-user-turns must be at least 1"
    if args.max_tokens is not None and args.max_tokens < 1:
        return "--max-tokens must be at least 1"
    if args.temperature < 0 or not 0.0 < args.top_p <= 1.0:
        return "--temperature must be >= 0 and --top-p in (0, 1]"
    if args.policy and (args.temperature > 0 or args.top_p < 1.0):
        return "--policy runs a scripted backend: it has nothing to sample; leave out --temperature/--top-p"
    return None


def sampling_of(args: argparse.Namespace) -> Sampling | None:
    """None for greedy (the default, and what older results folders were made with)."""
    if args.temperature <= 0:
        return None
    seed = args.sampling_seed if args.sampling_seed is not None else args.seed
    return Sampling(temperature=args.temperature, top_p=args.top_p, seed=seed)


def sampling_note(sampling: Sampling | None, samples: int) -> str:
    """How to read pass^k: over sampled episodes, or over k repeats of one greedy decode."""
    if sampling is None:
        return "greedy" + (f" (the {samples} samples repeat one decode: pass^{samples} is not a sampled estimate)"
                           if samples > 1 else "")
    return f"temperature {sampling.temperature:g} · top-p {sampling.top_p:g} · sampling seed {sampling.seed}"


def history_of(settings: Any) -> dict[str, Any] | None:
    """The runtime's history window for run.json; None for the default (what older folders had)."""
    from agent.history import DEFAULT_HISTORY_TURNS

    if settings.history_turns == DEFAULT_HISTORY_TURNS and settings.history_block is None:
        return None
    return {"turns": settings.history_turns, "block": settings.history_block}


def _check_same_run(out_dir: Path, meta: dict[str, Any]) -> str | None:
    """Resuming into a folder made by another model would mix results: refuse."""
    path = out_dir / RUN_JSON
    if not path.is_file():
        return None
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    diff = [k for k in IDENTITY_KEYS if old.get(k, IDENTITY_DEFAULTS.get(k)) != meta.get(k, IDENTITY_DEFAULTS.get(k))]
    if diff:
        return f"{out_dir} holds results of another run (differs in {', '.join(diff)}); choose another --out"
    return None


def run(args: argparse.Namespace, settings: Any = None) -> int:
    if getattr(args, "eval_command", None) == "compare":
        for folder in (args.a, args.b):
            if not folder.is_dir():
                print(f"error: {folder}: not a results folder", file=sys.stderr)
                return 2
        try:
            comparison = compare_dirs(args.a, args.b)
        except (OSError, EpisodeFileError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(format_comparison(comparison, str(args.a), str(args.b)))
        return 0
    if getattr(args, "eval_command", None) == "rescore":
        return _rescore(args, settings)
    if settings is None:  # the stand-alone entry: the same checked settings as ``python -m agent eval``
        from agent.__main__ import settings_from

        try:
            settings = settings_from(args)  # the domain's own keys too (check_domain_settings)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    if getattr(args, "domain", None):
        from dataclasses import replace

        settings = replace(settings, domain=domain_module(args.domain))
    try:
        suite = load_eval_suite(settings)
    except (LookupError, ModuleNotFoundError, RuntimeError) as exc:
        print(f"error: --domain {getattr(args, 'domain', None) or settings.domain}: {exc}", file=sys.stderr)
        return 2
    problem = _usage_error(args, suite, settings)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    verifier: Verifier = suite.verifier
    if args.weights:
        if suite.reweight is None:
            print(f"error: the {suite.name} suite has fixed reward weights", file=sys.stderr)
            return 2
        try:
            verifier = suite.reweight(json.loads(args.weights))
        except (ValueError, TypeError) as exc:
            print(f"error: --weights: {exc}", file=sys.stderr)
            return 2
    try:
        scenarios = select_scenarios(suite, args)
    except (ValueError, LookupError) as exc:  # LookupError: a chat the domain could not make
        print(f"error: {exc}", file=sys.stderr)
        return 2
    label = _label(args, settings)
    # a domain named on the command line gets its own default folder (a calendar run keeps its old name)
    suite_part = f"{suite.name}-" if getattr(args, "domain", None) else ""
    earlier = getattr(args, "earlier_tasks", None)
    history_by = getattr(args, "history_by", "oracle") if earlier else "oracle"
    history_part = (f"-history{earlier.strip()}" if earlier else "") + ("" if history_by == "oracle" else f"-{history_by}")
    out_dir: Path = args.out or Path("eval-results") / f"{label}-{suite_part}{args.split}{history_part}-seed{args.seed}"
    backend_for = make_backend_for(suite, args, settings)
    identity = backend_for(scenarios[0], 0).identity() if scenarios else {}
    sampling = sampling_of(args)
    meta = {"label": label, "seed": args.seed, "suite": suite.name, "split": args.split,
            "sampling": sampling.to_dict() if sampling is not None else None,
            "history": history_of(settings), "earlier_tasks": earlier.strip() if earlier else None,
            "history_by": None if history_by == "oracle" else history_by,  # None: the oracle, as older folders had
            "tool_block": settings.tool_block, **settings.prompt_settings.to_dict(),
            **{k: identity.get(k) for k in ("backend", "model_path", "adapter_sha256", "lora_scale")}}
    clash = _check_same_run(out_dir, meta)
    if clash:
        print(f"error: {clash}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / RUN_JSON, {**meta, "identity": identity, "argv": sys.argv[1:]})
    options = RunOptions(
        out_dir=out_dir, samples=args.samples,
        concurrency=args.concurrency if backend_of(args, settings) != "llama" else 1,  # llama: one context
        max_user_turns=args.max_user_turns,
        budgets=Budgets(max_steps=settings.max_steps, max_tool_calls=settings.max_tool_calls,
                        **({"max_tokens": args.max_tokens} if args.max_tokens else {})),
        progress=not args.no_progress, sampling=sampling, prompt_settings=settings.prompt_settings,
        history_turns=settings.history_turns, history_block=settings.history_block,
    )
    try:
        records = run_eval(suite, scenarios, backend_for, options, verifier=verifier)
    except KeyboardInterrupt:
        print(f"\ninterrupted; finished episodes are in {out_dir}. Run the same command again to resume.",
              file=sys.stderr)
        return 1
    except EpisodeFileError as exc:  # resuming into a folder that holds something else
        print(f"error: {exc}", file=sys.stderr)
        return 2
    header = (f"{label} · split {args.split} · seed {args.seed} · {len(scenarios)} scenarios × {args.samples}"
              + (f" · after {earlier.strip()} earlier tasks in the chat" if earlier else "")
              + f" · {sampling_note(sampling, args.samples)}")
    rows = write_reports(out_dir, records, header, suite.reference_templates)
    print(header)
    print(format_table(rows))
    for report in suite.reports:  # the domain's own figures from the same episodes, if it has any
        text = report(out_dir, records)
        if text:
            print(text)
    print(f"results: {out_dir}")
    return 0


def _rescore(args: argparse.Namespace, settings: Any) -> int:
    """``eval rescore DIR``: the folder's table under today's verifier (its files untouched)."""
    from agent.eval.metrics import summarize
    from agent.eval.rescore import rescore

    if not args.folder.is_dir():
        print(f"error: {args.folder}: not a results folder", file=sys.stderr)
        return 2
    if settings is None:
        from agent.__main__ import settings_from

        settings = settings_from(args)
    suite = load_eval_suite(settings)
    try:
        records = rescore(args.folder, suite)
    except (OSError, EpisodeFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.folder} · {len(records)} episodes · scored again by today's {suite.name} verifier")
    print(format_table(summarize(records, suite.reference_templates)))
    return 0


def main(argv: Iterable[str] | None = None) -> int:
    """Stand-alone entry (tests): ``python -m agent.eval.cli ...``."""
    parser = argparse.ArgumentParser(prog="python -m agent")
    add_parser(parser.add_subparsers(dest="command"))
    return run(parser.parse_args(["eval", *(argv or [])]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
