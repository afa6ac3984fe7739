/* Reads a gfx950 kernel's resources from its kernel descriptor (`<kernel>.kd` in the ELF code object) and
 * checks them against one CU, before the code object is handed to the runtime. Every read is bounds-checked:
 * a malformed image is an error, never a crash.
 */
#include "code_objects.h"

#include <string.h>

enum { ELF_SHT_SYMTAB = 2, ELF_SHT_DYNSYM = 11, ELF_SECTION_BYTES = 64, ELF_SYMBOL_BYTES = 24 };
/* AMDGPU kernel descriptor (code object v5): byte offsets of the fields read here. */
enum { KD_GROUP_SEGMENT = 0, KD_PRIVATE_SEGMENT = 4, KD_KERNARG_SIZE = 8, KD_PGM_RSRC1 = 48, KD_BYTES = 64 };
#define KD_VGPR_GRANULE 8 /* gfx90a and later, wave64: COMPUTE_PGM_RSRC1[5:0] = vgprs / 8 - 1 */

typedef struct image_view {
    const unsigned char *data;
    uint64_t size;
} image_view;

static int read_bytes(image_view img, uint64_t offset, void *out, uint64_t n)
{
    if (offset > img.size || n > img.size - offset)
        return 0;
    memcpy(out, img.data + offset, n);
    return 1;
}

static int read_u16(image_view img, uint64_t offset, uint16_t *v) { return read_bytes(img, offset, v, 2); }
static int read_u32(image_view img, uint64_t offset, uint32_t *v) { return read_bytes(img, offset, v, 4); }
static int read_u64(image_view img, uint64_t offset, uint64_t *v) { return read_bytes(img, offset, v, 8); }

typedef struct section {
    uint32_t type, link;
    uint64_t addr, offset, size;
} section;

static int read_section(image_view img, uint64_t table, uint32_t index, section *s)
{
    const uint64_t base = table + (uint64_t)index * ELF_SECTION_BYTES;
    return read_u32(img, base + 4, &s->type) && read_u64(img, base + 16, &s->addr) &&
           read_u64(img, base + 24, &s->offset) && read_u64(img, base + 32, &s->size) &&
           read_u32(img, base + 40, &s->link);
}

/* The file offset of symbol `name`'s value, or 0 when absent. */
static uint64_t find_symbol(image_view img, uint64_t table, uint16_t count, const char *name)
{
    for (uint16_t i = 0; i < count; ++i) {
        section symtab, strtab, home;
        if (!read_section(img, table, i, &symtab) ||
            (symtab.type != ELF_SHT_SYMTAB && symtab.type != ELF_SHT_DYNSYM) ||
            !read_section(img, table, symtab.link, &strtab))
            continue;
        for (uint64_t at = 0; at + ELF_SYMBOL_BYTES <= symtab.size; at += ELF_SYMBOL_BYTES) {
            uint32_t name_offset;
            uint16_t shndx;
            uint64_t value;
            if (!read_u32(img, symtab.offset + at, &name_offset) || !read_u16(img, symtab.offset + at + 6, &shndx) ||
                !read_u64(img, symtab.offset + at + 8, &value))
                return 0;
            const size_t len = strlen(name) + 1;
            char candidate[128];
            if (len > sizeof candidate || !read_bytes(img, strtab.offset + name_offset, candidate, len) ||
                memcmp(candidate, name, len) != 0)
                continue;
            if (!read_section(img, table, shndx, &home) || value < home.addr)
                return 0;
            return home.offset + (value - home.addr);
        }
    }
    return 0;
}

flashprefill_status fp_code_object_resources(const unsigned char *image, uint64_t size, const char *kernel,
                                             fp_kernel_resources *out)
{
    const image_view img = {image, size};
    static const unsigned char elf_magic[4] = {0x7f, 'E', 'L', 'F'};
    unsigned char magic[4];
    uint64_t section_table;
    uint16_t section_bytes, sections;
    if (!read_bytes(img, 0, magic, 4) || memcmp(magic, elf_magic, 4) != 0 || !read_u64(img, 0x28, &section_table) ||
        !read_u16(img, 0x3a, &section_bytes) || !read_u16(img, 0x3c, &sections) ||
        section_bytes != ELF_SECTION_BYTES)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the embedded code object for %s is not a 64-bit ELF image",
                       kernel);
    char symbol[120];
    if (strlen(kernel) + 4 > sizeof symbol)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "kernel name %s is too long", kernel);
    strcpy(symbol, kernel);
    strcat(symbol, ".kd");
    const uint64_t kd = find_symbol(img, section_table, sections, symbol);
    uint32_t rsrc1;
    if (kd == 0 || !read_u32(img, kd + KD_GROUP_SEGMENT, &out->lds_bytes) ||
        !read_u32(img, kd + KD_PRIVATE_SEGMENT, &out->scratch_bytes) ||
        !read_u32(img, kd + KD_KERNARG_SIZE, &out->kernarg_bytes) || !read_u32(img, kd + KD_PGM_RSRC1, &rsrc1) ||
        kd + KD_BYTES > size)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "the embedded code object has no kernel descriptor %s",
                       symbol);
    out->vgprs = ((rsrc1 & 0x3f) + 1) * KD_VGPR_GRANULE;
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_check_resources(const char *kernel, const fp_kernel_resources *r)
{
    if (r->lds_bytes > FP_GFX950_LDS_BYTES)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "%s needs %u bytes of LDS; a gfx950 CU has %d", kernel,
                       r->lds_bytes, FP_GFX950_LDS_BYTES);
    if (r->vgprs > FP_GFX950_VGPRS_PER_LANE)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "%s needs %u VGPRs per lane; gfx950 has %d", kernel,
                       r->vgprs, FP_GFX950_VGPRS_PER_LANE);
    if (r->scratch_bytes != 0)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "%s uses %u bytes of scratch; the kernels are written "
                       "to use none", kernel, r->scratch_bytes);
    return FLASHPREFILL_SUCCESS;
}
