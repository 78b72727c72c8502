// libFuzzer target: what a hostile peer sends to cudrv::unix_socket::receive, the frame parser of the
// descriptor channel (docs/ipc.md, "What a receiver checks").
//
// Input: a script. Byte 0 picks the receive's options (low nibble modulo 9: max_descriptors 0..8; bits
// 4-5: the timeout, none, 0 ms, -1 ms or milliseconds::max()), byte 1 max_payload (255: the default,
// else 4 x the byte). Then chunks, each a tag byte (bits 0-1 the kind, bits 2-4 how many descriptors
// to attach, 0..7, bits 5-7 flags) and its bytes:
//   kind 0  raw bytes: a length byte, then that many bytes, sent in one sendmsg;
//   kind 1  a frame header with the right magic: the announced count (1 byte) and the payload size (2
//           bytes, or 8 when flag bit 0 is set), sent in one sendmsg;
//   kind 2  a whole well-formed message: a length byte and the payload, the header announcing the
//           descriptors attached, all in one sendmsg (what cudrv::unix_socket::send does);
//   kind 3  raw bytes dribbled: a length byte (modulo 33) and the bytes, one sendmsg per byte, each
//           with the descriptors attached.
// The descriptors attached are copies of four /dev/null descriptors opened once. The peer end of a
// socketpair sends the whole script (non-blocking: a full socket buffer ends the script there), then is
// closed; the receiver calls receive() until peer_closed_error. Since everything the peer sent and the
// end of file are queued before the first receive, a reference model of the stream predicts each
// receive exactly: the message (its payload and descriptor count), EPROTO, EMSGSIZE or
// peer_closed_error. It follows the kernel's rules: a sendmsg's descriptors arrive with the recvmsg that
// reads its first byte, at most as many as that recvmsg's control buffer has room for, which receive()
// sizes for max_descriptors (at least 1). Invariants, each an abort: only cudrv errors escape, the
// outcome is the model's, a message holds exactly the descriptors its header announced (at most
// max_descriptors, each open and close-on-exec) and at most max_payload bytes, and no descriptor is left
// open once the messages are dropped (/proc/self/fd is counted before and after each input).
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <cudrv/error.hpp>
#include <cudrv/unix_socket.hpp>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_socket_frames: %s\n", what.c_str());
  std::abort();
}

// The wire format of a frame header (host byte order; docs/ipc.md).
constexpr std::uint32_t frame_magic = 0x56524443u;
struct frame_header {
  std::uint32_t magic;
  std::uint32_t descriptors;
  std::uint64_t payload;
};
static_assert(sizeof(frame_header) == 16);

constexpr std::size_t max_script_bytes = std::size_t{64} << 10;
constexpr std::size_t max_sends = 1024;

int open_descriptors() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) {
    fail("cannot read /proc/self/fd");
  }
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    n += e->d_name[0] != '.' ? 1 : 0;
  }
  ::closedir(d);
  return n - 1;
}

const std::array<int, 4>& null_descriptors() {
  static const std::array<int, 4> fds = [] {
    std::array<int, 4> out{};
    for (int& fd : out) {
      fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        fail("cannot open /dev/null");
      }
    }
    return out;
  }();
  return fds;
}

// What the peer sent: the bytes, and where each sendmsg with descriptors began and how many it carried.
struct script {
  std::vector<std::uint8_t> bytes;
  std::vector<std::pair<std::size_t, std::size_t>> attached;
  std::size_t sends = 0;
  bool stopped = false;  // a send failed or was short: nothing more is sent
};

// Sends n bytes (n >= 1) in one non-blocking sendmsg with `count` descriptors attached.
void send_chunk(int sock, script& s, const std::uint8_t* bytes, std::size_t n, std::size_t count) {
  if (s.stopped || n == 0) {
    return;  // a sendmsg without bytes sends nothing on a stream socket, descriptors included
  }
  if (s.sends >= max_sends || s.bytes.size() + n > max_script_bytes) {
    s.stopped = true;
    return;
  }
  iovec iov{const_cast<std::uint8_t*>(bytes), n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) unsigned char control[CMSG_SPACE(8 * sizeof(int))] = {};
  if (count > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(count * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(count * sizeof(int));
    for (std::size_t i = 0; i < count; ++i) {
      const int fd = null_descriptors()[i % 4];
      std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
    }
  }
  ssize_t r = -1;
  do {
    r = ::sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (r < 0 && errno == EINTR);
  ++s.sends;
  if (r <= 0) {
    s.stopped = true;  // a full buffer (EAGAIN), too many descriptors in flight (ETOOMANYREFS)
    return;
  }
  if (count > 0) {
    s.attached.emplace_back(s.bytes.size(), count);
  }
  s.bytes.insert(s.bytes.end(), bytes, bytes + r);
  if (static_cast<std::size_t>(r) < n) {
    s.stopped = true;
  }
}

// Reads the input: a cursor that yields zeros past the end.
struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  [[nodiscard]] bool done() const { return at >= size; }
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::uint64_t little_endian(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) {
      v |= std::uint64_t{byte()} << (8 * i);
    }
    return v;
  }
  std::vector<std::uint8_t> take(std::size_t n) {
    n = std::min(n, size - std::min(at, size));
    std::vector<std::uint8_t> out(data + at, data + at + n);
    at += n;
    return out;
  }
};

void run_script(int sock, reader& in, script& s) {
  while (!in.done() && !s.stopped) {
    const std::uint8_t tag = in.byte();
    const std::size_t count = (tag >> 2) & 7u;
    const unsigned flags = tag >> 5;
    switch (tag & 3u) {
      case 0: {
        const auto bytes = in.take(in.byte());
        send_chunk(sock, s, bytes.data(), bytes.size(), count);
        break;
      }
      case 1: {
        frame_header h{frame_magic, in.byte(), 0};
        h.payload = in.little_endian((flags & 1u) != 0 ? 8 : 2);
        send_chunk(sock, s, reinterpret_cast<const std::uint8_t*>(&h), sizeof(h), count);
        break;
      }
      case 2: {
        const auto payload = in.take(in.byte());
        const frame_header h{frame_magic, static_cast<std::uint32_t>(count), payload.size()};
        std::vector<std::uint8_t> message(sizeof(h) + payload.size());
        std::memcpy(message.data(), &h, sizeof(h));
        std::copy(payload.begin(), payload.end(), message.begin() + sizeof(h));
        send_chunk(sock, s, message.data(), message.size(), count);
        break;
      }
      default: {
        const auto bytes = in.take(in.byte() % 33u);
        for (const std::uint8_t& b : bytes) {
          send_chunk(sock, s, &b, 1, count);
        }
        break;
      }
    }
  }
}

// What the next receive must give, by the model.
struct expectation {
  enum class outcome { message, eproto, emsgsize, closed } what = outcome::closed;
  std::size_t payload_at = 0;
  std::size_t payload_size = 0;
  std::size_t descriptors = 0;
};

// The model of one receive starting at byte `pos` of the stream; moves pos past what it consumes.
// `room`: how many descriptors one recvmsg can take.
expectation predict(const script& s, std::size_t& pos, std::size_t max_fds, std::size_t max_payload, std::size_t room) {
  using outcome = expectation::outcome;
  const std::size_t total = s.bytes.size();
  expectation e;
  if (total - pos < sizeof(frame_header)) {
    pos = total;
    return e;  // closed
  }
  frame_header h{};
  std::memcpy(&h, s.bytes.data() + pos, sizeof(h));
  const std::size_t body = pos + sizeof(h);
  std::size_t with_header = 0;
  bool discarded = false;
  for (const auto& [at, n] : s.attached) {
    if (at >= pos && at < body) {
      with_header += std::min(n, room);
      discarded = discarded || n > room;
    }
  }
  if (h.magic != frame_magic) {
    pos = body;
    e.what = outcome::eproto;
    return e;
  }
  if (h.payload > total - body) {
    pos = total;
    return e;  // closed in the middle of the message
  }
  const std::size_t end = body + static_cast<std::size_t>(h.payload);
  bool with_payload = false;
  for (const auto& [at, n] : s.attached) {
    with_payload = with_payload || (at >= body && at < end);
  }
  pos = end;
  if (h.payload > max_payload || h.descriptors > max_fds) {
    e.what = outcome::emsgsize;
  } else if (with_payload || with_header != h.descriptors || discarded) {
    e.what = outcome::eproto;
  } else {
    e = {outcome::message, body, static_cast<std::size_t>(h.payload), h.descriptors};
  }
  return e;
}

const char* name(expectation::outcome o) {
  switch (o) {
    case expectation::outcome::message: return "a message";
    case expectation::outcome::eproto: return "EPROTO";
    case expectation::outcome::emsgsize: return "EMSGSIZE";
    default: return "peer_closed_error";
  }
}

// A refusal must be the one the model predicts: EPROTO or EMSGSIZE.
void check_refusal(const cudrv::system_error& e, const expectation& want) {
  const bool as_predicted = (want.what == expectation::outcome::eproto && e.code() == EPROTO) ||
                            (want.what == expectation::outcome::emsgsize && e.code() == EMSGSIZE);
  if (!as_predicted) {
    fail(std::string("expected ") + name(want.what) + ", got: " + e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)null_descriptors();
  if (size < 2) {
    return 0;
  }
  reader in{data, size};
  cudrv::receive_options options;
  const std::uint8_t b0 = in.byte();
  const std::uint8_t b1 = in.byte();
  options.max_descriptors = (b0 & 0x0fu) % 9u;
  static constexpr std::optional<std::chrono::milliseconds> timeouts[] = {std::nullopt, std::chrono::milliseconds(0),
                                                                          std::chrono::milliseconds(-1),
                                                                          std::chrono::milliseconds::max()};
  options.timeout = timeouts[(b0 >> 4) & 3u];
  if (b1 != 255) {
    options.max_payload = std::size_t{4} * b1;
  }
  // receive() gives each recvmsg room for max(max_descriptors, 1) descriptors; the kernel fills
  // what the buffer holds (CMSG_SPACE rounds up, so an odd count gets one more).
  const std::size_t room =
      (CMSG_SPACE(std::max<std::size_t>(options.max_descriptors, 1) * sizeof(int)) - sizeof(cmsghdr)) / sizeof(int);

  const int before = open_descriptors();
  {
    auto [peer, receiver] = cudrv::unix_socket::pair();
    script s;
    run_script(peer.native_handle(), in, s);
    peer.reset();  // everything sent, then the end of file, is queued before the first receive

    std::size_t pos = 0;
    for (std::size_t receives = 0;; ++receives) {
      if (receives > s.bytes.size() / sizeof(frame_header) + 1) {
        fail("more receives than the stream has messages");
      }
      const expectation want = predict(s, pos, options.max_descriptors, options.max_payload, room);
      try {
        const cudrv::received_message m = receiver.receive(options);
        if (want.what != expectation::outcome::message) {
          fail(std::string("expected ") + name(want.what) + ", got a message");
        }
        if (m.payload.size() > options.max_payload || m.descriptors.size() > options.max_descriptors) {
          fail("a message over the receive's limits");
        }
        if (m.payload.size() != want.payload_size ||
            (want.payload_size > 0 &&
             std::memcmp(m.payload.data(), s.bytes.data() + want.payload_at, want.payload_size) != 0)) {
          fail("a message's payload is not the bytes sent");
        }
        if (m.descriptors.size() != want.descriptors) {
          fail("a message's descriptors are not the ones its header announced");
        }
        for (const cudrv::file_descriptor& fd : m.descriptors) {
          const int flags = ::fcntl(fd.native_handle(), F_GETFD);
          if (flags < 0 || (flags & FD_CLOEXEC) == 0) {
            fail("a received descriptor is not open or not close-on-exec");
          }
        }
      } catch (const cudrv::peer_closed_error& e) {
        if (want.what != expectation::outcome::closed) {
          fail(std::string("expected ") + name(want.what) + ", got: " + e.what());
        }
        if (pos != s.bytes.size()) {
          fail("the model has bytes left after the end of file");
        }
        break;
      } catch (const cudrv::timeout_error& e) {
        fail(std::string("a timeout with the whole stream queued: ") + e.what());
      } catch (const cudrv::system_error& e) {
        check_refusal(e, want);
      } catch (const cudrv::error& e) {
        fail(std::string("an unexpected cudrv::error: ") + e.what());
      } catch (...) {
        fail("an exception that is not a cudrv::error");
      }
    }
  }
  if (open_descriptors() != before) {
    fail("descriptors left open: " + std::to_string(open_descriptors() - before));
  }
  return 0;
}
