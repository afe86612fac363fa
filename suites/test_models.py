"""Models suite: real networks through the driver, compared with the reference executor.

- ``test_builtin_model[NAME]``: the built-in MobileNet-v1-like and v2-like classifiers, float
  and quant8 (``nnconform.models.builtin``; no download);
- ``test_zoo_model[NAME]``: the production models of the mediapipe 0.10.14 wheel, once
  ``nnconform models fetch`` has put them in the cache, imported from .tflite the way
  TFLite's NNAPI delegate maps them (needs the [tflite] extra).  A model with a TFLite
  operation that has no NNAPI equivalent is skipped, naming the operations; without the cache
  one case is skipped, saying how to fetch it.

Each model runs on a seeded realistic input (an image-like pattern for the built-ins, uniform
values over the input's range for the zoo; the seed is the session seed mixed with the model
name).  A driver that does not support every operation skips, as in CTS.

Criteria for deep graphs (``REAL_MODEL``, scaled per output).  CTS's per-operation
tolerances assume one operation between input and output; a real network chains 20-170 of
them (convolutions with up to a few thousand products per output), and a driver may
legitimately sum in another order, fuse operations or use another convolution algorithm, so
rounding differences compound through the depth, and they scale with the magnitudes that
flow through the network, not with the one element compared (a logit near 0 can be the sum
of terms of a thousand that cancel).  So each float output ``k`` has a scale
``s_k = max(1, max |expected_k|)``; every element must satisfy
``|actual - expected| <= atol * s_k + rtol * |expected|``, and over the output the mean error
(bias) stays within ``bias * s_k`` and the mean squared error within ``MSE * s_k**2``
(quant8 rows are not scaled: they are in units of the output's scale already):

==========  ===========  =========  ======  ========  ================================
 row         atol         rtol      |bias|   MSE      why
==========  ===========  =========  ======  ========  ================================
 fp32        5e-3         5e-3      1e-3    1e-5      ~50x CTS's Conv set per element; MSE
                                                       keeps a systematic error visible
 fp16        0.1          0.1       0.05    1e-2      CTS's LargeGraph fp16 row
 quant8      3 (LSB)      0         0.5     1.0       one-LSB rounding differences may
                                                       compound through a few layers; a
                                                       systematic shift (bias > 0.5 LSB)
                                                       or many off-by-N fail
==========  ===========  =========  ======  ========  ================================

(quant8 rows are in units of the output's scale, for signed and unsigned alike.)

An output that fails these limits is looked at once more (``nnconform.models.verdict``): the
model runs again on the driver with every operation's output exposed, and each operation is
re-run alone on the reference with the driver's own values of its inputs.  If every
operation's driver output is within that operation's CTS criteria, and the exposed run gave
the same final outputs as the normal one, the case passes and its row says "accumulated
rounding": the driver's result is a chain of conformant steps, and a quantised classifier's
softmax can turn 1-LSB steps into 10 LSB of probability (LiteRT on mobilenet_v2_quant8).  A
step out of its own criteria, or a run that changes once its intermediates are visible (a
fusion bug), keeps the FAIL.  Only a failed value comparison is looked at again: wrong output
shapes or a driver error stay FAIL.

A failure is localised twice: ``generators.diverge.first_divergent_operation`` re-runs the model with
every operation's output exposed and names the first operation whose output fails that
operation's CTS criteria (with its inputs as computed by the driver itself), and
``models.localise.first_failing_operation_alone`` runs each operation alone on the
reference's values of its inputs and names the first that fails by itself (none: the error
is accumulated rounding).  The record and the dumped spec carry both.  The dump replays with ``nnconform replay``, which judges it as this
suite does (the spec's ``meta.criteria_set`` is ``RealModel``; ``nnconform.models.criteria``
holds the set and the per-output scaling; ``meta.models_criteria`` records the set the
failure was judged under).
"""

from __future__ import annotations

from typing import Any

import pytest

from nnconform.generators.diverge import first_divergent_operation
from nnconform.models import builtin_entries, input_seed, zoo
from nnconform.models.criteria import REAL_MODEL
from nnconform.models.localise import first_failing_operation_alone
from nnconform.models.verdict import SCALED, Reconsidered, reconsider
from nnconform.plugin import MESSAGE_LIMIT, note_partition
from nnconform.reference.executor import Executor
from nnconform.textsafe import clean_text
from nnconform.verdict.runner import FAIL, Case, run_case

BUILTINS = builtin_entries()


def _zoo_names() -> list[str]:
    try:
        return sorted(zoo.cached_models())
    except zoo.ZooError:
        return []


ZOO = _zoo_names()


def _seed(nn_session, name: str) -> int:
    return input_seed(nn_session.seed, name)


def _run_model(name: str, model, inputs, nn_session, nn_device, nn_record, kind: str) -> None:
    test_id = f"models/{name}"
    nn_record.update(suite="models", test_id=test_id, operations=model.operation_names(), data_types=model.data_types())
    nn_record["extra"].update(model_kind=kind, criteria=REAL_MODEL.name, operation_count=len(model.main.operations))
    expected = Executor(model).run(inputs)
    outcome = run_case(nn_device, model, inputs, expected, criteria=REAL_MODEL)
    if outcome.outcome != FAIL:
        nn_session.conclude(nn_record, outcome, Case(test_id, model, inputs, expected))
        return
    # criteria_set: ``nnconform replay`` judges the dump as this suite does (models.verdict)
    extra: dict[str, Any] = {"suite": "models", "model": name, "criteria_set": REAL_MODEL.name}
    try:
        second = reconsider(nn_device, model, inputs, expected, outcome)
    except Exception as e:  # the FAIL is the verdict; say why the step check gave nothing
        second, extra["step_check_error"] = Reconsidered(), f"{type(e).__name__}: {e}"
    if second.accepted is not None:  # a PASS, and its row says why
        note_partition(nn_record, outcome)
        if second.accepted == SCALED:
            nn_record["extra"]["judged_with_output_scale"] = True
        else:
            nn_record["extra"]["accumulated_rounding"] = True
            nn_record["message"] = clean_text(second.message)[:MESSAGE_LIMIT]
        return
    extra["models_criteria"] = (
        outcome.comparison.to_dict().get("criteria") if outcome.comparison is not None else REAL_MODEL.to_dict()
    )
    steps = second.steps
    if steps is not None:
        extra["steps"] = steps.describe()
        if steps.step is not None:
            extra["first_step_out_of_criteria"] = {
                "index": steps.step[0],
                "name": steps.step[1],
                "message": steps.step[2].message,
            }
    try:
        div = first_divergent_operation(nn_device, model, inputs, run=steps.run if steps is not None else None)
    except Exception as e:  # the failure is the verdict; say why the localisation gave nothing
        div, extra["divergence_error"] = None, f"{type(e).__name__}: {e}"
    if div is not None:
        n, op_name, cmp = div
        extra["first_divergent_operation"] = {
            "index": n,
            "name": op_name,
            "message": cmp.message,
            "comparison": cmp.to_dict(),
        }
    try:
        alone = first_failing_operation_alone(nn_device, model, inputs)
    except Exception as e:
        alone, extra["alone_error"] = None, f"{type(e).__name__}: {e}"
    extra["first_operation_failing_alone"] = (
        None
        if alone is None
        else {"index": alone[0], "name": alone[1], "message": alone[2].message, "comparison": alone[2].to_dict()}
    )
    nn_record["extra"]["first_divergent_operation"] = div[1] if div else None
    nn_record["extra"]["first_operation_failing_alone"] = alone[1] if alone else None
    try:
        nn_record["spec_path"], nn_record["replay"] = nn_session.dump_failure(
            test_id, model, inputs, expected, outcome, extra_meta=extra
        )
    except Exception as e:  # the verdict matters more than the dump
        outcome.message += f" (spec dump failed: {type(e).__name__}: {e})"
    where = f"; first divergent operation: #{div[0]} {div[1]}" if div else ""
    where += (
        f"; first operation failing on its own: #{alone[0]} {alone[1]}"
        if alone
        else "; every operation passes its own criteria on the reference's inputs"
    )
    if steps is not None and steps.step is not None:
        where += f"; first operation out of its criteria on the driver's own inputs: #{steps.step[0]} {steps.step[1]}"
    elif steps is not None and steps.error is None and not steps.reproduces:
        where += "; with its operation outputs exposed the driver gave other final outputs"
    nn_record["message"] = f"{outcome.message}{where}"
    pytest.fail(
        nn_record["message"] + (f"\n  replay: {nn_record['replay']}" if nn_record.get("replay") else ""), pytrace=False
    )


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtin_model(name, nn_session, nn_device, nn_record):
    entry = BUILTINS[name]
    model = entry.load()
    _run_model(name, model, entry.inputs(_seed(nn_session, name)), nn_session, nn_device, nn_record, "builtin")


@pytest.mark.parametrize("name", ZOO or ["not-fetched"])
def test_zoo_model(name, nn_session, nn_device, nn_record):
    nn_record.update(suite="models", test_id=f"models/{name}")
    if name == "not-fetched" and not ZOO:
        pytest.skip(
            f"the mediapipe zoo is not in {zoo.zoo_dir()}: run `nnconform models fetch` (downloads the "
            "mediapipe==0.10.14 wheel from PyPI)"
        )
    from nnconform.cases.tflite_import import TfliteImportError, UnmappedOperations, import_tflite, seeded_inputs

    try:
        res = import_tflite(zoo.cached_models()[name])
    except UnmappedOperations as e:
        pytest.skip(
            f"{name}: TFLite operations without an NNAPI equivalent: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(e.unmapped.items()))
        )
    except TfliteImportError as e:
        pytest.skip(str(e))
    nn_record["extra"]["sha256"] = res.meta["sha256"]
    _run_model(
        name, res.model, seeded_inputs(res.model, _seed(nn_session, name)), nn_session, nn_device, nn_record, "zoo"
    )
