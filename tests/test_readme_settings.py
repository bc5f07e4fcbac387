"""README's settings table lists every setting its three owners define, and nothing else.

The table is read as Markdown reads it: the rows that follow its header line without a break.
A row pasted below some other paragraph (as ``AGENT_TOOL_BLOCK`` once was, after a bullet list
under "Remote models") is not in the table, however it looks in the source.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import fields
from pathlib import Path

from agent import config as agent_config
from agent.apikey import API_KEY_ENV
from bot import config as bot_config
from tools.calendar import settings as calendar_settings
from tools.calendar.sync import settings as sync_settings

README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = "| variable or config key | meaning | default |"
OWNERS = [
    (agent_config.Settings, agent_config.ENV_NAMES),
    (bot_config.BotSettings, bot_config.ENV_NAMES),
    (calendar_settings.CalendarSettings, calendar_settings.ENV_NAMES),
    (sync_settings.CalDAVSettings, sync_settings.ENV_NAMES),
]
NOT_A_SETTING = {"sources"}  # Settings keeps where it was read from; no one sets it
READ_BY_ITS_OWN_MODULE = {API_KEY_ENV}  # agent.apikey reads the key, so it is in no settings class
SETTING_ROW = re.compile(r"^\| `([A-Za-z_]+)`")


def table_names(lines: list[str]) -> list[str]:
    """The first name in each row of the settings table (a variable, or a config key)."""
    start = lines.index(HEADER)
    assert set(lines[start + 1].replace("|", "").strip()) <= {"-", " "}  # the delimiter row
    names = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        match = SETTING_ROW.match(line)
        assert match, f"a settings row that does not start with a `name`: {line}"
        names.append(match.group(1))
    return names


def documented_names() -> list[str]:
    """What the table must list: each setting's environment variable, or its config key if it has none."""
    names = [env.get(f.name, f.name) for cls, env in OWNERS for f in fields(cls) if f.name not in NOT_A_SETTING]
    return names + sorted(READ_BY_ITS_OWN_MODULE)


def test_the_settings_table_lists_every_setting_once_and_nothing_else() -> None:
    listed = table_names(README.read_text(encoding="utf-8").splitlines())
    expected = documented_names()
    assert sorted(set(expected) - set(listed)) == []  # a setting the README does not mention
    assert sorted(set(listed) - set(expected)) == []  # a row for a setting that no longer exists
    assert [name for name, n in Counter(listed).items() if n > 1] == []


def test_no_settings_row_sits_outside_the_table() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    known = set(documented_names())
    rows_anywhere = [m.group(1) for line in lines if (m := SETTING_ROW.match(line)) and m.group(1) in known]
    assert Counter(rows_anywhere) == Counter(table_names(lines))


def test_every_owner_names_only_its_own_fields_as_environment_variables() -> None:
    """An ENV_NAMES entry for a field that was renamed would leave its variable unread."""
    for cls, env in OWNERS:
        assert set(env) <= {f.name for f in fields(cls)}, cls.__name__
