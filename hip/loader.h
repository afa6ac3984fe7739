/* Run-time loading of the HIP runtime and the gfx950 modules (hip/loader.c). */
#ifndef FLASHPREFILL_GFX950_LOADER_H
#define FLASHPREFILL_GFX950_LOADER_H

#include "backend.h"
#include "code_object_list.h"
#include "hip_runtime.h"

/* The kernels of the embedded code objects. */
typedef enum fp_gfx950_kernel {
#define FP_GFX950_KERNEL_ENUM(suffix, name) FP_GFX950_##suffix,
    FP_GFX950_CODE_OBJECTS(FP_GFX950_KERNEL_ENUM)
#undef FP_GFX950_KERNEL_ENUM
    FP_GFX950_KERNEL_COUNT
} fp_gfx950_kernel;

/* Loads the HIP runtime on the first call and the modules on the first call per device ordinal (thread-safe),
   then hands out the API and one kernel's function for the device current at the call. FLASHPREFILL_SUCCESS, or
   NO_DEVICE / NOT_SUPPORTED with the last error set, the same on every call for a device. */
flashprefill_status fp_hip_load(const fp_hip_api **api, fp_gfx950_kernel kernel, hipFunction_t *function);

/* Enqueues `kernel` (loaded by fp_hip_load) on `stream` over a grid of (x, y, z) workgroups of `lanes` work-items,
   its kernel arguments the `bytes` at `kernarg` (copied at the call). SUCCESS, or fp_hip_load's failures, or DEVICE
   with the last error naming `what` where the launch fails. */
flashprefill_status fp_hip_launch(fp_gfx950_kernel kernel, unsigned x, unsigned y, unsigned z, unsigned lanes,
                                  void *stream, void *kernarg, size_t bytes, const char *what);

#endif /* FLASHPREFILL_GFX950_LOADER_H */
