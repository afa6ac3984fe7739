"""The persistent grid's work order (cuda/fwd/work_order.cuh, compiled for the host here): every item exactly once, L2
sections where K and V outgrow L2, and a balance the static rounds keep (a model: an item costs its KV tiles)."""
import math
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
GRID = 132  # H200 SMs
L2_BYTES = 50 << 20  # H200


@pytest.fixture(scope="module")
def dump(tmp_path_factory):
    compiler = shutil.which("c++") or pytest.fail("no C++ compiler on PATH")
    exe = tmp_path_factory.mktemp("work_order") / "dump"
    subprocess.run([compiler, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "cuda"),
                    str(ROOT / "tests" / "work_order_dump.cpp"), "-o", str(exe)], check=True)

    def run(cases):
        text = "".join(" ".join(map(str, c)) + "\n" for c in cases)
        lines = subprocess.run([str(exe)], input=text, capture_output=True, text=True, check=True).stdout.splitlines()
        out = []
        for section, items in zip(lines[0::2], lines[1::2]):
            v = list(map(int, items.split()))
            out.append((int(section), [tuple(v[i:i + 3]) for i in range(0, len(v), 3)]))
        return out
    return run


def case(seq, heads_q, heads_kv, batch, dim_qk, elem_bytes, grid=GRID):
    return (math.ceil(seq / 128), heads_q, heads_kv, batch, seq * (dim_qk + 128) * elem_bytes, L2_BYTES, grid)


def makespan(items, m_blocks, grid, kv_tile=192):
    """Finish time of the busiest CTA over the mean, CTA c taking index c, then 2 grid - 1 - c, ... (work_index)."""
    load = [0.0] * grid
    for index, (m, _, _) in enumerate(items):
        round_, position = divmod(index, grid)
        load[position if round_ % 2 == 0 else grid - 1 - position] += math.ceil((m + 1) * 128 / kv_tile) + 1
    return max(load) / (sum(load) / grid)


SWEEP = [case(seq, hq, hkv, b, d, e) for seq in (1024, 4096, 8192, 16384, 32768)
         for hq, hkv, d in ((32, 8, 128), (32, 32, 128), (16, 16, 192), (64, 8, 128), (40, 40, 128), (8, 1, 128))
         for b in (1, 3) for e in (1, 2)] + [case(16384, 16, 16, 1, 192, 1, grid=g) for g in (1, 7, 66, 200)]


def test_every_item_once_and_kv_groups_whole(dump):
    for c, (section, items) in zip(SWEEP, dump(SWEEP)):
        m_blocks, heads_q, heads_kv, batch = c[:4]
        assert sorted(items) == sorted((m, h, b) for m in range(m_blocks) for h in range(heads_q) for b in range(batch)), c
        group = heads_q // heads_kv
        assert section % group == 0 and (heads_q * batch) % section == 0, (c, section)


def test_sections_where_kv_outgrows_l2(dump):
    shapes = {"mla 16k fp8": case(16384, 16, 16, 1, 192, 1), "hd128 32/32 16k fp8": case(16384, 32, 32, 1, 128, 1),
              "hd128 32/8 16k bf16": case(16384, 32, 8, 1, 128, 2), "hd128 32/8 4k b4 fp8": case(4096, 32, 8, 4, 128, 1),
              "hd128 32/8 8k b2 fp8": case(8192, 32, 8, 2, 128, 1),
              "mla 1k b16 bf16": case(1024, 16, 16, 16, 192, 2)}
    got = {name: section for name, (section, _) in zip(shapes, dump(list(shapes.values())))}
    # 5 MB of K and V a head: 4 heads in 40% of 50 MB; 4 MB: 4 heads (a divisor of 32 below 5); 8 MB a KV group of 4
    # heads: 2 groups; 4k b4: 1 MB groups of 4 heads, the largest divisor of 128 heads within 20 groups; 8k b2: 32 MB
    # of K and V in 2 MB groups of 4 heads, the largest divisor of 64 heads within 10 groups; 1k: under 16 m-blocks
    assert got == {"mla 16k fp8": 4, "hd128 32/32 16k fp8": 4, "hd128 32/8 16k bf16": 8, "hd128 32/8 4k b4 fp8": 64,
                   "hd128 32/8 8k b2 fp8": 32, "mla 1k b16 bf16": 256}
    # in a section the running CTAs read the K and V of its heads only
    section, items = dump([shapes["mla 16k fp8"]])[0]
    first_round = {h for _, h, _ in items[:GRID]}
    assert len(first_round) == section


def test_static_rounds_stay_balanced(dump):
    # the plain m-block-major order (one section) finishes within 0.4% of the ideal on these shapes; sections may
    # cost at most 2% more in this model from 64 m-blocks on, and 5% from 16 to 64 (40 heads at 4k: 4.4%), where the
    # DRAM traffic they save, which the model leaves out, measured more (cuda/fwd/work_order.cuh); below 16, plain
    for c, (section, items) in zip(SWEEP, dump(SWEEP)):
        m_blocks, heads_q, _, batch = c[:4]
        plain = [(m_blocks - 1 - i // (heads_q * batch), (i % (heads_q * batch)) % heads_q,
                  (i % (heads_q * batch)) // heads_q) for i in range(len(items))]
        grid = c[6]
        bound = 1.02 if m_blocks >= 64 else 1.05
        assert makespan(items, m_blocks, grid) <= makespan(plain, m_blocks, grid) * bound, (c, section)
