// Drives a stash::allocator through iterations of a real trace on the host backend, filling every
// written tensor with known values and checking every read: bit-exact by default, or as the
// encoding a storage travels with allows (sign only for Gist's Binarize, fp16's rounding).
#pragma once

#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/tensor_handle.hpp>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_driver.hpp>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace stash::test {

/// Tensors are this many times smaller than recorded, to keep CI light.
inline constexpr std::uint64_t drive_scale = 64;

/// How a read of a storage is checked against what was written.
enum class read_check : std::uint8_t {
  exact,  ///< bit for bit
  sign,   ///< (x > 0) as written, and 0 or 1 (a bitmask decode gives 1.0f / 0.0f)
  fp16,   ///< within half precision's rounding (relative 2^-11)
};

/// The value element `i` of storage `tensor` holds after its `version`-th write: mostly zeros,
/// like ReLU maps, so codecs have something to do; exact in float.
inline float drive_value(std::uint64_t tensor, std::uint32_t version, std::size_t i)
{
  return (i + version) % 3 == 0 ? float((tensor * 7 + version * 13 + i) % 4096) : 0.0f;
}

// Whether a read is as `how` allows. An exact value always is (reads before a storage's first
// offload see what was written).
inline bool read_ok(read_check how, float got, float want)
{
  if (got == want) { return true; }
  switch (how) {
    case read_check::sign:
      return (got == 0.0f || got == 1.0f) && (got > 0.0f) == (want > 0.0f);
    case read_check::fp16:
      return std::fabs(got - want) <= std::fabs(want) * 0x1p-11f;
    case read_check::exact:
    default:
      return false;
  }
}

/// Runs `iterations` iterations of `t` through `alloc`; returns the number of bad reads (each
/// read counts once). `checks` (indexed by storage id; default exact) says how reads are checked;
/// `inexact`, when given, receives the number of reads that were allowed but not bit-identical
/// (the reads that saw a lossy decode).
template <class Allocator>
std::uint64_t drive(Allocator& alloc, host_backend& backend, host_backend::stream s, trace const& t,
                    int iterations, std::vector<read_check> const& checks = {},
                    std::uint64_t* inexact = nullptr)
{
  std::atomic<std::uint64_t> bad{0};
  std::atomic<std::uint64_t> approximate{0};
  std::vector<std::uint32_t> version(t.storages().size(), 0);
  trace_driver<Allocator> driver(alloc, t, s, drive_scale);
  auto fill = [&](std::uint64_t sid, void* p) {
    std::size_t const n = driver.bytes_of(sid) / 4;
    auto const v        = ++version[sid];
    backend.launch(s, [=] {
      auto* f = static_cast<float*>(p);
      for (std::size_t i = 0; i < n; ++i) { f[i] = drive_value(sid, v, i); }
    });
  };
  auto check = [&](std::uint64_t sid, void const* p) {
    std::size_t const n = driver.bytes_of(sid) / 4;
    auto const v        = version[sid];
    auto const how      = sid < checks.size() ? checks[sid] : read_check::exact;
    backend.launch(s, [=, &bad, &approximate] {
      auto const* f = static_cast<float const*>(p);
      bool exact    = true;
      for (std::size_t i = 0; i < n; ++i) {
        float const want = drive_value(sid, v, i);
        if (!read_ok(how, f[i], want)) {
          bad.fetch_add(1);
          return;
        }
        exact = exact && f[i] == want;
      }
      if (!exact) { approximate.fetch_add(1); }
    });
  };
  driver.on_allocate([&](storage_id sid, tensor_handle id, bool persistent) {
    version[sid] = 0;
    if (persistent) { fill(sid, alloc.pointer(id, s)); }
  });
  driver.on_op([&](op_record const& op, std::span<void* const> ptrs) {
    for (std::size_t r = 0; r < op.reads.size(); ++r) {
      if (version[op.reads[r]] > 0) { check(op.reads[r], ptrs[r]); }
    }
    for (std::size_t w = 0; w < op.writes.size(); ++w) {
      fill(op.writes[w], ptrs[op.reads.size() + w]);
    }
  });
  driver.run(iterations);
  backend.synchronize(s);
  alloc.synchronize();
  if (inexact != nullptr) { *inexact = approximate.load(); }
  return bad.load();
}

/// The trace's peak live bytes at the driver's scale.
inline std::uint64_t scaled_peak(trace const& t)
{
  return analyze_lifetimes(t).peak_live_bytes / drive_scale;
}

}  // namespace stash::test
