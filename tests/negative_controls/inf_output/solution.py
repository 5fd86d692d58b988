"""Right values except one +Inf in grad_hidden_states -> INCORRECT_NUMERICAL with has_inf set and
finite errors (the trace must stay strict JSON)."""

from reference.problem import run as reference_run


def run(*args):
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)
    args[11].view(-1)[0] = float("inf")
