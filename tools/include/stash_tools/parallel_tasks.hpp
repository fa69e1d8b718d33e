/**
 * @file parallel_tasks.hpp
 * @brief The tools' names for stash's deterministic task runner (stash/core/parallel_tasks.hpp):
 * stash-plan --frontier --threads spreads its plans with it.
 */
#pragma once

#include <stash/core/parallel_tasks.hpp>

namespace stash_tools {

using stash::default_threads;
using stash::run_tasks;

}  // namespace stash_tools
