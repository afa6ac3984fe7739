// Scratch: cycles per MUFU.EX2 for warps issuing independent exponentials with k FFMA fillers between them.
#include <cstdio>
#include <cstdint>
template <int kFill>
__global__ void bench(float *out, long long *cycles, int iters)
{
    float x[16], y[16];
    for (int i = 0; i < 16; ++i) { x[i] = -0.001f * (threadIdx.x + i); y[i] = 0.5f + i; }
    __syncwarp();
    long long t0 = clock64();
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            float e;
            asm volatile("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(x[i]));
            x[i] = e * -0.5f;
#pragma unroll
            for (int f = 0; f < kFill; ++f)
                y[(i + f) % 16] = fmaf(y[(i + f) % 16], 0.999f, 0.001f);
        }
    }
    long long t1 = clock64();
    float s = 0;
    for (int i = 0; i < 16; ++i) s += x[i] + y[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x % 32 == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
}
template <int kFill>
void run(int threads)
{
    float *out; long long *cyc; const int iters = 256;
    cudaMalloc(&out, threads * 4 * 132); cudaMalloc(&cyc, 8 * 64 * 132);
    bench<kFill><<<132, threads>>>(out, cyc, iters);
    bench<kFill><<<132, threads>>>(out, cyc, iters);
    cudaDeviceSynchronize();
    long long h[64];
    cudaMemcpy(h, cyc, 8 * (threads / 32), cudaMemcpyDeviceToHost);
    double m = 0; for (int w = 0; w < threads / 32; ++w) m += h[w]; m /= threads / 32;
    printf("warps/SMSP %d, FFMA fillers per MUFU %d: %.2f cycles per MUFU.EX2 per warp\n", threads / 128, kFill, m / (iters * 16.0));
    cudaFree(out); cudaFree(cyc);
}
int main()
{
    for (int t : {128, 256, 384}) { run<0>(t); run<1>(t); run<2>(t); run<4>(t); run<7>(t); }
    return 0;
}
