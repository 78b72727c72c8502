/// @file unix_socket.hpp
/// @brief @ref cudrv::unix_socket and @ref cudrv::unix_listener, Unix-domain stream sockets that carry
/// messages of bytes together with file descriptors (`SCM_RIGHTS`), the channel that hands the
/// shareable handles of <cudrv/ipc.hpp> to another process. No CUDA call.
///
/// Layer: driver (docs/design.md, "Source layers").
#pragma once

// std::chrono::milliseconds only: <chrono> costs ~0.1 s per translation unit with libstdc++ in C++20
// (calendars, time zones, and <sstream> with them); duration, the clocks and the literals live in
// <bits/chrono.h> there (as in event.hpp).
#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#else
#include <chrono>
#endif
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/file_descriptor.hpp"

namespace cudrv {

/// @brief The peer closed its end of the socket (end of file, `EPIPE`, `ECONNRESET`): it exited, crashed
/// or closed the socket. @ref error::code is `EPIPE` or `ECONNRESET` as the system said, `ENOTCONN`
/// for an end of file. A receive never hangs on a dead peer: the kernel closes the socket of a process
/// that dies.
class peer_closed_error : public system_error {
 public:
  using system_error::system_error;
};

/// @brief A send, receive, accept or connect did not complete within the timeout it was given
/// (@ref error::code is `ETIMEDOUT`).
class timeout_error : public system_error {
 public:
  using system_error::system_error;
};

/// @brief What one @ref unix_socket::receive accepts.
struct receive_options {
  /// @brief How long to wait for the whole message; none, or one too large to add to the clock
  /// (`std::chrono::milliseconds::max()`): wait until it arrives or the peer closes; zero or negative:
  /// no wait, so only a message already in the socket is received.
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
  /// @brief The largest payload accepted, in bytes; a larger message is read and discarded, then
  /// refused with a @ref system_error `EMSGSIZE` (a peer cannot make this process allocate without bound).
  std::size_t max_payload = std::size_t{64} << 20;
  /// @brief The most file descriptors accepted (capped at @ref unix_socket::max_descriptors); a message
  /// that announces more is refused with a @ref system_error `EMSGSIZE` after every descriptor that
  /// arrived has been closed. It also bounds what a peer can make this process hold: no more than this
  /// many are kept while a message arrives; descriptors beyond them, and any attached to the payload's
  /// bytes (never announced), are closed as they arrive and counted, and the message is refused with
  /// `EPROTO` naming the counts. Descriptors the kernel could not install because this process has no
  /// free descriptor slot give `EMFILE` (`ENFILE` when the system's file table is full), naming the
  /// `RLIMIT_NOFILE` soft limit: raise that or close descriptors; this setting does not help there.
  std::size_t max_descriptors = 16;
};

/// @brief One message: the bytes and the file descriptors sent with them (owned: closed when dropped).
struct received_message {
  std::vector<std::byte> payload;            ///< The bytes, as sent.
  std::vector<file_descriptor> descriptors;  ///< The descriptors, in the order they were sent.

  /// @brief The payload as one value of @p T (sent with @ref unix_socket::send_value).
  /// @throws system_error `EPROTO` when the payload size is not `sizeof(T)`
  template <class T>
  [[nodiscard]] T as() const {
    static_assert(std::is_trivially_copyable_v<T>, "a message carries trivially copyable values");
    check_size(sizeof(T), "cudrv::received_message::as");
    T value;
    std::memcpy(static_cast<void*>(&value), payload.data(), sizeof(T));
    return value;
  }
  /// @brief Throws @ref system_error `EPROTO` unless the payload holds @p bytes bytes (for @ref as).
  void check_size(std::size_t bytes, const char* api) const;
};

/// @brief Who is at the other end of a socket (`SO_PEERCRED`), as the kernel saw it at connection.
struct peer_credentials {
  long pid = 0;           ///< The peer's process id.
  unsigned long uid = 0;  ///< Its user id.
  unsigned long gid = 0;  ///< Its group id.
};

/// @brief A connected Unix-domain stream socket that sends and receives *messages*: a payload of bytes
/// and up to @ref max_descriptors file descriptors, which arrive in the other process as new
/// descriptors of the same open files (`SCM_RIGHTS`). Move-only; closes the socket on destruction.
///
/// Each message is framed (a 16-byte header gives the payload size and the descriptor count), so the
/// payload may be of any size: short writes and reads, `EINTR`, and a full socket buffer are handled
/// inside, and a receive returns exactly one whole message. What users of raw `sendmsg`/`recvmsg`
/// usually get wrong is handled too: descriptors are received close-on-exec; a message whose
/// descriptors did not fit (`MSG_CTRUNC`), or that carries more than the receiver accepts, or that
/// carries descriptors the protocol did not announce, has every descriptor that arrived closed and
/// is refused with a typed error; `SIGPIPE` is never raised; a peer that closed or died gives
/// @ref peer_closed_error, never a hang; every operation takes an optional timeout
/// (@ref timeout_error). Timeouts saturate: one too large to add to the clock
/// (`std::chrono::milliseconds::max()`) waits as long as none, and a zero or negative one does not wait.
///
/// @code
/// auto [producer, consumer] = cudrv::unix_socket::pair();      // before fork(), or connect()/unix_listener
/// // producer:
/// producer.send_value(export_data, {fd.native_handle()});    // bytes + the pool's descriptor
/// // consumer:
/// cudrv::received_message m = consumer.receive({.timeout = std::chrono::seconds(10)});
/// auto data = m.as<cudrv::pointer_export>();
/// cudrv::file_descriptor pool_fd = std::move(m.descriptors.at(0));
/// @endcode
class unix_socket {
 public:
  /// @brief The most descriptors one message can carry (the kernel's `SCM_MAX_FD`).
  static constexpr std::size_t max_descriptors = 253;

  /// @brief An empty object (no socket).
  constexpr unix_socket() noexcept = default;
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  unix_socket(const unix_socket&) = delete;
  unix_socket& operator=(const unix_socket&) = delete;
  /// @}
  /// @brief Takes over @p other's socket.
  unix_socket(unix_socket&& other) noexcept = default;
  /// @brief Closes the held socket, then takes over @p other's.
  unix_socket& operator=(unix_socket&& other) noexcept = default;
  /// @brief Closes the socket; the peer then sees @ref peer_closed_error.
  ~unix_socket() = default;

  /// @brief Two connected sockets (`socketpair`), close-on-exec: create them before `fork()`, and keep
  /// one in each process (clear close-on-exec on the child's, e.g. with `dup2`, before an `exec`).
  [[nodiscard]] static std::pair<unix_socket, unix_socket> pair();
  /// @brief Connects to the @ref unix_listener at @p path (a leading `@` names an abstract socket, which
  /// has no file). @p wait bounds the whole connect: a listener that does not exist yet, and one whose
  /// backlog is full (it has not accepted the connections already queued), are retried every few
  /// milliseconds until it is over. Without @p wait, neither is waited for: the connect never blocks.
  /// The connected socket is blocking, like those of @ref pair and @ref unix_listener::accept.
  /// @throws invalid_argument_error for an empty path or one longer than 107 bytes;
  /// @ref timeout_error when no listener appeared, or the backlog stayed full, within @p wait;
  /// @ref system_error `EAGAIN` without @p wait when the listener's backlog is full, `ENOENT` or
  /// `ECONNREFUSED` without @p wait when there is no listener, and for other failures
  [[nodiscard]] static unix_socket connect(const std::string& path,
                                           std::optional<std::chrono::milliseconds> wait = std::nullopt);
  /// @brief Adopts a connected `AF_UNIX`, `SOCK_STREAM` socket (for instance, one inherited across `exec`).
  [[nodiscard]] static unix_socket from_native_handle(file_descriptor fd) noexcept {
    return unix_socket(std::move(fd));
  }

  /// @brief Sends one message: @p payload (may be empty) and @p descriptors (which stay owned by the
  /// caller; the receiver gets its own). Returns once the whole message is in the socket.
  /// @throws invalid_argument_error for more than @ref max_descriptors descriptors or a negative one;
  /// @ref peer_closed_error, @ref timeout_error, @ref system_error
  void send(std::span<const std::byte> payload, std::span<const int> descriptors = {},
            std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  /// @brief Sends one message with the descriptors listed in braces: `s.send(bytes, {fd.native_handle()})`.
  void send(std::span<const std::byte> payload, std::initializer_list<int> descriptors,
            std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  /// @brief Sends @p value's bytes (a trivially copyable value) with @p descriptors.
  template <class T>
  void send_value(const T& value, std::span<const int> descriptors = {},
                  std::optional<std::chrono::milliseconds> timeout = std::nullopt) const {
    static_assert(std::is_trivially_copyable_v<T>, "a message carries trivially copyable values");
    send(std::as_bytes(std::span<const T, 1>(&value, 1)), descriptors, timeout);
  }
  /// @brief Sends @p value's bytes with the descriptors listed in braces.
  template <class T>
  void send_value(const T& value, std::initializer_list<int> descriptors,
                  std::optional<std::chrono::milliseconds> timeout = std::nullopt) const {
    send_value(value, std::span<const int>(descriptors.begin(), descriptors.size()), timeout);
  }
  /// @brief Receives one whole message.
  /// @throws peer_closed_error when the peer closed the socket before or during the message;
  /// @ref timeout_error; @ref system_error `EMSGSIZE` for a message over the limits of @p options,
  /// `EPROTO` for bytes that are not a message of this protocol or a message whose descriptors are not
  /// the ones its header announced (every descriptor that came with it closed), `EMFILE` or `ENFILE`
  /// when this process (or the system) had no free slot for the message's descriptors. A refused
  /// message is read to its end: the next receive starts at the next message.
  [[nodiscard]] received_message receive(const receive_options& options = {}) const;

  /// @brief The process at the other end (`SO_PEERCRED`): check it before trusting what it sends.
  [[nodiscard]] peer_credentials peer() const;
  /// @brief Stops both directions (`shutdown(SHUT_RDWR)`) without closing: the peer's receive sees
  /// @ref peer_closed_error.
  void shutdown() const;

  /// @brief The socket's descriptor, still owned by this object; -1 when empty.
  [[nodiscard]] int native_handle() const noexcept { return fd_.native_handle(); }
  /// @brief Gives up ownership of the descriptor.
  [[nodiscard]] file_descriptor release() noexcept { return std::move(fd_); }
  /// @brief Closes the socket now.
  void reset() noexcept { fd_.reset(); }
  /// @brief Whether this object holds a socket.
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(fd_); }

 private:
  explicit unix_socket(file_descriptor fd) noexcept : fd_(std::move(fd)) {}
  void require_socket(const char* api) const;
  file_descriptor fd_;
};

/// @brief A listening Unix-domain socket bound to a path, for processes that are not parent and child.
/// The socket file is removed when the listener is destroyed. Move-only.
///
/// Whoever can connect can receive what the listener's process sends: create the socket in a
/// directory only the intended users can reach, or check @ref unix_socket::peer after @ref accept.
/// @code
/// cudrv::unix_listener listener("/tmp/producer.sock");
/// cudrv::unix_socket client = listener.accept(std::chrono::seconds(30));
/// @endcode
class unix_listener {
 public:
  /// @brief Binds @p path (a leading `@` names an abstract socket) and listens.
  /// @throws invalid_argument_error for an empty or too long path; @ref system_error when binding
  /// fails (`EADDRINUSE`: the file exists, perhaps left by a process that died; remove it first)
  explicit unix_listener(std::string path, int backlog = 16);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  unix_listener(const unix_listener&) = delete;
  unix_listener& operator=(const unix_listener&) = delete;
  /// @}
  /// @brief Takes over @p other's socket and path.
  unix_listener(unix_listener&& other) noexcept;
  /// @brief Closes the held socket, then takes over @p other's.
  unix_listener& operator=(unix_listener&& other) noexcept;
  /// @brief Closes the socket and removes its file.
  ~unix_listener() { reset(); }

  /// @brief Waits for one connection, up to @p timeout when given.
  /// @throws timeout_error, system_error, invalid_argument_error when empty
  [[nodiscard]] unix_socket accept(std::optional<std::chrono::milliseconds> timeout = std::nullopt) const;
  /// @brief The path it listens on.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// @brief The socket's descriptor; -1 when empty.
  [[nodiscard]] int native_handle() const noexcept { return fd_.native_handle(); }
  /// @brief Closes the socket and removes its file now.
  void reset() noexcept;
  /// @brief Whether this object holds a socket.
  [[nodiscard]] explicit operator bool() const noexcept { return static_cast<bool>(fd_); }

 private:
  file_descriptor fd_;
  std::string path_;
};

}  // namespace cudrv
