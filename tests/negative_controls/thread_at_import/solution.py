"""Starts a worker thread at import that does all the GPU work: `run` hands it the arguments and waits.
The official thread check takes its baseline after round 0, so it never sees this thread, nor would it
see work the thread launched outside the timed calls. Officially PASSED; the import watch names it."""

import queue
import threading

from reference.problem import run as reference_run

_tasks: queue.Queue = queue.Queue()


def _worker():
    while True:
        args, done = _tasks.get()
        for out, value in zip(args[11:], reference_run(*args[:11])):
            out.copy_(value)
        done.set()


threading.Thread(target=_worker, name="negative-control-worker", daemon=True).start()


def run(*args):
    done = threading.Event()
    _tasks.put((args, done))
    done.wait()
