/* The gfx950 code objects (`make amd`), embedded as read-only data of the host library, one per entry of
   hip/code_object_list.h. Paths are relative to the repository root, where make runs the assembler. */
#include "code_object_list.h"

/* fp_gfx950_<name>_co: build/gfx950/<name>.co's bytes, 64-byte aligned; fp_gfx950_<name>_co_size: their count */
    .macro embed name
    .balign 64
    .globl fp_gfx950_\name\()_co
fp_gfx950_\name\()_co:
    .incbin "build/gfx950/\name\().co"
.L\name\()_co_end:
    .balign 8
    .globl fp_gfx950_\name\()_co_size
fp_gfx950_\name\()_co_size:
    .quad .L\name\()_co_end - fp_gfx950_\name\()_co
    .endm

    .section .rodata
#define FP_GFX950_EMBED(suffix, name) embed name;
    FP_GFX950_CODE_OBJECTS(FP_GFX950_EMBED)

    .section .note.GNU-stack,"",@progbits
