import csv, gzip, sys, collections, re
def load(p):
    lines = gzip.open(p, 'rt').read().splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith('"Address"'))
    rows = list(csv.DictReader(lines[i:]))
    return rows
def num(x):
    try: return float(x.replace(',', ''))
    except: return 0.0
rows = load(sys.argv[1])
stalls = [k for k in rows[0] if k.startswith('stall_') and 'Not Issued' not in k]
tot = sum(num(r['Warp Stall Sampling (All Samples)']) for r in rows)
print('total samples', tot, 'instructions executed', sum(num(r['Instructions Executed']) for r in rows))
agg = collections.Counter()
for r in rows:
    for k in stalls: agg[k] += num(r[k])
print(' '.join(f'{k[6:]}={v/tot*100:.1f}' for k, v in agg.most_common(12)))
# opcode summary
op = collections.defaultdict(lambda: [0, 0])
for r in rows:
    o = r['Source'].split()
    o = [t for t in o if not t.startswith('@')]
    name = o[0].split('.')[0] if o else '?'
    op[name][0] += num(r['Warp Stall Sampling (All Samples)']); op[name][1] += num(r['Instructions Executed'])
print('by opcode (samples%, inst M):')
print('  '.join(f'{k}:{v[0]/tot*100:.1f}/{v[1]/1e6:.1f}' for k, v in sorted(op.items(), key=lambda kv: -kv[1][0])[:30]))
if len(sys.argv) > 2:
    N = int(sys.argv[2])
    top = sorted(rows, key=lambda r: -num(r['Warp Stall Sampling (All Samples)']))[:N]
    for r in top:
        s = num(r['Warp Stall Sampling (All Samples)'])
        reasons = sorted(((num(r[k]), k[6:]) for k in stalls), reverse=True)[:3]
        print(f"{r['Address']:>6} {s/tot*100:5.2f}% ex={num(r['Instructions Executed'])/1e6:6.2f}M {r['Source'][:60]:60s} " + ' '.join(f'{k}={v/tot*100:.1f}' for v, k in reasons))
