"""The harness's exception types.  Each carries a one-line message meant for a driver engineer."""

from __future__ import annotations


class NnError(Exception):
    """Base of every error the harness raises on purpose."""


class ValidationError(NnError):
    """A model or request breaks an NNAPI rule.  ``where`` points at the culprit
    (``operands[3].scale``, ``operations[2] (CONV_2D) input 1``, ``request.inputs[0]``)."""

    def __init__(self, where: str, message: str):
        self.where, self.message = where, message
        super().__init__(f"{where}: {message}" if where else message)


class SpecError(NnError):
    """A spec file is malformed.  The message names the offending field."""


class OpFailure(NnError):
    """An operation failed at run time (NNAPI's OP_FAILED, HAL GENERAL_FAILURE)."""


class NotImplementedOperation(NnError):
    """The reference executor cannot run this operation (or this data type of it) yet."""


class DriverLoadError(NnError):
    """A driver name could not be resolved to a Device."""


class DeadlineMissed(NnError):
    """An execution ran past its deadline or a WHILE loop past its loop timeout."""
