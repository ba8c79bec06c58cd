#!/usr/bin/env python3
# Python: the default python3 (onnx, onnxruntime, numpy from pip).
"""Runtime If, end to end: a condition known only at run time keeps both branches.

Builds ONNX models whose If condition is computed from graph inputs, converts
each ONCE with kite-convert, then runs kite-run with inputs that take each
branch and compares every output with onnxruntime on the same ONNX file.

Models:
  computed_cond  cond = ReduceSum(x) > 0 (a scalar bool computed in the graph);
                 then: (x * W_then + b_then), with weights that are initializers
                 of the branch itself and of the outer graph; else: Sigmoid(x)
                 * scale, Transpose'd back and forth. Both give 2x3 float32.
  nested_if      the condition is a bool graph input of shape [1]; the else
                 branch holds a second If on another graph input, so all four
                 paths (T, FT, FF and T with the inner flag either way) run.
  int_branches   If with two outputs (float32 and int64), branches of
                 different node counts, the condition from Equal on an int64
                 input.

Checks, per model and condition value: kite-convert succeeds and the .kite
file keeps the If (kite-convert's op summary lists it); kite-run's outputs
match onnxruntime: float |diff| <= 1e-6 + 1e-5*|ref| (a few float32 ops, the
same formulas; 1e-5 leaves room for a different Sigmoid/exp rounding only),
integers exactly. Prints "PASS name" / "FAIL name: why" and
"N passed, N failed"; exits 1 on any failure.

Usage: tests/e2e/test_runtime_if.py --kite-convert PATH --kite-run PATH --workdir DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402

OPSET = 17


def f32(a):
    return np.asarray(a, dtype=np.float32)


def computed_cond_model():
    rs = np.random.RandomState(1)
    w_then = numpy_helper.from_array(f32(rs.standard_normal((2, 3))), "w_then")
    b_then = numpy_helper.from_array(f32(rs.standard_normal((3,))), "b_then")
    scale = numpy_helper.from_array(f32(rs.standard_normal((1, 3))), "scale")  # outer scope
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["x", "w_then"], ["t0"]),
         helper.make_node("Add", ["t0", "b_then"], ["t1"]),
         helper.make_node("Add", ["t1", "scale"], ["then_out"])],
        "then_branch", [], [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2, 3])],
        initializer=[w_then, b_then])
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["e0"]),
         helper.make_node("Mul", ["e0", "scale"], ["e1"]),
         helper.make_node("Transpose", ["e1"], ["e2"], perm=[1, 0]),
         helper.make_node("Neg", ["e2"], ["e3"]),
         helper.make_node("Transpose", ["e3"], ["else_out"], perm=[1, 0])],
        "else_branch", [], [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2, 3])])
    zero = numpy_helper.from_array(f32(0.0), "zero")
    g = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["cond"]),
         helper.make_node("If", ["cond"], ["y0"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Relu", ["y0"], ["y"])],
        "computed_cond", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[zero, scale])
    pos = f32(np.abs(np.random.RandomState(2).standard_normal((2, 3))) + 0.1)
    return g, [("then", {"x": pos}), ("else", {"x": -pos})]


def nested_if_model():
    inner_then = helper.make_graph(
        [helper.make_node("Mul", ["x", "x"], ["it"])], "inner_then", [],
        [helper.make_tensor_value_info("it", TensorProto.FLOAT, [4])])
    inner_else = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["ie0"]), helper.make_node("Sqrt", ["ie0"], ["ie"])],
        "inner_else", [], [helper.make_tensor_value_info("ie", TensorProto.FLOAT, [4])])
    then_g = helper.make_graph(
        [helper.make_node("Exp", ["x"], ["ot"])], "outer_then", [],
        [helper.make_tensor_value_info("ot", TensorProto.FLOAT, [4])])
    else_g = helper.make_graph(
        [helper.make_node("If", ["flag2"], ["oe0"], then_branch=inner_then, else_branch=inner_else),
         helper.make_node("Add", ["oe0", "x"], ["oe"])],
        "outer_else", [], [helper.make_tensor_value_info("oe", TensorProto.FLOAT, [4])])
    g = helper.make_graph(
        [helper.make_node("If", ["flag"], ["y"], then_branch=then_g, else_branch=else_g)],
        "nested_if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [1]),
         helper.make_tensor_value_info("flag2", TensorProto.BOOL, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    x = f32([0.5, -1.25, 2.0, -0.1])
    t, f = np.array([True]), np.array([False])
    return g, [("T_T", {"x": x, "flag": t, "flag2": t}), ("T_F", {"x": x, "flag": t, "flag2": f}),
               ("F_T", {"x": x, "flag": f, "flag2": t}), ("F_F", {"x": x, "flag": f, "flag2": f})]


def int_branches_model():
    two = numpy_helper.from_array(np.array([2], dtype=np.int64), "two")
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]),
         helper.make_node("Add", ["k", "two"], ["b"])],
        "then_branch", [],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("b", TensorProto.INT64, [3])])
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["c0"]), helper.make_node("Tanh", ["c0"], ["c"]),
         helper.make_node("Mul", ["k", "k"], ["d0"]), helper.make_node("Sub", ["d0", "two"], ["d"])],
        "else_branch", [],
        [helper.make_tensor_value_info("c", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("d", TensorProto.INT64, [3])])
    g = helper.make_graph(
        [helper.make_node("Equal", ["mode", "two"], ["cond"]),
         helper.make_node("If", ["cond"], ["y", "z"], then_branch=then_g, else_branch=else_g)],
        "int_branches",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("k", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("mode", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2]),
         helper.make_tensor_value_info("z", TensorProto.INT64, [3])],
        initializer=[two])
    x = f32(np.random.RandomState(3).standard_normal((3, 2)))
    k = np.array([4, -7, 11], dtype=np.int64)
    return g, [("then", {"x": x, "k": k, "mode": np.array([2], dtype=np.int64)}),
               ("else", {"x": x, "k": k, "mode": np.array([5], dtype=np.int64)})]


def main():
    args = kite_driver.parse_args(kite_driver.tool_parser(__doc__))
    verdicts = kite_driver.Verdicts()
    for build in (computed_cond_model, nested_if_model, int_branches_model):
        graph, cases = build()
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        name = graph.name
        wd = os.path.join(args.workdir, name)
        os.makedirs(wd, exist_ok=True)
        onnx_path = os.path.join(wd, name + ".onnx")
        kite_path = os.path.join(wd, name + ".kite")
        onnx.save(model, onnx_path)
        kite_driver.remove_files(kite_path)
        rc, out, err = kite_driver.run_tool([args.kite_convert, onnx_path, "-o", kite_path], 300)
        out += err
        if rc != 0:
            verdicts.check(f"{name}/convert", f"kite-convert exited {rc}: {out.strip()}")
            continue
        # The condition is not a constant, so the If must survive conversion.
        ops_line = next((l for l in out.splitlines() if l.strip().startswith("ops:")), "")
        verdicts.check(f"{name}/convert", None if "If" in ops_line.replace(",", " ").split()
                       else f"the converted model has no If node (ops: {ops_line.strip()})")
        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        out_names = [o.name for o in sess.get_outputs()]
        for case, feeds in cases:
            label = f"{name}/{case}"
            refs = sess.run(None, feeds)
            cdir = os.path.join(wd, case)
            rc, out, err = kite_driver.run_kite(args.kite_run, kite_path, feeds, cdir,
                                                ["--threads", "1"], 300)
            if rc != 0:
                verdicts.check(label, f"kite-run exited {rc}: {(out + err).strip()}")
                continue
            verdicts.check(label, kite_driver.compare_outputs(
                os.path.join(cdir, "out"), out_names, refs, atol=1e-6, rtol=1e-5, nan_equal=False))
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
