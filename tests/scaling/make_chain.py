"""Writes a Gemm followed by a chain of N Relu nodes (the compile-time scaling model) and its data.

    python make_chain.py N OUT_DIR   ->  OUT_DIR/chainN.onnx, OUT_DIR/chainN_run.npz (x), OUT_DIR/chainN_train.npz (x, t)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(n)
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
w = numpy_helper.from_array((rng.standard_normal((16, 16)) * 0.1).astype(np.float32), "w")
b = numpy_helper.from_array(np.full(16, 0.1, np.float32), "b")
nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h0"], name="gemm")]
for i in range(n):
    nodes.append(helper.make_node("Relu", [f"h{i}"], [f"h{i + 1}" if i + 1 < n else "y"], name=f"relu{i}"))
g = helper.make_graph(nodes, "chain", [x], [y], initializer=[w, b])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), os.path.join(out, f"chain{n}.onnx"))
xs = rng.standard_normal((8, 16)).astype(np.float32)
np.savez(os.path.join(out, f"chain{n}_run.npz"), x=xs)
np.savez(os.path.join(out, f"chain{n}_train.npz"), x=xs, t=rng.standard_normal((8, 16)).astype(np.float32))
