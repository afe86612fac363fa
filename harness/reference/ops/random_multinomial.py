"""RANDOM_MULTINOMIAL: draw class indices from per-row categorical distributions (HAL 1.2).

Inputs (3, none omitted):
  0 logits: TENSOR_FLOAT32 or TENSOR_FLOAT16 [batches, classes], unnormalised log-probabilities
  1 samples: INT32 >= 0, draws per row
  2 seeds: TENSOR_INT32 [2]; both 0 means "seed randomly"
Output 0: TENSOR_INT32 [batches, samples], each a class index.

Sampling follows the reference's inverse-CDF method: per row, w_j = exp(x_j - max) in double
over the finite logits (non-finite logits get weight 0 and are never drawn), cdf = running
sum, and a draw u in [0, 1) picks the first class whose cdf exceeds u * total.  A row with no
finite logit has total 0 and yields ``classes`` (out of range), as the reference does.
The uniform draws come from numpy's default generator seeded with the two seeds (the
reference uses TensorFlow's Philox stream, which we do not reproduce): the output is random,
so a test compares the class frequencies with softmax(logits) within a tolerance; see
``check_multinomial``, which is AOSP's check.
fp16 logits are widened to float32 first, as in the reference.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)


def validate(v: OpView) -> None:
    v.expect_counts(3, 1)
    v.expect_types([TYPES, T.INT32, T.TENSOR_INT32], [T.TENSOR_INT32])
    for i in range(3):
        if v.is_omitted(i):
            v.fail("is required but omitted", input=i)
    v.expect_rank(0, (2,))
    v.expect_rank(2, (1,))
    seeds = v.inputs[2]
    if seeds.fully_specified and seeds.dimensions != (2,):
        v.fail(f"seeds must have shape [2], got {list(seeds.dimensions)}", input=2)
    n = v.constant_scalar(1)
    if n is not None and n < 0:
        v.fail(f"sample count must be >= 0, got {n}", input=1)


def _generator(seeds: np.ndarray) -> np.random.Generator:
    s0, s1 = (int(s) & 0xFFFFFFFF for s in seeds.reshape(-1)[:2])
    if s0 == 0 and s1 == 0:
        return np.random.default_rng()
    return np.random.default_rng([s0, s1])


@register(Op.RANDOM_MULTINOMIAL, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    logits, seeds = ctx.inputs[0], ctx.inputs[2]
    samples = ctx.scalar(1)
    if logits.ndim != 2:
        ctx.fail(f"logits must be 2-D, got shape {list(logits.shape)}")
    if seeds.shape != (2,):
        ctx.fail(f"seeds must have shape [2], got {list(seeds.shape)}")
    if samples < 0:
        ctx.fail(f"sample count must be >= 0, got {samples}")
    x = logits.astype(np.float32)
    finite = np.isfinite(x)
    lowest = np.finfo(np.float32).min
    row_max = np.where(finite, x, lowest).max(axis=1, initial=lowest).astype(np.float64)
    weights = np.where(finite, np.exp(np.where(finite, x, 0).astype(np.float64) - row_max[:, None]), 0.0)
    cdf = np.cumsum(weights, axis=1)  # sequential, as the reference adds
    total = cdf[:, -1] if cdf.shape[1] else np.zeros(x.shape[0])
    target = _generator(seeds).random((x.shape[0], samples)) * total[:, None]
    out = np.empty((x.shape[0], samples), np.int32)
    for b in range(x.shape[0]):  # rows: searchsorted is per row
        out[b] = np.searchsorted(cdf[b], target[b], side="right")
    return [out]


def check_multinomial(logits: np.ndarray, samples: np.ndarray, tolerance: float) -> tuple[bool, str]:
    """AOSP's distribution check for a RANDOM_MULTINOMIAL vector (TestHarness.cpp,
    expectMultinomialDistributionWithinTolerance), reproduced with its quirks:

    - class counts are pooled over all rows of ``samples`` and divided by the number of
      samples per row, then compared with every row's expected probabilities;
    - row b's logits are read starting at flat offset ``batches * b`` rather than
      ``classes * b`` (harmless for one row, which is what the AOSP vectors have);
    - expected probability = expf(x) / sum(expf(x)) in float32, summed left to right,
      without subtracting the maximum;
    - each class passes when |frequency - expected| <= tolerance (gtest FloatNear, so a NaN
      fails).
    Returns (ok, message); the message names the first failing class.  A sample outside
    [0, classes) fails (the C++ would index out of bounds), and so does a row whose quirky
    offset would read past the logits.
    """
    x = np.asarray(logits).astype(np.float32)
    s = np.asarray(samples)
    if x.ndim != 2 or s.ndim != 2:
        return False, f"logits and samples must be 2-D, got {list(x.shape)} and {list(s.shape)}"
    batches, classes = x.shape
    per_row = s.shape[1]
    flat = s.reshape(-1).astype(np.int64)
    bad = (flat < 0) | (flat >= classes)
    if bad.any():
        return False, f"sample {int(flat[np.argmax(bad)])} is not a class index in [0, {classes})"
    counts = np.bincount(flat, minlength=classes)
    freq = counts.astype(np.float32) / np.float32(per_row) if per_row else np.full(classes, np.nan, np.float32)
    flat_x = x.reshape(-1)
    tol = np.float32(tolerance)
    for b in range(batches):
        base = batches * b
        if base + classes > flat_x.size:
            return False, (
                f"row {b}: AOSP's check reads logits from offset {base} (batches * b), past the {flat_x.size} logits"
            )
        e = np.exp(flat_x[base : base + classes]).astype(np.float32)
        total = np.cumsum(e, dtype=np.float32)[-1] if classes else np.float32(0)
        expected = (e / total).astype(np.float32)
        diff = np.abs(freq - expected)
        fails = ~(diff <= tol)
        if fails.any():
            j = int(np.argmax(fails))
            return False, (
                f"row {b} class {j}: frequency {float(freq[j]):.6g} vs expected probability "
                f"{float(expected[j]):.6g}, beyond tolerance {float(tol):g}"
            )
    return True, ""
