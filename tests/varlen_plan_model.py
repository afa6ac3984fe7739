"""A host model of the order the varlen plan kernel lists its work in (cuda/varlen_plan.cu): L2 sections of
(sequence, kv head) pairs, buckets by KV tiles in each section's direction, the forward kernel's snaking rounds and
the section size the plan picks by their balance. The items of a bucket all visit the same KV tiles, so the model
gives the exact sequence of tile counts the plan's list holds, position by position."""
TILE_ROWS = 128  # the query rows of an entry (src/launch_common.h's FP_VARLEN_TILE_ROWS)
MAX_BUCKETS = 8192  # cuda/varlen_plan.cuh's kVarlenMaxBuckets
MAX_GRID = 1024  # the plan's kPlanMaxGrid: larger grids take the least section size
EIGHTHS = (8, 9, 10, 11, 12, 14, 16)  # the section sizes tried, in eighths of the least
PASS_HALF_TILES = 8  # the plan's kPassHalfTiles: a further size while the best excess is over twice this a pass


def kv_tiles(m, seqlen_q, seqlen_k, block_n):
    """The KV tiles query tile m of a causal sequence visits (cuda/fwd/varlen.cuh's kv_range_of().end)."""
    tiles = -(-seqlen_k // block_n)
    last_key = (m + 1) * TILE_ROWS - 1 + seqlen_k - seqlen_q
    return 0 if last_key < 0 else min(last_key // block_n + 1, tiles)


def grid_of(lengths_q, heads_q, sms):
    """The forward kernel's grid: the SMs, or fewer where the listed entries' bound is smaller."""
    per_sequence = -(-max(lengths_q) // TILE_ROWS)
    tiles_max = min(sum(lengths_q) // TILE_ROWS + len(lengths_q), per_sequence * len(lengths_q))
    return min(tiles_max * heads_q, sms)


def rounds_load(order, group, grid):
    """Each CTA's cost over the snaking rounds (an entry's group items in turn; an item of t tiles costs 2 t + 3)."""
    load = [0] * grid
    for item in range(len(order) * group):
        round_, position = divmod(item, grid)
        load[position if round_ % 2 == 0 else grid - 1 - position] += 2 * order[item // group] + 3
    return load


def _order(pairs, budget, levels):
    """The tile counts of the list in order for sections of `budget` bytes; pairs: (bytes before, [tiles of its
    entries])."""
    count = pairs[-1][0] // budget + 1 if pairs else 1  # up to the last pair's section
    buckets = [[0] * levels for _ in range(count)]
    last = 0
    for before, tiles in pairs:
        section = before // budget
        for t in tiles:
            if t > 0:
                buckets[section][t] += 1
                last = max(last, section)
    order = []
    for section in range(count):
        costliest_first = (last - section) % 2 == 0
        for within in range(levels):
            t = levels - 1 - within if costliest_first else within
            order += [t] * buckets[section][t]
    return order


def plan_order(lengths_q, lengths_k, heads_kv, group, row_bytes, block_n, max_seqlen_k, grid, l2_bytes, search=True):
    """The tile counts of the plan's list, position by position, for a causal call (the least section size, or the
    size the plan picks by the rounds' balance; search=False: the least size)."""
    levels = -(-max_seqlen_k // block_n) + 1
    pairs, before = [], 0
    for q, k in zip(lengths_q, lengths_k):
        entries = [kv_tiles(m, q, k, block_n) for m in range(-(-q // TILE_ROWS))]
        for _ in range(heads_kv):
            pairs.append((before, entries))
            before += k * row_bytes
    bytes_total, items = before, sum(len(tiles) for _, tiles in pairs) * group
    least = l2_bytes * 3 // 10
    if items > 0:
        least = max(least, bytes_total * 3 * grid // items + 1)
    least = max(least, bytes_total // (MAX_BUCKETS // levels) + 1)
    best = None
    for c, eighths in enumerate(EIGHTHS):
        order = _order(pairs, least * eighths // 8, levels)
        if grid > MAX_GRID or not search:
            return order
        load = rounds_load(order, group, grid)
        better = best is None or max(load) + PASS_HALF_TILES < best[0]
        if better:
            best = (max(load), order)
        if (not better or max(load) * grid * 100 <= sum(load) * (102 if c == 0 else 101)
                or best[0] * grid <= sum(load) + 2 * PASS_HALF_TILES * (c + 1) * grid):
            break
    return best[1]
