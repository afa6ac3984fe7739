// The CUDA backend's device checks (src/backend.h, cuda/quantize.cu): a Hopper GPU is current and every pointer
// lives on it.
#include <cuda_runtime.h>

#include "backend.h"
#include "device.h"

namespace {

constexpr int kHopperMajor = 9;
constexpr int kHopperMinor = 0;

flashprefill_status check_on_device(const char *name, const void *ptr, int device)
{
    if (ptr == nullptr)
        return FLASHPREFILL_SUCCESS;
    cudaPointerAttributes attrs;
    cudaError_t err = cudaPointerGetAttributes(&attrs, ptr);
    if (err != cudaSuccess) {
        cudaGetLastError();  // the error is reported here; don't leave it for the caller's next check
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p: %s", name, ptr, cudaGetErrorString(err));
    }
    if (attrs.type != cudaMemoryTypeDevice && attrs.type != cudaMemoryTypeManaged)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p is not device memory (%s)", name, ptr,
                       attrs.type == cudaMemoryTypeHost ? "pinned host memory" : "host memory");
    if (attrs.device != device)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "%s = %p lives on device %d, but the current device is %d", name, ptr, attrs.device, device);
    return FLASHPREFILL_SUCCESS;
}

const void *descale_data(const flashprefill_descale &d)
{
    switch (d.kind) {
    case FLASHPREFILL_DESCALE_PER_TENSOR:
    case FLASHPREFILL_DESCALE_PER_HEAD: return d.factors;
    case FLASHPREFILL_DESCALE_PER_BLOCK: return d.exponents;
    default: return nullptr;  // NONE: whatever the pointers hold is not read
    }
}

// The current device, if it is a Hopper GPU.
flashprefill_status current_hopper(int *device)
{
    cudaError_t err = cudaGetDevice(device);
    if (err != cudaSuccess) {
        cudaGetLastError();
        return fp_fail(FLASHPREFILL_ERROR_NO_DEVICE, "no CUDA device: %s", cudaGetErrorString(err));
    }
    int major = 0, minor = 0;
    if ((err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, *device)) != cudaSuccess ||
        (err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, *device)) != cudaSuccess) {
        cudaGetLastError();
        return fp_fail(FLASHPREFILL_ERROR_NO_DEVICE, "device %d: %s", *device, cudaGetErrorString(err));
    }
    if (major != kHopperMajor || minor != kHopperMinor)
        return fp_fail(FLASHPREFILL_ERROR_NO_DEVICE, "device %d is sm_%d%d; this build's kernels need sm_90 (Hopper)",
                       *device, major, minor);
    return FLASHPREFILL_SUCCESS;
}

}  // namespace

extern "C" flashprefill_status fp_backend_check_device(const flashprefill_params *p)
{
    int device = 0;
    flashprefill_status s;
    if ((s = current_hopper(&device)))
        return s;
    if ((s = check_on_device("q", p->q, device)) || (s = check_on_device("k", p->k, device)) ||
        (s = check_on_device("v", p->v, device)) || (s = check_on_device("out", p->out, device)) ||
        (s = check_on_device("lse", p->lse, device)) ||
        (s = check_on_device("q_descale", descale_data(p->q_descale), device)) ||
        (s = check_on_device("k_descale", descale_data(p->k_descale), device)) ||
        (s = check_on_device("v_descale", descale_data(p->v_descale), device)))
        return s;
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_check_quantize_device(const flashprefill_quantize_params *p)
{
    int device = 0;
    flashprefill_status s;
    if ((s = current_hopper(&device)))
        return s;
    if ((s = check_on_device("x", p->x, device)) || (s = check_on_device("codes", p->codes, device)) ||
        (s = check_on_device("exponents", p->exponents, device)) ||
        (s = check_on_device("signs", p->signs, device)) || (s = check_on_device("subtract", p->subtract, device)))
        return s;
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_check_prepare_v_device(const flashprefill_prepare_v_params *p)
{
    int device = 0;
    flashprefill_status s;
    if ((s = current_hopper(&device)))
        return s;
    if ((s = check_on_device("v", p->v, device)) || (s = check_on_device("prepared", p->prepared, device)))
        return s;
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_check_merge_state_device(const flashprefill_merge_state_params *p)
{
    int device = 0;
    flashprefill_status s;
    if ((s = current_hopper(&device)))
        return s;
    if ((s = check_on_device("out_a", p->out_a, device)) || (s = check_on_device("out_b", p->out_b, device)) ||
        (s = check_on_device("out", p->out, device)) || (s = check_on_device("lse_a", p->lse_a, device)) ||
        (s = check_on_device("lse_b", p->lse_b, device)) || (s = check_on_device("lse", p->lse, device)))
        return s;
    return FLASHPREFILL_SUCCESS;
}
