/* The gfx950 backend's flashprefill_merge_state: no kernel yet. Validation (src/validate.c) runs first, so a call
 * gets the same INVALID_ARGUMENT messages from both libraries; a valid one gets NOT_SUPPORTED. */
#include "backend.h"
#include "merge_state.h"

flashprefill_status fp_backend_merge_state(const flashprefill_merge_state_params *p, void *stream)
{
    (void)p;
    (void)stream;
    return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "flashprefill_merge_state: the gfx950 library has no "
                   "merge_state kernel yet (the Hopper library has one)");
}
