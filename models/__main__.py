"""``python -m models``: pull, verify and list GGUF models and LoRA adapters.

Exit status: 0 when all is well, 2 when a file is refused (one ``error:`` line on stderr
naming the path and the reason), 1 when a download fails.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from agent.config import load_settings
from models.check import CheckResult, check_adapter, check_model
from models.resolve import DEFAULT_MODEL_FILE, DEFAULT_MODEL_REPO, models_dir, resolve


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m models", description="Pull, verify and inspect GGUF models and LoRA adapters."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{pull,verify,list,convert-lora}")

    pull = sub.add_parser("pull", help="download the default model and adapter (huggingface_hub, resumable)")
    pull.add_argument("--model-repo", default=DEFAULT_MODEL_REPO)
    pull.add_argument("--model-file", default=DEFAULT_MODEL_FILE)
    pull.add_argument("--adapter-repo", help="hub repo of the LoRA adapter (default: adapter_repo in the config)")
    pull.add_argument("--adapter-file", help="adapter GGUF in that repo (default: adapter_file in the config)")
    pull.add_argument("--local-dir", type=Path, help="put the files here instead of the hub cache")
    pull.add_argument("--revision", help="branch, tag or commit of the model repo")
    pull.add_argument("--sha256", help="expected sha256 of the model file (default: the hub's ETag)")
    pull.add_argument("--adapter-sha256", help="expected sha256 of the adapter file")

    verify = sub.add_parser("verify", help="check a model and adapter before llama.cpp loads them")
    verify.add_argument("--model", help="base model GGUF (default: as the agent would resolve it)")
    verify.add_argument("--adapter", help="LoRA adapter GGUF (default: as the agent would resolve it)")
    verify.add_argument("--no-adapter", action="store_true", help="check the base model alone")

    listing = sub.add_parser("list", help="show models present locally (hub cache and local dirs)")
    listing.add_argument("--local-dir", type=Path, action="append", default=[], help="also scan this directory")

    convert = sub.add_parser(
        "convert-lora", help="convert a PEFT LoRA adapter folder to a llama.cpp LoRA GGUF (needs the train extra)",
        description="Convert a PEFT LoRA (adapter_config.json + adapter_model.safetensors) trained on the base "
                    "model's weights into a llama.cpp LoRA GGUF that fits --base. Only LoRA pairs on attention "
                    "and MLP projections convert; adapters touching embeddings or the output head are refused.",
    )
    convert.add_argument("peft_dir", type=Path, help="PEFT adapter folder (e.g. the output of python -m agent train sft)")
    convert.add_argument("--base", required=True, type=Path, help="the base model GGUF the adapter was trained on")
    convert.add_argument("--out", required=True, type=Path, help="adapter GGUF to write")
    convert.add_argument("--outtype", choices=("f16", "f32"), default="f16", help="tensor type (default f16)")
    return parser


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB"


def describe(result: CheckResult) -> list[str]:
    """Human-readable lines for what a successful check found."""
    i: dict[str, Any] = result.info
    if i.get("kind") == "adapter":
        lines = [
            f"adapter: {result.path}",
            f"  architecture: {i.get('architecture')}",
            f"  rank: {i.get('rank')}  alpha: {i.get('alpha')}",
            f"  tensor pairs: {i.get('tensor_pairs')} ({', '.join(i.get('targets', []))})",
            f"  type: {i.get('quantization')}  size: {_size(i['size_bytes'])}",
        ]
    else:
        lines = [
            f"model: {result.path}",
            f"  architecture: {i.get('architecture')}" + (f"  ({i['name']})" if i.get("name") else ""),
            f"  quantization: {i.get('quantization')}  size: {_size(i['size_bytes'])}",
            f"  context length: {i.get('context_length')}",
            f"  chat template: {'yes' if i.get('chat_template') else 'no'}",
            f"  tensors: {i.get('tensor_count')}  vocabulary: {i.get('vocab_size')}",
        ]
    if i.get("note"):
        lines.append(f"  note: {i['note']}")
    return lines


def cmd_verify(args: argparse.Namespace) -> int:
    settings = load_settings({"model_path": args.model, "lora_path": args.adapter, "no_adapter": args.no_adapter or None})
    resolved = resolve(settings)
    if resolved.model_path is None:
        print(f"error: {resolved.error}", file=sys.stderr)
        return 2
    model = check_model(resolved.model_path)
    if not model.ok:
        print(model.error_line(), file=sys.stderr)
        return 2
    lines = describe(model)
    if resolved.lora_path is not None:
        adapter = check_adapter(resolved.lora_path, resolved.model_path)
        if not adapter.ok:
            print(adapter.error_line(), file=sys.stderr)
            return 2
        lines += describe(adapter)
    else:
        lines.append("adapter: none" + ("" if settings.no_adapter else f" ({resolved.error})"))
    print("\n".join(lines))
    return 0


def cmd_pull(args: argparse.Namespace) -> int:
    from models.pull import pull

    settings = load_settings()
    adapter_repo = args.adapter_repo or settings.adapter_repo
    adapter_file = args.adapter_file or settings.adapter_file
    if not (adapter_repo and adapter_file):
        print("note: no adapter repo/file given (--adapter-repo/--adapter-file or the config): pulling the base model only", file=sys.stderr)
    results = pull(
        args.model_repo, args.model_file, adapter_repo, adapter_file,
        revision=args.revision, local_dir=args.local_dir, model_sha256=args.sha256, adapter_sha256=args.adapter_sha256,
    )
    status = 0
    for r in results:
        if r.error:
            print(r.error_line(), file=sys.stderr)
            status = max(status, 1)
        elif r.check is not None and not r.check.ok:
            print(r.check.error_line(), file=sys.stderr)
            status = 2
        else:
            verified = "sha256 verified" if r.expected_sha256 else "sha256 not announced by the hub"
            print(f"{r.repo_id}/{r.filename}: {r.path} ({verified}: {r.sha256})")
    return status


def cmd_list(args: argparse.Namespace) -> int:
    from models.pull import list_present

    found = list_present([models_dir(load_settings()), *args.local_dir])
    if not found:
        print("no GGUF files found (python -m models pull downloads the default model)")
    for p in found:
        status = "ok" if p.check.ok else f"refused: {p.check.reason}"
        kind = p.check.info.get("kind", "?")
        print(f"{_size(p.size):>9}  {kind:<7}  {status:<10}  {p.path}  [{p.where}]")
    return 0


def cmd_convert_lora(args: argparse.Namespace) -> int:
    from models.convert_lora import ConversionError, convert_lora

    try:
        result = convert_lora(args.peft_dir, args.base, args.out, outtype=args.outtype, progress=True)
    except ConversionError as exc:
        print(f"error: {args.peft_dir}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: convert-lora needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    print(
        f"{result.path}: {result.tensor_pairs} LoRA pairs ({', '.join(result.targets)}), rank "
        f"{'/'.join(map(str, result.ranks))}, alpha {result.alpha:g}, {result.architecture}"
        + (", q/k rows permuted to llama.cpp's rope layout" if result.permuted else "")
    )
    print("\n".join(describe(check_adapter(result.path, args.base))))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "verify":
        return cmd_verify(args)
    if args.command == "pull":
        return cmd_pull(args)
    if args.command == "list":
        return cmd_list(args)
    return cmd_convert_lora(args)


if __name__ == "__main__":
    sys.exit(main())
