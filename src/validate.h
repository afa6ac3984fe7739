/* Validation of flashprefill_params, shared by every backend (src/validate.c). */
#ifndef FLASHPREFILL_VALIDATE_H
#define FLASHPREFILL_VALIDATE_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FLASHPREFILL_SUCCESS, or INVALID_ARGUMENT / NOT_SUPPORTED with the last error set. */
flashprefill_status fp_validate(const flashprefill_params *p);

/* The same for flashprefill_quantize_params. */
flashprefill_status fp_validate_quantize(const flashprefill_quantize_params *p);

/* The same for flashprefill_quantize_paged_params. */
flashprefill_status fp_validate_quantize_paged(const flashprefill_quantize_paged_params *p);

/* The same for flashprefill_prepare_v_params. */
flashprefill_status fp_validate_prepare_v(const flashprefill_prepare_v_params *p);

/* The struct sizes of flashprefill_query's arguments (their options are checked as fp_validate's). */
flashprefill_status fp_validate_query(const flashprefill_query_params *p, const flashprefill_query_result *result);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_VALIDATE_H */
