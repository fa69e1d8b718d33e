// The per-row (csr) and per-chunk (rle) helpers that the host reference and the kernels share:
// they must give the sizes the host encoder writes, accept its buffers, and name the fault in
// corrupted ones. The kernels are thin shells around these, so this is their logic on a CPU.
#include "codec_test_support.hpp"

#include <stash/codec/csr.hpp>
#include <stash/codec/rle.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace STASH_UNITY_ID {

namespace {

namespace d = stash::detail;

template <class T>
bool same_bits(std::vector<T> const& a, std::vector<T> const& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

float float_bits(std::uint32_t u)
{
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Checks every csr helper against the host encoder's buffer for `in`.
template <class T>
void check_csr_helpers(std::vector<T> const& in)
{
  auto const buf        = stash::host_encode_vector<stash::csr<T>>(std::span<T const>(in));
  std::uint64_t const n = in.size();
  auto const h          = stash::read_header(buf);
  std::uint64_t nnz     = 0;
  REQUIRE(d::csr_check_head<T>(buf.data(), n, h.payload_bytes, nnz).code == stash::codec_errc::ok);
  auto const l = d::make_csr_layout(n, nnz);
  CHECK(d::csr_check_padding(buf.data(), l, nnz).code == stash::codec_errc::ok);
  std::uint64_t total = 0;
  std::vector<T> out(in.size(), T{1});
  for (std::uint64_t r = 0; r < l.rows; ++r) {
    std::uint64_t const k0 = d::load_u32(buf.data() + l.row_ptr_off + 4 * r);
    std::uint64_t const k1 = d::load_u32(buf.data() + l.row_ptr_off + 4 * (r + 1));
    REQUIRE(d::csr_row_nnz(in.data(), n, r) == k1 - k0);
    total += k1 - k0;
    REQUIRE(d::csr_check_row(buf.data(), l, nnz, r).code == stash::codec_errc::ok);
    d::csr_decode_row(buf.data(), l, r, out.data());
  }
  CHECK(total == nnz);
  CHECK(same_bits(out, in));
}

/// Checks every rle helper against the host encoder's buffer for `in`.
template <class T>
void check_rle_helpers(std::vector<T> const& in)
{
  auto const buf             = stash::host_encode_vector<stash::rle<T>>(std::span<T const>(in));
  std::uint64_t const n      = in.size();
  std::uint64_t const chunks = d::rle_chunks(n);
  auto const h               = stash::read_header(buf);
  CHECK(d::rle_check_size(buf.data(), n, h.payload_bytes).code == stash::codec_errc::ok);
  std::uint64_t prev = 0;
  std::vector<T> out(in.size(), T{1});
  for (std::uint64_t c = 0; c < chunks; ++c) {
    std::uint64_t begin = 0;
    std::uint64_t end   = 0;
    REQUIRE(d::rle_chunk_bounds<T>(buf.data(), n, h.payload_bytes, c, begin, end).code ==
            stash::codec_errc::ok);
    CHECK(begin == prev);
    REQUIRE(d::rle_chunk_runs(in.data(), n, c) * d::rle_record_bytes<T> == end - begin);
    REQUIRE(d::rle_check_chunk<T>(buf.data(), n, h.payload_bytes, c).code == stash::codec_errc::ok);
    d::rle_decode_chunk(buf.data(), n, c, out.data());
    prev = end;
  }
  CHECK(same_bits(out, in));
}

}  // namespace

TEST_CASE("bit_pattern comparisons keep -0.0 and NaN payloads apart")
{
  CHECK(d::bits_equal(1.5f, 1.5f));
  CHECK_FALSE(d::bits_equal(0.0f, -0.0f));
  CHECK(d::bits_equal(float_bits(0x7fa12345u), float_bits(0x7fa12345u)));
  CHECK_FALSE(d::bits_equal(float_bits(0x7fa12345u), float_bits(0x7fc00000u)));
  CHECK_FALSE(d::bits_nonzero(0.0));
  CHECK(d::bits_nonzero(-0.0));
  CHECK(d::bits_nonzero(std::numeric_limits<double>::quiet_NaN()));
  CHECK(d::bit_pattern(std::uint8_t{0xab}) == 0xab);
  CHECK(d::bit_pattern(-1.0f) == 0xbf800000u);
}

TEST_CASE("csr per-row helpers agree with the host encoder on the real activations")
{
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    check_csr_helpers(stash::test::load_activation(file));
  }
}

TEST_CASE("csr per-row helpers agree with the host encoder on edge cases")
{
  for (std::size_t n : {0, 1, 255, 256, 257, 1000, 4097}) {
    CAPTURE(n);
    check_csr_helpers(std::vector<float>(n, 0.0f));
    check_csr_helpers(std::vector<float>(n, -0.0f));
    std::vector<float> mixed(n);
    for (std::size_t i = 0; i < n; ++i) {
      mixed[i] = i % 3 == 0 ? 0.0f : (i % 5 == 0 ? float_bits(0x7fa12345u) : static_cast<float>(i));
    }
    check_csr_helpers(mixed);
    std::vector<std::uint16_t> u16(n);
    for (std::size_t i = 0; i < n; ++i) { u16[i] = static_cast<std::uint16_t>(i % 4 == 0 ? 0 : i); }
    check_csr_helpers(u16);
  }
  // The row count of a short last row covers only its columns.
  std::vector<float> in(300, 1.0f);
  CHECK(d::csr_row_columns(300, 1) == 44);
  CHECK(d::csr_row_nnz(in.data(), 300, 1) == 44);
}

TEST_CASE("csr row checks name the row pointer and the entry at fault")
{
  std::vector<float> in(700, 0.0f);
  for (std::size_t i = 0; i < in.size(); i += 3) { in[i] = 1.0f + static_cast<float>(i); }
  auto buf                = stash::host_encode_vector<stash::csr<float>>(in);
  std::uint64_t const nnz = d::load_u32(buf.data() + 32 + 4 * 3);
  auto const l            = d::make_csr_layout(700, nnz);
  // Row 1's entries start at k0; make its second column equal to its first.
  std::uint64_t const k0       = d::load_u32(buf.data() + l.row_ptr_off + 4);
  auto bad_col                 = buf;
  bad_col[l.cols_off + k0 + 1] = bad_col[l.cols_off + k0];
  auto const e                 = d::csr_check_entry(bad_col.data(), l, 256, k0, k0 + 1);
  CHECK(e.code == stash::codec_errc::bad_column_index);
  CHECK(e.offset == l.cols_off + k0 + 1);
  CHECK(d::csr_check_entry(bad_col.data(), l, 256, k0, k0).code == stash::codec_errc::ok);
  auto const row = d::csr_check_row(bad_col.data(), l, nnz, 1);
  CHECK(row.code == e.code);
  CHECK(row.offset == e.offset);
  // A column past the short last row (700 - 512 = 188 columns).
  std::uint64_t const k2 = d::load_u32(buf.data() + l.row_ptr_off + 8);
  auto wide              = buf;
  wide[l.cols_off + k2]  = std::byte{200};
  CHECK(d::csr_check_row(wide.data(), l, nnz, 2).code == stash::codec_errc::bad_column_index);
  // Row 1 claiming more entries than its 256 columns.
  auto bad_ptr = buf;
  d::store_u32(bad_ptr.data() + l.row_ptr_off + 8, static_cast<std::uint32_t>(k0 + 257));
  auto const p = d::csr_check_row_pointers(bad_ptr.data(), l, nnz, 1);
  CHECK(p.code == stash::codec_errc::bad_chunk_table);
  CHECK(p.offset == l.row_ptr_off + 8);
  // Nonzero padding (700 / 3 + 1 = 234 entries: 32 + 16 + 234 = 282, padded to 288).
  REQUIRE(l.values_off > l.cols_off + nnz);
  auto pad              = buf;
  pad[l.cols_off + nnz] = std::byte{1};
  auto const q          = d::csr_check_padding(pad.data(), l, nnz);
  CHECK(q.code == stash::codec_errc::bad_padding);
  CHECK(q.offset == l.cols_off + nnz);
  // The composed check the host decoder uses reports the same faults.
  std::uint64_t count = 0;
  CHECK(d::csr_check<float>(bad_col.data(), 700, buf.size() - 32, count).offset == e.offset);
  CHECK(d::csr_check<float>(pad.data(), 700, buf.size() - 32, count).code ==
        stash::codec_errc::bad_padding);
}

TEST_CASE("rle per-chunk run counts agree with the host encoder on the real activations")
{
  for (auto const& file : stash::test::activation_files()) {
    CAPTURE(file);
    check_rle_helpers(stash::test::load_activation(file));
  }
}

TEST_CASE("rle splits runs at chunk boundaries only, and compares bit patterns")
{
  // Runs far longer than the u16 limit of 65536 are cut by the 4096-element chunks alone.
  std::vector<float> constant(100003, 0.25f);
  std::uint64_t const n = constant.size();
  for (std::uint64_t i = 0; i < n; ++i) {
    REQUIRE(d::rle_starts_run(constant.data(), i) == (i % d::rle_chunk_elements == 0));
  }
  for (std::uint64_t c = 0; c < d::rle_chunks(n); ++c) {
    CHECK(d::rle_chunk_runs(constant.data(), n, c) == 1);
  }
  check_rle_helpers(constant);
  auto const buf               = stash::host_encode_vector<stash::rle<float>>(constant);
  std::uint64_t const chunks   = d::rle_chunks(n);
  std::uint64_t const runs_off = 32 + 4 * chunks;
  CHECK(d::rle_run_length(buf.data(), runs_off, 0) == 4096);
  CHECK(d::rle_run_length(buf.data(), runs_off, 6 * (chunks - 1)) == n % 4096);
  check_rle_helpers(std::vector<std::uint8_t>(70001, 7));
  check_rle_helpers(std::vector<double>(9000, 0.0));

  // 0.0 | -0.0 -0.0 | NaN(a) NaN(a) | NaN(b) | 1 1 1
  std::vector<float> specials = {
      0.0f, -0.0f, -0.0f, float_bits(0x7fa12345u), float_bits(0x7fa12345u), float_bits(0x7fc00000u),
      1.0f, 1.0f,  1.0f};
  CHECK(d::rle_chunk_runs(specials.data(), specials.size(), 0) == 5);
  check_rle_helpers(specials);
  for (std::size_t n2 : {0, 1, 4095, 4096, 4097, 10007}) {
    std::vector<float> steps(n2);
    for (std::size_t i = 0; i < n2; ++i) { steps[i] = static_cast<float>(i / 37); }
    check_rle_helpers(steps);
  }
}

TEST_CASE("rle chunk checks name the record at fault")
{
  std::vector<float> in(9000);
  for (std::size_t i = 0; i < in.size(); ++i) { in[i] = static_cast<float>(i / 100); }
  auto const buf               = stash::host_encode_vector<stash::rle<float>>(in);
  std::uint64_t const n        = in.size();
  auto const payload           = stash::read_header(buf).payload_bytes;
  std::uint64_t const runs_off = 32 + 4 * d::rle_chunks(n);
  // Chunk 1's first record one element longer: the chunk's last record overruns it.
  std::uint64_t begin = 0;
  std::uint64_t end   = 0;
  REQUIRE(d::rle_chunk_bounds<float>(buf.data(), n, payload, 1, begin, end).code ==
          stash::codec_errc::ok);
  auto longer = buf;
  d::store_u16(longer.data() + runs_off + begin,
               static_cast<std::uint16_t>(d::load_u16(longer.data() + runs_off + begin) + 1));
  auto const r = d::rle_check_chunk<float>(longer.data(), n, payload, 1);
  CHECK(r.code == stash::codec_errc::bad_run);
  CHECK(r.offset == runs_off + end - 6);
  CHECK(d::rle_check_chunk<float>(longer.data(), n, payload, 0).code == stash::codec_errc::ok);
  // One element shorter: the records end before the chunk does.
  auto shorter = buf;
  d::store_u16(shorter.data() + runs_off + begin,
               static_cast<std::uint16_t>(d::load_u16(shorter.data() + runs_off + begin) - 1));
  auto const s = d::rle_check_chunk<float>(shorter.data(), n, payload, 1);
  CHECK(s.code == stash::codec_errc::bad_run);
  CHECK(s.offset == runs_off + end);
  // A table entry that is not a whole number of records.
  auto ragged = buf;
  d::store_u32(ragged.data() + 32 + 4, static_cast<std::uint32_t>(end + 1));
  auto const t = d::rle_check_chunk<float>(ragged.data(), n, payload, 1);
  CHECK(t.code == stash::codec_errc::bad_chunk_table);
  CHECK(t.offset == 32 + 4);
  // The payload must hold exactly the records the last entry names.
  CHECK(d::rle_check_size(buf.data(), n, payload + 6).code ==
        stash::codec_errc::payload_size_mismatch);
  CHECK(d::rle_check_size(buf.data(), n, 4).code == stash::codec_errc::payload_size_mismatch);
}

TEST_CASE("rle writes exactly ceil(n/4096) chunk entries, none empty, at whole-chunk sizes too")
{
  // docs/codec_format.md, "rle": C = ceil(n/4096) table entries, then the records; a constant
  // input has one 6-byte record per chunk. Whole multiples of the chunk size (and n = 0) are where
  // a miscounted table would gain an empty chunk and 4 bytes.
  for (auto const& [n, chunks] : {std::pair<std::size_t, std::uint64_t>{0, 0},
                                  {1, 1},
                                  {4095, 1},
                                  {4096, 1},
                                  {4097, 2},
                                  {8192, 2}}) {
    CAPTURE(n);
    CHECK(d::rle_chunks(n) == chunks);
    std::vector<float> const constant(n, 0.5f);
    auto const buf = stash::host_encode_vector<stash::rle<float>>(constant);
    CHECK(stash::read_header(buf).payload_bytes == 4 * chunks + 6 * chunks);
    CHECK(buf.size() == 32 + 10 * chunks);
    CHECK(same_bits(stash::host_decode_vector<stash::rle<float>>(buf), constant));
  }
}

}  // namespace STASH_UNITY_ID
