// libFuzzer target: the MiniMalloc CSV reader (stash::parse_minimalloc_csv). Parses or throws
// stash::trace_error; nothing else.
#include "fuzz_support.hpp"

#include <stash/trace/minimalloc_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  std::istringstream in(std::string(reinterpret_cast<char const*>(data), size));
  try {
    auto const instance = stash::parse_minimalloc_csv(in, "fuzz.csv");
    for (auto const& b : instance.buffers) {
      // The reader's documented guarantees on every row it accepts.
      if (b.begin >= b.end || b.bytes == 0) {
        stash::fuzz::contract_violation("accepted an empty lifetime or a zero size");
      }
    }
  } catch (stash::trace_error const&) {
  }
  return 0;
}
