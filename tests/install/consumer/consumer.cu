// A minimal user program: includes the umbrella header, compiles a kernel next to stash, and uses
// host-side stash code (runs without a GPU).
#include <stash/stash.cuh>

#include <cstdio>

__global__ void scale(float* x, int n, float a)
{
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { x[i] *= a; }
}

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer FILE.csv\n");
    return 2;
  }
  auto const instance = stash::read_minimalloc_csv(argv[1]);
  stash::limiting_upstream<stash::host_upstream> upstream(1 << 20);
  void* p = upstream.allocate(4096, 256);
  upstream.deallocate(p, 4096, 256);
  std::printf("consumer: stash %d, %zu buffers read, peak %zu B through the upstream\n",
              STASH_VERSION, instance.buffers.size(), upstream.peak_bytes());
  return instance.buffers.empty() ? 1 : 0;
}
