"""`bench models`: the networks `--model` takes, from the torchvision installed here."""
from __future__ import annotations

import itertools
import re

from ..core import models
from ..present.text import wrap


def add(sub) -> None:
    m = sub.add_parser("models", help="list the models --model takes",
                       description="Every torchvision classification model --model takes by name, by family, timm's "
                                   "families where timm is installed, and how to give your own "
                                   "(package.module:factory). Exit 0.")
    m.set_defaults(func=command)


def family(name: str) -> str:
    """resnet50 -> resnet, wide_resnet50_2 -> wide_resnet, mobilenet_v3_small -> mobilenet_v3, vit_b_16 -> vit."""
    return re.match(r"[a-z]+(?:_[a-z]{2,}(?=\d))?(?:_v\d)?", name)[0]


def command(a) -> int:
    names = models.torchvision_names()
    print(f"{len(names)} torchvision classification models; --model NAME (make bench MODEL=NAME) takes any of them:")
    for fam, group in itertools.groupby(names, key=family):
        print("\n".join(wrap(f"  {fam}: " + ", ".join(group), indent="    ")))
    print("Your own: --model package.module:factory, called as factory(num_classes=N) and returning a "
          "torch.nn.Module;\n  run from the folder that holds the package (its source file's hash enters the case id).")
    print("Built for the case's image size: vit_* and maxvit_t; inception_v3 and googlenet without auxiliary outputs.")
    timm_names = models.timm_names()
    if not timm_names:
        print(f"timm's models (--model timm/NAME) need timm: {models.TIMM_INSTALL}")
        return 0
    print("\n".join(wrap(f"{len(timm_names)} timm {models.timm_version()} models: --model timm/NAME (e.g. "
                         "timm/vit_base_patch16_224), built with random weights for the case's image size where "
                         "the model takes one; their families:")))
    families = sorted({timm_family(n) for n in timm_names})
    print("\n".join(wrap("  " + ", ".join(families), indent="    ")))
    return 0


def timm_family(name: str) -> str:
    """vit_base_patch16_224 -> vit, resnet50d -> resnet, mobilenetv3_large_100 -> mobilenetv3, swinv2_base_window8_256
    -> swinv2: the letters before the first digit or underscore, with a version (v3) kept."""
    return re.match(r"[a-z]+?(?:v\d+)?(?![a-z])", name)[0]
