"""``flashtutor completion SHELL``: a completion script generated from the
argparse parser itself, so it never drifts from the commands.

bash and zsh come from shtab; shtab has no fish backend, so fish's script is
generated here from the same parser (sub-commands, their options and help).
"""

from __future__ import annotations

import argparse

from tutor.cli import EXIT_OK

SHELLS = ("bash", "zsh", "fish")


def register(subparsers: argparse._SubParsersAction) -> None:
    completion = subparsers.add_parser(
        "completion", help="print a shell completion script (bash, zsh, fish)",
        description="Print a completion script. bash: eval \"$(flashtutor completion bash)\" in ~/.bashrc; "
                    "zsh: flashtutor completion zsh > ~/.zfunc/_flashtutor; "
                    "fish: flashtutor completion fish > ~/.config/fish/completions/flashtutor.fish")
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(func=run_completion_command)


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _help_of(parser: argparse.ArgumentParser, name: str) -> str:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if choice.dest == name:
                    return choice.help or ""
    return ""


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish_script(parser: argparse.ArgumentParser, prog: str = "flashtutor") -> str:
    lines = [f"# fish completion for {prog}, generated from its argparse parser", f"complete -c {prog} -f"]
    commands = _subcommands(parser)
    for name, sub in commands.items():
        lines.append(f"complete -c {prog} -n __fish_use_subcommand -a {name} -d {_quote(_help_of(parser, name))}")
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            condition = f"-n '__fish_seen_subcommand_from {name}'"
            longs = [o[2:] for o in action.option_strings if o.startswith("--")]
            shorts = [o[1:] for o in action.option_strings if not o.startswith("--")]
            described = f"-d {_quote(action.help or '')}" if action.help else ""
            if longs or shorts:
                flags = " ".join([f"-l {o}" for o in longs] + [f"-s {o}" for o in shorts])
                takes = "-r" if action.nargs != 0 else ""
                choices = f"-a {_quote(' '.join(map(str, action.choices)))}" if action.choices else ""
                lines.append(" ".join(p for p in (f"complete -c {prog}", condition, flags, takes, choices, described) if p))
            elif action.choices:
                lines.append(f"complete -c {prog} {condition} -a {_quote(' '.join(map(str, action.choices)))}")
    return "\n".join(lines) + "\n"


def completion_script(shell: str) -> str:
    from tutor.cli import build_parser

    parser = build_parser()
    if shell == "fish":
        return fish_script(parser)
    import shtab

    return shtab.complete(parser, shell=shell)


def run_completion_command(args: argparse.Namespace) -> int:
    print(completion_script(args.shell), end="")
    return EXIT_OK
