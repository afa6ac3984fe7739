/* The thread-local last error (src/error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

flashprefill_status fp_fail(flashprefill_status status, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, args);
    va_end(args);
    return status;
}

void fp_clear_error(void)
{
    last_error[0] = '\0';
}

const char *fp_last_error(void)
{
    return last_error;
}
