/* The thread-local last error of the C ABI (src/error.c): set by whichever unit refuses a call (validation, the
 * front end, a backend), read by flashprefill_last_error(). Backends include this, never src/api.c's internals.
 */
#ifndef FLASHPREFILL_ERROR_H
#define FLASHPREFILL_ERROR_H

#include "flashprefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the thread-local last error (printf-style) and returns `status`. */
flashprefill_status fp_fail(flashprefill_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Empties the last error: every entry point calls it first, so that a success leaves "". */
void fp_clear_error(void);

/* The last error of this thread ("" after a success). */
const char *fp_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_ERROR_H */
