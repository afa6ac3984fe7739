"""Per-tile phases of one CTA's consumer warpgroups from a trace of the FP_TRACE build (experiments.patch):
clock64 at 8 points of each tile, (round, warpgroup, tile, event). Usage: trace.py trace_tbase.bin.gz [round]."""
import gzip, numpy as np, sys
t = np.frombuffer(gzip.open(sys.argv[1]).read(), dtype=np.uint64).reshape(8, 2, 160, 8).astype(np.int64)
r = int(sys.argv[2]) if len(sys.argv) > 2 else 0
T = t[r]
n = int((T[0, :, 7] > 0).sum()) + 1
print('tiles', n)
t0 = T[:, 1:n, :][T[:, 1:n, :] > 0].min()
names = ['start', 'Kfull', 'turn', 'issued', 'Sdone', 'smax', 'PVdone', 'packed']
# per-tile durations for WG0 and WG1 (steady state: tiles 5..n-5)
for wg in range(2):
    X = T[wg, 1:n]
    d = np.diff(X, axis=1)
    per = np.diff(X[:, 0])
    print(f'WG{wg} period median {np.median(per):.0f}')
    print('  phases (median):', ' '.join(f'{names[i]}->{names[i+1]}={np.median(d[5:-5, i]):.0f}' for i in range(7)))
    print('  packed->next start', np.median(X[6:-4, 0] - X[5:-5, 7]))
# interleaving: times relative
print('first tiles timeline (WG, it, events - t0):')
for it in range(20, 24):
    for wg in range(2):
        print(wg, it, (T[wg, it] - t0).tolist())
