"""README's GPU commands, checked where they can be without a GPU.

They cannot run here (no GPU, vLLM or DeepSpeed), so this reads the README's GPU block itself and
checks each command as far as this machine allows: every ``python -m agent`` flag parses and
reaches TRL's ``GRPOConfig`` (``--use-vllm`` above all, which no CPU run exercises), ``accelerate
launch`` and ``trl vllm-serve`` accept theirs (their own parsers), the ``BASE=`` line prints the
float folder, and the eval command runs as written, on two dev scenarios, against a local strict
OpenAI-compatible server. A README edit that breaks a command breaks this test.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import model_fixtures as mf

ROOT = Path(__file__).resolve().parents[1]


def gpu_block() -> str:
    text = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    start = text.index("```bash\n", text.index("On a GPU box the same commands run unchanged")) + len("```bash\n")
    return text[start:text.index("```", start)]


def gpu_commands() -> list[list[str]]:
    """Each command of the block as argv (continuations joined, comments, ``VAR=`` prefixes and ``&`` dropped)."""
    commands = []
    for line in gpu_block().replace("\\\n", " ").splitlines():
        if line.lstrip().startswith("BASE="):
            continue  # a shell assignment, checked on its own below
        words = [w for w in shlex.split(line, comments=True) if w != "&"]
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            words.pop(0)
        if words:
            commands.append(words)
    return commands


def agent_argv(words: list[str]) -> tuple[list[str], list[str]]:
    """(what comes before ``-m agent``, the agent's own argv)."""
    i = next(i for i in range(len(words) - 1) if words[i] == "-m" and words[i + 1] == "agent")
    return words[:i], words[i + 2:]


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def substitute(words: list[str], values: dict[str, str]) -> list[str]:
    return [values.get(w, w) for w in words]


def test_the_gpu_block_has_the_commands_this_test_checks() -> None:
    commands = gpu_commands()
    kinds = [" ".join(c[:2]) for c in commands]
    assert kinds == ["python -m", "trl vllm-serve", "accelerate launch", "vllm serve", "python -m"]
    assert [agent_argv(c)[1][:2] for c in commands if "agent" in c] == [["train", "grpo"]] * 2 + [["eval", "--backend"]]


def test_the_train_commands_flags_reach_grpo_config(tiny_qwen3: Path, tmp_path: Path, monkeypatch) -> None:
    from accelerate.commands.launch import launch_command_parser
    from transformers import HfArgumentParser
    from trl.scripts.vllm_serve import ScriptArguments

    from agent.__main__ import build_parser, settings_from
    from agent.train.cli import DEFAULT_TARGETS, grpo_options
    from agent.train.grpo import grpo_config

    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    for name in ("AGENT_MODEL_PATH", "AGENT_BACKEND", "AGENT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    commands = gpu_commands()
    (server,) = [c for c in commands if c[:2] == ["trl", "vllm-serve"]]
    (serve_args,) = HfArgumentParser(ScriptArguments).parse_args_into_dataclasses(substitute(server[2:], {"$BASE": "/b"}))
    trained = [c for c in commands if "agent" in c and agent_argv(c)[1][:2] == ["train", "grpo"]]
    for words in trained:
        launcher, argv = agent_argv(substitute(words, {"$Q8": str(tiny_qwen3), "runs/grpo": str(tmp_path / "grpo")}))
        processes = 1
        if launcher[:2] == ["accelerate", "launch"]:
            launch = launch_command_parser().parse_args([*launcher[2:], "-m", "agent", *argv])
            assert launch.module and launch.training_script == "agent" and launch.training_script_args == argv
            assert launch.use_deepspeed and int(launch.zero_stage) == 2
            processes = int(launch.num_processes)
        args = build_parser().parse_args(argv)
        settings = settings_from(args)
        opts = grpo_options(args, settings, Path(args.base), tuple(DEFAULT_TARGETS.split(",")))
        config = grpo_config(opts, components=4)
        assert config.use_vllm is True and config.vllm_mode == flag(argv, "--vllm-mode")
        assert opts.bf16 is True and config.bf16 is True  # --bf16: the base in bfloat16 and bf16 autocast
        assert config.num_generations == int(flag(argv, "--num-generations"))
        assert config.max_steps == int(flag(argv, "--max-steps"))
        assert config.max_completion_length == int(flag(argv, "--max-completion-length"))
        # TRL's rule (GRPOConfig.__post_init__ with the real world size): a generation batch holds whole groups
        assert (config.per_device_train_batch_size * processes * config.steps_per_generation) % config.num_generations == 0
        if config.vllm_mode == "server":  # the trainer's client finds `trl vllm-serve` where it listens
            assert config.vllm_server_base_url is None and config.vllm_server_port == serve_args.port
    assert {flag(agent_argv(c)[1], "--vllm-mode") for c in trained} == {"colocate", "server"}


def test_the_base_line_prints_the_float_folder(tiny_qwen3: Path) -> None:
    (line,) = [line for line in gpu_block().splitlines() if line.startswith("BASE=")]
    code = re.fullmatch(r'BASE=\$\(python -c "(.*)"\).*', line).group(1).replace("$Q8", str(tiny_qwen3))
    env = {"ILJEONG_TRAIN_CACHE": str(mf.cache_root() / "train-bases"), "HF_HUB_OFFLINE": "1",
           **{k: v for k, v in __import__("os").environ.items() if k in ("PATH", "PYTHONPATH", "HOME")}}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    folder = Path(result.stdout.strip())
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()


def test_the_eval_command_runs_as_written_against_an_openai_compatible_server(tmp_path: Path, monkeypatch,
                                                                              capsys) -> None:
    from agent.__main__ import main
    from agent.backends.sampling import derive_seed
    from agent.config import load_settings
    from agent.eval.cli import balanced
    from agent.eval.suite import load_eval_suite
    from agent.prompt import unstamp_user_text
    from tests.openai_server import StrictOpenAIServer, policy_script
    from tests.toy_openai import KEY

    (words,) = [c for c in gpu_commands() if "agent" in c and agent_argv(c)[1][0] == "eval"]
    argv = agent_argv(words)[1]
    trl_port = 8000  # `trl vllm-serve`'s (checked above): the eval server must be another one
    assert f":{trl_port}/" not in flag(argv, "--base-url")
    suite = load_eval_suite(load_settings({}, environ={}))
    chosen = balanced(suite.scenarios(split="dev", per_template=None, seed=0, templates=None), 2)  # as --limit 2
    by_opening = {s.opening: suite.policies["oracle"](s) for s in chosen}
    assert len(by_opening) == 2  # the server tells the conversations apart by their opening

    def policy_for(messages: list[dict[str, Any]]):
        return by_opening.get(unstamp_user_text(next(m for m in messages if m["role"] == "user")["content"]))

    monkeypatch.setenv("AGENT_API_KEY", KEY)
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    for name in ("AGENT_MODEL_PATH", "AGENT_BACKEND", "AGENT_CONFIG", "AGENT_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "run"
    with StrictOpenAIServer(policy_script(policy_for), api_key=KEY) as server:
        run = [server.url if w == flag(argv, "--base-url") else w for w in argv]
        assert main([*run, "--limit", "2", "--no-progress", "--out", str(out)]) == 0
    assert f"pass^{flag(argv, '--samples')}" in capsys.readouterr().out
    assert server.rejected == [] and server.requests and all(r.status == 200 for r in server.requests)
    episodes = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "episodes").glob("*.json"))]
    samples = int(flag(argv, "--samples"))
    assert len(episodes) == 2 * samples and all(e["split"] == "dev" and e["verdict"]["success"] for e in episodes)
    temperature = float(flag(argv, "--temperature"))
    assert all(e["sampling"]["seed"] == derive_seed(0, e["scenario_id"], e["sample"]) and
               e["sampling"]["temperature"] == temperature for e in episodes)
    assert len({e["sampling"]["seed"] for e in episodes}) == len(episodes)  # each sample its own seed
    bodies = [r.body for r in server.requests]
    assert {b["model"] for b in bodies} == {flag(argv, "--model")}
    assert all(b["temperature"] == temperature and "seed" in b for b in bodies)
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["sampling"]["temperature"] == temperature
