import math
GRID=132; L2=50<<20
def section_heads_for(m_blocks, hq, hkv, b, kvb, l2, grid, min_m=64, min_rounds=3, frac=0.4):
    total=hq*b; group=hq//hkv
    fit_groups=int(l2*frac/kvb)
    if m_blocks < min_m or fit_groups*group >= total: return total
    fit=max(fit_groups,1)*group
    needed=(min_rounds*grid + m_blocks-1)//m_blocks
    below,above=group,total
    for d in range(group,total+1,group):
        if total%d: continue
        if d<=fit: below=d
        if d>=needed and d<above: above=d
    return below if below>=needed else above
def item(i,m_blocks,hq,b,sh):
    total=hq*b; per=m_blocks*sh; sec=i//per; w=i-sec*per; secs=(total+sh-1)//sh
    hin=min(total-sec*sh, sh); mpos=w//hin; pair=sec*sh+w%hin; lf=(secs-1-sec)%2==0
    return (m_blocks-1-mpos if lf else mpos, pair%hq, pair//hq)
def makespan(items, grid, kv_tile):
    load=[0.0]*grid
    for idx,(m,_,_) in enumerate(items):
        r,p=divmod(idx,grid); load[p if r%2==0 else grid-1-p]+=math.ceil((m+1)*128/kv_tile)+1
    return max(load)/(sum(load)/grid)
for name,seq,hq,hkv,b,d,e,kt in [("mla 4k b4 bf16",4096,16,16,4,192,2,128),("mla 4k b4 fp8",4096,16,16,4,192,1,192),("hd128 4k b4 bf16",4096,32,8,4,128,2,128),("hd128 4k b4 fp8",4096,32,8,4,128,1,192),("mla 8k b2 bf16",8192,16,16,2,192,2,128),("hd128 8k b2 bf16",8192,32,8,2,128,2,128),("mla 2k b8 bf16",2048,16,16,8,192,2,128)]:
    mb=math.ceil(seq/128); kvb=seq*(d+128)*e
    for mm in (64,16,1):
        for mr in (3,2):
            sh=section_heads_for(mb,hq,hkv,b,kvb,L2,GRID,min_m=mm,min_rounds=mr)
            items=[item(i,mb,hq,b,sh) for i in range(mb*hq*b)]
            print(f"{name:18s} min_m={mm:2d} min_rounds={mr} section={sh:3d} of {hq*b}, K/V in section {sh//(hq//hkv)*kvb/2**20:6.1f} MB, makespan {makespan(items,GRID,kt):.4f}")
print("---- sweep")
def case(seq,hq,hkv,b,d,e,grid=GRID): return (math.ceil(seq/128),hq,hkv,b,seq*(d+128)*e,L2,grid)
SWEEP=[case(seq,hq,hkv,b,d,e) for seq in (1024,2048,4096,8192,16384,32768) for hq,hkv,d in ((32,8,128),(32,32,128),(16,16,192),(64,8,128),(40,40,128),(8,1,128)) for b in (1,2,3,4,8) for e in (1,2)]
for mm in (64,32,16,8):
    worst=(0,None)
    for c in SWEEP:
        mb,hq,hkv,b,kvb,l2,grid=c
        sh=section_heads_for(mb,hq,hkv,b,kvb,l2,grid,min_m=mm)
        items=[item(i,mb,hq,b,sh) for i in range(mb*hq*b)]
        plain=[item(i,mb,hq,b,hq*b) for i in range(mb*hq*b)]
        r=makespan(items,grid,192)/makespan(plain,grid,192)
        if r>worst[0]: worst=(r,c,sh)
    print(mm, worst)
print("---- sweep2")
for mm in (16,):
  for mr in (3,4,5,6,8):
    worst=(0,None); secs={}
    for c in SWEEP:
        mb,hq,hkv,b,kvb,l2,grid=c
        sh=section_heads_for(mb,hq,hkv,b,kvb,l2,grid,min_m=mm,min_rounds=mr)
        items=[item(i,mb,hq,b,sh) for i in range(mb*hq*b)]
        plain=[item(i,mb,hq,b,hq*b) for i in range(mb*hq*b)]
        r=makespan(items,grid,192)/makespan(plain,grid,192)
        if r>worst[0]: worst=(r,c,sh)
    mla=section_heads_for(32,16,16,4,4096*320*2,L2,GRID,min_m=mm,min_rounds=mr)
    mla8=section_heads_for(32,16,16,4,4096*320*1,L2,GRID,min_m=mm,min_rounds=mr)
    hd=section_heads_for(32,32,8,4,4096*256*2,L2,GRID,min_m=mm,min_rounds=mr)
    print(mm, mr, "worst %.4f"%worst[0], worst[1:], "mla4k b4 bf16 sec", mla, "fp8", mla8, "hd128 4k b4 bf16", hd)
print("---- fixed sections")
for sh in (4,8,16,32,64):
    mb,hq,b=32,16,4
    items=[item(i,mb,hq,b,sh) for i in range(mb*hq*b)]
    print("mla 4k b4 section",sh, "%.4f"%makespan(items,GRID,128), "%.4f"%makespan(items,GRID,192))
for sh in (8,16,32,64,128):
    mb,hq,b=32,32,4
    items=[item(i,mb,hq,b,sh) for i in range(mb*hq*b)]
    print("hd128 4k b4 section",sh, "%.4f"%makespan(items,GRID,128), "%.4f"%makespan(items,GRID,192))
