// CPU tier: cudrv::file_descriptor and cudrv::unix_socket, the SCM_RIGHTS channel of <cudrv/ipc.hpp>.
// Framing, payload sizes, descriptors that work in another process (fork), peers that close or die,
// timeouts (and timeouts too large or negative), truncated and unexpected descriptors (closed as they
// arrive, never leaked), a receiver out of descriptor slots, EINTR, listeners on paths, a listener
// whose backlog is full.
#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <cudrv/unix_socket.hpp>
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using namespace std::chrono_literals;

namespace {

// The number of open descriptors of this process; INT_MAX when /proc/self/fd cannot be opened (a
// full descriptor table), so that a comparison with an earlier count fails.
int open_descriptors() {
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) {
    return std::numeric_limits<int>::max();
  }
  int n = 0;
  while (const dirent* e = ::readdir(d)) {
    n += e->d_name[0] != '.' ? 1 : 0;
  }
  ::closedir(d);
  return n - 1;  // the directory's own descriptor
}

// The highest descriptor number open in this process (RLIMIT_NOFILE bounds numbers, not counts).
int highest_descriptor() {
  DIR* d = ::opendir("/proc/self/fd");
  REQUIRE(d != nullptr);
  const int own = ::dirfd(d);
  int highest = -1;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') {
      const int fd = std::atoi(e->d_name);
      highest = fd != own ? std::max(highest, fd) : highest;
    }
  }
  ::closedir(d);
  return highest;
}

// Lowers the soft RLIMIT_NOFILE for a scope and restores the limit on the way out, however the scope
// is left.
class nofile_limit {
 public:
  explicit nofile_limit(rlim_t soft) {
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
    REQUIRE(soft <= saved_.rlim_max);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  }
  ~nofile_limit() { (void)::setrlimit(RLIMIT_NOFILE, &saved_); }
  nofile_limit(const nofile_limit&) = delete;
  nofile_limit& operator=(const nofile_limit&) = delete;

 private:
  rlimit saved_{};
};

// Sends n bytes in one sendmsg with `copies` copies of descriptor fd attached (a peer that does not
// follow the protocol). Returns 0, or the errno of the failure. ETOOMANYREFS (too many descriptors in
// flight, for a user without CAP_SYS_RESOURCE) is waited out: the receiver drains them.
int send_raw(int sock, const void* bytes, std::size_t n, int fd, int copies) {
  iovec iov{const_cast<void*>(bytes), n};
  std::vector<unsigned char> control(copies > 0 ? CMSG_SPACE(sizeof(int) * static_cast<std::size_t>(copies)) : 0);
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (copies > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * static_cast<std::size_t>(copies));
    for (int i = 0; i < copies; ++i) {
      std::memcpy(CMSG_DATA(c) + sizeof(int) * static_cast<std::size_t>(i), &fd, sizeof(int));
    }
  }
  for (int tries = 0;; ++tries) {
    const ssize_t r = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n)) {
      return 0;
    }
    if (r >= 0) {
      return EIO;  // a short write of a blocking socket: not expected for the few bytes sent here
    }
    if (errno == ETOOMANYREFS && tries < 10000) {
      std::this_thread::sleep_for(1ms);
      continue;
    }
    if (errno != EINTR) {
      return errno;
    }
  }
}

// Bytes waiting in a socket's receive queue.
int unread_bytes(int sock) {
  int n = -1;
  REQUIRE(::ioctl(sock, FIONREAD, &n) == 0);
  return n;
}

// A thread joined on the way out of the scope, after `stop` (which must make the thread return soon,
// e.g. by shutting a socket down) when the scope is left by an exception (a failed REQUIRE).
template <class Stop>
class scoped_thread {
 public:
  template <class Fn>
  scoped_thread(Fn&& fn, Stop stop) : thread_(std::forward<Fn>(fn)), stop_(std::move(stop)) {}
  ~scoped_thread() {
    if (thread_.joinable()) {
      stop_();
      thread_.join();
    }
  }
  void join() { thread_.join(); }
  scoped_thread(const scoped_thread&) = delete;
  scoped_thread& operator=(const scoped_thread&) = delete;

 private:
  std::thread thread_;
  Stop stop_;
};
template <class Fn, class Stop>
scoped_thread(Fn&&, Stop) -> scoped_thread<Stop>;

// Connects a raw non-blocking socket to path: 0, or the errno (EAGAIN when the backlog is full).
int raw_connect(const std::string& path, std::vector<cudrv::file_descriptor>& keep) {
  cudrv::file_descriptor fd =
      cudrv::file_descriptor::from_native_handle(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  REQUIRE(fd);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (::connect(fd.native_handle(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    return errno;
  }
  keep.push_back(std::move(fd));
  return 0;
}

// A fresh directory under /tmp for a socket path, removed (with the socket file, if left) at the end.
struct socket_dir {
  std::string dir;
  socket_dir() {
    char name[] = "/tmp/cudrv-socket-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    dir = name;
  }
  ~socket_dir() {
    (void)::unlink((dir + "/s.sock").c_str());
    (void)::rmdir(dir.c_str());
  }
  [[nodiscard]] std::string path() const { return dir + "/s.sock"; }
  socket_dir(const socket_dir&) = delete;
  socket_dir& operator=(const socket_dir&) = delete;
};

std::vector<std::byte> pattern(std::size_t n, std::uint64_t seed) {
  auto bytes = cudrv::test::random_bytes(n, seed);
  std::vector<std::byte> out(n);
  if (n != 0) {  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(out.data(), bytes.data(), n);
  }
  return out;
}

cudrv::file_descriptor memfd_with(const std::string& text) {
  cudrv::file_descriptor fd = cudrv::file_descriptor::from_native_handle(::memfd_create("cudrv-test", MFD_CLOEXEC));
  REQUIRE(fd);
  REQUIRE(::write(fd.native_handle(), text.data(), text.size()) == static_cast<ssize_t>(text.size()));
  return fd;
}

// Runs fn in a child process (fork; no CUDA in the child) and returns its exit status (-signal when killed).
template <class Fn>
pid_t spawn(Fn&& fn) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int status = 1;
    try {
      status = fn();
    } catch (...) {
      status = 99;
    }
    ::_exit(status);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

// The raw bytes of a frame header, for tests that play a peer not following the protocol.
struct raw_header {
  std::uint32_t magic = 0x56524443u;
  std::uint32_t descriptors = 0;
  std::uint64_t payload = 0;
};

}  // namespace

TEST_CASE("file_descriptor owns, releases and duplicates a descriptor", "[cpu][ipc][socket]") {
  const int before = open_descriptors();
  {
    cudrv::file_descriptor empty;
    CHECK_FALSE(empty);
    CHECK(empty.native_handle() == -1);
    CHECK_FALSE(cudrv::file_descriptor::from_native_handle(-5));
    auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)empty.duplicate(); });
    REQUIRE(e);
    CHECK(contains(e->what(), "empty"));

    cudrv::file_descriptor a = memfd_with("abc");
    CHECK(open_descriptors() == before + 1);
    cudrv::file_descriptor b = a.duplicate();
    CHECK(b.native_handle() != a.native_handle());
    CHECK((::fcntl(b.native_handle(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(open_descriptors() == before + 2);
    cudrv::file_descriptor c = std::move(a);
    CHECK_FALSE(a);  // NOLINT: moved-from is empty by contract
    CHECK(open_descriptors() == before + 2);
    c.reset();
    CHECK(open_descriptors() == before + 1);
    const int raw = b.release();
    CHECK_FALSE(b);
    CHECK(open_descriptors() == before + 1);  // released, not closed
    ::close(raw);
  }
  CHECK(open_descriptors() == before);
}

TEST_CASE("unix_socket carries payloads of every size, in order", "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  // Sizes around the 16-byte header and beyond the socket buffer (the large ones need a reader that runs
  // at the same time: short writes and a full buffer are handled inside send).
  const std::vector<std::size_t> sizes{0, 1, 15, 16, 17, 4096, 65537, std::size_t{3} << 20};
  std::thread writer([&, &a = a] {
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      const auto data = pattern(sizes[i], 100 + i);
      a.send(data);
    }
  });
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    INFO("message " << i << ", " << sizes[i] << " bytes");
    cudrv::received_message m = b.receive({.timeout = 20s});
    CHECK(m.payload.size() == sizes[i]);
    CHECK(m.payload == pattern(sizes[i], 100 + i));
    CHECK(m.descriptors.empty());
  }
  writer.join();

  // A value, and its size checked on the way out.
  struct value {
    double x;
    int n;
  };
  a.send_value(value{2.5, 7});
  cudrv::received_message m = b.receive({.timeout = 5s});
  CHECK(m.as<value>().x == 2.5);
  CHECK(m.as<value>().n == 7);
  auto wrong = catch_as<cudrv::system_error>([&] { (void)m.as<int>(); });
  REQUIRE(wrong);
  CHECK(wrong->code() == EPROTO);
  CHECK(wrong->source() == cudrv::error_source::system);
  CHECK(wrong->name() == "EPROTO");
}

TEST_CASE("descriptors passed to another process work there: a pipe and a memfd", "[cpu][ipc][socket]") {
  auto [parent, child] = cudrv::unix_socket::pair();
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  cudrv::file_descriptor read_end = cudrv::file_descriptor::from_native_handle(p[0]);
  cudrv::file_descriptor write_end = cudrv::file_descriptor::from_native_handle(p[1]);
  const std::string text = "the memfd's bytes, read in the child";

  const pid_t pid = spawn([&, &child = child, &parent = parent] {
    parent.reset();
    cudrv::received_message m = child.receive({.timeout = 10s});
    if (m.descriptors.size() != 2) {
      return 2;
    }
    if ((::fcntl(m.descriptors[0].native_handle(), F_GETFD) & FD_CLOEXEC) == 0) {
      return 3;  // received descriptors must be close-on-exec
    }
    // Write the payload into the pipe: the parent reads it from its own end.
    const std::string payload(reinterpret_cast<const char*>(m.payload.data()), m.payload.size());
    const std::string line = "child got: " + payload;
    if (::write(m.descriptors[0].native_handle(), line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      return 4;
    }
    // Read the memfd and send back the sum of its bytes.
    char buf[256] = {};
    const ssize_t n = ::pread(m.descriptors[1].native_handle(), buf, sizeof(buf), 0);
    if (n <= 0) {
      return 5;
    }
    long sum = std::accumulate(buf, buf + n, 0L);
    child.send_value(sum);
    return 0;
  });
  child.reset();
  cudrv::file_descriptor mem = memfd_with(text);
  const std::string word = "hello";
  parent.send(std::as_bytes(std::span(word.data(), word.size())), {write_end.native_handle(), mem.native_handle()});
  write_end.reset();  // the child's copy stays open until it exits
  const long sum = parent.receive({.timeout = 10s}).as<long>();
  CHECK(sum == std::accumulate(text.begin(), text.end(), 0L));
  char got[64] = {};
  const ssize_t n = ::read(read_end.native_handle(), got, sizeof(got) - 1);
  CHECK(std::string(got, n > 0 ? static_cast<std::size_t>(n) : 0) == "child got: hello");
  CHECK(wait_for(pid) == 0);
}

TEST_CASE("a peer that closes or dies gives peer_closed_error, never a hang", "[cpu][ipc][socket]") {
  SECTION("closed before a message") {
    auto [a, b] = cudrv::unix_socket::pair();
    b.reset();
    auto e = catch_as<cudrv::peer_closed_error>([&, &a = a] { (void)a.receive({.timeout = 5s}); });
    REQUIRE(e);
    CHECK(e->code() == ENOTCONN);
    CHECK(e->source() == cudrv::error_source::system);
    // Sending to a closed peer: EPIPE as an exception, no SIGPIPE killing the process.
    auto s = catch_as<cudrv::peer_closed_error>([&, &a = a] {
      std::vector<std::byte> big(1 << 20);
      a.send(big);
    });
    REQUIRE(s);
    CHECK((s->code() == EPIPE || s->code() == ECONNRESET));
  }
  SECTION("closed in the middle of a message") {
    auto [a, b] = cudrv::unix_socket::pair();
    const raw_header h{.descriptors = 0, .payload = 100};
    REQUIRE(::write(b.native_handle(), &h, sizeof(h)) == sizeof(h));
    REQUIRE(::write(b.native_handle(), "0123456789", 10) == 10);
    b.reset();
    auto e = catch_as<cudrv::peer_closed_error>([&, &a = a] { (void)a.receive({.timeout = 5s}); });
    REQUIRE(e);
    CHECK(contains(e->what(), "middle of a message"));
  }
  SECTION("killed while the receiver waits without a timeout") {
    auto [a, b] = cudrv::unix_socket::pair();
    const pid_t pid = spawn([] {
      for (;;) {
        ::pause();
      }
      return 0;
    });
    b.reset();  // the child holds the only other copy
    std::thread killer([pid] {
      std::this_thread::sleep_for(100ms);
      ::kill(pid, SIGKILL);
    });
    const auto start = std::chrono::steady_clock::now();
    auto e = catch_as<cudrv::peer_closed_error>([&, &a = a] { (void)a.receive(); });
    killer.join();
    CHECK(e.has_value());
    CHECK(std::chrono::steady_clock::now() - start < 10s);
    CHECK(wait_for(pid) == -SIGKILL);
  }
}

TEST_CASE("unix_socket timeouts are typed and honoured", "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  const auto start = std::chrono::steady_clock::now();
  auto e = catch_as<cudrv::timeout_error>([&, &a = a] { (void)a.receive({.timeout = 100ms}); });
  const auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE(e);
  CHECK(e->code() == ETIMEDOUT);
  CHECK(contains(e->what(), "100 ms"));
  CHECK(waited >= 95ms);
  CHECK(waited < 5s);
  // A send that cannot complete because nobody reads: the buffer fills, the timeout fires.
  std::vector<std::byte> big(std::size_t{64} << 20);
  auto s = catch_as<cudrv::timeout_error>([&, &b = b] { b.send(big, {}, 100ms); });
  CHECK(s.has_value());
}

TEST_CASE("descriptors beyond the receiver's limit are closed and refused, the stream stays in sync",
          "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  const int before = open_descriptors();
  {
    cudrv::file_descriptor f1 = memfd_with("1"), f2 = memfd_with("2"), f3 = memfd_with("3");
    a.send(pattern(1000, 1), {f1.native_handle(), f2.native_handle(), f3.native_handle()});
    a.send(pattern(10, 2));
  }
  // The kernel truncates the control message (MSG_CTRUNC): the one descriptor that fit is closed too.
  auto e = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s, .max_descriptors = 1}); });
  REQUIRE(e);
  CHECK(e->code() == EMSGSIZE);
  CHECK(contains(e->what(), "3 file descriptors"));
  CHECK(contains(e->what(), "at most 1"));
  CHECK(open_descriptors() == before);  // nothing leaked (the senders' copies are closed above)
  cudrv::received_message next = b.receive({.timeout = 5s});
  CHECK(next.payload == pattern(10, 2));

  // A payload over the limit: discarded and refused; the next message arrives intact.
  a.send(pattern(5000, 3));
  a.send(pattern(20, 4));
  auto big = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s, .max_payload = 4096}); });
  REQUIRE(big);
  CHECK(big->code() == EMSGSIZE);
  CHECK(contains(big->what(), "5000 bytes"));
  CHECK(b.receive({.timeout = 5s}).payload == pattern(20, 4));
}

TEST_CASE("descriptors the message did not announce are closed, foreign bytes are refused", "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  const int before = open_descriptors();
  {
    // A peer that attaches a descriptor to a header announcing none (a raw sendmsg).
    cudrv::file_descriptor extra = memfd_with("x");
    raw_header h{.descriptors = 0, .payload = 4};
    char body[4] = {1, 2, 3, 4};
    iovec iov[2] = {{&h, sizeof(h)}, {body, sizeof(body)}};
    alignas(cmsghdr) unsigned char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int fd = extra.native_handle();
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    REQUIRE(::sendmsg(a.native_handle(), &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(h) + sizeof(body)));
  }
  auto e = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s}); });
  REQUIRE(e);
  CHECK(e->code() == EPROTO);
  CHECK(contains(e->what(), "announced 0"));
  CHECK(open_descriptors() == before);

  // Bytes that are not a frame at all.
  const char junk[16] = "not a frame....";
  REQUIRE(::write(a.native_handle(), junk, sizeof(junk)) == sizeof(junk));
  auto j = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s}); });
  REQUIRE(j);
  CHECK(j->code() == EPROTO);
}

TEST_CASE("unix_socket::send refuses bad descriptor lists before any byte is sent", "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  auto neg = catch_as<cudrv::invalid_argument_error>([&, &a = a] { a.send({}, {-1}); });
  REQUIRE(neg);
  CHECK(contains(neg->what(), "not a file descriptor"));
  std::vector<int> many(cudrv::unix_socket::max_descriptors + 1, 0);
  auto lots = catch_as<cudrv::invalid_argument_error>([&, &a = a] { a.send({}, many); });
  REQUIRE(lots);
  CHECK(contains(lots->what(), "at most 253"));
  cudrv::unix_socket empty;
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)empty.receive(); });
  REQUIRE(e);
  CHECK(contains(e->what(), "empty"));
  // Nothing was sent by the refused calls.
  auto t = catch_as<cudrv::timeout_error>([&, &b = b] { (void)b.receive({.timeout = 20ms}); });
  CHECK(t.has_value());
  CHECK(a.peer().pid == ::getpid());
}

namespace {
extern "C" void on_alarm(int) {}
}  // namespace

TEST_CASE("unix_socket survives signals that interrupt its calls (EINTR)", "[cpu][ipc][socket]") {
  struct sigaction sa {};
  struct sigaction old {};
  sa.sa_handler = on_alarm;
  sa.sa_flags = 0;  // no SA_RESTART: poll, sendmsg and recvmsg see EINTR
  sigemptyset(&sa.sa_mask);
  REQUIRE(::sigaction(SIGALRM, &sa, &old) == 0);
  itimerval every_ms{{0, 1000}, {0, 1000}};
  REQUIRE(::setitimer(ITIMER_REAL, &every_ms, nullptr) == 0);

  auto [a, b] = cudrv::unix_socket::pair();
  const auto data = pattern(std::size_t{8} << 20, 9);
  std::thread writer([&, &a = a] {
    std::this_thread::sleep_for(50ms);
    a.send(data);
  });
  cudrv::received_message m = b.receive({.timeout = 30s});
  writer.join();
  itimerval off{};
  ::setitimer(ITIMER_REAL, &off, nullptr);
  ::sigaction(SIGALRM, &old, nullptr);
  CHECK(m.payload == data);
}

TEST_CASE("unix_listener and connect join processes through a path", "[cpu][ipc][socket]") {
  char dir_template[] = "/tmp/cudrv-socket-XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string path = std::string(dir_template) + "/producer.sock";

  SECTION("a client that starts before the listener waits for it") {
    std::thread late([&] {
      std::this_thread::sleep_for(100ms);
      cudrv::unix_listener listener(path);
      cudrv::unix_socket s = listener.accept(10s);
      s.send_value(42);
      (void)s.receive({.timeout = 10s});  // until the client is done
    });
    cudrv::unix_socket c = cudrv::unix_socket::connect(path, 10s);
    CHECK(c.receive({.timeout = 10s}).as<int>() == 42);
    CHECK(c.peer().pid == ::getpid());
    c.send_value(0);
    late.join();
    CHECK(::access(path.c_str(), F_OK) != 0);  // the listener removed its file
  }
  SECTION("refusals: no listener, no connection, a path too long, a name taken") {
    auto none = catch_as<cudrv::system_error>([&] { (void)cudrv::unix_socket::connect(path); });
    REQUIRE(none);
    CHECK(none->code() == ENOENT);
    auto waited = catch_as<cudrv::timeout_error>([&] { (void)cudrv::unix_socket::connect(path, 50ms); });
    REQUIRE(waited);
    CHECK(contains(waited->what(), "no listener"));
    cudrv::unix_listener listener(path);
    auto t = catch_as<cudrv::timeout_error>([&] { (void)listener.accept(50ms); });
    CHECK(t.has_value());
    auto taken = catch_as<cudrv::system_error>([&] { cudrv::unix_listener again(path); });
    REQUIRE(taken);
    CHECK(taken->code() == EADDRINUSE);
    auto lng = catch_as<cudrv::invalid_argument_error>([&] { cudrv::unix_listener l(std::string(200, 'x')); });
    REQUIRE(lng);
    CHECK(contains(lng->what(), "at most 107 bytes"));
  }
  SECTION("an abstract name, across fork") {
    const std::string name = "@cudrv-test-" + std::to_string(::getpid());
    cudrv::unix_listener listener(name);
    const pid_t pid = spawn([&] {
      cudrv::unix_socket c = cudrv::unix_socket::connect(name, 10s);
      cudrv::file_descriptor fd = memfd_with("from the child");
      c.send(pattern(33, 5), {fd.native_handle()});
      return 0;
    });
    cudrv::unix_socket s = listener.accept(10s);
    cudrv::received_message m = s.receive({.timeout = 10s});
    CHECK(m.payload == pattern(33, 5));
    REQUIRE(m.descriptors.size() == 1);
    char buf[32] = {};
    CHECK(::pread(m.descriptors[0].native_handle(), buf, sizeof(buf), 0) == 14);
    CHECK(std::string(buf) == "from the child");
    CHECK(wait_for(pid) == 0);
  }
  ::rmdir(dir_template);
}

TEST_CASE("unannounced descriptors are closed as they arrive and counted, the message is refused",
          "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  const cudrv::file_descriptor extra = memfd_with("x");
  const int before = open_descriptors();
  const int sock = a.native_handle();
  std::optional<cudrv::system_error> error;
  const auto receive_in_thread = [&, &b = b](cudrv::receive_options options) {
    return scoped_thread(
        [&, &b = b, options] {
          try {
            (void)b.receive(options);
          } catch (const cudrv::system_error& e) {
            error = e;
          }
        },
        [&b = b] { ::shutdown(b.native_handle(), SHUT_RDWR); });
  };
  // What the receiver holds once it has read everything sent so far: given up to 2 s to come down to
  // `bound` (its last recvmsg's descriptors handled); without the bound, kept ones never come down.
  const auto held_while_receiving = [&, &b = b](int bound) {
    REQUIRE(cudrv::test::wait_until([&] { return unread_bytes(b.native_handle()) == 0; }));
    (void)cudrv::test::wait_until([&] { return open_descriptors() - before <= bound; }, 2s);
    return open_descriptors() - before;
  };

  SECTION("sixteen on each byte of a 200-byte payload, in a table with room for about 200") {
    // The report: 3,200 descriptors were all kept until the payload was read, filled the table, and
    // the error then said the message carried 0.
    int held = 0;
    {
      const nofile_limit limit(static_cast<rlim_t>(highest_descriptor() + 200));
      auto receiver = receive_in_thread({.timeout = 30s});
      const raw_header h{.descriptors = 0, .payload = 200};
      REQUIRE(send_raw(sock, &h, sizeof(h), -1, 0) == 0);
      for (int i = 0; i < 199; ++i) {
        REQUIRE(send_raw(sock, "p", 1, extra.native_handle(), 16) == 0);
      }
      held = held_while_receiving(0);
      REQUIRE(send_raw(sock, "p", 1, extra.native_handle(), 16) == 0);
      receiver.join();
    }
    CHECK(held == 0);
    REQUIRE(error);
    INFO(error->what());
    CHECK(error->code() == EPROTO);
    CHECK(contains(error->what(), "announced 0 file descriptors"));
    CHECK(contains(error->what(), "3200 unannounced"));
  }
  SECTION("sixteen on each of the 16 header bytes: at most max_descriptors are kept") {
    int held = 0;
    {
      auto receiver = receive_in_thread({.timeout = 30s, .max_descriptors = 4});
      const raw_header h{.descriptors = 0, .payload = 0};
      const auto* bytes = reinterpret_cast<const unsigned char*>(&h);
      for (std::size_t i = 0; i + 1 < sizeof(h); ++i) {
        REQUIRE(send_raw(sock, bytes + i, 1, extra.native_handle(), 16) == 0);
      }
      held = held_while_receiving(4);
      REQUIRE(send_raw(sock, bytes + sizeof(h) - 1, 1, extra.native_handle(), 16) == 0);
      receiver.join();
    }
    CHECK(held <= 4);
    REQUIRE(error);
    INFO(error->what());
    CHECK(error->code() == EPROTO);
    CHECK(contains(error->what(), "announced 0 file descriptors"));
    // Each recvmsg has room for 4 (the kernel discards the other 12 of each byte, MSG_CTRUNC).
    CHECK(contains(error->what(), "64 unannounced"));
    CHECK(contains(error->what(), "MSG_CTRUNC"));
  }
  SECTION("announced ones with the header, more with the payload") {
    {
      auto receiver = receive_in_thread({.timeout = 30s});
      const raw_header h{.descriptors = 2, .payload = 3};
      REQUIRE(send_raw(sock, &h, sizeof(h), extra.native_handle(), 2) == 0);
      REQUIRE(send_raw(sock, "abc", 3, extra.native_handle(), 5) == 0);
      receiver.join();
    }
    REQUIRE(error);
    INFO(error->what());
    CHECK(error->code() == EPROTO);
    CHECK(contains(error->what(), "announced 2 file descriptors"));
    CHECK(contains(error->what(), "5 unannounced"));
  }
  CHECK(open_descriptors() == before);
  // The refused message was read to its end: the next one arrives intact.
  a.send(pattern(7, 11), {extra.native_handle()});
  cudrv::received_message next = b.receive({.timeout = 5s});
  CHECK(next.payload == pattern(7, 11));
  CHECK(next.descriptors.size() == 1);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool built_with_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
constexpr bool built_with_sanitizer = true;
#else
constexpr bool built_with_sanitizer = false;
#endif
#else
constexpr bool built_with_sanitizer = false;
#endif

TEST_CASE("a receiver without a free descriptor slot gets EMFILE naming the limit (not a size error)",
          "[cpu][ipc][socket]") {
  auto [a, b] = cudrv::unix_socket::pair();
  const cudrv::file_descriptor sent = memfd_with("m");
  const int before = open_descriptors();
  std::optional<cudrv::system_error> none_free;
  std::optional<cudrv::system_error> two_free;
  const rlim_t limit = static_cast<rlim_t>(highest_descriptor() + 8);
  {
    const nofile_limit lowered(limit);
    std::vector<cudrv::file_descriptor> filler;  // closed before the limit is restored
    for (;;) {
      const int fd = ::fcntl(sent.native_handle(), F_DUPFD_CLOEXEC, 0);
      if (fd < 0) {
        REQUIRE(errno == EMFILE);
        break;
      }
      filler.push_back(cudrv::file_descriptor::from_native_handle(fd));
      REQUIRE(filler.size() < limit);  // the limit was taken
    }
    if (!built_with_sanitizer) {
      // No slot free. (Not in a sanitizer build: making the error runs the sanitizer's check of an
      // object's type, which needs a pipe, so two free slots: with none, UndefinedBehaviorSanitizer
      // reports an "invalid vptr" of cudrv::error that is not there.)
      a.send(pattern(8, 1), {sent.native_handle(), sent.native_handle()});
      none_free = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s}); });
    }
    // Two slots free: the kernel installs two of four, then stops; cudrv closes them before making the error.
    filler.pop_back();
    filler.pop_back();
    a.send(pattern(8, 2), {sent.native_handle(), sent.native_handle(), sent.native_handle(), sent.native_handle()});
    two_free = catch_as<cudrv::system_error>([&, &b = b] { (void)b.receive({.timeout = 5s}); });
  }
  for (const auto* e : {&none_free, &two_free}) {
    if (e == &none_free && built_with_sanitizer) {
      continue;
    }
    REQUIRE(e->has_value());
    INFO((*e)->what());
    CHECK((*e)->code() == EMFILE);
    CHECK((*e)->name() == "EMFILE");
    CHECK(contains((*e)->what(), "no free descriptor slot"));
    CHECK(contains((*e)->what(), "RLIMIT_NOFILE soft limit " + std::to_string(limit)));
    CHECK(contains((*e)->what(), "closed"));
    CHECK_FALSE(contains((*e)->what(), "max_descriptors"));
  }
  CHECK(open_descriptors() == before);
  a.send(pattern(9, 3), {sent.native_handle()});
  cudrv::received_message next = b.receive({.timeout = 5s});
  CHECK(next.payload == pattern(9, 3));
  CHECK(next.descriptors.size() == 1);
}

TEST_CASE("unix_socket::connect is bounded when the listener's backlog is full", "[cpu][ipc][socket]") {
  const socket_dir dir;
  const std::string path = dir.path();
  std::optional<cudrv::unix_listener> listener(std::in_place, path, 0);  // never accepts
  std::vector<cudrv::file_descriptor> queued;
  int last = 0;
  for (int i = 0; i < 64 && last == 0; ++i) {
    last = raw_connect(path, queued);
  }
  REQUIRE(last == EAGAIN);  // the backlog is full

  // A connect that does not return within 5 s fails the test; closing the listener then releases it.
  std::atomic<bool> returned{false};
  bool rescued = false;
  const auto bounded = [&](auto&& fn) {
    returned = false;
    scoped_thread worker(
        [&] {
          fn();
          returned = true;
        },
        [] {});
    if (!cudrv::test::wait_until([&] { return returned.load(); }, 5s)) {
      rescued = true;
      listener.reset();
    }
    worker.join();
  };
  SECTION("with a wait: timeout_error when the wait is over") {
    std::optional<cudrv::timeout_error> e;
    auto elapsed = std::chrono::steady_clock::duration::zero();
    bounded([&] {
      const auto start = std::chrono::steady_clock::now();
      e = catch_as<cudrv::timeout_error>([&] { (void)cudrv::unix_socket::connect(path, 200ms); });
      elapsed = std::chrono::steady_clock::now() - start;
    });
    CHECK_FALSE(rescued);
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->code() == ETIMEDOUT);
    CHECK(contains(e->what(), "backlog"));
    CHECK(elapsed >= 195ms);
    CHECK(elapsed < 5s);
  }
  SECTION("without a wait: EAGAIN at once") {
    std::optional<cudrv::system_error> e;
    auto elapsed = std::chrono::steady_clock::duration::zero();
    bounded([&] {
      const auto start = std::chrono::steady_clock::now();
      e = catch_as<cudrv::system_error>([&] { (void)cudrv::unix_socket::connect(path); });
      elapsed = std::chrono::steady_clock::now() - start;
    });
    CHECK_FALSE(rescued);
    REQUIRE(e);
    INFO(e->what());
    CHECK(e->code() == EAGAIN);
    CHECK(contains(e->what(), "backlog is full"));
    CHECK(elapsed < 1s);
  }
  SECTION("with a wait, the listener accepting later: connected, and the socket is blocking") {
    std::optional<cudrv::unix_socket> c;
    std::thread acceptor([&] {
      std::this_thread::sleep_for(100ms);
      cudrv::unix_socket s = listener->accept(5s);
      s.send_value(5);
    });
    bounded([&] { c = cudrv::unix_socket::connect(path, 10s); });
    acceptor.join();
    CHECK_FALSE(rescued);
    REQUIRE(c);
    CHECK((::fcntl(c->native_handle(), F_GETFL) & O_NONBLOCK) == 0);
  }
}

TEST_CASE("unix_socket timeouts saturate: milliseconds::max() waits and a negative timeout expires at once",
          "[cpu][ipc][socket]") {
  constexpr auto forever = std::chrono::milliseconds::max();
  SECTION("receive") {
    auto [a, b] = cudrv::unix_socket::pair();
    std::thread sender([&, &a = a] {
      std::this_thread::sleep_for(100ms);
      a.send_value(7);
    });
    const auto start = std::chrono::steady_clock::now();
    std::optional<cudrv::received_message> m;
    auto e = catch_as<cudrv::timeout_error>([&, &b = b] { m = b.receive({.timeout = forever}); });
    sender.join();
    INFO((e ? e->what() : "no timeout"));
    CHECK_FALSE(e);
    REQUIRE(m);
    CHECK(m->as<int>() == 7);
    CHECK(std::chrono::steady_clock::now() - start >= 90ms);
  }
  SECTION("send") {
    auto [a, b] = cudrv::unix_socket::pair();
    const auto data = pattern(std::size_t{8} << 20, 12);  // more than the socket buffer holds
    std::optional<cudrv::received_message> m;
    std::thread reader([&, &a = a] {
      std::this_thread::sleep_for(100ms);
      try {
        m = a.receive({.timeout = 20s});
      } catch (const cudrv::error&) {
      }
    });
    auto e = catch_as<cudrv::timeout_error>([&, &b = b] { b.send(data, {}, forever); });
    if (e) {
      b.shutdown();  // the reader is left with half a message: end it
    }
    reader.join();
    INFO((e ? e->what() : "no timeout"));
    CHECK_FALSE(e);
    REQUIRE(m);
    CHECK(m->payload == data);
  }
  SECTION("accept and connect") {
    const socket_dir dir;
    const std::string path = dir.path();
    std::optional<cudrv::unix_socket> client;
    std::thread late_listener([&] {
      std::this_thread::sleep_for(100ms);
      try {
        cudrv::unix_listener listener(path);
        cudrv::unix_socket s = listener.accept(5s);
        (void)s.receive({.timeout = 5s});
      } catch (const cudrv::error&) {
      }
    });
    auto c = catch_as<cudrv::timeout_error>([&] { client = cudrv::unix_socket::connect(path, forever); });
    if (client) {
      client->send_value(1);
    }
    late_listener.join();
    INFO((c ? c->what() : "no timeout"));
    CHECK_FALSE(c);
    CHECK(client.has_value());

    cudrv::unix_listener listener(path);
    std::thread late_client([&] {
      std::this_thread::sleep_for(100ms);
      try {
        (void)cudrv::unix_socket::connect(path, 5s);
      } catch (const cudrv::error&) {
      }
    });
    std::optional<cudrv::unix_socket> accepted;
    auto a = catch_as<cudrv::timeout_error>([&] { accepted = listener.accept(forever); });
    late_client.join();
    INFO((a ? a->what() : "no timeout"));
    CHECK_FALSE(a);
    CHECK(accepted.has_value());
  }
  SECTION("a negative timeout expires at once") {
    auto [a, b] = cudrv::unix_socket::pair();
    const socket_dir dir;
    const std::string path = dir.path();
    for (const auto timeout : {std::chrono::milliseconds(-1), std::chrono::milliseconds::min()}) {
      INFO(timeout.count() << " ms");
      const auto start = std::chrono::steady_clock::now();
      CHECK(catch_as<cudrv::timeout_error>([&, &b = b] { (void)b.receive({.timeout = timeout}); }));
      CHECK(catch_as<cudrv::timeout_error>([&] { (void)cudrv::unix_socket::connect(path, timeout); }));
      {
        cudrv::unix_listener listener(path);
        CHECK(catch_as<cudrv::timeout_error>([&] { (void)listener.accept(timeout); }));
      }
      CHECK(std::chrono::steady_clock::now() - start < 1s);
    }
    // A send that finds the buffer full gives up at once too.
    const auto big = pattern(std::size_t{8} << 20, 13);
    const auto start = std::chrono::steady_clock::now();
    CHECK(catch_as<cudrv::timeout_error>([&, &a = a] { a.send(big, {}, -5ms); }));
    CHECK(std::chrono::steady_clock::now() - start < 1s);
  }
}
