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

The run's options and what a re-run must keep are ``agent.train.ei_runs``'s; which scenarios a
round samples and which episodes it keeps, ``agent.train.ei_select``'s.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from agent.eval.runner import write_json_atomic
from agent.train.ei_runs import ROUND, EiOptions, check_same_run, finished_rounds, flat_options
from agent.train.ei_select import best_per_scenario, round_robin, success_by_template, template_weights, weighted_pick
from agent.train.trainer import TrainError

SUMMARY = "ei_summary.json"


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
    others = round_robin([s for s in pool if s.id not in {t.id for t in train}])
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
