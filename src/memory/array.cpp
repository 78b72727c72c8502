// CUDA arrays and mipmapped arrays: creation against the device's limits, destruction in their
// context, and copies to and from them (cuMemcpy3DAsync).
#include "cudrv/array.hpp"

#include <bit>
#include <cstdio>
#include <string>

#include "cudrv/error.hpp"
#include "cudrv/pointer_attributes.hpp"
#include "driver/driver_api.hpp"
#include "memory/array_support.hpp"
#include "memory/memory_support.hpp"
#include "streams/nvtx_support.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace {

constexpr unsigned int kind_flags = CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP;
constexpr unsigned int known_flags = CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_TEXTURE_GATHER;

const char* kind_name(array_kind k) {
  switch (k) {
    case array_kind::one_d: return "1-D array";
    case array_kind::two_d: return "2-D array";
    case array_kind::three_d: return "3-D array";
    case array_kind::layered_one_d: return "layered 1-D array";
    case array_kind::layered_two_d: return "layered 2-D array";
    case array_kind::cubemap: return "cube map";
    case array_kind::cubemap_layered: return "layered cube map";
  }
  return "array";
}

bool is_layered(array_kind k) {
  return k == array_kind::layered_one_d || k == array_kind::layered_two_d || k == array_kind::cubemap_layered;
}
bool is_cube(array_kind k) { return k == array_kind::cubemap || k == array_kind::cubemap_layered; }

std::string describe(const array_description& d) {
  const array_shape& s = d.shape;
  std::string out = std::string(kind_name(s.kind)) + " of " + std::to_string(s.width);
  if (s.kind != array_kind::one_d && s.kind != array_kind::layered_one_d) {
    out += " x " + std::to_string(s.height);
  }
  if (s.kind == array_kind::three_d) {
    out += " x " + std::to_string(s.depth);
  }
  if (is_layered(s.kind)) {
    out += ", " + std::to_string(s.layers) + " layers";
  }
  out += ", " + std::to_string(d.format.channels) + " channel(s) of format " +
         std::to_string(static_cast<int>(d.format.format));
  return out;
}

std::string describe_format(const array_format& f) {
  return std::to_string(f.channels) + " channel(s) of CUarray_format " + std::to_string(static_cast<int>(f.format)) +
         " (" + std::to_string(f.element_size()) + " bytes)";
}

// The checks that need no device: format, the extents each kind needs, flags.
void check_description(const char* api, const array_description& d) {
  const array_format& f = d.format;
  if (array_format::channel_size(f.format) == 0) {
    throw invalid_argument_error(api, "CUarray_format " + std::to_string(static_cast<int>(f.format)) +
                                          " is not one cudrv describes (8-, 16- and 32-bit integers, half, float)");
  }
  if (f.channels != 1 && f.channels != 2 && f.channels != 4) {
    throw invalid_argument_error(api, "an element has 1, 2 or 4 channels, not " + std::to_string(f.channels));
  }
  const array_shape& s = d.shape;
  auto need = [&](std::size_t v, const char* what) {
    if (v == 0) {
      throw invalid_argument_error(api, std::string("a ") + kind_name(s.kind) + " needs a " + what +
                                            " of at least 1 (" + describe(d) + ")");
    }
  };
  need(s.width, "width");
  switch (s.kind) {
    case array_kind::one_d: break;
    case array_kind::two_d: need(s.height, "height"); break;
    case array_kind::three_d:
      need(s.height, "height");
      need(s.depth, "depth");
      break;
    case array_kind::layered_one_d: need(s.layers, "number of layers"); break;
    case array_kind::layered_two_d:
      need(s.height, "height");
      need(s.layers, "number of layers");
      break;
    case array_kind::cubemap:
    case array_kind::cubemap_layered:
      if (s.height != s.width) {
        throw invalid_argument_error(api, "the faces of a cube map are square: width " + std::to_string(s.width) +
                                              " and height " + std::to_string(s.height) + " differ");
      }
      if (s.kind == array_kind::cubemap_layered) {
        need(s.layers, "number of layers");
      }
      break;
    default: throw invalid_argument_error(api, "unknown array_kind " + std::to_string(static_cast<int>(s.kind)));
  }
  const auto bits = static_cast<unsigned int>(d.flags);
  if ((bits & ~known_flags) != 0) {
    char hex[16];
    std::snprintf(hex, sizeof(hex), "0x%x", bits & ~known_flags);
    throw invalid_argument_error(api, std::string("unknown array flags: bits ") + hex +
                                          " (known: surface_load_store, texture_gather; layers and cube maps are "
                                          "array_kind values)");
  }
  if ((bits & CUDA_ARRAY3D_TEXTURE_GATHER) != 0 && s.kind != array_kind::two_d) {
    throw invalid_argument_error(api, std::string("array_flags::texture_gather is for 2-D arrays, not a ") +
                                          kind_name(s.kind));
  }
}

struct limit {
  CUdevice_attribute attribute;
  const char* name;
};
#define CUDRV_LIMIT(a) \
  limit { CU_DEVICE_ATTRIBUTE_##a, "CU_DEVICE_ATTRIBUTE_" #a }

struct extent_limits {
  limit width{}, height{}, depth{};  // depth: layers for the layered kinds
};

// The limits of an array of this kind: for textures, surfaces or mipmaps.
extent_limits limits_of(array_kind kind, bool surface, bool gather, bool mipmapped) {
  if (surface) {
    switch (kind) {
      case array_kind::one_d: return {CUDRV_LIMIT(MAXIMUM_SURFACE1D_WIDTH)};
      case array_kind::two_d: return {CUDRV_LIMIT(MAXIMUM_SURFACE2D_WIDTH), CUDRV_LIMIT(MAXIMUM_SURFACE2D_HEIGHT)};
      case array_kind::three_d:
        return {CUDRV_LIMIT(MAXIMUM_SURFACE3D_WIDTH), CUDRV_LIMIT(MAXIMUM_SURFACE3D_HEIGHT),
                CUDRV_LIMIT(MAXIMUM_SURFACE3D_DEPTH)};
      case array_kind::layered_one_d:
        return {CUDRV_LIMIT(MAXIMUM_SURFACE1D_LAYERED_WIDTH), {}, CUDRV_LIMIT(MAXIMUM_SURFACE1D_LAYERED_LAYERS)};
      case array_kind::layered_two_d:
        return {CUDRV_LIMIT(MAXIMUM_SURFACE2D_LAYERED_WIDTH), CUDRV_LIMIT(MAXIMUM_SURFACE2D_LAYERED_HEIGHT),
                CUDRV_LIMIT(MAXIMUM_SURFACE2D_LAYERED_LAYERS)};
      case array_kind::cubemap: return {CUDRV_LIMIT(MAXIMUM_SURFACECUBEMAP_WIDTH)};
      case array_kind::cubemap_layered:
        return {CUDRV_LIMIT(MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH),
                {},
                CUDRV_LIMIT(MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS)};
    }
  }
  switch (kind) {
    case array_kind::one_d:
      return mipmapped ? extent_limits{CUDRV_LIMIT(MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH)}
                       : extent_limits{CUDRV_LIMIT(MAXIMUM_TEXTURE1D_WIDTH)};
    case array_kind::two_d:
      if (gather) {
        return {CUDRV_LIMIT(MAXIMUM_TEXTURE2D_GATHER_WIDTH), CUDRV_LIMIT(MAXIMUM_TEXTURE2D_GATHER_HEIGHT)};
      }
      return mipmapped ? extent_limits{CUDRV_LIMIT(MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH),
                                       CUDRV_LIMIT(MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT)}
                       : extent_limits{CUDRV_LIMIT(MAXIMUM_TEXTURE2D_WIDTH), CUDRV_LIMIT(MAXIMUM_TEXTURE2D_HEIGHT)};
    case array_kind::three_d:
      return {CUDRV_LIMIT(MAXIMUM_TEXTURE3D_WIDTH), CUDRV_LIMIT(MAXIMUM_TEXTURE3D_HEIGHT),
              CUDRV_LIMIT(MAXIMUM_TEXTURE3D_DEPTH)};
    case array_kind::layered_one_d:
      return {CUDRV_LIMIT(MAXIMUM_TEXTURE1D_LAYERED_WIDTH), {}, CUDRV_LIMIT(MAXIMUM_TEXTURE1D_LAYERED_LAYERS)};
    case array_kind::layered_two_d:
      return {CUDRV_LIMIT(MAXIMUM_TEXTURE2D_LAYERED_WIDTH), CUDRV_LIMIT(MAXIMUM_TEXTURE2D_LAYERED_HEIGHT),
              CUDRV_LIMIT(MAXIMUM_TEXTURE2D_LAYERED_LAYERS)};
    case array_kind::cubemap: return {CUDRV_LIMIT(MAXIMUM_TEXTURECUBEMAP_WIDTH)};
    case array_kind::cubemap_layered:
      return {CUDRV_LIMIT(MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH),
              {},
              CUDRV_LIMIT(MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS)};
  }
  return {};
}

// The first extent of d beyond a limit, as a message; empty when all fit. A limit the driver reports
// as 0 is not known and not checked.
std::string exceeded(const array_description& d, const extent_limits& l, CUdevice dev) {
  const array_shape& s = d.shape;
  const std::size_t third = s.kind == array_kind::three_d ? s.depth : s.layers;
  const struct {
    const limit& l;
    std::size_t value;
    const char* what;
  } checks[] = {{l.width, s.width, "width"},
                {l.height, s.height, "height"},
                {l.depth, third, s.kind == array_kind::three_d ? "depth" : "number of layers"}};
  for (const auto& c : checks) {
    if (c.l.name == nullptr) {
      continue;
    }
    int max = 0;
    detail::check(detail::drv::cuDeviceGetAttribute(&max, c.l.attribute, dev), "cuDeviceGetAttribute",
                  [&] { return std::string(c.l.name); });
    if (max > 0 && c.value > static_cast<std::size_t>(max)) {
      return std::string("the ") + c.what + " of " + std::to_string(c.value) + " exceeds the device's limit of " +
             std::to_string(max) + " for a " + kind_name(s.kind) + " (" + c.l.name + ", device " +
             std::to_string(static_cast<int>(dev)) + ")";
    }
  }
  return {};
}

// Checks d against the current context's device (texture limits, surface limits with surface
// load/store, and for 3-D arrays the alternate limits when the main ones are exceeded).
void check_limits(const char* api, const array_description& d, bool mipmapped) {
  CUdevice dev = 0;
  detail::check(detail::drv::cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const auto bits = static_cast<unsigned int>(d.flags);
  const bool gather = (bits & CUDA_ARRAY3D_TEXTURE_GATHER) != 0;
  std::string why = exceeded(d, limits_of(d.shape.kind, false, gather, mipmapped), dev);
  if (!why.empty() && d.shape.kind == array_kind::three_d) {
    const extent_limits alternate{CUDRV_LIMIT(MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE),
                                  CUDRV_LIMIT(MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE),
                                  CUDRV_LIMIT(MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE)};
    if (exceeded(d, alternate, dev).empty()) {
      why.clear();
    } else {
      why += " and the alternate 3-D limits (" + exceeded(d, alternate, dev) + ")";
    }
  }
  if (why.empty() && (bits & CUDA_ARRAY3D_SURFACE_LDST) != 0) {
    why = exceeded(d, limits_of(d.shape.kind, true, false, false), dev);
    if (!why.empty()) {
      why += " (array_flags::surface_load_store)";
    }
  }
  if (!why.empty()) {
    throw invalid_argument_error(api, why);
  }
}
#undef CUDRV_LIMIT

std::string on_device(CUcontext) {
  CUdevice dev = -1;
  if (detail::drv::cuCtxGetDevice(&dev) != CUDA_SUCCESS) {
    return {};
  }
  return " on device " + std::to_string(static_cast<int>(dev));
}

}  // namespace

CUDA_ARRAY3D_DESCRIPTOR array_description::native() const noexcept {
  CUDA_ARRAY3D_DESCRIPTOR n{};
  n.Width = shape.width;
  n.Height = (shape.kind == array_kind::one_d || shape.kind == array_kind::layered_one_d) ? 0 : shape.height;
  n.Depth = shape.kind == array_kind::three_d                 ? shape.depth
            : (is_layered(shape.kind) || is_cube(shape.kind)) ? shape.slices()
                                                              : 0;
  n.Format = format.format;
  n.NumChannels = format.channels;
  n.Flags = static_cast<unsigned int>(flags) | (is_layered(shape.kind) ? CUDA_ARRAY3D_LAYERED : 0u) |
            (is_cube(shape.kind) ? CUDA_ARRAY3D_CUBEMAP : 0u);
  return n;
}

array_description array_description::from_native(const CUDA_ARRAY3D_DESCRIPTOR& n) noexcept {
  array_description d;
  d.format = {n.Format, n.NumChannels};
  d.flags = static_cast<array_flags>(n.Flags & ~kind_flags);
  const bool layered = (n.Flags & CUDA_ARRAY3D_LAYERED) != 0;
  if ((n.Flags & CUDA_ARRAY3D_CUBEMAP) != 0) {
    d.shape = layered ? array_shape::cubemap_layered(n.Width, n.Depth / 6) : array_shape::cubemap(n.Width);
  } else if (layered) {
    d.shape = n.Height == 0 ? array_shape::layered_one_d(n.Width, n.Depth)
                            : array_shape::layered_two_d(n.Width, n.Height, n.Depth);
  } else if (n.Depth != 0) {
    d.shape = array_shape::three_d(n.Width, n.Height, n.Depth);
  } else if (n.Height != 0) {
    d.shape = array_shape::two_d(n.Width, n.Height);
  } else {
    d.shape = array_shape::one_d(n.Width);
  }
  return d;
}

array_description array_base::query_description() const {
  if (handle_ == nullptr) {
    detail::throw_empty_array("cudrv::array::query_description");
  }
  return detail::query_array(handle_);
}

namespace detail {

void throw_empty_array(const char* api) {
  throw invalid_argument_error(api, "the array is empty (a moved-from or released cudrv::array)");
}

void check_array_format(const char* api, const array_format& expected, const array_format& actual) {
  if (!(expected == actual)) {
    throw invalid_argument_error(api,
                                 "the array holds " + describe_format(actual) + ", not " + describe_format(expected));
  }
}

CUarray create_array(CUcontext ctx, const array_description& d) {
  const char* api = "cudrv::array";
  check_description(api, d);
  const CUDA_ARRAY3D_DESCRIPTOR n = d.native();
  CUarray handle = nullptr;
  run_in_context(ctx, api, [&] {
    check_limits(api, d, false);
    check(drv::cuArray3DCreate(&handle, &n), "cuArray3DCreate", [&] { return describe(d) + on_device(ctx); });
  });
  return handle;
}

void destroy_array(CUarray handle, const context_token& ctx) noexcept {
  destroy_in_context(ctx, "cudrv::array", "array", "cuArrayDestroy", [handle] { return drv::cuArrayDestroy(handle); });
}

array_description query_array(CUarray handle) {
  if (handle == nullptr) {
    throw invalid_argument_error("cudrv::array_ref::from_native_handle", "the array handle is null");
  }
  CUDA_ARRAY3D_DESCRIPTOR n{};
  check(drv::cuArray3DGetDescriptor(&n, handle), "cuArray3DGetDescriptor", [&] {
    char buffer[48];
    std::snprintf(buffer, sizeof(buffer), "array %p", static_cast<void*>(handle));
    return std::string(buffer);
  });
  return array_description::from_native(n);
}

CUmipmappedArray create_mipmapped_array(CUcontext ctx, const array_description& d, unsigned int levels) {
  const char* api = "cudrv::mipmapped_array";
  check_description(api, d);
  const array_shape& s = d.shape;
  std::size_t largest = s.width;
  if (s.rows() > largest && s.kind != array_kind::layered_one_d) {
    largest = s.height;
  }
  if (s.kind == array_kind::three_d && s.depth > largest) {
    largest = s.depth;
  }
  // A full chain halves the largest extent down to 1: floor(log2(largest)) + 1 levels. std::bit_width is
  // defined for every extent (a shift loop ran forever from 2^63 on), so the count is checked at once,
  // before the driver; the device's limits, which need its context, are checked next.
  const auto most = static_cast<unsigned int>(std::bit_width(largest));
  if (levels == 0 || levels > most) {
    throw invalid_argument_error(api, "a mipmapped array of largest extent " + std::to_string(largest) + " has 1 to " +
                                          std::to_string(most) + " levels, not " + std::to_string(levels));
  }
  const CUDA_ARRAY3D_DESCRIPTOR n = d.native();
  CUmipmappedArray handle = nullptr;
  run_in_context(ctx, api, [&] {
    check_limits(api, d, true);
    check(drv::cuMipmappedArrayCreate(&handle, &n, levels), "cuMipmappedArrayCreate",
          [&] { return describe(d) + ", " + std::to_string(levels) + " levels" + on_device(ctx); });
  });
  return handle;
}

void destroy_mipmapped_array(CUmipmappedArray handle, const context_token& ctx) noexcept {
  destroy_in_context(ctx, "cudrv::mipmapped_array", "mipmapped array", "cuMipmappedArrayDestroy",
                     [handle] { return drv::cuMipmappedArrayDestroy(handle); });
}

CUarray mipmapped_level(CUmipmappedArray handle, unsigned int levels, unsigned int level, const array_description& d,
                        array_description* out) {
  const char* api = "cudrv::mipmapped_array::level";
  if (handle == nullptr) {
    throw invalid_argument_error(api, "the mipmapped array is empty (a moved-from or released cudrv::mipmapped_array)");
  }
  if (level >= levels) {
    throw invalid_argument_error(api, "level " + std::to_string(level) + " of a mipmapped array of " +
                                          std::to_string(levels) + " levels");
  }
  CUarray l = nullptr;
  check(drv::cuMipmappedArrayGetLevel(&l, handle, level), "cuMipmappedArrayGetLevel",
        [&] { return "level " + std::to_string(level); });
  // Each level halves the extents (at least 1); layers and faces stay.
  *out = d;
  auto halve = [level](std::size_t v) { return v == 0 ? 0 : ((v >> level) == 0 ? std::size_t{1} : v >> level); };
  out->shape.width = halve(d.shape.width);
  out->shape.height = halve(d.shape.height);
  out->shape.depth = halve(d.shape.depth);
  return l;
}

// --- copies ------------------------------------------------------------------------------------------

namespace {

struct extent3 {
  std::size_t width, height, depth;
};

std::string describe_box(const array_region& r, const extent3& e) {
  // Appended to a string that starts with "(", not "(" + a temporary: g++ 12 warns (-Wrestrict, a false
  // positive) about the memcpy of a C string put in front of a temporary string.
  std::string out = "(";
  out += std::to_string(r.x) + ", " + std::to_string(r.y) + ", " + std::to_string(r.z) + ") + " +
         std::to_string(e.width) + " x " + std::to_string(e.height) + " x " + std::to_string(e.depth);
  return out;
}

// The extent of an array side's region (0 extents: to the end), checked against the array.
extent3 resolve(const char* api, const char* which, const array_copy_side& side, const extent3* given) {
  const array_shape& s = side.description.shape;
  const extent3 size{s.width, s.rows(), s.slices()};
  const array_region& r = side.region;
  if (r.x >= size.width || r.y >= size.height || r.z >= size.depth) {
    throw invalid_argument_error(api, std::string("the ") + which + " offset (" + std::to_string(r.x) + ", " +
                                          std::to_string(r.y) + ", " + std::to_string(r.z) + ") lies outside the " +
                                          describe(side.description) + " (" + std::to_string(size.width) + " x " +
                                          std::to_string(size.height) + " x " + std::to_string(size.depth) +
                                          " elements x rows x slices)");
  }
  extent3 e = given != nullptr
                  ? *given
                  : extent3{r.width != 0 ? r.width : size.width - r.x, r.height != 0 ? r.height : size.height - r.y,
                            r.depth != 0 ? r.depth : size.depth - r.z};
  if (e.width > size.width - r.x || e.height > size.height - r.y || e.depth > size.depth - r.z) {
    throw invalid_argument_error(api, std::string("the ") + which + " region " + describe_box(r, e) + " leaves the " +
                                          describe(side.description) + " (" + std::to_string(size.width) + " x " +
                                          std::to_string(size.height) + " x " + std::to_string(size.depth) +
                                          " elements x rows x slices)");
  }
  return e;
}

// Checks a linear side against the copy's extent (dense: enough bytes; pitched: each dimension).
void check_linear_side(const char* api, const char* which, const array_copy_side& side, const extent3& e,
                       std::size_t element_size) {
  if (side.address == 0) {
    throw invalid_argument_error(api, std::string("the ") + which + " view is null (a moved-from or released buffer?)");
  }
  const std::size_t row = e.width * element_size;
  if (side.pitch == 0) {
    const std::size_t needed = saturating_bytes(saturating_bytes(row, e.height), e.depth);
    if (needed > side.bytes) {
      throw invalid_argument_error(api, std::string("the ") + which + " view of " + format_bytes(side.bytes) +
                                            " is smaller than the array region of " + std::to_string(e.width) + " x " +
                                            std::to_string(e.height) + " x " + std::to_string(e.depth) + " elements (" +
                                            format_bytes(needed) + ")");
    }
    return;
  }
  if (side.pitch < side.pitched_width) {
    throw invalid_argument_error(api, std::string("the ") + which + " pitch of " + std::to_string(side.pitch) +
                                          " bytes is smaller than its row of " + std::to_string(side.pitched_width) +
                                          " bytes");
  }
  if (row > side.pitched_width || e.height > side.rows || e.depth > side.pitched_depth) {
    throw invalid_argument_error(api, std::string("the array region of ") + std::to_string(e.width) + " x " +
                                          std::to_string(e.height) + " x " + std::to_string(e.depth) +
                                          " elements does not fit the " + which + " pitched layout of " +
                                          std::to_string(side.pitched_width / element_size) + " x " +
                                          std::to_string(side.rows) + " x " + std::to_string(side.pitched_depth));
  }
}

// Fills one side of c (source when src is true).
void set_copy_side(CUDA_MEMCPY3D& c, const array_copy_side& side, const extent3& e, std::size_t element_size,
                   bool src) {
  CUmemorytype type = CU_MEMORYTYPE_ARRAY;
  if (side.array == nullptr) {
    // Host memory the driver does not know is described as host memory; everything else as unified.
    type = get_pointer_attributes(static_cast<CUdeviceptr>(side.address)).is_known() ? CU_MEMORYTYPE_UNIFIED
                                                                                     : CU_MEMORYTYPE_HOST;
  }
  const std::size_t pitch = side.pitch != 0 ? side.pitch : e.width * element_size;
  const std::size_t rows = side.pitch != 0 ? side.rows : e.height;
  if (src) {
    c.srcMemoryType = type;
    c.srcArray = side.array;
    c.srcXInBytes = side.region.x * element_size;
    c.srcY = side.region.y;
    c.srcZ = side.region.z;
    if (type == CU_MEMORYTYPE_HOST) {
      c.srcHost = reinterpret_cast<const void*>(side.address);
    } else if (type == CU_MEMORYTYPE_UNIFIED) {
      c.srcDevice = static_cast<CUdeviceptr>(side.address);
    }
    if (type != CU_MEMORYTYPE_ARRAY) {
      c.srcXInBytes = c.srcY = c.srcZ = 0;
      c.srcPitch = pitch;
      c.srcHeight = rows;
    }
  } else {
    c.dstMemoryType = type;
    c.dstArray = side.array;
    c.dstXInBytes = side.region.x * element_size;
    c.dstY = side.region.y;
    c.dstZ = side.region.z;
    if (type == CU_MEMORYTYPE_HOST) {
      c.dstHost = reinterpret_cast<void*>(side.address);
    } else if (type == CU_MEMORYTYPE_UNIFIED) {
      c.dstDevice = static_cast<CUdeviceptr>(side.address);
    }
    if (type != CU_MEMORYTYPE_ARRAY) {
      c.dstXInBytes = c.dstY = c.dstZ = 0;
      c.dstPitch = pitch;
      c.dstHeight = rows;
    }
  }
}

}  // namespace

void copy_array(array_copy_side dst, array_copy_side src, std::size_t element_size, CUstream stream) {
  const char* api = "cudrv::copy";
  // The array side defines the extent (the source's, for an array-to-array copy).
  extent3 e{};
  if (src.array != nullptr) {
    e = resolve(api, "source", src, nullptr);
    if (dst.array != nullptr) {
      resolve(api, "destination", dst, &e);
    }
  } else {
    e = resolve(api, "destination", dst, nullptr);
  }
  if (src.array == nullptr) {
    check_linear_side(api, "source", src, e, element_size);
  }
  if (dst.array == nullptr) {
    check_linear_side(api, "destination", dst, e, element_size);
  }
  require_stream(stream, api);
  CUDRV_NVTX_AUTOMATIC_RANGE("cudrv::copy", [bytes = e.width * e.height * e.depth * element_size] {
    return std::to_string(bytes) + " bytes (array)";
  });
  stream_context_scope scope(stream);
  CUDA_MEMCPY3D c{};
  set_copy_side(c, src, e, element_size, true);
  set_copy_side(c, dst, e, element_size, false);
  c.WidthInBytes = e.width * element_size;
  c.Height = e.height;
  c.Depth = e.depth;
  check(drv::cuMemcpy3DAsync(&c, stream), "cuMemcpy3DAsync", [&] {
    return std::string(src.array != nullptr ? "from the array region " + describe_box(src.region, e)
                                            : "from linear memory") +
           (dst.array != nullptr ? " to the array region " + describe_box(dst.region, e) : " to linear memory");
  });
}

}  // namespace detail
}  // namespace cudrv
