// stash::allocator on the CUDA backend with a transfer_set of device codecs: each schedule entry
// runs its own codec kernels (the host-backend twin is in allocator_encodings_test.cpp).
#include "support/argmax_step.hpp"
#include "support/encoded_step.hpp"

#include <stash/allocator.hpp>
#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/core/device_upstream.hpp>
#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/device_pool_argmax_transfer.cuh>
#include <stash/offload/device_two_value_transfer.cuh>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/vdnn.hpp>

#include <doctest/doctest.h>

#include <type_traits>

namespace STASH_UNITY_ID {

// One spelling per codec: on cuda_backend the Codec slot runs its device form.
static_assert(std::is_same_v<stash::transfer_for_t<stash::cuda_backend, stash::zvc<float>>,
                             stash::device_codec_transfer<stash::device_zvc<float>>>);
static_assert(std::is_same_v<stash::transfer_for_t<stash::cuda_backend, stash::pool_argmax>,
                             stash::device_pool_argmax_transfer>);
// two_value (scaled dropout masks) in a set: its device transfer, with the unchanged fallback.
static_assert(std::is_same_v<
              stash::cuda_allocator<
                  stash::vdnn_conv,
                  stash::transfer_set<stash::zvc<float>, stash::two_value<float>>>::transfer_type,
              stash::transfer_set<stash::device_codec_transfer<stash::device_zvc<float>>,
                                  stash::device_two_value_transfer<float>>>);
// The README's CUDA spelling.
static_assert(
    std::is_same_v<stash::cuda_allocator<stash::vdnn_conv, stash::zvc<float>>::transfer_type,
                   stash::device_codec_transfer<stash::device_zvc<float>>>);

TEST_CASE("gpu: allocator<transfer_set<device zvc, device bitmask>> runs each entry's codec")
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  using codecs      = stash::transfer_set<stash::zvc<float>, stash::bitmask>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator_stats stats;
  // An odd size: the kernels' tails are exercised.
  auto const r =
      stash::test::run_encoded_step<device_pool, codecs>(backend, pool, (1 << 20) + 77, 3, &stats);
  CHECK(r.iterations == 3);
  CHECK(r.exact_c_reads == 3);
  CHECK(r.exact_b_reads == 3);
  CHECK(r.mask_a_reads == 2);
  CHECK(stats.scheduled_offloads == 4);
  CHECK(stats.encoding_fallbacks == 0);
  CHECK(stats.deviations == 0);
  // zvc shrank b (two thirds zeros) and Binarize a: the codecs ran, not raw copies.
  CHECK(r.moved.bytes_encoded * 2 < r.moved.bytes_encoded_source);
}

TEST_CASE("gpu: allocator with pool_argmax: max-pool indices exact as 4 bits")
{
  using device_pool = stash::caching_pool<stash::device_upstream>;
  using codecs      = stash::transfer_set<stash::zvc<float>, stash::pool_argmax>;
  stash::cuda_backend backend;
  device_pool pool;
  stash::allocator_stats stats;
  auto const r = stash::test::run_argmax_step<device_pool, codecs>(backend, pool, 3, &stats);
  CHECK(r.iterations == 3);
  CHECK(r.exact_reads == r.reads);  // the host test's figures (allocator_encodings_test.cpp)
  CHECK(stats.scheduled_offloads == 2 * 4);
  CHECK(stats.encoding_fallbacks == 2);
  CHECK(r.moved.decode_failures == 0);
  std::uint64_t const n = r.outputs;
  CHECK(r.moved.bytes_encoded == 2 * ((32 + 4 * ((n + 7) / 8)) + 8 * n + (32 + 8 * n) + 8 * n));
}

}  // namespace STASH_UNITY_ID
