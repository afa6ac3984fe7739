"""Stall samples of an ncu source-level CSV (src_*.csv.gz) by how often each instruction ran: per KV tile of a consumer
warp (200k-400k executions at mla 4k x 4), per work item (10k-50k), the rest. Usage: classes.py FILE [FILE ...]."""
import collections, csv, gzip, sys


def load(path):
    lines = gzip.open(path, 'rt').read().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith('"Address"'))
    return list(csv.DictReader(lines[start:]))


def num(x):
    try:
        return float(x.replace(',', ''))
    except ValueError:
        return 0.0


CLASSES = [(0, 1, 'never run'), (1, 1e4, '< 10k'), (1e4, 5e4, 'per item (10k-50k)'), (5e4, 2e5, '50k-200k'),
           (2e5, 4e5, 'per tile (200k-400k)'), (4e5, float('inf'), '> 400k (spin loops)')]
for path in sys.argv[1:]:
    rows = load(path)
    total = sum(num(r['Warp Stall Sampling (All Samples)']) for r in rows)
    samples, count = collections.Counter(), collections.Counter()
    for r in rows:
        executed = num(r['Instructions Executed'])
        name = next(n for lo, hi, n in CLASSES if lo <= executed < hi)
        samples[name] += num(r['Warp Stall Sampling (All Samples)'])
        count[name] += 1
    print(path, f'{total:.0f} samples')
    for _, _, name in CLASSES:
        if count[name]:
            print(f'  {name:22s} {samples[name]:7.0f} samples ({samples[name] / total * 100:4.1f}%), {count[name]} instructions')
