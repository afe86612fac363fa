"""JAX adapter: NNAPI models mapped onto jax.numpy / jax.lax and run jitted on XLA's CPU backend.

Needs the optional extra (``pip install nnconform[jax]``, which brings ``jax[cpu]``);
registered as the driver ``jax``.  Importing this package imports jax, so a missing extra
makes the driver loader report it in one line.
"""

from nnconform.drivers.jax.device import JaxDevice, JaxPreparedModel

__all__ = ["JaxDevice", "JaxPreparedModel"]
