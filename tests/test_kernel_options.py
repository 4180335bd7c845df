"""How a case's kernels are chosen: `inductor_options` (Inductor settings turned on by name) and
`cudnn_benchmark_limit` (how many algorithms cuDNN times); each refused where it cannot act, labelled,
in the case id only when set, and checked against what the process held."""
import pytest

from bench.core import labels
from bench.core.case import Case
from bench.core.errors import CaseError
from bench.core.kernel_options import INDUCTOR_OPTIONS, inductor_settings
from bench.worker.dtype_check import LabelMismatch, check_kernel_choice
from bench.worker.trainer import kernel_choice_facts, set_inductor_options

COMPILED = Case(precision="fp16", channels_last=True, compile="default", compile_scope="step", optimizer_impl="fused")


@pytest.mark.parametrize("options, message", [
    ("conv_1x1", "inductor_options: 'conv_1x1' is not accepted; use comma-separated names of: conv_1x1_as_mm, "
                 "coordinate_descent_tuning, max_autotune_pointwise, aggressive_fusion"),
    ("coordinate_descent_tuning,conv_1x1_as_mm",
     "must list each name once, in this order: conv_1x1_as_mm,coordinate_descent_tuning"),
    ("conv_1x1_as_mm,conv_1x1_as_mm", "must list each name once, in this order: conv_1x1_as_mm"),
    ("conv_1x1_as_mm,", "must list each name once, in this order: conv_1x1_as_mm"),
    (True, "must be a string of comma-separated names"),
])
def test_inductor_options_name_known_settings_once_in_order(options, message):
    with pytest.raises(CaseError, match=message.replace("(", r"\(").replace(")", r"\)")):
        COMPILED.replace(inductor_options=options)


def test_each_knob_is_refused_where_it_cannot_act():
    with pytest.raises(CaseError, match="inductor_options='conv_1x1_as_mm' does nothing here "
                                        r"\(inductor_options needs compile\)"):
        Case(inductor_options="conv_1x1_as_mm")
    for case in (Case(device="cpu"), Case(cudnn_benchmark=False)):
        with pytest.raises(CaseError, match="cudnn_benchmark_limit needs device='cuda' and cudnn_benchmark"):
            case.replace(cudnn_benchmark_limit=0)
    with pytest.raises(CaseError, match="cudnn_benchmark_limit=-1 must be >= 0"):
        Case(cudnn_benchmark_limit=-1)
    # on a CPU the Inductor settings act: a compiled CPU case may carry them
    assert Case(device="cpu", precision="bf16", compile="default", inductor_options="conv_1x1_as_mm").inductor_options


def test_ids_change_only_where_a_knob_is_set_and_labels_say_what_ran():
    both = COMPILED.replace(inductor_options="conv_1x1_as_mm,coordinate_descent_tuning")
    ids = {COMPILED.case_id, both.case_id, COMPILED.replace(inductor_options="conv_1x1_as_mm").case_id,
           COMPILED.replace(cudnn_benchmark_limit=0).case_id, COMPILED.replace(cudnn_benchmark_limit=10).case_id}
    assert len(ids) == 4  # PyTorch's limit of 10 is the default: the same case as before the knob
    stored = {k: v for k, v in COMPILED.to_dict().items() if k not in ("inductor_options", "cudnn_benchmark_limit")}
    assert Case.from_dict(stored).case_id == COMPILED.case_id  # a record stored before the knobs keeps its id
    text = labels.describe(both.replace(cudnn_benchmark_limit=0).to_dict())
    assert "compile:default/step+conv_1x1_as_mm+coordinate_descent_tuning" in text
    assert "cuDNN times every algorithm" in text
    assert "cuDNN times 4 algorithm(s)" in labels.describe(COMPILED.replace(cudnn_benchmark_limit=4).to_dict())
    assert "cuDNN" not in labels.describe(COMPILED.to_dict()) and "+" not in labels.describe(COMPILED.to_dict())


def test_the_settings_are_set_either_way_and_checked_against_the_label(monkeypatch):
    import torch._inductor.config as inductor_config
    for name in INDUCTOR_OPTIONS:  # restored after the test
        monkeypatch.setattr(inductor_config, name, getattr(inductor_config, name))
    inductor_config.coordinate_descent_tuning = True  # as TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1 would
    set_inductor_options("conv_1x1_as_mm")
    assert {n: bool(getattr(inductor_config, n)) for n in INDUCTOR_OPTIONS} == inductor_settings("conv_1x1_as_mm")
    assert inductor_settings("conv_1x1_as_mm") == {"conv_1x1_as_mm": True, "coordinate_descent_tuning": False,
                                                   "max_autotune_pointwise": False, "aggressive_fusion": False}
    case = Case(device="cpu", precision="bf16", compile="default", inductor_options="conv_1x1_as_mm")
    facts = kernel_choice_facts(case, "cpu")
    assert facts == {"inductor_settings": inductor_settings("conv_1x1_as_mm")}  # no cuDNN on a CPU
    assert check_kernel_choice(case, facts) is facts
    with pytest.raises(LabelMismatch, match="inductor_options=none but the process compiled with conv_1x1_as_mm on"):
        check_kernel_choice(case.replace(inductor_options=""), facts)
    with pytest.raises(LabelMismatch, match="cudnn_benchmark_limit=0 but cuDNN ran with 10"):
        check_kernel_choice(COMPILED.replace(cudnn_benchmark_limit=0), {"cudnn_benchmark_limit": 10})
    assert kernel_choice_facts(Case(device="cpu"), "cpu") == {}  # eager on a CPU: nothing chosen
