/* The gfx950 code objects built by `make amd`, embedded in the library (hip/code_objects.S), and the load-time
 * check of their kernel descriptors against the chip (hip/code_object_check.c).
 */
#ifndef FLASHPREFILL_GFX950_CODE_OBJECTS_H
#define FLASHPREFILL_GFX950_CODE_OBJECTS_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "code_object_list.h"

/* Each object's image and its size in bytes: fp_gfx950_<name>_co, fp_gfx950_<name>_co_size (hip/code_objects.S). */
#define FP_GFX950_CODE_OBJECT_EXTERNS(suffix, name)            \
    extern const unsigned char fp_gfx950_##name##_co[];        \
    extern const uint64_t fp_gfx950_##name##_co_size;
FP_GFX950_CODE_OBJECTS(FP_GFX950_CODE_OBJECT_EXTERNS)
#undef FP_GFX950_CODE_OBJECT_EXTERNS

/* MI355X (gfx950) compute unit: LDS per workgroup, unified VGPR + AGPR file per lane of one wave. */
#define FP_GFX950_LDS_BYTES (160 * 1024)
#define FP_GFX950_VGPRS_PER_LANE 512

/* What a kernel descriptor asks of the chip. */
typedef struct fp_kernel_resources {
    uint32_t lds_bytes;     /* group_segment_fixed_size */
    uint32_t scratch_bytes; /* private_segment_fixed_size */
    uint32_t kernarg_bytes;
    uint32_t vgprs;         /* unified VGPR + AGPR, from COMPUTE_PGM_RSRC1 (granules of 8) */
} fp_kernel_resources;

/* Finds `<kernel>.kd` in the ELF code object and reads its resources. FLASHPREFILL_SUCCESS, or
   NOT_SUPPORTED with the last error set (malformed object, no such kernel). */
flashprefill_status fp_code_object_resources(const unsigned char *image, uint64_t size, const char *kernel,
                                             fp_kernel_resources *out);

/* SUCCESS when the resources fit one gfx950 CU, else NOT_SUPPORTED saying which one does not. */
flashprefill_status fp_check_resources(const char *kernel, const fp_kernel_resources *r);

#endif /* FLASHPREFILL_GFX950_CODE_OBJECTS_H */
