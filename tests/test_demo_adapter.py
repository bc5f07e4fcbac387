"""The shipped demo adapter: the file is the recorded one, it passes the checks, the demo loads it
with the compact tool block it was trained on, and the eval plays the demo through the real loop
with it (and without it on ``--no-adapter``).

Whether the adapter opens valid calls where the base model does not is a measurement of what the
model writes, which no test can force: ``python -m agent eval --demo --split test --templates
conflict_create,conflict_free`` and the same with ``--no-adapter``, then ``python -m agent eval
compare`` on the two folders (the valid calls column; docs/training.md has the figures).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.app import demo_settings
from agent.config import load_settings
from models import demo
from models.check import check_adapter

PY = sys.executable


@pytest.mark.parametrize("name", list(demo.DEMOS))
def test_each_shipped_adapter_is_the_recorded_file_and_small(name: str) -> None:
    record = demo.demo_record(name)
    path = demo.demo_adapter_path(name)
    assert path.is_file(), f"{path} is missing: the package ships it (pyproject package-data)"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == record["sha256"]
    assert path.stat().st_size == record["bytes"] <= 10 * 1024 * 1024
    assert record["tool_block"] == demo.DEMO_TOOL_BLOCK
    assert str(record["command"]).startswith("python -m agent train demo")
    assert ("--base gemma3-270m" in str(record["command"])) is (name == "gemma3-270m")


def test_each_shipped_adapter_fits_its_own_base_and_not_the_other(smollm2: Path, gemma3: Path) -> None:
    bases = {"smollm2": smollm2, "gemma3-270m": gemma3}
    for name, base in bases.items():
        assert check_adapter(demo.demo_adapter_path(name), base).ok, name
        other = bases["smollm2" if name == "gemma3-270m" else "gemma3-270m"]
        assert not check_adapter(demo.demo_adapter_path(name), other).ok, name


def test_the_default_demo_is_gemma_under_its_terms() -> None:
    assert demo.DEFAULT_DEMO == "gemma3-270m" and demo.demo_adapter_path().name.startswith("gemma3-270m")
    assert "Gemma Terms of Use" in str(demo.demo_record()["base"]) and demo.demo_pair().terms


def test_the_shipped_adapter_passes_models_verify(gemma3: Path, tmp_path: Path) -> None:
    assert check_adapter(demo.demo_adapter_path(), gemma3).ok
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path)}
    run = subprocess.run([PY, "-m", "models", "verify", "--demo"], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert demo.demo_adapter_path().name in run.stdout
    base = subprocess.run([PY, "-m", "models", "verify", "--demo", "--no-adapter"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert base.returncode == 0 and "adapter: none" in base.stdout, base.stderr


def test_the_demo_serves_the_block_and_prompt_its_adapter_was_trained_with(tmp_path: Path) -> None:
    record = demo.demo_record()
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_TOOL_BLOCK": "full",
                                                "AGENT_PROMPT_STYLE": "full", "AGENT_DATE_GROUNDING": "true"}))
    assert (settings.tool_block, settings.prompt_style, settings.date_grounding) == (
        record["tool_block"], record["prompt_style"], record["date_grounding"])


def _eval(out: Path, *extra: str) -> tuple[dict[str, object], list[dict[str, object]]]:
    """One test scenario through the real loop (eval: simulated user, gate, verifier), one user
    turn: the run's record and its episodes."""
    env = {**os.environ, "AGENT_DATA_DIR": str(out / "data")}
    run = subprocess.run([PY, "-m", "agent", "eval", "--demo", *extra, "--split", "test", "--templates",
                          "conflict_create", "--limit", "1", "--max-user-turns", "1", "--threads", "1",
                          "--out", str(out), "--no-progress"], capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    episodes = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / "episodes").glob("*.json"))]
    return json.loads((out / "run.json").read_text(encoding="utf-8")), episodes


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two episodes of a real model on a shared CPU
def test_the_demo_eval_plays_with_the_shipped_adapter_and_without_it_on_no_adapter(tmp_path: Path) -> None:
    """What the episodes record of who played them is the backend's identity, not the model's
    words: the demo eval loads the recorded adapter file, ``--no-adapter`` none, both with the tool
    block the adapter was trained with. (The adapter's effect on valid calls is eval's to measure:
    see the module docstring.)"""
    record = demo.demo_record()
    for extra, adapter_sha256 in (((), record["sha256"]), (("--no-adapter",), None)):
        run, episodes = _eval(tmp_path / (extra[0].strip("-") if extra else "adapter"), *extra)
        assert run["adapter_sha256"] == adapter_sha256 and run["tool_block"] == record["tool_block"], run
        assert len(episodes) == 1, episodes
        episode = episodes[0]
        assert episode["error"] is None, episode["error"]
        assert episode["backend"]["adapter_sha256"] == adapter_sha256, episode["backend"]
        assert episode["template"] == "conflict_create" and len(episode["stop_reasons"]) == 1, episode


def test_the_demo_notes_clock_times_whatever_the_configuration_says(tmp_path: Path) -> None:
    """The demo's figures (time probe, README) were measured with time notes on; a config that turns
    them off must not change what the demo shows its model."""
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_TIME_NOTES": "false"}))
    assert settings.time_notes is demo.DEMO_TIME_NOTES is True


def test_the_demo_notes_relative_days_whatever_the_configuration_says(tmp_path: Path) -> None:
    """The demo's test figure (README, "Days as asked") was measured with date notes on."""
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_DATE_NOTES": "false"}))
    assert settings.date_notes is demo.DEMO_DATE_NOTES is True


def test_the_gemma_adapter_ships_with_the_notice_and_a_copy_of_the_terms() -> None:
    """The terms ask whoever distributes a model derivative to pass on a copy of them and a NOTICE
    file with this sentence; both are package data beside the adapter."""
    import tomllib

    notice = (demo.DEMO_DIR / "NOTICE").read_text(encoding="utf-8")
    assert notice.splitlines()[0] == ("Gemma is provided under and subject to the Gemma Terms of Use found at "
                                      "ai.google.dev/gemma/terms")
    assert demo.demo_adapter_path("gemma3-270m").name in notice
    assert "Gemma Terms of Use" in (demo.DEMO_DIR / "GEMMA_TERMS.html").read_text(encoding="utf-8")
    pyproject = tomllib.loads((Path(demo.__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = pyproject["tool"]["setuptools"]["package-data"]["models"]
    assert {"demo/NOTICE", "demo/GEMMA_TERMS.html", "demo/*.gguf", "demo/*.json"} <= set(shipped)


def test_the_readme_shows_the_line_the_chat_prints_before_the_demo() -> None:
    readme = (Path(demo.__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    assert demo.demo_note() in readme
