/**
 * @file trace.hpp
 * @brief The in-memory model of one recorded training iteration: storages, ops and the events
 * that order them (format "stash-trace v1", see data/README.md).
 *
 * A `stash::trace` is always well formed: every way to build one (the reader, the recorder, the
 * `add_*` members) checks that storage ids are dense, that ops and frees name live storages and
 * that nothing is freed twice. Analyses can therefore rely on those invariants without checking.
 */
#pragma once

#include <stash/core/error.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stash {

/// @brief Index of a storage in a trace: 0..N-1 in order of allocation.
using storage_id = std::uint64_t;

/// @brief What a storage holds; decides which policies may move or discard it.
enum class storage_kind : std::uint8_t { param, optstate, input, grad, act, temp };

/// @brief Number of storage_kind values, for per-kind tables indexed by the enum.
inline constexpr std::size_t storage_kind_count = 6;

/// @brief All storage kinds in declaration order, for iterating per-kind tables.
inline constexpr std::array<storage_kind, storage_kind_count> all_storage_kinds = {
    storage_kind::param, storage_kind::optstate, storage_kind::input,
    storage_kind::grad,  storage_kind::act,      storage_kind::temp};

/// @brief A training-step phase, as marked by `p` lines.
enum class phase : std::uint8_t { forward, backward, optimizer };

/// @brief The spelling used in trace files ("param", "act", ...).
/// @param kind The kind.
/// @return Its spelling.
[[nodiscard]] constexpr std::string_view to_string(storage_kind kind) noexcept
{
  switch (kind) {
    case storage_kind::param:
      return "param";
    case storage_kind::optstate:
      return "optstate";
    case storage_kind::input:
      return "input";
    case storage_kind::grad:
      return "grad";
    case storage_kind::act:
      return "act";
    case storage_kind::temp:
      return "temp";
  }
  return "?";
}

/// @brief The spelling used in trace files ("forward", "backward", "optimizer").
/// @param p The phase.
/// @return Its spelling.
[[nodiscard]] constexpr std::string_view to_string(phase p) noexcept
{
  switch (p) {
    case phase::forward:
      return "forward";
    case phase::backward:
      return "backward";
    case phase::optimizer:
      return "optimizer";
  }
  return "?";
}

/// @brief Parses a storage kind as spelled in trace files; nullopt for anything else.
/// @param text The spelling.
/// @return The kind, or nullopt.
[[nodiscard]] constexpr std::optional<storage_kind> storage_kind_from_string(
    std::string_view text) noexcept
{
  for (auto const kind : all_storage_kinds) {
    if (to_string(kind) == text) { return kind; }
  }
  return std::nullopt;
}

/// @brief Parses a phase as spelled in trace files; nullopt for anything else.
/// @param text The spelling.
/// @return The phase, or nullopt.
[[nodiscard]] constexpr std::optional<phase> phase_from_string(std::string_view text) noexcept
{
  for (auto const p : {phase::forward, phase::backward, phase::optimizer}) {
    if (to_string(p) == text) { return p; }
  }
  return std::nullopt;
}

/// @brief One storage (a `t` line): its size, kind and free-form label.
struct storage_record {
  std::uint64_t bytes{};  ///< bytes requested from the allocator, no alignment padding
  storage_kind kind{};    ///< what it holds
  std::string label;      ///< e.g. "layer1.0.conv1/convolution"; may be empty

  /// @brief Field by field.
  friend bool operator==(storage_record const&, storage_record const&) = default;
};

/// @brief One op (an `o` line): its name and the storages it reads and writes, as written.
struct op_record {
  std::string name;                ///< e.g. "aten::convolution"
  std::vector<storage_id> reads;   ///< storages of its tensor arguments
  std::vector<storage_id> writes;  ///< storages of its results and in-place arguments

  /// @brief Field by field.
  friend bool operator==(op_record const&, op_record const&) = default;
};

/// @brief What a trace event does.
enum class event_kind : std::uint8_t { alloc, free, op, phase };

/// @brief One line of the trace body, in program order. Its position in `trace::events()` is its
/// logical time.
struct trace_event {
  event_kind kind{};      ///< which kind of line
  std::uint64_t index{};  ///< storage id (alloc/free), op index (op) or phase value (phase)

  /// @brief The phase a `phase` event marks; only meaningful when kind == event_kind::phase.
  /// @return The phase.
  [[nodiscard]] constexpr stash::phase phase_value() const noexcept
  {
    return static_cast<stash::phase>(index);
  }

  /// @brief Field by field.
  friend constexpr bool operator==(trace_event const&, trace_event const&) = default;
};

/// @brief One `key=value` pair of the header line, in file order.
struct header_entry {
  std::string key;    ///< non-empty, no whitespace, no '='
  std::string value;  ///< no whitespace; may be empty

  /// @brief Field by field.
  friend bool operator==(header_entry const&, header_entry const&) = default;
};

/// @brief One recorded training iteration. Always well formed (see the file comment).
///
/// The `add_*` members append at the end of the program order. Each checks its arguments, throws
/// stash::logic_error on misuse and then leaves the trace unchanged.
class trace {
 public:
  /// @brief Marks "no event" in `free_event`-style lookups.
  static constexpr std::uint64_t npos = std::numeric_limits<std::uint64_t>::max();

  /// @brief Appends a header entry. Keys must be unique, non-empty and free of whitespace and
  /// '='; values free of whitespace.
  /// @param key The key.
  /// @param value The value.
  /// @throws stash::logic_error For an empty, malformed or repeated key or a malformed value.
  void add_header(std::string key, std::string value)
  {
    STASH_EXPECTS(!key.empty(), "trace header key must not be empty");
    STASH_EXPECTS(is_token(key) && key.find('=') == std::string::npos,
                  "trace header key '" + key + "' must not contain whitespace or '='");
    STASH_EXPECTS(is_token(value),
                  "trace header value for '" + key + "' must not contain whitespace");
    STASH_EXPECTS(!header_value(key).has_value(), "duplicate trace header key '" + key + "'");
    header_.push_back(header_entry{std::move(key), std::move(value)});
  }

  /// @brief Appends an allocation; returns the new storage's id (the number of earlier ones).
  /// The label must not contain line breaks or start or end with whitespace, so it survives a
  /// write/read round trip.
  /// @param bytes The storage's size.
  /// @param kind Its kind.
  /// @param label Its label.
  /// @return The new storage's id.
  /// @throws stash::logic_error For an invalid kind or a label that would not survive a round trip.
  storage_id add_alloc(std::uint64_t bytes, storage_kind kind, std::string label)
  {
    STASH_EXPECTS(static_cast<std::size_t>(kind) < storage_kind_count, "invalid storage_kind");
    STASH_EXPECTS(
        is_label(label),
        "storage label '" + label + "' must not contain line breaks or start/end with whitespace");
    storage_id const id = storages_.size();
    room_for_one(storages_);
    room_for_one(alloc_event_);
    room_for_one(free_event_);
    room_for_one(events_);
    // No allocation can fail past this point: the append is all-or-nothing.
    storages_.push_back(storage_record{bytes, kind, std::move(label)});
    alloc_event_.push_back(events_.size());
    free_event_.push_back(npos);
    events_.push_back(trace_event{event_kind::alloc, id});
    return id;
  }

  /// @brief Appends the free of a live storage.
  /// @param id The storage.
  /// @throws stash::logic_error For an unknown id or a double free.
  void add_free(storage_id id)
  {
    STASH_EXPECTS(id < storages_.size(), "free of unknown storage id " + std::to_string(id));
    STASH_EXPECTS(free_event_[id] == npos, "double free of storage id " + std::to_string(id) +
                                               " (already freed at event " +
                                               std::to_string(free_event_[id]) + ")");
    room_for_one(events_);
    free_event_[id] = events_.size();
    events_.push_back(trace_event{event_kind::free, id});
  }

  /// @brief Appends an op over live storages; returns its op index. The name must be a
  /// non-empty token without whitespace.
  /// @param name The op's name.
  /// @param reads Storages it reads.
  /// @param writes Storages it writes.
  /// @return The op index.
  /// @throws stash::logic_error For a malformed name or a storage that is unknown or freed.
  std::uint64_t add_op(std::string name, std::vector<storage_id> reads,
                       std::vector<storage_id> writes)
  {
    STASH_EXPECTS(!name.empty() && is_token(name),
                  "op name '" + name + "' must be non-empty and free of whitespace");
    for (auto const* list : {&reads, &writes}) {
      for (auto const id : *list) {
        STASH_EXPECTS(id < storages_.size(),
                      "op '" + name + "' names unknown storage id " + std::to_string(id));
        STASH_EXPECTS(free_event_[id] == npos,
                      "op '" + name + "' uses storage id " + std::to_string(id) +
                          " after its free at event " + std::to_string(free_event_[id]));
      }
    }
    std::uint64_t const index = ops_.size();
    room_for_one(ops_);
    room_for_one(events_);
    ops_.push_back(op_record{std::move(name), std::move(reads), std::move(writes)});
    events_.push_back(trace_event{event_kind::op, index});
    return index;
  }

  /// @brief Appends a phase marker.
  /// @param p The phase.
  /// @throws stash::logic_error For an invalid phase value.
  void add_phase(stash::phase p)
  {
    STASH_EXPECTS(static_cast<std::size_t>(p) <= static_cast<std::size_t>(phase::optimizer),
                  "invalid phase");
    room_for_one(events_);
    events_.push_back(trace_event{event_kind::phase, static_cast<std::uint64_t>(p)});
  }

  /// @brief Reserves room for about this many storages, ops and events (a hint).
  /// @param storages Expected storages.
  /// @param ops Expected ops.
  /// @param events Expected events.
  void reserve(std::size_t storages, std::size_t ops, std::size_t events)
  {
    storages_.reserve(storages);
    alloc_event_.reserve(storages);
    free_event_.reserve(storages);
    ops_.reserve(ops);
    events_.reserve(events);
  }

  /// @brief Header entries in file order.
  /// @return The entries.
  [[nodiscard]] std::span<header_entry const> header() const noexcept { return header_; }
  /// @brief The value of header key `key`, if present.
  /// @param key The key.
  /// @return The value, or nullopt.
  [[nodiscard]] std::optional<std::string_view> header_value(std::string_view key) const noexcept
  {
    for (auto const& entry : header_) {
      if (entry.key == key) { return std::string_view(entry.value); }
    }
    return std::nullopt;
  }

  /// @brief All storages, indexed by id.
  /// @return The storages.
  [[nodiscard]] std::span<storage_record const> storages() const noexcept { return storages_; }
  /// @brief All ops, indexed by op index (program order).
  /// @return The ops.
  [[nodiscard]] std::span<op_record const> ops() const noexcept { return ops_; }
  /// @brief All events in program order; an event's index is its logical time.
  /// @return The events.
  [[nodiscard]] std::span<trace_event const> events() const noexcept { return events_; }

  /// @brief The storage with id `id` (checked).
  /// @param id The storage id.
  /// @return The storage's record.
  /// @throws stash::logic_error For an unknown id.
  [[nodiscard]] storage_record const& storage(storage_id id) const
  {
    STASH_EXPECTS(id < storages_.size(), "unknown storage id " + std::to_string(id));
    return storages_[id];
  }
  /// @brief The event index at which storage `id` is allocated (checked).
  /// @param id The storage id.
  /// @return The event index.
  /// @throws stash::logic_error For an unknown id.
  [[nodiscard]] std::uint64_t alloc_event(storage_id id) const
  {
    STASH_EXPECTS(id < storages_.size(), "unknown storage id " + std::to_string(id));
    return alloc_event_[id];
  }
  /// @brief The event index at which storage `id` is freed, or nullopt if it never is (checked).
  /// @param id The storage id.
  /// @return The event index, or nullopt.
  /// @throws stash::logic_error For an unknown id.
  [[nodiscard]] std::optional<std::uint64_t> free_event(storage_id id) const
  {
    STASH_EXPECTS(id < storages_.size(), "unknown storage id " + std::to_string(id));
    if (free_event_[id] == npos) { return std::nullopt; }
    return free_event_[id];
  }

  /// @brief Two traces are equal when header, storages, ops and events are.
  friend bool operator==(trace const&, trace const&) = default;

 private:
  // Grows geometrically ahead of a push_back, so that a failing allocation happens before any
  // member changed (strong guarantee) without turning appends quadratic.
  template <class T>
  static void room_for_one(std::vector<T>& v)
  {
    if (v.size() == v.capacity()) { v.reserve(v.capacity() < 16 ? 16 : 2 * v.capacity()); }
  }

  // Fields in a trace line are separated by spaces and tabs; a line ends at '\n' (and a '\r'
  // before it). These keep every accepted name, label and header entry writable and re-readable.
  static bool is_token(std::string_view s) noexcept
  {
    return s.find_first_of(" \t\n\r") == std::string_view::npos;
  }
  static bool is_label(std::string_view s) noexcept
  {
    if (s.find_first_of("\n\r") != std::string_view::npos) { return false; }
    if (s.empty()) { return true; }
    auto const blank = [](char c) { return c == ' ' || c == '\t'; };
    return !blank(s.front()) && !blank(s.back());
  }

  std::vector<header_entry> header_;
  std::vector<storage_record> storages_;
  std::vector<std::uint64_t> alloc_event_;  // derived from events_, kept for O(1) lookups
  std::vector<std::uint64_t> free_event_;   // npos while live
  std::vector<op_record> ops_;
  std::vector<trace_event> events_;
};

}  // namespace stash
