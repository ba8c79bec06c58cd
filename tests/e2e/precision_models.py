#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11), because it has onnx + numpy from pip.
"""Half precision on the CPU (issue 18, host side).

For each --onnx model (the model set):
  1. kite-convert at --precision fp32, fp16 and mixed (--report for mixed);
  2. kite-run (CPU backend) of all three on the same standard-normal inputs
     (compare_with_ort.make_inputs, so not the converter's calibration
     inputs, which are uniform in [-1, 1]);
  3. mixed must match fp32 within --tol x max|ref| per output (default 1e-2,
     the issue's bound and kite-convert's default --fp16-tolerance); the
     forced fp16 file's error is printed, not asserted (fp16 forces every
     node, including the ones mixed keeps in fp32 for a reason);
  4. for the CNNs (--cnn NAME), the fp16 file is at most 0.55x the fp32
     file: half the weight bytes plus the graph, which is small.
  5. for the CNNs, at least --min-fp16-flops (0.9) of the Conv/MatMul/Gemm
     FLOPs of the mixed file are in nodes the report puts in fp16 (FLOPs from
     kite-inspect's shapes, --kite-inspect), and the mixed file is also at
     most 0.55x the fp32 file.
With --digits DIR (models/digits): the digits CNN's accuracy on its held-out
images in mixed stays within 0.5 points of fp32.

--backend NAME (default cpu): the fp16 and mixed files run with
`kite-run --backend NAME,cpu` (the fp32 reference stays on the CPU), and
every node the report puts in fp16 whose op is Conv/ConvTranspose/MatMul/
Gemm/Fused* must be placed on NAME with a placement note that names fp16
(e.g. "fp16 storage, fp32 arithmetic"), not fall back to the CPU; the count
of fp16 nodes per backend is printed. Skips (exit 77) when NAME reports no
device, or fails under KITE_REQUIRE_DEVICE=NAME.

A graph that keeps a run-time If (tests/e2e/test_runtime_if.py's
computed_cond): fp16 matches fp32 on both branches, mixed refuses it naming
the If. Then a model built to overflow fp16 -- a MatMul whose results reach ~1e5
before a LayerNormalization, then a small MatMul -- must stay correct under
mixed, the report must name the overflowing MatMul as kept in fp32 for
overflow, and the forced fp16 file must be wrong there (non-finite or far
off), which shows that the check can fail.

Prints one line per check, a table of file sizes, then "N passed, N failed";
exits 1 if anything failed.
"""
import argparse
import collections
import json
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_with_ort as cwo  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kite_test_skip import exit_without_device  # noqa: E402

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # pragma: no cover
    sys.exit(f"error: this script needs onnx ({e}); run it with the pip python3")


def rel_error(ref, got):
    r, g = ref.astype(np.float64), got.astype(np.float64)
    if not np.all(np.isfinite(g)):
        return float("inf")
    peak = float(np.abs(r).max()) if r.size else 0.0
    diff = float(np.abs(g - r).max()) if r.size else 0.0
    return diff / peak if peak > 0 else diff


class Checker:
    def __init__(self, args):
        self.args = args
        self.results = []

    def check(self, ok, label, detail=""):
        self.results.append(bool(ok))
        print(f"{label}: {'PASS' if ok else 'FAIL'}{' ' + detail if detail else ''}", flush=True)
        return ok

    def convert(self, onnx_path, kite_path, precision, extra=()):
        cmd = [self.args.kite_convert, onnx_path, "-o", kite_path, "-q", "--precision", precision]
        cmd += list(extra)
        t0 = time.time()
        rc, so, se, _ = cwo.run_tool(cmd, self.args.timeout)
        return rc, so + se, time.time() - t0

    def run(self, kite_path, input_args, out_dir, on_target=False, json_path=None):
        """kite-run on the CPU (the fp32 reference), or with on_target on
        --backend NAME,cpu; with json_path, --json there."""
        os.makedirs(out_dir, exist_ok=True)
        for f in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, f))
        cmd = self.args.kite_run + [kite_path] + input_args + ["--output-dir", out_dir]
        cmd += ["--backend", self.args.target if on_target else "cpu"]
        if self.args.backend_path:
            cmd += ["--backend-path", self.args.backend_path]
        if json_path:
            if os.path.exists(json_path):
                os.remove(json_path)
            cmd += ["--json", json_path]
        rc, so, se, _ = cwo.run_tool(cmd, self.args.timeout)
        return rc, so + se

    def placement(self, json_path, run_text=""):
        """The placement of a --json run on the target; exits (skip, or fail
        under KITE_REQUIRE_DEVICE) when the backend has no device, quoting
        kite-run's warning (run_text) that says why."""
        with open(json_path) as f:
            r = json.load(f)
        name = self.args.backend
        found = [b for b in r["backends"] if b["name"] == name]
        if not found or not found[0]["available"]:
            why = [line for line in run_text.splitlines() if f"'{name}'" in line]
            exit_without_device(name, why[0] if why else f"backend '{name}' is not available")
        return r["placement"]


def read_outputs(out_dir, names):
    return [np.load(os.path.join(out_dir, cwo.sanitize(n) + ".npy")) for n in names]


# Ops whose FLOPs count (issue 18: "Conv/MatMul FLOPs") and which a GPU
# backend must run in fp16 when the report says fp16 (with any Fused* op).
FLOP_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")


def is_heavy(op):
    return op in FLOP_OPS or op.startswith("Fused")


def parse_shape(text):
    return [] if text == "scalar" else [int(d) for d in text.split("x")]


def node_flops(op, ins, outs):
    """Multiply-adds x 2 of one Conv/ConvTranspose/MatMul/Gemm from its
    kite-inspect shapes (ins, outs: lists of shapes); 0 for other ops. A
    Conv's weight is [Cout, Cin/group, k...], so each output element costs
    prod(W[1:]) MACs; a ConvTranspose's is [Cin, Cout/group, k...], so each
    input element costs prod(W[1:]); a Gemm's A holds M x K elements in either
    orientation."""
    prod = lambda d: int(np.prod(d)) if d else 1  # noqa: E731
    if not ins or not outs or not outs[0]:
        return 0  # a shape kite-inspect did not print as numbers
    if op == "Conv" and len(ins) >= 2:
        return 2 * prod(outs[0]) * prod(ins[1][1:])
    if op == "ConvTranspose" and len(ins) >= 2:
        return 2 * prod(ins[0]) * prod(ins[1][1:])
    if op == "MatMul" and ins[0]:
        return 2 * prod(outs[0]) * ins[0][-1]
    if op == "Gemm":
        return 2 * prod(outs[0]) * (prod(ins[0]) // outs[0][0])
    return 0


def inspect_flops(text):
    """{node name: FLOPs} for the main graph's nodes from kite-inspect's
    listing: a node's own Conv/MatMul FLOPs, or its body's for a fused node."""
    node_re = re.compile(r"^ {2,6}\d+  (?:kite\.)?(\S+)(?: \[[^\]]*\])?  '(.*)'$")
    body_re = re.compile(r"^ {7,}\d+  (?:kite\.)?(\S+)(?: \[[^\]]*\])?  '(.*)'$")
    tensor_re = re.compile(r"^\s+(in|out) +'.*' \S+ (scalar|[0-9x]+)(?: |$)")
    flops, in_main, top, cur = {}, False, None, None

    def close(node):
        if node is not None and top is not None:
            flops[top] += node_flops(node[0], node[1], node[2])

    for line in text.splitlines():
        if line.startswith("graph "):
            close(cur)
            cur = None
            in_main = line.startswith("graph 0 ")
            continue
        if not in_main:
            continue
        m = node_re.match(line)
        if m:
            close(cur)
            top = m.group(2)
            flops[top] = 0
            cur = (m.group(1), [], [])
            continue
        m = body_re.match(line)
        if m and top is not None:
            close(cur)
            cur = (m.group(1), [], [])
            continue
        m = tensor_re.match(line)
        if m and cur is not None:
            (cur[1] if m.group(1) == "in" else cur[2]).append(parse_shape(m.group(2)))
    close(cur)
    return flops


def fp16_flops_share(c, kite_file, report_nodes):
    """(share of the Conv/MatMul/Gemm FLOPs in fp16 nodes, total FLOPs), or
    None when kite-inspect fails (a FAIL line says why)."""
    rc, so, se, _ = cwo.run_tool(c.args.kite_inspect + [kite_file], c.args.timeout)
    if not c.check(rc == 0, f"{os.path.basename(kite_file)}: kite-inspect", "" if rc == 0 else cwo.last_lines(se)):
        return None
    precision = {n["name"]: n["precision"] for n in report_nodes}
    flops = inspect_flops(so)
    total = sum(flops.values())
    half = sum(f for n, f in flops.items() if precision.get(n) == "fp16")
    return (half / total if total else 0.0), total


def check_placement(c, label, json_path, report_nodes):
    """On --backend NAME: every fp16 Conv/MatMul/Gemm/Fused* node of the
    report placed on NAME, with a note naming fp16; prints the fp16 nodes
    per backend. Returns that count ({backend: nodes})."""
    name = c.args.backend
    placed = {p["node"]: p for p in c.placement(json_path)}
    fp16 = [n for n in report_nodes if n["precision"] == "fp16"]
    per_backend = collections.Counter(placed[n["name"]]["backend"] if n["name"] in placed else "(not placed)"
                                      for n in fp16)
    print(f"{label}: fp16 nodes per backend: " +
          (", ".join(f"{b} {k}" for b, k in per_backend.most_common()) or "none"), flush=True)
    heavy = [n for n in fp16 if is_heavy(n["op"])]
    problems = []
    for n in heavy:
        p = placed.get(n["name"])
        if p is None:
            problems.append(f"{n['op']} '{n['name']}' is not in the placement")
        elif p["backend"] != name:
            problems.append(f"{n['op']} '{n['name']}' on {p['backend']}: {p['reason']}")
        else:
            own = [r for r in p["reason"].split("; ") if r.startswith(name + ":")]
            if not own or "fp16" not in own[0]:
                problems.append(f"{n['op']} '{n['name']}' on {name} without a note naming fp16 "
                                f"(reason '{p['reason']}')")
    c.check(not problems, f"{label}: fp16 Conv/MatMul/Gemm/Fused* nodes on {name}",
            f"{len(heavy) - len(problems)}/{len(heavy)}" + (f"; {len(problems)} not, e.g. " +
                                                           " | ".join(problems[:2]) if problems else ""))
    return per_backend


def check_digits(c):
    """The digits CNN on its held-out images: mixed's accuracy (on the
    target) within 0.5 points of fp32's (on the CPU)."""
    wd = os.path.join(c.args.workdir, "digits")
    os.makedirs(wd, exist_ok=True)
    onnx_path = os.path.join(c.args.digits, "digits_cnn.onnx")
    images = os.path.join(c.args.digits, "heldout_images.npy")
    labels = np.load(os.path.join(c.args.digits, "heldout_labels.npy"))
    input_name = onnx.load(onnx_path, load_external_data=False).graph.input[0].name
    acc = {}
    for precision in ("fp32", "mixed"):
        kite_file = os.path.join(wd, f"digits.{precision}.kite")
        report = os.path.join(wd, f"digits.{precision}.json")
        rc, text, _ = c.convert(onnx_path, kite_file, precision, ["--report", report])
        if not c.check(rc == 0, f"digits: convert --precision {precision}", "" if rc == 0 else cwo.last_lines(text)):
            return
        on_target = precision != "fp32"
        out_dir = os.path.join(wd, f"out_{precision}")
        run_json = os.path.join(wd, f"run_{precision}.json") if on_target and c.args.backend != "cpu" else None
        rc, text = c.run(kite_file, ["--input", f"{input_name}={images}"], out_dir, on_target, run_json)
        if not c.check(rc == 0, f"digits: kite-run {precision}", "" if rc == 0 else cwo.last_lines(text)):
            return
        logits = [np.load(os.path.join(out_dir, f)) for f in sorted(os.listdir(out_dir)) if f.endswith(".npy")]
        acc[precision] = float(np.mean(np.argmax(logits[0], axis=-1) == labels))
        if run_json:
            with open(report) as f:
                check_placement(c, "digits", run_json, json.load(f)["precision"]["nodes"])
    diff = 100.0 * abs(acc["mixed"] - acc["fp32"])
    c.check(diff <= 0.5, "digits: held-out accuracy, mixed vs fp32",
            f"{100 * acc['mixed']:.2f}% vs {100 * acc['fp32']:.2f}% ({diff:.2f} points, at most 0.5; "
            f"{len(labels)} images)")


def check_model(c, path, rows):
    args = c.args
    name = os.path.splitext(os.path.basename(path))[0]
    wd = os.path.join(args.workdir, cwo.sanitize(name))
    in_dir = os.path.join(wd, "inputs")
    os.makedirs(in_dir, exist_ok=True)
    model = onnx.load(path, load_external_data=False)
    specs = cwo.graph_inputs(model, [])
    feeds = cwo.make_inputs(model, specs, args.seed)
    out_names = [o.name for o in model.graph.output]
    input_args = []
    for n, _, _, _ in specs:
        f = os.path.join(in_dir, cwo.sanitize(n) + ".npy")
        np.save(f, feeds[n])
        input_args += ["--input", f"{n}={f}"]
    files, outs, times = {}, {}, {}
    for precision in ("fp32", "fp16", "mixed"):
        kite_file = os.path.join(wd, f"{name}.{precision}.kite")
        extra = ["--report", os.path.join(wd, f"{name}.{precision}.json")]
        rc, text, t = c.convert(path, kite_file, precision, extra)
        times[precision] = t
        if not c.check(rc == 0, f"{name}: convert --precision {precision}",
                       f"({t:.1f} s)" if rc == 0 else cwo.last_lines(text)):
            return
        files[precision] = kite_file
        on_target = precision != "fp32"
        run_json = os.path.join(wd, f"run_{precision}.json") if on_target and args.backend != "cpu" else None
        rc, text = c.run(kite_file, input_args, os.path.join(wd, f"out_{precision}"), on_target, run_json)
        where = f" on {args.target}" if on_target else ""
        if not c.check(rc == 0, f"{name}: kite-run {precision}{where}", "" if rc == 0 else cwo.last_lines(text)):
            return
        outs[precision] = read_outputs(os.path.join(wd, f"out_{precision}"), out_names)
    with open(os.path.join(wd, f"{name}.mixed.json")) as f:
        report = json.load(f)
    rep = report["precision"]
    per_backend = None
    if args.backend != "cpu":
        per_backend = check_placement(c, name, os.path.join(wd, "run_mixed.json"), rep["nodes"])
    for k, oname in enumerate(out_names):
        ref = outs["fp32"][k]
        if not np.issubdtype(ref.dtype, np.floating):
            c.check(np.array_equal(ref, outs["mixed"][k]), f"{name}:{oname}: mixed equals fp32 (non-float)")
            continue
        e_mixed = rel_error(ref, outs["mixed"][k])
        e_fp16 = rel_error(ref, outs["fp16"][k])
        c.check(e_mixed <= args.tol, f"{name}:{oname}: mixed{' on ' + args.target if args.backend != 'cpu' else ''}"
                f" vs fp32",
                f"max|diff|/max|ref| = {e_mixed:.3g} (tol {args.tol:g}); forced fp16: {e_fp16:.3g}")
    if name in args.budget:
        # With a memory budget: the budget is met on the fp32 graph, then
        # the precision applies; the result must still match.
        kite_file = os.path.join(wd, f"{name}.mixed_budget.kite")
        rc, text, _ = c.convert(path, kite_file, "mixed", ["--memory-budget", "0.6x"])
        if c.check(rc == 0, f"{name}: convert --precision mixed --memory-budget 0.6x",
                   "" if rc == 0 else cwo.last_lines(text)):
            out_dir = os.path.join(wd, "out_mixed_budget")
            rc, text = c.run(kite_file, input_args + ["--poison"], out_dir, True)
            if c.check(rc == 0, f"{name}: kite-run mixed with a budget (arena poisoned)",
                       "" if rc == 0 else cwo.last_lines(text)):
                for k, got in enumerate(read_outputs(out_dir, out_names)):
                    e = rel_error(outs["fp32"][k], got)
                    c.check(e <= args.tol, f"{name}:{out_names[k]}: mixed with a budget vs fp32", f"{e:.3g}")
    sizes = {p: os.path.getsize(f) for p, f in files.items()}
    kept = [n for n in rep["nodes"] if n["precision"] == "fp32" and
            (n["reason"].startswith("overflow") or n["reason"].startswith("error") or
             n["reason"].startswith("the whole"))]
    if name in args.cnn:
        for precision in ("fp16", "mixed"):
            ratio = sizes[precision] / sizes["fp32"]
            c.check(ratio <= 0.55, f"{name}: {precision} file / fp32 file", f"= {ratio:.3f} (at most 0.55)")
    share = None
    if args.kite_inspect:
        got = fp16_flops_share(c, files["mixed"], rep["nodes"])
        if got is not None:
            share, total = got
            detail = f"{100 * share:.1f}% of {total / 1e6:.1f} MFLOPs"
            if name in args.cnn:
                c.check(share >= args.min_fp16_flops, f"{name}: Conv/MatMul/Gemm FLOPs in fp16 (mixed)",
                        f"{detail} (at least {100 * args.min_fp16_flops:g}%)")
            else:
                print(f"{name}: Conv/MatMul/Gemm FLOPs in fp16 (mixed): {detail}", flush=True)
    with open(os.path.join(wd, f"{name}.fp32.json")) as f:
        arena32 = json.load(f)["memory"]["arena_bytes"]
    rows.append((name, sizes["fp32"], sizes["fp16"], sizes["mixed"], rep["fp16_nodes"], rep["fp32_nodes"],
                 len(kept), rep["casts"], rep["final_error"], times["mixed"], share,
                 arena32, report["memory"]["arena_bytes"], per_backend))


def make_overflow_model(path):
    """x[1,64] -> MatMul W1 (entries +-10000; for x uniform in [-1, 1] each
    h_j has standard deviation 10000 * sqrt(64 / 3) ~ 4.6e4, so the largest
    of the 64 reaches ~1e5) -> LayerNormalization -> MatMul W2 (small) -> y. Half's largest finite
    value is 65504, so W1's MatMul overflows in fp16; the normalization
    brings the values back to O(1), and everything after it is fine in fp16."""
    rs = np.random.RandomState(18)
    w1 = (np.sign(rs.standard_normal((64, 64))) * 10000.0).astype(np.float32)
    w2 = (rs.standard_normal((64, 16)) * 0.1).astype(np.float32)
    scale = np.ones(64, np.float32)
    bias = np.zeros(64, np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="big_matmul"),
        helper.make_node("LayerNormalization", ["h", "scale", "bias"], ["n"], name="norm", axis=-1),
        helper.make_node("MatMul", ["n", "w2"], ["y"], name="small_matmul"),
    ]
    graph = helper.make_graph(
        nodes, "overflow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(bias, "bias")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return w1


def check_overflow(c):
    wd = os.path.join(c.args.workdir, "overflow")
    os.makedirs(wd, exist_ok=True)
    path = os.path.join(wd, "overflow.onnx")
    w1 = make_overflow_model(path)
    x = np.random.RandomState(c.args.seed).uniform(-1, 1, (1, 64)).astype(np.float32)
    xf = os.path.join(wd, "x.npy")
    np.save(xf, x)
    outs = {}
    for precision in ("fp32", "fp16", "mixed"):
        kite_file = os.path.join(wd, f"overflow.{precision}.kite")
        rc, text, _ = c.convert(path, kite_file, precision,
                                ["--report", os.path.join(wd, f"overflow.{precision}.json")])
        if not c.check(rc == 0, f"overflow: convert --precision {precision}", "" if rc == 0 else cwo.last_lines(text)):
            return
        # The first run on the target: a backend without a device skips here.
        run_json = os.path.join(wd, "run_mixed.json") if precision == "mixed" and c.args.backend != "cpu" else None
        rc, text = c.run(kite_file, ["--input", f"x={xf}"], os.path.join(wd, f"out_{precision}"),
                         precision != "fp32", run_json)
        if not c.check(rc == 0, f"overflow: kite-run {precision}", "" if rc == 0 else cwo.last_lines(text)):
            return
        if run_json:
            c.placement(run_json, text)
        outs[precision] = read_outputs(os.path.join(wd, f"out_{precision}"), ["y"])[0]
    # The MatMul's values really exceed half's range on this input.
    h = x.astype(np.float64) @ w1.astype(np.float64)
    c.check(np.abs(h).max() > 65504, "overflow: the model's first MatMul exceeds 65504",
            f"(max|h| = {np.abs(h).max():.3g})")
    e_mixed = rel_error(outs["fp32"], outs["mixed"])
    e_fp16 = rel_error(outs["fp32"], outs["fp16"])
    c.check(e_mixed <= c.args.tol, "overflow: mixed vs fp32", f"error {e_mixed:.3g} (tol {c.args.tol:g})")
    c.check(not (e_fp16 <= c.args.tol), "overflow: forced fp16 is wrong (the check can fail)",
            f"error {e_fp16:.3g}")
    with open(os.path.join(wd, "overflow.mixed.json")) as f:
        nodes = {n["name"]: n for n in json.load(f)["precision"]["nodes"]}
    big = nodes.get("big_matmul", {})
    c.check(big.get("precision") == "fp32" and big.get("reason", "").startswith("overflow"),
            "overflow: the report keeps big_matmul in fp32 for overflow", f"({big.get('reason')})")
    c.check(nodes.get("small_matmul", {}).get("precision") == "fp16",
            "overflow: small_matmul runs in fp16", f"({nodes.get('small_matmul', {}).get('reason')})")
    c.check(nodes.get("norm", {}).get("precision") == "fp32", "overflow: the LayerNormalization stays fp32")
    if c.args.kite_inspect:
        # The FLOPs count on known shapes, and a share the 90% bound fails:
        # big_matmul (fp32) is 2*64*64 FLOPs, small_matmul (fp16) 2*64*16.
        got = fp16_flops_share(c, os.path.join(wd, "overflow.mixed.kite"), list(nodes.values()))
        if got is not None:
            c.check(got == (0.2, 2 * 64 * 64 + 2 * 64 * 16), "overflow: FLOPs in fp16 counted from kite-inspect",
                    f"({100 * got[0]:.1f}% of {got[1]} FLOPs; expected 20.0% of 10240)")
    # --calibration DIR: one .npy per sample for a one-input model.
    cal = os.path.join(wd, "calibration")
    os.makedirs(cal, exist_ok=True)
    rs = np.random.RandomState(7)
    for k in range(2):
        np.save(os.path.join(cal, f"sample{k}.npy"), rs.uniform(-1, 1, (1, 64)).astype(np.float32))
    rep_path = os.path.join(wd, "overflow.calibrated.json")
    rc, text, _ = c.convert(path, os.path.join(wd, "overflow.calibrated.kite"), "mixed",
                            ["--calibration", cal, "--report", rep_path])
    if c.check(rc == 0, "overflow: convert --precision mixed --calibration", "" if rc == 0 else cwo.last_lines(text)):
        with open(rep_path) as f:
            rep = json.load(f)["precision"]
        nodes = {n["name"]: n for n in rep["nodes"]}
        c.check(rep["inputs"].startswith("calibration (2 sample"), "overflow: the report names the calibration",
                f"({rep['inputs']})")
        c.check(nodes["big_matmul"]["precision"] == "fp32", "overflow: calibrated, big_matmul kept in fp32")
    # A calibration value of the wrong shape is refused, naming the input.
    bad = os.path.join(wd, "bad_calibration")
    os.makedirs(bad, exist_ok=True)
    np.save(os.path.join(bad, "x.npy"), np.zeros((1, 32), np.float32))
    rc, text, _ = c.convert(path, os.path.join(wd, "bad.kite"), "mixed", ["--calibration", bad])
    c.check(rc != 0 and "input 'x'" in text and "1x32" in text and not os.path.exists(os.path.join(wd, "bad.kite")),
            "overflow: a calibration value of the wrong shape is refused, naming the input",
            f"(exit {rc}: {cwo.last_lines(text, 1)})")


def check_runtime_if(c):
    """A graph keeping an If (condition computed at run time): fp16 converts
    it and matches fp32 on both branches; mixed refuses it, naming the If."""
    import test_runtime_if as rif
    wd = os.path.join(c.args.workdir, "runtime_if")
    os.makedirs(wd, exist_ok=True)
    graph, cases = rif.computed_cond_model()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", rif.OPSET)])
    model.ir_version = 8
    path = os.path.join(wd, "if.onnx")
    onnx.save(model, path)
    rc, text, _ = c.convert(path, os.path.join(wd, "if.mixed.kite"), "mixed")
    c.check(rc != 0 and "If '" in text and "use --precision fp16 or fp32" in text,
            "runtime_if: mixed refuses a graph with a run-time If, naming it", cwo.last_lines(text, 1))
    for precision in ("fp32", "fp16"):
        rc, text, _ = c.convert(path, os.path.join(wd, f"if.{precision}.kite"), precision)
        if not c.check(rc == 0, f"runtime_if: convert --precision {precision}", "" if rc == 0 else cwo.last_lines(text)):
            return
    for name, feeds in cases:
        args = []
        for k, v in feeds.items():
            f = os.path.join(wd, f"{name}_{k}.npy")
            np.save(f, v)
            args += ["--input", f"{k}={f}"]
        outs = {}
        for precision in ("fp32", "fp16"):
            out_dir = os.path.join(wd, f"out_{name}_{precision}")
            rc, text = c.run(os.path.join(wd, f"if.{precision}.kite"), args, out_dir, precision != "fp32")
            if not c.check(rc == 0, f"runtime_if {name}: kite-run {precision}", "" if rc == 0 else cwo.last_lines(text)):
                return
            outs[precision] = read_outputs(out_dir, [o.name for o in graph.output])
        for k, ref in enumerate(outs["fp32"]):
            e = rel_error(ref, outs["fp16"][k])
            c.check(e <= c.args.tol, f"runtime_if {name}: fp16 vs fp32", f"{e:.3g}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True, nargs="+",
                    help="kite-run, or a command with arguments (an emulator in front)")
    ap.add_argument("--kite-inspect", nargs="+",
                    help="kite-inspect (as --kite-run): the FLOPs in fp16, checked on the --cnn models")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--onnx", action="append", default=[])
    ap.add_argument("--cnn", action="append", default=[],
                    help="model names held to the 0.55x size bound and the fp16 FLOPs share")
    ap.add_argument("--budget", action="append", default=[],
                    help="model names also converted with --memory-budget 0.6x")
    ap.add_argument("--digits", help="models/digits: the held-out accuracy check")
    ap.add_argument("--backend", default="cpu",
                    help="the backend the fp16 and mixed files run on (with cpu after it); default cpu")
    ap.add_argument("--backend-path", help="kite-run --backend-path (a plugin's folder)")
    ap.add_argument("--tol", type=float, default=1e-2)
    ap.add_argument("--min-fp16-flops", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    args.target = "cpu" if args.backend == "cpu" else f"{args.backend},cpu"
    c = Checker(args)
    check_overflow(c)
    check_runtime_if(c)
    if args.digits:
        check_digits(c)
    rows = []
    for path in args.onnx:
        check_model(c, path, rows)
    if rows:
        print(f"\n{'model':22s} {'fp32 file':>12s} {'fp16 file':>12s} {'ratio':>6s} {'mixed file':>12s} "
              f"{'arena fp32':>11s} {'arena mixed':>11s} {'fp16/fp32 nodes (mixed)':>24s} {'kept':>5s} "
              f"{'casts':>6s} {'error':>8s} {'FLOPs fp16':>10s} {'convert':>8s}"
              + ("  fp16 nodes per backend" if args.backend != "cpu" else ""))
        for (name, s32, s16, smx, n16, n32, kept, casts, err, t, share, a32, amx, per_backend) in rows:
            flops = f"{100 * share:.1f}%" if share is not None else "-"
            where = " ".join(f"{b}:{k}" for b, k in per_backend.most_common()) if per_backend is not None else ""
            print(f"{name:22s} {s32:12d} {s16:12d} {s16 / s32:6.3f} {smx:12d} {a32:11d} {amx:11d} "
                  f"{f'{n16}/{n32}':>24s} {kept:5d} {casts:6d} {err if err is not None else float('nan'):8.2g} "
                  f"{flops:>10s} {t:7.1f}s" + (f"  {where}" if where else ""))
    passed = sum(c.results)
    failed = len(c.results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
