/* The C ABI's front end: status strings, the last error, flashprefill_query, and dispatch to the backend's
 * kernel table and launchers (src/backend.h): validation, the backend's limits, the device check, the launch.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "device_check.h"
#include "launch_common.h"
#include "validate.h"

#define FP_STR2(x) #x
#define FP_STR(x) FP_STR2(x)

const char *flashprefill_version(void)
{
    return FP_STR(FLASHPREFILL_VERSION_MAJOR) "." FP_STR(FLASHPREFILL_VERSION_MINOR) "." FP_STR(
        FLASHPREFILL_VERSION_PATCH);
}

const char *flashprefill_status_string(flashprefill_status status)
{
    switch (status) {
    case FLASHPREFILL_SUCCESS: return "success";
    case FLASHPREFILL_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case FLASHPREFILL_ERROR_NOT_SUPPORTED: return "not supported";
    case FLASHPREFILL_ERROR_NO_DEVICE: return "no usable device";
    case FLASHPREFILL_ERROR_DEVICE: return "device error";
    }
    return "unknown status";
}

const char *flashprefill_last_error(void)
{
    return fp_last_error();
}

static const char *dtype_name(flashprefill_dtype dtype)
{
    return dtype == FLASHPREFILL_DTYPE_BF16 ? "bf16" : "fp8_e4m3";
}

/* A descale as the caller wrote it, e.g. "PER_BLOCK of 64 tokens", into buf. */
static const char *descale_name(const flashprefill_descale *d, char *buf, size_t bytes)
{
    switch (d->kind) {
    case FLASHPREFILL_DESCALE_NONE: return "NONE";
    case FLASHPREFILL_DESCALE_PER_TENSOR: return "PER_TENSOR";
    case FLASHPREFILL_DESCALE_PER_HEAD: return "PER_HEAD";
    case FLASHPREFILL_DESCALE_PER_BLOCK:
        snprintf(buf, bytes, "PER_BLOCK of %d tokens", (int)d->block_tokens);
        return buf;
    }
    return "?"; /* validation refused other kinds before any kernel is looked for */
}

static int accepts_descale(const fp_kernel_entry *e, const flashprefill_descale *d)
{
    if (!(e->descale_kinds & FP_DESCALE_BIT(d->kind)))
        return 0;
    return d->kind != FLASHPREFILL_DESCALE_PER_BLOCK || d->block_tokens % e->block_tokens_multiple == 0;
}

static fp_form form_of(const flashprefill_params *p)
{
    return !fp_is_varlen(p) ? FP_FORM_DENSE : p->block_table != NULL ? FP_FORM_PAGED : FP_FORM_VARLEN;
}

static int accepts(const fp_kernel_entry *e, const flashprefill_params *p)
{
    const flashprefill_dtype q_dtype = p->q_dtype ? p->q_dtype : p->in_dtype;
    return (e->forms & FP_FORM_BIT(form_of(p))) && (e->q_dtypes & (1u << (unsigned)q_dtype)) &&
           e->in_dtype == p->in_dtype && e->out_dtype == p->out_dtype && e->dim_qk == p->dim_qk &&
           e->dim_v == p->dim_v && e->probabilities == p->probabilities &&
           (p->scores == FLASHPREFILL_SCORES_DEFAULT || e->scores == p->scores) &&
           (e->v_layouts & (1u << (unsigned)p->v_layout)) && accepts_descale(e, &p->q_descale) &&
           accepts_descale(e, &p->k_descale) && accepts_descale(e, &p->v_descale);
}

/* flashprefill_params as 0.9 made it: the fields before the varlen ones. */
#define FP_PARAMS_BYTES_0_9 ((uint32_t)offsetof(flashprefill_params, cu_seqlens_q))

/* p as this version reads it: a 0.9 struct copied into *local with the later fields zero (an equal-length call), any
   other returned as it is for validation to judge. */
static const flashprefill_params *upgraded(const flashprefill_params *p, flashprefill_params *local)
{
    if (p == NULL || p->struct_bytes != FP_PARAMS_BYTES_0_9)
        return p;
    *local = flashprefill_params_init();
    memcpy(local, p, FP_PARAMS_BYTES_0_9);
    local->struct_bytes = (uint32_t)sizeof *local;
    return local;
}

/* Validates p and finds its kernel; on failure sets the last error and returns NULL with *status set. A kernel
   whose own check refuses p leaves its reason as the error when no later kernel takes p. */
static const fp_kernel_entry *select_kernel(const flashprefill_params *p, flashprefill_status *status)
{
    fp_clear_error();
    if ((*status = fp_validate(p)))
        return NULL;
    int refused_by_check = 0;
    for (int i = 0; i < fp_backend_kernel_count; ++i) {
        const fp_kernel_entry *e = &fp_backend_kernels[i];
        if (!accepts(e, p))
            continue;
        if (e->check == NULL || e->check(p) == FLASHPREFILL_SUCCESS) {
            fp_clear_error();
            return e;
        }
        refused_by_check = 1;
    }
    *status = FLASHPREFILL_ERROR_NOT_SUPPORTED;
    char q_block[32], k_block[32], v_block[32];
    if (!refused_by_check)
        fp_fail(*status,
                "no kernel of this build handles in_dtype %s, dim_qk %d, dim_v %d, descales q %s, k %s, v %s, "
                "probabilities %s, scores %s, v_layout %s%s%s (%d kernels built)",
                dtype_name(p->in_dtype), (int)p->dim_qk, (int)p->dim_v,
                descale_name(&p->q_descale, q_block, sizeof q_block),
                descale_name(&p->k_descale, k_block, sizeof k_block),
                descale_name(&p->v_descale, v_block, sizeof v_block),
                p->probabilities == FLASHPREFILL_PROBABILITIES_FP16 ? "FP16" : "DEFAULT",
                p->scores == FLASHPREFILL_SCORES_FP16   ? "FP16"
                : p->scores == FLASHPREFILL_SCORES_FP32 ? "FP32"
                                                        : "DEFAULT",
                p->v_layout == FLASHPREFILL_V_LAYOUT_PREPARED ? "PREPARED" : "DEFAULT",
                form_of(p) == FP_FORM_PAGED ? ", paged KV" : form_of(p) == FP_FORM_VARLEN ? ", varlen" : "",
                p->q_dtype == FLASHPREFILL_DTYPE_BF16 && p->in_dtype != FLASHPREFILL_DTYPE_BF16 ? ", bf16 q" : "",
                fp_backend_kernel_count);
    return NULL;
}

flashprefill_status flashprefill_supports(const flashprefill_params *p)
{
    flashprefill_params local;
    flashprefill_status status;
    select_kernel(upgraded(p, &local), &status);
    return status;
}

flashprefill_status flashprefill_workspace_bytes(const flashprefill_params *p, int64_t *bytes)
{
    flashprefill_params local;
    flashprefill_status status;
    p = upgraded(p, &local);
    if (bytes == NULL) {
        fp_clear_error();
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "bytes is NULL");
    }
    if (p != NULL && fp_is_varlen(p) && p->workspace == NULL) {
        /* asked before the workspace exists: validate the rest with a stand-in of the size it needs */
        local = *p;
        local.workspace = (void *)(uintptr_t)16;
        local.workspace_bytes = fp_varlen_workspace_bytes(p);
        p = &local;
    }
    if (select_kernel(p, &status) == NULL)
        return status;
    *bytes = fp_varlen_workspace_bytes(p);
    return FLASHPREFILL_SUCCESS;
}

/* Stand-in addresses for flashprefill_query's problem: aligned, 1 TiB apart, never dereferenced. */
static const void *stand_in_address(int i)
{
    return (const void *)(uintptr_t)((uint64_t)(i + 1) << 40);
}

/* A problem of one batch, token and head with q's options, every tensor contiguous, as flashprefill_query asks
   about; a prepared v holds one group of positions per dim. */
static flashprefill_params stand_in_params(const flashprefill_query_params *q)
{
    flashprefill_params p = flashprefill_params_init();
    p.q = stand_in_address(0), p.k = stand_in_address(1), p.v = stand_in_address(2);
    p.out = (void *)stand_in_address(3);
    p.q_stride_dim = p.k_stride_dim = p.out_stride_dim = 1;
    if (q->v_layout == FLASHPREFILL_V_LAYOUT_PREPARED)
        p.v_stride_seq = 1, p.v_stride_dim = FP_PREPARED_GROUP_KEYS;
    else
        p.v_stride_dim = 1;
    p.batch = p.seqlen_q = p.seqlen_k = p.heads_q = p.heads_kv = 1;
    p.dim_qk = q->dim_qk, p.dim_v = q->dim_v;
    p.in_dtype = q->in_dtype, p.out_dtype = FLASHPREFILL_DTYPE_BF16;
    p.causal = 1, p.softmax_scale = 1.0f;
    const flashprefill_descale d = {q->descale_kind, q->block_tokens, (const float *)stand_in_address(4),
                                    (const int8_t *)stand_in_address(5)};
    p.q_descale = p.k_descale = p.v_descale = d;
    p.probabilities = q->probabilities, p.scores = q->scores, p.v_layout = q->v_layout;
    return p;
}

/* The block_tokens_multiple of the first kernel that takes p with PER_BLOCK descales of any size; 0 if none. */
static int32_t preferred_block_tokens(flashprefill_params p)
{
    const flashprefill_descale any_block = {FLASHPREFILL_DESCALE_PER_BLOCK, 0, NULL, NULL}; /* 0: every multiple */
    p.q_descale = p.k_descale = p.v_descale = any_block;
    for (int i = 0; i < fp_backend_kernel_count; ++i)
        if (accepts(&fp_backend_kernels[i], &p))
            return fp_backend_kernels[i].block_tokens_multiple;
    return 0;
}

flashprefill_status flashprefill_query(const flashprefill_query_params *q, flashprefill_query_result *result)
{
    fp_clear_error();
    flashprefill_status status;
    if ((status = fp_validate_query(q, result)))
        return status;
    const flashprefill_params p = stand_in_params(q);
    const fp_kernel_entry *e = select_kernel(&p, &status);
    if (e == NULL)
        return status;
    result->kernel = e->name;
    result->scores = e->scores;
    result->v_layouts = e->v_layouts;
    result->block_tokens_multiple =
        e->descale_kinds & FP_DESCALE_BIT(FLASHPREFILL_DESCALE_PER_BLOCK) ? e->block_tokens_multiple : 0;
    result->preferred_block_tokens = preferred_block_tokens(p);
    result->q_code_max = fp_backend_q_code_max(e);
    result->prepared_v_block_tokens_multiple =
        e->v_layouts & (1u << FLASHPREFILL_V_LAYOUT_PREPARED) ? FP_PREPARED_GROUP_KEYS : 0;
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status flashprefill_workspace_error(const void *workspace, int32_t *error, char *message,
                                                 int32_t message_bytes)
{
    fp_clear_error();
    if (workspace == NULL || error == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s is NULL", workspace == NULL ? "workspace" : "error");
    if (message != NULL && message_bytes <= 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "message_bytes must be > 0 with a message buffer");
    int32_t header[4];
    const flashprefill_status status = fp_backend_read_workspace_header(workspace, header);
    if (status != FLASHPREFILL_SUCCESS)
        return status;
    static const char *const reasons[FP_VARLEN_ERRORS] = {
        [FP_VARLEN_OK] = "valid",
        [FP_VARLEN_CU_SEQLENS_Q] = "cu_seqlens_q is negative, decreasing or past total_q",
        [FP_VARLEN_SEQLEN_Q] = "a sequence has more queries than seqlen_q",
        [FP_VARLEN_CU_SEQLENS_K] = "cu_seqlens_k is negative, decreasing or past total_k",
        [FP_VARLEN_SEQLEN_K] = "a sequence has more keys than seqlen_k",
        [FP_VARLEN_SEQUSED_K] = "seqused_k is negative or past its sequence's rows (or pages)",
        [FP_VARLEN_BLOCK_TABLE] = "block_table holds a page id outside [0, num_pages)",
    };
    const int code = header[0];
    *error = code;
    if (message != NULL) {
        if (code == 0)
            snprintf(message, (size_t)message_bytes, "valid");
        else
            snprintf(message, (size_t)message_bytes, "%s: sequence %d, value %d (out and lse were set to NaN)",
                     code > 0 && code < FP_VARLEN_ERRORS ? reasons[code] : "unknown fault",
                     (int)header[1], (int)header[2]);
    }
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status flashprefill_forward(const flashprefill_params *p, void *stream)
{
    flashprefill_params local;
    p = upgraded(p, &local);
    flashprefill_status status;
    const fp_kernel_entry *kernel = select_kernel(p, &status);
    if (kernel == NULL)
        return status;
    if ((status = fp_check_forward_device(p)))
        return status;
    return kernel->launch(p, stream);
}

flashprefill_status flashprefill_quantize(const flashprefill_quantize_params *p, void *stream)
{
    fp_clear_error();
    flashprefill_status status;
    if ((status = fp_validate_quantize(p)) || (status = fp_backend_check_quantize(p)) ||
        (status = fp_check_quantize_device(p)))
        return status;
    return fp_backend_quantize(p, stream);
}

flashprefill_status flashprefill_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream)
{
    fp_clear_error();
    flashprefill_status status;
    if ((status = fp_validate_quantize_paged(p)) || (status = fp_backend_check_quantize_paged(p)) ||
        (status = fp_check_quantize_paged_device(p)))
        return status;
    return fp_backend_quantize_paged(p, stream);
}

flashprefill_status flashprefill_prepare_v(const flashprefill_prepare_v_params *p, void *stream)
{
    fp_clear_error();
    flashprefill_status status;
    if ((status = fp_validate_prepare_v(p)) || (status = fp_backend_check_prepare_v(p)) ||
        (status = fp_check_prepare_v_device(p)))
        return status;
    return fp_backend_prepare_v(p, stream);
}
