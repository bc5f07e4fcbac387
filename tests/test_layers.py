"""Dependencies point one way: ``agent/`` never imports a domain or the bot; ``models/`` is a leaf.

The check reads every module's syntax tree, so it sees imports inside functions (the lazy ones
this code base uses a lot) and ignores the package names that docstrings and comments mention.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# package -> top-level names (or dotted prefixes) it must never import
FORBIDDEN = {
    "agent": ("tools.calendar", "tools.bfcl", "bot"),
    "models": ("agent", "tools", "bot"),
    "launchd": ("agent", "tools", "bot"),
}


def imported_modules(path: Path, root: Path = REPO) -> list[tuple[int, str]]:
    """(line, absolute module name) for every import statement in the file, at any depth.

    ``from a import b`` yields both ``a`` and ``a.b`` (b may be a submodule)."""
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's own package
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # ``from tools import calendar`` imports tools.calendar
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def _hits(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def violations(package: str, forbidden: tuple[str, ...], root: Path = REPO) -> list[str]:
    """One line per offending import statement (the first forbidden name it brings in)."""
    found: dict[tuple[str, int], str] = {}
    for path in sorted((root / package).rglob("*.py")):
        for line, module in imported_modules(path, root):
            if _hits(module, forbidden):
                found.setdefault((str(path.relative_to(root)), line), module)
    return [f"{where}:{line}: imports {module}" for (where, line), module in found.items()]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    assert violations(package, FORBIDDEN[package]) == []


def test_the_checker_sees_function_level_from_and_relative_imports(tmp_path: Path) -> None:
    """The check itself can fail: lazy, ``from``-style and relative imports count; prose does not."""
    pkg = tmp_path / "agent" / "sub"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text(
        '"""Mentions tools.calendar and bot in prose only: import bot."""\n'
        "import json\n"
        "# from bot import app\n"
        "def f():\n"
        "    from tools.calendar.store import CalendarStore\n"
        "    import bot.app\n"
        "    from tools import calendar\n"
        "    from agent.tools import Registry\n"
    )
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "leaf.py").write_text("from . import check\nfrom .check import x\nif True:\n    import agent.config\n")
    assert violations("agent", FORBIDDEN["agent"], tmp_path) == [
        "agent/sub/mod.py:5: imports tools.calendar.store",
        "agent/sub/mod.py:6: imports bot.app",
        "agent/sub/mod.py:7: imports tools.calendar",
    ]
    assert violations("models", FORBIDDEN["models"], tmp_path) == ["models/leaf.py:4: imports agent.config"]
    assert (2, "models.check.x") in imported_modules(tmp_path / "models" / "leaf.py", tmp_path)
