/// @file nvtx.hpp
/// @brief NVTX annotations for profilers (Nsight Systems and others): the cudrv domain, scoped
/// ranges and marks with colours, categories and payloads, names for devices, contexts, streams and
/// events, and the switch of the automatic ranges that cudrv puts around its own launches, copies,
/// fills and graph launches. See @ref nvtx for the guide.
///
/// This header is opt-in: `<cudrv/cudrv.hpp>` does not include it, because the toolkit's
/// `<nvtx3/nvtx3.hpp>`, on which it is built, costs about 0.1 s of compile time per translation
/// unit. Include it where you annotate.
///
/// When cudrv is built with `CUDRV_ENABLE_NVTX=OFF` (which defines `CUDRV_DISABLE_NVTX` for cudrv
/// and everything that links it), this header still compiles and keeps its whole API, but nothing
/// in it emits anything: ranges, marks and names are no-ops, the automatic ranges are never on, and
/// `<nvtx3/nvtx3.hpp>` is not included, so no NVTX code ends up in the program. The attribute types
/// (@ref cudrv::nvtx::rgb, @ref cudrv::nvtx::payload, ...) are then empty stand-ins with the same
/// constructors: code written with the `cudrv::nvtx` names compiles either way.
///
/// Layer: streams (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cudrv/context.hpp"
#include "cudrv/device.hpp"
#include "cudrv/event.hpp"
#include "cudrv/stream.hpp"

#if !defined(CUDRV_DISABLE_NVTX)
#include <nvtx3/nvtx3.hpp>
#else
#include <string>
#include <type_traits>
#endif

#if !defined(CUDRV_DISABLE_NVTX)
namespace cudrv::detail {
/// @brief Runs NVTX's one-time initialisation (`nvtxInitialize`) once for the process, under a C++
/// static (internal). NVTX's C layer fills its table of function pointers on the first call with
/// plain stores, so two threads making their first NVTX call at once race on the table; cudrv's
/// calls, ranges and marks pass through this first, which orders the table before them.
void nvtx_initialize() noexcept;
/// @brief nvtx_initialize(), then a guard check only (internal).
inline void nvtx_ready() noexcept {
  static const bool ready = (nvtx_initialize(), true);
  static_cast<void>(ready);
}
}  // namespace cudrv::detail
#endif

/// @brief NVTX annotations in the cudrv domain, built on the toolkit's NVTX C++ API (`nvtx3`).
///
/// Everything here is a thin layer over `nvtx3`: the attribute types are `nvtx3`'s own, and the
/// ranges and marks are `nvtx3` ranges and marks whose domain defaults to @ref cudrv::nvtx::domain
/// rather than NVTX's global domain. Without a profiler attached, every annotation costs one
/// indirect call to an empty function pointer.
///
/// @code
/// #include <cudrv/nvtx.hpp>
///
/// void step(cudrv::stream_ref s, int iteration) {
///   cudrv::nvtx::range r{"step", cudrv::nvtx::rgb{0, 160, 255},
///                        cudrv::nvtx::payload{std::int64_t{iteration}}};
///   // ... launches and copies on s appear under "step" in Nsight Systems ...
/// }
/// @endcode
namespace cudrv::nvtx {

/// @brief Whether the NVTX annotations are compiled in: false when cudrv was built with
/// `CUDRV_ENABLE_NVTX=OFF` (`CUDRV_DISABLE_NVTX` defined), in which case every function of this
/// header is a no-op.
///
/// @code
/// if constexpr (!cudrv::nvtx::compiled_in) {
///   std::puts("this build carries no NVTX annotations");
/// }
/// @endcode
#if !defined(CUDRV_DISABLE_NVTX)
inline constexpr bool compiled_in = true;
#else
inline constexpr bool compiled_in = false;
#endif

/// @brief The cudrv NVTX domain, as an `nvtx3` domain tag: the events of cudrv itself (automatic
/// ranges) and, by default, those made with this header are grouped under the name "cudrv".
///
/// It can be passed wherever `nvtx3` takes a domain tag, and gives the raw handle for the NVTX C API:
/// @code
/// nvtx3::scoped_range_in<cudrv::nvtx::domain> r{"also in the cudrv domain"};
/// nvtxDomainHandle_t h = nvtx3::domain::get<cudrv::nvtx::domain>();
/// nvtxDomainMarkEx(h, nvtx3::event_attributes{"raw mark"}.get());
/// @endcode
struct domain {
  /// @brief The domain's name, as profilers show it.
  static constexpr const char* name{"cudrv"};
};

#if !defined(CUDRV_DISABLE_NVTX)

/// @brief The attributes of an NVTX event (`nvtx3::event_attributes`): any of a message, a colour,
/// a category and a payload, in any order. Ranges and marks build one from their arguments; build
/// one yourself to reuse it.
///
/// @code
/// static const cudrv::nvtx::event_attributes io{"read input", cudrv::nvtx::rgb{255, 128, 0},
///                                               cudrv::nvtx::category{2}};
/// cudrv::nvtx::range r{io};
/// @endcode
using event_attributes = nvtx3::event_attributes;

/// @brief A message (`nvtx3::message`): a `const char*` (or `wchar_t`), an lvalue `std::string`, or a
/// registered string. String arguments of ranges and marks become messages implicitly.
///
/// @code
/// std::string text = "batch " + std::to_string(i);
/// cudrv::nvtx::range r{cudrv::nvtx::message{text}};   // copied by NVTX when the range is pushed
/// @endcode
using message = nvtx3::message;

/// @brief A colour (`nvtx3::color`), from an ARGB code, an @ref rgb or an @ref argb value.
///
/// @code
/// cudrv::nvtx::mark("checkpoint", cudrv::nvtx::color{0xFF00FF00u});   // opaque green
/// @endcode
using color = nvtx3::color;

/// @brief An opaque RGB colour (`nvtx3::rgb`), red, green and blue from 0 to 255.
///
/// @code
/// cudrv::nvtx::range r{"solve", cudrv::nvtx::rgb{118, 185, 0}};
/// @endcode
using rgb = nvtx3::rgb;

/// @brief An ARGB colour (`nvtx3::argb`): alpha (opacity), red, green and blue from 0 to 255.
///
/// @code
/// cudrv::nvtx::range r{"background work", cudrv::nvtx::argb{128, 90, 90, 90}};
/// @endcode
using argb = nvtx3::argb;

/// @brief A category (`nvtx3::category`): a number that groups events within a domain. Give it a
/// name with @ref named_category.
///
/// @code
/// cudrv::nvtx::range r{"upload", cudrv::nvtx::category{3}};
/// @endcode
using category = nvtx3::category;

/// @brief A numeric payload (`nvtx3::payload`) carried by an event: `std::int64_t`, `std::uint64_t`,
/// `std::int32_t`, `std::uint32_t`, `float` or `double`. Nsight Systems shows it next to the range.
///
/// The constructors are explicit and exact: pass `std::int64_t{n}` or `std::uint64_t{bytes}`
/// rather than a `long long`, which matches none of them better than the others.
/// @code
/// cudrv::nvtx::range r{"copy", cudrv::nvtx::payload{std::uint64_t{bytes}}};
/// cudrv::nvtx::mark("residual", cudrv::nvtx::payload{1.5e-7});
/// @endcode
using payload = nvtx3::payload;

/// @brief A string registered once with NVTX in domain @p D (`nvtx3::registered_string_in`); events
/// then pass its handle instead of copying the text.
/// @tparam D the domain tag
///
/// @code
/// struct my_tool { static constexpr const char* name{"my tool"}; };
/// static const cudrv::nvtx::registered_string_in<my_tool> msg{"hot loop"};
/// cudrv::nvtx::range<my_tool> r{msg};
/// @endcode
template <class D>
using registered_string_in = nvtx3::registered_string_in<D>;

/// @brief A string registered in the cudrv domain. Register it once (a `static`, or
/// `registered_string::get<T>()`, which registers `T::message` on first use) and reuse it.
///
/// @code
/// struct step_message { static constexpr const char* message{"time step"}; };
/// void step() {
///   cudrv::nvtx::range r{cudrv::nvtx::registered_string::get<step_message>()};
///   // ...
/// }
/// @endcode
using registered_string = registered_string_in<domain>;

/// @brief A category of domain @p D with a name (`nvtx3::named_category_in`): constructing it names
/// the category id in the domain; use it as a category afterwards.
/// @tparam D the domain tag
///
/// @code
/// struct my_tool { static constexpr const char* name{"my tool"}; };
/// static const cudrv::nvtx::named_category_in<my_tool> io{1, "I/O"};
/// cudrv::nvtx::mark<my_tool>("file opened", io);
/// @endcode
template <class D>
using named_category_in = nvtx3::named_category_in<D>;

/// @brief A category of the cudrv domain with a name. Name each id once (a `static`, or
/// `named_category::get<T>()`, which names `T::id` as `T::name` on first use).
///
/// @code
/// struct io_category {
///   static constexpr const char* name{"I/O"};
///   static constexpr std::uint32_t id{1};
/// };
/// cudrv::nvtx::range r{"read", cudrv::nvtx::named_category::get<io_category>()};
/// @endcode
using named_category = named_category_in<domain>;

/// @brief A scoped NVTX range: pushed on the calling thread when constructed, popped when destroyed,
/// in the cudrv domain unless @p D names another one. Neither copyable nor movable, and not to be
/// allocated on the heap: a range must end on the thread, and in the reverse order, in which it began.
///
/// The arguments are those of @ref event_attributes, in any order: a message (a string literal, a
/// `std::string`, a @ref registered_string), a colour (@ref rgb, @ref argb, @ref color), a
/// @ref category (or @ref named_category) and a @ref payload. Each may be left out.
///
/// @tparam D the domain tag; defaults to @ref cudrv::nvtx::domain, and is deduced so, so that
///   `cudrv::nvtx::range r{...}` needs no angle brackets
///
/// @code
/// {
///   cudrv::nvtx::range whole{"frame", cudrv::nvtx::rgb{0, 120, 255}};
///   for (int i = 0; i < n; ++i) {
///     cudrv::nvtx::range part{"tile", cudrv::nvtx::category{1}, cudrv::nvtx::payload{std::int64_t{i}}};
///     cudrv::launch(s, cfg, tile_kernel, i);
///   }
/// }                                                        // "frame" ends here
///
/// struct my_app { static constexpr const char* name{"my app"}; };
/// cudrv::nvtx::range<my_app> mine{"in my own domain"};
/// @endcode
template <class D = domain>
class [[maybe_unused]] range {
 public:
  /// @brief Pushes a range with the attributes @p attr.
  explicit range(const event_attributes& attr) noexcept : range_((detail::nvtx_ready(), attr)) {}
  /// @brief Pushes a range whose attributes are built from @p args (message, colour, category,
  /// payload, in any order).
  template <class... Args>
  explicit range(const Args&... args) noexcept : range_((detail::nvtx_ready(), event_attributes{args...})) {}
  /// @brief Pushes a range without attributes.
  range() noexcept : range_((detail::nvtx_ready(), event_attributes{})) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  range(const range&) = delete;
  range& operator=(const range&) = delete;
  range(range&&) = delete;
  range& operator=(range&&) = delete;
  /// @brief Refused: a range lives on the stack, so that it ends where it began.
  void* operator new(std::size_t) = delete;
  /// @}
  /// @brief Pops the range.
  ~range() = default;

 private:
  nvtx3::scoped_range_in<D> range_;
};

/// @brief Marks an instant with the attributes built from @p args (message, colour, category,
/// payload), in the cudrv domain unless @p D names another one.
/// @tparam D the domain tag
/// @tparam Args the attribute types
/// @param args the attributes, in any order
///
/// @code
/// if (!converged) {
///   cudrv::nvtx::mark("not converged", cudrv::nvtx::rgb{255, 0, 0}, cudrv::nvtx::payload{residual});
/// }
/// @endcode
template <class D = domain, class... Args>
void mark(const Args&... args) noexcept {
  detail::nvtx_ready();
  nvtx3::mark_in<D>(args...);
}

#else  // CUDRV_DISABLE_NVTX: stand-ins with the constructors of nvtx3's types, which do nothing.

struct rgb {
  std::uint8_t red, green, blue;
  constexpr rgb(std::uint8_t r, std::uint8_t g, std::uint8_t b) noexcept : red(r), green(g), blue(b) {}
};
struct argb : rgb {
  std::uint8_t alpha;
  constexpr argb(std::uint8_t a, std::uint8_t r, std::uint8_t g, std::uint8_t b) noexcept : rgb(r, g, b), alpha(a) {}
};
class color {
 public:
  constexpr explicit color(std::uint32_t) noexcept {}
  constexpr color(rgb) noexcept {}
  constexpr color(argb) noexcept {}
};
class category {
 public:
  constexpr explicit category(std::uint32_t id) noexcept : id_(id) {}
  [[nodiscard]] constexpr std::uint32_t get_id() const noexcept { return id_; }

 private:
  std::uint32_t id_;
};
class payload {
 public:
  template <class T>
  requires std::is_arithmetic_v<T>
  constexpr explicit payload(T) noexcept {}
};
template <class D>
class registered_string_in {
 public:
  constexpr explicit registered_string_in(const char*) noexcept {}
  constexpr explicit registered_string_in(const wchar_t*) noexcept {}
  explicit registered_string_in(const std::string&) noexcept {}
  explicit registered_string_in(const std::wstring&) noexcept {}
  template <class M>
  [[nodiscard]] static const registered_string_in& get() noexcept {
    static const registered_string_in s(M::message);
    return s;
  }
};
using registered_string = registered_string_in<domain>;
template <class D>
class named_category_in : public category {
 public:
  constexpr named_category_in(std::uint32_t id, const char*) noexcept : category(id) {}
  constexpr named_category_in(std::uint32_t id, const wchar_t*) noexcept : category(id) {}
  template <class C>
  [[nodiscard]] static const named_category_in& get() noexcept {
    static const named_category_in c(C::id, C::name);
    return c;
  }
};
using named_category = named_category_in<domain>;
class message {
 public:
  constexpr message(const char*) noexcept {}
  constexpr message(const wchar_t*) noexcept {}
  message(const std::string&) noexcept {}
  message(const std::wstring&) noexcept {}
  template <class D>
  constexpr message(const registered_string_in<D>&) noexcept {}
};
class event_attributes {
 public:
  template <class... Args>
  constexpr explicit event_attributes(const Args&...) noexcept {}
};
template <class D = domain>
class [[maybe_unused]] range {
 public:
  template <class... Args>
  constexpr explicit range(const Args&...) noexcept {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  range(const range&) = delete;
  range& operator=(const range&) = delete;
  void* operator new(std::size_t) = delete;
  /// @}
};
template <class D = domain, class... Args>
constexpr void mark(const Args&...) noexcept {}

#endif  // CUDRV_DISABLE_NVTX

/// @brief Names device @p dev (`nvtxNameCuDeviceA`): profilers then show @p name for it.
/// @param dev the device
/// @param name the name; copied
///
/// @code
/// for (cudrv::device d : cudrv::devices()) {
///   cudrv::nvtx::name(d, "GPU " + std::to_string(d.ordinal()));
/// }
/// @endcode
void name(const device& dev, std::string_view name);

/// @brief Names context @p ctx (`nvtxNameCuContextA`).
/// @param ctx the context
/// @param name the name; copied
/// @throws invalid_argument_error for an empty (moved-from) context
///
/// @code
/// cudrv::context ctx(dev);
/// cudrv::nvtx::name(ctx, "solver context");
/// cudrv::nvtx::name(dev.primary_context(), "primary");
/// @endcode
void name(context_ref ctx, std::string_view name);

/// @brief Names stream @p s (`nvtxNameCuStreamA`): Nsight Systems labels the stream's row of the
/// timeline with it.
/// @param s the stream
/// @param name the name; copied
/// @throws invalid_argument_error for an empty (moved-from) stream
///
/// @code
/// cudrv::stream copies(dev), compute(dev);
/// cudrv::nvtx::name(copies, "copies");
/// cudrv::nvtx::name(compute, "compute");
/// @endcode
void name(stream_ref s, std::string_view name);

/// @brief Names event @p ev (`nvtxNameCuEventA`).
/// @param ev the event
/// @param name the name; copied
/// @throws invalid_argument_error for an empty (moved-from) event
///
/// @code
/// cudrv::event ready(dev);
/// cudrv::nvtx::name(ready, "inputs ready");
/// @endcode
void name(event_ref ev, std::string_view name);

/// @brief Switches the automatic ranges on or off, for every thread, from now on.
///
/// When on, cudrv pushes a range in its domain around each of its kernel launches
/// (`cudrv::launch <kernel name>`), copies (`cudrv::copy <n> bytes`, `cudrv::copy_peer <n> bytes`),
/// fills (`cudrv::fill <n> bytes`) and graph launches, popped when the call returns or throws. They
/// are off by default, unless the environment variable `CUDRV_NVTX_AUTO` is set to anything but an
/// empty string or `0` when cudrv first checks them; this call overrides the variable. When off,
/// each such call costs one relaxed atomic load and a predictable branch more (and the test of a
/// register on exit). A no-op when @ref compiled_in is false.
///
/// @code
/// cudrv::nvtx::enable_automatic_ranges(true);
/// cudrv::launch(s, cfg, kernel, args...);   // inside a range "cudrv::launch <kernel name>"
/// cudrv::copy(host, dbuf, s);               // inside a range "cudrv::copy <n> bytes"
/// cudrv::nvtx::enable_automatic_ranges(false);
/// @endcode
/// @param on whether cudrv annotates its own calls
void enable_automatic_ranges(bool on) noexcept;

/// @brief Whether the automatic ranges are on (see @ref enable_automatic_ranges); the first call,
/// unless @ref enable_automatic_ranges came first, reads `CUDRV_NVTX_AUTO`. Always false when
/// @ref compiled_in is false.
///
/// @code
/// std::printf("automatic NVTX ranges: %s\n", cudrv::nvtx::automatic_ranges_enabled() ? "on" : "off");
/// @endcode
[[nodiscard]] bool automatic_ranges_enabled() noexcept;

}  // namespace cudrv::nvtx
