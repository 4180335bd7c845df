"""Stops asked by a signal take Ctrl-C's path, so the running case is killed and every finished
result kept; the exit code is 128 + the signal, as a shell reports it."""
from __future__ import annotations

import contextlib
import signal
import threading


class Stopped(KeyboardInterrupt):
    """A stop asked by a signal; `exit_code` is 128 + its number, as a shell reports it."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum
        self.exit_code = 128 + signum


@contextlib.contextmanager
def terminate_as_interrupt():
    """SIGTERM (a batch scheduler's cancel, `timeout`) and SIGHUP (a closed terminal) take Ctrl-C's
    path: the running case's processes are killed and every finished result is kept; one the process
    was started ignoring (`nohup`) is left ignored. Signal handlers belong to the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise Stopped(signum)
    # a signal the process was started ignoring stays ignored: `nohup` (SIGHUP) keeps a sweep running
    # after its terminal closes, as the user asked
    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
