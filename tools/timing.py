"""Side-by-side timing in interleaved rounds: the method of tools/bench.py and tools/bench_varlen.py, one copy.

Every implementation is set up on each input set (rotated, so L2 does not flatter) and warmed up; then in each of
`rounds` rounds every implementation is timed in turn, two ways:
  per call      `launches` calls, each between its own two events and waited for: what one call from Python
                costs, host work (argument handling, the launch) included;
  back to back  `launches` calls between one pair of events, not waited for in between: the GPU-bound time per
                call, as an engine that issues its work asynchronously sees it.
Before each timing the GPU idles IDLE_S, and every second round takes the implementations in reverse order: at the
power limit a kernel timed right after another starts at the clock the other left (bench/NOTES.md).

Torch-free: the clock is torch.cuda on a GPU (its synchronize() and Event(enable_timing=True)), or HostClock, the
host's clock with the same two names, for a dry run and the CPU tests.
"""
import statistics
import time

IDLE_S = 0.1


class PeerUnavailable(Exception):
    """A setup's refusal (library missing, shape or form not taken), reported with its reason instead of timed."""


class HostEvent:
    """torch.cuda.Event's three methods on the host's clock."""

    def __init__(self, enable_timing=True):
        self.seconds = None

    def record(self):
        self.seconds = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        """Milliseconds from this event to `end`, as torch.cuda.Event.elapsed_time."""
        return (end.seconds - self.seconds) * 1e3


class HostClock:
    """The clock of a dry run: torch.cuda's synchronize() and Event, where nothing runs asynchronously."""
    Event = HostEvent

    @staticmethod
    def synchronize():
        pass


def settle(clock, idle_s=IDLE_S):
    """Waits for the device, then lets it idle idle_s, so that every timing starts from the same power state."""
    clock.synchronize()
    time.sleep(idle_s)


def time_launches(clock, fn, launches):
    """Milliseconds of each of `launches` calls, each between its own two events and waited for."""
    times = []
    for _ in range(launches):
        start, stop = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return times


def time_back_to_back(clock, fn, launches):
    """Milliseconds per call of `launches` calls issued back to back between one pair of events."""
    clock.synchronize()
    start, stop = clock.Event(enable_timing=True), clock.Event(enable_timing=True)
    start.record()
    for _ in range(launches):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / launches


def prepare(setups, sets, clock):
    """({name: [run per input set]}, {name: reason}): each setup(inputs) -> run() on every set, each run called once
    (the warm-up); a setup or warm-up raising PeerUnavailable is left out with its reason."""
    runs, unavailable = {}, {}
    for name, setup in setups.items():
        try:
            runs[name] = [setup(x) for x in sets]
            for run in runs[name]:
                run()
            clock.synchronize()
        except PeerUnavailable as e:
            runs.pop(name, None)
            unavailable[name] = str(e)
    return runs, unavailable


def time_rounds(runs, rounds, launches, flops, clock, idle_s=IDLE_S, before=None):
    """{name: timing} of runs ({name: [run per input set]}, timed in that order, reversed every second round);
    flops: {name: floating-point operations of one call}. A timing holds median_ms (over every per-call launch),
    tflops, spread ((max - min) / median of the round medians), round_medians_ms, and the same back to back.
    before(name), where given, runs before each of name's timings (tools/ab_builds.py: the library name runs on)."""
    per_round = {name: [] for name in runs}
    all_times = {name: [] for name in runs}
    burst_rounds = {name: [] for name in runs}
    order = list(runs)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            fn = runs[name][r % len(runs[name])]
            if before is not None:
                before(name)
            settle(clock, idle_s)
            times = time_launches(clock, fn, launches)
            per_round[name].append(statistics.median(times))
            all_times[name] += times
            settle(clock, idle_s)
            burst_rounds[name].append(time_back_to_back(clock, fn, launches))
    timings = {}
    for name in runs:
        median_ms = statistics.median(all_times[name])
        rounds_ms = per_round[name]
        burst_ms = statistics.median(burst_rounds[name])
        timings[name] = {"median_ms": median_ms, "tflops": flops[name] / median_ms / 1e9,
                         "spread": (max(rounds_ms) - min(rounds_ms)) / median_ms, "round_medians_ms": rounds_ms,
                         "back_to_back_ms": burst_ms, "back_to_back_tflops": flops[name] / burst_ms / 1e9,
                         "back_to_back_spread": (max(burst_rounds[name]) - min(burst_rounds[name])) / burst_ms,
                         "back_to_back_rounds_ms": burst_rounds[name]}
    return timings
