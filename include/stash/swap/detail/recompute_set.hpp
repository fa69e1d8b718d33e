/**
 * @file recompute_set.hpp
 * @brief Internal: a growing set of recompute entries kept valid against the swap entries beside
 * it (the rules of sim/schedule.hpp except the chain-depth bound), and where a schedule first
 * exceeds its budget. Shared by the checkpoint, dtr and search planners.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/recompute_chain.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/sim/trace_analysis.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace stash::detail {

/// Per storage, a list of values in the order they were added: singly linked lists through one
/// pool. A recompute set keeps three of them over every storage of the trace (thousands) and
/// holds a few hundred entries, and the local search builds thousands of sets: a vector per
/// storage cost an allocation per storage used and a destructor per storage.
template <class T>
class storage_lists {
  static constexpr std::uint32_t none = ~std::uint32_t{0};
  struct node {
    T value;
    std::uint32_t next;
  };

 public:
  explicit storage_lists(std::size_t storages) : head_(storages, none), tail_(storages, none) {}

  class iterator {
   public:
    using value_type        = T;
    using difference_type   = std::ptrdiff_t;
    using reference         = T const&;
    using iterator_category = std::forward_iterator_tag;
    iterator()              = default;
    iterator(std::vector<node> const* nodes, std::uint32_t k) : nodes_(nodes), k_(k) {}
    reference operator*() const { return (*nodes_)[k_].value; }
    iterator& operator++()
    {
      k_ = (*nodes_)[k_].next;
      return *this;
    }
    iterator operator++(int)
    {
      auto const old = *this;
      ++*this;
      return old;
    }
    bool operator==(iterator const& o) const { return k_ == o.k_; }

   private:
    std::vector<node> const* nodes_{nullptr};
    std::uint32_t k_{none};
  };

  /// The list of storage `s`: iterable, and (when `Owner` is not const) appended to with
  /// push_back / emplace_back.
  template <class Owner>
  class basic_list {
   public:
    basic_list(Owner& owner, std::size_t s) : owner_(owner), s_(s) {}
    [[nodiscard]] iterator begin() const { return {&owner_.nodes_, owner_.head_[s_]}; }
    [[nodiscard]] iterator end() const { return {&owner_.nodes_, none}; }
    void push_back(T const& v) requires(!std::is_const_v<Owner>) { owner_.append(s_, v); }
    template <class... Args>
    void emplace_back(Args&&... args) requires(!std::is_const_v<Owner>)
    {
      owner_.append(s_, T(std::forward<Args>(args)...));
    }

   private:
    Owner& owner_;
    std::size_t s_;
  };
  using list       = basic_list<storage_lists>;
  using const_list = basic_list<storage_lists const>;

  [[nodiscard]] list operator[](std::size_t s) { return {*this, s}; }
  [[nodiscard]] const_list operator[](std::size_t s) const { return {*this, s}; }

  /// Empties every list: only the storages appended to are reset (no pass over all storages).
  void clear()
  {
    for (auto const s : used_) { head_[s] = tail_[s] = none; }
    used_.clear();
    nodes_.clear();
  }

 private:
  void append(std::size_t s, T const& v)
  {
    // Node indices are 32-bit (`none` marks an end): a set holds a few hundred entries.
    STASH_EXPECTS(nodes_.size() < none, "storage_lists: " + std::to_string(nodes_.size()) +
                                            " values already, all its 32-bit node indices address");
    auto const k = static_cast<std::uint32_t>(nodes_.size());
    nodes_.push_back(node{v, none});
    if (tail_[s] == none) {
      head_[s] = k;
      used_.push_back(s);
    } else {
      nodes_[tail_[s]].next = k;
    }
    tail_[s] = k;
  }

  std::vector<std::uint32_t> head_, tail_;  // per storage: its first and last node
  std::vector<node> nodes_;
  std::vector<std::size_t> used_;  // the storages whose list is not empty
};

/// Recompute entries that stay valid together with a fixed list of swap entries.
class recompute_set {
 public:
  recompute_set(trace_analysis const& a, std::span<swap_entry const> swaps)
      : a_(a),
        drops_of_(a.trace().storages().size()),
        readers_of_(a.trace().storages().size()),
        swap_gaps_(a.trace().storages().size())
  {
    for (auto const& e : swaps) { swap_gaps_[e.id].emplace_back(e.last_use, e.next_use); }
  }

  /// The earliest op at which an entry already planned re-runs an op that reads `e.id` while `e`
  /// would keep it away (e.last_use < that op < e.at): `e` stays valid only if it runs there.
  [[nodiscard]] std::optional<std::uint64_t> reader_deadline(recompute_entry const& e) const
  {
    std::optional<std::uint64_t> d;
    for (auto const k : readers_of_[e.id]) {
      auto const x = items_[k].e.at;
      if (e.last_use < x && x < e.at && (!d || x < *d)) { d = x; }
    }
    return d;
  }

  /// Empties the set and makes `swaps` its fixed list, as a set constructed so (without a
  /// pass over every storage: the local search builds thousands of sets).
  void reset(std::span<swap_entry const> swaps)
  {
    items_.clear();
    order_.clear();
    reads_.clear();
    drops_of_.clear();
    readers_of_.clear();
    swap_gaps_.clear();
    for (auto const& e : swaps) { swap_gaps_[e.id].emplace_back(e.last_use, e.next_use); }
  }

  /// Adds swap entry `e` to the fixed list (the caller checked swap_allowed(e)).
  void add_swap(swap_entry const& e) { swap_gaps_[e.id].emplace_back(e.last_use, e.next_use); }

  /// Adds `e` (whose chain is `c`) when every entry stays valid; false (and unchanged) otherwise.
  /// A read of the chain that an entry keeps away at e.at is pulled into e's batch (that entry
  /// then runs at e.at, before e), recursively, as DTR rematerialises an evicted input first.
  /// With `pulled`, each entry so pulled is appended to it as it was before (its `at` later).
  bool try_add(recompute_entry const& e, recompute_chain const& c,
               std::vector<recompute_entry>* pulled = nullptr)
  {
    if (!c.valid() || !gap_free(e) || !readers_unharmed(e, c)) { return false; }
    std::vector<std::size_t> pulls;
    if (!reads_resident(e.at, c.reads, c.ops.front(), pulls)) { return false; }
    for (auto const k : pulls) {
      if (pulled != nullptr) { pulled->push_back(items_[k].e); }
      auto it =
          std::lower_bound(order_.begin(), order_.end(), k,
                           [this](std::size_t x, std::size_t y) { return runs_before(x, y); });
      while (*it != k) { ++it; }  // (k itself: no other item ties with it, see runs_before)
      order_.erase(it);
      items_[k].e.at = e.at;
      place(k);
    }
    auto const k = items_.size();
    items_.push_back(item{e, reads_.size(), reads_.size() + c.reads.size(), c.ops.front()});
    reads_.insert(reads_.end(), c.reads.begin(), c.reads.end());
    place(k);
    drops_of_[e.id].push_back(k);
    for (auto const r : c.reads) { readers_of_[r].push_back(k); }
    return true;
  }

  /// The bytes of the entries adding `e` would pull into its batch, or nullopt when `e` cannot
  /// be added (a dry run of try_add).
  [[nodiscard]] std::optional<std::uint64_t> pulled_bytes(recompute_entry const& e,
                                                          recompute_chain const& c) const
  {
    if (!c.valid() || !gap_free(e) || !readers_unharmed(e, c)) { return std::nullopt; }
    std::vector<std::size_t> pulls;
    if (!reads_resident(e.at, c.reads, c.ops.front(), pulls)) { return std::nullopt; }
    std::uint64_t sum = 0;
    for (auto const k : pulls) { sum += items_[k].e.bytes; }
    return sum;
  }

  /// Adds `e` with its chain computed here.
  bool try_add(recompute_entry const& e)
  {
    return try_add(e, recompute_chain_of(a_, e.id, e.last_use, e.at));
  }

  /// True when a swap entry for `e`'s gap leaves every recompute entry valid.
  [[nodiscard]] bool swap_allowed(swap_entry const& e) const
  {
    for (auto const k : drops_of_[e.id]) {
      if (overlaps(items_[k].e.last_use, items_[k].e.next_use, e.last_use, e.next_use)) {
        return false;
      }
    }
    for (auto const k : readers_of_[e.id]) {
      if (away_for_batch(e.id, e.last_use, e.next_use, items_[k].e.at)) { return false; }
    }
    return true;
  }

  /// The entries in the order they run: by `at`, then by first re-run op.
  [[nodiscard]] std::vector<recompute_entry> entries() const
  {
    std::vector<recompute_entry> out;
    out.reserve(order_.size());
    for (auto const k : order_) { out.push_back(items_[k].e); }
    return out;
  }

  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }

 private:
  struct item {
    recompute_entry e;
    std::size_t reads_from, reads_to;  // its chain's reads: reads_[reads_from, reads_to)
    std::uint64_t first_op;
  };

  static bool overlaps(std::uint64_t l1, std::uint64_t n1, std::uint64_t l2, std::uint64_t n2)
  {
    return l1 < n2 && l2 < n1;
  }

  // A re-run before op `at` finds a storage swapped over (l, n) away: inside its gap, or for a
  // wrap entry (l > n: away after its last use and until its first) outside [n, l].
  static bool away_at(std::uint64_t l, std::uint64_t n, std::uint64_t at)
  {
    return l < n ? l < at && at <= n : at > l || at <= n;
  }

  // away_at for a read of the batch of re-runs at `at`, storage `id` swapped over (l, n): a swap
  // whose next use is that batch's op, a re-run use only (not an access of `id`), is back for it
  // (the simulator's batch waits for that prefetch; a cut-swap re-run's reads end so).
  [[nodiscard]] bool away_for_batch(storage_id id, std::uint64_t l, std::uint64_t n,
                                    std::uint64_t at) const
  {
    return away_at(l, n, at) && !(l < n && n == at && !is_access(a_, id, at));
  }

  [[nodiscard]] bool gap_free(recompute_entry const& e) const
  {
    for (auto const& [l, n] : swap_gaps_[e.id]) {
      if (overlaps(l, n, e.last_use, e.next_use)) { return false; }
    }
    for (auto const k : drops_of_[e.id]) {
      if (overlaps(items_[k].e.last_use, items_[k].e.next_use, e.last_use, e.next_use)) {
        return false;
      }
    }
    return true;
  }

  // Every read is resident at `at`, rematerialised earlier in that batch, or can be pulled into
  // it (appended to `pulls`); `first_op` is the reader's first re-run op.
  [[nodiscard]] bool reads_resident(std::uint64_t at, std::span<storage_id const> reads,
                                    std::uint64_t first_op, std::vector<std::size_t>& pulls) const
  {
    for (auto const r : reads) {
      for (auto const& [l, n] : swap_gaps_[r]) {
        if (away_for_batch(r, l, n, at)) { return false; }
      }
      for (auto const k : drops_of_[r]) {
        auto const& d     = items_[k];
        bool const pulled = std::find(pulls.begin(), pulls.end(), k) != pulls.end();
        if ((d.e.at == at || pulled) && d.first_op >= first_op) { return false; }
        if (pulled || !(d.e.last_use < at && at < d.e.at)) { continue; }
        if (d.first_op >= first_op || pulls.size() >= max_recompute_depth) { return false; }
        if (!recompute_chain_of(a_, d.e.id, d.e.last_use, at).valid()) { return false; }
        pulls.push_back(k);
        auto const d_reads =
            std::span<storage_id const>(reads_).subspan(d.reads_from, d.reads_to - d.reads_from);
        if (!reads_resident(at, d_reads, d.first_op, pulls)) { return false; }
      }
    }
    return true;
  }

  // No entry already planned reads e.id while `e` keeps it away.
  [[nodiscard]] bool readers_unharmed(recompute_entry const& e, recompute_chain const& c) const
  {
    for (auto const k : readers_of_[e.id]) {
      auto const& x = items_[k];
      if (e.last_use < x.e.at && x.e.at < e.at) { return false; }
      if (x.e.at == e.at && c.ops.front() >= x.first_op) { return false; }
    }
    return true;
  }

  // Whether item x runs before item y: by (at, first re-run op, storage). No two items tie: two
  // entries of one storage at one op would overlap (gap_free refuses them).
  [[nodiscard]] bool runs_before(std::size_t x, std::size_t y) const
  {
    return std::tie(items_[x].e.at, items_[x].first_op, items_[x].e.id) <
           std::tie(items_[y].e.at, items_[y].first_op, items_[y].e.id);
  }

  // Item k into order_ by runs_before: entries() lists the set after each addition (the greedy's
  // refreshes, thousands a plan), which sorted every item each time.
  void place(std::size_t k)
  {
    auto const before = [this](std::size_t x, std::size_t y) { return runs_before(x, y); };
    order_.insert(std::upper_bound(order_.begin(), order_.end(), k, before), k);
  }

  trace_analysis const& a_;
  std::vector<item> items_;
  std::vector<std::size_t> order_;  // items_ in the order they run (runs_before)
  // Every item's chain reads, one after another: one buffer rather than a vector an item (the
  // local search adds ~800,000 entries a plan to sets it resets and fills again).
  std::vector<storage_id> reads_;
  storage_lists<std::size_t> drops_of_;    // per storage: its entries
  storage_lists<std::size_t> readers_of_;  // per storage: entries whose chain reads it
  storage_lists<std::pair<std::uint64_t, std::uint64_t>> swap_gaps_;  // per storage: (last, next)
};

/// The first event at which the planned bytes of `swaps` and `recomputes` exceed `budget`
/// (for a re-run's transient bytes: op at-1's event), or nullopt when they never do.
[[nodiscard]] inline std::optional<std::uint64_t> first_overflow(
    trace_analysis const& a, std::span<swap_entry const> swaps,
    std::span<recompute_entry const> recomputes, std::uint64_t budget)
{
  auto const curve = planned_device_curve(a, swaps, recomputes);
  std::optional<std::uint64_t> first;
  for (std::uint64_t i = 0; i < curve.size(); ++i) {
    if (curve[i] > budget) {
      first = i;
      break;
    }
  }
  auto const run = recompute_run_bytes(a, curve, recomputes);
  for (std::size_t k = 0; k < recomputes.size(); ++k) {
    auto const event = a.ops().event[recomputes[k].at - 1];
    if (first && *first <= event) { break; }
    if (run[k] > budget) {
      first = event;
      break;
    }
  }
  return first;
}

}  // namespace stash::detail
