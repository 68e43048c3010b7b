"""The questions of drill 03, drawn with parameters.

Each *kind* of question is a generator: given its parameters (N, d, dtype,
a memory budget, ...) it computes the answer and the number each likely slip
would give with :mod:`tutor.quiz.formulas`, and takes its words from
``drills/03_flash_math.quiz.toml`` (the model, :class:`Question` and the parsed
file, is :mod:`tutor.quiz.model`).  :func:`build_questions` makes a whole set:

* ``seed=None``: the headline cases (N = 1k/4k/16k at d = 128 in fp16, the
  129x ratio, the d/2 limit, ...);
* ``seed=S``: the same kinds with other parameters drawn from ``S``, so a
  student who memorised 129 still has to think.

A question's id names its kind and parameters (``naive-bytes:N=16384,d=128,fp16``),
so an answer stored in progress belongs to exactly one question.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from tutor.quiz import formulas as f
from tutor.quiz.gpu import STATED_BUDGETS, GpuBudget

# The model is re-exported here: ``from tutor.quiz.questions import Question, DRILL_ID`` keeps working.
from tutor.quiz.model import (
    CHOICE_KINDS,
    DRILL_ID,
    NUMERIC_KINDS,
    QUIZ_FILE,
    ChoiceKind,
    FitLimit,
    NumericKind,
    Option,
    Question,
    QuestionKind,
    QuestionQuantity,
    QuizTexts,
    Slip,
    load_texts,
    paragraph,
)
from tutor.quiz.units import Quantity, format_bytes, format_quantity

__all__ = [
    "CHOICE_KINDS",
    "DRILL_ID",
    "DTYPE_BYTES",
    "NUMERIC_KINDS",
    "QUIZ_FILE",
    "ChoiceKind",
    "NumericKind",
    "Option",
    "Question",
    "QuestionKind",
    "QuestionQuantity",
    "QuizTexts",
    "Slip",
    "build_questions",
    "choice_question",
    "load_texts",
]

DTYPE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}
COMMON_ELEMENT_SIZES = (2, 4)  # the sizes a student mixes up a dtype's with (fp16/bf16 and fp32)

# The headline cases, always in the default set.
HEADLINE_LENGTHS = (1024, 4096, 16384)
HEADLINE_D = 128
HEADLINE_DTYPE = "fp16"
HEADLINE_L2_BUDGET = "H100"
HEADLINE_HBM_BUDGET = "H200"
HEADLINE_BATCH, HEADLINE_HEADS = 8, 32
HEADLINE_CAUSAL = (1000, 64)  # drill 01's default sequence length and tile

# What a seeded set draws from.
SEEDED_LENGTHS = (512, 1000, 1024, 2048, 3000, 4096, 6144, 8192, 12288, 16384, 32768, 65536)
SEEDED_D = (64, 96, 128, 256)
SEEDED_BATCH = (1, 2, 4, 8, 16)
SEEDED_HEADS = (8, 16, 32, 64)
SEEDED_CAUSAL_LENGTHS = (1000, 2000, 4096, 5000, 8192, 16384)
SEEDED_BLOCKS = (32, 64, 128)
HEADLINE_TILE_ROWS = 128  # query rows a program holds: four 128 x 128 fp16 tiles are 128 KiB of SRAM
SEEDED_TILE_ROWS = (32, 64, 128)

# The backward, decode and sliding-window questions (drills 04-06).
HEADLINE_MODEL = (32, 32, 8)  # layers, query heads, KV heads (with HEADLINE_D = 128: a Llama-3-8B-like shape)
# every drawn model shares its K/V heads (GQA): the questions say so
HEADLINE_CONTEXT = 8192  # tokens in one sequence's cache, for the KV-cache explanation
HEADLINE_WINDOW = (4096, 1024, 64)  # N, window, tile
HEADLINE_SPARSE = (8192, 128)  # N, tile of the block-sparse FLOPs question (drill 09)
SEEDED_MODELS = ((32, 32, 8), (40, 40, 8), (80, 64, 8), (28, 28, 4), (24, 16, 2), (48, 32, 4))
SEEDED_CONTEXTS = (4096, 8192, 32768, 131072)
SEEDED_WINDOW_LENGTHS = (4096, 8192, 16384)
SEEDED_WINDOWS = (256, 512, 1000, 1024, 2048)


def _numeric_question(
    texts: QuizTexts,
    kind: NumericKind,
    id_parameters: str,
    quantity: Quantity,
    answer: int | Fraction,
    slips: Sequence[tuple[str, int | float | Fraction]],
    parameters: dict[str, Any],
    values: dict[str, Any],
    fit: tuple[int, int] | None = None,
) -> Question:
    """Assemble a numeric question: fill the words, keep the slips a student can be told apart by.

    ``fit`` is (budget bytes, bytes per N²) for a "longest N that fits" question:
    its answer is an upper bound, and the kind's ``fit_what`` and ``fit_where``
    words name what has to fit and where."""
    words = texts.kinds[kind]
    answer_value = float(answer)
    fill = {**parameters, **values, "answer": answer, "answer_text": format_quantity(answer_value, quantity)}
    slip_words = {**texts.common_slips, **words.get("slips", {})}
    kept = []
    for code, value in slips:
        # A slip that gives the answer itself is no mistake for these parameters (a
        # forgotten byte factor in fp8, say): it is left out.  Every other slip is kept.
        if value <= 0 or value == answer:
            continue
        kept.append(Slip(code, float(value), paragraph(slip_words[code].format(**fill))))
    tolerance = slip_safe_tolerance(float(words["tolerance"]), answer_value, [s.value for s in kept])
    fit_limit = None
    if fit is not None:
        fit_limit = FitLimit(fit[0], fit[1], paragraph(words["fit_what"].format(**fill)),
                             paragraph(words["fit_where"].format(**fill)))
    return Question(
        id=f"{kind}:{id_parameters}",
        kind=kind,
        title=words["title"],
        text=paragraph(words["text"].format(**fill)),
        quantity=quantity,
        answer=answer_value,
        tolerance=tolerance,
        explanation=paragraph(words["explanation"].format(**fill)),
        parameters=parameters,
        slips=tuple(kept),
        kind_tolerance=float(words["tolerance"]),
        fit_limit=fit_limit,
    )


def slip_safe_tolerance(tolerance: float, answer: float, slip_values: Sequence[float]) -> float:
    """The kind's relative ``tolerance``, narrowed where a slip lies close to the answer:
    at most |slip - answer| / (2 max(slip, answer)), so no slip's number is ever
    accepted as right, and no number is both right and on a slip (the checker
    measures the one relative to the answer, the other relative to the slip).  Only
    draws that put a slip near the answer are narrowed: "exactly half" for a causal
    fraction at T = 512 blocks per side, N/d for 1 + N/d at N/d = 1024."""
    for value in slip_values:
        tolerance = min(tolerance, abs(value - answer) / (2 * max(value, answer)))
    return tolerance


def _byte_slips(count: Callable[[int], int], b: int) -> list[tuple[str, float]]:
    """Slips every byte answer can show.  ``count(size)`` is the question's byte count
    with ``size`` bytes per element (``count(b)`` is the answer): GB vs GiB (and MB, kB),
    a prefix off by 1000, bits for bytes, and the count redone with another common
    element size (2 or 4 bytes, where it is not the question's)."""
    answer = count(b)
    slips: list[tuple[str, float]] = []
    for power in (1, 2, 3):
        slips += [("decimal-binary-units", answer * 1.024**power), ("decimal-binary-units", answer / 1.024**power)]
    for power in (1, 2, 3):
        slips += [("unit-prefix-1000", answer * 1000**power), ("unit-prefix-1000", answer / 1000**power)]
    slips.append(("bits-not-bytes", answer * 8))
    slips += [("wrong-dtype-size", count(size)) for size in COMMON_ELEMENT_SIZES if size != b]
    return slips


def _shape(n: int, d: int, dtype: str) -> tuple[dict[str, Any], str]:
    return {"N": n, "d": d, "dtype": dtype, "b": DTYPE_BYTES[dtype]}, f"N={n},d={d},{dtype}"


# --- the kinds -----------------------------------------------------------------------------


def naive_bytes_question(texts: QuizTexts, n: int, d: int, dtype: str) -> Question:
    parameters, key = _shape(n, d, dtype)
    b = parameters["b"]
    answer = f.naive_hbm_bytes(n, d, b)
    qkvo, scores = 4 * n * d, 4 * n * n
    slips = [
        ("forgot-dtype-bytes", f.naive_elements(n, d)),
        ("counted-s-not-p", (qkvo + 2 * n * n) * b),  # S written and read, P left out
        ("read-write-once", (qkvo + 2 * n * n) * b),  # S once, P once
        ("forgot-qkvo", scores * b),
        ("forgot-o-write", (3 * n * d + 4 * n * n) * b),  # Q, K, V read, S and P, but no O written
        *_byte_slips(lambda size: f.naive_hbm_bytes(n, d, size), b),
    ]
    values = {"qkvo": qkvo, "scores": scores, "score_share": scores / (qkvo + scores)}
    return _numeric_question(texts, "naive-bytes", key, "bytes", answer, slips, parameters, values)


def fused_bytes_question(texts: QuizTexts, n: int, d: int, dtype: str) -> Question:
    parameters, key = _shape(n, d, dtype)
    b = parameters["b"]
    answer = f.fused_hbm_bytes(n, d, b)
    slips = [
        ("forgot-dtype-bytes", f.fused_elements(n, d)),
        ("forgot-o-write", 3 * n * d * b),
        ("counted-scores", f.naive_hbm_bytes(n, d, b)),
        *_byte_slips(lambda size: f.fused_hbm_bytes(n, d, size), b),
    ]
    values = {"elements": f.fused_elements(n, d)}
    return _numeric_question(texts, "fused-bytes", key, "bytes", answer, slips, parameters, values)


def traffic_ratio_question(texts: QuizTexts, n: int, d: int, dtype: str) -> Question:
    parameters, key = _shape(n, d, dtype)
    answer = f.traffic_ratio(n, d)
    s_only = Fraction(4 * n * d + 2 * n * n, 4 * n * d)
    slips = [
        ("dropped-the-one", Fraction(n, d)),
        ("counted-s-not-p", s_only),
        ("read-write-once", s_only),
        ("forgot-dtype-bytes", answer * parameters["b"]),
        ("forgot-dtype-bytes", answer / parameters["b"]),
        ("inverted", 1 / answer),
    ]
    return _numeric_question(texts, "traffic-ratio", key, "ratio", answer, slips, parameters, {})


def forward_flops_question(texts: QuizTexts, n: int, d: int) -> Question:
    parameters = {"N": n, "d": d}
    answer = f.forward_flops(n, d)
    slips = [
        ("one-matmul", 2 * n * n * d),
        ("mac-as-one-flop", 2 * n * n * d),
        ("one-matmul-mac-as-one", n * n * d),
    ]
    return _numeric_question(texts, "forward-flops", f"N={n},d={d}", "flops", answer, slips, parameters, {})


def naive_intensity_question(texts: QuizTexts, n: int, d: int, dtype: str) -> Question:
    parameters, key = _shape(n, d, dtype)
    b = parameters["b"]
    answer = f.naive_intensity(n, d, b)
    flops = f.forward_flops(n, d)
    two_passes = Fraction(flops, (4 * n * d + 2 * n * n) * b)
    slips = [
        ("forgot-dtype-bytes", answer * b),
        ("gave-the-limit", f.naive_intensity_limit(d, b)),
        ("counted-s-not-p", two_passes),
        ("read-write-once", two_passes),
        ("fused-intensity", Fraction(flops, f.fused_hbm_bytes(n, d, b))),
    ]
    values = {
        "flops": flops,
        "bytes": f.naive_hbm_bytes(n, d, b),
        "limit_text": format_quantity(float(f.naive_intensity_limit(d, b)), "flops-per-byte"),
    }
    return _numeric_question(texts, "naive-intensity", key, "flops-per-byte", answer, slips, parameters, values)


def intensity_limit_question(texts: QuizTexts, d: int, dtype: str) -> Question:
    b = DTYPE_BYTES[dtype]
    parameters = {"d": d, "dtype": dtype, "b": b}
    answer = f.naive_intensity_limit(d, b)
    slips = [
        ("forgot-dtype-bytes", Fraction(d)),
        ("counted-s-not-p", 2 * answer),
        ("read-write-once", 2 * answer),
        ("one-matmul", answer / 2),
    ]
    key = f"d={d},{dtype}"
    return _numeric_question(texts, "intensity-limit", key, "flops-per-byte", answer, slips, parameters, {})


def _budget_parameters(budget: GpuBudget) -> dict[str, Any]:
    return {"gpu": budget.name, "budget_detected": budget.detected}


def _unit_family_slips(budget_bytes: int, per_n2: int) -> list[tuple[str, int]]:
    """N from a budget misread in the other unit family (MB as MiB, GB as GiB, and back)."""
    slips = []
    for power in (2, 3):
        scale = Fraction(1024, 1000) ** power
        for misread in (budget_bytes * scale, budget_bytes / scale):
            slips.append(("decimal-binary-units", math.isqrt(int(misread) // per_n2)))
    return slips


def l2_fit_question(texts: QuizTexts, budget: GpuBudget, dtype: str) -> Question:
    b = DTYPE_BYTES[dtype]
    l2 = budget.l2_bytes
    parameters = {**_budget_parameters(budget), "l2_bytes": l2, "dtype": dtype, "b": b}
    answer = f.longest_fitting_sequence(l2, b)
    slips = [
        ("forgot-dtype-bytes", math.isqrt(l2)),
        ("counted-s-and-p", f.longest_fitting_sequence(l2, b, matrices=2)),
        *_unit_family_slips(l2, b),
    ]
    values = {
        "source": budget.source,
        "l2": l2,
        "l2_text": format_bytes(l2),
        "root": math.sqrt(l2 / b),
        "next": answer + 1,
        "next_bytes": f.score_matrix_bytes(answer + 1, b),
    }
    key = f"{budget.name},l2={l2},{dtype}"
    return _numeric_question(texts, "l2-fit", key, "tokens", answer, slips, parameters, values, fit=(l2, b))


def hbm_fit_question(texts: QuizTexts, budget: GpuBudget, batch: int, heads: int, dtype: str) -> Question:
    b = DTYPE_BYTES[dtype]
    hbm = budget.hbm_bytes
    matrices = batch * heads
    parameters = {**_budget_parameters(budget), "hbm_bytes": hbm, "batch": batch, "heads": heads,
                  "dtype": dtype, "b": b}
    answer = f.longest_fitting_sequence(hbm, b, matrices)
    slips = [
        ("forgot-dtype-bytes", f.longest_fitting_sequence(hbm, 1, matrices)),
        ("forgot-batch-heads", f.longest_fitting_sequence(hbm, b)),
        ("forgot-batch", f.longest_fitting_sequence(hbm, b, heads)),
        ("forgot-heads", f.longest_fitting_sequence(hbm, b, batch)),
        ("counted-s-and-p", f.longest_fitting_sequence(hbm, b, 2 * matrices)),
        *_unit_family_slips(hbm, matrices * b),
    ]
    values = {
        "source": budget.source,
        "hbm": hbm,
        "hbm_text": format_bytes(hbm),
        "matrices": matrices,
        "per_n2": matrices * b,
        "root": math.sqrt(hbm / (matrices * b)),
    }
    key = f"{budget.name},hbm={hbm},B={batch},H={heads},{dtype}"
    return _numeric_question(texts, "hbm-fit", key, "tokens", answer, slips, parameters, values,
                             fit=(hbm, matrices * b))


def causal_blocks_question(texts: QuizTexts, n: int, block: int) -> Question:
    parameters = {"N": n, "block": block}
    visited, total = f.causal_block_count(n, block)
    t = f.blocks_per_side(n, block)
    answer = f.causal_visited_fraction(n, block)
    slips = [
        ("exactly-half", Fraction(1, 2)),
        ("forgot-diagonal", Fraction(t - 1, 2 * t)),
        ("percent-without-sign", answer * 100),
    ]
    values = {"T": t, "visited": visited, "total": total}
    key = f"N={n},block={block}"
    return _numeric_question(texts, "causal-blocks", key, "fraction", answer, slips, parameters, values)


def backward_flops_question(texts: QuizTexts, n: int, d: int) -> Question:
    parameters = {"N": n, "d": d}
    answer = f.backward_flops_ratio()
    forward, backward = len(f.FORWARD_MATMULS), len(f.BACKWARD_MATMULS)
    slips = [
        ("forgot-recompute", Fraction(backward - 1, forward)),  # S = QKᵀ counted as if stored
        ("counted-forward-too", Fraction(backward + forward, forward)),  # forward + backward over forward
        # drill 04's seven matmuls over the forward's two (7/2: the same number as the slip above)
        ("counted-drill04", Fraction(len(f.DRILL04_BACKWARD_MATMULS), forward)),
        ("one-matmul-per-gradient", Fraction(3, forward)),  # dQ, dK, dV only
        ("inverted", 1 / answer),
    ]
    values = {
        "forward_flops": f.forward_flops(n, d),
        "backward_flops": f.backward_flops(n, d),
        "matmuls": "; ".join(f.BACKWARD_MATMULS),
    }
    return _numeric_question(texts, "backward-flops", f"N={n},d={d}", "ratio", answer, slips, parameters, values)


def tiled_traffic_question(texts: QuizTexts, n: int, d: int, dtype: str, block_rows: int) -> Question:
    """A tiled kernel's HBM bytes with no cache: K and V re-read once per query block, Θ(N²d²/M)."""
    parameters, key = _shape(n, d, dtype)
    b = parameters["b"]
    sram = 4 * d * b * block_rows  # four block_rows×d tiles fill it exactly
    parameters["sram_bytes"] = sram
    answer = f.tiled_hbm_bytes(n, d, b, sram)
    blocks = -(-n // block_rows)
    slips = [
        ("counted-compulsory", f.fused_hbm_bytes(n, d, b)),  # K and V read once
        ("reread-per-row", 2 * n * d * b + n * 2 * n * d * b),  # K and V once per query row
        ("forgot-v", 2 * n * d * b + blocks * n * d * b),
        ("forgot-dtype-bytes", answer // b),
        ("forgot-q-and-o", answer - 2 * n * d * b),  # the K/V re-reads alone
        *_byte_slips(lambda size: f.tiled_hbm_bytes(n, d, size, sram), b),
    ]
    naive = f.naive_hbm_bytes(n, d, b)
    # which side of naive attention's bytes the whole count falls on, in words that are true for
    # this draw: at a small M (M < 2·d²·b) the re-reads alone outgrow naive's 4·N²·b
    side = "below" if answer < naive else "above"
    versus_naive = texts.kinds["tiled-traffic"]["versus_naive"][side].format(
        factor=naive / answer if side == "below" else answer / naive, m_factor=sram / (2 * d * d * b))
    values = {
        "sram": sram,
        "sram_text": format_bytes(sram),
        "rows": block_rows,
        "blocks": blocks,
        "qo": 2 * n * d * b,
        "kv": blocks * 2 * n * d * b,
        "compulsory_text": format_bytes(f.fused_hbm_bytes(n, d, b)),
        "over_compulsory": answer / f.fused_hbm_bytes(n, d, b),
        "over_naive": answer / naive,
        "versus_naive": paragraph(versus_naive),
    }
    key = f"{key},M={sram}"
    return _numeric_question(texts, "tiled-traffic", key, "bytes", answer, slips, parameters, values)


def backward_bytes_question(texts: QuizTexts, n: int, d: int, dtype: str) -> Question:
    parameters, key = _shape(n, d, dtype)
    b = parameters["b"]
    answer = f.backward_read_bytes(n, d, b)
    lse = f.LSE_BYTES * n
    slips = [
        ("forgot-dtype-bytes", 5 * n * d + n),
        ("forgot-o", 4 * n * d * b + lse),  # D = rowsum(dO ∘ O) needs O
        ("counted-writes", 8 * n * d * b + lse),  # + dQ, dK, dV written
        ("stored-p", 5 * n * d * b + f.stored_p_bytes(n, b)),  # a stored P read instead of L
        ("forgot-lse", 5 * n * d * b),  # the five tensors, no L
        *_byte_slips(lambda size: f.backward_read_bytes(n, d, size), b),
    ]
    values = {
        "tensors": 5 * n * d * b,
        "lse": lse,
        "lse_share": lse / answer,
        "p_bytes": f.stored_p_bytes(n, b),
        "p_text": format_bytes(f.stored_p_bytes(n, b)),
        "p_over_lse": f.stored_p_bytes(n, b) // lse,
    }
    return _numeric_question(texts, "backward-bytes", key, "bytes", answer, slips, parameters, values)


def _model(layers: int, heads: int, kv_heads: int, d: int, dtype: str) -> tuple[dict[str, Any], str]:
    b = DTYPE_BYTES[dtype]
    parameters = {"layers": layers, "heads": heads, "kv_heads": kv_heads, "d": d, "dtype": dtype, "b": b,
                  "group": heads // kv_heads}
    return parameters, f"L={layers},H={heads},KV={kv_heads},d={d},{dtype}"


def decode_bytes_question(texts: QuizTexts, heads: int, kv_heads: int, d: int, dtype: str) -> Question:
    parameters, key = _model(1, heads, kv_heads, d, dtype)
    parameters.pop("layers")
    key = key.split(",", 1)[1]
    b = parameters["b"]
    answer = f.kv_bytes_per_token(kv_heads, d, b)
    slips = [
        ("used-query-heads", f.kv_bytes_per_token(heads, d, b)),
        ("forgot-v", kv_heads * d * b),
        ("forgot-dtype-bytes", 2 * kv_heads * d),
        *_byte_slips(lambda size: f.kv_bytes_per_token(kv_heads, d, size), b),
    ]
    return _numeric_question(texts, "decode-bytes", key, "bytes", answer, slips, parameters, {})


def decode_intensity_question(texts: QuizTexts, heads: int, kv_heads: int, d: int, dtype: str) -> Question:
    parameters, key = _model(1, heads, kv_heads, d, dtype)
    parameters.pop("layers")
    key = key.split(",", 1)[1]
    b = parameters["b"]
    answer = f.decode_intensity(heads, kv_heads, b)
    slips = [
        ("ignored-sharing", Fraction(2, b)),  # one query head per K/V read
        ("forgot-dtype-bytes", answer * b),
        ("mac-as-one-flop", answer / 2),
        ("counted-k-only", answer * 2),  # bytes of K alone
    ]
    values = {
        "flops": f.decode_flops_per_token(heads, d),
        "bytes": f.kv_bytes_per_token(kv_heads, d, b),
    }
    return _numeric_question(texts, "decode-intensity", key, "flops-per-byte", answer, slips, parameters, values)


def kv_cache_question(texts: QuizTexts, layers: int, heads: int, kv_heads: int, d: int, dtype: str,
                      context: int) -> Question:
    parameters, key = _model(layers, heads, kv_heads, d, dtype)
    b = parameters["b"]
    answer = f.kv_bytes_per_token(kv_heads, d, b, layers)
    slips = [
        ("used-query-heads", f.kv_bytes_per_token(heads, d, b, layers)),
        ("forgot-v", layers * kv_heads * d * b),
        ("forgot-layers", f.kv_bytes_per_token(kv_heads, d, b)),
        ("forgot-dtype-bytes", 2 * layers * kv_heads * d),
        *_byte_slips(lambda size: f.kv_bytes_per_token(kv_heads, d, size, layers), b),
    ]
    values = {
        "context": context,
        "context_text": format_bytes(answer * context),
        "mha_text": format_bytes(f.kv_bytes_per_token(heads, d, b, layers)),
    }
    return _numeric_question(texts, "kv-cache", key, "bytes", answer, slips, parameters, values)


def gqa_saving_question(texts: QuizTexts, heads: int, kv_heads: int) -> Question:
    parameters = {"heads": heads, "kv_heads": kv_heads}
    answer = f.gqa_saving(heads, kv_heads)
    slips = [
        ("inverted", 1 / answer),
        ("gave-fraction-saved", 1 - 1 / answer),
    ]
    values = {"saved": float(1 - 1 / answer)}
    return _numeric_question(texts, "gqa-saving", f"H={heads},KV={kv_heads}", "ratio", answer, slips,
                             parameters, values)


def _step(batch: int, context: int, heads: int, kv_heads: int, d: int, dtype: str) -> tuple[dict[str, Any], str]:
    parameters, key = _model(1, heads, kv_heads, d, dtype)
    parameters.pop("layers")
    parameters.update(batch=batch, context=context)
    return parameters, f"B={batch},T={context}," + key.split(",", 1)[1]


def packed_step_bytes_question(texts: QuizTexts, batch: int, context: int, heads: int, kv_heads: int, d: int,
                               dtype: str) -> Question:
    """Drill 07: the K/V bytes of a decode step whose programs each score a whole group."""
    parameters, key = _step(batch, context, heads, kv_heads, d, dtype)
    b = parameters["b"]
    answer = f.decode_step_kv_bytes(batch, context, kv_heads, d, b)
    slips = [
        ("used-query-heads", f.decode_step_kv_bytes(batch, context, heads, d, b)),
        ("forgot-v", answer // 2),
        ("forgot-batch", answer // batch),
        ("forgot-dtype-bytes", answer // b),
        *_byte_slips(lambda size: f.decode_step_kv_bytes(batch, context, kv_heads, d, size), b),
    ]
    return _numeric_question(texts, "packed-step-bytes", key, "bytes", answer, slips, parameters, {})


def unpacked_step_bytes_question(texts: QuizTexts, batch: int, context: int, heads: int, kv_heads: int, d: int,
                                 dtype: str) -> Question:
    """Drill 07: the same step when every query head's program loads its K/V head's pages itself."""
    parameters, key = _step(batch, context, heads, kv_heads, d, dtype)
    b, group = parameters["b"], parameters["group"]
    answer = f.decode_step_kv_bytes(batch, context, kv_heads, d, b, reads_per_kv_head=group)
    slips = [
        ("assumed-packed", f.decode_step_kv_bytes(batch, context, kv_heads, d, b)),
        ("forgot-v", answer // 2),
        ("forgot-batch", answer // batch),
        ("forgot-dtype-bytes", answer // b),
        *_byte_slips(lambda size: f.decode_step_kv_bytes(batch, context, kv_heads, d, size, reads_per_kv_head=group),
                     b),
    ]
    values = {"packed_text": format_bytes(f.decode_step_kv_bytes(batch, context, kv_heads, d, b))}
    return _numeric_question(texts, "unpacked-step-bytes", key, "bytes", answer, slips, parameters, values)


def window_blocks_question(texts: QuizTexts, n: int, window: int, block: int) -> Question:
    parameters = {"N": n, "window": window, "block": block}
    visited, total = f.window_block_count(n, window, block)
    answer = f.window_visited_fraction(n, window, block)
    slips = [
        ("no-lower-bound", f.causal_visited_fraction(n, block)),
        ("window-over-n", Fraction(window, n)),
        ("percent-without-sign", answer * 100),
    ]
    values = {
        "T": f.blocks_per_side(n, block),
        "visited": visited,
        "total": total,
        "causal": float(f.causal_visited_fraction(n, block)),
        "full_span": -(-(window - 1) // block) + 1,
    }
    key = f"N={n},W={window},block={block}"
    return _numeric_question(texts, "window-blocks", key, "fraction", answer, slips, parameters, values)


def sparse_flops_question(texts: QuizTexts, n: int, block: int, d: int) -> Question:
    parameters = {"N": n, "block": block, "d": d}
    t = f.blocks_per_side(n, block)
    answer = f.causal_block_sparse_flops(n, block, d)
    slips = [
        ("dense", f.forward_flops(n, d)),
        ("useful-pairs-only", 2 * d * n * (n + 1)),
        ("full-blocks-only", f.block_sparse_flops(t * (t - 1) // 2, block, d)),
        ("one-matmul", answer // 2),
    ]
    dense = f.forward_flops(n, d)
    # the listed tiles' share of the grid is the FLOPs' share of dense work only where N fills the tiles
    # (blind round 28's review: at N = 1,000 the padded tiles' work is 0.5407 of the dense count, not 0.5156)
    padded = "" if n % block == 0 else (
        f" (more than the tiles' share: N = {n:,} is no multiple of {block}, so the last row and column of"
        " tiles hang past N and their padded pairs are computed too)")
    values = {"T": t, "listed": t * (t + 1) // 2, "full": t * (t - 1) // 2, "dense": dense,
              "share": t * (t + 1) / (2 * t * t), "tiles": t * t, "dense_share": answer / dense, "padded": padded}
    return _numeric_question(texts, "sparse-flops", f"N={n},block={block},d={d}", "flops", answer, slips,
                             parameters, values)


def choice_question(texts: QuizTexts, kind: ChoiceKind, rng: random.Random | None = None) -> Question:
    """A multiple-choice question; with ``rng`` its options are shuffled (and relettered)."""
    words = texts.choices[kind]
    written = list(words["options"])
    order = list(range(len(written)))
    if rng is not None:
        rng.shuffle(order)
    options, answer = [], ""
    for position, index in enumerate(order):
        option = written[index]
        key = "abcdefgh"[position]
        options.append(Option(key, paragraph(option["text"]), option.get("slip"), paragraph(option.get("why", ""))))
        if option["key"] == words["answer"]:
            answer = key
    return Question(
        id=kind,
        kind=kind,
        title=words["title"],
        text=paragraph(words["text"]),
        quantity="choice",
        answer=answer,
        tolerance=0.0,
        explanation=paragraph(words["explanation"]),
        options=tuple(options),
    )


# --- whole sets ----------------------------------------------------------------------------


def build_questions(
    seed: int | None = None,
    gpu: GpuBudget | None = None,
    texts: QuizTexts | None = None,
) -> tuple[Question, ...]:
    """The quiz, in order: traffic table, ratio, FLOPs, intensity, budgets, causal, why fusing,
    a tiled kernel's real traffic; then the backward pass (FlashAttention-2's count, drill 04's
    separate dQ pass), decoding with a KV cache, GQA and the sliding window.

    ``gpu``: the budget of the GPU this runs on (see :func:`tutor.quiz.gpu.detect_gpu`);
    without one the budget questions use stated budgets.
    """
    texts = texts or load_texts()
    if seed is None:
        rng = None
        lengths: tuple[int, ...] = HEADLINE_LENGTHS
        d, dtype = HEADLINE_D, HEADLINE_DTYPE
        l2_budget, hbm_budget = STATED_BUDGETS[HEADLINE_L2_BUDGET], STATED_BUDGETS[HEADLINE_HBM_BUDGET]
        batch, heads = HEADLINE_BATCH, HEADLINE_HEADS
        causal_n, block = HEADLINE_CAUSAL
    else:
        rng = random.Random(seed)
        lengths = tuple(sorted(rng.sample(SEEDED_LENGTHS, 3)))
        d, dtype = rng.choice(SEEDED_D), rng.choice(sorted(DTYPE_BYTES))
        l2_budget = STATED_BUDGETS[rng.choice(sorted(STATED_BUDGETS))]
        hbm_budget = STATED_BUDGETS[rng.choice(sorted(STATED_BUDGETS))]
        batch, heads = rng.choice(SEEDED_BATCH), rng.choice(SEEDED_HEADS)
        causal_n, block = rng.choice(SEEDED_CAUSAL_LENGTHS), rng.choice(SEEDED_BLOCKS)
    if gpu is not None:
        l2_budget = hbm_budget = gpu
    longest = lengths[-1]
    questions: list[Question] = []
    questions += [naive_bytes_question(texts, n, d, dtype) for n in lengths]
    questions += [fused_bytes_question(texts, n, d, dtype) for n in lengths]
    questions += [
        traffic_ratio_question(texts, longest, d, dtype),
        forward_flops_question(texts, longest, d),
        naive_intensity_question(texts, longest, d, dtype),
        intensity_limit_question(texts, d, dtype),
        l2_fit_question(texts, l2_budget, dtype),
        hbm_fit_question(texts, hbm_budget, batch, heads, dtype),
        causal_blocks_question(texts, causal_n, block),
        choice_question(texts, "why-fusing", rng),
        choice_question(texts, "causal-effect", rng),
    ]
    # The backward pass, decoding and the sliding window (drills 04-06): drawn after the
    # questions above, so those keep their parameters for a given seed.
    if rng is None:
        layers, heads, kv_heads = HEADLINE_MODEL
        context = HEADLINE_CONTEXT
        window_n, window, window_block = HEADLINE_WINDOW
    else:
        layers, heads, kv_heads = rng.choice(SEEDED_MODELS)
        context = rng.choice(SEEDED_CONTEXTS)
        window_n, window, window_block = (rng.choice(SEEDED_WINDOW_LENGTHS), rng.choice(SEEDED_WINDOWS),
                                          rng.choice(SEEDED_BLOCKS))
    questions += [
        backward_flops_question(texts, longest, d),
        backward_bytes_question(texts, longest, d, dtype),
        choice_question(texts, "lse-saves", rng),
        decode_bytes_question(texts, heads, kv_heads, d, dtype),
        decode_intensity_question(texts, heads, kv_heads, d, dtype),
        choice_question(texts, "decode-bound", rng),
        kv_cache_question(texts, layers, heads, kv_heads, d, dtype, context),
        gqa_saving_question(texts, heads, kv_heads),
        window_blocks_question(texts, window_n, window, window_block),
    ]
    # Added later (issue 21) and drawn last, so every question above keeps its parameters
    # and option order for a given seed; each is asked beside the question it follows up.
    tile_rows = HEADLINE_TILE_ROWS if rng is None else rng.choice(SEEDED_TILE_ROWS)
    tiled = tiled_traffic_question(texts, longest, d, dtype, tile_rows)
    dq_pass = choice_question(texts, "dq-own-pass", rng)
    questions.insert(next(i for i, q in enumerate(questions) if q.kind == "why-fusing") + 1, tiled)
    questions.insert(next(i for i, q in enumerate(questions) if q.kind == "backward-flops") + 1, dq_pass)
    # Drill 09 (block-sparse attention), drawn after everything above for the same reason.
    sparse_n, sparse_block = HEADLINE_SPARSE if rng is None else (rng.choice(SEEDED_CAUSAL_LENGTHS),
                                                                   rng.choice(SEEDED_BLOCKS))
    questions.append(sparse_flops_question(texts, sparse_n, sparse_block, d))
    # Drill 07 (paged, GQA-packed decoding): a step's K/V bytes with and without group packing,
    # from the parameters drawn above (nothing new drawn: every question above keeps its own)
    questions += [
        packed_step_bytes_question(texts, batch, context, heads, kv_heads, d, dtype),
        unpacked_step_bytes_question(texts, batch, context, heads, kv_heads, d, dtype),
    ]
    return tuple(questions)

