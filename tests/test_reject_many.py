"""The batched model-mutation check (nnconform.vts.checks.rejections, the driver host's
``reject_many``) against the one-call-at-a-time check it replaces: the same verdict for every
mutation, from an honest driver and from one that answers invalid models in every wrong way,
whether the host answers them all in one reply or one per reply; and a driver that dies in the
middle of a batch is a host incident, not a lost or wrong verdict."""

from __future__ import annotations

import pytest
from helpers import double

from nnconform.drivers.reference import ReferenceDevice
from nnconform.isolation import proxy as isolation
from nnconform.isolation.proxy import HostCrash, IsolatedDevice
from nnconform.suites.examples import all_examples
from nnconform.vts.checks import not_rejected, rejections
from nnconform.vts.mutations import MODEL_MUTATIONS, mutate_model

MIXED = double("broken_matrix", "MixedRejections")
# every class but the one that makes MixedRejections abort (tested on its own below)
CLASSES = [c for c in MODEL_MUTATIONS if c != "execution_preference"]


def _direct(what, fn):
    return fn()


def _mutations(n_models: int = 6) -> list:
    """The mutations of a few example models of different sizes (the hostile driver's answer
    depends on the operand and operation counts)."""
    examples = sorted(all_examples(), key=lambda e: (len(e.model.main.operations), e.name))
    picked = examples[:: max(1, len(examples) // n_models)][:n_models]
    return [m for e in picked for _, m in mutate_model(e.model, CLASSES)]


@pytest.fixture(scope="module")
def mutations():
    return _mutations()


@pytest.mark.parametrize("budget", [isolation.REJECT_BUDGET_S, 0.0], ids=["one-reply", "one-model-per-reply"])
def test_batched_verdicts_equal_one_at_a_time(mutations, budget, monkeypatch):
    monkeypatch.setattr(isolation, "REJECT_BUDGET_S", budget)
    one_at_a_time = IsolatedDevice(MIXED)
    try:
        expected = [not_rejected(one_at_a_time, m, _direct) for m in mutations]
    finally:
        one_at_a_time.close()
    # the hostile driver must actually produce every kind of wrong answer for this to mean much
    kinds = {"accepted it", "raised ValueError", "raised DriverProtocolError", "gave GENERAL_FAILURE"}
    assert all(any(k in (v or "") for v in expected) for k in kinds), sorted({v for v in expected if v})[:8]
    dev = IsolatedDevice(MIXED)
    try:
        got = rejections(dev, mutations, _direct)
        assert dev.incidents == []
    finally:
        dev.close()
    assert len(got) == len(mutations)
    diff = [(m.name, e, g) for m, e, g in zip(mutations, expected, got) if e != g]
    assert diff == []


def test_an_honest_driver_rejects_every_mutation_in_the_batch(mutations):
    dev = IsolatedDevice("reference")
    try:
        got = rejections(dev, mutations, _direct)
    finally:
        dev.close()
    assert len(got) == len(mutations) > 100
    assert [(m.name, v) for m, v in zip(mutations, got) if v] == []
    assert [not_rejected(ReferenceDevice(), m, _direct) for m in mutations[:40]] == got[:40]


def test_a_driver_that_dies_mid_batch_is_a_host_crash():
    model = sorted(all_examples(), key=lambda e: len(e.model.main.operations))[0].model
    ms = [m for _, m in mutate_model(model, ["operand_type", "execution_preference"])]
    assert any(m.preference not in (0, 1, 2) for m in ms) and ms[0].preference in (0, 1, 2)
    dev = IsolatedDevice(MIXED)
    try:
        with pytest.raises(HostCrash, match="SIGABRT"):
            rejections(dev, ms, _direct)
        assert [i["verdict"] for i in dev.incidents] == ["CRASH"]
        # the next check gets a fresh host
        assert rejections(dev, ms[:1], _direct) == [not_rejected(dev, ms[0], _direct)]
    finally:
        dev.close()
