"""``flashtutor completion SHELL``: a completion script generated from the
argparse parser itself, so it never drifts from the commands.

bash and zsh come from shtab; shtab has no fish backend, so fish's script is
generated here from the same parser (sub-commands, their options and help).
"""

from __future__ import annotations

import argparse

from tutor.cli import EXIT_OK

SHELLS = ("bash", "zsh", "fish")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
            completes = getattr(action, "complete", None)
            words = " ".join(_drill_words()) if completes in (DRILLS, TARGETS) else ""
            if longs or shorts:
                flags = " ".join([f"-l {o}" for o in longs] + [f"-s {o}" for o in shorts])
                takes = "-r" if action.nargs != 0 else ""
                listed = " ".join(map(str, action.choices)) if action.choices else words
                choices = f"-a {_quote(listed)}" if listed else ""
                parts = (f"complete -c {prog}", condition, flags, takes, choices, described)
                lines.append(" ".join(p for p in parts if p))
            elif action.choices:
                lines.append(f"complete -c {prog} {condition} -a {_quote(' '.join(map(str, action.choices)))}")
            elif words:  # a drill id or name; check's target also a file (-F)
                files = " -F" if completes is TARGETS else ""
                lines.append(f"complete -c {prog} {condition}{files} -a {_quote(words)} {described}".rstrip())
    return "\n".join(lines) + "\n"


# What a drill argument completes to: the drill ids and names; a check target adds files.
DRILL_ARGS = ("drill",)  # `hint 01`, `reset 01`, `watch 01`, `launch 01`, `check --drill 01`
TARGET_ARGS = ("target",)  # `check 01` or `check path/to/file.py`
DRILLS = {"bash": "_flashtutor_drills", "zsh": "_flashtutor_drills"}
TARGETS = {"bash": "_flashtutor_targets", "zsh": "_flashtutor_targets"}


def _drill_words() -> list[str]:
    from tutor.catalog import all_drills

    return [word for drill in all_drills() for word in (drill.id, drill.slug)]


def _preamble(words: list[str]) -> dict[str, str]:
    listed = " ".join(words)
    return {
        "bash": (f'_flashtutor_drills() {{ compgen -W "{listed}" -- "$1"; }}\n'
                 f'_flashtutor_targets() {{ compgen -W "{listed}" -- "$1"; compgen -f -- "$1"; }}\n'),
        "zsh": (f"_flashtutor_drills() {{ _values 'drill' {listed} }}\n"
                f"_flashtutor_targets() {{ _alternative 'drills:drill:({listed})' 'files:file:_files' }}\n"),
    }


def _mark_drill_arguments(parser: argparse.ArgumentParser) -> None:
    """Give every drill argument (and check's target) its completion: the drill ids and
    names (shtab reads ``action.complete``; fish_script too)."""
    for sub in _subcommands(parser).values():
        for action in sub._actions:
            if action.dest in TARGET_ARGS and not action.option_strings:
                action.complete = TARGETS  # type: ignore[attr-defined]
            elif action.dest in DRILL_ARGS:
                action.complete = DRILLS  # type: ignore[attr-defined]


def completion_script(shell: str) -> str:
    from tutor.cli import build_parser

    parser = build_parser()
    _mark_drill_arguments(parser)
    if shell == "fish":
        return fish_script(parser)
    import shtab

    return shtab.complete(parser, shell=shell, preamble=_preamble(_drill_words()).get(shell, ""))


def run_completion_command(args: argparse.Namespace) -> int:
    print(completion_script(args.shell), end="")
    return EXIT_OK
