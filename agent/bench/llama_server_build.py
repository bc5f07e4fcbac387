"""Builds llama.cpp's ``llama-server`` for the peers figure, once, into a cache outside the repository.

Run only on request: ``python -m agent bench --build-llama-server`` (never by the bench itself, never
by the test suite: it takes ~40 minutes on one core). The bench uses the binary when it exists
(``binary()``) and reports the peer as not measured otherwise.

Why from the llama-cpp-python sdist: the peer must run the very llama.cpp the runtime runs, so the
comparison is between the two front ends, not two versions of the kernels. The sdist of the
installed version (``pip download --no-binary :all:``) ships the complete ``vendor/llama.cpp``,
server included. Why ``GGML_NATIVE=OFF``: that is how the runtime's llama-cpp-python is built (a
``-march=native`` build segfaults on this machine's AMX), and the same kernels are the point. Why
one job by default: on a 2-core machine shared with other work a parallel compile starves it.

Layout, per llama-cpp-python version: ``<cache>/<version>/llama_cpp_python-<version>.tar.gz`` (the
sdist), ``src/`` (its ``vendor/llama.cpp``), ``src/build/`` (cmake), ``src/build/bin/llama-server``,
``build.log``. The cache is ``$XDG_CACHE_HOME/iljeong/llama-server`` (default ``~/.cache``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

from agent.bench.report import progress

DISTRIBUTION = "llama_cpp_python"
CMAKE_FLAGS = (
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_CURL=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DGGML_NATIVE=OFF", "-DCMAKE_BUILD_TYPE=Release",
)


class BuildError(RuntimeError):
    """One line: what failed and what to do about it."""


def installed_version() -> str:
    """The llama-cpp-python the runtime imports: the server is built from the same version."""
    return metadata.version(DISTRIBUTION)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "iljeong" / "llama-server"


def version_dir(version: str | None = None, root: Path | None = None) -> Path:
    return (root or cache_root()) / (version or installed_version())


def binary(version: str | None = None, root: Path | None = None) -> Path:
    """Where the built ``llama-server`` of ``version`` lives (it may not exist)."""
    return version_dir(version, root) / "src" / "build" / "bin" / "llama-server"


def templates_dir(version: str | None = None, root: Path | None = None) -> Path:
    """llama.cpp's own collection of model chat templates, from the same sources."""
    return version_dir(version, root) / "src" / "models" / "templates"


def configure_command(source: Path) -> list[str]:
    return ["cmake", "-S", str(source), "-B", str(source / "build"), *CMAKE_FLAGS]


def build_command(source: Path, jobs: int = 1) -> list[str]:
    return ["cmake", "--build", str(source / "build"), "--target", "llama-server", f"-j{jobs}"]


def missing_tools() -> list[str]:
    """The build tools not on PATH: cmake, and a C++ compiler under any of its usual names."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not any(shutil.which(name) for name in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler (c++/g++/clang++)")
    return missing


def build(version: str | None = None, root: Path | None = None, jobs: int = 1) -> Path:
    """The ``llama-server`` binary of ``version``: already there, or fetched and built now.

    Idempotent: an existing binary is returned untouched; a half-done build resumes (cmake keeps
    what it compiled). Output goes to ``build.log`` beside the sources, a progress line here.
    Raises ``BuildError`` (one line) when a tool is missing or a step fails."""
    version = version or installed_version()
    target = binary(version, root)
    if target.exists():
        progress(f"llama-server {version}: already built at {target}")
        return target
    missing = missing_tools()
    if missing:
        raise BuildError(f"building llama-server needs {' and '.join(missing)} on PATH: install them "
                         "(e.g. apt-get install cmake g++, or xcode-select --install) and run again")
    directory = version_dir(version, root)
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "src"
    if not (source / "CMakeLists.txt").exists():
        _unpack(_sdist(version, directory), source)
    log = directory / "build.log"
    progress(f"llama-server {version}: building in {source / 'build'} (~40 min on one core); log {log}")
    with log.open("ab") as out:
        for command in (configure_command(source), build_command(source, jobs)):
            out.write(("$ " + " ".join(command) + "\n").encode())
            out.flush()
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                raise BuildError(f"{command[0]} {command[1]} failed with status {done.returncode}: see {log}")
    if not target.exists():
        raise BuildError(f"the build finished but {target} is missing: see {log}")
    progress(f"llama-server {version}: built {target}")
    return target


def _sdist(version: str, directory: Path) -> Path:
    """The sdist tarball, downloaded through pip (the ordinary client) unless already cached."""
    name = f"{DISTRIBUTION}-{version}.tar.gz"
    tarball = directory / name
    if tarball.exists():
        return tarball
    progress(f"llama-server {version}: downloading the llama-cpp-python {version} sdist")
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
                           f"llama-cpp-python=={version}", "-d", str(directory)],
                          capture_output=True, text=True)
    if done.returncode != 0 or not tarball.exists():
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise BuildError(f"pip could not download the llama-cpp-python {version} sdist: {last[0][:200]}")
    return tarball


def _unpack(tarball: Path, source: Path) -> None:
    """Only the sdist's ``vendor/llama.cpp`` is needed; it becomes ``source``."""
    prefix = f"{tarball.name.removesuffix('.tar.gz')}/vendor/llama.cpp/"
    staging = source.with_name(source.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        members = []
        for member in archive.getmembers():
            if member.name.startswith(prefix):
                member.name = member.name[len(prefix):]
                members.append(member)
        if not members:
            raise BuildError(f"{tarball} has no vendor/llama.cpp: not a llama-cpp-python sdist")
        archive.extractall(staging, members=members, filter="data")
    staging.rename(source)  # whole or not at all: a half-unpacked tree is never mistaken for sources


def main(argv: list[str] | None = None) -> int:
    """``python -m agent bench --build-llama-server`` lands here; prints the binary's path."""
    try:
        print(build())
    except BuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0
