"""The corpus's families (tests/models/zoo_*.py) at their published sizes, for bench/models.py: the libraries'
default configurations (BERT-base, GPT-2 124M, T5-small, ViT-B/16, ResNet-18, ...) with random weights, every
dropout off, text of 128 tokens and images of 224x224 (32x32 for the CIFAR-sized timm models is not used: all at
224), batches sized for a 2-core machine. The data is random (the timing needs no learning)."""
import numpy as np
import timm
from torch import nn
import transformers as tf
from torchvision import models as tv

from common import Positional, Spec
from zoo_torch import PosSliceLM

SEQ, SIZE = 128, 224


def text(vocab, names, labels="class", classes=2):
    def gen(rng, n):
        ids = rng.integers(3, vocab, size=(n, SEQ), dtype=np.int64)
        out = {"input_ids": ids, "attention_mask": np.ones((n, SEQ), np.int64)}
        out["labels"] = ids.copy() if labels == "tokens" else (
            ids % classes if labels == "tags" else rng.integers(0, classes, size=n).astype(np.int64))
        return {k: out[k] for k in names}
    return gen


def images(names=("x", "y"), classes=1000):
    def gen(rng, n):
        return {names[0]: rng.standard_normal((n, 3, SIZE, SIZE)).astype(np.float32),
                names[1]: rng.integers(0, classes, size=n).astype(np.int64)}
    return gen


def audio(rng, n):
    return {"input_values": rng.standard_normal((n, 16000)).astype(np.float32),
            "labels": rng.integers(0, 2, size=n).astype(np.int64)}


def no_dropout(m):
    """Every nn.Dropout of m at p = 0 (for constructors that take no dropout argument)."""
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
    return m


def hf(cls, cfg, names, drop_keys):
    def make(dropout):
        for k in drop_keys:
            setattr(cfg, k, 0.0)
        return Positional(cls(cfg), names, "loss")
    return make


TEXT = ["input_ids", "attention_mask", "labels"]
LM = ["input_ids", "labels"]
IMAGE = ["pixel_values", "labels"]
BERT_DROP = ["hidden_dropout_prob", "attention_probs_dropout_prob"]


def text_spec(name, cls, cfg, names=TEXT, drop=BERT_DROP, labels="class", batch=4, vocab=None):
    v = vocab or cfg.vocab_size
    return Spec(name, "transformers", hf(cls, cfg, names, drop), text(v, names, labels), names, batch=batch)


def vision(name, library, make, batch=4):
    return Spec(name, library, lambda dropout: make(), images(), ["x"], loss="cross_entropy", batch=batch)


FULL = [
    text_spec("bert", tf.BertForSequenceClassification, tf.BertConfig()),
    text_spec("distilbert", tf.DistilBertForSequenceClassification, tf.DistilBertConfig(),
              drop=["dropout", "attention_dropout", "seq_classif_dropout"]),
    text_spec("roberta", tf.RobertaForSequenceClassification, tf.RobertaConfig(vocab_size=50265, pad_token_id=1,
                                                                               max_position_embeddings=514,
                                                                               type_vocab_size=1)),
    text_spec("albert", tf.AlbertForSequenceClassification, tf.AlbertConfig(hidden_size=768, num_attention_heads=12,
                                                                            intermediate_size=3072),
              drop=BERT_DROP + ["classifier_dropout_prob"]),
    text_spec("electra_token", tf.ElectraForTokenClassification, tf.ElectraConfig(num_labels=9), labels="tags"),
    text_spec("gpt2", tf.GPT2LMHeadModel, tf.GPT2Config(use_cache=False), LM, ["resid_pdrop", "embd_pdrop", "attn_pdrop"],
              "tokens"),
    text_spec("gpt_neo", tf.GPTNeoForCausalLM, tf.GPTNeoConfig(hidden_size=768, num_layers=12, num_heads=12,
                                                               attention_types=[[["global", "local"], 6]],
                                                               use_cache=False), LM,
              ["embed_dropout", "attention_dropout", "resid_dropout"], "tokens"),
    text_spec("opt", tf.OPTForCausalLM, tf.OPTConfig(use_cache=False), LM, ["dropout", "attention_dropout", "layerdrop"],
              "tokens"),
    text_spec("t5", tf.T5ForConditionalGeneration, tf.T5Config(decoder_start_token_id=0, use_cache=False), TEXT,
              ["dropout_rate"], "tokens"),
    text_spec("bart", tf.BartForConditionalGeneration, tf.BartConfig(use_cache=False), TEXT,
              ["dropout", "attention_dropout", "activation_dropout", "encoder_layerdrop", "decoder_layerdrop"], "tokens"),
    Spec("vit", "transformers", hf(tf.ViTForImageClassification, tf.ViTConfig(num_labels=1000), IMAGE, BERT_DROP),
         images(IMAGE), IMAGE, batch=4),
    Spec("deit", "transformers", hf(tf.DeiTForImageClassification, tf.DeiTConfig(hidden_size=384, num_attention_heads=6,
                                                                                  intermediate_size=1536, num_labels=1000),
                                    IMAGE, BERT_DROP), images(IMAGE), IMAGE, batch=4),
    Spec("swin", "transformers", hf(tf.SwinForImageClassification, tf.SwinConfig(num_labels=1000, drop_path_rate=0.0),
                                    IMAGE, BERT_DROP), images(IMAGE), IMAGE, batch=4),
    Spec("wav2vec2", "transformers", hf(tf.Wav2Vec2ForSequenceClassification,
                                        tf.Wav2Vec2Config(mask_time_prob=0.0, layerdrop=0.0), ["input_values", "labels"],
                                        ["hidden_dropout", "attention_dropout", "activation_dropout", "feat_proj_dropout",
                                         "final_dropout"]), audio, ["input_values", "labels"], batch=2),
    vision("resnet18", "torchvision", tv.resnet18),
    vision("mobilenet_v2", "torchvision", lambda: tv.mobilenet_v2(dropout=0.0)),
    vision("mobilenet_v3", "torchvision", lambda: tv.mobilenet_v3_small(dropout=0.0)),
    vision("efficientnet_b0", "torchvision", lambda: no_dropout(tv.efficientnet_b0(stochastic_depth_prob=0.0))),
    vision("shufflenet_v2", "torchvision", tv.shufflenet_v2_x1_0),
    vision("squeezenet", "torchvision", lambda: tv.squeezenet1_1(dropout=0.0)),
    vision("densenet121", "torchvision", tv.densenet121),
    vision("regnet", "torchvision", tv.regnet_y_400mf),
    vision("convnext_tiny", "torchvision", lambda: tv.convnext_tiny(stochastic_depth_prob=0.0)),
    vision("mlp_mixer", "timm", lambda: timm.create_model("mixer_s16_224")),
    vision("resmlp", "timm", lambda: timm.create_model("resmlp_12_224")),
    vision("gmlp", "timm", lambda: timm.create_model("gmlp_ti16_224")),
    vision("cait", "timm", lambda: timm.create_model("cait_xxs24_224")),
    vision("poolformer", "timm", lambda: timm.create_model("poolformer_s12")),
    vision("xcit", "timm", lambda: timm.create_model("xcit_nano_12_p16_224")),
    # The CPU-speed issue's transformer LM: tests/models/zoo_torch.py's LM at d 256, 4 layers, 4 heads, T 128,
    # batch 16 (a vocabulary of 8192).
    Spec("lm_d256", "torch", lambda dropout: PosSliceLM(False, 8192, 256, SEQ, 4, 4), text(8192, LM, "tokens"), LM,
         batch=16),
    # tests/models/zoo_torch.py's LM at GPT-2 small's width and depth (768, 12 layers, 12 heads).
    Spec("pos_slice_lm", "torch", lambda dropout: PosSliceLM(False, 50257, 768, 1024, 12, 12),
         text(50257, LM, "tokens"), LM, batch=4),
]
