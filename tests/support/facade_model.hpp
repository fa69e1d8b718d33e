// A model-based check of stash::allocator (issue 24 item 3), shared by the doctest suite
// (tests/allocator/facade_model_test.cpp, fixed seeds) and the libFuzzer target
// (tests/fuzz/facade_fuzz.cpp): a byte string chooses a setup (persistent tensors, swap policy,
// device and host budgets) and one iteration's body of allocate / deallocate / op steps, which
// runs several times (recorded, then replayed under the policy's schedule), with misuse and
// faults injected between steps: a freed handle, another allocator's handle, a default handle, a
// second begin_iteration(), sizes 0 and near 2^64, pools too small. A reference model says what
// is alive, what each tensor holds and what must be refused; after every step the allocator is
// checked against it. Violations are returned as text (empty: none).
#pragma once

#include <stash/allocator.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/sim/schedule.hpp>
#include <stash/swap/any_swap_policy.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/vdnn.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace stash::test::facade_model {

// Offloads every storage across every gap between two of its accesses: the most transfers a
// schedule can ask for, persistent tensors included.
struct every_gap_policy {
  [[nodiscard]] static constexpr std::string_view name() noexcept { return "every_gap"; }
  [[nodiscard]] schedule plan(trace_analysis const& a, std::uint64_t budget) const
  {
    std::vector<swap_entry> entries;
    auto const& life = a.lifetimes().storages;
    for (storage_id id = 0; id < life.size(); ++id) {
      auto const& acc = life[id].accesses;
      for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
        auto const u = acc[k].op, v = acc[k + 1].op;
        if (v > u + 1) { entries.push_back({id, u, v, u + 1, v, life[id].bytes}); }
      }
    }
    return make_schedule(a, std::string(name()), budget, std::move(entries));
  }
};

using pool_type  = caching_pool<host_upstream, host_stream_order>;
using alloc_type = allocator<pool_type, any_swap_policy, zvc<float>, host_backend>;

// The bytes the run is drawn from; past the end, zeros.
class byte_source {
 public:
  explicit byte_source(std::span<std::uint8_t const> bytes) noexcept : bytes_(bytes) {}
  std::uint8_t next() noexcept { return pos_ < bytes_.size() ? bytes_[pos_++] : 0; }
  [[nodiscard]] bool exhausted() const noexcept { return pos_ >= bytes_.size(); }

 private:
  std::span<std::uint8_t const> bytes_;
  std::size_t pos_{0};
};

// One step of the iteration's body; slots name the body's tensors, persistent ones are -1-k.
struct step {
  enum class kind : std::uint8_t { alloc, free, op } what;
  int slot{0};           // alloc, free: the body slot; op: the written slot (or persistent)
  std::size_t bytes{0};  // alloc
  int read0{0}, read1{0};
  bool two_reads{false};
  std::uint8_t inject{0};  // a misuse or fault before the step (0: none)
};

// The model of one tensor.
struct model_tensor {
  tensor_handle handle{};
  std::size_t bytes{0};
  std::uint32_t version{0};  // what its bytes are: pattern(id, version)
  std::uint32_t id{0};
  bool alive{false};
};

inline std::uint8_t pattern(std::uint32_t id, std::uint32_t version, std::size_t i) noexcept
{
  return static_cast<std::uint8_t>(id * 29 + version * 101 + i * 13 + 1);
}

class harness {
 public:
  explicit harness(std::span<std::uint8_t const> bytes) : in_(bytes) {}

  // Runs the whole check; returns the violations found (empty: none).
  std::string run();
  // What the run did (read after run()), for a test to show its reach.
  struct summary {
    std::uint64_t steps{0}, refusals{0}, iterations{0}, replays{0}, offloads{0};
    std::uint64_t persistent_offloads{0}, failed_offloads{0}, encoding_fallbacks{0};
  };
  [[nodiscard]] summary const& done() const noexcept { return summary_; }
  // Makes the model expect other bytes than the tensors hold (a test that the checks can fail).
  void corrupt_model_for_test() noexcept { skew_ = 1; }

 private:
  void fail(std::string const& what)
  {
    if (violations_.size() < 2000) { violations_ += what + "\n"; }
  }

  // Expects `f` to throw exactly stash::logic_error (or out_of_memory when `oom`) and to change
  // nothing the model sees.
  template <class F>
  void expect_refused(char const* what, F&& f, bool oom = false);

  void setup();
  void decode_body();
  void run_iteration(int iteration);
  void do_step(step const& s);
  void inject(std::uint8_t code);
  void check_invariants(char const* where);
  void check_bytes(model_tensor const& t, void const* p, char const* where);
  void finish();

  model_tensor* slot_tensor(int slot)
  {
    if (slot < 0) {
      auto const k = static_cast<std::size_t>(-1 - slot);
      return k < persistent_.size() && persistent_[k].alive ? &persistent_[k] : nullptr;
    }
    auto const k = static_cast<std::size_t>(slot);
    return k < body_.size() && body_[k].alive ? &body_[k] : nullptr;
  }
  std::size_t alive_count() const
  {
    std::size_t n = 0;
    for (auto const& t : persistent_) { n += t.alive ? 1 : 0; }
    for (auto const& t : body_) { n += t.alive ? 1 : 0; }
    return n;
  }

  byte_source in_;
  std::string violations_;
  host_backend backend_;
  host_backend::stream stream_{backend_.create_stream()};
  std::unique_ptr<pool_type> pool_;
  std::unique_ptr<alloc_type> alloc_;
  std::unique_ptr<pool_type> other_pool_;
  std::unique_ptr<alloc_type> other_;  // whose handles this allocator must refuse
  tensor_handle foreign_{};
  bool limited_device_{false};
  std::vector<model_tensor> persistent_;
  std::vector<model_tensor> body_ = std::vector<model_tensor>(6);
  std::vector<step> steps_;
  std::vector<tensor_handle> stale_;  // handles freed earlier
  std::uint32_t next_id_{0};
  std::size_t peak_alive_{0};
  std::uint32_t skew_{0};
  summary summary_;  // added to every expected version (corrupt_model_for_test)
  std::shared_ptr<std::atomic<std::uint64_t>> mismatches_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
};

template <class F>
void harness::expect_refused(char const* what, F&& f, bool oom)
{
  ++summary_.refusals;
  auto const before_iterations = alloc_->stats().iterations;
  auto const before_state      = alloc_->state();
  try {
    f();
    fail(std::string(what) + ": not refused");
  } catch (out_of_memory const&) {
    if (!oom) { fail(std::string(what) + ": out_of_memory instead of logic_error"); }
  } catch (logic_error const&) {
    if (oom) { fail(std::string(what) + ": logic_error instead of out_of_memory"); }
  } catch (std::exception const& e) {
    fail(std::string(what) + ": unexpected " + e.what());
  }
  if (alloc_->stats().iterations != before_iterations || alloc_->state() != before_state) {
    fail(std::string(what) + ": the refused call changed the allocator's state");
  }
}

inline void harness::setup()
{
  std::uint8_t const config = in_.next();
  caching_pool_options device;
  limited_device_ = (config & 3) == 3;
  if (limited_device_) { device.budget = 24 * 1024 + std::size_t{in_.next()} * 256; }
  pool_ = std::make_unique<pool_type>(host_upstream{}, device);
  allocator_options o;
  switch ((config >> 2) & 3) {
    case 0:
      o.host_budget = 0;
      break;  // every offload fails: tensors stay resident
    case 1:
      o.host_budget = 4096;
      break;
    default:
      break;
  }
  o.host_step            = 4096;
  any_swap_policy policy = no_swap{};
  switch ((config >> 4) % 3) {
    case 0:
      policy = every_gap_policy{};
      break;
    case 1:
      policy = vdnn_all{};
      break;
    default:
      break;
  }
  alloc_              = std::make_unique<alloc_type>(backend_, *pool_, o, std::move(policy));
  other_pool_         = std::make_unique<pool_type>();
  other_              = std::make_unique<alloc_type>(backend_, *other_pool_, allocator_options{},
                                        any_swap_policy{no_swap{}});
  foreign_            = other_->allocate_async(64, storage_kind::act, "foreign", stream_);
  std::size_t const n = in_.next() % 4;
  for (std::size_t k = 0; k < n; ++k) {
    model_tensor t;
    t.bytes = 4 * (1 + in_.next() % 64);
    t.id    = next_id_++;
    try {
      t.handle = alloc_->allocate_async(t.bytes, storage_kind::param, "p", stream_);
    } catch (out_of_memory const&) {
      continue;
    }
    auto* p = static_cast<std::uint8_t*>(alloc_->acquire_async(t.handle, stream_));
    backend_.synchronize(stream_);
    for (std::size_t i = 0; i < t.bytes; ++i) { p[i] = pattern(t.id, 0, i); }
    t.alive = true;
    persistent_.push_back(t);
  }
}

// The body: up to 20 steps over 6 slots; sizes are whole floats mostly, odd now and then (zvc
// refuses those: raw copies).
inline void harness::decode_body()
{
  std::size_t const n = 4 + in_.next() % 17;
  for (std::size_t k = 0; k < n; ++k) {
    std::uint8_t const b = in_.next();
    step s{};
    s.inject = in_.next() % 16 < 3 ? static_cast<std::uint8_t>(1 + in_.next() % 8) : 0;
    switch (b % 4) {
      case 0:
        s.what  = step::kind::alloc;
        s.slot  = in_.next() % 6;
        s.bytes = b & 0x40 ? 1 + in_.next() % 64 : 4 * (1 + in_.next() % 256);
        break;
      case 1:
        s.what = step::kind::free;
        s.slot = in_.next() % 6;
        break;
      default: {
        s.what      = step::kind::op;
        auto pick   = [&] { return int(in_.next() % 8) - 2; };  // -2..-1: persistent
        s.slot      = pick();
        s.read0     = pick();
        s.read1     = pick();
        s.two_reads = (b & 0x80) != 0;
        break;
      }
    }
    steps_.push_back(s);
  }
}

inline void harness::do_step(step const& s)
{
  if (s.what == step::kind::alloc) {
    model_tensor& t = body_[static_cast<std::size_t>(s.slot)];
    if (t.alive) { return; }
    try {
      t.handle = alloc_->allocate_async(s.bytes, storage_kind::act, "a", stream_);
    } catch (out_of_memory const&) {
      if (!limited_device_) { fail("allocate_async: out_of_memory without a device budget"); }
      return;
    }
    t = model_tensor{t.handle, s.bytes, 0, next_id_++, true};
    // Its first bytes, written through op() as a producer would.
    auto const p = alloc_->op("init", {}, std::span<tensor_handle const>(&t.handle, 1), stream_);
    auto* q      = static_cast<std::uint8_t*>(p[0]);
    auto const bytes = t.bytes;
    auto const id    = t.id;
    backend_.launch(stream_, [q, bytes, id] {
      for (std::size_t i = 0; i < bytes; ++i) { q[i] = pattern(id, 0, i); }
    });
    return;
  }
  if (s.what == step::kind::free) {
    model_tensor& t = body_[static_cast<std::size_t>(s.slot)];
    if (!t.alive) { return; }
    alloc_->deallocate_async(t.handle);
    t.alive = false;
    stale_.push_back(t.handle);
    return;
  }
  model_tensor* w  = slot_tensor(s.slot);
  model_tensor* r0 = slot_tensor(s.read0);
  model_tensor* r1 = s.two_reads ? slot_tensor(s.read1) : nullptr;
  std::vector<tensor_handle> reads, writes;
  std::vector<model_tensor*> read_models;
  for (auto* r : {r0, r1}) {
    if (r != nullptr) {
      reads.push_back(r->handle);
      read_models.push_back(r);
    }
  }
  if (w != nullptr) { writes.push_back(w->handle); }
  std::vector<void*> p;
  try {
    p = alloc_->op("op", reads, writes, stream_);
  } catch (out_of_memory const&) {  // an on-demand prefetch the device pool could not take
    if (!limited_device_) { fail("op: out_of_memory without a device budget"); }
    return;
  }
  // Reads are checked, then the write's new version written (after the reads: one may be it).
  for (std::size_t k = 0; k < read_models.size(); ++k) {
    auto const* q    = static_cast<std::uint8_t const*>(p[k]);
    auto const bytes = read_models[k]->bytes;
    auto const id    = read_models[k]->id;
    auto const v     = read_models[k]->version + skew_;
    backend_.launch(stream_, [q, bytes, id, v, bad = mismatches_] {
      for (std::size_t i = 0; i < bytes; ++i) {
        if (q[i] != pattern(id, v, i)) {
          bad->fetch_add(1);
          return;
        }
      }
    });
  }
  if (w != nullptr) {
    auto* q          = static_cast<std::uint8_t*>(p.back());
    auto const bytes = w->bytes;
    auto const id    = w->id;
    auto const v     = ++w->version;
    backend_.launch(stream_, [q, bytes, id, v] {
      for (std::size_t i = 0; i < bytes; ++i) { q[i] = pattern(id, v, i); }
    });
  }
}

inline void harness::inject(std::uint8_t code)
{
  switch (code) {
    case 1:
      if (!stale_.empty()) {
        tensor_handle const h = stale_[in_.next() % stale_.size()];
        expect_refused("deallocate_async(freed)", [&] { alloc_->deallocate_async(h); });
        expect_refused("acquire_async(freed)", [&] { (void)alloc_->acquire_async(h, stream_); });
      }
      break;
    case 2:
      expect_refused("deallocate_async(foreign)", [&] { alloc_->deallocate_async(foreign_); });
      expect_refused("op(foreign)", [&] {
        (void)alloc_->op("foreign", std::span<tensor_handle const>(&foreign_, 1), {}, stream_);
      });
      break;
    case 3:
      expect_refused("where(default handle)", [&] { (void)alloc_->where(tensor_handle{}); });
      break;
    case 4:
      expect_refused("begin_iteration twice", [&] { alloc_->begin_iteration(); });
      break;
    case 5:
      expect_refused(
          "allocate_async(near 2^64)",
          [&] {
            (void)alloc_->allocate_async(std::numeric_limits<std::size_t>::max() - in_.next(),
                                         storage_kind::act, "huge", stream_);
          },
          true);
      break;
    case 6:
      expect_refused("allocate_async(0)",
                     [&] { (void)alloc_->allocate_async(0, storage_kind::act, "empty", stream_); });
      break;
    case 7: {  // the bytes of a live tensor, read on the host, are the model's
      model_tensor* t = slot_tensor(int(in_.next() % 8) - 2);
      if (t == nullptr) { break; }
      void* p = nullptr;
      try {
        p = alloc_->acquire_async(t->handle, stream_);
      } catch (out_of_memory const&) {
        if (!limited_device_) { fail("acquire_async: out_of_memory without a device budget"); }
        break;
      }
      backend_.synchronize(stream_);
      check_bytes(*t, p, "acquire_async");
      break;
    }
    default:
      break;
  }
}

inline void harness::check_bytes(model_tensor const& t, void const* p, char const* where)
{
  auto const* q = static_cast<std::uint8_t const*>(p);
  for (std::size_t i = 0; i < t.bytes; ++i) {
    if (q[i] != pattern(t.id, t.version + skew_, i)) {
      fail(std::string(where) + ": tensor " + to_string(t.handle) + " does not hold its bytes");
      return;
    }
  }
}

inline void harness::check_invariants(char const* where)
{
  peak_alive_  = std::max(peak_alive_, alive_count());
  auto const s = alloc_->stats();
  // The tables reuse freed slots: never more than the most tensors alive at once.
  if (s.tensor_slots > peak_alive_) {
    fail(std::string(where) + ": tensor_slots " + std::to_string(s.tensor_slots) +
         " above the most tensors alive at once, " + std::to_string(peak_alive_));
  }
  if (alloc_->state() == allocator_state::persistent && s.iterations > 0) {
    fail(std::string(where) + ": still persistent after an iteration");
  }
  for (auto* group : {&persistent_, &body_}) {
    for (auto const& t : *group) {
      if (!t.alive) { continue; }
      auto const state = alloc_->where(t.handle);
      if (state == tensor_state::released || state == tensor_state::dropped) {
        fail(std::string(where) + ": live tensor " + to_string(t.handle) + " is " +
             to_string(state));
      }
    }
  }
}

inline void harness::run_iteration(int iteration)
{
  alloc_->begin_iteration();
  for (auto const& s : steps_) {
    if (s.inject != 0) { inject(s.inject); }
    do_step(s);
    ++summary_.steps;
    check_invariants("step");
  }
  for (auto& t : body_) {  // the body's tensors die with the iteration
    if (!t.alive) { continue; }
    alloc_->deallocate_async(t.handle);
    t.alive = false;
    stale_.push_back(t.handle);
  }
  try {
    alloc_->end_iteration();
  } catch (out_of_memory const&) {  // a device budget below a storage: planning refused
    if (!limited_device_) { fail("end_iteration: out_of_memory without a device budget"); }
  }
  expect_refused("end_iteration twice", [&] { alloc_->end_iteration(); });
  check_invariants("end_iteration");
  // Persistent tensors are resident between iterations (the device pool permitting).
  if (!limited_device_) {
    for (auto const& t : persistent_) {
      if (t.alive && alloc_->where(t.handle) != tensor_state::resident) {
        fail("after iteration " + std::to_string(iteration) + ": persistent tensor " +
             to_string(t.handle) + " is " + to_string(alloc_->where(t.handle)));
      }
    }
  }
}

inline void harness::finish()
{
  backend_.synchronize(stream_);
  for (auto* group : {&persistent_, &body_}) {
    for (auto& t : *group) {
      if (!t.alive) { continue; }
      void* p = alloc_->acquire_async(t.handle, stream_);  // the device pool has room now
      backend_.synchronize(stream_);
      check_bytes(t, p, "finish");
      alloc_->deallocate_async(t.handle);
      t.alive = false;
    }
  }
  try {
    alloc_->synchronize();
  } catch (std::exception const& e) {
    fail(std::string("synchronize: ") + e.what());
  }
  backend_.synchronize(stream_);
  if (mismatches_->load() != 0) {
    fail(std::to_string(mismatches_->load()) + " reads saw bytes other than the model's");
  }
  if (pool_->stats().in_use_bytes != 0) {
    fail("device pool: " + std::to_string(pool_->stats().in_use_bytes) +
         " bytes in use after every tensor was freed");
  }
  auto const s = alloc_->stats();
  if (s.offload.decode_failures != 0) { fail("decode failures on uncorrupted copies"); }
  summary_.iterations          = s.iterations;
  summary_.replays             = s.iterations - s.replanned - s.deviations;
  summary_.offloads            = s.scheduled_offloads;
  summary_.persistent_offloads = s.persistent_offloads;
  summary_.failed_offloads     = s.failed_offloads;
  summary_.encoding_fallbacks  = s.encoding_fallbacks;
  other_->deallocate_async(foreign_);
}

inline std::string harness::run()
{
  setup();
  check_invariants("setup");
  decode_body();
  int const iterations = 3 + in_.next() % 3;
  for (int i = 0; i < iterations; ++i) { run_iteration(i); }
  finish();
  return violations_;
}

}  // namespace stash::test::facade_model
