// Texture and surface objects: descriptions checked before the driver sees them, creation in the
// resource's context, destruction in it.
#include "cudrv/texture.hpp"

#include <optional>
#include <string>
#include <type_traits>

#include "cudrv/error.hpp"
#include "driver/driver_api.hpp"
#include "memory/array_support.hpp"
#include "memory/memory_support.hpp"

namespace cudrv {

// What the header promises about these types, checked here rather than in every translation unit
// that includes it (docs/design.md, "Header cost").
static_assert(std::is_trivially_copyable_v<texture_object_ref> && sizeof(texture_object_ref) == sizeof(CUtexObject),
              "a texture_object_ref is a kernel argument: the handle and nothing else");
static_assert(std::is_trivially_copyable_v<surface_object_ref> && sizeof(surface_object_ref) == sizeof(CUsurfObject),
              "a surface_object_ref is a kernel argument: the handle and nothing else");

namespace {

const char* mode_name(address_mode m) {
  switch (m) {
    case address_mode::wrap: return "wrap";
    case address_mode::clamp: return "clamp";
    case address_mode::mirror: return "mirror";
    case address_mode::border: return "border";
  }
  return "unknown";
}

std::string format_text(const array_format& f) {
  return std::to_string(f.channels) + " channel(s) of CUarray_format " + std::to_string(static_cast<int>(f.format));
}

// The device limits of linear and pitched resources: alignment of the address and pitch, extents.
void check_memory_limits(const char* api, const texture_resource& r) {
  CUdevice dev = 0;
  detail::check(detail::drv::cuCtxGetDevice(&dev), "cuCtxGetDevice");
  auto attribute = [&](CUdevice_attribute a, const char* name) {
    int v = 0;
    detail::check(detail::drv::cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute",
                  [&] { return std::string(name); });
    return static_cast<std::size_t>(v > 0 ? v : 0);
  };
  auto refuse = [&](const std::string& what, std::size_t value, std::size_t limit, const char* name,
                    const char* relation) {
    throw invalid_argument_error(api, what + " " + std::to_string(value) + " " + relation + " " +
                                          std::to_string(limit) + " (" + name + ", device " +
                                          std::to_string(static_cast<int>(dev)) + ")");
  };
  const CUDA_RESOURCE_DESC& d = r.native();
  const CUdeviceptr address = d.resType == CU_RESOURCE_TYPE_LINEAR ? d.res.linear.devPtr : d.res.pitch2D.devPtr;
  if (const std::size_t align =
          attribute(CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, "CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT");
      align != 0 && address % align != 0) {
    throw invalid_argument_error(api, "the address " + detail::format_address(address) +
                                          " is not a multiple of the texture alignment of " + std::to_string(align) +
                                          " bytes (CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, device " +
                                          std::to_string(static_cast<int>(dev)) + ")");
  }
  const std::size_t element = r.format().element_size();
  if (d.resType == CU_RESOURCE_TYPE_LINEAR) {
    const std::size_t max = attribute(CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH,
                                      "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH");
    if (max != 0 && d.res.linear.sizeInBytes / element > max) {
      refuse("the linear texture of", d.res.linear.sizeInBytes / element, max,
             "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH", "elements exceeds the device's limit of");
    }
    return;
  }
  const std::size_t pitch_align =
      attribute(CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, "CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT");
  if (pitch_align != 0 && d.res.pitch2D.pitchInBytes % pitch_align != 0) {
    refuse("the pitch of", d.res.pitch2D.pitchInBytes, pitch_align, "CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT",
           "bytes is not a multiple of the pitch alignment of");
  }
  if (d.res.pitch2D.pitchInBytes < d.res.pitch2D.width * element) {
    throw invalid_argument_error(api, "the pitch of " + std::to_string(d.res.pitch2D.pitchInBytes) +
                                          " bytes is smaller than a row of " + std::to_string(d.res.pitch2D.width) +
                                          " elements");
  }
  const struct {
    std::size_t value;
    CUdevice_attribute attribute;
    const char* name;
    const char* what;
  } extents[] = {
      {d.res.pitch2D.width, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH,
       "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH", "the width of"},
      {d.res.pitch2D.height, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT,
       "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT", "the height of"},
      {d.res.pitch2D.pitchInBytes, CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH,
       "CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH", "the pitch of"},
  };
  for (const auto& e : extents) {
    const std::size_t max = attribute(e.attribute, e.name);
    if (max != 0 && e.value > max) {
      refuse(e.what, e.value, max, e.name, "exceeds the device's limit of");
    }
  }
}

// Runs create() in the resource's context: an array's, the one owning the memory, else the current
// one; *token names it.
template <class Create>
void in_resource_context(const char* api, const texture_resource& r, detail::context_token* token, Create&& create) {
  if (r.context_handle() != nullptr) {
    detail::run_in_context(r.context_handle(), api, [&] {
      *token = detail::context_token::of(r.context_handle());
      create();
    });
    return;
  }
  const CUDA_RESOURCE_DESC& d = r.native();
  std::optional<detail::synchronous_scope> scope;
  if (d.resType == CU_RESOURCE_TYPE_LINEAR || d.resType == CU_RESOURCE_TYPE_PITCH2D) {
    const auto address =
        static_cast<std::uintptr_t>(d.resType == CU_RESOURCE_TYPE_LINEAR ? d.res.linear.devPtr : d.res.pitch2D.devPtr);
    if (address == 0) {
      throw invalid_argument_error(api, "the memory view is null (a moved-from or released buffer?)");
    }
    scope.emplace(address, address);  // the context owning the memory, made current for the scope
  }
  CUcontext current = nullptr;
  detail::check(detail::drv::cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current == nullptr) {
    throw invalid_argument_error(api, "no context: the resource names none (an adopted array or memory the driver "
                                      "does not know) and none is current");
  }
  *token = detail::context_token::of(current);
  if (d.resType == CU_RESOURCE_TYPE_LINEAR || d.resType == CU_RESOURCE_TYPE_PITCH2D) {
    check_memory_limits(api, r);
  }
  create();
}

void check_resource(const char* api, const texture_resource& r) {
  const CUDA_RESOURCE_DESC& d = r.native();
  if ((d.resType == CU_RESOURCE_TYPE_ARRAY && d.res.array.hArray == nullptr) ||
      (d.resType == CU_RESOURCE_TYPE_MIPMAPPED_ARRAY && d.res.mipmap.hMipmappedArray == nullptr)) {
    throw invalid_argument_error(api, "the array is empty (a moved-from or released cudrv::array)");
  }
  if (r.format().element_size() == 0 ||
      (r.format().channels != 1 && r.format().channels != 2 && r.format().channels != 4)) {
    throw invalid_argument_error(api, "the resource's format (" + format_text(r.format()) +
                                          ") is not one textures read: 1, 2 or 4 channels of 8-, 16-, 32-bit "
                                          "integers, half or float");
  }
  if (d.resType == CU_RESOURCE_TYPE_PITCH2D && r.depth() != 1) {
    throw invalid_argument_error(api, "a pitched texture is 2-D: the pitched layout has " + std::to_string(r.depth()) +
                                          " slices (copy it into a 3-D array instead)");
  }
}

}  // namespace

CUDA_TEXTURE_DESC native_texture_description(const sampler_description& s, const array_format& format,
                                             CUresourcetype type) {
  const char* api = "cudrv::texture_object";
  const bool linear_filter = s.filter == filter_mode::linear || s.mipmap_filter == filter_mode::linear;
  if (format.is_integer() && s.read == read_mode::element_type && linear_filter) {
    throw invalid_argument_error(api, "linear filtering needs floating-point results: the elements (" +
                                          format_text(format) +
                                          ") are integers read as integers; use read_mode::normalized_float or "
                                          "filter_mode::point");
  }
  if (s.read == read_mode::normalized_float && format.is_integer() && array_format::channel_size(format.format) == 4) {
    throw invalid_argument_error(api, "read_mode::normalized_float reads 8- and 16-bit integers as floats; the "
                                      "elements are 32-bit integers (" +
                                          format_text(format) + ")");
  }
  if (!s.normalized_coordinates) {
    for (int i = 0; i < 3; ++i) {
      if (s.address[i] == address_mode::wrap || s.address[i] == address_mode::mirror) {
        throw invalid_argument_error(api, std::string("address_mode::") + mode_name(s.address[i]) + " (dimension " +
                                              std::to_string(i) +
                                              ") needs normalized_coordinates = true; unnormalised reads clamp");
      }
    }
  }
  if (type == CU_RESOURCE_TYPE_LINEAR && s.filter == filter_mode::linear) {
    throw invalid_argument_error(api, "a texture over linear memory (tex1Dfetch) reads single elements: it needs "
                                      "filter_mode::point");
  }
  if (s.max_anisotropy > 16) {
    throw invalid_argument_error(api, "max_anisotropy is at most 16, not " + std::to_string(s.max_anisotropy));
  }
  CUDA_TEXTURE_DESC t{};
  for (int i = 0; i < 3; ++i) {
    switch (s.address[i]) {
      case address_mode::wrap: t.addressMode[i] = CU_TR_ADDRESS_MODE_WRAP; break;
      case address_mode::mirror: t.addressMode[i] = CU_TR_ADDRESS_MODE_MIRROR; break;
      case address_mode::border: t.addressMode[i] = CU_TR_ADDRESS_MODE_BORDER; break;
      default: t.addressMode[i] = CU_TR_ADDRESS_MODE_CLAMP; break;
    }
  }
  t.filterMode = static_cast<CUfilter_mode>(s.filter);
  t.flags = 0;
  if (format.is_integer() && s.read == read_mode::element_type) {
    t.flags |= CU_TRSF_READ_AS_INTEGER;
  }
  if (s.normalized_coordinates) {
    t.flags |= CU_TRSF_NORMALIZED_COORDINATES;
  }
  if (s.srgb) {
    t.flags |= CU_TRSF_SRGB;
  }
  if (s.disable_trilinear_optimization) {
    t.flags |= CU_TRSF_DISABLE_TRILINEAR_OPTIMIZATION;
  }
  if (s.seamless_cubemap) {
    t.flags |= CU_TRSF_SEAMLESS_CUBEMAP;
  }
  t.maxAnisotropy = s.max_anisotropy;
  t.mipmapFilterMode = static_cast<CUfilter_mode>(s.mipmap_filter);
  t.mipmapLevelBias = s.mipmap_level_bias;
  t.minMipmapLevelClamp = s.min_mipmap_level_clamp;
  t.maxMipmapLevelClamp = s.max_mipmap_level_clamp;
  for (int i = 0; i < 4; ++i) {
    t.borderColor[i] = s.border_color[i];
  }
  return t;
}

namespace detail {

CUtexObject create_texture(const texture_resource& r, const sampler_description& s, const resource_view_description* v,
                           context_token* ctx) {
  const char* api = "cudrv::texture_object";
  check_resource(api, r);
  const CUDA_TEXTURE_DESC t = native_texture_description(s, r.format(), r.type());
  CUDA_RESOURCE_VIEW_DESC view{};
  if (v != nullptr) {
    view.format = v->format;
    view.width = v->width;
    view.height = v->height;
    view.depth = v->depth;
    view.firstMipmapLevel = v->first_mipmap_level;
    view.lastMipmapLevel = v->last_mipmap_level;
    view.firstLayer = v->first_layer;
    view.lastLayer = v->last_layer;
  }
  CUtexObject handle = 0;
  in_resource_context(api, r, ctx, [&] {
    check(drv::cuTexObjectCreate(&handle, &r.native(), &t, v != nullptr ? &view : nullptr), "cuTexObjectCreate", [&] {
      return "resource type " + std::to_string(static_cast<int>(r.type())) + ", " + format_text(r.format());
    });
  });
  return handle;
}

CUsurfObject create_surface(const texture_resource& r, context_token* ctx) {
  const char* api = "cudrv::surface_object";
  if (r.type() != CU_RESOURCE_TYPE_ARRAY) {
    throw invalid_argument_error(api, "a surface is made over an array (or one level of a mipmapped array), not "
                                      "resource type " +
                                          std::to_string(static_cast<int>(r.type())));
  }
  check_resource(api, r);
  if ((r.flags() & array_flags::surface_load_store) == array_flags::none) {
    throw invalid_argument_error(api, "the array was made without array_flags::surface_load_store");
  }
  CUsurfObject handle = 0;
  in_resource_context(api, r, ctx, [&] {
    check(drv::cuSurfObjectCreate(&handle, &r.native()), "cuSurfObjectCreate", [&] { return format_text(r.format()); });
  });
  return handle;
}

void destroy_texture(CUtexObject handle, const context_token& ctx) noexcept {
  destroy_in_context(ctx, "cudrv::texture_object", "texture object", "cuTexObjectDestroy",
                     [handle] { return drv::cuTexObjectDestroy(handle); });
}

void destroy_surface(CUsurfObject handle, const context_token& ctx) noexcept {
  destroy_in_context(ctx, "cudrv::surface_object", "surface object", "cuSurfObjectDestroy",
                     [handle] { return drv::cuSurfObjectDestroy(handle); });
}

}  // namespace detail
}  // namespace cudrv
