// train_cnn tells its memory what every tensor holds (tensor_data.hpp; GPU review, fifth read,
// T2/T3): a step of the shared network over a memory that records its allocations, with layer calls
// that compute nothing, must describe the max-pool indices (int64, with their geometry), the u8
// pixels and labels, the loss counters and the library workspaces, and leave every other tensor
// float32; and descriptor_of turns that into the allocator's descriptor of either codec set, so
// that a lossy member never reads them (tests/allocator/allocator_foreign_data_test.cpp).
#include <stash_tools/train_cnn/cnn.hpp>
#include <stash_tools/train_cnn/plain_memory.hpp>
#include <stash_tools/train_cnn/tensor_data.hpp>

#include <stash/allocator.hpp>
#include <stash/codec/element_type.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/pool_argmax_transfer.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/swap/no_swap.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <string>
#include <variant>
#include <vector>

namespace STASH_UNITY_ID {

namespace {

using namespace train_cnn;

// plain_memory that records what each allocation was told.
class recording_memory : public plain_memory {
 public:
  struct allocation {
    std::string label;
    std::size_t bytes;
    tensor_data data;
  };
  id allocate(std::size_t bytes, stash::storage_kind kind, std::string const& label,
              tensor_data const& data = {})
  {
    seen.push_back({label, bytes, data});
    return plain_memory::allocate(bytes, kind, label, data);
  }
  std::vector<allocation> seen;
};

// Layer calls that compute nothing; every scratch query asks for some bytes (so the network
// allocates its workspaces).
struct inert_ops {
  template <class... A>
  static std::size_t scratch(A const&...)
  {
    return 64;
  }
#define STASH_TEST_INERT(name) \
  template <class... A>        \
  void name(A const&...) const \
  {                            \
  }
  STASH_TEST_INERT(conv_forward)
  STASH_TEST_INERT(conv_backward_weights)
  STASH_TEST_INERT(conv_backward_data)
  STASH_TEST_INERT(pool_forward)
  STASH_TEST_INERT(pool_backward)
  STASH_TEST_INERT(relu_forward)
  STASH_TEST_INERT(relu_backward)
  STASH_TEST_INERT(add)
  STASH_TEST_INERT(bn_forward)
  STASH_TEST_INERT(bn_backward)
  STASH_TEST_INERT(bn_running_update)
  STASH_TEST_INERT(linear_forward)
  STASH_TEST_INERT(linear_backward_weights)
  STASH_TEST_INERT(linear_backward_data)
  STASH_TEST_INERT(normalize)
  STASH_TEST_INERT(cross_entropy)
  STASH_TEST_INERT(sgd_momentum)
  STASH_TEST_INERT(sgd_step)
  STASH_TEST_INERT(zero)
  STASH_TEST_INERT(fill)
  STASH_TEST_INERT(copy)
  STASH_TEST_INERT(upload)
  STASH_TEST_INERT(download)
  STASH_TEST_INERT(stage)
#undef STASH_TEST_INERT
  template <class... A>
  std::size_t conv_scratch(A const&... a) const
  {
    return scratch(a...);
  }
  template <class... A>
  std::size_t pool_scratch(A const&... a) const
  {
    return scratch(a...);
  }
  template <class... A>
  std::size_t bn_scratch(A const&... a) const
  {
    return scratch(a...);
  }
  template <class... A>
  std::size_t linear_scratch(A const&... a) const
  {
    return scratch(a...);
  }
  template <class... A>
  std::size_t cross_entropy_scratch(A const&... a) const
  {
    return scratch(a...);
  }
};

bool ends_with(std::string const& s, std::string const& tail)
{
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// What the allocation labelled `label` must hold.
stash::element_type expected_type(std::string const& label)
{
  if (label == "images_u8" || label == "labels_u8" || ends_with(label, ".workspace")) {
    return stash::element_type::u8;
  }
  if (label == "loss_sum") { return stash::element_type::f64; }
  if (label == "correct") { return stash::element_type::u64; }
  if (ends_with(label, ".indices")) { return stash::element_type::i64; }
  return stash::element_type::f32;
}

}  // namespace

TEST_CASE("train_cnn: every tensor that is not float32 is allocated with its element type")
{
  for (auto arch : {cnn_arch::vgg, cnn_arch::resnet}) {
    CAPTURE(int(arch));
    recording_memory mem;
    inert_ops ops;
    cnn_config config;
    config.arch = arch;
    config.rows = config.cols = 8;
    labelled_images set;
    set.count = 2;
    set.rows = set.cols = 8;
    set.pixels.assign(2 * 64, 0);
    set.labels.assign(2, 1);
    std::vector<std::size_t> const index{0, 1};
    cnn<recording_memory, inert_ops> net(mem, ops, config, 2);
    net.train_step(set, index);
    int indices = 0, workspaces = 0, floats = 0;
    for (auto const& a : mem.seen) {
      CAPTURE(a.label);
      CHECK(a.data.type == expected_type(a.label));
      if (ends_with(a.label, ".indices")) {
        ++indices;
        REQUIRE(a.data.pool.has_value());
        CHECK(a.data.pool->outputs() * 8 == a.bytes);  // the geometry describes the tensor
      } else {
        CHECK_FALSE(a.data.pool.has_value());
      }
      workspaces += ends_with(a.label, ".workspace") ? 1 : 0;
      floats += a.data.type == stash::element_type::f32 ? 1 : 0;
    }
    CHECK(indices == 2);  // two max pools
    CHECK(workspaces > 0);
    CHECK(floats > 0);
  }
}

TEST_CASE("train_cnn: descriptor_of gives either codec set a descriptor its lossy members refuse")
{
  using host_caching = stash::caching_pool<stash::host_upstream, stash::host_stream_order>;
  // The CUDA set's shape (no pool_argmax member) and the CPU set's (with one).
  using cuda_shaped =
      stash::allocator<host_caching, stash::no_swap,
                       stash::transfer_set<stash::zvc<float>, stash::precision<float, stash::fp16>>,
                       stash::host_backend>::descriptor_type;
  using cpu_shaped = stash::allocator<host_caching, stash::no_swap,
                                      stash::transfer_set<stash::zvc<float>, stash::pool_argmax>,
                                      stash::host_backend>::descriptor_type;
  stash::pool_geometry const g{4, 8, 8, 2, 2, 2, 2};
  auto const indices = pool_indices(g);
  auto const a       = descriptor_of<cuda_shaped>(indices);
  REQUIRE(std::holds_alternative<stash::element_type>(a));
  CHECK(std::get<stash::element_type>(a) == stash::element_type::i64);
  auto const b = descriptor_of<cpu_shaped>(indices);
  REQUIRE(std::holds_alternative<stash::pool_geometry>(b));
  CHECK(std::get<stash::pool_geometry>(b).outputs() == g.outputs());
  auto const u8 = descriptor_of<cuda_shaped>(tensor_data{stash::element_type::u8});
  REQUIRE(std::holds_alternative<stash::element_type>(u8));
  CHECK(std::get<stash::element_type>(u8) == stash::element_type::u8);
  CHECK(std::holds_alternative<std::monostate>(descriptor_of<cuda_shaped>(tensor_data{})));
  CHECK(std::holds_alternative<std::monostate>(descriptor_of<cpu_shaped>(tensor_data{})));
}

}  // namespace STASH_UNITY_ID
