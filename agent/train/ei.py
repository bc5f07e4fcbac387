"""Expert iteration: sample → verify → keep the verified successes → SFT → convert → eval on dev, in rounds.

Round n (``OUT/round-n/``):
1. ``samples/``: k episodes per train scenario at temperature T (each with its own derived seed,
   see ``agent.backends.sampling``) with the current adapter (none in round 1, unless given) —
   the eval runner's results folder, so an interrupted round resumes episode by episode;
2. ``data/``: the verified successes that broke no rule (optionally only the best-reward one per
   scenario), exported as SFT rows exactly as ``export sft --success-only`` would;
3. ``adapter/``: LoRA SFT on them, from the base with every round's rows so far (default), or
   continuing the previous round's adapter on this round's rows (``continue_adapter``), then
   converted to ``adapter/adapter.gguf``;
4. ``dev/``: greedy eval of the new adapter on the dev split;
5. ``round.json``: what the round did. A round with ``round.json`` is finished; a re-run starts
   after the last finished one.
``OUT/ei_summary.json`` lists each round's rows kept and dev success. Dev picks nothing here, but
whoever reads it to choose a round selects on dev: the honest comparison is on the test split
(``test_limit``), where the last round and the starting point are both evaluated at the end.

Three options make a round learn from its own mistakes without forgetting:
- ``weigh_templates``: the starting adapter is first evaluated on dev (``OUT/round-0/dev``, also the
  start's dev figure); each template's share of the sampled train scenarios follows its failure
  rate there (at least ``weight_floor``), so samples go where the adapter fails;
- ``fallback_policy`` (e.g. ``oracle``): a scenario the adapter failed in every sample gets that
  policy's verified episode as its row (``round-n/policy/``), so the hardest templates still get rows;
- ``policy_mix``: that policy's rows for this many other train scenarios per solved one, spread over
  every template and new ones each round (a replay of what the adapter was first trained on, so it
  keeps it); ``policy_templates``: its rows of train-only sets the domain serves only by name.
``stop_when_flat`` ends the rounds once a round's dev success does not beat the best so far.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agent.eval.runner import write_json_atomic
from agent.prompt import PromptSettings
from agent.train.sft import DEFAULT_TARGETS, TrainError

if TYPE_CHECKING:
    from agent.eval.record import EpisodeRecord

SUMMARY = "ei_summary.json"
ROUND = "round.json"
OPTIONS = "ei_options.json"
# What a run is: a re-run with any of these changed would mix two recipes in one folder (round 0's
# dev episodes, the start's PEFT folder, the chosen train scenarios, the rows), so it is refused.
# Not here: rounds (a re-run may add some), test_limit, stop_when_flat, threads, progress.
IDENTITY = ("base", "adapter", "start_peft", "policy", "seed", "per_template", "train_limit", "dev_limit", "samples",
            "temperature", "top_p", "best_only", "continue_adapter", "weigh_templates", "weight_floor",
            "fallback_policy", "policy_mix", "policy_templates", "policy_template_rows", "max_user_turns",
            "max_steps_per_turn", "max_tool_calls", "max_tokens", "tool_block", *PromptSettings().to_dict(),
            "rank", "alpha", "dropout", "targets", "epochs", "sft_max_steps", "lr", "grad_accum", "max_length", "bf16")
# What a run saved before an option existed ran with (as eval's run.json): resuming it with the
# option on is refused.
IDENTITY_DEFAULTS = PromptSettings().to_dict()


@dataclass
class EiOptions:
    base: Path
    out: Path
    rounds: int = 3
    samples: int = 4
    temperature: float = 0.7
    top_p: float = 1.0
    seed: int = 0
    per_template: int | None = None
    train_limit: int | None = None
    dev_limit: int | None = None
    test_limit: int | None = None  # 0/None: no test-split evaluation at the end
    best_only: bool = False
    continue_adapter: bool = False
    weigh_templates: bool = False  # sample each template in proportion to the start adapter's dev failure rate
    weight_floor: float = 0.2
    fallback_policy: str | None = None  # scenarios failed in every sample get this policy's episode as row
    policy_mix: float = 0.0  # and its rows for this many other train scenarios per solved one
    policy_templates: tuple[str, ...] = ()  # and its rows of train scenarios the domain serves only by name
    policy_template_rows: int = 0  # (a drill, say): this many per round, new ones each round
    stop_when_flat: bool = False  # stop once a round's dev success does not beat the best so far
    adapter: Path | None = None  # GGUF adapter to sample round 1 with (default: the bare base)
    start_peft: Path | None = None  # that adapter as a PEFT folder: round 1 continues training it (continue_adapter)
    policy: str | None = None  # sample round 1 with this scripted policy instead (bootstrapping, tests)
    max_user_turns: int = 4
    max_steps_per_turn: int = 8
    max_tool_calls: int = 16
    max_tokens: int = 512
    n_ctx: int = 8192
    n_threads: int | None = None
    tool_block: str = "full"
    prompt_settings: PromptSettings = PromptSettings()  # the runtime's: sampled, evaluated and trained with them
    # SFT per round
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    grad_accum: int = 1
    save_steps: int = 50
    targets: tuple[str, ...] = DEFAULT_TARGETS
    epochs: float = 1.0
    sft_max_steps: int = -1
    lr: float = 2e-4
    max_length: int = 4096
    bf16: bool = False  # each round's SFT as train sft --bf16
    progress: bool = True
    cache: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def flat_options(opts: EiOptions) -> dict[str, Any]:
    """The options one key each, the prompt settings' beside the others: the flat keys that
    ``ei_options.json`` and ``ei_summary.json`` have always had, so older runs still compare."""
    flat: dict[str, Any] = {}
    for f in fields(opts):
        value = getattr(opts, f.name)
        flat.update(value.to_dict() if isinstance(value, PromptSettings) else {f.name: value})
    return flat


def run_identity(opts: EiOptions) -> dict[str, Any]:
    """The options that make a run what it is, with each file given by its sha256 (a path may move)."""
    from models.pull import sha256_file

    options = flat_options(opts)
    ident: dict[str, Any] = {}
    for key in IDENTITY:
        value = options[key]
        if isinstance(value, Path):
            value = sha256_file(value) if value.is_file() else str(value)
        ident[key] = list(value) if isinstance(value, tuple) else value
    return ident


def check_same_run(opts: EiOptions) -> None:
    """Write ``OUT/ei_options.json`` on a run's first start; on a re-run, refuse changed options."""
    path = opts.out / OPTIONS
    ident = run_identity(opts)
    if not path.is_file():
        write_json_atomic(path, ident)
        return
    before = json.loads(path.read_text(encoding="utf-8"))
    # An option newer than the saved run counts as its default there (the run was made without it),
    # as eval's run.json does; one with no default is not compared.
    changed = [k for k in IDENTITY if before.get(k, IDENTITY_DEFAULTS.get(k, ident[k])) != ident[k]]
    if changed:
        raise TrainError(f"{opts.out} holds a run with other options ({', '.join(changed)}); "
                         "use the same options to resume it, or another --out")


def finished_rounds(out: Path) -> list[dict[str, Any]]:
    """``round.json`` of every finished round, in order (stops at the first unfinished one)."""
    done = []
    n = 1
    while (out / f"round-{n}" / ROUND).is_file():
        done.append(json.loads((out / f"round-{n}" / ROUND).read_text(encoding="utf-8")))
        n += 1
    return done


def best_per_scenario(records: list[EpisodeRecord]) -> list[EpisodeRecord]:
    """The highest-reward record of each scenario (the first sample wins a tie)."""
    best: dict[str, EpisodeRecord] = {}
    for r in records:
        if r.scenario_id not in best or r.verdict.reward > best[r.scenario_id].verdict.reward:
            best[r.scenario_id] = r
    return list(best.values())


def _round_robin(scenarios: list[Any]) -> list[Any]:
    """All of ``scenarios``, templates taken in turn (``balanced`` without a limit)."""
    queues: dict[str, list[Any]] = {}
    for s in scenarios:
        queues.setdefault(s.template, []).append(s)
    out: list[Any] = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                out.append(queue.pop(0))
    return out


def success_by_template(records: list[EpisodeRecord]) -> dict[str, float]:
    """Task success in percent per template (each template's share of successful episodes)."""
    runs: dict[str, list[bool]] = {}
    for r in records:
        runs.setdefault(r.template, []).append(bool(r.verdict.success))
    return {t: 100.0 * sum(v) / len(v) for t, v in runs.items()}


def template_weights(success: dict[str, float], floor: float) -> dict[str, float]:
    """A template's sampling weight: its failure rate (0..1), at least ``floor``, so a template the
    adapter already gets right keeps a few samples instead of none."""
    return {t: max(1.0 - s / 100.0, floor) for t, s in success.items()}


def weighted_pick(pool: list[Any], weights: dict[str, float], total: int) -> list[Any]:
    """``total`` scenarios of ``pool``, each template's count in proportion to its weight (a template
    without a weight gets the mean weight), each template's first scenarios in pool order,
    interleaved round-robin as ``balanced`` does.

    Counts by largest remainder: each template gets the floor of its quota, and the seats left go one
    each to the largest fractional parts (ties: pool order). A template whose quota exceeds what the
    pool has takes all it has, and the rest is shared among the others again."""
    queues: dict[str, list[Any]] = {}
    for s in pool:
        queues.setdefault(s.template, []).append(s)
    mean = sum(weights.values()) / len(weights) if weights else 1.0
    w = {t: weights.get(t, mean) for t in queues}
    remaining = min(total, len(pool))
    counts: dict[str, int] = {}
    active = list(queues)
    while active:
        mass = sum(w[t] for t in active) or 1.0
        quota = {t: remaining * w[t] / mass for t in active}
        full = [t for t in active if quota[t] >= len(queues[t])]
        if not full:
            floors = {t: math.floor(quota[t]) for t in active}
            left = remaining - sum(floors.values())
            for t in sorted(active, key=lambda t: quota[t] - floors[t], reverse=True)[:left]:
                floors[t] += 1
            counts.update(floors)
            break
        for t in full:
            counts[t] = len(queues[t])
            remaining -= len(queues[t])
            active.remove(t)
    picked = {t: queues[t][:counts.get(t, 0)] for t in queues}
    out: list[Any] = []
    while any(picked.values()):
        for t in queues:
            if picked[t]:
                out.append(picked[t].pop(0))
    return out


def run_ei(opts: EiOptions, settings: Any, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run (or resume) the rounds; returns the summary written to ``OUT/ei_summary.json``."""
    from agent.backends.llama import LlamaBackend
    from agent.backends.sampling import Sampling
    from agent.backends.scripted import ScriptedBackend
    from agent.eval.cli import balanced
    from agent.eval.metrics import summarize
    from agent.eval.report import write_reports
    from agent.eval.runner import RunOptions, run_eval
    from agent.eval.suite import load_eval_suite
    from agent.export.episodes import as_served, episode_from_record
    from agent.export.sft import Selection, build_rows, template_renders_tools, write_sft
    from agent.loop import Budgets
    from agent.train.sft import SftOptions, train_sft

    suite = load_eval_suite(settings)
    for name in (opts.policy, opts.fallback_policy):
        if name is not None and name not in suite.policies:
            raise TrainError(f"unknown policy {name!r}; known: {', '.join(suite.policies)}")
    if (opts.weigh_templates or opts.stop_when_flat) and opts.policy is not None:
        raise TrainError("--weigh-templates and --stop-when-flat score the start adapter on dev; a scripted "
                         "--start-policy has none (leave one of them out)")
    pool = suite.scenarios(split="train", per_template=opts.per_template, seed=opts.seed)
    train = balanced(pool, opts.train_limit)
    dev = balanced(suite.scenarios(split="dev", per_template=opts.per_template, seed=opts.seed), opts.dev_limit)
    if not train or not dev:
        raise TrainError("no train or no dev scenarios (raise --per-template)")
    fmt = "structured" if template_renders_tools(opts.base) else "exact"
    environment = suite.make_environment(train[0])
    try:
        tools = environment.registry.schemas()
    finally:
        environment.close()
    # the runtime's history window, so the rows kept are cut where serving cuts them
    history = {"history_turns": settings.history_turns, "history_block": settings.history_block}
    budgets = Budgets(max_steps=opts.max_steps_per_turn, max_tool_calls=opts.max_tool_calls, max_tokens=opts.max_tokens)

    def model(adapter: Path | None) -> LlamaBackend:
        return LlamaBackend(opts.base, lora_path=adapter, n_ctx=opts.n_ctx, n_threads=opts.n_threads,
                            tool_block=opts.tool_block)

    def evaluate(adapter: Path | None, scenarios: list[Any], folder: Path) -> dict[str, Any]:
        backend = model(adapter)
        records = run_eval(suite, scenarios, lambda s, k: backend,
                           RunOptions(out_dir=folder, max_user_turns=opts.max_user_turns, budgets=budgets,
                                      progress=opts.progress, prompt_settings=opts.prompt_settings, **history))
        overall = write_reports(folder, records, f"{folder} · adapter {adapter}", suite.reference_templates)[-1]
        return {"success": overall.task_success, "reward": overall.mean_reward, "episodes": overall.episodes,
                "success_by_template": success_by_template(records)}

    def rows_of(records: list[Any], samples_dir: Path) -> list[Any]:
        # as ``export sft`` reads a results folder: one episode per history window the model was shown,
        # with the domain's tool schemas (an eval record does not carry them)
        return [w for r in records for w in as_served(episode_from_record(r, str(samples_dir)))]

    def peft_of_start(adapter: Path) -> Path:
        # the start exists as a llama.cpp GGUF only (the shipped demo adapter): back to PEFT, once
        from models.lora_to_peft import gguf_lora_to_peft

        folder = opts.out / "start-peft"
        if not (folder / "adapter_config.json").is_file():
            log(f"the start adapter {adapter} to a PEFT folder {folder}, to keep training it")
            gguf_lora_to_peft(adapter, opts.base, folder)
        return folder

    def named_templates(n: int) -> list[Any]:
        # round n's share of the named templates' scenarios: the next policy_template_rows of them
        if not opts.policy_templates or not opts.policy_template_rows:
            return []
        k = opts.policy_template_rows
        named = suite.scenarios(split="train", per_template=n * k, seed=opts.seed, templates=list(opts.policy_templates))
        return balanced(named, n * k)[(n - 1) * k:]

    try:
        named_templates(1)  # a wrong name fails now, not after an hour of sampling
    except (ValueError, LookupError) as exc:
        raise TrainError(f"--policy-templates: {exc}") from exc
    check_same_run(opts)
    rounds = finished_rounds(opts.out)
    if rounds:
        log(f"resuming after round {len(rounds)}")
    start_adapter = opts.adapter
    start_dev: dict[str, Any] | None = None
    if opts.weigh_templates or opts.stop_when_flat:
        log(f"round 0: the start adapter on dev ({len(dev)} scenarios)")
        start_dev = evaluate(start_adapter, dev, opts.out / "round-0" / "dev")
        if opts.weigh_templates:
            weights = template_weights(start_dev["success_by_template"], opts.weight_floor)
            train = weighted_pick(pool, weights, opts.train_limit or len(pool))
            start_dev["weights"] = weights
            log("round 0: train scenarios per template " + ", ".join(
                f"{t} {sum(s.template == t for s in train)}" for t in weights))
        write_json_atomic(opts.out / "round-0" / "dev.json", start_dev)
    # where mixed-in policy rows come from: the rest of the pool, round-robin over templates, each
    # round taking the next ones (a replay, not the same rows again)
    others = _round_robin([s for s in pool if s.id not in {t.id for t in train}])
    for n in range(len(rounds) + 1, opts.rounds + 1):
        before = [r["dev"]["success"] for r in rounds[:-1]] + ([start_dev["success"]] if start_dev else [])
        if opts.stop_when_flat and rounds and before and rounds[-1]["dev"]["success"] <= max(before):
            log(f"round {n}: not run: round {n - 1}'s dev success {rounds[-1]['dev']['success']:.1f}% did not beat "
                f"the best before it ({max(before):.1f}%)")
            break
        folder = opts.out / f"round-{n}"
        started = time.monotonic()
        adapter = Path(rounds[-1]["adapter"]) if rounds and rounds[-1]["adapter"] else start_adapter
        sampling = Sampling(temperature=opts.temperature, top_p=opts.top_p, seed=opts.seed + n)
        if n == 1 and opts.policy is not None:
            factory = suite.policies[opts.policy]
            backend_for: Any = lambda s, k: ScriptedBackend(factory(s))  # noqa: E731
            run_sampling = None  # a script has nothing to sample
        else:
            shared = model(adapter)
            backend_for = lambda s, k: shared  # noqa: E731
            run_sampling = sampling
        log(f"round {n}: sampling {len(train)} train scenarios × {opts.samples}")
        records = run_eval(suite, train, backend_for,
                           RunOptions(out_dir=folder / "samples", samples=opts.samples, max_user_turns=opts.max_user_turns,
                                      budgets=budgets, progress=opts.progress, sampling=run_sampling,
                                      prompt_settings=opts.prompt_settings, **history))
        sampled = summarize(records)[-1]
        kept = [r for r in records if r.verdict.success and r.verdict.policy_ok]
        if opts.best_only:
            kept = best_per_scenario(kept)
        episodes = rows_of(kept, folder / "samples")
        from_policy: Counter[str] = Counter()
        mixed_taken = 0
        if opts.fallback_policy is not None:
            solved = {r.scenario_id for r in kept}
            taken = sum(r.get("mixed_taken", r.get("policy_mixed_scenarios", 0)) for r in rounds)
            mixed_taken = min(math.ceil(opts.policy_mix * len(solved)), len(others))
            mixed = [others[(taken + i) % len(others)] for i in range(mixed_taken)]
            named = named_templates(n)
            kind = {s.id: "fallback" for s in train if s.id not in solved}
            kind |= {s.id: "mixed" for s in mixed}
            kind |= {s.id: "named" for s in named}
            chosen = [s for s in (*train, *mixed, *named) if s.id in kind]
            factory = suite.policies[opts.fallback_policy]
            scripted = run_eval(suite, list({s.id: s for s in chosen}.values()),
                                lambda s, k: ScriptedBackend(factory(s)),
                                RunOptions(out_dir=folder / "policy", max_user_turns=opts.max_user_turns, budgets=budgets,
                                           progress=False, prompt_settings=opts.prompt_settings, **history))
            good = [r for r in scripted if r.verdict.success and r.verdict.policy_ok]
            from_policy = Counter(kind[r.scenario_id] for r in good)
            episodes += rows_of(good, folder / "policy")
            log(f"round {n}: {opts.fallback_policy} rows for {from_policy['fallback']} scenarios failed in every "
                f"sample, {from_policy['mixed']} mixed in from other train scenarios, "
                f"{from_policy['named']} of {', '.join(opts.policy_templates) or 'no named template'}")
        report = build_rows(episodes, Selection(success_only=True, split="train"), fmt, default_tools=tools,
                            tool_block=opts.tool_block)
        write_sft(report, folder / "data")
        rows_kept = len(report.rows)
        # rows, not episodes: two samples that are the same conversation make one row (build_rows dedupes);
        # a solved scenario gets no scripted row, so the solved ids name the on-policy rows
        on_policy_ids = {r.scenario_id for r in kept}
        rows_on_policy = sum(row["scenario_id"] in on_policy_ids for row in report.rows)
        # From the base: every round's rows so far (expert iteration's usual form); continuing: this round's.
        data_files = [folder / "data" / "sft.jsonl"]
        if not opts.continue_adapter:
            data_files = [Path(r["data"]) for r in rounds if r["rows_kept"]] + data_files
        total_rows = rows_kept + (sum(r["rows_kept"] for r in rounds) if not opts.continue_adapter else 0)
        new_adapter: Path | None = adapter
        train_info: dict[str, Any] | None = None
        if rows_kept:  # no new rows: training again on the old ones would only re-roll the same adapter
            merged = folder / "train.jsonl"
            merged.write_text("".join(p.read_text(encoding="utf-8") for p in data_files if p.is_file()), encoding="utf-8")
            init = None
            if opts.continue_adapter and rounds and rounds[-1].get("adapter_dir"):
                init = Path(rounds[-1]["adapter_dir"])
            elif opts.continue_adapter and not rounds and start_adapter is not None:
                init = opts.start_peft or peft_of_start(start_adapter)  # round 1 keeps training the adapter it sampled with
            result = train_sft(SftOptions(
                base=opts.base, data=merged, out=folder / "adapter", rank=opts.rank, alpha=opts.alpha,
                dropout=opts.dropout, targets=opts.targets, epochs=opts.epochs, max_steps=opts.sft_max_steps,
                lr=opts.lr, max_length=opts.max_length, grad_accum=opts.grad_accum, save_steps=opts.save_steps, split="train", seed=opts.seed + n, resume=True, convert=True,
                progress=opts.progress, cache=opts.cache, tool_block=opts.tool_block, init_adapter=init,
                prompt_style=opts.prompt_settings.prompt_style,
                date_grounding=opts.prompt_settings.date_grounding, bf16=opts.bf16,
            ))
            new_adapter = result.gguf
            train_info = {"steps": result.steps, "examples": result.examples, "final_loss": result.final_loss,
                          "seconds": result.seconds}
        else:
            log(f"round {n}: no new verified success; the adapter stays {adapter}")
        log(f"round {n}: {rows_kept} rows kept of {len(records)} episodes; eval on dev ({len(dev)} scenarios)")
        dev_result = evaluate(new_adapter, dev, folder / "dev")
        info = {
            "round": n, "sampled_from": str(adapter) if adapter else (f"policy {opts.policy}" if n == 1 and opts.policy else None),
            "sampling": run_sampling.to_dict() if run_sampling else None,
            "episodes": len(records), "sample_success": sampled.task_success, "sample_reward": sampled.mean_reward,
            "rows_kept": rows_kept, "rows_on_policy": rows_on_policy,
            "policy_fallback_scenarios": from_policy["fallback"], "policy_mixed_scenarios": from_policy["mixed"],
            "policy_named_scenarios": from_policy["named"], "mixed_taken": mixed_taken, "rows_trained": total_rows if train_info else 0, "data": str(folder / "data" / "sft.jsonl"),
            "adapter": str(new_adapter) if new_adapter else None,
            "adapter_dir": str(folder / "adapter") if train_info else (rounds[-1].get("adapter_dir") if rounds else None),
            "train": train_info, "dev": dev_result, "seconds": round(time.monotonic() - started, 1),
        }
        write_json_atomic(folder / ROUND, info)
        rounds.append(info)
        log(f"round {n}: dev success {dev_result['success']:.1f}% (reward {dev_result['reward']:.3f})")
        write_json_atomic(opts.out / SUMMARY, _summary(opts, rounds, None, start_dev))
    test = None
    if opts.test_limit:
        test_scenarios = balanced(suite.scenarios(split="test", per_template=opts.per_template, seed=opts.seed),
                                  opts.test_limit)
        last = Path(rounds[-1]["adapter"]) if rounds and rounds[-1]["adapter"] else None
        test = {"start": evaluate(start_adapter, test_scenarios, opts.out / "test-start"),
                "last_round": evaluate(last, test_scenarios, opts.out / "test-last")}
    summary = _summary(opts, rounds, test, start_dev)
    write_json_atomic(opts.out / SUMMARY, summary)
    return summary


def _summary(opts: EiOptions, rounds: list[dict[str, Any]], test: dict[str, Any] | None,
             start_dev: dict[str, Any] | None = None) -> dict[str, Any]:
    options = {k: (str(v) if isinstance(v, Path) else v) for k, v in flat_options(opts).items()}
    return {
        "start_dev": start_dev,
        "rounds": [{"round": r["round"], "rows_kept": r["rows_kept"], "dev_success": r["dev"]["success"],
                    "dev_reward": r["dev"]["reward"], "sample_success": r["sample_success"], "adapter": r["adapter"]}
                   for r in rounds],
        "test": test,
        "note": "dev is what a round would be chosen on; compare on test (start vs last round) for an unbiased figure",
        "options": options,
    }
