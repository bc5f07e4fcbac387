"""``python -m models``: pull, verify and list GGUF models and LoRA adapters.

Exit status: 0 when all is well, 2 when a file is refused or a download fails (one ``error:``
line on stderr naming the repo or path and the reason).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from models.check import CheckResult, check_adapter, check_model, template_line
from models.config import load_choice
from models.profiles import DEFAULT_PROFILE, PROFILES, Profile, UnknownProfile, get_profile
from models.resolve import find_profile_adapter, find_pulled, models_dir, resolve


def _profile_table() -> str:
    return "; ".join(f"{p.name}: {p.summary}" for p in PROFILES.values())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m models", description="Pull, verify and inspect GGUF models and LoRA adapters."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{pull,verify,list,convert-lora,lora-to-peft}")

    pull = sub.add_parser(
        "pull", help="download a model and its adapter (default: the reference pair; huggingface_hub, resumable)",
        description=f"Download a profile's base model and LoRA adapter, verify sha256 and headers. Profiles: {_profile_table()}.",
    )
    pull.add_argument("--profile", help=f"which pair (env AGENT_PROFILE, default {DEFAULT_PROFILE}): {', '.join(PROFILES)}")
    pull.add_argument("--model-repo", help="another base model repo (with --model-file); the profile's adapter is then skipped unless given")
    pull.add_argument("--model-file", help="GGUF in --model-repo")
    pull.add_argument("--adapter-repo", help="hub repo of another LoRA GGUF (default: the profile's, or adapter_repo in the config)")
    pull.add_argument("--adapter-file", help="adapter GGUF in that repo")
    pull.add_argument("--local-dir", type=Path, help="put the files here instead of the hub cache")
    pull.add_argument("--revision", help="branch, tag or commit of the model repo")
    pull.add_argument("--sha256", help="expected sha256 of the model file (default: the hub's ETag)")
    pull.add_argument("--adapter-sha256", help="expected sha256 of the adapter file")

    verify = sub.add_parser("verify", help="check a model and adapter before llama.cpp loads them")
    verify.add_argument("--model", help="base model GGUF (default: as the agent would resolve it)")
    verify.add_argument("--adapter", help="LoRA adapter GGUF (default: as the agent would resolve it)")
    verify.add_argument("--no-adapter", action="store_true", help="check the base model alone")
    verify.add_argument("--demo", action="store_true",
                        help="check the demo pair (Gemma 3 270M, or the one AGENT_DEMO names; installed on demand)")
    verify.add_argument("--profile", help="resolve this profile's pulled pair (env AGENT_PROFILE)")

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

    back = sub.add_parser(
        "lora-to-peft", help="turn a llama.cpp LoRA GGUF back into a PEFT adapter folder (needs the train extra)",
        description="The inverse of convert-lora: write a llama.cpp LoRA GGUF made for --base as a PEFT LoRA folder "
                    "(adapter_config.json + adapter_model.safetensors, float32) that PeftModel.from_pretrained loads "
                    "for more training, when the adapter exists only as GGUF (e.g. the shipped demo adapter). "
                    "q/k rows of the llama architecture go back to Hugging Face's rope layout. Files that are not "
                    "a LoRA adapter for --base, and adapters on embeddings or the output head, are refused.",
    )
    back.add_argument("adapter", type=Path, help="LoRA adapter GGUF (e.g. models/demo/smollm2-135m-calendar-lora-f16.gguf)")
    back.add_argument("--base", required=True, type=Path, help="the base model GGUF the adapter was made for")
    back.add_argument("--out", required=True, type=Path,
                      help="PEFT folder to write (created; refused if it already holds an adapter)")
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
            f"  chat template: {template_line(i)}",
            f"  tensors: {i.get('tensor_count')}  vocabulary: {i.get('vocab_size')}",
        ]
    if i.get("note"):
        lines.append(f"  note: {i['note']}")
    return lines


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 2 on anything the agent would refuse, a missing adapter included (unless --no-adapter)."""
    from models.resolve import demo_conflict, resolve_demo

    flags = {"model_path": args.model, "lora_path": args.adapter, "no_adapter": args.no_adapter or None, "profile": args.profile}
    try:
        settings = load_choice(flags)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.demo:
        given = [f for f, v in (("--model", args.model), ("--adapter", args.adapter)) if v]
        if given:
            print(f"error: {demo_conflict(given)}", file=sys.stderr)
            return 2
        resolved = resolve_demo(bool(args.no_adapter), settings.demo)
    else:
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
    elif resolved.error:  # no adapter found: the agent would refuse to start
        print(f"error: {resolved.error}", file=sys.stderr)
        return 2
    else:
        lines.append("adapter: none" + (" (--no-adapter: the demo's base weights)" if args.demo else ""))
    print("\n".join(lines))
    return 0


def _pull_target(args: argparse.Namespace) -> Profile | str:
    """The profile to pull, adjusted by --model-*/--adapter-* flags; or the one-line error."""
    from dataclasses import replace

    try:
        settings = load_choice({"profile": args.profile})
        profile = get_profile(settings.profile)
    except (UnknownProfile, ValueError) as exc:
        return str(exc)
    if bool(args.model_repo) != bool(args.model_file):
        return "--model-repo and --model-file go together"
    if bool(args.adapter_repo) != bool(args.adapter_file):
        return "--adapter-repo and --adapter-file go together"
    if args.model_repo:  # another base: the profile's adapter was made for its own base, not this one
        profile = replace(profile, name="custom", model_repo=args.model_repo, model_file=args.model_file,
                          adapter_repo="", adapter_file="", adapter_kind="gguf", adapter_subdir="",
                          size_text="sizes as the hub reports them")
    adapter = (args.adapter_repo, args.adapter_file) if args.adapter_repo else (settings.adapter_repo, settings.adapter_file)
    if adapter[0] and adapter[1]:
        profile = replace(profile, adapter_repo=adapter[0], adapter_file=adapter[1], adapter_kind="gguf", adapter_subdir="")
    return profile


def cmd_pull(args: argparse.Namespace) -> int:
    from models.pull import pull_profile

    profile = _pull_target(args)
    if isinstance(profile, str):
        print(f"error: {profile}", file=sys.stderr)
        return 2
    adapter = (f"{profile.adapter_repo}/{profile.adapter_subdir}/ (PEFT, converted here)" if profile.adapter_kind == "peft"
               else f"{profile.adapter_repo}/{profile.adapter_file}" if profile.adapter_repo else "no adapter")
    print(f"pulling {profile.name}: {profile.model_repo}/{profile.model_file} and {adapter} ({profile.size_text})",
          file=sys.stderr, flush=True)
    results = pull_profile(
        profile, models_dir(load_choice().data_dir), revision=args.revision, local_dir=args.local_dir,
        model_sha256=args.sha256, adapter_sha256=args.adapter_sha256,
    )
    for r in results:
        if not r.ok:
            line = r.error_line()
            if not profile.confirmed:
                line += f" (profile {profile.name}: its file names are not confirmed against the hub)"
            print(line, file=sys.stderr)
            return 2
    for r in results:
        verified = "sha256 verified" if r.expected_sha256 else ("converted, checked" if r.filename.endswith("/") else "sha256 not announced by the hub")
        print(f"{r.repo_id}/{r.filename}: {r.path} ({verified}: {r.sha256})")
    if profile.name not in (DEFAULT_PROFILE, "custom"):
        print(f"to use it: AGENT_PROFILE={profile.name} python -m agent (or profile = \"{profile.name}\" in config.toml)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Files present, then the profiles and the demo, with the pair the agent would load marked."""
    from models.demo import DEMOS, demo_adapter_path
    from models.pull import list_present

    settings = load_choice()
    resolved = resolve(settings)
    active = {p.absolute() for p in (resolved.model_path, resolved.lora_path) if p is not None and resolved.ok}
    found = list_present([models_dir(settings.data_dir), *args.local_dir])
    if not found:
        print("no GGUF files found (python -m models pull downloads the reference pair)")
    for p in found:
        status = "ok" if p.check.ok else f"refused: {p.check.reason}"
        kind = p.check.info.get("kind", "?")
        mark = "*" if p.path.absolute() in active else " "
        print(f"{mark} {_size(p.size):>9}  {kind:<7}  {status:<10}  {p.path}  [{p.where}]")
    print("profiles (python -m models pull --profile NAME):")
    for profile in PROFILES.values():
        model = find_pulled(profile.model_repo, profile.model_file, models_dir(settings.data_dir))
        adapter = find_profile_adapter(profile, models_dir(settings.data_dir))
        state = "pulled" if model and adapter else ("model only" if model else "not pulled")
        mark = "*" if profile.name == resolved.profile and resolved.model_source == "pulled" and resolved.ok else " "
        print(f"{mark} {profile.name:<14} {state:<11} {profile.summary}")
    print("demos (python -m agent --demo; AGENT_DEMO=NAME for the other):")
    for pair in DEMOS.values():
        base = pair.locate()
        mark = "*" if pair.name == settings.demo else " "
        print(f"{mark} {pair.name:<14} {'installed' if base else 'not installed':<11} {pair.title} + the shipped calendar "
              f"adapter ({base or f'--demo installs it, {pair.download}'}; {demo_adapter_path(pair.name)})")
    if resolved.ok and resolved.model_source == "configured":
        print(f"* configured: {resolved.model_path}" + (f" + {resolved.lora_path}" if resolved.lora_path else ""))
    elif not resolved.ok:
        print("  (* active: nothing; python -m agent would run the demo)" if resolved.nothing_configured
              else f"  (* active: nothing: {resolved.error})")
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


def cmd_lora_to_peft(args: argparse.Namespace) -> int:
    from models.convert_lora import ConversionError
    from models.lora_to_peft import gguf_lora_to_peft

    try:
        result = gguf_lora_to_peft(args.adapter, args.base, args.out)
    except ConversionError as exc:
        print(f"error: {args.adapter}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: lora-to-peft needs the train extra (pip install -e '.[train]'): {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"error: {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(
        f"{result.path}: PEFT LoRA, {result.tensor_pairs} pairs ({', '.join(result.targets)}), rank "
        f"{'/'.join(map(str, result.ranks))}, alpha {result.alpha:g}, {result.architecture}, "
        f"{'/'.join(result.source_types)} -> float32"
        + (", q/k rows put back into Hugging Face's rope layout" if result.unpermuted else "")
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "verify":
        return cmd_verify(args)
    if args.command == "pull":
        return cmd_pull(args)
    if args.command == "list":
        return cmd_list(args)
    if args.command == "lora-to-peft":
        return cmd_lora_to_peft(args)
    return cmd_convert_lora(args)


if __name__ == "__main__":
    sys.exit(main())
