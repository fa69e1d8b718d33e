/**
 * @file capture_rules.hpp
 * @brief The offload manager's CUDA-graph capture rules (see offload_manager.hpp's file docs):
 * which calls may be made while its side streams are captured, and which tensors a call may
 * touch then. Internals of offload_manager.hpp.
 */
#pragma once

#include <stash/core/error.hpp>

#include <optional>
#include <string>

namespace stash::detail {

// What the rules say about a call on a tensor: whether it is made while capturing, and why it is
// refused (nullptr: allowed).
struct capture_verdict {
  bool capturing{false};
  const char* refusal{nullptr};
};

// The rules over a backend and the manager's two side streams.
template <class Backend>
class capture_rules {
 public:
  using stream_type = typename Backend::stream;

  capture_rules(Backend& backend, stream_type d2h, stream_type h2d) noexcept
      : backend_(backend), d2h_(d2h), h2d_(h2d)
  {
  }

  // Whether the manager's side streams are part of a capture.
  [[nodiscard]] bool side_capturing() const
  {
    return backend_.capturing(d2h_) || backend_.capturing(h2d_);
  }

  // Whether a call on `stream` is made while capturing; stash::logic_error for a call outside
  // the capture while the side streams are in one (it would queue its copies into the graph).
  bool capture_of(stream_type stream, const char* what) const
  {
    bool const capturing = backend_.capturing(stream);
    if (!capturing && side_capturing()) {
      STASH_FAIL(std::string("offload_manager::") + what +
                 ": the manager's streams are being captured into a CUDA graph; until the capture "
                 "ends, every call must name a capturing stream");
    }
    return capturing;
  }

  // The rules for a call on a tensor created while capturing (`captured`) or not, in `stream`'s
  // order when one is given (the caller names the tensor in a refusal).
  capture_verdict check(bool captured, const char* what, std::optional<stream_type> stream) const
  {
    if (!stream) {
      if (captured || side_capturing()) {
        return {false,
                "while capturing a CUDA graph, or for a tensor created while capturing, "
                "the call must name the capturing stream"};
      }
      return {};
    }
    bool const capturing = capture_of(*stream, what);
    if (capturing && !captured) {
      return {capturing,
              "it was created outside the CUDA graph being captured (only tensors "
              "created while capturing can be used in it; acquire others before)"};
    }
    if (!capturing && captured) {
      return {capturing,
              "it was created while capturing a CUDA graph and belongs to it (release "
              "it before the capture ends)"};
    }
    return {capturing, nullptr};
  }

 private:
  Backend& backend_;
  stream_type d2h_;
  stream_type h2d_;
};

}  // namespace stash::detail
