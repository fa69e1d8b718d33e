// libFuzzer target: stash-plan's command-line parsing (stash_plan::parse_args). Input: the
// arguments separated by NUL bytes. Parses or throws stash_plan::usage_error; nothing else.
//
// --activations reads the files it names, so the target runs in an empty directory and skips
// inputs naming a path with '/': the parser is on trial, not whatever /dev or /proc hold.
#include "fuzz_support.hpp"

#include <stash_tools/stash_plan/options.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int*, char***)
{
  namespace fs           = std::filesystem;
  static std::string dir = (fs::temp_directory_path() / "stash_plan_args_fuzz.XXXXXX").string();
  if (mkdtemp(dir.data()) == nullptr) { return 0; }
  fs::current_path(dir);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size)
{
  std::string_view text(reinterpret_cast<char const*>(data), size);
  std::vector<std::string> args;
  while (true) {
    auto const nul = text.find('\0');
    args.emplace_back(text.substr(0, nul));
    if (args.back().find('/') != std::string::npos) { return -1; }  // -1: not kept in the corpus
    if (nul == std::string_view::npos) { break; }
    text.remove_prefix(nul + 1);
  }
  try {
    (void)stash_plan::parse_args(args);
  } catch (stash_plan::usage_error const&) {
  }
  return 0;
}
