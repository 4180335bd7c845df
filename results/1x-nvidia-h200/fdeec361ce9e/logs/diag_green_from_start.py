"""diag.py's variants with this thread's current CUDA context a green context of N SMs from the start:
the model, its cuDNN handles and the step live there; DALI's own threads take the device's primary context.
python3 diag_green_from_start.py DATA_DIR BATCH VARIANTS N"""
import json
import runpy
import sys
from pathlib import Path

import torch
from torch.cuda import green_contexts as gcm

n = int(sys.argv.pop())
try:
    g = gcm.GreenContext.create(n, 0)
    g.set_context()
    print(json.dumps({"green_sms": n, "current": "green context"}), flush=True)
except Exception as e:  # no green context: say why, run nothing
    print(json.dumps({"green_sms": n, "error": repr(e)[:300]}), flush=True)
    sys.exit(0)
script = str(Path(__file__).with_name("diag.py"))
sys.argv[0] = script
runpy.run_path(script, run_name="__main__")
