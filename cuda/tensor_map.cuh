// Host side: TMA tensor maps for the (batch, seq, heads, dim) tensors of the ABI.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend.h"

namespace fp {

// cuTensorMapEncodeTiled, found through the runtime so the library needs no link-time libcuda.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder()
{
    static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
        void *fn = nullptr;
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            fn = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
    }();
    return encode;
}

// A 4-d tensor map (dim, seq, heads, batch) with a box of (box_dim, box_seq, 1, 1), swizzled in rows of
// swizzle_bytes (128 or 64; box_dim elements fill one).
// Strides of axes of extent 1 are never used; they are replaced so the encoder's checks don't see them.
inline flashprefill_status encode_tensor_map(CUtensorMap *map, const char *name, const void *data,
                                             CUtensorMapDataType type, int elem_bytes, const int64_t (&extent)[4],
                                             const int64_t (&stride)[4], uint32_t box_dim, uint32_t box_seq,
                                             int swizzle_bytes)
{
    const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (encode == nullptr)
        return fp_fail(FLASHPREFILL_ERROR_NO_DEVICE, "the CUDA driver has no cuTensorMapEncodeTiled");
    cuuint64_t dims[4], strides_bytes[3];
    int64_t packed = extent[0] * elem_bytes;  // bytes of one whole inner slice, the stand-in stride
    for (int axis = 0; axis < 4; ++axis)
        dims[axis] = static_cast<cuuint64_t>(extent[axis]);
    for (int axis = 1; axis < 4; ++axis) {
        strides_bytes[axis - 1] =
            static_cast<cuuint64_t>(extent[axis] == 1 ? (packed + 15) / 16 * 16 : stride[axis] * elem_bytes);
        packed = static_cast<int64_t>(strides_bytes[axis - 1]) * extent[axis];
    }
    const cuuint32_t box[4] = {box_dim, box_seq, 1, 1};
    const cuuint32_t element_strides[4] = {1, 1, 1, 1};
    const CUresult r = encode(map, type, 4, const_cast<void *>(data), dims, strides_bytes, box, element_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE,
                              swizzle_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
        return fp_fail(FLASHPREFILL_ERROR_NOT_SUPPORTED,
                       "%s: the TMA unit cannot address this layout (cuTensorMapEncodeTiled error %d; strides in "
                       "bytes %llu, %llu, %llu)",
                       name, static_cast<int>(r), static_cast<unsigned long long>(strides_bytes[0]),
                       static_cast<unsigned long long>(strides_bytes[1]),
                       static_cast<unsigned long long>(strides_bytes[2]));
    return FLASHPREFILL_SUCCESS;
}

}  // namespace fp
