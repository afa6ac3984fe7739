/* The pointers each entry point hands the backend's device check (src/device_check.h), by their params' names. */
#include "device_check.h"

#define FP_COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* The device data of a descale: factors or exponents as its kind reads them; NULL for NONE (whatever the pointers
   hold is not read). */
static const void *descale_data(const flashprefill_descale *d)
{
    switch (d->kind) {
    case FLASHPREFILL_DESCALE_PER_TENSOR:
    case FLASHPREFILL_DESCALE_PER_HEAD: return d->factors;
    case FLASHPREFILL_DESCALE_PER_BLOCK: return d->exponents;
    case FLASHPREFILL_DESCALE_NONE: break;
    }
    return NULL;
}

flashprefill_status fp_check_forward_device(const flashprefill_params *p)
{
    const fp_named_pointer pointers[] = {
        {"q", p->q}, {"k", p->k}, {"v", p->v}, {"out", p->out}, {"lse", p->lse},
        {"q_descale", descale_data(&p->q_descale)}, {"k_descale", descale_data(&p->k_descale)},
        {"v_descale", descale_data(&p->v_descale)},
        {"cu_seqlens_q", p->cu_seqlens_q}, {"cu_seqlens_k", p->cu_seqlens_k}, {"seqused_k", p->seqused_k},
        {"block_table", p->block_table}, {"workspace", p->workspace}, {"q_rotation_signs", p->q_rotation_signs},
    };
    return fp_backend_check_device(pointers, FP_COUNT(pointers));
}

flashprefill_status fp_check_quantize_device(const flashprefill_quantize_params *p)
{
    const fp_named_pointer pointers[] = {
        {"x", p->x}, {"codes", p->codes}, {"exponents", p->exponents}, {"signs", p->signs},
        {"subtract", p->subtract}, {"cu_seqlens", p->cu_seqlens},
    };
    return fp_backend_check_device(pointers, FP_COUNT(pointers));
}

flashprefill_status fp_check_quantize_paged_device(const flashprefill_quantize_paged_params *p)
{
    const fp_named_pointer pointers[] = {
        {"x", p->x}, {"slot_mapping", p->slot_mapping}, {"codes", p->codes}, {"exponents", p->exponents},
        {"signs", p->signs},
    };
    return fp_backend_check_device(pointers, FP_COUNT(pointers));
}

flashprefill_status fp_check_prepare_v_device(const flashprefill_prepare_v_params *p)
{
    const fp_named_pointer pointers[] = {{"v", p->v}, {"prepared", p->prepared}};
    return fp_backend_check_device(pointers, FP_COUNT(pointers));
}

flashprefill_status fp_check_merge_state_device(const flashprefill_merge_state_params *p)
{
    const fp_named_pointer pointers[] = {{"out_a", p->out_a}, {"out_b", p->out_b}, {"out", p->out},
                                         {"lse_a", p->lse_a}, {"lse_b", p->lse_b}, {"lse", p->lse}};
    return fp_backend_check_device(pointers, FP_COUNT(pointers));
}
