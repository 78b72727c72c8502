/// @file texture.hpp
/// @brief Texture and surface objects: typed resource descriptions (@ref cudrv::texture_resource),
/// sampler descriptions (@ref cudrv::sampler_description), the owning @ref cudrv::texture_object and
/// @ref cudrv::surface_object, and their views, which kernels take by value.
///
/// A kernel declares a `cudaTextureObject_t` (or `cudaSurfaceObject_t`) parameter, a 64-bit handle;
/// on the host, the views @ref cudrv::texture_object_ref and @ref cudrv::surface_object_ref are that
/// handle and nothing else, so they are passed to @ref cudrv::launch as they are, and owners convert to
/// them for typed kernels:
/// @code
/// auto k = lib.get_kernel<void(cudrv::texture_object_ref, float*, int)>("sample");
/// cudrv::texture_object tex(img, {.address = {cudrv::address_mode::clamp, cudrv::address_mode::clamp},
///                                 .filter = cudrv::filter_mode::linear, .normalized_coordinates = true});
/// cudrv::launch(stream, cfg, k, tex, out.get(), n);          // typed: the owner converts
/// cudrv::launch(stream, cfg, untyped, tex.view(), out.get(), n);  // untyped: pass the view
/// @endcode
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cudrv/array.hpp"
#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/pitched_buffer.hpp"
#include "cudrv/span.hpp"

namespace cudrv {

// --- resources ------------------------------------------------------------------------------------------

/// @brief What a texture reads or a surface writes: an array, a mipmapped array, linear device memory
/// (a @ref device_span or @ref device_buffer) or pitched 2-D device memory (a @ref pitched_span or
/// @ref pitched_buffer), with its element format. Trivially copyable; it views what it describes.
///
/// It converts implicitly from each of them, and refuses temporary owners: the texture would read
/// memory destroyed at the end of the statement (`cudrv::texture_object t(cudrv::array<float>(...))`
/// does not compile). Views (`array_ref`, `device_span`, ...) are taken as views: what they view must
/// outlive the texture.
class texture_resource {
 public:
  /// @brief An array (CU_RESOURCE_TYPE_ARRAY).
  template <class T>
  texture_resource(array_ref<T> a) noexcept  // NOLINT: implicit on purpose
      : format_(a.format()), flags_(a.flags()), context_(a.context_handle()) {
    desc_.resType = CU_RESOURCE_TYPE_ARRAY;
    desc_.res.array.hArray = a.native_handle();
  }
  /// @brief An array owner (it must outlive the texture).
  template <class T>
  texture_resource(const array<T>& a) noexcept : texture_resource(a.view()) {}  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary array would be destroyed at the end of the statement.
  template <class T>
  texture_resource(array<T>&&) = delete;
  /// @}

  /// @brief A mipmapped array (CU_RESOURCE_TYPE_MIPMAPPED_ARRAY).
  template <class T>
  texture_resource(mipmapped_array_ref<T> m) noexcept  // NOLINT: implicit on purpose
      : format_(m.description().format), flags_(m.description().flags), context_(m.context_handle()) {
    desc_.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    desc_.res.mipmap.hMipmappedArray = m.native_handle();
  }
  /// @brief A mipmapped array owner (it must outlive the texture).
  template <class T>
  texture_resource(const mipmapped_array<T>& m) noexcept  // NOLINT: implicit on purpose
      : texture_resource(static_cast<mipmapped_array_ref<T>>(m)) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary array would be destroyed at the end of the statement.
  template <class T>
  texture_resource(mipmapped_array<T>&&) = delete;
  /// @}

  /// @brief Linear device memory of elements @p T (CU_RESOURCE_TYPE_LINEAR), read with `tex1Dfetch`.
  template <class T>
  requires array_element<std::remove_cv_t<T>> texture_resource(device_span<T> s)
  noexcept  // NOLINT: implicit on purpose
      : format_(array_format_of<std::remove_cv_t<T>>) {
    desc_.resType = CU_RESOURCE_TYPE_LINEAR;
    desc_.res.linear.devPtr = s.data();
    desc_.res.linear.format = format_.format;
    desc_.res.linear.numChannels = format_.channels;
    desc_.res.linear.sizeInBytes = s.size() * sizeof(T);
  }
  /// @brief A device buffer's memory (it must outlive the texture).
  template <class T>
  requires array_element<T> texture_resource(const device_buffer<T>& b)
  noexcept  // NOLINT: implicit on purpose
      : texture_resource(b.view()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary buffer would be freed at the end of the statement.
  template <class T>
  texture_resource(device_buffer<T>&&) = delete;
  /// @}

  /// @brief Pitched 2-D device memory (CU_RESOURCE_TYPE_PITCH2D); its depth must be 1.
  template <class T>
  requires array_element<std::remove_cv_t<T>> texture_resource(pitched_span<T> p)
  noexcept  // NOLINT: implicit on purpose
      : format_(array_format_of<std::remove_cv_t<T>>), depth_(p.depth) {
    desc_.resType = CU_RESOURCE_TYPE_PITCH2D;
    desc_.res.pitch2D.devPtr = static_cast<CUdeviceptr>(p.address);
    desc_.res.pitch2D.format = format_.format;
    desc_.res.pitch2D.numChannels = format_.channels;
    desc_.res.pitch2D.width = p.width;
    desc_.res.pitch2D.height = p.height;
    desc_.res.pitch2D.pitchInBytes = p.pitch;
  }
  /// @brief A pitched buffer's memory (it must outlive the texture).
  template <class T>
  requires array_element<T> texture_resource(const pitched_buffer<T>& b)
  noexcept  // NOLINT: implicit on purpose
      : texture_resource(b.view()) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary buffer would be freed at the end of the statement.
  template <class T>
  texture_resource(pitched_buffer<T>&&) = delete;
  /// @}

  /// @brief Untyped linear memory: @p bytes at @p address, elements of @p format.
  [[nodiscard]] static texture_resource linear(CUdeviceptr address, const array_format& format,
                                               std::size_t bytes) noexcept {
    texture_resource r(format);
    r.desc_.resType = CU_RESOURCE_TYPE_LINEAR;
    r.desc_.res.linear.devPtr = address;
    r.desc_.res.linear.format = format.format;
    r.desc_.res.linear.numChannels = format.channels;
    r.desc_.res.linear.sizeInBytes = bytes;
    return r;
  }
  /// @brief Untyped pitched 2-D memory: @p height rows of @p width elements of @p format, @p pitch bytes apart.
  [[nodiscard]] static texture_resource pitch2d(CUdeviceptr address, const array_format& format, std::size_t width,
                                                std::size_t height, std::size_t pitch) noexcept {
    texture_resource r(format);
    r.desc_.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.desc_.res.pitch2D.devPtr = address;
    r.desc_.res.pitch2D.format = format.format;
    r.desc_.res.pitch2D.numChannels = format.channels;
    r.desc_.res.pitch2D.width = width;
    r.desc_.res.pitch2D.height = height;
    r.desc_.res.pitch2D.pitchInBytes = pitch;
    return r;
  }

  /// @brief The driver's description.
  [[nodiscard]] const CUDA_RESOURCE_DESC& native() const noexcept { return desc_; }
  /// @brief The resource type (array, mipmapped array, linear, pitch 2-D).
  [[nodiscard]] CUresourcetype type() const noexcept { return desc_.resType; }
  /// @brief The element format.
  [[nodiscard]] const array_format& format() const noexcept { return format_; }
  /// @brief The flags of an array resource (surfaces need @ref array_flags::surface_load_store).
  [[nodiscard]] array_flags flags() const noexcept { return flags_; }
  /// @brief The context of an array resource made by cudrv; null for memory (its context is found
  /// from the address) and adopted handles.
  [[nodiscard]] CUcontext context_handle() const noexcept { return context_; }
  /// @brief Slices of a pitched layout (must be 1 for a texture).
  [[nodiscard]] std::size_t depth() const noexcept { return depth_; }

 private:
  explicit texture_resource(const array_format& format) noexcept : format_(format) {}
  CUDA_RESOURCE_DESC desc_{};
  array_format format_{};
  array_flags flags_ = array_flags::none;
  CUcontext context_ = nullptr;
  std::size_t depth_ = 1;
};

// --- samplers -------------------------------------------------------------------------------------------

/// @brief What a texture read outside [0, 1) (normalised) or [0, size) does, per dimension.
/// The values are not the driver's: `clamp` is 0, so that the dimensions a braced list leaves out
/// (`.address = {cudrv::address_mode::border}`) clamp, as the defaults do, instead of wrapping.
enum class address_mode : int {
  clamp = 0,   ///< Clamp to the edge element (CU_TR_ADDRESS_MODE_CLAMP).
  wrap = 1,    ///< Repeat (normalised coordinates only; CU_TR_ADDRESS_MODE_WRAP).
  mirror = 2,  ///< Repeat mirrored (normalised coordinates only; CU_TR_ADDRESS_MODE_MIRROR).
  border = 3,  ///< Return the border colour (CU_TR_ADDRESS_MODE_BORDER).
};

/// @brief How a texture read between elements (or between mipmap levels) is filtered.
enum class filter_mode : int {
  point = CU_TR_FILTER_MODE_POINT,    ///< The nearest element.
  linear = CU_TR_FILTER_MODE_LINEAR,  ///< Linear interpolation of the neighbours (float results only).
};

/// @brief What a texture read returns.
enum class read_mode {
  element_type,      ///< The element as stored (integers as integers).
  normalized_float,  ///< 8- and 16-bit integers as floats in [0, 1] (unsigned) or [-1, 1] (signed).
};

/// @brief How a texture is sampled: addressing per dimension, filtering, read mode, coordinates and
/// mipmapping. The defaults are the driver's (clamp, point, element type, unnormalised coordinates).
/// @code
/// cudrv::sampler_description bilinear{
///     .address = {cudrv::address_mode::clamp, cudrv::address_mode::clamp},
///     .filter = cudrv::filter_mode::linear,
///     .normalized_coordinates = true};
/// @endcode
struct sampler_description {
  /// @brief The address mode of each dimension (x, y, z).
  address_mode address[3] = {address_mode::clamp, address_mode::clamp, address_mode::clamp};
  filter_mode filter = filter_mode::point;           ///< Filtering between elements.
  read_mode read = read_mode::element_type;          ///< What a read returns.
  bool normalized_coordinates = false;               ///< Coordinates in [0, 1) instead of [0, size).
  bool srgb = false;                                 ///< sRGB to linear conversion of 8-bit reads.
  float border_color[4] = {0.0f, 0.0f, 0.0f, 0.0f};  ///< The colour of @ref address_mode::border.
  filter_mode mipmap_filter = filter_mode::point;    ///< Filtering between mipmap levels.
  float mipmap_level_bias = 0.0f;                    ///< Added to the level the hardware computes.
  float min_mipmap_level_clamp = 0.0f;               ///< The finest level read.
  float max_mipmap_level_clamp = 0.0f;               ///< The coarsest level read.
  unsigned int max_anisotropy = 0;                   ///< 0 or 1: off; up to 16.
  bool seamless_cubemap = false;                     ///< Filter across cube-map face edges.
  bool disable_trilinear_optimization = false;       ///< Exact trilinear filtering between levels.
};

/// @brief The driver's texture description for @p sampler reading elements of @p format from a
/// resource of type @p type, after cudrv's checks.
/// @throws invalid_argument_error for a combination the hardware cannot do: linear filtering of
///   integers read as integers, @ref read_mode::normalized_float of 32-bit integers,
///   wrap or mirror addressing with unnormalised coordinates, filtering or normalised coordinates of
///   linear memory, or an anisotropy above 16
[[nodiscard]] CUDA_TEXTURE_DESC native_texture_description(const sampler_description& sampler,
                                                           const array_format& format,
                                                           CUresourcetype type = CU_RESOURCE_TYPE_ARRAY);

/// @brief An optional reinterpretation of the resource a texture reads (CUDA_RESOURCE_VIEW_DESC): a
/// format, extents, and a range of mipmap levels and layers.
struct resource_view_description {
  CUresourceViewFormat format = CU_RES_VIEW_FORMAT_NONE;  ///< The format to read the elements as.
  std::size_t width = 0;                                  ///< Width of the view.
  std::size_t height = 0;                                 ///< Height of the view.
  std::size_t depth = 0;                                  ///< Depth of the view.
  unsigned int first_mipmap_level = 0;                    ///< The finest level.
  unsigned int last_mipmap_level = 0;                     ///< The coarsest level.
  unsigned int first_layer = 0;                           ///< The first layer.
  unsigned int last_layer = 0;                            ///< The last layer.
};

// --- texture objects ------------------------------------------------------------------------------------

namespace detail {
/// @brief Creates a texture object after the checks (internal).
CUtexObject create_texture(const texture_resource& r, const sampler_description& s, const resource_view_description* v,
                           context_token* ctx);
/// @brief Creates a surface object after the checks (internal).
CUsurfObject create_surface(const texture_resource& r, context_token* ctx);
/// @brief Destroys a texture object, or reports that its context went first (internal).
void destroy_texture(CUtexObject handle, const context_token& ctx) noexcept;
/// @brief Destroys a surface object, or reports that its context went first (internal).
void destroy_surface(CUsurfObject handle, const context_token& ctx) noexcept;
}  // namespace detail

/// @brief The handle every texture object has, shared by @ref cudrv::texture_object_ref and
/// @ref cudrv::texture_object.
class texture_object_base {
 public:
  /// @brief The raw handle (also usable as a `cudaTextureObject_t`); 0 for an empty owner.
  [[nodiscard]] constexpr CUtexObject native_handle() const noexcept { return handle_; }
  /// @brief Two handles are equal when they name the same texture object.
  [[nodiscard]] friend constexpr bool operator==(const texture_object_base& a, const texture_object_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle.
  constexpr explicit texture_object_base(CUtexObject handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the view).
  constexpr texture_object_base(const texture_object_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr texture_object_base& operator=(const texture_object_base&) noexcept = default;
  ~texture_object_base() = default;
  /// @brief The handle.
  CUtexObject handle_;
};

/// @brief A non-owning view of a texture object: the 64-bit handle alone, trivially copyable, so it is
/// a kernel argument for a `cudaTextureObject_t` parameter (typed or untyped launches).
class texture_object_ref : public texture_object_base {
 public:
  /// @brief Views @p handle.
  constexpr explicit texture_object_ref(CUtexObject handle) noexcept : texture_object_base(handle) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  texture_object_ref(std::nullptr_t) = delete;
  texture_object_ref(int) = delete;
  /// @}
  /// @brief Views the same texture as @p other.
  constexpr texture_object_ref(const texture_object_ref& other) noexcept = default;
  /// @brief Views the texture @p other views.
  constexpr texture_object_ref& operator=(const texture_object_ref& other) noexcept = default;
  /// @brief Views an existing texture object (the same as the constructor).
  [[nodiscard]] static constexpr texture_object_ref from_native_handle(CUtexObject handle) noexcept {
    return texture_object_ref(handle);
  }
};

/// @brief An owning texture object (cuTexObjectCreate / cuTexObjectDestroy): a resource read through a
/// sampler. Move-only; converts to @ref texture_object_ref (only as an lvalue: a view of a temporary
/// texture would be destroyed before the kernel reads it).
///
/// It is made in the context of its resource (the array's, or the one owning the memory), else the
/// current one. What it reads must outlive it: temporary owners are refused at compile time.
/// @code
/// cudrv::array<float> img(dev, cudrv::array_shape::two_d(w, h));
/// cudrv::copy(img, host, stream);
/// cudrv::texture_object tex(img, {.filter = cudrv::filter_mode::linear, .normalized_coordinates = true});
/// cudrv::launch(stream, cfg, kernel, tex.view(), out.get());
/// @endcode
class texture_object : public texture_object_base {
 public:
  /// @brief Makes a texture reading @p resource through @p sampler.
  /// @throws invalid_argument_error for a sampler the resource's format cannot use (see
  ///   @ref native_texture_description), a pitched resource of more than one slice, or no context
  explicit texture_object(const texture_resource& resource, const sampler_description& sampler = {})
      : texture_object_base(0) {
    handle_ = detail::create_texture(resource, sampler, nullptr, &context_);
  }
  /// @brief Makes a texture reading @p resource through @p sampler, reinterpreted by @p view.
  texture_object(const texture_resource& resource, const sampler_description& sampler,
                 const resource_view_description& view)
      : texture_object_base(0) {
    handle_ = detail::create_texture(resource, sampler, &view, &context_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  texture_object(const texture_object&) = delete;
  texture_object& operator=(const texture_object&) = delete;
  /// @}
  /// @brief Takes over @p other's texture; @p other becomes empty.
  texture_object(texture_object&& other) noexcept
      : texture_object_base(cudrv::detail::exchange(other.handle_, 0)),
        context_(cudrv::detail::exchange(other.context_, {})) {}
  /// @brief Destroys the held texture, then takes over @p other's.
  texture_object& operator=(texture_object&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = cudrv::detail::exchange(other.handle_, 0);
      context_ = cudrv::detail::exchange(other.context_, {});
    }
    return *this;
  }
  /// @brief Destroys the texture; errors go to the destruction handler.
  ~texture_object() { reset(); }

  /// @brief Takes ownership of @p handle, a texture object made in @p ctx.
  [[nodiscard]] static texture_object from_native_handle(CUtexObject handle, context_ref ctx) noexcept {
    return texture_object(handle, detail::context_token::of(ctx.native_handle()));
  }
  /// @brief Gives up ownership; the caller must destroy the returned texture object.
  [[nodiscard]] CUtexObject release() noexcept {
    context_ = {};
    return cudrv::detail::exchange(handle_, 0);
  }
  /// @brief Destroys the texture now; the object becomes empty.
  void reset() noexcept {
    if (handle_ != 0) {
      detail::destroy_texture(cudrv::detail::exchange(handle_, 0), cudrv::detail::exchange(context_, {}));
    }
  }
  /// @brief Whether this object holds a texture.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != 0; }
  /// @brief A view, the kernel argument.
  operator texture_object_ref() const& noexcept { return texture_object_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary texture.
  operator texture_object_ref() const&& = delete;
  /// @}
  /// @brief A view, the kernel argument (for untyped launches, which take arguments as they are).
  [[nodiscard]] texture_object_ref view() const& noexcept { return texture_object_ref(handle_); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary texture.
  texture_object_ref view() const&& = delete;
  /// @}
  /// @brief The context the texture was made in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(context_.handle); }

 private:
  texture_object(CUtexObject handle, detail::context_token ctx) noexcept : texture_object_base(handle), context_(ctx) {}
  detail::context_token context_;
};

// --- surface objects ------------------------------------------------------------------------------------

/// @brief The handle every surface object has, shared by @ref cudrv::surface_object_ref and
/// @ref cudrv::surface_object.
class surface_object_base {
 public:
  /// @brief The raw handle (also usable as a `cudaSurfaceObject_t`); 0 for an empty owner.
  [[nodiscard]] constexpr CUsurfObject native_handle() const noexcept { return handle_; }
  /// @brief Two handles are equal when they name the same surface object.
  [[nodiscard]] friend constexpr bool operator==(const surface_object_base& a, const surface_object_base& b) noexcept {
    return a.handle_ == b.handle_;
  }

 protected:
  /// @brief Holds @p handle.
  constexpr explicit surface_object_base(CUsurfObject handle) noexcept : handle_(handle) {}
  /// @brief Copies the handle (for the view).
  constexpr surface_object_base(const surface_object_base&) noexcept = default;
  /// @brief Copies the handle (for the view).
  constexpr surface_object_base& operator=(const surface_object_base&) noexcept = default;
  ~surface_object_base() = default;
  /// @brief The handle.
  CUsurfObject handle_;
};

/// @brief A non-owning view of a surface object: the 64-bit handle alone, a kernel argument for a
/// `cudaSurfaceObject_t` parameter.
class surface_object_ref : public surface_object_base {
 public:
  /// @brief Views @p handle.
  constexpr explicit surface_object_ref(CUsurfObject handle) noexcept : surface_object_base(handle) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  surface_object_ref(std::nullptr_t) = delete;
  surface_object_ref(int) = delete;
  /// @}
  /// @brief Views the same surface as @p other.
  constexpr surface_object_ref(const surface_object_ref& other) noexcept = default;
  /// @brief Views the surface @p other views.
  constexpr surface_object_ref& operator=(const surface_object_ref& other) noexcept = default;
  /// @brief Views an existing surface object (the same as the constructor).
  [[nodiscard]] static constexpr surface_object_ref from_native_handle(CUsurfObject handle) noexcept {
    return surface_object_ref(handle);
  }
};

/// @brief An owning surface object (cuSurfObjectCreate / cuSurfObjectDestroy): an array that kernels
/// read and write with `surf2Dread` / `surf2Dwrite` (x in bytes). The array needs
/// @ref array_flags::surface_load_store and must outlive the surface. Move-only; converts to
/// @ref surface_object_ref.
/// @code
/// cudrv::array<float> out(dev, cudrv::array_shape::two_d(w, h), cudrv::array_flags::surface_load_store);
/// cudrv::surface_object surf(out);
/// cudrv::launch(stream, cfg, kernel, surf.view(), w, h);
/// @endcode
class surface_object : public surface_object_base {
 public:
  /// @brief Makes a surface over the array @p resource (an array or a mipmapped array's level).
  /// @throws invalid_argument_error when @p resource is not an array, or lacks
  ///   @ref array_flags::surface_load_store
  explicit surface_object(const texture_resource& resource) : surface_object_base(0) {
    handle_ = detail::create_surface(resource, &context_);
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  surface_object(const surface_object&) = delete;
  surface_object& operator=(const surface_object&) = delete;
  /// @}
  /// @brief Takes over @p other's surface; @p other becomes empty.
  surface_object(surface_object&& other) noexcept
      : surface_object_base(cudrv::detail::exchange(other.handle_, 0)),
        context_(cudrv::detail::exchange(other.context_, {})) {}
  /// @brief Destroys the held surface, then takes over @p other's.
  surface_object& operator=(surface_object&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = cudrv::detail::exchange(other.handle_, 0);
      context_ = cudrv::detail::exchange(other.context_, {});
    }
    return *this;
  }
  /// @brief Destroys the surface; errors go to the destruction handler.
  ~surface_object() { reset(); }

  /// @brief Takes ownership of @p handle, a surface object made in @p ctx.
  [[nodiscard]] static surface_object from_native_handle(CUsurfObject handle, context_ref ctx) noexcept {
    return surface_object(handle, detail::context_token::of(ctx.native_handle()));
  }
  /// @brief Gives up ownership; the caller must destroy the returned surface object.
  [[nodiscard]] CUsurfObject release() noexcept {
    context_ = {};
    return cudrv::detail::exchange(handle_, 0);
  }
  /// @brief Destroys the surface now; the object becomes empty.
  void reset() noexcept {
    if (handle_ != 0) {
      detail::destroy_surface(cudrv::detail::exchange(handle_, 0), cudrv::detail::exchange(context_, {}));
    }
  }
  /// @brief Whether this object holds a surface.
  [[nodiscard]] explicit operator bool() const noexcept { return handle_ != 0; }
  /// @brief A view, the kernel argument.
  operator surface_object_ref() const& noexcept { return surface_object_ref(handle_); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary surface.
  operator surface_object_ref() const&& = delete;
  /// @}
  /// @brief A view, the kernel argument (for untyped launches).
  [[nodiscard]] surface_object_ref view() const& noexcept { return surface_object_ref(handle_); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary surface.
  surface_object_ref view() const&& = delete;
  /// @}
  /// @brief The context the surface was made in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(context_.handle); }

 private:
  surface_object(CUsurfObject handle, detail::context_token ctx) noexcept
      : surface_object_base(handle), context_(ctx) {}
  detail::context_token context_;
};

}  // namespace cudrv
