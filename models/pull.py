"""Download models and adapters with huggingface_hub, verify them, and list what is present.

huggingface_hub does the HTTP work: progress bars, the cache layout (or ``local_dir``),
and resuming a transfer that breaks off (it re-requests the rest with a Range header).
On top of it this module verifies the sha256 (the hub's ETag of an LFS file is its
sha256, or the user gives one) and runs the header checker on the result.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from models.check import CheckResult, check_adapter, check_file, check_model
from models.profiles import Profile

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
        discard(path)
        return PullResult(
            repo_id, filename, None, actual, expected,
            error=f"sha256 mismatch: expected {expected}, got {actual} (the file was removed; pull again)",
        )
    return PullResult(repo_id, filename, path, actual, expected)


def discard(path: Path) -> None:
    """Remove a refused download, so that nothing resolves to it later.

    In the hub cache the file is a snapshot symlink to a blob: both go (the blob alone would
    make a dangling link; the link alone would be found again by ``try_to_load_from_cache``).
    """
    target = path.resolve() if path.is_symlink() else None
    path.unlink(missing_ok=True)
    if target is not None:
        target.unlink(missing_ok=True)


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


def pull_peft_adapter(
    repo_id: str,
    subdir: str,
    base: Path,
    out: Path,
    *,
    revision: str | None = None,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
) -> PullResult:
    """Fetch a PEFT adapter folder (``snapshot_download`` limited to ``subdir/``) and convert it
    for ``base`` into ``out``. The converter writes a temporary file and renames it only after
    ``check_adapter`` passed, so ``out`` is either a verified adapter or absent."""
    from huggingface_hub import snapshot_download

    label = f"{subdir}/"
    try:
        folder = Path(
            snapshot_download(
                repo_id, allow_patterns=[f"{subdir}/*"], revision=revision, cache_dir=cache_dir, endpoint=endpoint
            )
        )
    except Exception as exc:
        return PullResult(repo_id, label, error=f"download failed ({_first_line(exc)})")
    peft_dir = folder / subdir
    if not (peft_dir / "adapter_config.json").is_file():
        found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
        return PullResult(
            repo_id, label,
            error=f"no PEFT adapter (adapter_config.json) in {subdir}/ of the repo; the hub listed {found or 'no files there'}",
        )
    try:
        from models.convert_lora import ConversionError, convert_lora
    except ImportError as exc:  # pragma: no cover - numpy/gguf are runtime dependencies
        return PullResult(repo_id, label, error=f"cannot convert: {exc}")
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        convert_lora(peft_dir, base, out)
    except ConversionError as exc:
        return PullResult(repo_id, label, error=f"conversion refused: {exc}".replace("\n", " "))
    except ImportError as exc:
        return PullResult(
            repo_id, label, error=f"converting a PEFT adapter needs the train extra (pip install -e '.[train]'): {exc}"
        )
    return _with_check(PullResult(repo_id, label, out, sha256_file(out)), check_adapter(out, base))


def pull_profile(
    profile: Profile,
    models_dir: Path,
    *,
    revision: str | None = None,
    local_dir: Path | None = None,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    model_sha256: str | None = None,
    adapter_sha256: str | None = None,
) -> list[PullResult]:
    """Everything a profile needs: the base GGUF, then its adapter (downloaded, or converted
    into ``models_dir`` from a PEFT folder), each checked. Stops at the first failure."""
    if profile.adapter_kind == "gguf":
        return pull(
            profile.model_repo, profile.model_file, profile.adapter_repo, profile.adapter_file,
            revision=revision, local_dir=local_dir, cache_dir=cache_dir, endpoint=endpoint,
            model_sha256=model_sha256, adapter_sha256=adapter_sha256,
        )
    results = pull(
        profile.model_repo, profile.model_file, revision=revision, local_dir=local_dir, cache_dir=cache_dir,
        endpoint=endpoint, model_sha256=model_sha256,
    )
    model = results[0]
    if not model.ok or model.path is None:
        return results
    out = profile.adapter_path_in(local_dir or models_dir)
    return [model, pull_peft_adapter(profile.adapter_repo, profile.adapter_subdir, model.path, out,
                                     cache_dir=cache_dir, endpoint=endpoint)]


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
