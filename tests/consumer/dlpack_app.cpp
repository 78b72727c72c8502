// A cudrv user that links cudrv::dlpack alone: DLPack's header must come with the target. Exports a host
// array as a managed tensor (no driver needed) and checks that the deleter releases its owner once.
#include <cudrv/dlpack.hpp>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

int main() {
  auto storage = std::make_shared<std::vector<float>>(6, 1.5f);
  std::weak_ptr<std::vector<float>> watch = storage;
  const std::int64_t shape[] = {2, 3};
  cudrv::strided_view<float> view(reinterpret_cast<std::uintptr_t>(storage->data()), shape, {}, {kDLCPU, 0});
  auto tensor = cudrv::to_dlpack<DLManagedTensor>(view, std::move(storage));
  const DLTensor& t = tensor->dl_tensor;
  const bool ok = t.ndim == 2 && t.shape[0] == 2 && t.shape[1] == 3 && t.dtype.code == kDLFloat && t.dtype.bits == 32 &&
                  static_cast<const float*>(t.data)[5] == 1.5f && !watch.expired();
  tensor.reset();
  if (!ok || !watch.expired()) {
    std::printf("cudrv consumer dlpack: unexpected tensor (ok %d, released %d)\n", ok ? 1 : 0, watch.expired() ? 1 : 0);
    return 1;
  }
  std::printf("cudrv consumer dlpack: %s tensor of 2 x 3 on kDLCPU, released once\n",
              cudrv::dlpack_dtype_name(cudrv::dlpack_dtype<float>()).c_str());
  return 0;
}
