"""`python forked_rank.py SCRIPT ARGS`, started by torchrun as one rank: `python SCRIPT ARGS` handed to the test
session's fork server with this rank's variables, output and exit status (forked_python.torchrun_script). Standard
library and bench's fork client only, so a rank costs an interpreter's start and not torch's import."""
import sys
import time

ENTERED = time.time()

from bench.worker.forkclient import hand_over  # noqa: E402 (the tree is on PYTHONPATH)

code = hand_over(ENTERED, program="script")
if code is None:
    print("forked_rank: no fork server forked the rank", file=sys.stderr)
    code = 1
sys.exit(code)
