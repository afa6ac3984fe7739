"""A model of LDS bank conflicts, counted per LDS instruction while the emulator runs (RunStats.lds).

Not the hardware's timing, and not from AMD's ISA text (not available here): CK-Tile's "LDS bank conflicts" page
describes the LDS of CDNA GPUs as 32 or 64 banks of 4 bytes, and a wave's access as split into phases of lanes by
width (ds_write_b128 on 32 banks: lanes 0-7, 8-15, ...); Modular's documentation states 64 banks for the MI355X.
The model: a phase is as many consecutive lanes as fill the banks once (banks x 4 / bytes per lane: 16 lanes of
16 bytes on 64 banks, 32 of 8 bytes), the transposing reads included; within a phase each bank serves one 4-byte
word a cycle, lanes reading the same word share it, and the phase lasts as long as its busiest bank. It reports per
instruction the cycles beyond one a phase, summed over its executions, for 64 banks and, for comparison, 32.
Inactive lanes take no part. An access pattern (addresses, lanes, width) is costed once and remembered: a kernel's
LDS instructions repeat a few patterns over its tiles and workgroups.
"""
from collections import Counter

import numpy as np

from .state import LANES

BANK_BYTES = 4
MODELS = (64, 32)  # bank counts: gfx950 (MI355X) has 64; 32 for comparison


def extra_cycles(addrs, active, nbytes, banks):
    """Cycles beyond one a phase for one access: `addrs` the 64 lanes' byte addresses, `active` their mask,
    `nbytes` bytes per lane (a multiple of 4, or 1-2 for sub-dword reads, which touch one word)."""
    words_per_lane = max(1, nbytes // BANK_BYTES)
    lanes_per_phase = max(1, banks // words_per_lane)
    addrs = np.asarray(addrs, np.int64)
    extra = 0
    for start in range(0, LANES, lanes_per_phase):
        lanes = np.arange(start, min(start + lanes_per_phase, LANES))
        lanes = lanes[np.asarray(active)[lanes]]
        if lanes.size == 0:
            continue
        words = (addrs[lanes, None] // BANK_BYTES + np.arange(words_per_lane)).ravel()
        words = np.unique(words)
        busiest = np.bincount(words % banks, minlength=banks).max()
        extra += int(busiest) - 1
    return extra


_COSTED = {}   # (addresses, active lanes, bytes per lane) -> extra cycles per model
_COSTED_LIMIT = 1 << 16


class LdsBanks:
    """Per instruction (its address and text): executions and extra cycles under each bank model."""

    def __init__(self):
        self.executions = Counter()
        self.extra = {banks: Counter() for banks in MODELS}

    def record(self, ins, addrs, active, nbytes):
        key = (ins.addr, ins.text)
        self.executions[key] += 1
        active = np.asarray(active, bool)
        pattern = (np.where(active, addrs, 0).astype(np.int64).tobytes(), active.tobytes(), nbytes)
        extra = _COSTED.get(pattern)
        if extra is None:
            extra = tuple(extra_cycles(addrs, active, nbytes, banks) for banks in MODELS)
            if len(_COSTED) >= _COSTED_LIMIT:
                _COSTED.clear()
            _COSTED[pattern] = extra
        for banks, cycles in zip(MODELS, extra):
            self.extra[banks][key] += cycles

    def conflicted(self, banks):
        """{(address, text): extra cycles} of the instructions that had any under `banks` banks."""
        return {key: cycles for key, cycles in self.extra[banks].items() if cycles}
