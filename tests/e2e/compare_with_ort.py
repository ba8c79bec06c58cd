#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11), because it has onnxruntime + onnx + numpy 2 from pip.
"""End-to-end check of Kite against onnxruntime on whole models.

For each --onnx model: draw seeded random inputs from the ONNX input shapes and
dtypes, save them as .npy, run onnxruntime (CPUExecutionProvider) for the
reference, convert the model with kite-convert, run kite-run on the same inputs,
and compare every graph output.

Usage:
  tests/e2e/compare_with_ort.py --kite-convert build/default/converter/kite-convert \\
      --kite-run build/default/apps/kite-run/kite-run \\
      --onnx out/models/resnet18.onnx [--onnx ...] --workdir out/e2e [--rtol-of-max 1e-4]

Pass criterion per float output:  max|kite - ref| <= tol * max|ref|  (tol =
--rtol-of-max, default 1e-4). Why 1e-4: each output is a float32 sum of K
products (K = Cin*kh*kw, up to ~4.6k for resnet18's 3x3x512 convs, and ~20-50
such layers deep). Kite sums in a different order than onnxruntime and folds
BatchNorm into the conv weights offline, so every element is rounded
differently; with eps = 6e-8 that gives a random-walk error of about
sqrt(K)*eps ~ 4e-6 relative per layer, and ~1e-6..1e-5 of max|ref| at the
output (torch against onnxruntime on these exports measures ~1e-6). 1e-4 keeps
a 10x margin, while a real bug (wrong pad, stride, layout, folded
statistics) shows up as a ratio of 1e-2 or more. Normalising by max|ref|
rather than element-wise keeps outputs near zero (logits that cancel) from
failing on harmless absolute noise. Integer and bool outputs must match exactly.
If a reference output is all zeros the bound becomes absolute: max|diff| <= tol.

Integer inputs (token ids) are drawn from [lo, hi) given by the model's
metadata_props entry "kite.input_range.<input name>" = "lo,hi" (written by
scripts/export_models.py), else from [0, 10). Dynamic dimensions are set to 1
(override with --dim NAME=VALUE) and passed to kite-convert as --input-shape.

Prints one line per model/output and finally exactly "N passed, N failed";
exits 1 if anything failed.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import kite_driver  # noqa: E402
from kite_driver import sanitize  # noqa: E402,F401  (cross_arch_models.py, optimized_models.py)

try:
    import onnx
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    sys.exit(f"error: this script needs onnx and onnxruntime ({e}); run it with the pip python3")

NP_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT16: np.int16,
    onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.BOOL: np.bool_,
}


def run_tool(cmd, timeout):
    """kite_driver.run_tool's (exit status, stdout, stderr) and the seconds it took."""
    t0 = time.time()
    rc, out, err = kite_driver.run_tool(cmd, timeout)
    return rc, out, err, time.time() - t0


def last_lines(text, n=6):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])


def graph_inputs(model, dim_overrides):
    """(name, shape, np dtype, dynamic?) for each true graph input (initializers excluded)."""
    inits = {i.name for i in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if tt.elem_type not in NP_DTYPES:
            raise ValueError(f"input '{vi.name}': unsupported elem_type {tt.elem_type}")
        shape, dynamic = [], False
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                dynamic = True
                shape.append(dim_overrides.get(d.dim_param, 1))
        out.append((vi.name, tuple(shape), NP_DTYPES[tt.elem_type], dynamic))
    return out


def make_inputs(model, specs, seed):
    meta = {p.key: p.value for p in model.metadata_props}
    rs = np.random.RandomState(seed)
    feeds = {}
    for name, shape, dt, _ in specs:
        if np.issubdtype(dt, np.floating):
            a = rs.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            a = rs.randint(0, 2, size=shape).astype(np.bool_)
        else:
            lo, hi = 0, 10
            r = meta.get(f"kite.input_range.{name}")
            if r:
                lo, hi = (int(v) for v in r.split(","))
            a = rs.randint(lo, hi, size=shape).astype(dt)
        feeds[name] = a
    return feeds


def save_inputs(specs, feeds, in_dir):
    """Saves feeds as in_dir/NAME.npy; returns kite-run's --input arguments
    and kite-convert's --input-shape arguments (for the dynamic inputs)."""
    input_args, shape_args = [], []
    for n, shape, _, dynamic in specs:
        f = os.path.join(in_dir, sanitize(n) + ".npy")
        np.save(f, feeds[n])
        input_args += ["--input", f"{n}={f}"]
        if dynamic:
            shape_args += ["--input-shape", f"{n}={'x'.join(map(str, shape))}"]
    return input_args, shape_args


def compare(ref, got, tol):
    """Returns (ok, maxdiff, maxref, ratio, note)."""
    if got.shape != ref.shape:
        return False, float("nan"), float("nan"), float("nan"), \
            f"shape {list(got.shape)} != expected {list(ref.shape)}"
    if not np.issubdtype(ref.dtype, np.floating):
        if got.dtype != ref.dtype and not (np.issubdtype(got.dtype, np.integer) or got.dtype == np.bool_):
            return False, float("nan"), float("nan"), float("nan"), \
                f"dtype {got.dtype} != expected {ref.dtype}"
        diff = np.abs(got.astype(np.int64) - ref.astype(np.int64))
        md = float(diff.max()) if diff.size else 0.0
        mr = float(np.abs(ref.astype(np.int64)).max()) if ref.size else 0.0
        return md == 0, md, mr, (md / mr if mr else md), "exact match required"
    if got.dtype != ref.dtype:
        note = f"dtype {got.dtype} (expected {ref.dtype})"
        if not np.issubdtype(got.dtype, np.floating):
            return False, float("nan"), float("nan"), float("nan"), note
    else:
        note = ""
    r64, g64 = ref.astype(np.float64), got.astype(np.float64)
    if not np.all(np.isfinite(g64) == np.isfinite(r64)):
        return False, float("nan"), float("nan"), float("nan"), "non-finite values differ"
    fin = np.isfinite(r64)
    diff = np.abs(g64[fin] - r64[fin])
    md = float(diff.max()) if diff.size else 0.0
    mr = float(np.abs(r64[fin]).max()) if diff.size else 0.0
    bound = tol * mr if mr > 0 else tol
    ratio = md / mr if mr > 0 else md
    return md <= bound, md, mr, ratio, note


def check_model(path, args, results):
    name = os.path.splitext(os.path.basename(path))[0]
    wd = os.path.join(args.workdir, sanitize(name))
    in_dir, out_dir = os.path.join(wd, "inputs"), os.path.join(wd, "kite_out")
    os.makedirs(in_dir, exist_ok=True)
    kite_driver.empty_dir(out_dir)  # stale outputs must not pass for new ones

    def fail(msg):
        print(f"{name}: FAIL {msg}", flush=True)
        results.append(False)

    try:
        model = onnx.load(path, load_external_data=False)
        specs = graph_inputs(model, args.dim)
        feeds = make_inputs(model, specs, args.seed)
    except Exception as e:
        return fail(f"cannot read model: {type(e).__name__}: {e}")

    input_args, shape_args = save_inputs(specs, feeds, in_dir)

    try:
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads or 0
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        out_names = [o.name for o in sess.get_outputs()]
        t0 = time.time()
        refs = sess.run(None, feeds)
        t_ort = time.time() - t0
    except Exception as e:
        return fail(f"onnxruntime could not run the model: {type(e).__name__}: {e}")

    kite_file = os.path.join(wd, name + ".kite")
    rc, so_, se, t_conv = run_tool([args.kite_convert, path, "-o", kite_file] + shape_args,
                                   args.timeout)
    if args.verbose:
        sys.stdout.write(so_ + se)
    if rc != 0:
        return fail(f"kite-convert exited {rc}: {last_lines(se or so_)}")
    if not os.path.exists(kite_file):
        return fail(f"kite-convert exited 0 but wrote no {kite_file}")

    cmd = [args.kite_run, kite_file] + input_args + ["--output-dir", out_dir]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    rc, so_, se, t_run = run_tool(cmd, args.timeout)
    if args.verbose:
        sys.stdout.write(so_ + se)
    if rc != 0:
        return fail(f"kite-run exited {rc}: {last_lines(se or so_)}")

    for oname, ref in zip(out_names, refs):
        label = f"{name}:{oname}"
        f = os.path.join(out_dir, sanitize(oname) + ".npy")
        if not os.path.exists(f):
            print(f"{label}: FAIL kite-run wrote no {f}", flush=True)
            results.append(False)
            continue
        try:
            got = np.load(f)
        except Exception as e:
            print(f"{label}: FAIL cannot load {f}: {e}", flush=True)
            results.append(False)
            continue
        ok, md, mr, ratio, note = compare(np.asarray(ref), got, args.rtol_of_max)
        results.append(ok)
        print(f"{label}: max|diff|={md:.3g} max|ref|={mr:.3g} ratio={ratio:.3g} "
              f"(tol {args.rtol_of_max:g}) {'PASS' if ok else 'FAIL'}"
              f"{' ' + note if note else ''}", flush=True)
    print(f"  {name}: convert {t_conv:.2f}s, kite-run {t_run:.2f}s (process), "
          f"onnxruntime {t_ort:.3f}s (in-process)", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--onnx", action="append", required=True, help="model file; repeat for more")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol-of-max", type=float, default=1e-4,
                    help="pass if max|diff| <= this * max|ref| (default 1e-4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="passed to kite-run --threads if > 0")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool invocation")
    ap.add_argument("--dim", action="append", default=[], metavar="PARAM=N",
                    help="value for a symbolic dimension (default 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the tools' output")
    args = ap.parse_args()
    dims = {}
    for d in args.dim:
        k, _, v = d.partition("=")
        dims[k] = int(v)
    args.dim = dims
    for tool in (args.kite_convert, args.kite_run):
        if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
            sys.exit(f"error: {tool} is not an executable file")
    os.makedirs(args.workdir, exist_ok=True)

    results = []
    for path in args.onnx:
        check_model(path, args, results)
    passed = sum(results)
    failed = len(results) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
