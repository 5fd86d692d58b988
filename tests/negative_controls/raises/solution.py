"""Raises -> RUNTIME_ERROR "User function failed: ..."."""


def run(*args):
    raise ValueError("negative control: this solution always fails")
