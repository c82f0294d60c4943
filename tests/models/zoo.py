"""The corpus: every model's Spec, from one file per library."""
from zoo_timm import SPECS as TIMM
from zoo_torch import SPECS as TORCH
from zoo_torchvision import SPECS as TORCHVISION
from zoo_transformers import SPECS as TRANSFORMERS


def all_specs():
    specs = TRANSFORMERS + TORCHVISION + TIMM + TORCH
    names = [s.name for s in specs]
    assert len(names) == len(set(names)), "model names repeat"
    return specs
