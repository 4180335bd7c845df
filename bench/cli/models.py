"""`bench models`: the networks `--model` takes, from the torchvision installed here."""
from __future__ import annotations

import itertools
import re

from ..core import models
from ..present.text import wrap


def add(sub) -> None:
    m = sub.add_parser("models", help="list the models --model takes",
                       description="Every torchvision classification model --model takes by name, by family, "
                                   "and how to give your own (package.module:factory). Exit 0.")
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
    return 0
