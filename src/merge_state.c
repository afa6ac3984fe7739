/* flashprefill_merge_state's entry point: validation (src/validate.c), then the backend. */
#include "backend.h"
#include "error.h"
#include "merge_state.h"

flashprefill_status flashprefill_merge_state(const flashprefill_merge_state_params *p, void *stream)
{
    fp_clear_error();
    flashprefill_status status;
    if ((status = fp_validate_merge_state(p)))
        return status;
    return fp_backend_merge_state(p, stream);
}
