// The CUDA backend's device checks that live beside fp_backend_check_device (device.cu).
#pragma once

#include "flashprefill.h"

// A Hopper GPU is current and every pointer of p lives on it; otherwise NO_DEVICE / INVALID_ARGUMENT with the
// last error set.
extern "C" flashprefill_status fp_check_quantize_device(const flashprefill_quantize_params *p);

// The same for flashprefill_prepare_v's pointers.
extern "C" flashprefill_status fp_check_prepare_v_device(const flashprefill_prepare_v_params *p);

// The same for flashprefill_merge_state's pointers.
extern "C" flashprefill_status fp_check_merge_state_device(const flashprefill_merge_state_params *p);
