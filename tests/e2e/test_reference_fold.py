#!/usr/bin/env python3
# Python: the default python3 (onnx, onnxruntime, numpy from pip).
"""Ops that only ever see constants fold at convert time, even without a kernel.

Exporters build attention masks and shape values from constants with ops no
Kite backend runs (Trilu, Mod, NonZero, EyeLike, ScatterND, ...). The
converter's reference evaluator (converter/src/ref_eval.h) computes them, so:

  folded_masks     a graph whose only run-time input x meets mask values built
                   from Range, Mod, Trilu, NonZero, EyeLike, GatherElements,
                   ScatterND (every reduction), CumSum (exclusive, reverse),
                   IsNaN and IsInf over constants: it converts and matches
                   onnxruntime exactly (every folded op is exact: integer,
                   bool or copied values; the one float op on x is an Add or
                   Mul of exactly representable values, rel. 1e-6 bound).
  remaining_ops    mask ops over constants next to a NonZero that reads the
                   run-time input (its output shape depends on the values,
                   so no static-shape backend can run it): kite-convert
                   fails, and its message lists exactly that node, not the
                   ones that folded nor the one reading its result ("N node(s) use operators Kite does not support
                   (they remain after constant folding)").

Prints "PASS name" / "FAIL name: why", then "N passed, N failed"; exits 1 on
any failure.

Usage: tests/e2e/test_reference_fold.py --kite-convert PATH --kite-run PATH --workdir DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def folded_masks_model():
    n = 4
    inits = [
        const("zero", np.array(0, np.int64)), const("four", np.array(n, np.int64)),
        const("one", np.array(1, np.int64)), const("two", np.array(2, np.int64)),
        const("neg3", np.array([-3, 3, -7, 7], np.int64)),
        const("ones44", np.ones((n, n), np.float32)),
        const("k1", np.array(1, np.int64)),
        const("gi", np.array([[3, 0, 1, 2], [1, 1, 0, 3], [0, 2, 2, 1], [2, 3, 3, 0]], np.int64)),
        const("sidx", np.array([[1], [3], [1]], np.int64)),
        const("supd", np.arange(12, dtype=np.float32).reshape(3, n) - 5),
        const("fvals", np.array([1.0, np.nan, np.inf, -np.inf], np.float32)),
        const("axis1", np.array(1, np.int64)),
        const("fm_a", np.array([5.5, -5.5, 7.25, -0.75], np.float32)),
        const("fm_b", np.array([2.0, 2.0, -3.0, 0.5], np.float32)),
    ]
    nodes = [
        helper.make_node("Range", ["zero", "four", "one"], ["r"], name="range"),
        helper.make_node("Mod", ["r", "two"], ["rm"], name="mod_py"),
        helper.make_node("Mod", ["neg3", "two"], ["m0"], name="mod_floor"),
        helper.make_node("Mod", ["neg3", "two"], ["m1"], name="mod_trunc", fmod=1),
        helper.make_node("Mod", ["fm_a", "fm_b"], ["mf"], name="mod_float", fmod=1),
        helper.make_node("Trilu", ["ones44", "k1"], ["tu"], name="triu", upper=1),
        helper.make_node("Trilu", ["ones44"], ["tl"], name="tril", upper=0),
        helper.make_node("EyeLike", ["ones44"], ["eye"], name="eye", k=-1),
        helper.make_node("NonZero", ["tu"], ["nz"], name="nonzero"),
        helper.make_node("GatherElements", ["tl", "gi"], ["ge"], name="gather_elements", axis=1),
        helper.make_node("ScatterND", ["tl", "sidx", "supd"], ["sn"], name="scatter_nd"),
        helper.make_node("ScatterND", ["tl", "sidx", "supd"], ["sa"], name="scatter_nd_add",
                         reduction="add"),
        helper.make_node("ScatterND", ["tl", "sidx", "supd"], ["sm"], name="scatter_nd_mul",
                         reduction="mul"),
        helper.make_node("ScatterND", ["tl", "sidx", "supd"], ["sx"], name="scatter_nd_max",
                         reduction="max"),
        helper.make_node("ScatterND", ["tl", "sidx", "supd"], ["si"], name="scatter_nd_min",
                         reduction="min"),
        helper.make_node("CumSum", ["tu", "axis1"], ["cs"], name="cumsum"),
        helper.make_node("CumSum", ["tu", "axis1"], ["cx"], name="cumsum_excl_rev", exclusive=1,
                         reverse=1),
        helper.make_node("IsNaN", ["fvals"], ["isnan"], name="isnan"),
        helper.make_node("IsInf", ["fvals"], ["isinf"], name="isinf", detect_negative=0),
        # Everything meets x through kernels Kite has.
        helper.make_node("Cast", ["rm"], ["rmf"], name="cast_rm", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["m0"], ["m0f"], name="cast_m0", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["m1"], ["m1f"], name="cast_m1", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["nz"], ["nzf"], name="cast_nz", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["isnan"], ["isnanf"], name="cast_isnan", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["isinf"], ["isinff"], name="cast_isinf", to=TensorProto.FLOAT),
        helper.make_node("Sum", ["x", "rmf", "m0f", "m1f", "mf", "isnanf", "isinff"], ["row"],
                         name="sum_rows"),
        helper.make_node("Sum", ["tu", "tl", "eye", "ge", "sn", "sa", "sm", "sx", "si", "cs", "cx"],
                         ["mat"], name="sum_mats"),
        helper.make_node("Mul", ["row", "mat"], ["y"], name="mul_out"),
        helper.make_node("ReduceSum", ["nzf"], ["nzs"], name="reduce_nz", keepdims=0),
        helper.make_node("Add", ["x", "nzs"], ["y2"], name="add_nz"),
    ]
    g = helper.make_graph(nodes, "folded_masks", [vi("x", TensorProto.FLOAT, [n])],
                          [vi("y", TensorProto.FLOAT, [n, n]), vi("y2", TensorProto.FLOAT, [n])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def remaining_ops_model():
    inits = [const("ones44", np.ones((4, 4), np.float32)), const("two", np.array(2, np.int64)),
             const("r", np.arange(4, dtype=np.int64))]
    nodes = [
        helper.make_node("Mod", ["r", "two"], ["rm"], name="fine_mod"),
        helper.make_node("Trilu", ["ones44"], ["tu"], name="fine_trilu"),
        helper.make_node("EyeLike", ["ones44"], ["eye"], name="fine_eyelike"),
        helper.make_node("NonZero", ["x"], ["xn"], name="nonzero_on_input"),
        helper.make_node("Cast", ["xn"], ["xnf"], name="cast_after", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["rm"], ["rmf"], name="fine_cast", to=TensorProto.FLOAT),
        helper.make_node("Add", ["tu", "rmf"], ["a"], name="fine_add"),
        helper.make_node("Add", ["a", "eye"], ["y"], name="fine_add_2"),
        helper.make_node("Add", ["y", "x"], ["y2"], name="fine_add_3"),
    ]
    g = helper.make_graph(nodes, "remaining_ops", [vi("x", TensorProto.FLOAT, [4, 4])],
                          [vi("y2", TensorProto.FLOAT, [4, 4]), vi("xnf", TensorProto.FLOAT, None)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


def main():
    args = kite_driver.parse_args(kite_driver.tool_parser(__doc__))
    verdicts = kite_driver.Verdicts()

    # 1. Folds and matches onnxruntime.
    model = folded_masks_model()
    model.ir_version = 9
    onnx.checker.check_model(model)
    path = os.path.join(args.workdir, "folded_masks.onnx")
    onnx.save(model, path)
    compare = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare_with_ort.py")
    p = subprocess.run([sys.executable, compare, "--kite-convert", args.kite_convert,
                        "--kite-run", args.kite_run, "--onnx", path, "--workdir",
                        os.path.join(args.workdir, "compare"), "--rtol-of-max", "1e-6"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    verdicts.check("folded_masks", [] if p.returncode == 0 else ["compare_with_ort failed:\n" + p.stdout])

    # 2. Only the nodes that remain are named.
    model = remaining_ops_model()
    model.ir_version = 9
    path = os.path.join(args.workdir, "remaining_ops.onnx")
    onnx.save(model, path)
    _, msg, problems = kite_driver.convert_refused(args.kite_convert, path,
                                                os.path.join(args.workdir, "remaining_ops.kite"))
    m = re.search(r"(\d+) node\(s\) use operators Kite does not support \(they remain after "
                  r"constant folding\)", msg)
    expected = {"nonzero_on_input": "NonZero"}
    if not m:
        problems.append("no 'N node(s) use operators Kite does not support (they remain ...)' line")
    elif int(m.group(1)) != len(expected):
        problems.append(f"the message counts {m.group(1)} nodes, expected {len(expected)}")
    for node, op in expected.items():
        line = next((l for l in msg.splitlines() if f"'{node}'" in l), None)
        if line is None or op not in line:
            problems.append(f"node '{node}' ({op}) is not named")
    for named in re.findall(r"'(fine_[a-z_]+)'", msg):
        problems.append(f"node '{named}' is named but folds")
    if "cast_after" in msg:
        problems.append("a node downstream of the unsupported one is named")
    verdicts.check("remaining_ops", [pr + ("\n" + msg if i == 0 else "") for i, pr in enumerate(problems)])
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
