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

#include <cudrv/graph_exec.hpp>
#include <cudrv/growable_buffer.hpp>
#include <cudrv/library.hpp>
#include <cudrv/virtual_memory.hpp>

#if __has_include(<cudrv/device_buffer.hpp>)
#include <cudrv/device_buffer.hpp>
#define CUDRV_TEST_HAS_DEVICE_BUFFER 1
#endif
#if __has_include(<cudrv/pinned_buffer.hpp>)
#include <cudrv/pinned_buffer.hpp>
#define CUDRV_TEST_HAS_PINNED_BUFFER 1
#endif
#if __has_include(<cudrv/managed_buffer.hpp>)
#include <cudrv/managed_buffer.hpp>
#define CUDRV_TEST_HAS_MANAGED_BUFFER 1
#endif
#if __has_include(<cudrv/pitched_buffer.hpp>)
#include <cudrv/pitched_buffer.hpp>
#define CUDRV_TEST_HAS_PITCHED_BUFFER 1
#endif
#if __has_include(<cudrv/memory_pool.hpp>)
#include <cudrv/memory_pool.hpp>
#define CUDRV_TEST_HAS_MEMORY_POOL 1
#endif
#if __has_include(<cudrv/host_registration.hpp>)
#include <cudrv/host_registration.hpp>
#define CUDRV_TEST_HAS_HOST_REGISTRATION 1
#endif

namespace {

// An owner: not copyable, moves that cannot throw, a destructor that cannot throw.
template <class T>
constexpr bool is_move_only_owner =
    !std::is_copy_constructible_v<T> && !std::is_copy_assignable_v<T> && std::is_nothrow_move_constructible_v<T> &&
    std::is_nothrow_move_assignable_v<T> && std::is_nothrow_destructible_v<T>;

// A view: trivially copyable, and not constructible from a literal 0 or nullptr by mistake.
template <class T>
constexpr bool is_view = std::is_trivially_copyable_v<T>&& std::is_nothrow_copy_constructible_v<T> &&
                         !std::is_constructible_v<T, int> && !std::is_constructible_v<T, std::nullptr_t>;

}  // namespace

// --- owners ---------------------------------------------------------------------------------------
static_assert(is_move_only_owner<cudrv::stream>);
static_assert(is_move_only_owner<cudrv::event>);
static_assert(is_move_only_owner<cudrv::context>);
static_assert(is_move_only_owner<cudrv::primary_context>);
#if defined(CUDRV_TEST_HAS_DEVICE_BUFFER)
static_assert(is_move_only_owner<cudrv::device_buffer<float>>);
static_assert(is_move_only_owner<cudrv::device_buffer<std::byte>>);
#endif
#if defined(CUDRV_TEST_HAS_PINNED_BUFFER)
static_assert(is_move_only_owner<cudrv::pinned_buffer<float>>);
#endif
#if defined(CUDRV_TEST_HAS_MANAGED_BUFFER)
static_assert(is_move_only_owner<cudrv::managed_buffer<float>>);
#endif
#if defined(CUDRV_TEST_HAS_PITCHED_BUFFER)
static_assert(is_move_only_owner<cudrv::pitched_buffer<float>>);
#endif
#if defined(CUDRV_TEST_HAS_MEMORY_POOL)
static_assert(is_move_only_owner<cudrv::memory_pool>);
static_assert(is_view<cudrv::memory_pool_ref>);
#endif
#if defined(CUDRV_TEST_HAS_HOST_REGISTRATION)
static_assert(is_move_only_owner<cudrv::host_registration>);
#endif

// Owners convert to their view, so they pass wherever a view is taken by value or const reference;
// they are not views, so a function taking a view by non-const reference cannot overwrite an owner's
// handle (a leak, and a destructor destroying the wrong handle, or a double unload). The shared base
// that holds the operations cannot be assigned from outside either.
template <class Owner, class View, class Base>
constexpr bool owner_is_not_a_view =
    !std::is_base_of_v<View, Owner> && std::is_convertible_v<Owner&, View> &&
    std::is_convertible_v<const Owner&, View> && !std::is_convertible_v<Owner&, View&> &&
    std::is_base_of_v<Base, Owner> && std::is_base_of_v<Base, View> && !std::is_assignable_v<Base&, const Base&> &&
    !std::is_assignable_v<Base&, const View&> && std::is_assignable_v<View&, const View&>;
static_assert(owner_is_not_a_view<cudrv::stream, cudrv::stream_ref, cudrv::stream_base>);
static_assert(owner_is_not_a_view<cudrv::event, cudrv::event_ref, cudrv::event_base>);
static_assert(owner_is_not_a_view<cudrv::context, cudrv::context_ref, cudrv::context_base>);
static_assert(owner_is_not_a_view<cudrv::primary_context, cudrv::context_ref, cudrv::context_base>);
static_assert(owner_is_not_a_view<cudrv::memory_pool, cudrv::memory_pool_ref, cudrv::memory_pool_base>);
static_assert(owner_is_not_a_view<cudrv::library, cudrv::library_ref, cudrv::library_base>);
static_assert(owner_is_not_a_view<cudrv::graph, cudrv::graph_ref, cudrv::graph_base>);
static_assert(owner_is_not_a_view<cudrv::kernel, cudrv::kernel_ref, cudrv::kernel_base>);
using typed_sig = void(int*, float);
static_assert(
    owner_is_not_a_view<cudrv::typed_kernel<typed_sig>, cudrv::typed_kernel_ref<typed_sig>, cudrv::kernel_base>);
// A typed view cannot be overwritten through an untyped one (its launches would convert the arguments
// for the wrong kernel).
static_assert(!std::is_convertible_v<cudrv::typed_kernel_ref<typed_sig>&, cudrv::kernel_ref&>);
static_assert(std::is_convertible_v<cudrv::typed_kernel_ref<typed_sig>, cudrv::kernel_ref>);
// The view of a temporary kernel (whose library may be unloaded at the end of the statement) does not
// compile; the owner, which keeps its library, does.
static_assert(!std::is_convertible_v<cudrv::kernel&&, cudrv::kernel_ref>);
static_assert(!std::is_convertible_v<cudrv::typed_kernel<typed_sig>&&, cudrv::typed_kernel_ref<typed_sig>>);
static_assert(!std::is_convertible_v<cudrv::typed_kernel<typed_sig>&&, cudrv::kernel_ref>);
// Nor does a typed view of a temporary kernel, or a view of a temporary library or of its variables and
// module: all would outlive the code. Views, and owners held in variables, give them.
template <class K>
concept typed_view_of = requires(K&& k) {
  std::forward<K>(k).template as<typed_sig>();
};
static_assert(!typed_view_of<cudrv::kernel>);
static_assert(!typed_view_of<cudrv::typed_kernel<typed_sig>>);
static_assert(typed_view_of<cudrv::kernel&>);
static_assert(typed_view_of<const cudrv::typed_kernel<typed_sig>&>);
static_assert(typed_view_of<cudrv::kernel_ref>);
static_assert(!std::is_convertible_v<cudrv::library&&, cudrv::library_ref>);
static_assert(std::is_convertible_v<const cudrv::library&, cudrv::library_ref>);
template <class L>
concept library_variables_of = requires(L&& l, cudrv::context_ref ctx, const cudrv::device& dev) {
  std::forward<L>(l).template get_global<int>("x", ctx);
  std::forward<L>(l).template get_global<int>("x", dev);
  std::forward<L>(l).raw_global("x", ctx);
  std::forward<L>(l).template get_managed<int>("x");
  std::forward<L>(l).raw_managed("x");
  std::forward<L>(l).module(ctx);
};
template <class L>
concept any_library_variable_of = requires(L&& l, cudrv::context_ref ctx, const cudrv::device& dev) {
  requires(
      requires { std::forward<L>(l).template get_global<int>("x", ctx); } ||
      requires { std::forward<L>(l).template get_global<int>("x", dev); } ||
      requires { std::forward<L>(l).raw_global("x", ctx); } ||
      requires { std::forward<L>(l).template get_managed<int>("x"); } ||
      requires { std::forward<L>(l).raw_managed("x"); } || requires { std::forward<L>(l).module(ctx); });
};
static_assert(!any_library_variable_of<cudrv::library>);
static_assert(library_variables_of<cudrv::library&>);
static_assert(library_variables_of<const cudrv::library&>);
static_assert(library_variables_of<cudrv::library_ref>);
static_assert(is_move_only_owner<cudrv::kernel>);
static_assert(is_move_only_owner<cudrv::typed_kernel<typed_sig>>);
static_assert(is_move_only_owner<cudrv::library>);
static_assert(is_move_only_owner<cudrv::graph>);
static_assert(is_move_only_owner<cudrv::graph_exec>);
static_assert(std::is_same_v<decltype(std::declval<const cudrv::library_ref&>().get_kernel("k")), cudrv::kernel>);
static_assert(std::is_same_v<decltype(std::declval<const cudrv::library_ref&>().get_kernel<typed_sig>("k")),
                             cudrv::typed_kernel<typed_sig>>);

// Owners are created from something explicit: never from a raw handle implicitly.
static_assert(!std::is_convertible_v<CUstream, cudrv::stream>);
static_assert(!std::is_constructible_v<cudrv::stream, CUstream>);
static_assert(!std::is_constructible_v<cudrv::event, CUevent>);
static_assert(!std::is_constructible_v<cudrv::context, CUcontext>);
static_assert(!std::is_default_constructible_v<cudrv::stream>);
static_assert(!std::is_default_constructible_v<cudrv::event>);
static_assert(!std::is_default_constructible_v<cudrv::context>);

// The guard is tied to its scope.
static_assert(!std::is_copy_constructible_v<cudrv::context_guard>);
static_assert(!std::is_move_constructible_v<cudrv::context_guard>);
static_assert(!std::is_copy_assignable_v<cudrv::context_guard>);

// --- views and values -----------------------------------------------------------------------------
static_assert(is_view<cudrv::stream_ref>);
static_assert(is_view<cudrv::event_ref>);
static_assert(is_view<cudrv::context_ref>);
static_assert(std::is_trivially_copyable_v<cudrv::device>);
static_assert(std::is_trivially_copyable_v<cudrv::compute_capability>);
static_assert(std::is_trivially_copyable_v<cudrv::device_uuid>);
static_assert(!std::is_convertible_v<CUstream, cudrv::stream_ref>);  // explicit
static_assert(!std::is_convertible_v<CUevent, cudrv::event_ref>);
static_assert(!std::is_convertible_v<CUcontext, cudrv::context_ref>);
static_assert(!std::is_convertible_v<int, cudrv::device>);
// A stream view carries the owner's bookkeeping (host-callable failures) next to the handle, and is
// still passed in two registers.
static_assert(sizeof(cudrv::stream_ref) == 2 * sizeof(void*));
static_assert(sizeof(cudrv::stream) == 2 * sizeof(void*));
static_assert(sizeof(cudrv::event_ref) == sizeof(CUevent));
// An event remembers its context and the context's unique id (to notice it was destroyed first).
static_assert(sizeof(cudrv::event) == sizeof(CUevent) + sizeof(CUcontext) + sizeof(unsigned long long));
static_assert(sizeof(cudrv::context) == sizeof(CUcontext));
static_assert(is_view<cudrv::kernel_ref>);
static_assert(is_view<cudrv::library_ref>);
static_assert(is_view<cudrv::graph_ref>);

// A temporary owner where a view is taken would be destroyed before the object that uses it.
static_assert(!std::is_constructible_v<cudrv::device_buffer<float>, cudrv::stream&&, std::size_t>);
static_assert(std::is_constructible_v<cudrv::device_buffer<float>, cudrv::stream&, std::size_t>);
static_assert(!std::is_constructible_v<cudrv::device_buffer<float>, cudrv::context&&, std::size_t>);
static_assert(std::is_constructible_v<cudrv::device_buffer<float>, cudrv::context&, std::size_t>);
static_assert(
    !std::is_constructible_v<cudrv::device_buffer<float>, cudrv::memory_pool&&, cudrv::stream_ref, std::size_t>);
static_assert(!std::is_constructible_v<cudrv::pinned_buffer<float>, cudrv::primary_context&&, std::size_t>);
static_assert(!std::is_constructible_v<cudrv::stream, cudrv::context&&>);
static_assert(std::is_constructible_v<cudrv::stream, cudrv::context&>);
static_assert(!std::is_constructible_v<cudrv::event, cudrv::primary_context&&>);

// --- typed device attributes ----------------------------------------------------------------------
namespace attrs = cudrv::device_attributes;
template <auto Tag>
using attribute_result = decltype(std::declval<const cudrv::device&>().attribute(Tag));
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
static_assert(cudrv::compute_capability{9, 0}.as_int() == 90);
static_assert(cudrv::compute_capability{8, 6} < cudrv::compute_capability{9, 0});
static_assert(cudrv::compute_capability{9, 0} > cudrv::compute_capability{8, 9});
static_assert(cudrv::compute_capability{9, 0} == cudrv::compute_capability{9, 0});
static_assert((cudrv::event_flags::timing | cudrv::event_flags::blocking_sync) != cudrv::event_flags::timing);
static_assert(((cudrv::event_flags::timing | cudrv::event_flags::blocking_sync) & cudrv::event_flags::timing) ==
              cudrv::event_flags::timing);
static_assert(static_cast<unsigned int>(cudrv::context_flags::sched_blocking_sync | cudrv::context_flags::map_host) ==
              (CU_CTX_SCHED_BLOCKING_SYNC | CU_CTX_MAP_HOST));
static_assert(cudrv::context_ref(static_cast<CUcontext>(nullptr)) ==
              cudrv::context_ref(static_cast<CUcontext>(nullptr)));
static_assert(cudrv::event_ref::from_native_handle(static_cast<CUevent>(nullptr)).native_handle() == nullptr);

// --- the device range is a standard range ---------------------------------------------------------
static_assert(std::input_iterator<cudrv::device_range::iterator>);
static_assert(std::ranges::input_range<cudrv::device_range>);
static_assert(std::is_same_v<std::iter_value_t<cudrv::device_range::iterator>, cudrv::device>);

TEST_CASE("stream_ref: a null handle is the legacy default stream", "[types][stream]") {
  const cudrv::stream_ref from_null(static_cast<CUstream>(nullptr));
  CHECK(from_null == cudrv::stream_ref::legacy_default());
  CHECK(from_null.native_handle() == CU_STREAM_LEGACY);
  CHECK(cudrv::stream_ref::from_native_handle(nullptr) == cudrv::stream_ref::legacy_default());
  CHECK(cudrv::stream_ref::per_thread_default().native_handle() == CU_STREAM_PER_THREAD);
  CHECK_FALSE(cudrv::stream_ref::per_thread_default() == cudrv::stream_ref::legacy_default());

  const auto raw = reinterpret_cast<CUstream>(std::uintptr_t{0x1234});
  const cudrv::stream_ref a(raw);
  const cudrv::stream_ref b = cudrv::stream_ref::from_native_handle(raw);
  CHECK(a == b);
  CHECK(a.native_handle() == raw);
  cudrv::stream_ref copy = a;  // trivially copyable views copy their handle
  CHECK(copy == a);
  copy = cudrv::stream_ref::legacy_default();
  CHECK(copy.native_handle() == CU_STREAM_LEGACY);
  CHECK(a.native_handle() == raw);
}

TEST_CASE("event_ref and context_ref compare by handle", "[types][event][context]") {
  const auto e1 = reinterpret_cast<CUevent>(std::uintptr_t{0x10});
  const auto e2 = reinterpret_cast<CUevent>(std::uintptr_t{0x20});
  CHECK(cudrv::event_ref(e1) == cudrv::event_ref::from_native_handle(e1));
  CHECK_FALSE(cudrv::event_ref(e1) == cudrv::event_ref(e2));
  CHECK(cudrv::event_ref(e2).native_handle() == e2);

  const auto c1 = reinterpret_cast<CUcontext>(std::uintptr_t{0x30});
  const auto c2 = reinterpret_cast<CUcontext>(std::uintptr_t{0x40});
  CHECK(cudrv::context_ref(c1) == cudrv::context_ref(c1));
  CHECK_FALSE(cudrv::context_ref(c1) == cudrv::context_ref(c2));
  CHECK(cudrv::context_ref(c2).native_handle() == c2);
}

TEST_CASE("device values, uuids and the device range need no driver", "[types][device]") {
  const cudrv::device d3 = cudrv::device::from_native_handle(3);
  CHECK(d3.ordinal() == 3);
  CHECK(d3.native_handle() == 3);
  CHECK(d3 == cudrv::device::from_native_handle(3));
  CHECK_FALSE(d3 == cudrv::device::from_native_handle(2));

  cudrv::device_uuid uuid{};
  for (std::size_t i = 0; i < uuid.bytes.size(); ++i) {
    uuid.bytes[i] = static_cast<unsigned char>(0x11 * i);
  }
  CHECK(uuid.to_string() == "GPU-00112233-4455-6677-8899-aabbccddeeff");
  cudrv::device_uuid zero{};
  CHECK(zero.to_string() == "GPU-00000000-0000-0000-0000-000000000000");
  CHECK_FALSE(zero == uuid);
  CHECK(uuid == uuid);

  const cudrv::device_range range(3);
  CHECK(range.size() == 3);
  CHECK_FALSE(range.empty());
  std::vector<int> ordinals;
  for (cudrv::device d : range) {
    ordinals.push_back(d.ordinal());
  }
  CHECK(ordinals == std::vector<int>{0, 1, 2});
  CHECK(std::ranges::distance(range) == 3);
  CHECK(cudrv::device_range(0).empty());
  CHECK(cudrv::device_range(0).begin() == cudrv::device_range(0).end());
}

TEST_CASE("stream_options default to a non-blocking stream of default priority", "[types][stream]") {
  const cudrv::stream_options options;
  CHECK(options.non_blocking);
  CHECK(options.priority == 0);
  const cudrv::stream_options high{.priority = -1};
  CHECK(high.non_blocking);
  CHECK(high.priority == -1);
}

// --- virtual memory (<cudrv/virtual_memory.hpp>, <cudrv/growable_buffer.hpp>) ------------------------
static_assert(is_move_only_owner<cudrv::address_range>);
static_assert(is_move_only_owner<cudrv::physical_allocation>);
static_assert(is_move_only_owner<cudrv::memory_mapping>);
static_assert(is_move_only_owner<cudrv::file_descriptor>);
static_assert(is_move_only_owner<cudrv::growable_buffer<float>>);
static_assert(is_view<cudrv::address_range_ref>);
static_assert(is_view<cudrv::physical_allocation_ref>);
static_assert(is_view<cudrv::memory_mapping_ref>);

// Owners convert to their views without being them (a view reference cannot overwrite an owner).
static_assert(std::is_convertible_v<const cudrv::address_range&, cudrv::address_range_ref>);
static_assert(!std::is_base_of_v<cudrv::address_range_ref, cudrv::address_range>);
static_assert(std::is_convertible_v<const cudrv::physical_allocation&, cudrv::physical_allocation_ref>);
static_assert(!std::is_base_of_v<cudrv::physical_allocation_ref, cudrv::physical_allocation>);
static_assert(std::is_convertible_v<const cudrv::memory_mapping&, cudrv::memory_mapping_ref>);
static_assert(!std::is_base_of_v<cudrv::memory_mapping_ref, cudrv::memory_mapping>);
// A view of a temporary range would dangle; a temporary allocation may be mapped (the mapping keeps
// the memory).
static_assert(!std::is_convertible_v<cudrv::address_range&&, cudrv::address_range_ref>);
static_assert(!std::is_constructible_v<cudrv::memory_mapping, cudrv::address_range&&, std::size_t,
                                       cudrv::physical_allocation_ref>);
static_assert(
    std::is_constructible_v<cudrv::memory_mapping, cudrv::address_range&, std::size_t, cudrv::physical_allocation&&>);
// Bases cannot be made or assigned on their own.
static_assert(!std::is_constructible_v<cudrv::address_range_base, cudrv::address_range_ref>);
static_assert(!std::is_copy_assignable_v<cudrv::memory_mapping_base>);

// The growable buffer is a typed buffer: it converts to device spans, as device_buffer does.
static_assert(std::is_convertible_v<cudrv::growable_buffer<float>&, cudrv::device_span<float>>);
static_assert(std::is_convertible_v<const cudrv::growable_buffer<float>&, cudrv::device_span<const float>>);
static_assert(!std::is_convertible_v<const cudrv::growable_buffer<float>&, cudrv::device_span<float>>);

// The memory resource implements the one interface.
static_assert(std::is_base_of_v<cudrv::memory_resource, cudrv::virtual_memory_resource>);
static_assert(!std::is_copy_constructible_v<cudrv::virtual_memory_resource>);
