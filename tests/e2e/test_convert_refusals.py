#!/usr/bin/env python3
# Python: the default python3 (onnx, numpy from pip).
"""kite-convert lists everything it cannot take in ONE message and writes nothing.

Two models, each with several problems that must all be reported at once:

  unknown_ops   three nodes whose op types Kite does not know at all (one in
                ai.onnx, one in a custom domain, one inside an If branch):
                the importer's list, "N node(s) use operators Kite does not
                support", one line per node with name, op, domain and opset.
  refused_nodes ops Kite knows, but with attribute modes or dtypes no backend
                runs: Resize antialias=1, Resize coordinate_transformation_mode
                tf_crop_and_resize, another Resize antialias=1 (inside the
                else branch of an If whose condition is a graph input, so the
                check must reach subgraphs), and MaxPool on uint8 (valid ONNX,
                accepted by the op rules, but the CPU kernel pools float32
                only; if a kernel gains one of these, pick another refusal).
                (Problems the op rules themselves reject, such as
                BatchNormalization training_mode=1, stop shape inference at
                that node and are reported alone.) The converter's
                support check after shape inference: "N node(s) cannot run",
                one line per node with name, op and the backend's reason.

For each: kite-convert exits non-zero, no output file exists afterwards, the
message names every offending node (and its op) and the count in its first
line is right, and no node that is fine is named.

Prints "PASS name" / "FAIL name: why", then "N passed, N failed"; exits 1 on
any failure.

Usage: tests/e2e/test_convert_refusals.py --kite-convert PATH --workdir DIR
"""
import os
import re
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def unknown_ops_model():
    then_g = helper.make_graph(
        [helper.make_node("Celu", ["x"], ["t"], name="celu_in_branch")], "then", [],
        [vi("t", TensorProto.FLOAT, [1, 2, 4, 4])])
    else_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["e"], name="fine_relu_in_branch")], "else", [],
        [vi("e", TensorProto.FLOAT, [1, 2, 4, 4])])
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="fine_relu"),
        helper.make_node("Det", ["r"], ["s"], name="det_node"),
        helper.make_node("FancyOp", ["s"], ["u"], name="custom_node", domain="com.example"),
        helper.make_node("If", ["flag"], ["v"], name="the_if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["u", "v"], ["y"], name="fine_add"),
    ]
    g = helper.make_graph(nodes, "unknown_ops",
                          [vi("x", TensorProto.FLOAT, [1, 2, 4, 4]), vi("flag", TensorProto.BOOL, [])],
                          [vi("y", TensorProto.FLOAT, [1, 2, 4, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.example", 1)])
    expected = {"det_node": "Det", "custom_node": "FancyOp", "celu_in_branch": "Celu"}
    return m, expected, r"(\d+) node\(s\) use operators Kite does not support"


def refused_nodes_model():
    sizes = numpy_helper.from_array(np.array([1, 2, 8, 8], dtype=np.int64), "sizes")
    roi = numpy_helper.from_array(np.array([0, 0, 0.1, 0.1, 1, 1, 0.9, 0.9], dtype=np.float32), "roi")
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "scales")
    then_g = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["t"], name="fine_resize_in_branch",
                          mode="linear")],
        "then", [], [vi("t", TensorProto.FLOAT, [1, 2, 8, 8])])
    else_g = helper.make_graph(
        [helper.make_node("Resize", ["x", "", "scales"], ["e"], name="resize_antialias_in_branch",
                          mode="linear", antialias=1)],
        "else", [], [vi("e", TensorProto.FLOAT, [1, 2, 8, 8])])
    nodes = [
        helper.make_node("Resize", ["x", "", "", "sizes"], ["a"], name="resize_antialias",
                         mode="linear", antialias=1),
        helper.make_node("Resize", ["x", "roi", "", "sizes"], ["b"], name="resize_crop",
                         mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
        helper.make_node("If", ["flag"], ["c"], name="the_if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Add", ["a", "b"], ["ab"], name="fine_add"),
        helper.make_node("Add", ["ab", "c"], ["y"], name="fine_add_2"),
        helper.make_node("MaxPool", ["k"], ["z"], name="maxpool_uint8", kernel_shape=[2, 2]),
    ]
    g = helper.make_graph(nodes, "refused_nodes",
                          [vi("x", TensorProto.FLOAT, [1, 2, 4, 4]), vi("flag", TensorProto.BOOL, []),
                           vi("k", TensorProto.UINT8, [1, 1, 4, 4])],
                          [vi("y", TensorProto.FLOAT, [1, 2, 8, 8]), vi("z", TensorProto.UINT8, [1, 1, 3, 3])],
                          initializer=[sizes, roi, scales])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    expected = {"resize_antialias": "Resize", "resize_crop": "Resize",
                "resize_antialias_in_branch": "Resize", "maxpool_uint8": "MaxPool"}
    return m, expected, r"(\d+) node\(s\) cannot run"


def main():
    args = kite_driver.parse_args(kite_driver.tool_parser(__doc__, tools=("kite-convert",)))
    verdicts = kite_driver.Verdicts()
    for build in (unknown_ops_model, refused_nodes_model):
        model, expected, header = build()
        model.ir_version = 9
        name = model.graph.name
        onnx_path = os.path.join(args.workdir, name + ".onnx")
        onnx.save(model, onnx_path)
        rc, msg, problems = kite_driver.convert_refused(args.kite_convert, onnx_path,
                                                    os.path.join(args.workdir, name + ".kite"))
        m = re.search(header, msg)
        if not m:
            problems.append(f"no '{header}' line")
        elif int(m.group(1)) != len(expected):
            problems.append(f"the message counts {m.group(1)} nodes, expected {len(expected)}")
        for node, op in expected.items():
            line = next((l for l in msg.splitlines() if f"'{node}'" in l), None)
            if line is None:
                problems.append(f"node '{node}' is not named")
            elif op not in line:
                problems.append(f"the line for '{node}' does not name op {op}: {line.strip()}")
        for fine in re.findall(r"'(fine_[a-z_0-9]+)'", msg):
            problems.append(f"node '{fine}' is fine but named")
        print("=" * 8, name, f"(kite-convert exit {rc})")
        print(msg.rstrip())
        verdicts.check(name, problems)
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
