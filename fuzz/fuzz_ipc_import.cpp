// libFuzzer target: the IPC import path as a hostile peer drives it, against the fake driver
// (tests/fake_driver/fake_cuda.cpp, loaded through CUDRV_LIBCUDA). A producer made once per process holds a
// shareable pool with allocations and cuMemAlloc buffers, and their real exports; each input describes
// what the "peer" sends instead: export bytes kept, overwritten or flipped, any claimed byte count, a
// message of the wrong size, a pool descriptor of made-up content. The bytes travel as a cudrv::unix_socket
// message and are read back with received_message::as, as a consumer would.
//
// Input: byte 0 the operation (0 pool pointer, 1 legacy handle, 2 pool descriptor then pointer), byte 1
// which real export to start from, byte 2 the element type, byte 3 how the export bytes are changed (kept,
// overwritten, XORed with the input), byte 4 how the claimed size is made (the real one plus a small delta,
// or 8 raw bytes), byte 5 whether the message has the wrong size; the rest feeds the changes.
// Invariants (abort otherwise): every failure is a cudrv::error; an import that succeeds reports at most
// the bytes the driver mapped at its address, and copies of its whole size in and out stay inside them
// (ASan watches the fake's memory); after each input the fake holds as many allocations as before.
// CUDRV_FUZZ_VERBOSE=1 prints, at exit, how many imports were accepted and how many inputs refused.
#include <sys/mman.h>
#include <unistd.h>

#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <cudrv/cudrv.hpp>
#include <cudrv/unix_socket.hpp>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_ipc_import: %s\n", what);
  std::abort();
}

// The fake's hooks (the library cudrv loaded).
struct fake_hooks {
  long long (*live)() = nullptr;
  std::size_t (*extent)(CUdeviceptr) = nullptr;
};

fake_hooks load_hooks() {
  const char* path = std::getenv("CUDRV_LIBCUDA");
  void* lib = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (lib == nullptr) {
    fail("the fake driver is not loaded (CUDRV_LIBCUDA)");
  }
  fake_hooks h;
  h.live = reinterpret_cast<long long (*)()>(dlsym(lib, "fake_cuda_live_allocations"));
  h.extent = reinterpret_cast<std::size_t (*)(CUdeviceptr)>(dlsym(lib, "fake_cuda_allocation_size"));
  dlclose(lib);
  if (h.live == nullptr || h.extent == nullptr) {
    fail("the fake driver lacks fake_cuda_live_allocations or fake_cuda_allocation_size");
  }
  return h;
}

// What the producer made, once per process.
struct producer {
  cudrv::device dev{1};  // device 0 of the fake is held by "another process"
  cudrv::stream s{dev};
  cudrv::memory_pool pool = cudrv::make_shareable_memory_pool(dev, cudrv::shareable_handle_type::posix_file_descriptor);
  std::vector<cudrv::device_buffer<float>> pooled;
  std::vector<cudrv::device_buffer<float>> plain;
  std::vector<cudrv::pointer_export> exports;
  std::vector<cudrv::ipc_memory_handle> handles;
  cudrv::imported_memory_pool imported{dev, cudrv::export_pool_descriptor(pool)};
  std::pair<cudrv::unix_socket, cudrv::unix_socket> channel = cudrv::unix_socket::pair();
  fake_hooks hooks = load_hooks();

  producer() {
    for (std::size_t n : {1u, 3u, 1000u, 4096u}) {
      pooled.emplace_back(pool, s, n);
      exports.push_back(cudrv::export_pointer(pooled.back()));
      plain.emplace_back(dev, n);
      handles.push_back(cudrv::ipc_handle(plain.back()));
    }
    s.synchronize();
  }
};

producer& the_producer() {
  static producer* p = new producer;  // never destroyed: libFuzzer exits without unwinding
  return *p;
}

struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v = v << 8 | byte();
    }
    return v;
  }
};

template <std::size_t N>
struct bytes_of {
  unsigned char v[N];
};

// Changes the opaque bytes of an export as the input says: kept, overwritten, or XORed.
void mutate(unsigned char* bytes, std::size_t n, std::uint8_t how, reader& r) {
  for (std::size_t i = 0; i < n && how % 3 != 0; ++i) {
    const std::uint8_t b = r.byte();
    bytes[i] = how % 3 == 1 ? b : static_cast<unsigned char>(bytes[i] ^ b);
  }
}

std::uint64_t claimed_size(std::uint64_t real, std::uint8_t how, reader& r) {
  if (how % 2 == 0) {
    const auto delta = static_cast<std::int8_t>(r.byte());
    return real + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta));
  }
  return r.u64();
}

// Sends value over the channel (or a message one byte short, when asked) and reads it back as T.
template <class T>
T through_socket(const T& value, bool wrong_size) {
  producer& p = the_producer();
  if (wrong_size) {
    p.channel.first.send(std::span<const std::byte>(reinterpret_cast<const std::byte*>(&value), sizeof(T) - 1));
  } else {
    p.channel.first.send_value(value);
  }
  const cudrv::received_message m =
      p.channel.second.receive({.timeout = std::chrono::seconds(5), .max_payload = 4096, .max_descriptors = 1});
  return m.as<T>();  // throws system_error EPROTO for the wrong size
}

// Checks an import that succeeded: its size stays within the mapping, and copies of the whole size in and
// out stay inside it.
std::size_t accepted = 0;  // imports that passed every check (printed at exit with CUDRV_FUZZ_VERBOSE=1)
std::size_t refused = 0;   // inputs that ended in a typed error

// b is written (a copy into the whole import): a const buffer gives only read-only views.
template <class B>
void check_import(B&& b) {
  producer& p = the_producer();
  ++accepted;
  if (!b) {
    fail("an import succeeded but holds nothing");
  }
  const std::size_t mapped = p.hooks.extent(b.data());
  if (b.size_bytes() > mapped) {
    fail("an import reports more bytes than the driver mapped");
  }
  using T = typename std::remove_reference_t<B>::value_type;
  std::vector<T> host(b.size());
  std::memset(static_cast<void*>(host.data()), 0x5a, host.size() * sizeof(T));
  cudrv::copy(b, host);
  cudrv::copy(host, b);
}

template <class T>
void import_pool_pointer(reader& r, std::uint8_t which, std::uint8_t how, std::uint8_t size_how, bool wrong,
                         const cudrv::imported_memory_pool& pool) {
  producer& p = the_producer();
  cudrv::pointer_export e = p.exports[which % p.exports.size()];
  mutate(reinterpret_cast<unsigned char*>(&e.data), sizeof(e.data), how, r);
  e.bytes = claimed_size(e.bytes, size_how, r);
  const cudrv::pointer_export received = through_socket(e, wrong);
  check_import(pool.import_pointer<T>(received));
}

template <class T>
void open_legacy(reader& r, std::uint8_t which, std::uint8_t how, std::uint8_t size_how, bool wrong) {
  producer& p = the_producer();
  cudrv::ipc_memory_handle h = p.handles[which % p.handles.size()];
  mutate(reinterpret_cast<unsigned char*>(&h.handle), sizeof(h.handle), how, r);
  h.bytes = claimed_size(h.bytes, size_how, r);
  const cudrv::ipc_memory_handle received = through_socket(h, wrong);
  check_import(cudrv::ipc_mapped_buffer<T>(p.dev, received));
}

// A descriptor whose content the peer chose, imported as a pool, then one pointer imported from it.
template <class T>
void import_from_descriptor(reader& r, std::uint8_t which, std::uint8_t how, std::uint8_t size_how, bool wrong) {
  producer& p = the_producer();
  cudrv::file_descriptor fd = cudrv::file_descriptor::from_native_handle(::memfd_create("fuzz-pool", MFD_CLOEXEC));
  if (!fd) {
    return;
  }
  const std::uint8_t length = r.byte() % 16;
  unsigned char content[16];
  for (std::uint8_t i = 0; i < length; ++i) {
    content[i] = r.byte();
  }
  if (::write(fd.native_handle(), content, length) != length) {
    return;
  }
  const cudrv::imported_memory_pool pool(p.dev, fd);
  import_pool_pointer<T>(r, which, how, size_how, wrong, pool);
}

template <class T>
void run(std::uint8_t op, reader& r, std::uint8_t which, std::uint8_t how, std::uint8_t size_how, bool wrong) {
  switch (op % 3) {
    case 0: import_pool_pointer<T>(r, which, how, size_how, wrong, the_producer().imported); break;
    case 1: open_legacy<T>(r, which, how, size_how, wrong); break;
    default: import_from_descriptor<T>(r, which, how, size_how, wrong); break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
#ifdef CUDRV_FUZZ_FAKE_DRIVER
  ::setenv("CUDRV_LIBCUDA", CUDRV_FUZZ_FAKE_DRIVER, 0);
#endif
  cudrv::set_destruction_error_handler([](const cudrv::error& e) noexcept {
    std::fprintf(stderr, "fuzz_ipc_import: a destructor failed: %s\n", e.what());
    std::abort();
  });
  (void)the_producer();
  if (const char* v = std::getenv("CUDRV_FUZZ_VERBOSE"); v != nullptr && *v == '1') {
    std::atexit(
        [] { std::fprintf(stderr, "fuzz_ipc_import: %zu imports accepted, %zu inputs refused\n", accepted, refused); });
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  producer& p = the_producer();
  const long long live = p.hooks.live();
  reader r{data, size};
  const std::uint8_t op = r.byte();
  const std::uint8_t which = r.byte();
  const std::uint8_t element = r.byte();
  const std::uint8_t how = r.byte();
  const std::uint8_t size_how = r.byte();
  const bool wrong = r.byte() == 0xff;
  try {
    switch (element % 5) {
      case 0: run<unsigned char>(op, r, which, how, size_how, wrong); break;
      case 1: run<float>(op, r, which, how, size_how, wrong); break;
      case 2: run<double>(op, r, which, how, size_how, wrong); break;
      case 3: run<bytes_of<3>>(op, r, which, how, size_how, wrong); break;
      default: run<bytes_of<12>>(op, r, which, how, size_how, wrong); break;
    }
  } catch (const cudrv::error&) {
    ++refused;  // a typed refusal: what a hostile peer should get
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_ipc_import: not a cudrv::error: %s\n", e.what());
    std::abort();
  }
  if (p.hooks.live() != live) {
    fail("the fake holds a different number of allocations after the input: an import leaked or freed too much");
  }
  return 0;
}
