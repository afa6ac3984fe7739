"""tools/one_launch.py's paged cache (CPU, torch): its block table takes each page once, and each sequence's rows
land in the pages the table names, in order, so that a paged launch for the sanitizers reads the keys of the packed
one."""
import pathlib
import sys

import pytest

import markers

torch = pytest.importorskip("torch", reason=markers.NO_TORCH_TOOLS)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import one_launch  # noqa: E402


@pytest.mark.parametrize("page_size", [16, 64])
def test_paged_rows_follow_the_table(page_size):
    lengths = [100, 1, 64, 17, 5]
    rows = torch.randn(sum(lengths), 2, 8)
    cache, table = one_launch._paged(rows, lengths, page_size, seed=7)
    counts = [-(-n // page_size) for n in lengths]
    assert cache.shape == (sum(counts), page_size, 2, 8) and table.dtype == torch.int32
    used = torch.cat([table[b, :count] for b, count in enumerate(counts)])
    assert sorted(used.tolist()) == list(range(sum(counts))), "each page once"
    first = 0
    for b, n in enumerate(lengths):
        for key in range(n):
            assert torch.equal(cache[table[b, key // page_size], key % page_size], rows[first + key]), (b, key)
        first += n
