// CPU tier: <cudrv/dlpack.hpp> on plain memory. DLPack structs are metadata, so export, import and
// every refusal are checked on host arrays (kDLCPU) and on hand-made tensors with fake device
// addresses (never dereferenced); the deleters count their calls. Compiled only when CMake found
// DLPack's header (CUDRV_TEST_DLPACK).
#include <catch2/catch.hpp>

#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/dlpack.hpp>

#include <array>
#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.hpp"

using cudrv::test::contains;

namespace {

// The structural checks alone: the addresses here are made up, and where a driver is loaded (a GPU machine
// running the CPU tier) the memory check (dlpack_requirements::check_memory) would refuse them.
cudrv::dlpack_requirements unchecked(cudrv::dlpack_requirements r = {}) {
  r.check_memory = false;
  return r;
}

// An owner whose destruction is counted: what an exported tensor keeps alive.
struct counted_owner {
  std::shared_ptr<int> owner;
  std::shared_ptr<int> deletions = std::make_shared<int>(0);
  counted_owner() {
    auto d = deletions;
    owner = std::shared_ptr<int>(new int(0), [d](int* p) {
      ++*d;
      delete p;
    });
  }
  [[nodiscard]] std::shared_ptr<const void> take() { return std::exchange(owner, nullptr); }
  [[nodiscard]] int count() const { return *deletions; }
};

// Random element values for each supported type, from their bytes (every type is trivially copyable;
// bool and the floating types get valid values).
// (An array, not a vector: std::vector<bool> has no data().)
template <class T>
std::unique_ptr<T[]> random_elements(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::unique_ptr<T[]> out(new T[n]);
  for (std::size_t i = 0; i < n; ++i) {
    T& v = out[i];
    if constexpr (std::is_same_v<T, bool>) {
      v = (gen() & 1) != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(static_cast<double>(gen() % 100000) / 7.0);
    } else if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
      v = T(static_cast<float>(gen() % 1000), static_cast<float>(gen() % 1000));
    } else {
      auto bits = gen();
      std::memcpy(static_cast<void*>(&v), &bits, sizeof(T));
    }
  }
  return out;
}

template <class T>
bool same_bytes(const T* a, const T* b, std::size_t n) {
  return std::memcmp(a, b, n * sizeof(T)) == 0;
}

// Exports a host array of T (2 x 3 x 5) as M, imports it back, checks the metadata and the data.
template <class M, class T>
void round_trip(DLDataType expected) {
  INFO("element type " << cudrv::dlpack_dtype_name(expected));
  constexpr std::size_t n = 30;
  auto host = random_elements<T>(n, 0xD1A9ACull + sizeof(T));
  const std::int64_t shape[] = {2, 3, 5};
  counted_owner owner;
  cudrv::strided_view<T> view(host.get(), shape, {}, {kDLCPU, 0});
  cudrv::dlpack_ptr<M> exported = cudrv::to_dlpack<M>(view, owner.take());
  REQUIRE(exported);
  const DLTensor& t = exported->dl_tensor;
  CHECK(t.dtype.code == expected.code);
  CHECK(t.dtype.bits == expected.bits);
  CHECK(t.dtype.lanes == expected.lanes);
  CHECK(t.ndim == 3);
  CHECK(t.data == host.get());
  CHECK(t.byte_offset == 0);
  CHECK(t.device.device_type == kDLCPU);
  REQUIRE(t.strides != nullptr);  // always written (DLPack 1.2 forbids null strides)
  CHECK(std::vector<std::int64_t>(t.shape, t.shape + 3) == std::vector<std::int64_t>{2, 3, 5});
  CHECK(std::vector<std::int64_t>(t.strides, t.strides + 3) == std::vector<std::int64_t>{15, 5, 1});
  CHECK(t.shape != shape);  // copied into the manager context
  CHECK(owner.count() == 0);
  {
    auto imported = cudrv::from_dlpack<T>(std::move(exported), unchecked(cudrv::dlpack_requirements::host(true)));
    CHECK_FALSE(exported);
    const auto& v = imported.view();
    CHECK(v.get() == host.get());
    CHECK(v.ndim() == 3);
    CHECK(v.size() == n);
    CHECK(v.is_contiguous());
    CHECK(same_bytes(v.get(), host.get(), n));
    CHECK(owner.count() == 0);
  }
  CHECK(owner.count() == 1);  // the deleter ran once, and released the owner
}

template <class M>
void round_trip_all_types() {
  round_trip<M, std::int8_t>({kDLInt, 8, 1});
  round_trip<M, std::int16_t>({kDLInt, 16, 1});
  round_trip<M, std::int32_t>({kDLInt, 32, 1});
  round_trip<M, std::int64_t>({kDLInt, 64, 1});
  round_trip<M, std::uint8_t>({kDLUInt, 8, 1});
  round_trip<M, std::uint16_t>({kDLUInt, 16, 1});
  round_trip<M, std::uint32_t>({kDLUInt, 32, 1});
  round_trip<M, std::uint64_t>({kDLUInt, 64, 1});
  round_trip<M, float>({kDLFloat, 32, 1});
  round_trip<M, double>({kDLFloat, 64, 1});
  round_trip<M, __half>({kDLFloat, 16, 1});
  round_trip<M, __nv_bfloat16>({kDLBfloat, 16, 1});
  round_trip<M, std::complex<float>>({kDLComplex, 64, 1});
  round_trip<M, std::complex<double>>({kDLComplex, 128, 1});
#if CUDRV_DLPACK_VERSION >= 8
  round_trip<M, bool>({kDLBool, 8, 1});
#endif
#if CUDRV_DLPACK_VERSION >= 101
  round_trip<M, __nv_fp8_e4m3>({kDLFloat8_e4m3fn, 8, 1});
  round_trip<M, __nv_fp8_e5m2>({kDLFloat8_e5m2, 8, 1});
#endif
}

// A hand-made managed tensor (as another framework would produce), with a counted deleter.
template <class M>
struct handmade {
  static inline int deleted = 0;
  M managed{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;

  handmade(DLDataType dtype, std::vector<std::int64_t> extents, std::uintptr_t data, DLDevice device = {kDLCUDA, 0})
      : shape(std::move(extents)) {
#if CUDRV_DLPACK_HAS_VERSIONED
    if constexpr (std::is_same_v<M, DLManagedTensorVersioned>) {
      managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    }
#endif
    managed.dl_tensor.data = reinterpret_cast<void*>(data);
    managed.dl_tensor.device = device;
    managed.dl_tensor.ndim = static_cast<std::int32_t>(shape.size());
    managed.dl_tensor.dtype = dtype;
    managed.dl_tensor.shape = shape.data();
    managed.manager_ctx = this;
    managed.deleter = [](M* self) {
      ++deleted;
      delete static_cast<handmade*>(self->manager_ctx);
    };
  }
  void set_strides(std::vector<std::int64_t> s) {
    strides = std::move(s);
    managed.dl_tensor.strides = strides.data();
  }
  static handmade* make(DLDataType dtype, std::vector<std::int64_t> extents, std::uintptr_t data,
                        DLDevice device = {kDLCUDA, 0}) {
    return new handmade(dtype, std::move(extents), data, device);
  }
};

constexpr std::uintptr_t fake_device_address = 0x7f0000000000ull;  // never dereferenced

// Imports @p h as T with @p req and returns the message of the invalid_argument_error it must throw;
// checks that the deleter ran exactly once (the raw-pointer import owns the tensor on every path).
template <class T, class M>
std::string refusal(handmade<M>* h, cudrv::dlpack_requirements req = {}) {
  const int before = handmade<M>::deleted;
  std::string message;
  try {
    auto t = cudrv::from_dlpack<T>(&h->managed, unchecked(req));
    FAIL("the tensor was accepted");
  } catch (const cudrv::invalid_argument_error& e) {
    message = e.what();
  }
  CHECK(handmade<M>::deleted == before + 1);
  return message;
}

template <class M>
void refusals() {
  using H = handmade<M>;
  const DLDataType f32{kDLFloat, 32, 1};
  SECTION("device type") {
    auto msg = refusal<float>(H::make(f32, {4}, fake_device_address, {kDLCPU, 0}));
    CHECK(contains(msg, "kDLCPU"));
    CHECK(contains(msg, "accepted here: kDLCUDA"));
    msg = refusal<float>(H::make(f32, {4}, fake_device_address, {static_cast<DLDeviceType>(4), 0}),
                         unchecked(cudrv::dlpack_requirements::host()));
    CHECK(contains(msg, "another DLPack device type (device type 4)"));
    CHECK(contains(msg, "kDLCPU, kDLCUDAHost, kDLCUDAManaged"));
  }
  SECTION("device ordinal") {
    auto msg = refusal<float>(H::make(f32, {4}, fake_device_address, {kDLCUDA, 1}),
                              unchecked(cudrv::dlpack_requirements::device(0)));
    CHECK(contains(msg, "CUDA device 1, not on device 0"));
    // Managed memory carries device id 0 and is not checked against the ordinal.
    auto ok = cudrv::from_dlpack<float>(&H::make(f32, {4}, fake_device_address, {kDLCUDAManaged, 0})->managed,
                                        unchecked(cudrv::dlpack_requirements::device(3)));
    CHECK(ok.view().device().device_type == kDLCUDAManaged);
  }
  SECTION("data type code, bits and lanes") {
    auto msg = refusal<float>(H::make({kDLInt, 32, 1}, {4}, fake_device_address));
    CHECK(contains(msg, "data type is int32"));
    CHECK(contains(msg, "element type is float32"));
    msg = refusal<float>(H::make({kDLFloat, 64, 1}, {4}, fake_device_address));
    CHECK(contains(msg, "float64 (code 2, 64 bits, 1 lanes)"));
    msg = refusal<float>(H::make({kDLFloat, 32, 4}, {4}, fake_device_address));
    CHECK(contains(msg, "float32x4"));
    msg = refusal<__half>(H::make({kDLBfloat, 16, 1}, {4}, fake_device_address));
    CHECK(contains(msg, "bfloat16"));
    CHECK(contains(msg, "element type is float16"));
    msg = refusal<std::uint8_t>(H::make({kDLInt, 8, 1}, {4}, fake_device_address));
    CHECK(contains(msg, "int8"));
    CHECK(contains(msg, "uint8"));
  }
  SECTION("alignment of data + byte_offset") {
    auto msg = refusal<float>(H::make(f32, {4}, fake_device_address + 2));
    CHECK(contains(msg, "not aligned to the 4 bytes"));
    auto* h = H::make(f32, {4}, fake_device_address);
    h->managed.dl_tensor.byte_offset = 6;
    msg = refusal<float>(h);
    CHECK(contains(msg, "byte offset 6"));
    CHECK(contains(msg, "not aligned"));
    // An aligned byte offset moves the view's address.
    auto* g = H::make(f32, {4}, fake_device_address);
    g->managed.dl_tensor.byte_offset = 256;
    auto t = cudrv::from_dlpack<float>(&g->managed, unchecked());
    CHECK(t.view().address() == fake_device_address + 256);
  }
  SECTION("negative strides") {
    auto* h = H::make(f32, {4, 4}, fake_device_address + 64);
    h->set_strides({-4, 1});
    auto msg = refusal<float>(h);
    CHECK(contains(msg, "negative stride -4"));
  }
  SECTION("negative extents, ndim, null shape") {
    auto msg = refusal<float>(H::make(f32, {4, -1}, fake_device_address));
    CHECK(contains(msg, "negative extent -1"));
    auto* h = H::make(f32, {4}, fake_device_address);
    h->managed.dl_tensor.ndim = -2;
    msg = refusal<float>(h);
    CHECK(contains(msg, "negative number of dimensions"));
    h = H::make(f32, {4}, fake_device_address);
    h->managed.dl_tensor.shape = nullptr;
    msg = refusal<float>(h);
    CHECK(contains(msg, "null shape"));
  }
  SECTION("shape and stride overflow") {
    auto msg = refusal<float>(H::make(f32, {std::int64_t{1} << 40, std::int64_t{1} << 30}, fake_device_address));
    CHECK(contains(msg, "shape overflows"));
    auto* h = H::make(f32, {1 << 20, 2}, fake_device_address);
    h->set_strides({std::int64_t{1} << 62, 1});
    msg = refusal<float>(h);
    CHECK(contains(msg, "strides overflow"));
    h = H::make(f32, {4}, fake_device_address);
    h->managed.dl_tensor.byte_offset = ~std::uint64_t{0} - 8;
    msg = refusal<float>(h);
    CHECK(contains(msg, "overflow the address space"));
  }
  SECTION("null data with elements") {
    auto msg = refusal<float>(H::make(f32, {3}, 0));
    CHECK(contains(msg, "null data pointer but 3 elements"));
    auto empty = cudrv::from_dlpack<float>(&H::make(f32, {0, 5}, 0)->managed, unchecked());  // zero elements: fine
    CHECK(empty.size() == 0);
  }
  SECTION("non-contiguous strides: a strided view, or refused where contiguity is required") {
    auto* h = H::make(f32, {3, 4}, fake_device_address);
    h->set_strides({1, 3});  // column-major
    auto msg = refusal<float>(h, unchecked(cudrv::dlpack_requirements::device(0, true)));
    CHECK(contains(msg, "not compact row-major"));
    h = H::make(f32, {3, 4}, fake_device_address);
    h->set_strides({1, 3});
    auto t = cudrv::from_dlpack<float>(&h->managed, unchecked(cudrv::dlpack_requirements::device(0)));
    CHECK_FALSE(t.view().is_contiguous());
    CHECK(t.view().stride(0) == 1);
    CHECK(t.view().stride(1) == 3);
    CHECK_THROWS_AS(t.view().span(), cudrv::invalid_argument_error);
    // Extent-1 dimensions and broadcast-free compact strides count as contiguous.
    h = H::make(f32, {3, 1, 4}, fake_device_address);
    h->set_strides({4, 99, 1});
    auto c = cudrv::from_dlpack<float>(&h->managed, unchecked(cudrv::dlpack_requirements::device(0, true)));
    CHECK(c.view().span().size() == 12);
  }
  SECTION("null strides mean compact row-major") {
    auto t = cudrv::from_dlpack<const float>(&H::make(f32, {2, 3, 4}, fake_device_address)->managed,
                                             unchecked(cudrv::dlpack_requirements::device(0, true)));
    CHECK(t.view().strides().empty());
    CHECK(t.view().stride(0) == 12);
    CHECK(t.view().stride(1) == 4);
    CHECK(t.view().stride(2) == 1);
    CHECK(t.view().span().data() == fake_device_address);
    CHECK(t.view().span().size() == 24);
  }
  SECTION("a null pointer") {
    CHECK_THROWS_WITH(cudrv::from_dlpack<float>(static_cast<M*>(nullptr)), Catch::Contains("pointer is null"));
  }
}

}  // namespace

TEST_CASE("dlpack: element types map to DLPack data types at compile time", "[dlpack]") {
  STATIC_REQUIRE(cudrv::dlpack_dtype<float>().code == kDLFloat);
  STATIC_REQUIRE(cudrv::dlpack_dtype<const double>().bits == 64);
  STATIC_REQUIRE(cudrv::dlpack_dtype<__nv_bfloat16>().code == kDLBfloat);
  STATIC_REQUIRE(cudrv::dlpack_dtype<std::uint16_t>().code == kDLUInt);
  STATIC_REQUIRE(cudrv::is_dlpack_element_v<__half>);
  STATIC_REQUIRE_FALSE(cudrv::is_dlpack_element_v<long double>);
  STATIC_REQUIRE_FALSE(cudrv::is_dlpack_element_v<std::array<float, 2>>);
  CHECK(cudrv::dlpack_dtype_name({kDLFloat, 16, 1}) == "float16");
  CHECK(cudrv::dlpack_dtype_name({kDLUInt, 64, 1}) == "uint64");
  CHECK(cudrv::dlpack_dtype_name({kDLComplex, 64, 1}) == "complex64");
  CHECK(cudrv::dlpack_dtype_name({kDLInt, 8, 2}) == "int8x2");
  CHECK(cudrv::dlpack_dtype_name({42, 8, 1}) == "code 42 8");
#if CUDRV_DLPACK_VERSION >= 101
  CHECK(cudrv::dlpack_dtype_name({kDLFloat8_e4m3fn, 8, 1}) == "float8_e4m3fn");
#endif
}

TEST_CASE("dlpack: legacy DLManagedTensor round trip for every element type", "[dlpack]") {
  round_trip_all_types<DLManagedTensor>();
}

#if CUDRV_DLPACK_HAS_VERSIONED
TEST_CASE("dlpack: DLManagedTensorVersioned round trip for every element type", "[dlpack]") {
  round_trip_all_types<DLManagedTensorVersioned>();
}
#endif

TEST_CASE("dlpack: strides and shape survive the round trip", "[dlpack]") {
  // A 4 x 3 column-major view of 12 host floats, and a 2 x 3 window of every other row of a 4 x 3 array.
  std::vector<float> host(12);
  for (std::size_t i = 0; i < host.size(); ++i) {
    host[i] = static_cast<float>(i) * 0.5f;
  }
  const std::int64_t shape[] = {4, 3};
  const std::int64_t column_major[] = {1, 4};
  counted_owner owner;
  cudrv::strided_view<float> cm(host.data(), shape, column_major, {kDLCPU, 0});
  CHECK_FALSE(cm.is_contiguous());
  auto t = cudrv::from_dlpack<float>(cudrv::to_dlpack(cm, owner.take()), unchecked(cudrv::dlpack_requirements::host()));
  const auto& v = t.view();
  REQUIRE(v.ndim() == 2);
  CHECK(v.extent(0) == 4);
  CHECK(v.extent(1) == 3);
  CHECK(v.stride(0) == 1);
  CHECK(v.stride(1) == 4);
  for (std::int64_t i = 0; i < 4; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) {
      CHECK(v.get()[i * v.stride(0) + j * v.stride(1)] == host[static_cast<std::size_t>(i + 4 * j)]);
    }
  }
  CHECK_THROWS_WITH(cudrv::to_dlpack(cudrv::strided_view<float>(host.data(), shape,
                                                                std::span<const std::int64_t>(column_major, 1),
                                                                {kDLCPU, 0}),
                                     nullptr),
                    Catch::Contains("1 strides for 2 dimensions"));
  // A zero-dimensional tensor (a scalar): no shape, no strides, one element.
  float scalar = 3.5f;
  auto s =
      cudrv::from_dlpack<float>(cudrv::to_dlpack(cudrv::strided_view<float>(&scalar, {}, {}, {kDLCPU, 0}), nullptr),
                                unchecked(cudrv::dlpack_requirements::host()));
  CHECK(s.view().ndim() == 0);
  CHECK(s.size() == 1);
  CHECK(*s.get() == 3.5f);
}

TEST_CASE("dlpack: the deleter runs exactly once on every path", "[dlpack]") {
  std::vector<int> host(8, 7);
  const std::int64_t shape[] = {8};
  auto export_counted = [&](counted_owner& owner) {
    return cudrv::to_dlpack<DLManagedTensor>(cudrv::strided_view<int>(host.data(), shape, {}, {kDLCPU, 0}),
                                             owner.take());
  };
  SECTION("an exported tensor nobody imports") {
    counted_owner owner;
    { auto p = export_counted(owner); }
    CHECK(owner.count() == 1);
  }
  SECTION("moved-from wrappers call nothing; move assignment deletes the overwritten tensor") {
    counted_owner a, b;
    auto ta = cudrv::from_dlpack<int>(export_counted(a), unchecked(cudrv::dlpack_requirements::host()));
    auto tb = cudrv::from_dlpack<int>(export_counted(b), unchecked(cudrv::dlpack_requirements::host()));
    auto moved = std::move(ta);
    CHECK_FALSE(ta);
    CHECK(ta.view().get() == nullptr);
    CHECK(moved.view().get() == host.data());
    CHECK(a.count() == 0);
    moved = std::move(tb);
    CHECK(a.count() == 1);
    CHECK(b.count() == 0);
    { auto sink = std::move(moved); }
    CHECK(b.count() == 1);
    CHECK(a.count() == 1);
  }
  SECTION("release hands the tensor on; reset deletes now") {
    counted_owner a, b;
    auto ta = cudrv::from_dlpack<int>(export_counted(a), unchecked(cudrv::dlpack_requirements::host()));
    DLManagedTensor* raw = ta.release();
    CHECK_FALSE(ta);
    CHECK(a.count() == 0);
    raw->deleter(raw);
    CHECK(a.count() == 1);
    auto tb = cudrv::from_dlpack<int>(export_counted(b), unchecked(cudrv::dlpack_requirements::host()));
    tb.reset();
    CHECK(b.count() == 1);
    tb.reset();
    CHECK(b.count() == 1);
  }
  SECTION("a refused import: the raw-pointer form deletes, the dlpack_ptr form keeps it for another try") {
    counted_owner a, b;
    auto p = export_counted(a);
    CHECK_THROWS_AS(cudrv::from_dlpack<float>(std::move(p), unchecked(cudrv::dlpack_requirements::host())),
                    cudrv::invalid_argument_error);
    REQUIRE(p);
    CHECK(a.count() == 0);
    auto t = cudrv::from_dlpack<int>(std::move(p), unchecked(cudrv::dlpack_requirements::host()));
    CHECK_FALSE(p);
    CHECK(t.view().get() == host.data());
    t.reset();
    CHECK(a.count() == 1);
    DLManagedTensor* raw = export_counted(b).release();
    CHECK_THROWS_AS(cudrv::from_dlpack<float>(raw, unchecked(cudrv::dlpack_requirements::host())),
                    cudrv::invalid_argument_error);
    CHECK(b.count() == 1);
  }
  SECTION("a refused export builds nothing and lets its owner go") {
    counted_owner a;
    const std::int64_t huge[] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
    CHECK_THROWS_WITH(cudrv::to_dlpack(cudrv::strided_view<int>(host.data(), huge, {}, {kDLCPU, 0}), a.take()),
                      Catch::Contains("shape overflows"));
    CHECK(a.count() == 1);
    const std::int64_t four[] = {4};
    CHECK_THROWS_WITH(cudrv::to_dlpack(cudrv::strided_view<int>(std::uintptr_t{0}, four, {}, {kDLCUDA, 0}), nullptr),
                      Catch::Contains("null address"));
    const std::int64_t bad[] = {-1};
    CHECK_THROWS_WITH(cudrv::strided_view<int>(host.data(), bad, {}, {kDLCPU, 0}), Catch::Contains("negative extent"));
  }
}

TEST_CASE("dlpack: legacy struct refusals, each with its message and one deleter call", "[dlpack]") {
  refusals<DLManagedTensor>();
}

#if CUDRV_DLPACK_HAS_VERSIONED
TEST_CASE("dlpack: versioned struct refusals, each with its message and one deleter call", "[dlpack]") {
  refusals<DLManagedTensorVersioned>();
}

TEST_CASE("dlpack: a versioned tensor of another major version is refused and deleted unread", "[dlpack]") {
  using H = handmade<DLManagedTensorVersioned>;
  auto* h = H::make({kDLFloat, 32, 1}, {4}, fake_device_address);
  h->managed.version = {DLPACK_MAJOR_VERSION + 1, 0};
  h->managed.dl_tensor.ndim = -7;  // would be refused too, but the version is checked first, alone
  auto msg = refusal<float>(h);
  CHECK(contains(msg, "DLPack version is " + std::to_string(DLPACK_MAJOR_VERSION + 1) + ".0"));
  CHECK(contains(msg, "reads major version " + std::to_string(DLPACK_MAJOR_VERSION) + " only"));
}

TEST_CASE("dlpack: the read-only and copied flags", "[dlpack]") {
  std::vector<float> host(6, 1.0f);
  const std::int64_t shape[] = {6};
  SECTION("a view of const elements exports read-only, and imports only as const") {
    counted_owner owner;
    cudrv::strided_view<const float> cv(host.data(), shape, {}, {kDLCPU, 0});
    auto p = cudrv::to_dlpack(cv, owner.take());
    CHECK((p->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK((p->flags & DLPACK_FLAG_BITMASK_IS_COPIED) == 0);
    CHECK_THROWS_WITH(cudrv::from_dlpack<float>(std::move(p), unchecked(cudrv::dlpack_requirements::host())),
                      Catch::Contains("read-only") && Catch::Contains("const elements"));
    auto t = cudrv::from_dlpack<const float>(std::move(p), unchecked(cudrv::dlpack_requirements::host()));
    CHECK(t.read_only());
    CHECK_FALSE(t.copied());
  }
  SECTION("options set the flags on a mutable view") {
    cudrv::strided_view<float> v(host.data(), shape, {}, {kDLCPU, 0});
    auto p = cudrv::to_dlpack(v, nullptr, {.read_only = true, .copied = true});
    CHECK((p->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    CHECK((p->flags & DLPACK_FLAG_BITMASK_IS_COPIED) != 0);
    CHECK(p->version.major == DLPACK_MAJOR_VERSION);
    CHECK(p->version.minor == DLPACK_MINOR_VERSION);
    auto t = cudrv::from_dlpack<const float>(std::move(p), unchecked(cudrv::dlpack_requirements::host()));
    CHECK(t.copied());
    auto q = cudrv::to_dlpack(v, nullptr);
    CHECK(q->flags == 0);
    auto w = cudrv::from_dlpack<float>(std::move(q), unchecked(cudrv::dlpack_requirements::host()));  // writable
    w.get()[0] = 2.0f;
    CHECK(host[0] == 2.0f);
  }
  SECTION("the legacy struct cannot carry flags") {
    cudrv::strided_view<float> v(host.data(), shape, {}, {kDLCPU, 0});
    CHECK_THROWS_WITH(cudrv::to_dlpack<DLManagedTensor>(v, nullptr, {.read_only = true}),
                      Catch::Contains("legacy DLManagedTensor has no flags"));
    auto legacy = cudrv::from_dlpack<float>(cudrv::to_dlpack<DLManagedTensor>(v, nullptr),
                                            unchecked(cudrv::dlpack_requirements::host()));
    CHECK_FALSE(legacy.read_only());
  }
}
#endif

TEST_CASE("dlpack: the stream values of the Python protocol", "[dlpack]") {
  CHECK_FALSE(cudrv::dlpack_consumer_stream(-1).has_value());
  CHECK(cudrv::dlpack_consumer_stream(1)->native_handle() == CU_STREAM_LEGACY);
  CHECK(cudrv::dlpack_consumer_stream(2)->native_handle() == CU_STREAM_PER_THREAD);
  CHECK(cudrv::dlpack_consumer_stream(0x5000)->native_handle() == reinterpret_cast<CUstream>(0x5000));
  CHECK_THROWS_WITH(cudrv::dlpack_consumer_stream(0), Catch::Contains("0 is ambiguous"));
  CHECK_THROWS_AS(cudrv::dlpack_consumer_stream(-3), cudrv::invalid_argument_error);
  CHECK(cudrv::dlpack_stream_value_of(cudrv::stream_ref(static_cast<CUstream>(nullptr))) == 1);
  CHECK(cudrv::dlpack_stream_value_of(cudrv::stream_ref::legacy_default()) == 1);
  CHECK(cudrv::dlpack_stream_value_of(cudrv::stream_ref::per_thread_default()) == 2);
  CHECK(cudrv::dlpack_stream_value_of(cudrv::stream_ref(reinterpret_cast<CUstream>(0x5000))) == 0x5000);
  // No synchronisation asked, or the same stream: nothing is called (no driver is needed here).
  auto producer = cudrv::stream_ref(reinterpret_cast<CUstream>(0x5000));
  CHECK_NOTHROW(cudrv::dlpack_stream_exchange(producer, std::intptr_t{-1}));
  CHECK_NOTHROW(cudrv::dlpack_stream_exchange(producer, std::intptr_t{0x5000}));
  CHECK_NOTHROW(cudrv::dlpack_stream_exchange(cudrv::stream_ref(static_cast<CUstream>(nullptr)), std::intptr_t{1}));
  CHECK_THROWS_AS(cudrv::dlpack_stream_exchange(producer, std::intptr_t{0}), cudrv::invalid_argument_error);
}

#else
TEST_CASE("dlpack: skipped, DLPack's header was not found by CMake", "[dlpack]") {
  WARN("SKIPPED: <cudrv/dlpack.hpp> is not tested: CMake found no dlpack/dlpack.h (run scripts/install-deps.sh)");
}
#endif
