"""The reference executor's operations: one small module per operation or tight family.

Every module registers its operations with :func:`nnconform.reference.ops.registry.register`; importing
this package imports them all, so the one table is ``REGISTRY`` in ``registry.py``.
Shared pieces live once: ``quant.py`` (fixed-point requantisation), ``activation.py``
(fused activations), ``padding.py`` (SAME/VALID and explicit padding), ``layout.py`` (NCHW).
"""

from nnconform.reference.ops.registry import REGISTRY, OpDef, get_op, load_all  # noqa: F401  (re-exported)
