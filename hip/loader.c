/* The HIP runtime and the gfx950 modules, loaded on first use: libamdhip64.so once per process through
 * dlopen (so the library needs no ROCm to build or load), then the embedded code objects once per device
 * through hipModuleLoadData, after each kernel descriptor passed fp_check_resources. A module belongs to
 * the context of the device current when it was loaded, so each device ordinal gets its own set, loaded
 * while that device is current (the caller's, at its first call on it).
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
#define FP_GFX950_CODE_OBJECT_ENTRY(suffix, name) \
    [FP_GFX950_##suffix] = {#name, fp_gfx950_##name##_co, &fp_gfx950_##name##_co_size},
    FP_GFX950_CODE_OBJECTS(FP_GFX950_CODE_OBJECT_ENTRY)
#undef FP_GFX950_CODE_OBJECT_ENTRY
};

/* Nodes of MI355X carry 8 GPUs; an ordinal past the table is refused rather than given another's modules. */
enum { FP_GFX950_MAX_DEVICES = 16 };

typedef struct load_result {
    flashprefill_status status;
    char message[384];
} load_result;

static struct {
    load_result result;
    fp_hip_api api;
} runtime;
static pthread_once_t runtime_once = PTHREAD_ONCE_INIT;

/* Per device ordinal: loaded once (`tried`), with the status of that load, the same on every call. */
static struct {
    int tried;
    load_result result;
    hipFunction_t functions[FP_GFX950_KERNEL_COUNT];
} devices[FP_GFX950_MAX_DEVICES];
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;

static flashprefill_status fail(load_result *r, flashprefill_status status, const char *message)
{
    r->status = status;
    snprintf(r->message, sizeof r->message, "%s", message);
    return status;
}

static flashprefill_status resolve(void *lib)
{
#define FP_RESOLVE(field, symbol)                                                                             \
    if (!(*(void **)&runtime.api.field = dlsym(lib, symbol)))                                                \
        return fail(&runtime.result, FLASHPREFILL_ERROR_NO_DEVICE, "libamdhip64.so lacks " symbol);
    FP_RESOLVE(GetDeviceCount, "hipGetDeviceCount")
    FP_RESOLVE(GetDevice, "hipGetDevice")
    FP_RESOLVE(ModuleLoadData, "hipModuleLoadData")
    FP_RESOLVE(ModuleGetFunction, "hipModuleGetFunction")
    FP_RESOLVE(ModuleLaunchKernel, "hipModuleLaunchKernel")
    FP_RESOLVE(GetErrorString, "hipGetErrorString")
    FP_RESOLVE(Memcpy, "hipMemcpy")
#undef FP_RESOLVE
    return FLASHPREFILL_SUCCESS;
}

static void load_runtime(void)
{
    void *lib = NULL;
    for (size_t i = 0; i < sizeof hip_library_names / sizeof hip_library_names[0] && !lib; ++i)
        lib = dlopen(hip_library_names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fail(&runtime.result, FLASHPREFILL_ERROR_NO_DEVICE,
             "no HIP runtime: libamdhip64.so could not be loaded (is ROCm installed?)");
        return;
    }
    if (resolve(lib))
        return;
    int count = 0;
    if (runtime.api.GetDeviceCount(&count) != 0 || count == 0)
        fail(&runtime.result, FLASHPREFILL_ERROR_NO_DEVICE, "the HIP runtime sees no GPU");
}

static flashprefill_status load_kernel(load_result *r, const unsigned char *image, uint64_t size, const char *kernel,
                                       hipFunction_t *function)
{
    fp_kernel_resources resources;
    flashprefill_status s;
    if ((s = fp_code_object_resources(image, size, kernel, &resources)) ||
        (s = fp_check_resources(kernel, &resources)))
        return fail(r, s, fp_last_error());
    hipModule_t module;
    hipError_t err = runtime.api.ModuleLoadData(&module, image);
    if (err == 0)
        err = runtime.api.ModuleGetFunction(function, module, kernel);
    if (err != 0) {
        char message[256];
        snprintf(message, sizeof message, "loading %s (gfx950 code object): %s", kernel,
                 runtime.api.GetErrorString(err));
        return fail(r, FLASHPREFILL_ERROR_NO_DEVICE, message);
    }
    return FLASHPREFILL_SUCCESS;
}

/* Every code object into the current device's context; called with devices_lock held. */
static void load_device(int device)
{
    for (int k = 0; k < FP_GFX950_KERNEL_COUNT; ++k)
        if (load_kernel(&devices[device].result, code_objects[k].image, *code_objects[k].size, code_objects[k].name,
                        &devices[device].functions[k]))
            return;
    devices[device].result.status = FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_hip_load(const fp_hip_api **api, fp_gfx950_kernel kernel, hipFunction_t *function)
{
    pthread_once(&runtime_once, load_runtime);
    if (runtime.result.status)
        return fp_fail(runtime.result.status, "%s", runtime.result.message);
    int device = -1;
    hipError_t err = runtime.api.GetDevice(&device);
    if (err != 0)
        return fp_fail(FLASHPREFILL_ERROR_NO_DEVICE, "hipGetDevice: %s", runtime.api.GetErrorString(err));
    if (device < 0 || device >= FP_GFX950_MAX_DEVICES)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED, "device %d: the gfx950 library loads its kernels on "
                       "devices 0 to %d only", device, FP_GFX950_MAX_DEVICES - 1);
    pthread_mutex_lock(&devices_lock);
    if (!devices[device].tried) {
        devices[device].tried = 1;
        load_device(device);
    }
    load_result result = devices[device].result;
    *function = devices[device].functions[kernel];
    pthread_mutex_unlock(&devices_lock);
    if (result.status)
        return fp_fail(result.status, "%s", result.message);
    *api = &runtime.api;
    return FLASHPREFILL_SUCCESS;
}

flashprefill_status fp_hip_launch(fp_gfx950_kernel kernel, unsigned x, unsigned y, unsigned z, unsigned lanes,
                                  void *stream, void *kernarg, size_t bytes, const char *what)
{
    const fp_hip_api *api;
    hipFunction_t fn;
    flashprefill_status s = fp_hip_load(&api, kernel, &fn);
    if (s)
        return s;
    void *extra[] = {FP_HIP_LAUNCH_PARAM_BUFFER_POINTER, kernarg, FP_HIP_LAUNCH_PARAM_BUFFER_SIZE, &bytes,
                     FP_HIP_LAUNCH_PARAM_END};
    const hipError_t err = api->ModuleLaunchKernel(fn, x, y, z, lanes, 1, 1, 0, (hipStream_t)stream, NULL, extra);
    if (err != 0)
        return fp_fail(FLASHPREFILL_ERROR_DEVICE, "hipModuleLaunchKernel (%s): %s", what, api->GetErrorString(err));
    return FLASHPREFILL_SUCCESS;
}
