import json

import pytest

from bench.core.case import Case, CaseError


@pytest.mark.parametrize("changes, field, accepted", [
    ({"strategy": "fsdp"}, "strategy", "single, dp, ddp"),
    ({"precision": "fp8"}, "precision", "fp32, tf32, bf16, fp16"),
    ({"loader": "ffcv"}, "loader", "synthetic, torch, dali"),
    ({"device": "tpu"}, "device", "cuda, cpu"),
    ({"dali_device": "gpu"}, "dali_device", "mixed, cpu"),
    ({"accumulation_mode": "sometimes"}, "accumulation_mode", "article, no_sync"),
    ({"dp_device_selection": "random"}, "dp_device_selection", "default, free_memory"),
    ({"compile": "default", "compile_wrapper": "c++"}, "compile_wrapper", "python, cpp"),
    ({"step_stream": "side"}, "step_stream", "default, own"),
])
def test_bad_choice_names_field_and_accepted_values(changes, field, accepted):
    with pytest.raises(CaseError) as e:
        Case(**changes)
    msg = str(e.value)
    assert msg.startswith(f"{field}=") and accepted in msg and "\n" not in msg


@pytest.mark.parametrize("changes, needle", [
    ({"batch_size": 0}, "batch_size=0 must be >= 1"),
    ({"gpus": 0}, "gpus=0 must be >= 1"),
    ({"steps": 2.5}, "steps=2.5 must be a whole number"),
    ({"image_size": 16}, "image_size=16 must be >= 32"),
    ({"channels_last": "yes"}, "channels_last='yes' must be true or false"),
    ({"hw_decoder_load": 1.5}, "hw_decoder_load=1.5 must be -1 (chosen for the GPU) or between 0 and 1"),
    ({"hw_decoder_load": -0.5}, "hw_decoder_load=-0.5 must be >= 0.0"),
    ({"loader": "dali", "data_dir": "/d", "dali_prefetch_depth": 0}, "dali_prefetch_depth=0 must be >= 1"),
    ({"loader": "dali", "data_dir": "/d", "dali_cpu_share": -0.5}, "dali_cpu_share=-0.5 must be >= 0.0"),
    ({"loader": "dali", "data_dir": "/d", "batch_size": 4, "dali_cpu_share": 0.1},
     "dali_cpu_share=0.1 of a batch of 4 leaves one pipeline no image"),
    ({"loader": "dali", "data_dir": "/d", "dali_cpu_share": 1.0}, "dali_cpu_share=1.0 of a batch of 256 leaves one"),
    ({"dali_cpu_share": 0.25}, "DALI knobs need loader='dali'"),
    ({"loader": "dali", "data_dir": "/d", "dali_handoff": "event"},
     "dali_handoff='event' is not accepted; use one of: host, stream"),
    ({"loader": "dali", "data_dir": "/d", "dali_crop": "gpu"},
     "dali_crop='gpu' is not accepted; use one of: decoder, resize"),
    ({"cuda_graph": True, "device": "cpu", "optimizer_impl": "fused"}, "cuda_graph=true captures the step as a CUDA "
                                                                        "graph and needs device='cuda'"),
    ({"cuda_graph": True, "strategy": "ddp", "optimizer_impl": "fused"}, "cuda_graph=true is measured with "
                                                                          "strategy='single'"),
    ({"cuda_graph": True}, "cuda_graph=true needs optimizer_impl='fused', not 'default'"),
    ({"cuda_graph": True, "optimizer_impl": "fused", "compile": "reduce-overhead"},
     "that mode makes CUDA graphs of its own"),
    ({"cuda_graph": True, "optimizer_impl": "fused", "overhead_check": True}, "needs a model step to capture"),
    ({"cuda_graph": 1}, "cuda_graph=1 must be true or false"),
    ({"device": "cpu", "precision": "tf32"}, "precision='tf32' needs device='cuda'"),
    ({"device": "cpu", "step_stream": "own"}, "step_stream='own' makes a CUDA stream and needs device='cuda'"),
    ({"cuda_max_connections": 33}, "cuda_max_connections=33 must be 0 (as the environment has it) or 1-32"),
    ({"cuda_max_connections": -1}, "cuda_max_connections=-1 must be >= 0"),
    ({"cuda_max_connections": 8.0}, "cuda_max_connections=8.0 must be a whole number >= 0"),
    ({"device": "cpu", "cuda_max_connections": 32}, "cuda_max_connections=32 does nothing here (CUDA's hardware "
                                                    "work queues need device='cuda')"),
    ({"strategy": "single", "gpus": 2}, "gpus=2 with strategy='single'"),
    ({"device": "cpu", "strategy": "dp", "gpus": 2}, "gpus=2 with strategy='dp' on device='cpu'"),
    ({"loader": "torch"}, "loader='torch' needs data_dir"),
    ({"persistent_workers": True}, "persistent_workers=true needs num_workers >= 1"),
    ({"accumulation_steps": 4}, "accumulation_steps=4 is measured with strategy='ddp' only"),
    ({"strategy": "dp", "gpus": 2, "dp_output_device": 2}, "dp_output_device=2 must be -1 or an index below gpus=2"),
    ({"dp_loss_in_forward": True}, "apply to strategy='dp' only"),
    ({"strategy": "ddp", "nccl_env": (("GLOO_X", "1"),)}, "name starts with NCCL_"),
    ({"strategy": "dp", "compile": "default"}, "compile with strategy='dp'"),
    ({"device": "cpu", "compile": "reduce-overhead"}, "compile='reduce-overhead' replays CUDA graphs and needs device='cuda'"),
    ({"compile_scope": "graph"}, "compile_scope='graph' is not accepted; use one of: model, step"),
    ({"optimizer_impl": "adam"}, "optimizer_impl='adam' is not accepted; use one of: default, foreach, fused"),
    ({"fault": "crash", "fault_rank": 1}, "fault_rank=1 must be below gpus=1"),
])
def test_impossible_combinations_are_rejected(changes, needle):
    with pytest.raises(CaseError, match=None) as e:
        Case(**changes)
    assert needle in str(e.value)


def test_derived_sizes():
    c = Case(strategy="ddp", gpus=4, batch_size=256, accumulation_steps=8)
    assert c.global_batch == 1024
    assert c.images_per_step == 8192
    assert c.launcher == "torchrun"
    assert Case(strategy="dp", gpus=2).launcher == "process"


def test_case_id_is_stable_readable_and_distinct():
    a = Case(strategy="ddp", gpus=2, precision="bf16", channels_last=True)
    assert a.case_id == Case(strategy="ddp", gpus=2, precision="bf16", channels_last=True).case_id
    assert a.case_id.startswith("custom-resnet50-ddp-g2-bs256-bf16-cl-synthetic-224px-cuda-")
    assert a.case_id != a.replace(bucket_cap_mb=50.0).case_id  # a knob outside the label still counts
    # knobs added later enter the id only when set, so every id stored before them still names its case
    fused = a.replace(optimizer_impl="fused", compile="default", compile_scope="step")
    assert "-compile-default-step-sgd-fused-" in fused.case_id and fused.case_id != a.case_id
    graphed = Case(optimizer_impl="fused", cuda_graph=True)
    assert "-sgd-fused-cuda-graph-" in graphed.case_id and graphed.case_id != graphed.replace(cuda_graph=False).case_id


def test_json_round_trip_and_unknown_fields():
    c = Case(strategy="ddp", gpus=2, nccl_env=(("NCCL_IB_DISABLE", "1"),))
    again = Case.from_dict(json.loads(json.dumps(c.to_dict())))
    assert again == c and again.case_id == c.case_id
    with pytest.raises(CaseError, match="unknown case field.*colour"):
        Case.from_dict({**c.to_dict(), "colour": "red"})


@pytest.mark.parametrize("changes, needle", [
    ({"bucket_cap_mb": 50.0}, "bucket_cap_mb=50.0 does nothing here (DDP knobs need strategy='ddp')"),
    ({"static_graph": True}, "static_graph=True does nothing here"),
    ({"strategy": "ddp", "device": "cpu", "nccl_env": (("NCCL_IB_DISABLE", "1"),)}, "NCCL runs only under ddp on cuda"),
    ({"num_workers": 4}, "torch DataLoader knobs need loader='torch'"),
    ({"loader": "torch", "data_dir": "/d", "prefetch_factor": 4}, "prefetch_factor needs num_workers >= 1"),
    ({"loader": "torch", "data_dir": "/d", "num_workers": 2, "pin_memory": True, "device": "cpu"},
     "host-to-GPU copy knobs need device='cuda'"),
    ({"hw_decoder_load": 1.0}, "DALI knobs need loader='dali'"),
    ({"loader": "dali", "data_dir": "/d", "dali_device": "cpu", "hw_decoder_load": 1.0},
     "the hardware decoder is used by dali_device='mixed' only"),
    ({"dali_threads": 8}, "DALI knobs need loader='dali'"),
    ({"dali_prefetch_depth": 3}, "DALI knobs need loader='dali'"),
    ({"dali_handoff": "stream"}, "DALI knobs need loader='dali'"),
    ({"loader": "torch", "data_dir": "/d", "dali_crop": "resize"}, "DALI knobs need loader='dali'"),
    ({"loader": "dali", "data_dir": "/d", "device": "cpu", "dali_device": "cpu", "dali_handoff": "stream"},
     "DALI's hand-over to a CUDA stream needs device='cuda'"),
    ({"accumulation_mode": "no_sync"}, "accumulation_mode needs accumulation_steps > 1"),
    ({"loader": "dali", "data_dir": "/d", "loader_only": True, "precision": "bf16"}, "loader_only=true runs no model"),
    ({"loader": "torch", "data_dir": "/d", "loader_only": True, "compile": "default"}, "loader_only=true runs no model"),
    ({"loader": "torch", "data_dir": "/d", "loader_only": True, "optimizer_impl": "fused"}, "loader_only=true runs no model"),
    ({"compile_scope": "step"}, "compile_scope needs compile"),
])
def test_idle_knobs_are_refused_with_one_line(changes, needle):
    with pytest.raises(CaseError) as e:
        Case(**changes)
    assert needle in str(e.value) and "leave it at its default" in str(e.value) and "\n" not in str(e.value)


def test_knobs_that_act_are_accepted():
    Case(strategy="ddp", gpus=2, bucket_cap_mb=50.0, static_graph=True, nccl_env=(("NCCL_IB_DISABLE", "1"),))
    Case(loader="torch", data_dir="/d", num_workers=-1, persistent_workers=True, pin_memory=True, prefetch_factor=4)
    Case(loader="dali", data_dir="/d", dali_threads=12, hw_decoder_load=1.0, dali_prefetch_depth=3,
         dali_handoff="stream", dali_crop="resize")
    Case(loader="dali", data_dir="/d", device="cpu", dali_device="cpu", dali_crop="resize")
    Case(cuda_graph=True, optimizer_impl="fused", compile="default", precision="fp16")
    Case(loader="dali", data_dir="/d", loader_only=True, channels_last=True)  # the layout the loader delivers
    with pytest.raises(CaseError, match="dali_threads=0 must be -1"):
        Case(loader="dali", data_dir="/d", dali_threads=0)


def test_machine_facts_stay_out_of_case_ids():
    from bench.core import sweeps
    a = sweeps.build("loaders", 1, data_dir="/d")
    assert all(c.num_workers in (0, -1) and c.dali_threads == -1 for c in a)
    assert [c.case_id for c in a] == [c.case_id for c in sweeps.build("loaders", 1, data_dir="/d")]
