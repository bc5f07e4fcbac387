"""The API key: environment first, then an owner-only file; every refusal is one line saying what to do."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.apikey import KeyProblem, key_file, read_api_key, write_key_file
from agent.config import load_settings

KEY = "sk-apikey-test-0123456789"


def settings(tmp_path: Path, **env: str):
    return load_settings(environ={"AGENT_DATA_DIR": str(tmp_path), **env})


def test_the_environment_wins_over_the_file(tmp_path: Path) -> None:
    write_key_file(tmp_path / "api_key", "sk-from-file")
    assert read_api_key(settings(tmp_path), {"AGENT_API_KEY": f"  {KEY}\n"}) == KEY
    assert read_api_key(settings(tmp_path), {}) == "sk-from-file"


def test_no_key_anywhere_is_none_for_servers_that_need_none(tmp_path: Path) -> None:
    assert read_api_key(settings(tmp_path), {}) is None


def test_the_key_file_can_be_moved_and_is_written_owner_only(tmp_path: Path) -> None:
    moved = tmp_path / "secrets" / "deepseek"
    s = settings(tmp_path, AGENT_API_KEY_FILE=str(moved))
    assert key_file(s) == moved
    write_key_file(moved, KEY)
    assert moved.stat().st_mode & 0o777 == 0o600 and read_api_key(s, {}) == KEY


@pytest.mark.parametrize("content, mode, expected", [
    (KEY, 0o644, "is readable by others (mode 644): run chmod 600"),
    (KEY, 0o660, "is readable by others (mode 660)"),
    ("", 0o600, "is empty"),
    (f"{KEY} extra", 0o600, "contains spaces or line breaks"),
    (f"{KEY}\x00", 0o600, "control characters"),  # httpx would refuse the header quoting the key
])
def test_unusable_key_files_are_refused_in_one_line(tmp_path: Path, content: str, mode: int, expected: str) -> None:
    path = tmp_path / "api_key"
    path.write_text(content)
    path.chmod(mode)
    with pytest.raises(KeyProblem) as problem:
        read_api_key(settings(tmp_path), {})
    assert expected in str(problem.value) and str(path) in str(problem.value) and "\n" not in str(problem.value)
    assert KEY not in str(problem.value)


def test_a_directory_is_not_a_key_file(tmp_path: Path) -> None:
    (tmp_path / "api_key").mkdir()
    with pytest.raises(KeyProblem, match="not a regular file"):
        read_api_key(settings(tmp_path), {})


@pytest.mark.parametrize("name, value", [("AGENT_BACKEND", "remote"), ("AGENT_WIRE_FORMAT", "hermes")])
def test_unknown_backend_or_wire_format_is_a_configuration_error(tmp_path: Path, name: str, value: str) -> None:
    with pytest.raises(ValueError, match=f"expected .* got '{value}'"):
        settings(tmp_path, **{name: value})
