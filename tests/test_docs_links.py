"""README.md and docs/*.md point only at things that exist.

The guide was split into README.md and reference files under docs/, and text moves between them:
a link to a file that was renamed, an ``#anchor`` to a heading that was reworded, a
``python -m agent <command>`` that no longer exists or a setting the code no longer reads would
each send a reader nowhere. These tests read the Markdown as text (no model is loaded): links and
anchors against the files and their headings (GitHub's slug rules), commands against each entry
point's own ``--help`` (run once per package), and environment variables against the sources.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SOURCE_DIRS = ("agent", "tools", "bot", "models", "launchd")
# The prefixes of the variables this project reads (grep the sources: AGENT_*, TELEGRAM_*,
# ILJEONG_*). Others named in the docs (HF_ENDPOINT, CMAKE_ARGS, CUDA_VISIBLE_DEVICES) belong to
# other programs.
OWN_PREFIXES = ("AGENT", "TELEGRAM", "ILJEONG")
ENTRY_POINTS = ("agent", "models", "bot")  # the packages with a __main__ that takes subcommands

FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
INLINE_CODE = re.compile(r"`[^`\n]+`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
PYTHON_M = re.compile(r"python -m ([A-Za-z_][\w.]*)((?:[ \t]+[^\s`|;&#]+)*)")
ENV_NAME = re.compile(r"\b(?:%s)_[A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])" % "|".join(OWN_PREFIXES))


@dataclass(frozen=True)
class Doc:
    """One Markdown file split the way a renderer sees it: prose lines and code (fenced or inline)."""

    path: Path
    prose: list[str]  # lines outside fenced blocks, inline code removed
    code: list[str]  # fenced block lines (continuations joined) and inline code spans

    def where(self) -> str:
        return str(self.path.relative_to(REPO))


@functools.cache
def read(path: Path) -> Doc:
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in path.read_text(encoding="utf-8").replace("\\\n", " ").splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if fenced:
            code.append(line)
            continue
        code.extend(span.strip("`") for span in INLINE_CODE.findall(line))
        prose.append(INLINE_CODE.sub(lambda m: m.group(0).strip("`").replace("[", "").replace("]", ""), line))
    return Doc(path, prose, code)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower-cased, punctuation and emoji
    dropped (letters of any script, digits, ``_`` and ``-`` kept), spaces turned into ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    text = text.replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor a file's headings make, with GitHub's -1, -2 ... for repeated ones."""
    seen: dict[str, int] = {}
    found = set()
    for line in read(path).prose:
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return frozenset(found)


def links(doc: Doc) -> list[str]:
    return [target for line in doc.prose for target in LINK.findall(line)
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]  # http:, https:, mailto: are not checked here


def test_the_docs_are_there_to_check() -> None:
    """Without this, a moved docs folder would make every other test here pass on nothing."""
    names = {p.name for p in DOCS}
    assert {"README.md", "evaluation.md", "training.md", "sync.md", "performance.md", "security.md"} <= names
    assert all(links(read(p)) for p in DOCS if p.name in {"README.md", "evaluation.md"})


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_every_relative_link_reaches_a_file_and_its_heading(path: Path) -> None:
    doc = read(path)
    broken = []
    for target in links(doc):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(REPO)}")
    assert broken == [], f"{doc.where()}: {broken}"


def test_anchors_follow_githubs_slug_rules() -> None:
    """The rules the link test relies on, on headings of the kind these files have."""
    assert slug("The 📅 receipt: what really happened") == "the--receipt-what-really-happened"
    assert slug("5. Your real calendar (CalDAV)") == "5-your-real-calendar-caldav"
    assert slug("OpenAI backend: prefix reuse through llama_cpp.server") == "openai-backend-prefix-reuse-through-llama_cppserver"
    assert slug("The demo recipe: `train demo`") == "the-demo-recipe-train-demo"
    assert slug("일정 sync") == "일정-sync"


@functools.cache
def help_text(package: str) -> str:
    """``python -m PACKAGE --help``, run once per package."""
    done = subprocess.run([sys.executable, "-m", package, "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def subcommands(package: str) -> set[str]:
    """The subcommand names ``--help`` lists under "positional arguments:" (a ``{a,b,c}`` choice,
    then one indented line per command); option values such as ``{llama,openai}`` are not among them."""
    section = help_text(package).split("positional arguments:", 1)[1]
    section = re.split(r"\n\S", section, maxsplit=1)[0]  # up to the next "options:" heading
    names = {n for group in re.findall(r"\{([\w,-]+)\}", section) for n in group.split(",")}
    names |= set(re.findall(r"^    ([a-z][\w-]*)(?:\s{2,}|$)", section, flags=re.M))
    return names


def flags_taking_values(package: str) -> set[str]:
    """Options the usage line shows with a value (``[--model GGUF]``), so the word after them is
    that value, not a subcommand."""
    return set(re.findall(r"\[(-[\w-]+)(?:,\s*-[\w-]+)?\s+[A-Z{][^\]]*\]", " ".join(help_text(package).split())))


@dataclass(frozen=True)
class Named:
    module: str
    subcommand: str | None
    where: str


def named_commands() -> list[Named]:
    """Every ``python -m MODULE [options] [SUBCOMMAND]`` in the code of README.md and docs/*.md."""
    found = []
    for path in DOCS:
        doc = read(path)
        for snippet in doc.code:
            for match in PYTHON_M.finditer(snippet):
                module, words = match.group(1), match.group(2).split()
                found.append(Named(module, first_subcommand(module, words), doc.where()))
    return found


def first_subcommand(module: str, words: list[str]) -> str | None:
    if module not in ENTRY_POINTS:
        return None
    takes_value = flags_taking_values(module)
    previous = ""
    for word in words:
        if word.startswith("-"):
            previous = "" if "=" in word else word  # --flag=value carries its own value
            continue
        if previous in takes_value:
            previous = ""
            continue
        return word if re.fullmatch(r"[a-z][\w-]*", word) else None
    return None


def test_the_docs_name_commands_of_every_entry_point() -> None:
    named = {n.module for n in named_commands() if n.subcommand}
    assert set(ENTRY_POINTS) <= named


def test_every_python_m_subcommand_the_docs_name_is_one_its_help_lists() -> None:
    unknown = sorted({f"{n.where}: python -m {n.module} {n.subcommand}" for n in named_commands()
                      if n.subcommand and n.subcommand not in subcommands(n.module)})
    assert unknown == []


def test_every_other_python_m_module_the_docs_name_exists() -> None:
    """``python -m agent.bench.warm_start`` and the like: a module of this repository, or one installed."""
    missing = set()
    for n in named_commands():
        if n.module in ENTRY_POINTS:
            continue
        top, *rest = n.module.split(".")
        if (REPO / top).is_dir():
            base = REPO.joinpath(top, *rest)
            if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
                missing.add(f"{n.where}: python -m {n.module}")
        elif importlib.util.find_spec(top) is None:
            missing.add(f"{n.where}: python -m {n.module}")
    assert sorted(missing) == []


@functools.cache
def sources() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for d in SOURCE_DIRS for p in sorted((REPO / d).rglob("*.py")))


def test_every_environment_variable_the_docs_name_is_read_somewhere_in_the_code() -> None:
    named: dict[str, str] = {}
    for path in DOCS:
        for name in ENV_NAME.findall(path.read_text(encoding="utf-8")):
            named.setdefault(name, str(path.relative_to(REPO)))
    assert len(named) > 20  # the settings table alone names more: an empty match would prove nothing
    code = sources()
    unknown = sorted(f"{where}: {name}" for name, where in named.items() if not re.search(rf"\b{name}\b", code))
    assert unknown == []
