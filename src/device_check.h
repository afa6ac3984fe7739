/* The device check of every entry point (src/device_check.c): its pointer arguments, listed once, handed to the
 * backend's fp_backend_check_device. */
#ifndef FLASHPREFILL_DEVICE_CHECK_H
#define FLASHPREFILL_DEVICE_CHECK_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

flashprefill_status fp_check_forward_device(const flashprefill_params *p);
flashprefill_status fp_check_quantize_device(const flashprefill_quantize_params *p);
flashprefill_status fp_check_quantize_paged_device(const flashprefill_quantize_paged_params *p);
flashprefill_status fp_check_prepare_v_device(const flashprefill_prepare_v_params *p);
flashprefill_status fp_check_merge_state_device(const flashprefill_merge_state_params *p);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_DEVICE_CHECK_H */
