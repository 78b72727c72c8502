// A PyTorch operator written with cudrv, built by torch.utils.cpp_extension (run.py loads it with
// load(), linked with libcudrv.a and its headers from the build tree):
//   - axpby(x, y, alpha, beta) and axpby_out(x, y, out, alpha, beta): out = alpha * x + beta * y on
//     float32 CUDA tensors. The kernel is compiled at run time with cudrv::program through the compile
//     cache (once per device and process; later processes read the cubin from the cache) and launched
//     with cudrv::launch on PyTorch's current stream, adopted as a cudrv::stream_ref.
//   - Producer: cudrv-allocated memory handed out through DLPack (run.py gives it __dlpack__), and
//     import_dlpack: a DLPack capsule of PyTorch or CuPy imported as a cudrv view; both count the calls
//     of the deleters they hand out or hold (cudrv_torch_glue.hpp) and show the count to Python.
//   - bench_launches: the host time of a run of launches, against plain_op.cu's <<<>>>.
//
// Contexts: cudrv makes no context current. PyTorch (the CUDA runtime) works in each device's primary
// context, and cudrv::device(n) names that same context: the library is loaded into it, the buffers
// are allocated in it, and PyTorch's streams belong to it. The device guard below is PyTorch's own
// (c10::cuda::CUDAGuard, what every PyTorch CUDA operator does): it selects the tensor's device in the
// runtime, which makes that device's primary context current, as PyTorch does before its own kernels.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/dlpack.hpp>
#include <cudrv/rtc.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#define CUDRV_TORCH_GLUE_DLPACK 1
#include "cudrv_torch_glue.hpp"
#include "operand_checks.hpp"

namespace py = pybind11;

namespace {

using kernel_type = cudrv::typed_kernel<cudrv_torch::axpby_signature>;

// The kernels of this process, one per device, compiled on first use. Never destroyed: at the
// interpreter's exit the CUDA runtime may already have released the primary context, and unloading a
// library then would report an error for nothing (the process is ending).
struct kernel_registry {
  std::mutex mutex;
  std::map<int, kernel_type> kernels;
  cudrv::compile_cache cache = cudrv::compile_cache::from_environment();
  double compile_ms = 0;  // the first compilation (or cache read) and load of this process
  bool cache_hit = false;
  std::atomic<std::uintptr_t> last_stream{0};
};

kernel_registry& registry() {
  static auto* r = new kernel_registry;  // NOLINT: leaked on purpose (see above)
  return *r;
}

const kernel_type& kernel_for(int ordinal) {
  kernel_registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  if (auto it = r.kernels.find(ordinal); it != r.kernels.end()) {
    return it->second;
  }
  const cudrv::device dev(ordinal);
  const auto hits = r.cache.stats().hits;
  const auto t0 = std::chrono::steady_clock::now();
  const cudrv::compile_result compiled = cudrv_torch::compile_kernel(r.cache, dev.arch());
  const cudrv::library lib(compiled, dev);  // into dev's primary context: PyTorch's
  kernel_type k = lib.get_kernel<cudrv_torch::axpby_signature>(cudrv_torch::kernel_name);  // keeps lib loaded
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  r.cache_hit = r.cache.stats().hits > hits;
  return r.kernels.emplace(ordinal, std::move(k)).first->second;
}

// PyTorch's current stream on the device, as a cudrv view (its default stream, handle 0, is the legacy
// default stream: stream_ref keeps it as CU_STREAM_LEGACY).
cudrv::stream_ref torch_stream(int ordinal) {
  return cudrv::stream_ref(at::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(ordinal)).stream());
}

void launch_axpby(cudrv::stream_ref stream, int ordinal, const float* x, const float* y, float* out, double alpha,
                  double beta, std::size_t n) {
  if (n == 0) {
    return;
  }
  cudrv::launch(stream, cudrv_torch::config_for(n), kernel_for(ordinal), x, y, out, static_cast<float>(alpha),
                static_cast<float>(beta), static_cast<unsigned long long>(n));
  registry().last_stream.store(reinterpret_cast<std::uintptr_t>(stream.native_handle()));
}

torch::Tensor axpby_out(const torch::Tensor& x, const torch::Tensor& y, torch::Tensor out, double alpha, double beta) {
  cudrv_torch::check_operands("cudrv_torch.axpby_out", x, y, out);
  const c10::cuda::CUDAGuard guard(x.device());
  const int ordinal = x.get_device();
  const cudrv::stream_ref stream = torch_stream(ordinal);
  launch_axpby(stream, ordinal, x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), alpha, beta,
               static_cast<std::size_t>(x.numel()));
  return out;
}

torch::Tensor axpby(const torch::Tensor& x, const torch::Tensor& y, double alpha, double beta) {
  cudrv_torch::check_operand("cudrv_torch.axpby", "x", x, x);  // before empty_like, for x's own message
  return axpby_out(x, y, torch::empty(x.sizes(), x.options()), alpha, beta);
}

// The host time of `iterations` launches on the current stream (the checks once, before): what
// plain_op.cu's bench_launches measures for <<<>>>.
double bench_launches(const torch::Tensor& x, const torch::Tensor& y, torch::Tensor out, double alpha, double beta,
                      std::int64_t iterations) {
  cudrv_torch::check_operands("cudrv_torch.bench_launches", x, y, out);
  TORCH_CHECK(iterations > 0 && x.numel() > 0, "cudrv_torch.bench_launches: needs iterations > 0 and elements");
  const c10::cuda::CUDAGuard guard(x.device());
  const int ordinal = x.get_device();
  const cudrv::stream_ref stream = torch_stream(ordinal);
  const kernel_type& k = kernel_for(ordinal);
  const auto n = static_cast<std::size_t>(x.numel());
  const cudrv::launch_config config = cudrv_torch::config_for(n);
  const float* px = x.data_ptr<float>();
  const float* py_ = y.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < iterations; ++i) {
    cudrv::launch(stream, config, k, px, py_, po, static_cast<float>(alpha), static_cast<float>(beta),
                  static_cast<unsigned long long>(n));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

py::dict compile_info() {
  kernel_registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  py::dict d;
  d["compile_ms"] = r.compile_ms;
  d["cache_hit"] = r.cache_hit;
  d["cache_enabled"] = r.cache.enabled();
  d["cache_directory"] = r.cache.directory();
  d["kernels"] = r.kernels.size();
  return d;
}

// What a later process does: the same compilation through a new cache object over the same directory.
py::dict compile_again(int ordinal) {
  cudrv::compile_cache cache = cudrv::compile_cache::from_environment();
  const auto t0 = std::chrono::steady_clock::now();
  (void)cudrv_torch::compile_kernel(cache, cudrv::device(ordinal).arch());
  py::dict d;
  d["ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  d["hits"] = cache.stats().hits;
  d["misses"] = cache.stats().misses;
  d["cache_enabled"] = cache.enabled();
  return d;
}

// The context current on this thread and the device's primary context, as integers.
py::dict context_info(int ordinal) {
  py::dict d;
  d["current"] = reinterpret_cast<std::uintptr_t>(cudrv::context_ref::current().native_handle());
  d["primary"] = reinterpret_cast<std::uintptr_t>(cudrv::device(ordinal).primary_context().native_handle());
  return d;
}

// ------------------------------------------------------------------------------------------------
// DLPack

template <class M>
void capsule_destructor(PyObject* capsule) {
  // A capsule no consumer took still owns its tensor (DLPack's Python protocol): delete it.
  if (PyCapsule_IsValid(capsule, cudrv_torch::capsule_name<M>()) != 0) {
    auto* managed = static_cast<M*>(PyCapsule_GetPointer(capsule, cudrv_torch::capsule_name<M>()));
    if (managed != nullptr && managed->deleter != nullptr) {
      managed->deleter(managed);
    }
  }
}

template <class M>
py::object make_capsule(cudrv::dlpack_ptr<M> tensor) {
  PyObject* capsule = PyCapsule_New(tensor.get(), cudrv_torch::capsule_name<M>(), &capsule_destructor<M>);
  if (capsule == nullptr) {
    throw py::error_already_set();
  }
  (void)tensor.release();  // the capsule owns it now
  return py::reinterpret_steal<py::object>(capsule);
}

// cudrv-allocated memory given to PyTorch or CuPy: a device_buffer filled from a CPU tensor on a cudrv
// stream, exported (shared: the buffer lives until the producer and every consumer let it go).
class producer {
 public:
  explicit producer(const torch::Tensor& host) : host_(host), dev_(c10::cuda::current_device()), stream_(dev_) {
    TORCH_CHECK(host.device().is_cpu() && host.scalar_type() == at::kFloat && host.is_contiguous() && host.dim() == 1 &&
                    host.numel() > 0,
                "cudrv_torch.Producer: takes a non-empty, contiguous, 1-D float32 CPU tensor");
    buffer_ = std::make_shared<cudrv::device_buffer<float>>(dev_, static_cast<std::size_t>(host.numel()));
    // Written on the producer's stream: consumers see it through the stream exchange of dlpack().
    cudrv::copy(*buffer_, std::span<const float>(host_.data_ptr<float>(), buffer_->size()), stream_);
  }

  // __dlpack__: the consumer's stream (a protocol value) waits for the producer's, then a capsule of the
  // versioned or the legacy struct whose deleter counts its calls.
  py::object dlpack(bool versioned, std::intptr_t consumer_stream) {
    cudrv::dlpack_stream_exchange(stream_, consumer_stream);
    ++exports_;
    if (versioned) {
#if CUDRV_DLPACK_HAS_VERSIONED
      return make_capsule(cudrv_torch::count_deleter(cudrv::to_dlpack<DLManagedTensorVersioned>(buffer_), calls_));
#else
      throw std::invalid_argument("cudrv_torch: this build's DLPack header has no DLManagedTensorVersioned");
#endif
    }
    return make_capsule(cudrv_torch::count_deleter(cudrv::to_dlpack<DLManagedTensor>(buffer_), calls_));
  }

  // The buffer read back by cudrv after the stream named by `after` (a protocol value), so that what a
  // consumer wrote there is seen.
  torch::Tensor to_host(std::intptr_t after) {
    if (auto consumer = cudrv::dlpack_consumer_stream(after)) {
      stream_.wait(*consumer);
    }
    torch::Tensor result = torch::empty({static_cast<std::int64_t>(buffer_->size())}, torch::kFloat);
    cudrv::copy(std::span<float>(result.data_ptr<float>(), buffer_->size()), *buffer_, stream_);
    stream_.synchronize();
    return result;
  }

  [[nodiscard]] std::uintptr_t data_ptr() const { return static_cast<std::uintptr_t>(buffer_->data()); }
  [[nodiscard]] int device() const { return dev_.ordinal(); }
  [[nodiscard]] int deleter_calls() const { return calls_->load(); }
  [[nodiscard]] int exports() const { return exports_; }

 private:
  torch::Tensor host_;  // kept until the copy from it is done
  cudrv::device dev_;
  cudrv::stream stream_;
  std::shared_ptr<cudrv::device_buffer<float>> buffer_;
  std::shared_ptr<std::atomic<int>> calls_ = std::make_shared<std::atomic<int>>(0);
  int exports_ = 0;
};

// A DLPack tensor of another framework held by cudrv: a checked view (float32, CUDA or managed memory,
// contiguous) whose producer's deleter runs once, when close() is called or the object goes.
class imported {
 public:
  template <class M>
  imported(cudrv::dlpack_tensor<float, M>&& tensor, std::shared_ptr<std::atomic<int>> calls)
      : address_(tensor.view().address()),
        size_(tensor.size()),
        device_(tensor.view().device().device_id),
        versioned_(cudrv::detail::is_dlpack_versioned_v<M>),
        calls_(std::move(calls)),
        tensor_(std::make_shared<cudrv::dlpack_tensor<float, M>>(std::move(tensor))) {}

  // In place: v = alpha * v + beta * v with the cudrv kernel, on the stream named by a protocol value.
  void axpby_self(double alpha, double beta, std::intptr_t stream_value) {
    TORCH_CHECK(tensor_ != nullptr, "cudrv_torch.Imported.axpby_self: the tensor was closed");
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    const std::optional<cudrv::stream_ref> s = cudrv::dlpack_consumer_stream(stream_value);
    auto* p = reinterpret_cast<float*>(address_);
    launch_axpby(s.value_or(cudrv::stream_ref::legacy_default()), device_, p, p, p, alpha, beta, size_);
  }
  void close() { tensor_.reset(); }

  [[nodiscard]] std::uintptr_t data_ptr() const { return address_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] int device() const { return device_; }
  [[nodiscard]] bool versioned() const { return versioned_; }
  [[nodiscard]] bool is_open() const { return tensor_ != nullptr; }
  [[nodiscard]] int deleter_calls() const { return calls_->load(); }

 private:
  std::uintptr_t address_;
  std::size_t size_;
  int device_;
  bool versioned_;
  std::shared_ptr<std::atomic<int>> calls_;
  std::shared_ptr<void> tensor_;  // the dlpack_tensor: its destruction calls the deleter
};

template <class M>
imported import_as(PyObject* capsule) {
  auto* raw = static_cast<M*>(PyCapsule_GetPointer(capsule, cudrv_torch::capsule_name<M>()));
  if (raw == nullptr) {
    throw py::error_already_set();
  }
  // Taken: the capsule must no longer delete it (the protocol's renaming), whatever happens next.
  if (PyCapsule_SetName(capsule, cudrv_torch::used_capsule_name<M>()) != 0) {
    throw py::error_already_set();
  }
  auto calls = std::make_shared<std::atomic<int>>(0);
  M* counted = cudrv_torch::count_deleter(cudrv::dlpack_ptr<M>(raw), calls).release();
  // The raw form owns the tensor on every path: a refused tensor is deleted before the error.
  auto tensor = cudrv::from_dlpack<float>(counted, cudrv::dlpack_requirements::device(-1, true));
  return imported(std::move(tensor), std::move(calls));
}

imported import_dlpack(const py::object& capsule) {
  PyObject* o = capsule.ptr();
#if CUDRV_DLPACK_HAS_VERSIONED
  if (PyCapsule_IsValid(o, cudrv_torch::capsule_name<DLManagedTensorVersioned>()) != 0) {
    return import_as<DLManagedTensorVersioned>(o);
  }
#endif
  if (PyCapsule_IsValid(o, cudrv_torch::capsule_name<DLManagedTensor>()) != 0) {
    return import_as<DLManagedTensor>(o);
  }
  throw std::invalid_argument(
      "cudrv_torch.import_dlpack: expects an unused DLPack capsule (named dltensor_versioned or dltensor, "
      "as __dlpack__ returns it); a capsule can be imported once");
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "out = alpha * x + beta * y with a kernel compiled by cudrv (NVRTC) and launched on PyTorch's stream";
  m.def("axpby", &axpby, "alpha * x + beta * y (float32 CUDA tensors)", py::arg("x"), py::arg("y"), py::arg("alpha"),
        py::arg("beta"));
  m.def("axpby_out", &axpby_out, "out = alpha * x + beta * y; returns out", py::arg("x"), py::arg("y"), py::arg("out"),
        py::arg("alpha"), py::arg("beta"));
  m.def("bench_launches", &bench_launches, "host seconds of `iterations` launches of the kernel", py::arg("x"),
        py::arg("y"), py::arg("out"), py::arg("alpha"), py::arg("beta"), py::arg("iterations"));
  m.def(
      "last_stream", [] { return registry().last_stream.load(); }, "the CUstream of the last launch");
  m.def("compile_info", &compile_info);
  m.def("compile_again", &compile_again, py::arg("device"));
  m.def("context_info", &context_info, py::arg("device"));
  m.def(
      "dlpack_version", [] { return CUDRV_DLPACK_VERSION; }, "the DLPack header's version, major * 100 + minor");
  m.def("import_dlpack", &import_dlpack, py::arg("capsule"));
  py::class_<producer>(m, "Producer")
      .def(py::init<const torch::Tensor&>(), py::arg("host"))
      .def("dlpack", &producer::dlpack, py::arg("versioned"), py::arg("stream"))
      .def("to_host", &producer::to_host, py::arg("after_stream"))
      .def_property_readonly("data_ptr", &producer::data_ptr)
      .def_property_readonly("device", &producer::device)
      .def_property_readonly("deleter_calls", &producer::deleter_calls)
      .def_property_readonly("exports", &producer::exports);
  py::class_<imported>(m, "Imported")
      .def("axpby_self", &imported::axpby_self, py::arg("alpha"), py::arg("beta"), py::arg("stream"))
      .def("close", &imported::close)
      .def_property_readonly("data_ptr", &imported::data_ptr)
      .def_property_readonly("size", &imported::size)
      .def_property_readonly("device", &imported::device)
      .def_property_readonly("versioned", &imported::versioned)
      .def_property_readonly("is_open", &imported::is_open)
      .def_property_readonly("deleter_calls", &imported::deleter_calls);
}
