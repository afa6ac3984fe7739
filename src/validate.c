/* Argument validation shared by every backend: one place, one message per mistake.
 * Nothing here touches the GPU or dereferences a tensor pointer.
 */
#include "validate.h"
#include "merge_state.h"

#include "launch_common.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#define FP_TENSOR_ALIGN_BYTES 16

/* Bytes of an attention input or output element; 0 for anything else (fp32 is the quantizer's input only). */
static int attention_dtype_bytes(flashprefill_dtype dtype)
{
    return dtype == FLASHPREFILL_DTYPE_FP32 ? 0 : fp_dtype_bytes(dtype);
}

/* The first check of every call, before any other field is read: a struct of another size is another layout. */
static flashprefill_status check_struct_bytes(const char *c_type, uint32_t struct_bytes, uint32_t library_bytes)
{
    if (struct_bytes != library_bytes)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "%s struct is %u bytes (its struct_bytes); this library (version %s) takes %u: rebuild "
                       "against its header and make the struct with %s_init()", c_type, (unsigned)struct_bytes,
                       flashprefill_version(), (unsigned)library_bytes, c_type);
    return FLASHPREFILL_SUCCESS;
}

static flashprefill_status check_positive(const char *name, int32_t value)
{
    if (value <= 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s must be > 0, got %d", name, (int)value);
    return FLASHPREFILL_SUCCESS;
}

/* One strided 4-d tensor (batch, seq, heads, dim) as the ABI describes it. */
typedef struct tensor_view {
    const char *name;
    const void *data;
    int64_t extent[4];
    int64_t stride[4]; /* elements */
    int elem_bytes;
    int writable;      /* outputs must not overlap themselves */
    int contiguous;    /* the axis of stride 1: dim (3), or seq (1) for v in V_LAYOUT_PREPARED */
} tensor_view;

static const char *const axis_name[4] = {"stride_batch", "stride_seq", "stride_head", "stride_dim"};
/* flashprefill_quantize_paged_params': its tokens and its cache's pages and rows. */
static const char *const token_axis_name[4] = {"stride_batch", "stride_token", "stride_head", "stride_dim"};
static const char *const page_axis_name[4] = {"stride_page", "stride_row", "stride_head", "stride_dim"};

/* Bytes from t->data to one past its last element; call after check_tensor accepted t. */
static int64_t tensor_span_bytes(const tensor_view *t)
{
    int64_t last_elem = t->extent[t->contiguous];
    for (int axis = 0; axis < 4; ++axis)
        if (axis != t->contiguous && t->extent[axis] > 1)
            last_elem += t->stride[axis] * (t->extent[axis] - 1);
    return last_elem * t->elem_bytes;
}

static int spans_overlap(const void *a, int64_t a_bytes, const void *b, int64_t b_bytes)
{
    return (uintptr_t)a < (uintptr_t)b + (uint64_t)b_bytes && (uintptr_t)b < (uintptr_t)a + (uint64_t)a_bytes;
}

/* check_tensor with the strides named as the params name them (axis_names[axis], e.g. "stride_row"). */
static flashprefill_status check_tensor_named(const tensor_view *t, const char *const axis_names[4])
{
    if (t->data == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s is NULL", t->name);
    if ((uintptr_t)t->data % FP_TENSOR_ALIGN_BYTES != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p is not %d-byte aligned", t->name, t->data,
                       FP_TENSOR_ALIGN_BYTES);
    if (t->stride[t->contiguous] != 1)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s_%s must be 1 (%s), got %lld", t->name,
                       axis_names[t->contiguous],
                       t->contiguous == 3 ? "the last dim contiguous"
                                          : "the PREPARED layout: each row of keys contiguous",
                       (long long)t->stride[t->contiguous]);
    int64_t last_elem = 0; /* offset in elements of the last element */
    for (int axis = 0; axis < 4; ++axis) {
        if (axis == t->contiguous)
            continue;
        const int64_t stride = t->stride[axis];
        if (stride < 0)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s_%s must be >= 0, got %lld", t->name,
                           axis_names[axis], (long long)stride);
        if (t->extent[axis] == 1)
            continue; /* a stride of an axis of extent 1 is never used */
        if ((stride * t->elem_bytes) % FP_TENSOR_ALIGN_BYTES != 0)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "%s_%s = %lld elements of %d bytes is not a multiple of %d bytes", t->name,
                           axis_names[axis], (long long)stride, t->elem_bytes, FP_TENSOR_ALIGN_BYTES);
        int64_t span;
        if (__builtin_mul_overflow(stride, t->extent[axis] - 1, &span) ||
            __builtin_add_overflow(last_elem, span, &last_elem))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "%s is too large: %s_%s = %lld times %lld overflows a 64-bit offset", t->name,
                           t->name, axis_names[axis], (long long)stride, (long long)(t->extent[axis] - 1));
    }
    int64_t end_bytes;
    if (__builtin_add_overflow(last_elem, t->extent[t->contiguous], &last_elem) ||
        __builtin_mul_overflow(last_elem, (int64_t)t->elem_bytes, &end_bytes) ||
        (uint64_t)(uintptr_t)t->data > UINTPTR_MAX - (uint64_t)end_bytes)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s is too large: its last byte is past the address space",
                       t->name);
    if (!t->writable)
        return FLASHPREFILL_SUCCESS;
    /* No two elements of an output may share an address: with the axes sorted by stride, each stride must
       reach past the whole extent of the smaller ones. */
    int order[3]; /* the axes other than the contiguous one */
    for (int axis = 0, i = 0; axis < 4; ++axis)
        if (axis != t->contiguous)
            order[i++] = axis;
    for (int i = 1; i < 3; ++i)
        for (int j = i; j > 0 && t->stride[order[j]] < t->stride[order[j - 1]]; --j) {
            const int tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp;
        }
    int64_t covered = t->extent[t->contiguous]; /* elements spanned by the axes checked so far */
    for (int i = 0; i < 3; ++i) {
        const int axis = order[i];
        if (t->extent[axis] == 1)
            continue;
        if (t->stride[axis] < covered)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "%s overlaps itself: %s_%s = %lld is smaller than the %lld elements spanned by the "
                           "axes inside it", t->name, t->name, axis_names[axis], (long long)t->stride[axis],
                           (long long)covered);
        covered = t->stride[axis] * (t->extent[axis] - 1) + covered;
    }
    return FLASHPREFILL_SUCCESS;
}

static flashprefill_status check_tensor(const tensor_view *t)
{
    return check_tensor_named(t, axis_name);
}

static flashprefill_status check_descale(const char *name, const flashprefill_descale *d,
                                         const flashprefill_params *p)
{
    if (p->in_dtype == FLASHPREFILL_DTYPE_BF16) {
        if (d->kind != FLASHPREFILL_DESCALE_NONE)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "%s: bf16 inputs take no descale (kind must be FLASHPREFILL_DESCALE_NONE)", name);
        return FLASHPREFILL_SUCCESS;
    }
    switch (d->kind) {
    case FLASHPREFILL_DESCALE_NONE:
        return FLASHPREFILL_SUCCESS;
    case FLASHPREFILL_DESCALE_PER_TENSOR:
    case FLASHPREFILL_DESCALE_PER_HEAD:
        if (d->factors == NULL)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s.factors is NULL", name);
        if ((uintptr_t)d->factors % sizeof(float) != 0)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s.factors = %p is not 4-byte aligned", name,
                           (const void *)d->factors);
        return FLASHPREFILL_SUCCESS;
    case FLASHPREFILL_DESCALE_PER_BLOCK:
        if (d->exponents == NULL)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s.exponents is NULL", name);
        if (d->block_tokens <= 0)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s.block_tokens must be > 0, got %d", name,
                           (int)d->block_tokens);
        return FLASHPREFILL_SUCCESS;
    }
    return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s.kind = %d is not a flashprefill_descale_kind", name,
                   (int)d->kind);
}

/* Head dims no kernel of the backend takes are reported before the strides: with such a dim the strides are often
   off too, and "dim 100 has no kernel" is the mistake to fix first. */
static flashprefill_status check_dims_built(const flashprefill_params *p)
{
    char built[128] = "";
    int length = 0;
    for (int i = 0; i < fp_backend_kernel_count; ++i) {
        const fp_kernel_entry *e = &fp_backend_kernels[i];
        if (e->dim_qk == p->dim_qk && e->dim_v == p->dim_v)
            return FLASHPREFILL_SUCCESS;
        int listed = 0;
        for (int j = 0; j < i; ++j)
            listed |= fp_backend_kernels[j].dim_qk == e->dim_qk && fp_backend_kernels[j].dim_v == e->dim_v;
        if (!listed && length < (int)sizeof built)
            length += snprintf(built + length, sizeof built - length, "%s%d/%d", length ? " or " : "",
                               (int)e->dim_qk, (int)e->dim_v);
    }
    return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                   "no kernel of this build takes dim_qk = %d with dim_v = %d: dim_qk/dim_v must be %s", (int)p->dim_qk,
                   (int)p->dim_v, built);
}

static flashprefill_status check_int32_array(const char *name, const int32_t *ptr, int required)
{
    if (ptr == NULL)
        return required ? fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s is NULL", name) : FLASHPREFILL_SUCCESS;
    if ((uintptr_t)ptr % sizeof(int32_t) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p is not 4-byte aligned", name, (const void *)ptr);
    return FLASHPREFILL_SUCCESS;
}

/* The varlen and paged fields the host can check (the device arrays' values are the plan kernel's: flashprefill.h). */
static flashprefill_status check_varlen(const flashprefill_params *p)
{
    flashprefill_status s;
    const int paged = p->block_table != NULL;
    if ((s = check_int32_array("cu_seqlens_q", p->cu_seqlens_q, 1)) ||
        (s = check_int32_array("seqused_k", p->seqused_k, paged)) ||
        (s = check_int32_array("block_table", p->block_table, 0)) || (s = check_positive("total_q", p->total_q)))
        return s;
    if (paged) {
        if (p->cu_seqlens_k != NULL)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "cu_seqlens_k must be NULL with a paged KV cache (block_table set): keys are found through "
                           "block_table and counted by seqused_k");
        if ((s = check_positive("page_size", p->page_size)) || (s = check_positive("num_pages", p->num_pages)))
            return s;
        if (p->page_size < 16 || (p->page_size & (p->page_size - 1)) != 0)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "page_size must be a power of two >= 16, got %d",
                           (int)p->page_size);
        if ((int64_t)p->block_table_stride * p->page_size < p->seqlen_k)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "block_table_stride = %d pages of %d tokens cannot hold seqlen_k = %d keys",
                           (int)p->block_table_stride, (int)p->page_size, (int)p->seqlen_k);
        const flashprefill_descale *kv[2] = {&p->k_descale, &p->v_descale};
        for (int i = 0; i < 2; ++i)
            if (kv[i]->kind == FLASHPREFILL_DESCALE_PER_BLOCK && kv[i]->block_tokens != p->page_size)
                return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                               "%s: a paged cache's PER_BLOCK descale has one exponent per page and kv head: "
                               "block_tokens must be page_size = %d, got %d",
                               i == 0 ? "k_descale" : "v_descale", (int)p->page_size, (int)kv[i]->block_tokens);
    } else {
        if ((s = check_int32_array("cu_seqlens_k", p->cu_seqlens_k, 1)) || (s = check_positive("total_k", p->total_k)))
            return s;
    }
    if (p->v_layout != FLASHPREFILL_V_LAYOUT_DEFAULT)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "v_layout PREPARED is laid out per batch: varlen and paged calls take v as packed rows or pages");
    if (p->workspace == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "workspace is NULL: a varlen call needs flashprefill_workspace_bytes() = %lld bytes",
                       (long long)fp_varlen_workspace_bytes(p));
    if ((uintptr_t)p->workspace % 16 != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "workspace = %p is not 16-byte aligned", p->workspace);
    if (p->workspace_bytes < fp_varlen_workspace_bytes(p))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "workspace_bytes = %lld is less than flashprefill_workspace_bytes() = %lld", 
                       (long long)p->workspace_bytes, (long long)fp_varlen_workspace_bytes(p));
    return FLASHPREFILL_SUCCESS;
}

/* q_dtype: 0 (in_dtype), in_dtype itself, or BF16 against fp8 k and v in a varlen call; its rotation's signs. */
static flashprefill_status check_q_dtype(const flashprefill_params *p)
{
    const int bf16_q = p->q_dtype == FLASHPREFILL_DTYPE_BF16 && p->in_dtype == FLASHPREFILL_DTYPE_FP8_E4M3;
    if (p->q_dtype != 0 && p->q_dtype != p->in_dtype && !bf16_q)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "q_dtype = %d: q takes in_dtype (0 or the same value), or BF16 against fp8 k and v",
                       (int)p->q_dtype);
    if (!bf16_q) {
        if (p->q_rotation_signs != NULL)
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "q_rotation_signs is for a bf16 q against fp8 k and v (q_dtype BF16): the kernel rotates "
                           "it while rounding it; rotate an fp8 q before rounding it (flashprefill_quantize)");
        return FLASHPREFILL_SUCCESS;
    }
    if (!fp_is_varlen(p))
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "a bf16 q against fp8 k and v is a varlen form: set cu_seqlens_q (one sequence of seqlen_q rows "
                       "is cu_seqlens_q = {0, seqlen_q})");
    if (p->q_descale.kind != FLASHPREFILL_DESCALE_NONE)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "q_descale must be NONE with a bf16 q: the kernel rounds q and picks its scale");
    if (p->q_rotation_signs != NULL && (uintptr_t)p->q_rotation_signs % sizeof(float) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "q_rotation_signs = %p is not 4-byte aligned",
                       (const void *)p->q_rotation_signs);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate(const flashprefill_params *p)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if ((s = check_struct_bytes("flashprefill_params", p->struct_bytes, (uint32_t)sizeof *p)))
        return s;

    if ((s = check_positive("batch", p->batch)) || (s = check_positive("seqlen_q", p->seqlen_q)) ||
        (s = check_positive("seqlen_k", p->seqlen_k)) || (s = check_positive("heads_q", p->heads_q)) ||
        (s = check_positive("heads_kv", p->heads_kv)) || (s = check_positive("dim_qk", p->dim_qk)) ||
        (s = check_positive("dim_v", p->dim_v)))
        return s;
    if (p->heads_q % p->heads_kv != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "heads_q = %d is not a multiple of heads_kv = %d",
                       (int)p->heads_q, (int)p->heads_kv);
    if (p->causal != 0 && p->causal != 1)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "causal must be 0 or 1, got %d", (int)p->causal);
    const int varlen = fp_is_varlen(p), paged = varlen && p->block_table != NULL;
    if (varlen && (s = check_varlen(p)))
        return s;
    if (!varlen && p->causal && p->seqlen_q > p->seqlen_k)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "causal attention needs seqlen_q <= seqlen_k (the mask is aligned bottom-right), got "
                       "seqlen_q = %d > seqlen_k = %d", (int)p->seqlen_q, (int)p->seqlen_k);
    if (!(isfinite(p->softmax_scale) && p->softmax_scale > 0.0f))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "softmax_scale must be finite and > 0, got %g",
                       (double)p->softmax_scale);

    const int in_bytes = attention_dtype_bytes(p->in_dtype);
    if ((s = check_q_dtype(p)))
        return s;
    const int q_bytes = p->q_dtype == FLASHPREFILL_DTYPE_BF16 ? 2 : in_bytes;
    if (in_bytes == 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "in_dtype = %d is not an attention dtype (bf16, fp8_e4m3)",
                       (int)p->in_dtype);
    const int out_bytes = attention_dtype_bytes(p->out_dtype);
    if (out_bytes == 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "out_dtype = %d is not an attention dtype (bf16, fp8_e4m3)",
                       (int)p->out_dtype);

    if ((s = check_dims_built(p)))
        return s;
    if (p->v_layout != FLASHPREFILL_V_LAYOUT_DEFAULT && p->v_layout != FLASHPREFILL_V_LAYOUT_PREPARED)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "v_layout = %d is not a flashprefill_v_layout",
                       (int)p->v_layout);
    const int prepared_v = p->v_layout == FLASHPREFILL_V_LAYOUT_PREPARED;
    if (prepared_v && (p->in_dtype != FLASHPREFILL_DTYPE_FP8_E4M3 ||
                       p->probabilities != FLASHPREFILL_PROBABILITIES_DEFAULT))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "v_layout PREPARED holds e4m3 codes for e4m3 probabilities: it needs in_dtype FP8_E4M3 and "
                       "probabilities DEFAULT");
    /* A prepared v's rows hold seqlen_k rounded up to 16 positions, every one read. */
    const int64_t v_positions = prepared_v ? fp_prepared_positions(p->seqlen_k) : p->seqlen_k;
    /* varlen: packed rows as one batch; paged k and v: pages as batches */
    const int64_t q_batches = varlen ? 1 : p->batch, q_rows = varlen ? p->total_q : p->seqlen_q;
    const int64_t kv_batches = paged ? p->num_pages : varlen ? 1 : p->batch;
    const int64_t kv_rows = paged ? p->page_size : varlen ? p->total_k : p->seqlen_k;
    const tensor_view tensors[4] = {
        {"q", p->q, {q_batches, q_rows, p->heads_q, p->dim_qk},
         {p->q_stride_batch, p->q_stride_seq, p->q_stride_head, p->q_stride_dim}, q_bytes, 0, 3},
        {"k", p->k, {kv_batches, kv_rows, p->heads_kv, p->dim_qk},
         {p->k_stride_batch, p->k_stride_seq, p->k_stride_head, p->k_stride_dim}, in_bytes, 0, 3},
        {"v", p->v, {kv_batches, varlen ? kv_rows : v_positions, p->heads_kv, p->dim_v},
         {p->v_stride_batch, p->v_stride_seq, p->v_stride_head, p->v_stride_dim}, in_bytes, 0, prepared_v ? 1 : 3},
        {"out", p->out, {q_batches, q_rows, p->heads_q, p->dim_v},
         {p->out_stride_batch, p->out_stride_seq, p->out_stride_head, p->out_stride_dim}, out_bytes, 1, 3},
    };
    for (int i = 0; i < 4; ++i)
        if ((s = check_tensor(&tensors[i])))
            return s;
    if (p->lse != NULL && (uintptr_t)p->lse % sizeof(float) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "lse = %p is not 4-byte aligned", (void *)p->lse);
    /* The kernels read q, k, v while they write out and lse: no byte may be shared (no in-place attention). */
    const int64_t out_bytes_span = tensor_span_bytes(&tensors[3]);
    /* Cannot overflow: out, already checked, spans at least 16 bytes per (batch, head, query) row. */
    const int64_t lse_bytes = q_batches * p->heads_q * q_rows * (int64_t)sizeof(float);
    for (int i = 0; i < 3; ++i) {
        const int64_t in_bytes_span = tensor_span_bytes(&tensors[i]);
        if (spans_overlap(p->out, out_bytes_span, tensors[i].data, in_bytes_span))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "out overlaps %s: the output must not share memory with an input", tensors[i].name);
        if (p->lse != NULL && spans_overlap(p->lse, lse_bytes, tensors[i].data, in_bytes_span))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "lse overlaps %s: the output must not share memory with an input", tensors[i].name);
    }
    if (p->lse != NULL && spans_overlap(p->lse, lse_bytes, p->out, out_bytes_span))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "lse overlaps out");

    if ((s = check_descale("q_descale", &p->q_descale, p)) || (s = check_descale("k_descale", &p->k_descale, p)) ||
        (s = check_descale("v_descale", &p->v_descale, p)))
        return s;
    if (p->probabilities != FLASHPREFILL_PROBABILITIES_DEFAULT && p->probabilities != FLASHPREFILL_PROBABILITIES_FP16)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "probabilities = %d is not a flashprefill_probabilities",
                       (int)p->probabilities);
    if (p->probabilities == FLASHPREFILL_PROBABILITIES_FP16 && p->in_dtype != FLASHPREFILL_DTYPE_FP8_E4M3)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "probabilities FP16 is an fp8 option: bf16 inputs take DEFAULT (their P is bf16)");
    if (p->scores != FLASHPREFILL_SCORES_DEFAULT && p->scores != FLASHPREFILL_SCORES_FP16 &&
        p->scores != FLASHPREFILL_SCORES_FP32)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "scores = %d is not a flashprefill_scores", (int)p->scores);
    if (p->scores == FLASHPREFILL_SCORES_FP16 && p->in_dtype != FLASHPREFILL_DTYPE_FP8_E4M3)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "scores FP16 is an fp8 option: bf16 inputs take DEFAULT or FP32 (float32 scores)");

    if (p->out_dtype != FLASHPREFILL_DTYPE_BF16)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "out_dtype fp8 is reserved: only bf16 output exists");
    return FLASHPREFILL_SUCCESS;
}

static flashprefill_status check_floats(const char *name, const float *ptr)
{
    if (ptr != NULL && (uintptr_t)ptr % sizeof(float) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p is not 4-byte aligned", name, (const void *)ptr);
    return FLASHPREFILL_SUCCESS;
}

/* 0 (for 448), or a normal e4m3 value: rounding to e4m3 never carries a code past it. */
static flashprefill_status check_code_max(float code_max)
{
    int exponent = 0;
    const float fraction = frexpf(code_max, &exponent); /* code_max = fraction 2^exponent, fraction in [0.5, 1) */
    const int e4m3_value = isfinite(code_max) && code_max >= 0x1p-6f && code_max <= FP_E4M3_MAX &&
                           fraction * 16.0f == floorf(fraction * 16.0f); /* 1 + 3 mantissa bits */
    if (code_max != 0.0f && !e4m3_value)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "code_max must be 0 (448) or a normal e4m3 value in [2^-6, 448], got %g", (double)code_max);
    return FLASHPREFILL_SUCCESS;
}

/* The varlen form's own fields (cu_seqlens set): the shapes, and the unused ones left 0 so that a caller mixing the
   two forms hears of it. */
static flashprefill_status check_quantize_varlen(const flashprefill_quantize_params *p)
{
    flashprefill_status s;
    if ((s = check_positive("total", p->total)) || (s = check_positive("max_seqlen", p->max_seqlen)))
        return s;
    if ((uintptr_t)p->cu_seqlens % sizeof(int32_t) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "cu_seqlens = %p is not 4-byte aligned",
                       (const void *)p->cu_seqlens);
    if (p->seqlen != 0 || p->x_stride_batch != 0 || p->codes_stride_batch != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "with cu_seqlens, seqlen, x_stride_batch and "
                       "codes_stride_batch are unused and must be 0 (got %d, %lld, %lld): total and max_seqlen give "
                       "the shapes", (int)p->seqlen, (long long)p->x_stride_batch, (long long)p->codes_stride_batch);
    if (p->codes_layout != FLASHPREFILL_V_LAYOUT_DEFAULT)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "codes_layout PREPARED takes the equal-length form only "
                       "(cu_seqlens NULL)");
    return FLASHPREFILL_SUCCESS;
}

/* An int32 array the kernels read (cu_seqlens, slot_mapping) must not share a byte with an output. */
static flashprefill_status check_int32_input(const char *name, const int32_t *data, int64_t count,
                                             const char *output, const void *out, int64_t out_bytes)
{
    if (spans_overlap(data, count * (int64_t)sizeof(int32_t), out, out_bytes))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s overlaps %s: the output must not share memory with "
                       "the input", name, output);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate_quantize(const flashprefill_quantize_params *p)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if ((s = check_struct_bytes("flashprefill_quantize_params", p->struct_bytes, (uint32_t)sizeof *p)))
        return s;
    const int varlen = p->cu_seqlens != NULL;
    if ((s = check_positive("batch", p->batch)) || (!varlen && (s = check_positive("seqlen", p->seqlen))) ||
        (s = check_positive("heads", p->heads)) || (s = check_positive("dim", p->dim)) ||
        (s = check_positive("block_tokens", p->block_tokens)) || (varlen && (s = check_quantize_varlen(p))))
        return s;
    if (p->x_dtype != FLASHPREFILL_DTYPE_BF16 && p->x_dtype != FLASHPREFILL_DTYPE_FP32)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "x_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32, got %d",
                       (int)p->x_dtype);
    /* varlen: one batch of total rows (the sequences' rows are among them). */
    const int64_t batch = varlen ? 1 : p->batch, rows = varlen ? p->total : p->seqlen;
    const tensor_view x = {"x", p->x, {batch, rows, p->heads, p->dim},
                           {p->x_stride_batch, p->x_stride_seq, p->x_stride_head, p->x_stride_dim},
                           fp_dtype_bytes(p->x_dtype), 0, 3};
    if (p->codes_layout != FLASHPREFILL_V_LAYOUT_DEFAULT && p->codes_layout != FLASHPREFILL_V_LAYOUT_PREPARED)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "codes_layout = %d is not a flashprefill_v_layout",
                       (int)p->codes_layout);
    const int prepared = p->codes_layout == FLASHPREFILL_V_LAYOUT_PREPARED;
    /* PREPARED: as flashprefill_prepare_v's output, (batch, positions, heads, dim) with the positions contiguous. */
    const tensor_view codes =
        prepared ? (tensor_view){"codes", p->codes, {p->batch, fp_prepared_positions(p->seqlen), p->heads, p->dim},
                                 {p->codes_stride_batch, p->codes_stride_seq, p->codes_stride_head,
                                  p->codes_stride_dim}, 1, 1, 1}
                 : (tensor_view){"codes", p->codes, {batch, rows, p->heads, p->dim},
                                 {p->codes_stride_batch, p->codes_stride_seq, p->codes_stride_head,
                                  p->codes_stride_dim}, 1, 1, 3};
    if ((s = check_tensor(&x)) || (s = check_tensor(&codes)))
        return s;
    if (p->exponents == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "exponents is NULL");
    if ((s = check_floats("signs", p->signs)) || (s = check_floats("subtract", p->subtract)) ||
        (s = check_code_max(p->code_max)))
        return s;
    /* Cannot overflow: codes, already checked, spans at least one byte per (batch, head, token); varlen: batch and
       heads are int32, the blocks at most max_seqlen. */
    const int64_t seqlen = varlen ? p->max_seqlen : p->seqlen;
    const int64_t exponent_bytes = (int64_t)p->batch * p->heads * ((seqlen + p->block_tokens - 1) / p->block_tokens);
    const int64_t x_bytes = tensor_span_bytes(&x), code_bytes = tensor_span_bytes(&codes);
    if (spans_overlap(p->codes, code_bytes, p->x, x_bytes))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "codes overlaps x: the output must not share memory with "
                       "the input");
    if (spans_overlap(p->exponents, exponent_bytes, p->x, x_bytes) ||
        spans_overlap(p->exponents, exponent_bytes, p->codes, code_bytes))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "exponents overlaps x or codes");
    if (varlen && ((s = check_int32_input("cu_seqlens", p->cu_seqlens, (int64_t)p->batch + 1, "codes", p->codes,
                                          code_bytes)) ||
                   (s = check_int32_input("cu_seqlens", p->cu_seqlens, (int64_t)p->batch + 1, "exponents",
                                          p->exponents, exponent_bytes))))
        return s;
    if (p->dim % FP_QUANTIZE_DIM_STEP != 0 || p->dim > FP_QUANTIZE_DIM_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the quantizer takes dim a multiple of %d up to %d, got %d",
                       FP_QUANTIZE_DIM_STEP, FP_QUANTIZE_DIM_MAX, (int)p->dim);
    if (prepared && p->block_tokens % FP_PREPARED_GROUP_KEYS != 0)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "codes_layout PREPARED takes block_tokens a multiple of %d "
                       "(each group of %d positions within one block), got %d", FP_PREPARED_GROUP_KEYS,
                       FP_PREPARED_GROUP_KEYS, (int)p->block_tokens);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate_quantize_paged(const flashprefill_quantize_paged_params *p)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if ((s = check_struct_bytes("flashprefill_quantize_paged_params", p->struct_bytes, (uint32_t)sizeof *p)))
        return s;
    if ((s = check_positive("tokens", p->tokens)) || (s = check_positive("heads_kv", p->heads_kv)) ||
        (s = check_positive("dim", p->dim)) || (s = check_positive("num_pages", p->num_pages)) ||
        (s = check_positive("page_size", p->page_size)))
        return s;
    if ((int64_t)p->num_pages * p->page_size > INT32_MAX)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "num_pages x page_size = %lld slots do not fit "
                       "slot_mapping's int32", (long long)p->num_pages * p->page_size);
    if (p->x_dtype != FLASHPREFILL_DTYPE_BF16 && p->x_dtype != FLASHPREFILL_DTYPE_FP32)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "x_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32, got %d",
                       (int)p->x_dtype);
    /* x as one batch of tokens; the cache's pages as its batches. */
    const tensor_view x = {"x", p->x, {1, p->tokens, p->heads_kv, p->dim},
                           {0, p->x_stride_token, p->x_stride_head, p->x_stride_dim}, fp_dtype_bytes(p->x_dtype), 0, 3};
    const tensor_view codes = {"codes", p->codes, {p->num_pages, p->page_size, p->heads_kv, p->dim},
                               {p->codes_stride_page, p->codes_stride_row, p->codes_stride_head, p->codes_stride_dim},
                               1, 1, 3};
    if ((s = check_tensor_named(&x, token_axis_name)) || (s = check_tensor_named(&codes, page_axis_name)))
        return s;
    if (p->slot_mapping == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "slot_mapping is NULL");
    if ((uintptr_t)p->slot_mapping % sizeof(int32_t) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "slot_mapping = %p is not 4-byte aligned",
                       (const void *)p->slot_mapping);
    if (p->exponents == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "exponents is NULL");
    if ((s = check_floats("signs", p->signs)))
        return s;
    /* Cannot overflow: codes, already checked, spans at least one byte per (page, head). */
    const int64_t exponent_bytes = (int64_t)p->num_pages * p->heads_kv;
    const int64_t x_bytes = tensor_span_bytes(&x), code_bytes = tensor_span_bytes(&codes);
    if (spans_overlap(p->codes, code_bytes, p->x, x_bytes))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "codes overlaps x: the output must not share memory with "
                       "the input");
    if (spans_overlap(p->exponents, exponent_bytes, p->x, x_bytes) ||
        spans_overlap(p->exponents, exponent_bytes, p->codes, code_bytes))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "exponents overlaps x or codes");
    if ((s = check_int32_input("slot_mapping", p->slot_mapping, p->tokens, "codes", p->codes, code_bytes)) ||
        (s = check_int32_input("slot_mapping", p->slot_mapping, p->tokens, "exponents", p->exponents,
                               exponent_bytes)))
        return s;
    if (p->dim % FP_QUANTIZE_DIM_STEP != 0 || p->dim > FP_QUANTIZE_DIM_MAX)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the quantizer takes dim a multiple of %d up to %d, got %d",
                       FP_QUANTIZE_DIM_STEP, FP_QUANTIZE_DIM_MAX, (int)p->dim);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate_prepare_v(const flashprefill_prepare_v_params *p)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if ((s = check_struct_bytes("flashprefill_prepare_v_params", p->struct_bytes, (uint32_t)sizeof *p)))
        return s;
    if ((s = check_positive("batch", p->batch)) || (s = check_positive("seqlen", p->seqlen)) ||
        (s = check_positive("heads", p->heads)) || (s = check_positive("dim", p->dim)))
        return s;
    const int64_t positions = fp_prepared_positions(p->seqlen);
    const tensor_view v = {"v", p->v, {p->batch, p->seqlen, p->heads, p->dim},
                           {p->v_stride_batch, p->v_stride_seq, p->v_stride_head, p->v_stride_dim}, 1, 0, 3};
    /* As attention reads it: (batch, positions, heads, dim) with the positions contiguous. */
    const tensor_view prepared = {"prepared", p->prepared, {p->batch, positions, p->heads, p->dim},
                                  {p->prepared_stride_batch, 1, p->prepared_stride_head, p->prepared_stride_dim}, 1,
                                  1, 1};
    if ((s = check_tensor(&v)) || (s = check_tensor(&prepared)))
        return s;
    if (spans_overlap(p->prepared, tensor_span_bytes(&prepared), p->v, tensor_span_bytes(&v)))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "prepared overlaps v: the output must not share memory "
                       "with the input");
    if (p->dim % 16 != 0)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "prepare_v takes dim a multiple of 16, got %d", (int)p->dim);
    return FLASHPREFILL_SUCCESS;
}

/* Whether two tensors of one extent address the same elements: the same pointer, element size and strides (those of
   axes of extent 1 are never used). */
static int same_elements(const tensor_view *a, const tensor_view *b)
{
    if (a->data != b->data || a->elem_bytes != b->elem_bytes)
        return 0;
    for (int axis = 0; axis < 4; ++axis)
        if (a->extent[axis] > 1 && a->stride[axis] != b->stride[axis])
            return 0;
    return 1;
}

static int merge_state_dtype_bytes(flashprefill_dtype dtype)
{
    return dtype == FLASHPREFILL_DTYPE_BF16 ? 2 : dtype == FLASHPREFILL_DTYPE_FP32 ? 4 : 0;
}

static flashprefill_status check_lse(const char *name, const float *lse, int optional)
{
    if (lse == NULL && !optional)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s is NULL", name);
    if ((uintptr_t)lse % sizeof(float) != 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "%s = %p is not 4-byte aligned", name, (const void *)lse);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate_merge_state(const flashprefill_merge_state_params *p)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if ((s = check_struct_bytes("flashprefill_merge_state_params", p->struct_bytes, (uint32_t)sizeof *p)))
        return s;
    if ((s = check_positive("batch", p->batch)) || (s = check_positive("seqlen_q", p->seqlen_q)) ||
        (s = check_positive("heads_q", p->heads_q)) || (s = check_positive("dim_v", p->dim_v)))
        return s;
    const int in_bytes = merge_state_dtype_bytes(p->in_dtype), out_bytes = merge_state_dtype_bytes(p->out_dtype);
    if (in_bytes == 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "in_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32, got %d", (int)p->in_dtype);
    if (out_bytes == 0)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                       "out_dtype must be FLASHPREFILL_DTYPE_BF16 or _FP32, got %d", (int)p->out_dtype);
    const int64_t extent[4] = {p->batch, p->seqlen_q, p->heads_q, p->dim_v};
    const tensor_view tensors[3] = {
        {"out_a", p->out_a, {extent[0], extent[1], extent[2], extent[3]},
         {p->out_a_stride_batch, p->out_a_stride_seq, p->out_a_stride_head, p->out_a_stride_dim}, in_bytes, 0, 3},
        {"out_b", p->out_b, {extent[0], extent[1], extent[2], extent[3]},
         {p->out_b_stride_batch, p->out_b_stride_seq, p->out_b_stride_head, p->out_b_stride_dim}, in_bytes, 0, 3},
        {"out", p->out, {extent[0], extent[1], extent[2], extent[3]},
         {p->out_stride_batch, p->out_stride_seq, p->out_stride_head, p->out_stride_dim}, out_bytes, 1, 3},
    };
    for (int i = 0; i < 3; ++i)
        if ((s = check_tensor(&tensors[i])))
            return s;
    if ((s = check_lse("lse_a", p->lse_a, 0)) || (s = check_lse("lse_b", p->lse_b, 0)) ||
        (s = check_lse("lse", p->lse, 1)))
        return s;
    /* Each element of out is written by the one thread that read it from out_a and out_b, and each row's lse by the
       one that read lse_a and lse_b: in place is safe, any other sharing with what is written is a race. */
    const int64_t out_span = tensor_span_bytes(&tensors[2]);
    /* Cannot overflow: out, already checked, spans at least 16 bytes per (batch, head, query) row. */
    const int64_t lse_bytes = (int64_t)p->batch * p->heads_q * p->seqlen_q * (int64_t)sizeof(float);
    const float *const lse_in[2] = {p->lse_a, p->lse_b};
    for (int i = 0; i < 2; ++i) {
        const tensor_view *in = &tensors[i];
        if (!same_elements(&tensors[2], in) && spans_overlap(p->out, out_span, in->data, tensor_span_bytes(in)))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT,
                           "out overlaps %s: in place needs out to be %s itself (the same pointer, strides and "
                           "dtype); otherwise they must not share memory", in->name, in->name);
        if (spans_overlap(p->out, out_span, lse_in[i], lse_bytes))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "out overlaps lse_%c", 'a' + i);
        if (p->lse == NULL)
            continue;
        if (p->lse != lse_in[i] && spans_overlap(p->lse, lse_bytes, lse_in[i], lse_bytes))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "lse overlaps lse_%c: in place needs lse to be lse_%c "
                           "itself; otherwise they must not share memory", 'a' + i, 'a' + i);
        if (spans_overlap(p->lse, lse_bytes, in->data, tensor_span_bytes(in)))
            return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "lse overlaps %s", in->name);
    }
    if (p->lse != NULL && spans_overlap(p->lse, lse_bytes, p->out, out_span))
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "lse overlaps out");
    if (p->dim_v % 8 != 0)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "merge_state takes dim_v a multiple of 8 (whole 16-byte pieces of bf16), got %d", (int)p->dim_v);
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_validate_query(const flashprefill_query_params *p, const flashprefill_query_result *result)
{
    flashprefill_status s;
    if (p == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "params is NULL");
    if (result == NULL)
        return fp_fail(FLASHPREFILL_ERROR_INVALID_ARGUMENT, "result is NULL");
    if ((s = check_struct_bytes("flashprefill_query_params", p->struct_bytes, (uint32_t)sizeof *p)) ||
        (s = check_struct_bytes("flashprefill_query_result", result->struct_bytes, (uint32_t)sizeof *result)))
        return s;
    return FLASHPREFILL_SUCCESS;
}
