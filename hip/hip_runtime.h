/* The few HIP runtime entry points the gfx950 backend calls, resolved from libamdhip64.so at run time
 * (hip/loader.c), so that the library builds and loads without ROCm installed. Types and constants as in
 * ROCm's hip_runtime_api.h.
 */
#ifndef FLASHPREFILL_HIP_RUNTIME_H
#define FLASHPREFILL_HIP_RUNTIME_H

#include <stddef.h>

typedef int hipError_t; /* hipSuccess = 0 */
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;

/* hipModuleLaunchKernel's `extra`: kernel arguments passed as one buffer. */
#define FP_HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define FP_HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define FP_HIP_LAUNCH_PARAM_END ((void *)0x03)
/* hipMemcpyKind */
#define FP_HIP_MEMCPY_DEVICE_TO_HOST 2

typedef struct fp_hip_api {
    hipError_t (*GetDeviceCount)(int *count);
    hipError_t (*GetDevice)(int *device);
    hipError_t (*ModuleLoadData)(hipModule_t *module, const void *image);
    hipError_t (*ModuleGetFunction)(hipFunction_t *function, hipModule_t module, const char *name);
    hipError_t (*ModuleLaunchKernel)(hipFunction_t f, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                     unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                                     hipStream_t stream, void **kernel_params, void **extra);
    const char *(*GetErrorString)(hipError_t error);
    hipError_t (*Memcpy)(void *dst, const void *src, size_t bytes, int kind); /* synchronous */
} fp_hip_api;

#endif /* FLASHPREFILL_HIP_RUNTIME_H */
