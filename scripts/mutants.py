#!/usr/bin/env python3
"""stash's mutation campaign: plants one-line bugs in include/stash, one at a time, and runs the
tests that include the mutated header against each.

NOT RUN IN CI: a full campaign compiles ~95 small test binaries (about two hours on 2 busy cores).
Run it before a release and whenever a component changes shape (a new planner, an API reshape):

    nice -n 10 python3 scripts/mutants.py -j 2 --report benchmarks/results/mutation.md

Other uses:
    python3 scripts/mutants.py --list                 # the mutants and the test files each gets
    python3 scripts/mutants.py --only pool.split_rest  # some mutants (ids, comma-separated)
    python3 scripts/mutants.py --only pool.split_rest --keep  # leave the private tree for a look

How it works. Each mutant is (file under include/stash, the exact text of the original line
(whitespace-trimmed; `context`, when given, is text that must occur within the 12 lines before,
to pick one of several equal lines), the replacement line). Line numbers are never used, so the
list survives edits elsewhere in a file; a mutant whose original line is gone or ambiguous is
reported `stale` (fix its entry). Mutants are applied to private copies of include/, tests/ and
tools/include/ under a temporary directory (one per job), never to the worktree, and reverted
after. For each mutant the test binary is built from tests/support/main.cpp and only the test
files (tests/<component>/*.cpp) nearest to the mutated header in the #include graph: those that
include it directly, or else those reaching it through the fewest headers (`tests` in an entry
overrides). -O1, no warnings, ccache when present. The binary runs with a timeout and doctest's
--abort-after=1. Outcomes:
    killed        a test failed (the first failing test case is named) or the binary crashed
    survived      every test passed: a missing test, unless the mutant is equivalent
    timeout       the run did not finish in --timeout seconds (counted as killed by a hang)
    build-failed  the mutant does not compile (a bad mutant: change it)
    equivalent    not run: the entry says why no test can tell it from the original
    stale         the original line is gone from the file, or matches more than once
"""
import argparse
import concurrent.futures
import datetime
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CUDA = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# Test folders stash_tests leaves out (tests/CMakeLists.txt).
EXCLUDED_TEST_DIRS = {"install", "support", "arch_check", "compile_fail", "rmm", "fuzz", "sanitizers"}


def m(mid, file, original, replacement, context=None, tests=None, equivalent=None):
    """One mutant: `original` is one whole line of `file` (trimmed), `replacement` its new text."""
    return dict(id=mid, file=file, original=original, replacement=replacement, context=context,
                tests=tests, equivalent=equivalent)


# The list. Spread over every component; each entry names what it breaks. Equivalent mutants
# carry the reason no test can tell them apart from the original.
ALLOCATOR_TESTS = ["tests/allocator/allocator_test.cpp",
                   "tests/allocator/allocator_deallocate_test.cpp"]
# Session 14's mutants (recompute execution, redrops, bounds): the test files nearest each, named
# here because the include graph would pick every test that reaches the public swap/ headers.
RECOMPUTE_TESTS = ["tests/allocator/recompute_replay_test.cpp",
                   "tests/allocator/recompute_transient_test.cpp"]
RSET_TESTS = ["tests/swap/recompute_set_test.cpp", "tests/swap/joint_search_test.cpp",
              "tests/swap/joint_greedy_test.cpp"]
REDROP_TESTS = ["tests/swap/joint_search_test.cpp"]
BOUND_TESTS = ["tests/swap/swap_bounds_test.cpp", "tests/swap/time_bound_cases_test.cpp"]
SIM_RC_TESTS = ["tests/sim/recompute_test.cpp", "tests/sim/simulator_test.cpp"]
KEPT_COPY_TESTS = ["tests/offload/offload_manager_test.cpp"]
# Session 28's mutants (code written since session 14: the greedy's excess index, the radix
# sort behind sort_by_first and storage_groups, search's local moves): the test files nearest each.
CLAMPED_TESTS = ["tests/swap/search_scale_test.cpp"]
SCHEDULE_TESTS = ["tests/swap/schedule_test.cpp"]
LATENCY_TESTS = ["tests/swap/latency_swaps_test.cpp"]
ADVANCE_TESTS = ["tests/swap/prefetch_advance_test.cpp"]
GREEDY_TESTS = ["tests/swap/search_scale_test.cpp", "tests/swap/joint_greedy_test.cpp"]
HOLD_TESTS = ["tests/swap/hold_split_test.cpp"]
LINK_TESTS = ["tests/swap/joint_greedy_test.cpp"]
SEED_TESTS = ["tests/swap/search_scale_test.cpp", "tests/swap/joint_search_test.cpp"]
MUTANTS = [
    # --- core
    m("core.align_up_plus_one", "core/units.hpp",
      "return (value + alignment - 1) & ~(alignment - 1);",
      "return (value + alignment) & ~(alignment - 1);"),
    m("core.is_pow2_zero", "core/units.hpp",
      "return value != 0 && (value & (value - 1)) == 0;", "return (value & (value - 1)) == 0;"),
    m("core.align_down_mask", "core/units.hpp",
      "return value & ~(alignment - 1);", "return value & ~alignment;"),
    m("core.limiting_budget_ge", "core/limiting_upstream.hpp",
      "if (bytes > s.budget - s.in_use) {", "if (bytes >= s.budget - s.in_use) {"),
    m("core.virtual_no_refund", "core/virtual_upstream.hpp",
      "state_->in_use -= std::min(bytes, state_->in_use);", "(void)bytes;"),
    # --- trace
    m("trace.free_keeps_live", "trace/lifetime.hpp",
      "live -= storages[event.index].bytes;  // a trace only frees live storages",
      "(void)0;  // mutant: the free is not counted"),
    m("trace.live_at_peak_closed", "trace/lifetime.hpp",
      "if (life.alloc_event <= peak && peak < life.end_event) {",
      "if (life.alloc_event <= peak && peak <= life.end_event) {",
      equivalent="the peak event is the allocation that raised live bytes to the peak (or event 0, "
                 "before any free), and an end event is a free or the event count: never equal, "
                 "so < and <= select the same storages"),
    m("trace.reader_free_unknown_id", "trace/trace_reader.hpp",
      "if (id >= count) {", "if (id > count) {", context="expect_end(rest, 'f');"),
    m("trace.interval_end_plus_one", "trace/lifetime.hpp",
      "intervals[event.index].end = e;", "intervals[event.index].end = e + 1;"),
    # --- pool
    m("pool.arena_last_offset_zero", "pool/lifetime_arena.hpp",
      "off = plan_.offsets[recorded_[k].slot];",
      "off = k + 1 == recorded_.size() ? 0 : plan_.offsets[recorded_[k].slot];"),
    m("pool.arena_settle_strict", "pool/lifetime_arena.hpp",
      "if (settled_ >= options_.settle_iterations && overdue_.empty() && arena_live_ == 0) {",
      "if (settled_ > options_.settle_iterations && overdue_.empty() && arena_live_ == 0) {"),
    m("pool.arena_no_fence", "pool/lifetime_arena.hpp",
      "if (stream != stream_) { fence(p, block, stream); }", "(void)0;"),
    m("pool.arena_overdue_half_overlap", "pool/lifetime_arena.hpp",
      "return offset < o.offset + o.size && o.offset < offset + size;",
      "return offset < o.offset + o.size && o.offset < offset;"),
    m("pool.split_rest_strict", "pool/caching_pool.hpp",
      "bool const split = small_segment || options_.split_large_segments ? rest >= options_.rounding",
      "bool const split = small_segment || options_.split_large_segments ? rest > options_.rounding"),
    m("pool.caching_in_use_requested", "pool/caching_pool.hpp",
      "in_use_ -= b.size;", "in_use_ -= b.requested;"),
    m("pool.caching_no_coalesce_next", "pool/caching_pool.hpp",
      "if (next != blocks_.end() && next->first == it->first + it->second.size && mergeable(next)) {",
      "if (false) {"),
    m("pool.caching_cross_stream_reuse", "pool/caching_pool.hpp",
      "if (b->second.stream == stream || tracked_passed(order_, b->second.marker)) { return b; }",
      "if (true) { return b; }"),
    m("pool.greedy_exact_gap_skipped", "pool/greedy_planner.hpp",
      "if (gap >= size[b] && gap < best_gap) {", "if (gap > size[b] && gap < best_gap) {"),
    m("pool.lower_bound_end_after_begin", "pool/plan.hpp",
      "events.push_back({{b.end, 0}, size});", "events.push_back({{b.end, 2}, size});"),
    m("pool.checker_touching_clash", "pool/plan_checker.hpp",
      "if (prev->first + sizes[prev->second] > lo) { clash = prev->second; }",
      "if (prev->first + sizes[prev->second] >= lo) { clash = prev->second; }"),
    m("pool.checker_footprint_no_size", "pool/plan_checker.hpp",
      "if (p.offsets[i] + sizes[i] > p.footprint) {", "if (p.offsets[i] > p.footprint) {"),
    # --- codec host references and formats
    m("codec.zvc_chunks_floor", "codec/detail/zvc_format.hpp",
      "l.chunks     = (n + zvc_chunk_elements - 1) / zvc_chunk_elements;",
      "l.chunks     = n / zvc_chunk_elements;"),
    m("codec.bitmask_zero_positive", "codec/detail/bitmask_format.hpp",
      "return bits - 1u < 0x7f800000u;", "return bits < 0x7f800000u;"),
    m("codec.bitmask_trailing_bit", "codec/detail/bitmask_format.hpp",
      "if ((last >> (n % 32)) != 0) {", "if ((last >> (n % 32)) > 1) {"),
    m("codec.rle_chunks_plus_one", "codec/detail/rle_format.hpp",
      "return (n + rle_chunk_elements - 1) / rle_chunk_elements;",
      "return n / rle_chunk_elements + 1;"),
    m("codec.header_payload_bound", "codec/detail/format.hpp",
      "if (h.payload > src_bytes - header_bytes) { return {codec_errc::truncated_payload, off_payload}; }",
      "if (h.payload > src_bytes) { return {codec_errc::truncated_payload, off_payload}; }"),
    m("codec.checksum_ignored", "codec/detail/format.hpp",
      "if ((h.flags & flag_checksum) != 0 && fnv1a32(src + header_bytes, h.payload) != h.checksum) {",
      "if (false) {"),
    m("codec.minifloat_ties_down", "codec/detail/minifloat.hpp",
      "mag += (1u << (shift - 1)) - 1u + lsb;  // round to nearest, ties to even",
      "mag += (1u << (shift - 1)) - 1u;"),
    m("codec.csr_duplicate_column", "codec/detail/csr_format.hpp",
      "if (col >= width || (k > k0 && col <= static_cast<std::uint8_t>(src[l.cols_off + k - 1]))) {",
      "if (col >= width || (k > k0 && col < static_cast<std::uint8_t>(src[l.cols_off + k - 1]))) {"),
    # --- sim
    m("sim.op_time_min", "sim/cost_model.hpp",
      "return hw_.kernel_launch_s + std::max(memory, compute);",
      "return hw_.kernel_launch_s + std::min(memory, compute);"),
    m("sim.prefetch_no_decode", "sim/cost_model.hpp",
      "return h2d_time(bytes, e) + decode_time(bytes, e);", "return h2d_time(bytes, e);"),
    m("sim.validate_prefetch_at_last_use", "sim/schedule.hpp",
      "if (!(e.last_use < e.prefetch_at && e.prefetch_at <= e.next_use)) {",
      "if (!(e.last_use <= e.prefetch_at && e.prefetch_at <= e.next_use)) {"),
    m("sim.validate_offload_eq_prefetch", "sim/schedule.hpp",
      "if (e.offload_at >= e.prefetch_at) {", "if (e.offload_at > e.prefetch_at) {"),
    m("sim.window_one_short", "sim/schedule.hpp",
      "delta[w.last + 1] += static_cast<std::int64_t>(e.bytes);",
      "delta[w.last] += static_cast<std::int64_t>(e.bytes);"),
    m("sim.memory_block_ge", "sim/simulator.hpp",
      "if (need > budget_ || used_ > budget_ - need) {  // blocked until the next release",
      "if (need > budget_ || used_ >= budget_ - need) {"),
    m("sim.h2d_turn_strict", "sim/simulator.hpp",
      "bool const h2d_turn = h <= c;", "bool const h2d_turn = h < c;"),
    # --- swap
    m("swap.gap_prefetch_one_late", "swap/detail/gap_planner.hpp",
      "e.prefetch_at = p;", "e.prefetch_at = std::min<std::uint64_t>(p + 1, e.next_use);"),
    m("swap.gap_needs_two_ops", "swap/detail/gap_planner.hpp",
      "if (v < u + 2) { continue; }", "if (v < u + 3) { continue; }"),
    m("swap.gap_select_at_target", "swap/detail/gap_planner.hpp",
      "if (cur[worst] <= target) { return; }", "if (cur[worst] < target) { return; }"),
    m("swap.gap_prune_ignores_bytes", "swap/detail/gap_planner.hpp",
      "for (auto j = c.u + 1; j < c.v && !needed; ++j) { needed = cur[j] + b > target; }",
      "for (auto j = c.u + 1; j < c.v && !needed; ++j) { needed = cur[j] > target; }"),
    m("swap.bound_gap_without_op", "swap/swap_bounds.hpp",
      "if (v < u + 2) { continue; }", "if (v < u + 1) { continue; }",
      equivalent="the only gaps it adds have v = u + 1, whose delta[u + 1] += bytes and "
                 "delta[v] -= bytes land on the same index and cancel: offloadable_bytes is "
                 "unchanged (the dropped-one-op-gap mutant swap.bound_skips_one_op_gap is not)"),
    m("swap.bound_skips_one_op_gap", "swap/swap_bounds.hpp",
      "if (v < u + 2) { continue; }", "if (v < u + 3) { continue; }"),
    m("swap.bound_back_one_early", "swap/swap_bounds.hpp",
      "delta[v] -= static_cast<std::int64_t>(s.bytes);",
      "delta[v - 1] -= static_cast<std::int64_t>(s.bytes);"),
    m("swap.vdnn_no_room_ge", "swap/vdnn.hpp",
      "if (std::max(a, u) + 1 > v) { continue; }  // no room for a prefetch after the offload",
      "if (std::max(a, u) + 1 >= v) { continue; }"),
    m("swap.refine_memory_move_at_stall", "swap/search_swap.hpp",
      "entries[*k].prefetch_at = stall.op + 1;", "entries[*k].prefetch_at = stall.op;"),
    m("swap.search_fits_strict", "swap/search_swap.hpp",
      "if (analysis.peak_live_bytes() <= budget) {", "if (analysis.peak_live_bytes() < budget) {"),
    # --- offload manager and host backend
    m("offload.encode_no_order_after_producer", "offload/offload_manager.hpp",
      "order_after(d2h_, stream);", "(void)stream;", context="void queue_encode"),
    m("offload.acquire_no_wait", "offload/offload_manager.hpp",
      "backend_.wait(stream, e.ready);", "(void)0;"),
    m("offload.prefetch_no_wait_host_copy", "offload/offload_manager.hpp",
      "backend_.wait(h2d_, e.host_ready);", "(void)0;"),
    m("offload.device_freed_on_compute_stream", "offload/offload_manager.hpp",
      "give_back(pool_side::device, device, e.bytes, d2h_);",
      "give_back(pool_side::device, device, e.bytes, stream);"),
    m("offload.refresh_without_query", "offload/offload_manager.hpp",
      "if (e.state == tensor_state::offloading && backend_.query(e.host_ready)) {",
      "if (e.state == tensor_state::offloading) {"),
    m("offload.release_keeps_host_copy", "offload/offload_manager.hpp",
      "if (e.host != nullptr) { give_back(pool_side::host, e.host, slot_bytes(e.capacity), d2h_); }",
      "(void)0;"),
    m("offload.host_backend_wait_dropped", "offload/backend/host_backend.hpp",
      "s->enqueue([e] { e->wait(); });", "(void)s;"),
    m("offload.host_order_wait_dropped", "offload/backend/host_backend.hpp",
      "h->enqueue([m] { m->wait(); });", "(void)h;"),
    m("offload.offload_not_counted", "offload/offload_manager.hpp",
      "++stats_.offloads;", "(void)0;"),
    # --- allocator facade
    m("allocator.deallocate_no_release", "allocator.hpp",
      "manager_.deallocate_async(t.handle);", "(void)t.handle;", tests=ALLOCATOR_TESTS),
    m("allocator.offload_at_last_use", "allocator.hpp",
      "offloads_by_op_[std::min(e.last_use - first_op_ + 1, recorded_ops_)].push_back(",
      "offloads_by_op_[std::min(e.last_use - first_op_, recorded_ops_)].push_back(", tests=ALLOCATOR_TESTS),
    m("allocator.prefetch_one_late", "allocator.hpp",
      "prefetches_by_op_[std::min(e.prefetch_at - first_op_, recorded_ops_)].push_back(e.id);",
      "prefetches_by_op_[std::min(e.prefetch_at - first_op_ + 1, recorded_ops_)].push_back(e.id);",
      tests=ALLOCATOR_TESTS),
    m("allocator.match_ignores_size", "allocator.hpp",
      "if (k < recorded_allocs_ && recording_->storages()[first_storage_ + k].bytes == bytes) {",
      "if (k < recorded_allocs_) {", tests=ALLOCATOR_TESTS),
    m("allocator.deviation_ignores_allocs", "allocator.hpp",
      "if (op_index_ != recorded_ops_ || alloc_index_ != recorded_allocs_) { deviated_ = true; }",
      "if (op_index_ != recorded_ops_) { deviated_ = true; }", tests=ALLOCATOR_TESTS),
    m("allocator.encoding_fallback_inverted", "allocator.hpp",
      "if (wanted != swap_encoding::raw) { ++stats_.encoding_fallbacks; }",
      "if (wanted == swap_encoding::raw) { ++stats_.encoding_fallbacks; }",
      tests=["tests/allocator/allocator_encodings_test.cpp"]),
    # --- projection
    m("projection.ring_half_bytes", "projection/projection.hpp",
      "return 2.0 * (nd - 1.0) * ring.latency_s + 2.0 * (nd - 1.0) / nd * bytes / ring.bytes_per_s;",
      "return 2.0 * (nd - 1.0) * ring.latency_s + (nd - 1.0) / nd * bytes / ring.bytes_per_s;"),
    m("projection.pipeline_bubble", "projection/projection.hpp",
      "cfg.pipeline_s       = static_cast<double>(cfg.micro_batches + k - 1) * slowest;",
      "cfg.pipeline_s       = static_cast<double>(cfg.micro_batches + k) * slowest;"),
    m("projection.steps_per_epoch_floor", "projection/projection.hpp",
      "cfg.steps_per_epoch  = (params.dataset_samples + cfg.global_batch - 1) / cfg.global_batch;",
      "cfg.steps_per_epoch  = params.dataset_samples / cfg.global_batch;"),
    m("projection.epochs_interpolation_sign", "projection/projection.hpp",
      "return a.epochs + w * (b.epochs - a.epochs);", "return a.epochs + w * (a.epochs - b.epochs);"),
    # --- session 14: recompute execution, redrops and kept host copies, recompute sets, bounds,
    # the simulator's and the validator's recompute handling, issue 24's bookkeeping
    m("sim.rc_peak_no_transient", "sim/simulator.hpp",
      "r_.device_peak = std::max(r_.device_peak, used_ + recomputes_[k].bytes + rc_transient_[k]);",
      "r_.device_peak = std::max(r_.device_peak, used_ + recomputes_[k].bytes);", tests=SIM_RC_TESTS),
    m("sim.rc_no_wait_rerun_prefetch", "sim/simulator.hpp",
      "return !e.wrap && e.next_use < n_ && !is_access(a_, e.id, e.next_use);", "return false;", tests=SIM_RC_TESTS),
    m("sim.redrop_copies", "sim/simulator.hpp",
      "if (e.redrop) {  // nothing copied: dropped now (late) or after the batch (early)",
      "if (false) {", tests=SIM_RC_TESTS),
    m("sim.rc_early_released_late", "sim/simulator.hpp",
      "(early_departure(a_, recomputes_[k]) ? early_rc : late_rc).push_back(k);",
      "late_rc.push_back(k);", tests=SIM_RC_TESTS),
    m("sched.rc_at_last_use", "sim/schedule.hpp",
      "if (!(e.last_use < e.at && e.at <= e.next_use)) {",
      "if (!(e.last_use <= e.at && e.at <= e.next_use)) {", tests=SIM_RC_TESTS),
    m("sched.rc_reads_later_in_batch", "sim/schedule.hpp",
      "if (j >= k) { return std::nullopt; }", "(void)0;", tests=SIM_RC_TESTS),
    m("sched.redrop_encoding_unchecked", "sim/schedule.hpp",
      "s.entries[list[j - 1]].encoding != cur.encoding)) {", "false)) {", tests=SIM_RC_TESTS),
    m("core.checked_align_up_edge", "core/units.hpp",
      "if (value > std::numeric_limits<std::uint64_t>::max() - (alignment - 1)) { return std::nullopt; }",
      "if (value >= std::numeric_limits<std::uint64_t>::max() - (alignment - 1)) { return std::nullopt; }",
      tests=["tests/core/units_test.cpp", "tests/pool/huge_size_test.cpp"]),
    m("pool.caching_pad_wraps", "pool/caching_pool.hpp",
      "if (bytes > std::numeric_limits<std::size_t>::max() - pad) { throw_oom(bytes); }", "(void)0;",
      tests=["tests/pool/huge_size_test.cpp"]),
    m("bound.wrap_tail_at_last", "swap/swap_bounds.hpp",
      "delta[s.accesses.back().op + 1] += static_cast<std::int64_t>(s.bytes);",
      "delta[s.accesses.back().op] += static_cast<std::int64_t>(s.bytes);", tests=BOUND_TESTS),
    m("bound.wrap_not_subtracted", "swap/swap_bounds.hpp",
      "if (scope == swap_scope::any_kind_wrap) { bound -= wrappable_bytes(analysis); }",
      "(void)0;", tests=BOUND_TESTS),
    m("bound.time_inf_at_bound", "swap/swap_bounds.hpp",
      "if (budget < memory_lower_bound_bytes(analysis, options.wrap)) {",
      "if (budget <= memory_lower_bound_bytes(analysis, options.wrap)) {", tests=BOUND_TESTS),
    m("tbound.gap_active_at_u", "swap/detail/time_bound.hpp",
      "for (; next < g.gaps.size() && g.gaps[next].u < i; ++next) {",
      "for (; next < g.gaps.size() && g.gaps[next].u <= i; ++next) {", tests=BOUND_TESTS),
    m("tbound.gap_active_at_v", "swap/detail/time_bound.hpp",
      "std::erase_if(active, [&](std::uint32_t k) { return g.gaps[k].v <= i; });",
      "std::erase_if(active, [&](std::uint32_t k) { return g.gaps[k].v < i; });",
      tests=BOUND_TESTS),
    m("tbound.rerun_ignores_after", "swap/detail/time_bound.hpp",
      "double const rerun = r.bytes_within(t - tau - w.after);",
      "double const rerun = r.bytes_within(t - tau);", tests=BOUND_TESTS),
    m("tbound.first_writer_may_read", "swap/detail/time_bound.hpp",
      "if ((first && x.read) || !recomputable(a.recompute_classes()[x.op])) { return false; }",
      "if (!recomputable(a.recompute_classes()[x.op])) { return false; }", tests=BOUND_TESTS),
    m("rset.overlap_touching", "swap/detail/recompute_set.hpp",
      "return l1 < n2 && l2 < n1;", "return l1 <= n2 && l2 < n1;", tests=RSET_TESTS),
    m("rset.away_wrap_at_first_use", "swap/detail/recompute_set.hpp",
      "return l < n ? l < at && at <= n : at > l || at <= n;",
      "return l < n ? l < at && at <= n : at > l || at < n;", tests=RSET_TESTS,
      equivalent="a wrap entry's next_use n is its storage's first access, and away_at is asked "
                 "only for storages a chain reads, at the chain's `at`: the chain's op that reads "
                 "the storage comes before `at`, so n < at, and at <= n and at < n are both false"),
    m("rset.swap_ignores_readers", "swap/detail/recompute_set.hpp",
      "if (away_at(e.last_use, e.next_use, items_[k].e.at)) { return false; }", "(void)k;",
      tests=RSET_TESTS),
    m("rset.same_batch_order", "swap/detail/recompute_set.hpp",
      "if (x.e.at == e.at && c.ops.front() >= x.first_op) { return false; }",
      "if (x.e.at == e.at && c.ops.front() > x.first_op) { return false; }", tests=RSET_TESTS),
    m("redrop.copy_before_rebuild", "swap/detail/redrop_planner.hpp",
      "swap_entry second{c.id, c.p, c.q, rebuilt ? c.p + 1 : c.p, 0, c.bytes};",
      "swap_entry second{c.id, c.p, c.q, c.p, 0, c.bytes};", tests=REDROP_TESTS),
    m("redrop.no_prior_swap", "swap/detail/redrop_planner.hpp",
      "if (e.next_use == c.p) { c.prior_swap = k; }", "(void)0;", tests=REDROP_TESTS),
    m("offload.redrop_keeps_kept_flag", "offload/offload_manager.hpp",
      "e.kept   = false;", "(void)0;", context="backend_.release(e.ready);", tests=KEPT_COPY_TESTS),
    m("offload.offload_keeps_kept_copy", "offload/offload_manager.hpp",
      "if (e.kept) { free_kept_copy(h, e); }  // a new copy replaces it (it is the same value)",
      "(void)0;", tests=KEPT_COPY_TESTS),
    m("offload.released_slot_not_reused", "offload/offload_manager.hpp",
      "if (++e.generation != 0) { free_slots_.push_back(h.index()); }", "++e.generation;", tests=["tests/offload/manager_robustness_test.cpp"]),
    m("facade.table_no_early_departure", "detail/recompute_replay.hpp",
      "if (early_departure(a, e)) {", "if (false) {", tests=RECOMPUTE_TESTS),
    m("facade.depart_before_reruns", "allocator.hpp",
      "if (recomputes) { rematerialise_at(j, stream); }",
      "if (recomputes) { depart_after_run(j, stream); rematerialise_at(j, stream); }",
      tests=RECOMPUTE_TESTS),
    m("facade.adopted_reruns_shared_ops", "allocator.hpp",
      "if (adopted &&", "if (false &&", tests=RECOMPUTE_TESTS),
    m("facade.write_keeps_host_copy", "allocator.hpp",
      "manager_.discard_host_copy(t.handle);", "(void)t.handle;", tests=RECOMPUTE_TESTS),
    m("facade.foreign_handle_accepted", "allocator.hpp",
      "if (h.owner() != manager_.owner_tag()) {", "if (h.is_null()) {",
      tests=["tests/allocator/allocator_robustness_test.cpp"]),
    # --- session 28: clamped_sums (the joint greedy's excess index)
    m("cs.block_d_unsaturated", "swap/detail/clamped_sums.hpp",
      "d_[k] = d_[k] + d < d ? top : d_[k] + d;", "d_[k] = d_[k] + d;", tests=CLAMPED_TESTS),
    m("cs.full_b_wraps", "swap/detail/clamped_sums.hpp",
      "if (d + b >= d && least >= d + b) { return b * len; }  // every value is b or more",
      "if (least >= d + b) { return b * len; }", tests=CLAMPED_TESTS),
    m("cs.part_wraps", "swap/detail/clamped_sums.hpp",
      "auto const part = d + b < d || most < d + b ? len : count_below(key, len, d + b);",
      "auto const part = most < d + b ? len : count_below(key, len, d + b);", tests=CLAMPED_TESTS),
    m("cs.update_at_last_only", "swap/detail/clamped_sums.hpp",
      "differs = differs || this->at(at[end]) != v[end];",
      "differs = this->at(at[end]) != v[end];", tests=CLAMPED_TESTS),
    m("cs.all_zero_at_d", "swap/detail/clamped_sums.hpp",
      "if (bounds_[k].second > d_[k]) { return false; }",
      "if (bounds_[k].second >= d_[k]) { return false; }", tests=CLAMPED_TESTS),
    m("cs.part_sum_rest_from_c1", "swap/detail/clamped_sums.hpp",
      "return block_sum(k, b, hi - lo) - walk(k, lo, a, b) - walk(k, c, hi, b);",
      "return block_sum(k, b, hi - lo) - walk(k, lo, a, b) - walk(k, c + 1, hi, b);",
      tests=CLAMPED_TESTS),
    # --- session 28: stable_radix_sort (sort_by_first, storage_groups, the redrop repair)
    m("radix.digit_mask_7bit", "core/radix_sort.hpp",
      "if ((((any ^ every) >> shift) & 0xffU) == 0) { continue; }",
      "if ((((any ^ every) >> shift) & 0x7fU) == 0) { continue; }", tests=SCHEDULE_TESTS),
    m("radix.low_32_bits", "core/radix_sort.hpp",
      "for (unsigned shift = 0; shift < 64; shift += 8) {",
      "for (unsigned shift = 0; shift < 32; shift += 8) {", tests=SCHEDULE_TESTS),
    m("groups.one_group", "sim/schedule.hpp",
      "if (k == 0 || pairs[k - 1].first != id) {", "if (k == 0) {", tests=SCHEDULE_TESTS),
    # --- session 28: search's local moves
    m("latency.share_with_latency", "swap/detail/latency_swaps.hpp",
      "share[k] = (model.h2d_time(sw[k].bytes, sw[k].encoding) - latency) / latency;",
      "share[k] = model.h2d_time(sw[k].bytes, sw[k].encoding) / latency;", tests=LATENCY_TESTS),
    m("latency.reused_by_last_use", "swap/detail/latency_swaps.hpp",
      "!std::binary_search(reused.begin(), reused.end(), std::pair{e.id, e.next_use});",
      "!std::binary_search(reused.begin(), reused.end(), std::pair{e.id, e.last_use});",
      tests=LATENCY_TESTS),
    m("padv.floor_at_offload", "swap/detail/prefetch_advance.hpp",
      "auto const floor = std::max(e.last_use, e.offload_at) + 1;  // prefetch_at's least value",
      "auto const floor = std::max(e.last_use, e.offload_at);", tests=ADVANCE_TESTS),
    m("padv.queue_ignores_gaps", "swap/detail/prefetch_advance.hpp",
      "if (p == 0 || end[p - 1] < start[p]) { break; }", "if (p == 0) { break; }",
      tests=ADVANCE_TESTS),
    # --- session 28: the joint greedy's excess index, the chain memo, search's seeding
    m("jg.range_last_excluded", "swap/detail/joint_greedy.hpp",
      "return {lo, std::max(lo, from(last + 1))};", "return {lo, std::max(lo, from(last))};",
      tests=GREEDY_TESTS),
    m("jg.refresh_last_wins", "swap/detail/joint_greedy.hpp",
      "if (k > 0 && dirty[k - 1].first == dirty[k].first) { continue; }  // `now` came first",
      "(void)0;", tests=GREEDY_TESTS),
    m("jg.pull_fixes_unapplied", "swap/detail/joint_greedy.hpp",
      "for (auto const& f : ex.fixes) { ex.curve.add(f.from, f.to, f.bytes); }", "(void)0;",
      tests=GREEDY_TESTS),
    m("jg.upto_end_unset", "swap/detail/joint_greedy.hpp",
      "upto[ex.size()] = m;", "(void)m;", tests=GREEDY_TESTS,
      equivalent="upto's end slot is read only by from(e) for e >= the event count, and no caller "
                 "passes such an e: a candidate's window (and a placed swap's) ends at the event of "
                 "op prefetch_at - 1 or at - 1, at most op v - 1 with v a use of the storage, so "
                 "before the last op's event (range() asks from(last + 1) <= that event); "
                 "refresh and pull_reset ask events of the curve. Session 29: mutation.md"),
    m("memo.key_ignores_at", "sim/recompute_chain.hpp",
      "auto const key = std::make_tuple(id, last_use, at);",
      "auto const key = std::make_tuple(id, last_use, last_use);",
      tests=["tests/sim/recompute_test.cpp"]),
    m("seed.no_batch_repair", "swap/joint_search.hpp",
      "if (r.out->peak > budget_) { r.batch = build(w, r, true); }", "(void)0;",
      tests=SEED_TESTS),
    m("seed.no_early_feed_back", "swap/joint_search.hpp",
      "if (i == at_budget && lead_) { feed_back(); }", "(void)0;", tests=SEED_TESTS),
    # --- session 28: held re-run splits, the link exchange
    m("hs.covers_touching_gap", "swap/detail/hold_split.hpp",
      "if ((*it)[1] < v && u < (*it)[2]) { return true; }",
      "if ((*it)[1] <= v && u <= (*it)[2]) { return true; }", tests=HOLD_TESTS),
    m("hs.drops_unstalled_swaps", "swap/detail/hold_split.hpp",
      "return std::binary_search(stalled.begin(), stalled.end(), std::pair{s.id, s.next_use});",
      "return true;", tests=HOLD_TESTS),
    m("link.displaces_redrops", "swap/detail/link_exchange.hpp",
      "if (e.wrap || e.redrop) { continue; }", "if (e.wrap) { continue; }", tests=LINK_TESTS),
    m("link.prefetch_at_offload", "swap/detail/link_exchange.hpp",
      "while (pre > r.last_use + 2 && a.op_start(r.next_use) - a.op_start(pre) < link_s(r.bytes)) {",
      "while (pre > r.last_use + 1 && a.op_start(r.next_use) - a.op_start(pre) < link_s(r.bytes)) {",
      tests=LINK_TESTS),
]


# ----------------------------------------------------------------------------- include graph

def includes_of(path):
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return INCLUDE_RE.findall(text)


def resolve(inc, including, tree):
    """The file an #include names, inside `tree` (None for system headers)."""
    for base in (tree / "include", tree / "tests", tree / "tools" / "include", including.parent):
        p = base / inc
        if p.is_file():
            return p.resolve()
    return None


def test_sources(tree):
    out = []
    for p in sorted((tree / "tests").glob("*/*.cpp")):
        if p.parent.name not in EXCLUDED_TEST_DIRS:
            out.append(p)
    return out


def distance_to(header, source, tree, cache):
    """Headers crossed from `source` to `header` (0: direct include), None if it never gets there."""
    key = (header, source)
    if key in cache:
        return cache[key]
    seen = {source.resolve()}
    frontier = [source.resolve()]
    depth = 0
    while frontier:
        nxt = []
        for f in frontier:
            for inc in includes_of(f):
                r = resolve(inc, f, tree)
                if r is None or r in seen:
                    continue
                if r == header:
                    cache[key] = depth
                    return depth
                seen.add(r)
                nxt.append(r)
        frontier = nxt
        depth += 1
    cache[key] = None
    return None


def tests_for(mutant, tree, cache):
    if mutant["tests"]:
        return [tree / t for t in mutant["tests"]]
    header = (tree / "include" / "stash" / mutant["file"]).resolve()
    dist = {}
    for src in test_sources(tree):
        d = distance_to(header, src, tree, cache)
        if d is not None:
            dist[src] = d
    if not dist:
        return []
    # The header's own component's tests first (tests/pool/ for pool/...): a campaign that compiled
    # every test reaching a core header would rebuild the whole suite per mutant.
    parts = pathlib.PurePosixPath(mutant["file"]).parts
    component = parts[0] if len(parts) > 1 else {"allocator.hpp": "allocator"}.get(parts[0], "core")
    own = {s: d for s, d in dist.items() if s.parent.name == component}
    pick = own or dist
    # A detail/ header is mostly tested through the public header that includes it: one more
    # step of the include graph.
    reach = min(pick.values()) + (1 if "detail" in parts else 0)
    return sorted(s for s, d in pick.items() if d <= reach)


# ----------------------------------------------------------------------------- mutation

def find_line(lines, mutant):
    """Index of the mutant's original line, or an error string."""
    want = mutant["original"].strip()
    hits = [i for i, line in enumerate(lines) if line.strip() == want]
    if mutant["context"]:
        hits = [i for i in hits
                if any(mutant["context"] in lines[j] for j in range(max(0, i - 12), i + 1))]
    if len(hits) != 1:
        return f"original line found {len(hits)} times"
    return hits[0]


def mutate(text, mutant):
    lines = text.split("\n")
    i = find_line(lines, mutant)
    if isinstance(i, str):
        return None, i
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + mutant["replacement"]
    return "\n".join(lines), i + 1


# ----------------------------------------------------------------------------- building

def compiler():
    cxx = os.environ.get("CXX", "c++")
    launcher = [shutil.which("ccache")] if shutil.which("ccache") else []
    return launcher + [cxx]


def compile_flags(tree):
    return ["-std=gnu++20", "-O1", "-g0", "-w",
            "-DLIBCUDACXX_ENABLE_EXPERIMENTAL_MEMORY_RESOURCE",
            "-DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_CUDA",
            "-DTHRUST_HOST_SYSTEM=THRUST_HOST_SYSTEM_CPP",
            f'-DSTASH_DATA_DIR="{ROOT / "data"}"',
            "-DSTASH_PROJECT_VERSION_MAJOR=0", "-DSTASH_PROJECT_VERSION_MINOR=1",
            "-DSTASH_PROJECT_VERSION_PATCH=0",
            f"-I{tree / 'tests'}", f"-I{tree / 'include'}", f"-I{CUDA / 'include' / 'cccl'}",
            f"-I{tree / 'tools' / 'include'}", "-isystem", str(CUDA / "include")]


def link_flags():
    lib = CUDA / "lib"
    if not lib.is_dir():
        lib = CUDA / "lib64"
    return [f"-L{lib}", f"-Wl,-rpath,{lib}", "-lcudart", "-pthread"]


def run(cmd, timeout=None, cwd=None):
    env = dict(os.environ)
    env.setdefault("CCACHE_BASEDIR", "/work")
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=timeout, cwd=cwd, env=env)


def compile_one(src, obj, tree):
    r = run(compiler() + compile_flags(tree) + ["-c", str(src), "-o", str(obj)])
    return r.returncode == 0, r.stdout


FAILED_CASE = re.compile(r"^TEST CASE:\s+(.*)$", re.M)
FAILED_FILE = re.compile(r"^(\S+\.cpp):\d+:", re.M)


FAILED_CHECK = re.compile(r"^(\S+\.cpp):\d+: (FATAL )?ERROR:", re.M)


def first_failure(output):
    """The test case of the first failed check ("file: case"); doctest also heads MESSAGE output
    with "TEST CASE:", so the case is the last header before the first ERROR line."""
    err = FAILED_CHECK.search(output)
    end = err.start() if err else len(output)
    cases = FAILED_CASE.findall(output[:end])
    name = cases[-1].strip() if cases else "?"
    where = err or FAILED_FILE.search(output)
    if where:
        name = f"{pathlib.Path(where.group(1)).name}: {name}"
    return name


def evaluate(mutant, tree, main_obj, timeout, keep_dir):
    """Applies, builds, runs and reverts one mutant in `tree`; returns a result dict."""
    res = dict(id=mutant["id"], file=mutant["file"], tests=[], line=None, outcome=None, detail="",
               seconds=0.0)
    if mutant["equivalent"]:
        res.update(outcome="equivalent", detail=mutant["equivalent"])
        return res
    header = tree / "include" / "stash" / mutant["file"]
    original = header.read_text()
    mutated, line = mutate(original, mutant)
    if mutated is None:
        res.update(outcome="stale", detail=line)
        return res
    res["line"] = line
    cache = {}
    sources = tests_for(mutant, tree, cache)
    res["tests"] = [str(s.relative_to(tree)) for s in sources]
    if not sources:
        res.update(outcome="stale", detail="no test file includes the header")
        return res
    start = time.monotonic()
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"{mutant['id']}.", dir=keep_dir))
    try:
        header.write_text(mutated)
        objs = []
        main_includes = distance_to(header.resolve(), tree / "tests" / "support" / "main.cpp",
                                    tree, cache) is not None
        srcs = list(sources) + ([tree / "tests" / "support" / "main.cpp"] if main_includes else [])
        for src in srcs:
            obj = work / (src.stem + ".o")
            ok, out = compile_one(src, obj, tree)
            if not ok:
                err = next((l for l in out.splitlines() if "error" in l), out[:200])
                res.update(outcome="build-failed", detail=err.strip()[:300])
                return res
            objs.append(obj)
        if not main_includes:
            objs.append(main_obj)
        binary = work / "tests"
        r = run(compiler() + [str(o) for o in objs] + ["-o", str(binary)] + link_flags())
        if r.returncode != 0:
            res.update(outcome="build-failed", detail="link: " + r.stdout[:300])
            return res
        try:
            r = run([str(binary), "--abort-after=1", "--no-version"], timeout=timeout, cwd=work)
        except subprocess.TimeoutExpired:
            res.update(outcome="timeout", detail=f"no result within {timeout} s")
            return res
        if r.returncode == 0:
            res.update(outcome="survived")
        elif r.returncode < 0:
            res.update(outcome="killed", detail=f"crash (signal {-r.returncode})")
        else:
            res.update(outcome="killed", detail=first_failure(r.stdout))
        return res
    finally:
        header.write_text(original)
        res["seconds"] = time.monotonic() - start
        if not keep_dir:
            shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------- driver

def make_tree(dest):
    """A private copy of what the test binaries are built from."""
    for part in ("include", "tests", "tools/include"):
        shutil.copytree(ROOT / part, dest / part, symlinks=True,
                        ignore=shutil.ignore_patterns("*.o", "corpus", "regressions"))
    return dest


def git(*args):
    return run(["git", "-C", str(ROOT)] + list(args)).stdout.strip()


def write_report(path, results, args, started, elapsed, commit, load0):
    counts = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    load = os.getloadavg()
    lines = ["# Mutation campaign", "",
             "Generated by scripts/mutants.py (its header says how it works). Not run in CI: it "
             "compiles one small test binary per mutant. Run it before a release and whenever a "
             "component changes shape:", "",
             "```sh",
             "export CCACHE_BASEDIR=/work CCACHE_DIR=/work/.ccache   # optional: a shared ccache",
             "nice -n 10 python3 scripts/mutants.py -j 2 --report benchmarks/results/mutation.md",
             "python3 scripts/mutants.py --list                      # mutants and their test files",
             "python3 scripts/mutants.py --only ID[,ID...]           # some of them again",
             "```", "",
             f"- command: `nice -n 10 python3 scripts/mutants.py {' '.join(sys.argv[1:])}`",
             f"- date: {started:%Y-%m-%d %H:%M} UTC, {elapsed / 60:.1f} min wall",
             f"- machine: {os.uname().nodename}, {os.cpu_count()} cores, "
             f"load average at the start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, "
             f"at the end {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}",
             f"- commit: {commit} (the tree the mutants were applied to, copied at the start)",
             f"- mutants: {len(results)}; "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), "",
             "| id | file | line | outcome | killed by / reason | test files | s |",
             "|---|---|---|---|---|---|---|"]
    for r in results:
        tests = ", ".join(pathlib.Path(t).name for t in r["tests"])
        detail = r["detail"].replace("|", "\\|")
        lines.append(f"| {r['id']} | {r['file']} | {r['line'] or ''} | {r['outcome']} | "
                     f"{detail} | {tests} | {r['seconds']:.0f} |")
    pathlib.Path(path).write_text("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel mutants (at most 2 here)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per test run")
    ap.add_argument("--only", help="comma-separated mutant ids (or id prefixes ending in '*')")
    ap.add_argument("--list", action="store_true", help="print the mutants and their test files")
    ap.add_argument("--keep", action="store_true", help="keep the private trees and binaries")
    ap.add_argument("--report", help="write a markdown report here")
    ap.add_argument("--test-files",
                    help="build every selected mutant against these test files instead "
                         "(comma-separated, relative to the repository, e.g. to check that a "
                         "new test kills a mutant on its own)")
    ap.add_argument("--run-equivalent", action="store_true",
                    help="also run the mutants marked equivalent")
    args = ap.parse_args()

    mutants = MUTANTS
    ids = [mu["id"] for mu in mutants]
    assert len(ids) == len(set(ids)), "duplicate mutant ids"
    if args.only:
        wanted = args.only.split(",")
        mutants = [mu for mu in mutants
                   if any(mu["id"] == w or (w.endswith("*") and mu["id"].startswith(w[:-1]))
                          for w in wanted)]
    if args.run_equivalent:
        mutants = [dict(mu, equivalent=None) for mu in mutants]
    if args.test_files:
        mutants = [dict(mu, tests=args.test_files.split(",")) for mu in mutants]
    if args.list:
        cache = {}
        for mu in mutants:
            lines = (ROOT / "include" / "stash" / mu["file"]).read_text().split("\n")
            where = find_line(lines, mu)
            srcs = tests_for(mu, ROOT, cache)
            print(f"{mu['id']:34} {mu['file']}:{where if isinstance(where, str) else where + 1}"
                  f"  {'EQUIVALENT ' if mu['equivalent'] else ''}"
                  f"[{', '.join(str(s.relative_to(ROOT)) for s in srcs)}]")
        return 0

    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    load0 = os.getloadavg()
    dirty = git("status", "--porcelain", "--", "include", "tests", "tools/include")
    commit = git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if dirty else "")
    base = pathlib.Path(tempfile.mkdtemp(prefix="stash-mutants."))
    jobs = max(1, min(args.jobs, 2))
    trees = [make_tree(base / f"tree{j}") for j in range(jobs)]
    main_obj = base / "main.o"
    ok, out = compile_one(trees[0] / "tests" / "support" / "main.cpp", main_obj, trees[0])
    if not ok:
        print(out)
        return 2
    free = list(trees)
    results = []
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            pending = {}
            queue = list(mutants)
            while queue or pending:
                while queue and free:
                    mu = queue.pop(0)
                    tree = free.pop()
                    fut = pool.submit(evaluate, mu, tree, main_obj, args.timeout,
                                      base if args.keep else None)
                    pending[fut] = tree
                done, _ = concurrent.futures.wait(pending, return_when="FIRST_COMPLETED")
                for fut in done:
                    free.append(pending.pop(fut))
                    r = fut.result()
                    results.append(r)
                    print(f"{r['outcome']:12} {r['id']:34} {r['seconds']:6.0f} s  {r['detail']}",
                          flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept {base}")
    order = {mu["id"]: i for i, mu in enumerate(MUTANTS)}
    results.sort(key=lambda r: order[r["id"]])
    counts = {}
    for r in results:
        counts[r["outcome"]] = counts.get(r["outcome"], 0) + 1
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.report:
        write_report(args.report, results, args, started, time.monotonic() - t0, commit, load0)
    return 1 if counts.get("survived") or counts.get("build-failed") or counts.get("stale") else 0


if __name__ == "__main__":
    sys.exit(main())
