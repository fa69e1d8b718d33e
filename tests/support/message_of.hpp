// The message of the exception a callable throws, or "(no exception)".
#pragma once

#include <exception>
#include <string>

namespace stash::test {

inline std::string message_of(auto&& f)
{
  try {
    f();
  } catch (std::exception const& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace stash::test
