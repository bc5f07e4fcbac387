"""``train demo --dry-run``: the recipe prints the commands it would run, each one a valid CLI
command with the recipe's settings, in the demo's serving settings, and runs nothing."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from agent.__main__ import build_parser
from agent.train.demo import DRILLS, RECIPE
from models.demo import DEMO_PROMPT_STYLE, DEMO_TOOL_BLOCK


def _steps(out: Path, *extra: str) -> list[list[str]]:
    run = subprocess.run([sys.executable, "-m", "agent", "train", "demo", "--dry-run", "--out", str(out), *extra],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 0, run.stderr
    return [shlex.split(line[2:]) for line in run.stdout.splitlines() if line.startswith("$ ")]


def _refused(out: Path, *flags: str) -> str:
    """The one line a refused recipe prints; it must exit with status 2 and write nothing."""
    run = subprocess.run([sys.executable, "-m", "agent", "train", "demo", "--dry-run", "--out", str(out), *flags],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 2 and not out.exists(), run.stderr
    return run.stderr.strip()


def _parsed(step: list[str]) -> argparse.Namespace:
    """A printed step's arguments as the CLI parses them (what follows ``python -m agent``)."""
    return build_parser().parse_args(step[step.index("python") + 3:])


def test_the_recipe_prints_three_valid_commands_with_its_settings_and_runs_none(smollm2: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    steps = _steps(out)
    assert [s[:5] for s in steps] == [[f"AGENT_TOOL_BLOCK={DEMO_TOOL_BLOCK}", f"AGENT_PROMPT_STYLE={DEMO_PROMPT_STYLE}",
                                       "AGENT_DATE_GROUNDING=false", "AGENT_TIME_NOTES=false",
                                       "AGENT_DATE_NOTES=false"]] * 3
    oracle, export, train = map(_parsed, steps)
    assert (oracle.command, oracle.policy, oracle.split, oracle.per_template) == ("eval", "oracle", "train",
                                                                                RECIPE["per_template"])
    assert (export.command, export.success_only, export.split, export.model_path) == ("export", True, "train", str(smollm2))
    assert train.command == "train" and train.train_command == "sft" and train.base == smollm2
    assert (train.max_steps, train.stop_after, train.lr, train.grad_accum, train.rank, train.alpha, train.dropout,
            train.seed, train.bf16, train.convert) == (RECIPE["max_steps"], RECIPE["stop_after"], RECIPE["lr"],
                                                      RECIPE["grad_accum"], RECIPE["rank"], RECIPE["alpha"],
                                                      RECIPE["dropout"], RECIPE["seed"], RECIPE["bf16"], True)
    assert train.data == out / "sft" and train.out == out / "lora"
    assert not out.exists()  # a dry run writes nothing


def test_time_notes_play_and_train_every_step_with_clock_times_as_the_demo_serves_them(tmp_path: Path) -> None:
    """The shipped adapter predates time notes, so the plain recipe keeps them off (it reproduces
    that file); --time-notes turns them on in the oracle run, the export and the training alike."""
    steps = _steps(tmp_path / "demo", "--time-notes")
    assert len(steps) == 3 and all("AGENT_TIME_NOTES=true" in s[:s.index("python")] for s in steps)


def test_date_notes_play_and_train_every_step_with_days_as_dates_only_when_asked(tmp_path: Path) -> None:
    """Like time notes: the plain recipe keeps them off, whatever the demo serves with."""
    steps = _steps(tmp_path / "demo", "--date-notes")
    assert len(steps) == 3 and all("AGENT_DATE_NOTES=true" in s[:s.index("python")] for s in steps)
    assert all("AGENT_TIME_NOTES=false" in s[:s.index("python")] for s in steps)


def test_drills_add_the_drills_oracle_rows_to_the_export_and_train_longer(tmp_path: Path) -> None:
    """``--drills`` plays the train-only drills with the oracle beside the recipe's templates, exports
    the three runs as one set, and trains ``DRILLS["max_steps"]``; without it the recipe is unchanged."""
    out = tmp_path / "demo"
    steps = _steps(out, "--drills")
    oracle, *drills, export, train = map(_parsed, steps)
    assert (oracle.per_template, oracle.templates) == (RECIPE["per_template"], None)
    assert [(d.policy, d.split, d.templates, d.per_template, d.out) for d in drills] == [
        ("oracle", "train", name, count, out / "drills" / name) for name, count in DRILLS["scenarios"].items()]
    assert set(DRILLS["scenarios"]) == {"wording_drill", "time_drill"}
    assert export.sources == [out / "oracle", *(out / "drills" / name for name in DRILLS["scenarios"])]
    assert (train.max_steps, train.stop_after) == (DRILLS["max_steps"], DRILLS["max_steps"])
    stopped = _parsed(_steps(out, "--drills", "--stop-after", "120")[-1])
    assert (stopped.max_steps, stopped.stop_after) == (DRILLS["max_steps"], 120)
    plain = _steps(out)
    assert len(plain) == 3 and _parsed(plain[-1]).max_steps == RECIPE["max_steps"]


def test_more_continued_chats_the_time_drill_alone_and_a_longer_schedule_are_each_a_flag(tmp_path: Path) -> None:
    """``--continued N`` plays N last tasks per template instead of the default, ``--time-drill [N]`` adds
    the time drill's oracle rows without the wording drill (and keeps the recipe's steps),
    ``--boundary-drill [N]`` the boundary drill's beside them, a count
    below 1 is refused rather than read as none, and ``--max-steps`` sets the schedule's length, with
    ``--stop-after`` following it by default."""
    out = tmp_path / "demo"
    oracle, drill, continued, export, train = map(_parsed, _steps(out, "--continued", "80", "--time-drill",
                                                                  "--max-steps", "200"))
    assert (drill.templates, drill.per_template) == ("time_drill", DRILLS["scenarios"]["time_drill"])
    assert (continued.earlier_tasks, continued.per_template) == ("1-3", 80)
    assert export.sources == [out / "oracle", out / "drills" / "time_drill", out / "continued"]
    assert (train.max_steps, train.stop_after) == (200, 200)
    alone = list(map(_parsed, _steps(out, "--time-drill")))
    assert [s.command for s in alone] == ["eval", "eval", "export", "train"]
    assert alone[-1].max_steps == RECIPE["max_steps"]
    dose = list(map(_parsed, _steps(out, "--time-drill", "30")))
    assert (dose[1].templates, dose[1].per_template, dose[-1].max_steps) == ("time_drill", 30, RECIPE["max_steps"])
    # the boundary drill beside the time drill: a third oracle run, exported after it, the same steps
    *_, time_drill, boundary, export, train = map(_parsed, _steps(out, "--time-drill", "--boundary-drill", "40"))
    assert (boundary.policy, boundary.templates, boundary.per_template, boundary.out) == (
        "oracle", "boundary_drill", 40, out / "drills" / "boundary_drill")
    assert export.sources == [out / "oracle", out / "drills" / "time_drill", out / "drills" / "boundary_drill"]
    assert train.max_steps == RECIPE["max_steps"]
    for flag, bad in (("--time-drill", "0"), ("--continued", "-3"), ("--continued", "x"),
                      ("--boundary-drill", "0")):  # not a silent "none"
        assert _refused(tmp_path / "refused", flag, bad).endswith(
            f"argument {flag}: '{bad}': give a number of scenarios, 1 or more (leave the flag out for none)")


def test_continued_chats_join_the_rows_and_the_base_can_be_gemma(tmp_path: Path) -> None:
    """``--continued`` plays the oracle's continued chats on the train split and exports them with the
    rest; ``--base gemma3-270m`` trains and exports on the Gemma GGUF (sha256-checked by
    ``models.gemma_base``) instead of SmolLM2's, every other setting the same."""
    from agent.train.demo import CONTINUED
    from tests import model_fixtures as mf

    out = tmp_path / "demo"
    oracle, continued, export, train = map(_parsed, _steps(out, "--continued"))
    assert (continued.policy, continued.split, continued.earlier_tasks, continued.per_template, continued.out) == (
        "oracle", "train", CONTINUED["history"], CONTINUED["per_template"], out / "continued")
    assert export.sources == [out / "oracle", out / "continued"]
    gemma = mf.gemma_base_test_path()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ILJEONG_GEMMA_CACHE": str(gemma.parent)}  # checked, not joined again
    run = subprocess.run([sys.executable, "-m", "agent", "train", "demo", "--dry-run", "--out", str(out),
                          "--base", "gemma3-270m"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    steps = [_parsed(shlex.split(line[2:])) for line in run.stdout.splitlines() if line.startswith("$ ")]
    assert [s.command for s in steps] == ["eval", "export", "train"]
    assert Path(steps[1].model_path).name == gemma.name == steps[2].base.name
    assert steps[2].base == gemma


def test_a_damaged_gemma_download_is_one_line_and_status_2(tmp_path: Path) -> None:
    """Chunk packages that do not join into the pinned file: one line that says how to reinstall."""
    cache = tmp_path / "gemma"
    sitecustomize = tmp_path / "site" / "sitecustomize.py"  # the installed chunks, as if one were cut short
    sitecustomize.parent.mkdir()
    sitecustomize.write_text("import models.gemma_base as g\ng.GEMMA_SIZE += 1\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ILJEONG_GEMMA_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join([str(sitecustomize.parent), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "agent", "train", "demo", "--dry-run", "--out", str(tmp_path / "d"),
                          "--base", "gemma3-270m"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2 and "Traceback" not in run.stderr and not cache.exists()
    assert run.stderr.strip().startswith("error: the Gemma 3 270M chunk files add up to") and "reinstall" in run.stderr


def test_search_by_title_plays_the_recipes_rows_with_the_title_searching_oracle(tmp_path: Path) -> None:
    """``--search-by-title`` plays the fresh and the continued rows with ``oracle_by_title``; a drill's
    rows (which change nothing) stay the plain oracle's, and without the flag every run is the plain
    oracle's, so the shipped recipe still reproduces."""
    out = tmp_path / "demo"
    oracle, drill, continued, export, train = map(_parsed, _steps(out, "--search-by-title", "--continued",
                                                                  "--time-drill"))
    assert (oracle.policy, drill.policy, continued.policy) == ("oracle_by_title", "oracle", "oracle_by_title")
    assert export.sources == [out / "oracle", out / "drills" / "time_drill", out / "continued"]
    plain = list(map(_parsed, _steps(out, "--continued")))
    assert [s.policy for s in plain if s.command == "eval"] == ["oracle", "oracle"]


def test_title_history_plays_the_continued_rows_earlier_tasks_with_the_title_searching_oracle(tmp_path: Path) -> None:
    """``--title-history`` asks the continued run for ``--history-by oracle_by_title``, so a continued
    row's history looks events up as the trained last task does; ``--search-by-title`` alone keeps the
    plain oracle's history (the fourth recipe still reproduces), and the flag without ``--continued``
    is refused in one line."""
    out = tmp_path / "demo"
    oracle, continued, export, train = map(_parsed, _steps(out, "--search-by-title", "--continued", "--title-history"))
    assert (oracle.policy, continued.policy, continued.history_by) == ("oracle_by_title", "oracle_by_title",
                                                                      "oracle_by_title")
    assert _parsed(_steps(out, "--search-by-title", "--continued")[1]).history_by == "oracle"  # eval's default
    assert _refused(out, "--title-history") == "error: --title-history plays the continued rows' history; add --continued"


def test_drill_checks_day_plays_the_drills_rows_with_the_day_checking_oracle(tmp_path: Path) -> None:
    """``--drill-checks-day`` has the drills played by ``oracle_checks_day`` (a complete booking looks
    at its day before creating) and leaves the other runs as they were; without a drill to play it
    is refused in one line."""
    out = tmp_path / "demo"
    oracle, drill, continued, export, train = map(_parsed, _steps(out, "--search-by-title", "--continued",
                                                                  "--time-drill", "--drill-checks-day"))
    assert (oracle.policy, drill.policy, continued.policy) == ("oracle_by_title", "oracle_checks_day",
                                                               "oracle_by_title")
    assert (drill.templates, export.sources[1]) == ("time_drill", out / "drills" / "time_drill")
    assert _refused(out, "--drill-checks-day") == (
        "error: --drill-checks-day plays the drills' rows; add --time-drill or --drills")
