"""Dependencies point one way: ``agent/`` never imports a domain or the bot; ``models/`` is a leaf.

The check reads every module's syntax tree, so it sees imports inside functions (the lazy ones
this code base uses a lot) and ignores the package names that docstrings and comments mention.
"""

from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
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


# ------------------------------------------------------------------ runtime and lab

# The lab: evaluation, export, training and the bench, and the domains' scenario material. The
# assistant (the REPL, the bot, a domain's runtime) never imports it, so starting it loads none.
LAB = ("agent.eval", "agent.export", "agent.train", "agent.bench", "tools.calendar.lab", "tools.bfcl")
RUNTIME_PACKAGES = ("agent", "tools", "bot", "launchd", "models")
HANGUL = re.compile("[\uac00-\ud7a3\u3131-\u318e]")
MAX_LINES = 450


def module_name(path: Path, root: Path = REPO) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules(packages: tuple[str, ...], root: Path = REPO) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}


def runtime_modules(root: Path = REPO) -> dict[str, Path]:
    return {name: path for name, path in modules(RUNTIME_PACKAGES, root).items() if not _hits(name, LAB)}


def lab_imports(root: Path = REPO) -> list[str]:
    """Runtime modules that import the lab, at any depth (``agent/__main__`` names the lab's
    modules as strings and imports the one a command line names: that is the one way in)."""
    found = []
    for name, path in runtime_modules(root).items():
        found += [f"{name}:{line}: imports {module}" for line, module in imported_modules(path, root)
                  if _hits(module, LAB)]
    return sorted(set(found))


def hangul_lines(root: Path = REPO) -> list[str]:
    """Lines of ``agent/``'s runtime modules that hold Korean: a language belongs to a domain."""
    found = []
    for name, path in runtime_modules(root).items():
        if name.startswith("agent"):
            found += [f"{name}:{n}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                      if HANGUL.search(line)]
    return found


def import_cycle(root: Path = REPO) -> list[str]:
    """A circle of modules that import each other, directly or round (any import, lazy ones too),
    as ``graphlib`` finds it (first module repeated at the end); [] if there is none. A submodule
    naming its own package (``from tools.calendar import shown``) is not a circle."""
    known = modules(RUNTIME_PACKAGES, root)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        deps = set()
        for _, module in imported_modules(path, root):
            while module and module not in known:
                module = module.rpartition(".")[0]
            if module and module != name and not name.startswith(module + "."):
                deps.add(module)
        graph[name] = deps
    return _cycle(graph)


def package_cycle(root: Path = REPO) -> list[str]:
    """The same at the level of top-level packages (``bot`` -> ``launchd`` -> ``bot``)."""
    graph: dict[str, set[str]] = {pkg: set() for pkg in RUNTIME_PACKAGES}
    for name, path in modules(RUNTIME_PACKAGES, root).items():
        top = name.split(".")[0]
        graph[top] |= {m.split(".")[0] for _, m in imported_modules(path, root)
                       if m.split(".")[0] in graph and m.split(".")[0] != top}
    return _cycle(graph)


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return []


def long_modules(root: Path = REPO, limit: int = MAX_LINES) -> list[str]:
    found = []
    for name, path in modules(("agent", "tools", "bot"), root).items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            found.append(f"{name}: {lines} lines")
    return found


def test_the_runtime_imports_no_lab_module() -> None:
    assert lab_imports() == []


def test_agent_runtime_modules_hold_no_korean() -> None:
    assert hangul_lines() == []


def domain_words(words: tuple[str, ...], root: Path = REPO) -> list[str]:
    """Lines of ``agent/``'s runtime modules that name a domain's tools or store: the runtime knows
    a domain only through the registry and the hooks it is handed."""
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b")
    found = []
    for name, path in runtime_modules(root).items():
        if name.startswith("agent"):
            found += [f"{name}:{n}: {hit.group(1)}" for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                      for hit in [pattern.search(line)] if hit]
    return found


def test_agent_runtime_modules_name_no_calendar_tool_or_store() -> None:
    from tools.calendar.tools import CALENDAR_TOOL_NAMES

    assert domain_words((*CALENDAR_TOOL_NAMES, "CalendarStore")) == []


def test_no_module_imports_itself_round_a_circle() -> None:
    assert import_cycle() == []


def test_no_package_imports_itself_round_a_circle() -> None:
    assert package_cycle() == []


def test_no_module_is_over_450_lines() -> None:
    assert long_modules() == []


def test_the_layer_checks_can_fail(tmp_path: Path) -> None:
    """Each rule above finds its own kind of fault in a small tree built to have one."""
    def write(rel: str, text: str) -> None:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    write("agent/__init__.py", "")
    write("agent/loop.py", "def f():\n    from agent.eval.runner import run\n")
    write("agent/eval/runner.py", "import json\nTEXT = '내일'\n")
    write("agent/words.py", "YES = ('yes', '네')\n" + "x = 1\n" * 450)
    write("agent/a.py", "from agent import b\n")
    write("agent/b.py", "def f():\n    import agent.a\n")
    write("bot/run.py", "from launchd.logs import x\n")
    write("launchd/logs.py", "from bot import masking\n")
    write("tools/calendar/__init__.py", "from tools.calendar.store import X\n")
    write("tools/calendar/store.py", "from tools.calendar import limits\n")
    write("tools/calendar/limits.py", "")
    assert lab_imports(tmp_path) == ["agent.loop:2: imports agent.eval.runner", "agent.loop:2: imports agent.eval.runner.run"]
    assert hangul_lines(tmp_path) == ["agent.words:1"]  # the lab's Korean is the lab's business
    write("agent/gate.py", "# a delete_event needs a yes\nundelete_events = 1\n")
    assert domain_words(("delete_event",), tmp_path) == ["agent.gate:1: delete_event"]
    assert sorted(set(import_cycle(tmp_path))) == ["agent.a", "agent.b"]
    (tmp_path / "agent" / "b.py").unlink()
    assert import_cycle(tmp_path) == []  # tools.calendar importing its store, which names the package, is no circle
    assert sorted(set(package_cycle(tmp_path))) == ["bot", "launchd"]
    assert long_modules(tmp_path) == ["agent.words: 451 lines"]


# -- the chat format travels with the model ------------------------------------------------------

# What serves, records and trains a model takes its chat format from the backend (or the record the
# backend wrote): none of it may name a concrete format, so a new format (Gemma's) is its module
# plus its line in the registry, ``agent/formats/chat_format.py``, and nothing here.
FORMAT_USERS = ("agent/loop.py", "agent/repl.py", "agent/eval", "agent/export", "agent/train", "agent/backends",
                "agent/bench")
CONCRETE_FORMATS = ("agent.formats.hermes", "agent.formats.gemma")
# the default (Hermes) format's names that ``agent.formats`` re-exports for scripted policies
CONCRETE_NAMES = {f"agent.formats.{n}" for n in ("HERMES", "HermesFormat", "GEMMA", "GemmaFormat",
                                                 "parse_reply", "format_tool_call")}


def concrete_format_imports(root: Path = REPO) -> list[str]:
    found = []
    for place in FORMAT_USERS:
        path = root / place
        for file in sorted(path.rglob("*.py") if path.is_dir() else [path] if path.exists() else []):
            found += [f"{file.relative_to(root)}:{line}: imports {module}" for line, module in imported_modules(file, root)
                      if _hits(module, CONCRETE_FORMATS) or module in CONCRETE_NAMES]
    return found


def test_the_loop_backends_eval_export_and_training_import_no_concrete_chat_format() -> None:
    assert concrete_format_imports() == []


def test_the_format_check_finds_a_concrete_format_import(tmp_path: Path) -> None:
    (tmp_path / "agent" / "backends").mkdir(parents=True)
    (tmp_path / "agent" / "loop.py").write_text("from agent.formats.chat_format import format_of\n"
                                                "from agent.formats import ToolCall\n", encoding="utf-8")
    (tmp_path / "agent" / "backends" / "x.py").write_text(
        "def f():\n    from agent.formats.gemma import GEMMA\n    from agent.formats import HERMES\n", encoding="utf-8")
    assert concrete_format_imports(tmp_path) == [
        "agent/backends/x.py:2: imports agent.formats.gemma", "agent/backends/x.py:2: imports agent.formats.gemma.GEMMA",
        "agent/backends/x.py:3: imports agent.formats.HERMES"]
