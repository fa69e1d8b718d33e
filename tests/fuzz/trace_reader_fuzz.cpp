// libFuzzer target: the "stash-trace v1" reader (stash::parse_trace, from memory and from a
// stream, as read_trace reads a file). Parses or throws stash::trace_error; nothing else.
#include "fuzz_support.hpp"

#include <stash/trace/trace_reader.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  std::string_view const text(reinterpret_cast<char const*>(data), size);
  std::size_t from_memory = 0;
  bool parsed             = false;
  try {
    from_memory = stash::parse_trace(text, "fuzz.trace").storages().size();
    parsed      = true;
  } catch (stash::trace_error const&) {
  }
  // The stream overload (read_trace's fallback for unsized files) must agree with the text one.
  std::istringstream in{std::string(text)};
  try {
    auto const from_stream = stash::parse_trace(in, "fuzz.trace").storages().size();
    if (!parsed || from_stream != from_memory) {
      stash::fuzz::contract_violation("parse_trace(istream) disagrees with parse_trace(text)");
    }
  } catch (stash::trace_error const&) {
    if (parsed) { stash::fuzz::contract_violation("only parse_trace(istream) rejected the input"); }
  }
  return 0;
}
