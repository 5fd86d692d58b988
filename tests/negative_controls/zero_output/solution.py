"""Writes nothing: the outputs stay all zero -> INCORRECT_NUMERICAL (all-zero screen, §2.7)."""


def run(*args):
    return None
