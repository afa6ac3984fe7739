"""The array adapter's torch path (python/flashprefill/_arrays.py: a torch GPU tensor read directly, without DLPack)
and the varlen binding on torch tensors, on a host without torch or a GPU: tests/fake_torch.py stands in for the parts
of torch the adapter reads."""
import sys

import pytest

import fake_torch
from flashprefill import _arrays, varlen

PTR = 0x7F0000000000


@pytest.fixture
def torch(monkeypatch):
    fake = fake_torch.module()
    monkeypatch.setitem(sys.modules, "torch", fake)
    fake_torch.clear_caches()
    yield fake
    fake_torch.clear_caches()


def test_a_gpu_tensor_is_read_directly(torch):
    x = fake_torch.Tensor(PTR, (5, 3, 64), torch.bfloat16, strides=(384, 64, 1), device=1)
    t = _arrays.adapt(x, "q", fake_torch.CURRENT_STREAM)  # its __dlpack__ fails the test if called
    assert (t.ptr, t.shape, t.strides, t.dtype, t.device, t.source) == (PTR, (5, 3, 64), (384, 64, 1), "bfloat16", 1, x)
    assert _arrays.adapt(x, "q", None).ptr == PTR  # no stream: nothing to order


def test_a_host_tensor_is_refused_as_one(torch):
    x = fake_torch.Tensor(PTR, (4, 8), torch.float32, is_cuda=False)
    with pytest.raises(TypeError, match="is a host array"):
        _arrays.adapt(x, "k", 0)


@pytest.mark.parametrize("stream, autograd", [(fake_torch.CURRENT_STREAM + 1, False), (fake_torch.CURRENT_STREAM, True)])
def test_other_streams_and_autograd_go_through_dlpack(torch, stream, autograd):
    """Read directly only where torch orders the work itself (its current stream) and no autograd is attached."""
    x = fake_torch.Tensor(PTR, (4, 8), torch.float32, requires_grad=autograd)
    with pytest.raises(AssertionError, match="DLPack"):
        _arrays.adapt(x, "v", stream)


def test_varlen_index_arrays_from_torch(torch):
    keep = []
    cu = fake_torch.Tensor(PTR, (5,), torch.int32)
    assert varlen._index_array(cu, "cu_seqlens_q", fake_torch.CURRENT_STREAM, keep).ptr == PTR
    with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
        varlen._index_array(fake_torch.Tensor(PTR, (5,), torch.float32), "cu_seqlens_q", fake_torch.CURRENT_STREAM,
                            keep)
    with pytest.raises(ValueError, match="block_table must be contiguous"):
        varlen._index_array(fake_torch.Tensor(PTR, (2, 3), torch.int32, strides=(1, 2)), "block_table",
                            fake_torch.CURRENT_STREAM, keep)
    with pytest.raises(TypeError, match="is a host array"):
        varlen._index_array(fake_torch.Tensor(PTR, (5,), torch.int32, is_cuda=False), "seqused_k", 0, keep)


def test_varlen_batch_of_torch_tensors(torch):
    total, heads_q, heads_kv, dim = 300, 8, 2, 128
    q = fake_torch.Tensor(PTR, (total, heads_q, dim), torch.float8_e4m3fn)
    k = fake_torch.Tensor(PTR + (1 << 24), (total, heads_kv, dim), torch.float8_e4m3fn)
    v = fake_torch.Tensor(PTR + (2 << 24), (total, heads_kv, dim), torch.float8_e4m3fn)
    cu = fake_torch.Tensor(PTR + (3 << 24), (4,), torch.int32)
    batch = varlen._adapt_batch(q, k, v, cu, cu, 200, 200, None, None, fake_torch.CURRENT_STREAM, [])
    # the ABI's 4-d views of batch stride 0 on the same memory
    assert (batch.q.ptr, batch.q.shape, batch.q.strides, batch.q.source) == (
        PTR, (1, total, heads_q, dim), (0, heads_q * dim, dim, 1), q)
    assert (batch.k.shape, batch.v.strides) == ((1, total, heads_kv, dim), (0, heads_kv * dim, dim, 1))
    assert batch.problem == (3, 200, 200, heads_q, heads_kv, dim, dim)
    assert batch.fields["cu_seqlens_q"] == batch.fields["cu_seqlens_k"] == PTR + (3 << 24)
