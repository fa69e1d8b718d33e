// Times read_trace / to_trace_text / analyze_lifetimes on a synthesized ~10 MB trace.
// Usage: bench_read_trace [LAYERS]   (default 70000 layers: about 10 MB of trace text)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <stash/trace/lifetime.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_recorder.hpp>
#include <stash/trace/trace_writer.hpp>
#include <vector>
using clk = std::chrono::steady_clock;
template <class F>
double best_ms(F&& f, int reps = 7)
{
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = clk::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(clk::now() - t0).count());
  }
  return best;
}
int main(int argc, char** argv)
{
  int const layers = argc > 1 ? std::atoi(argv[1]) : 70000;
  stash::trace_recorder rec;
  rec.set_header("model", "synthetic");
  std::uint64_t s = 1;
  auto next       = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return s >> 33;
  };
  std::vector<stash::storage_id> params, acts;
  for (int i = 0; i < 2000; ++i)
    params.push_back(rec.allocate(4 * (1 + next() % 100000), stash::storage_kind::param,
                                  "layers." + std::to_string(i) + ".weight"));
  rec.phase(stash::phase::forward);
  auto prev = params[0];
  for (int i = 0; i < layers; ++i) {
    auto ws = rec.allocate(1 + next() % 4096, stash::storage_kind::temp, "block/op.ws");
    rec.deallocate(ws);
    auto out = rec.allocate(4 * (1 + next() % 1000000), stash::storage_kind::act,
                            "block." + std::to_string(i) + "/linear");
    rec.op("aten::addmm", {prev, params[i % params.size()]}, {out});
    acts.push_back(out);
    prev = out;
  }
  rec.phase(stash::phase::backward);
  for (auto it = acts.rbegin(); it != acts.rend(); ++it) {
    rec.op("aten::mm_backward", {*it}, {});
    rec.deallocate(*it);
  }
  auto path = std::filesystem::temp_directory_path() / "h_trace_bench.trace";
  rec.write(path);
  auto size = std::filesystem::file_size(path);
  stash::trace t;
  double read  = best_ms([&] { t = stash::read_trace(path); });
  double write = best_ms([&] {
    auto x = stash::to_trace_text(t);
    if (x.empty()) std::abort();
  });
  stash::lifetime_analysis a;
  double analyze = best_ms([&] { a = stash::analyze_lifetimes(t); });
  double iv      = best_ms([&] {
    auto v = stash::lifetime_intervals(t);
    if (stash::peak_live_bytes(v) != a.peak_live_bytes) std::abort();
  });
  std::printf(
      "file %.2f MB, %zu events, %zu storages, %zu ops\nread_trace %.1f ms (%.0f "
      "MB/s)\nto_trace_text %.1f ms\nanalyze_lifetimes %.1f ms\nintervals+peak_live %.1f ms\n",
      size / 1e6, t.events().size(), t.storages().size(), t.ops().size(), read, size / 1e3 / read,
      write, analyze, iv);
  std::filesystem::remove(path);
}
