"""Return style: returns `(None,) * 7` -> RUNTIME_ERROR (the output normalization accepts tensors and
numbers only), not a crash of the driver."""


def run(*args):
    return (None,) * 7
