"""Figure 4, peers on the same scenarios: this runtime against llama-cpp-python's own tool calling.

Three agents play the same eval scenarios (the first few of the dev split, taken across the
templates in turn), each from a fresh calendar, with the same model, greedy sampling, the same
max tokens per step, step budget and simulated user:
(a) ``runtime``: the agent loop on the bench's ``LlamaBackend``, exactly as ``python -m agent eval``
    runs it (``agent.eval.dialogue.run_episode``);
(b) ``chatml_fc``: ``Llama(chat_format="chatml-function-calling")`` driven by the OpenAI-style
    client loop (``client_loop``), in-process;
(c) ``server``: ``llama_cpp.server`` with the same chat format and the same client loop over HTTP;
(d) ``llama_server``: llama.cpp's own ``llama-server --jinja`` (Hermes detection and a lazy
    tool-call grammar in C++) with a Hermes template, the same client loop over HTTP: a user's
    strongest alternative. Built only on request (``llama_server_build``); not measured without it.
The scenarios are interleaved (a, b, c, d for one scenario, then the next) so drift in a shared
machine's load hits every peer alike.

Same weights everywhere: with an adapter (``--adapter``), the runtime's backend, the in-process
``Llama``, ``llama_cpp.server`` (``--lora_path``) and ``llama-server`` (``--lora``) all load it,
after the runtime's own check of the pair (``models.check.check_pair``: llama-cpp-python segfaults
on a wrong adapter instead of refusing it); a peer that cannot apply it the same way (llama_cpp.server
has no scale setting) is "not measured" rather than run on other weights. The prompt follows the
run's prompt settings (``agent.prompt.PromptSettings``) and the runtime's tool block its ``tool_block``,
as in ``python -m agent eval`` (an adapter is served with the prompt it was trained on); the other
peers render the tools their own way, from the same schemas.

Per peer: valid tool-call rate (known tool, arguments that pass ``registry.validate``, over every
call attempted), mean seconds and tool calls per episode, and the eval verifier's success rate.
For the runtime (its backend's count) and llama-server (``timings.prompt_n``): prompt tokens
evaluated per model step, over every step and over the steps that follow a tool call, where a
front end that re-renders the history differently from what the model wrote evaluates it again.

Known behaviour of the peer's handler (llama-cpp-python 0.3.36, ``chatml_function_calling``):
with ``tool_choice="auto"`` it generates function arguments and plain messages with
``max_tokens=None``, whatever the request asks, so a runaway argument stops only at the context
size; and its template has no case for ``tool`` messages, so tool results never reach the model.
"""

from __future__ import annotations

import statistics
import time
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from itertools import zip_longest
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agent.bench.report import progress
from agent.tools import ToolResult

if TYPE_CHECKING:
    from agent.bench.context import Bench
    from agent.eval.suite import Environment, EvalSuite, Scenario, Verdict
    from agent.eval.trace import EpisodeTrace

CHAT_FORMAT = "chatml-function-calling"
MAX_TOKENS = 96  # per model step, every peer: room for one tool call with a few arguments
REQUEST_TIMEOUT_S = 900.0  # one server request; a runaway argument fills the whole context first


@dataclass(frozen=True)
class Plan:
    scenarios: int
    max_steps: int  # model steps per user turn
    max_user_turns: int  # user messages per dialogue (the eval's default is 4)


QUICK, FULL = Plan(scenarios=1, max_steps=2, max_user_turns=2), Plan(scenarios=6, max_steps=4, max_user_turns=4)

# (key suffix, label): the JSON keys are ``valid_call_rate_<suffix>`` etc.
PEERS = (("runtime", "this runtime"), ("chatml_fc", CHAT_FORMAT), ("server", "llama_cpp.server"),
         ("llama_server", "llama-server --jinja"))
EVALUATED_BY = ("runtime", "llama_server")  # the peers that say how many prompt tokens they evaluated

# Plays one scenario in a fresh environment and returns the trace the verifier reads.
EpisodeFn = Callable[["Scenario", "Environment"], "EpisodeTrace"]


@dataclass
class PeerRun:
    """What one peer did over the scenarios; the figures are computed from this."""

    seconds: list[float] = field(default_factory=list)
    attempted: list[int] = field(default_factory=list)  # tool calls attempted, per episode
    valid: int = 0
    successes: list[bool] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # the first model/runner error of each episode that had one
    skipped: str = ""  # why the peer could not run at all
    # where a step's evaluated prompt tokens come from: "backend" (the runtime's own count, always
    # there), "timings" (a server's ``timings.prompt_n``, where it sends one), "" (nowhere)
    evaluated_from: str = ""
    evaluated: list[int] = field(default_factory=list)  # prompt tokens evaluated, per model step (where known)
    evaluated_after_call: list[int] = field(default_factory=list)  # ... per step that follows a tool call
    prompt_after_call: list[int] = field(default_factory=list)  # the whole prompt of those steps
    appended_after_call: list[int] = field(default_factory=list)  # their prompt − the previous step's prompt
    # their prompt − what the engine held after the previous step (its prompt and the tokens it
    # generated): the tool results and the turn's framing, the part that is new to the engine
    new_after_call: list[int] = field(default_factory=list)

    def add(self, trace: EpisodeTrace, seconds: float, environment: Environment, verdict: Verdict) -> None:
        calls = trace.calls()
        self.count_evaluated(trace)
        self.seconds.append(seconds)
        self.attempted.append(len(calls) + trace.unreadable_blocks())
        self.valid += sum(not isinstance(environment.registry.validate(c.name, c.arguments), ToolResult) for c in calls)
        self.successes.append(verdict.success)
        error = trace.error or next((e.turn.error for e in trace.exchanges if e.turn.error), None)
        if error:
            self.errors.append(" ".join(str(error).split()))  # one line: notes are table rows

    def count_evaluated(self, trace: EpisodeTrace) -> None:
        """Steps whose evaluated count is known: the runtime's always (its backend counts), a client
        loop's only where the server sent ``timings.prompt_n``. "After a tool call": the step before,
        in the same turn, made at least one call (its results are the new part of this prompt)."""
        for exchange in trace.exchanges:
            previous = None
            for step in exchange.turn.steps:
                known = (self.evaluated_from == "backend"
                         or self.evaluated_from == "timings" and "prompt_n" in step.timings)
                if known:
                    self.evaluated.append(step.evaluated_tokens)
                    if previous is not None and previous.calls:
                        self.evaluated_after_call.append(step.evaluated_tokens)
                        self.prompt_after_call.append(step.prompt_tokens)
                        self.appended_after_call.append(step.prompt_tokens - previous.prompt_tokens)
                        self.new_after_call.append(step.prompt_tokens - previous.prompt_tokens
                                                   - previous.generated_tokens)
                previous = step


def pick_scenarios(scenarios: list[Scenario], count: int) -> list[Scenario]:
    """The first ``count`` scenarios taken across templates in turn: each template's first, then
    each one's second, ... (so two scenarios are two different templates)."""
    by_template: dict[str, list[Scenario]] = {}
    for scenario in scenarios:
        by_template.setdefault(scenario.template, []).append(scenario)
    rounds = zip_longest(*by_template.values())
    return [s for batch in rounds for s in batch if s is not None][:count]


def peers(bench: Bench, backend: Any) -> None:
    """Adds figure 4: every peer plays the same scenarios, interleaved; the server always stops."""
    import httpx
    from llama_cpp import Llama

    from agent.backends.llama import ModelFiles
    from agent.bench.client_loop import in_process, over_http, run_client_episode
    from agent.bench.peer_server import ServerUnavailable, llama_server
    from agent.eval.dialogue import run_episode
    from agent.eval.suite import load_eval_suite
    from agent.loop import Budgets

    config = bench.config
    files = ModelFiles.check(config.model_path, config.lora_path)  # ModelRefused here, not a segfault in Llama
    plan = QUICK if config.quick else FULL
    suite = load_eval_suite(config.settings)
    scenarios = pick_scenarios(suite.scenarios(split="dev"), config.peer_scenarios or plan.scenarios)
    budgets = Budgets(max_steps=plan.max_steps, max_tool_calls=16, max_tokens=MAX_TOKENS)
    runs = {key: PeerRun(evaluated_from={"runtime": "backend", "llama_server": "timings"}.get(key, ""))
            for key, _ in PEERS}
    chosen = set(config.peers or dict(PEERS))
    for key in set(dict(PEERS)) - chosen:
        runs[key].skipped = f"not run in this measurement (--peers {','.join(config.peers or ())})"
    with ExitStack() as stack:
        progress(f"peers: loading llama-cpp-python's {CHAT_FORMAT} handler")
        llama = Llama(**in_process_settings(files, config))
        stack.callback(llama.close)
        local = in_process(llama)
        episodes: dict[str, EpisodeFn] = {
            "runtime": lambda s, env: run_episode(s, backend, env, budgets=budgets, session_id=f"peers-{s.id}",
                                                  max_user_turns=plan.max_user_turns),
            "chatml_fc": lambda s, env: run_client_episode(local, s, env, budgets, plan.max_user_turns),
        }
        try:
            if "server" not in chosen:
                raise ServerUnavailable(runs["server"].skipped)
            progress("peers: starting llama_cpp.server")
            base_url = stack.enter_context(llama_server(
                files.model_path, n_ctx=config.n_ctx, n_threads=llama.n_threads,
                n_threads_batch=llama.n_threads_batch, chat_format=CHAT_FORMAT, lora_path=files.lora_path,
                lora_scale=config.lora_scale, log_path=bench.tmp / "server.log"))
            remote = over_http(stack.enter_context(httpx.Client(base_url=base_url, timeout=REQUEST_TIMEOUT_S)))
            episodes["server"] = lambda s, env: run_client_episode(remote, s, env, budgets, plan.max_user_turns)
        except ServerUnavailable as exc:
            runs["server"].skipped = str(exc)
        try:
            if "llama_server" not in chosen:
                raise ServerUnavailable(runs["llama_server"].skipped)
            native = stack.enter_context(httpx.Client(base_url=_start_native(bench, stack, llama),
                                                      timeout=REQUEST_TIMEOUT_S))
            _check_tools_reach_prompt(native, suite)
            remote_native = over_http(native)
            episodes["llama_server"] = lambda s, env: run_client_episode(remote_native, s, env, budgets,
                                                                         plan.max_user_turns)
        except ServerUnavailable as exc:
            runs["llama_server"].skipped = str(exc)
            progress(f"peers: llama-server {exc}")
        episodes = {key: episode for key, episode in episodes.items() if key in chosen}
        for i, scenario in enumerate(scenarios):
            for key, episode in episodes.items():
                progress(f"peers: scenario {i + 1}/{len(scenarios)} ({scenario.id}), {key}")
                _play(suite, scenario, episode, runs[key], config.settings)
        forced = {key: PeerRun(evaluated_from=runs[key].evaluated_from, skipped=runs[key].skipped)
                  for key in EVALUATED_BY}
        if "runtime" in episodes and "llama_server" in episodes:
            _after_a_forced_call(suite, scenarios, backend, remote_native, forced, config.settings)
    _report(bench, runs, scenarios, plan)
    _report_evaluated(bench.report, runs, forced)


def in_process_settings(files: Any, config: Any) -> dict[str, Any]:
    """``Llama`` keyword arguments of peer (b), from checked ``ModelFiles``: the runtime engine's
    model, adapter, context, batch, threads and seed, with the chat format under test.
    ``llama_cpp.server`` (peer (c)) is started with the same (``peer_server.python_server_command``)."""
    return {"model_path": files.model_path, "n_ctx": config.n_ctx, "n_batch": min(512, config.n_ctx),
            "n_threads": config.n_threads, "n_threads_batch": config.n_threads, "seed": 0, "verbose": False,
            "chat_format": CHAT_FORMAT, "lora_path": files.lora_path, "lora_scale": config.lora_scale}


def _after_a_forced_call(suite: EvalSuite, scenarios: list[Scenario], backend: Any, chat: Any,
                         forced: dict[str, PeerRun], settings: Any = None) -> None:
    """Each scenario's first message, where both make a call at once and then go on (2 steps): the
    runtime's reply opens with ``<tool_call>`` (the grammar writes the call), llama-server's first
    request says ``tool_choice: "required"`` (its grammar forces a call). The step after the call is
    what the tokens figure compares: in the dialogues SmolLM2 rarely makes llama-server call at all."""
    from agent.bench.client_loop import run_client_episode
    from agent.bench.recording import RecordingBackend
    from agent.eval.dialogue import run_episode
    from agent.loop import Budgets

    budgets = Budgets(max_steps=2, max_tool_calls=16, max_tokens=MAX_TOKENS)
    for i, scenario in enumerate(scenarios):
        progress(f"peers: after a forced call, scenario {i + 1}/{len(scenarios)}")
        recorder = RecordingBackend(backend)
        recorder.prefixes = [backend.chat_format.call_open + "\n"]
        plays: dict[str, EpisodeFn] = {
            "runtime": lambda s, env: run_episode(s, recorder, env, budgets=budgets, session_id=f"after-call-{s.id}",
                                                  max_user_turns=1),
            "llama_server": lambda s, env: run_client_episode(_required_first(chat), s, env, budgets, 1),
        }
        for key, play in plays.items():
            environment = _environment(suite, scenario, settings)
            try:
                forced[key].count_evaluated(play(scenario, environment))
            finally:
                environment.close()


def _required_first(chat: Any) -> Any:
    """The chat function with ``tool_choice: "required"`` on its first request only."""
    asked: list[bool] = []

    def first_required(request: dict[str, Any]) -> dict[str, Any]:
        if not asked:
            asked.append(True)
            request = {**request, "tool_choice": "required"}
        return chat(request)

    return first_required


def _start_native(bench: Bench, stack: ExitStack, llama: Any) -> str:
    """llama-server from the build cache, with the in-process peer's threads; its base URL."""
    from agent.bench import llama_server_build as build
    from agent.bench.peer_server import HERMES_TEMPLATE, native_llama_server

    config = bench.config
    binary = build.binary()
    progress(f"peers: starting llama-server ({binary})" if binary.exists() else "peers: llama-server is not built")
    return stack.enter_context(native_llama_server(
        binary, config.model_path, n_ctx=config.n_ctx, n_threads=llama.n_threads,
        n_threads_batch=llama.n_threads_batch, template=build.templates_dir() / HERMES_TEMPLATE,
        lora_path=config.lora_path, lora_scale=config.lora_scale, log_path=bench.tmp / "llama-server.log"))


def _check_tools_reach_prompt(client: Any, suite: EvalSuite) -> None:
    """The server renders a request with the calendar's tools (``/apply-template``); unless every
    tool's name is in the prompt it would play without tools, so it is not measured at all."""
    from agent.bench.peer_server import ServerUnavailable

    environment = suite.make_environment(suite.scenarios(split="dev")[0])
    try:
        tools = environment.registry.schemas()
    finally:
        environment.close()
    body = {"messages": [{"role": "system", "content": "You manage a calendar."},
                         {"role": "user", "content": "hello"}], "tools": tools}
    try:
        response = client.post("/apply-template", json=body)
        response.raise_for_status()
        prompt = str(response.json().get("prompt", ""))
    except Exception as exc:
        raise ServerUnavailable(f"not measured: /apply-template failed ({type(exc).__name__}: {exc})"[:300]) from exc
    missing = [t["function"]["name"] for t in tools if t["function"]["name"] not in prompt]
    if missing:
        raise ServerUnavailable(f"not measured: llama-server's prompt lacks the tools {missing[:3]} "
                                "(its template drops them)")


def _environment(suite: EvalSuite, scenario: Scenario, settings: Any) -> Environment:
    """A fresh environment with the run's system-prompt settings, as ``agent.eval.runner.run_one``
    makes it (``settings`` None: the suite's defaults)."""
    environment = suite.make_environment(scenario)
    if settings is None:
        return environment
    return replace(environment, prompt_settings=settings.prompt_settings)


def _play(suite: EvalSuite, scenario: Scenario, episode: EpisodeFn, run: PeerRun, settings: Any = None) -> None:
    """One timed episode on a fresh environment, scored by the eval's verifier."""
    environment = _environment(suite, scenario, settings)
    try:
        started = time.perf_counter()
        trace = episode(scenario, environment)
        seconds = time.perf_counter() - started
        run.add(trace, seconds, environment, suite.verifier.verify(trace))
    finally:
        environment.close()


def _report(bench: Bench, runs: dict[str, PeerRun], scenarios: list[Scenario], plan: Plan) -> None:
    report = bench.report
    weights = weights_note(bench.config.lora_path, bench.config.lora_scale)
    setup = (f"{len(scenarios)} dev scenarios ({', '.join(s.id for s in scenarios)}), whole dialogues of ≤ "
             f"{plan.max_user_turns} user messages, greedy, ≤ {plan.max_steps} model steps per turn, "
             f"max_tokens {MAX_TOKENS} per step, same model and n_ctx; {weights}")
    for key, label in PEERS:
        run = runs[key]
        rate = run.valid / sum(run.attempted) if sum(run.attempted) else None
        note = (f"skipped: {run.skipped}" if run.skipped
                else f"skipped: no tool call was attempted in {len(run.attempted)} episodes" if rate is None
                else f"{run.valid} of {sum(run.attempted)} calls valid (known tool, arguments pass registry.validate)")
        report.add(f"valid_call_rate_{key}", f"valid tool-call rate: {label}", rate,
                   note=note + ("; " + setup if key == "runtime" else "" if run.skipped else "; " + weights))
    for key, label in PEERS:
        run = runs[key]
        errors = f"{len(run.errors)} of {len(run.seconds)} episodes hit an error, e.g. {run.errors[0][:160]}" if run.errors else ""
        report.add(f"seconds_per_episode_{key}", f"s/episode: {label}", _mean(run.seconds),
                   note=f"skipped: {run.skipped}" if run.skipped else errors)
    runtime = _mean(runs["runtime"].seconds)
    for key, suffix in (("chatml_fc", ""), ("server", "_server"), ("llama_server", "_llama_server")):
        theirs = _mean(runs[key].seconds)
        ratio = runtime / theirs if runtime is not None and theirs else None
        report.add(f"seconds_per_episode_ratio{suffix}", f"s/episode: runtime ÷ {dict(PEERS)[key]}", ratio,
                   note=f"skipped: {runs[key].skipped}" if runs[key].skipped
                   else "mean wall time of the same episodes, each from a fresh calendar")
    for key, label in PEERS:
        run = runs[key]
        report.add(f"calls_per_episode_{key}", f"tool calls/episode: {label}", _mean(run.attempted),
                   note=f"skipped: {run.skipped}" if run.skipped else "")
    for key, label in PEERS:
        run = runs[key]
        report.add(f"success_rate_{key}", f"task success (eval verifier): {label}",
                   _mean([float(s) for s in run.successes]),
                   note=f"skipped: {run.skipped}" if run.skipped else
                   "the eval verifier on the final calendar and the trace" if key == "runtime" else "")


def _report_evaluated(report: Any, runs: dict[str, PeerRun], forced: dict[str, PeerRun]) -> None:
    """Prompt tokens evaluated per step: what a long dialogue costs beyond the new text. The prompts
    differ between peers (each renders the tools and turns its own way), so the counts compare what
    each front end makes llama.cpp evaluate, not the same token sequence. Per step over the
    dialogues (``runs``); after a tool call from the forced-call steps (``forced``), with the
    dialogues' own after-call steps in the note."""
    labels = dict(PEERS)
    for key in EVALUATED_BY:
        run = runs[key]
        skip = f"skipped: {run.skipped}" if run.skipped else ""
        report.add(f"evaluated_per_step_{key}", f"evaluated prompt tokens/step: {labels[key]}", _mean(run.evaluated),
                   note=skip or (f"{len(run.evaluated)} steps, the first of each episode included "
                                 f"({sum(run.evaluated)} tokens)" if run.evaluated
                                 else "skipped: no step said how many tokens it evaluated"))
        probe = forced[key]
        after = _mean(probe.evaluated_after_call)
        dialogues = (f"; in the dialogues {len(run.evaluated_after_call)} such steps, "
                     f"{_mean(run.evaluated_after_call) or 0:.0f} evaluated on average")
        report.add(f"evaluated_after_call_{key}", f"evaluated prompt tokens/step after a tool call: {labels[key]}",
                   after, note=f"skipped: {probe.skipped}" if probe.skipped else (
                       f"{len(probe.evaluated_after_call)} steps after a forced first call, "
                       f"{_mean(probe.appended_after_call):.0f} tokens appended since the step before "
                       f"(its reply and the tool result), prompts of {_mean(probe.prompt_after_call):.0f}" + dialogues
                       if after is not None else "skipped: no step followed a tool call" + dialogues))
        _report_reevaluated(report, key, labels[key], run, probe)
    ours, theirs = _mean(forced["runtime"].evaluated_after_call), _mean(forced["llama_server"].evaluated_after_call)
    ratio = theirs / ours if ours and theirs is not None else None
    report.add("evaluated_after_call_ratio_llama_server",
               "evaluated tokens after a tool call: llama-server ÷ runtime", ratio,
               note=f"skipped: {forced['llama_server'].skipped}" if forced["llama_server"].skipped
               else "" if ratio is not None else "skipped: no step after a tool call on one side")


def reevaluated(run: PeerRun) -> list[int]:
    """Per step after a tool call: prompt tokens evaluated beyond the new ones (``new_after_call``).
    The engine still holds the previous prompt and the call it generated; a front end that renders
    that call back differently from what the model wrote (llama-server's template re-serialises the
    arguments with ``tojson``) breaks the cache where the texts part, and evaluates the rest again.
    Measured floors: 0 for the runtime; 1 for llama-server, whose generated count includes the stop
    token it sampled but never evaluated (it comes back as the template's ``<|im_end|>``)."""
    return [max(0, evaluated - new) for evaluated, new in zip(run.evaluated_after_call, run.new_after_call)]


def _report_reevaluated(report: Any, key: str, label: str, run: PeerRun, probe: PeerRun) -> None:
    """``reevaluated`` over every step after a call, the dialogues' and the forced calls' together
    (the same rule; the prompts differ between peers, this count does not depend on their length)."""
    skipped = probe.skipped or run.skipped
    values = reevaluated(run) + reevaluated(probe)
    note = (f"skipped: {skipped}" if skipped else "skipped: no step followed a tool call" if not values else
            f"{len(values)} steps after a call (dialogues and forced calls), {sum(v > 1 for v in values)} of them "
            f"above 1 (llama-server's stop token); per step {values[:20]}; evaluated beyond the tool results "
            f"and framing, which were {_mean(run.new_after_call + probe.new_after_call):.0f} tokens on average")
    report.add(f"reevaluated_after_call_{key}", f"re-evaluated prompt tokens/step after a tool call: {label}",
               _mean(values), note=note)


def weights_note(lora_path: str | None, lora_scale: float = 1.0) -> str:
    """Which weights every peer ran, for the figure's notes: the adapter by file name and sha256
    prefix (the name alone does not tell two trainings apart)."""
    if lora_path is None:
        return "base weights, no adapter"
    from agent.backends.llama.engine import sha256

    return f"adapter {Path(lora_path).name} (sha256 {sha256(lora_path)[:12]}) at scale {lora_scale:g} on every peer"


def _mean(values: list[float] | list[int]) -> float | None:
    return statistics.fmean(values) if values else None
