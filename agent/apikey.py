"""The remote API's key: from ``AGENT_API_KEY`` or an owner-only key file, and nowhere else.

The key is a password that costs money. It is deliberately not a ``Settings`` field (Settings
are printed by ``doctor`` and written into the launchd plist) and never a command-line flag
(argv is visible to every local user in ``ps``). It is read once, by the code that builds the
backend, and lives on only in the HTTP client's Authorization header.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Mapping

from agent.config import Settings
from agent.known_secrets import remember

API_KEY_ENV = "AGENT_API_KEY"
KEY_FILE_NAME = "api_key"
KEY_LABEL = "<api key>"  # what a log shows in its place


class SecretFileProblem(ValueError):
    """A file that should hold a secret cannot be used; the message is one line saying why."""


class KeyProblem(ValueError):
    """The key cannot be used as configured; the message is one line saying what to do."""


def key_file(settings: Settings) -> Path:
    """``api_key_file`` (``AGENT_API_KEY_FILE``) if set, else ``<data_dir>/api_key``; absolute."""
    if settings.api_key_file:
        return Path(settings.api_key_file).expanduser().absolute()
    return (settings.data_dir / KEY_FILE_NAME).expanduser().absolute()


def key_from_environment(environ: Mapping[str, str] | None = None) -> str | None:
    value = (os.environ if environ is None else environ).get(API_KEY_ENV, "").strip()
    return value or None


def read_secret_file(path: Path, what: str) -> str | None:
    """The secret in ``path``, stripped (the API key, the bot token, a CalDAV password); None if
    there is no such file. ``SecretFileProblem`` (one line naming ``what`` and the path, never
    the secret) for a file that is not regular, that others can read, or that cannot be read."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SecretFileProblem(f"cannot read the {what} {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise SecretFileProblem(f"the {what} {path} is not a regular file")
    if info.st_mode & 0o077:
        raise SecretFileProblem(f"the {what} {path} is readable by others "
                                f"(mode {stat.S_IMODE(info.st_mode):o}): run chmod 600 {path}")
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretFileProblem(f"cannot read the {what} {path}: {exc}") from exc


def read_key_file(path: Path) -> str | None:
    """The key in ``path``; None if there is no such file. A file others can read is refused."""
    try:
        key = read_secret_file(path, "API key file")
    except SecretFileProblem as exc:
        raise KeyProblem(str(exc)) from exc.__cause__
    if key is None:
        return None
    if not key:
        raise KeyProblem(f"the API key file {path} is empty")
    if any(c.isspace() or not c.isprintable() for c in key):  # httpx quotes a header it cannot send
        raise KeyProblem(f"the API key in {path} contains spaces or line breaks (or control characters): "
                         "write the key alone")
    return key


def read_api_key(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """``AGENT_API_KEY``, else the key file, else None (local servers need no key). The key is
    registered with ``agent.known_secrets`` as it is read, so every masked log masks it."""
    key = key_from_environment(environ) or read_key_file(key_file(settings))
    remember(key, KEY_LABEL)
    return key


def write_key_file(path: Path, key: str) -> None:
    """Write the key readable by its owner only (``launchd install`` moves an environment key here)."""
    write_secret_file(path, key)


def write_secret_file(path: Path, secret: str) -> None:
    """One secret on one line, mode 600 from the first byte (the API key; the bot token too)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that already existed
        os.write(fd, (secret + "\n").encode("utf-8"))
    finally:
        os.close(fd)
