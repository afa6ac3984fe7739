// The CUDA backend's device check (src/backend.h): a Hopper GPU is current and every pointer lives on it.
#include <cuda_runtime.h>

#include "backend.h"

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

extern "C" flashprefill_status fp_backend_check_device(const fp_named_pointer *pointers, int count)
{
    int device = 0;
    flashprefill_status s;
    if ((s = current_hopper(&device)))
        return s;
    for (int i = 0; i < count; ++i)
        if ((s = check_on_device(pointers[i].name, pointers[i].ptr, device)))
            return s;
    return FLASHPREFILL_SUCCESS;
}

extern "C" flashprefill_status fp_backend_read_workspace_header(const void *workspace, int32_t header[4])
{
    const fp_named_pointer pointer = {"workspace", workspace};
    flashprefill_status s = fp_backend_check_device(&pointer, 1);
    if (s != FLASHPREFILL_SUCCESS)
        return s;
    const cudaError_t err = cudaMemcpy(header, workspace, 4 * sizeof(int32_t), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "reading the workspace back: %s", cudaGetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
