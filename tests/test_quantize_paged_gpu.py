"""The paged cache writer (flashprefill_quantize_paged, through fp.quantize_paged) against its numpy model, bit for
bit: paged.quantize_paged_model. Caches start as random bytes (NaN codes among them) with every page empty, and the
whole cache, codes and exponents, is compared after every call, so the pages and rows a call must leave alone are
checked to be left alone. CuPy arrays in and out (gpu_arrays.py)."""
import numpy as np
import pytest

import flashprefill as fp
import gpu_arrays as ga
import shapes
from test_quantize_paged import sequence_slots  # the same slots as the host tests
from flashprefill import paged, prepare

pytestmark = pytest.mark.gpu

EMPTY = paged.PAGE_EMPTY


def _rows(rng, tokens, heads, dim):
    """N(0,1) rows, each times 2^-8..2^8: page exponents grow as tokens arrive (codes re-encoded)."""
    return rng.standard_normal((tokens, heads, dim)) * np.exp2(rng.integers(-8, 9, (tokens, 1, 1)))


def _device(host, dtype):
    return ga.to_device(ga.to_bf16(host) if dtype == "bfloat16" else host.astype(np.float32))


class Cache:
    """A device cache (codes as uint8, viewed as e4m3 for the library) and its host copy as the model has it."""

    def __init__(self, rng, num_pages, page_size, heads, dim):
        codes = rng.integers(0, 256, (num_pages, page_size, heads, dim)).astype(np.uint8)
        exponents = np.full((num_pages, heads), EMPTY, np.int8)
        self.model = (codes, exponents)
        self.codes, self.exponents = ga.to_device(codes), ga.to_device(exponents)

    def write(self, x, slots, signs=None):
        """x (device) into the device cache and its host rows into the model; then both compared in full."""
        fp.quantize_paged(x, ga.to_device(np.asarray(slots, np.int32)), self.codes.view(ga.E4M3), self.exponents,
                          signs=None if signs is None else ga.to_device(signs))
        self.model = paged.quantize_paged_model(ga.host_f64(x), slots, *self.model, signs)
        ga.synchronize()
        for name, mine, model in (("exponents", ga.to_host(self.exponents), self.model[1]),
                                  ("codes", ga.to_host(self.codes), self.model[0])):
            mismatch = mine != model
            assert not mismatch.any(), (f"{mismatch.sum()} of {mine.size} {name} differ, first at "
                                        f"{np.argwhere(mismatch)[0].tolist()}")


@pytest.mark.parametrize("page_size", [16, 64])
@pytest.mark.parametrize("rotate", [False, True])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@shapes.over_quantize_dims
def test_prompt_then_decode_steps(rng, dim, dtype, rotate, page_size):
    """Three prompts written in one call (each sequence's tokens consecutive, pages in random order), then a decode
    step per call (one token of each sequence) until each has grown by two pages and a bit: the cache as the model's
    after every call, exponents growing on the way (codes re-encoded in place)."""
    heads, num_pages = 2, 40
    prompts = [int(n) for n in rng.integers(1, 2 * page_size, 3)]
    steps = 2 * page_size + 3
    slots = sequence_slots(rng, [n + steps for n in prompts], num_pages, page_size)
    signs = prepare.rotation_signs(dim, int(rng.integers(1 << 31))) if rotate else None
    cache = Cache(rng, num_pages, page_size, heads, dim)
    cache.write(_device(_rows(rng, sum(prompts), heads, dim), dtype),
                np.concatenate([s[:n] for s, n in zip(slots, prompts)]), signs)
    grown = 0
    for step in range(steps):
        before = cache.model[1].copy()
        cache.write(_device(_rows(rng, 3, heads, dim), dtype), [s[n + step] for s, n in zip(slots, prompts)], signs)
        grown += int(((before != EMPTY) & (cache.model[1] > before)).sum())
    assert grown > 0, "no page's exponent grew: nothing was re-encoded"


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_runs_longer_than_a_cta_and_skipped_tokens(rng, dtype):
    """Pages of 512 rows: one run of 700 tokens over pages 2 and 3 (page 2's end found past the first 256 tokens), a
    run of 200 larger ones into page 3 after its 188 (its codes re-encoded), and a run into page 4 followed by tokens
    to skip (slot -1, vLLM's padding, and slots past the cache)."""
    heads, dim, page_size, num_pages = 2, 128, 512, 5
    cache = Cache(rng, num_pages, page_size, heads, dim)
    cache.write(_device(_rows(rng, 700, heads, dim), dtype), 2 * page_size + np.arange(700))
    cache.write(_device(_rows(rng, 200, heads, dim) * 300, dtype), 3 * page_size + 188 + np.arange(200))
    slots = np.concatenate([4 * page_size + np.arange(200), [-1, -7, num_pages * page_size, 2**31 - 1]])
    cache.write(_device(_rows(rng, 204, heads, dim), dtype), slots)
    assert (cache.model[1][[0, 1]] == EMPTY).all()


def test_nonfinite_and_zero_rows(rng):
    """Rows of zeros into an empty page (-127), then a nonzero one (the zeros re-encoded, still zero); inf, NaN and
    negative NaN (exponent 0, codes 448 and 0x7f), rotated so that they spread over their rows."""
    heads, dim, page_size = 2, 64, 16
    cache = Cache(rng, 4, page_size, heads, dim)
    cache.write(_device(np.zeros((3, heads, dim)), "float32"), [0, 1, 2])
    assert (cache.model[1][0] == -127).all()
    cache.write(_device(rng.standard_normal((1, heads, dim)), "float32"), [3])
    x = rng.standard_normal((4, heads, dim)).astype(np.float32)
    x[0, 0, 3], x[1, 1, 7], x[2, 0, 0] = np.inf, np.nan, -np.inf
    x.view(np.uint32)[3, 1, 9] = 0xFFC00000  # a NaN with its sign bit set
    cache.write(ga.to_device(x), [16, 17, 32, 33], prepare.rotation_signs(dim, int(rng.integers(1 << 31))))
    assert (cache.model[1][1:3] == 0).all()


def test_strided_cache(rng):
    """k's codes as a view into one allocation holding k's and v's pages interleaved, (num_pages, 2, page_size,
    heads, dim)[:, 0]: the strides of the ABI; v's half untouched."""
    heads, dim, page_size, num_pages = 2, 128, 16, 6
    both = rng.integers(0, 256, (num_pages, 2, page_size, heads, dim)).astype(np.uint8)
    device = ga.to_device(both)
    exponents = ga.full((num_pages, heads), EMPTY, np.int8)
    x = _device(_rows(rng, 40, heads, dim), "bfloat16")
    slots = np.concatenate([5 * page_size + np.arange(16), 2 * page_size + np.arange(16), np.arange(8)])
    fp.quantize_paged(x, ga.to_device(slots.astype(np.int32)), device[:, 0].view(ga.E4M3), exponents)
    codes, expected_exponents = paged.quantize_paged_model(ga.host_f64(x), slots, both[:, 0],
                                                           np.full((num_pages, heads), EMPTY, np.int8))
    ga.synchronize()
    after = ga.to_host(device)
    np.testing.assert_array_equal(after[:, 0], codes)
    np.testing.assert_array_equal(after[:, 1], both[:, 1])
    np.testing.assert_array_equal(ga.to_host(exponents), expected_exponents)


def test_paged_cache_helper(rng):
    """PagedCache.empty: every page empty; write: quantize_paged; release: the pages empty again, the others kept."""
    x = _device(_rows(rng, 20, 2, 64), "float32")
    cache = fp.PagedCache.empty(8, 16, 2, 64, like=x)
    assert cache.page_size == 16 and (ga.to_host(cache.exponents) == EMPTY).all()
    cache.write(x, ga.to_device(np.arange(20, dtype=np.int32) + 32))
    ga.synchronize()
    written = ga.to_host(cache.exponents)
    assert (written[2:4] != EMPTY).all() and (written[[0, 1, 4, 5, 6, 7]] == EMPTY).all()
    cache.release([3])
    ga.synchronize()
    released = ga.to_host(cache.exponents)
    assert (released[3] == EMPTY).all() and (released[2] == written[2]).all()


def test_refusals():
    x = ga.randn((4, 2, 128), seed=1)
    slots = ga.to_device(np.arange(4, dtype=np.int32))
    codes = ga.full((3, 16, 2, 128), 0.0, ga.E4M3)
    exponents = ga.full((3, 2), EMPTY, np.int8)
    with pytest.raises(ValueError, match="slot_mapping must be contiguous int32 of shape"):
        fp.quantize_paged(x, ga.to_device(np.arange(4, dtype=np.int8)), codes, exponents)
    with pytest.raises(ValueError, match=r"x must be 3-d \(tokens, heads_kv, dim\)"):
        fp.quantize_paged(x[None], slots, codes, exponents)
    with pytest.raises(TypeError, match="x must be bfloat16 or float32"):
        fp.quantize_paged(ga.to_e4m3(x), slots, codes, exponents)
    with pytest.raises(ValueError, match=r"codes_cache must be float8_e4m3fn \(num_pages, page_size, heads_kv, dim\)"):
        fp.quantize_paged(x, slots, ga.full((3, 16, 4, 128), 0.0, ga.E4M3), exponents)
    with pytest.raises(ValueError, match=r"exponents must be contiguous int8 of shape \(num_pages, heads_kv\)"):
        fp.quantize_paged(x, slots, codes, ga.full((3, 4), EMPTY, np.int8))
    with pytest.raises(fp.Error) as info:
        fp.quantize_paged(ga.randn((4, 2, 48), seed=2), slots, ga.full((3, 16, 2, 48), 0.0, ga.E4M3), exponents)
    assert info.value.status == fp.Status.ERROR_NOT_SUPPORTED and "multiple of 32" in info.value.message
