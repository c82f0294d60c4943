"""Times ONNX Runtime's CPU inference of MODEL on INPUT.npz: prints 'median_ms best_ms'. Only the arrays named after
the model's inputs are fed (a training .npz also holds labels); with BATCH, their first BATCH rows.
Usage: ort_peer.py MODEL INPUT.npz THREADS RUNS [BATCH]"""
import sys
import time

import numpy as np
import onnxruntime as ort

model, data, threads, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
batch = int(sys.argv[5]) if len(sys.argv) > 5 else None
arrays = np.load(data)
feeds = {i.name: arrays[i.name][:batch] for i in sess.get_inputs()}
sess.run(None, feeds)
ms = []
for _ in range(runs):
    t0 = time.perf_counter()
    sess.run(None, feeds)
    ms.append((time.perf_counter() - t0) * 1e3)
ms.sort()
print(f"{ms[len(ms) // 2]:.3f} {ms[0]:.3f}")
