"""The speech CTC example's data: random digit strings ("three one four", 2 to 5 digits, zero sometimes said
"oh") spoken by espeak-ng with many voices, speeds and pitches, as log-mel features, with character labels for a
CTC loss. The test split is spoken by voice variants that the training split never uses (unseen voices).

Needs espeak-ng (Debian: espeak-ng; scripts/bootstrap installs it) and NumPy; standard library otherwise (runs
with /usr/bin/python3 or .venv/bin/python):
    /usr/bin/python3 examples/speech_ctc/make_data.py --out DIR [--train 3000] [--test 500] [--seed 0]
Writes:
  DIR/train.npz, DIR/test.npz   (the same T and S in both)
    x              float32[N, 40, T]  log-mel features (40 bins, 25 ms Hamming window, 10 ms hop, each bin
                                      normalized to mean 0 and variance 1 over the utterance), zero past the
                                      utterance's frames; T = the longest utterance of both splits, rounded up to a
                                      multiple of 4
    labels         int64[N, S]        character ids (vocab.txt), 0 past label_lengths
    label_lengths  int64[N]
    logit_lengths  int64[N]           frames after the model's front end (Conv1d(kernel 5, stride 2, padding 2),
                                      then Conv1d(kernel 3, stride 1, padding 1); see subsampled_length) applied
                                      to the utterance's frame count: the lengths of the logits for the CTC loss
  DIR/vocab.txt  line i = symbol of id i: <blank> (id 0, the CTC blank), <space> (between words), the letters
Same seed, sizes and espeak-ng version: the same files. Each split is synthesized in a few espeak-ng calls (one per
voice, utterances separated by SSML breaks, cut apart at the silences), in a temporary directory removed at the end.
"""
import argparse
import os
import shutil
import subprocess
import tempfile
import time
import wave

import numpy as np

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
OH_PROB = 0.25  # zero is said "oh" this often
LETTERS = sorted(set("".join(WORDS) + "oh"))
VOCAB = ["<blank>", "<space>"] + LETTERS
CHAR_ID = {c: i for i, c in enumerate(VOCAB)}
CHAR_ID[" "] = CHAR_ID["<space>"]

# espeak-ng's English voices (accents) and voice variants. The variants of the two splits are disjoint.
BASES = ["en-us", "en", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-gb-x-gbcwmd", "en-029", "en-us-nyc"]
TRAIN_VARIANTS = ["", "m1", "m2", "m4", "m5", "m7", "m8", "f1", "f3", "f5"]
TEST_VARIANTS = ["m3", "m6", "f2", "f4"]

RATE = 22050  # espeak-ng's output
N_MELS, WIN, HOP, N_FFT = 40, 551, 220, 1024  # 25 ms window, 10 ms hop at 22050 Hz
FMIN, FMAX = 60.0, 8000.0

# the model's front end (export.py): Conv1d(kernel 5, stride 2, padding 2), Conv1d(kernel 3, stride 1, padding 1)
CONVS = [(5, 2, 2), (3, 1, 1)]  # (kernel, stride, padding)


def subsampled_length(frames):
    """Frames after the conv front end: out = floor((in + 2 * padding - kernel) / stride) + 1 per conv."""
    for k, s, p in CONVS:
        frames = (frames + 2 * p - k) // s + 1
    return frames


def encode(text):
    return [CHAR_ID[c] for c in text]


def mel_filterbank():
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)

    mels = np.linspace(hz_to_mel(FMIN), hz_to_mel(FMAX), N_MELS + 2)
    hz = 700.0 * (10.0 ** (mels / 2595.0) - 1.0)
    bins = np.fft.rfftfreq(N_FFT, 1.0 / RATE)
    fb = np.zeros((N_MELS, len(bins)))
    for m in range(N_MELS):
        lo, mid, hi = hz[m], hz[m + 1], hz[m + 2]
        fb[m] = np.maximum(0.0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))
    return fb[:, :np.nonzero(fb.any(0))[0][-1] + 1]  # the bins above FMAX have no weight


FBANK = mel_filterbank()
WINDOW = np.hamming(WIN)


def log_mel(audio):
    """audio: float64 samples -> float32 [N_MELS, frames], each bin normalized over the utterance."""
    audio = np.append(audio[0], audio[1:] - 0.97 * audio[:-1])  # pre-emphasis
    frames = 1 + (len(audio) - WIN) // HOP
    idx = np.arange(WIN)[None, :] + HOP * np.arange(frames)[:, None]
    spec = np.fft.rfft(audio[idx] * WINDOW, N_FFT)[:, :FBANK.shape[1]]
    power = spec.real ** 2 + spec.imag ** 2
    feat = np.log(power @ FBANK.T + 1e-3).T
    feat = (feat - feat.mean(1, keepdims=True)) / (feat.std(1, keepdims=True) + 1e-5)
    return feat.astype(np.float32)


def read_wav(path):
    with wave.open(path) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2, path
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float64)


def speak(ssml_items, voice, tmp, name):
    """ssml_items: SSML fragments; one espeak-ng call -> one array of samples per fragment, or None when the
    silences do not cut the recording into exactly that many pieces."""
    brk = '<break time="1500ms"/>'
    path = os.path.join(tmp, name + ".wav")
    ssml = "<speak>" + brk.join(ssml_items) + brk + "</speak>"
    subprocess.run(["espeak-ng", "-m", "-v", voice, "-s", "160", "-w", path, ssml], check=True,
                   stdout=subprocess.DEVNULL)
    audio = read_wav(path)
    os.remove(path)
    block = 220
    peak = np.abs(audio[:len(audio) // block * block]).reshape(-1, block).max(1)
    loud = peak > 2
    # a piece: blocks between silent runs of >= 0.5 s (50 blocks)
    pieces, start, quiet = [], None, 0
    for i, v in enumerate(loud):
        if v:
            if start is None:
                start = i
            quiet, last = 0, i
        elif start is not None:
            quiet += 1
            if quiet >= 50:
                pieces.append((start, last + 1))
                start = None
    if start is not None:
        pieces.append((start, last + 1))
    if len(pieces) != len(ssml_items):
        return None
    out = []
    for a, b in pieces:
        seg = peak[a:b]
        on = np.nonzero(seg > 0.005 * seg.max())[0]  # trim the faint start and tail
        a, b = a + max(on[0] - 3, 0), a + min(on[-1] + 4, b - a)
        out.append(audio[a * block:b * block])
    return out


def prosody(text, rate, pitch):
    return f'<s><prosody rate="{rate}%" pitch="{pitch:+d}%">{text}</prosody></s>'


def synthesize(n, variants, rng, tmp, tag):
    """n utterances spoken by voices with the given variants -> (texts, features [N_MELS, frames], voices)."""
    texts, voices, items = [], [], []
    for _ in range(n):
        digits = rng.integers(0, 10, rng.integers(2, 6))
        words = [("oh" if d == 0 and rng.random() < OH_PROB else WORDS[d]) for d in digits]
        texts.append(" ".join(words))
        voice = BASES[rng.integers(len(BASES))]
        variant = variants[rng.integers(len(variants))]
        voices.append(voice + ("+" + variant if variant else ""))
        items.append(prosody(texts[-1], int(rng.integers(75, 136)), int(rng.integers(-30, 31))))
    snr_db = rng.uniform(20.0, 45.0, n)  # white noise added to each utterance
    noise_seeds = rng.integers(0, 2**31, n)
    audio = [None] * n
    for voice in sorted(set(voices)):
        idx = [i for i in range(n) if voices[i] == voice]
        for c in range(0, len(idx), 200):
            chunk = idx[c:c + 200]
            pieces = speak([items[i] for i in chunk], voice, tmp, f"{tag}_{c}")
            if pieces is None:  # the silences did not separate them: one call each
                pieces = [speak([items[i]], voice, tmp, f"{tag}_{c}") for i in chunk]
                if any(p is None for p in pieces):
                    raise RuntimeError(f"espeak-ng -v {voice}: an utterance came out in several pieces")
                pieces = [p[0] for p in pieces]
            for i, p in zip(chunk, pieces):
                audio[i] = p
    feats = []
    for i in range(n):
        a = audio[i]
        noise = np.random.default_rng(noise_seeds[i]).standard_normal(len(a))
        a = a + noise * np.sqrt(np.mean(a * a)) * 10.0 ** (-snr_db[i] / 20.0)
        feats.append(log_mel(a))
    return texts, feats, voices


def pack(texts, feats, T, S):
    n = len(texts)
    x = np.zeros((n, N_MELS, T), np.float32)
    labels = np.zeros((n, S), np.int64)
    label_lengths = np.zeros(n, np.int64)
    logit_lengths = np.zeros(n, np.int64)
    for i, (t, f) in enumerate(zip(texts, feats)):
        x[i, :, :f.shape[1]] = f
        ids = encode(t)
        labels[i, :len(ids)] = ids
        label_lengths[i] = len(ids)
        logit_lengths[i] = subsampled_length(f.shape[1])
        assert logit_lengths[i] >= len(ids) + sum(a == b for a, b in zip(ids, ids[1:])), t  # CTC can align it
    return dict(x=x, labels=labels, label_lengths=label_lengths, logit_lengths=logit_lengths)


def generate(splits, seed):
    """splits: {"train": n, "test": n} -> {name: arrays}, with one T and S over all of them."""
    rng = np.random.default_rng(seed)
    tmp = tempfile.mkdtemp(prefix="speech_ctc_")
    try:
        raw = {name: synthesize(n, TRAIN_VARIANTS if name == "train" else TEST_VARIANTS, rng, tmp, name)
               for name, n in splits.items()}
    finally:
        shutil.rmtree(tmp)
    T = max(f.shape[1] for texts, feats, _ in raw.values() for f in feats)
    T = (T + 3) // 4 * 4
    S = max(len(t) for texts, _, _ in raw.values() for t in texts)
    return {name: pack(texts, feats, T, S) for name, (texts, feats, _) in raw.items()}


def save(path, arrays, compressed=False):
    """np.savez (np.savez_compressed) to a temporary file, renamed (numpy's .npz have no timestamps: the same
    arrays and numpy version give the same bytes)."""
    with open(path + ".tmp", "wb") as f:
        (np.savez_compressed if compressed else np.savez)(f, **arrays)
    os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=3000)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.time()
    data = generate({"train": args.train, "test": args.test}, args.seed)
    os.makedirs(args.out, exist_ok=True)
    for name, arrays in data.items():
        save(os.path.join(args.out, name + ".npz"), arrays)
        print(f"{name}.npz: x {arrays['x'].shape}, labels {arrays['labels'].shape}, "
              f"frames {arrays['logit_lengths'].min()}..{arrays['logit_lengths'].max()} after subsampling")
    with open(os.path.join(args.out, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    print(f"{len(VOCAB)} classes; {args.train + args.test} utterances in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
