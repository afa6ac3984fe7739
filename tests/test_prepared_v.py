"""The prepared layout of v (flashprefill.prepared_v, FLASHPREFILL_V_LAYOUT_PREPARED) without a GPU: the key order
is the one P's registers hold (cuda/fwd/transpose_v.cuh), and the model's padding and shape. The GPU's
flashprefill_prepare_v is pinned to this model in tests/test_kernel_gpu.py."""
import numpy as np

from flashprefill import prepared_v


def test_positions_follow_the_registers_of_p():
    """Position 4c + i of each group of 16 holds key 2c + {0, 1, 8, 9}[i]: the keys a consumer thread c (lane % 4)
    holds in its S accumulators, in the order the A fragment of P.V takes them."""
    keys = np.arange(64)
    position = prepared_v.key_position(keys)
    assert sorted(position) == list(keys)
    for group in range(4):
        for c in range(4):
            for i, offset in enumerate((0, 1, 8, 9)):
                assert position[16 * group + 2 * c + offset] == 16 * group + 4 * c + i


def test_model_transposes_and_pads():
    rng = np.random.default_rng()
    codes = rng.integers(1, 256, size=(2, 21, 3, 8), dtype=np.uint8)
    out = prepared_v.prepare_v_model(codes)
    assert out.shape == (2, 3, 8, 32) and prepared_v.positions(21) == 32
    for j in range(21):
        assert np.array_equal(out[:, :, :, prepared_v.key_position(j)], codes[:, j])
    padding = np.setdiff1d(np.arange(32), prepared_v.key_position(np.arange(21)))
    assert len(padding) == 11 and not out[..., padding].any()
