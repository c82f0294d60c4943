"""torchvision (0.14) models at reduced widths and depths for 32x32 images, BatchNorm in training mode, every
dropout set to 0 unless dropout=True. Stochastic depth stays 0 even then: torch 1.13 cannot export its
bernoulli_.

ImageNet stems (stride 32 in all) leave 1x1 and 2x2 maps at 32x32, where BatchNorm normalizes over the batch's 8
values alone: a rounding-sized change then flips the run (PyTorch's float32 and float64 runs part by 1e-2) and
bf16 or one skipped fp16 step moves the final loss by several percent. Several models below therefore take the
CIFAR adaptation of their stem (stride 1 where ImageNet has stride 2), and learning rates low enough that the
runs stay smooth."""
from torch import nn
from torchvision.models import convnext, densenet, efficientnet, mobilenetv2, mobilenetv3, regnet, resnet, \
    shufflenetv2, squeezenet

from common import Spec, images_classified

CLASSES, SIZE = 10, 32


class SmallResNet(resnet.ResNet):
    """torchvision's ResNet-18 (BasicBlock, [2, 2, 2, 2]) with its widths divided by 8 and the CIFAR stem (a 3x3
    stride-1 convolution, no max pooling: layer4 works on 4x4 maps, not 1x1), torchvision's initialization."""

    def __init__(self):
        super().__init__(resnet.BasicBlock, [2, 2, 2, 2], num_classes=CLASSES)
        self.inplanes = 8
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.maxpool = nn.Identity()
        self.layer1 = self._make_layer(resnet.BasicBlock, 8, 2)
        self.layer2 = self._make_layer(resnet.BasicBlock, 16, 2, stride=2)
        self.layer3 = self._make_layer(resnet.BasicBlock, 32, 2, stride=2)
        self.layer4 = self._make_layer(resnet.BasicBlock, 64, 2, stride=2)
        self.fc = nn.Linear(64, CLASSES)
        for m in self.modules():  # the layers above were made after ResNet.__init__ initialized its own
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")


def mobilenet_v2(dropout):
    setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 2, 2], [6, 64, 1, 2]]
    m = mobilenetv2.MobileNetV2(num_classes=CLASSES, width_mult=0.5, inverted_residual_setting=setting)
    m.classifier[0].p = 0.2 if dropout else 0.0
    return m


def mobilenet_v3(dropout):
    setting, _ = mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small", width_mult=0.25)
    m = mobilenetv3.MobileNetV3(setting, last_channel=128, num_classes=CLASSES, dropout=0.2 if dropout else 0.0)
    # The classifier's two Linear layers at PyTorch's default init: torchvision's std 0.01 for both left the
    # logits at 1e-4 and the body without gradient (8% in 15 AdamW steps). Stride 1 in the stem and the first
    # block (the last maps 4x4, not 1x1).
    for mod in m.classifier:
        if isinstance(mod, nn.Linear):
            mod.reset_parameters()
    m.features[0][0].stride = (1, 1)
    m.features[1].block[0][0].stride = (1, 1)
    return m


def efficientnet_b0(dropout):
    setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
    m = efficientnet.EfficientNet(setting, dropout=0.2 if dropout else 0.0, stochastic_depth_prob=0.0,
                                  num_classes=CLASSES, last_channel=128)
    m.features[0][0].stride = (1, 1)  # stride 1 in the stem and the first stride-2 stage: the last maps are 4x4
    m.features[2][0].block[1][0].stride = (1, 1)
    return m


def shufflenet_v2(dropout):
    m = shufflenetv2.ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=CLASSES)
    m.conv1[0].stride = (1, 1)  # stride-1 stem: the last stage works on 2x2 maps, not 1x1
    return m


class SmallSqueezeNet(nn.Module):
    """SqueezeNet 1.1's layout (torchvision's Fire modules) at a quarter of its widths, torchvision's kaiming
    initialization (the final convolution too: at std 0.01, or at PyTorch's default init, the ReLU'd logits stayed
    near 0 and the loss did not move)."""

    def __init__(self, dropout):
        super().__init__()
        fire = squeezenet.Fire
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, stride=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            fire(16, 4, 16, 16), fire(32, 4, 16, 16), nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            fire(32, 8, 32, 32), fire(64, 8, 32, 32))
        self.classifier = nn.Sequential(nn.Dropout(p=0.5 if dropout else 0.0), nn.Conv2d(64, CLASSES, kernel_size=1),
                                        nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.features(x)).flatten(1)


def densenet121(dropout):
    # Three dense blocks and no max pooling after the stem (the last block on 4x4 maps; with four blocks and the
    # pooling it was 1x1, and the runs chaotic).
    m = densenet.DenseNet(growth_rate=8, block_config=(2, 2, 2), num_init_features=16, bn_size=2,
                          drop_rate=0.2 if dropout else 0.0, num_classes=CLASSES)
    m.features.pool0 = nn.Identity()
    return m


def regnet_small(dropout):
    params = regnet.BlockParams.from_init_params(depth=4, w_0=8, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    m = regnet.RegNet(params, num_classes=CLASSES, stem_width=8)
    m.fc.reset_parameters()  # PyTorch's default init: torchvision's std 0.01 learned too slowly (9% in 15 steps)
    return m


def convnext_tiny(dropout):
    cfg = convnext.CNBlockConfig
    setting = [cfg(16, 32, 1), cfg(32, 64, 1), cfg(64, None, 1)]
    return convnext.ConvNeXt(setting, stochastic_depth_prob=0.0, num_classes=CLASSES)


def images():
    return images_classified(3, SIZE, CLASSES)


def spec(name, make, **kw):
    return Spec(name, "torchvision", make, images(), ["x"], loss="cross_entropy", **kw)


SPECS = [
    spec("resnet18", lambda dropout: SmallResNet(), lr_sgd=0.005, lr_adamw=3e-4),
    spec("mobilenet_v2", mobilenet_v2, lr_sgd=0.003, lr_adamw=3e-4),
    spec("mobilenet_v3", mobilenet_v3, lr_sgd=0.03, lr_adamw=2e-3, note="hardswish, squeeze-excitation"),
    # 20 steps at a low rate: one skipped fp16 step (its first, at the initial loss scale) then costs less.
    spec("efficientnet_b0", efficientnet_b0, steps=20, lr_sgd=0.001, lr_adamw=1e-4),
    spec("shufflenet_v2", shufflenet_v2, lr_sgd=0.005, lr_adamw=1e-3, note="channel shuffle"),
    # One batch (samples 8): over 4 batches it learned each only while it was seen, and bf16 moved it by 5-20%.
    spec("squeezenet", lambda dropout: SmallSqueezeNet(dropout), samples=8, lr_sgd=0.03, lr_adamw=2e-3),
    spec("densenet121", densenet121, lr_sgd=0.1, lr_adamw=1e-2),
    spec("regnet", regnet_small, lr_sgd=0.01, lr_adamw=1.5e-3, note="grouped convolutions"),
    spec("convnext_tiny", convnext_tiny, lr_sgd=0.02, lr_adamw=1e-3, note="channels-last LayerNorm, layer scale"),
]
