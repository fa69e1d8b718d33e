/**
 * @file config.hpp
 * @brief Compiler-portability macros shared by host and device code.
 */
#pragma once

#if defined(__CUDACC__)
/// @brief Marks a function callable from host and device code (nothing under a plain C++ compiler),
/// so per-element codec logic is one function shared by the kernels and the host reference.
#define STASH_HOST_DEVICE __host__ __device__
/// @brief Forces inlining in host and device code.
#define STASH_FORCEINLINE __forceinline__
#else
#define STASH_HOST_DEVICE
#define STASH_FORCEINLINE inline __attribute__((always_inline))
#endif
