"""Download models and adapters with huggingface_hub, verify them, and list what is present.

huggingface_hub does the HTTP work: progress bars, the cache layout (or ``local_dir``),
and resuming a transfer that breaks off (it re-requests the rest with a Range header).
On top of it this module verifies the sha256 (the hub's ETag of an LFS file is its
sha256, or the user gives one) and runs the header checker on the result.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.check import CheckResult, check_adapter, check_file, check_model

SHA256_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class PullResult:
    """One file: where it landed and whether it passed sha256 and the header check."""

    repo_id: str
    filename: str
    path: Path | None = None
    sha256: str | None = None
    expected_sha256: str | None = None
    check: CheckResult | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and (self.check is None or self.check.ok)

    def error_line(self) -> str:
        if self.error:
            return f"error: {self.repo_id}/{self.filename}: {self.error}"
        return self.check.error_line() if self.check is not None else ""


def sha256_file(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def remote_sha256(repo_id: str, filename: str, *, revision: str | None = None, endpoint: str | None = None) -> str | None:
    """The sha256 the hub announces for an LFS file (its ETag), or None if unknown/unreachable."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        meta = get_hf_file_metadata(hf_hub_url(repo_id, filename, revision=revision, endpoint=endpoint), endpoint=endpoint)
    except Exception:  # unreachable hub: hf_hub_download will say so, or fall back to the cache
        return None
    etag = (meta.etag or "").lower()
    return etag if SHA256_RE.fullmatch(etag) else None


def download(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    local_dir: Path | None = None,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    sha256: str | None = None,
) -> PullResult:
    """Fetch one file (resumable, cached) and verify its sha256 when one is known."""
    from huggingface_hub import hf_hub_download

    expected = sha256.lower() if sha256 else remote_sha256(repo_id, filename, revision=revision, endpoint=endpoint)
    try:
        path = Path(
            hf_hub_download(
                repo_id, filename, revision=revision, local_dir=local_dir, cache_dir=cache_dir, endpoint=endpoint
            )
        )
    except Exception as exc:
        return PullResult(repo_id, filename, expected_sha256=expected, error=f"download failed ({_first_line(exc)})")
    actual = sha256_file(path)
    if expected and actual != expected:
        return PullResult(
            repo_id, filename, path, actual, expected,
            error=f"sha256 mismatch: expected {expected}, got {actual} (delete {path} and pull again)",
        )
    return PullResult(repo_id, filename, path, actual, expected)


def pull(
    model_repo: str,
    model_file: str,
    adapter_repo: str | None = None,
    adapter_file: str | None = None,
    *,
    revision: str | None = None,
    local_dir: Path | None = None,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    model_sha256: str | None = None,
    adapter_sha256: str | None = None,
) -> list[PullResult]:
    """Download the base model and (when given) the adapter, then check both headers."""
    model = download(
        model_repo, model_file, revision=revision, local_dir=local_dir, cache_dir=cache_dir, endpoint=endpoint, sha256=model_sha256
    )
    if model.error or model.path is None:
        return [model]
    model = _with_check(model, check_model(model.path))
    results = [model]
    if adapter_repo and adapter_file:
        adapter = download(
            adapter_repo, adapter_file, local_dir=local_dir, cache_dir=cache_dir, endpoint=endpoint, sha256=adapter_sha256
        )
        if not adapter.error and adapter.path is not None:
            adapter = _with_check(adapter, check_adapter(adapter.path, model.path))
        results.append(adapter)
    return results


def _with_check(result: PullResult, check: CheckResult) -> PullResult:
    return PullResult(result.repo_id, result.filename, result.path, result.sha256, result.expected_sha256, check)


@dataclass(frozen=True)
class Present:
    """A GGUF file found locally, with where it lives and what the checker says."""

    path: Path
    size: int
    where: str
    check: CheckResult


def list_present(local_dirs: Iterable[Path], cache_dir: Path | None = None) -> list[Present]:
    """GGUF files in the hub cache and in ``local_dirs``, each with its check result."""
    from huggingface_hub import scan_cache_dir

    found: list[Present] = []
    try:
        cache = scan_cache_dir(cache_dir)
    except Exception:  # no cache directory yet
        cache = None
    if cache is not None:
        for repo in sorted(cache.repos, key=lambda r: r.repo_id):
            for revision in repo.revisions:
                for f in sorted(revision.files, key=lambda f: f.file_name):
                    if f.file_name.endswith(".gguf"):
                        where = f"hub cache {repo.repo_id}@{revision.commit_hash[:8]}"
                        found.append(Present(f.file_path, f.size_on_disk, where, check_file(f.file_path)))
    for directory in local_dirs:
        if directory.is_dir():
            for path in sorted(directory.rglob("*.gguf")):
                if ".cache" not in path.relative_to(directory).parts:
                    found.append(Present(path, path.stat().st_size, f"local {directory}", check_file(path)))
    return found
