/**
 * @file cost_model.hpp
 * @brief Time of ops, transfers and codec kernels on a hardware preset, with every assumption a
 * named parameter.
 *
 * Op time = kernel launch + max(FLOPs / (peak FLOP/s x compute_efficiency),
 *                                bytes / (peak memory bandwidth x memory_efficiency)),
 * a roofline over the bytes an op reads and writes and, where sizes determine them, its FLOPs
 * (see op_flops.hpp). Ops that write nothing are views: they launch no kernel and cost view_op_s.
 * Transfer time = link latency + wire bytes / achieved link bandwidth, where wire bytes =
 * bytes / codec_ratio when a codec is modelled. Codec kernels stream their input once and write
 * their output once, so each runs at codec_bandwidth_fraction of the memory bandwidth, on the copy
 * streams; codec_compute_share of that time also delays compute (the kernels share the device).
 */
#pragma once

#include <stash/codec/buffer_header.hpp>
#include <stash/codec/precision.hpp>
#include <stash/core/error.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/op_flops.hpp>
#include <stash/trace/trace.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief How a swapped storage crosses the link (a schedule entry names one).
enum class swap_encoding : std::uint8_t {
  configured,   ///< as the allocator's Codec slot does (cost_params::use_codec, codec_ratio)
  raw,          ///< no codec: the bytes as they are
  zvc,          ///< zero-value compression (cDMA), lossless: ReLU-like outputs
  bitmask,      ///< Gist's Binarize, 1 bit per element: exact where readers need only the sign,
                ///< or where every element is 0.0f or 1.0f (a Bernoulli draw)
  pool_argmax,  ///< Gist: a 4-bit window argmax per output instead of int64 max-pool indices
  fp16,         ///< lossy: IEEE half precision (Gist's DPR; only where the user opts in)
  bf16,         ///< lossy: bfloat16
  fp8_e4m3,     ///< lossy: 8-bit float, 4 exponent and 3 mantissa bits
  two_value,    ///< lossless, 1 bit per element + one value c: data that is all 0 or c (a
                ///< scaled dropout mask); the encoder refuses other data (it then travels raw)
  range_mask,   ///< 1 bit per element, whether it lies inside a clamp's (lo, hi): exact where
                ///< readers need only that (hardtanh's backward, e.g. ReLU6's input)
};

/// @brief Spelling of a swap encoding.
/// @param e How the bytes cross the link.
/// @return The name.
[[nodiscard]] constexpr std::string_view to_string(swap_encoding e) noexcept
{
  switch (e) {
    case swap_encoding::configured:
      return "configured";
    case swap_encoding::raw:
      return "raw";
    case swap_encoding::zvc:
      return "zvc";
    case swap_encoding::bitmask:
      return "bitmask";
    case swap_encoding::pool_argmax:
      return "pool_argmax";
    case swap_encoding::fp16:
      return "fp16";
    case swap_encoding::bf16:
      return "bf16";
    case swap_encoding::fp8_e4m3:
      return "fp8_e4m3";
    case swap_encoding::two_value:
      return "two_value";
    case swap_encoding::range_mask:
      return "range_mask";
  }
  return "?";
}

/// @brief The encoding whose bytes codec `id` (codec_ids) writes, so an executor can match a
/// schedule entry's encoding to a codec it carries; none for formats no schedule names (csr, rle,
/// chains, fp8_e5m2, fp10). The identity codec counts as raw.
/// @param id A codec id as written in a buffer header.
/// @return The encoding, or nullopt for a codec no schedule names.
[[nodiscard]] constexpr std::optional<swap_encoding> encoding_of_codec(std::uint16_t id) noexcept
{
  switch (id) {
    case codec_ids::identity:
      return swap_encoding::raw;
    case codec_ids::zvc:
      return swap_encoding::zvc;
    case codec_ids::bitmask:
      return swap_encoding::bitmask;
    case codec_ids::pool_argmax:
      return swap_encoding::pool_argmax;
    case codec_ids::precision | fp16::code:
      return swap_encoding::fp16;
    case codec_ids::precision | bf16::code:
      return swap_encoding::bf16;
    case codec_ids::precision | fp8_e4m3::code:
      return swap_encoding::fp8_e4m3;
    case codec_ids::two_value:
      return swap_encoding::two_value;
    case codec_ids::range_mask:
      return swap_encoding::range_mask;
    default:
      return std::nullopt;
  }
}

/// @brief The assumptions of the cost model. Defaults are stated guesses, not measurements.
struct cost_params {
  /// Share of peak fp32 FLOP/s that conv and GEMM kernels sustain (cuDNN/cuBLAS on large
  /// layers reach 60-80%; an assumption).
  double compute_efficiency = 0.7;
  /// Share of peak memory bandwidth that elementwise kernels sustain (STREAM-like; assumption).
  double memory_efficiency = 0.8;
  /// Whether FLOPs derived from sizes are used; false = a bytes-only roofline.
  bool use_flops = true;
  /// Whether offloaded data passes through a codec (encode before D2H, decode after H2D).
  bool use_codec = false;
  /// Uncompressed / compressed bytes when use_codec; fixed, or measured (codec_ratio_of).
  double codec_ratio = 1.0;
  /// Uncompressed / compressed bytes of zvc on a ReLU-like output, for entries that choose zvc
  /// (declared: zvc measured 1.55-1.79x on real post-ReLU maps,
  /// benchmarks/results/codec_ratios.md).
  double zvc_ratio = 1.6;
  /// Codec kernel throughput as a share of the memory bandwidth: a stream compaction reads the
  /// input once and writes at most as much, so about half of copy throughput (assumption).
  double codec_bandwidth_fraction = 0.5;
  /// Share of the codec kernels' time that also delays the compute stream, in [0, 1]: encode and
  /// decode run on the copy streams but share the device's SMs and memory bandwidth with the
  /// compute kernels (0 = fully overlapped, 1 = serialized with compute; assumption).
  double codec_compute_share = 0.0;
  /// Cost of an op that writes nothing (view, detach): no kernel; its host cost hides behind
  /// queued GPU work (assumption).
  double view_op_s = 0.0;
};

/// @brief The ratio uncompressed / compressed from a measured pair of sizes; stash::logic_error
/// for empty sizes.
/// @param raw_bytes Bytes before encoding.
/// @param encoded_bytes Bytes after.
/// @return raw / encoded (1 when nothing was encoded).
[[nodiscard]] inline double codec_ratio_of(std::uint64_t raw_bytes, std::uint64_t encoded_bytes)
{
  STASH_EXPECTS(raw_bytes > 0 && encoded_bytes > 0, "codec_ratio_of: sizes must be positive (raw " +
                                                        std::to_string(raw_bytes) + " B, encoded " +
                                                        std::to_string(encoded_bytes) + " B)");
  return static_cast<double>(raw_bytes) / static_cast<double>(encoded_bytes);
}

/// @brief Times of ops, transfers and codec kernels on one hardware preset.
class cost_model {
 public:
  /// @brief A model of `hw` under `params`; stash::logic_error for nonsensical parameters.
  /// @param hw The machine.
  /// @param params Codec and recompute figures.
  explicit cost_model(hardware const& hw, cost_params const& params = {}) : hw_(hw), params_(params)
  {
    auto positive = [](double v) { return v > 0 && std::isfinite(v); };
    STASH_EXPECTS(positive(hw.pcie_d2h_bytes_per_s) && positive(hw.pcie_h2d_bytes_per_s) &&
                      positive(hw.device_bytes_per_s) && positive(hw.fp32_flops_per_s),
                  "hardware '" + std::string(hw.name) + "': rates must be positive");
    STASH_EXPECTS(hw.pcie_latency_s >= 0 && hw.kernel_launch_s >= 0,
                  "hardware '" + std::string(hw.name) + "': latencies must be >= 0");
    STASH_EXPECTS(params.compute_efficiency > 0 && params.compute_efficiency <= 1,
                  "cost_params.compute_efficiency must be in (0, 1], got " +
                      std::to_string(params.compute_efficiency));
    STASH_EXPECTS(params.memory_efficiency > 0 && params.memory_efficiency <= 1,
                  "cost_params.memory_efficiency must be in (0, 1], got " +
                      std::to_string(params.memory_efficiency));
    STASH_EXPECTS(positive(params.codec_ratio), "cost_params.codec_ratio must be positive, got " +
                                                    std::to_string(params.codec_ratio));
    STASH_EXPECTS(positive(params.zvc_ratio), "cost_params.zvc_ratio must be positive, got " +
                                                  std::to_string(params.zvc_ratio));
    STASH_EXPECTS(params.codec_bandwidth_fraction > 0,
                  "cost_params.codec_bandwidth_fraction must be positive");
    STASH_EXPECTS(params.view_op_s >= 0, "cost_params.view_op_s must be >= 0");
    STASH_EXPECTS(params.codec_compute_share >= 0 && params.codec_compute_share <= 1,
                  "cost_params.codec_compute_share must be in [0, 1], got " +
                      std::to_string(params.codec_compute_share));
  }

  /// @brief The hardware preset.
  /// @return The machine.
  [[nodiscard]] hardware const& hw() const noexcept { return hw_; }
  /// @brief The assumptions.
  /// @return The codec and recompute figures.
  [[nodiscard]] cost_params const& params() const noexcept { return params_; }

  /// @brief Seconds for an op of the given work.
  /// @param w The op's flops and bytes.
  /// @return Seconds.
  [[nodiscard]] double op_time(op_work const& w) const noexcept
  {
    if (w.view) { return params_.view_op_s; }
    double const memory =
        static_cast<double>(w.bytes) / (hw_.device_bytes_per_s * params_.memory_efficiency);
    double const compute =
        params_.use_flops ? w.flops / (hw_.fp32_flops_per_s * params_.compute_efficiency) : 0.0;
    return hw_.kernel_launch_s + std::max(memory, compute);
  }

  /// @brief Seconds of every op of `t`, indexed by op index.
  /// @param t The trace.
  /// @return Seconds per op of `t`.
  [[nodiscard]] std::vector<double> op_times(trace const& t) const
  {
    auto const work = estimate_op_work(t);
    std::vector<double> times(work.size());
    for (std::size_t i = 0; i < work.size(); ++i) { times[i] = op_time(work[i]); }
    return times;
  }

  /// @brief Uncompressed / compressed bytes of `e`: bitmask, two_value, range_mask and
  /// pool_argmax by their formats (32, 32, 32 and 16), reduced precision by its width, zvc and
  /// `configured` from the parameters.
  /// @param e How the bytes cross the link.
  /// @return Raw bytes per wire byte.
  [[nodiscard]] double encoding_ratio(swap_encoding e) const noexcept
  {
    switch (e) {
      case swap_encoding::configured:
        return params_.use_codec ? params_.codec_ratio : 1.0;
      case swap_encoding::raw:
        return 1.0;
      case swap_encoding::zvc:
        return params_.zvc_ratio;
      case swap_encoding::bitmask:
      case swap_encoding::two_value:   // 1 bit per float32 element (the value: 8 bytes, ignored)
      case swap_encoding::range_mask:  // 1 bit per float32 element (the bounds: 8 bytes, ignored)
        return 32.0;
      case swap_encoding::pool_argmax:
        return 16.0;
      case swap_encoding::fp16:
      case swap_encoding::bf16:
        return 2.0;
      case swap_encoding::fp8_e4m3:
        return 4.0;
    }
    return 1.0;
  }

  /// @brief Bytes that cross the link for a storage of `bytes` encoded as `e`.
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Bytes on the link.
  [[nodiscard]] std::uint64_t wire_bytes(std::uint64_t bytes,
                                         swap_encoding e = swap_encoding::configured) const noexcept
  {
    if (e == swap_encoding::raw || (e == swap_encoding::configured && !params_.use_codec)) {
      return bytes;
    }
    return static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) / encoding_ratio(e)));
  }

  /// @brief Seconds of the device-to-host copy of a storage of `bytes` encoded as `e`.
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double d2h_time(std::uint64_t bytes,
                                swap_encoding e = swap_encoding::configured) const noexcept
  {
    return hw_.pcie_latency_s +
           static_cast<double>(wire_bytes(bytes, e)) / hw_.pcie_d2h_bytes_per_s;
  }
  /// @brief Seconds of the host-to-device copy of a storage of `bytes` encoded as `e`.
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double h2d_time(std::uint64_t bytes,
                                swap_encoding e = swap_encoding::configured) const noexcept
  {
    return hw_.pcie_latency_s +
           static_cast<double>(wire_bytes(bytes, e)) / hw_.pcie_h2d_bytes_per_s;
  }
  /// @brief Seconds of the encode kernel before an offload (0 without a codec).
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double encode_time(std::uint64_t bytes,
                                   swap_encoding e = swap_encoding::configured) const noexcept
  {
    return codec_time(bytes, e);
  }
  /// @brief Seconds of the decode kernel after a prefetch (0 without a codec).
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double decode_time(std::uint64_t bytes,
                                   swap_encoding e = swap_encoding::configured) const noexcept
  {
    return codec_time(bytes, e);
  }

  /// @brief Whole offload: encode then D2H.
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double offload_time(std::uint64_t bytes,
                                    swap_encoding e = swap_encoding::configured) const noexcept
  {
    return encode_time(bytes, e) + d2h_time(bytes, e);
  }
  /// @brief Whole prefetch: H2D then decode.
  /// @param bytes The tensor's size.
  /// @param e How the bytes cross the link.
  /// @return Seconds.
  [[nodiscard]] double prefetch_time(std::uint64_t bytes,
                                     swap_encoding e = swap_encoding::configured) const noexcept
  {
    return h2d_time(bytes, e) + decode_time(bytes, e);
  }

 private:
  [[nodiscard]] double codec_time(std::uint64_t bytes, swap_encoding e) const noexcept
  {
    if (e == swap_encoding::raw || (e == swap_encoding::configured && !params_.use_codec)) {
      return 0.0;
    }
    return hw_.kernel_launch_s +
           static_cast<double>(bytes) / (hw_.device_bytes_per_s * params_.codec_bandwidth_fraction);
  }

  hardware hw_;
  cost_params params_;
};

}  // namespace stash
