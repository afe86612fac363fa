"""Built-in MobileNet-v1-like and MobileNet-v2-like classifiers, made with the IR.

They let the benchmark and the models suite run with no download.  Weights are seeded
(He-normal, so activations keep their scale through the depth), the input is a 1x64x64x3 image
and the head is a 10-class softmax (so top-1/top-5 agreement means something).

- ``mobilenet_v1``: a 3x3 stride-2 convolution, then depthwise-separable blocks (3x3
  depthwise + 1x1 pointwise, RELU6 fused), global average pooling, FULLY_CONNECTED, SOFTMAX.
- ``mobilenet_v2``: a 3x3 stride-2 convolution, then inverted residual blocks (1x1 expansion
  with RELU6, 3x3 depthwise with RELU6, linear 1x1 projection, ADD of the block's input when
  the stride is 1 and the channels match), a 1x1 convolution, pooling, FULLY_CONNECTED, SOFTMAX.

Each comes as ``float`` (TENSOR_FLOAT32) and ``quant8`` (TENSOR_QUANT8_ASYMM, per-tensor
asymmetric weights, int32 biases of scale input_scale x filter_scale).  The quant8 model is
the float one post-training quantised: the float model runs on seeded calibration images,
every tensor's observed range (widened to contain 0) gives its scale and zero point, and the
softmax output uses NNAPI's fixed 1/256, 0.  The two builds create operands in the same
order, so operand ``k`` of the quant8 model is operand ``k`` of the float one.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from nnconform.ir import Model, ModelBuilder
from nnconform.ir import OperandType as T
from nnconform.ir import OperationType as Op

INPUT_SHAPE = (1, 64, 64, 3)
CLASSES = 10
SEED = 20240516
CALIBRATION_IMAGES = 4
RELU6, NONE = 3, 0
SAME, VALID = 1, 2


class _Net:
    """Writes one network in float or quant8; ``ranges`` (operand -> (lo, hi)) is needed for
    quant8 and comes from a float run."""

    def __init__(self, quant: bool, ranges: dict[int, tuple[float, float]] | None, seed: int):
        self.b = ModelBuilder("main")
        self.quant = quant
        self.ranges = ranges or {}
        self.rng = np.random.default_rng(seed)
        self.scale: dict[int, tuple[float, int]] = {}

    # quantisation ------------------------------------------------------------------------
    @staticmethod
    def qparams(lo: float, hi: float) -> tuple[float, int]:
        lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
        if hi - lo < 1e-6:
            hi = lo + 1e-6
        scale = (hi - lo) / 255.0
        zp = int(np.clip(round(-lo / scale), 0, 255))
        return scale, zp

    def _next_index(self) -> int:
        return len(self.b._operands)

    def tensor(self, dims, *, output: bool = False, fixed: tuple[float, int] | None = None) -> int:
        """A temporary (or the model output) with its quantisation from the calibration run."""
        make = self.b.output if output else self.b.temp
        if not self.quant:
            return make(T.TENSOR_FLOAT32, dims)
        k = self._next_index()
        scale, zp = fixed or self.qparams(*self.ranges[k])
        i = make(T.TENSOR_QUANT8_ASYMM, dims, scale=scale, zero_point=zp)
        self.scale[i] = (scale, zp)
        return i

    def weights(self, dims, fan_in: int, gain: float = 1.0) -> tuple[int, float]:
        w = (gain * self.rng.normal(0.0, np.sqrt(2.0 / fan_in), dims)).astype(np.float32)
        if not self.quant:
            return self.b.const(T.TENSOR_FLOAT32, dims, w), 1.0
        scale, zp = self.qparams(w.min(), w.max())
        q = np.clip(np.round(w / scale) + zp, 0, 255).astype(np.uint8)
        return self.b.const(T.TENSOR_QUANT8_ASYMM, dims, q, scale=scale, zero_point=zp), scale

    def bias(self, n: int, x: int, w_scale: float) -> int:
        v = self.rng.normal(0.0, 0.05, n).astype(np.float32)
        if not self.quant:
            return self.b.const(T.TENSOR_FLOAT32, [n], v)
        s = self.scale[x][0] * w_scale
        return self.b.const(T.TENSOR_INT32, [n], np.round(v / s).astype(np.int32), scale=s)

    # layers ----------------------------------------------------------------------------
    def input(self) -> int:
        if not self.quant:
            return self.b.input(T.TENSOR_FLOAT32, INPUT_SHAPE)
        i = self.b.input(T.TENSOR_QUANT8_ASYMM, INPUT_SHAPE, scale=2.0 / 255.0, zero_point=128)
        self.scale[i] = (2.0 / 255.0, 128)
        return i

    def shape(self, x: int) -> tuple[int, ...]:
        return self.b._operands[x].dimensions

    def conv(self, x: int, c_out: int, k: int, stride: int, act: int) -> int:
        n, h, w, c = self.shape(x)
        wt, ws = self.weights([c_out, k, k, c], k * k * c)
        b = self.bias(c_out, x, ws)
        ho, wo = -(-h // stride), -(-w // stride)
        args = [x, wt, b, self.b.i32(SAME), self.b.i32(stride), self.b.i32(stride), self.b.i32(act)]
        y = self.tensor([n, ho, wo, c_out])
        self.b.operation(Op.CONV_2D, args, [y])
        return y

    def depthwise(self, x: int, stride: int, act: int) -> int:
        n, h, w, c = self.shape(x)
        wt, ws = self.weights([1, 3, 3, c], 9)
        b = self.bias(c, x, ws)
        ho, wo = -(-h // stride), -(-w // stride)
        args = [x, wt, b, self.b.i32(SAME), self.b.i32(stride), self.b.i32(stride), self.b.i32(1), self.b.i32(act)]
        y = self.tensor([n, ho, wo, c])
        self.b.operation(Op.DEPTHWISE_CONV_2D, args, [y])
        return y

    def add(self, x: int, y: int) -> int:
        z = self.tensor(self.shape(x))
        self.b.operation(Op.ADD, [x, y, self.b.i32(NONE)], [z])
        return z

    def head(self, x: int) -> int:
        n, h, w, c = self.shape(x)
        pooled = self.tensor([n, 1, 1, c], fixed=self.scale.get(x))  # pooling keeps the input's scale
        self.b.operation(
            Op.AVERAGE_POOL_2D,
            [x, self.b.i32(VALID), self.b.i32(1), self.b.i32(1), self.b.i32(w), self.b.i32(h), self.b.i32(NONE)],
            [pooled],
        )
        flat = self.tensor([n, c], fixed=self.scale.get(pooled))
        self.b.operation(Op.RESHAPE, [pooled, self.b.const(T.TENSOR_INT32, [2], [n, c])], [flat])
        wt, ws = self.weights([CLASSES, c], c, gain=4.0)  # spread the logits: distinct top-k
        b = self.bias(CLASSES, flat, ws)
        logits = self.tensor([n, CLASSES])
        self.b.operation(Op.FULLY_CONNECTED, [flat, wt, b, self.b.i32(NONE)], [logits])
        probs = self.tensor([n, CLASSES], output=True, fixed=(1.0 / 256.0, 0))
        self.b.operation(Op.SOFTMAX, [logits, self.b.f32(1.0)], [probs])
        return probs


def _v1(net: _Net) -> None:
    x = net.conv(net.input(), 8, 3, 2, RELU6)
    for c_out, stride in ((16, 1), (24, 2), (24, 1), (32, 2), (32, 1), (48, 2), (48, 1)):
        x = net.depthwise(x, stride, RELU6)
        x = net.conv(x, c_out, 1, 1, RELU6)
    net.head(x)


def _v2(net: _Net) -> None:
    x = net.conv(net.input(), 8, 3, 2, RELU6)
    c_in = 8
    for expand, c_out, stride in ((1, 8, 1), (4, 12, 2), (4, 12, 1), (4, 16, 2), (4, 16, 1), (4, 24, 2), (4, 24, 1)):
        y = net.conv(x, c_in * expand, 1, 1, RELU6) if expand != 1 else x
        y = net.depthwise(y, stride, RELU6)
        y = net.conv(y, c_out, 1, 1, NONE)
        x = net.add(x, y) if stride == 1 and c_in == c_out else y
        c_in = c_out
    x = net.conv(x, 64, 1, 1, RELU6)
    net.head(x)


ARCHITECTURES: dict[str, Callable[[_Net], None]] = {"mobilenet_v1": _v1, "mobilenet_v2": _v2}
DATA_TYPES = ("float", "quant8")


def calibration_images(count: int = CALIBRATION_IMAGES, seed: int = SEED) -> list[np.ndarray]:
    """Seeded smooth 'images' in [-1, 1]: low-frequency patterns plus a little noise, so the
    activations look like a real image's more than white noise does."""
    rng = np.random.default_rng(seed)
    n, h, w, c = INPUT_SHAPE
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    out = []
    for _ in range(count):
        img = np.zeros(INPUT_SHAPE, np.float32)
        for ch in range(c):
            fx, fy, ph = rng.uniform(0.5, 3.0), rng.uniform(0.5, 3.0), rng.uniform(0, 2 * np.pi)
            img[0, :, :, ch] = 0.8 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)
        img += rng.normal(0, 0.1, INPUT_SHAPE).astype(np.float32)
        out.append(np.clip(img, -1, 1).astype(np.float32))
    return out


def quantize_input(img: np.ndarray) -> np.ndarray:
    return np.clip(np.round(img / (2.0 / 255.0)) + 128, 0, 255).astype(np.uint8)


_CACHE: dict[str, Model] = {}


def build(arch: str, dtype: str = "float") -> Model:
    """The built-in model ``arch`` (mobilenet_v1 / mobilenet_v2) in ``dtype`` (float / quant8)."""
    if arch not in ARCHITECTURES:
        raise KeyError(f"unknown built-in architecture {arch!r} (available: {', '.join(ARCHITECTURES)})")
    if dtype not in DATA_TYPES:
        raise KeyError(f"unknown data type {dtype!r} (available: {', '.join(DATA_TYPES)})")
    key = f"{arch}_{dtype}"
    if key in _CACHE:
        return _CACHE[key]
    net = _Net(False, None, SEED)
    ARCHITECTURES[arch](net)
    model = net.b.build()
    if dtype == "quant8":
        model = _quantized(arch, model)
    _CACHE[key] = model
    return model


def _quantized(arch: str, float_model: Model) -> Model:
    from nnconform.reference.executor import Executor

    ex = Executor(float_model, keep_values=True)
    lo: dict[int, float] = {}
    hi: dict[int, float] = {}
    for img in calibration_images():
        ex.run([img])
        values = ex.main_values
        assert values is not None  # keep_values=True keeps them
        for k, v in enumerate(values):
            if v is None or float_model.main.operands[k].is_constant:
                continue
            a = np.asarray(v, dtype=np.float64)
            if a.size:
                lo[k] = min(lo.get(k, np.inf), float(a.min()))
                hi[k] = max(hi.get(k, -np.inf), float(a.max()))
    net = _Net(True, {k: (lo[k], hi[k]) for k in lo}, SEED)
    ARCHITECTURES[arch](net)
    return net.b.build()


def example_inputs(model: Model, seed: int) -> list[np.ndarray]:
    """A seeded image for a built-in model, in its input's storage type."""
    img = calibration_images(1, seed)[0]
    op = model.main.operands[model.main.input_indexes[0]]
    return [quantize_input(img) if op.type == T.TENSOR_QUANT8_ASYMM else img]
