"""timm (0.9.12, installed without its dependencies) for architectures the other libraries lack, at reduced sizes
for 32x32 images, every dropout and attention dropout set to 0 unless dropout=True. Drop path stays 0 even then:
torch 1.13 cannot export its bernoulli_."""
from torch import nn
from timm.models import cait as cait_mod
from timm.models import metaformer, mlp_mixer, xcit as xcit_mod

from common import Spec, images_classified

CLASSES, SIZE = 10, 32


def drop(dropout):
    return 0.1 if dropout else 0.0


def mixer(dropout):
    return mlp_mixer.MlpMixer(num_classes=CLASSES, img_size=SIZE, patch_size=4, num_blocks=2, embed_dim=64,
                              drop_rate=drop(dropout))


def resmlp(dropout):
    return mlp_mixer.MlpMixer(num_classes=CLASSES, img_size=SIZE, patch_size=4, num_blocks=2, embed_dim=64,
                              mlp_ratio=4, block_layer=mlp_mixer.ResBlock, norm_layer=mlp_mixer.Affine,
                              drop_rate=drop(dropout))


def gmlp(dropout):
    return mlp_mixer.MlpMixer(num_classes=CLASSES, img_size=SIZE, patch_size=4, num_blocks=2, embed_dim=64,
                              mlp_ratio=6, block_layer=mlp_mixer.SpatialGatingBlock, mlp_layer=mlp_mixer.GatedMlp,
                              drop_rate=drop(dropout))


def cait(dropout):
    # init_values 1 (timm's default 1e-5 leaves every block, the class-attention one too, an identity at first, so
    # the head saw one constant class token and only its bias learned); patches of 8 learn faster than of 4.
    return cait_mod.Cait(img_size=SIZE, patch_size=8, num_classes=CLASSES, embed_dim=64, depth=2, num_heads=4,
                         depth_token_only=1, init_values=1.0, drop_rate=drop(dropout))


def poolformer(dropout):
    return metaformer.MetaFormer(depths=(1, 1, 1, 1), dims=(16, 32, 48, 64), num_classes=CLASSES,
                                 downsample_norm=None, mlp_act=nn.GELU, mlp_bias=True, norm_layers=metaformer.GroupNorm1,
                                 layer_scale_init_values=1e-5, res_scale_init_values=None, use_mlp_head=False,
                                 drop_rate=drop(dropout))


def xcit(dropout):
    return xcit_mod.Xcit(img_size=SIZE, patch_size=8, num_classes=CLASSES, embed_dim=64, depth=2, num_heads=4,
                         cls_attn_layers=1, eta=1.0, tokens_norm=True, drop_rate=drop(dropout))


def spec(name, make, **kw):
    return Spec(name, "timm", make, images_classified(3, SIZE, CLASSES), ["x"], loss="cross_entropy", **kw)


# The MLP models' heads start at zero (timm's init), so they need high learning rates to learn within 15 steps.
SPECS = [
    spec("mlp_mixer", mixer, lr_sgd=0.25, lr_adamw=4e-3),
    spec("resmlp", resmlp, lr_sgd=0.2, lr_adamw=6e-3, note="affine norms, layer scale"),
    spec("gmlp", gmlp, lr_sgd=0.3, lr_adamw=6e-3, note="spatial gating"),
    spec("cait", cait, lr_sgd=0.02, lr_adamw=1e-3, note="class attention, talking heads"),
    # fp16 skips its first step (gradients above 1 overflow at the initial loss scale): at 1e-3 that one step
    # moved the final loss by 4%.
    spec("poolformer", poolformer, lr_sgd=0.03, lr_adamw=5e-4, note="pooling token mixer, GroupNorm"),
    spec("xcit", xcit, lr_sgd=0.05, lr_adamw=1e-3, note="cross-covariance attention, convolutional patches"),
]
