#!/usr/bin/env python3
# Python: the default python3 (onnx, onnxruntime, numpy from pip).
"""The CPU backend's fused kernels against references that share nothing with Kite.

passes_test compares each fused kernel with its own body, so a bug the two
share (in the MatMul or Gemm kernel a fused kernel reuses, in the activation
formulas, in a softmax or normalisation written twice the same wrong way)
would go unseen. Here each fused op -- Attention, FusedGemm, FusedMatMul,
SkipLayerNormalization -- is checked against:

  1. a float64 numpy formula written in this file (the reference), with a
     per-element error bound derived below;
  2. onnxruntime running the unfused ONNX graph with its graph optimizations
     off (ORT_DISABLE_ALL, so it does not fuse either), which must satisfy
     the same bound: this proves the numpy formula means what the graph
     means, and that the bound is not too tight for a correct float32
     implementation.

For each case this script builds the unfused ONNX graph, converts it with
kite-convert -O2 --report and requires the report's fusions to be exactly the
expected patterns (a case whose pattern stops fusing fails instead of testing
the primitive kernels), runs kite-run --json with 1 and 3 threads, requires
every node of the fused op to have run fused on the cpu backend (not
decomposed into its body), and compares every output element with the
reference.

Tolerances: per element, |kite - ref| <= bound, with u = 2^-24 (float32 unit
roundoff), gamma(n) = n*u / (1 - n*u) (the classic bound for n roundings in a
chain; it holds for any summation order, blocked or SIMD), and SAFETY = 2
(the same slack as tests/unit/cpu_kernels_test.cpp's kDotSlack):

  MatMul/Gemm + bias:  z = alpha * sum_k a_k b_k + beta * c
      |dz| <= SAFETY * gamma(K + 2) * (|alpha| sum_k |a_k b_k| + |beta c|)
  activation y = f(z): |dy| <= L_f |dz| + e_f(y), where L_f bounds |f'|
      (Relu, Clip, Tanh 1; LeakyRelu max(1, |alpha|); Sigmoid 1/4;
      HardSigmoid |alpha|; HardSwish 1.5; SiLU 1.1; Gelu, GeluTanh 1.13) and
      e_f is the activation's own error: 4u|y| for the piecewise-linear ones,
      1e-6 + 1e-5|y| for the transcendental ones (Sigmoid, SiLU, Tanh, Gelu,
      GeluTanh) -- the contract the op sweep (tests/ops) sets for Kite's
      transcendental kernels, which may use polynomial approximations.
  Attention: s_j = scale * q.kt_j + mask_j, p = softmax(s), out = p v.
      Each score carries d_j <= gamma(D + 3) (|scale| sum_k |q_k kt_kj| +
      |mask_j|) (D products, the scale, the mask); softmax turns score errors
      into |dp_j| <= p_j (d_j + sum_i p_i d_i) to first order, exp and the
      normalisation add p_j (2 e_exp + gamma(T + 2)) with e_exp = 5e-6 (the
      op sweep's softmax contract, rtol 1e-5 per probability); the weighted
      sum over T values adds gamma(T) sum_j p_j |v_j|. So
      |dout_c| <= SAFETY * sum_j p_j |v_jc| (d_j + sum_i p_i d_i + 2 e_exp
      + 2 gamma(T + 2)). Masked entries (-inf or -1e9) have p_j = 0 and add
      nothing.
  SkipLayerNormalization over n values: s = a + b (one rounding), mean,
      variance, inv = 1/sqrt(var + eps), y = (s - mean) inv gamma + beta.
      |dy_i| <= SAFETY * (|gamma_i| inv (u|s_i| + (u + gamma(n)) mean|s|)
      + |gamma_i (s_i - mean)| inv r + 2u|y_i| + u|beta_i|), where
      r = (u mean(|s - mean| |s|) + gamma(n + 2) var / 2) / (var + eps) + 4u
      is the relative error of inv times the products (statistics may
      accumulate in float: gamma(n) covers that, Kite uses double). The
      second output (the sum) must be a + b rounded once: |d| <= u|a + b|.

A real defect -- a wrong index, bias column, mask stride, scale, missing
epsilon, activation parameter -- is an O(1) relative error, orders of
magnitude above these bounds (the printed "worst" is max |diff| / bound, so
the margin is visible).

Prints one line per case and run, then exactly "N passed, N failed"; exits 1
if anything failed.

Usage: tests/e2e/test_fused_kernels.py --kite-convert PATH --kite-run PATH --workdir DIR
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization is an ONNX op from opset 17
F = TensorProto.FLOAT
U = 2.0 ** -24
SAFETY = 2.0
E_EXP = 5e-6
THREADS = (1, 3)


def gamma(n):
    return n * U / (1.0 - n * U)


# ---------------------------------------------------------------------------
# Activations: the ONNX nodes that spell each one (what the converter
# recognises, converter/passes/graph_util.cpp match_activation), the float64
# formula, the slope bound L and the activation's own error e(y).

SQRT1_2 = 1.0 / math.sqrt(2.0)


def erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def act_nodes(kind, x, y, params, inits, tag):
    """Nodes computing y = kind(x); constants go to inits."""
    def c(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), f"{tag}_{name}"))
        return f"{tag}_{name}"

    if kind in ("Relu", "Sigmoid", "Tanh", "HardSwish"):
        return [helper.make_node(kind, [x], [y])]
    if kind == "LeakyRelu":
        return [helper.make_node("LeakyRelu", [x], [y], alpha=params["alpha"])]
    if kind == "HardSigmoid":
        return [helper.make_node("HardSigmoid", [x], [y], alpha=params["alpha"], beta=params["beta"])]
    if kind == "Clip":
        return [helper.make_node("Clip", [x, c("lo", params["lo"]), c("hi", params["hi"])], [y])]
    if kind == "SiLU":  # x * Sigmoid(x)
        return [helper.make_node("Sigmoid", [x], [f"{tag}_sig"]),
                helper.make_node("Mul", [x, f"{tag}_sig"], [y])]
    if kind == "Gelu":  # 0.5 * x * (1 + erf(x / sqrt(2)))
        return [helper.make_node("Div", [x, c("sqrt2", math.sqrt(2.0))], [f"{tag}_d"]),
                helper.make_node("Erf", [f"{tag}_d"], [f"{tag}_e"]),
                helper.make_node("Add", [f"{tag}_e", c("one", 1.0)], [f"{tag}_p"]),
                helper.make_node("Mul", [x, f"{tag}_p"], [f"{tag}_m"]),
                helper.make_node("Mul", [f"{tag}_m", c("half", 0.5)], [y])]
    if kind == "GeluTanh":  # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        return [helper.make_node("Pow", [x, c("three", 3.0)], [f"{tag}_x3"]),
                helper.make_node("Mul", [f"{tag}_x3", c("k", 0.044715)], [f"{tag}_kx3"]),
                helper.make_node("Add", [x, f"{tag}_kx3"], [f"{tag}_in"]),
                helper.make_node("Mul", [f"{tag}_in", c("s", math.sqrt(2.0 / math.pi))], [f"{tag}_sc"]),
                helper.make_node("Tanh", [f"{tag}_sc"], [f"{tag}_t"]),
                helper.make_node("Add", [f"{tag}_t", c("one", 1.0)], [f"{tag}_p"]),
                helper.make_node("Mul", [x, f"{tag}_p"], [f"{tag}_m"]),
                helper.make_node("Mul", [f"{tag}_m", c("half", 0.5)], [y])]
    raise ValueError(kind)


def act_ref(kind, z, params):
    """(y, slope bound L, own error e(y)) in float64."""
    trans = lambda y: 1e-6 + 1e-5 * np.abs(y)  # noqa: E731
    lin = lambda y: 4 * U * np.abs(y)  # noqa: E731
    if kind is None:
        return z, 1.0, np.zeros_like(z)
    if kind == "Relu":
        y = np.maximum(z, 0.0)
        return y, 1.0, lin(y)
    if kind == "Clip":
        y = np.minimum(np.maximum(z, params["lo"]), params["hi"])
        return y, 1.0, lin(y)
    if kind == "LeakyRelu":
        a = params["alpha"]
        y = np.where(z >= 0, z, a * z)
        return y, max(1.0, abs(a)), lin(y)
    if kind == "HardSigmoid":
        y = np.clip(params["alpha"] * z + params["beta"], 0.0, 1.0)
        return y, abs(params["alpha"]), lin(y) + 2 * U
    if kind == "HardSwish":
        y = z * np.clip(z / 6.0 + 0.5, 0.0, 1.0)
        return y, 1.5, lin(y)
    if kind == "Sigmoid":
        y = 1.0 / (1.0 + np.exp(-z))
        return y, 0.25, trans(y)
    if kind == "Tanh":
        y = np.tanh(z)
        return y, 1.0, trans(y)
    if kind == "SiLU":
        y = z / (1.0 + np.exp(-z))
        return y, 1.1, trans(y)
    if kind == "Gelu":
        y = 0.5 * z * (1.0 + erf64(z * SQRT1_2))
        return y, 1.13, trans(y)
    if kind == "GeluTanh":
        y = 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))
        return y, 1.13, trans(y)
    raise ValueError(kind)


# ---------------------------------------------------------------------------
# Cases. Each gives the unfused model, feeds, the expected fusions (report
# pattern -> count), the fused op name, and reference outputs with bounds.

class Case:
    def __init__(self, name, model, feeds, fusions, op, refs):
        self.name, self.model, self.feeds = name, model, feeds
        self.fusions, self.op = fusions, op
        self.refs = refs  # {output name: (float64 reference, bound)}


def make_model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info(n, F, a.shape) for n, a in inputs],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def f32(rs, *shape, scale=1.0, loc=0.0):
    return (loc + scale * rs.standard_normal(shape)).astype(np.float32)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


def matmul_case(name, a_shape, b_shape, bias_shape, act=None, params=None, b_const=True, seed=0):
    """MatMul(a, b) + bias [-> act]: FusedMatMul."""
    rs = np.random.RandomState(seed)
    a, b = f32(rs, *a_shape), f32(rs, *b_shape)
    bias = f32(rs, *bias_shape)
    inits = [init("bias", bias)]
    inputs = [("a", a)]
    feeds = {"a": a}
    if b_const:
        inits.append(init("b", b))
    else:
        inputs.append(("b", b))
        feeds["b"] = b
    nodes = [helper.make_node("MatMul", ["a", "b"], ["mm"]), helper.make_node("Add", ["mm", "bias"], ["z"])]
    out = "z"
    if act:
        nodes += act_nodes(act, "z", "y", params or {}, inits, "act")
        out = "y"
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    z = a64 @ b64 + bias.astype(np.float64)
    k = a_shape[-1]
    dz = SAFETY * gamma(k + 2) * (np.abs(a64) @ np.abs(b64) + np.abs(bias.astype(np.float64)))
    y, slope, own = act_ref(act, z, params or {})
    model = make_model(name, nodes, inputs, [(out, list(z.shape))], inits)
    pattern = "MatMul+Add" + (f"+{act}" if act else "")
    return Case(name, model, feeds, {pattern: 1}, "FusedMatMul", {out: (y, slope * dz + own)})


def gemm_case(name, m, k, n, act, params=None, trans_a=0, trans_b=0, alpha=1.0, beta=1.0,
              c_shape=None, b_const=True, seed=0):
    """Gemm(a, b[, c]) -> act: FusedGemm."""
    rs = np.random.RandomState(seed)
    a = f32(rs, *((k, m) if trans_a else (m, k)))
    b = f32(rs, *((n, k) if trans_b else (k, n)))
    inits, inputs, feeds = [], [("a", a)], {"a": a}
    if b_const:
        inits.append(init("b", b))
    else:
        inputs.append(("b", b))
        feeds["b"] = b
    gemm_in = ["a", "b"]
    c = None
    if c_shape is not None:
        c = f32(rs, *c_shape)
        inits.append(init("c", c))
        gemm_in.append("c")
    attrs = {"alpha": alpha, "beta": beta, "transA": trans_a, "transB": trans_b}
    nodes = [helper.make_node("Gemm", gemm_in, ["g"], **attrs)]
    nodes += act_nodes(act, "g", "y", params or {}, inits, "act")
    a64 = a.astype(np.float64).T if trans_a else a.astype(np.float64)
    b64 = b.astype(np.float64).T if trans_b else b.astype(np.float64)
    z = alpha * (a64 @ b64)
    mag = abs(alpha) * (np.abs(a64) @ np.abs(b64))
    if c is not None:
        z = z + beta * c.astype(np.float64)
        mag = mag + abs(beta) * np.abs(c.astype(np.float64))
    dz = SAFETY * gamma(k + 2) * mag
    y, slope, own = act_ref(act, z, params or {})
    model = make_model(name, nodes, inputs, [("y", [m, n])], inits)
    return Case(name, model, feeds, {f"Gemm+{act}": 1}, "FusedGemm", {"y": (y, slope * dz + own)})


def attention_case(name, lead, s, d, t, dv, scale_form=None, mask=None, transpose_k=False, seed=0,
                   nan_guard=False):
    """MatMul(q', kt) [*|/ c] [+ mask] -> Softmax(-1) -> MatMul(., v): Attention.

    nan_guard: Hugging Face's Where(IsNaN(p), 0, p) between the Softmax and
    the second MatMul (fused too, attribute nan_to_zero): a row masked with
    -inf throughout gives p = NaN, the guard makes it 0, the output row 0.

    scale_form: None, "scores_mul", "scores_div", "q_mul", "q_div", "scores_mul_const_first".
    mask: None, ("input", shape) a runtime input, ("causal", shape) constant -inf
    above the diagonal, ("pad", shape) constant -1e9 on the last key positions, ("dead_rows", shape)
    constant -inf over the whole of every other query row (causal elsewhere).
    """
    rs = np.random.RandomState(seed)
    q, k, v = f32(rs, *lead, s, d), f32(rs, *lead, t, d), f32(rs, *lead, t, dv)
    kt = np.swapaxes(k, -1, -2).copy()
    inits, nodes = [], []
    inputs, feeds = [("q", q)], {"q": q}
    if transpose_k:
        inputs.append(("k", k))
        feeds["k"] = k
        perm = list(range(len(lead))) + [len(lead) + 1, len(lead)]
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=perm))
    else:
        inputs.append(("kt", kt))
        feeds["kt"] = kt
    inputs.append(("v", v))
    feeds["v"] = v
    c = 1.0 / math.sqrt(d)
    scale = 1.0
    qname = "q"
    if scale_form in ("q_mul", "q_div"):
        inits.append(init("qc", c if scale_form == "q_mul" else 1.0 / c))
        nodes.append(helper.make_node("Mul" if scale_form == "q_mul" else "Div", ["q", "qc"], ["qs"]))
        qname, scale = "qs", c
    nodes.append(helper.make_node("MatMul", [qname, "kt"], ["qk"]))
    scores = "qk"
    if scale_form in ("scores_mul", "scores_div", "scores_mul_const_first"):
        inits.append(init("sc", c if scale_form != "scores_div" else 1.0 / c))
        if scale_form == "scores_mul_const_first":
            nodes.append(helper.make_node("Mul", ["sc", "qk"], ["scaled"]))
        else:
            nodes.append(helper.make_node("Mul" if scale_form == "scores_mul" else "Div", ["qk", "sc"],
                                          ["scaled"]))
        scores, scale = "scaled", c
    m = None
    if mask is not None:
        kind, mshape = mask
        if kind == "input":
            m = f32(rs, *mshape)
            inputs.append(("mask", m))
            feeds["mask"] = m
        elif kind == "causal":
            m = np.zeros(mshape, dtype=np.float32)
            rows, cols = np.indices(mshape[-2:])
            m[..., cols > rows + (t - s)] = -np.inf
            inits.append(init("mask", m))
        elif kind == "pad":
            m = np.zeros(mshape, dtype=np.float32)
            m[..., -2:] = -1e9
            inits.append(init("mask", m))
        elif kind == "dead_rows":
            m = np.zeros(mshape, dtype=np.float32)
            rows, cols = np.indices(mshape[-2:])
            m[..., cols > rows + (t - s)] = -np.inf
            m[..., ::2, :] = -np.inf
            inits.append(init("mask", m))
        nodes.append(helper.make_node("Add", [scores, "mask"], ["masked"]))
        scores = "masked"
    if nan_guard:
        inits.append(init("zero", 0.0))
        nodes.append(helper.make_node("Softmax", [scores], ["p_raw"], axis=-1))
        nodes.append(helper.make_node("IsNaN", ["p_raw"], ["p_nan"]))
        nodes.append(helper.make_node("Where", ["p_nan", "zero", "p_raw"], ["p"]))
    else:
        nodes.append(helper.make_node("Softmax", [scores], ["p"], axis=-1))
    nodes.append(helper.make_node("MatMul", ["p", "v"], ["out"]))
    model = make_model(name, nodes, inputs, [("out", list(lead) + [s, dv])], inits)

    q64, kt64, v64 = q.astype(np.float64), kt.astype(np.float64), v.astype(np.float64)
    sc = scale * (q64 @ kt64)
    mag = abs(scale) * (np.abs(q64) @ np.abs(kt64))
    if m is not None:
        m64 = np.broadcast_to(m.astype(np.float64), sc.shape)
        sc = sc + m64
        finite = np.isfinite(m64)
        mag = mag + np.where(finite, np.abs(m64), 0.0)
    with np.errstate(invalid="ignore"):  # rows masked throughout: -inf - -inf
        sc = sc - sc.max(axis=-1, keepdims=True)
        e = np.exp(sc)
        p = e / e.sum(axis=-1, keepdims=True)
    if nan_guard:
        p = np.where(np.isnan(p), 0.0, p)
    out = p @ v64
    dj = gamma(d + 3) * mag
    dj = np.where(p > 0, dj, 0.0)  # -inf entries: p = 0, nothing flows
    w = dj + (p * dj).sum(axis=-1, keepdims=True) + 2 * E_EXP + 2 * gamma(t + 2)
    bound = SAFETY * ((p * w) @ np.abs(v64))
    return Case(name, model, feeds, {"Attention": 1}, "Attention", {"out": (out, bound)})


def skip_ln_case(name, shape, axis, with_bias=True, sum_output=False, decomposed=False, loc=0.0,
                 eps=1e-5, seed=0):
    """Add(a, b) -> LayerNormalization (the op, or its decomposed form): SkipLayerNormalization."""
    rs = np.random.RandomState(seed)
    a, b = f32(rs, *shape, loc=loc), f32(rs, *shape)
    ax = axis % len(shape)
    norm_shape = list(shape[ax:])
    g = (1.0 + 0.5 * rs.standard_normal(norm_shape)).astype(np.float32)
    beta = f32(rs, *norm_shape) if with_bias else None
    inits = [init("gamma", g)] + ([init("beta", beta)] if with_bias else [])
    nodes = [helper.make_node("Add", ["a", "b"], ["s"])]
    if decomposed:
        axes = list(range(ax - len(shape), 0))
        inits += [init("two", 2.0), init("eps", eps)]
        nodes += [helper.make_node("ReduceMean", ["s"], ["mu"], axes=axes, keepdims=1),
                  helper.make_node("Sub", ["s", "mu"], ["dev"]),
                  helper.make_node("Pow", ["dev", "two"], ["sq"]),
                  helper.make_node("ReduceMean", ["sq"], ["var"], axes=axes, keepdims=1),
                  helper.make_node("Add", ["var", "eps"], ["vare"]),
                  helper.make_node("Sqrt", ["vare"], ["sd"]),
                  helper.make_node("Div", ["dev", "sd"], ["nrm"]),
                  helper.make_node("Mul", ["nrm", "gamma"], ["scaled" if with_bias else "y"])]
        if with_bias:
            nodes.append(helper.make_node("Add", ["scaled", "beta"], ["y"]))
    else:
        ln_in = ["s", "gamma"] + (["beta"] if with_bias else [])
        nodes.append(helper.make_node("LayerNormalization", ln_in, ["y"], axis=axis, epsilon=eps))
    outputs = [("y", list(shape))] + ([("s", list(shape))] if sum_output else [])
    model = make_model(name, nodes, [("a", a), ("b", b)], outputs, inits)

    s32 = (a + b).astype(np.float32)  # the sum as float32 computes it (one rounding)
    s = a.astype(np.float64) + b.astype(np.float64)
    red = tuple(range(ax, len(shape)))
    n = int(np.prod(norm_shape))
    mean = s.mean(axis=red, keepdims=True)
    dev = s - mean
    var = (dev * dev).mean(axis=red, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    g64 = g.astype(np.float64)
    b64 = beta.astype(np.float64) if with_bias else 0.0
    y = dev * inv * g64 + b64
    mean_abs = np.abs(s).mean(axis=red, keepdims=True)
    r = (U * (np.abs(dev) * np.abs(s)).mean(axis=red, keepdims=True) + gamma(n + 2) * var / 2) / \
        (var + eps) + 4 * U
    bound = SAFETY * (np.abs(g64) * inv * (U * np.abs(s) + (U + gamma(n)) * mean_abs)
                      + np.abs(g64 * dev) * inv * r + 2 * U * np.abs(y) + U * np.abs(b64))
    refs = {"y": (y, bound)}
    if sum_output:
        refs["s"] = (s32.astype(np.float64), np.zeros(shape))  # one rounding: exactly a + b in float32
    return Case(name, model, {"a": a, "b": b}, {"Add+LayerNormalization": 1}, "SkipLayerNormalization", refs)


def cases():
    out = []
    # FusedMatMul: odd sizes (not multiples of any SIMD width or tile), K = 1,
    # N = 1, batched A, runtime B, bias of shape [N], [1, N], scalar, each activation.
    out.append(matmul_case("matmul_bias", (7, 13), (13, 5), (5,)))
    out.append(matmul_case("matmul_bias_k1_n1", (3, 1), (1, 1), (1,), seed=1))
    out.append(matmul_case("matmul_bias_batched_relu", (2, 3, 17), (17, 33), (1, 33), "Relu", seed=2))
    out.append(matmul_case("matmul_bias_scalar_sigmoid", (5, 9), (9, 7), (), "Sigmoid", seed=3))
    out.append(matmul_case("matmul_bias_runtime_b_silu", (2, 5, 9), (2, 9, 11), (11,), "SiLU", b_const=False,
                           seed=4))
    out.append(matmul_case("matmul_bias_gelu", (3, 67), (67, 19), (19,), "Gelu", seed=5))
    out.append(matmul_case("matmul_bias_gelu_tanh", (4, 31), (31, 23), (23,), "GeluTanh", seed=6))
    out.append(matmul_case("matmul_bias_tanh", (1, 129), (129, 3), (3,), "Tanh", seed=7))
    out.append(matmul_case("matmul_bias_leaky", (6, 10), (10, 17), (17,), "LeakyRelu", {"alpha": 0.2}, seed=8))
    out.append(matmul_case("matmul_bias_clip", (6, 10), (10, 17), (17,), "Clip", {"lo": -0.5, "hi": 0.7},
                           seed=9))
    out.append(matmul_case("matmul_bias_hardswish", (5, 8), (8, 9), (9,), "HardSwish", seed=10))
    out.append(matmul_case("matmul_bias_hardsigmoid", (5, 8), (8, 9), (9,), "HardSigmoid",
                           {"alpha": 0.3, "beta": 0.4}, seed=11))
    # FusedGemm: transposes, alpha/beta, C of each broadcast shape and none,
    # K = 1, a larger odd product, each activation.
    out.append(gemm_case("gemm_relu", 5, 7, 3, "Relu", c_shape=(3,)))
    out.append(gemm_case("gemm_transab_alpha_beta_leaky", 7, 11, 5, "LeakyRelu", {"alpha": -0.3}, trans_a=1,
                         trans_b=1, alpha=0.5, beta=2.0, c_shape=(7, 1), seed=1))
    out.append(gemm_case("gemm_full_c_sigmoid", 4, 6, 9, "Sigmoid", c_shape=(4, 9), beta=-1.5, seed=2))
    out.append(gemm_case("gemm_no_c_tanh", 3, 5, 4, "Tanh", seed=3))
    out.append(gemm_case("gemm_scalar_c_clip", 6, 4, 5, "Clip", {"lo": 0.0, "hi": 6.0}, c_shape=(1,), seed=4))
    out.append(gemm_case("gemm_k1_hardswish", 9, 1, 13, "HardSwish", c_shape=(1, 13), b_const=False, seed=5))
    out.append(gemm_case("gemm_large_gelu", 33, 65, 17, "Gelu", trans_b=1, c_shape=(17,), seed=6))
    out.append(gemm_case("gemm_gelu_tanh", 8, 24, 10, "GeluTanh", c_shape=(10,), seed=7))
    out.append(gemm_case("gemm_silu", 2, 40, 3, "SiLU", c_shape=(3,), alpha=1.7, seed=8))
    out.append(gemm_case("gemm_hardsigmoid", 5, 12, 6, "HardSigmoid", {"alpha": 0.25, "beta": 0.6},
                         trans_a=1, c_shape=(6,), seed=9))
    # Attention: every scale form, masks of every broadcast kind (runtime,
    # causal -inf, padding -1e9), S != T, Dv != D, one-element edges, a
    # transposed key, more rows than threads and fewer.
    out.append(attention_case("attention_minimal", (1,), 1, 1, 1, 1))
    out.append(attention_case("attention_scores_mul_mask2d", (2, 3), 7, 5, 11, 3, "scores_mul",
                              ("input", (7, 11)), seed=1))
    out.append(attention_case("attention_scores_div_causal", (2, 4), 5, 8, 5, 8, "scores_div",
                              ("causal", (1, 1, 5, 5)), seed=2))
    out.append(attention_case("attention_q_mul_pad", (3,), 9, 16, 13, 7, "q_mul", ("pad", (3, 1, 13)), seed=3))
    out.append(attention_case("attention_q_div_full_mask", (2,), 4, 6, 3, 5, "q_div", ("input", (2, 4, 3)),
                              seed=4))
    out.append(attention_case("attention_const_first_transpose_k", (2, 2), 33, 64, 33, 64,
                              "scores_mul_const_first", None, transpose_k=True, seed=5))
    out.append(attention_case("attention_no_scale_row_mask", (1, 2), 6, 3, 10, 2, None,
                              ("input", (1, 1, 1, 10)), seed=6))
    out.append(attention_case("attention_causal_s_lt_t", (2,), 3, 4, 7, 4, "scores_mul",
                              ("causal", (3, 7)), seed=7))
    # Hugging Face's NaN guard, with rows masked throughout (their outputs 0)
    # and without (the guard changes nothing).
    out.append(attention_case("attention_nan_guard_dead_rows", (2, 2), 6, 8, 6, 8, "scores_div",
                              ("dead_rows", (1, 1, 6, 6)), seed=8, nan_guard=True))
    out.append(attention_case("attention_nan_guard_runtime_mask", (3,), 5, 4, 9, 3, "q_mul",
                              ("input", (3, 5, 9)), seed=9, nan_guard=True))
    # SkipLayerNormalization: the ONNX op and the decomposed form, with and
    # without bias, the sum as a second output, several trailing axes, one
    # value per row, a large common offset (cancellation), odd lengths.
    out.append(skip_ln_case("skip_ln", (2, 7, 13), -1))
    out.append(skip_ln_case("skip_ln_no_bias_axis1", (3, 5, 6), 1, with_bias=False, seed=1))
    out.append(skip_ln_case("skip_ln_sum_output", (4, 19), -1, sum_output=True, seed=2))
    out.append(skip_ln_case("skip_ln_one_value", (5, 1), -1, seed=3))
    out.append(skip_ln_case("skip_ln_offset_257", (3, 257), -1, loc=50.0, seed=4))
    out.append(skip_ln_case("skip_ln_decomposed", (2, 3, 24), -1, decomposed=True, eps=1e-6, seed=5))
    out.append(skip_ln_case("skip_ln_decomposed_sum_no_bias", (6, 10), -1, with_bias=False, sum_output=True,
                            decomposed=True, seed=6))
    return out


# ---------------------------------------------------------------------------

def sanitize(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout


def within(got, ref, bound):
    """(ok, worst ratio |diff| / bound, where, note)."""
    if got.shape != ref.shape:
        return False, float("inf"), None, f"shape {list(got.shape)} != {list(ref.shape)}"
    if got.dtype != np.float32:
        return False, float("inf"), None, f"dtype {got.dtype} != float32"
    g = got.astype(np.float64)
    if not np.all(np.isfinite(g)):
        return False, float("inf"), None, "non-finite output"
    diff = np.abs(g - ref)
    ok = diff <= bound
    ratio = np.where(bound > 0, diff / np.where(bound > 0, bound, 1.0), np.where(diff > 0, np.inf, 0.0))
    i = np.unravel_index(int(np.argmax(ratio)), ratio.shape) if ratio.size else ()
    worst = float(ratio[i]) if ratio.size else 0.0
    where = "" if not ratio.size else \
        f"at {tuple(int(v) for v in i)}: got {g[i]:.9g}, want {ref[i]:.9g}, bound {bound[i]:.3g}"
    return bool(ok.all()), worst, where, ""


def check(case, args):
    wd = os.path.join(args.workdir, case.name)
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(wd)
    path = os.path.join(wd, "model.onnx")
    onnx.save(case.model, path)
    problems = []

    # onnxruntime on the unfused graph must meet the same bounds.
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for name, got in zip(names, sess.run(names, case.feeds)):
        ref, bound = case.refs[name]
        ok, worst, where, note = within(np.asarray(got), ref, bound)
        if not ok:
            problems.append(f"onnxruntime misses the reference on '{name}' (worst {worst:.3g} of the bound "
                            f"{where}{note}): the reference or the bound is wrong")

    kite = os.path.join(wd, "model.kite")
    report = os.path.join(wd, "report.json")
    rc, text = run([args.kite_convert, path, "-o", kite, "--report", report, "-q"])
    if rc != 0:
        return [f"kite-convert exited {rc}: {text.strip()[-400:]}"], []
    with open(report) as f:
        fusions = json.load(f).get("fusions", {})
    if fusions != case.fusions:
        problems.append(f"fusions {fusions}, expected {case.fusions}: the case no longer tests the fused kernel")

    inputs = []
    for n, a in case.feeds.items():
        p = os.path.join(wd, sanitize(n) + ".npy")
        np.save(p, a)
        inputs += ["--input", f"{n}={p}"]
    lines = []
    for threads in THREADS:
        out_dir = os.path.join(wd, f"out_t{threads}")
        os.makedirs(out_dir)
        placement = os.path.join(wd, f"placement_t{threads}.json")
        rc, text = run([args.kite_run, kite, "--output-dir", out_dir, "--threads", str(threads), "--quiet",
                        "--json", placement] + inputs)
        if rc != 0:
            problems.append(f"kite-run --threads {threads} exited {rc}: {text.strip()[-400:]}")
            continue
        with open(placement) as f:
            nodes = json.load(f)["placement"]
        ran = [p for p in nodes if p["op"] == case.op]
        if len(ran) != sum(case.fusions.values()) or not all(
                p["fused"] and not p["decomposed"] and p["backend"] == "cpu" for p in ran):
            problems.append(f"threads {threads}: the {case.op} node(s) did not all run fused on cpu: {ran}")
        worst_all = 0.0
        for name, (ref, bound) in case.refs.items():
            f = os.path.join(out_dir, sanitize(name) + ".npy")
            if not os.path.exists(f):
                problems.append(f"threads {threads}: kite-run wrote no {f}")
                continue
            ok, worst, where, note = within(np.load(f), ref, bound)
            worst_all = max(worst_all, worst)
            if not ok:
                problems.append(f"threads {threads}: output '{name}' off by {worst:.3g} x the bound {where}{note}")
        lines.append(f"threads {threads}: worst {worst_all:.3g} of the bound")
    return problems, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", default="", help="run only cases whose name contains this")
    args = ap.parse_args()
    for tool in (args.kite_convert, args.kite_run):
        if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
            sys.exit(f"error: {tool} is not an executable file")
    os.makedirs(args.workdir, exist_ok=True)
    ort.set_default_logger_severity(3)
    passed = failed = 0
    ops = {}
    for case in cases():
        if args.only and args.only not in case.name:
            continue
        problems, lines = check(case, args)
        ops[case.op] = ops.get(case.op, 0) + 1
        if problems:
            failed += 1
            print(f"FAIL {case.name}:")
            for p in problems:
                print(f"  {p}")
        else:
            passed += 1
            print(f"PASS {case.name} ({'; '.join(lines)})")
        sys.stdout.flush()
    print(f"cases per fused op: {ops}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
