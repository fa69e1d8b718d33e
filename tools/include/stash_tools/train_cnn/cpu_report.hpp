// train_cnn's CPU output: progress lines, the end summary, the --check verdict and --json, from
// cpu_run's figures (text a person follows; JSON with the same figures for scripts).
#pragma once

#include <stash_tools/train_cnn/cpu_run.hpp>

#include <stash/core/units.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>

namespace train_cnn {

/// @brief "3.10x" for source over encoded bytes, "-" when nothing completed.
[[nodiscard]] inline std::string ratio_of(memory_report const& m)
{
  if (m.bytes_encoded_source == 0 || m.bytes_encoded == 0) { return "-"; }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", double(m.bytes_encoded_source) / double(m.bytes_encoded));
  return buf;
}

/// @brief "zvc 6, bitmask 4, raw 2" (the planned encodings of one step), then "recompute 3" when
/// the plan recomputes.
[[nodiscard]] inline std::string encodings_text(plan_check const& p)
{
  std::string s;
  for (auto const& [name, n] : p.planned_encodings) {
    s += (s.empty() ? "" : ", ") + name + " " + std::to_string(n);
  }
  if (p.planned_recomputes > 0) {
    s += (s.empty() ? "" : ", ") + std::string("recompute ") + std::to_string(p.planned_recomputes);
  }
  return s.empty() ? "none" : s;
}

/// @brief One progress line.
[[nodiscard]] inline std::string progress_line(step_record const& s, long steps,
                                               std::string const& encodings)
{
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "step %ld/%ld: loss %.4f, train acc %.2f%%, %.1f ms/step, offloaded %s, "
                "prefetched %s, re-run %s (%llu ops), encodings per step: %s, ratio %s",
                s.step, steps, s.loss, 100.0 * s.accuracy, s.ms_per_step,
                stash::format_bytes(s.memory.bytes_offloaded).c_str(),
                stash::format_bytes(s.memory.bytes_prefetched).c_str(),
                stash::format_bytes(s.memory.recomputed_bytes).c_str(),
                static_cast<unsigned long long>(s.memory.recompute_ops), encodings.c_str(),
                ratio_of(s.memory).c_str());
  return buf;
}

/// @brief Why the test set was evaluated in smaller batches than training's, if it was.
[[nodiscard]] inline std::string eval_note(cpu_run_result const& r)
{
  if (r.test_accuracy < 0 || r.eval_batch <= 0 || r.eval_batch >= r.batch) { return ""; }
  return " (in batches of " + std::to_string(r.eval_batch) +
         ": evaluation is not planned by stash, and a forward pass of " + std::to_string(r.batch) +
         " does not fit the budget)";
}

/// @brief The end summary (several lines).
[[nodiscard]] inline std::string summary_text(cpu_run_result const& r,
                                              std::optional<std::uint64_t> budget)
{
  std::ostringstream o;
  char buf[1024];
  std::snprintf(
      buf, sizeof buf,
      "done: %ld steps in %.1f s (%.1f ms/step; CPU %.1f ms/step over all threads, %.1f in "
      "the training loop's); test accuracy %s%s\n"
      "  device bytes: recorded step %s (planner: no-offload peak %s, planned %s; %s in this "
      "run's order), "
      "peak while the budget held %s of %s%s\n"
      "  moved: %llu offloads (%s, stored as %s, ratio %s), %llu prefetches "
      "(%llu on demand), %llu decode failures\n"
      "  re-run: %llu storages rematerialised (%s) by %llu op re-runs, %llu kept resident "
      "instead\n"
      "  host pool: peak %s held by offloaded copies (%s reserved from host memory)\n",
      r.steps, r.seconds, 1e3 * r.seconds / double(std::max(1L, r.steps)),
      1e3 * r.cpu_seconds / double(std::max(1L, r.steps)),
      1e3 * r.loop_cpu_seconds / double(std::max(1L, r.steps)),
      r.test_accuracy < 0 ? "not measured"
                          : (std::to_string(100.0 * r.test_accuracy).substr(0, 5) + "%").c_str(),
      eval_note(r).c_str(), stash::format_bytes(r.recorded_peak).c_str(),
      stash::format_bytes(r.baseline_peak).c_str(), stash::format_bytes(r.planned_peak).c_str(),
      stash::format_bytes(r.run_order_peak).c_str(),
      stash::format_bytes(r.memory.enforced_peak).c_str(),
      budget ? stash::format_bytes(*budget).c_str() : "no budget",
      budget_held(r, budget) ? "" : " (EXCEEDED)",
      static_cast<unsigned long long>(r.memory.offloads),
      stash::format_bytes(r.memory.bytes_offloaded).c_str(),
      stash::format_bytes(r.memory.bytes_encoded).c_str(), ratio_of(r.memory).c_str(),
      static_cast<unsigned long long>(r.memory.prefetches),
      static_cast<unsigned long long>(r.memory.demand_prefetches),
      static_cast<unsigned long long>(r.memory.decode_failures),
      static_cast<unsigned long long>(r.memory.recomputes),
      stash::format_bytes(r.memory.recomputed_bytes).c_str(),
      static_cast<unsigned long long>(r.memory.recompute_ops),
      static_cast<unsigned long long>(r.memory.recompute_fallbacks),
      stash::format_bytes(r.memory.host_peak_in_use).c_str(),
      stash::format_bytes(r.memory.host_peak_reserved).c_str());
  o << buf;
  auto const& p = r.plan;
  std::snprintf(buf, sizeof buf,
                "  plan vs executed: %llu entries per step (%s) x %llu replayed steps = %llu%s; "
                "executed %llu offloads%s, %llu prefetches, %llu recomputes, %llu encoding "
                "fallbacks, %llu deviations: %s\n",
                static_cast<unsigned long long>(p.planned_entries + p.planned_recomputes),
                encodings_text(p).c_str(), static_cast<unsigned long long>(p.replayed_steps),
                static_cast<unsigned long long>((p.planned_entries + p.planned_recomputes) *
                                                p.replayed_steps),
                p.planned_wraps == 0 ? ""
                                     : (", and " + std::to_string(p.planned_wraps) +
                                        " wrap offloads closing the recorded step")
                                           .c_str(),
                static_cast<unsigned long long>(p.executed_offloads),
                p.planned_after_rerun == 0 && p.executed_redrops == 0
                    ? ""
                    : (" and " + std::to_string(p.executed_redrops) + " redrops (of " +
                       std::to_string(p.planned_after_rerun) +
                       " entries per step leaving again after a re-run read, " +
                       std::to_string(p.planned_redrops) + " redrops: no copy; " +
                       std::to_string(p.redrop_fallbacks) + " copied instead)")
                          .c_str(),
                static_cast<unsigned long long>(p.executed_prefetches),
                static_cast<unsigned long long>(p.executed_recomputes),
                static_cast<unsigned long long>(p.encoding_fallbacks),
                static_cast<unsigned long long>(p.deviations), p.matches() ? "equal" : "DIFFERENT");
  o << buf;
  return o.str();
}

/// @brief The run as one JSON object.
[[nodiscard]] inline std::string run_json(cpu_run_result const& r,
                                          std::optional<std::uint64_t> budget,
                                          std::optional<bool> check_passed = std::nullopt)
{
  std::ostringstream o;
  auto mem = [&](memory_report const& m) {
    o << "{\"offloads\":" << m.offloads << ",\"prefetches\":" << m.prefetches
      << ",\"demand_prefetches\":" << m.demand_prefetches
      << ",\"bytes_offloaded\":" << m.bytes_offloaded
      << ",\"bytes_prefetched\":" << m.bytes_prefetched << ",\"bytes_encoded\":" << m.bytes_encoded
      << ",\"bytes_encoded_source\":" << m.bytes_encoded_source
      << ",\"enforced_peak\":" << m.enforced_peak << ",\"budget_refusals\":" << m.budget_refusals
      << ",\"decode_failures\":" << m.decode_failures << ",\"recomputes\":" << m.recomputes
      << ",\"recompute_ops\":" << m.recompute_ops << ",\"recomputed_bytes\":" << m.recomputed_bytes
      << ",\"recompute_fallbacks\":" << m.recompute_fallbacks
      << ",\"host_peak_in_use\":" << m.host_peak_in_use
      << ",\"host_peak_reserved\":" << m.host_peak_reserved << "}";
  };
  o << "{\"policy\":\"" << r.policy_name << "\",\"steps\":" << r.steps
    << ",\"seconds\":" << r.seconds << ",\"cpu_seconds\":" << r.cpu_seconds
    << ",\"loop_cpu_seconds\":" << r.loop_cpu_seconds << ",\"test_accuracy\":" << r.test_accuracy
    << ",\"eval_batch\":" << r.eval_batch << ",\"recorded_peak\":" << r.recorded_peak
    << ",\"planned_peak\":" << r.planned_peak << ",\"run_order_peak\":" << r.run_order_peak
    << ",\"fits\":" << (r.fits ? "true" : "false")
    << ",\"budget\":" << (budget ? std::to_string(*budget) : std::string("null"))
    << ",\"budget_held\":" << (budget_held(r, budget) ? "true" : "false") << ",\"progress\":[";
  for (std::size_t i = 0; i < r.log.size(); ++i) {
    auto const& s = r.log[i];
    o << (i == 0 ? "" : ",") << "{\"step\":" << s.step << ",\"loss\":" << s.loss
      << ",\"accuracy\":" << s.accuracy << ",\"ms_per_step\":" << s.ms_per_step << ",\"memory\":";
    mem(s.memory);
    o << "}";
  }
  o << "],\"memory\":";
  mem(r.memory);
  auto const& p = r.plan;
  o << ",\"plan\":{\"entries_per_step\":" << p.planned_entries
    << ",\"wrap_entries\":" << p.planned_wraps << ",\"encodings\":{";
  bool first = true;
  for (auto const& [name, n] : p.planned_encodings) {
    o << (first ? "" : ",") << "\"" << name << "\":" << n;
    first = false;
  }
  o << "},\"replayed_steps\":" << p.replayed_steps
    << ",\"executed_offloads\":" << p.executed_offloads
    << ",\"redrops_per_step\":" << p.planned_redrops
    << ",\"after_rerun_per_step\":" << p.planned_after_rerun
    << ",\"executed_redrops\":" << p.executed_redrops
    << ",\"redrop_fallbacks\":" << p.redrop_fallbacks
    << ",\"executed_prefetches\":" << p.executed_prefetches
    << ",\"encoding_fallbacks\":" << p.encoding_fallbacks
    << ",\"recomputes_per_step\":" << p.planned_recomputes
    << ",\"executed_recomputes\":" << p.executed_recomputes
    << ",\"recompute_fallbacks\":" << p.recompute_fallbacks << ",\"deviations\":" << p.deviations
    << ",\"matches\":" << (p.matches() ? "true" : "false") << "}";
  if (check_passed) { o << ",\"check_passed\":" << (*check_passed ? "true" : "false"); }
  o << "}";
  return o.str();
}

}  // namespace train_cnn
