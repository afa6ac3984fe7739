/* Run-time loading of the HIP runtime and the gfx950 modules (hip/loader.c). */
#ifndef FLASHPREFILL_GFX950_LOADER_H
#define FLASHPREFILL_GFX950_LOADER_H

#include "backend.h"
#include "hip_runtime.h"

/* Loads everything on the first call (thread-safe), then hands out the API and the kernel functions.
   FLASHPREFILL_SUCCESS, or NO_DEVICE / NOT_SUPPORTED with the last error set, the same on every call. */
flashprefill_status fp_hip_load(const fp_hip_api **api, hipFunction_t *fwd_bf16_hd128);

#endif /* FLASHPREFILL_GFX950_LOADER_H */
