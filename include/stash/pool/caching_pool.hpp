/**
 * @file caching_pool.hpp
 * @brief An online, stream-ordered caching pool in the spirit of cnmem and PyTorch's caching
 * allocator: the fallback of stash's lifetime arena, and the baseline it is measured against.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/core/misuse.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/pool_resource.hpp>
#include <stash/pool/stream_order.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

namespace stash {

/// @brief The stream order a pool uses by default: CUDA events where the upstream's memory is
/// device accessible (device work may be using it), nothing for plain host memory.
/// @tparam Upstream The upstream of the pool.
template <class Upstream>
using default_stream_order_t =
    std::conditional_t<Upstream::is_device_accessible, cuda_event_order, immediate_order>;

/// @brief Tuning of a caching_pool; the defaults are PyTorch's documented ones.
struct caching_pool_options {
  std::size_t rounding       = 512;       ///< every request is rounded up to this (power of two)
  std::size_t small_limit    = 1 * MiB;   ///< requests up to this come from small segments
  std::size_t small_segment  = 2 * MiB;   ///< size of a small segment
  std::size_t medium_limit   = 10 * MiB;  ///< requests below this come from medium segments
  std::size_t medium_segment = 20 * MiB;  ///< size of a medium segment
  std::size_t large_rounding = 2 * MiB;   ///< larger requests get a segment of their own, rounded
  /// Blocks of every segment split down to the rounding (the pinned host pool, whose reserved
  /// segments hold many tensors); otherwise a block of a segment larger than small_segment splits
  /// only while more than small_limit would remain.
  bool split_large_segments = false;
  std::size_t budget        = std::numeric_limits<std::size_t>::max();  ///< cap on reserved bytes
};

/// @brief Best-fit caching pool over segments taken from `Upstream`.
///
/// Requests are rounded to `rounding`; free blocks are kept in a set ordered by size and the
/// smallest that fits is split (small segments split down to the rounding; blocks of larger
/// segments only when more than `small_limit` would remain, which keeps large segments from
/// shattering, unless `split_large_segments`). Freed blocks coalesce with free neighbours of the
/// same segment. A block freed on stream A is reused on A at once and on another stream only once
/// `Order` says A's work queued before the free has finished. When a segment would exceed the
/// budget or the upstream is full, fully free segments are returned to the upstream and the request
/// retried. If it still does not fit but a free block that would is pending on another stream
/// (its last use not finished yet, e.g. an offload's copy), and `Order` can make a stream wait,
/// the request stalls instead of failing: `stream` is made to wait for that block's marker (on the
/// device, the host does not block; host_stream_order's default stream is the calling thread,
/// which blocks) and gets the block, counted in stalls(). Whether a request
/// succeeds then depends on what the caller freed, not on whether a copy happens to have finished
/// by now. Otherwise stash::out_of_memory is thrown and the pool is unchanged.
/// While `stream` is being captured into a CUDA graph (where `Order` can tell, e.g.
/// cuda_event_order) the upstream is not touched: a request the cached blocks cannot serve throws
/// stash::logic_error and changes nothing; reserve() before capturing. Blocks start on 256 B (the
/// upstream's alignment, or the rounding if smaller); a larger alignment, up to a page, is served
/// from a block padded by the difference. Freeing never throws and allocates nothing (a wrong free
/// goes to the misuse handler, core/misuse.hpp). Not thread safe.
///
/// Strong guarantee: a request that throws (out_of_memory, logic_error, or std::bad_alloc from
/// the pool's own bookkeeping) leaves the blocks, the counters and the upstream as they were
/// (cached segments it gave back to the upstream to make room stay given back). Every bookkeeping
/// node a request may need is allocated before anything changes, and a new segment's nodes
/// before the upstream is asked for it.
/// @tparam Upstream Where blocks come from: a stash::upstream_resource.
/// @tparam Order How the pool knows a stream's work on a block has finished: a stash::stream_order.
/// @tparam NodeAllocator Allocates the bookkeeping's map and set nodes (host memory; rebound per
///   container; default constructible, all instances equal). std::allocator unless a test
///   injects a std::bad_alloc.
template <upstream_resource Upstream, stream_order Order = default_stream_order_t<Upstream>,
          class NodeAllocator = std::allocator<std::byte>>
class caching_pool : public pool_resource<caching_pool<Upstream, Order, NodeAllocator>> {
 public:
  /// @brief Whether the host may touch the memory (it may for host and pinned upstreams).
  static constexpr bool is_host_accessible = Upstream::is_host_accessible;
  /// @brief Whether device code may touch the memory.
  static constexpr bool is_device_accessible = Upstream::is_device_accessible;
  STASH_POOL_PROPERTIES(caching_pool, Upstream::is_device_accessible, Upstream::is_host_accessible)

  /// @brief A pool over `upstream` with `options`; `order` tracks cross-stream reuse.
  /// @param upstream Where segments come from.
  /// @param options Sizes, budget and rounding.
  /// @param order The stream order's state.
  explicit caching_pool(Upstream upstream = Upstream{}, caching_pool_options options = {},
                        Order order = Order{})
      : upstream_(std::move(upstream)), options_(options), order_(std::move(order))
  {
    STASH_EXPECTS(is_pow2(options_.rounding), "caching_pool: rounding must be a power of two");
    STASH_EXPECTS(is_pow2(options_.large_rounding) && options_.large_rounding >= options_.rounding,
                  "caching_pool: large_rounding must be a power of two >= rounding");
  }

  caching_pool(caching_pool const&)            = delete;
  caching_pool& operator=(caching_pool const&) = delete;

  /// @brief Returns every segment to the upstream (outstanding blocks included). Never throws.
  ~caching_pool()
  {
    for (auto& [addr, b] : blocks_) { order_.release(b.marker.value); }
    for (auto const& [base, size] : segments_) {
      upstream_.deallocate(reinterpret_cast<void*>(base), size, cuda_allocation_alignment);
    }
  }

  /// @brief Stream-ordered allocation of `bytes` (nullptr for 0) aligned to `alignment`; see the
  /// class docs. (pool_resource adds allocate_async and the other cuda::mr spellings over it.)
  /// @param bytes Size.
  /// @param alignment A power of two up to 4096.
  /// @param stream The stream the memory is used on.
  /// @return The memory, or nullptr for 0 bytes.
  /// @throws stash::out_of_memory Beyond the budget or when the upstream is exhausted.
  /// @throws stash::logic_error For a request its cached blocks cannot serve while `stream` is
  ///   being captured (pool_resource's allocate_async checks the alignment first).
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_ref stream)
  {
    if (bytes == 0) { return nullptr; }
    std::size_t const size = rounded(bytes, padding(alignment));
    auto found             = find_free(size, stream);
    spare_nodes spare;
    if (found == blocks_.end()) {
      refuse_if_capturing(bytes, stream);
      // The block is not known yet: every node the request may need, before the upstream call.
      spare = make_spare(padding(alignment) != 0, true);
      found = grow_or_stall(bytes, size, stream);
    } else {
      spare = make_spare(align_up(found->first, alignment) != found->first, splits(found, size));
    }
    // Nothing below throws: the pool changes only now.
    return take(found, size, bytes, alignment, stream, std::move(spare));
  }

  /// @brief Returns memory from allocate(); it may be reused once `stream`'s queued work is done.
  /// Never throws: an unknown pointer, another size or another alignment than allocated goes to
  /// the misuse handler (core/misuse.hpp) and changes nothing.
  /// @param p Memory from this pool.
  /// @param bytes Its size.
  /// @param alignment Its alignment.
  /// @param stream The stream of its last use.
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, stream_ref stream) noexcept
  {
    if (p == nullptr && bytes == 0) { return; }
    auto const user = reinterpret_cast<std::uintptr_t>(p);
    auto it         = find_live(user);
    if (!detail::free_matches("caching_pool", p, bytes, alignment,
                              it == blocks_.end() ? nullptr : &it->second, &block::requested)) {
      return;
    }
    if (user != it->first) { aligned_.erase(user); }
    marker_type marker = record_marker(stream);
    block& b           = it->second;
    auto node          = std::move(b.node);
    in_use_ -= b.size;
    b.free      = true;
    b.requested = 0;
    b.alignment = 0;
    b.stream    = stream;
    b.marker    = std::move(marker);
    it          = coalesce(it, b.marker.captured);
    insert_free(std::move(node), it->second.size, it->first);
  }

  /// @brief Current figures (largest_free_bytes counts cached blocks only).
  /// @return The figures.
  [[nodiscard]] pool_stats stats() const
  {
    pool_stats s;
    s.in_use_bytes        = in_use_;
    s.peak_in_use_bytes   = peak_in_use_;
    s.reserved_bytes      = reserved_;
    s.peak_reserved_bytes = peak_reserved_;
    s.largest_free_bytes  = free_.empty() ? 0 : free_.rbegin()->first;
    s.budget_bytes        = options_.budget;
    s.allocations         = allocations_;
    s.fallbacks           = 0;
    return s;
  }

  /// @brief Returns fully free segments whose last use has finished to the upstream; the bytes
  /// released.
  /// @return Bytes given back to the upstream.
  std::size_t release_cached()
  {
    std::size_t released = 0;
    for (auto seg = segments_.begin(); seg != segments_.end();) {
      auto it = blocks_.find(seg->first);
      if (it != blocks_.end() && it->second.free && it->second.size == seg->second &&
          tracked_passed(order_, it->second.marker)) {
        order_.release(it->second.marker.value);
        free_.erase({it->second.size, it->first});
        blocks_.erase(it);
        upstream_.deallocate(reinterpret_cast<void*>(seg->first), seg->second,
                             cuda_allocation_alignment);
        reserved_ -= seg->second;
        released += seg->second;
        seg = segments_.erase(seg);
      } else {
        ++seg;
      }
    }
    return released;
  }

  /// @brief Takes a segment of at least `bytes` from the upstream now, so later allocations up to
  /// that size need no upstream call (e.g. none while a CUDA graph is being captured).
  /// @param bytes Size of the segment.
  /// @throws stash::out_of_memory When the budget or the upstream cannot give it.
  void reserve(std::size_t bytes)
  {
    if (bytes == 0) { return; }
    (void)grow(bytes, rounded(bytes, 0));
  }

  /// @brief Requests that found no room and were served a block pending on another stream,
  /// ordered after it (see the class docs): memory stalls instead of out_of_memory.
  /// @return The number of such requests.
  [[nodiscard]] std::uint64_t stalls() const noexcept { return stalls_; }

  /// @brief Changes the cap on reserved bytes (a lower cap applies to future growth only).
  /// @param budget The new cap.
  void set_budget(std::size_t budget) noexcept { options_.budget = budget; }

  /// @brief The options in use.
  /// @return The options.
  [[nodiscard]] caching_pool_options const& options() const noexcept { return options_; }
  /// @brief The upstream segments come from.
  /// @return The upstream.
  [[nodiscard]] Upstream& upstream() noexcept { return upstream_; }
  /// @brief The stream-order policy (tests use it to finish work on a stream).
  /// @return The order.
  [[nodiscard]] Order& order() noexcept { return order_; }

 private:
  // A block freed while its stream was being captured keeps a marker that is never queried.
  using marker_type = tracked_marker<Order>;

  template <class T>
  using node_allocator = typename std::allocator_traits<NodeAllocator>::template rebind_alloc<T>;
  using free_key       = std::pair<std::size_t, std::uintptr_t>;  // (size, address)
  using free_set       = std::set<free_key, std::less<free_key>, node_allocator<free_key>>;
  template <class Value>
  using address_map = std::map<std::uintptr_t, Value, std::less<std::uintptr_t>,
                               node_allocator<std::pair<std::uintptr_t const, Value>>>;

  struct block {
    std::size_t size{0};
    std::uintptr_t segment{0};
    bool free{false};
    std::size_t requested{0};
    std::size_t alignment{0};  // as allocated (0 while free)
    stream_ref stream{nullptr};
    marker_type marker{};
    // A live block keeps the node of its free-set entry, so freeing it allocates nothing (a
    // noexcept free cannot report a failed allocation).
    typename free_set::node_type node{};
  };
  using block_map  = std::map<std::uintptr_t, block, std::less<std::uintptr_t>,
                             node_allocator<std::pair<std::uintptr_t const, block>>>;
  using block_iter = typename block_map::iterator;

  // The nodes a request may insert, allocated before the pool changes (inserting a node
  // allocates nothing): a split's remainder block and its free-set entry, an over-aligned start.
  struct spare_nodes {
    typename block_map::node_type remainder;
    typename free_set::node_type remainder_free;
    typename address_map<std::uintptr_t>::node_type aligned;
  };

  // One node of a container like `like`, holding a value made of `args`.
  template <class Container, class... Args>
  static typename Container::node_type make_node(Container const& like, Args&&... args)
  {
    Container one(like.get_allocator());
    one.emplace(std::forward<Args>(args)...);
    return one.extract(one.begin());
  }

  spare_nodes make_spare(bool aligned, bool split) const
  {
    spare_nodes spare;
    if (split) {
      spare.remainder      = make_node(blocks_, std::uintptr_t{0}, block{});
      spare.remainder_free = make_node(free_, free_key{0, 0});
    }
    if (aligned) { spare.aligned = make_node(aligned_, std::uintptr_t{0}, std::uintptr_t{0}); }
    return spare;
  }

  // Whether taking `size` bytes of the free block `it` splits off its remainder.
  [[nodiscard]] bool splits(block_iter it, std::size_t size) const
  {
    bool const small_segment = segments_.at(it->second.segment) == options_.small_segment;
    std::size_t const rest   = it->second.size - size;
    return small_segment || options_.split_large_segments ? rest >= options_.rounding
                                                          : rest > options_.small_limit;
  }

  // Blocks start at a segment base (aligned to cuda_allocation_alignment by the upstream) plus a
  // multiple of the rounding.
  [[nodiscard]] std::size_t block_alignment() const noexcept
  {
    return std::min(cuda_allocation_alignment, options_.rounding);
  }

  // Bytes an allocation at `alignment` needs beyond its size: the block holds an aligned start.
  [[nodiscard]] std::size_t padding(std::size_t alignment) const noexcept
  {
    return alignment > block_alignment() ? alignment - block_alignment() : 0;
  }

  // The live block handed out at `user` (its start, or an aligned address inside it).
  block_iter find_live(std::uintptr_t user)
  {
    auto it = blocks_.find(user);
    if (it != blocks_.end() && !it->second.free && it->second.requested != 0) { return it; }
    auto const inner = aligned_.find(user);
    if (inner == aligned_.end()) { return blocks_.end(); }
    it = blocks_.find(inner->second);
    return it != blocks_.end() && !it->second.free ? it : blocks_.end();
  }

  void insert_free(typename free_set::node_type node, std::size_t size, std::uintptr_t addr)
  {
    if (node.empty()) {
      free_.insert({size, addr});
      return;
    }
    node.value() = {size, addr};
    free_.insert(std::move(node));
  }

  // A marker for a free on `stream`; when the order cannot record one (or tell whether the stream
  // is capturing), a marker that never passes: the block is reused on its own stream only.
  marker_type record_marker(stream_ref stream) noexcept
  {
    try {
      bool const captured = order_capturing(order_, stream);
      return marker_type{order_.record(stream), captured};
    } catch (std::exception const& e) {
      std::fprintf(stderr,
                   "stash: caching_pool: no stream-order marker for a free (%s); the block is "
                   "reused on its own stream only\n",
                   e.what());
      return marker_type{{}, true};
    }
  }

  bool passed_nothrow(marker_type const& m) noexcept
  {
    try {
      return tracked_passed(order_, m);
    } catch (...) {
      return false;
    }
  }

  block_iter find_free(std::size_t size, stream_ref stream)
  {
    for (auto it = free_.lower_bound({size, 0}); it != free_.end(); ++it) {
      auto b = blocks_.find(it->second);
      if (b->second.stream == stream || tracked_passed(order_, b->second.marker)) { return b; }
    }
    return blocks_.end();
  }

  // The smallest free block of at least `size` whose last use is still pending on its stream
  // (blocks freed while capturing excluded: their marker is never waited for).
  block_iter find_pending(std::size_t size)
  {
    for (auto it = free_.lower_bound({size, 0}); it != free_.end(); ++it) {
      auto b = blocks_.find(it->second);
      if (!b->second.marker.captured) { return b; }
    }
    return blocks_.end();
  }

  // A new segment; when the budget or the upstream has none, a block pending on another stream,
  // with `stream` made to wait for its last use (a memory stall, see the class docs). The wait
  // is queued before anything is taken: if it throws, the pool is unchanged.
  block_iter grow_or_stall(std::size_t requested, std::size_t size, stream_ref stream)
  {
    if constexpr (stream_order_with_wait<Order>) {
      try {
        return grow(requested, size);
      } catch (out_of_memory const&) {
        auto const pending = find_pending(size);
        if (pending == blocks_.end()) { throw; }
        order_.wait(stream, pending->second.marker.value);
        ++stalls_;
        return pending;
      }
    } else {
      return grow(requested, size);
    }
  }

  // cudaHostAlloc / cudaMalloc (and the frees release_cached would do) are illegal while
  // capturing, and the graph would not replay them anyway.
  void refuse_if_capturing(std::size_t bytes, stream_ref stream)
  {
    if (order_capturing(order_, stream)) {
      STASH_FAIL("caching_pool: " + std::to_string(bytes) +
                 " B need a new segment from the upstream, but the stream is being captured "
                 "into a CUDA graph (no allocation while capturing; reserve() before capturing)");
    }
  }

  // `bytes` plus `pad` rounded to the pool's rounding; a size no memory can hold (the sum or the
  // rounding would wrap 64 bits) is out of memory, before anything changes.
  [[nodiscard]] std::size_t rounded(std::size_t bytes, std::size_t pad) const
  {
    if (bytes > std::numeric_limits<std::size_t>::max() - pad) { throw_oom(bytes); }
    auto const size = checked_align_up(bytes + pad, options_.rounding);
    if (!size) { throw_oom(bytes); }
    return *size;
  }

  // The segment for a rounded request; nothing when rounding it to large_rounding would wrap.
  [[nodiscard]] std::optional<std::size_t> segment_size(std::size_t size) const noexcept
  {
    if (size <= options_.small_limit) { return options_.small_segment; }
    if (size < options_.medium_limit) { return options_.medium_segment; }
    return checked_align_up(size, options_.large_rounding);
  }

  [[nodiscard]] std::size_t headroom() const noexcept
  {
    return options_.budget > reserved_ ? options_.budget - reserved_ : 0;
  }

  // Takes a new segment from the upstream for a rounded request of `size` bytes.
  block_iter grow(std::size_t requested, std::size_t size)
  {
    auto const standard = segment_size(size);
    if (!standard) { throw_oom(requested); }
    std::size_t seg = *standard;
    if (seg > headroom()) { release_cached(); }
    // Under a tight budget an exact-size segment may still fit where the standard one does not.
    if (seg > headroom() && size <= headroom()) { seg = size; }
    if (seg > headroom()) { throw_oom(requested); }
    // The segment's nodes before the upstream is asked: a std::bad_alloc leaks no segment.
    auto seg_node   = make_node(segments_, std::uintptr_t{0}, std::size_t{0});
    auto block_node = make_node(blocks_, std::uintptr_t{0}, block{});
    auto free_node  = make_node(free_, free_key{0, 0});
    void* p         = try_upstream(seg);
    if (p == nullptr) {
      release_cached();
      p = try_upstream(seg);
      // A full upstream may still have room for the request itself.
      if (p == nullptr && seg > size) {
        seg = size;
        p   = try_upstream(seg);
      }
      if (p == nullptr) { throw_oom(requested); }
    }
    auto const base   = reinterpret_cast<std::uintptr_t>(p);
    seg_node.key()    = base;
    seg_node.mapped() = seg;
    block_node.key()  = base;
    block& b          = block_node.mapped();
    b.size            = seg;
    b.segment         = base;
    b.free            = true;
    free_node.value() = {seg, base};
    segments_.insert(std::move(seg_node));
    auto it = blocks_.insert(std::move(block_node)).position;
    free_.insert(std::move(free_node));
    reserved_ += seg;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    return it;
  }

  void* try_upstream(std::size_t bytes)
  {
    try {
      return upstream_.allocate(bytes, cuda_allocation_alignment);
    } catch (out_of_memory const&) {
      return nullptr;
    }
  }

  [[noreturn]] void throw_oom(std::size_t requested) const
  {
    std::size_t const largest = free_.empty() ? 0 : free_.rbegin()->first;
    bool const has_budget     = options_.budget != std::numeric_limits<std::size_t>::max();
    throw out_of_memory("caching_pool", requested,
                        has_budget ? std::optional<std::size_t>(options_.budget) : std::nullopt,
                        in_use_, has_budget ? std::max(largest, headroom()) : largest);
  }

  // Hands out `size` bytes from the free block `it` (at its start, or at the aligned address
  // inside it), splitting off the remainder, with the nodes of `spare` (a split needs its block
  // and free nodes, an over-aligned start its aligned node): inserting a node allocates nothing.
  void* take(block_iter it, std::size_t size, std::size_t requested, std::size_t alignment,
             stream_ref stream, spare_nodes spare) noexcept
  {
    block& b = it->second;
    b.node   = free_.extract({b.size, it->first});
    if (!spare.remainder.empty() && splits(it, size)) {
      auto const raddr      = it->first + size;
      spare.remainder.key() = raddr;
      block& r              = spare.remainder.mapped();
      r.size                = b.size - size;
      r.segment             = b.segment;
      r.free                = true;
      r.stream              = b.stream;
      r.marker              = std::move(b.marker);  // the remainder keeps the pending free's marker
      b.marker              = marker_type{};
      b.size                = size;
      spare.remainder_free.value() = {r.size, raddr};
      blocks_.insert(std::move(spare.remainder));
      free_.insert(std::move(spare.remainder_free));
    } else {
      order_.release(b.marker.value);
      b.marker = marker_type{};
    }
    auto const user = align_up(it->first, alignment);
    if (user != it->first) {
      spare.aligned.key()    = user;
      spare.aligned.mapped() = it->first;
      aligned_.insert(std::move(spare.aligned));
    }
    b.free      = false;
    b.requested = requested;
    b.alignment = alignment;
    b.stream    = stream;
    in_use_ += b.size;
    peak_in_use_ = std::max(peak_in_use_, in_use_);
    ++allocations_;
    return reinterpret_cast<void*>(user);
  }

  // Merges the just-freed block `it` with free neighbours in its segment that are safe to merge:
  // the same stream (ordered after them), or a different stream whose work has passed. A block
  // freed while capturing has a marker that never passes (the graph runs whenever it is
  // launched): it merges with its own stream's blocks only, not to lock its neighbours to it;
  // a neighbour freed while capturing likewise (its marker is never queried).
  block_iter coalesce(block_iter it, bool captured) noexcept
  {
    auto mergeable = [&](block_iter other) {
      return other != blocks_.end() && other->second.free &&
             other->second.segment == it->second.segment &&
             (other->second.stream == it->second.stream ||
              (!captured && passed_nothrow(other->second.marker)));
    };
    auto next = std::next(it);
    if (next != blocks_.end() && next->first == it->first + it->second.size && mergeable(next)) {
      free_.erase({next->second.size, next->first});
      order_.release(next->second.marker.value);
      it->second.size += next->second.size;
      blocks_.erase(next);
    }
    if (it != blocks_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.size == it->first && mergeable(prev)) {
        free_.erase({prev->second.size, prev->first});
        order_.release(prev->second.marker.value);
        prev->second.size += it->second.size;
        prev->second.stream = it->second.stream;
        prev->second.marker = std::move(it->second.marker);
        blocks_.erase(it);
        it = prev;
      }
    }
    return it;
  }

  Upstream upstream_;
  caching_pool_options options_;
  Order order_;
  block_map blocks_;                     // every block, by address
  free_set free_;                        // free blocks by (size, address)
  address_map<std::size_t> segments_;    // segment base -> size
  address_map<std::uintptr_t> aligned_;  // over-aligned start -> its block
  std::size_t in_use_{0};
  std::size_t peak_in_use_{0};
  std::size_t reserved_{0};
  std::size_t peak_reserved_{0};
  std::uint64_t allocations_{0};
  std::uint64_t stalls_{0};
};

}  // namespace stash
