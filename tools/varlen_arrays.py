"""The array operations tools/bench_varlen.py builds its inputs and checks its outputs with, two ways: TorchOps on
the GPU (torch CUDA tensors, what flashprefill and FlashAttention-3 take), NumpyOps for the dry run (numpy arrays,
ml_dtypes' bfloat16 and float8_e4m3fn). The benchmark's code is written once against these names, so that the dry
run goes through all of it but the kernels.

dtype names: "float32", "bf16", "fp8" (e4m3fn), "int8", "int32", "int64", "uint8".
"""
import numpy as np

E4M3_MAX = 448.0


class TorchOps:
    """CUDA tensors through torch (imported here, so that the dry run never needs it)."""

    def __init__(self):
        import torch
        self.torch = torch
        self.dtypes = {"float32": torch.float32, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn,
                       "int8": torch.int8, "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8}

    def randn(self, shape, seed):
        g = self.torch.Generator(device="cuda").manual_seed(seed)
        return self.torch.randn(*shape, generator=g, device="cuda")

    def asarray(self, values, dtype):
        """A device copy of a numpy array."""
        return self.torch.from_numpy(np.ascontiguousarray(values)).to(device="cuda", dtype=self.dtypes[dtype])

    def empty(self, shape, dtype):
        return self.torch.empty(shape, device="cuda", dtype=self.dtypes[dtype])

    def cast(self, x, dtype):
        return x.to(self.dtypes[dtype]).contiguous()

    def amax(self, x, axis):
        return x.amax(dim=axis)

    def clip(self, x, low, high):
        return x.clamp(low, high)

    def pow2_exponents(self, amax):
        """int8: the least e with amax / 2^e <= 448 (0 where amax is 0): power-of-two descales 2^e."""
        torch = self.torch
        e = torch.where(amax > 0, torch.ceil(torch.log2(amax / E4M3_MAX)), torch.zeros_like(amax))
        return e.clamp(-127, 127).to(torch.int8)

    def exp2(self, e):
        return self.torch.exp2(e.float())

    def segment_amax(self, x, segments, count):
        """(count, ...) float32: the largest of x's rows (x >= 0) of each segment; segments: int64 device array."""
        out = self.torch.zeros((count,) + tuple(x.shape[1:]), device="cuda", dtype=self.torch.float32)
        index = segments.reshape((-1,) + (1,) * (x.dim() - 1)).expand(x.shape)
        return out.scatter_reduce_(0, index, x.float(), reduce="amax")

    def scatter_rows(self, src, src_rows, dst_rows, rows):
        """A new array of `rows` rows, zero but dst[dst_rows] = src[src_rows] (rows: int64 device arrays). Moved as
        bytes: torch has no index_put for float8."""
        u8 = src.contiguous().view(self.torch.uint8)
        dst = self.torch.zeros((rows,) + tuple(u8.shape[1:]), device="cuda", dtype=self.torch.uint8)
        dst[dst_rows] = u8[src_rows]
        return dst.view(src.dtype)

    def relative_l2(self, out, ref):
        """||out - ref|| / ||ref|| in float64 (NaN where out holds a non-finite value)."""
        a, b = out.double(), ref.double()
        return float((a - b).norm() / b.norm())

    def release(self):
        self.torch.cuda.empty_cache()


class NumpyOps:
    """numpy stand-ins of TorchOps' operations, on the host."""

    def __init__(self):
        import ml_dtypes
        self.dtypes = {"float32": np.float32, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
                       "int8": np.int8, "int32": np.int32, "int64": np.int64, "uint8": np.uint8}

    def randn(self, shape, seed):
        return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)

    def asarray(self, values, dtype):
        return np.ascontiguousarray(values, dtype=self.dtypes[dtype])

    def empty(self, shape, dtype):
        return np.empty(shape, dtype=self.dtypes[dtype])

    def cast(self, x, dtype):
        return np.ascontiguousarray(x.astype(self.dtypes[dtype]))

    def amax(self, x, axis):
        return x.max(axis=axis)

    def clip(self, x, low, high):
        return np.clip(x, low, high)

    def pow2_exponents(self, amax):
        with np.errstate(divide="ignore"):
            e = np.where(amax > 0, np.ceil(np.log2(amax / E4M3_MAX)), 0)
        return np.clip(e, -127, 127).astype(np.int8)

    def exp2(self, e):
        return np.exp2(e.astype(np.float32))

    def segment_amax(self, x, segments, count):
        out = np.zeros((count,) + x.shape[1:], dtype=np.float32)
        np.maximum.at(out, segments, x.astype(np.float32))
        return out

    def scatter_rows(self, src, src_rows, dst_rows, rows):
        dst = np.zeros((rows,) + src.shape[1:], dtype=src.dtype)
        dst[dst_rows] = src[src_rows]
        return dst

    def relative_l2(self, out, ref):
        a, b = np.asarray(out, dtype=np.float64), np.asarray(ref, dtype=np.float64)
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    def release(self):
        pass
