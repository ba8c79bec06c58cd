#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11), because it has onnx + onnxruntime + numpy from pip.
"""Generate Kite's single-op sweep: one tiny ONNX model per case, with seeded
random inputs and onnxruntime's outputs as the independent expectation.

Usage:
  tests/ops/gen_op_cases.py --out DIR [--only-ops Conv,Gemm] [--skip-ops ...]
                            [--priority 1|2] [--list]

Writes DIR/<case>/:
  model.onnx        one node (opset 13 unless the case needs another), static shapes,
                    IR version = the minimum the opset needs (older onnx readers work)
  input_<i>.npy     the i-th RUNTIME input (graph input) -- inputs that must be known
                    at convert time (Reshape's shape, Slice's starts, Conv weights, ...)
                    are initializers inside model.onnx instead
  expected_<i>.npy  onnxruntime (CPUExecutionProvider) output i
  meta.json         {"case", "op", "opset", "priority", "inputs": [names],
                     "outputs": [names], "atol", "rtol", "tolerance_note"}

Float outputs pass when |kite - expected| <= atol + rtol*|expected| element-wise;
integer and bool outputs must match exactly. The tolerance classes are defined
(and justified) below in TOLERANCES; each case names one.

Every case's data comes from a RandomState seeded with crc32(case name), so
adding or removing a case does not change the data of the others.
"""
import argparse
import json
import math
import os
import shutil
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

try:
    import onnxruntime as ort
except ImportError:  # pragma: no cover
    sys.exit("error: needs onnxruntime; run with the pip python3")
ort.set_default_logger_severity(3)  # errors only (no opset-6 legacy warnings)

# ---------------------------------------------------------------------------
# Tolerances: (atol, rtol, why). Inputs are mostly N(0,1), so the magnitude of a
# sum of K products is ~sqrt(K).
EPS32 = float(np.finfo(np.float32).eps)  # 1.19e-7


def tol_exact(why="pure data movement / selection: the values are copied, never rounded"):
    return (0.0, 0.0, why)


# Add/Sub/Mul/Div: IEEE single-op results are correctly rounded, so a faithful
# kernel is exact; a vectorised Div may multiply by a reciprocal (<= ~1.5 ulp).
TOL_ARITH = (1e-30, 3 * EPS32, "one rounding per element (Div via reciprocal <= 2 ulp)")
# exp/log/tanh/erf/... : Kite may use vectorised polynomial approximations that
# are accurate to a few ulp; rtol 1e-5 (~80 ulp) plus atol for values near 0.
TOL_TRANS = (1e-6, 1e-5, "transcendental functions: few-ulp polynomial approximations")
# Softmax: exp + a sum over the axis + a division; outputs in [0,1].
TOL_SOFTMAX = (1e-6, 1e-5, "exp approximations plus a sum over the axis, outputs in [0,1]")
# BatchNormalization: Kite may fold (x-mean)/sqrt(var+eps)*s+b into x*a+c; the
# two forms round differently by a few ulp of |x*a| + |c| (~1..5 here).
TOL_BN = (2e-6, 1e-5, "x*a+c instead of (x-m)/sqrt(v+e)*s+b: few ulp of the terms")
# Instance/Layer norm: mean and variance over the normalised axes (one-pass vs
# two-pass, different summation order) then rsqrt; outputs are ~N(0,1).
TOL_NORM = (5e-5, 1e-5, "mean/variance reductions in another order, then rsqrt")
# Linear/cubic Resize: 2..16 weighted products per output, weights computed in float.
TOL_RESIZE = (1e-5, 1e-5, "a few weighted products per output, coordinate maths in float")


def tol_acc(k, why=""):
    """Accumulating ops (Conv, Gemm, MatMul, pools, reductions) over K terms.

    Summing K terms of size ~1 in another order (blocking, SIMD lanes, FMA)
    gives an error that behaves like a random walk: each partial sum of size
    ~sqrt(k) is rounded to ~eps*sqrt(k), so the total is ~eps*K/sqrt(2), i.e.
    ~eps*sqrt(K) relative to the result's own size sqrt(K). atol =
    2e-5*sqrt(K) leaves a margin of >= 3x for K up to ~5000 and still catches
    any indexing bug (which is O(1) relative). rtol covers results that are
    larger than typical.
    """
    return (2e-5 * math.sqrt(max(k, 1)), 1e-5,
            f"accumulation over K={k} terms in another order: atol 2e-5*sqrt(K)" + (f"; {why}" if why else ""))


# ---------------------------------------------------------------------------
# Data specs: callables taking the case's RandomState.
F32 = np.float32


def randn(*shape, scale=1.0, dtype=F32):
    return lambda r: (r.standard_normal(shape) * scale).astype(dtype)


def uni(lo, hi, *shape, dtype=F32):
    return lambda r: r.uniform(lo, hi, size=shape).astype(dtype)


def away0(*shape, lo=0.5, hi=2.0):
    """Float values with |v| in [lo, hi] and a random sign (safe divisors)."""
    return lambda r: (r.uniform(lo, hi, size=shape) * r.choice([-1.0, 1.0], size=shape)).astype(F32)


def ints(lo, hi, *shape, dtype=np.int64):
    return lambda r: r.randint(lo, hi, size=shape).astype(dtype)


def int_floats(lo, hi, *shape):
    """Small integers stored as float32: ties and equalities actually happen."""
    return lambda r: r.randint(lo, hi, size=shape).astype(F32)


def bools(*shape):
    return lambda r: r.randint(0, 2, size=shape).astype(np.bool_)


def const(values, dtype=None):
    a = np.array(values, dtype=dtype)
    return lambda r: a.copy()


def i64(*values):
    return const(list(values), np.int64)


class In:  # runtime graph input
    def __init__(self, name, spec):
        self.name, self.spec, self.init = name, spec, False


class Init(In):  # initializer (known at convert time)
    def __init__(self, name, spec):
        super().__init__(name, spec)
        self.init = True


ABSENT = None  # an omitted optional input ('' in the node)


class Case:
    def __init__(self, name, op, inputs, attrs=None, tol=None, opset=13, outputs=1, priority=1,
                 output_names=None):
        self.name, self.op, self.inputs = name, op, inputs
        self.output_names = output_names
        self.attrs = attrs or {}
        self.tol = tol if tol is not None else tol_exact()
        self.opset, self.n_outputs, self.priority = opset, outputs, priority


CASES = []


def add(*args, **kw):
    c = Case(*args, **kw)
    if any(c.name == o.name for o in CASES):
        raise SystemExit(f"duplicate case name {c.name}")
    CASES.append(c)


# ===========================================================================
# Priority 1
# ===========================================================================
def conv(name, x, w, b=True, **attrs):
    cout, cin_g = w[0], w[1]
    k = cin_g * int(np.prod(w[2:]))
    ins = [In("x", randn(*x)), Init("w", randn(*w, scale=1.0))]
    if b:
        ins.append(Init("b", randn(cout)))
    add(name, "Conv", ins, attrs, tol_acc(k))


conv("conv_3x3_pad1", (1, 3, 8, 8), (4, 3, 3, 3), pads=[1, 1, 1, 1])
conv("conv_3x3_nopad", (1, 3, 8, 8), (4, 3, 3, 3))
conv("conv_no_bias", (1, 3, 8, 8), (4, 3, 3, 3), b=False, pads=[1, 1, 1, 1])
conv("conv_odd_7x5", (1, 3, 7, 5), (5, 3, 3, 3), pads=[1, 1, 1, 1])
conv("conv_batch2", (2, 3, 6, 7), (4, 3, 3, 3), pads=[1, 1, 1, 1])
conv("conv_stride2", (1, 3, 9, 9), (4, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
conv("conv_stride2_even", (1, 3, 8, 8), (4, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
conv("conv_stride_2x1", (1, 2, 9, 7), (3, 2, 3, 3), strides=[2, 1], pads=[1, 1, 1, 1])
conv("conv_pads_asym", (1, 2, 6, 7), (3, 2, 3, 3), pads=[0, 1, 2, 1])
conv("conv_pads_large", (1, 2, 5, 5), (3, 2, 3, 3), pads=[3, 2, 3, 2])
conv("conv_kernel_3x1", (1, 3, 7, 5), (4, 3, 3, 1), pads=[1, 0, 1, 0])
conv("conv_kernel_1x5", (1, 3, 7, 9), (4, 3, 1, 5), pads=[0, 2, 0, 2])
conv("conv_kernel_shape_attr", (1, 3, 8, 8), (4, 3, 3, 3), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
conv("conv_kernel_7x7_s2", (1, 3, 17, 17), (8, 3, 7, 7), strides=[2, 2], pads=[3, 3, 3, 3])
conv("conv_1x1", (1, 16, 5, 7), (8, 16, 1, 1))
conv("conv_1x1_stride2", (1, 8, 7, 7), (4, 8, 1, 1), strides=[2, 2])
conv("conv_1x1_no_bias", (2, 8, 4, 4), (12, 8, 1, 1), b=False)
conv("conv_group2", (1, 4, 6, 6), (6, 2, 3, 3), group=2, pads=[1, 1, 1, 1])
conv("conv_group4_1x1", (1, 8, 5, 5), (8, 2, 1, 1), group=4)
conv("conv_depthwise", (1, 8, 7, 5), (8, 1, 3, 3), group=8, pads=[1, 1, 1, 1])
conv("conv_depthwise_s2", (1, 6, 9, 9), (6, 1, 3, 3), group=6, strides=[2, 2], pads=[1, 1, 1, 1])
conv("conv_depthwise_5x5", (1, 4, 10, 10), (4, 1, 5, 5), group=4, pads=[2, 2, 2, 2])
conv("conv_depthwise_mult2", (1, 4, 6, 6), (8, 1, 3, 3), group=4, pads=[1, 1, 1, 1])
conv("conv_depthwise_no_bias", (2, 5, 6, 6), (5, 1, 3, 3), b=False, group=5, pads=[1, 1, 1, 1])
conv("conv_dilation2", (1, 3, 9, 9), (4, 3, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2])
conv("conv_dilation_2x3", (1, 2, 9, 11), (3, 2, 3, 3), dilations=[2, 3])
conv("conv_depthwise_dilation2", (1, 4, 8, 8), (4, 1, 3, 3), group=4, dilations=[2, 2], pads=[2, 2, 2, 2])
conv("conv_same_upper_s1", (1, 3, 7, 5), (4, 3, 3, 3), auto_pad="SAME_UPPER")
conv("conv_same_upper_s2", (1, 3, 8, 8), (4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2])
conv("conv_same_lower_s2", (1, 3, 8, 8), (4, 3, 3, 3), auto_pad="SAME_LOWER", strides=[2, 2])
conv("conv_same_upper_k4", (1, 2, 7, 6), (3, 2, 4, 4), auto_pad="SAME_UPPER")
conv("conv_same_lower_k4", (1, 2, 7, 6), (3, 2, 4, 4), auto_pad="SAME_LOWER")
conv("conv_valid", (1, 3, 8, 7), (4, 3, 3, 3), auto_pad="VALID", strides=[2, 2])
conv("conv_large_k", (1, 32, 10, 10), (16, 32, 5, 5), pads=[2, 2, 2, 2])  # K = 800
conv("conv_many_channels", (1, 64, 6, 6), (32, 64, 3, 3), pads=[1, 1, 1, 1])  # K = 576
conv("conv1d", (1, 4, 11), (6, 4, 3), pads=[1, 1])
conv("conv1d_stride2_nobias", (2, 3, 12), (5, 3, 5), b=False, strides=[2], pads=[2, 1])
conv("conv1d_dilation_group", (1, 4, 15), (4, 2, 3), group=2, dilations=[2])
add("conv_weights_runtime", "Conv",
    [In("x", randn(1, 3, 6, 6)), In("w", randn(4, 3, 3, 3)), In("b", randn(4))],
    {"pads": [1, 1, 1, 1]}, tol_acc(27, "weights given at run time"))


def gemm(name, m, k, n, c=(None,), trans_a=0, trans_b=0, alpha=None, beta=None, b_runtime=False):
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    ins = [In("a", randn(*a_shape)), (In if b_runtime else Init)("b", randn(*b_shape))]
    if c != (None,):
        ins.append(Init("c", randn(*c)))
    attrs = {}
    if trans_a:
        attrs["transA"] = 1
    if trans_b:
        attrs["transB"] = 1
    if alpha is not None:
        attrs["alpha"] = alpha
    if beta is not None:
        attrs["beta"] = beta
    add(name, "Gemm", ins, attrs, tol_acc(k))


gemm("gemm_c_n", 3, 4, 5, c=(5,))
gemm("gemm_c_1n", 3, 4, 5, c=(1, 5))
gemm("gemm_c_mn", 3, 4, 5, c=(3, 5))
gemm("gemm_c_m1", 3, 4, 5, c=(3, 1))
gemm("gemm_c_scalar", 3, 4, 5, c=())
gemm("gemm_c_1", 3, 4, 5, c=(1,))
gemm("gemm_no_c", 3, 4, 5)
gemm("gemm_transA", 3, 4, 5, c=(5,), trans_a=1)
gemm("gemm_transB", 3, 4, 5, c=(5,), trans_b=1)
gemm("gemm_transAB", 3, 4, 5, c=(3, 5), trans_a=1, trans_b=1)
gemm("gemm_alpha_beta", 3, 4, 5, c=(3, 5), alpha=0.5, beta=2.0)
gemm("gemm_alpha_beta_transB", 2, 6, 3, c=(3,), alpha=-1.5, beta=0.25, trans_b=1)
gemm("gemm_beta0", 3, 4, 5, c=(3, 5), beta=0.0)
gemm("gemm_fc_large", 4, 256, 64, c=(64,), trans_b=1)  # the usual Linear layer
gemm("gemm_m1", 1, 512, 10, c=(10,), trans_b=1)
gemm("gemm_odd", 7, 13, 11, c=(11,))
gemm("gemm_b_runtime", 3, 4, 5, c=(5,), b_runtime=True)


def matmul(name, a, b, b_init=False):
    k = a[-1]
    add(name, "MatMul", [In("a", randn(*a)), (Init if b_init else In)("b", randn(*b))], {}, tol_acc(k))


matmul("matmul_2d", (3, 4), (4, 5))
matmul("matmul_2d_const_b", (3, 4), (4, 5), b_init=True)
matmul("matmul_3d", (2, 3, 4), (2, 4, 5))
matmul("matmul_4d", (2, 3, 4, 5), (2, 3, 5, 6))
matmul("matmul_bcast_b2d", (2, 3, 4), (4, 5))
matmul("matmul_bcast_b2d_const", (2, 3, 4), (4, 5), b_init=True)
matmul("matmul_bcast_a2d", (3, 4), (2, 4, 5))
matmul("matmul_bcast_batch", (2, 1, 3, 4), (1, 5, 4, 6))
matmul("matmul_bcast_rank", (3, 4), (2, 2, 4, 5))
matmul("matmul_bcast_3d_4d", (3, 2, 4), (2, 1, 4, 5))
matmul("matmul_1d_2d", (4,), (4, 5))
matmul("matmul_2d_1d", (3, 4), (4,))
matmul("matmul_1d_3d", (4,), (2, 4, 5))
matmul("matmul_3d_1d", (2, 3, 4), (4,))
matmul("matmul_1d_1d", (6,), (6,))
matmul("matmul_large_k", (8, 512), (512, 16))
matmul("matmul_odd", (5, 7, 13), (5, 13, 9))
matmul("matmul_attention_like", (1, 4, 16, 8), (1, 4, 8, 16))

BINOPS = ["Add", "Sub", "Mul", "Div"]
BIN_SHAPES = [
    ("same", (2, 3, 4), (2, 3, 4)),
    ("bcast_last", (2, 3, 4), (4,)),
    ("bcast_both", (2, 1, 4), (3, 1)),
    ("scalar", (2, 3, 4), ()),
    ("scalar_first", (), (2, 3)),
    ("bias_nchw", (2, 3, 4, 5), (1, 3, 1, 1)),
    ("bcast_rank", (3, 1, 5), (2, 1, 4, 1)),
    ("one_elem", (1,), (1,)),
]
for op in BINOPS:
    for tag, sa, sb in BIN_SHAPES:
        b_spec = away0(*sb) if op == "Div" else randn(*sb)
        add(f"{op.lower()}_{tag}", op, [In("a", randn(*sa)), In("b", b_spec)], {}, TOL_ARITH)
    b_spec = away0(3, 1, 1) if op == "Div" else randn(3, 1, 1)
    add(f"{op.lower()}_const_b", op, [In("a", randn(2, 3, 4, 5)), Init("b", b_spec)], {}, TOL_ARITH)
    for dt, dname in ((np.int64, "int64"), (np.int32, "int32")):
        # Integer Div is exact (truncation); operands kept positive because
        # truncating vs flooring division only differ for negative quotients.
        lo = 1 if op == "Div" else -50
        add(f"{op.lower()}_{dname}", op,
            [In("a", ints(lo, 100, 2, 3, 4, dtype=dt)), In("b", ints(1 if op == "Div" else -50, 20, 2, 3, 4, dtype=dt))],
            {}, tol_exact("integer arithmetic"))
        add(f"{op.lower()}_{dname}_bcast", op,
            [In("a", ints(lo, 100, 2, 1, 4, dtype=dt)), In("b", ints(1 if op == "Div" else -50, 20, 3, 1, dtype=dt))],
            {}, tol_exact("integer arithmetic"))


def bn(name, x, eps=None):
    c = x[1]
    attrs = {} if eps is None else {"epsilon": eps}
    add(name, "BatchNormalization",
        [In("x", randn(*x)), Init("scale", uni(0.5, 1.5, c)), Init("bias", randn(c, scale=0.5)),
         Init("mean", randn(c, scale=0.5)), Init("var", uni(0.2, 2.0, c))], attrs, TOL_BN)


bn("batchnorm_4d", (2, 3, 4, 5))
bn("batchnorm_eps", (1, 4, 3, 3), eps=1e-3)
bn("batchnorm_3d", (2, 4, 6))
bn("batchnorm_2d", (5, 3))
bn("batchnorm_5d", (1, 2, 3, 4, 2))
add("batchnorm_opset15", "BatchNormalization",
    [In("x", randn(2, 3, 4, 4)), Init("scale", uni(0.5, 1.5, 3)), Init("bias", randn(3)),
     Init("mean", randn(3)), Init("var", uni(0.2, 2.0, 3))], {}, TOL_BN, opset=15)

add("relu", "Relu", [In("x", randn(2, 3, 4, 5, scale=3))], {}, tol_exact("max(x,0) is exact"))
add("relu_1d", "Relu", [In("x", randn(37))], {}, tol_exact("max(x,0) is exact"))
add("sigmoid", "Sigmoid", [In("x", randn(2, 3, 4, 5, scale=4))], {}, TOL_TRANS)
add("sigmoid_large", "Sigmoid", [In("x", uni(-30, 30, 64))], {}, TOL_TRANS)

CLIP_X = randn(2, 3, 4, 5, scale=2)
clip_exact = tol_exact("min/max are exact")
add("clip_min_max", "Clip", [In("x", CLIP_X), Init("min", const(-0.5, F32)), Init("max", const(1.0, F32))], {}, clip_exact)
add("clip_relu6", "Clip", [In("x", randn(2, 3, 4, 5, scale=5)), Init("min", const(0.0, F32)), Init("max", const(6.0, F32))], {}, clip_exact)
add("clip_min_only", "Clip", [In("x", CLIP_X), Init("min", const(0.25, F32))], {}, clip_exact)
add("clip_max_only", "Clip", [In("x", CLIP_X), ABSENT, Init("max", const(0.5, F32))], {}, clip_exact)
add("clip_none", "Clip", [In("x", CLIP_X)], {}, clip_exact)
add("clip_opset6_attrs", "Clip", [In("x", CLIP_X)], {"min": -1.0, "max": 0.75}, clip_exact, opset=6)
add("clip_int64", "Clip", [In("x", ints(-20, 20, 3, 4)), Init("min", const(-5, np.int64)), Init("max", const(7, np.int64))],
    {}, clip_exact)

pool_exact = tol_exact("max of values is exact")


def maxpool(name, x, **attrs):
    add(name, "MaxPool", [In("x", randn(*x))], attrs, pool_exact)


maxpool("maxpool_2x2_s2", (1, 3, 8, 8), kernel_shape=[2, 2], strides=[2, 2])
maxpool("maxpool_3x3_s2_p1", (1, 3, 9, 9), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
maxpool("maxpool_3x3_s2_p1_even", (2, 4, 8, 8), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
maxpool("maxpool_3x3_s1_p1", (1, 2, 7, 5), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
maxpool("maxpool_odd_7x5", (1, 2, 7, 5), kernel_shape=[2, 2], strides=[2, 2])
maxpool("maxpool_pads_asym", (1, 2, 6, 6), kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0])
maxpool("maxpool_ceil", (1, 2, 7, 7), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)
maxpool("maxpool_ceil_2x2", (1, 2, 5, 7), kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
maxpool("maxpool_ceil_pads", (1, 2, 8, 8), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
maxpool("maxpool_dilation2", (1, 2, 9, 9), kernel_shape=[2, 2], dilations=[2, 2])
maxpool("maxpool_dilation2_s2_p", (1, 2, 10, 10), kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])
maxpool("maxpool_kernel_2x3", (1, 2, 7, 9), kernel_shape=[2, 3], strides=[1, 2])
maxpool("maxpool_same_upper", (1, 2, 7, 8), kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
maxpool("maxpool_same_lower", (1, 2, 7, 8), kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER")
maxpool("maxpool_valid", (1, 2, 7, 8), kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID")
maxpool("maxpool_1d", (1, 3, 11), kernel_shape=[3], strides=[2], pads=[1, 1])
# negative inputs + padding: pads must act as -inf, never as 0
add("maxpool_negative_pad", "MaxPool", [In("x", uni(-5, -1, 1, 2, 5, 5))],
    {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, pool_exact)


def avgpool(name, x, k, **attrs):
    add(name, "AveragePool", [In("x", randn(*x))], dict(kernel_shape=k, **attrs),
        tol_acc(int(np.prod(k)), "then a division by the count"))


avgpool("avgpool_2x2_s2", (1, 3, 8, 8), [2, 2], strides=[2, 2])
avgpool("avgpool_3x3_s1", (1, 2, 7, 5), [3, 3])
avgpool("avgpool_pads_exclude", (1, 2, 6, 7), [3, 3], pads=[1, 1, 1, 1], count_include_pad=0)
avgpool("avgpool_pads_include", (1, 2, 6, 7), [3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
avgpool("avgpool_pads_asym_exclude", (1, 2, 6, 6), [3, 3], strides=[2, 2], pads=[0, 1, 2, 1], count_include_pad=0)
avgpool("avgpool_pads_asym_include", (1, 2, 6, 6), [3, 3], strides=[2, 2], pads=[0, 1, 2, 1], count_include_pad=1)
avgpool("avgpool_ceil", (1, 2, 7, 7), [3, 3], strides=[2, 2], ceil_mode=1)
avgpool("avgpool_ceil_2x2", (1, 2, 5, 7), [2, 2], strides=[2, 2], ceil_mode=1)
avgpool("avgpool_ceil_pads_exclude", (1, 2, 8, 8), [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=0)
avgpool("avgpool_ceil_pads_include", (1, 2, 8, 8), [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
avgpool("avgpool_same_upper", (1, 2, 7, 8), [3, 3], strides=[2, 2], auto_pad="SAME_UPPER")
avgpool("avgpool_1d", (1, 3, 11), [3], strides=[2], pads=[1, 1], count_include_pad=1)
avgpool("avgpool_7x7_global_like", (1, 8, 7, 7), [7, 7])

for name, shape in (("gap", (2, 3, 5, 7)), ("gap_1x1", (1, 4, 1, 1)), ("gap_1d", (1, 3, 10)),
                    ("gap_large", (1, 16, 14, 14))):
    k = int(np.prod(shape[2:]))
    add(f"globalavgpool_{name[4:] or 'basic'}" if name != "gap" else "globalavgpool",
        "GlobalAveragePool", [In("x", randn(*shape))], {}, tol_acc(k, "then a division by K"))

for axis in (0, 1, 2, 3, -1, -3):
    add(f"flatten_axis{axis}".replace("-", "m"), "Flatten", [In("x", randn(2, 3, 4, 5))], {"axis": axis})
add("flatten_default", "Flatten", [In("x", randn(2, 3, 4))], {})
add("flatten_int64", "Flatten", [In("x", ints(-9, 9, 2, 3, 2))], {"axis": 1})

for tag, x, shape in (("0_m1", (2, 3, 4, 5), [0, -1]),
                      ("m1", (2, 3, 4), [-1]),
                      ("2_m1_5", (2, 3, 4, 5), [2, -1, 5]),
                      ("0_0_m1", (2, 3, 4, 5), [0, 0, -1]),
                      ("expand_rank", (6, 4), [2, 3, 2, 2]),
                      ("to_1x", (3, 4), [1, 12]),
                      ("m1_first", (2, 3, 4), [-1, 4]),
                      ("0_keep_all", (2, 3, 4), [0, 0, 0])):
    add(f"reshape_{tag}", "Reshape", [In("x", randn(*x)), Init("shape", const(shape, np.int64))], {})
add("reshape_int64", "Reshape", [In("x", ints(-5, 5, 2, 6)), Init("shape", i64(0, 3, 2))], {})
add("reshape_allowzero0_opset14", "Reshape", [In("x", randn(2, 3, 4)), Init("shape", i64(0, 12))],
    {"allowzero": 0}, opset=14)

add("concat_axis0", "Concat", [In("a", randn(1, 3, 4)), In("b", randn(2, 3, 4)), In("c", randn(3, 3, 4))], {"axis": 0})
add("concat_axis1", "Concat", [In("a", randn(2, 1, 4, 3)), In("b", randn(2, 3, 4, 3)), In("c", randn(2, 2, 4, 3))], {"axis": 1})
add("concat_axis_m1", "Concat", [In("a", randn(2, 3, 1)), In("b", randn(2, 3, 4)), In("c", randn(2, 3, 2))], {"axis": -1})
add("concat_axis2", "Concat", [In("a", randn(2, 3, 2, 5)), In("b", randn(2, 3, 3, 5))], {"axis": 2})
add("concat_with_const", "Concat", [In("a", randn(2, 3)), Init("b", randn(2, 2)), In("c", randn(2, 1))], {"axis": 1})
add("concat_single", "Concat", [In("a", randn(2, 3))], {"axis": 0})
add("concat_int64", "Concat", [In("a", ints(-9, 9, 2, 3)), In("b", ints(-9, 9, 2, 2)), In("c", ints(-9, 9, 2, 1))], {"axis": 1})
add("concat_1d", "Concat", [In("a", randn(3)), In("b", randn(5)), In("c", randn(1))], {"axis": 0})

for opset in (11, 13):
    add(f"softmax_axis_m1_opset{opset}", "Softmax", [In("x", randn(2, 3, 7, scale=3))], {"axis": -1}, TOL_SOFTMAX, opset=opset)
    # opset 11: softmax over all dims >= axis (flattened); opset 13: over that axis only
    add(f"softmax_axis1_opset{opset}", "Softmax", [In("x", randn(2, 3, 4, scale=3))], {"axis": 1}, TOL_SOFTMAX, opset=opset)
    add(f"softmax_default_opset{opset}", "Softmax", [In("x", randn(2, 3, 4))], {}, TOL_SOFTMAX, opset=opset)
add("softmax_large_values", "Softmax", [In("x", randn(4, 10, scale=40))], {"axis": -1}, TOL_SOFTMAX)
add("softmax_axis0", "Softmax", [In("x", randn(5, 3))], {"axis": 0}, TOL_SOFTMAX)
add("softmax_wide", "Softmax", [In("x", randn(2, 1000, scale=2))], {"axis": -1}, TOL_SOFTMAX)

for tag, x, perm in (("nchw_to_nhwc", (2, 3, 4, 5), [0, 2, 3, 1]),
                     ("nhwc_to_nchw", (2, 4, 5, 3), [0, 3, 1, 2]),
                     ("3d_201", (2, 3, 4), [2, 0, 1]),
                     ("3d_021", (2, 3, 4), [0, 2, 1]),
                     ("2d", (3, 5), [1, 0]),
                     ("4d_0213", (2, 3, 4, 5), [0, 2, 1, 3]),
                     ("5d", (2, 1, 3, 2, 4), [4, 2, 0, 3, 1]),
                     ("identity_perm", (2, 3, 4), [0, 1, 2]),
                     # Permutes that collapse to 2-D transposes of at least
                     # 8 x 8: the CPU backend's tiles, with partial tiles
                     # and, for the first, a batch of two.
                     ("nchw_to_nhwc_tiles", (2, 24, 5, 7), [0, 2, 3, 1]),
                     ("nhwc_to_nchw_tiles", (1, 6, 7, 40), [0, 3, 1, 2])):
    add(f"transpose_{tag}", "Transpose", [In("x", randn(*x))], {"perm": perm})
add("transpose_default", "Transpose", [In("x", randn(2, 3, 4))], {})
add("transpose_int64", "Transpose", [In("x", ints(-9, 9, 3, 4))], {"perm": [1, 0]})
add("transpose_int64_tiles", "Transpose", [In("x", ints(-9, 9, 20, 33))], {"perm": [1, 0]})

add("identity", "Identity", [In("x", randn(2, 3, 4))], {})
add("identity_int64", "Identity", [In("x", ints(-99, 99, 5))], {})
add("identity_bool", "Identity", [In("x", bools(2, 3))], {})
# kite-run writes an output to <name>.npy with chars outside [A-Za-z0-9._-] replaced by '_'
add("identity_odd_output_name", "Identity", [In("x", randn(3))], {}, output_names=["Identity:0/out put"])

# ===========================================================================
# Priority 2
# ===========================================================================
P2 = dict(priority=2)


def unary(name, op, spec, tol=TOL_TRANS, attrs=None, opset=13):
    add(name, op, [In("x", spec)], attrs or {}, tol, opset=opset, **P2)


unary("sqrt", "Sqrt", uni(0, 10, 2, 3, 4))
unary("reciprocal", "Reciprocal", away0(2, 3, 4), TOL_ARITH)
unary("exp", "Exp", uni(-10, 10, 2, 3, 4))
unary("log", "Log", uni(0.01, 100, 2, 3, 4))
unary("abs", "Abs", randn(2, 3, 4), tol_exact("sign flip"))
unary("abs_int64", "Abs", ints(-50, 50, 2, 3), tol_exact("integer"))
unary("neg", "Neg", randn(2, 3, 4), tol_exact("sign flip"))
unary("neg_int64", "Neg", ints(-50, 50, 2, 3), tol_exact("integer"))
unary("erf", "Erf", randn(2, 3, 4, scale=2))
unary("tanh", "Tanh", randn(2, 3, 4, scale=3))
unary("leakyrelu", "LeakyRelu", randn(2, 3, 4), TOL_ARITH, {"alpha": 0.1})
unary("leakyrelu_default", "LeakyRelu", randn(2, 3, 4), TOL_ARITH)
unary("elu", "Elu", randn(2, 3, 4, scale=2), TOL_TRANS, {"alpha": 0.5})
unary("hardsigmoid", "HardSigmoid", randn(2, 3, 4, scale=4), TOL_ARITH, {"alpha": 0.3, "beta": 0.4})
unary("hardsigmoid_default", "HardSigmoid", randn(2, 3, 4, scale=4), TOL_ARITH)
unary("hardswish", "HardSwish", randn(2, 3, 4, scale=4), (1e-6, 1e-6, "x*clip(x/6+0.5): three roundings"), opset=14)
unary("gelu", "Gelu", randn(2, 3, 4, scale=2), opset=20)
unary("gelu_tanh", "Gelu", randn(2, 3, 4, scale=2), attrs={"approximate": "tanh"}, opset=20)
unary("not", "Not", bools(2, 3, 4), tol_exact("boolean"))

add("pow_tensor", "Pow", [In("a", uni(0.5, 2, 2, 3, 4)), In("b", uni(-2, 2, 2, 3, 4))], {}, TOL_TRANS, **P2)
add("pow_square", "Pow", [In("a", randn(2, 3, 4)), Init("b", const(2.0, F32))], {}, TOL_TRANS, **P2)
add("pow_sqrt", "Pow", [In("a", uni(0, 4, 2, 3, 4)), Init("b", const(0.5, F32))], {}, TOL_TRANS, **P2)
add("pow_cube_neg_base", "Pow", [In("a", randn(2, 3)), Init("b", const([3.0], F32))], {}, TOL_TRANS, **P2)
add("pow_bcast", "Pow", [In("a", uni(0.5, 2, 2, 3, 4)), In("b", uni(-2, 2, 4))], {}, TOL_TRANS, **P2)

add("prelu_channel", "PRelu", [In("x", randn(2, 3, 4, 5)), Init("slope", uni(0, 0.5, 3, 1, 1))], {}, TOL_ARITH, **P2)
add("prelu_scalar_slope", "PRelu", [In("x", randn(2, 3, 4)), Init("slope", const([0.2], F32))], {}, TOL_ARITH, **P2)
add("prelu_full_slope", "PRelu", [In("x", randn(2, 3)), Init("slope", uni(0, 0.5, 2, 3))], {}, TOL_ARITH, **P2)

add("logsoftmax_axis_m1", "LogSoftmax", [In("x", randn(2, 3, 7, scale=3))], {"axis": -1},
    (1e-5, 1e-5, "x - max - log(sum exp): exp/log approximations"), **P2)
add("logsoftmax_axis1", "LogSoftmax", [In("x", randn(2, 5, 3, scale=3))], {"axis": 1},
    (1e-5, 1e-5, "x - max - log(sum exp): exp/log approximations"), **P2)


def convt(name, x, w, b=True, **attrs):
    cin, cout_g = w[0], w[1]
    g = attrs.get("group", 1)
    k = (cin // g) * int(np.prod(w[2:]))
    ins = [In("x", randn(*x)), Init("w", randn(*w))]
    if b:
        ins.append(Init("b", randn(cout_g * g)))
    add(name, "ConvTranspose", ins, attrs, tol_acc(k), **P2)


convt("convtranspose_s2", (1, 4, 5, 5), (4, 3, 3, 3), strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1])
convt("convtranspose_s1", (1, 3, 4, 6), (3, 2, 3, 3))
convt("convtranspose_k2s2", (1, 4, 5, 3), (4, 2, 2, 2), strides=[2, 2], b=False)
convt("convtranspose_group", (1, 4, 5, 5), (4, 2, 3, 3), group=2, strides=[2, 2])
convt("convtranspose_depthwise", (1, 4, 5, 5), (4, 1, 4, 4), group=4, strides=[2, 2], pads=[1, 1, 1, 1])
convt("convtranspose_dilation", (1, 2, 4, 4), (2, 3, 3, 3), dilations=[2, 2])
# output_shape below the full size (9x11): the total padding (1 per axis) is derived.
# (A size above the full one would need a negative total padding, which the spec leaves undefined.)
convt("convtranspose_output_shape", (1, 2, 4, 5), (2, 3, 3, 3), strides=[2, 2], output_shape=[8, 10])
convt("convtranspose_same_upper", (1, 2, 4, 5), (2, 3, 3, 3), strides=[2, 2], auto_pad="SAME_UPPER")
convt("convtranspose_1d", (1, 3, 7), (3, 4, 3), strides=[2], pads=[1, 1])

add("instancenorm", "InstanceNormalization",
    [In("x", randn(2, 3, 4, 5, scale=2)), Init("scale", uni(0.5, 1.5, 3)), Init("bias", randn(3))],
    {"epsilon": 1e-5}, TOL_NORM, **P2)
add("instancenorm_3d", "InstanceNormalization",
    [In("x", randn(2, 4, 16)), Init("scale", uni(0.5, 1.5, 4)), Init("bias", randn(4))], {}, TOL_NORM, **P2)
add("layernorm_last", "LayerNormalization",
    [In("x", randn(2, 5, 16, scale=2)), Init("scale", uni(0.5, 1.5, 16)), Init("bias", randn(16))],
    {"axis": -1, "epsilon": 1e-5}, TOL_NORM, opset=17, **P2)
add("layernorm_last2", "LayerNormalization",
    [In("x", randn(2, 3, 4, 6)), Init("scale", uni(0.5, 1.5, 4, 6)), Init("bias", randn(4, 6))],
    {"axis": -2}, TOL_NORM, opset=17, **P2)
add("layernorm_no_bias", "LayerNormalization",
    [In("x", randn(3, 8)), Init("scale", uni(0.5, 1.5, 8))], {}, TOL_NORM, opset=17, **P2)

add("globalmaxpool", "GlobalMaxPool", [In("x", randn(2, 3, 5, 7))], {}, pool_exact, **P2)
add("globalmaxpool_1d", "GlobalMaxPool", [In("x", randn(1, 3, 10))], {}, pool_exact, **P2)

add("split_equal_3", "Split", [In("x", randn(2, 6, 4))], {"axis": 1}, outputs=3, **P2)
add("split_sizes", "Split", [In("x", randn(2, 6, 4)), Init("split", i64(1, 2, 3))], {"axis": 1}, outputs=3, **P2)
add("split_axis_m1", "Split", [In("x", randn(2, 3, 8)), Init("split", i64(5, 3))], {"axis": -1}, outputs=2, **P2)
add("split_default_axis0", "Split", [In("x", randn(4, 3))], {}, outputs=2, **P2)
add("split_num_outputs_opset18", "Split", [In("x", randn(2, 7))], {"axis": 1, "num_outputs": 3},
    outputs=3, opset=18, **P2)


def slice_(name, x, starts, ends, axes=None, steps=None):
    ins = [In("x", randn(*x)), Init("starts", const(starts, np.int64)), Init("ends", const(ends, np.int64))]
    if axes is not None:
        ins.append(Init("axes", const(axes, np.int64)))
    if steps is not None:
        if axes is None:
            ins.append(ABSENT)
        ins.append(Init("steps", const(steps, np.int64)))
    add(name, "Slice", ins, {}, **P2)


INT64_MAX = np.iinfo(np.int64).max
slice_("slice_basic", (4, 5, 6), [1, 0], [3, 4], axes=[0, 2])
slice_("slice_no_axes", (4, 5), [1, 2], [3, 5])
slice_("slice_negative", (4, 5, 6), [-3], [-1], axes=[-1])
slice_("slice_steps2", (6, 7), [0, 1], [6, 7], axes=[0, 1], steps=[2, 3])
slice_("slice_reverse", (4, 5), [-1], [-INT64_MAX], axes=[1], steps=[-1])
slice_("slice_reverse_step2", (9,), [7], [0], axes=[0], steps=[-2])
slice_("slice_to_end", (3, 8), [2], [INT64_MAX], axes=[1])
slice_("slice_clamped", (3, 8), [-100], [100], axes=[1])
slice_("slice_steps_no_axes", (6, 6), [0, 1], [6, 6], steps=[2, 2])

add("gather_axis0", "Gather", [In("x", randn(5, 4)), Init("idx", i64(0, 3, 1, 3))], {"axis": 0}, **P2)
add("gather_axis1", "Gather", [In("x", randn(2, 5, 3)), Init("idx", const([[4, 0], [1, 1]], np.int64))], {"axis": 1}, **P2)
add("gather_negative_idx", "Gather", [In("x", randn(5, 4)), Init("idx", i64(-1, -5, 2))], {"axis": 0}, **P2)
add("gather_scalar_idx", "Gather", [In("x", randn(3, 4, 5)), Init("idx", const(2, np.int64))], {"axis": 1}, **P2)
add("gather_axis_m1", "Gather", [In("x", randn(3, 6)), Init("idx", i64(5, 0))], {"axis": -1}, **P2)
add("gather_runtime_idx", "Gather", [Init("table", randn(50, 8)), In("idx", ints(0, 50, 2, 7))], {"axis": 0}, **P2)
add("gather_int32_idx", "Gather", [In("x", randn(5, 4)), In("idx", ints(0, 5, 3, dtype=np.int32))], {"axis": 0}, **P2)
add("gather_int64_data", "Gather", [In("x", ints(-9, 9, 6)), Init("idx", i64(5, 1))], {"axis": 0}, **P2)

add("squeeze_axis1", "Squeeze", [In("x", randn(2, 1, 3, 1)), Init("axes", i64(1))], {}, **P2)
add("squeeze_all", "Squeeze", [In("x", randn(1, 3, 1, 4))], {}, **P2)
add("squeeze_negative", "Squeeze", [In("x", randn(2, 3, 1)), Init("axes", i64(-1))], {}, **P2)
add("squeeze_opset11_attr", "Squeeze", [In("x", randn(1, 3, 1))], {"axes": [0, 2]}, opset=11, **P2)
add("unsqueeze_axis0", "Unsqueeze", [In("x", randn(3, 4)), Init("axes", i64(0))], {}, **P2)
add("unsqueeze_two", "Unsqueeze", [In("x", randn(3, 4)), Init("axes", i64(1, 3))], {}, **P2)
add("unsqueeze_negative", "Unsqueeze", [In("x", randn(3, 4)), Init("axes", i64(-1))], {}, **P2)
add("unsqueeze_scalar", "Unsqueeze", [In("x", randn()), Init("axes", i64(0))], {}, **P2)
add("unsqueeze_opset11_attr", "Unsqueeze", [In("x", randn(3))], {"axes": [0, 2]}, opset=11, **P2)

add("expand_basic", "Expand", [In("x", randn(3, 1)), Init("shape", i64(2, 3, 4))], {}, **P2)
add("expand_lower_rank_shape", "Expand", [In("x", randn(2, 1, 4)), Init("shape", i64(3, 1))], {}, **P2)
add("expand_same", "Expand", [In("x", randn(2, 3)), Init("shape", i64(2, 3))], {}, **P2)
add("tile_basic", "Tile", [In("x", randn(2, 3)), Init("repeats", i64(2, 3))], {}, **P2)
add("tile_3d", "Tile", [In("x", randn(2, 1, 3)), Init("repeats", i64(1, 4, 2))], {}, **P2)
add("tile_int64", "Tile", [In("x", ints(-9, 9, 3)), Init("repeats", i64(3))], {}, **P2)

add("where_basic", "Where", [In("c", bools(2, 3, 4)), In("x", randn(2, 3, 4)), In("y", randn(2, 3, 4))], {}, **P2)
add("where_bcast", "Where", [In("c", bools(3, 1)), In("x", randn(2, 3, 4)), In("y", randn(4))], {}, **P2)
add("where_const_y", "Where", [In("c", bools(2, 3)), In("x", randn(2, 3)), Init("y", const(-1e9, F32))], {}, **P2)
add("where_int64", "Where", [In("c", bools(5)), In("x", ints(-9, 9, 5)), In("y", ints(-9, 9, 5))], {}, **P2)

for op in ("Equal", "Greater", "Less"):
    exact = tol_exact("boolean result")
    add(f"{op.lower()}_float", op, [In("a", int_floats(-3, 3, 2, 3, 4)), In("b", int_floats(-3, 3, 2, 3, 4))], {}, exact, **P2)
    add(f"{op.lower()}_bcast", op, [In("a", int_floats(-3, 3, 2, 3, 4)), In("b", int_floats(-3, 3, 4))], {}, exact, **P2)
    add(f"{op.lower()}_int64", op, [In("a", ints(-3, 3, 2, 3)), In("b", ints(-3, 3, 2, 3))], {}, exact, **P2)
    add(f"{op.lower()}_int32_scalar", op, [In("a", ints(-3, 3, 6, dtype=np.int32)), Init("b", const(0, np.int32))], {}, exact, **P2)
add("equal_bool", "Equal", [In("a", bools(7)), In("b", bools(7))], {}, tol_exact("boolean"), **P2)
for op in ("And", "Or"):
    add(f"{op.lower()}", op, [In("a", bools(2, 3, 4)), In("b", bools(2, 3, 4))], {}, tol_exact("boolean"), **P2)
    add(f"{op.lower()}_bcast", op, [In("a", bools(2, 3, 4)), In("b", bools(3, 1))], {}, tol_exact("boolean"), **P2)

RX = (2, 3, 4, 5)
for op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"):
    lo = op.lower()
    exact = op in ("ReduceMax", "ReduceMin")

    def rtol(k):
        return tol_exact("max/min are exact") if exact else tol_acc(k)

    if op == "ReduceSum":  # opset 13: axes is an input
        def red(name, axes, keepdims=None, x=RX, **kw):
            ins = [In("x", randn(*x))] + ([Init("axes", const(axes, np.int64))] if axes is not None else [])
            attrs = {} if keepdims is None else {"keepdims": keepdims}
            k = int(np.prod(x)) if axes is None else int(np.prod([x[a] for a in axes]))
            add(name, "ReduceSum", ins, attrs, rtol(k), **P2, **kw)
    else:  # axes is an attribute up to opset 17
        def red(name, axes, keepdims=None, x=RX, op=op, **kw):
            attrs = {} if axes is None else {"axes": axes}
            if keepdims is not None:
                attrs["keepdims"] = keepdims
            k = int(np.prod(x)) if axes is None else int(np.prod([x[a] for a in axes]))
            add(name, op, [In("x", randn(*x))], attrs, rtol(k), **P2, **kw)
    red(f"{lo}_axis_m1", [-1])
    red(f"{lo}_axis1_keep0", [1], keepdims=0)
    red(f"{lo}_axes_2_3", [2, 3])
    red(f"{lo}_all", None)
    red(f"{lo}_all_keep0", None, keepdims=0)
    red(f"{lo}_axes_0_2_keep0", [0, 2], keepdims=0)
# opset 18: axes as an input for all reductions
for op in ("ReduceMean", "ReduceMax"):
    add(f"{op.lower()}_opset18_axes_input", op, [In("x", randn(*RX)), Init("axes", i64(1, -1))],
        {"keepdims": 1}, tol_exact() if op == "ReduceMax" else tol_acc(15), opset=18, **P2)
add("reducesum_int64", "ReduceSum", [In("x", ints(-9, 9, 3, 4)), Init("axes", i64(1))], {"keepdims": 0},
    tol_exact("integer"), **P2)

argx = tol_exact("indices")
add("argmax_axis1", "ArgMax", [In("x", randn(2, 5, 3))], {"axis": 1}, argx, **P2)
add("argmax_axis_m1_keep0", "ArgMax", [In("x", randn(4, 10))], {"axis": -1, "keepdims": 0}, argx, **P2)
add("argmax_default", "ArgMax", [In("x", randn(3, 4))], {}, argx, **P2)
# ties: first index by default, last with select_last_index=1
add("argmax_ties_first", "ArgMax", [In("x", int_floats(0, 3, 4, 6))], {"axis": 1}, argx, **P2)
add("argmax_ties_last", "ArgMax", [In("x", int_floats(0, 3, 4, 6))], {"axis": 1, "select_last_index": 1}, argx, **P2)
add("argmax_int64", "ArgMax", [In("x", ints(-50, 50, 3, 7))], {"axis": 1, "keepdims": 0}, argx, **P2)
# ArgMin: the same kernel with the comparison reversed, so every path again:
# keepdims on/off, negative axes, the default axis 0, ties (first index by
# default, last with select_last_index=1, with and without keepdims), an axis
# of length 1 and int32/int64 inputs (extremes included).
add("argmin_axis1", "ArgMin", [In("x", randn(2, 5, 3))], {"axis": 1}, argx, **P2)
add("argmin_axis_m1_keep0", "ArgMin", [In("x", randn(4, 10))], {"axis": -1, "keepdims": 0}, argx, **P2)
add("argmin_axis_m3", "ArgMin", [In("x", randn(3, 4, 5))], {"axis": -3}, argx, **P2)
add("argmin_default", "ArgMin", [In("x", randn(3, 4))], {}, argx, **P2)
add("argmin_ties_first", "ArgMin", [In("x", int_floats(0, 3, 4, 6))], {"axis": 1}, argx, **P2)
add("argmin_ties_last", "ArgMin", [In("x", int_floats(0, 3, 4, 6))], {"axis": 1, "select_last_index": 1},
    argx, **P2)
add("argmin_ties_last_m2_keep0", "ArgMin", [In("x", int_floats(0, 2, 3, 7, 5))],
    {"axis": -2, "keepdims": 0, "select_last_index": 1}, argx, **P2)
add("argmin_ties_first_axis0", "ArgMin", [In("x", int_floats(0, 2, 6, 3))], {"axis": 0, "keepdims": 0},
    argx, **P2)
add("argmin_len1_axis", "ArgMin", [In("x", randn(4, 1, 3))], {"axis": 1, "select_last_index": 1}, argx, **P2)
add("argmin_int64", "ArgMin", [In("x", ints(-50, 50, 3, 7))], {"axis": 1, "keepdims": 0}, argx, **P2)
add("argmin_int64_extremes", "ArgMin",
    [In("x", const([[0, -2**63, 5, -2**63], [2**63 - 1, 3, 2**63 - 1, 3]], np.int64))],
    {"axis": -1, "select_last_index": 1}, argx, **P2)
add("argmin_int32", "ArgMin", [In("x", ints(-5, 5, 4, 9, dtype=np.int32))], {"axis": -1}, argx, **P2)


def resize(name, x, scales=None, sizes=None, tol=None, **attrs):
    ins = [In("x", randn(*x)), ABSENT]
    if scales is not None:
        ins.append(Init("scales", const(scales, F32)))
    else:
        ins += [ABSENT, Init("sizes", const(sizes, np.int64))]
    nearest = attrs.get("mode", "nearest") == "nearest"
    add(name, "Resize", ins, attrs, tol or (tol_exact("nearest picks values") if nearest else TOL_RESIZE), **P2)


resize("resize_nearest_x2", (1, 2, 3, 4), scales=[1, 1, 2, 2])
resize("resize_nearest_asym_floor", (1, 2, 3, 4), scales=[1, 1, 2, 2],
       coordinate_transformation_mode="asymmetric", nearest_mode="floor")
resize("resize_nearest_sizes", (1, 2, 4, 5), sizes=[1, 2, 7, 3])
resize("resize_nearest_down", (1, 2, 8, 6), scales=[1, 1, 0.5, 0.5])
resize("resize_linear_half_pixel", (1, 2, 3, 4), scales=[1, 1, 2, 2], mode="linear")
resize("resize_linear_align_corners", (1, 2, 3, 4), sizes=[1, 2, 7, 9], mode="linear",
       coordinate_transformation_mode="align_corners")
resize("resize_linear_pytorch_half_pixel", (1, 2, 4, 4), scales=[1, 1, 1.5, 2.5], mode="linear",
       coordinate_transformation_mode="pytorch_half_pixel")
resize("resize_linear_asymmetric", (1, 2, 3, 5), scales=[1, 1, 2, 2], mode="linear",
       coordinate_transformation_mode="asymmetric")
resize("resize_cubic", (1, 1, 4, 5), scales=[1, 1, 2, 2], mode="cubic")

add("pad_constant", "Pad", [In("x", randn(2, 3, 4)), Init("pads", i64(0, 1, 2, 0, 2, 1)), Init("value", const(1.5, F32))],
    {}, **P2)
add("pad_constant_default0", "Pad", [In("x", randn(1, 2, 3, 3)), Init("pads", i64(0, 0, 1, 1, 0, 0, 1, 1))], {}, **P2)
add("pad_reflect", "Pad", [In("x", randn(1, 2, 4, 5)), Init("pads", i64(0, 0, 2, 1, 0, 0, 1, 3))], {"mode": "reflect"}, **P2)
add("pad_edge", "Pad", [In("x", randn(1, 2, 4, 5)), Init("pads", i64(0, 0, 2, 1, 0, 0, 1, 3))], {"mode": "edge"}, **P2)
add("pad_negative_crop", "Pad", [In("x", randn(3, 6)), Init("pads", i64(-1, 2, 0, -2))], {}, **P2)
add("pad_int64", "Pad", [In("x", ints(-9, 9, 2, 3)), Init("pads", i64(1, 0, 0, 2))], {}, **P2)
add("pad_opset11", "Pad", [In("x", randn(2, 3)), Init("pads", i64(1, 1, 1, 1))], {}, opset=11, **P2)

for tag, spec, to in (("f32_to_i64", uni(-100, 100, 3, 4), TensorProto.INT64),
                      ("f32_to_i32", uni(-100, 100, 3, 4), TensorProto.INT32),
                      ("i64_to_f32", ints(-1000, 1000, 3, 4), TensorProto.FLOAT),
                      ("i32_to_i64", ints(-1000, 1000, 5, dtype=np.int32), TensorProto.INT64),
                      ("i64_to_i32", ints(-1000, 1000, 5), TensorProto.INT32),
                      ("f32_to_bool", int_floats(-2, 3, 2, 5), TensorProto.BOOL),
                      ("bool_to_f32", bools(2, 5), TensorProto.FLOAT),
                      ("bool_to_i64", bools(2, 5), TensorProto.INT64),
                      ("f32_to_f16", randn(3, 4), TensorProto.FLOAT16),
                      ("f16_to_f32", randn(3, 4, dtype=np.float16), TensorProto.FLOAT),
                      ("f32_to_u8", uni(0, 255, 3, 4), TensorProto.UINT8),
                      ("i8_to_f32", ints(-128, 128, 3, 4, dtype=np.int8), TensorProto.FLOAT),
                      ("f32_to_f32", randn(3, 4), TensorProto.FLOAT)):
    add(f"cast_{tag}", "Cast", [In("x", spec)], {"to": to},
        tol_exact("a cast is exact: float->int truncates toward zero, f32->f16 rounds to nearest even"), **P2)


# ===========================================================================
# ---------------------------------------------------------------------------
# Issue 19: what today's PyTorch / Hugging Face exporters emit. Data movement
# and selection are exact; Mod (C fmod / integer remainders) is exact; CumSum
# and Scatter add/mul sum or multiply in the same sequential order as
# onnxruntime, which still leaves a one-rounding margin (TOL_ARITH-like).
NANS = const([[1.0, np.nan, np.inf, -np.inf, 0.0, -2.5], [np.nan, -0.0, 3e38, -np.inf, np.inf, 7.0]],
             np.float32)
add("isnan_f32", "IsNaN", [In("x", NANS)], {}, **P2)
add("isnan_f16", "IsNaN", [In("x", const([np.nan, 1.0, -np.inf, 6e4, np.nan, 0.0], np.float16))], {}, **P2)
add("isinf_both", "IsInf", [In("x", NANS)], {}, opset=10, **P2)
add("isinf_positive", "IsInf", [In("x", NANS)], {"detect_negative": 0}, opset=10, **P2)
add("isinf_negative", "IsInf", [In("x", NANS)], {"detect_positive": 0}, opset=10, **P2)

DIVISORS = const([3, -7, 5, -2], np.int64)
add("mod_int64_floor", "Mod", [In("a", ints(-40, 40, 3, 4)), Init("b", DIVISORS)], {}, **P2)
add("mod_int64_fmod", "Mod", [In("a", ints(-40, 40, 3, 4)), Init("b", DIVISORS)], {"fmod": 1}, **P2)
add("mod_int32_runtime_b", "Mod", [In("a", ints(-99, 99, 2, 3, 4, dtype=np.int32)),
                                   In("b", const([[[4]], [[-9]]], np.int32))], {}, **P2)
add("mod_float_fmod", "Mod", [In("a", randn(3, 5, scale=10.0)), In("b", away0(3, 5))], {"fmod": 1}, **P2)
add("mod_float_fmod_bcast", "Mod", [In("a", randn(2, 3, 4, scale=10.0)), Init("b", const([1.5], np.float32))],
    {"fmod": 1}, **P2)

add("trilu_upper", "Trilu", [In("x", randn(3, 4, 5))], {}, opset=14, **P2)
add("trilu_lower_k_m1", "Trilu", [In("x", randn(2, 5, 4)), Init("k", const(-1, np.int64))], {"upper": 0},
    opset=14, **P2)
add("trilu_upper_k_runtime", "Trilu", [In("x", randn(4, 6)), In("k", const(2, np.int64))], {}, opset=14, **P2)
add("trilu_lower_int64_k1", "Trilu", [In("x", ints(-9, 9, 5, 5)), Init("k", const(1, np.int64))],
    {"upper": 0}, opset=14, **P2)

TOL_CUMSUM = (1e-6, 3 * EPS32, "running float sums in onnxruntime's order; one rounding of margin")
add("cumsum_axis1", "CumSum", [In("x", randn(3, 5, 4)), Init("axis", const(1, np.int64))], {},
    TOL_CUMSUM, opset=14, **P2)
add("cumsum_exclusive", "CumSum", [In("x", randn(3, 6)), Init("axis", const(1, np.int64))],
    {"exclusive": 1}, TOL_CUMSUM, opset=14, **P2)
add("cumsum_reverse", "CumSum", [In("x", randn(4, 3)), Init("axis", const(0, np.int64))],
    {"reverse": 1}, TOL_CUMSUM, opset=14, **P2)
add("cumsum_exclusive_reverse_m1", "CumSum", [In("x", randn(2, 3, 5)), Init("axis", const(-1, np.int64))],
    {"exclusive": 1, "reverse": 1}, TOL_CUMSUM, opset=14, **P2)
add("cumsum_int64", "CumSum", [In("x", ints(-50, 50, 4, 6)), Init("axis", const(1, np.int64))], {},
    opset=14, **P2)
add("cumsum_int32_runtime_axis", "CumSum", [In("x", ints(-50, 50, 3, 4, dtype=np.int32)),
                                            In("axis", const(0, np.int32))], {}, opset=14, **P2)

add("gather_elements_axis0", "GatherElements", [In("x", randn(4, 3)), Init("idx", ints(-4, 4, 2, 3))],
    {"axis": 0}, **P2)
add("gather_elements_axis1_runtime", "GatherElements", [In("x", randn(3, 5)), In("idx", ints(0, 5, 3, 4))],
    {"axis": 1}, **P2)
add("gather_elements_int64_m1", "GatherElements", [In("x", ints(-9, 9, 2, 3, 4)),
                                                  In("idx", ints(-4, 4, 2, 2, 6, dtype=np.int32))],
    {"axis": -1}, **P2)

SE_IDX = const([[1, 0, 2], [0, 2, 1]], np.int64)
add("scatter_elements_axis0", "ScatterElements", [In("x", randn(3, 3)), Init("idx", SE_IDX),
                                                  In("u", randn(2, 3))], {"axis": 0}, opset=13, **P2)
add("scatter_elements_runtime_neg", "ScatterElements",
    [In("x", randn(2, 5)), In("idx", const([[-1, 0], [2, -4]], np.int64)), In("u", randn(2, 2))],
    {"axis": 1}, opset=13, **P2)
SE_DUP = const([[0, 0, 3], [1, 2, 1]], np.int64)
for red, opset in (("add", 16), ("mul", 16), ("max", 18), ("min", 18)):
    add(f"scatter_elements_{red}", "ScatterElements",
        [In("x", randn(2, 4)), Init("idx", SE_DUP), In("u", randn(2, 3))],
        {"axis": 1, "reduction": red}, TOL_ARITH, opset=opset, **P2)
add("scatter_elements_add_int64", "ScatterElements",
    [In("x", ints(-9, 9, 2, 4)), Init("idx", SE_DUP), In("u", ints(-9, 9, 2, 3))],
    {"axis": 1, "reduction": "add"}, opset=16, **P2)

add("gather_nd_elements", "GatherND", [In("x", randn(2, 3, 4)), Init("idx", const([[0, 1, 2], [1, 2, -1]], np.int64))],
    {}, **P2)
add("gather_nd_slices", "GatherND", [In("x", randn(2, 3, 4)), In("idx", const([[[1], [0]], [[0], [0]]], np.int64))],
    {}, **P2)
add("gather_nd_batch1", "GatherND", [In("x", randn(2, 3, 4)), Init("idx", const([[[2]], [[0]]], np.int64))],
    {"batch_dims": 1}, **P2)
add("gather_nd_batch1_pairs", "GatherND", [In("x", ints(-9, 9, 2, 3, 4)),
                                           In("idx", const([[1, 3], [0, -1]], np.int64))],
    {"batch_dims": 1}, **P2)

add("scatter_nd_rows", "ScatterND", [In("x", randn(4, 3)), Init("idx", const([[1], [3]], np.int64)),
                                     In("u", randn(2, 3))], {}, **P2)
add("scatter_nd_elements", "ScatterND", [In("x", randn(2, 3, 4)),
                                         In("idx", const([[0, 1, 2], [1, 0, -1]], np.int64)), In("u", randn(2))],
    {}, **P2)
SND_DUP = const([[1], [3], [1]], np.int64)
for red, opset in (("add", 16), ("mul", 16), ("max", 18), ("min", 18)):
    add(f"scatter_nd_{red}", "ScatterND", [In("x", randn(4, 3)), Init("idx", SND_DUP), In("u", randn(3, 3))],
        {"reduction": red}, TOL_ARITH, opset=opset, **P2)

add("depth_to_space_dcr", "DepthToSpace", [In("x", randn(1, 8, 2, 3))], {"blocksize": 2}, **P2)
add("depth_to_space_crd", "DepthToSpace", [In("x", randn(2, 8, 3, 2))], {"blocksize": 2, "mode": "CRD"}, **P2)
add("depth_to_space_crd_b3", "DepthToSpace", [In("x", randn(1, 18, 2, 2))], {"blocksize": 3, "mode": "CRD"}, **P2)
add("space_to_depth_b2", "SpaceToDepth", [In("x", randn(2, 3, 4, 6))], {"blocksize": 2}, **P2)
add("space_to_depth_b3", "SpaceToDepth", [In("x", randn(1, 2, 6, 3))], {"blocksize": 3}, **P2)

topk = dict(outputs=2, output_names=["values", "indices"], **P2)
add("topk_largest", "TopK", [In("x", randn(3, 8)), Init("k", i64(3))], {}, **topk)
add("topk_smallest_axis0", "TopK", [In("x", randn(6, 4)), Init("k", i64(2))], {"axis": 0, "largest": 0}, **topk)
add("topk_ties_largest", "TopK", [In("x", int_floats(0, 3, 4, 7)), Init("k", i64(4))], {"axis": 1}, **topk)
add("topk_ties_smallest_3d", "TopK", [In("x", int_floats(0, 3, 2, 6, 3)), Init("k", i64(5))],
    {"axis": 1, "largest": 0}, **topk)
add("topk_int64_full", "TopK", [In("x", ints(-5, 5, 3, 6)), Init("k", i64(6))], {}, **topk)

OH_VALUES = const([0.0, 1.0], np.float32)
add("onehot_default", "OneHot", [In("i", ints(0, 5, 2, 3)), Init("depth", const(5, np.int64)),
                                 Init("v", OH_VALUES)], {}, opset=11, **P2)
add("onehot_axis0_negative", "OneHot", [In("i", ints(-5, 5, 4)), Init("depth", const([5], np.int64)),
                                        Init("v", const([-1, 3], np.int64))], {"axis": 0}, opset=11, **P2)
add("onehot_out_of_range_int32", "OneHot", [In("i", const([[0, 7], [-9, 2]], np.int32)),
                                            Init("depth", const(4, np.int32)), Init("v", OH_VALUES)],
    {"axis": 1}, opset=11, **P2)
add("onehot_float_indices", "OneHot", [In("i", const([0.0, 2.0, 1.0], np.float32)),
                                       Init("depth", const(3.0, np.float32)), Init("v", OH_VALUES)], {},
    opset=11, **P2)


# Einsum: the forms attention (scores, weighted values), bilinear layers and
# users write; sums over K terms in double, rounded once.
def einsum(name, equation, shapes, dtype=F32, k=1):
    spec = (lambda *s: randn(*s)) if dtype == F32 else (lambda *s: ints(-5, 5, *s, dtype=dtype))
    inputs = [In(f"x{i}", spec(*s)) for i, s in enumerate(shapes)]
    add(name, "Einsum", inputs, {"equation": equation},
        tol_acc(k) if dtype == F32 else tol_exact("integer"), opset=12, **P2)


einsum("einsum_attention_scores", "bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)], k=8)
einsum("einsum_attention_values", "bhqk,bhkd->bhqd", [(2, 3, 5, 7), (2, 3, 7, 4)], k=7)
einsum("einsum_matmul", "ij,jk->ik", [(4, 6), (6, 3)], k=6)
einsum("einsum_matmul_implicit", "ij,jk", [(4, 6), (6, 3)], k=6)
einsum("einsum_batched_ellipsis_bcast", "...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)], k=4)
einsum("einsum_bilinear", "bi,oij,bj->bo", [(3, 4), (2, 4, 5), (3, 5)], k=20)
einsum("einsum_outer", "i,j->ij", [(5,), (3,)])
einsum("einsum_transpose", "abc->cab", [(2, 3, 4)])
einsum("einsum_diagonal", "ii->i", [(4, 4)])
einsum("einsum_trace_implicit", "ii", [(5, 5)], k=5)
einsum("einsum_sum_all", "ijk->", [(2, 3, 4)], k=24)
einsum("einsum_int64_matmul", "ij,jk->ik", [(3, 4), (4, 2)], dtype=np.int64)


# LSTM / GRU / RNN: one fused kernel per node. Weights ~N(0, 1/hidden) keep
# the gates out of saturation, so an error anywhere shows. Each step's
# pre-activation sums K = input + hidden products (in another order than
# onnxruntime: blocked sgemm vs MLAS), then sigmoid/tanh (Kite's sigmoid
# within 5e-7 relative, std::tanh; onnxruntime's own approximations): a few
# eps*sqrt(K) per step. The state carries earlier steps' rounding forward,
# damped by the gates (|sigmoid'| <= 1/4, |tanh'| <= 1, |R| ~ 1), so the
# independent per-step errors add like a random walk over the steps:
# atol = 5e-6 * sqrt(K * steps) (3e-5 for the small cases, 1.5e-4 for the
# 24-step one; measured <= 5e-7, outputs in [-1, 1]), far below the O(0.1)
# a wrong gate, bias or step order gives. onnxruntime has no layout=1
# (batch-first) kernel; ONNX's node tests *_batchwise cover it.
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def tol_rnn(k, steps):
    return (5e-6 * math.sqrt(k * steps), 1e-5,
            f"per step K={k} products and sigmoid/tanh approximations, carried over {steps} steps: "
            "atol 5e-6*sqrt(K*steps)")


def recurrent(name, op, seq=5, batch=2, inp=4, hidden=3, direction="forward", bias=True,
              h0=False, c0=False, peep=False, lens=False, outputs=None, runtime_weights=False, **attrs):
    layout = 0
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    scale = 1.0 / math.sqrt(hidden)
    W = In if runtime_weights else Init
    x = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    state = (d, batch, hidden) if layout == 0 else (batch, d, hidden)
    ins = [In("x", randn(*x)), W("w", randn(d, g * hidden, inp, scale=scale)),
           W("r", randn(d, g * hidden, hidden, scale=scale))]
    ins.append(W("b", randn(d, 2 * g * hidden, scale=0.5)) if bias else ABSENT)
    ins.append(Init("seq_lens", const([seq] * batch, np.int32)) if lens else ABSENT)
    ins.append(In("h0", randn(*state, scale=0.5)) if h0 else ABSENT)
    if op == "LSTM":
        ins.append(In("c0", randn(*state, scale=0.5)) if c0 else ABSENT)
        ins.append(W("p", randn(d, 3 * hidden, scale=0.5)) if peep else ABSENT)
    if outputs is None:
        outputs = ["y", "y_h", "y_c"] if op == "LSTM" else ["y", "y_h"]
    attrs = dict(hidden_size=hidden, direction=direction, **attrs)
    add(name, op, ins, attrs, tol_rnn(inp + hidden, seq), opset=14, outputs=len(outputs),
        output_names=outputs, **P2)


for _op in ("LSTM", "GRU", "RNN"):
    _n = _op.lower()
    recurrent(f"{_n}_forward", _op)
    recurrent(f"{_n}_reverse", _op, direction="reverse", h0=True, c0=True)
    recurrent(f"{_n}_bidirectional", _op, direction="bidirectional", h0=True, c0=True, lens=True)
    recurrent(f"{_n}_no_bias_runtime_weights", _op, bias=False, runtime_weights=True)
    recurrent(f"{_n}_state_only", _op, outputs=["", "y_h"] + ([""] if _op == "LSTM" else []))
    recurrent(f"{_n}_long_wide", _op, seq=24, batch=3, inp=17, hidden=20)
    recurrent(f"{_n}_clip", _op, clip=0.5)
recurrent("lstm_peepholes", "LSTM", peep=True, h0=True, c0=True, direction="bidirectional")
recurrent("lstm_input_forget", "LSTM", input_forget=1)
recurrent("lstm_cell_state_only", "LSTM", outputs=["", "", "y_c"])
recurrent("lstm_activations", "LSTM", activations=["HardSigmoid", "LeakyRelu", "Tanh"],
          activation_alpha=[0.3, 0.2], activation_beta=[0.4])
recurrent("gru_linear_before_reset", "GRU", linear_before_reset=1, h0=True)
recurrent("gru_linear_before_reset_bidirectional", "GRU", linear_before_reset=1,
          direction="bidirectional", h0=True)
recurrent("gru_activations", "GRU", activations=["HardSigmoid", "Softsign"],
          activation_alpha=[0.25], activation_beta=[0.45])
# activation_alpha is consumed by the activations that take one, in order:
# here LeakyRelu (the second) gets 0.3, the first value.
recurrent("gru_activation_alpha_order", "GRU", activations=["Sigmoid", "LeakyRelu"], activation_alpha=[0.3])
recurrent("rnn_relu", "RNN", activations=["Relu"])
recurrent("rnn_affine_bidirectional", "RNN", direction="bidirectional",
          activations=["Affine", "ScaledTanh"], activation_alpha=[0.5, 1.5], activation_beta=[0.1, 0.7])


# GridSample (opset 16, 4-D): every mode x padding x align_corners. The grid
# spans [-1.3, 1.3] so a fifth of the points fall outside the image and
# exercise the padding. Nearest copies a pixel; bilinear (4 taps) and
# bicubic (16 taps, weights up to ~1.3 in size) are weighted sums.
def grid_sample(name, mode, padding, align, x=(2, 3, 5, 7), out=(4, 6)):
    tol = tol_exact("nearest copies a pixel") if mode == "nearest" else TOL_RESIZE
    add(name, "GridSample", [In("x", randn(*x)), In("grid", uni(-1.3, 1.3, x[0], out[0], out[1], 2))],
        {"mode": mode, "padding_mode": padding, "align_corners": align}, tol, opset=16, **P2)


for _mode in ("nearest", "bilinear", "bicubic"):
    for _pad in ("zeros", "border", "reflection"):
        for _align in (0, 1):
            grid_sample(f"grid_sample_{_mode}_{_pad}_ac{_align}", _mode, _pad, _align)
add("grid_sample_defaults_upsample", "GridSample",
    [In("x", randn(1, 2, 4, 4)), In("grid", uni(-1.0, 1.0, 1, 9, 9, 2))], {}, TOL_RESIZE, opset=16, **P2)


NP_TO_ONNX = {np.dtype(k): v for k, v in (
    (np.float32, TensorProto.FLOAT), (np.float16, TensorProto.FLOAT16), (np.float64, TensorProto.DOUBLE),
    (np.int64, TensorProto.INT64), (np.int32, TensorProto.INT32), (np.int8, TensorProto.INT8),
    (np.uint8, TensorProto.UINT8), (np.bool_, TensorProto.BOOL))}


def build_model(case, data):
    """data: list aligned with case.inputs (None for ABSENT)."""
    node_inputs, graph_inputs, inits = [], [], []
    for inp, arr in zip(case.inputs, data):
        if inp is ABSENT:
            node_inputs.append("")
            continue
        node_inputs.append(inp.name)
        if inp.init:
            inits.append(numpy_helper.from_array(arr, inp.name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(inp.name, NP_TO_ONNX[arr.dtype], list(arr.shape)))
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    node_outputs = case.output_names or (
        ["out"] if case.n_outputs == 1 else [f"out{i}" for i in range(case.n_outputs)])
    while node_outputs and node_outputs[-1] == "":
        node_outputs = node_outputs[:-1]
    out_names = [n for n in node_outputs if n]  # "" leaves an optional output unused
    node = helper.make_node(case.op, node_inputs, node_outputs, name=case.name, **case.attrs)
    # Output types come from onnx shape inference; corrected from onnxruntime's results below.
    outputs = [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in out_names]
    graph = helper.make_graph([node], case.name, graph_inputs, outputs, initializer=inits)
    opset = [helper.make_opsetid("", case.opset)]
    model = helper.make_model(graph, opset_imports=opset, producer_name="kite-gen_op_cases")
    model.ir_version = helper.find_min_ir_version_for(opset)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    vi = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    del model.graph.output[:]
    for n in out_names:
        model.graph.output.append(vi[n] if n in vi and vi[n].type.tensor_type.elem_type else
                                  helper.make_tensor_value_info(n, TensorProto.FLOAT, None))
    return model, out_names


def set_output_types(model, out_names, results):
    del model.graph.output[:]
    for n, r in zip(out_names, results):
        model.graph.output.append(helper.make_tensor_value_info(n, NP_TO_ONNX[r.dtype], list(r.shape)))


def generate(case, out_dir):
    r = np.random.RandomState(zlib.crc32(case.name.encode()) & 0x7FFFFFFF)
    data = [None if inp is ABSENT else np.asarray(inp.spec(r)) for inp in case.inputs]
    model, out_names = build_model(case, data)
    feeds = {inp.name: arr for inp, arr in zip(case.inputs, data) if inp is not ABSENT and not inp.init}
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    results = sess.run(out_names, feeds)
    set_output_types(model, out_names, results)
    onnx.checker.check_model(model, full_check=True)

    d = os.path.join(out_dir, case.name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    onnx.save(model, os.path.join(d, "model.onnx"))
    in_names = list(feeds)
    for i, n in enumerate(in_names):
        np.save(os.path.join(d, f"input_{i}.npy"), feeds[n])
    for i, res in enumerate(results):
        np.save(os.path.join(d, f"expected_{i}.npy"), res)
    atol, rtol, why = case.tol
    meta = {"case": case.name, "op": case.op, "opset": case.opset, "priority": case.priority,
            "inputs": in_names, "outputs": out_names, "atol": atol, "rtol": rtol, "tolerance_note": why,
            "attributes": {k: (v if not isinstance(v, bytes) else v.decode()) for k, v in case.attrs.items()}}
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory (cases are (re)written as subfolders)")
    ap.add_argument("--only-ops", default="", help="comma-separated op types to generate")
    ap.add_argument("--skip-ops", default="", help="comma-separated op types to leave out")
    ap.add_argument("--priority", type=int, default=2, help="generate priorities <= this (1 or 2)")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    only = {s for s in args.only_ops.split(",") if s}
    skip = {s for s in args.skip_ops.split(",") if s}
    cases = [c for c in CASES if c.priority <= args.priority and (not only or c.op in only) and c.op not in skip]
    if args.list:
        for c in cases:
            print(f"{c.name:40s} {c.op:22s} opset {c.opset:2d}  P{c.priority}")
        print(f"{len(cases)} cases, {len({c.op for c in cases})} ops")
        return 0
    if not args.out:
        ap.error("--out is required")
    os.makedirs(args.out, exist_ok=True)
    errors = 0
    for c in cases:
        try:
            generate(c, args.out)
        except Exception as e:
            errors += 1
            print(f"error: case {c.name}: {type(e).__name__}: {e}", file=sys.stderr)
    ops = sorted({c.op for c in cases})
    print(f"generated {len(cases) - errors} cases ({len(ops)} ops) in {args.out}"
          + (f"; {errors} failed" if errors else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
