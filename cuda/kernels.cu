// The CUDA backend's kernel table (src/backend.h), in order of preference.
#include "backend.h"

extern "C" const fp_kernel_entry fp_backend_kernels[1] = {};
extern "C" const int fp_backend_kernel_count = 0;
