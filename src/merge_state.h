/* flashprefill_merge_state between the front end (src/merge_state.c, src/validate.c) and a backend (cuda/, hip/). */
#ifndef FLASHPREFILL_MERGE_STATE_H
#define FLASHPREFILL_MERGE_STATE_H

#include "flashprefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FLASHPREFILL_SUCCESS, or INVALID_ARGUMENT / NOT_SUPPORTED with the last error set; never touches the GPU. */
flashprefill_status fp_validate_merge_state(const flashprefill_merge_state_params *p);

/* The backend's flashprefill_merge_state, called only with params that passed fp_validate_merge_state: checks the
   device and the pointers, then enqueues, or returns NO_DEVICE / INVALID_ARGUMENT / NOT_SUPPORTED / DEVICE with the
   last error set. */
flashprefill_status fp_backend_merge_state(const flashprefill_merge_state_params *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_MERGE_STATE_H */
