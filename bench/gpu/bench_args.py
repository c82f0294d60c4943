"""The command line shared by the GPU benchmark models (encoder.py, gpt2.py): OUT, the model's sizes, and the
PyTorch peer's settings. Each script gives its own defaults."""
import argparse


def parse(layers, hidden, heads, seq, vocab, samples, modes, batch, steps, description=None):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=layers)
    p.add_argument("--hidden", type=int, default=hidden)
    p.add_argument("--heads", type=int, default=heads)
    p.add_argument("--seq", type=int, default=seq)
    p.add_argument("--vocab", type=int, default=vocab)
    p.add_argument("--samples", type=int, default=samples)
    p.add_argument("--torch-bench", action="store_true", help="time PyTorch's step instead of exporting")
    p.add_argument("--modes", default=modes, help="the PyTorch runs, comma-separated")
    p.add_argument("--batch", type=int, default=batch)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=3, help="steps left out of the median")
    p.add_argument("--device", default="cuda")
    return p.parse_args()


def main(export, torch_bench, **defaults):
    """Parses the command line with the script's defaults, then exports the model or times PyTorch's step."""
    args = parse(**defaults)
    (torch_bench if args.torch_bench else export)(args)
