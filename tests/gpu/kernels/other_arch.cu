// Compiled only for an architecture the test GPU does not have (a cubin for sm_100): loading it on
// an H100 must fail with a clear error.
extern "C" __global__ void other_arch_kernel(int* out) { out[0] = 42; }
