"""The gfx950 paged KV-cache writer (asm/gfx950/quantize_paged.inc, one code object per head dim: quantize_paged_d32 ..
_d256) runs instruction by instruction in the functional emulator (tools/gfx950_emu) against its numpy model bit for
bit, flashprefill.paged.quantize_paged_model, as the Hopper writer is checked on the GPU
(tests/test_quantize_paged_gpu.py). Each case is an engine's sequence of calls into one cache: a prompt of several
sequences through a permuted block table (pages partly filled, tokens skipped with slot -1 and past the cache), then
decode steps of one token per sequence, growing so that pages' exponents grow and their codes are re-encoded in place;
x is k's view of a kv buffer.
After every call the whole cache (codes and exponents, every page and head: those no call writes hold random bytes)
must equal the model's. Each run takes a fresh seed as the emulator's schedule seed."""
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest

import kernargs
import markers

from flashprefill import paged, prepare

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
pytestmark = [pytest.mark.emulator, markers.needs_llvm22]
RNG = np.random.default_rng()
Kernarg = kernargs.QuantizePagedKernarg
HEADS_KV = 2


class EmulatedCache:
    """A paged cache in the emulator's memory, written by quantize_paged_d<dim> and mirrored by the model."""

    def __init__(self, codes, exponents, dim, seed):
        from gfx950_emu import GlobalMemory, load_code_object
        assert kernargs.offsets(Kernarg) == kernargs.assembly_offsets(kernargs.QUANTIZE_PAGED_CONTRACT)
        self.mem, self.seed = GlobalMemory(), seed
        self.codes, self.exponents = codes.copy(), exponents.copy()  # the model's
        self.codes_addr, self.exponents_addr = self.mem.alloc_array(codes), self.mem.alloc_array(exponents)
        self.name = f"quantize_paged_d{dim}"
        self.co = load_code_object(str(ROOT / "build" / "gfx950" / f"{self.name}.co"))

    def write(self, x, slot_mapping, signs=None):
        """One call on the device and in the model; then the two caches must be equal. x: (tokens, heads_kv, dim),
        or such a view of an array whose base goes to the device."""
        from gfx950_emu import run_kernel
        tokens, heads_kv, dim = x.shape
        num_pages, page_size = self.codes.shape[:2]
        base = x if x.base is None else x.base
        x_addr = self.mem.alloc_array(base) + (x.__array_interface__["data"][0] - base.__array_interface__["data"][0])
        a = Kernarg(x=x_addr, slot_mapping=self.mem.alloc_array(np.asarray(slot_mapping, np.int32)),
                    codes=self.codes_addr, exponents=self.exponents_addr,
                    signs=0 if signs is None else self.mem.alloc_array(np.asarray(signs, np.float32)),
                    codes_stride_page=page_size * heads_kv * dim, x_stride_token=x.strides[0],
                    x_stride_head=x.strides[1], codes_stride_row=heads_kv * dim, codes_stride_head=dim,
                    tokens=tokens, heads_kv=heads_kv, page_size=page_size, num_pages=num_pages,
                    x_fp32=int(x.dtype == np.float32))
        self.seed += 1
        run_kernel(self.co, self.name, grid=(tokens, heads_kv), workgroup_size=64, kernarg=bytes(a), memory=self.mem,
                   seed=self.seed)
        self.codes, self.exponents = paged.quantize_paged_model(np.asarray(x, np.float32), slot_mapping, self.codes,
                                                                self.exponents, signs)
        codes = self.mem.read(self.codes_addr, np.uint8, self.codes.shape)
        exponents = self.mem.read(self.exponents_addr, np.int8, self.exponents.shape)
        np.testing.assert_array_equal(exponents, self.exponents, err_msg=f"schedule seed {self.seed}")
        mismatch = codes != self.codes
        assert not mismatch.any(), (f"schedule seed {self.seed}: {mismatch.sum()} of {codes.size} codes differ, "
                                    f"first at {np.argwhere(mismatch)[0].tolist()}")


def _cache(rng, num_pages, page_size, dim, used_pages):
    """Random bytes everywhere (NaN codes among them); the pages of `used_pages` empty, the others with random
    exponents (no call may touch them)."""
    codes = rng.integers(0, 256, (num_pages, page_size, HEADS_KV, dim), dtype=np.uint8)
    exponents = rng.integers(-20, 21, (num_pages, HEADS_KV)).astype(np.int8)
    exponents[used_pages] = paged.PAGE_EMPTY
    return codes, exponents


def _as_k_of_kv(x, dtype):
    """x (tokens, heads, dim) in `dtype` as k's view of a (tokens, 2 heads, dim) kv buffer (x's token stride twice
    its rows)."""
    kv = np.concatenate([x, -x], axis=1).astype(dtype)
    return kv[:, :x.shape[1]]


def _slots(table, positions, page_size):
    return [int(table[p // page_size]) * page_size + p % page_size for p in positions]


@pytest.mark.parametrize("dim, page_size, dtype, rotate", [
    (64, 16, "bfloat16", True), (128, 64, "float32", False), (224, 16, "float32", True),
    (32, 256, "bfloat16", False), (160, 64, "bfloat16", True), (192, 64, "float32", True),
    (256, 16, "bfloat16", False)])
def test_prompt_then_decode_steps(dim, page_size, dtype, rotate):
    """Two sequences' prompts (37 and 5 tokens, the second starting mid-page after a skipped token) through a permuted
    block table, then three decode steps of one token each, each 2^4 larger than the last (the pages' exponents grow:
    re-encoded in place), one of them into a fresh page."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    lengths = [37, 5]
    pages_of = [-(-(n + 3) // page_size) + 1 for n in lengths]  # room for the decode steps
    num_pages = sum(pages_of) + 3
    table = rng.permutation(num_pages)
    tables = [table[:pages_of[0]], table[pages_of[0]:pages_of[0] + pages_of[1]]]
    cache = EmulatedCache(*_cache(rng, num_pages, page_size, dim, table[:sum(pages_of)]), dim, seed)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if rotate else None
    # the prompt: sequence 1 starts at position page_size - 2 of its table (its first page partly filled after)
    starts = [0, page_size - 2]
    slots = (_slots(tables[0], range(lengths[0]), page_size) + [-1]
             + _slots(tables[1], range(starts[1], starts[1] + lengths[1]), page_size) + [num_pages * page_size + 3])
    x = rng.standard_normal((len(slots), HEADS_KV, dim))
    x[:, 1] *= 2.0**-30  # head 1 far below head 0
    x[5, 0, 7] = 40.0    # an outlier
    cache.write(_as_k_of_kv(x, dt), slots, signs)
    ends = [lengths[0], starts[1] + lengths[1]]
    for step in range(3):
        slots = [-1] + [_slots(t, [e], page_size)[0] for t, e in zip(tables, ends)]
        if step == 2:  # sequence 0 jumps to a fresh page of its table
            ends[0] = (ends[0] // page_size + 1) * page_size
            slots[1] = _slots(tables[0], [ends[0]], page_size)[0]
        x = rng.standard_normal((3, HEADS_KV, dim)) * 2.0 ** (4 * (step + 1))
        cache.write(_as_k_of_kv(x, dt), slots, signs)
        ends = [e + 1 for e in ends]


def test_special_rows():
    """Zero rows into an empty page (its exponent -127) and into one holding tokens (unchanged), a row with inf and
    one with NaN (exponent 0, then re-encoded by a row 2^40 larger: more than kMaxShift binades, every old code to
    +-0 but the NaN codes), float32 subnormals, and a page whose exponent shrinks never."""
    seed = int(RNG.integers(1 << 31))
    rng = np.random.default_rng(seed)
    dim, page_size, num_pages = 96, 16, 6
    cache = EmulatedCache(*_cache(rng, num_pages, page_size, dim, [0, 1, 2, 3]), dim, seed)
    x = rng.standard_normal((6, HEADS_KV, dim)).astype(np.float32)
    x[0:2] = 0                            # page 0: zero rows only
    x[2, 0, 5], x[3, 1, 9] = np.inf, np.nan  # page 1
    x[4:6] = 1e-41 * (x[4:6] > 0)         # page 2: subnormals
    cache.write(x, [0, 1, 16, 17, 32, 33])
    x = rng.standard_normal((4, HEADS_KV, dim)).astype(np.float32)
    x[0] = 0                              # page 1: a zero row, nothing grows
    x[1] *= 2.0**-20                      # page 2: smaller than its first rows, nothing shrinks
    x[2] *= 2.0**40                       # page 3 fresh; then page 1 again
    x[3] *= 2.0**40
    cache.write(x, [18, 34, 48, 19])
