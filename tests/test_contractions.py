"""Each of the passes' one-``bmm`` contractions equals its ``torch.einsum`` to the bit: values,
the output's layout and both operands' gradients, over the shapes the benchmark's models give
(size-1 dimensions included, sliced and broadcast operands as the passes hand them over)."""

from __future__ import annotations

import itertools

import pytest
import torch

from cbench.runtime import contractions as C


def _same(spec, fn, a, b, view=lambda t: t):
    """einsum(spec) and fn on ``view(a)`` and ``b``: equal values, strides and gradients."""
    a1, b1 = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    a2, b2 = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    y1 = torch.einsum(spec, view(a1), b1)
    y2 = fn(view(a2), b2)
    g = torch.randn_like(y1)
    y1.backward(g)
    y2.backward(g)
    assert y1.shape == y2.shape
    assert torch.equal(y1, y2)
    assert all(s1 == s2 for n, s1, s2 in zip(y1.shape, y1.stride(), y2.stride()) if n > 1)  # the same layout
    assert torch.equal(a1.grad, a2.grad) and torch.equal(b1.grad, b2.grad)


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("B,P,D,H,E", list(itertools.product([1, 32, 320], [1, 10], [1, 12, 56], [1, 4], [1, 3, 14])))
def test_attention_projections_equal_their_einsum(B, P, D, H, E):
    _same("bphd,hde->bphe", C.per_head_project, torch.randn(B, P, 3 * H, D), torch.randn(H, D, E),
          view=lambda x: x[:, :, H:2 * H])  # the k inputs of per-head q, k, v inputs
    _same("bpd,hde->bphe", C.shared_project, torch.randn(B, P, D), torch.randn(H, D, E))
    _same("bhpe,hed->hbpd", C.heads_out, torch.randn(B, H, P, E), torch.randn(H, E, D))


@pytest.mark.parametrize("F,K,B,P,D", list(itertools.product([1, 2, 22], [1, 12], [1, 32, 320], [1, 10], [1, 4, 56])))
def test_source_mixes_equal_their_einsum(F, K, B, P, D):
    # a block of the mask matrix, as the gathers slice it
    _same("fk,fbpd->bpkd", C.sources_into, torch.randn(F + 3, K + 5), torch.randn(F, B, P, D),
          view=lambda m: m[2:F + 2, 1:K + 1])
    for c in sorted({1, 2, B}):
        if B % c == 0:
            _same("cfk,fcnpd->cnpkd", C.grouped_sources_into, torch.randn(c, F + 3, K + 5),
                  torch.randn(F, c, B // c, P, D), view=lambda m: m[:, 2:F + 2, 1:K + 1])


def test_a_broadcast_operand_equals_its_einsum():
    """The ablated outputs reach the gathers broadcast over the examples (mean ablation)."""
    m = torch.randn(7, 12)
    acts = torch.randn(7, 1, 10, 4).expand(-1, 32, -1, -1)
    y1, y2 = torch.einsum("fk,fbpd->bpkd", m, acts), C.sources_into(m, acts)
    assert torch.equal(y1, y2) and y1.stride() == y2.stride()
