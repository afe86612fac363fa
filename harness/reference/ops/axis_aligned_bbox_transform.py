"""AXIS_ALIGNED_BBOX_TRANSFORM: apply per-class box deltas to rois and clip to the image.

Signature:
  0: rois [num_rois, 4], corner encoding [x1, y1, x2, y2] (num_rois may be 0): TENSOR_FLOAT32,
     TENSOR_FLOAT16 or TENSOR_QUANT16_ASYMM (scale 0.125, zero point 0)
  1: deltas [num_rois, num_classes * 4], [dx, dy, dw, dh] per class: the rois' float type, or
     TENSOR_QUANT8_ASYMM / TENSOR_QUANT8_ASYMM_SIGNED (any quantisation) for quant16 rois
  2: batch index of each roi [num_rois], TENSOR_INT32, in [0, num_batches)
  3: image info [num_batches, 2] = (height, width): the rois' type (quant16: scale 0.125, zp 0)
Output 0: [num_rois, num_classes * 4] boxes, the rois' type (quant16: scale 0.125, zero point 0).

Semantics: bbox_common.bbox_transform in float32 (fp16 widened, quantised values dequantised;
quantised results rounded half away from zero into 1/8 pixels).  A roi with x2 < x1 or y2 < y1,
or a batch index out of range, fails the execution.
"""

from __future__ import annotations

import numpy as np

from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op
from nnconform.reference.ops import bbox_common as bb
from nnconform.reference.ops.registry import OpContext, OpView, register

TYPES = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT16_ASYMM)


def validate(v: OpView) -> None:
    v.expect_counts(4, 1)
    v.expect_types([TYPES])
    t = v.input_type(0)
    delta_t = bb.QUANT8_TYPES if t == T.TENSOR_QUANT16_ASYMM else t
    v.expect_types([t, delta_t, T.TENSOR_INT32, t], [t])
    for i, r in enumerate((2, 2, 1, 2)):
        v.expect_rank(i, [r])
    v.expect_rank(0, [2], output=True)
    if t == T.TENSOR_QUANT16_ASYMM:
        bb.expect_box_quant(v, input=0)
        bb.expect_box_quant(v, input=3)
        bb.expect_box_quant(v, output=0)


@register(Op.AXIS_ALIGNED_BBOX_TRANSFORM, data_types=TYPES, validate=validate)
def execute(ctx: OpContext) -> list[np.ndarray]:
    rois, deltas, batches, image = ctx.inputs[:4]
    if rois.ndim != 2 or deltas.ndim != 2 or batches.ndim != 1 or image.ndim != 2:
        ctx.fail("rois, deltas and image info must have rank 2, batch indices rank 1")
    num_rois, num_batches = rois.shape[0], image.shape[0]
    num_classes = deltas.shape[1] // 4
    if num_classes <= 0 or num_batches <= 0:
        ctx.fail(
            f"needs at least one class and one image, got deltas {list(deltas.shape)}, image info {list(image.shape)}"
        )
    if (
        rois.shape[1] != 4
        or deltas.shape != (num_rois, 4 * num_classes)
        or batches.shape != (num_rois,)
        or image.shape[1] != 2
    ):
        ctx.fail(
            f"inconsistent shapes: rois {list(rois.shape)}, deltas {list(deltas.shape)}, "
            f"batch indices {list(batches.shape)}, image info {list(image.shape)}"
        )
    if num_rois == 0:
        return [np.zeros((0, 4 * num_classes), ctx.output_dtype(0))]
    r = bb.to_f32(rois, ctx.in_operands[0])
    bad = np.nonzero((batches < 0) | (batches >= num_batches))[0]
    if bad.size:
        ctx.fail(f"roi {int(bad[0])} has batch index {int(batches[bad[0]])}, not in [0, {num_batches})")
    bad = bb.bad_boxes(r)
    if bad.size:
        ctx.fail(f"roi {int(bad[0])} is malformed (x2 < x1 or y2 < y1)")
    d = bb.to_f32(deltas, ctx.in_operands[1]).reshape(num_rois, num_classes, 4)
    img = bb.to_f32(image, ctx.in_operands[3])[batches]
    out = bb.bbox_transform(r, d, img).reshape(num_rois, 4 * num_classes)
    return [bb.from_f32(out, ctx.out_operands[0])]
