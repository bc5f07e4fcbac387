"""``agent doctor``'s sync lines when the setup is broken: one line, and doctor goes on.

Doctor is what a user runs when something is wrong, so nothing the domain raises may end it
with a traceback: a calendar file that is not a database (a copy cut short, a wrong file moved
in) raises sqlite3.DatabaseError, which is neither a ValueError nor an OSError.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import load_settings
from agent.doctor import print_remote


@pytest.mark.parametrize("broken", ["not a database", "sign-in file"])
def test_a_broken_calendar_setup_is_one_line_in_doctor(broken: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    if broken == "not a database":
        (tmp_path / "calendar.sqlite3").write_bytes(b"\x1b[31mthis is not sqlite\n" * 200)
    else:
        (tmp_path / "google-signin.json").write_text("{not json")
        (tmp_path / "google-signin.json").chmod(0o600)
    settings = load_settings({"data_dir": str(tmp_path)}, environ={})
    print_remote(settings)  # returns: the model checks that follow still run
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "error:" in out and "Traceback" not in out
    assert ("DatabaseError" in out) if broken == "not a database" else ("calendar login google" in out)
