// train_cnn's host code: the IDX / gzip reader (on the real Fashion-MNIST files when Debian's
// dataset-fashion-mnist is installed, and on small files written here) and the argument parser.
#include <stash_tools/train_cnn/idx_reader.hpp>
#include <stash_tools/train_cnn/options.hpp>

#include "support/message_of.hpp"
#include "support/sweep_size.hpp"
#include "support/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace STASH_UNITY_ID {

namespace fs = std::filesystem;
using namespace train_cnn;
using stash::test::message_of;
using stash::test::temp_dir;

namespace {

std::vector<std::uint8_t> idx_bytes(std::vector<std::uint32_t> const& dims,
                                    std::vector<std::uint8_t> const& data, std::uint8_t type = 0x08)
{
  std::vector<std::uint8_t> b = {0, 0, type, std::uint8_t(dims.size())};
  for (auto d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) { b.push_back(std::uint8_t(d >> shift)); }
  }
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// A gzip member holding `data` in DEFLATE stored blocks (no compression), written by the test.
std::vector<std::uint8_t> gzip_stored(std::vector<std::uint8_t> const& data)
{
  std::vector<std::uint8_t> g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255};
  std::size_t at              = 0;
  do {
    std::size_t const len = std::min<std::size_t>(65535, data.size() - at);
    bool const last       = at + len == data.size();
    g.push_back(last ? 1 : 0);  // BFINAL, BTYPE 00
    g.push_back(std::uint8_t(len));
    g.push_back(std::uint8_t(len >> 8));
    g.push_back(std::uint8_t(~len));
    g.push_back(std::uint8_t(~len >> 8));
    g.insert(g.end(), data.begin() + std::ptrdiff_t(at), data.begin() + std::ptrdiff_t(at + len));
    at += len;
  } while (at < data.size());
  auto put32 = [&](std::uint32_t v) {
    for (int i = 0; i < 4; ++i) { g.push_back(std::uint8_t(v >> (8 * i))); }
  };
  put32(detail::crc32(data));
  put32(std::uint32_t(data.size()));
  return g;
}

// A consistent little dataset: `n` images of 4x4 and labels i % 10, in `dir`.
void write_split(temp_dir const& dir, std::string const& split, std::uint32_t n, bool gz)
{
  std::vector<std::uint8_t> pixels(std::size_t(n) * 16), labels(n);
  for (std::size_t i = 0; i < pixels.size(); ++i) { pixels[i] = std::uint8_t(i * 7); }
  for (std::uint32_t i = 0; i < n; ++i) { labels[i] = std::uint8_t(i % 10); }
  auto images = idx_bytes({n, 4, 4}, pixels);
  auto lab    = idx_bytes({n}, labels);
  if (gz) {
    dir.write(split + "-images-idx3-ubyte.gz", gzip_stored(images));
    dir.write(split + "-labels-idx1-ubyte.gz", gzip_stored(lab));
  } else {
    dir.write(split + "-images-idx3-ubyte", images);
    dir.write(split + "-labels-idx1-ubyte", lab);
  }
}

}  // namespace

TEST_CASE("train_cnn idx_reader: the real Fashion-MNIST files")
{
  fs::path const dir = default_dataset_dir;
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz") &&
      !fs::exists(dir / "train-images-idx3-ubyte")) {
    MESSAGE("skipped: Fashion-MNIST is not installed in "
            << dir.string() << " (apt-get install dataset-fashion-mnist)");
    return;
  }
  // Fashion-MNIST is balanced: 6000 training and 1000 test images per class. Under ASan
  // (stash_tests) the test split alone: its gzip files take the same inflate paths (Huffman
  // blocks) as the training split's, at a sixth of the bytes (the whole set took ~27 s there);
  // stash_sweep_tests (plain) reads both.
  auto check_split = [](labelled_images const& s, std::size_t count) {
    CHECK(s.count == count);
    CHECK(s.rows == 28);
    CHECK(s.cols == 28);
    CHECK(s.pixels.size() == count * 28 * 28);
    std::array<std::size_t, 10> hist{};
    for (auto l : s.labels) { ++hist.at(l); }
    for (auto h : hist) { CHECK(h == count / 10); }
    CHECK(s.labels[0] == 9);  // the first image of each split is an ankle boot
    // Not all black, not all white: real pixels came out of the gzip stream.
    auto const [lo, hi] = std::minmax_element(s.pixels.begin(), s.pixels.end());
    CHECK(*lo == 0);
    CHECK(*hi == 255);
  };
  if (stash::test::full_sweep) {
    dataset const d = load_fashion_mnist(dir);
    check_split(d.train, 60000);
    check_split(d.test, 10000);
  } else {
    check_split(read_split(dir, "t10k", dataset::classes), 10000);
  }
}

TEST_CASE("train_cnn idx_reader: small files written by the test")
{
  SUBCASE("plain and gzip-compressed files read the same")
  {
    for (bool gz : {false, true}) {
      temp_dir dir;
      write_split(dir, "train", 30, gz);
      write_split(dir, "t10k", 10, gz);
      dataset const d = load_fashion_mnist(dir.path);
      CHECK(d.train.count == 30);
      CHECK(d.test.count == 10);
      CHECK(d.train.rows == 4);
      CHECK(d.train.cols == 4);
      CHECK(d.train.pixels[17] == std::uint8_t(17 * 7));
      CHECK(d.train.labels[13] == 3);
    }
  }
  SUBCASE("gzip with several stored blocks (over 64 KiB)")
  {
    std::vector<std::uint8_t> big(200000);
    for (std::size_t i = 0; i < big.size(); ++i) { big[i] = std::uint8_t(i * 31 + 5); }
    auto const bytes = idx_bytes({std::uint32_t(big.size())}, big);
    auto const out   = gunzip(gzip_stored(bytes), "big.gz");
    CHECK(out == bytes);
  }
  SUBCASE("IDX errors")
  {
    auto const good = idx_bytes({3, 2, 2}, std::vector<std::uint8_t>(12, 1));
    CHECK_NOTHROW((void)parse_idx(good, "f"));
    auto truncated = good;
    truncated.pop_back();
    CHECK(message_of([&] { (void)parse_idx(truncated, "x.idx"); }).find("x.idx: IDX: truncated") !=
          std::string::npos);
    auto header_cut = std::vector<std::uint8_t>(good.begin(), good.begin() + 9);
    CHECK(message_of([&] { (void)parse_idx(header_cut, "h"); }).find("header ends early") !=
          std::string::npos);
    CHECK(message_of([&] {
            (void)parse_idx(std::vector<std::uint8_t>{0, 0}, "s");
          }).find("too short") != std::string::npos);
    auto magic = good;
    magic[0]   = 0x42;
    CHECK(message_of([&] { (void)parse_idx(magic, "m"); }).find("bad magic") != std::string::npos);
    auto type = good;
    type[2]   = 0x0d;  // float
    CHECK(message_of([&] { (void)parse_idx(type, "t"); }).find("not 8 (unsigned byte)") !=
          std::string::npos);
    auto trailing = good;
    trailing.push_back(0);
    CHECK(message_of([&] { (void)parse_idx(trailing, "z"); }).find("trailing") !=
          std::string::npos);
  }
  SUBCASE("gzip errors")
  {
    auto const good = gzip_stored(idx_bytes({4}, {1, 2, 3, 4}));
    CHECK_NOTHROW((void)gunzip(good, "g"));
    auto crc = good;
    crc[crc.size() - 8] ^= 0xff;
    CHECK(message_of([&] { (void)gunzip(crc, "c.gz"); }).find("c.gz: gzip: CRC-32 mismatch") !=
          std::string::npos);
    auto cut = std::vector<std::uint8_t>(good.begin(), good.end() - 10);
    CHECK(message_of([&] { (void)gunzip(cut, "t.gz"); }).find("truncated") != std::string::npos);
    auto method = good;
    method[2]   = 7;
    CHECK(message_of([&] { (void)gunzip(method, "m.gz"); }).find("not DEFLATE") !=
          std::string::npos);
    auto btype = good;
    btype[10]  = 0x07;  // BFINAL with block type 3
    CHECK(message_of([&] { (void)gunzip(btype, "b.gz"); }).find("invalid block type") !=
          std::string::npos);
  }
  SUBCASE("wrong dimensions and inconsistent files")
  {
    temp_dir dir;
    write_split(dir, "t10k", 10, false);
    dir.write("train-images-idx3-ubyte", idx_bytes({10, 16}, std::vector<std::uint8_t>(160)));
    dir.write("train-labels-idx1-ubyte", idx_bytes({10}, std::vector<std::uint8_t>(10)));
    CHECK(message_of([&] {
            (void)load_fashion_mnist(dir.path);
          }).find("images need 3 dimensions") != std::string::npos);
    dir.write("train-images-idx3-ubyte", idx_bytes({10, 4, 4}, std::vector<std::uint8_t>(160)));
    dir.write("train-labels-idx1-ubyte", idx_bytes({10, 1}, std::vector<std::uint8_t>(10)));
    CHECK(message_of([&] { (void)load_fashion_mnist(dir.path); }).find("labels need 1 dimension") !=
          std::string::npos);
    dir.write("train-labels-idx1-ubyte", idx_bytes({9}, std::vector<std::uint8_t>(9)));
    CHECK(message_of([&] { (void)load_fashion_mnist(dir.path); }).find("has 10 images but") !=
          std::string::npos);
    std::vector<std::uint8_t> labels(10, 1);
    labels[4] = 10;
    dir.write("train-labels-idx1-ubyte", idx_bytes({10}, labels));
    CHECK(message_of([&] { (void)load_fashion_mnist(dir.path); }).find("label 10 of item 4") !=
          std::string::npos);
    dir.write("train-labels-idx1-ubyte", idx_bytes({10}, std::vector<std::uint8_t>(10, 2)));
    dir.write("t10k-images-idx3-ubyte", idx_bytes({10, 8, 2}, std::vector<std::uint8_t>(160)));
    CHECK(message_of([&] { (void)load_fashion_mnist(dir.path); }).find("but test images 8x2") !=
          std::string::npos);
  }
  SUBCASE("a missing folder or file names it and the Debian package")
  {
    temp_dir dir;
    auto const missing = dir.path / "no_such_folder";
    CHECK_THROWS_AS((void)load_fashion_mnist(missing), dataset_missing);
    auto const m = message_of([&] { (void)load_fashion_mnist(missing); });
    CHECK(m.find(missing.string()) != std::string::npos);
    CHECK(m.find("apt-get install dataset-fashion-mnist") != std::string::npos);
    write_split(dir, "train", 10, false);
    auto const m2 = message_of([&] { (void)load_fashion_mnist(dir.path); });
    CHECK(m2.find("t10k-images-idx3-ubyte") != std::string::npos);
    CHECK(m2.find("dataset-fashion-mnist") != std::string::npos);
  }
}

TEST_CASE("train_cnn options: budgets")
{
  CHECK(parse_bytes("200000000") == 200000000u);
  CHECK(parse_bytes("64MiB") == 64u << 20);
  CHECK(parse_bytes("64M") == 64u << 20);
  CHECK(parse_bytes("1.5GiB") == 3ull << 29);
  CHECK(parse_bytes("2GB") == 2000000000u);
  CHECK(parse_bytes("512KiB") == 512u << 10);
  // The tools' one grammar (stash_tools/size.hpp) allows one space before the unit.
  CHECK(parse_bytes("64 MiB") == 64u << 20);
  for (char const* bad : {"", "-5", "0", "0.5", "abc", "12XB", "1.2.3", "1e30", "0MiB", "1.5"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS((void)parse_bytes(bad), usage_error);
  }
  CHECK(message_of([] { (void)parse_bytes("-5"); }).find("--budget: '-5' is negative") !=
        std::string::npos);
  CHECK(message_of([] { (void)parse_bytes("12XB"); }).find("unknown unit 'XB'") !=
        std::string::npos);
}

TEST_CASE("train_cnn options: the command line")
{
  auto const o = parse_options({"/data", "--policy", "auto_swap", "--codec", "zvc", "--budget",
                                "96MiB", "--batch", "256", "--width", "4", "--epochs", "3",
                                "--check", "--check-steps", "7"});
  CHECK(o.data_dir == "/data");
  CHECK(o.policy == policy_kind::auto_swap);
  CHECK(o.codec == codec_kind::zvc);
  CHECK(o.budget == 96u << 20);
  CHECK(o.batch == 256);
  CHECK(o.width == 4);
  CHECK(o.epochs == 3);
  CHECK(o.check);
  CHECK(o.check_steps == 7);

  auto const d = parse_options({"/data"});
  CHECK(d.policy == policy_kind::vdnn_conv);
  CHECK(d.codec == codec_kind::none);
  CHECK_FALSE(d.budget.has_value());
  for (auto name : policy_names) {
    CHECK(parse_policy(name) == parse_options({"x", "--policy", std::string(name)}).policy);
  }

  CHECK(message_of([] {
          (void)parse_options({"/d", "--policy", "lru"});
        })
            .find("unknown swap policy 'lru' (known: no_swap, vdnn_all, vdnn_conv, vdnn_dyn, "
                  "auto_swap, search_swap, search, checkpoint, dtr)") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--codec", "lz4"});
        }).find("unknown codec 'lz4'") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--budget", "lots"});
        }).find("--budget: 'lots'") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--budget"});
        }).find("--budget: needs a value") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--batch", "0"});
        }).find("--batch: '0' is not an integer") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--width", "2x"});
        }).find("--width") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "--frobnicate"});
        }).find("unknown option '--frobnicate'") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"/d", "/e"});
        }).find("unexpected argument '/e'") != std::string::npos);
  CHECK(message_of([] {
          (void)parse_options({"--policy", "no_swap"});
        }).find("missing DATA_DIR") != std::string::npos);
  CHECK(parse_options({"--help"}).help);
}

}  // namespace STASH_UNITY_ID
