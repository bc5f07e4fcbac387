"""The bot's configuration: where the token comes from, who may talk to it, what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import Settings, load_settings
from bot.config import BotConfig, ConfigProblem, bot_settings, load_bot_config, settings_or_problem

TOKEN = "123456789:AAHf4k3-t0k3n_for_tests_only_xyzABC"


def settings_from(env: dict[str, str], data_dir: Path) -> Settings:
    """Settings from an explicit environment only, so the developer's own cannot leak in."""
    return load_settings(environ={"AGENT_DATA_DIR": str(data_dir), **env})


def write_token(path: Path, mode: int, text: str = TOKEN + "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def test_token_from_environment(tmp_path: Path) -> None:
    config = load_bot_config(
        settings_from({"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11, 22"}, tmp_path)
    )
    assert isinstance(config, BotConfig)
    assert config.token == TOKEN
    assert config.token_file is None
    assert config.allowed_users == frozenset({11, 22})
    assert config.allowed_chats == frozenset()
    assert config.api_base_url is None


def test_token_file_0600_in_data_dir_is_read(tmp_path: Path) -> None:
    token_file = write_token(tmp_path / "telegram_token", 0o600)
    config = load_bot_config(settings_from({"TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(config, BotConfig)
    assert config.token == TOKEN  # newline stripped
    assert config.token_file == token_file


def test_token_file_named_by_environment(tmp_path: Path) -> None:
    token_file = write_token(tmp_path / "secrets" / "bot", 0o400)
    config = load_bot_config(
        settings_from({"TELEGRAM_BOT_TOKEN_FILE": str(token_file), "TELEGRAM_ALLOWED_USERS": "11"}, tmp_path / "data")
    )
    assert isinstance(config, BotConfig)
    assert config.token_file == token_file


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_token_file_readable_by_others_is_refused(tmp_path: Path, mode: int) -> None:
    token_file = write_token(tmp_path / "telegram_token", mode)
    problem = load_bot_config(settings_from({"TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert f"chmod 600 {token_file}" in problem.message
    assert TOKEN not in problem.message
    assert "\n" not in problem.message


def test_missing_token_says_where_to_put_it(tmp_path: Path) -> None:
    problem = load_bot_config(settings_from({"TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert "TELEGRAM_BOT_TOKEN" in problem.message
    assert str(tmp_path / "telegram_token") in problem.message


def test_no_allowlist_is_refused_with_a_way_to_find_the_id(tmp_path: Path) -> None:
    problem = load_bot_config(settings_from({"TELEGRAM_BOT_TOKEN": TOKEN}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert "TELEGRAM_ALLOWED_USERS" in problem.message
    assert "@userinfobot" in problem.message


def test_allowed_chats_alone_is_an_allowlist_for_private_chats_only(tmp_path: Path) -> None:
    config = load_bot_config(
        settings_from({"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_CHATS": "-1001234,11"}, tmp_path)
    )
    assert isinstance(config, BotConfig)
    assert config.allowed_chats == frozenset({-1001234, 11})


def test_groups_without_users_are_refused_because_nobody_could_act_in_them(tmp_path: Path) -> None:
    problem = load_bot_config(
        settings_from({"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_CHATS": "-1001234"}, tmp_path)
    )
    assert isinstance(problem, ConfigProblem)
    assert "only groups" in problem.message and "TELEGRAM_ALLOWED_USERS" in problem.message
    assert "\n" not in problem.message


def test_non_numeric_ids_are_a_problem_not_an_exception(tmp_path: Path) -> None:
    problem = settings_or_problem(
        environ={"AGENT_DATA_DIR": str(tmp_path), "TELEGRAM_ALLOWED_USERS": "@alice"}
    )
    assert isinstance(problem, ConfigProblem)
    assert "numeric" in problem.message


def test_a_bad_calendar_setting_is_a_problem_before_the_bot_starts(tmp_path: Path) -> None:
    """The calendar owns its keys, yet the bot refuses a bad one up front (not after loading a model)."""
    problem = settings_or_problem(
        environ={"AGENT_DATA_DIR": str(tmp_path), "TELEGRAM_ALLOWED_USERS": "11", "AGENT_REMIND_MINUTES": "ten"}
    )
    assert isinstance(problem, ConfigProblem)
    assert problem.message == "bad configuration: remind_minutes: expected minutes as integers, e.g. 10 or 10,60; got 'ten'"


@pytest.mark.parametrize("users", ["0", "-5", "11,0"])
def test_impossible_user_ids_are_refused(tmp_path: Path, users: str) -> None:
    problem = load_bot_config(settings_from({"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": users}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert "TELEGRAM_ALLOWED_USERS" in problem.message


@pytest.mark.parametrize(
    "token", ["123456789", "bot" + TOKEN, f'"{TOKEN}"', "abc:AAHf4k3t0k3nfortestsonlyxyzABC", "123:short", TOKEN + " x"]
)
def test_malformed_token_is_refused_without_echoing_it(tmp_path: Path, token: str) -> None:
    problem = load_bot_config(settings_from({"TELEGRAM_BOT_TOKEN": token, "TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert "<digits>:<secret>" in problem.message
    assert token not in problem.message


def test_malformed_token_in_file_names_the_file(tmp_path: Path) -> None:
    token_file = write_token(tmp_path / "telegram_token", 0o600, text="not a token\n")
    problem = load_bot_config(settings_from({"TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(problem, ConfigProblem)
    assert str(token_file) in problem.message


def test_api_base_url_must_be_http(tmp_path: Path) -> None:
    env = {"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11"}
    ok = load_bot_config(settings_from({**env, "TELEGRAM_API_BASE_URL": "http://127.0.0.1:8081/bot"}, tmp_path))
    assert isinstance(ok, BotConfig) and ok.api_base_url == "http://127.0.0.1:8081/bot"
    bad = load_bot_config(settings_from({**env, "TELEGRAM_API_BASE_URL": "127.0.0.1:8081"}, tmp_path))
    assert isinstance(bad, ConfigProblem)


def test_repr_hides_the_token(tmp_path: Path) -> None:
    config = load_bot_config(settings_from({"TELEGRAM_BOT_TOKEN": TOKEN, "TELEGRAM_ALLOWED_USERS": "11"}, tmp_path))
    assert isinstance(config, BotConfig)
    assert TOKEN not in repr(config)


def test_printed_settings_hide_a_token_from_the_environment(tmp_path: Path) -> None:
    """A traceback or log line that prints the Settings must not carry the bot token."""
    settings = settings_from({"TELEGRAM_BOT_TOKEN": TOKEN}, tmp_path)
    assert bot_settings(settings).telegram_token == TOKEN
    for shown in (settings, bot_settings(settings), settings.sources):
        assert TOKEN not in repr(shown)
        assert TOKEN not in str(shown)
