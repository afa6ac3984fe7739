/* The gfx950 check of a varlen or paged call's device arrays (hip/varlen_check_launch.c, asm/gfx950/varlen_check.s),
 * enqueued by the forward launcher before the forward kernel. */
#ifndef FLASHPREFILL_GFX950_VARLEN_CHECK_H
#define FLASHPREFILL_GFX950_VARLEN_CHECK_H

#include <stdint.h>

#include "backend.h"

/* Device addresses in the workspace of the checked arrays' copies, which the forward kernel reads instead of the
   call's: cu_seqlens_q, cu_seqlens_k (0 with a paged cache) and every sequence's key count (seqused_k). */
typedef struct fp_gfx950_varlen_copies {
    uint64_t cu_seqlens_q, cu_seqlens_k, seqused_k;
} fp_gfx950_varlen_copies;

/* The check's own limits on p (a varlen call that passed validation): SUCCESS or NOT_SUPPORTED. */
flashprefill_status fp_gfx950_check_varlen_limits(const flashprefill_params *p);

/* Enqueues the check of p's arrays on `stream` and gives the copies' addresses: SUCCESS, or NO_DEVICE /
   NOT_SUPPORTED / DEVICE with the last error set. */
flashprefill_status fp_gfx950_varlen_check(const flashprefill_params *p, void *stream,
                                           fp_gfx950_varlen_copies *copies);

#endif /* FLASHPREFILL_GFX950_VARLEN_CHECK_H */
