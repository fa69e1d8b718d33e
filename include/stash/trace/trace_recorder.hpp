/**
 * @file trace_recorder.hpp
 * @brief Records a stash::trace from a running training loop: allocations, frees, ops and phase
 * markers in program order.
 *
 * The recorder is what a user's loop (or an allocator hook) drives during one iteration; the
 * trace it builds is the same one read_trace produces from the file that write() emits.
 */
#pragma once

#include <stash/trace/recompute_semantics.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_writer.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace stash {

/// @brief Builds a trace event by event. Misuse (freeing an unknown or freed id, an op on a
/// freed id, a bad name or label) throws stash::logic_error and leaves the recording unchanged.
class trace_recorder {
 public:
  trace_recorder() = default;

  /// @brief Adds a header entry (e.g. "model", "resnet18"); see trace::add_header for the rules.
  /// @param key The key.
  /// @param value The value.
  /// @throws stash::logic_error As trace::add_header.
  void set_header(std::string key, std::string value)
  {
    trace_.add_header(std::move(key), std::move(value));
  }

  /// @brief Declares whether every op called `op_name` may be re-run (recompute_semantics.hpp);
  /// e.g. `yes` for `aten::bernoulli_.float` when the loop can replay the generator's state.
  /// Only `yes`, `no` and `skip_state` may be declared (stash::logic_error otherwise).
  /// @param op_name The ops' name.
  /// @param c The class.
  /// @throws stash::logic_error For `rng`.
  void declare_recompute(std::string const& op_name, recompute_class c)
  {
    STASH_EXPECTS(c != recompute_class::rng, "declare_recompute: declare yes, no or skip_state");
    trace_.add_header(std::string(recompute_name_key) + op_name, std::string(to_string(c)));
  }

  /// @brief Declares whether op `op` (an index returned by op(), or one to come) may be re-run;
  /// wins over a declaration by name. Only `yes`, `no` and `skip_state` may be declared.
  /// @param op The op index.
  /// @param c The class.
  /// @throws stash::logic_error For `rng`.
  void declare_recompute(std::uint64_t op, recompute_class c)
  {
    STASH_EXPECTS(c != recompute_class::rng, "declare_recompute: declare yes, no or skip_state");
    trace_.add_header(std::string(recompute_index_key) + std::to_string(op),
                      std::string(to_string(c)));
  }

  /// @brief Records an allocation and returns its id (0, 1, 2, ... in call order).
  /// @param bytes The size.
  /// @param kind The kind.
  /// @param label A label (see trace::add_alloc).
  /// @return The storage id.
  /// @throws stash::logic_error As trace::add_alloc.
  storage_id allocate(std::uint64_t bytes, storage_kind kind, std::string label = {})
  {
    return trace_.add_alloc(bytes, kind, std::move(label));
  }

  /// @brief Records the free of a live storage.
  /// @param id The storage.
  /// @throws stash::logic_error As trace::add_free.
  void deallocate(storage_id id) { trace_.add_free(id); }

  /// @brief Records an op reading and writing live storages; returns its op index.
  /// @param name The op's name.
  /// @param reads Storages it reads.
  /// @param writes Storages it writes.
  /// @return The op index.
  /// @throws stash::logic_error As trace::add_op.
  std::uint64_t op(std::string name, std::vector<storage_id> reads, std::vector<storage_id> writes)
  {
    return trace_.add_op(std::move(name), std::move(reads), std::move(writes));
  }

  /// @brief Records the start of a phase.
  /// @param p The phase.
  void phase(stash::phase p) { trace_.add_phase(p); }

  /// @brief The trace recorded so far.
  /// @return The trace.
  [[nodiscard]] stash::trace const& trace() const& noexcept { return trace_; }
  /// @brief Moves the recorded trace out of a recorder that is done.
  /// @return The trace.
  [[nodiscard]] stash::trace trace() && noexcept { return std::move(trace_); }

  /// @brief Writes the recording as a v1 trace file (see write_trace).
  /// @param path The file.
  /// @throws stash::trace_error As write_trace.
  void write(std::filesystem::path const& path) const { write_trace(path, trace_); }

 private:
  stash::trace trace_;
};

}  // namespace stash
