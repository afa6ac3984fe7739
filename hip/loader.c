/* The HIP runtime and the gfx950 modules, loaded once per process on first use: libamdhip64.so through
 * dlopen (so the library needs no ROCm to build or load), then each embedded code object through
 * hipModuleLoadData, after its kernel descriptor passed fp_check_resources.
 */
#include "loader.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "code_objects.h"

static const char *const hip_library_names[] = {"libamdhip64.so", "libamdhip64.so.7", "libamdhip64.so.6"};

/* The embedded code objects, by fp_gfx950_kernel. */
static const struct {
    const char *name;
    const unsigned char *image;
    const uint64_t *size;
} code_objects[FP_GFX950_KERNEL_COUNT] = {
    [FP_GFX950_FWD_BF16_HD128] = {"fwd_bf16_hd128", fp_gfx950_fwd_bf16_hd128_co, &fp_gfx950_fwd_bf16_hd128_co_size},
    [FP_GFX950_FWD_BF16_QK192] = {"fwd_bf16_qk192", fp_gfx950_fwd_bf16_qk192_co, &fp_gfx950_fwd_bf16_qk192_co_size},
    [FP_GFX950_FWD_FP8_HD128] = {"fwd_fp8_hd128", fp_gfx950_fwd_fp8_hd128_co, &fp_gfx950_fwd_fp8_hd128_co_size},
    [FP_GFX950_FWD_FP8_QK192] = {"fwd_fp8_qk192", fp_gfx950_fwd_fp8_qk192_co, &fp_gfx950_fwd_fp8_qk192_co_size},
    [FP_GFX950_QUANTIZE_D32] = {"quantize_d32", fp_gfx950_quantize_d32_co, &fp_gfx950_quantize_d32_co_size},
    [FP_GFX950_QUANTIZE_D64] = {"quantize_d64", fp_gfx950_quantize_d64_co, &fp_gfx950_quantize_d64_co_size},
    [FP_GFX950_QUANTIZE_D96] = {"quantize_d96", fp_gfx950_quantize_d96_co, &fp_gfx950_quantize_d96_co_size},
    [FP_GFX950_QUANTIZE_D128] = {"quantize_d128", fp_gfx950_quantize_d128_co, &fp_gfx950_quantize_d128_co_size},
    [FP_GFX950_QUANTIZE_D160] = {"quantize_d160", fp_gfx950_quantize_d160_co, &fp_gfx950_quantize_d160_co_size},
    [FP_GFX950_QUANTIZE_D192] = {"quantize_d192", fp_gfx950_quantize_d192_co, &fp_gfx950_quantize_d192_co_size},
    [FP_GFX950_QUANTIZE_D224] = {"quantize_d224", fp_gfx950_quantize_d224_co, &fp_gfx950_quantize_d224_co_size},
    [FP_GFX950_QUANTIZE_D256] = {"quantize_d256", fp_gfx950_quantize_d256_co, &fp_gfx950_quantize_d256_co_size},
};

typedef struct loaded {
    flashprefill_status status;
    char message[384];
    fp_hip_api api;
    hipFunction_t functions[FP_GFX950_KERNEL_COUNT];
} loaded;

static loaded state;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static flashprefill_status fail(flashprefill_status status, const char *message)
{
    state.status = status;
    snprintf(state.message, sizeof state.message, "%s", message);
    return status;
}

static flashprefill_status resolve(void *lib)
{
#define FP_RESOLVE(field, symbol)                                                                             \
    if (!(*(void **)&state.api.field = dlsym(lib, symbol)))                                                  \
        return fail(FLASHPREFILL_ERROR_NO_DEVICE, "libamdhip64.so lacks " symbol);
    FP_RESOLVE(GetDeviceCount, "hipGetDeviceCount")
    FP_RESOLVE(GetDevice, "hipGetDevice")
    FP_RESOLVE(ModuleLoadData, "hipModuleLoadData")
    FP_RESOLVE(ModuleGetFunction, "hipModuleGetFunction")
    FP_RESOLVE(ModuleLaunchKernel, "hipModuleLaunchKernel")
    FP_RESOLVE(GetErrorString, "hipGetErrorString")
#undef FP_RESOLVE
    return FLASHPREFILL_SUCCESS;
}

static flashprefill_status load_kernel(const unsigned char *image, uint64_t size, const char *kernel,
                                       hipFunction_t *function)
{
    fp_kernel_resources resources;
    flashprefill_status s;
    if ((s = fp_code_object_resources(image, size, kernel, &resources)) ||
        (s = fp_check_resources(kernel, &resources)))
        return fail(s, flashprefill_last_error());
    hipModule_t module;
    hipError_t err = state.api.ModuleLoadData(&module, image);
    if (err == 0)
        err = state.api.ModuleGetFunction(function, module, kernel);
    if (err != 0) {
        char message[256];
        snprintf(message, sizeof message, "loading %s (gfx950 code object): %s", kernel,
                 state.api.GetErrorString(err));
        return fail(FLASHPREFILL_ERROR_NO_DEVICE, message);
    }
    return FLASHPREFILL_SUCCESS;
}

static void load_once(void)
{
    void *lib = NULL;
    for (size_t i = 0; i < sizeof hip_library_names / sizeof hip_library_names[0] && !lib; ++i)
        lib = dlopen(hip_library_names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fail(FLASHPREFILL_ERROR_NO_DEVICE, "no HIP runtime: libamdhip64.so could not be loaded (is ROCm installed?)");
        return;
    }
    if (resolve(lib))
        return;
    int count = 0;
    if (state.api.GetDeviceCount(&count) != 0 || count == 0) {
        fail(FLASHPREFILL_ERROR_NO_DEVICE, "the HIP runtime sees no GPU");
        return;
    }
    for (int k = 0; k < FP_GFX950_KERNEL_COUNT; ++k)
        if (load_kernel(code_objects[k].image, *code_objects[k].size, code_objects[k].name, &state.functions[k]))
            return;
    state.status = FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_hip_load(const fp_hip_api **api, fp_gfx950_kernel kernel, hipFunction_t *function)
{
    pthread_once(&once, load_once);
    if (state.status)
        return fp_fail(state.status, "%s", state.message);
    *api = &state.api;
    *function = state.functions[kernel];
    return FLASHPREFILL_SUCCESS;
}
