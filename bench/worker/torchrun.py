"""`python -m bench.worker.torchrun ARGS` is `python -m torch.distributed.run ARGS`, handed to the test suite's
fork server (worker/forkserver.py) as `python -m bench.worker` hands a worker: torchrun's agent then costs a
fork and not torch's import. The launcher names this module only where that server's folder is set."""
import runpy
import sys
import time

ENTERED = time.time()

from .forkclient import hand_over  # noqa: E402

code = hand_over(ENTERED, program="torchrun")
if code is None:
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
    code = 0
sys.exit(code)
