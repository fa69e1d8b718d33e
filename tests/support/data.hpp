// Paths to the data bundled in the repository (data/), for tests.
#pragma once

#include <string>

namespace stash::test {

/// Absolute path of `relative` under the repository's data/ folder.
inline std::string data_path(std::string const& relative)
{
  return std::string(STASH_DATA_DIR) + "/" + relative;
}

}  // namespace stash::test
