import csv, gzip, sys
def load(p):
    lines = gzip.open(p, 'rt').read().splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith('"Address"'))
    return list(csv.DictReader(lines[i:]))
def num(x):
    try: return float(x.replace(',', ''))
    except: return 0.0
rows = load(sys.argv[1]); lo, hi = int(sys.argv[2], 16), int(sys.argv[3], 16)
stalls = [k for k in rows[0] if k.startswith('stall_') and 'Not Issued' not in k]
tot = sum(num(r['Warp Stall Sampling (All Samples)']) for r in rows)
for r in rows:
    a = int(r['Address'], 16) & 0xfffff
    if lo <= a <= hi:
        s = num(r['Warp Stall Sampling (All Samples)'])
        reasons = sorted(((num(r[k]), k[6:]) for k in stalls), reverse=True)[:3]
        print(f"{a:05x} {num(r['Instructions Executed'])/1e6:5.2f} {s/tot*100:5.2f} {r['Source'][:75]:75s}", ' '.join(f'{k}={v/tot*100:.2f}' for v, k in reasons if v > 0))
