"""The runtime-neutral NNAPI layer every runtime adapter stands on.

An adapter (onnxruntime, OpenVINO, JAX, torch, TFLite) maps NNAPI operations onto one
runtime's API.  What does not depend on that runtime lives here, once, so that the adapters
cannot drift apart on NNAPI's rules:

- ``types``: the operand-type families the converters gate on, and the "same quantisation"
  gates (data movement may not requantise).
- ``layout``: NCHW/NHWC permutations and reading an image operand's dimensions in either
  layout.
- ``op_params``: per-operation parameter decoding beyond ``nnconform.ir.nnapi_params`` (which
  holds the convolution, pooling, slicing and axes rules): block sizes, resize sizes, splits,
  paddings, permutations, normalisation parameters, with NNAPI's rejection rules.
- ``converter``: the parts of a converter module that are the same for every runtime (the
  operation table lookup, the operand-type check, operation_supported, error context).
- ``device``: the prepared-model boilerplate (release, the execute() frame with its checks
  and timing) shared by the adapters' device modules.

Nothing here imports a runtime: the modules are plain Python and numpy.
"""
