/* What a backend (cuda/, hip/) provides to the shared front end (src/api.c).
 *
 * The front end validates the params once (src/validate.c), then picks the first kernel of the backend's
 * table that accepts them. A kernel's launch function is only ever called with params that passed
 * validation and its entry's filter, on a device the backend has checked. Every entry point runs in that order:
 * validation, the backend's limits (no GPU), the device check (src/device_check.c), the launch.
 */
#ifndef FLASHPREFILL_BACKEND_H
#define FLASHPREFILL_BACKEND_H

#include "error.h"
#include "flashprefill.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The forms of a call's tensors: equal-length batches, varlen (packed rows), paged KV caches. */
typedef enum fp_form { FP_FORM_DENSE = 0, FP_FORM_VARLEN = 1, FP_FORM_PAGED = 2 } fp_form;
#define FP_FORM_BIT(form) (1u << (unsigned)(form))

/* Bit (1u << kind) for each flashprefill_descale_kind a kernel accepts. */
#define FP_DESCALE_BIT(kind) (1u << (unsigned)(kind))

typedef flashprefill_status (*fp_launch_fn)(const flashprefill_params *p, void *stream);
/* A kernel's own limits beyond its entry's fields (grid sizes, stride ranges): SUCCESS, or NOT_SUPPORTED with
   the last error saying which. Never touches the GPU: flashprefill_supports calls it too. */
typedef flashprefill_status (*fp_check_fn)(const flashprefill_params *p);

typedef struct fp_kernel_entry {
    const char *name;            /* e.g. "hopper_fwd_bf16_hd128" */
    flashprefill_dtype in_dtype;
    flashprefill_dtype out_dtype;
    int32_t dim_qk;
    int32_t dim_v;
    uint32_t descale_kinds;      /* FP_DESCALE_BIT() of each kind accepted (q, k and v alike) */
    int32_t block_tokens_multiple; /* PER_BLOCK: block_tokens must be a multiple of this (its KV tile) */
    flashprefill_probabilities probabilities; /* the one it computes */
    flashprefill_scores scores;    /* FP32 or FP16, the one it computes (FP16 kernels fall back to float32 per
                                      row group); params asking for DEFAULT take the first entry that fits, so
                                      a table lists an FP16 kernel before the FP32 one it speeds up */
    uint32_t v_layouts;            /* bit (1u << layout) of each flashprefill_v_layout it reads */
    uint32_t forms;                /* FP_FORM_BIT() of each fp_form it takes */
    uint32_t q_dtypes;             /* bit (1u << dtype) of each q dtype it takes: in_dtype, and BF16 where an fp8
                                      kernel rounds bf16 q itself (varlen forms only) */
    fp_check_fn check;             /* NULL: no limits beyond the fields above */
    fp_launch_fn launch;
} fp_kernel_entry;

/* The backend's kernels, in order of preference; fp_backend_kernel_count entries. */
extern const fp_kernel_entry fp_backend_kernels[];
extern const int fp_backend_kernel_count;

/* One pointer argument of an entry point, by its name in the params ("q", "k_descale", "codes"). */
typedef struct fp_named_pointer {
    const char *name;
    const void *ptr; /* NULL: an optional argument left out, not checked */
} fp_named_pointer;

/* Checks that a device usable by this backend is current and that each pointer lives on it (src/device_check.c
   lists an entry point's pointers). Returns FLASHPREFILL_SUCCESS or sets the last error and returns NO_DEVICE /
   INVALID_ARGUMENT / DEVICE. */
flashprefill_status fp_backend_check_device(const fp_named_pointer *pointers, int count);

/* The largest magnitude of q's e4m3 codes that kernel e takes as they are (flashprefill_query_result.q_code_max):
   448, or the bound of its float16 scores. */
float fp_backend_q_code_max(const fp_kernel_entry *e);

/* The backend's limits of flashprefill_quantize beyond validation (layouts, grid sizes, stride ranges): SUCCESS, or
   NOT_SUPPORTED with the last error set. Never touches the GPU. */
flashprefill_status fp_backend_check_quantize(const flashprefill_quantize_params *p);

/* Enqueues the quantizer; called only with params that passed fp_validate_quantize, fp_backend_check_quantize and the
   device check. Returns SUCCESS or DEVICE with the last error set. */
flashprefill_status fp_backend_quantize(const flashprefill_quantize_params *p, void *stream);

/* The same two for flashprefill_quantize_paged. */
flashprefill_status fp_backend_check_quantize_paged(const flashprefill_quantize_paged_params *p);
flashprefill_status fp_backend_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream);

/* Copies the 16-byte header of a varlen workspace (error, error_batch, error_value, tiles: cuda/fwd/varlen.cuh) to
   the host, synchronously: SUCCESS, or NO_DEVICE / DEVICE / NOT_SUPPORTED with the last error set. */
flashprefill_status fp_backend_read_workspace_header(const void *workspace, int32_t header[4]);

/* The same two for flashprefill_prepare_v. */
flashprefill_status fp_backend_check_prepare_v(const flashprefill_prepare_v_params *p);
flashprefill_status fp_backend_prepare_v(const flashprefill_prepare_v_params *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_BACKEND_H */
