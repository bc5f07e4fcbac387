"""Refuse bad model and adapter files before llama.cpp sees them.

llama-cpp-python 0.3.36 accepts a missing, empty, garbage or non-adapter LoRA path and then
crashes on the first decode, so every entry point checks the files here first. Only GGUF
headers are read (see ``models.gguf_header``): the check costs milliseconds for any size.
Failures are result values; ``require_loadable`` is the one place that turns them into
exit status 2.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gguf import LlamaFileType

from models.gguf_header import HeaderReader, TensorInfo
from models.templates import TemplateFamily, template_family

KNOWN_ARCHITECTURES = frozenset({"llama", "qwen2", "qwen3", "gemma3"})
GGUF_MAGIC = b"GGUF"
SUPPORTED_GGUF_VERSIONS = (2, 3)

MODEL_HINT = "run python -m models pull, set AGENT_MODEL_PATH, or try --demo"
ADAPTER_HINT = "fix --adapter / AGENT_LORA_PATH, run python -m models pull, or pass --no-adapter"


@dataclass(frozen=True)
class CheckResult:
    """What a check found: ``ok``, or the ``reason`` it refused ``path`` and a ``hint``."""

    ok: bool
    path: Path
    reason: str = ""
    hint: str = ""
    info: dict[str, Any] = field(default_factory=dict)

    def error_line(self) -> str:
        hint = f" ({self.hint})" if self.hint else ""
        line = f"error: {self.path}: {self.reason}{hint}"
        return line.replace("\r", " ").replace("\n", " ")


class _Refused(Exception):
    """Internal: carries a refusal reason up to the public functions."""


def _open_header(path: Path) -> tuple[HeaderReader, int]:
    """Check the file itself, then parse its header; raises _Refused with a reason."""
    if not path.exists():
        raise _Refused("no such file" if not path.is_symlink() else "broken symbolic link")
    if path.is_dir():
        raise _Refused("is a directory, not a GGUF file")
    if not path.is_file():
        raise _Refused("is not a regular file")
    if not os.access(path, os.R_OK):
        raise _Refused("is not readable (permission denied)")
    size = path.stat().st_size
    if size == 0:
        raise _Refused("is empty")
    try:
        with path.open("rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise _Refused(f"cannot be read ({exc.strerror or exc})") from exc
    if head[:4] != GGUF_MAGIC:
        raise _Refused("is not a GGUF file (bad magic)")
    if len(head) < 8:
        raise _Refused("is truncated (ends inside the GGUF header)")
    version = int.from_bytes(head[4:8], "little")
    if version not in SUPPORTED_GGUF_VERSIONS and int.from_bytes(head[4:8], "big") not in SUPPORTED_GGUF_VERSIONS:
        raise _Refused(f"has unsupported GGUF version {version}")
    try:
        reader = HeaderReader(path)
    except Exception as exc:  # the gguf parser raises many types on damaged input
        raise _Refused(f"is truncated or corrupt (its GGUF header cannot be parsed: {type(exc).__name__})") from exc
    end = max((t.offset + t.n_bytes for t in reader.tensor_infos), default=reader.data_offset)
    if end > size:
        reader.close()
        raise _Refused(f"is truncated: the header describes {end} bytes but the file has {size}")
    return reader, size


def _file_type_name(reader: HeaderReader) -> str:
    """The quantization label, from general.file_type or else the most common weight type."""
    value = reader.value("general.file_type")
    if value is not None:
        try:
            return LlamaFileType(int(value)).name.removeprefix("MOSTLY_")
        except ValueError:
            return f"file type {value}"
    types = Counter(t.type for t in reader.tensor_infos if len(t.dims) >= 2)
    return types.most_common(1)[0][0].name if types else "unknown"


def chat_template_of(reader: HeaderReader) -> str:
    """The GGUF's ``tokenizer.chat_template`` as text ("" when it has none)."""
    template = reader.value("tokenizer.chat_template")
    if isinstance(template, bytes):
        template = template.decode("utf-8", errors="replace")
    return str(template or "")


def _base_info(reader: HeaderReader, size: int) -> dict[str, Any]:
    arch = reader.value("general.architecture")
    template = chat_template_of(reader)
    family = template_family(template)
    return {
        "kind": reader.value("general.type") or "model",
        "architecture": arch,
        "name": reader.value("general.name"),
        "quantization": _file_type_name(reader),
        "size_bytes": size,
        "context_length": reader.value(f"{arch}.context_length") if arch else None,
        "chat_template": bool(template),
        # which template family it is and whether it renders the tools (models.templates)
        "template_family": family.name,
        "template_renders_tools": family.renders_tools,
        "vocab_size": reader.array_length("tokenizer.ggml.tokens"),
        "tensor_count": len(reader.tensor_infos),
    }


def template_line(info: dict[str, Any]) -> str:
    """A model check's chat template line: its family and who renders the tools (``models verify``
    and ``agent doctor`` print it)."""
    if not info.get("chat_template"):
        return "none in the file"
    return TemplateFamily(info["template_family"], info["template_renders_tools"]).describe()


def check_model(path: str | os.PathLike[str]) -> CheckResult:
    """Check that ``path`` is a base model GGUF that the runtime can load."""
    return _inspect_model(Path(path))[0]


def _inspect_model(p: Path) -> tuple[CheckResult, dict[str, TensorInfo]]:
    """The model check, plus the tensor table an adapter is compared with (one header read)."""
    try:
        reader, size = _open_header(p)
    except _Refused as exc:
        return CheckResult(False, p, str(exc), MODEL_HINT), {}
    try:
        info = _base_info(reader, size)
        tensors = {t.name: t for t in reader.tensor_infos}
        arch = info["architecture"]
        if info["kind"] == "adapter":
            hint = "pass it as the adapter (--adapter / AGENT_LORA_PATH)"
            return CheckResult(False, p, "is a LoRA adapter, not a base model", hint, info), tensors
        if not arch:
            return CheckResult(False, p, "has no general.architecture", MODEL_HINT, info), tensors
        if arch not in KNOWN_ARCHITECTURES:
            known = ", ".join(sorted(KNOWN_ARCHITECTURES))
            reason = f"architecture {arch!r} is not supported (known: {known})"
            return CheckResult(False, p, reason, MODEL_HINT, info), tensors
        if not tensors:
            return CheckResult(False, p, "has no tensors", MODEL_HINT, info), tensors
        if not info["chat_template"]:
            info["note"] = "no chat template in the file: the runtime template will be used"
        return CheckResult(True, p, info=info), tensors
    finally:
        reader.close()


def _pair_problem(name: str, a: TensorInfo, b: TensorInfo, base: TensorInfo | None) -> str | None:
    """Why a lora_a/lora_b pair cannot apply to its base tensor (dims in ggml order), or None.

    A base weight of ggml shape [n_in, n_out] takes lora_a [n_in, r] and lora_b [r, n_out]:
    in PyTorch order that is B (out x r) @ A (r x in) = W (out x in).
    """
    if base is None:
        return f"tensor {name} is not in the base model"
    if len(a.dims) != 2 or len(b.dims) != 2 or len(base.dims) != 2:
        return f"tensor {name}: LoRA needs 2-D tensors (lora_a {list(a.dims)}, lora_b {list(b.dims)}, base {list(base.dims)})"
    if a.dims[1] != b.dims[0]:
        return f"tensor {name}: rank mismatch, lora_a {list(a.dims)} and lora_b {list(b.dims)}"
    if a.dims[0] != base.dims[0] or b.dims[1] != base.dims[1]:
        return (
            f"tensor {name}: shapes lora_a {list(a.dims)} x lora_b {list(b.dims)} do not multiply "
            f"to the base shape {list(base.dims)} (ggml order)"
        )
    return None


def _check_pairs(reader: HeaderReader, base: dict[str, TensorInfo] | None) -> tuple[str | None, dict[str, Any]]:
    """Group adapter tensors into pairs and check each one; returns (problem, info)."""
    halves: dict[str, dict[str, TensorInfo]] = {}
    for t in reader.tensor_infos:
        stem, _, suffix = t.name.rpartition(".")
        if suffix not in ("lora_a", "lora_b") or not stem:
            return f"tensor {t.name} is not a LoRA tensor (expected *.lora_a / *.lora_b)", {}
        halves.setdefault(stem, {})[suffix] = t
    if not halves:
        return "has no LoRA tensors", {}
    ranks: set[int] = set()
    for stem, pair in sorted(halves.items()):
        if set(pair) != {"lora_a", "lora_b"}:
            missing = "lora_b" if "lora_a" in pair else "lora_a"
            return f"tensor {stem} has no {missing}", {}
        a, b = pair["lora_a"], pair["lora_b"]
        if base is not None:
            problem = _pair_problem(stem, a, b, base.get(stem))
            if problem:
                return problem, {}
        elif len(a.dims) != 2 or len(b.dims) != 2 or a.dims[1] != b.dims[0]:
            return f"tensor {stem}: lora_a {list(a.dims)} and lora_b {list(b.dims)} do not fit together", {}
        ranks.add(int(a.dims[1]))
    rank: int | list[int] = ranks.pop() if len(ranks) == 1 else sorted(ranks)
    return None, {"rank": rank, "tensor_pairs": len(halves), "targets": sorted({s.split(".")[-2] for s in halves if "." in s})}


def check_adapter(path: str | os.PathLike[str], base_path: str | os.PathLike[str] | None) -> CheckResult:
    """Check that ``path`` is a LoRA adapter GGUF that fits the base model at ``base_path``.

    With ``base_path`` None only the adapter itself is checked (used by ``models list``).
    """
    p = Path(path)
    base_tensors: dict[str, TensorInfo] | None = None
    base_arch: str | None = None
    if base_path is not None:
        base, base_tensors = _inspect_model(Path(base_path))
        if not base.ok:
            return base
        base_arch = base.info["architecture"]
    try:
        reader, size = _open_header(p)
    except _Refused as exc:
        return CheckResult(False, p, str(exc), ADAPTER_HINT)
    try:
        kind = reader.value("general.type")
        arch = reader.value("general.architecture")
        info: dict[str, Any] = {"kind": kind, "architecture": arch, "size_bytes": size, "tensor_count": len(reader.tensor_infos)}
        if kind != "adapter":
            return CheckResult(False, p, f"is not a LoRA adapter (general.type is {kind or 'missing'!s})", ADAPTER_HINT, info)
        adapter_type = reader.value("adapter.type")
        if adapter_type != "lora":
            return CheckResult(False, p, f"is not a LoRA adapter (adapter.type is {adapter_type or 'missing'!s})", ADAPTER_HINT, info)
        if base_arch is not None and arch != base_arch:
            return CheckResult(False, p, f"architecture {arch!r} does not match the base model's {base_arch!r}", ADAPTER_HINT, info)
        alpha = reader.value("adapter.lora.alpha")
        info["alpha"] = float(alpha) if alpha is not None else None
        problem, pair_info = _check_pairs(reader, base_tensors)
        if problem:
            return CheckResult(False, p, problem, ADAPTER_HINT, info)
        info.update(pair_info)
        info["quantization"] = Counter(t.type for t in reader.tensor_infos).most_common(1)[0][0].name
        if base_path is None:
            info["note"] = "not compared with a base model"
        return CheckResult(True, p, info=info)
    finally:
        reader.close()


def check_file(path: str | os.PathLike[str]) -> CheckResult:
    """Check a GGUF as whatever it claims to be (model or adapter), for listings."""
    p = Path(path)
    try:
        reader, _ = _open_header(p)
    except _Refused as exc:
        return CheckResult(False, p, str(exc))
    kind = reader.value("general.type")
    reader.close()
    return check_adapter(p, None) if kind == "adapter" else check_model(p)


def check_pair(model_path: str | os.PathLike[str], lora_path: str | os.PathLike[str] | None) -> CheckResult:
    """The model check, then (when given) the adapter check against it."""
    result = check_model(model_path)
    if result.ok and lora_path is not None:
        return check_adapter(lora_path, model_path)
    return result


def require_loadable(model_path: str | os.PathLike[str], lora_path: str | os.PathLike[str] | None) -> None:
    """For entry points: return if llama.cpp may load these files, else one line and exit 2."""
    result = check_pair(model_path, lora_path)
    if not result.ok:
        print(result.error_line(), file=sys.stderr)
        raise SystemExit(2)


__all__ = [
    "CheckResult",
    "KNOWN_ARCHITECTURES",
    "check_adapter",
    "check_file",
    "check_model",
    "check_pair",
    "require_loadable",
    "template_line",
]
