import csv,gzip,collections,sys
def load(path):
    lines = gzip.open(path, 'rt').read().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith('"Address"'))
    return list(csv.DictReader(lines[start:]))
def num(x):
    try: return float(x.replace(',', ''))
    except: return 0.0
for path in sys.argv[1:]:
    rows=load(path)
    stalls=[k for k in rows[0] if k.startswith('stall_')]
    tot=sum(num(r['Warp Stall Sampling (All Samples)']) for r in rows)
    sel=[r for r in rows if 1e4<=num(r['Instructions Executed'])<5e4 or num(r['Instructions Executed'])>=4e5]
    sel.sort(key=lambda r:-num(r['Warp Stall Sampling (All Samples)']))
    print(path, tot)
    agg=collections.Counter()
    for r in sel:
        for k in stalls: agg[k]+=num(r[k])
    print(' per-item+spin stall reasons:', ', '.join(f"{k[6:]} {v:.0f}" for k,v in agg.most_common(8)))
    for r in sel[:25]:
        st=sorted(((num(r[k]),k[6:]) for k in stalls), reverse=True)[:2]
        print(f"  {num(r['Warp Stall Sampling (All Samples)']):6.0f} x{num(r['Instructions Executed']):8.0f} {r['Address']:>6s} {r['Source'][:70]:70s} {st}")
