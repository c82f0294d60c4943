"""Fashion-MNIST idx files -> train.npz / test.npz for the fashion CNN example, with the Python standard library
only (no NumPy), so that `make demo` runs it on a fresh machine with a plain python3.

    python3 examples/fashion_cnn/convert.py [--src DIR] [--out DIR] [--limit N]

  --src    the idx files (train-images-idx3-ubyte[.gz] ...; default /usr/share/datasets/fashion-mnist, from
           Debian's dataset-fashion-mnist)
  --out    where train.npz and test.npz go (default: the current directory)
  --limit  keep only the first N images of each split (quick runs)

Writes, as NumPy's savez would (stored zip members x.npy and y.npy, .npy format version 1.0):
  x  float32 [N, 1, 28, 28]: pixel / 255, computed as float32(pixel) / float32(255) (what numpy and
     torchvision's ToTensor give: every value is the correctly rounded float32 quotient)
  y  int64 [N]: the class id 0..9
"""
import argparse
import gzip
import os
import struct
import sys
import zipfile


def read_idx(path):
    """Returns (dims, raw uint8 bytes) of an idx file of unsigned bytes (type code 0x08), gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0:
        sys.exit(f"{path}: not an idx file (bad magic)")
    if data[2] != 0x08:
        sys.exit(f"{path}: idx type code 0x{data[2]:02x}, expected 0x08 (unsigned byte)")
    rank = data[3]
    dims = list(struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank]))
    body = data[4 + 4 * rank:]
    count = 1
    for d in dims:
        count *= d
    if len(body) != count:
        sys.exit(f"{path}: {len(body)} data bytes, the header {dims} says {count}")
    return dims, body


def find(src, stem):
    for name in (stem + ".gz", stem):
        p = os.path.join(src, name)
        if os.path.exists(p):
            return p
    sys.exit(f"{src}: neither {stem}.gz nor {stem} exists (install dataset-fashion-mnist or give --src)")


def pixels_to_f32(u8):
    """uint8 bytes -> little-endian float32 bytes of pixel/255, at C speed: each of the 4 bytes of the float32
    image of a pixel value comes from a 256-entry translation table, written with a strided slice."""
    table = [struct.pack("<f", v / 255.0) for v in range(256)]
    # v/255 in double, then rounded to float32, equals float32(v)/float32(255) for every v in 0..255 (the
    # double quotient never sits on a float32 rounding midpoint); checked against NumPy in export.py.
    out = bytearray(4 * len(u8))
    for k in range(4):
        out[k::4] = u8.translate(bytes(t[k] for t in table))
    return bytes(out)


def labels_to_i64(u8):
    out = bytearray(8 * len(u8))
    out[0::8] = u8  # little-endian int64 of a byte 0..255: the byte, then seven zero bytes
    return bytes(out)


def npy(descr, shape, payload):
    """The .npy format, version 1.0: magic, header length, a Python-literal dict padded with spaces to a
    multiple of 64 bytes (ending in a newline), then the C-order data."""
    shape_s = "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_s)
    total = 10 + len(header) + 1
    header += " " * ((64 - total % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + payload


def write_npz(path, arrays):
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
        for name, data in arrays:
            z.writestr(zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), data)
    os.replace(tmp, path)


def convert(src, out, split, prefix, limit):
    idims, images = read_idx(find(src, prefix + "-images-idx3-ubyte"))
    ldims, labels = read_idx(find(src, prefix + "-labels-idx1-ubyte"))
    if len(idims) != 3 or len(ldims) != 1 or idims[0] != ldims[0]:
        sys.exit(f"{src}: {prefix} images {idims} and labels {ldims} do not match")
    n, h, w = idims
    if limit is not None:
        n = min(n, limit)
    images, labels = images[:n * h * w], labels[:n]
    if max(labels) > 9:
        sys.exit(f"{src}: {prefix} labels outside 0..9")
    path = os.path.join(out, split + ".npz")
    write_npz(path, [("x", npy("<f4", (n, 1, h, w), pixels_to_f32(images))),
                     ("y", npy("<i8", (n,), labels_to_i64(labels)))])
    print(f"wrote {path}: x float32[{n},1,{h},{w}], y int64[{n}]")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--out", default=".")
    ap.add_argument("--limit", type=int, default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    convert(a.src, a.out, "train", "train", a.limit)
    convert(a.src, a.out, "test", "t10k", a.limit)


if __name__ == "__main__":
    main()
