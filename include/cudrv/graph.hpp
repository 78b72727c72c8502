/// @file graph.hpp
/// @brief CUDA graphs built explicitly: @ref cudrv::graph (owning `CUgraph`), its view
/// @ref cudrv::graph_ref, node handles, conditional nodes, and @ref cudrv::graph_builder, the target
/// that `cudrv::launch`, `cudrv::copy` and `cudrv::fill` accept in place of a stream.
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "cudrv/context.hpp"
#include "cudrv/copy.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/event.hpp"
#include "cudrv/launch.hpp"
#include "cudrv/stream.hpp"
#include "cudrv/stream_memory_ops.hpp"

namespace cudrv {

class graph;
class graph_exec;
enum class graph_instantiate_flags : unsigned;

/// @brief What a graph node does.
enum class graph_node_kind {
  kernel,             ///< A kernel launch.
  memcpy,             ///< A memory copy.
  memset,             ///< A memory fill.
  host,               ///< A host callable.
  child_graph,        ///< A nested graph.
  empty,              ///< No work: a point to join dependencies.
  event_record,       ///< Records an event.
  event_wait,         ///< Waits for an event.
  mem_alloc,          ///< Allocates memory owned by the graph.
  mem_free,           ///< Frees memory allocated by a graph.
  conditional,        ///< Runs a body graph depending on a value set by device code.
  stream_memory_ops,  ///< Stream memory operations: waits and writes of flags (see stream_memory_ops.hpp).
  /// @brief The former name of `stream_memory_ops`, kept for one release (deprecated).
  batch_mem_op [[deprecated("use graph_node_kind::stream_memory_ops")]] = stream_memory_ops,
  other,  ///< Any other node type (external semaphores, ...).
};

/// @brief A non-owning handle to a node of a graph (`CUgraphNode`). Valid while its graph lives.
class graph_node_ref {
 public:
  /// @brief Views a node handle.
  [[nodiscard]] static graph_node_ref from_native_handle(CUgraphNode node) noexcept { return graph_node_ref(node); }
  /// @brief The `CUgraphNode`.
  [[nodiscard]] CUgraphNode native_handle() const noexcept { return node_; }
  /// @brief What the node does (`cuGraphNodeGetType`).
  [[nodiscard]] graph_node_kind kind() const;
  /// @brief The nodes this node depends on.
  [[nodiscard]] std::vector<graph_node_ref> dependencies() const;
  /// @brief The nodes that depend on this node.
  [[nodiscard]] std::vector<graph_node_ref> dependents() const;
  /// @brief Same node.
  friend bool operator==(const graph_node_ref& a, const graph_node_ref& b) noexcept { return a.node_ == b.node_; }

 private:
  explicit graph_node_ref(CUgraphNode node) noexcept : node_(node) {}
  CUgraphNode node_;
};

namespace detail {
/// @brief Sets a kernel node's launch attributes (internal; see typed_graph_node::set_launch_attributes).
void set_kernel_node_attributes(CUgraphNode node, const launch_config& config);
/// @brief A device-updatable kernel node's device handle (internal).
CUgraphDeviceNode kernel_node_device_handle(CUgraphNode node);
}  // namespace detail

/// @brief A node handle whose kind is known at compile time, returned by the function that added the
/// node; it converts to @ref graph_node_ref. Functions that only make sense for one kind (e.g.
/// `graph_exec::set_kernel_node`) take the typed handle, so a wrong node is a compile error.
/// @tparam Kind the node's kind
template <graph_node_kind Kind>
class typed_graph_node : public graph_node_ref {
 public:
  /// @brief The kind of the nodes this handle stands for.
  static constexpr graph_node_kind node_kind = Kind;
  /// @brief Views a node the caller knows to be of kind @p Kind (not checked).
  [[nodiscard]] static typed_graph_node from_native_handle(CUgraphNode node) noexcept {
    return typed_graph_node(graph_node_ref::from_native_handle(node));
  }
  /// @brief Kernel nodes: sets the launch attributes @p config asks for on the node
  /// (`cuGraphKernelNodeSetAttribute`, checked as when the node is added; grid, block and shared memory
  /// are not touched); attributes @p config leaves unset keep their values. An executable graph made
  /// before takes them with `graph_exec::update`: `graph_exec::set_kernel_node` cannot carry attributes
  /// (`cuGraphExecKernelNodeSetParams` has none).
  /// @throws not_supported_error for an attribute a graph node cannot carry (programmatic stream
  ///   serialization, programmatic and launch-completion events); invalid_argument_error for a value
  ///   refused before the driver; launch_error naming the attribute the driver refused
  void set_launch_attributes(const launch_config& config) const requires(Kind == graph_node_kind::kernel) {
    detail::set_kernel_node_attributes(native_handle(), config);
  }
  /// @brief Kernel nodes added with @ref cudrv::launch_config::device_updatable set: the handle that device code
  /// passes to the device-side update functions (`cudaGraphKernelNodeSetParam`, ...), read back from
  /// the node (`cuGraphKernelNodeGetAttribute`).
  /// @throws invalid_argument_error when the node is not device-updatable
  [[nodiscard]] CUgraphDeviceNode device_updatable_handle() const requires(Kind == graph_node_kind::kernel) {
    return detail::kernel_node_device_handle(native_handle());
  }

 private:
  explicit typed_graph_node(graph_node_ref node) noexcept : graph_node_ref(node) {}
};

using kernel_node = typed_graph_node<graph_node_kind::kernel>;              ///< A kernel node.
using memcpy_node = typed_graph_node<graph_node_kind::memcpy>;              ///< A memcpy node.
using memset_node = typed_graph_node<graph_node_kind::memset>;              ///< A memset node.
using host_node = typed_graph_node<graph_node_kind::host>;                  ///< A host-callable node.
using child_graph_node = typed_graph_node<graph_node_kind::child_graph>;    ///< A child-graph node.
using empty_node = typed_graph_node<graph_node_kind::empty>;                ///< An empty node.
using event_record_node = typed_graph_node<graph_node_kind::event_record>;  ///< An event-record node.
using event_wait_node = typed_graph_node<graph_node_kind::event_wait>;      ///< An event-wait node.
using mem_alloc_node = typed_graph_node<graph_node_kind::mem_alloc>;        ///< A memory-allocation node.
using mem_free_node = typed_graph_node<graph_node_kind::mem_free>;          ///< A memory-free node.
/// @brief A stream-memory-operations node.
using stream_memory_ops_node = typed_graph_node<graph_node_kind::stream_memory_ops>;
/// @brief The former name of @ref stream_memory_ops_node, kept for one release (deprecated).
using batch_mem_op_node [[deprecated("use cudrv::stream_memory_ops_node")]] = stream_memory_ops_node;

/// @brief The kinds of conditional node.
enum class conditional_kind {
  if_then,       ///< Runs body 0 once when the condition is non-zero (and body 1, if any, when it is zero).
  while_loop,    ///< Runs the body again and again while the condition is non-zero.
  switch_cases,  ///< Runs body n once, where n is the condition (no body when out of range).
};

/// @brief The value a conditional node tests, set by device code with `cudaGraphSetConditional`.
///
/// Trivially copyable; pass it to kernels as a `cudaGraphConditionalHandle` (an `unsigned long long`).
/// @code
/// // device code:  __global__ void step(cudaGraphConditionalHandle h, int* n) {
/// //                 cudaGraphSetConditional(h, --*n > 0); }
/// @endcode
class conditional_handle {
 public:
  /// @brief Wraps a handle made by `cuGraphConditionalHandleCreate`.
  constexpr explicit conditional_handle(CUgraphConditionalHandle handle) noexcept : handle_(handle) {}
  /// @brief The `CUgraphConditionalHandle`.
  [[nodiscard]] constexpr CUgraphConditionalHandle native_handle() const noexcept { return handle_; }

 private:
  CUgraphConditionalHandle handle_;
};

class graph_ref;

struct conditional_node;

/// @brief The operations every graph handle offers (queries, nodes, edges and instantiation), shared by
/// the view @ref cudrv::graph_ref and the owner @ref cudrv::graph. Not constructible or assignable
/// on its own (see @ref cudrv::context_base).
///
/// Nodes are added with the `add_*` functions, each taking the nodes it depends on; kernels, copies
/// and fills are added through a @ref graph_builder with the same calls as on a stream.
/// @code
/// cudrv::graph g;
/// auto a = g.add_empty();
/// auto rec = g.add_event_record(ev, {a});
/// g.add_host([&] { ++counter; }, {rec});
/// cudrv::graph_exec exec = g.instantiate(dev.primary_context(), cudrv::graph_instantiate_flags::none);
/// exec.launch(stream);
/// @endcode
class graph_base {
 public:
  /// @brief The `CUgraph`.
  [[nodiscard]] CUgraph native_handle() const noexcept { return handle_; }

  /// @brief All nodes.
  [[nodiscard]] std::vector<graph_node_ref> nodes() const;
  /// @brief The nodes without dependencies.
  [[nodiscard]] std::vector<graph_node_ref> roots() const;
  /// @brief The number of nodes.
  [[nodiscard]] std::size_t node_count() const;
  /// @brief Every edge as (from, to).
  [[nodiscard]] std::vector<std::pair<graph_node_ref, graph_node_ref>> edges() const;
  /// @brief Makes @p to depend on @p from.
  void add_dependency(graph_node_ref from, graph_node_ref to) const;
  /// @brief Removes the dependency of @p to on @p from.
  void remove_dependency(graph_node_ref from, graph_node_ref to) const;

  /// @brief Adds a node that does nothing (to join or fork dependencies).
  empty_node add_empty(const std::vector<graph_node_ref>& dependencies = {}) const;
  /// @brief Adds a copy of @p child as a node.
  child_graph_node add_child_graph(graph_ref child, const std::vector<graph_node_ref>& dependencies = {}) const;
  /// @brief Adds a node that records @p ev.
  event_record_node add_event_record(event_ref ev, const std::vector<graph_node_ref>& dependencies = {}) const;
  /// @brief Adds a node that waits for @p ev.
  event_wait_node add_event_wait(event_ref ev, const std::vector<graph_node_ref>& dependencies = {}) const;
  /// @brief Adds a node that runs @p fn on a driver thread at every launch. The graph owns a copy of
  /// the callable (a user object): it lives until the graph and every executable instantiated from it
  /// are gone, and is then destroyed on a cudrv thread, not the driver's, so it may own cudrv objects
  /// (a buffer it keeps alive, say). @p fn must not call CUDA; an exception it throws goes to the
  /// destruction handler.
  template <class F>
  requires std::is_invocable_v < std::decay_t<F>
  & > host_node add_host(F&& fn, const std::vector<graph_node_ref>& dependencies = {}) const {
    return add_host_task(new detail::host_task_impl<std::decay_t<F>>(std::forward<F>(fn)), dependencies);
  }
  /// @brief Adds a node allocating @p bytes on @p dev; returns the node and the address, fixed for
  /// the graph's lifetime. Memory not freed by an @ref add_mem_free node stays allocated after the
  /// launch until it is freed (cuMemFree / cuMemFreeAsync, or graph_instantiate_flags::auto_free_on_launch).
  std::pair<mem_alloc_node, CUdeviceptr> add_mem_alloc(const device& dev, std::size_t bytes,
                                                       const std::vector<graph_node_ref>& dependencies = {}) const;
  /// @brief Adds a node freeing memory allocated by a graph's @ref add_mem_alloc node.
  mem_free_node add_mem_free(CUdeviceptr address, const std::vector<graph_node_ref>& dependencies = {}) const;

  /// @brief Creates the handle a conditional node of this graph tests (`cuGraphConditionalHandleCreate`).
  /// @param ctx the context the graph's kernels run in
  /// @param default_value the value set at each launch when @p reset_on_launch is true
  /// @param reset_on_launch apply @p default_value at the start of every launch
  [[nodiscard]] conditional_handle make_conditional_handle(context_ref ctx, unsigned default_value = 0,
                                                           bool reset_on_launch = true) const;
  /// @brief Adds a conditional node (CUDA 12.4+; switch 12.8+) testing @p handle; fill its body graphs.
  /// @param handle the value the node tests, from @ref make_conditional_handle
  /// @param kind if, while or switch
  /// @param ctx the context of the kernels in the bodies
  /// @param bodies 1 for while, 1 or 2 (else) for if, the number of cases for switch
  /// @param dependencies the nodes the conditional node depends on
  /// @throws invalid_argument_error for an empty @p ctx, a body count @p kind does not allow, or a @p kind
  ///   that is none of the enumerators, before the driver is called
  /// @throws not_supported_error for a switch node or an if with 2 bodies on a driver older than CUDA 12.8
  ///   (before the driver is called), or when the driver or device does not support the node
  /// @throws error with `CUDA_ERROR_INVALID_VALUE` when the driver refuses @p handle: it must come from
  ///   @ref make_conditional_handle of this graph (or of a graph this one is a body of) for @p ctx, and
  ///   only one conditional node may test it
  conditional_node add_conditional(conditional_handle handle, conditional_kind kind, context_ref ctx,
                                   unsigned bodies = 1, const std::vector<graph_node_ref>& dependencies = {}) const;

  /// @brief A copy of the graph (`cuGraphClone`).
  [[nodiscard]] graph clone() const;
  /// @brief The graph in Graphviz DOT form (`cuGraphDebugDotPrint`), for debugging.
  [[nodiscard]] std::string dot(unsigned flags = CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) const;
  /// @brief Writes the DOT form to @p path.
  void write_dot(const std::string& path, unsigned flags = CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE) const;

  /// @brief Instantiates the graph in @p ctx (see graph_exec.hpp); the reason of a refusal and the
  /// node involved are in the error.
  [[nodiscard]] graph_exec instantiate(context_ref ctx,
                                       graph_instantiate_flags flags = graph_instantiate_flags{}) const;
  /// @brief Instantiates the graph in @p dev's primary context.
  [[nodiscard]] graph_exec instantiate(const device& dev,
                                       graph_instantiate_flags flags = graph_instantiate_flags{}) const;
  /// @brief Instantiates the graph in the context current on the calling thread.
  /// @throws invalid_argument_error when no context is current: name one with
  ///   @ref instantiate(context_ref, graph_instantiate_flags) const
  [[nodiscard]] graph_exec instantiate(graph_instantiate_flags flags) const;
  /// @brief Instantiates the graph with no flags, like @ref instantiate(graph_instantiate_flags) const.
  [[nodiscard]] graph_exec instantiate() const;

  /// @brief Same graph (views and owners alike).
  friend bool operator==(const graph_base& a, const graph_base& b) noexcept { return a.handle_ == b.handle_; }

 protected:
  /// @brief Holds @p handle.
  explicit graph_base(CUgraph handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the view).
  graph_base(const graph_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  graph_base& operator=(const graph_base&) noexcept = default;
  ~graph_base() = default;
  /// @brief Throws for an empty (moved-from) graph (internal).
  void require_handle(const char* api) const;
  /// @brief Adds a host node running @p task, which the graph owns from here on (internal).
  host_node add_host_task(detail::host_task* task, const std::vector<graph_node_ref>& dependencies) const;

  CUgraph handle_;  ///< The graph.
};

/// @brief A non-owning view of a graph (`CUgraph`). Trivially copyable.
class graph_ref : public graph_base {
 public:
  /// @brief Views a `CUgraph` the caller keeps alive.
  [[nodiscard]] static graph_ref from_native_handle(CUgraph handle) noexcept { return graph_ref(handle); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  graph_ref(std::nullptr_t) = delete;
  /// @}
  /// @brief Views the same graph as @p other.
  graph_ref(const graph_ref& other) noexcept = default;
  /// @brief Views the graph @p other views.
  graph_ref& operator=(const graph_ref& other) noexcept = default;

 private:
  explicit graph_ref(CUgraph handle) noexcept : graph_base(handle) {}
  friend class graph;
};

/// @brief A conditional node and the body graphs the driver made for it (owned by the node, valid
/// while the parent graph lives).
struct conditional_node {
  graph_node_ref node;            ///< The conditional node.
  std::vector<graph_ref> bodies;  ///< Its body graphs, owned by the node: fill them with nodes.
};

/// @brief An owning CUDA graph (`cuGraphCreate` / `cuGraphDestroy`). Move-only; converts to
/// @ref graph_ref (it is not one, so it cannot be overwritten through a `graph_ref&`).
///
/// Executables instantiated from it are independent of it: the graph may be changed, or destroyed,
/// while they run. What the graph's nodes need stays alive with the graph and its executables: the
/// libraries of its kernels and its host callables. Node handles of the graph (and conditional bodies)
/// are valid only while it lives, which per-node updates of an executable
/// (`graph_exec::set_kernel_node`) need.
class graph : public graph_base {
 public:
  /// @brief An empty graph.
  graph();
  /// @brief Adopts a `CUgraph`: it will be destroyed by this object.
  [[nodiscard]] static graph from_native_handle(CUgraph handle) noexcept { return graph(handle, 0); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  graph(const graph&) = delete;
  graph& operator=(const graph&) = delete;
  /// @}
  /// @brief Takes over @p other's graph; @p other becomes empty.
  graph(graph&& other) noexcept : graph_base(cudrv::detail::exchange(other.handle_, nullptr)) {}
  /// @brief Destroys the current graph, then takes over @p other's.
  graph& operator=(graph&& other) noexcept;
  /// @brief Destroys the graph; errors go to the destruction handler.
  ~graph();
  /// @brief Gives up ownership.
  [[nodiscard]] CUgraph release() noexcept { return cudrv::detail::exchange(handle_, nullptr); }
  /// @brief Destroys the graph now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether the object owns a graph (false once moved from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view of the graph.
  operator graph_ref() const& noexcept { return graph_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary graph would outlive it.
  operator graph_ref() const&& = delete;
  /// @}

 private:
  graph(CUgraph handle, int) noexcept : graph_base(handle) {}
};

/// @brief Where stream-style calls add nodes: a graph, the nodes the next node depends on, and the
/// context kernels and copies run in.
///
/// `cudrv::launch`, `cudrv::copy` and `cudrv::fill` accept a graph_builder where they accept a stream; each call
/// adds one node that depends on the builder's current dependencies and becomes its only dependency,
/// so calls on one builder are ordered like work on one stream. Several builders on one graph make
/// independent branches; join them with @ref depend_on.
/// @code
/// cudrv::graph g;
/// cudrv::graph_builder b(g, dev);                          // nodes run in dev's primary context
/// cudrv::copy(d_in, h_in, b);                              // memcpy node
/// cudrv::launch(b, {.grid = 64, .block = 256}, k, d_in.get(), d_out.get(), n);  // kernel node after it
/// cudrv::fill(d_tmp, 0, b);                                // memset node after the kernel
/// @endcode
class graph_builder {
 public:
  /// @brief Adds to @p g in context @p ctx, after @p dependencies.
  graph_builder(graph_ref g, context_ref ctx, std::vector<graph_node_ref> dependencies = {});
  /// @brief Adds to @p g in @p dev's primary context, after @p dependencies.
  graph_builder(graph_ref g, const device& dev, std::vector<graph_node_ref> dependencies = {});
  /// @brief Adds to @p g in the context of @p s (the current one for the legacy default stream), after
  /// @p dependencies.
  graph_builder(graph_ref g, stream_ref s, std::vector<graph_node_ref> dependencies = {});
  /// @brief The graph.
  [[nodiscard]] graph_ref target() const noexcept { return graph_; }
  /// @brief The context.
  [[nodiscard]] context_ref context() const noexcept { return ctx_; }
  /// @brief The nodes the next node will depend on.
  [[nodiscard]] const std::vector<graph_node_ref>& dependencies() const noexcept { return deps_; }
  /// @brief The last node added (throws when none was added).
  [[nodiscard]] graph_node_ref last() const;
  /// @brief Adds @p node to the dependencies of the next node (to join branches).
  void depend_on(graph_node_ref node);
  /// @brief Makes @p node the only dependency of the next node (internal use by the adders, and to
  /// continue after a node added directly with graph_ref's functions).
  void advance(graph_node_ref node);
  /// @brief Makes the graph keep @p library loaded, once per builder and library (internal).
  void keep_library(detail::library_state* library);

 private:
  graph_ref graph_;
  context_ref ctx_;
  std::vector<graph_node_ref> deps_;
  std::vector<detail::library_state*> kept_;  // libraries this builder made the graph keep
};

namespace detail {
/// @brief Adds a kernel node after the builder's dependencies and advances it (internal).
kernel_node add_kernel_node(graph_builder& b, const launch_config& config, CUkernel kernel, void** args,
                            const kernel_signature* signature);
/// @brief The copy parameters of a checked linear copy (internal).
CUDA_MEMCPY3D linear_memcpy3d(const linear_copy& c);
/// @brief The kernel-node parameters of a launch (internal).
CUDA_KERNEL_NODE_PARAMS kernel_node_params(const launch_config& config, CUkernel kernel, CUcontext ctx, void** args,
                                           const kernel_signature* signature);
/// @brief A dependency array for the driver, read in place from a list of node views (internal).
struct native_node_list {
  const CUgraphNode* nodes;  ///< The first handle, or null for none.
  std::size_t count;         ///< How many handles.
  /// @brief The handles, for the driver's `dependencies` argument.
  [[nodiscard]] const CUgraphNode* data() const noexcept { return nodes; }
  /// @brief The number of handles, for the driver's `numDependencies` argument.
  [[nodiscard]] std::size_t size() const noexcept { return count; }
};
/// @brief The driver handles of @p nodes, for a dependency array, without a copy (internal): a node
/// view holds its `CUgraphNode` and nothing else, so the views' storage is the driver's array.
[[nodiscard]] native_node_list native_nodes(const std::vector<graph_node_ref>& nodes) noexcept;
/// @brief The memset parameters of a checked fill (internal).
CUDA_MEMSET_NODE_PARAMS memset_params(const char* api, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                                      std::size_t element_size);
/// @brief Adds a memcpy node for a checked linear copy (internal).
memcpy_node add_copy_node(graph_builder& b, const linear_copy& c);
/// @brief Adds a memset node (internal).
memset_node add_fill_node(graph_builder& b, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                          std::size_t element_size);
}  // namespace detail

/// @brief Adds a kernel node to @p builder's graph: the same call as the stream launch, with the same
/// compile-time (typed kernels) or run-time (untyped kernels) checks and conversions. The node runs in
/// the builder's context, and the graph (and every executable made from it) keeps the kernel's
/// library loaded.
/// @code
/// auto node = cudrv::launch(builder, {.grid = 64, .block = 256}, saxpy, 2.0f, x.get(), y.get(), n);
/// @endcode
/// @return the new node (also the builder's only dependency from now on)
template <class K, class... Args>
requires kernel_handle<K> kernel_node launch(graph_builder& builder, const launch_config& config, const K& kernel,
                                             Args&&... args) {
  kernel_node node = kernel_node::from_native_handle(nullptr);
  auto sink = [&](void** pointers) {
    node = detail::add_kernel_node(builder, config, kernel.native_handle(), pointers, kernel.cached_signature());
  };
  detail::marshal(sink, kernel, detail::query_target{nullptr, builder.context().native_handle()},
                  std::forward<Args>(args)...);
  return node;
}

/// @brief Adds a memcpy node copying all of @p src to the start of @p dst: the same call and checks as
/// the stream-ordered `cudrv::copy`. The graph keeps both addresses, so a temporary owner does not
/// compile here (`cudrv::borrowed_linear_view`).
/// @return the new node (also the builder's only dependency from now on)
template <borrowed_linear_view Dst, borrowed_linear_view Src>
memcpy_node copy(Dst&& dst, Src&& src, graph_builder& builder) {
  return detail::add_copy_node(builder, detail::plan_copy(dst, src, nullptr));
}

/// @brief Adds a memcpy node copying the first @p count elements of @p src.
template <borrowed_linear_view Dst, borrowed_linear_view Src>
memcpy_node copy(Dst&& dst, Src&& src, std::size_t count, graph_builder& builder) {
  return detail::add_copy_node(builder, detail::plan_copy(dst, src, &count));
}

/// @brief Adds a memset node filling @p dst with @p value (elements of 1, 2 or 4 bytes).
template <borrowed_linear_view Dst>
memset_node fill(Dst&& dst, const detail::element_t<Dst>& value, graph_builder& builder) {
  using D = detail::element_t<Dst>;
  static_assert(!std::is_const_v<D>, "fill needs a view of non-const elements");
  static_assert(sizeof(D) == 1 || sizeof(D) == 2 || sizeof(D) == 4, "fill supports elements of 1, 2 or 4 bytes");
  auto d = detail::to_linear(dst);
  std::uint32_t pattern = 0;
  std::memcpy(&pattern, &value, sizeof(D));
  return detail::add_fill_node(builder, d.address, d.count, pattern, sizeof(D));
}

// --- stream memory operations as graph nodes (stream_memory_ops.hpp) ---------------------------------

namespace detail {
/// @brief Adds a stream-memory-operations node of @p count operations after the builder's dependencies,
/// in its context, and advances it (internal).
stream_memory_ops_node add_memory_ops_node(graph_builder& b, const stream_memory_op* ops, std::size_t count);
}  // namespace detail

/// @brief Adds a node that waits until the first element of @p flag meets @p options.condition with
/// @p value (`cuGraphAddBatchMemOpNode` with one wait): the same call and checks as the stream form.
/// The waits of a graph block its launch stream like those of a stream: warm up the kernels first
/// (see the page "Memory operations").
/// @code
/// cudrv::graph g;
/// cudrv::graph_builder b(g, dev);
/// cudrv::wait_value(b, flag.view(), 1u);                 // the launch waits for the flag
/// cudrv::launch(b, cfg, consume, data.get());
/// cudrv::write_value(b, done.view(), 1u);                // then tells whoever waits on done
/// @endcode
/// @return the new node (also the builder's only dependency from now on)
template <class T>
requires stream_flag_value<std::remove_const_t<T>> stream_memory_ops_node
wait_value(graph_builder& builder, device_span<T> flag, std::type_identity_t<std::remove_const_t<T>> value,
           wait_options options = {}) {
  const stream_memory_op op = stream_memory_op::wait(flag, value, options);
  return detail::add_memory_ops_node(builder, &op, 1);
}

/// @brief Adds a node that writes @p value to the first element of @p flag (`cuGraphAddBatchMemOpNode`
/// with one write).
/// @return the new node (also the builder's only dependency from now on)
template <class T>
requires stream_flag_value<T> stream_memory_ops_node write_value(graph_builder& builder, device_span<T> flag,
                                                                 std::type_identity_t<T> value) {
  const stream_memory_op op = stream_memory_op::write(flag, value);
  return detail::add_memory_ops_node(builder, &op, 1);
}

/// @brief Adds one node running @p ops in order (`cuGraphAddBatchMemOpNode`; at most 255 operations).
/// @return the new node (also the builder's only dependency from now on)
inline stream_memory_ops_node batch_memory_ops(graph_builder& builder, std::span<const stream_memory_op> ops) {
  return detail::add_memory_ops_node(builder, ops.data(), ops.size());
}

/// @brief As the span form, for a braced list.
inline stream_memory_ops_node batch_memory_ops(graph_builder& builder, std::initializer_list<stream_memory_op> ops) {
  return detail::add_memory_ops_node(builder, ops.begin(), ops.size());
}

}  // namespace cudrv
