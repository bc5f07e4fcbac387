"""BFCL v4 multi-turn as a second domain: the oracle passes BFCL's own checker, a wrong run fails
it with BFCL's error type, the tools and the dialogue are the case's, and ``agent/`` is untouched
by the domain (``tests/test_layers.py``). Needs ``bfcl-eval``, which the README's test command
installs with ``--no-deps`` (and ``mpmath`` from the ``test`` extra)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.backends.scripted import ScriptedBackend
from agent.eval import cli
from agent.eval.dialogue import play_dialogue, run_episode
from agent.eval.runner import RunOptions, load_episodes, run_eval
from agent.eval.suite import Scenario, Verdict
from agent.formats import HERMES
from agent.loop import Agent
from tools.bfcl.data import CATEGORIES, load_cases
from tools.bfcl.eval_suite import load_eval_suite
from tools.bfcl.oracle import ground_truth_calls, parse_call
from tools.bfcl.world import build_world

REPO = Path(__file__).resolve().parent.parent
SUITE = load_eval_suite()


def scenario(case_id: str) -> Scenario:
    category = case_id.rsplit("_", 1)[0]
    return next(s for s in SUITE.scenarios(templates=[category]) if s.id == case_id)


def play(policy: str, chosen: Scenario) -> Verdict:
    environment = SUITE.make_environment(chosen)
    trace = run_episode(chosen, ScriptedBackend(SUITE.policies[policy](chosen)), environment)
    return SUITE.verifier.verify(trace)


# A handful for CI (all 200 of multi_turn_base: ``python -m agent eval --domain bfcl --policy oracle``):
# the first cases of each category; 173, whose ground truth passes a string to an integer
# parameter; 0, which has an excluded function; 180, two of whose turns have no ground-truth call.
HANDFUL = ["multi_turn_base_0", "multi_turn_base_1", "multi_turn_base_180", "multi_turn_base_173",
           "multi_turn_miss_param_0", "multi_turn_long_context_0", "multi_turn_miss_func_0"]


@pytest.mark.parametrize("case_id", HANDFUL)
def test_the_oracle_passes_bfcls_checker(case_id: str) -> None:
    verdict = play("oracle", scenario(case_id))
    assert (verdict.success, verdict.errors, verdict.components) == (True, [], {"bfcl_valid": 1.0, "bfcl_turns": 1.0})


def test_calling_nothing_fails_bfcls_checker_with_its_error_type() -> None:
    verdict = play("no_calls", scenario("multi_turn_base_0"))
    assert not verdict.success and verdict.reward == 0.0
    assert verdict.components == {"bfcl_valid": 0.0, "bfcl_turns": 0.0,
                                   "bfcl_error:multi_turn:empty_turn_model_response": 1.0}
    assert verdict.errors[0].startswith("multi_turn:empty_turn_model_response: ")


def play_altered(chosen: Scenario, calls: list[list[str]]) -> Verdict:
    """The oracle playing ``calls`` instead of the case's ground truth, scored against the real one."""
    altered = Scenario.from_dict({**chosen.to_dict(), "expected": {"ground_truth": calls}})
    environment = SUITE.make_environment(altered)
    trace = run_episode(altered, ScriptedBackend(SUITE.policies["oracle"](altered)), environment)
    trace.scenario = chosen
    return SUITE.verifier.verify(trace)


def test_a_wrong_call_is_a_state_mismatch_for_bfcls_checker() -> None:
    """The oracle's calls with one argument changed: BFCL compares the worlds after the turn."""
    chosen = scenario("multi_turn_base_0")
    truth = chosen.expected["ground_truth"]
    wrong = [["cd(folder='document')", "mkdir(dir_name='tmp')", "mv(source='final_report.pdf', destination='tmp')"],
             *truth[1:]]
    verdict = play_altered(chosen, wrong)
    assert not verdict.success and verdict.components["bfcl_turns"] == 0.0
    assert verdict.errors[0].startswith("multi_turn:instance_state_mismatch: ")


@pytest.mark.parametrize("wrong_turn", [1, 3])
def test_the_turns_passed_before_the_first_wrong_one_are_counted_by_bfcls_checker(wrong_turn: int) -> None:
    """Case 0 has four turns; a wrong grep (turn 2) or a missing diff (turn 4) fails the case, but
    the checker run on the first turns alone passes those before it: 1 or 3 of 4."""
    chosen = scenario("multi_turn_base_0")
    calls = [list(t) for t in chosen.expected["ground_truth"]]
    calls[wrong_turn] = calls[wrong_turn][:-1] if wrong_turn == 3 else \
        ["cd(folder='temp')", "grep(file_name='final_report.pdf',pattern='nothing like it')"]
    verdict = play_altered(chosen, calls)
    assert not verdict.success and verdict.reward == 0.0
    assert verdict.components["bfcl_turns"] == wrong_turn / 4


def test_the_run_report_gives_the_mean_share_of_turns_per_category(tmp_path: Path) -> None:
    from tools.bfcl.checker import turns_report

    chosen = [scenario("multi_turn_base_0"), scenario("multi_turn_base_1")]
    policy = {"multi_turn_base_0": "oracle", "multi_turn_base_1": "no_calls"}
    records = run_eval(SUITE, chosen, lambda s, k: ScriptedBackend(SUITE.policies[policy[s.id]](s)),
                       RunOptions(out_dir=tmp_path, progress=False))
    text = turns_report(tmp_path, records)
    assert text is not None and "multi_turn_base: 50.0 % of turns, mean over 2 episodes; turn 1 passed in 1" in text
    assert turns_report(tmp_path, []) is None


def test_samples_of_one_case_do_not_share_the_checkers_state(tmp_path: Path) -> None:
    """BFCL's checker keeps its instances in module globals named by model and case: each
    verification uses its own name and removes them, so a second sample starts clean."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    records = run_eval(SUITE, [scenario("multi_turn_base_0")], lambda s, k: ScriptedBackend(SUITE.policies["oracle"](s)),
                       RunOptions(out_dir=tmp_path, samples=3, progress=False))
    assert [r.verdict.success for r in records] == [True, True, True]
    assert not [k for k in vars(multi_turn_utils) if k.startswith("iljeong_")]


def test_a_cases_tools_are_its_classes_docs_less_the_excluded_ones() -> None:
    case = load_cases("multi_turn_base")[0]
    assert case.excluded_function == ("cp",)
    registry = build_world(case).registry
    assert {"cd", "mv", "post_tweet"} <= set(registry.names) and "cp" not in registry.names
    text = json.dumps(registry.schemas())
    assert '"type": "dict"' not in text and '"type": "float"' not in text  # BFCL's names, mapped
    ticket = build_world(next(c for c in load_cases("multi_turn_base") if "TicketAPI" in c.involved_classes)).registry
    updates = ticket.get("edit_ticket").schema()["function"]["parameters"]["properties"]["updates"]
    assert updates["type"] == "object" and updates["properties"]["priority"]["type"] == "integer"
    # names are checked, values are BFCL's business (its own ground truth passes a string id)
    assert ticket.validate("close_ticket", {"ticket_id": "x"}).model_dump() == {"ticket_id": "x"}
    assert ticket.validate("close_ticket", {}).error == "invalid_arguments"
    assert ticket.validate("close_ticket", {"ticket_id": 1, "why": "x"}).error == "invalid_arguments"


def test_every_cases_tools_compile_to_a_bounded_call_grammar(smollm2: Path) -> None:
    """The llama backend constrains calls with a grammar built from these schemas: llama.cpp's
    grammar parser must accept BFCL's, or a model run would fail on its first call, and each must
    be bounded, or no token budget would be sure to close a call."""
    import math

    import llama_cpp  # a dependency of the package: a broken install fails here, it is not skipped

    from agent.formats.gbnf import max_text_bytes

    vocab = llama_cpp.Llama(str(smollm2), vocab_only=True, verbose=False)
    seen: set[tuple[str, ...]] = set()
    for category in CATEGORIES:
        for case in load_cases(category):
            key = (*case.involved_classes, "-", *case.excluded_function)
            if key not in seen:
                seen.add(key)
                gbnf = HERMES.call_gbnf(build_world(case).registry.schemas())
                assert math.isfinite(max_text_bytes(gbnf)), key
                grammar = llama_cpp.llama_sampler_init_grammar(vocab._model.vocab, gbnf.encode("utf-8"), b"root")
                assert grammar, key
                llama_cpp.llama_sampler_free(grammar)


def test_a_held_out_function_becomes_a_tool_at_its_turn() -> None:
    """miss_func: ``sort`` is held out until turn 3, which has no user message of its own; BFCL's
    FC handlers then say so in their words, and the tool joins the registry the agent holds."""
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    chosen = scenario("multi_turn_miss_func_0")
    assert chosen.initial["missed_function"] == {"3": ["sort"]}
    environment = SUITE.make_environment(chosen)
    shown = []

    def run_turn(messages, approver):
        shown.append("sort" in environment.registry.names)
        return Agent(ScriptedBackend(lambda m: "Done."), environment.registry).run_turn(messages, approver)

    trace = play_dialogue(chosen, environment, run_turn)
    assert shown == [False, False, False, True, True]
    assert trace.exchanges[3].user_text == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC


def test_bfcl_errors_are_failures_with_a_stable_code() -> None:
    registry = build_world(load_cases("multi_turn_base")[0]).registry
    result = registry.execute("cd", registry.validate("cd", {"folder": "nowhere"}))
    assert (result.ok, result.error) == (False, "bfcl_error") and "nowhere" in result.message
    result = registry.execute("cd", registry.validate("cd", {"folder": "document"}))
    assert result.ok and result.data == {"current_working_directory": "document"}


def test_positional_ground_truth_is_named_from_the_methods_signature() -> None:
    calls = ground_truth_calls(scenario("multi_turn_base_0"))
    assert calls[2] == [("sort", {"file_name": "final_report.pdf"})]  # BFCL writes sort('final_report.pdf')
    with pytest.raises(ValueError):
        parse_call("__import__('os').system('true')", {})


def test_every_user_turn_is_played_in_order_unstamped_under_the_cases_own_system_message() -> None:
    chosen = scenario("multi_turn_base_0")
    environment = SUITE.make_environment(chosen)
    trace = run_episode(chosen, ScriptedBackend(SUITE.policies["no_calls"](chosen)), environment, max_user_turns=1)
    users = [m["content"] for m in trace.messages if m["role"] == "user"]
    assert users == [chosen.opening, *chosen.user_script] and len(users) == 4  # not cut at max_user_turns
    assert trace.messages[0]["content"] == environment.system_prompt
    assert "You are an expert in composing functions." in environment.system_prompt


def test_eval_cli_scores_bfcl_by_domain_and_category(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--domain", "bfcl", "--category", "multi_turn_base", "--limit", "3", "--no-progress"]
    assert cli.main([*base, "--policy", "oracle", "--out", str(tmp_path / "oracle")]) == 0
    out = capsys.readouterr().out
    assert "multi_turn_base" in out and "100.0" in out
    assert cli.main([*base, "--policy", "no_calls", "--out", str(tmp_path / "floor")]) == 0
    capsys.readouterr()
    assert cli.main(["compare", str(tmp_path / "oracle"), str(tmp_path / "floor")]) == 0
    out = capsys.readouterr().out
    assert "paired episodes: 3" in out and "by wording" not in out  # one variant for all of BFCL: no vote
    assert [r.verdict.success for r in load_episodes(tmp_path / "floor")] == [False, False, False]
    assert cli.main(["--domain", "bfcl", "--policy", "oracle", "--split", "train", "--out", str(tmp_path / "x")]) == 2
    assert "test data only" in capsys.readouterr().err
    assert cli.main(["--domain", "bfcl", "--policy", "oracle", "--category", "multi_turn_composite",
                     "--out", str(tmp_path / "x")]) == 2
    assert "unknown BFCL category 'multi_turn_composite'" in capsys.readouterr().err
    assert cli.main(["--domain", "nope", "--policy", "oracle", "--out", str(tmp_path / "x")]) == 2
    assert capsys.readouterr().err.startswith("error: --domain nope: ")
    assert not (tmp_path / "x").exists()


def test_python_m_agent_eval_takes_the_domain_flag(tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--domain", "bfcl", "--policy", "oracle", "--limit", "1",
                          "--no-progress", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300,
                         cwd=REPO, env={**__import__("os").environ, "AGENT_DATA_DIR": str(tmp_path / "data")})
    assert run.returncode == 0, run.stderr
    assert "policy-oracle" in run.stdout and json.loads((tmp_path / "out" / "run.json").read_text())["suite"] == "bfcl"


def test_the_runtime_loads_bfcl_as_a_domain_by_its_short_name(tmp_path: Path) -> None:
    from dataclasses import replace

    from agent.config import Settings
    from agent.domain import load_domain

    domain = load_domain(replace(Settings(data_dir=tmp_path), domain=cli.domain_module("bfcl")))
    assert domain.name == "bfcl" and "cd" in domain.registry.names and "cp" not in domain.registry.names
    assert cli.domain_module("tools.calendar.domain") == "tools.calendar.domain"


def test_a_remote_model_is_scored_with_one_command_and_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--backend openai`` against a strict OpenAI-compatible server that answers with the
    oracle's calls as native ``tool_calls``: every case passes BFCL's checker, two at a time."""
    from tests.openai_server import StrictOpenAIServer, policy_script
    from tests.toy_openai import KEY

    chosen = SUITE.scenarios(per_template=3)
    by_opening = {s.opening: SUITE.policies["oracle"](s) for s in chosen}
    assert len(by_opening) == 3  # the server tells the conversations apart by their opening

    def policy_for(messages: list[dict]):
        return by_opening.get(next(m for m in messages if m["role"] == "user")["content"])

    monkeypatch.setenv("AGENT_API_KEY", KEY)
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    with StrictOpenAIServer(policy_script(policy_for), api_key=KEY) as server:
        assert cli.main(["--domain", "bfcl", "--backend", "openai", "--base-url", server.url, "--model", "remote",
                         "--limit", "3", "--concurrency", "2", "--no-progress", "--out", str(tmp_path / "run")]) == 0
    assert server.rejected == [] and server.requests
    records = load_episodes(tmp_path / "run")
    assert [r.verdict.success for r in records] == [True, True, True]
    assert {r.backend["backend"] for r in records} == {"openai"}


def test_qwen3s_prompt_is_bfcls_qwen_handler_layout_under_the_cases_system_text(tiny_qwen3: Path) -> None:
    """With Qwen3's own template the prompt has the layout BFCL's Qwen handler writes
    (``model_handler/local_inference/qwen_fc.py``): the tools as JSON lines inside ``<tools>`` in
    the system turn, the call format, results as ``<tool_response>`` in a user turn. The system
    text above the block is ours (README lists the differences)."""
    from tests.renderers import renderer_for

    chosen = scenario("multi_turn_base_0")
    environment = SUITE.make_environment(chosen)
    trace = run_episode(chosen, ScriptedBackend(SUITE.policies["oracle"](chosen)), environment)
    prompt = renderer_for(tiny_qwen3).render(trace.messages[:4], environment.registry.schemas())
    head = (f"<|im_start|>system\n{environment.system_prompt}\n\n# Tools\n\nYou may call one or more functions to "
            "assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:"
            "\n<tools>\n")
    assert prompt.startswith(head)
    assert ('\n</tools>\n\nFor each function call, return a json object with function name and arguments within '
            '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": '
            '<args-json-object>}\n</tool_call><|im_end|>\n') in prompt
    assert prompt.count('{"type": "function", "function": {"name": ') == len(environment.registry.names)
    assert f"<|im_start|>user\n{chosen.opening}<|im_end|>" in prompt
    assert '<|im_start|>user\n<tool_response>\n{"ok": true, "data": {"current_working_directory": "document"}}' in prompt


def test_the_demos_first_prompt_leaves_most_of_the_context_for_the_conversation(smollm2: Path) -> None:
    """BFCL cases expose up to 36 tools: with the demo's ``compact`` block the largest first
    prompt (system, tools, the opening) takes under a third of the context, so a multi-turn case
    has room; with the ``full`` block it would take well over half."""
    import llama_cpp

    from agent.config import Settings
    from models.demo import DEMO_TOOL_BLOCK
    from tests.renderers import renderer_for

    assert DEMO_TOOL_BLOCK == "compact"
    llm = llama_cpp.Llama(str(smollm2), vocab_only=True, verbose=False)
    renderers = {block: renderer_for(smollm2, tool_block=block) for block in ("compact", "full")}
    largest = dict.fromkeys(renderers, 0)
    longest: dict[tuple[str, ...], Scenario] = {}  # per tool set, the case with the longest opening
    for chosen in SUITE.scenarios():
        key = (*chosen.initial["involved_classes"], "-", *chosen.initial["excluded_function"])
        if key not in longest or len(chosen.opening) > len(longest[key].opening):
            longest[key] = chosen
    for chosen in longest.values():
        environment = SUITE.make_environment(chosen)
        messages = [{"role": "system", "content": environment.system_prompt}, {"role": "user", "content": chosen.opening}]
        for block, renderer in renderers.items():
            text = renderer.render(messages, environment.registry.schemas())
            largest[block] = max(largest[block], len(llm.tokenize(text.encode(), special=True)))
    n_ctx = Settings().n_ctx
    assert largest["compact"] < n_ctx / 3 < n_ctx / 2 < largest["full"]


def test_the_readmes_bfcl_commands_parse() -> None:
    """Every command of the BFCL block in docs/evaluation.md is one ``python -m agent`` accepts, flags and all."""
    import shlex

    from agent.__main__ import build_parser

    text = (REPO / "docs" / "evaluation.md").read_text(encoding="utf-8")
    start = text.index("```bash\n", text.index("Score something, one command each")) + len("```bash\n")
    block = text[start:text.index("```", start)].replace("\\\n", " ")
    commands = [shlex.split(line, comments=True) for line in block.splitlines() if line.strip()]
    assert len(commands) == 5 and all(words[:3] == ["python", "-m", "agent"] for words in commands)
    for words in commands:
        args = build_parser().parse_args(words[3:])
        assert args.command == "eval" and (args.eval_command == "compare" or args.domain == "bfcl")
