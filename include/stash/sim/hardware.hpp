/**
 * @file hardware.hpp
 * @brief Named hardware presets for the iteration simulator: host link, device memory, compute.
 *
 * Every figure is either a vendor datasheet number or the vDNN paper's own measurement; where a
 * figure is an assumption rather than a datum, its comment says so. No figure here was measured
 * by stash (the machine that wrote them had no GPU). Achieved PCIe bandwidth on newer links is
 * derived from vDNN's gen3 measurement (12.8 of 15.75 GB/s peak, about 81%), so that all presets
 * share one stated efficiency rather than a mix of sources.
 */
#pragma once

#include <stash/core/error.hpp>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace stash {

/// @brief One machine as the cost model sees it. Rates are per second, sizes in bytes.
struct hardware {
  std::string_view name;         ///< preset name ("pcie3_x16", ...)
  std::string_view description;  ///< GPU and link, and where the numbers come from
  double pcie_d2h_bytes_per_s;   ///< achieved device-to-host bandwidth into pinned memory
  double pcie_h2d_bytes_per_s;   ///< achieved host-to-device bandwidth from pinned memory
  double pcie_latency_s;         ///< fixed cost per transfer (DMA setup, launch); an assumption
  double device_bytes_per_s;     ///< peak device-memory bandwidth (datasheet)
  double fp32_flops_per_s;       ///< peak fp32 rate without tensor cores (datasheet)
  double kernel_launch_s;        ///< per-kernel overhead of back-to-back launches; an assumption
  std::uint64_t device_memory_bytes;  ///< device memory capacity (datasheet)
};

/// @brief vDNN's measured share of PCIe gen3 x16 peak: 12.8 GB/s achieved of 15.75 GB/s.
inline constexpr double pcie_achieved_fraction = 12.8 / 15.754;

/// @brief Raw PCIe x16 bandwidth per direction after 128b/130b encoding, GB/s: gen3, gen4, gen5.
inline constexpr double pcie3_x16_raw_bytes_per_s = 15.754e9;
/// @brief PCIe gen4 x16 raw bandwidth per direction.
inline constexpr double pcie4_x16_raw_bytes_per_s = 31.508e9;
/// @brief PCIe gen5 x16 raw bandwidth per direction.
inline constexpr double pcie5_x16_raw_bytes_per_s = 63.015e9;

/// @brief The presets, in order of link generation.
inline constexpr std::array<hardware, 4> hardware_presets = {{
    {"pcie3_x16",
     "vDNN's platform: Titan X (Maxwell, 12 GB GDDR5, 336.5 GB/s, 6.14 TFLOP/s fp32 = 3072 cores x "
     "1.0 GHz x 2) on PCIe gen3 x16, 12.8 GB/s achieved as measured in the vDNN paper",
     12.8e9, 12.8e9, 10e-6, 336.5e9, 6.14e12, 5e-6, 12ull << 30},
    {"pcie4_x16",
     "A100 PCIe 40 GB (1555 GB/s, 19.5 TFLOP/s fp32) on PCIe gen4 x16; achieved link rate = raw x "
     "vDNN's gen3 efficiency",
     pcie4_x16_raw_bytes_per_s* pcie_achieved_fraction,
     pcie4_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6, 1555e9, 19.5e12, 3e-6, 40ull << 30},
    {"pcie5_x16",
     "H100 PCIe 80 GB (2.0 TB/s HBM2e, 51.2 TFLOP/s fp32) on PCIe gen5 x16; achieved link rate = "
     "raw x vDNN's gen3 efficiency",
     pcie5_x16_raw_bytes_per_s* pcie_achieved_fraction,
     pcie5_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6, 2039e9, 51.2e12, 3e-6, 80ull << 30},
    {"h100_sxm",
     "H100 SXM5 80 GB (3.35 TB/s HBM3, 66.9 TFLOP/s fp32); host link PCIe gen5 x16, achieved rate "
     "= raw x vDNN's gen3 efficiency (not measured here)",
     pcie5_x16_raw_bytes_per_s* pcie_achieved_fraction,
     pcie5_x16_raw_bytes_per_s* pcie_achieved_fraction, 10e-6, 3350e9, 66.9e12, 3e-6, 80ull << 30},
}};

/// @brief The presets as typed values, for code (`allocator_options{.hardware =
/// stash::presets::pcie5_x16}`); hardware_preset(name) is the lookup for command lines.
namespace presets {
/// @brief vDNN's platform: Titan X on PCIe gen3 x16.
inline constexpr hardware const& pcie3_x16 = hardware_presets[0];
/// @brief A100 PCIe 40 GB on PCIe gen4 x16.
inline constexpr hardware const& pcie4_x16 = hardware_presets[1];
/// @brief H100 PCIe 80 GB on PCIe gen5 x16.
inline constexpr hardware const& pcie5_x16 = hardware_presets[2];
/// @brief H100 SXM5 80 GB, host link PCIe gen5 x16.
inline constexpr hardware const& h100_sxm = hardware_presets[3];
}  // namespace presets

/// @brief The names of all presets, for tools and error messages.
/// @return The names, comma-separated.
[[nodiscard]] inline std::string hardware_preset_names()
{
  std::string names;
  for (auto const& hw : hardware_presets) {
    if (!names.empty()) { names += ", "; }
    names += hw.name;
  }
  return names;
}

/// @brief The preset called `name`; stash::logic_error naming the known presets otherwise.
/// @param name A registered name (see swap_policy_names()).
/// @return The preset.
[[nodiscard]] inline hardware const& hardware_preset(std::string_view name)
{
  for (auto const& hw : hardware_presets) {
    if (hw.name == name) { return hw; }
  }
  STASH_FAIL("unknown hardware preset '" + std::string(name) +
             "' (known: " + hardware_preset_names() + ")");
}

}  // namespace stash
