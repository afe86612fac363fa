"""The NNAPI feature level at which each operation accepts each data type.

NNAPI numbers its releases by feature level: 1 to 4 are the HAL versions 1.0 to 1.3
(Android O-MR1, P, Q, R), 5 is Android S (the first AIDL HAL), and 6, 7, 8 the module
updates after it.  ``NeuralNetworksTypes.h`` says, per operation, "Available since NNAPI
feature level N" and, per supported tensor type, "(since NNAPI feature level M)" where a type
came later than the operation.  This module records those facts for the data types the
reference implements, keyed like the coverage table (by the short name of the operation's
primary input type), in a compact form:

- ``INTRODUCED``: the level of each operation;
- the two general rules of the header: TENSOR_FLOAT16 arrived with level 3 and
  TENSOR_QUANT8_ASYMM_SIGNED with level 4, so an older operation got them then;
- ``LATER``: every other (operation, type) that arrived after its operation.

Level 5 added no operation and no signature; 6 added BATCH_MATMUL, PACK and RESHAPE of
TENSOR_INT32; 7 added MIRROR_PAD, REVERSE and RSQRT of TENSOR_QUANT8_ASYMM(_SIGNED); 8 added
no operation (it is only a runtime feature level in the newest header).

The golden vectors come in folders named after the HAL or AIDL version that introduced their
specs; ``folder_level`` maps a folder name to its feature level.
"""

from __future__ import annotations

import re

from nnconform.ir import OperationType as Op

# HAL version (and the matching vectors folder) -> feature level.
HAL_LEVELS = {"V1_0": 1, "V1_1": 2, "V1_2": 3, "V1_3": 4}
# AIDL interface version n is feature level n + 4 (AIDL V1 = Android S = level 5).
AIDL_OFFSET = 4

_BY_LEVEL = {
    1: "ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D DEPTH_TO_SPACE DEQUANTIZE "
    "EMBEDDING_LOOKUP FLOOR FULLY_CONNECTED HASHTABLE_LOOKUP L2_NORMALIZATION L2_POOL_2D "
    "LOCAL_RESPONSE_NORMALIZATION LOGISTIC LSH_PROJECTION LSTM MAX_POOL_2D MUL RELU RELU1 RELU6 "
    "RESHAPE RESIZE_BILINEAR RNN SOFTMAX SPACE_TO_DEPTH SVDF TANH OEM_OPERATION",
    2: "BATCH_TO_SPACE_ND DIV MEAN PAD SPACE_TO_BATCH_ND SQUEEZE STRIDED_SLICE SUB TRANSPOSE",
    3: "ABS ARGMAX ARGMIN AXIS_ALIGNED_BBOX_TRANSFORM BIDIRECTIONAL_SEQUENCE_LSTM "
    "BIDIRECTIONAL_SEQUENCE_RNN BOX_WITH_NMS_LIMIT CAST CHANNEL_SHUFFLE DETECTION_POSTPROCESSING "
    "EQUAL EXP EXPAND_DIMS GATHER GENERATE_PROPOSALS GREATER GREATER_EQUAL GROUPED_CONV_2D "
    "HEATMAP_MAX_KEYPOINT INSTANCE_NORMALIZATION LESS LESS_EQUAL LOG LOGICAL_AND LOGICAL_NOT "
    "LOGICAL_OR LOG_SOFTMAX MAXIMUM MINIMUM NEG NOT_EQUAL PAD_V2 POW PRELU QUANTIZE "
    "QUANTIZED_16BIT_LSTM RANDOM_MULTINOMIAL REDUCE_ALL REDUCE_ANY REDUCE_MAX REDUCE_MIN "
    "REDUCE_PROD REDUCE_SUM ROI_ALIGN ROI_POOLING RSQRT SELECT SIN SLICE SPLIT SQRT TILE TOPK_V2 "
    "TRANSPOSE_CONV_2D UNIDIRECTIONAL_SEQUENCE_LSTM UNIDIRECTIONAL_SEQUENCE_RNN "
    "RESIZE_NEAREST_NEIGHBOR",
    4: "QUANTIZED_LSTM IF WHILE ELU HARD_SWISH FILL RANK",
    6: "BATCH_MATMUL PACK",
    7: "MIRROR_PAD REVERSE",
}
INTRODUCED: dict[Op, int] = {Op[name]: level for level, names in _BY_LEVEL.items() for name in names.split()}

# A type's own arrival, for operations older than it.
TYPE_ARRIVAL = {"fp16": 3, "quant8_signed": 4}

# (operation, data type) pairs that arrived later than both their operation and the type.
LATER: dict[tuple[Op, str], int] = {
    (Op.ADD, "int32"): 4,
    (Op.MUL, "int32"): 4,
    (Op.SUB, "int32"): 4,
    (Op.SUB, "quant8"): 3,
    (Op.DIV, "int32"): 4,
    (Op.ABS, "int32"): 4,
    (Op.EMBEDDING_LOOKUP, "fp16"): 4,
    (Op.EMBEDDING_LOOKUP, "int32"): 3,
    (Op.EMBEDDING_LOOKUP, "quant8"): 3,
    (Op.L2_NORMALIZATION, "quant8"): 3,
    (Op.TANH, "quant8"): 3,
    (Op.RESIZE_BILINEAR, "quant8"): 3,
    (Op.DEQUANTIZE, "quant8_symm"): 3,
    (Op.DEQUANTIZE, "quant8_per_channel"): 3,
    # CAST between identical types of these kinds came with level 4.
    (Op.CAST, "bool8"): 4,
    (Op.CAST, "quant16_asymm"): 4,
    (Op.CAST, "quant16_symm"): 4,
    (Op.CAST, "quant8_symm"): 4,
    # After HAL 1.3.
    (Op.RESHAPE, "int32"): 6,
    (Op.RSQRT, "quant8"): 7,
    (Op.RSQRT, "quant8_signed"): 7,
}


def feature_level(op: Op, data_type: str) -> int:
    """The earliest NNAPI feature level at which ``op`` accepts ``data_type`` (a short type
    name such as ``fp16`` or ``quant8_signed``) as its primary input type."""
    op = Op(op)
    base = max(INTRODUCED[op], TYPE_ARRIVAL.get(data_type, 0))
    return max(base, LATER.get((op, data_type), 0))


def folder_level(folder: str) -> int | None:
    """Feature level of a golden-vectors folder: ``V1_0`` .. ``V1_3`` (and ``V1_3_cts_only``)
    are 1 .. 4, ``AIDL_V<n>`` is n + 4; None for a name of neither form."""
    m = re.fullmatch(r"(V1_\d)(?:_.*)?", folder)
    if m:
        return HAL_LEVELS.get(m.group(1))
    m = re.fullmatch(r"AIDL_V(\d+)(?:_.*)?", folder)
    return int(m.group(1)) + AIDL_OFFSET if m else None


# The newest NNAPI feature level nnconform knows: a driver that declares none is held to it.
NEWEST_FEATURE_LEVEL = 8


def driver_level(declared) -> int:
    """A driver's declared ``feature_level`` as an NNAPI feature level number (1 ..).  Drivers
    may give it as the level itself (1 .. 8), as the Android API level the NDK uses for levels
    1 to 5 (27 .. 31: ANEURALNETWORKS_FEATURE_LEVEL_1 .. _5), or as the NDK's 1000006 .. for 6
    and later.  Anything else is a clear error."""
    if isinstance(declared, bool) or not isinstance(declared, int):
        raise ValueError(f"feature_level {declared!r} is not an integer")
    if 1 <= declared <= 26:
        return declared
    if 27 <= declared <= 31:
        return declared - 26
    if declared > 1_000_000:
        return declared - 1_000_000
    raise ValueError(
        f"feature_level {declared} is neither an NNAPI feature level (1 ..), an Android API "
        f"level (27 .. 31) nor an NDK level (1000006 ..)"
    )
