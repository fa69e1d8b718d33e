/**
 * @file stash.cuh
 * @brief Umbrella header: everything stash offers.
 */
#pragma once

#include <stash/version.hpp>

#include <stash/core/cuda_event.hpp>
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

#include <stash/trace/lifetime_interval.hpp>
#include <stash/trace/minimalloc_reader.hpp>
#include <stash/trace/trace_error.hpp>
