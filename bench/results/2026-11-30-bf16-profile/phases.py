import sys, re
f = sys.argv[1]
lines = [l for l in open(f)]
ph = 'pre-turn'; acc = {}; order = []
inst = {}
for l in lines:
    a, ex, s = l.split()[:3]; ex = float(ex); s = float(s)
    src = l[20:95]
    if ex < 0.5 and s < 0.05: continue
    if 'BAR.SYNC' in src: ph = 'turn window'
    if 'DEPBAR.LE gsb0, 0x1' in src: ph = 'S wait'
    elif ph == 'S wait': ph = 'softmax'
    if 'DEPBAR.LE gsb0, 0x0' in src: ph = 'PV wait'
    elif ph == 'PV wait': ph = 'tail'
    if ph not in acc: acc[ph] = [0, 0]; order.append(ph)
    acc[ph][0] += s; acc[ph][1] += ex / 2.08
    if 'BAR.ARV' in src: ph = 'after turn'
for p in order: print(f'{p:12s} samples {acc[p][0]:6.2f}%  instr/tile {acc[p][1]:6.1f}')
print('total', sum(v[0] for v in acc.values()), sum(v[1] for v in acc.values()))
