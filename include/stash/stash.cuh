/**
 * @file stash.cuh
 * @brief Umbrella header: everything stash offers.
 */
#pragma once

#include <stash/version.hpp>

#include <stash/allocator.hpp>

#include <stash/codec/bitmask.hpp>
#include <stash/codec/buffer_header.hpp>
#include <stash/codec/chain.hpp>
#include <stash/codec/codec.hpp>
#include <stash/codec/codec_error.hpp>
#include <stash/codec/codec_status.hpp>
#include <stash/codec/csr.hpp>
#include <stash/codec/device_bitmask.cuh>
#include <stash/codec/device_codec.cuh>
#include <stash/codec/device_csr.cuh>
#include <stash/codec/device_precision.cuh>
#include <stash/codec/device_rle.cuh>
#include <stash/codec/device_zvc.cuh>
#include <stash/codec/element_type.hpp>
#include <stash/codec/identity.hpp>
#include <stash/codec/pool_argmax.hpp>
#include <stash/codec/precision.hpp>
#include <stash/codec/rle.hpp>
#include <stash/codec/zvc.hpp>
#include <stash/core/cuda_event.hpp>

#include <stash/core/config.hpp>
#include <stash/core/cuda_stream.hpp>
#include <stash/core/device.hpp>
#include <stash/core/device_upstream.hpp>
#include <stash/core/error.hpp>
#include <stash/core/host_upstream.hpp>
#include <stash/core/limiting_upstream.hpp>
#include <stash/core/pinned_host_buffer.hpp>
#include <stash/core/pinned_host_upstream.hpp>
#include <stash/core/units.hpp>
#include <stash/core/upstream_resource.hpp>
#include <stash/core/virtual_upstream.hpp>

#include <stash/offload/backend/cuda_backend.hpp>
#include <stash/offload/backend/host_backend.hpp>
#include <stash/offload/device_codec_transfer.cuh>
#include <stash/offload/offload_backend.hpp>
#include <stash/offload/offload_manager.hpp>
#include <stash/offload/pinned_host_pool.hpp>
#include <stash/offload/transfer.hpp>

#include <stash/pool/async_pool.hpp>
#include <stash/pool/best_of_planner.hpp>
#include <stash/pool/caching_pool.hpp>
#include <stash/pool/greedy_planner.hpp>
#include <stash/pool/lifetime_arena.hpp>
#include <stash/pool/offset_planner.hpp>
#include <stash/pool/plan.hpp>
#include <stash/pool/plan_checker.hpp>
#include <stash/pool/pool.hpp>
#include <stash/pool/search_planner.hpp>
#include <stash/pool/stream_order.hpp>
#include <stash/pool/trace_replay.hpp>

#include <stash/sim/cluster.hpp>
#include <stash/sim/cost_model.hpp>
#include <stash/sim/hardware.hpp>
#include <stash/sim/op_flops.hpp>
#include <stash/sim/projection.hpp>
#include <stash/sim/simulator.hpp>

#include <stash/swap/auto_swap.hpp>
#include <stash/swap/no_swap.hpp>
#include <stash/swap/policy_registry.hpp>
#include <stash/swap/schedule.hpp>
#include <stash/swap/swap_policy.hpp>
#include <stash/swap/vdnn.hpp>

#include <stash/trace/lifetime.hpp>
#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace.hpp>
#include <stash/trace/trace_error.hpp>
#include <stash/trace/trace_reader.hpp>
#include <stash/trace/trace_recorder.hpp>
#include <stash/trace/trace_writer.hpp>
