// The ownership contract of docs/design.md ("The handle model"), checked by the compiler for every
// public owner: one line per owner below, each rule a static_assert. Nothing here calls the driver.
//
// A new owner joins the list with one line. The CPU test cudrv_contract_list
// (tests/cpu/check_contract_list.cmake) fails when a public header declares an owner or a view (a
// `static X from_native_handle`, or a class with `release()`) whose name is not in the list region.
// A rule an owner breaks on purpose is waived on its line, and the reason is written next to it and in
// docs/design.md ("Rules broken on purpose").
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>

#include <cudrv/cudrv.hpp>
#include <cudrv/nccl.hpp>
#include <cudrv/rtc.hpp>
#include <cudrv/system.hpp>  // issue 34 part 5
#include <cudrv/unix_socket.hpp>
// issue 34 parts 3-4: checkpoint and restore, coredump settings
#include <cudrv/code_inspection.hpp>  // issue 36: inspect
#include <cudrv/coredump.hpp>
#include <cudrv/process_checkpoint.hpp>
#if defined(CUDRV_TEST_DLPACK)
#include <cudrv/dlpack.hpp>
#endif

namespace {

// --- the rules ------------------------------------------------------------------------------------

enum class rule {
  move_only,       // not copyable; moves and destruction are noexcept
  lvalue_view,     // a named owner (const or not) converts implicitly to its view
  no_rvalue_view,  // a temporary owner does not: `X_ref v = X(...);` does not compile
  const_view,      // a const owner gives a read-only view (memory), views are used through const
  adopt,           // static X from_native_handle(handle, ...) returns an X
  release,         // release() noexcept hands the handle off, in the type from_native_handle takes
  reset,           // reset() noexcept frees early
  bool_test,       // explicit operator bool, noexcept
  view_value,      // the view is trivially copyable, not a base of the owner; a handle view not made from 0
  addresses,       // memory: data() is the address in its space (CUdeviceptr or T*), get() a T*
};

// Rules an owner breaks on purpose (the reason goes next to its line).
template <rule... R>
struct waive {
  static constexpr bool has(rule r) noexcept { return ((r == R) || ...); }
};
// The arguments of the owner's from_native_handle.
template <class... A>
struct adopt {};
// An owner with no view type (the reason goes next to its line).
struct no_view {};

template <class Owner, class View, class Adopt = adopt<>, class Waived = waive<>>
struct owner {};
template <class View, class Adopt>
struct view {};
template <class... Entries>
struct list {};

// The read-only form of a memory view; a handle view is its own.
template <class V>
struct const_view_of {
  using type = V;
};
template <class T>
struct const_view_of<cudrv::device_span<T>> {
  using type = cudrv::device_span<const T>;
};
template <class T>
struct const_view_of<cudrv::pitched_span<T>> {
  using type = cudrv::pitched_span<const T>;
};
template <class T>
struct const_view_of<std::span<T>> {
  using type = std::span<const T>;
};
template <class V>
using const_view_t = typename const_view_of<V>::type;
template <class V>
inline constexpr bool is_memory_view_v = !std::is_same_v<const_view_t<V>, V>;

// data(): the address in the space the memory is used from. Device memory: a CUdeviceptr (the host
// must not dereference it); host-accessible memory: a T*.
template <class V>
struct address_of {};
template <class T>
struct address_of<cudrv::device_span<T>> {
  using type = CUdeviceptr;
};
template <class T>
struct address_of<cudrv::pitched_span<T>> {
  using type = CUdeviceptr;
};
template <class T>
struct address_of<std::span<T>> {
  using type = T*;
};

template <class O>
concept move_only =
    !std::is_copy_constructible_v<O> && !std::is_copy_assignable_v<O> && std::is_nothrow_move_constructible_v<O> &&
    std::is_nothrow_move_assignable_v<O> && std::is_nothrow_destructible_v<O>;

template <class O, class V>
concept views_lvalues = std::is_convertible_v<O&, V> && std::is_convertible_v<const O&, const_view_t<V>>;

template <class O, class V>
concept refuses_rvalues = !std::is_convertible_v<O, V> && !std::is_convertible_v<O, const_view_t<V>> &&
                          !std::is_convertible_v<const O, const_view_t<V>> && !std::is_constructible_v<V, O> &&
                          !std::is_constructible_v<const_view_t<V>, O> && !requires {
  const_view_t<V>{std::declval<O>()};
};

template <class O, class V>
concept memory_const_correct = !std::is_convertible_v<const O&, V> && !std::is_constructible_v<V, const O&> &&
                               std::is_same_v<decltype(std::declval<const O&>().view()), const_view_t<V>> &&
                               std::is_same_v<decltype(std::declval<O&>().view()), V>;

template <class V>
concept usable_through_const = requires(const V v) {
  { v.native_handle() }
  noexcept;
};

template <class O, class V>
concept const_correct = (is_memory_view_v<V> && memory_const_correct<O, V>) ||
                        (!is_memory_view_v<V> && usable_through_const<V>);

template <class O, class... A>
concept adopts = requires {
  { O::from_native_handle(std::declval<A>()...) } -> std::same_as<O>;
};

template <class O, class... A>
concept releases = requires(O& o) {
  { o.release() }
  noexcept;
}
&&(std::is_same_v<std::remove_cvref_t<decltype(std::declval<O&>().release())>, std::remove_cvref_t<A>> || ...);

template <class O>
concept resets = requires(O& o) {
  { o.reset() }
  noexcept->std::same_as<void>;
};

template <class O>
concept tests_as_bool = std::is_nothrow_constructible_v<bool, const O&> && !std::is_convertible_v<const O&, bool>;

// A handle view is not made from 0 or nullptr (`stream_ref(0)` would silently mean something); a span
// of nothing is an ordinary empty span.
template <class O, class V>
concept view_is_value =
    std::is_trivially_copyable_v<V> && !std::is_base_of_v<V, O> &&
    (is_memory_view_v<V> || (!std::is_constructible_v<V, std::nullptr_t> && !std::is_constructible_v<V, int>));

template <class O, class V>
concept gives_addresses = requires(O& o) {
  { o.data() } -> std::same_as<typename address_of<V>::type>;
  { o.get() } -> std::same_as<typename O::value_type*>;
};

template <class O, class V, class... A, rule... W>
constexpr bool check(owner<O, V, adopt<A...>, waive<W...>>) {
  using w = waive<W...>;
  constexpr bool has_view = !std::is_same_v<V, no_view>;
  static_assert(w::has(rule::move_only) || move_only<O>, "an owner is move-only, with noexcept moves");
  static_assert(w::has(rule::adopt) || adopts<O, A...>, "from_native_handle(handle, ...) adopts");
  static_assert(w::has(rule::release) || releases<O, A...>, "release() noexcept hands the handle off");
  static_assert(w::has(rule::reset) || resets<O>, "reset() noexcept frees early");
  static_assert(w::has(rule::bool_test) || tests_as_bool<O>, "explicit operator bool");
  static_assert(has_view || (w::has(rule::lvalue_view) && w::has(rule::no_rvalue_view) && w::has(rule::const_view) &&
                             w::has(rule::view_value)),
                "an owner without a view waives the view rules, with its reason");
  if constexpr (has_view) {
    static_assert(w::has(rule::lvalue_view) || views_lvalues<O, V>, "a named owner converts to its view");
    static_assert(w::has(rule::no_rvalue_view) || refuses_rvalues<O, V>, "a temporary owner does not");
    static_assert(w::has(rule::const_view) || const_correct<O, V>, "views are const-correct");
    static_assert(w::has(rule::view_value) || view_is_value<O, V>, "a view is a trivially copyable value");
    if constexpr (is_memory_view_v<V>) {
      static_assert(w::has(rule::addresses) || gives_addresses<O, V>, "data() in the memory's space, get() a T*");
    }
  }
  return true;
}

// A view that adopts a raw handle does so without a call and without throwing.
template <class V, class... A>
constexpr bool check(view<V, adopt<A...>>) {
  static_assert(std::is_trivially_copyable_v<V>);
  static_assert(requires {
    { V::from_native_handle(std::declval<A>()...) } -> std::same_as<V>;
  });
  static_assert(noexcept(V::from_native_handle(std::declval<A>()...)), "a view adopts a raw handle noexcept");
  static_assert(!std::is_constructible_v<V, std::nullptr_t> && !std::is_constructible_v<V, int>);
  return true;
}

template <class... E>
constexpr bool check_all(list<E...>) {
  return (check(E{}) && ...);
}

using cudrv::context_ref;
using cudrv::stream_ref;
using r = rule;
using sig = void(int*);  // a kernel signature for the typed kernels

// --- the list: every public owner, one line each ---------------------------------------------------
// contract:list-begin
using owners = list<
    // Handle owners: a base with the operations, an X_ref view, a move-only owner.
    owner<cudrv::stream, cudrv::stream_ref, adopt<CUstream>>,
    owner<cudrv::event, cudrv::event_ref, adopt<CUevent, context_ref>>,
    // issue 37: a pooled event belongs to the pool that made it with the pool's context and flags and
    // takes it back: a raw CUevent cannot join a pool, and handing one off would leave the pool's count.
    owner<cudrv::pooled_event, cudrv::event_ref, adopt<>, waive<r::adopt, r::release>>,
    // The pool owns events, handed out as pooled_event: no one handle to view, adopt or hand off.
    owner<cudrv::event_pool, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    owner<cudrv::context, cudrv::context_ref, adopt<CUcontext>>,
    owner<cudrv::primary_context, cudrv::context_ref, adopt<CUdevice, CUcontext>>,
    owner<cudrv::graph, cudrv::graph_ref, adopt<CUgraph>>,
    owner<cudrv::graph_exec, cudrv::graph_exec_ref, adopt<CUgraphExec, context_ref>>,
    owner<cudrv::memory_pool, cudrv::memory_pool_ref, adopt<CUmemoryPool>>,
    owner<cudrv::imported_memory_pool, cudrv::memory_pool_ref, adopt<CUmemoryPool, const cudrv::device&>>,
    owner<cudrv::green_context, cudrv::green_context_ref, adopt<CUgreenCtx>>,
    owner<cudrv::physical_allocation, cudrv::physical_allocation_ref, adopt<CUmemGenericAllocationHandle, std::size_t>>,
    owner<cudrv::address_range, cudrv::address_range_ref, adopt<CUdeviceptr, std::size_t>>,
    owner<cudrv::memory_mapping, cudrv::memory_mapping_ref, adopt<CUdeviceptr, std::size_t>>,
    owner<cudrv::library, cudrv::library_ref, adopt<CUlibrary>>,
    owner<cudrv::array<float>, cudrv::array_ref<float>, adopt<CUarray, context_ref>>,
    owner<cudrv::mipmapped_array<float>, cudrv::mipmapped_array_ref<float>,
          adopt<CUmipmappedArray, const cudrv::array_description&, unsigned int, context_ref>>,
    owner<cudrv::texture_object, cudrv::texture_object_ref, adopt<CUtexObject, context_ref>>,
    owner<cudrv::surface_object, cudrv::surface_object_ref, adopt<CUsurfObject, context_ref>>,
    owner<cudrv::nccl::communicator, cudrv::nccl::communicator_ref, adopt<ncclComm*>>,
    // A kernel owns a counted reference on its library's cudrv state, not the CUkernel (the driver
    // destroys kernels only with their library): a raw CUkernel is viewed (kernel_ref::from_native_handle),
    // never adopted, and there is nothing of the driver's to hand off.
    owner<cudrv::kernel, cudrv::kernel_ref, adopt<>, waive<r::adopt, r::release>>,
    owner<cudrv::typed_kernel<sig>, cudrv::typed_kernel_ref<sig>, adopt<>, waive<r::adopt, r::release>>,

    // Memory owners: the view is a span (device_span, pitched_span, std::span).
    owner<cudrv::device_buffer<float>, cudrv::device_span<float>, adopt<CUdeviceptr, std::size_t, context_ref>>,
    owner<cudrv::pitched_buffer<float>, cudrv::pitched_span<float>,
          adopt<CUdeviceptr, std::size_t, std::size_t, std::size_t, std::size_t, context_ref>>,
    owner<cudrv::imported_buffer<float>, cudrv::device_span<float>,
          adopt<CUdeviceptr, std::size_t, const cudrv::imported_memory_pool&>>,
    owner<cudrv::ipc_mapped_buffer<float>, cudrv::device_span<float>, adopt<CUdeviceptr, std::size_t, context_ref>>,
    owner<cudrv::nccl::buffer<float>, cudrv::device_span<float>, adopt<CUdeviceptr, std::size_t, const cudrv::device&>>,
    // Host-accessible memory views as std::span, whose own constructor takes a temporary range when
    // its elements are const (as it does a temporary std::vector): cudrv cannot refuse that and stay a
    // contiguous range. A mutable view of a temporary, and any view of a const buffer but a read-only
    // one, are refused.
    owner<cudrv::pinned_buffer<float>, std::span<float>, adopt<float*, std::size_t, context_ref>,
          waive<r::no_rvalue_view>>,
    owner<cudrv::managed_buffer<float>, std::span<float>, adopt<float*, std::size_t, context_ref>,
          waive<r::no_rvalue_view>>,
    owner<cudrv::host_accessible_pool_buffer<float>, std::span<float>,
          adopt<float*, std::size_t, stream_ref, cudrv::memory_pool_ref>, waive<r::no_rvalue_view>>,
    // A growable buffer owns a reserved address range and the physical allocations it maps as it grows:
    // no single handle to adopt or hand off (its pieces have their own owners, address_range and
    // physical_allocation).
    owner<cudrv::growable_buffer<float>, cudrv::device_span<float>, adopt<>, waive<r::adopt, r::release>>,
    // Memory from any memory_resource is untyped: its views are typed and asked for (as<T>() a
    // device_span<T>, as_host<T>() a std::span<T>, from lvalues only, checked against what the resource
    // says is accessible), so there is no one view to convert to. It adopts and hands off the pointer,
    // size and alignment that deallocate needs back.
    owner<cudrv::resource_buffer, no_view, adopt<cudrv::memory_resource&, cudrv::resource_buffer::allocation>,
          waive<r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // A registration owns no memory (the caller's stays the caller's, with its own view): no view.
    owner<cudrv::host_registration, no_view, adopt<void*, std::size_t, context_ref>,
          waive<r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,

    // Owners of something other than a driver object.
    // A descriptor number is its own view (native_handle()); a socket's view is its descriptor's.
    owner<cudrv::file_descriptor, no_view, adopt<int>,
          waive<r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    owner<cudrv::unix_socket, no_view, adopt<cudrv::file_descriptor>,
          waive<r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // A listener also owns the path it bound, which it unlinks: a descriptor alone cannot say it.
    owner<cudrv::unix_listener, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // The nvJitLink handle is a build step's state, used once (link() consumes it): nothing to view,
    // adopt or hand off.
    owner<cudrv::linker, no_view, adopt<>,
          waive<r::adopt, r::release, r::reset, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // A registration pairs a communicator and a buffer: no single handle to adopt or hand off.
    owner<cudrv::nccl::registration, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // issue 35: a window pairs a communicator and NCCL's window handle, like a registration; a
    // premultiplied sum is an ncclRedOp_t value that names something only with its communicator.
    owner<cudrv::nccl::window, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    owner<cudrv::nccl::premul_sum<float>, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    // A resource is used through memory_resource& (its interface is the view), so it stays where it
    // is: not movable, as every memory_resource; it has no handle to adopt or hand off.
    owner<cudrv::virtual_memory_resource, no_view, adopt<>,
          waive<r::move_only, r::adopt, r::release, r::reset, r::bool_test, r::lvalue_view, r::no_rvalue_view,
                r::const_view, r::view_value>>,
    // issue 34 part 8: a subscription owns a registration whose user data is cudrv's (the callable it
    // keeps): a raw CUasyncCallbackHandle cannot be adopted or handed off, and there is nothing to view.
    owner<cudrv::async_notification_subscription, no_view, adopt<>,
          waive<r::adopt, r::release, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>
#if defined(CUDRV_TEST_DLPACK)
    ,
    // DLPack's owners hand a tensor on (release) but adopt through from_dlpack, which checks it;
    // a dlpack_tensor's view is its strided_view, which is not trivially copyable (shape vectors).
    owner<cudrv::dlpack_ptr<DLManagedTensorVersioned>, no_view, adopt<DLManagedTensorVersioned*>,
          waive<r::adopt, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>,
    owner<cudrv::dlpack_tensor<float>, no_view, adopt<DLManagedTensorVersioned*>,
          waive<r::adopt, r::lvalue_view, r::no_rvalue_view, r::const_view, r::view_value>>
#endif
    >;

// Views that adopt a raw handle: noexcept, no call.
using views =
    list<view<cudrv::stream_ref, adopt<CUstream>>, view<cudrv::event_ref, adopt<CUevent>>,
         view<cudrv::graph_ref, adopt<CUgraph>>, view<cudrv::graph_exec_ref, adopt<CUgraphExec, context_ref>>,
         view<cudrv::green_context_ref, adopt<CUgreenCtx>>,
         view<cudrv::physical_allocation_ref, adopt<CUmemGenericAllocationHandle, std::size_t>>,
         view<cudrv::address_range_ref, adopt<CUdeviceptr, std::size_t>>,
         view<cudrv::memory_mapping_ref, adopt<CUdeviceptr, std::size_t>>, view<cudrv::library_ref, adopt<CUlibrary>>,
         view<cudrv::kernel_ref, adopt<CUkernel>>, view<cudrv::typed_kernel_ref<sig>, adopt<CUkernel>>,
         view<cudrv::texture_object_ref, adopt<CUtexObject>>, view<cudrv::surface_object_ref, adopt<CUsurfObject>>,
         view<cudrv::nccl::communicator_ref, adopt<ncclComm*>>,
         view<cudrv::nccl::communicator_ref, adopt<ncclComm*, int, int>>,
         // issue 34 part 5: an NVML device handle (NVML devices are never released)
         view<cudrv::system::nvml_device, adopt<nvmlDevice_st*>>>;
// array_ref::from_native_handle asks the driver for the array's format (cuArray3DGetDescriptor) and
// can throw: a typed array view checks its element type against the array's, and a raw CUarray does
// not say it. Adopting with a known description does not call the driver.

// Not owners, though they adopt or release something:
//   device: a value (an ordinal); graph_node_ref, typed_graph_node: node handles, owned by their graph;
//   device_graph_exec: the handle of a graph_exec that a kernel takes, a value valid while it lives, like
//   conditional_handle (issue 34 part 6);
//   resource_descriptor (green contexts): a value the driver hands out and never frees;
//   device_allocation, imported_allocation: the internal state of the buffers (namespace detail).
// Scope guards, which restore a state at the end of a scope and hold nothing to adopt or hand off:
//   context_guard, stream_capture, nccl::group, nvtx::range, mpi::environment.
// issue 34 parts 3-4: process_checkpoint is a value (a process id, no driver resource: copyable);
//   process_checkpoint_lock and scoped_coredump_settings are scope guards (checked below).
// issue 34 part 9: profiler_range is a scope guard too (movable; it ends a counted cuProfilerStart range).
// issue 34 part 1 (every launch attribute): scoped_persisting_l2_limit, a scope guard (restores the
//   persisting-L2 limit); launch_event, the event handle a launch attribute holds, taken from lvalues only
//   (checked below).
// issue 36: inspect: code_inspection, code_image, kernel_resources, constant_bank are plain values (what
//   cudrv::inspect read from bytes it copied from; no handle, nothing to adopt or release; checked below).
// contract:list-end

static_assert(check_all(owners{}));
static_assert(check_all(views{}));

// issue 34 parts 3-4: the new scope guards neither copy nor move (one scope restores once).
static_assert(!std::is_copy_constructible_v<cudrv::process_checkpoint_lock> &&
              !std::is_move_constructible_v<cudrv::process_checkpoint_lock> &&
              !std::is_copy_assignable_v<cudrv::process_checkpoint_lock>);
static_assert(!std::is_copy_constructible_v<cudrv::scoped_coredump_settings> &&
              !std::is_move_constructible_v<cudrv::scoped_coredump_settings> &&
              !std::is_copy_assignable_v<cudrv::scoped_coredump_settings>);
static_assert(std::is_trivially_copyable_v<cudrv::process_checkpoint>);
// issue 36: inspect: the results of cudrv::inspect are values that keep nothing of the object_code.
static_assert(std::is_copy_constructible_v<cudrv::code_inspection> && std::is_copy_assignable_v<cudrv::code_image> &&
              std::is_nothrow_move_constructible_v<cudrv::kernel_resources> &&
              std::is_trivially_copyable_v<cudrv::constant_bank>);
// issue 34 part 1: a launch attribute's event is taken from an lvalue owner or any view, never from a
// temporary owner (destroyed before the launch records it); the scoped limit neither copies nor moves.
static_assert(std::is_constructible_v<cudrv::launch_event, const cudrv::event&>);
static_assert(std::is_constructible_v<cudrv::launch_event, cudrv::event&>);
static_assert(std::is_constructible_v<cudrv::launch_event, cudrv::event_ref>);
static_assert(!std::is_constructible_v<cudrv::launch_event, cudrv::event>);
static_assert(!std::is_constructible_v<cudrv::launch_event, const cudrv::event&&>);
static_assert(!std::is_copy_constructible_v<cudrv::scoped_persisting_l2_limit>);
static_assert(!std::is_move_constructible_v<cudrv::scoped_persisting_l2_limit>);

// The dangling forms of issue 32, spelled out: a view of a temporary owner does not compile.
static_assert(!std::is_convertible_v<cudrv::stream, cudrv::stream_ref>);
static_assert(!std::is_convertible_v<cudrv::event, cudrv::event_ref>);
static_assert(!std::is_convertible_v<cudrv::context, cudrv::context_ref>);
static_assert(!std::is_convertible_v<cudrv::primary_context, cudrv::context_ref>);
static_assert(!std::is_convertible_v<cudrv::graph, cudrv::graph_ref>);
static_assert(!std::is_convertible_v<cudrv::memory_pool, cudrv::memory_pool_ref>);
static_assert(!std::is_convertible_v<cudrv::imported_memory_pool, cudrv::memory_pool_ref>);
static_assert(!std::is_convertible_v<cudrv::green_context, cudrv::green_context_ref>);
static_assert(!std::is_convertible_v<cudrv::physical_allocation, cudrv::physical_allocation_ref>);
static_assert(!std::is_convertible_v<cudrv::memory_mapping, cudrv::memory_mapping_ref>);
static_assert(!std::is_convertible_v<cudrv::graph_exec, cudrv::graph_exec_ref>);
static_assert(!std::is_convertible_v<cudrv::nccl::communicator, cudrv::nccl::communicator_ref>);
static_assert(!std::is_convertible_v<cudrv::device_buffer<float>, cudrv::device_span<const float>>);
// ... while a named one does.
static_assert(std::is_convertible_v<cudrv::stream&, cudrv::stream_ref>);
static_assert(std::is_convertible_v<const cudrv::graph_exec&, cudrv::graph_exec_ref>);

// A function taking a view by value accepts a named owner and refuses a temporary one.
template <class V, class O>
concept passes_as = requires(void (*f)(V), O&& o) {
  f(std::forward<O>(o));
};
static_assert(passes_as<cudrv::stream_ref, cudrv::stream&>);
static_assert(!passes_as<cudrv::stream_ref, cudrv::stream>);
static_assert(!passes_as<cudrv::event_ref, cudrv::event&&>);

// One meaning of data() and get(): data() is the address in the space the memory is used from,
// get() the typed pointer; a const buffer hands out read-only access.
static_assert(std::is_same_v<decltype(std::declval<const cudrv::pinned_buffer<float>&>().data()), const float*>);
static_assert(
    std::is_same_v<decltype(std::declval<const cudrv::host_accessible_pool_buffer<float>&>().get()), const float*>);
static_assert(std::is_same_v<decltype(std::declval<cudrv::device_span<float>&>().data()), CUdeviceptr>);
static_assert(std::is_same_v<decltype(std::declval<cudrv::device_span<float>&>().get()), float*>);
static_assert(std::is_same_v<decltype(std::declval<const cudrv::imported_buffer<float>&>().view()),
                             cudrv::device_span<const float>>);
static_assert(std::is_same_v<decltype(std::declval<const cudrv::host_accessible_pool_buffer<float>&>().device_view()),
                             cudrv::device_span<const float>>);

}  // namespace

// Adopts a made-up handle, views it, hands it back: nothing reaches the driver (a released owner
// destroys nothing).
template <class O, class V, class H, class... More>
void round_trip(H handle, More... more) {
  O owner = O::from_native_handle(handle, more...);
  CHECK(static_cast<bool>(owner));
  const V viewed = owner;  // from a named owner
  CHECK(viewed.native_handle() == handle);
  O moved = std::move(owner);
  CHECK_FALSE(static_cast<bool>(owner));  // NOLINT(bugprone-use-after-move): the contract says empty
  CHECK(moved.release() == handle);
  CHECK_FALSE(static_cast<bool>(moved));
  moved.reset();  // nothing held: nothing to free
  CHECK_FALSE(static_cast<bool>(moved));
}

TEST_CASE("contract: owners adopt, view, move and release a handle without the driver", "[contract]") {
  CHECK(check_all(owners{}));  // the compile-time checks above, over the whole list
  CHECK(check_all(views{}));
  round_trip<cudrv::graph, cudrv::graph_ref>(reinterpret_cast<CUgraph>(std::uintptr_t{0x10}));
  round_trip<cudrv::memory_pool, cudrv::memory_pool_ref>(reinterpret_cast<CUmemoryPool>(std::uintptr_t{0x20}));
  round_trip<cudrv::context, cudrv::context_ref>(reinterpret_cast<CUcontext>(std::uintptr_t{0x30}));
  round_trip<cudrv::physical_allocation, cudrv::physical_allocation_ref>(CUmemGenericAllocationHandle{0x40},
                                                                         std::size_t{1} << 21);
  round_trip<cudrv::memory_mapping, cudrv::memory_mapping_ref>(CUdeviceptr{0x50000}, std::size_t{1} << 21);
}

// Adopts made-up memory, views it while named (read-only through const), hands it back.
template <class O, class Address, class... More>
void memory_round_trip(Address address, std::size_t count, More... more) {
  O owner = O::from_native_handle(address, count, more...);
  REQUIRE(static_cast<bool>(owner));
  CHECK(owner.data() == address);
  CHECK(owner.view().size() == count);
  const O& read_only = owner;
  CHECK(read_only.view().data() == owner.view().data());
  CHECK(std::is_const_v<std::remove_pointer_t<decltype(read_only.get())>> ==
        std::is_pointer_v<decltype(read_only.data())>);  // host memory: const T* from a const buffer
  CHECK(owner.release() == address);
  CHECK_FALSE(static_cast<bool>(owner));
}

TEST_CASE("contract: buffers adopt, view and release memory without the driver", "[contract]") {
  const auto no_context = cudrv::context_ref(CUcontext{});  // no context: nothing asks the driver
  memory_round_trip<cudrv::device_buffer<float>>(CUdeviceptr{0x7000}, 16, no_context);
  memory_round_trip<cudrv::ipc_mapped_buffer<float>>(CUdeviceptr{0x8000}, 8, no_context);
  float host[4] = {};
  memory_round_trip<cudrv::pinned_buffer<float>>(&host[0], 4, no_context);
  memory_round_trip<cudrv::managed_buffer<float>>(&host[0], 4, no_context);

  // A pitched buffer adopts with its pitch and extents.
  auto pitched = cudrv::pitched_buffer<float>::from_native_handle(CUdeviceptr{0x9000}, 512, 100, 3, 2, no_context);
  CHECK(pitched.pitch() == 512);
  CHECK(pitched.width() == 100);
  CHECK(pitched.height() == 3);
  CHECK(pitched.depth() == 2);
  const cudrv::pitched_span<const float> whole = std::as_const(pitched);
  CHECK(whole.address == 0x9000);
  CHECK(pitched.release() == 0x9000);
  CHECK(pitched.pitch() == 0);

  // A registration adopts a registered range, and hands it back.
  auto registration = cudrv::host_registration::from_native_handle(&host[0], sizeof(host), no_context);
  CHECK(registration.data() == &host[0]);
  CHECK(registration.size_bytes() == sizeof(host));
  CHECK(registration.release() == &host[0]);
  CHECK_FALSE(static_cast<bool>(registration));
}

TEST_CASE("contract: an executable graph's view carries its handle and context", "[contract]") {
  const auto raw = reinterpret_cast<CUgraphExec>(std::uintptr_t{0x60});
  const auto ctx = cudrv::context_ref(reinterpret_cast<CUcontext>(std::uintptr_t{0x70}));
  const auto adopted = cudrv::graph_exec_ref::from_native_handle(raw, ctx);
  CHECK(adopted.native_handle() == raw);
  CHECK(adopted.context() == ctx);
  const auto bare = cudrv::graph_exec_ref::from_native_handle(raw);
  CHECK(bare == adopted);                            // the same executable
  CHECK(bare.context().native_handle() == nullptr);  // updates run in the current context
}
