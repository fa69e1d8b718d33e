// Fashion-MNIST's IDX files, read on the host (no CUDA): plain or gzip-compressed.
//
// IDX (LeCun's MNIST format): bytes 0-1 are zero, byte 2 is the element type (0x08 = unsigned
// byte, the only one Fashion-MNIST uses), byte 3 the number of dimensions, then each dimension as a
// big-endian uint32, then the elements in row-major order. Debian's dataset-fashion-mnist package
// ships the files gzip-compressed, so this header also inflates gzip members (RFC 1952 around
// RFC 1951 DEFLATE, CRC-32 and length checked) with the standard library alone.
//
// Every failure is a train_cnn::idx_error whose message names the file and what is wrong.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace train_cnn {

/// @brief A malformed, truncated or missing IDX / gzip file; the message names the file.
class idx_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// @brief The dataset folder (or one of its files) is not there; the message says how to get it.
class dataset_missing : public idx_error {
 public:
  using idx_error::idx_error;
};

/// @brief Where Debian's dataset-fashion-mnist package puts the files.
inline constexpr const char* default_dataset_dir = "/usr/share/datasets/fashion-mnist";

namespace detail {

// ---- DEFLATE (RFC 1951) ------------------------------------------------------------------------

class bit_reader {
 public:
  bit_reader(std::span<std::uint8_t const> in, std::string const& name) : in_(in), name_(name) {}

  unsigned bits(unsigned n)  // n <= 16, least significant bit first
  {
    while (have_ < n) {
      if (pos_ >= in_.size()) { fail("compressed data ends early (truncated file)"); }
      buffer_ |= std::uint32_t(in_[pos_++]) << have_;
      have_ += 8;
    }
    unsigned const v = buffer_ & ((1u << n) - 1u);
    buffer_ >>= n;
    have_ -= n;
    return v;
  }
  void align_to_byte()
  {
    buffer_ = 0;
    have_   = 0;
  }
  std::uint8_t byte()
  {
    if (pos_ >= in_.size()) { fail("compressed data ends early (truncated file)"); }
    return in_[pos_++];
  }
  [[nodiscard]] std::size_t position() const noexcept { return pos_; }
  [[noreturn]] void fail(std::string const& what) const
  {
    throw idx_error(name_ + ": gzip: " + what + " (at compressed byte " + std::to_string(pos_) +
                    ")");
  }

 private:
  std::span<std::uint8_t const> in_;
  std::string const& name_;
  std::size_t pos_{0};
  std::uint32_t buffer_{0};
  unsigned have_{0};
};

// A canonical Huffman code: how many codes of each length, and the symbols in code order.
struct huffman {
  std::array<std::uint16_t, 16> count{};
  std::vector<std::uint16_t> symbol;

  void build(std::span<std::uint8_t const> lengths, bit_reader const& in)
  {
    count.fill(0);
    for (auto l : lengths) { ++count[l]; }
    count[0] = 0;
    int left = 1;  // codes of the current length still available
    for (int len = 1; len < 16; ++len) {
      left = left * 2 - count[std::size_t(len)];
      if (left < 0) { in.fail("over-subscribed Huffman code"); }
    }
    std::array<std::uint16_t, 16> offset{};
    for (std::size_t len = 1; len < 15; ++len) {
      offset[len + 1] = std::uint16_t(offset[len] + count[len]);
    }
    symbol.assign(lengths.size(), 0);
    for (std::size_t s = 0; s < lengths.size(); ++s) {
      if (lengths[s] != 0) { symbol[offset[lengths[s]]++] = std::uint16_t(s); }
    }
  }

  unsigned decode(bit_reader& in) const
  {
    int code = 0, first = 0, index = 0;
    for (std::size_t len = 1; len < 16; ++len) {
      code |= int(in.bits(1));
      int const n = count[len];
      if (code - first < n) { return symbol[std::size_t(index + code - first)]; }
      index += n;
      first = (first + n) << 1;
      code <<= 1;
    }
    in.fail("invalid Huffman code");
  }
};

inline constexpr std::array<std::uint16_t, 29> length_base = {
    3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
    31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
inline constexpr std::array<std::uint8_t, 29> length_extra = {
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
inline constexpr std::array<std::uint16_t, 30> distance_base = {
    1,   2,   3,   4,   5,   7,    9,    13,   17,   25,   33,   49,   65,    97,    129,
    193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
inline constexpr std::array<std::uint8_t, 30> distance_extra = {
    0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
    6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

inline void inflate_block(bit_reader& in, std::vector<std::uint8_t>& out, huffman const& lit,
                          huffman const& dist)
{
  for (;;) {
    unsigned const s = lit.decode(in);
    if (s < 256) {
      out.push_back(std::uint8_t(s));
    } else if (s == 256) {
      return;
    } else {
      unsigned const li = s - 257;
      if (li >= length_base.size()) { in.fail("invalid length symbol"); }
      std::size_t const len = length_base[li] + in.bits(length_extra[li]);
      unsigned const di     = dist.decode(in);
      if (di >= distance_base.size()) { in.fail("invalid distance symbol"); }
      std::size_t const d = distance_base[di] + in.bits(distance_extra[di]);
      if (d > out.size()) { in.fail("distance reaches before the start of the data"); }
      std::size_t const from = out.size() - d;
      for (std::size_t i = 0; i < len; ++i) { out.push_back(out[from + i]); }
    }
  }
}

inline std::vector<std::uint8_t> inflate(bit_reader& in, std::size_t size_hint)
{
  std::vector<std::uint8_t> out;
  out.reserve(size_hint);
  huffman fixed_lit, fixed_dist;
  {
    std::array<std::uint8_t, 288> l{};
    std::fill(l.begin(), l.begin() + 144, std::uint8_t{8});
    std::fill(l.begin() + 144, l.begin() + 256, std::uint8_t{9});
    std::fill(l.begin() + 256, l.begin() + 280, std::uint8_t{7});
    std::fill(l.begin() + 280, l.end(), std::uint8_t{8});
    fixed_lit.build(l, in);
    std::array<std::uint8_t, 30> d{};
    d.fill(5);
    fixed_dist.build(d, in);
  }
  bool last = false;
  while (!last) {
    last              = in.bits(1) == 1;
    unsigned const ty = in.bits(2);
    if (ty == 0) {  // stored
      in.align_to_byte();
      unsigned const len  = in.byte() | (unsigned(in.byte()) << 8);
      unsigned const nlen = in.byte() | (unsigned(in.byte()) << 8);
      if ((len ^ 0xffffu) != nlen) { in.fail("stored block length check failed"); }
      for (unsigned i = 0; i < len; ++i) { out.push_back(in.byte()); }
    } else if (ty == 1) {
      inflate_block(in, out, fixed_lit, fixed_dist);
    } else if (ty == 2) {
      unsigned const nlen  = in.bits(5) + 257;
      unsigned const ndist = in.bits(5) + 1;
      unsigned const ncode = in.bits(4) + 4;
      if (nlen > 286 || ndist > 30) { in.fail("bad dynamic block header"); }
      static constexpr std::array<std::uint8_t, 19> order = {16, 17, 18, 0, 8,  7, 9,  6, 10, 5,
                                                             11, 4,  12, 3, 13, 2, 14, 1, 15};
      std::array<std::uint8_t, 19> cl{};
      for (unsigned i = 0; i < ncode; ++i) { cl[order[i]] = std::uint8_t(in.bits(3)); }
      huffman code_lengths;
      code_lengths.build(cl, in);
      std::vector<std::uint8_t> lengths;
      while (lengths.size() < nlen + ndist) {
        unsigned const s = code_lengths.decode(in);
        if (s < 16) {
          lengths.push_back(std::uint8_t(s));
          continue;
        }
        std::uint8_t value = 0;
        unsigned repeat    = 0;
        if (s == 16) {
          if (lengths.empty()) { in.fail("length repeat with no previous length"); }
          value  = lengths.back();
          repeat = 3 + in.bits(2);
        } else if (s == 17) {
          repeat = 3 + in.bits(3);
        } else {
          repeat = 11 + in.bits(7);
        }
        if (lengths.size() + repeat > nlen + ndist) { in.fail("too many code lengths"); }
        lengths.insert(lengths.end(), repeat, value);
      }
      if (lengths[256] == 0) { in.fail("dynamic block without an end-of-block code"); }
      huffman lit, dist;
      lit.build(std::span(lengths).first(nlen), in);
      dist.build(std::span(lengths).subspan(nlen), in);
      inflate_block(in, out, lit, dist);
    } else {
      in.fail("invalid block type 3");
    }
  }
  return out;
}

inline std::uint32_t crc32(std::span<std::uint8_t const> data)
{
  static auto const table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) { c = (c & 1u) != 0 ? 0xedb88320u ^ (c >> 1) : c >> 1; }
      t[n] = c;
    }
    return t;
  }();
  std::uint32_t c = 0xffffffffu;
  for (auto b : data) { c = table[(c ^ b) & 0xffu] ^ (c >> 8); }
  return c ^ 0xffffffffu;
}

inline std::uint32_t load_be32(std::uint8_t const* p)
{
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         p[3];
}
inline std::uint32_t load_le32(std::uint8_t const* p)
{
  return (std::uint32_t(p[3]) << 24) | (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[1]) << 8) |
         p[0];
}

}  // namespace detail

/// @brief Whether `bytes` start like a gzip member (1f 8b).
[[nodiscard]] inline bool is_gzip(std::span<std::uint8_t const> bytes) noexcept
{
  return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

/// @brief The uncompressed contents of a gzip file's members; `name` is for messages.
[[nodiscard]] inline std::vector<std::uint8_t> gunzip(std::span<std::uint8_t const> bytes,
                                                      std::string const& name)
{
  std::vector<std::uint8_t> out;
  std::size_t pos = 0;
  do {
    auto const member = bytes.subspan(pos);
    if (member.size() < 18) {
      throw idx_error(name + ": gzip: file too short for a gzip member (truncated)");
    }
    if (!is_gzip(member)) { throw idx_error(name + ": gzip: bad magic (not a gzip file)"); }
    if (member[2] != 8) { throw idx_error(name + ": gzip: compression method is not DEFLATE"); }
    std::uint8_t const flags = member[3];
    std::size_t p            = 10;
    auto need                = [&](std::size_t n) {
      if (p + n > member.size()) {
        throw idx_error(name + ": gzip: header ends early (truncated)");
      }
    };
    if ((flags & 0x04) != 0) {  // FEXTRA
      need(2);
      std::size_t const xlen = member[p] | (std::size_t(member[p + 1]) << 8);
      p += 2;
      need(xlen);
      p += xlen;
    }
    for (std::uint8_t bit : {std::uint8_t{0x08}, std::uint8_t{0x10}}) {  // FNAME, FCOMMENT
      if ((flags & bit) == 0) { continue; }
      while (true) {
        need(1);
        if (member[p++] == 0) { break; }
      }
    }
    if ((flags & 0x02) != 0) {  // FHCRC
      need(2);
      p += 2;
    }
    need(0);
    detail::bit_reader in(member.subspan(p), name);
    std::uint32_t const isize_hint = detail::load_le32(member.data() + member.size() - 4);
    auto data                      = detail::inflate(in, isize_hint);
    std::size_t const end          = p + in.position();
    if (end + 8 > member.size()) {
      throw idx_error(name + ": gzip: trailer missing (truncated file)");
    }
    std::uint32_t const crc   = detail::load_le32(member.data() + end);
    std::uint32_t const isize = detail::load_le32(member.data() + end + 4);
    if (detail::crc32(data) != crc) {
      throw idx_error(name + ": gzip: CRC-32 mismatch (corrupted file)");
    }
    if (std::uint32_t(data.size()) != isize) {
      throw idx_error(name + ": gzip: length mismatch (corrupted file)");
    }
    out.insert(out.end(), data.begin(), data.end());
    pos += end + 8;
  } while (pos < bytes.size() && bytes.size() - pos >= 2 && is_gzip(bytes.subspan(pos)));
  return out;
}

/// @brief An IDX array of unsigned bytes.
struct idx_array {
  std::vector<std::uint32_t> dims;  ///< outermost first
  std::vector<std::uint8_t> data;   ///< row-major
};

/// @brief Parses IDX bytes (already uncompressed); `name` is for messages.
[[nodiscard]] inline idx_array parse_idx(std::span<std::uint8_t const> bytes,
                                         std::string const& name)
{
  if (bytes.size() < 4) {
    throw idx_error(name + ": IDX: file too short for the 4-byte magic (truncated)");
  }
  if (bytes[0] != 0 || bytes[1] != 0) {
    throw idx_error(name + ": IDX: bad magic (first two bytes must be zero; is this an IDX file?)");
  }
  if (bytes[2] != 0x08) {
    throw idx_error(name + ": IDX: element type byte is " + std::to_string(bytes[2]) +
                    ", not 8 (unsigned byte), the only type Fashion-MNIST uses");
  }
  std::size_t const ndims = bytes[3];
  if (ndims == 0) { throw idx_error(name + ": IDX: zero dimensions"); }
  if (bytes.size() < 4 + 4 * ndims) {
    throw idx_error(name + ": IDX: header ends early (" + std::to_string(ndims) +
                    " dimensions announced)");
  }
  idx_array a;
  std::uint64_t count = 1;
  for (std::size_t i = 0; i < ndims; ++i) {
    a.dims.push_back(detail::load_be32(bytes.data() + 4 + 4 * i));
    count *= a.dims.back();
    if (count > (std::uint64_t{1} << 40)) {
      throw idx_error(name + ": IDX: implausible dimensions");
    }
  }
  std::size_t const header = 4 + 4 * ndims;
  std::uint64_t const have = bytes.size() - header;
  if (have < count) {
    throw idx_error(name + ": IDX: truncated: dimensions announce " + std::to_string(count) +
                    " bytes of data, the file has " + std::to_string(have));
  }
  if (have > count) {
    throw idx_error(name + ": IDX: " + std::to_string(have - count) +
                    " trailing bytes after the announced data");
  }
  a.data.assign(bytes.begin() + std::ptrdiff_t(header), bytes.end());
  return a;
}

/// @brief The bytes of a file.
[[nodiscard]] inline std::vector<std::uint8_t> read_bytes(std::filesystem::path const& path)
{
  std::ifstream f(path, std::ios::binary);
  if (!f) { throw dataset_missing(path.string() + ": cannot open"); }
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                  std::istreambuf_iterator<char>());
  if (f.bad()) { throw idx_error(path.string() + ": read error"); }
  return bytes;
}

/// @brief Reads an IDX file, gunzipping it first when it is gzip-compressed.
[[nodiscard]] inline idx_array read_idx(std::filesystem::path const& path)
{
  auto bytes = read_bytes(path);
  if (is_gzip(bytes)) { bytes = gunzip(bytes, path.string()); }
  return parse_idx(bytes, path.string());
}

/// @brief Images with labels.
struct labelled_images {
  std::size_t count{0};
  std::size_t rows{0};
  std::size_t cols{0};
  std::vector<std::uint8_t> pixels;  ///< count x rows x cols
  std::vector<std::uint8_t> labels;  ///< count, each < classes
};

/// @brief Fashion-MNIST's two splits.
struct dataset {
  labelled_images train;
  labelled_images test;
  static constexpr std::size_t classes = 10;
};

/// @brief `folder/stem` or `folder/stem.gz`, whichever exists (plain first).
[[nodiscard]] inline std::filesystem::path find_idx_file(std::filesystem::path const& folder,
                                                         std::string const& stem)
{
  auto const plain = folder / stem;
  if (std::filesystem::exists(plain)) { return plain; }
  auto const gz = folder / (stem + ".gz");
  if (std::filesystem::exists(gz)) { return gz; }
  throw dataset_missing("dataset file " + plain.string() + " (or " + gz.filename().string() +
                        ") not found in " + folder.string() +
                        "; on Debian/Ubuntu: apt-get install dataset-fashion-mnist (installs " +
                        default_dataset_dir + ")");
}

/// @brief Reads one split ("train" or "t10k") and checks that images and labels agree.
[[nodiscard]] inline labelled_images read_split(std::filesystem::path const& folder,
                                                std::string const& split, std::size_t classes)
{
  auto const image_path = find_idx_file(folder, split + "-images-idx3-ubyte");
  auto const label_path = find_idx_file(folder, split + "-labels-idx1-ubyte");
  auto images           = read_idx(image_path);
  auto labels           = read_idx(label_path);
  if (images.dims.size() != 3) {
    throw idx_error(image_path.string() +
                    ": IDX: images need 3 dimensions (count, rows, cols), the file has " +
                    std::to_string(images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    throw idx_error(label_path.string() + ": IDX: labels need 1 dimension, the file has " +
                    std::to_string(labels.dims.size()));
  }
  if (images.dims[0] != labels.dims[0]) {
    throw idx_error(image_path.string() + " has " + std::to_string(images.dims[0]) +
                    " images but " + label_path.string() + " has " +
                    std::to_string(labels.dims[0]) + " labels");
  }
  if (images.dims[0] == 0 || images.dims[1] == 0 || images.dims[2] == 0) {
    throw idx_error(image_path.string() + ": IDX: empty image set");
  }
  for (std::size_t i = 0; i < labels.data.size(); ++i) {
    if (labels.data[i] >= classes) {
      throw idx_error(label_path.string() + ": label " + std::to_string(labels.data[i]) +
                      " of item " + std::to_string(i) + " is not a class 0.." +
                      std::to_string(classes - 1));
    }
  }
  labelled_images s;
  s.count  = images.dims[0];
  s.rows   = images.dims[1];
  s.cols   = images.dims[2];
  s.pixels = std::move(images.data);
  s.labels = std::move(labels.data);
  return s;
}

/// @brief Reads Fashion-MNIST from `folder` (train-* and t10k-* files, plain or .gz); a missing
/// folder or file throws dataset_missing naming it and the Debian package.
[[nodiscard]] inline dataset load_fashion_mnist(std::filesystem::path const& folder)
{
  if (!std::filesystem::is_directory(folder)) {
    throw dataset_missing(
        "dataset folder " + folder.string() +
        " does not exist; on Debian/Ubuntu: apt-get install dataset-fashion-mnist "
        "(installs " +
        std::string(default_dataset_dir) + ")");
  }
  dataset d;
  d.train = read_split(folder, "train", dataset::classes);
  d.test  = read_split(folder, "t10k", dataset::classes);
  if (d.train.rows != d.test.rows || d.train.cols != d.test.cols) {
    throw idx_error(folder.string() + ": train images are " + std::to_string(d.train.rows) + "x" +
                    std::to_string(d.train.cols) + " but test images " +
                    std::to_string(d.test.rows) + "x" + std::to_string(d.test.cols));
  }
  return d;
}

}  // namespace train_cnn
