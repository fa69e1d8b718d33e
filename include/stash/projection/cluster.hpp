/**
 * @file cluster.hpp
 * @brief A cluster of identical devices for the multi-device projection (projection.hpp): nodes,
 * devices per node, the intra-node link, the inter-node network and the device preset; and the
 * one-line SPEC format that tools parse it from.
 *
 * SPEC: comma-separated `key=value` pairs, e.g. "nodes=16,gpus=8,intra=nvlink,inter_gbps=100,
 * latency_us=5". Keys:
 *  - `nodes` (default 1), `gpus` (devices per node, default 1): positive integers;
 *  - `intra`: intra-node link preset (see intra_link_presets; default pcie4);
 *  - `intra_gbps`, `intra_latency_us`: override the preset's per-direction rate (Gbit/s) and
 *    latency;
 *  - `inter_gbps`: inter-node network rate per node and direction, Gbit/s (network convention:
 *    100 = 100 Gb/s EDR InfiniBand). A node with one NIC per device gives the sum. Required when
 *    nodes > 1;
 *  - `latency_us`: inter-node latency per message (default 5 us, an assumption);
 *  - `hw`: the device preset (hardware.hpp; default h100_sxm).
 * Unknown keys, repeated keys, malformed numbers and out-of-range values are stash::logic_error
 * naming the offending pair.
 */
#pragma once

#include <stash/core/error.hpp>
#include <stash/sim/hardware.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stash {

/// @brief A point-to-point link as the ring all-reduce and the stage transfers see it.
struct link_spec {
  std::string name;      ///< preset name (its rate/latency may be overridden)
  double bytes_per_s{};  ///< achieved rate per direction
  double latency_s{};    ///< fixed cost per message (an assumption)
};

/// @brief One named intra-node link: datasheet per-direction rate, assumed latency.
struct intra_link_preset {
  std::string_view name;         ///< SPEC spelling
  std::string_view description;  ///< what the numbers are
  double bytes_per_s;            ///< per-direction rate
  double latency_s;              ///< per-message latency (assumption)
};

/// @brief Intra-node link presets. NVLink rates are datasheet per-direction figures (half the
/// quoted bidirectional total); PCIe rates are raw x16 x vDNN's achieved fraction (hardware.hpp).
/// Latencies are assumptions: 2 us for NVLink (NCCL-level small-message cost), the hardware
/// presets' 10 us for PCIe.
inline constexpr std::array<intra_link_preset, 6> intra_link_presets = {{
    {"nvlink", "NVLink 4 (H100 SXM): 900 GB/s bidirectional = 450 GB/s per direction", 450e9, 2e-6},
    {"nvlink4", "NVLink 4 (H100 SXM): 450 GB/s per direction", 450e9, 2e-6},
    {"nvlink3", "NVLink 3 (A100 SXM): 600 GB/s bidirectional = 300 GB/s per direction", 300e9,
     2e-6},
    {"pcie", "PCIe gen4 x16, achieved = raw x vDNN's gen3 efficiency",
     pcie4_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6},
    {"pcie4", "PCIe gen4 x16, achieved = raw x vDNN's gen3 efficiency",
     pcie4_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6},
    {"pcie5", "PCIe gen5 x16, achieved = raw x vDNN's gen3 efficiency",
     pcie5_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6},
}};

/// @brief Default inter-node latency when the SPEC gives none (assumption: InfiniBand-class).
inline constexpr double default_inter_latency_s = 5e-6;
/// @brief Device preset used when the SPEC names none.
inline constexpr std::string_view default_cluster_hardware = "h100_sxm";

/// @brief The cluster: identical devices, `gpus_per_node` per node.
struct cluster {
  std::uint32_t nodes         = 1;  ///< number of nodes
  std::uint32_t gpus_per_node = 1;  ///< devices per node
  link_spec intra;                  ///< link between two devices of one node
  link_spec inter;                  ///< network between nodes (rate per node and direction)
  hardware hw;                      ///< every device

  /// @brief Total number of devices.
  /// @return nodes x devices per node.
  [[nodiscard]] std::uint64_t devices() const noexcept
  {
    return static_cast<std::uint64_t>(nodes) * gpus_per_node;
  }
};

/// @brief The intra-node preset called `name`; stash::logic_error listing the known ones.
/// @param name The preset's name.
/// @return The preset.
/// @throws stash::logic_error For an unknown name, listing the known ones.
[[nodiscard]] inline intra_link_preset const& intra_link(std::string_view name)
{
  std::string known;
  for (auto const& p : intra_link_presets) {
    if (p.name == name) { return p; }
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  STASH_FAIL("unknown intra-node link '" + std::string(name) + "' (known: " + known + ")");
}

namespace detail {

[[nodiscard]] inline double parse_spec_number(std::string_view key, std::string_view value)
{
  double v             = 0;
  auto const* end      = value.data() + value.size();
  auto const [ptr, ec] = std::from_chars(value.data(), end, v);
  STASH_EXPECTS(
      !value.empty() && ec == std::errc() && ptr == end && std::isfinite(v),
      "cluster spec: '" + std::string(key) + "=" + std::string(value) + "' is not a number");
  return v;
}

[[nodiscard]] inline std::uint32_t parse_spec_count(std::string_view key, std::string_view value)
{
  std::uint32_t v      = 0;
  auto const* end      = value.data() + value.size();
  auto const [ptr, ec] = std::from_chars(value.data(), end, v);
  STASH_EXPECTS(!value.empty() && ec == std::errc() && ptr == end && v > 0,
                "cluster spec: '" + std::string(key) + "=" + std::string(value) +
                    "' must be a positive integer");
  return v;
}

}  // namespace detail

/// @brief Parses a cluster SPEC (see the file comment); stash::logic_error naming what is wrong.
/// @param spec The SPEC text.
/// @return The cluster.
/// @throws stash::logic_error Naming the field that is missing, unknown or out of range.
// Kept whole (~65 lines): one branch per key of the SPEC grammar, then the defaults and the
// cross-key checks; the branches are the grammar and read best together.
[[nodiscard]] inline cluster parse_cluster_spec(std::string_view spec)
{
  cluster c;
  std::string intra_name = "pcie4";
  double intra_gbps = -1, intra_latency_us = -1, inter_gbps = -1, latency_us = -1;
  std::string hw_name(default_cluster_hardware);
  std::vector<std::string> seen;
  std::size_t pos = 0;
  STASH_EXPECTS(!spec.empty(),
                "cluster spec is empty (example: nodes=16,gpus=8,intra=nvlink,"
                "inter_gbps=100,latency_us=5)");
  while (pos <= spec.size()) {
    auto const comma = spec.find(',', pos);
    auto const stop  = comma == std::string_view::npos ? spec.size() : comma;
    auto const pair  = spec.substr(pos, stop - pos);
    pos              = stop + 1;
    auto const eq    = pair.find('=');
    STASH_EXPECTS(!pair.empty() && eq != std::string_view::npos && eq > 0,
                  "cluster spec: '" + std::string(pair) + "' is not key=value");
    auto const key   = pair.substr(0, eq);
    auto const value = pair.substr(eq + 1);
    for (auto const& k : seen) {
      STASH_EXPECTS(k != key, "cluster spec: key '" + std::string(key) + "' given twice");
    }
    seen.emplace_back(key);
    auto positive = [&](double v) {
      STASH_EXPECTS(v > 0, "cluster spec: '" + std::string(pair) + "' must be positive");
      return v;
    };
    if (key == "nodes") {
      c.nodes = detail::parse_spec_count(key, value);
    } else if (key == "gpus") {
      c.gpus_per_node = detail::parse_spec_count(key, value);
    } else if (key == "intra") {
      intra_name = std::string(value);
      (void)intra_link(intra_name);  // fail early, listing the known presets
    } else if (key == "intra_gbps") {
      intra_gbps = positive(detail::parse_spec_number(key, value));
    } else if (key == "intra_latency_us") {
      intra_latency_us = detail::parse_spec_number(key, value);
      STASH_EXPECTS(intra_latency_us >= 0,
                    "cluster spec: '" + std::string(pair) + "' must be >= 0");
    } else if (key == "inter_gbps") {
      inter_gbps = positive(detail::parse_spec_number(key, value));
    } else if (key == "latency_us") {
      latency_us = detail::parse_spec_number(key, value);
      STASH_EXPECTS(latency_us >= 0, "cluster spec: '" + std::string(pair) + "' must be >= 0");
    } else if (key == "hw") {
      hw_name = std::string(value);
    } else {
      STASH_FAIL("cluster spec: unknown key '" + std::string(key) +
                 "' (known: nodes, gpus, intra, intra_gbps, intra_latency_us, inter_gbps, "
                 "latency_us, hw)");
    }
    if (comma == std::string_view::npos) { break; }
  }
  STASH_EXPECTS(c.nodes == 1 || inter_gbps > 0,
                "cluster spec: inter_gbps is required when nodes > 1");
  auto const& preset = intra_link(intra_name);
  c.intra            = link_spec{std::string(preset.name),
                      intra_gbps > 0 ? intra_gbps * 1e9 / 8 : preset.bytes_per_s,
                      intra_latency_us >= 0 ? intra_latency_us * 1e-6 : preset.latency_s};
  // A single node never uses the network; give it a defined value so printing stays simple.
  c.inter = link_spec{"network", inter_gbps > 0 ? inter_gbps * 1e9 / 8 : c.intra.bytes_per_s,
                      latency_us >= 0 ? latency_us * 1e-6 : default_inter_latency_s};
  c.hw    = hardware_preset(hw_name);
  return c;
}

/// @brief The cluster in SPEC form with every value spelled out (rates in Gbit/s).
/// @param c The cluster.
/// @return Text parse_cluster_spec() reads back into `c`.
[[nodiscard]] inline std::string to_spec(cluster const& c)
{
  auto num = [](double v) {
    char buf[64];
    auto const [ptr, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return ec == std::errc() ? std::string(buf, ptr) : std::string("?");
  };
  return "nodes=" + std::to_string(c.nodes) + ",gpus=" + std::to_string(c.gpus_per_node) +
         ",intra=" + c.intra.name + ",intra_gbps=" + num(c.intra.bytes_per_s * 8 / 1e9) +
         ",intra_latency_us=" + num(c.intra.latency_s * 1e6) +
         ",inter_gbps=" + num(c.inter.bytes_per_s * 8 / 1e9) +
         ",latency_us=" + num(c.inter.latency_s * 1e6) + ",hw=" + std::string(c.hw.name);
}

}  // namespace stash
