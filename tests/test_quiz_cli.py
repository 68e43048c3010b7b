"""`flashtutor quiz` through the real command line, answers piped into stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tutor.quiz import build_questions, detect_gpu
from tutor.state.progress import ProgressStore
from tutor.state.workspace import init_workspace

ROOT = Path(__file__).resolve().parents[1]


def flashtutor(*args: str, stdin: str = "", cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI, never in the clone itself: by default in an empty temporary folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("FLASHTUTOR_WORKSPACE", None)
    cwd = cwd or Path(tempfile.mkdtemp(prefix="flashtutor-quiz-cli-"))
    return subprocess.run([sys.executable, "-m", "tutor", *args], input=stdin, capture_output=True,
                          text=True, timeout=120, env=env, cwd=cwd)


# Answers a student might type for the default set (stated budgets), in order.
SCRIPT = [
    "9.00 MiB",             # naive 1k: right
    "abc",                  # garbage: asked again
    "",                     # empty: asked again
    "138 MB",               # naive 4k: right
    "1.08e9",               # naive 16k: wrong, the elements not the bytes; the answer is not shown yet
    "1.08e9",               # the second try: wrong again, now the answer is shown
    "1.00 MiB",             # fused 1k
    "4,194,304 bytes",      # fused 4k
    "16.8 MB",              # fused 16k
    "129x",                 # ratio
    "1.37e11",              # FLOPs
    "63.5",                 # intensity
    "64",                   # limit
    "5000",                 # L2
    "16,594",               # HBM
    "0.53",                 # causal blocks
    "b",                    # why fusing
    "1.08 GB",              # a tiled kernel's traffic without a cache
    "d",                    # causal effect: wrong (one more try)
    "d",                    # wrong again: the answer is shown
    "2.5x",                 # backward FLOPs over forward (FlashAttention-2's Algorithm 2)
    "a",                    # why drill 04 runs seven matmuls
    "21.04 MB",             # backward reads
    "b",                    # what the log-sum-exp saves
    "4096 bytes",           # decode bytes per cached token
    "4",                    # decode intensity
    "c",                    # why decoding is memory-bound
    "128 KiB",              # KV cache per token
    "4x",                   # what GQA saves
    "0.2324",               # sliding-window blocks
    "1.745e10",             # a causal BlockMask's matmul FLOPs (drill 09)
    "256 MiB",              # a paged decode step's K/V bytes, heads packed (drill 07)
    "1.00 GiB",             # the same step, one program per query head
]


def test_a_scripted_sitting_then_a_resumed_one(tmp_path):
    tmp_path = init_workspace(tmp_path / "ws").workspace  # --workspace names a workspace
    questions = build_questions()
    first = flashtutor("quiz", "--no-gpu", "--workspace", str(tmp_path), stdin="\n".join(SCRIPT) + "\n")
    out = first.stdout
    assert first.returncode == 1, first.stderr  # two wrong: not solved
    assert "Traceback" not in first.stderr
    assert "stated budgets (--no-gpu)" in out
    assert out.count("Try again.") == 2 and "'abc' is not a number" in out and "Type an answer" in out
    assert "Right. 9.00 MiB = 9,437,184 bytes" in out
    assert "Not yet: 1,080,000,000 bytes" in out and "One more try before the answer is shown." in out
    first_try = out[out.index("Not yet: 1,080,000,000 bytes"):out.index("Wrong: 1,080,000,000 bytes")]
    assert "2,164,260,864" not in first_try and "Why:" not in first_try  # the answer is not given away
    assert "Not (d). One more try" in out
    assert "Wrong: 1,080,000,000 bytes" in out and "50.1% below the answer" in out
    assert "Likely slip: Your number counts elements, not bytes" in out
    assert "Why: Q, K and V are read once" in out
    assert out.count("Why:") == len(questions)
    assert "Wrong: the answer is (b)." in out
    assert f"Score: {len(questions) - 2}/{len(questions)} right; your answers are saved." in out

    answers = ProgressStore(tmp_path).quiz_answers()
    assert set(answers) == {q.id for q in questions}
    wrong = {qid for qid, a in answers.items() if not a["correct"]}
    assert wrong == {"naive-bytes:N=16384,d=128,fp16", "causal-effect"}
    assert answers["traffic-ratio:N=16384,d=128,fp16"]["answer"] == "129x"
    assert ProgressStore(tmp_path).status("03") == "failing"  # the quiz was finished with wrong answers
    assert ProgressStore(tmp_path).drill("03").attempts == len(questions) + 2  # what list and the app show

    # The next sitting asks only the two answered wrong, then says the quiz is done.
    second = flashtutor("quiz", "--no-gpu", "--workspace", str(tmp_path), stdin="2.1643 GB\nb\n")
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"{len(questions) - 2} answered right in an earlier sitting are skipped" in second.stdout
    assert second.stdout.count("Why:") == 2
    assert f"Score: {len(questions)}/{len(questions)} right ({len(questions) - 2} of them" in second.stdout
    answers = ProgressStore(tmp_path).quiz_answers()
    assert all(a["correct"] for a in answers.values())
    assert answers["naive-bytes:N=16384,d=128,fp16"]["attempts"] == 3
    assert ProgressStore(tmp_path).status("03") == "passed"


def test_end_of_input_stops_the_quiz_and_keeps_what_was_answered(tmp_path):
    tmp_path = init_workspace(tmp_path / "ws").workspace  # --workspace names a workspace
    result = flashtutor("quiz", "--no-gpu", "--seed", "4", "--workspace", str(tmp_path), stdin="1e999\n42\n")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "too large to be an answer" in result.stdout
    assert "Stopped before the end; answers so far are saved." in result.stdout
    first = build_questions(seed=4)[0]
    assert list(ProgressStore(tmp_path).quiz_answers()) == [first.id]
    assert ProgressStore(tmp_path).status("03") == "in-progress"  # not failing: the quiz is not finished


def test_list_json_reveal_matches_the_engine():
    result = flashtutor("quiz", "--list", "--json", "--reveal")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    gpu = detect_gpu()  # None on a machine without a GPU; the GPU's budget on one
    assert listing["gpu"] == (gpu.to_dict() if gpu else None)
    expected = [q.to_dict(reveal=True) for q in build_questions(gpu=gpu)]
    assert listing["questions"] == json.loads(json.dumps(expected, ensure_ascii=False))
    ratio = next(q for q in listing["questions"] if q["id"] == "traffic-ratio:N=16384,d=128,fp16")
    assert ratio["answer"] == 129 and ratio["parameters"] == {"N": 16384, "d": 128, "dtype": "fp16", "b": 2}


def test_list_without_reveal_hides_the_answers_and_a_seed_changes_the_numbers():
    hidden = json.loads(flashtutor("quiz", "--list", "--json", "--no-gpu", "--seed", "5").stdout)
    assert hidden["seed"] == 5 and hidden["gpu"] is None
    assert [q["id"] for q in hidden["questions"]] == [q.id for q in build_questions(seed=5)]
    for question in hidden["questions"]:
        assert not {"answer", "answer_text", "explanation", "slips"} & question.keys()
    assert hidden["questions"][0]["id"] != build_questions()[0].id


@pytest.mark.parametrize("args", [["--json"], ["--reveal"]])
def test_json_and_reveal_need_list(args):
    result = flashtutor("quiz", "--no-gpu", *args)
    assert result.returncode == 2 and "go with --list" in result.stderr


def test_quiz_finds_its_workspace_as_every_command_does(tmp_path: Path) -> None:
    """quiz resolved --workspace by hand: a folder inside a workspace got a progress file
    of its own, and a folder with no drills one too.  Now it uses require_workspace."""
    workspace = init_workspace(tmp_path / "ws").workspace
    inside = workspace / "drills"
    first = build_questions()[0]
    run = flashtutor("quiz", "--no-gpu", "--workspace", str(inside), stdin=f"{int(first.answer)} bytes\n")
    assert "Traceback" not in run.stderr and "answers so far are saved" in run.stdout
    assert not (inside / ".flashtutor").exists()
    assert ProgressStore(workspace).quiz_answers()[first.id]["correct"]

    empty = tmp_path / "no-drills"
    empty.mkdir()
    run = flashtutor("quiz", "--no-gpu", "--workspace", str(empty), stdin=f"{int(first.answer)} bytes\n")
    assert "Traceback" not in run.stderr and "No workspace found: progress is not being saved" in run.stdout
    assert list(empty.iterdir()) == []  # nothing written where no workspace is
