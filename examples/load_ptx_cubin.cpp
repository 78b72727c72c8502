// load_ptx_cubin: loads a PTX file and a cubin file that nvcc produced at build time, prints what the
// driver reports about the kernel, and launches it from both.
//
//   example_load_ptx_cubin [file.ptx file.cubin]
//
// Without arguments it loads the files built next to it (examples/kernels/scale.cu compiled with
// `nvcc -ptx -arch=compute_90` and `nvcc -cubin -arch=sm_90`). The PTX is compiled by the driver's
// JIT for whatever GPU is present; the cubin runs only on sm_90 devices.
#include <cstdio>
#include <string>
#include <vector>

#include "example_main.hpp"

namespace {

bool run_file(const std::string& path, const cudrv::device& dev, cudrv::stream_ref stream) {
  // Kind from the extension; PTX is JIT-compiled here, with the JIT's log kept.
  cudrv::library lib = cudrv::library::from_file(path, {.optimization_level = 4, .verbose = true});
  cudrv::kernel scale = lib.get_kernel("scale");  // untyped: arguments checked against its parameters
  cudrv::kernel_attributes attrs = scale.attributes(dev);
  std::printf("%s\n  kernels: ", path.c_str());
  for (const auto& name : lib.kernel_names()) {
    std::printf("%s ", name.c_str());
  }
  std::printf("\n  registers %d, static shared %d B, max threads per block %d, PTX %d.%d, binary sm_%d\n",
              attrs.num_regs, attrs.shared_size_bytes, attrs.max_threads_per_block, attrs.ptx_version / 10,
              attrs.ptx_version % 10, attrs.binary_version);
  std::printf("  parameters:");
  for (const auto& p : scale.parameters()) {
    std::printf(" #%zu at offset %zu (%zu bytes)", p.index, p.offset, p.size);
  }
  std::printf("\n  active blocks of 256 threads per SM: %d\n", scale.max_active_blocks_per_multiprocessor(dev, 256));
  if (!lib.jit_log().empty()) {
    std::printf("  JIT log:\n%s\n", lib.jit_log().c_str());
  }

  const int n = 1 << 16;
  std::vector<float> data(n);
  for (int i = 0; i < n; ++i) {
    data[i] = static_cast<float>(i);
  }
  cudrv::device_buffer<float> d(dev, n);
  cudrv::copy(d, data, stream);
  cudrv::launch(stream, {.grid = n / 256, .block = 256}, scale, d.get(), 0.5f, n);
  std::vector<float> out(n);
  cudrv::copy(out, d, stream);
  stream.synchronize();
  for (int i = 0; i < n; ++i) {
    if (out[i] != data[i] * 0.5f) {
      std::printf("  WRONG at %d: %g\n", i, out[i]);
      return false;
    }
  }
  std::printf("  scale by 0.5 of %d elements: correct\n", n);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 3) {
    std::fprintf(stderr, "usage: example_load_ptx_cubin [file.ptx file.cubin]\n");
    return 1;
  }
  std::string ptx = argc == 3 ? argv[1] : CUDRV_EXAMPLE_SCALE_PTX;
  std::string cubin = argc == 3 ? argv[2] : CUDRV_EXAMPLE_SCALE_CUBIN;
  return example::run("load_ptx_cubin", [&] {
    cudrv::device dev(0);
    cudrv::stream stream(dev);
    bool ok = run_file(ptx, dev, stream);
    if (dev.compute_capability().as_int() == 90) {
      ok = run_file(cubin, dev, stream) && ok;
    } else {
      std::printf("%s: skipped, the device is %s, not sm_90\n", cubin.c_str(), dev.arch().c_str());
    }
    return ok;
  });
}
