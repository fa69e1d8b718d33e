/**
 * @file version.hpp
 * @brief stash's version: the one place it is kept (CMakeLists.txt reads project(VERSION) from
 * the three lines below).
 */
#pragma once

/// @brief Major version.
#define STASH_VERSION_MAJOR 0
/// @brief Minor version.
#define STASH_VERSION_MINOR 1
/// @brief Patch version.
#define STASH_VERSION_PATCH 0
/// @brief MAJOR * 10000 + MINOR * 100 + PATCH.
#define STASH_VERSION \
  (STASH_VERSION_MAJOR * 10000 + STASH_VERSION_MINOR * 100 + STASH_VERSION_PATCH)
