# A small spec in AOSP's NNAPI test-spec DSL, written for nnconform's importer test.
# One ADD model; its example is expanded into the default, relaxed and float16 variations.
a = Input("a", "TENSOR_FLOAT32", "{2, 2}")
b = Input("b", "TENSOR_FLOAT32", "{2, 2}")
total = Output("total", "TENSOR_FLOAT32", "{2, 2}")
Model().Operation("ADD", a, b, 0).To(total)

Example({
    a: [1.0, 2.5, -3.0, 0.1],
    b: [10.0, 20.0, 30.0, 0.2],
    total: [11.0, 22.5, 27.0, 0.3],
}).AddVariations("relaxed", "float16")
