/**
 * @file trace_replay.hpp
 * @brief Replays a trace's allocation and free sequence through a pool, to compare pools on the
 * same recorded iteration.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/pool/pool.hpp>
#include <stash/trace/trace.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace stash {

/// @brief Allocates every storage of `t` at its alloc event and frees it at its free event, in
/// program order, on `stream`; storages never freed are freed after the last event. Returns the
/// pool's figures as they stood at the end of the iteration (before those final frees), so
/// `peak_reserved_bytes` is the footprint the pool needed for the iteration.
/// @tparam Pool The pool replayed: a stash::pool.
/// @param t The trace.
/// @param p The pool.
/// @param stream The stream every call names.
/// @return The figures at the end of the iteration.
template <pool_with_stats Pool>
pool_stats replay_trace(trace const& t, Pool& p, stream_ref stream = {})
{
  std::vector<void*> ptrs(t.storages().size(), nullptr);
  for (auto const& e : t.events()) {
    if (e.kind == event_kind::alloc) {
      ptrs[e.index] = pool_allocate(p, stream, t.storages()[e.index].bytes);
    } else if (e.kind == event_kind::free) {
      pool_deallocate(p, stream, ptrs[e.index], t.storages()[e.index].bytes);
      ptrs[e.index] = nullptr;
    }
  }
  pool_stats const at_end = p.stats();
  for (std::size_t id = 0; id < ptrs.size(); ++id) {
    if (ptrs[id] != nullptr) { pool_deallocate(p, stream, ptrs[id], t.storages()[id].bytes); }
  }
  return at_end;
}

}  // namespace stash
