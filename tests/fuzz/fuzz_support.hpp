// What every libFuzzer target in tests/fuzz shares: the decode cap and the one way a target
// reports a broken contract. The contract of each parser under fuzzing: it returns a result or
// throws its component's typed error. A target catches exactly that error type; any other
// exception escapes LLVMFuzzerTestOneInput, which aborts, and libFuzzer saves the input.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace stash::fuzz {

/// @brief The element cap the targets pass to host_decode_vector. A 32-byte header may ask for
/// any count; an untrusted buffer gets a cap sized to what the caller expects (here: 1 MiB of
/// float32), never the 2^28 default, so a forged header costs a codec_error, not an allocation.
inline constexpr std::size_t max_elements = std::size_t{1} << 18;

/// @brief Aborts with `what`: a decoder returned normally but broke a stated guarantee (e.g. a
/// lossless round trip that changes the data). libFuzzer reports the abort as a crash.
[[noreturn]] inline void contract_violation(char const* what)
{
  std::fprintf(stderr, "fuzz contract violated: %s\n", what);
  std::abort();
}

}  // namespace stash::fuzz
