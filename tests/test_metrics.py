"""Metrics on hand-computed examples; position 0 is always excluded."""

from __future__ import annotations

import math

import pytest
import torch

from cbench.errors import UsageError
from cbench.tasks.metrics import default_metric, make_metric


def test_kl_hand_computed_and_position_zero_excluded():
    clean = torch.zeros(1, 2, 2)
    clean[0, 1] = torch.log(torch.tensor([0.75, 0.25]))
    patched = torch.zeros(1, 2, 2)  # uniform at position 1
    patched[0, 0] = torch.tensor([100.0, -100.0])  # position 0: ignored
    m = make_metric("kl", "categorical", clean_outputs=clean)
    expected = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert float(m(patched)) == pytest.approx(expected, abs=1e-6)
    assert float(m(clean)) == pytest.approx(0.0, abs=1e-7)


def test_l2_mae_mse():
    clean = torch.tensor([[[9.0], [1.0], [2.0]]])
    out = torch.tensor([[[0.0], [1.5], [1.0]]])
    assert float(make_metric("l2", "numerical", clean_outputs=clean)(out)) == pytest.approx((0.25 + 1.0) / 2)
    labels = torch.tensor([[5.0, 2.0, 2.0]])
    assert float(make_metric("mae", "numerical", labels=labels, clean_outputs=clean)(out)) == pytest.approx((0.5 + 1.0) / 2)
    assert float(make_metric("mse", "numerical", labels=labels, clean_outputs=clean)(out)) == pytest.approx((0.25 + 1.0) / 2)
    # without labels MAE compares with the clean outputs
    assert float(make_metric("mae", "numerical", clean_outputs=clean)(out)) == pytest.approx((0.5 + 1.0) / 2)


def test_cross_entropy_against_labels_and_clean_argmax():
    out = torch.log(torch.tensor([[[0.5, 0.5], [0.8, 0.2], [0.1, 0.9]]]))
    labels = torch.tensor([[1, 0, 0]])
    m = make_metric("ce", "categorical", labels=labels, clean_outputs=out)
    assert float(m(out)) == pytest.approx((-math.log(0.8) - math.log(0.1)) / 2, abs=1e-6)
    m2 = make_metric("ce", "categorical", clean_outputs=out)  # argmax of clean: 0 then 1
    assert float(m2(out)) == pytest.approx((-math.log(0.8) - math.log(0.9)) / 2, abs=1e-6)


def test_valid_mask_and_leading_dimensions():
    clean = torch.zeros(2, 3, 1)
    out = torch.ones(4, 2, 3, 1)  # 4 masks on the batch
    out[1] *= 2
    valid = torch.tensor([[True, True, False], [True, True, True]])
    m = make_metric("l2", "numerical", clean_outputs=clean, valid=valid)
    vals = m(out)
    assert vals.shape == (4,)
    assert vals.tolist() == pytest.approx([1.0, 4.0, 1.0, 1.0])
    per_ex = m.per_example(out)
    assert per_ex.shape == (4, 2)


def test_logit_difference():
    out = torch.zeros(2, 3, 4)
    out[0, 2] = torch.tensor([3.0, 1.0, 0.0, 0.0])
    out[1, 1] = torch.tensor([0.0, 0.0, 5.0, 1.0])
    valid = torch.tensor([[True, True, True], [True, True, False]])
    m = make_metric("logit_diff", "categorical", labels=torch.tensor([[0, 1], [2, 3]]), valid=valid)
    assert float(m(out)) == pytest.approx(-(2.0 + 4.0) / 2)


def test_defaults_per_appendix_d_and_bad_names():
    assert default_metric("acdc", "categorical") == "kl"
    assert default_metric("acdc", "numerical") == "l2"
    assert default_metric("sp", "numerical") == "l2"
    assert default_metric("edge-sp", "categorical") == "kl"
    assert default_metric("eap", "categorical") == "ce"
    assert default_metric("eap-ig-inputs", "numerical") == "mae"
    assert default_metric("eap-ig-activations", "categorical") == "ce"
    with pytest.raises(UsageError, match="unknown metric"):
        make_metric("accuracy", "categorical", clean_outputs=torch.zeros(1, 2, 2))
    with pytest.raises(UsageError, match="needs a numerical task"):
        make_metric("l2", "categorical", clean_outputs=torch.zeros(1, 2, 2))
