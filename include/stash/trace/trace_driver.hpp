/**
 * @file trace_driver.hpp
 * @brief `stash::trace_driver`: replays a recorded training step through a stash::allocator (or
 * anything with its interface), iteration after iteration, to see what a configuration of pool,
 * swap policy and codec does with a real program's allocation sequence before running it.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stash {

/// @brief Replays trace `t` through an allocator: storages allocated before the first phase
/// marker once (persistent), the rest once per iteration, each op handed to the allocator with
/// its reads and writes.
///
/// Sizes are divided by `scale` (rounded down to a multiple of 4 bytes, at least 4) so that real
/// traces fit a test machine. Hooks let the caller put data into tensors and check it:
/// `on_allocate(storage, tensor, persistent)` after each allocation, `on_op(op, pointers)` after
/// each op with the pointers the allocator returned (reads first, then writes).
/// @tparam Allocator The allocator driven (a stash::allocator or one with its interface).
template <class Allocator>
class trace_driver {
 public:
  /// @brief The allocator's stream type.
  using stream_type = typename Allocator::stream_type;
  /// @brief What the allocator's allocate_async() returns to name a tensor (stash::tensor_handle).
  using tensor_type = std::remove_cvref_t<decltype(std::declval<Allocator&>().allocate_async(
      std::size_t{}, storage_kind{}, std::string{}, std::declval<stream_type>()))>;
  /// @brief Called after each op with the allocator's pointers (reads, then writes).
  using op_hook = std::function<void(op_record const&, std::span<void* const>)>;
  /// @brief Called after each allocation with the allocator's tensor.
  using allocate_hook = std::function<void(storage_id, tensor_type tensor, bool persistent)>;

  /// @brief A driver of `alloc` over `t` (both outlive it), tensors `scale` times smaller.
  /// @param alloc The allocator driven.
  /// @param t The trace replayed.
  /// @param stream The stream every call names.
  /// @param scale Divides every storage's size (>= 1).
  /// @throws stash::logic_error For a scale of 0.
  trace_driver(Allocator& alloc, trace const& t, stream_type stream, std::uint64_t scale = 1)
      : alloc_(alloc), trace_(t), stream_(stream), scale_(scale), id_of_(t.storages().size())
  {
    STASH_EXPECTS(scale >= 1, "trace_driver: scale must be at least 1");
    auto const events = t.events();
    while (first_iteration_event_ < events.size() &&
           events[first_iteration_event_].kind != event_kind::phase) {
      ++first_iteration_event_;
    }
  }

  /// @brief The bytes storage `s` gets (its recorded size, scaled).
  /// @param s The storage.
  /// @return Its scaled size.
  [[nodiscard]] std::size_t bytes_of(storage_id s) const
  {
    return std::max<std::uint64_t>(4, trace_.storages()[s].bytes / scale_ / 4 * 4);
  }

  /// @brief Bytes of the persistent storages (those allocated before the first phase), scaled.
  /// @return The bytes.
  [[nodiscard]] std::uint64_t persistent_bytes() const
  {
    std::uint64_t sum = 0;
    for (std::size_t k = 0; k < first_iteration_event_; ++k) {
      auto const& e = trace_.events()[k];
      if (e.kind == event_kind::alloc) { sum += bytes_of(e.index); }
    }
    return sum;
  }

  /// @brief Sets the hook run after each op.
  /// @param hook Called after each op.
  void on_op(op_hook hook) { on_op_ = std::move(hook); }
  /// @brief Sets the hook run after each allocation.
  /// @param hook Called after each allocation.
  void on_allocate(allocate_hook hook) { on_allocate_ = std::move(hook); }

  /// @brief Runs `iterations` iterations (the persistent storages are allocated on the first call).
  /// @param iterations How many.
  void run(int iterations)
  {
    if (!persistent_done_) {
      persistent_done_ = true;
      for (std::size_t k = 0; k < first_iteration_event_; ++k) { event(trace_.events()[k], true); }
    }
    for (int it = 0; it < iterations; ++it) {
      alloc_.begin_iteration();
      for (std::size_t k = first_iteration_event_; k < trace_.events().size(); ++k) {
        event(trace_.events()[k], false);
      }
      alloc_.end_iteration();
    }
  }

 private:
  void event(trace_event const& e, bool persistent)
  {
    switch (e.kind) {
      case event_kind::phase:
        alloc_.phase(e.phase_value());
        break;
      case event_kind::alloc: {
        auto const& st  = trace_.storages()[e.index];
        id_of_[e.index] = alloc_.allocate_async(bytes_of(e.index), st.kind, st.label, stream_);
        if (on_allocate_) { on_allocate_(e.index, *id_of_[e.index], persistent); }
        break;
      }
      case event_kind::free:
        alloc_.deallocate_async(*id_of_[e.index]);
        break;
      case event_kind::op: {
        auto const& op = trace_.ops()[e.index];
        reads_.clear();
        writes_.clear();
        for (auto s : op.reads) { reads_.push_back(*id_of_[s]); }
        for (auto s : op.writes) { writes_.push_back(*id_of_[s]); }
        auto const pointers = alloc_.op(op.name, reads_, writes_, stream_);
        if (on_op_) { on_op_(op, pointers); }
        break;
      }
    }
  }

  Allocator& alloc_;
  trace const& trace_;
  stream_type stream_;
  std::uint64_t scale_;
  std::vector<std::optional<tensor_type>> id_of_;  // the live tensor of each storage
  std::vector<tensor_type> reads_;
  std::vector<tensor_type> writes_;
  std::size_t first_iteration_event_{0};
  bool persistent_done_{false};
  op_hook on_op_;
  allocate_hook on_allocate_;
};

}  // namespace stash
