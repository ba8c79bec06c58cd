#!/usr/bin/env python3
# Python: the default python3 (onnx, onnxruntime, numpy from pip).
"""The ops whose form changed between opsets 11 and 21, at each form, against onnxruntime.

ONNX's node tests mostly exercise an op at its newest opset. Exporters emit
older ones, so this builds one small model per (op, form, opset) -- ReduceMean
and ReduceSum with axes as attribute and as input, Split with 'split' as
attribute and as input (and opset 18's num_outputs), Clip with min/max as
attributes (opset 6 semantics are below 11, so only inputs, with one omitted),
Pad at 11 and with axes at 18, Squeeze/Unsqueeze with axes as attribute (11)
and input (13), Resize at 11 (roi required) and 13/18/19, Softmax/LogSoftmax
with the pre-13 2-D coercion, Dropout with ratio attribute (11) and input (12)
-- converts each with kite-convert, runs kite-run and compares with
onnxruntime on the same file: float |diff| <= 1e-6 + 1e-5*|ref| (single ops,
float32), integers exactly. Prints "PASS name" / "FAIL name: why" and
"N passed, N failed"; exits 1 on any failure.

Usage: tests/conformance/test_opset_variants.py --kite-convert PATH --kite-run PATH --workdir DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def const(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def case(name, opset, nodes, inputs, outputs, inits=(), feeds=None):
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                          [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 7
    return name, m, feeds


def cases():
    rs = np.random.RandomState(0)
    x = rs.standard_normal((2, 3, 4, 5)).astype(np.float32)
    v = rs.standard_normal((2, 6)).astype(np.float32)
    out = []
    # Reductions: axes attribute (<13 for ReduceSum, <18 for the others), input after.
    for op, attr_opsets, input_opsets in (("ReduceMean", (11, 13, 17), (18, 21)),
                                          ("ReduceSum", (11,), (13, 18, 21)),
                                          ("ReduceMax", (11, 13), (18, 20))):
        for o in attr_opsets:
            out.append(case(f"{op}_attr_opset{o}", o,
                            [helper.make_node(op, ["x"], ["y"], axes=[1, -1], keepdims=1)],
                            [("x", F, x.shape)], [("y", F, None)], feeds={"x": x}))
        for o in input_opsets:
            out.append(case(f"{op}_input_opset{o}", o,
                            [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
                            [("x", F, x.shape)], [("y", F, None)], [const("axes", [1, -1])],
                            feeds={"x": x}))
    # Split: attribute (11), input (13), num_outputs (18).
    out.append(case("Split_attr_opset11", 11,
                    [helper.make_node("Split", ["v"], ["a", "b"], axis=1, split=[2, 4])],
                    [("v", F, v.shape)], [("a", F, None), ("b", F, None)], feeds={"v": v}))
    out.append(case("Split_equal_opset11", 11,
                    [helper.make_node("Split", ["v"], ["a", "b", "c"], axis=1)],
                    [("v", F, v.shape)], [("a", F, None), ("b", F, None), ("c", F, None)],
                    feeds={"v": v}))
    for o in (13, 18):
        out.append(case(f"Split_input_opset{o}", o,
                        [helper.make_node("Split", ["v", "s"], ["a", "b"], axis=1)],
                        [("v", F, v.shape)], [("a", F, None), ("b", F, None)], [const("s", [4, 2])],
                        feeds={"v": v}))
    out.append(case("Split_num_outputs_opset18", 18,
                    [helper.make_node("Split", ["v"], ["a", "b", "c"], axis=1, num_outputs=3)],
                    [("v", F, v.shape)], [("a", F, None), ("b", F, None), ("c", F, None)],
                    feeds={"v": v}))
    # Clip: min/max inputs since 11, either may be omitted.
    for o in (11, 13):
        out.append(case(f"Clip_min_max_opset{o}", o,
                        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], [("x", F, x.shape)],
                        [("y", F, None)], [const("lo", -0.5, np.float32), const("hi", 0.7, np.float32)],
                        feeds={"x": x}))
        out.append(case(f"Clip_max_only_opset{o}", o,
                        [helper.make_node("Clip", ["x", "", "hi"], ["y"])], [("x", F, x.shape)],
                        [("y", F, None)], [const("hi", 0.3, np.float32)], feeds={"x": x}))
    # Pad: pads input (11), constant_value input, axes input (18).
    for o, mode in ((11, "constant"), (11, "reflect"), (13, "edge"), (19, "constant")):
        out.append(case(f"Pad_{mode}_opset{o}", o,
                        [helper.make_node("Pad", ["x", "p", "cv"], ["y"], mode=mode)],
                        [("x", F, x.shape)], [("y", F, None)],
                        [const("p", [0, 0, 1, 2, 0, 1, 2, 1]), const("cv", 0.5, np.float32)],
                        feeds={"x": x}))
    out.append(case("Pad_axes_opset18", 18,
                    [helper.make_node("Pad", ["x", "p", "", "ax"], ["y"], mode="reflect")],
                    [("x", F, x.shape)], [("y", F, None)],
                    [const("p", [1, 2, 2, 1]), const("ax", [2, -1])], feeds={"x": x}))
    # Squeeze/Unsqueeze: axes attribute (11), input (13).
    x1 = x[:, :1, :, :1]
    out.append(case("Squeeze_attr_opset11", 11, [helper.make_node("Squeeze", ["x"], ["y"], axes=[1, -1])],
                    [("x", F, x1.shape)], [("y", F, None)], feeds={"x": np.ascontiguousarray(x1)}))
    out.append(case("Squeeze_input_opset13", 13, [helper.make_node("Squeeze", ["x", "ax"], ["y"])],
                    [("x", F, x1.shape)], [("y", F, None)], [const("ax", [1, -1])],
                    feeds={"x": np.ascontiguousarray(x1)}))
    out.append(case("Unsqueeze_attr_opset11", 11,
                    [helper.make_node("Unsqueeze", ["v"], ["y"], axes=[0, 3])],
                    [("v", F, v.shape)], [("y", F, None)], feeds={"v": v}))
    out.append(case("Unsqueeze_input_opset13", 13, [helper.make_node("Unsqueeze", ["v", "ax"], ["y"])],
                    [("v", F, v.shape)], [("y", F, None)], [const("ax", [-1, 0])], feeds={"v": v}))
    # Resize: opset 11 needs roi; 13 makes roi/scales optional; 18 adds axes.
    img = rs.standard_normal((1, 2, 5, 6)).astype(np.float32)
    empty_roi = const("roi", np.zeros((0,), np.float32), np.float32)
    for o in (11, 13):
        out.append(case(f"Resize_scales_nearest_opset{o}", o,
                        [helper.make_node("Resize", ["x", "roi", "sc"], ["y"], mode="nearest")],
                        [("x", F, img.shape)], [("y", F, None)],
                        [empty_roi, const("sc", [1, 1, 2, 1.5], np.float32)], feeds={"x": img}))
        out.append(case(f"Resize_sizes_linear_align_corners_opset{o}", o,
                        [helper.make_node("Resize", ["x", "roi", "sc", "sz"], ["y"], mode="linear",
                                          coordinate_transformation_mode="align_corners")],
                        [("x", F, img.shape)], [("y", F, None)],
                        [empty_roi, const("sc", np.zeros((0,), np.float32), np.float32),
                         const("sz", [1, 2, 9, 4])], feeds={"x": img}))
    out.append(case("Resize_linear_pytorch_half_pixel_opset13", 13,
                    [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="linear",
                                      coordinate_transformation_mode="pytorch_half_pixel")],
                    [("x", F, img.shape)], [("y", F, None)], [const("sc", [1, 1, 0.6, 2], np.float32)],
                    feeds={"x": img}))
    out.append(case("Resize_axes_opset18", 18,
                    [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest", axes=[2, 3],
                                      nearest_mode="floor", coordinate_transformation_mode="asymmetric")],
                    [("x", F, img.shape)], [("y", F, None)], [const("sc", [2, 2], np.float32)],
                    feeds={"x": img}))
    # Softmax family: opset 11 coerces to 2-D at axis (default 1); 13 is per-axis.
    for op in ("Softmax", "LogSoftmax"):
        for o, axis in ((11, None), (11, 2), (11, -1), (13, 1), (13, None)):
            kw = {} if axis is None else {"axis": axis}
            out.append(case(f"{op}_axis{axis}_opset{o}", o, [helper.make_node(op, ["x"], ["y"], **kw)],
                            [("x", F, x.shape)], [("y", F, None)], feeds={"x": x}))
    # Dropout (inference): ratio attribute (11), optional ratio input (12+).
    out.append(case("Dropout_attr_opset11", 11, [helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)],
                    [("x", F, x.shape)], [("y", F, None)], feeds={"x": x}))
    out.append(case("Dropout_input_opset13", 13, [helper.make_node("Dropout", ["x", "r"], ["y"])],
                    [("x", F, x.shape)], [("y", F, None)], [const("r", 0.3, np.float32)],
                    feeds={"x": x}))
    # Gather/Range/ConstantOfShape chains at 11 (shape arithmetic folded by the converter).
    out.append(case("ShapeChain_opset11", 11,
                    [helper.make_node("Shape", ["x"], ["s"]),
                     helper.make_node("Gather", ["s", "i"], ["d"], axis=0),
                     helper.make_node("Range", ["zero", "d", "one"], ["r"]),
                     helper.make_node("Unsqueeze", ["r"], ["r2"], axes=[0]),
                     helper.make_node("Cast", ["r2"], ["rf"], to=F),
                     helper.make_node("ConstantOfShape", ["s"], ["c"],
                                      value=helper.make_tensor("v", F, [1], [0.25])),
                     helper.make_node("Add", ["x", "c"], ["y"]),
                     helper.make_node("Reshape", ["y", "shape"], ["yr"]),
                     helper.make_node("MatMul", ["yr", "rw"], ["z"])],
                    [("x", F, x.shape)], [("z", F, None), ("rf", F, None)],
                    [const("i", 3), const("zero", 0), const("one", 1), const("shape", [-1, 5]),
                     const("rw", rs.standard_normal((5, 3)), np.float32)], feeds={"x": x}))
    return out


def main():
    args = kite_driver.parse_args(kite_driver.tool_parser(__doc__))
    verdicts = kite_driver.Verdicts()
    for name, model, feeds in cases():
        wd = os.path.join(args.workdir, name)
        os.makedirs(wd, exist_ok=True)
        path = os.path.join(wd, "model.onnx")
        kite = os.path.join(wd, "model.kite")
        onnx.save(model, path)
        why = []
        try:
            sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            refs = sess.run(None, feeds)
        except Exception as e:
            why.append(f"the test model is invalid for onnx/onnxruntime: {e}")
        if not why:
            rc, out, err = kite_driver.run_tool([args.kite_convert, path, "-o", kite, "-q"], 120)
            if rc != 0:
                why.append(f"kite-convert: {(err or out).strip()}")
        if not why:
            rc, out, err = kite_driver.run_kite(args.kite_run, kite, feeds, wd,
                                                ["--quiet", "--threads", "1"], 120)
            if rc != 0:
                why.append(f"kite-run: {(err or out).strip()}")
        if not why:
            why = kite_driver.compare_outputs(os.path.join(wd, "out"),
                                              [o.name for o in sess.get_outputs()], refs,
                                              atol=1e-6, rtol=1e-5, nan_equal=False)
        verdicts.check(name, why)
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
