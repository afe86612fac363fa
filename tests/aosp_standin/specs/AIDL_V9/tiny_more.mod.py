# A small spec in AOSP's NNAPI test-spec DSL, written for nnconform's importer test: a named
# model with two input/output sets under one example name, a quantised model with an output
# that is not compared, and a validation example that must be rejected.
x = Input("x", ("TENSOR_INT32", [2, 3]))
shape = Parameter("shape", ("TENSOR_INT32", [2]), [3, -1])
y = Output("y", ("TENSOR_INT32", [3, 2]))
Model("reshape").Operation("RESHAPE", x, shape).To(y)
Example({x: [1, 2, 3, 4, 5, 6], y: [1, 2, 3, 4, 5, 6]}, name="flat")
Example({x: [-7, 0, 7, 2147483647, -2147483648, 1], y: [-7, 0, 7, 2147483647, -2147483648, 1]}, name="flat")

q = Input("q", ("TENSOR_QUANT8_ASYMM", [3], 0.25, 0))
r = Output("r", ("TENSOR_QUANT8_ASYMM", [3], 0.01, 10))
skipped = IgnoredOutput("skipped", ("TENSOR_QUANT8_ASYMM", [3], 0.25, 0))
Model("rsqrt").Operation("RSQRT", q).To(r).Operation("RELU", q).To(skipped)
Example({q: [1, 4, 16], r: [210, 110, 60], skipped: [0, 0, 0]})

big = Input("big", ("TENSOR_FLOAT32", [4]))
small = Output("small", ("TENSOR_FLOAT32", [5]))
Model("bad_reshape").Operation("RESHAPE", big, [5]).To(small)
Example({big: [1.0, 2.0, 3.0, 4.0], small: [0.0, 0.0, 0.0, 0.0, 0.0]}).ExpectFailure()
