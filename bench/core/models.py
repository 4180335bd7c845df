"""Which networks a case may train, and how each is built: any torchvision classification model by name,
any of timm's as `timm/NAME` (its version identifies it), or the user's own factory,
`package.module:factory`, identified by a hash of its source file.

The names are read from torchvision's source (no import of torch: a check runs before any work), and
what a constructor fixes is honoured here: ViT and MaxViT are built for the case's image size, Inception
and GoogLeNet without their auxiliary outputs (a training step wants one tensor of logits)."""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from pathlib import Path

from . import host_cache
from .errors import CaseError

LIST_HINT = "`bin/bench models` lists them"
TIMM_PREFIX = "timm/"
TIMM_INSTALL = "pip install '.[timm]' (or pip install timm)"
FACTORY = re.compile(r"^(?P<module>[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*):(?P<factory>[A-Za-z_]\w*)$")
STEM_MODELS = re.compile(r"^(resnet|resnext|wide_resnet)\d")
"""Models whose stem is ResNet's `conv1`, the one input_channels=4 widens."""


@functools.cache  # an install does not change under a running process; every Case made is checked
def torchvision_names() -> tuple[str, ...]:
    """Every name `torchvision.models.list_models(module=torchvision.models)` gives: the functions of
    torchvision/models/*.py (not its detection, segmentation, video ... packages) decorated with
    `@register_model`; parsed once per install."""
    return tuple(host_cache.remembered("torchvision-models", host_cache.install_key("torchvision"), _parse_names))


def timm_names() -> tuple[str, ...]:
    """Every name timm.list_models() gives (the functions of timm/models/*.py registered with
    `@register_model`), parsed once per install without importing timm; () where timm is missing."""
    if not timm_version():
        return ()
    return tuple(host_cache.remembered("timm-models", host_cache.install_key("timm"), lambda: _parse_names("timm")))


@functools.cache
def timm_version() -> str:
    """The installed timm's version, '' where it is not installed (read without importing it)."""
    try:
        return importlib.metadata.version("timm")
    except importlib.metadata.PackageNotFoundError:
        return ""


def is_timm(model: str) -> bool:
    return model.startswith(TIMM_PREFIX)


def _parse_names(package: str = "torchvision") -> list[str]:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return []
    names = []
    for path in sorted((Path(spec.submodule_search_locations[0]) / "models").glob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef) and any(_is_register(d) for d in node.decorator_list):
                names.append(node.name)
    return sorted(names)


def _is_register(d) -> bool:
    call = d.func if isinstance(d, ast.Call) else d
    return getattr(call, "id", getattr(call, "attr", None)) == "register_model"


def is_factory(model: str) -> bool:
    return ":" in model


def check_name(model: str) -> None:
    """A torchvision classification model's name, timm/NAME or `package.module:factory`, else one line
    saying so."""
    if is_timm(model):
        if not timm_version():
            raise CaseError(f"model={model!r} needs timm, which is not installed here; {TIMM_INSTALL}")
        if model[len(TIMM_PREFIX):] not in timm_names():
            raise CaseError(f"model={model!r}: timm {timm_version()} has no model "
                            f"{model[len(TIMM_PREFIX):]!r} ({LIST_HINT})")
        return
    if is_factory(model):
        if not FACTORY.match(model):
            raise CaseError(f"model={model!r} is not a factory of the form package.module:function")
        return
    if model not in torchvision_names():
        raise CaseError(f"model={model!r} is not a torchvision classification model ({LIST_HINT}), "
                        "nor a factory package.module:function")


def constructor_kwargs(model: str, image_size: int) -> dict:
    """What the model's constructor is told beyond weights and num_classes: the image size it is built
    for, where it takes one; no auxiliary outputs (one tensor of logits a step)."""
    if model.startswith("vit_"):
        return {"image_size": image_size}
    if model.startswith("maxvit_"):
        return {"input_size": (image_size, image_size)}
    if model in ("inception_v3", "googlenet"):
        return {"aux_logits": False, "init_weights": True}
    return {}


def source_of(model: str, search_from: str | None = None) -> tuple[str, str]:
    """(the folder its package is imported from, the first 12 hex digits of the sha256 of its module's
    source) for a factory `package.module:factory`, found on the path as the user's Python would find it
    from `search_from` (the current folder); a one-line refusal where it is not there."""
    module = FACTORY.match(model)["module"]
    here = os.path.abspath(search_from or os.getcwd())
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as e:
        raise CaseError(f"model={model!r}: module {module!r} cannot be found ({e}); run from the folder that "
                        "holds it, or put that folder on PYTHONPATH") from None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        raise CaseError(f"model={model!r}: no module {module!r} on the path; run from the folder that holds it, "
                        "or put that folder on PYTHONPATH")
    origin = Path(spec.origin).resolve()
    depth = module.count(".") + (2 if origin.name == "__init__.py" else 1)
    return str(origin.parents[depth - 1]), file_sha(origin)


def model_fields(model: str) -> dict:
    """The case fields a `--model` value sets: the model, and for a factory package.module:function what
    identifies it (its folder and source hash), found from the current folder as the user's Python would."""
    check_name(model)
    if is_timm(model):  # a timm upgrade may change the network: its version is part of the case
        return {"model": model, "model_source": timm_version()}
    if not is_factory(model):
        return {"model": model}
    path, sha = source_of(model)
    return {"model": model, "model_path": path, "model_source": sha}


def file_sha(path: Path | str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def build(model: str, num_classes: int, image_size: int, model_path: str = "", model_source: str = ""):
    """The network, as its constructor makes it on the current default device; a factory's module must
    still hash to `model_source` (an edited model is another case)."""
    if is_factory(model):
        return _from_factory(model, num_classes, model_path, model_source)
    if is_timm(model):
        return _from_timm(model[len(TIMM_PREFIX):], num_classes, image_size, model_source)
    import torchvision
    return torchvision.models.get_model(model, weights=None, num_classes=num_classes,
                                        **constructor_kwargs(model, image_size))


def _from_factory(model: str, num_classes: int, model_path: str, model_source: str):
    import torch
    m = FACTORY.match(model)
    if model_path and model_path not in sys.path:
        sys.path.insert(0, model_path)
    module = importlib.import_module(m["module"])
    now = file_sha(module.__file__)
    if model_source and now != model_source:
        raise CaseError(f"model={model!r}: {module.__file__} has changed since the case was made (source "
                        f"{now}, the case's {model_source}); an edited model is another case")
    net = getattr(module, m["factory"])(num_classes=num_classes)
    if not isinstance(net, torch.nn.Module):
        raise CaseError(f"model={model!r}: the factory returned {type(net).__name__}, not a torch.nn.Module")
    return net


def _from_timm(name: str, num_classes: int, image_size: int, version: str):
    """timm's model with random weights, built for the case's image size where its constructor takes one
    (ViT, Swin ...); the installed timm must be the case's."""
    import timm
    if version and timm.__version__ != version:
        raise CaseError(f"model='timm/{name}' was made with timm {version} and timm {timm.__version__} is installed; "
                        "a timm upgrade is another case")
    try:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, img_size=image_size)
    except TypeError:  # a network that takes any size (ResNet, EfficientNet) has no such argument
        return timm.create_model(name, pretrained=False, num_classes=num_classes)
