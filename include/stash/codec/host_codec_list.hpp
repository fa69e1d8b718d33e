/**
 * @file host_codec_list.hpp
 * @brief The named float32 codecs the tools (stash-codec, the ratio benchmark) iterate over.
 */
#pragma once

#include <stash/codec/bitmask.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/zvc.hpp>

#include <tuple>

namespace stash {

/// @brief A codec type paired with its command-line name.
/// @tparam C The codec.
template <class C>
struct named_codec {
  using type = C;    ///< the codec
  const char* name;  ///< its name on command lines
};

/// @brief Calls f(named_codec<C>{name}) for every float32 codec, in table order.
/// @tparam F A generic callable taking a named_codec<C>.
/// @param f Called once per codec.
template <class F>
void for_each_f32_codec(F&& f)
{
  f(named_codec<identity<float>>{"identity"});
  f(named_codec<zvc<float>>{"zvc"});
  f(named_codec<csr<float>>{"csr"});
  f(named_codec<rle<float>>{"rle"});
  f(named_codec<bitmask>{"bitmask"});
  f(named_codec<precision<float, fp16>>{"fp16"});
  f(named_codec<precision<float, bf16>>{"bf16"});
  f(named_codec<precision<float, fp10>>{"fp10"});
  f(named_codec<precision<float, fp8_e4m3>>{"fp8_e4m3"});
  f(named_codec<precision<float, fp8_e5m2>>{"fp8_e5m2"});
  f(named_codec<chain<precision<float, fp16>, zvc<std::uint16_t>>>{"fp16+zvc"});
  f(named_codec<chain<precision<float, fp8_e4m3>, zvc<std::uint8_t>>>{"fp8_e4m3+zvc"});
}

}  // namespace stash
