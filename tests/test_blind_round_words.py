"""What the diagnoses of blind rounds 16 to 18's mistakes say, measured (each entry lives in its
drill's mistakes file, where its codes are checked with the rest): the words name the
measurement behind them, and only where it holds.

- an fp16 running sum (drills 06, 08, 09): the long-sum case's rows that go Inf are exactly
  the ones that see 128 keys or more;
- a merge that loads its padding slots' m as 0 (drills 05, 07): right with a power-of-two
  split count, NaN with 3;
- dQ assigned, not accumulated (drill 04): each query block holds the last key block's share;
- dK from the wrong operand, or a transposed tile (drill 04);
- a q pointer without the sequence's start (drill 08): each wrong row is attention of the row
  of its in-sequence index counted from packed row 0;
- a V load without the position mask (drill 07): NaN only in the nan-tail case;
- round 17: split and merge that disagree on the states' layout (drill 05): the NaN is not put on the
  empty state; the final division left out (drill 06): the factor is each row's own l; masked scores
  in the running maximum (drill 09): every weight of a row vanishes, its masked keys far above;
- later rounds: a q pointer indexed by the sequence alone (drill 05): each wrong output is attention
  with another (sequence, head)'s query; lse and delta swapped for the dQ kernel (drill 04): the
  causal launch's NaN and, beside it, the full launch's dQ read out (one factor per row); a split that
  stores o / l (drill 07): an empty slice's l is 0, not NaN, so the NaN is put on o alone; packed query
  rows loaded without their mask (drill 07): Q read past its end, said though the output is right; a key
  loop that starts at the query tile (drill 08): the earlier key blocks are missing from the visit map;
  D or lse read for another row than the query row's (drill 04): the loop's gradient fits exactly; a
  merge that adds ln(l) to an exp2-domain maximum (drill 05): each slice weighs l^0.693 2^m; a merge
  that counts l twice: the power of l fitted on every row the tutor tried is 2; a running maximum from
  0 (drill 06): its far-below case, every score near -120, is NaN in every row.
- round 21: a causal mask compared within the tiles (drill 01): every key missed lies further into its
  block than the row into its own; V loaded at q's offset (drill 06): heads whose output is NaN whatever
  each K/V head holds are not said to read "none"; the window's far side applied after the maximum (drill
  06): the hostile case's wrong rows against the keys the visit map loads; K's token stride HEAD_DIM
  (drill 08): the output is attention with K read so; loop bounds past Nk or past the diagonal (drill 08):
  where every unneeded visit lies; an element mask inverted, an index used as a key position (drill 09).
- round 22 (drill 05): acc rescaled after the block is added: l_s counts every position, o_s lacks each
  slice's first block; empty slices that store nothing: the slots no store reached, as measured; states
  kept in fp16: the high case's maxima near 721 (exp2 domain) in steps of 0.5; (drill 07) the pool row
  without its K/V head: every query head reads K/V head 0; (drill 04) the dQ loop's D read from LSE, or
  its lse and D swapped: the D-term probe's per-row factor against each row's lse; dQ from dS V; (drill
  06) acc rescaled after the block is added: every key missed lies in the row's first block with a key;
  (drill 05) K addressed head_dim-major, read out as drill 06's is; a K/V base from the sequence index
  alone: every state names row r // heads; the length loaded at the head index; (drill 04) a scale
  hard-coded for head_dim 64, named from the read-out's slope; a dK/dV loop that skips every second query
  block: P is 0 exactly on the tiles its visit map never visited.
"""

from __future__ import annotations

import pytest
from helpers_harness import check_files, check_jobs, job

from tutor.authoring import student_kernels as mistakes
from tutor.harness.result import CheckResult

WANTED = {
    "06_acc_kept_in_fp16": ("long-sum-wrong", ["rows 127..199", "the running sum (acc) is kept in fp16"]),
    "08_acc_kept_in_fp16": ("long-sum-wrong", ["rows 0..39, 167..189", "the running sum (acc) is kept in fp16"]),
    "09_acc_kept_in_fp16": ("long-sum-wrong", ["rows 127..199", "the running sum (acc) is kept in fp16"]),
    "05_merge_pads_max_with_zero": ("nan-in-output", ["with num_splits=4", "finite and right", "m = -inf"]),
    "07_merge_pads_max_with_zero": ("nan-in-output", ["with num_splits=4", "finite and right", "m = -inf"]),
    "04_dq_overwritten": ("dq-not-summed", ["the share of the last key block its loop visited"]),
    # blind round 26 (05 b22, 07 b19): scores past the length filled with 0: S / (S + E) per row, E counted in the tile
    "05_masked_scores_filled_with_zero": ("wrong-output", ["after its last key in the K/V block of 32 that holds it"]),
    "07_masked_scores_filled_with_zero": ("wrong-output", ["after its last key in the tile of 32 that holds it"]),
    # blind round 27, 09 b39: the rescale inverted moves the modifier read-out's weights with the keys' order
    "09_alpha_inverted": ("wrong-output", ["when the two keys trade scores", "not the modifier"]),
    # blind round 27 (02 b16): a maximum of unscaled scores: each block's p cut off under a score (fp16 underflow)
    "02_max_on_unscaled_scores": ("wrong-output", ["exactly the block's lowest-scoring ones",
                                                   "look at what the running maximum is taken over"]),
    # blind round 28 (01 b08): the causal mask's row taken within its tile
    "01_mask_row_within_its_tile": ("keys-missing", ["lies after the row's place in its query block"]),
    "01_mask_keys_at_start_n_times_block_n": ("blocks-skipped", ["they are lost only with CAUSAL set"]),
    # blind round 28 (08): laws of the diagonal and the loop bound, K and V strides, the grid's split
    "08_kv_token_stride_head_dim": ("wrong-output", ["attention with K and V read at element"]),
    "08_mask_packed_keys_against_sequence_rows": ("diagonal-from-packed-index", ["the shift is -cu_seqlens_k[b]"]),
    "08_mask_row_within_its_tile": ("keys-missed", ["last weighed key is i % BLOCK_M + Nk - Nq"]),
    "08_loop_bound_from_the_first_row": ("keys-missed", ["the loop's bound is the tile's first row's diagonal"]),
    "08_sequence_and_head_split_swapped": ("output-unwritten", ["lies in sequences 2..4", "program_id(1) splits"]),
    # (09): the element mask read another way, the past-end mask before the cap
    "09_mask_transposed": ("partial-unmasked", ["mask[c, r]: the mask is read transposed"]),
    "09_mask_rows_of_query_block_0": ("partial-keys-missed|partial-unmasked", ["at row r % 32"]),
    "09_cap_after_past_end_mask": ("past-end-unmasked", ["a -inf the modifier capped"]),
    "09_index_not_scaled": ("listed-blocks-missed", ["the lists may well be read to their counts"]),
    "09_alpha_inverted_and_empty_rows_nan": ("empty-row-nan", ["rows that see no key under the block mask",
                                                               "when the two keys trade scores"]),
    # blind round 27, 02 b14: one key of score 0 past the end, measured on every row of the hostile case
    "02_score_mask_lets_one_key_past_the_end": ("hostile-wrong", ["is what one key of score 0 and value 0"]),
    # blind round 27, 06 b37: one side's row index inside its block, named for that side alone
    "06_far_side_uses_the_row_index_in_its_block": ("mask-index-in-block", [
        "on the far side (c > r - WINDOW), the row's index inside its query block"]),
    # blind round 27, 08 b36: a rescale that is wrong, read out at the case's own scores
    "08_rescale_inverted_from_the_second_block": ("wrong-output", ["at the default case's own scores",
                                                                   "do not keep softmax's proportions"]),
    # blind rounds 27 (02 b32) and 26 (05 b31): K or V read head_dim-major, the outputs fitted so
    "02_k_read_head_dim_major": ("wrong-output", ["attention with its own K read head_dim-major"]),
    "05_v_read_head_dim_major": ("wrong-output", ["attention with its own V read head_dim-major"]),
    "04_dk_takes_do_for_q": ("dk-wrong", ["dK is exactly sm_scale · dSᵀ dO"]),
    "08_q_rows_without_the_sequence_start": ("wrong-output", ["counted from packed row 0", "cu_seqlens_q[b]"]),
    "07_v_load_unmasked": ("v-read-unmasked", ["the nan-tail case", "every other case"]),
    "05_states_stored_slice_major": ("wrong-output", ["disagree on where the slice states live",
                                                      "may come with the layout"]),
    "06_no_final_division": ("wrong-output", ["not divided by l_i at the end"]),
    "09_mask_after_the_max": ("wrong-output", ["Every weight of that row vanished", "masked keys too"]),
    "04_dq_gets_lse_and_delta_swapped": ("dq-wrong", ["one factor per row", "or its D is not the row's own",
                                                      "its lse and D loads are swapped"]),
    # the check's random inputs decide which code carries the words (seed 2 of 1-8: wrong-output)
    "06_acc_rescaled_after_the_block_is_added": ("window-keys-missed|wrong-output",
                                                 ["is one of its window's keys in the first K/V block its loop"
                                                  " visits that holds any", "acc = (acc + p·v) * alpha"]),
    "04_dkdv_loop_steps_by_block_n": ("dv-wrong", ["tiles the loop's visit map records as never visited",
                                                   "every second query block: the loop steps 2 query blocks"]),
    "04_dq_product_takes_v": ("dq-wrong", ["dQ is exactly sm_scale · dS V: the dQ loop's product takes V"]),
    "04_dq_delta_loaded_from_lse": ("dq-wrong", ["its D is loaded from LSE where Delta belongs"]),
    "07_split_stores_o_normalised": ("nan-in-output", ["holds 0, not NaN, so the NaN arose in o alone"]),
    "07_q_rows_unmasked": ("read-past-end-unused", ["Q was read past its end: 384 elements after it"]),
    "08_key_loop_starts_at_the_query_tile": ("keys-missed", ["the visit map records no visit to those earlier blocks"]),
    "08_acc_zeroed_each_block": ("keys-missed", ["did not survive the later ones"]),
    "04_d_loaded_with_the_key_offsets": ("dk-wrong", ["with D read at the key block's offsets"]),
    "04_lse_broadcast_along_the_keys": ("dq-wrong", ["with lse read broadcast along the wrong axis"]),
    "05_merge_lse_with_natural_log_of_l": ("wrong-output", ["l_s^0.693 2^(m_s - M)", "a natural log of l_s"]),
    "05_merge_counts_l_twice": ("wrong-output", ["l_s^2 2^(m_s - M) / sum_t l_t^2 2^(m_t - M)",
                                                 "to the power 2 where it belongs once"]),
    "06_running_max_starts_at_zero": ("nan-in-output", ["on the far-below case (window 80, seq=150)",
                                                         "in every row of the case", "0/0 (those rows are NaN)"]),
    "07_split_grid_one_slice_short": ("positions-unread", ["What was never read is each sequence's tail",
                                                           "the last slice or block never launched"]),
    "04_dq_loop_dp_from_k": ("dq-wrong", ["its dP is dO Kᵀ where it is dO Vᵀ"]),
    "05_merge_weights_sign_flipped": ("nan-in-output", ["2^(-1 (m_s - M))",
                                                        "the maxima enter with their sign flipped"]),
    "07_running_max_over_the_wrong_axis": ("nan-in-output", ["in slot 0, whose slice holds position 0",
                                                             "the maximum it stored never took their scores"]),
    "04_forward_lse_in_log2_units": ("forward-changed", ["O is right; the lse your forward stores is 1.443 x the"
                                                         " natural log of each row's sum (log2 of the sum)"]),
    "06_v_loaded_one_key_late": ("values-off-keys", ["the weight of each key j sits on value row j + 1"]),
    "06_v_masked_with_the_query_rows": ("values-off-keys", ["were weighed, and what they add to the output is 0"]),
    "04_dkdv_do_loaded_from_q": ("dv-wrong", ["dV is exactly Pᵀ Q: the dK/dV loop's dV product takes Q"]),
    "04_dkdv_do_rows_one_late": ("dv-wrong", ["with dO's rows read one row late (row i reads dO of row i + 1)"]),
    "04_scale_hard_coded_for_head_dim_64": ("dv-wrong", ["grows as exp(0.707 s)", "seen on the whole shape",
                                                         "= 0.125 = 1/sqrt(64): a scale fixed for head_dim 64, where"
                                                         " this case's is 32"]),
    # blind round 24, 05: a merge that walks the slices in order, rescaling only one of l and the output
    "05_walking_merge_output_not_rescaled": ("wrong-output", ["M_s the running maximum of slices 0..s",
                                                              "but not its accumulated output"]),
    "05_walking_merge_sum_not_rescaled": ("wrong-output", ["M_t the running maximum of slices 0..t",
                                                           "but not its sum l"]),
    # blind round 24, 07 b27: the group's states stored at the first group's heads: where they went, measured
    "07_states_stored_at_the_first_group": ("nan-in-output", ["with the queries of the NaN pairs alone negated",
                                                              "changes too: what those queries scored reaches"]),
    # blind round 24, 05 b16: q.k summed in fp16: no one rounding of the true score fits, the stored maxima do
    # (on some inputs a single rounding of the true scores fits within the tolerance, and is said first)
    "05_dot_summed_in_fp16": ("wrong-output", ["is an fp16 number: the scores were computed or kept in fp16"
                                               " || attention computed from scores rounded to fp16"]),
    # blind round 25, 08 b13: a bound capped at Nq gives the default case's rows the weights a bound without the
    # offset gives: both are said, as what the case cannot tell apart, not the one that fit first
    "08_bound_capped_at_seqlen_q": ("keys-missed", ["which this case's lengths cannot tell apart",
                                                    "is capped at the sequence's Nq, where its Nk belongs"]),
    # blind round 25, 09 b24: a partial loop through its row's padding revisits block 0; the modifier read-out
    # (whose rows list block 0 and pad with it) read that as a transform matching no softcap
    "09_partial_loop_through_the_padding": ("wrong-output", ["Your loops visit their index rows' padding",
                                                             "The modifier read-out is not made"]),
    # blind round 25, 09 b20: keys past N_CTX unmasked: the q = 0 read-out counts the keys each row weighs unseen
    "09_keys_past_the_end_unmasked": ("past-end-unmasked", ["divides by 26 keys more than it weighs",
                                                            "as a full block"]),
    # blind round 25, 09 b09: an index row read without its row stride, from the visit map against the flat lists
    "09_part_index_without_row_stride": ("listed-blocks-missed", ["the partial list's flat index array holds at"
                                                                  " entries start_m + j", "(the row stride N_N)"]),
    # blind round 26, 05 b32: the q offset off_bh, measured against every wrong output (the row stride left out)
    "05_query_offset_without_head_dim": ("wrong-output", ["your q load's offset is b * 2 + h elements (off_bh itself"]),
    # blind round 26, 07 b26: the pool row's K/V head term the program's index off_bkv, from the counted loads
    "07_pool_row_with_the_program_index": ("positions-unread", ["the K/V head b * KV_HEADS + h (the program's index"]),
    # blind round 26, 04 c14: dQ's rows from the program id itself: the unwritten rows' pattern, per gradient
    "04_dq_rows_start_at_the_program_id": ("unwritten-output", ["dq: The unwritten rows are exactly rows"]),
    # blind round 26, 01 b30/b27: V loaded at offs_n: the blocks are visited and their weight sits on block 0's keys
    # (said as a loop that stops before the diagonal where only the diagonal block's V was, b27)
    "01_v_loaded_at_block_offsets": ("blocks-skipped", ["is found on key c % BLOCK_N of key block 0"]),
    "01_diagonal_block_v_at_block_offsets": ("blocks-skipped", ["is found on key c % BLOCK_N of key block 0"]),
    # blind round 25, 02 b08: alpha in another base than p, fitted from the blocks' shares (not the checklist alone)
    "02_alpha_in_natural_exp": ("blocks-inconsistent", ["0.443 = log2(e) − 1", "Take alpha in p's base"]),
    "01_alpha_in_natural_exp": ("blocks-inconsistent", ["0.443 = log2(e) − 1"]),
    "01_natural_p_alpha_in_exp2": ("blocks-inconsistent", ["−0.307 = ln(2) − 1"]),
    # blind round 25, 02 b12: acc divided by the running sum each step, the old sum not carried (FA1 done wrong)
    "02_normalised_each_step_without_the_old_sum": ("blocks-inconsistent", ["divided by the running sum l after its"
                                                                            " own block and after each later one"]),
    # blind round 24, 05 b25: states in other units than the merge takes: the merge is not the only place to look
    "05_natural_split_exp2_merge": ("wrong-output", ["look at the merge and at the states your split hands it",
                                                     "Your split kernel stores the maximum in natural-log units"]),
    # blind round 24, 05 b08: NaN in a sequence that left no slice empty, at a split count of 3 (the padding slot)
    "05_lse_merge_divides_empty_slices": ("nan-in-output", ["has 1 slot past the last slice",
                                                            "each used all 3 slices, measured", "counts as one"]),
    "05_scores_rounded_to_fp16": ("wrong-output", ["attention computed from scores rounded to fp16 in log2 units",
                                                   "Your output on the high case is"]),
    # blind round 24, 04: P rebuilt with lse[None, :] (a square tile): the measured P says which lse each key took
    "04_lse_broadcast_along_the_keys_in_both_loops": ("dv-wrong", ["lse broadcast along the keys",
                                                                   "start_m + (c - start_n)"]),
    # blind round 24, 07: the program's index as the table row, kvh * GROUP as the K/V head, the table's
    # indices exchanged
    "07_table_row_by_program": ("positions-unread", ["one term changed", "the block table's row b * KV_HEADS + h"]),
    "07_pool_head_times_group": ("positions-unread", ["one term changed", "the K/V head h * GROUP"]),
    "07_table_indices_exchanged": ("positions-unread", ["one term changed", "the block table's two indices exchanged"]),
    "07_pool_row_no_kv_heads": ("positions-unread", ["one term changed", "the pool row without the K/V head"]),
    "07_page_and_slot_the_other_way_round": ("positions-unread", ["block_table[b, pos % PAGE_SIZE] and slot"
                                                                  " pos // PAGE_SIZE"]),
    "06_masked_scores_set_to_zero": ("future-keys-seen", ["weigh what a score of exactly 0 gets in their row"]),
    "05_merge_adds_o_without_weight": ("wrong-output", ["l_s / sum_t l_t 2^(m_t - M): the o_s are added without"]),
    # which (sequence, head)s show is the random lengths' (shuffled; a sequence of length 1 is right whatever
    # query it reads: clean-clone CI, 2026-12-07, lengths [250, 1, 173, 41]): the law's words, not one pair
    "05_query_indexed_by_sequence": ("wrong-output", ["another (sequence, head)'s query and its own K/V",
                                                      "check the q pointer's offset, its sequence part"]),
    "07_o_state_stored_without_head_dim_stride": ("states-unwritten", ["(MidO), it wrote 159, the first 159 in a row",
                                                                       "its store's state offset is not multiplied"]),
    "07_no_alpha": ("wrong-output", ["Within each slice, the tiles of 32 positions that were read while the running",
                                     "not rescaled when the maximum grows"]),
    "06_loop_steps_by_half_a_block": ("wrong-output", ["keys 32..78 count 2 times, the rest once",
                                                       "read and added more than once"]),
    "06_k_loaded_with_the_row_mask": ("wrong-output", ["weigh a score of 0 and the rest their own",
                                                       "(48 rows have such keys)"]),
    "06_q_mask_half_a_block_short": ("wrong-output", ["128 rows weigh every key they see alike",
                                                      "(first row 108 of head 0 (batch 0))"]),
    "06_k_addressed_head_dim_major": ("wrong-output", ["scores against K read as a (head_dim, seq) array",
                                                       "swap the sequence and head_dim strides"]),
    "05_merge_reads_o_without_head_dim_stride": ("wrong-output", ["In every row it read exactly element (row * 4 +"
                                                                  " slice) + c: the state's index", "row 0's slot 0"
                                                                  " component 5"]),
    "05_v_loaded_from_k": ("wrong-output", ["takes its values from K, not from V"]),
    "07_pool_row_without_the_kv_head": ("heads-mixed", ["every query head reads K/V head 0, whatever its group",
                                                          "(in the pool row, + kvh)"]),
    "05_k_addressed_head_dim_major": ("wrong-output", ["scores against K read as a (head_dim, seq) array",
                                                       "swap the sequence and head_dim strides"]),
    "05_kv_base_from_the_sequence_alone": ("wrong-output", ["0/1 reads 0/0, 1/0 reads 0/1", "row r reads row r // 2:"
                                                            " the sequence index alone"]),
    "05_length_loaded_at_the_head_index": ("wrong-output", ["holds exactly the length of sequence off_bh % 2 - the"
                                                            " length is loaded at off_bh % 2: the head index"]),
    "05_states_kept_in_fp16": ("wrong-output", ["slice states are not all float32: MidM (float16), MidL (float16)",
                                                "keeps a number in steps of 0.5"]),
    # blind round 23, 01/hi_overshoot: the visit map's overrun read in its layout (a bound past the sequence)
    "01_loop_one_block_too_far": ("write-past-end", ["places where the last program's visits to the key block after"
                                                     " the last one would be recorded"]),
    # blind round 23, 02: a maximum over the block's rows; scores rounded to fp16 (a model that fits the output)
    "02_max_over_the_block_rows": ("hostile-wrong", ["have only ordinary scores", "tl.max(qk, 0) takes each key's"
                                                     " maximum over the block's rows"]),
    "02_scores_in_fp16": ("hostile-wrong", ["attention computed from scores rounded to fp16 in log2 units"]),
    "01_scores_in_fp16": ("hostile-wrong", ["attention computed from scores rounded to fp16 in log2 units"]),
    "08_q_rows_from_the_key_start": ("read-past-end", ["The q load starts at cu_seqlens_k[b], where cu_seqlens_q[b]"
                                                       " belongs"]),
    "06_lower_bound_one_key_early": ("lower-bound-open", ["the lower bound is one key early"]),
    "06_sequence_index_by_kv_heads": ("wrong-kv-head", ["the one a sequence index of off_bh // H_KV gives"]),
    "05_states_in_fp16_and_merge_l_unrescaled": ("wrong-output", ["slice states are not all float32: MidM (float16)",
                                                                   "cases failed too, which narrow states need not"
                                                                   " explain"]),
    "05_empty_slices_store_nothing_into_zeros": ("nan-in-output", ["your split kernel stored nothing to",
                                                                   "(0 in every state: the buffer was zeroed)"]),
    "05_acc_rescaled_after_the_block_is_added": ("wrong-output", ["o_s holds exactly its last positions: the first"
                                                                  " 32 positions of each slice",
                                                                  "acc = (acc + p·v) * alpha"]),
    "06_v_loaded_at_the_query_offset": ("wrong-kv-head", ["reads past the last K/V head in its keys or its values",
                                                         "keys of query heads 0..3 from K/V heads 0, 0, ?, ?"]),
    "06_window_masked_after_the_max": ("max-before-mask", ["with no such key are right",
                                                           "with a key older than its window"]),
    "09_element_mask_test_inverted": ("partial-unmasked", ["the keys that get weight are exactly the ones the element"
                                                           " mask hides"]),
    "09_index_entry_used_as_key_position": ("weight-moved", ["reads listed block j as keys j..j+"]),
    "08_k_token_stride_head_dim": ("wrong-output", ["attention with K read at element token*", "the token stride is"
                                                    " HEAD_DIM where one token holds every head's row"]),
    "08_bound_unclamped": ("extra-blocks", ["Every one of them is a key block wholly past its sequence's last key"]),
    "08_bound_all_keys": ("extra-blocks", ["Every one of them holds keys of its sequence, past the last diagonal"]),
    "01_mask_compared_within_the_tiles": ("keys-missing", ["Every key missed, in every row, and no other",
                                                           "(key % 64 > row % 64: your BLOCK_N and BLOCK_M)"]),
    # the merge reads the states the split never wrote as torch.empty left them: NaN or not, so
    # the words come under whichever error is said (CI of stop 46: nan-in-output alone)
    "05_o_state_stored_without_head_dim_stride": ("wrong-output|nan-in-output",
                                                  ["(MidO), it wrote 95, the first 95 in a row",
                                                   "its store's state offset is not multiplied by"]),
}
# words a measurement refutes, never said: (a code said, phrases no message may hold)
UNSAID = {
    # blind round 25, 06 b04: off_h // H_KV fits a sequence index off_bh // H_KV on the ragged case (2 heads on
    # 1), which would fail the default case (4 on 2) that this kernel passes
    "06_kv_divides_by_kv_heads": ("wrong-kv-head", ["a sequence index of"]),
    "09_partial_loop_through_the_padding": ("wrong-output", ["score transform"]),
    # blind round 26, 01 b27: a loop whose bound is right is not said to stop before the diagonal
    "01_diagonal_block_v_at_block_offsets": ("blocks-skipped", ["The loop stops before the diagonal block"]),
    # blind round 26, 01 b30: the folded weight: the rows' other keys are not softmax over them alone
    "01_v_loaded_at_block_offsets": ("blocks-skipped", ["in softmax's proportions"]),
    # blind round 27, 02 b36: a mask that drops the last key is no loop bound
    "02_score_mask_drops_the_last_key": ("wrong-output", ["the loop stops at the last full block"]),
    # blind round 26, 05 b21: overlapping slices (each loop from 0) leave a block's last reader in the visit map,
    # whose slice count per sequence (1 for a sequence of 4) is not said
    "05_slice_loop_from_zero": ("wrong-output", [" 1 slice)", " 2 slices)", " 3 slices)"]),
}
# entries whose code the random inputs decide on some runs, checked at a fixed seed: 06_window_masked_after_the_max
# said wrong-output on one clean-clone CI's inputs (2026-12-07, 3f4eff3; max-before-mask at seeds 1 and 2)
# and 02_normalised_each_step_without_the_old_sum said wrong-output on another's (5f644ae: keys underflowing to 0),
# 02_score_mask_lets_one_key_past_the_end rows-not-normalised on a third's (13f66b7: its short case failed too)
SEEDED = {"06_window_masked_after_the_max": 1, "02_normalised_each_step_without_the_old_sum": 0,
          "02_score_mask_lets_one_key_past_the_end": 0}
FINDINGS = {"read-past-end-unused", "extra-blocks", "write-past-end", "lower-bound-open"}  # of a right output
pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> dict[str, CheckResult]:
    written = mistakes.materialise(tmp_path_factory.mktemp("rounds"))
    files = {stem: written[stem] for stem in [*WANTED, *UNSAID] if stem not in SEEDED}
    results = check_files(list(files.values()))
    checked = {stem: results[path] for stem, path in files.items()}
    seeded = check_jobs([job(written[stem], seed=seed) for stem, seed in SEEDED.items()])
    return checked | dict(zip(SEEDED, seeded, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(WANTED))
def test_the_words_quote_the_measurement(checked, stem: str):
    code, phrases = WANTED[stem]
    result = checked[stem]
    assert result.passed == (code in FINDINGS), stem  # a finding comes with a right output
    said = {d.code: d.message for d in result.diagnosis}
    # "a|b": either may be said; the first of them said (in the tutor's preferred order) carries the words
    message = next((said[c] for c in code.split("|") if c in said), None)
    assert message is not None, [d.code for d in result.diagnosis]
    for phrase in phrases:  # "a || b": either (the inputs decide which measurement speaks first)
        assert any(alternative in message for alternative in phrase.split(" || ")), message


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(UNSAID))
def test_words_a_measurement_refutes_are_not_said(checked, stem: str):
    code, phrases = UNSAID[stem]
    said = {d.code: d.message for d in checked[stem].diagnosis}
    assert code in said, list(said)
    everything = " ".join(said.values())
    for phrase in phrases:  # in no message: a refuted cause is not said under another code either
        assert phrase not in everything, everything
