"""`python -m bench COMMAND`: the parser of every command, and the one place errors become exit
codes: 0 done; 1 a failed case or a regression (returned by a command); 2 a refusal or bad input
(BenchError, said in one line before any work); 128 + N a stop by signal N."""
from __future__ import annotations

import argparse
import os
import signal
import sys

from ..core.errors import BenchError
from ..harness.signals import Stopped, terminate_as_interrupt
from . import ab, claims, compare, data, env, feed, history, models, recommend, report, run, sweep
from .flags import state_defaults

COMMANDS = (run, sweep, feed, report, data, compare, ab, history, claims, recommend, env, models)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench",
                                description="Multi-GPU training benchmark (ResNet-50, any torchvision classification "
                                            "model, or your own). Exit codes: 0 done; 1 a failed case or a regression; "
                                            "2 refused (bad input, nothing to judge); 128+N stopped by signal N.")
    sub = p.add_subparsers(dest="command", required=True, help="what to do; `python -m bench COMMAND --help` says more")
    for module in COMMANDS:
        module.add(sub)
    for command in sub.choices.values():
        state_defaults(command)
    return p


def run() -> None:
    """The `bench` command a `pip install` makes: main's exit code as the process's."""
    sys.exit(main())


def main(argv=None) -> int:
    a = parser().parse_args(argv)
    try:
        with terminate_as_interrupt():
            return a.func(a)
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt as e:
        signum = e.signum if isinstance(e, Stopped) else signal.SIGINT
        print(f"\ninterrupted ({signal.Signals(signum).name}): the running case's processes were stopped and every "
              f"finished case is stored; run again with --resume to go on", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:
        # the reader went away (`bench report | head`): stop quietly with SIGPIPE's code, as a shell tool does,
        # and let nothing more be written to the closed pipe at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
