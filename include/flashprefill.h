/* flashprefill: causal prefill attention in FP8 and BF16 behind one C ABI.
 *
 * Layout of every tensor: (batch, seq, heads, dim) addressed through int64 strides in elements;
 * the last dim must be contiguous (stride_dim == 1). All pointers are device pointers.
 *
 *   out[b, i, h, :] = softmax(scale * q[b, i, h, :] . k[b, j, h / (heads_q / heads_kv), :]^T over j) v[...]
 *
 * With `causal`, query i may attend to key j only when j <= i + (seqlen_k - seqlen_q): the mask is aligned
 * bottom-right, as in FlashAttention, so seqlen_q < seqlen_k means "the last seqlen_q tokens of a longer
 * sequence". Causal requires seqlen_q <= seqlen_k.
 *
 * The library never aborts, never prints and reads no environment variables: every failure is a status,
 * and flashprefill_last_error() says which argument was wrong and why (thread-local).
 *
 * ABI: every params struct starts with `uint32_t struct_bytes`, its sizeof as the caller's header saw it; make
 * one with flashprefill_params_init() (and the _quantize_ / _prepare_v_ / _merge_state_ / _query_ ones), which zero
 * every other field. The library reads struct_bytes before anything else and refuses a size it does not know
 * (INVALID_ARGUMENT) without reading further. From 0.8.0 on, a new field is appended (the minor version), so that a
 * later library can take an earlier struct as it stands (this version takes flashprefill_params of 0.9.0's size
 * too, its 0.10.0 fields then zero; every other struct at its own size only); a change to existing fields bumps
 * FLASHPREFILL_VERSION_MAJOR, the shared libraries' SONAME (libflashprefill.so.<major>). The version below is
 * written nowhere else: the libraries and the Makefile read it from here, Python from the library.
 */
#ifndef FLASHPREFILL_H
#define FLASHPREFILL_H

#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FLASHPREFILL_VERSION_MAJOR 0
#define FLASHPREFILL_VERSION_MINOR 10
#define FLASHPREFILL_VERSION_PATCH 1

typedef enum flashprefill_status {
    FLASHPREFILL_SUCCESS = 0,
    FLASHPREFILL_ERROR_INVALID_ARGUMENT = 1, /* the call can never be valid: fix the arguments */
    FLASHPREFILL_ERROR_NOT_SUPPORTED = 2,    /* valid, but no kernel of this build handles it */
    FLASHPREFILL_ERROR_NO_DEVICE = 3,        /* no usable GPU (no driver, no device, wrong architecture) */
    FLASHPREFILL_ERROR_DEVICE = 4,           /* the GPU runtime reported an error (launch, memory) */
} flashprefill_status;

typedef enum flashprefill_dtype {
    FLASHPREFILL_DTYPE_BF16 = 1,
    FLASHPREFILL_DTYPE_FP8_E4M3 = 2, /* OCP e4m3fn: max 448, no infinities, NaN = 0x7f / 0xff */
    FLASHPREFILL_DTYPE_FP32 = 3,     /* flashprefill_quantize's input only */
} flashprefill_dtype;

/* How an FP8 tensor's codes turn back into values: value = code * descale. */
typedef enum flashprefill_descale_kind {
    FLASHPREFILL_DESCALE_NONE = 0,       /* descale 1 (the only choice for bf16 inputs) */
    FLASHPREFILL_DESCALE_PER_TENSOR = 1, /* factors: 1 float */
    FLASHPREFILL_DESCALE_PER_HEAD = 2,   /* factors: float[batch][heads_kv], as FlashAttention-3 (q too) */
    FLASHPREFILL_DESCALE_PER_BLOCK = 3,  /* exponents: int8[batch][heads][ceil(seqlen / block_tokens)],
                                            descale = 2^exponent; heads = heads_q for q, heads_kv for k, v */
} flashprefill_descale_kind;

typedef struct flashprefill_descale {
    flashprefill_descale_kind kind;
    int32_t block_tokens;     /* PER_BLOCK only: tokens per block (one block spans the head dim) */
    const float *factors;     /* PER_TENSOR, PER_HEAD: device pointer, contiguous */
    const int8_t *exponents;  /* PER_BLOCK: device pointer, contiguous */
} flashprefill_descale;

/* What P, the probabilities of P.V, are rounded to (fp8 inputs; bf16 inputs take DEFAULT only). */
typedef enum flashprefill_probabilities {
    FLASHPREFILL_PROBABILITIES_DEFAULT = 0, /* bf16 inputs: bf16. fp8 inputs: e4m3, computed without an exponential
                                               (up to 7.55% off per probability); P.V at the fp8 tensor rate */
    FLASHPREFILL_PROBABILITIES_FP16 = 1,    /* fp8 inputs: float16 (2^-11), with V widened exactly to float16;
                                               P.V at the 16-bit tensor rate: slower, error at the floor set by
                                               the inputs' e4m3 rounding */
} flashprefill_probabilities;

/* How S = Q K^T is accumulated (fp8 inputs with DEFAULT probabilities; bf16 inputs' scores are float32). */
typedef enum flashprefill_scores {
    FLASHPREFILL_SCORES_DEFAULT = 0, /* the faster of the two this build has for the params: FP16 where a
                                        float16-score kernel takes them (Hopper, fp8 with DEFAULT
                                        probabilities, descales as FP16 lists), else FP32; the two measure
                                        within 1% of each other end to end from float inputs (docs/numerics.md) */
    FLASHPREFILL_SCORES_FP16 = 1,    /* float16, which cannot overflow once q's codes lie within +-1.125
                                        (dim_qk 128) or +-0.75 (dim_qk 192): for every group of 64 query rows
                                        whose codes pass that bound, the kernel divides them by the least power
                                        of two that brings them within it, rounding to e4m3 again (exact but
                                        where a code becomes subnormal), and multiplies the scores' scale by
                                        it. Faster (the row max and the probability codes on packed halves); a
                                        score carries up to 2^-11 of its magnitude in error, so the error grows
                                        with the range of the scores. Kernels with
                                        192-key tiles (descales NONE, PER_TENSOR, PER_HEAD, or PER_BLOCK with
                                        blocks of a multiple of 384 tokens) and 128-key tiles (PER_BLOCK blocks
                                        of a multiple of 128, e.g. a paged cache's per-page exponents) */
    FLASHPREFILL_SCORES_FP32 = 2,    /* float32 */
} flashprefill_scores;

/* How v's elements are laid out in memory. */
typedef enum flashprefill_v_layout {
    FLASHPREFILL_V_LAYOUT_DEFAULT = 0,  /* (batch, seqlen_k, heads_kv, dim_v) as every tensor: v_stride_dim 1 */
    FLASHPREFILL_V_LAYOUT_PREPARED = 1, /* fp8 inputs with DEFAULT probabilities: e4m3 codes as
                                           flashprefill_prepare_v writes them, each (batch, head, dim) a row of
                                           keys, so that the kernel loads V^T, the operand P.V takes, without
                                           transposing V itself. Key j sits at position
                                           16 (j / 16) + 4 (j % 8 / 2) + 2 (j % 16 / 8) + j % 2 of its row
                                           (the order in which P's registers hold the keys): element
                                           (b, j, h, d) at v + b v_stride_batch + position(j) + h v_stride_head
                                           + d v_stride_dim, with v_stride_seq 1. A row holds seqlen_k rounded
                                           up to 16 positions; those of keys >= seqlen_k must be finite codes
                                           (flashprefill_prepare_v writes 0). Hopper only */
} flashprefill_v_layout;

typedef struct flashprefill_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_params): set by flashprefill_params_init() */

    /* Tensors: device pointers, 16-byte aligned. */
    const void *q;   /* (batch, seqlen_q, heads_q, dim_qk), in_dtype */
    const void *k;   /* (batch, seqlen_k, heads_kv, dim_qk), in_dtype */
    const void *v;   /* (batch, seqlen_k, heads_kv, dim_v), in_dtype */
    void *out;       /* (batch, seqlen_q, heads_q, dim_v), out_dtype; must not overlap itself */
    float *lse;      /* optional (NULL): (batch, heads_q, seqlen_q) contiguous, natural log of the row sum
                        of exp(scale * q.k), i.e. including the softmax scale */

    /* Strides in elements; every stride times the element size must be a multiple of 16 bytes,
       except stride_dim, which must be 1. */
    int64_t q_stride_batch, q_stride_seq, q_stride_head, q_stride_dim;
    int64_t k_stride_batch, k_stride_seq, k_stride_head, k_stride_dim;
    int64_t v_stride_batch, v_stride_seq, v_stride_head, v_stride_dim;
    int64_t out_stride_batch, out_stride_seq, out_stride_head, out_stride_dim;

    /* Shapes. */
    int32_t batch;
    int32_t seqlen_q;
    int32_t seqlen_k;
    int32_t heads_q;   /* a multiple of heads_kv (grouped-query attention) */
    int32_t heads_kv;
    int32_t dim_qk;
    int32_t dim_v;

    /* Numerics. */
    flashprefill_dtype in_dtype;   /* q, k and v alike */
    flashprefill_dtype out_dtype;  /* bf16 (fp8 output is reserved) */
    int32_t causal;                /* 0 or 1 */
    float softmax_scale;           /* finite and > 0; usually 1 / sqrt(dim_qk) */
    flashprefill_descale q_descale, k_descale, v_descale; /* fp8 only; kind NONE for bf16 */
    flashprefill_probabilities probabilities;             /* DEFAULT (0) unless asked for */
    flashprefill_scores scores;                           /* DEFAULT (0) unless asked for */
    flashprefill_v_layout v_layout;                       /* DEFAULT (0) unless v was prepared */

    /* From 0.10.0: variable-length batches and paged KV caches (FlashAttention's varlen forms). With cu_seqlens_q
       NULL (as _init() leaves it) the batch is the equal-length one above and the fields below are unused.

       Varlen: the batch's sequences lie one after another along one token dimension. q and out are
       (total_q, heads_q, dim), k and v (total_k, heads_kv, dim), addressed by the *_stride_seq, *_stride_head and
       *_stride_dim strides (*_stride_batch unused: 0); lse is (heads_q, total_q) contiguous. Sequence b's queries
       are rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b] +
       seqlen_k(b) - 1, where seqlen_k(b) is seqused_k[b] if seqused_k is given, else cu_seqlens_k[b + 1] -
       cu_seqlens_k[b]. `batch` counts the sequences; seqlen_q and seqlen_k are the largest lengths (FlashAttention's
       max_seqlen_q / max_seqlen_k). Lengths may be 0. With `causal` the mask is aligned bottom-right per sequence;
       a sequence may have more queries than keys: a query that sees no key gets out 0 and lse -inf.
       fp8 descales index sequences as batches: PER_HEAD (batch, heads_kv); PER_BLOCK (batch, heads,
       ceil(seqlen / block_tokens)) with seqlen the largest length, each sequence's blocks counted from its first
       token (a block never spans two sequences).

       Paged KV (block_table not NULL; varlen q, seqused_k given, cu_seqlens_k NULL): k and v are caches of
       (num_pages, page_size, heads_kv, dim), *_stride_batch the stride between pages. Key j of sequence b lies in
       page block_table[b * block_table_stride + j / page_size], row j % page_size; entries past the sequence's
       last page are not read. fp8 PER_BLOCK descales of k and v take block_tokens == page_size and exponents
       (num_pages, heads_kv): one per page and kv head, as flashprefill_quantize_paged writes them.

       The device arrays are read by the kernels, so their values cannot be checked before the call returns: a
       check kernel on the stream does (cu_seqlens non-decreasing, within total_q / total_k, lengths within
       seqlen_q / seqlen_k, seqused_k within its sequence's rows or pages, block_table entries within num_pages)
       and, on a violation, writes NaN to every element of out and lse and the reason to the workspace
       (flashprefill_workspace_error reads it back).
       gfx950 library: pages of 2^n tokens; from 0.10.1 its check kernel (the same checks and verdict) writes
       checked copies of the arrays into the workspace, which its forward kernel reads instead. */
    const int32_t *cu_seqlens_q;   /* device, batch + 1 int32 (4-byte aligned); NULL: not varlen */
    const int32_t *cu_seqlens_k;   /* device, batch + 1 int32; NULL with a paged cache */
    const int32_t *seqused_k;      /* device, batch int32; optional with varlen k, required with a paged cache */
    int32_t total_q;               /* rows of q and out */
    int32_t total_k;               /* rows of k and v (varlen; 0 with a paged cache) */
    const int32_t *block_table;    /* device, (batch, block_table_stride) int32 page ids; NULL: k, v not paged */
    int32_t block_table_stride;    /* entries per sequence, at least ceil(seqlen_k / page_size) */
    int32_t page_size;             /* tokens per page: a power of two, at least 16 */
    int32_t num_pages;             /* pages in k's and v's caches */
    void *workspace;               /* device, 16-byte aligned, flashprefill_workspace_bytes() of them: the work
                                      list the check kernel writes; one call at a time on it */
    int64_t workspace_bytes;

    /* From 0.10.0: q in bf16 against fp8 k and v (in_dtype FP8_E4M3, varlen and paged calls, dim_qk 128, Hopper and
       gfx950): the kernel rounds q to e4m3 itself while loading it, so that no pass over q precedes the call. Per row
       it first rotates q when q_rotation_signs is set, y = H diag(signs) q with H the orthonormal Sylvester Hadamard
       matrix (the rotation flashprefill_quantize gives k: q.k unchanged), in float32; then per group of query rows
       (Hopper: 64 rows of a 128-row tile, rows past the sequence's end included; gfx950: a wave's 32 rows from the
       sequence's first, at least -126, inf and NaN not counted) codes = e4m3(y / 2^e), e the smallest integer with
       max |y| <= code_max 2^e (code_max: 448, or the FP16 scores' bound), and the scores' scale is multiplied by
       2^e. A q of inf or NaN makes its row NaN. q_descale must be NONE. */
    flashprefill_dtype q_dtype;       /* 0 (as _init() leaves it): in_dtype; or BF16 with in_dtype FP8_E4M3 */
    const float *q_rotation_signs;    /* NULL, or dim_qk floats of +1 or -1 (bf16 q only) */
} flashprefill_params;

/* flashprefill_quantize: float q, k or v to e4m3 codes with one power-of-two descale per block of tokens
 * (FLASHPREFILL_DESCALE_PER_BLOCK), optionally smoothed and rotated first. Per token row of one head:
 *
 *   y = H (diag(signs) (x - subtract[b, h]))     (each step skipped when its pointer is NULL)
 *
 * H is the orthonormal Sylvester Hadamard matrix, block diagonal over the binary decomposition of dim
 * (192 = 128 + 64), so that rotating q and k with the same signs leaves q.k unchanged; subtracting one vector
 * from every key of a head leaves the softmax unchanged. Both run in float32 (relative rounding 2^-24 per step,
 * far below e4m3's 2^-4), in a fixed order of butterflies. Per
 * block of block_tokens tokens x dim of one head (the last may be short), e is the smallest integer with
 * max |y| <= code_max * 2^e, clamped to [-127, 127] and raised to at least the head's largest e minus 64 (the
 * Hopper kernel keeps O exact within that span); a block of zeros takes its head's largest e; a block holding
 * inf or NaN takes e = 0 before that floor (it counts toward the head's largest e and is raised like the others).
 * codes = e4m3(y / 2^e), round to nearest even, saturating at 448; NaN stays NaN. code_max is
 * 448, or smaller for q's codes where the attention takes float16 scores (1.125 at dim_qk 128, 0.75 at 192: see
 * FLASHPREFILL_SCORES_FP16). The numpy model, bit for bit (a zero code's sign aside):
 * flashprefill.prepare.transform then flashprefill.fp8.quantize_blocks. */
typedef struct flashprefill_quantize_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_quantize_params): set by flashprefill_quantize_params_init() */
    const void *x;       /* (batch, seqlen, heads, dim), x_dtype; 16-byte aligned */
    void *codes;         /* (batch, seqlen, heads, dim) e4m3; must not overlap x */
    int8_t *exponents;   /* (batch, heads, ceil(seqlen / block_tokens)) contiguous: the PER_BLOCK descale */
    const float *signs;  /* NULL, or dim floats, each +1 or -1 (4-byte aligned) */
    const float *subtract; /* NULL, or (batch, heads, dim) contiguous floats (4-byte aligned) */
    int64_t x_stride_batch, x_stride_seq, x_stride_head, x_stride_dim;         /* elements; dim's must be 1 */
    int64_t codes_stride_batch, codes_stride_seq, codes_stride_head, codes_stride_dim;
    int32_t batch, seqlen, heads, dim; /* dim a multiple of 32, at most 256 */
    int32_t block_tokens;
    flashprefill_dtype x_dtype;        /* BF16 or FP32 */
    float code_max;  /* the largest magnitude of the codes: 0 for 448, else a normal e4m3 value in [2^-6, 448] */
    flashprefill_v_layout codes_layout; /* DEFAULT (0): codes as x. PREPARED (v's codes, Hopper): written as
                                           flashprefill_prepare_v would write them, so that flashprefill_forward
                                           takes them as v with v_layout PREPARED without a prepare_v pass:
                                           codes_stride_seq 1, codes_stride_dim the row pitch (at least seqlen
                                           rounded up to 16), codes_stride_batch and _head multiples of 16,
                                           positions past seqlen 0; block_tokens a multiple of 16 */

    /* From 0.10.0: a variable-length batch (flashprefill_params' varlen form). With cu_seqlens NULL (as _init() leaves
       it) the batch is the equal-length one above and the fields below are unused. With cu_seqlens set, x and codes
       are (total, heads, dim), addressed by the *_stride_seq, _head and _dim strides (*_stride_batch unused: 0), and
       seqlen is unused (0); sequence b is rows cu_seqlens[b] .. cu_seqlens[b + 1] - 1 (lengths may be 0, at most
       max_seqlen). exponents are (batch, heads, ceil(max_seqlen / block_tokens)), each sequence's blocks counted from
       its first token (a block never spans two sequences, the span floor and the zero blocks' exponent are per
       sequence and head); subtract is (batch, heads, dim), one vector per sequence. Written: the codes of every
       sequence's rows and the exponents of its ceil(length / block_tokens) blocks; exponent slots past them and rows
       outside every sequence are left as they are. A sequence whose bounds are not valid (cu_seqlens[b] < 0,
       cu_seqlens[b + 1] < cu_seqlens[b], cu_seqlens[b + 1] > total, a length past max_seqlen; checked on the device)
       is not quantized: its rows are left as they are and every one of its exponent slots is set to -128, which no
       valid block takes (rows that two sequences share, possible only where cu_seqlens decreases, get either's codes).
       codes_layout DEFAULT only. */
    const int32_t *cu_seqlens; /* device, batch + 1 int32 (4-byte aligned); NULL: not varlen */
    int32_t total;             /* rows of x and codes */
    int32_t max_seqlen;        /* the largest length (FlashAttention's max_seqlen) */
} flashprefill_quantize_params;

/* flashprefill_prepare_v: e4m3 codes of v, (batch, seqlen, heads, dim) with any strides the ABI takes, rewritten
 * in FLASHPREFILL_V_LAYOUT_PREPARED (flashprefill_params.v_layout) with the same values: codes unchanged, keys
 * reordered, positions past seqlen set to 0. One pass over v's bytes. */
typedef struct flashprefill_prepare_v_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_prepare_v_params): set by flashprefill_prepare_v_params_init() */
    const void *v;      /* (batch, seqlen, heads, dim) e4m3, 16-byte aligned */
    void *prepared;     /* rows of round_up(seqlen, 16) positions, 16-byte aligned; must not overlap v */
    int64_t v_stride_batch, v_stride_seq, v_stride_head, v_stride_dim;       /* elements; dim's must be 1 */
    int64_t prepared_stride_batch, prepared_stride_head, prepared_stride_dim; /* elements (bytes), multiples of
                                                                                 16; the row pitch (dim's) at
                                                                                 least round_up(seqlen, 16) */
    int32_t batch, seqlen, heads, dim; /* dim a multiple of 16 */
} flashprefill_prepare_v_params;

/* Params with every field zero (NULL, DEFAULT, NONE) but struct_bytes, the size this header gives the struct.
   Inline, so that the size is the caller's, compiled in with the caller's header. */
static inline flashprefill_params flashprefill_params_init(void)
{
    flashprefill_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

static inline flashprefill_quantize_params flashprefill_quantize_params_init(void)
{
    flashprefill_quantize_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

static inline flashprefill_prepare_v_params flashprefill_prepare_v_params_init(void)
{
    flashprefill_prepare_v_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

/* The library's version, "MAJOR.MINOR.PATCH" of the FLASHPREFILL_VERSION_* it was built with. */
const char *flashprefill_version(void);

/* A fixed description of a status, e.g. "invalid argument". Never NULL. */
const char *flashprefill_status_string(flashprefill_status status);

/* The message of the last failed call on this thread ("" after a success). Never NULL; valid until the
   next call on this thread. */
const char *flashprefill_last_error(void);

/* Validates p and looks for a kernel of this build that handles it, without touching the GPU:
   FLASHPREFILL_SUCCESS, FLASHPREFILL_ERROR_INVALID_ARGUMENT or FLASHPREFILL_ERROR_NOT_SUPPORTED. */
flashprefill_status flashprefill_supports(const flashprefill_params *p);

/* flashprefill_query: the kernel flashprefill_forward runs for a set of options, and the policy that comes with
 * it, without shapes, pointers or a GPU, so that a caller preparing inputs (Python's quantize_qkv) asks the library
 * instead of repeating its kernel table. The options are checked as flashprefill_supports checks them for a small
 * problem (one token, one head), with the same messages; shape limits (the grid, 32-bit strides) are not asked. */
typedef struct flashprefill_query_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_query_params): set by flashprefill_query_params_init() */
    flashprefill_dtype in_dtype;
    int32_t dim_qk;
    int32_t dim_v;
    flashprefill_probabilities probabilities;
    flashprefill_scores scores;
    flashprefill_v_layout v_layout;
    flashprefill_descale_kind descale_kind; /* of q, k and v alike; NONE for bf16 */
    int32_t block_tokens;                   /* PER_BLOCK only: tokens per block, > 0 */
} flashprefill_query_params;

typedef struct flashprefill_query_result {
    uint32_t struct_bytes; /* sizeof(flashprefill_query_result): set by flashprefill_query_result_init() */
    const char *kernel;    /* its name, e.g. "hopper_fwd_fp8_hd128_kv192_f16s"; static, never freed */
    flashprefill_scores scores;    /* what it computes: FP16 or FP32 */
    uint32_t v_layouts;            /* bit (1u << layout) of each flashprefill_v_layout it reads */
    int32_t block_tokens_multiple; /* PER_BLOCK descales: block_tokens a multiple of this (0: no PER_BLOCK) */
    int32_t preferred_block_tokens; /* PER_BLOCK blocks of a multiple of this many tokens run the first kernel of
                                       the table (the fastest) that takes these options with PER_BLOCK descales;
                                       0 where none does (bf16) */
    float q_code_max;              /* the largest magnitude of q's e4m3 codes it takes as they are: 448, or with
                                      FP16 scores the bound at dim_qk (1.125 at 128, 0.75 at 192) */
    int32_t prepared_v_block_tokens_multiple; /* flashprefill_quantize writes v's codes in the PREPARED layout
                                                 for block_tokens a multiple of this; 0 where the kernel reads no
                                                 prepared v */
} flashprefill_query_result;

static inline flashprefill_query_params flashprefill_query_params_init(void)
{
    flashprefill_query_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

static inline flashprefill_query_result flashprefill_query_result_init(void)
{
    flashprefill_query_result r;
    memset(&r, 0, sizeof r);
    r.struct_bytes = (uint32_t)sizeof r;
    return r;
}

/* Fills *result (made with flashprefill_query_result_init()) for the kernel the options select:
   FLASHPREFILL_SUCCESS, or INVALID_ARGUMENT / NOT_SUPPORTED as flashprefill_supports, *result untouched. */
flashprefill_status flashprefill_query(const flashprefill_query_params *p, flashprefill_query_result *result);

/* The workspace a varlen or paged call needs (flashprefill_params.workspace), in bytes, from p's shapes alone
   (batch, total_q, seqlen_q, heads_kv): 0 where p is not varlen. Validates p as flashprefill_supports does. */
flashprefill_status flashprefill_workspace_bytes(const flashprefill_params *p, int64_t *bytes);

/* After a varlen or paged call has run (synchronize its stream first): 0 where the check kernel found the device
   arrays valid, else a nonzero code whose reason is written into `message` (at most message_bytes, NUL-ended).
   Reads 16 bytes of the workspace back to the host (synchronously). */
flashprefill_status flashprefill_workspace_error(const void *workspace, int32_t *error, char *message,
                                                 int32_t message_bytes);

/* Enqueues the attention on `stream` (a cudaStream_t; NULL is the legacy default stream) and returns
   without waiting. Checks p as flashprefill_supports does, then the device (present, Hopper sm_90, the
   pointers on it). */
flashprefill_status flashprefill_forward(const flashprefill_params *p, void *stream);

/* Enqueues the quantization on `stream` and returns without waiting; validates p first as
   flashprefill_forward does. The codes and exponents are what flashprefill_forward takes for PER_BLOCK. */
flashprefill_status flashprefill_quantize(const flashprefill_quantize_params *p, void *stream);

/* Enqueues flashprefill_prepare_v on `stream` and returns without waiting; validates p first. Then
   flashprefill_forward takes `prepared` as v with v_layout PREPARED, its strides as v_stride_batch, v_stride_head
   and v_stride_dim, and v_stride_seq 1. */
flashprefill_status flashprefill_prepare_v(const flashprefill_prepare_v_params *p, void *stream);

/* flashprefill_merge_state: two attention results of the same queries over disjoint sets of keys, (out_a, lse_a)
 * and (out_b, lse_b), combined into the result over their union (cascade attention over a shared prefix, context
 * parallelism). Per (batch, query, head) row, in float32, natural logs:
 *
 *   lse = log(exp(lse_a) + exp(lse_b)),   out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b
 *
 * Rows that are not finite: a part with lse -inf (it saw no key; flashprefill_forward writes out 0 there) has weight
 * 0, so the merge is the other part exactly; both -inf give lse -inf and out 0 (out_a and out_b times 0). An lse of
 * NaN or +inf (which attention never writes: a score of +inf makes its row NaN) makes the row NaN, out and lse.
 * Otherwise out follows IEEE arithmetic: a NaN or inf in out_a's column d reaches column d of the row, even with
 * weight 0 (0 times inf or NaN is NaN); lse does not read out. */
typedef struct flashprefill_merge_state_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_merge_state_params): set by flashprefill_merge_state_params_init() */

    /* Tensors: device pointers; out_a, out_b and out 16-byte aligned, the lse 4-byte aligned. */
    const void *out_a;   /* (batch, seqlen_q, heads_q, dim_v), in_dtype */
    const void *out_b;   /* (batch, seqlen_q, heads_q, dim_v), in_dtype */
    void *out;           /* (batch, seqlen_q, heads_q, dim_v), out_dtype; may be out_a or out_b itself (the same
                            pointer, strides and dtype: in place), else must not overlap them; not itself */
    const float *lse_a;  /* (batch, heads_q, seqlen_q) contiguous, as flashprefill_forward writes it */
    const float *lse_b;  /* (batch, heads_q, seqlen_q) contiguous */
    float *lse;          /* optional (NULL): (batch, heads_q, seqlen_q) contiguous; may be lse_a or lse_b itself,
                            else must not overlap them nor out */

    /* Strides in elements; each times the element size a multiple of 16 bytes, except stride_dim, which must
       be 1. */
    int64_t out_a_stride_batch, out_a_stride_seq, out_a_stride_head, out_a_stride_dim;
    int64_t out_b_stride_batch, out_b_stride_seq, out_b_stride_head, out_b_stride_dim;
    int64_t out_stride_batch, out_stride_seq, out_stride_head, out_stride_dim;

    /* Shapes, named as flashprefill_params names them. */
    int32_t batch;
    int32_t seqlen_q;
    int32_t heads_q;
    int32_t dim_v;    /* a multiple of 8 (16 bytes of bf16) */

    flashprefill_dtype in_dtype;  /* out_a and out_b: BF16 or FP32 */
    flashprefill_dtype out_dtype; /* out: BF16 or FP32 */
} flashprefill_merge_state_params;

static inline flashprefill_merge_state_params flashprefill_merge_state_params_init(void)
{
    flashprefill_merge_state_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

/* Enqueues flashprefill_merge_state on `stream` and returns without waiting; validates p first, then checks the
   device and the pointers as flashprefill_forward does. One pass over the bytes of out_a, out_b and out. From
   0.9.0 on; in the gfx950 library from 0.10.1 on (emulated only, never run on an MI355X). */
flashprefill_status flashprefill_merge_state(const flashprefill_merge_state_params *p, void *stream);

/* flashprefill_quantize_paged: new tokens of k or v, float, into an e4m3 paged KV cache with one power-of-two
 * exponent per (page, kv head), the PER_BLOCK descale flashprefill_params' paged form reads (block_tokens ==
 * page_size, exponents (num_pages, heads_kv)). Token t goes to slot slot_mapping[t] = page * page_size + row (vLLM's
 * convention); a slot < 0 or >= num_pages * page_size skips the token (vLLM pads with -1). Each row is first
 * rotated as flashprefill_quantize rotates it (y = H diag(signs) x, float32, the same butterflies; no subtract: a
 * mean over tokens cannot be taken one token at a time).
 *
 * Exponents. FLASHPREFILL_PAGE_EMPTY (-128) marks a (page, head) that holds no token: fill the exponents of fresh or
 * freed pages with it (a page handed to another sequence must be emptied first). Per (page, head) that a call writes:
 *   need  = the smallest e with max |y| over the call's new rows of it <= 448 * 2^e, clamped to [-127, 127] (as
 *           flashprefill_quantize's block exponent; 0 where a row holds inf or NaN; none where all rows are zero);
 *   e_new = max(e_old, need), or -127 where both are absent (an empty page given only zero rows);
 *   where the page was not empty and e_new > e_old, the page's codes already there (every row, written or not) are
 *   re-encoded: code' = e4m3(decode(code) * 2^(e_old - e_new)), round to nearest even (exact but where the result
 *   is subnormal; NaN stays NaN); then the new rows are encoded at e_new: e4m3(y * 2^-e_new), saturating at 448.
 * So a page's exponent only grows, and is, after any sequence of calls, the exponent of all its rows written at once
 * (max over rows of need). A finite row's codes are then within one e4m3 unit of that final exponent of y: half a unit
 * where y's code is normal (no re-encoding rounds a normal code) and at most 2^(e_new - 9), the subnormal unit,
 * otherwise (each re-encoding rounds once, at a larger exponent than the one before). A token appended to a page
 * whose exponent is larger than it needs is encoded at the page's exponent (small values lose digits or become 0
 * there), as a block of the equal-length quantizer is. Rows of an empty page that the call does not write are left
 * as they are (they hold no token).
 *
 * Concurrency: the tokens of one page must be consecutive in x (a run: no other token, skipped ones included, between
 * them), as an engine's slot_mapping orders them (each sequence's new tokens in order); one run is one writer of its
 * page, so the call is race-free; two runs into one page in one call race (that page's codes and exponent are then
 * undefined). Slots within a call must be distinct. Only the pages the call writes are read or written. The numpy
 * model, bit for bit: flashprefill.paged.quantize_paged_model. */
#define FLASHPREFILL_PAGE_EMPTY (-128)

typedef struct flashprefill_quantize_paged_params {
    uint32_t struct_bytes; /* sizeof(flashprefill_quantize_paged_params): set by _quantize_paged_params_init() */
    const void *x;                /* (tokens, heads_kv, dim), x_dtype; 16-byte aligned */
    const int32_t *slot_mapping;  /* device, tokens int32 (4-byte aligned): page * page_size + row, or < 0 to skip */
    void *codes;                  /* the cache: (num_pages, page_size, heads_kv, dim) e4m3, 16-byte aligned; must not
                                     overlap x */
    int8_t *exponents;            /* (num_pages, heads_kv) contiguous, FLASHPREFILL_PAGE_EMPTY where empty */
    const float *signs;           /* NULL, or dim floats, each +1 or -1 (4-byte aligned) */
    int64_t x_stride_token, x_stride_head, x_stride_dim;                           /* elements; dim's must be 1 */
    int64_t codes_stride_page, codes_stride_row, codes_stride_head, codes_stride_dim; /* elements; dim's must be 1 */
    int32_t tokens, heads_kv, dim;  /* dim a multiple of 32, at most 256 */
    int32_t num_pages, page_size;   /* num_pages * page_size < 2^31 (slots are int32) */
    flashprefill_dtype x_dtype;     /* BF16 or FP32 */
} flashprefill_quantize_paged_params;

static inline flashprefill_quantize_paged_params flashprefill_quantize_paged_params_init(void)
{
    flashprefill_quantize_paged_params p;
    memset(&p, 0, sizeof p);
    p.struct_bytes = (uint32_t)sizeof p;
    return p;
}

/* Enqueues flashprefill_quantize_paged on `stream` and returns without waiting; validates p first, then checks the
   device and the pointers as flashprefill_forward does. From 0.10.0 on; in the gfx950 library from 0.10.1 on
   (emulated only, never run on an MI355X). */
flashprefill_status flashprefill_quantize_paged(const flashprefill_quantize_paged_params *p, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FLASHPREFILL_H */
