"""The question sets, the checking of answers and the slip fingerprints."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tutor.catalog import get_drill
from tutor.quiz import (
    STATED_BUDGETS,
    GpuBudget,
    budget_from_properties,
    build_questions,
    check_answer,
    detect_gpu,
)
from tutor.quiz.questions import DTYPE_BYTES

SEEDS = [None, 0, 1, 2, 3, 7, 42, 2024]


def by_kind(questions):
    kinds: dict[str, list] = {}
    for question in questions:
        kinds.setdefault(question.kind, []).append(question)
    return kinds


def expected_answer(question) -> float | str:
    """The answer recomputed from the question's parameters, written out here, not via formulas.py."""
    p = question.parameters
    if question.is_choice:
        return question.answer
    n, d, b = p.get("N"), p.get("d"), p.get("b")
    if question.kind == "naive-bytes":
        return (3 * n * d + n * n + n * n + n * n + n * n + n * d) * b
    if question.kind == "fused-bytes":
        return (n * d + n * d + n * d + n * d) * b
    if question.kind == "traffic-ratio":
        return (4 * n * d + 4 * n * n) / (4 * n * d)
    if question.kind == "forward-flops":
        return 2 * (2 * n * n * d)
    if question.kind == "naive-intensity":
        return 4 * n * n * d / ((4 * n * d + 4 * n * n) * b)
    if question.kind == "intensity-limit":
        return d / b
    if question.kind == "l2-fit":
        return math.floor(math.sqrt(p["l2_bytes"] / b) + 1e-9)
    if question.kind == "hbm-fit":
        return math.floor(math.sqrt(p["hbm_bytes"] / (p["batch"] * p["heads"] * b)) + 1e-9)
    if question.kind == "causal-blocks":
        t = math.ceil(n / p["block"])
        return sum(m + 1 for m in range(t)) / t**2
    if question.kind == "backward-flops":  # recompute S, then dV, dP, dQ, dK: 5 matmuls against 2
        return (5 * 2 * n * n * d) / (2 * 2 * n * n * d)
    if question.kind == "backward-bytes":  # Q, K, V, O, dO in the dtype, the fp32 log-sum-exp
        return 5 * n * d * b + n * 4
    if question.kind == "decode-bytes":
        return (p["kv_heads"] * d + p["kv_heads"] * d) * b
    if question.kind == "decode-intensity":
        flops = p["heads"] * (2 * d + 2 * d)
        return flops / (2 * p["kv_heads"] * d * b)
    if question.kind == "kv-cache":
        return p["layers"] * 2 * p["kv_heads"] * d * b
    if question.kind == "gqa-saving":
        return (2 * p["heads"]) / (2 * p["kv_heads"])
    if question.kind == "window-blocks":
        return window_pairs(n, p["window"], p["block"])
    if question.kind == "tiled-traffic":  # Q in and O out once; K and V once per query block of M/(4db) rows
        rows = p["sram_bytes"] // (4 * d * b)
        return (n * d + n * d) * b + math.ceil(n / rows) * (n * d + n * d) * b
    if question.kind == "sparse-flops":  # whole tiles on and below the diagonal, two matmuls each
        t = math.ceil(n / p["block"])
        return sum(m + 1 for m in range(t)) * 2 * (2 * p["block"] * p["block"] * d)
    if question.kind == "packed-step-bytes":  # every sequence's K and V, once per K/V head
        return p["batch"] * p["context"] * (p["kv_heads"] * d + p["kv_heads"] * d) * b
    if question.kind == "unpacked-step-bytes":  # once per query head
        return p["batch"] * p["context"] * (p["heads"] * d + p["heads"] * d) * b
    raise AssertionError(f"no independent answer for {question.kind}")


def window_pairs(n: int, window: int, block: int) -> float:
    """The share of (query block, key block) pairs holding some row r and key c with
    r - window < c <= r: rows r0..r1 see keys r0 - window + 1 .. r1."""
    starts = range(0, n, block)
    visited = 0
    for r0 in starts:
        r1 = min(r0 + block, n) - 1
        visited += sum(1 for c0 in starts if c0 <= r1 and min(c0 + block, n) - 1 >= r0 - window + 1)
    return visited / len(starts) ** 2


@pytest.mark.parametrize("seed", SEEDS)
def test_every_answer_matches_an_independent_computation(seed):
    for question in build_questions(seed=seed):
        assert question.answer == pytest.approx(expected_answer(question), rel=1e-12), question.id
        if "b" in question.parameters:
            assert question.parameters["b"] == DTYPE_BYTES[question.parameters["dtype"]]


def test_the_default_set_holds_the_headline_cases():
    questions = {q.id: q for q in build_questions()}
    for n in (1024, 4096, 16384):
        assert f"naive-bytes:N={n},d=128,fp16" in questions
        assert f"fused-bytes:N={n},d=128,fp16" in questions
    assert questions["naive-bytes:N=16384,d=128,fp16"].answer == 2_164_260_864
    assert questions["traffic-ratio:N=16384,d=128,fp16"].answer == 129
    assert questions["intensity-limit:d=128,fp16"].answer == 64
    assert questions["forward-flops:N=16384,d=128"].answer == 137_438_953_472
    assert questions["l2-fit:H100,l2=50000000,fp16"].answer == 5000
    assert questions["causal-blocks:N=1000,block=64"].answer == 17 / 32
    assert {"why-fusing", "causal-effect"} <= questions.keys()


def test_seeds_draw_other_parameters_reproducibly():
    default = build_questions()
    sets = {seed: build_questions(seed=seed) for seed in range(8)}
    assert build_questions(seed=3) == sets[3]
    assert all(len(s) == len(default) for s in sets.values())
    assert [q.kind for q in sets[0]] == [q.kind for q in default]
    distinct_ratios = {s[6].answer for s in sets.values()} | {default[6].answer}
    assert len(distinct_ratios) > 4, "the seeds should not keep asking for 129"
    assert len({q.id for s in sets.values() for q in s}) > 5 * len(default)


def test_ids_are_unique_within_a_set():
    for seed in SEEDS:
        ids = [q.id for q in build_questions(seed=seed)]
        assert len(ids) == len(set(ids))


@pytest.mark.parametrize("seed", SEEDS)
def test_the_exact_answer_and_its_own_display_are_right(seed):
    for question in build_questions(seed=seed):
        if question.is_choice:
            assert check_answer(question, question.answer).status == "right"
            assert check_answer(question, f"({question.answer.upper()})").status == "right"
            continue
        assert check_answer(question, repr(question.answer)).status == "right", question.id
        exact_part = question.answer_text.split(" (")[0]
        assert check_answer(question, exact_part).status == "right", (question.id, exact_part)


@pytest.mark.parametrize("seed", SEEDS)
def test_typing_a_slips_number_names_that_slip(seed):
    for question in build_questions(seed=seed):
        for slip in question.slips:
            feedback = check_answer(question, f"{slip.value:.15e}")  # every digit: no rounding to the answer
            assert feedback.status == "wrong", (question.id, slip.code)
            assert slip.code in feedback.slip_codes, (question.id, slip.code, feedback.slip_codes)
            assert slip.message in feedback.slip


def test_headline_slips():
    questions = {q.id: q for q in build_questions()}
    naive = questions["naive-bytes:N=16384,d=128,fp16"]
    # forgetting O's write gives 2,160,066,560, which rounds to 2.16 GB as well: asked for more digits
    assert check_answer(naive, "2.16 GB").status == "invalid"
    assert check_answer(naive, "2.1643 GB").status == "right"
    assert check_answer(naive, "2,164,260,864 bytes").status == "right"
    assert check_answer(naive, "2.02 GiB").status == "right"  # 0.22 % off, and no slip rounds to 2.02 GiB
    # 2.0 GiB: 4·N²·2 bytes is 2 GiB exactly, the forgot-qkvo slip (0.78 % off): too coarse, never accepted
    assert check_answer(naive, "2.0 GiB").status == "invalid"
    assert check_answer(naive, "2,147,483,648 bytes").slip_codes == ("forgot-qkvo",)
    assert check_answer(naive, "2,160,066,560 bytes").slip_codes == ("forgot-o-write",)
    elements = check_answer(naive, "1,082,130,432")
    assert elements.status == "wrong" and "forgot-dtype-bytes" in elements.slip_codes
    assert elements.relative_error == pytest.approx(-0.5)
    two_passes = check_answer(naive, f"{(4 * 16384 * 128 + 2 * 16384**2) * 2} bytes")
    assert {"counted-s-not-p", "read-write-once"} <= set(two_passes.slip_codes)
    assert check_answer(naive, "2.32 GB").slip_codes == ("decimal-binary-units",)

    ratio = questions["traffic-ratio:N=16384,d=128,fp16"]
    assert check_answer(ratio, "129x").status == "right"
    dropped = check_answer(ratio, "128")
    assert dropped.status == "wrong" and dropped.slip_codes == ("dropped-the-one",)

    intensity = questions["naive-intensity:N=16384,d=128,fp16"]
    assert check_answer(intensity, "63.5").status == "right"
    assert check_answer(intensity, "64").slip_codes == ("gave-the-limit",)

    l2 = questions["l2-fit:H100,l2=50000000,fp16"]
    assert check_answer(l2, "5.00k").status == "right"  # read as 5,000, not 5,120
    # 5,000 exactly (k = 1,000): the answer itself, though 5,120 (a 50 MiB misreading) is 5k to one digit too
    assert check_answer(l2, "5k").status == "right"
    assert check_answer(l2, "5120").slip_codes == ("decimal-binary-units",)

    causal = questions["causal-blocks:N=1000,block=64"]
    assert check_answer(causal, "53.1%").status == "right"
    assert check_answer(causal, "0.5").slip_codes == ("exactly-half",)


def test_wrong_answers_off_no_slip_say_whether_they_are_within_10x():
    naive = build_questions()[0]
    close = check_answer(naive, f"{naive.answer * 3}")
    far = check_answer(naive, f"{naive.answer * 30}")
    assert close.status == far.status == "wrong"
    assert close.slip is None and "within 10x" in close.message
    assert far.slip is None and "more than 10x" in far.message
    assert close.relative_error == pytest.approx(2.0)


@pytest.mark.parametrize("text", ["", "abc", "1e999", "-2 GB", "2,16", "1 2"])
def test_garbage_is_invalid_for_every_numeric_question(text):
    for question in build_questions(seed=5):
        if question.is_choice:
            continue
        feedback = check_answer(question, text)
        assert feedback.status == "invalid" and not feedback.counts
        assert feedback.message and feedback.relative_error is None and not feedback.explanation


def test_choice_questions():
    for seed in SEEDS:
        for question in build_questions(seed=seed):
            if not question.is_choice:
                continue
            assert sorted(o.key for o in question.options) == ["a", "b", "c", "d"]
            for option in question.options:
                feedback = check_answer(question, option.key)
                if option.key == question.answer:
                    assert feedback.status == "right"
                else:
                    assert feedback.status == "wrong" and feedback.slip_codes == (option.slip,)
                    assert feedback.slip == option.why and feedback.explanation
            for garbage in ("", "e", "bb", "2"):
                assert check_answer(question, garbage).status == "invalid"


def test_shuffled_options_keep_the_same_right_text():
    def right_text(questions, kind):
        question = next(q for q in questions if q.kind == kind)
        return next(o.text for o in question.options if o.key == question.answer)

    default = build_questions()
    for seed in range(6):
        for kind in ("why-fusing", "causal-effect"):
            assert right_text(build_questions(seed=seed), kind) == right_text(default, kind)


def test_every_slip_code_opens_a_hint_and_every_hint_code_is_a_slip():
    emitted = set()
    for seed in [None, *range(30)]:
        for question in build_questions(seed=seed):
            emitted |= {s.code for s in question.slips} | {o.slip for o in question.options if o.slip}
    hint_codes = {code for hint in get_drill("03").hints for code in hint.unlock_codes}
    assert emitted - hint_codes == set(), "slips no hint opens on"
    assert hint_codes - emitted == set(), "hints waiting for a code the quiz never reports"


def test_drill_03_hints_go_from_gentle_to_nearly_the_answer():
    hints = get_drill("03").hints
    assert len(hints) >= 3
    gated = [h for h in hints if not h.open_from_start]
    assert len(gated) >= 3
    assert all(h.unlock_codes or h.after_attempts for h in gated)
    attempts = [h.after_attempts for h in gated if h.after_attempts is not None]
    assert attempts == sorted(attempts)
    assert hints[-1].title == "Nearly the answer"


# --- budgets ---------------------------------------------------------------------------------


def fake_properties(name="NVIDIA H200", l2=60 * 2**20, memory=143_771 * 2**20):
    """Shaped like torch.cuda.get_device_properties(0): only the fields the quiz reads."""
    return SimpleNamespace(name=name, L2_cache_size=l2, total_memory=memory, major=9, minor=0)


def test_budget_questions_use_a_present_gpu_and_name_it():
    gpu = budget_from_properties(fake_properties())
    assert gpu == GpuBudget("NVIDIA H200", 60 * 2**20, 143_771 * 2**20, detected=True)
    questions = by_kind(build_questions(gpu=gpu))
    l2, hbm = questions["l2-fit"][0], questions["hbm-fit"][0]
    assert l2.answer == math.isqrt(60 * 2**20 // 2) == 5608
    assert hbm.answer == math.isqrt(143_771 * 2**20 // (8 * 32 * 2))
    for question in (l2, hbm):
        assert "the GPU this quiz runs on (NVIDIA H200)" in question.text
        assert question.parameters["gpu"] == "NVIDIA H200" and question.parameters["budget_detected"]
    assert "62,914,560 bytes" in l2.text  # the exact size, not a rounded one
    # a seeded set still uses the GPU for its budgets
    seeded = by_kind(build_questions(seed=9, gpu=gpu))
    assert seeded["l2-fit"][0].parameters["l2_bytes"] == 60 * 2**20


def test_without_a_gpu_the_budgets_are_stated_ones():
    questions = by_kind(build_questions(gpu=None))
    l2, hbm = questions["l2-fit"][0], questions["hbm-fit"][0]
    assert l2.parameters["l2_bytes"] == STATED_BUDGETS["H100"].l2_bytes == 50_000_000
    assert hbm.parameters["hbm_bytes"] == STATED_BUDGETS["H200"].hbm_bytes == 141 * 10**9
    assert "a stated H100 budget" in l2.text and "50,000,000 bytes" in l2.text
    assert not l2.parameters["budget_detected"]


@pytest.mark.parametrize("props", [
    fake_properties(l2=0), fake_properties(memory=0), SimpleNamespace(name="old driver", total_memory=10**9),
])
def test_properties_without_a_size_give_no_budget(props):
    assert budget_from_properties(props) is None


def test_detect_gpu_reports_the_machines_gpu_or_none():
    torch = pytest.importorskip("torch")
    budget = detect_gpu()
    if not torch.cuda.is_available():
        assert budget is None
        return
    props = torch.cuda.get_device_properties(0)
    assert budget == GpuBudget(props.name, props.L2_cache_size, props.total_memory, detected=True)
    l2 = by_kind(build_questions(gpu=budget))["l2-fit"][0]
    assert props.name in l2.text and l2.answer == math.isqrt(props.L2_cache_size // 2)


def test_the_decode_questions_models_share_their_kv_heads():
    """Their words say GQA: every model drawn has fewer K/V heads than query heads, evenly grouped."""
    for seed in SEEDS:
        for question in build_questions(seed=seed):
            if question.kind in ("decode-bytes", "decode-intensity", "kv-cache", "gqa-saving"):
                heads, kv_heads = question.parameters["heads"], question.parameters["kv_heads"]
                assert kv_heads < heads and heads % kv_heads == 0, question.id


def test_the_kinds_in_code_are_the_kinds_the_quiz_file_words() -> None:
    """Every numeric generator and choice named in tutor.quiz.model has its table in the
    quiz file, the file has no table for a kind no generator draws, and a whole set
    (headline or seeded) asks each kind."""
    from tutor.quiz.model import CHOICE_KINDS, NUMERIC_KINDS, load_texts

    texts = load_texts()
    assert sorted(texts.kinds) == sorted(NUMERIC_KINDS)
    assert sorted(texts.choices) == sorted(CHOICE_KINDS)
    for seed in (None, 3):
        asked = {q.kind for q in build_questions(seed=seed)}
        assert asked == set(NUMERIC_KINDS) | set(CHOICE_KINDS)
