"""Hugging Face transformers models (4.36), each at a reduced width and depth, labels as an input and the loss
computed inside, every dropout (and layerdrop, masking) set to 0 unless dropout=True (then the config's defaults)."""
import transformers as tf
from torch import nn

from common import Positional, Spec, audio_classified, copy_tokens, counting_tokens, images_classified, \
    tokens_classified, tokens_tagged

VOCAB, SEQ, CLASSES, SIZE = 96, 16, 4, 32
TEXT = ["input_ids", "attention_mask", "labels"]
LM = ["input_ids", "labels"]
IMAGE = ["pixel_values", "labels"]


def no_dropout(cfg, dropout, keys):
    if not dropout:
        for k in keys:
            setattr(cfg, k, 0.0)
    return cfg


def wrap(model_cls, cfg, names):
    return Positional(model_cls(cfg), names, "loss")


BERT_DROPOUT = ["hidden_dropout_prob", "attention_probs_dropout_prob"]
SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=64)


def bert(dropout):
    cfg = tf.BertConfig(vocab_size=VOCAB, num_labels=CLASSES, **SMALL)
    return wrap(tf.BertForSequenceClassification, no_dropout(cfg, dropout, BERT_DROPOUT), TEXT)


def distilbert(dropout):
    cfg = tf.DistilBertConfig(vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                              max_position_embeddings=64, num_labels=CLASSES)
    return wrap(tf.DistilBertForSequenceClassification,
                no_dropout(cfg, dropout, ["dropout", "attention_dropout", "seq_classif_dropout"]), TEXT)


def roberta(dropout):
    # Position ids count the non-padding tokens (CumSum of input_ids != pad); pad is id 0 in the data.
    cfg = tf.RobertaConfig(vocab_size=VOCAB, num_labels=CLASSES, pad_token_id=0, **SMALL)
    return wrap(tf.RobertaForSequenceClassification, no_dropout(cfg, dropout, BERT_DROPOUT), TEXT)


def albert(dropout):
    cfg = tf.AlbertConfig(vocab_size=VOCAB, embedding_size=32, num_labels=CLASSES, **SMALL)
    return wrap(tf.AlbertForSequenceClassification,
                no_dropout(cfg, dropout, BERT_DROPOUT + ["classifier_dropout_prob"]), TEXT)


def electra_token(dropout):
    cfg = tf.ElectraConfig(vocab_size=VOCAB, embedding_size=32, num_labels=CLASSES, **SMALL)
    return wrap(tf.ElectraForTokenClassification, no_dropout(cfg, dropout, BERT_DROPOUT), TEXT)


def gpt2(dropout):
    cfg = tf.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, use_cache=False)
    return wrap(tf.GPT2LMHeadModel, no_dropout(cfg, dropout, ["resid_pdrop", "embd_pdrop", "attn_pdrop"]), LM)


def gpt_neo(dropout):
    cfg = tf.GPTNeoConfig(vocab_size=VOCAB, max_position_embeddings=64, hidden_size=64, num_layers=2,
                          attention_types=[[["global", "local"], 1]], num_heads=4, window_size=8,
                          intermediate_size=128, use_cache=False)
    return wrap(tf.GPTNeoForCausalLM, no_dropout(cfg, dropout, ["embed_dropout", "attention_dropout",
                                                               "resid_dropout"]), LM)


def opt(dropout):
    cfg = tf.OPTConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, ffn_dim=128, num_attention_heads=4,
                       max_position_embeddings=64, word_embed_proj_dim=64, use_cache=False, pad_token_id=1,
                       bos_token_id=2, eos_token_id=2)
    return wrap(tf.OPTForCausalLM, no_dropout(cfg, dropout, ["dropout", "attention_dropout", "layerdrop"]), LM)


def t5(dropout):
    cfg = tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
                      num_heads=4, relative_attention_num_buckets=8, decoder_start_token_id=0, pad_token_id=0,
                      use_cache=False)
    return wrap(tf.T5ForConditionalGeneration, no_dropout(cfg, dropout, ["dropout_rate"]), TEXT)


def bart(dropout):
    cfg = tf.BartConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=64,
                        pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2, use_cache=False)
    return wrap(tf.BartForConditionalGeneration,
                no_dropout(cfg, dropout, ["dropout", "attention_dropout", "activation_dropout", "classifier_dropout",
                                          "encoder_layerdrop", "decoder_layerdrop"]), TEXT)


VIT = dict(image_size=SIZE, patch_size=8, num_channels=3, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=128, num_labels=10)


def vit(dropout):
    return wrap(tf.ViTForImageClassification, no_dropout(tf.ViTConfig(**VIT), dropout, BERT_DROPOUT), IMAGE)


def deit(dropout):
    m = wrap(tf.DeiTForImageClassification, no_dropout(tf.DeiTConfig(**VIT), dropout, BERT_DROPOUT), IMAGE)
    # The class and distillation tokens and the position embeddings as ViT initializes them (truncated normal, std
    # 0.02), not DeiT's zeros: a zero token makes its LayerNorm's gradient 1/sqrt(eps = 1e-12), a gradient norm of
    # 3e4 that fp16 loss scaling can only meet by skipping a dozen steps (in PyTorch too).
    emb = m.m.deit.embeddings
    for p in (emb.cls_token, emb.distillation_token, emb.position_embeddings):
        nn.init.trunc_normal_(p, std=0.02)
    return m


def swin(dropout):
    # embed_dim 32 (16 learned too slowly for 15 steps).
    cfg = tf.SwinConfig(image_size=SIZE, patch_size=2, num_channels=3, embed_dim=32, depths=[2, 2], num_heads=[2, 4],
                        window_size=4, mlp_ratio=2.0, num_labels=10)
    # Drop path (stochastic depth) stays 0 even with dropout: torch 1.13 cannot export its bernoulli_.
    cfg.drop_path_rate = 0.0
    return wrap(tf.SwinForImageClassification, no_dropout(cfg, dropout, BERT_DROPOUT), IMAGE)


def wav2vec2(dropout):
    # feat_extract_activation="gelu_python" (the same erf GELU, written as elementwise ops): torch 1.13's fused GELU
    # backward on CPU returns garbage when its incoming gradient is not contiguous, which the feature encoder's last
    # GELU gets (its output is transposed), so PyTorch's own gradients were wrong and run to run different.
    cfg = tf.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                            feat_extract_activation="gelu_python",
                            conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), conv_bias=True,
                            num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_labels=CLASSES,
                            classifier_proj_size=32, feat_extract_norm="group", mask_time_prob=0.0,
                            mask_feature_prob=0.0, layerdrop=0.0)
    return wrap(tf.Wav2Vec2ForSequenceClassification,
                no_dropout(cfg, dropout, ["hidden_dropout", "attention_dropout", "activation_dropout",
                                          "feat_proj_dropout", "final_dropout"]), ["input_values", "labels"])


# The classifiers' first token (the label's source) is one of 8 ids, so that each recurs across the batches: with
# any of 95, SGD only memorized batch by batch and barely learned. electra_token's SGD is unstable from 0.05 up;
# bart's copy task starts only after a pass over the data, hence its 20 steps and high learning rates.
TOKENS = tokens_classified(VOCAB, SEQ, CLASSES, pad=True, first=8)

SPECS = [
    Spec("bert", "transformers", bert, TOKENS, TEXT, seq_inputs=["input_ids", "attention_mask"], lr_sgd=0.07,
         lr_adamw=1.5e-3, note="padded batches with attention masks"),
    Spec("distilbert", "transformers", distilbert, TOKENS, TEXT, seq_inputs=["input_ids", "attention_mask"],
         lr_sgd=0.1, lr_adamw=2e-3),
    Spec("roberta", "transformers", roberta, TOKENS, TEXT, seq_inputs=["input_ids", "attention_mask"], lr_sgd=0.07,
         lr_adamw=1.5e-3, note="position ids from the padding (CumSum)"),
    Spec("albert", "transformers", albert, TOKENS, TEXT, seq_inputs=["input_ids", "attention_mask"], lr_sgd=0.05,
         lr_adamw=1.5e-3, note="one layer shared twice"),
    Spec("electra_token", "transformers", electra_token, tokens_tagged(VOCAB, SEQ, CLASSES), TEXT,
         seq_inputs=["input_ids", "attention_mask", "labels"], lr_sgd=0.03, lr_adamw=1e-3,
         note="token classification"),
    Spec("gpt2", "transformers", gpt2, counting_tokens(VOCAB, SEQ), LM, seq_inputs=LM, lr_sgd=0.1, lr_adamw=3e-3,
         note="tied embeddings"),
    Spec("gpt_neo", "transformers", gpt_neo, counting_tokens(VOCAB, SEQ), LM, seq_inputs=LM, lr_sgd=0.1,
         lr_adamw=3e-3, note="local attention windows"),
    # The data leaves out ids 0-1: OPT's embedding has padding_idx 1 (pad_token_id), whose row PyTorch never trains
    # and an exported graph cannot tell apart (README: what an exported graph cannot say).
    Spec("opt", "transformers", opt, counting_tokens(VOCAB, SEQ, low=2), LM, seq_inputs=LM, lr_sgd=0.1, lr_adamw=3e-3),
    Spec("t5", "transformers", t5, copy_tokens(VOCAB, SEQ), TEXT, seq_inputs=TEXT, lr_sgd=0.1, lr_adamw=4e-3,
         note="encoder-decoder, relative position buckets"),
    Spec("bart", "transformers", bart, copy_tokens(VOCAB, SEQ, low=3), TEXT, seq_inputs=TEXT, steps=20, lr_sgd=1.0,
         lr_adamw=7e-3, note="encoder-decoder"),
    Spec("vit", "transformers", vit, images_classified(3, SIZE, 10, ("pixel_values", "labels")), IMAGE,
         lr_sgd=0.05, lr_adamw=1e-3, note="class token"),
    Spec("deit", "transformers", deit, images_classified(3, SIZE, 10, ("pixel_values", "labels")), IMAGE,
         lr_sgd=0.02, lr_adamw=1e-3),
    Spec("swin", "transformers", swin, images_classified(3, SIZE, 10, ("pixel_values", "labels")), IMAGE,
         lr_sgd=0.15, lr_adamw=3e-3, note="shifted windows"),
    Spec("wav2vec2", "transformers", wav2vec2, audio_classified(400, CLASSES), ["input_values", "labels"],
         lr_sgd=0.2, lr_adamw=4e-3, note="audio encoder, sequence classification"),
]
