"""The shipped demo adapter: the file is the recorded one, it passes the checks, the demo loads it
with the compact tool block it was trained on, and through the real loop it opens valid calls
where the base model does not.
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


def test_the_shipped_adapter_is_the_recorded_file_and_small() -> None:
    record = demo.demo_record()
    path = demo.demo_adapter_path()
    assert path.is_file(), f"{path} is missing: the package ships it (pyproject package-data)"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == record["sha256"]
    assert path.stat().st_size == record["bytes"] <= 10 * 1024 * 1024
    assert record["tool_block"] == demo.DEMO_TOOL_BLOCK
    assert str(record["command"]).startswith("python -m agent train demo")


def test_the_shipped_adapter_passes_models_verify(smollm2: Path, tmp_path: Path) -> None:
    assert check_adapter(demo.demo_adapter_path(), smollm2).ok
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


def _eval(out: Path, *extra: str) -> list[dict[str, object]]:
    """Two test scenarios through the real loop (eval: simulated user, gate, verifier), one user turn each."""
    env = {**os.environ, "AGENT_DATA_DIR": str(out / "data")}
    run = subprocess.run([PY, "-m", "agent", "eval", "--demo", *extra, "--split", "test", "--templates",
                          "conflict_create,conflict_free", "--limit", "2", "--max-user-turns", "1", "--threads", "1",
                          "--out", str(out), "--no-progress"], capture_output=True, text=True, env=env, timeout=1200)
    assert run.returncode == 0, run.stderr[-2000:]
    return [json.loads(p.read_text(encoding="utf-8"))["verdict"] for p in sorted((out / "episodes").glob("*.json"))]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # four episodes of a real model on a shared CPU
def test_the_shipped_adapter_opens_valid_calls_where_the_base_does_not(tmp_path: Path) -> None:
    adapted = _eval(tmp_path / "adapter")
    base = _eval(tmp_path / "base", "--no-adapter")
    assert len(adapted) == len(base) == 2
    # What the issue asks of the demo, and the one test here that reads unforced model output:
    # on 120 test scenarios the base made no valid call in these two templates (0 of 20) and the
    # adapter a valid call in all 20 (README, the demo adapter), so the margin is wide.
    assert all(v["valid_calls"] == 0 for v in base), base
    assert all(v["valid_calls"] >= 1 for v in adapted), adapted


def test_the_demo_notes_clock_times_whatever_the_configuration_says(tmp_path: Path) -> None:
    """The demo's figures (time probe, README) were measured with time notes on; a config that turns
    them off must not change what the demo shows its model."""
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_TIME_NOTES": "false"}))
    assert settings.time_notes is demo.DEMO_TIME_NOTES is True


def test_the_demo_notes_relative_days_whatever_the_configuration_says(tmp_path: Path) -> None:
    """The demo's test figure (README, "Days as asked") was measured with date notes on."""
    settings = demo_settings(load_settings({}, {"AGENT_DATA_DIR": str(tmp_path), "AGENT_DATE_NOTES": "false"}))
    assert settings.date_notes is demo.DEMO_DATE_NOTES is True
