import gzip,csv,sys,collections
def load(p):
    lines=gzip.open(p,'rt').read().splitlines()
    start=next(k for k,l in enumerate(lines) if l.startswith('"Address"'))
    return list(csv.DictReader(lines[start:]))
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
res={}
for p in sys.argv[1:]:
    rows=load(p)
    a=next(i for i,r in enumerate(rows) if 'TRY_ALLOC' in r['Source']); b=next(i for i,r in enumerate(rows) if 'DEALLOC' in r['Source'])
    reg={'pre':rows[:a],'consumer':rows[a:b],'producer':rows[b:]}
    out={}
    for name,rs in reg.items():
        c=collections.Counter()
        for r in rs:
            for k,v in r.items():
                if k.startswith('stall_') and 'Not Issued' not in k: c[k]+=num(v)
        c['TOTAL']=sum(num(r['Warp Stall Sampling (All Samples)']) for r in rs)
        c['INSTR']=sum(num(r['Instructions Executed']) for r in rs)
        out[name]=c
    res[p]=out
names=list(res)
for reg in ('consumer','producer','pre'):
    keys=sorted(set().union(*[res[p][reg].keys() for p in names]), key=lambda k:-res[names[0]][reg][k])
    print('==',reg)
    for k in keys[:16]:
        print(f"  {k:24s} "+' '.join(f"{res[p][reg][k]:10.0f}" for p in names))
