/**
 * @file transfer_protocol.hpp
 * @brief The transfer protocol (offload/transfer.hpp) as the offload manager calls it: one
 * signature per step (accepts, host_bytes, scratch, encode, decode) for the member of a
 * transfer_set chosen at run time, whichever of the protocol's optional forms the member
 * implements (a tensor_desc or not, the host copy's known size or not). Internals of
 * offload_manager.hpp.
 */
#pragma once

#include <stash/offload/detail/transfer_dispatch.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <type_traits>

namespace stash::detail {

// What an encode is given: the device tensor, the host slot, device scratch, the status record.
struct encode_call {
  void const* device;
  std::size_t bytes;
  void* host;
  std::size_t capacity;
  void* scratch;
  transfer_status* status;
  tensor_desc const& desc;
};

// What a decode is given: the host copy (its size when known), the device bytes, scratch, status.
struct decode_call {
  void const* host;
  std::size_t capacity;
  void* device;
  std::size_t bytes;
  void* scratch;
  transfer_status* status;
  std::size_t encoded;  // unknown_encoded_bytes when the host does not know it
  tensor_desc const& desc;
};

template <class Set>
struct transfer_protocol;

template <class... Ts>
struct transfer_protocol<transfer_set<Ts...>> {
  using dispatch                          = transfer_dispatch<transfer_set<Ts...>>;
  static constexpr std::size_t size       = dispatch::size;
  static constexpr auto reports_status_of = dispatch::reports_status_of;

  // Whether member `transfer` takes the tensor (false for an index past the set): its accepts()
  // where it has one, else every tensor.
  [[nodiscard]] static bool accepts(std::size_t transfer, std::size_t bytes,
                                    tensor_desc const& desc) noexcept
  {
    if (transfer >= size) { return false; }
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) noexcept {
      if constexpr (requires { T::accepts(bytes, desc); }) {
        return static_cast<bool>(T::accepts(bytes, desc));
      } else if constexpr (requires { T::accepts(bytes); }) {
        return static_cast<bool>(T::accepts(bytes));
      } else {
        return true;
      }
    });
  }

  // The member's host copy bound (stash::logic_error for a tensor it refuses).
  [[nodiscard]] static std::size_t host_bytes(std::size_t transfer, std::size_t bytes,
                                              tensor_desc const& desc)
  {
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires { T::host_bytes(bytes, desc); }) {
        return static_cast<std::size_t>(T::host_bytes(bytes, desc));
      } else {
        return static_cast<std::size_t>(T::host_bytes(bytes));
      }
    });
  }

  // Device scratch of an offload.
  [[nodiscard]] static std::size_t scratch_bytes(std::size_t transfer, std::size_t bytes)
  {
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      return static_cast<std::size_t>(T::scratch_bytes(bytes));
    });
  }

  // Device scratch of a decode (the member's decode_scratch_bytes when it has one).
  [[nodiscard]] static std::size_t decode_scratch_bytes(std::size_t transfer, std::size_t bytes,
                                                        std::size_t encoded)
  {
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires { T::decode_scratch_bytes(bytes, encoded); }) {
        return static_cast<std::size_t>(T::decode_scratch_bytes(bytes, encoded));
      } else {
        return static_cast<std::size_t>(T::scratch_bytes(bytes));
      }
    });
  }

  // The member's encode in `s`'s order, with the description when it takes one.
  template <class Backend>
  static void encode(std::size_t transfer, Backend& b, typename Backend::stream s,
                     encode_call const& c)
  {
    dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires {
                      T::encode(b, s, c.device, c.bytes, c.host, c.capacity, c.scratch, c.status,
                                c.desc);
                    }) {
        T::encode(b, s, c.device, c.bytes, c.host, c.capacity, c.scratch, c.status, c.desc);
      } else {
        T::encode(b, s, c.device, c.bytes, c.host, c.capacity, c.scratch, c.status);
      }
    });
  }

  // The member's decode in `s`'s order, with the host copy's size and the description when it
  // takes them.
  template <class Backend>
  static void decode(std::size_t transfer, Backend& b, typename Backend::stream s,
                     decode_call const& c)
  {
    dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires {
                      T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch, c.status,
                                c.encoded, c.desc);
                    }) {
        T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch, c.status, c.encoded,
                  c.desc);
      } else if constexpr (requires {
                             T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch,
                                       c.status, c.encoded);
                           }) {
        T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch, c.status, c.encoded);
      } else {
        T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch, c.status);
      }
    });
  }
};

}  // namespace stash::detail
