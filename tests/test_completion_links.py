"""Shell completion generated from the parser, OSC 8 links and the editor command."""

from __future__ import annotations

import io
import shutil
import subprocess

import pytest

from tutor.cli.completion import completion_script
from tutor.links import editor_command, file_link, supports_hyperlinks


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bash_completion_loads_and_completes_subcommands(tmp_path) -> None:
    script = tmp_path / "flashtutor.bash"
    script.write_text(completion_script("bash"))
    probe = (f"source {script}\n"
             "COMP_WORDS=(flashtutor d); COMP_CWORD=1; COMP_LINE='flashtutor d'; COMP_POINT=${#COMP_LINE}\n"
             "_shtab_flashtutor flashtutor d flashtutor; printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "doctor" in done.stdout.split()


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_completion_parses(tmp_path) -> None:
    script = tmp_path / "_flashtutor"
    script.write_text(completion_script("zsh"))
    assert subprocess.run(["zsh", "-n", str(script)], timeout=30).returncode == 0


def test_fish_completion_lists_every_command_and_option() -> None:
    script = completion_script("fish")
    from tutor.cli import COMMAND_MODULES

    assert "-a doctor" in script and "-a check" in script
    assert "__fish_seen_subcommand_from check' -l json" in script
    assert "completion" in COMMAND_MODULES


def test_links_are_plain_text_off_a_terminal_or_on_an_unknown_one(tmp_path) -> None:
    path = tmp_path / "01_causal_mask.py"
    assert file_link(path, 57, stream=io.StringIO(), env={"TERM_PROGRAM": "WezTerm"}) == f"{path}:57"
    assert file_link(path, 57, stream=_Tty(), env={"TERM": "xterm"}) == f"{path}:57"
    assert not supports_hyperlinks(_Tty(), {"TERM": "dumb", "TERM_PROGRAM": "WezTerm"})


def test_links_on_a_supporting_terminal_are_osc8(tmp_path) -> None:
    path = tmp_path / "a b.py"
    linked = file_link(path, 3, stream=_Tty(), env={"TERM_PROGRAM": "WezTerm"})
    assert linked == f"\033]8;;file://{str(path.resolve()).replace(' ', '%20')}\033\\{path}:3\033]8;;\033\\"
    assert file_link(path, stream=io.StringIO(), env={"FORCE_HYPERLINK": "1"}).startswith("\033]8;;file://")


@pytest.mark.parametrize(("editor", "expected"), [
    ("vim", ["vim", "+12", "f.py"]),
    ("/usr/bin/nano -w", ["/usr/bin/nano", "-w", "+12", "f.py"]),
    ("code --wait", ["code", "--wait", "-g", "f.py:12"]),
    ("gedit", ["gedit", "f.py"]),
    ("myed --line {line} {file}", ["myed", "--line", "12", "f.py"]),
])
def test_editor_command_puts_the_line_where_the_editor_takes_it(editor, expected) -> None:
    assert editor_command(editor, "f.py", 12) == expected


def test_check_links_the_drill_file_and_the_error_line_when_forced(tmp_path) -> None:
    """The CLI's `where` line is an OSC 8 link (FORCE_HYPERLINK=1 stands in for a terminal that renders them)."""
    import os
    import sys
    from pathlib import Path

    broken = tmp_path / "drills" / "01_causal_mask.py"
    broken.parent.mkdir()
    broken.write_text("import triton\n\ndef attention(q, k, v:\n    pass\n", encoding="utf-8")
    repo = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "FORCE_HYPERLINK": "1", "FLASHTUTOR_WORKSPACE": str(tmp_path), "PYTHONPATH": repo}
    done = subprocess.run([sys.executable, "-m", "tutor", "check", str(broken), "--drill", "01", "--no-timing"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    uri = f"file://{broken.resolve()}"
    assert f"\033]8;;{uri}\033\\{broken}:3\033]8;;\033\\" in done.stdout
    plain = subprocess.run([sys.executable, "-m", "tutor", "check", str(broken), "--drill", "01", "--no-timing"],
                           capture_output=True, text=True, timeout=300,
                           env={**env, "FORCE_HYPERLINK": "0"}, cwd=tmp_path)
    assert "\033]8;;" not in plain.stdout and f"{broken}:3" in plain.stdout


def _bash_complete(tmp_path, *words: str) -> list[str]:
    script = tmp_path / "flashtutor.bash"
    script.write_text(completion_script("bash"))
    line = " ".join(("flashtutor", *words))
    array = " ".join(f"'{w}'" for w in ("flashtutor", *words))
    probe = (f"source {script}\ncd {tmp_path}\n"
             f"COMP_WORDS=({array}); COMP_CWORD={len(words)}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n"
             f"_shtab_flashtutor flashtutor '{words[-1]}' flashtutor; printf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_bash_completes_drill_ids_and_check_completes_files_too(tmp_path) -> None:
    """Issue 23: completion offered no drill ids or files."""
    (tmp_path / "0mine.py").write_text("# a copy of a drill\n")
    assert {"01", "02", "06"} <= set(_bash_complete(tmp_path, "hint", "0"))
    assert "0mine.py" not in _bash_complete(tmp_path, "hint", "0")
    checked = set(_bash_complete(tmp_path, "check", "0"))
    assert {"01", "06", "0mine.py"} <= checked
    assert "causal_mask" in _bash_complete(tmp_path, "reset", "ca")


def test_fish_and_zsh_complete_drill_ids() -> None:
    fish = completion_script("fish")
    assert "__fish_seen_subcommand_from hint' -a '01 causal_mask" in fish
    assert "__fish_seen_subcommand_from check' -F -a '01 causal_mask" in fish
    assert "_flashtutor_targets() { _alternative 'drills:drill:(01 causal_mask" in completion_script("zsh")
