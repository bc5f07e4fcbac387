"""The stats report on real recorded episodes: outcomes, histogram, calls, mixed-reward groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.config import Settings
from agent.export import cli
from agent.export.episodes import read_episodes
from agent.export.stats import compute, render
from tests.export_helpers import parse, run, suite


@pytest.fixture(scope="module")
def groups(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """missing_info: oracle twice and a guesser per scenario (mixed); reschedule: oracle twice (equal)."""
    s = suite()
    out = tmp_path_factory.mktemp("groups")
    run(s, out, s.scenarios(per_template=2, templates=["missing_info"]), samples=3)
    run(s, out, s.scenarios(per_template=2, templates=["reschedule"]), samples=2)
    return out


def test_counts_histogram_calls_and_mixed_groups(groups: Path) -> None:
    episodes = read_episodes(groups)
    stats = compute(episodes)
    assert stats.episodes == len(episodes) == 8  # reschedule gets half as many scenarios: 1
    assert dict(stats.per_template["missing_info"]) == {"success": 4, "failure": 2}
    assert dict(stats.per_template["reschedule"]) == {"success": 2}
    assert sum(stats.histogram) == 8 and stats.histogram[-1] == 6  # the six oracle runs score 1.0
    assert stats.histogram[2] == 2  # the guesser's 0.225 (its extra event is a collateral change)
    assert stats.groups == 3 and stats.mixed_groups == 2
    assert stats.mean_calls == pytest.approx(sum(e.calls for e in episodes) / 8) and stats.mean_calls > 0
    assert stats.to_dict()["mixed_share"] == pytest.approx(2 / 3, abs=1e-3)
    text = render(stats)
    assert "missing_info" in text and "with mixed rewards: 2 (67%)" in text


def test_unscored_episodes_make_no_groups(tmp_path: Path) -> None:
    from agent.export.episodes import Episode

    stats = compute([Episode(messages=[{"role": "user", "content": "hi"}], scenario_id="a", template="log",
                             split="log")] * 2)
    assert dict(stats.per_template["log"]) == {"unscored": 2}
    assert stats.groups == 0 and sum(stats.histogram) == 0 and stats.mean_reward is None
    assert "groups: none" in render(stats)


def test_cli_stats_json(groups: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse(["export", "stats", "--from", str(groups), "--json"]), Settings()) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 8 and report["mixed_groups"] == 2 and report["groups"] == 3
    assert cli.run(parse(["export", "stats", "--from", str(groups / "nothing.txt")]), Settings()) == 2
