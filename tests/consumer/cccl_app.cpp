// A cudrv user that links cudrv::cccl alone: CCCL's headers and the definition that enables its memory
// resources must come with the target. Checks the bridges at compile time and converts the legacy
// default stream (no driver needed).
#include <cudrv/cccl.hpp>

#include <cstdio>

static_assert(cuda::mr::async_resource_with<cudrv::cccl_device_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::resource_with<cudrv::cccl_resource<cuda::mr::host_accessible>, cuda::mr::host_accessible>);

int main() {
  const cuda::stream_ref s = cudrv::to_cccl(cudrv::stream_ref::legacy_default());
  const cudrv::stream_ref back = cudrv::cccl_stream_ref(s);
  if (back.native_handle() != cudrv::stream_ref::legacy_default().native_handle()) {
    std::printf("cudrv consumer cccl: the stream did not round-trip\n");
    return 1;
  }
  std::printf("cudrv consumer cccl: cuda::stream_ref of the legacy default stream, cuda::mr resources\n");
  return 0;
}
