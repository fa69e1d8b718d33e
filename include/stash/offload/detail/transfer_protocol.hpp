/**
 * @file transfer_protocol.hpp
 * @brief The transfer protocol (offload/transfer.hpp) as the offload manager calls it: one
 * signature per step (accepts, host_bytes, scratch, encode, decode) for the member of a
 * transfer_set chosen at run time, whichever of the protocol's optional forms the member
 * implements (a descriptor_type or not, the host copy's known size or not). Internals of
 * offload_manager.hpp.
 */
#pragma once

#include <stash/codec/element_type.hpp>
#include <stash/core/error.hpp>
#include <stash/offload/detail/transfer_dispatch.hpp>
#include <stash/offload/transfer.hpp>

#include <cstddef>
#include <string>
#include <type_traits>
#include <variant>

namespace stash::detail {

// What an encode is given: the device tensor, the host slot, device scratch, the status record,
// the tensor's descriptor (a transfer_descriptor_t of the set).
template <class Descriptor>
struct encode_call {
  void const* device;
  std::size_t bytes;
  void* host;
  std::size_t capacity;
  void* scratch;
  transfer_status* status;
  Descriptor const& desc;
};

// What a decode is given: the host copy (its size when known), the device bytes, scratch, status.
template <class Descriptor>
struct decode_call {
  void const* host;
  std::size_t capacity;
  void* device;
  std::size_t bytes;
  void* scratch;
  transfer_status* status;
  std::size_t encoded;  // unknown_encoded_bytes when the host does not know it
  Descriptor const& desc;
};

template <class Set>
struct transfer_protocol;

template <class... Ts>
struct transfer_protocol<transfer_set<Ts...>> {
  using dispatch                          = transfer_dispatch<transfer_set<Ts...>>;
  static constexpr std::size_t size       = dispatch::size;
  static constexpr auto reports_status_of = dispatch::reports_status_of;
  using descriptor                        = transfer_descriptor_t<transfer_set<Ts...>>;

  // Whether member `transfer` takes the tensor (false for an index past the set, for a member
  // with a descriptor_type the tensor was not given, or for a lossy member and a tensor described
  // as other data): its accepts() where it has one, else every tensor.
  [[nodiscard]] static bool accepts(std::size_t transfer, std::size_t bytes,
                                    descriptor const& desc) noexcept
  {
    if (transfer >= size) { return false; }
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) noexcept {
      if constexpr (requires { typename T::descriptor_type; }) {
        auto const* d = std::get_if<typename T::descriptor_type>(&desc);
        if (d == nullptr) { return false; }
        if constexpr (requires { T::accepts(bytes, *d); }) {
          return static_cast<bool>(T::accepts(bytes, *d));
        } else {
          return true;
        }
      } else if (!reads_as_own<T>(desc)) {
        return false;
      } else if constexpr (requires { T::accepts(bytes); }) {
        return static_cast<bool>(T::accepts(bytes));
      } else {
        return true;
      }
    });
  }

  // The member's host copy bound (stash::logic_error for a tensor it refuses).
  [[nodiscard]] static std::size_t host_bytes(std::size_t transfer, std::size_t bytes,
                                              descriptor const& desc)
  {
    return dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires { typename T::descriptor_type; }) {
        return static_cast<std::size_t>(T::host_bytes(bytes, described<T>(transfer, bytes, desc)));
      } else {
        STASH_EXPECTS(reads_as_own<T>(desc),
                      "offload_manager: transfer member " + std::to_string(transfer) +
                          " is lossy and would round a tensor of " + std::to_string(bytes) +
                          " bytes described as " + what_is(desc) +
                          " as its own elements; send it through a lossless member or raw");
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

  // The member's encode in `s`'s order, with the descriptor when it takes one.
  template <class Backend>
  static void encode(std::size_t transfer, Backend& b, typename Backend::stream s,
                     encode_call<descriptor> const& c)
  {
    dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires { typename T::descriptor_type; }) {
        T::encode(b, s, c.device, c.bytes, c.host, c.capacity, c.scratch, c.status,
                  described<T>(transfer, c.bytes, c.desc));
      } else {
        T::encode(b, s, c.device, c.bytes, c.host, c.capacity, c.scratch, c.status);
      }
    });
  }

  // The member's decode in `s`'s order, with the host copy's size and the descriptor when it
  // takes them.
  template <class Backend>
  static void decode(std::size_t transfer, Backend& b, typename Backend::stream s,
                     decode_call<descriptor> const& c)
  {
    dispatch::visit(transfer, [&]<class T>(std::type_identity<T>) {
      if constexpr (requires { typename T::descriptor_type; }) {
        T::decode(b, s, c.host, c.capacity, c.device, c.bytes, c.scratch, c.status, c.encoded,
                  described<T>(transfer, c.bytes, c.desc));
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

 private:
  // Whether member T (one without a descriptor_type) may read a tensor described by `desc` as its
  // own elements. A lossless member moves bit patterns, so any data comes back exact; a lossy one
  // rounds them as its value_type, which would turn other data (int64 indices, u8 labels) into
  // garbage: it reads only undescribed tensors (taken to be of its type) and tensors described as
  // its value_type. A lossy member without a value_type reads only undescribed tensors.
  template <class T>
  [[nodiscard]] static bool reads_as_own(descriptor const& desc) noexcept
  {
    if constexpr (T::lossless) {
      return true;
    } else {
      if (std::holds_alternative<std::monostate>(desc)) { return true; }
      if constexpr (requires { typename T::value_type; }) {
        if constexpr (codec_element<typename T::value_type>) {
          auto const* e = std::get_if<element_type>(&desc);
          return e != nullptr && *e == element_type_of<typename T::value_type>();
        }
      }
      return false;
    }
  }

  // What `desc` says the tensor holds, for messages.
  [[nodiscard]] static std::string what_is(descriptor const& desc)
  {
    if (auto const* e = std::get_if<element_type>(&desc)) {
      return "element type " + std::string(to_string(*e));
    }
    return "another member's data (descriptor alternative " + std::to_string(desc.index()) + ")";
  }

  // Member T's descriptor from `desc`, or stash::logic_error: the tensor was given none of its
  // type (refused before the manager takes memory: host_bytes is asked first).
  template <class T>
  static typename T::descriptor_type const& described(std::size_t transfer, std::size_t bytes,
                                                      descriptor const& desc)
  {
    auto const* d = std::get_if<typename T::descriptor_type>(&desc);
    STASH_EXPECTS(d != nullptr, "offload_manager: transfer member " + std::to_string(transfer) +
                                    " needs its descriptor (its descriptor_type) for a tensor of " +
                                    std::to_string(bytes) + " bytes, which was given none");
    return *d;
  }
};

}  // namespace stash::detail
