/// @file graph_exec.hpp
/// @brief Executable graphs: the owner @ref cudrv::graph_exec and the view @ref cudrv::graph_exec_ref
/// (instantiate, upload, launch, update).
///
/// Layer: execution (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <utility>
#include <vector>

#include "cudrv/graph.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

/// @brief Flags of `graph_ref::instantiate`; combine with `|`.
enum class graph_instantiate_flags : unsigned {
  none = 0,  ///< No flag.
  auto_free_on_launch =
      CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,  ///< Free unfreed graph allocations before each launch.
  upload = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,          ///< Upload at instantiation (see @ref graph_exec::upload).
  device_launch = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,          ///< Launchable from device code.
  use_node_priority = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,  ///< Honour per-node priorities.
};

/// @brief Combines two sets of flags.
constexpr graph_instantiate_flags operator|(graph_instantiate_flags a, graph_instantiate_flags b) noexcept {
  return static_cast<graph_instantiate_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

class graph_exec_ref;

/// @brief The handle of an executable graph instantiated for device launch, as a kernel takes it: a
/// kernel parameter of type `cudaGraphExec_t` receives it (same size and bits as the `CUgraphExec`),
/// and device code launches the graph with `cudaGraphLaunch(exec, cudaStreamGraphTailLaunch)` or
/// `cudaGraphLaunch(exec, cudaStreamGraphFireAndForget)` (the device runtime: see the page "Graphs",
/// "Launching graphs from the device").
///
/// Made by @ref graph_exec_base::device_handle, which refuses an executable not instantiated with
/// @ref graph_instantiate_flags::device_launch. Trivially copyable; it owns nothing: the
/// @ref graph_exec it came from must outlive every kernel that may still launch it.
class device_graph_exec {
 public:
  /// @brief Wraps a `CUgraphExec` the caller knows to be instantiated for device launch (not checked).
  constexpr explicit device_graph_exec(CUgraphExec handle) noexcept : handle_(handle) {}
  /// @brief The `CUgraphExec` (a `cudaGraphExec_t` in device code).
  [[nodiscard]] constexpr CUgraphExec native_handle() const noexcept { return handle_; }

 private:
  CUgraphExec handle_;
};

namespace detail {
/// @brief Whether cuGraphNodeSetEnabled accepts nodes of @p kind: kernel, memcpy and memset nodes only
/// (cuda.h, `cuGraphNodeSetEnabled`).
constexpr bool switchable_node_kind(graph_node_kind kind) noexcept {
  return kind == graph_node_kind::kernel || kind == graph_node_kind::memcpy || kind == graph_node_kind::memset;
}
}  // namespace detail

/// @brief The operations every executable-graph handle offers, shared by the view
/// @ref cudrv::graph_exec_ref and the owner @ref cudrv::graph_exec. Not constructible or assignable on
/// its own (see @ref cudrv::context_base).
class graph_exec_base {
 public:
  /// @brief The `CUgraphExec` (null in an empty owner).
  [[nodiscard]] CUgraphExec native_handle() const noexcept { return handle_; }
  /// @brief The context it was instantiated in (null when not known: an adopted handle without one).
  [[nodiscard]] context_ref context() const noexcept { return context_ref(ctx_); }

  /// @brief Launches the graph on @p stream (`cuGraphLaunch`).
  void launch(stream_ref stream) const;
  /// @brief Uploads the graph's resources ahead of its first launch (`cuGraphUpload`).
  void upload(stream_ref stream) const;
  /// @brief Updates the executable to match @p g, which must have the same topology
  /// (`cuGraphExecUpdate`).
  /// @throws graph_update_error saying why the driver refused (topology, node type, function, ...)
  ///   and naming the node involved
  void update(graph_ref g) const;

  /// @brief Changes the source, destination and size of memcpy node @p node (same kinds of memory).
  template <borrowed_linear_view Dst, borrowed_linear_view Src>
  void set_copy_node(memcpy_node node, context_ref ctx, Dst&& dst, Src&& src) const {
    set_copy_raw(node, ctx, detail::plan_copy(dst, src, nullptr));
  }
  /// @brief Changes the destination and value of memset node @p node (elements of 1, 2 or 4 bytes).
  template <borrowed_linear_view Dst>
  void set_fill_node(memset_node node, context_ref ctx, Dst&& dst, const detail::element_t<Dst>& value) const {
    using D = detail::element_t<Dst>;
    static_assert(!std::is_const_v<D>, "fill needs a view of non-const elements");
    static_assert(sizeof(D) == 1 || sizeof(D) == 2 || sizeof(D) == 4, "fill supports elements of 1, 2 or 4 bytes");
    auto d = detail::to_linear(dst);
    std::uint32_t pattern = 0;
    std::memcpy(&pattern, &value, sizeof(D));
    set_fill_raw(node, ctx, d.address, d.count, pattern, sizeof(D));
  }

  /// @brief Enables or disables @p node in this executable (`cuGraphNodeSetEnabled`): a disabled node
  /// does nothing at the next launches (as an empty node) until enabled again; its parameters are
  /// kept. Launches already enqueued are not affected.
  ///
  /// @p node is the node of the graph this executable was instantiated from (which must still exist:
  /// the node handle is its). Only kernel, memcpy and memset nodes can be switched: a typed handle of
  /// another kind does not compile, and an untyped one is refused before the driver.
  /// @code
  /// auto k = cudrv::launch(builder, config, kernel, out.get());
  /// cudrv::graph_exec exec = g.instantiate(dev);
  /// exec.set_enabled(k, false);   // the next launches skip the kernel
  /// exec.launch(stream);
  /// exec.set_enabled(k, true);
  /// @endcode
  /// @throws invalid_argument_error, before the driver, for an empty executable or node, a node of
  ///   another kind than kernel, memcpy or memset (named in the message), or, when the executable
  ///   knows its graph (made by `instantiate`), a node that is not a top-level node of that graph
  /// @throws error with the driver's code when the driver refuses the node
  ///
  /// The driver names a node by the node of the graph the executable was instantiated from, so that
  /// graph must still exist when this is called (its nodes, like every view, live only as long as it);
  /// cudrv reads the graph's node list for the check above.
  void set_enabled(graph_node_ref node, bool enabled) const;
  /// @brief Whether @p node is enabled in this executable (`cuGraphNodeGetEnabled`); same rules and
  /// checks as @ref set_enabled.
  [[nodiscard]] bool enabled(graph_node_ref node) const;

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the driver switches only kernel, memcpy and memset nodes.
  template <graph_node_kind Kind>
  requires(!detail::switchable_node_kind(Kind)) void set_enabled(typed_graph_node<Kind> node,
                                                                 bool enabled) const = delete;
  /// @brief Refused: the driver switches only kernel, memcpy and memset nodes.
  template <graph_node_kind Kind>
  requires(!detail::switchable_node_kind(Kind)) bool enabled(typed_graph_node<Kind> node) const = delete;
  /// @}

  /// @brief The flags the executable was instantiated with (`cuGraphExecGetFlags`).
  [[nodiscard]] graph_instantiate_flags flags() const;
  /// @brief The handle a kernel takes to launch this executable from the device (see
  /// @ref device_graph_exec).
  ///
  /// The executable must be uploaded before a kernel launches it: instantiate it with
  /// @ref graph_instantiate_flags::upload, call @ref upload, or launch it from the host once (after
  /// an @ref update, upload it again). It must not be launched from the host while a launch of it
  /// (from the host or the device) may still run, and it must outlive every kernel that may launch it.
  /// @throws invalid_argument_error for an empty executable, or one not instantiated with
  ///   @ref graph_instantiate_flags::device_launch (the driver's flags are asked: also for a view)
  [[nodiscard]] device_graph_exec device_handle() const;

  /// @brief Two handles are equal when they name the same executable (views and owners alike).
  [[nodiscard]] friend bool operator==(const graph_exec_base& a, const graph_exec_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle, instantiated in @p ctx (null: not known).
  graph_exec_base(CUgraphExec handle, CUcontext ctx) noexcept : handle_(handle), ctx_(ctx) {}
  /// @brief Copies the handle (for the view).
  graph_exec_base(const graph_exec_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  graph_exec_base& operator=(const graph_exec_base&) noexcept = default;
  ~graph_exec_base() = default;

  /// @brief The untyped work of @ref set_fill_node.
  void set_fill_raw(memset_node node, context_ref ctx, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                    std::size_t element_size) const;
  /// @brief The untyped work of @ref set_copy_node.
  void set_copy_raw(graph_node_ref node, context_ref ctx, const detail::linear_copy& c) const;

  CUgraphExec handle_;       ///< The executable; null only in an empty owner.
  CUcontext ctx_;            ///< The context updates run in; null: the current one.
  CUgraph source_{nullptr};  ///< The graph it was instantiated from; null: not known (adopted).
};

/// @brief A non-owning view of an executable graph. Trivially copyable; never destroys it.
///
/// A view launches, uploads and updates like the owner; @ref graph_exec::set_kernel_node is the
/// owner's alone, because the executable must keep the new kernel's library loaded and a view has
/// nowhere to hold that reference.
/// @code
/// void replay(cudrv::graph_exec_ref exec, cudrv::stream_ref s) { exec.launch(s); }
/// auto adopted = cudrv::graph_exec_ref::from_native_handle(raw, ctx);   // not owned
/// @endcode
class graph_exec_ref : public graph_exec_base {
 public:
  /// @brief Views @p handle; updates run in the context current at the call.
  explicit graph_exec_ref(CUgraphExec handle) noexcept : graph_exec_base(handle, nullptr) {}
  /// @brief Views @p handle, instantiated in @p ctx (updates run there).
  graph_exec_ref(CUgraphExec handle, context_ref ctx) noexcept : graph_exec_base(handle, ctx.native_handle()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  graph_exec_ref(std::nullptr_t) = delete;
  graph_exec_ref(int) = delete;
  /// @}
  /// @brief Views the same executable as @p other.
  graph_exec_ref(const graph_exec_ref& other) noexcept = default;
  /// @brief Views the executable @p other views.
  graph_exec_ref& operator=(const graph_exec_ref& other) noexcept = default;

  /// @brief Views an existing executable without owning it (same as the constructor).
  [[nodiscard]] static graph_exec_ref from_native_handle(CUgraphExec handle) noexcept { return graph_exec_ref(handle); }
  /// @brief Views an existing executable instantiated in @p ctx, without owning it.
  [[nodiscard]] static graph_exec_ref from_native_handle(CUgraphExec handle, context_ref ctx) noexcept {
    return graph_exec_ref(handle, ctx);
  }

 private:
  friend class graph_exec;  // its view carries the graph it was instantiated from
};

/// @brief An executable graph (`CUgraphExec`), made by `graph_ref::instantiate`. Move-only; converts
/// to @ref graph_exec_ref (from a named object only).
///
/// It belongs to the context it was instantiated in: updates run there; launches run on the given
/// stream.
///
/// @code
/// cudrv::graph_exec exec = g.instantiate();
/// exec.upload(stream);            // optional: moves the setup cost out of the first launch
/// for (int i = 0; i < 100; ++i) {
///   exec.launch(stream);
/// }
/// g2 = build_with_other_sizes();
/// exec.update(g2);                // same topology, new parameters; throws graph_update_error otherwise
/// @endcode
class graph_exec : public graph_exec_base {
 public:
  /// @brief Adopts a `CUgraphExec` instantiated in context @p ctx (updates run there).
  [[nodiscard]] static graph_exec from_native_handle(CUgraphExec handle, context_ref ctx) noexcept {
    return graph_exec(handle, detail::context_token::of(ctx.native_handle()));
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  /// @}
  /// @brief Takes over @p other's executable.
  graph_exec(graph_exec&& other) noexcept;
  /// @brief Destroys the current executable, then takes over @p other's.
  graph_exec& operator=(graph_exec&& other) noexcept;
  /// @brief Destroys the executable; errors go to the destruction handler. When its context was
  /// destroyed first (which destroyed the executable), nothing is destroyed and the handler is told.
  ~graph_exec();

  /// @brief Gives up ownership.
  [[nodiscard]] CUgraphExec release() noexcept;
  /// @brief Destroys the executable now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether the object owns an executable (false once moved from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }
  /// @brief A view, valid while this executable lives.
  operator graph_exec_ref() const& noexcept {  // NOLINT: implicit on purpose
    graph_exec_ref view(handle_, context_ref(ctx_));
    view.source_ = source_;
    return view;
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary executable would outlive it.
  operator graph_exec_ref() const&& = delete;
  /// @}

  /// @brief Changes the kernel, shape and arguments of kernel node @p node in this executable
  /// (`cuGraphExecKernelNodeSetParams`); the graph it came from is unchanged (and must still exist:
  /// @p node is its handle). Same checks and conversions as `cudrv::launch`; the node keeps its launch
  /// attributes (the driver's update carries none), so a @p config with any is refused: change them on
  /// the graph's node with `kernel_node::set_launch_attributes`, then @ref graph_exec_base::update the executable.
  /// @code
  /// auto node = cudrv::launch(builder, config, scale, x.get(), 2.0f, n);
  /// cudrv::graph_exec exec = g.instantiate();
  /// exec.set_kernel_node(node, ctx, config, scale, y.get(), 0.5f, n);   // next launches use these
  /// @endcode
  /// The executable keeps the new kernel's library loaded.
  template <class K, class... Args>
  requires kernel_handle<K>
  void set_kernel_node(kernel_node node, context_ref ctx, const launch_config& config, const K& kernel,
                       Args&&... args) {
    auto sink = [&](void** pointers) {
      set_kernel_raw(node, ctx, config, kernel.native_handle(), pointers, kernel.cached_signature());
    };
    detail::marshal(sink, kernel, detail::query_target{nullptr, ctx.native_handle()}, std::forward<Args>(args)...);
  }

 private:
  void set_kernel_raw(graph_node_ref node, context_ref ctx, const launch_config& config, CUkernel kernel, void** args,
                      const detail::kernel_signature* signature);

  graph_exec(CUgraphExec handle, detail::context_token ctx) noexcept;
  friend class graph_base;
  detail::context_token token_;               // the context's identity, checked before destruction
  std::vector<detail::library_state*> kept_;  // libraries of kernels set with set_kernel_node (references)
};

}  // namespace cudrv
