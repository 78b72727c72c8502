// Compile-time properties of the public types: owners are move-only with noexcept moves, views are
// trivially copyable, typed attributes have fixed result types. Nothing here calls the driver.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <ranges>
#include <type_traits>
#include <vector>

#include "support/test_support.hpp"

#include <cudax/graph_exec.hpp>
#include <cudax/library.hpp>

#if __has_include(<cudax/device_buffer.hpp>)
#include <cudax/device_buffer.hpp>
#define CUDAX_TEST_HAS_DEVICE_BUFFER 1
#endif
#if __has_include(<cudax/pinned_buffer.hpp>)
#include <cudax/pinned_buffer.hpp>
#define CUDAX_TEST_HAS_PINNED_BUFFER 1
#endif
#if __has_include(<cudax/managed_buffer.hpp>)
#include <cudax/managed_buffer.hpp>
#define CUDAX_TEST_HAS_MANAGED_BUFFER 1
#endif
#if __has_include(<cudax/pitched_buffer.hpp>)
#include <cudax/pitched_buffer.hpp>
#define CUDAX_TEST_HAS_PITCHED_BUFFER 1
#endif
#if __has_include(<cudax/memory_pool.hpp>)
#include <cudax/memory_pool.hpp>
#define CUDAX_TEST_HAS_MEMORY_POOL 1
#endif
#if __has_include(<cudax/host_registration.hpp>)
#include <cudax/host_registration.hpp>
#define CUDAX_TEST_HAS_HOST_REGISTRATION 1
#endif

namespace {

// An owner: not copyable, moves that cannot throw, a destructor that cannot throw.
template <class T>
constexpr bool is_move_only_owner =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> && std::is_nothrow_move_constructible_v<T> &&
    std::is_nothrow_move_assignable_v<T> && std::is_nothrow_destructible_v<T>;

// A view: trivially copyable, and not constructible from a literal 0 or nullptr by mistake.
template <class T>
constexpr bool is_view = std::is_trivially_copyable_v<T> && std::is_nothrow_copy_constructible_v<T> &&
                         !std::is_constructible_v<T, int> && !std::is_constructible_v<T, std::nullptr_t>;

}  // namespace

// --- owners ---------------------------------------------------------------------------------------
static_assert(is_move_only_owner<cudax::stream>);
static_assert(is_move_only_owner<cudax::event>);
static_assert(is_move_only_owner<cudax::context>);
static_assert(is_move_only_owner<cudax::primary_context>);
#if defined(CUDAX_TEST_HAS_DEVICE_BUFFER)
static_assert(is_move_only_owner<cudax::device_buffer<float>>);
static_assert(is_move_only_owner<cudax::device_buffer<std::byte>>);
#endif
#if defined(CUDAX_TEST_HAS_PINNED_BUFFER)
static_assert(is_move_only_owner<cudax::pinned_buffer<float>>);
#endif
#if defined(CUDAX_TEST_HAS_MANAGED_BUFFER)
static_assert(is_move_only_owner<cudax::managed_buffer<float>>);
#endif
#if defined(CUDAX_TEST_HAS_PITCHED_BUFFER)
static_assert(is_move_only_owner<cudax::pitched_buffer<float>>);
#endif
#if defined(CUDAX_TEST_HAS_MEMORY_POOL)
static_assert(is_move_only_owner<cudax::memory_pool>);
static_assert(is_view<cudax::memory_pool_ref>);
#endif
#if defined(CUDAX_TEST_HAS_HOST_REGISTRATION)
static_assert(is_move_only_owner<cudax::host_registration>);
#endif

// Owners convert to their view, so they pass wherever a view is taken by value or const reference;
// they are not views, so a function taking a view by non-const reference cannot overwrite an owner's
// handle (a leak, and a destructor destroying the wrong handle, or a double unload). The shared base
// that holds the operations cannot be assigned from outside either.
template <class Owner, class View, class Base>
constexpr bool owner_is_not_a_view =
    !std::is_base_of_v<View, Owner> && std::is_convertible_v<Owner&, View> && std::is_convertible_v<const Owner&, View> &&
    !std::is_convertible_v<Owner&, View&> && std::is_base_of_v<Base, Owner> && std::is_base_of_v<Base, View> &&
    !std::is_assignable_v<Base&, const Base&> && !std::is_assignable_v<Base&, const View&> &&
    std::is_assignable_v<View&, const View&>;
static_assert(owner_is_not_a_view<cudax::stream, cudax::stream_ref, cudax::stream_base>);
static_assert(owner_is_not_a_view<cudax::event, cudax::event_ref, cudax::event_base>);
static_assert(owner_is_not_a_view<cudax::context, cudax::context_ref, cudax::context_base>);
static_assert(owner_is_not_a_view<cudax::primary_context, cudax::context_ref, cudax::context_base>);
static_assert(owner_is_not_a_view<cudax::memory_pool, cudax::memory_pool_ref, cudax::memory_pool_base>);
static_assert(owner_is_not_a_view<cudax::library, cudax::library_ref, cudax::library_base>);
static_assert(owner_is_not_a_view<cudax::graph, cudax::graph_ref, cudax::graph_base>);
static_assert(owner_is_not_a_view<cudax::kernel, cudax::kernel_ref, cudax::kernel_base>);
using typed_sig = void(int*, float);
static_assert(owner_is_not_a_view<cudax::typed_kernel<typed_sig>, cudax::typed_kernel_ref<typed_sig>, cudax::kernel_base>);
// A typed view cannot be overwritten through an untyped one (its launches would convert the arguments
// for the wrong kernel).
static_assert(!std::is_convertible_v<cudax::typed_kernel_ref<typed_sig>&, cudax::kernel_ref&>);
static_assert(std::is_convertible_v<cudax::typed_kernel_ref<typed_sig>, cudax::kernel_ref>);
// The view of a temporary kernel (whose library may be unloaded at the end of the statement) does not
// compile; the owner, which keeps its library, does.
static_assert(!std::is_convertible_v<cudax::kernel&&, cudax::kernel_ref>);
static_assert(!std::is_convertible_v<cudax::typed_kernel<typed_sig>&&, cudax::typed_kernel_ref<typed_sig>>);
static_assert(!std::is_convertible_v<cudax::typed_kernel<typed_sig>&&, cudax::kernel_ref>);
// Nor does a typed view of a temporary kernel, or a view of a temporary library or of its variables and
// module: all would outlive the code. Views, and owners held in variables, give them.
template <class K>
concept typed_view_of = requires(K&& k) { std::forward<K>(k).template as<typed_sig>(); };
static_assert(!typed_view_of<cudax::kernel>);
static_assert(!typed_view_of<cudax::typed_kernel<typed_sig>>);
static_assert(typed_view_of<cudax::kernel&>);
static_assert(typed_view_of<const cudax::typed_kernel<typed_sig>&>);
static_assert(typed_view_of<cudax::kernel_ref>);
static_assert(!std::is_convertible_v<cudax::library&&, cudax::library_ref>);
static_assert(std::is_convertible_v<const cudax::library&, cudax::library_ref>);
template <class L>
concept library_variables_of = requires(L&& l, cudax::context_ref ctx, const cudax::device& dev) {
  std::forward<L>(l).template get_global<int>("x", ctx);
  std::forward<L>(l).template get_global<int>("x", dev);
  std::forward<L>(l).raw_global("x", ctx);
  std::forward<L>(l).template get_managed<int>("x");
  std::forward<L>(l).raw_managed("x");
  std::forward<L>(l).module(ctx);
};
template <class L>
concept any_library_variable_of = requires(L&& l, cudax::context_ref ctx, const cudax::device& dev) {
  requires(requires { std::forward<L>(l).template get_global<int>("x", ctx); } ||
           requires { std::forward<L>(l).template get_global<int>("x", dev); } ||
           requires { std::forward<L>(l).raw_global("x", ctx); } ||
           requires { std::forward<L>(l).template get_managed<int>("x"); } ||
           requires { std::forward<L>(l).raw_managed("x"); } || requires { std::forward<L>(l).module(ctx); });
};
static_assert(!any_library_variable_of<cudax::library>);
static_assert(library_variables_of<cudax::library&>);
static_assert(library_variables_of<const cudax::library&>);
static_assert(library_variables_of<cudax::library_ref>);
static_assert(is_move_only_owner<cudax::kernel>);
static_assert(is_move_only_owner<cudax::typed_kernel<typed_sig>>);
static_assert(is_move_only_owner<cudax::library>);
static_assert(is_move_only_owner<cudax::graph>);
static_assert(is_move_only_owner<cudax::graph_exec>);
static_assert(std::is_same_v<decltype(std::declval<const cudax::library_ref&>().get_kernel("k")), cudax::kernel>);
static_assert(std::is_same_v<decltype(std::declval<const cudax::library_ref&>().get_kernel<typed_sig>("k")),
                             cudax::typed_kernel<typed_sig>>);

// Owners are created from something explicit: never from a raw handle implicitly.
static_assert(!std::is_convertible_v<CUstream, cudax::stream>);
static_assert(!std::is_constructible_v<cudax::stream, CUstream>);
static_assert(!std::is_constructible_v<cudax::event, CUevent>);
static_assert(!std::is_constructible_v<cudax::context, CUcontext>);
static_assert(!std::is_default_constructible_v<cudax::stream>);
static_assert(!std::is_default_constructible_v<cudax::event>);
static_assert(!std::is_default_constructible_v<cudax::context>);

// The guard is tied to its scope.
static_assert(!std::is_copy_constructible_v<cudax::context_guard>);
static_assert(!std::is_move_constructible_v<cudax::context_guard>);
static_assert(!std::is_copy_assignable_v<cudax::context_guard>);

// --- views and values -----------------------------------------------------------------------------
static_assert(is_view<cudax::stream_ref>);
static_assert(is_view<cudax::event_ref>);
static_assert(is_view<cudax::context_ref>);
static_assert(std::is_trivially_copyable_v<cudax::device>);
static_assert(std::is_trivially_copyable_v<cudax::compute_capability>);
static_assert(std::is_trivially_copyable_v<cudax::device_uuid>);
static_assert(!std::is_convertible_v<CUstream, cudax::stream_ref>);  // explicit
static_assert(!std::is_convertible_v<CUevent, cudax::event_ref>);
static_assert(!std::is_convertible_v<CUcontext, cudax::context_ref>);
static_assert(!std::is_convertible_v<int, cudax::device>);
// A stream view carries the owner's bookkeeping (host-callable failures) next to the handle, and is
// still passed in two registers.
static_assert(sizeof(cudax::stream_ref) == 2 * sizeof(void*));
static_assert(sizeof(cudax::stream) == 2 * sizeof(void*));
static_assert(sizeof(cudax::event_ref) == sizeof(CUevent));
// An event remembers its context and the context's unique id (to notice it was destroyed first).
static_assert(sizeof(cudax::event) == sizeof(CUevent) + sizeof(CUcontext) + sizeof(unsigned long long));
static_assert(sizeof(cudax::context) == sizeof(CUcontext));
static_assert(is_view<cudax::kernel_ref>);
static_assert(is_view<cudax::library_ref>);
static_assert(is_view<cudax::graph_ref>);

// A temporary owner where a view is taken would be destroyed before the object that uses it.
static_assert(!std::is_constructible_v<cudax::device_buffer<float>, cudax::stream&&, std::size_t>);
static_assert(std::is_constructible_v<cudax::device_buffer<float>, cudax::stream&, std::size_t>);
static_assert(!std::is_constructible_v<cudax::device_buffer<float>, cudax::context&&, std::size_t>);
static_assert(std::is_constructible_v<cudax::device_buffer<float>, cudax::context&, std::size_t>);
static_assert(!std::is_constructible_v<cudax::device_buffer<float>, cudax::memory_pool&&, cudax::stream_ref, std::size_t>);
static_assert(!std::is_constructible_v<cudax::pinned_buffer<float>, cudax::primary_context&&, std::size_t>);
static_assert(!std::is_constructible_v<cudax::stream, cudax::context&&>);
static_assert(std::is_constructible_v<cudax::stream, cudax::context&>);
static_assert(!std::is_constructible_v<cudax::event, cudax::primary_context&&>);

// --- typed device attributes ----------------------------------------------------------------------
namespace attrs = cudax::device_attributes;
template <auto Tag>
using attribute_result = decltype(std::declval<const cudax::device&>().attribute(Tag));
static_assert(std::is_same_v<attribute_result<attrs::warp_size>, int>);
static_assert(std::is_same_v<attribute_result<attrs::max_threads_per_block>, int>);
static_assert(std::is_same_v<attribute_result<attrs::multiprocessor_count>, int>);
static_assert(std::is_same_v<attribute_result<attrs::l2_cache_size>, std::size_t>);
static_assert(std::is_same_v<attribute_result<attrs::max_shared_memory_per_block>, std::size_t>);
static_assert(std::is_same_v<attribute_result<attrs::total_constant_memory>, std::size_t>);
static_assert(std::is_same_v<attribute_result<attrs::managed_memory>, bool>);
static_assert(std::is_same_v<attribute_result<attrs::unified_addressing>, bool>);
static_assert(std::is_same_v<attribute_result<attrs::compute_mode>, CUcomputemode>);
static_assert(std::is_same_v<attribute_result<attrs::mempool_supported_handle_types>, unsigned int>);
static_assert(std::is_same_v<attribute_result<CU_DEVICE_ATTRIBUTE_WARP_SIZE>, int>);  // the raw overload
static_assert(attrs::warp_size.value == CU_DEVICE_ATTRIBUTE_WARP_SIZE);
static_assert(attrs::l2_cache_size.value == CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
static_assert(std::is_same_v<decltype(attrs::l2_cache_size)::type, std::size_t>);

// --- constexpr values -----------------------------------------------------------------------------
static_assert(cudax::compute_capability{9, 0}.as_int() == 90);
static_assert(cudax::compute_capability{8, 6} < cudax::compute_capability{9, 0});
static_assert(cudax::compute_capability{9, 0} > cudax::compute_capability{8, 9});
static_assert(cudax::compute_capability{9, 0} == cudax::compute_capability{9, 0});
static_assert((cudax::event_flags::timing | cudax::event_flags::blocking_sync) != cudax::event_flags::timing);
static_assert(((cudax::event_flags::timing | cudax::event_flags::blocking_sync) & cudax::event_flags::timing) ==
              cudax::event_flags::timing);
static_assert(static_cast<unsigned int>(cudax::context_flags::sched_blocking_sync | cudax::context_flags::map_host) ==
              (CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_MAP_HOST));
static_assert(cudax::context_ref(static_cast<CUcontext>(nullptr)) == cudax::context_ref(static_cast<CUcontext>(nullptr)));
static_assert(cudax::event_ref::from_native_handle(static_cast<CUevent>(nullptr)).native_handle() == nullptr);

// --- the device range is a standard range ---------------------------------------------------------
static_assert(std::input_iterator<cudax::device_range::iterator>);
static_assert(std::ranges::input_range<cudax::device_range>);
static_assert(std::is_same_v<std::iter_value_t<cudax::device_range::iterator>, cudax::device>);

TEST_CASE("stream_ref: a null handle is the legacy default stream", "[types][stream]") {
  const cudax::stream_ref from_null(static_cast<CUstream>(nullptr));
  CHECK(from_null == cudax::stream_ref::legacy_default());
  CHECK(from_null.native_handle() == CU_STREAM_LEGACY);
  CHECK(cudax::stream_ref::from_native_handle(nullptr) == cudax::stream_ref::legacy_default());
  CHECK(cudax::stream_ref::per_thread_default().native_handle() == CU_STREAM_PER_THREAD);
  CHECK_FALSE(cudax::stream_ref::per_thread_default() == cudax::stream_ref::legacy_default());

  const auto raw = reinterpret_cast<CUstream>(std::uintptr_t{0x1234});
  const cudax::stream_ref a(raw);
  const cudax::stream_ref b = cudax::stream_ref::from_native_handle(raw);
  CHECK(a == b);
  CHECK(a.native_handle() == raw);
  cudax::stream_ref copy = a;  // trivially copyable views copy their handle
  CHECK(copy == a);
  copy = cudax::stream_ref::legacy_default();
  CHECK(copy.native_handle() == CU_STREAM_LEGACY);
  CHECK(a.native_handle() == raw);
}

TEST_CASE("event_ref and context_ref compare by handle", "[types][event][context]") {
  const auto e1 = reinterpret_cast<CUevent>(std::uintptr_t{0x10});
  const auto e2 = reinterpret_cast<CUevent>(std::uintptr_t{0x20});
  CHECK(cudax::event_ref(e1) == cudax::event_ref::from_native_handle(e1));
  CHECK_FALSE(cudax::event_ref(e1) == cudax::event_ref(e2));
  CHECK(cudax::event_ref(e2).native_handle() == e2);

  const auto c1 = reinterpret_cast<CUcontext>(std::uintptr_t{0x30});
  const auto c2 = reinterpret_cast<CUcontext>(std::uintptr_t{0x40});
  CHECK(cudax::context_ref(c1) == cudax::context_ref(c1));
  CHECK_FALSE(cudax::context_ref(c1) == cudax::context_ref(c2));
  CHECK(cudax::context_ref(c2).native_handle() == c2);
}

TEST_CASE("device values, uuids and the device range need no driver", "[types][device]") {
  const cudax::device d3 = cudax::device::from_native_handle(3);
  CHECK(d3.ordinal() == 3);
  CHECK(d3.native_handle() == 3);
  CHECK(d3 == cudax::device::from_native_handle(3));
  CHECK_FALSE(d3 == cudax::device::from_native_handle(2));

  cudax::device_uuid uuid{};
  for (std::size_t i = 0; i < uuid.bytes.size(); ++i) {
    uuid.bytes[i] = static_cast<unsigned char>(0x11 * i);
  }
  CHECK(uuid.to_string() == "GPU-00112233-4455-6677-8899-aabbccddeeff");
  cudax::device_uuid zero{};
  CHECK(zero.to_string() == "GPU-00000000-0000-0000-0000-000000000000");
  CHECK_FALSE(zero == uuid);
  CHECK(uuid == uuid);

  const cudax::device_range range(3);
  CHECK(range.size() == 3);
  CHECK_FALSE(range.empty());
  std::vector<int> ordinals;
  for (cudax::device d : range) {
    ordinals.push_back(d.ordinal());
  }
  CHECK(ordinals == std::vector<int>{0, 1, 2});
  CHECK(std::ranges::distance(range) == 3);
  CHECK(cudax::device_range(0).empty());
  CHECK(cudax::device_range(0).begin() == cudax::device_range(0).end());
}

TEST_CASE("stream_options default to a non-blocking stream of default priority", "[types][stream]") {
  const cudax::stream_options options;
  CHECK(options.non_blocking);
  CHECK(options.priority == 0);
  const cudax::stream_options high{.priority = -1};
  CHECK(high.non_blocking);
  CHECK(high.priority == -1);
}
