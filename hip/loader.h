/* Run-time loading of the HIP runtime and the gfx950 modules (hip/loader.c). */
#ifndef FLASHPREFILL_GFX950_LOADER_H
#define FLASHPREFILL_GFX950_LOADER_H

#include "backend.h"
#include "hip_runtime.h"

/* The kernels of the embedded code objects. */
typedef enum fp_gfx950_kernel {
    FP_GFX950_FWD_BF16_HD128,
    FP_GFX950_FWD_BF16_QK192,
    FP_GFX950_FWD_FP8_HD128,
    FP_GFX950_FWD_FP8_QK192,
    FP_GFX950_QUANTIZE_D32,
    FP_GFX950_QUANTIZE_D64,
    FP_GFX950_QUANTIZE_D96,
    FP_GFX950_QUANTIZE_D128,
    FP_GFX950_QUANTIZE_D160,
    FP_GFX950_QUANTIZE_D192,
    FP_GFX950_QUANTIZE_D224,
    FP_GFX950_QUANTIZE_D256,
    FP_GFX950_MERGE_STATE_BF16_BF16,
    FP_GFX950_MERGE_STATE_BF16_F32,
    FP_GFX950_MERGE_STATE_F32_BF16,
    FP_GFX950_MERGE_STATE_F32_F32,
    FP_GFX950_VARLEN_CHECK,
    FP_GFX950_QUANTIZE_PAGED_D32,
    FP_GFX950_QUANTIZE_PAGED_D64,
    FP_GFX950_QUANTIZE_PAGED_D96,
    FP_GFX950_QUANTIZE_PAGED_D128,
    FP_GFX950_QUANTIZE_PAGED_D160,
    FP_GFX950_QUANTIZE_PAGED_D192,
    FP_GFX950_QUANTIZE_PAGED_D224,
    FP_GFX950_QUANTIZE_PAGED_D256,
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
