/* A stand-in libamdhip64.so for tests/test_gfx950_library.py and tests/test_gfx950_varlen_launch.py: two devices,
 * hipSetDevice to switch, a log of which device was current at each hipModuleLoadData and hipModuleLaunchKernel, and
 * the last launch's grid and kernel arguments. A module handle encodes the device it was loaded on (device + 1 in
 * the upper bits), so a launch can be checked against the current device.
 */
#include <stdint.h>
#include <string.h>

enum { DEVICES = 2, LOG = 256, KERNARG_BYTES = 1024 };

static int current;
static int load_device[LOG], load_count;
static int launch_device[LOG], launch_module_device[LOG], launch_count;
static unsigned last_grid[3];
enum { KEPT = 4 }; /* the kernel arguments of the last KEPT launches, launch i's in slot i % KEPT */
static unsigned char kernargs[KEPT][KERNARG_BYTES];
static size_t kernarg_bytes[KEPT];
static int launches; /* every launch, past the log's LOG too */

int hipGetDeviceCount(int *count) { *count = DEVICES; return 0; }
int hipGetDevice(int *device) { *device = current; return 0; }

/* Any ordinal below 64 (more than a real runtime would take), so the loader's own bound can be tested. */
int hipSetDevice(int device)
{
    if (device < 0 || device >= 64)
        return 101; /* hipErrorInvalidDevice */
    current = device;
    return 0;
}

int hipModuleLoadData(void **module, const void *image)
{
    (void)image;
    if (load_count < LOG)
        load_device[load_count++] = current;
    *module = (void *)(uintptr_t)(((uintptr_t)current + 1) << 16 | (uintptr_t)load_count);
    return 0;
}

int hipModuleGetFunction(void **function, void *module, const char *name)
{
    (void)name;
    *function = module;
    return 0;
}

int hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned shared, void *stream, void **params, void **extra)
{
    (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params;
    last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
    /* extra = {BUFFER_POINTER (1), buffer, BUFFER_SIZE (2), &bytes, END (3)}, as hip/fwd_launch.c passes it */
    const int slot = launches++ % KEPT;
    kernarg_bytes[slot] = 0;
    if (extra != NULL && extra[0] == (void *)0x01 && extra[2] == (void *)0x02) {
        kernarg_bytes[slot] = *(size_t *)extra[3] < KERNARG_BYTES ? *(size_t *)extra[3] : KERNARG_BYTES;
        memcpy(kernargs[slot], extra[1], kernarg_bytes[slot]);
    }
    if (launch_count < LOG) {
        launch_device[launch_count] = current;
        launch_module_device[launch_count++] = (int)(((uintptr_t)function >> 16) - 1);
    }
    return 0;
}

const char *hipGetErrorString(int error) { return error ? "stub error" : "hipSuccess"; }

/* Device memory is host memory here: a test hands the library host buffers. */
int hipMemcpy(void *dst, const void *src, size_t bytes, int kind)
{
    (void)kind;
    memcpy(dst, src, bytes);
    return 0;
}

/* The log, for the test. */
int stub_load_count(void) { return load_count; }
int stub_load_device(int i) { return load_device[i]; }
int stub_launch_count(void) { return launch_count; }
int stub_launch_device(int i) { return launch_device[i]; }
int stub_launch_module_device(int i) { return launch_module_device[i]; }
unsigned stub_last_grid(int axis) { return last_grid[axis]; }
/* Copies the kernel arguments of the launch `back` launches before the last (0: the last, up to KEPT - 1) into dst
   (at most KERNARG_BYTES); returns their size, 0 where there is none. */
size_t stub_kernarg(int back, void *dst)
{
    if (back < 0 || back >= KEPT || back >= launches)
        return 0;
    const int slot = (launches - 1 - back) % KEPT;
    memcpy(dst, kernargs[slot], kernarg_bytes[slot]);
    return kernarg_bytes[slot];
}

/* The last launch's kernel arguments (stub_kernarg(0, dst)). */
size_t stub_last_kernarg(void *dst) { return stub_kernarg(0, dst); }
