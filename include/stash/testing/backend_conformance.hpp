/**
 * @file backend_conformance.hpp
 * @brief The conformance kit of the `offload_backend` concept (stash's backends and yours): stream
 * order, cross-stream waits through events, queries and synchronization, each failure named in a
 * stash::testing::conformance_report.
 *
 * @code
 * my_backend b;
 * my_pool memory;                       // memory the backend copies to and from (device memory)
 * auto const r = stash::testing::check_offload_backend(b, memory);
 * CHECK_MESSAGE(r.ok(), r.summary());
 * @endcode
 * Checked: copies queued on one stream run in order (a chain through two pool buffers brings two
 * host patterns back where they belong); a stream that waits for an event recorded on another runs
 * after that stream's work so far; an event is complete once its stream was synchronized, and
 * synchronize(event) returns only once it is; distinct streams have distinct tags; a fresh stream
 * is not capturing; release() of an event, also of a default-constructed one, does not throw.
 * Races cannot be proven absent by a test; run the kit under ThreadSanitizer (host threads) or
 * compute-sanitizer (CUDA) as well.
 */
#pragma once

#include <stash/offload/offload_backend.hpp>
#include <stash/pool/pool.hpp>
#include <stash/testing/conformance_report.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace stash::testing {

namespace detail {

inline std::vector<std::uint8_t> pattern_bytes(std::size_t n, std::uint64_t seed)
{
  std::vector<std::uint8_t> v(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::uint8_t>((i * 2654435761u + seed * 97u) >> 7);
  }
  return v;
}

// In-order copies on one stream: src_a -> x -> y, src_b -> x, then y -> out_a and x -> out_b.
template <class B>
void check_stream_order(B& b, void* x, void* y, std::size_t n, conformance_report& r)
{
  auto const s     = b.create_stream(0);
  auto const src_a = pattern_bytes(n, 1), src_b = pattern_bytes(n, 2);
  std::vector<std::uint8_t> out_a(n), out_b(n);
  b.copy_async(x, src_a.data(), n, s);
  b.copy_async(y, x, n, s);
  b.copy_async(x, src_b.data(), n, s);
  b.copy_async(out_a.data(), y, n, s);
  b.copy_async(out_b.data(), x, n, s);
  b.synchronize(s);
  r.expect(out_a == src_a && out_b == src_b, "copies on one stream did not run in order");
}

// s2 waits for an event recorded on s1: its copy reads what s1 wrote.
template <class B>
void check_event_wait(B& b, void* x, void* y, std::size_t n, conformance_report& r)
{
  auto const s1 = b.create_stream(0), s2 = b.create_stream(0);
  r.expect(b.tag(s1) != b.tag(s2), "two streams share one tag");
  r.expect(!b.capturing(s1), "a fresh stream reports capturing");
  auto const src = pattern_bytes(n, 3);
  std::vector<std::uint8_t> out(n);
  b.copy_async(x, src.data(), n, s1);
  b.copy_async(y, x, n, s1);
  auto e = b.record(s1);
  b.wait(s2, e);
  b.copy_async(out.data(), y, n, s2);
  b.synchronize(s2);
  r.expect(out == src, "a stream that waited for an event ran before the event's work");
  b.synchronize(e);
  r.expect(b.query(e), "an event is not complete after synchronize(event)");
  b.release(e);
  auto f = b.record(s1);
  b.synchronize(s1);
  r.expect(b.query(f), "an event is not complete after its stream was synchronized");
  b.release(f);
  typename B::event none{};
  b.release(none);
}

}  // namespace detail

/// @brief Runs the offload_backend conformance checks (see the file comment) of `b`, copying
/// through two 1 MiB + 13 B buffers from `memory` (device memory for a device backend). An
/// exception escaping a check is reported as a failure.
/// @tparam B A type satisfying stash::offload_backend.
/// @tparam Pool A stash::pool whose memory `b` copies to and from.
/// @param b The backend.
/// @param memory Where the kit's two buffers come from (given back at the end).
/// @return The report (ok() when every check passed).
template <offload_backend B, pool Pool>
[[nodiscard]] conformance_report check_offload_backend(B& b, Pool& memory)
{
  conformance_report r;
  r.subject           = "offload backend";
  std::size_t const n = (1u << 20) + 13;
  auto const s        = b.create_stream(0);
  void* x             = pool_allocate(memory, b.tag(s), n);
  void* y             = pool_allocate(memory, b.tag(s), n);
  auto guarded        = [&](char const* what, auto&& check) {
    try {
      check();
    } catch (std::exception const& e) {
      r.expect(false, std::string(what) + " threw: " + e.what());
    }
  };
  guarded("stream order", [&] { detail::check_stream_order(b, x, y, n, r); });
  guarded("event wait", [&] { detail::check_event_wait(b, x, y, n, r); });
  b.synchronize(s);
  pool_deallocate(memory, b.tag(s), y, n);
  pool_deallocate(memory, b.tag(s), x, n);
  return r;
}

}  // namespace stash::testing
