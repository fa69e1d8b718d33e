// Compiled by ctest (compile_fail.*), never linked: filling a stash::allocator slot with a type
// that lacks a customization point (or a pool whose stream order cannot serve the backend) must
// stop at a static_assert naming the slot, the concept and what is missing. STASH_MISUSE picks
// the case.

#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>

#include <cstddef>

namespace {

// Pool-like, but with the old stream-only spelling and no alignment.
struct old_shaped_pool {
  void* allocate(std::size_t, void*) { return nullptr; }
  void deallocate(void*, std::size_t, void*) {}
  bool operator==(old_shaped_pool const&) const { return true; }
};

// A policy without name().
struct nameless_policy {
  [[nodiscard]] stash::schedule plan(stash::trace_analysis const&, std::uint64_t) const
  {
    return {};
  }
};

}  // namespace

#if STASH_MISUSE == 1
template class stash::allocator<old_shaped_pool, stash::no_swap, void, stash::host_backend>;
#elif STASH_MISUSE == 2
template class stash::allocator<stash::caching_pool<stash::host_upstream>, nameless_policy, void,
                                stash::host_backend>;
#elif STASH_MISUSE == 3
// A pool that orders nothing (immediate_order, caching_pool<host_upstream>'s default) under a
// backend whose worker threads still use memory after it was freed.
template class stash::allocator<stash::caching_pool<stash::host_upstream>, stash::no_swap, void,
                                stash::host_backend>;
#elif STASH_MISUSE == 4
// A codec on cuda_backend without its device form in sight (device_codec_transfer.cuh and
// device_zvc.cuh not included): the Codec slot says what to include.
template class stash::allocator<stash::default_pool_t<stash::cuda_backend>, stash::no_swap,
                                stash::zvc<float>, stash::cuda_backend>;
#else
// The control: well-formed slots compile, a codec in the Codec slot as its host form.
template class stash::allocator<stash::caching_pool<stash::host_upstream, stash::host_stream_order>,
                                stash::no_swap, void, stash::host_backend>;
template class stash::allocator<stash::default_pool_t<stash::host_backend>, stash::no_swap,
                                stash::zvc<float>, stash::host_backend>;
#endif
