"""Writes the small malformed models and data files that tests/cli/errors.sh feeds to onnx-train.
Run with a Python that has onnx and numpy (scripts/onnx-newer-tests .venv): .venv/bin/python tests/cli/make_bad_models.py
"""
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
os.makedirs(here, exist_ok=True)


def save(model, name):
    with open(os.path.join(here, name), "wb") as f:
        f.write(model.SerializeToString())


def add_model(y_dims=(3,), extra_nodes=(), inits=(), op="Add", inputs=("x", "y")):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y_dims))
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    nodes = [helper.make_node(op, list(inputs), ["z"], name="add1")] + list(extra_nodes)
    g = helper.make_graph(nodes, "g", [x, y], [z], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="bad-models")


good = add_model()
save(good, "good.onnx")
b = good.SerializeToString()
with open(os.path.join(here, "truncated.onnx"), "wb") as f:
    f.write(b[: len(b) // 2])
rng = random.Random(1234)
with open(os.path.join(here, "random.onnx"), "wb") as f:
    f.write(bytes(rng.randrange(256) for _ in range(4096)))
save(add_model(inputs=("x", "nope")), "missing_input.onnx")
save(add_model(y_dims=(4,)), "shape_mismatch.onnx")
save(add_model(op="Resize"), "unsupported_op.onnx")

# Two ops that stay unsupported -- a custom-domain op and an If -- between a trainable weight and the output: every
# command names both, one line each, before anything else can fail on their unknown outputs.
def unsupported_two():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, None)
    w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
    branch = lambda name: helper.make_graph(
        [helper.make_node("Identity", ["c"], [name + "_out"])], name, [],
        [helper.make_tensor_value_info(name + "_out", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Foo", ["x"], ["c"], name="custom1", domain="com.example"),
             helper.make_node("ReduceSum", ["c"], ["s"], name="sum1", keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"], name="cmp1"),
             helper.make_node("If", ["cond"], ["b"], name="if1", then_branch=branch("then"),
                              else_branch=branch("else")),
             helper.make_node("MatMul", ["b", "w"], ["z"], name="mm1")]
    zero = numpy_helper.from_array(np.zeros((), np.float32), "zero")
    g = helper.make_graph(nodes, "g", [x], [z], initializer=[w, zero])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                             producer_name="bad-models")


save(unsupported_two(), "unsupported_two.onnx")

# Initializers whose data lives outside the model's folder, or whose declared size disagrees with the bytes.
def with_init(t, name):
    m = add_model(inputs=("x", "w"), inits=[t])
    save(m, name)

for loc, name in [("../outside.bin", "external_escape.onnx"), ("/etc/hostname", "external_absolute.onnx")]:
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3])
    t.data_location = TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", loc
    with_init(t, name)
t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3, 4], raw_data=b"\0" * 40)
with_init(t, "size_mismatch.onnx")

# A Relu given three inputs; a model newer than onnx-train knows (opset, IR version); a node of a domain the model
# does not import; a ConstantOfShape of 10^12 floats (4 TB) feeding the output.
save(add_model(op="Relu", inputs=("x", "y", "y")), "relu_three_inputs.onnx")
m = add_model()
m.opset_import[0].version = 99
save(m, "opset99.onnx")
m = add_model()
m.ir_version = 99
save(m, "ir99.onnx")
m = add_model()
del m.opset_import[:]
m.opset_import.append(helper.make_opsetid("com.example", 1))
save(m, "no_onnx_opset.onnx")
shape = numpy_helper.from_array(np.array([1000000, 1000000], np.int64), "shape")
save(add_model(inputs=("c", "c"), inits=[shape],
               extra_nodes=[helper.make_node("ConstantOfShape", ["shape"], ["c"], name="huge")]), "huge_constant.onnx")

x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
np.savez(os.path.join(here, "good.npz"), x=x, y=np.ones(3, np.float32))
np.savez(os.path.join(here, "wrong_shape.npz"), x=x, y=np.ones(5, np.float32))
np.savez(os.path.join(here, "shape_mismatch.npz"), x=x, y=np.ones(4, np.float32))
np.savez(os.path.join(here, "wrong_name.npz"), x=x, why=np.ones(3, np.float32))
np.savez(os.path.join(here, "unsupported_two.npz"), x=x, z=np.ones((2, 3), np.float32))
with open(os.path.join(here, "good.npz"), "rb") as f:
    data = f.read()
with open(os.path.join(here, "truncated.npz"), "wb") as f:
    f.write(data[: len(data) // 2])
print("wrote", sorted(os.listdir(here)))
