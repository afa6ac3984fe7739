"""The benchmarks' timing method (tools/timing.py, CPU only, on the host clock): the order of the interleaved rounds,
the rotation of the input sets, the warm-up, and the medians and spreads reported."""
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import timing  # noqa: E402


def _recorder(calls, name, set_index):
    return lambda: calls.append((name, set_index))


@pytest.mark.parametrize("rounds", [1, 2, 5])
@pytest.mark.parametrize("sets", [1, 3])
def test_rounds_alternate_the_order_and_rotate_the_input_sets(rounds, sets):
    names = ["a", "b", "c"]
    calls = []
    runs = {n: [_recorder(calls, n, i) for i in range(sets)] for n in names}
    launches = 2
    timed = timing.time_rounds(runs, rounds, launches, dict.fromkeys(names, 1e9), timing.HostClock, idle_s=0)
    # each (round, name): `launches` calls per call, then `launches` back to back, on input set round % sets
    want = []
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            want += [(n, r % sets)] * (2 * launches)
    assert calls == want
    for n in names:
        t = timed[n]
        assert len(t["round_medians_ms"]) == len(t["back_to_back_rounds_ms"]) == rounds
        assert t["median_ms"] > 0 and t["tflops"] == pytest.approx(1e9 / t["median_ms"] / 1e9)
        assert t["spread"] == pytest.approx((max(t["round_medians_ms"]) - min(t["round_medians_ms"])) / t["median_ms"])


def test_time_launches_measures_what_each_call_takes():
    times = timing.time_launches(timing.HostClock, lambda: timing.time.sleep(0.02), 3)
    assert len(times) == 3 and all(15.0 < t < 200.0 for t in times)
    assert 15.0 < timing.time_back_to_back(timing.HostClock, lambda: timing.time.sleep(0.02), 2) < 200.0


def test_prepare_warms_every_run_and_reports_refusals():
    calls = []

    def refuses(x):
        raise timing.PeerUnavailable(f"no kernel for {x}")

    def refuses_on_warm_up(x):
        def run():
            raise timing.PeerUnavailable("refused at its first call")
        return run

    setups = {"ok": lambda x: _recorder(calls, "ok", x), "no": refuses, "late": refuses_on_warm_up}
    runs, unavailable = timing.prepare(setups, ["s0", "s1"], timing.HostClock)
    assert list(runs) == ["ok"] and calls == [("ok", "s0"), ("ok", "s1")]
    assert unavailable == {"no": "no kernel for s0", "late": "refused at its first call"}
