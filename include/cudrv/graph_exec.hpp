/// @file graph_exec.hpp
/// @brief Executable graphs: @ref cudrv::graph_exec (instantiate, upload, launch, update).
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
  none = 0,                                                       ///< No flag.
  auto_free_on_launch = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,  ///< Free unfreed graph allocations before each launch.
  upload = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,                    ///< Upload at instantiation (see @ref graph_exec::upload).
  device_launch = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,      ///< Launchable from device code.
  use_node_priority = CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY,  ///< Honour per-node priorities.
};

/// @brief Combines two sets of flags.
constexpr graph_instantiate_flags operator|(graph_instantiate_flags a, graph_instantiate_flags b) noexcept {
  return static_cast<graph_instantiate_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

/// @brief An executable graph (`CUgraphExec`), made by `graph_ref::instantiate`. Move-only.
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
class graph_exec {
 public:
  /// @brief Adopts a `CUgraphExec` instantiated in context @p ctx (updates run there).
  [[nodiscard]] static graph_exec from_native_handle(CUgraphExec handle, context_ref ctx) noexcept {
    return graph_exec(handle, detail::context_token::of(ctx.native_handle()));
  }
  graph_exec(const graph_exec&) = delete;
  graph_exec& operator=(const graph_exec&) = delete;
  /// @brief Takes over @p other's executable.
  graph_exec(graph_exec&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)),
        ctx_(std::exchange(other.ctx_, {})),
        kept_(std::exchange(other.kept_, {})) {}
  /// @brief Destroys the current executable, then takes over @p other's.
  graph_exec& operator=(graph_exec&& other) noexcept;
  /// @brief Destroys the executable; errors go to the destruction handler. When its context was
  /// destroyed first (which destroyed the executable), nothing is destroyed and the handler is told.
  ~graph_exec();

  /// @brief The `CUgraphExec`.
  [[nodiscard]] CUgraphExec native_handle() const noexcept { return handle_; }
  /// @brief The context it was instantiated in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(ctx_.handle); }
  /// @brief Gives up ownership.
  [[nodiscard]] CUgraphExec release() noexcept;
  /// @brief Destroys the executable now; the object becomes empty.
  void reset() noexcept;
  /// @brief Whether the object owns an executable (false once moved from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != nullptr; }

  /// @brief Launches the graph on @p stream (`cuGraphLaunch`).
  void launch(stream_ref stream) const;
  /// @brief Uploads the graph's resources ahead of its first launch (`cuGraphUpload`).
  void upload(stream_ref stream) const;
  /// @brief Updates the executable to match @p g, which must have the same topology
  /// (`cuGraphExecUpdate`).
  /// @throws graph_update_error saying why the driver refused (topology, node type, function, ...)
  ///   and naming the node involved
  void update(graph_ref g) const;

  /// @brief Changes the kernel, shape and arguments of kernel node @p node in this executable
  /// (`cuGraphExecKernelNodeSetParams`); the graph it came from is unchanged (and must still exist:
  /// @p node is its handle). Same checks and conversions as `cudrv::launch`; the node keeps its launch
  /// attributes, so a @p config with any (cluster, cooperative, priority, programmatic stream
  /// serialization) is refused.
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

 private:
  void set_fill_raw(memset_node node, context_ref ctx, std::uintptr_t dst, std::size_t count, std::uint32_t pattern,
                    std::size_t element_size) const;
  void set_kernel_raw(graph_node_ref node, context_ref ctx, const launch_config& config, CUkernel kernel,
                      void** args, const detail::kernel_signature* signature);
  void set_copy_raw(graph_node_ref node, context_ref ctx, const detail::linear_copy& c) const;

  graph_exec(CUgraphExec handle, detail::context_token ctx) noexcept : handle_(handle), ctx_(ctx) {}
  friend class graph_base;
  CUgraphExec handle_;
  detail::context_token ctx_;
  std::vector<detail::library_state*> kept_;  // libraries of kernels set with set_kernel_node (references)
};

}  // namespace cudrv
