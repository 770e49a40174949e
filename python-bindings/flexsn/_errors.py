"""The flexsn exception hierarchy and warning category."""


class FlexSNError(RuntimeError):
    """A failure inside libFlexSN (compilation, loading or launching a
    kernel); the message is the library's, with MLIR's diagnostics."""


class UnsupportedOpError(FlexSNError):
    """The core uses an operation the compiler cannot express; the message
    names the op and where the core calls it."""


class FallbackWarning(UserWarning):
    """A core could not be compiled and runs as a Python loop instead."""


class StepByStepWarning(UserWarning):
    """flexsn.multistep cannot reorder a step exactly over the whole
    sequence and runs it one step at a time; the message says why."""


class LoopWarning(UserWarning):
    """flexsn.backend leaves a chain of per-step neuron calls one call per
    step, as traced; the message names the call and why."""


class CacheWarning(UserWarning):
    """The on-disk cache could not be used as found (a directory another
    user could write, an unwritable one, a damaged entry); the message says
    what the package does instead."""
