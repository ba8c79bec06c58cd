#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11) for numpy; uses onnxruntime from pip when present, runs without it.
"""Kite end-to-end demo: the digits CNN, converted and run by Kite, against PyTorch and onnxruntime.

Steps:
  1. kite-convert models/digits/digits_cnn.onnx -> <out>/digits_cnn.kite (its output is shown)
  2. kite-run on models/digits/heldout_images.npy -> <out>/logits.npy
  3. accuracy from argmax(logits) against models/digits/heldout_labels.npy, next to
     the PyTorch accuracy recorded at training time (reference.json) and the
     onnxruntime accuracy computed now (if onnxruntime is importable), plus
     max |Kite logits - onnxruntime logits|.

  4. the same through the Python package when it is importable (`import kite`,
     installed by `pip install ./python`; scripts/run_demo.sh does that in a venv):
     kite.convert -> kite.Model -> session.run with the numpy images, whose
     logits must equal kite-run's exactly (same file, same kernels).

Exits non-zero if conversion or the run fails, if Kite's accuracy differs
from onnxruntime's by more than one sample, or if the Python path's logits
differ from kite-run's.

Usage:  scripts/demo.py --bin-dir build/default [--out DIR] [--threads N] [--require-python]
  --bin-dir is searched for kite-convert and kite-run directly and in the build
  tree's converter/ and apps/kite-run/ subfolders.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIGITS = os.path.join(REPO, "models", "digits")


def find_tool(bin_dir, name):
    for sub in ("", "converter", os.path.join("apps", name), "apps", "bin"):
        p = os.path.join(bin_dir, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    sys.exit(f"error: {name} not found in {bin_dir} (looked in ., converter/, apps/{name}/, apps/, bin/)")


def run(cmd, show=True):
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if show and p.stdout:
        print("  " + p.stdout.rstrip().replace("\n", "\n  "), flush=True)
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin-dir", required=True, help="folder holding kite-convert and kite-run")
    ap.add_argument("--out", help="output folder (default: a fresh temporary folder)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--require-python", action="store_true",
                    help="fail if the kite Python package is not importable")
    args = ap.parse_args()

    convert = find_tool(args.bin_dir, "kite-convert")
    kite_run = find_tool(args.bin_dir, "kite-run")
    out = args.out or tempfile.mkdtemp(prefix="kite-demo-")
    os.makedirs(out, exist_ok=True)

    onnx_path = os.path.join(DIGITS, "digits_cnn.onnx")
    images_path = os.path.join(DIGITS, "heldout_images.npy")
    labels = np.load(os.path.join(DIGITS, "heldout_labels.npy"))
    with open(os.path.join(DIGITS, "reference.json")) as f:
        ref = json.load(f)
    n = len(labels)

    kite_file = os.path.join(out, "digits_cnn.kite")
    p = run([convert, onnx_path, "-o", kite_file])
    if p.returncode != 0 or not os.path.exists(kite_file):
        print(f"FAILED: kite-convert exited {p.returncode}", file=sys.stderr)
        return 1

    out_dir = os.path.join(out, "kite_out")
    os.makedirs(out_dir, exist_ok=True)
    logits_file = os.path.join(out_dir, re.sub(r"[^A-Za-z0-9._-]", "_", "logits") + ".npy")
    if os.path.exists(logits_file):
        os.remove(logits_file)
    cmd = [kite_run, kite_file, "--input", f"image={images_path}", "--output-dir", out_dir]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    p = run(cmd)
    if p.returncode != 0 or not os.path.exists(logits_file):
        print(f"FAILED: kite-run exited {p.returncode}"
              f"{'' if os.path.exists(logits_file) else ', no ' + logits_file}", file=sys.stderr)
        return 1
    kite_logits = np.load(logits_file)
    if kite_logits.shape != (n, 10):
        print(f"FAILED: Kite logits have shape {kite_logits.shape}, expected {(n, 10)}", file=sys.stderr)
        return 1
    kite_correct = int((kite_logits.argmax(1) == labels).sum())

    ort_correct, ort_note, max_diff = None, "", None
    try:
        import onnxruntime as ort
    except ImportError:
        ort_note = "onnxruntime not importable; skipped"
    else:
        sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
        ort_logits = sess.run(["logits"], {"image": np.load(images_path)})[0]
        ort_correct = int((ort_logits.argmax(1) == labels).sum())
        max_diff = float(np.abs(kite_logits.astype(np.float64) - ort_logits).max())
        max_ref = float(np.abs(ort_logits).max())

    py_correct, py_note, py_diff = None, "", None
    try:
        import kite
    except ImportError as e:
        if args.require_python:
            print(f"FAILED: --require-python, but import kite fails: {e}", file=sys.stderr)
            return 1
        py_note = "kite package not installed (pip install ./python); skipped"
    else:
        print("\n# The same from Python: import kite", flush=True)
        py_file = os.path.join(out, "digits_cnn_py.kite")
        print(f">>> report = kite.convert({onnx_path!r}, {py_file!r})")
        report = kite.convert(onnx_path, py_file)
        print(f"    fusions {report['fusions']}, kernel launches "
              f"{report['kernel_launches_before']} -> {report['kernel_launches_after']}, "
              f"arena {report['memory']['arena_bytes']} bytes")
        print(f">>> m = kite.Model({py_file!r}); m.inputs")
        m = kite.Model(py_file)
        print(f"    {m.inputs}")
        print(f">>> s = m.session(threads={args.threads}); "
              f"logits = s.run({{'image': images}})['logits']")
        s = m.session(threads=args.threads)
        py_logits = s.run({"image": np.load(images_path)})["logits"]
        placed = sorted({p["backend"] for p in s.placement()})
        print(f"    {py_logits.dtype} {py_logits.shape}; nodes on {placed}")
        py_correct = int((py_logits.argmax(1) == labels).sum())
        py_diff = float(np.abs(py_logits - kite_logits).max())

    def acc(c):
        return f"{c / n:.4f} ({c}/{n})"

    rows = [("Kite (kite-convert, kite-run)", acc(kite_correct)),
            (f"Kite (Python, kite {kite.__version__})" if py_correct is not None else "Kite (Python)",
             acc(py_correct) if py_correct is not None else py_note),
            (ref.get("framework", "PyTorch") + " (reference.json)",
             f"{ref['heldout_accuracy']:.4f} ({round(ref['heldout_accuracy'] * ref['n'])}/{ref['n']})"),
            ("onnxruntime " + (ort.__version__ if ort_correct is not None else ""),
             acc(ort_correct) if ort_correct is not None else ort_note)]
    if max_diff is not None:
        rows.append(("max |Kite - onnxruntime| logits", f"{max_diff:.3g} (max |logit| {max_ref:.3g})"))
    if py_diff is not None:
        rows.append(("max |Python - kite-run| logits", f"{py_diff:.3g}"))
    w = max(len(r[0]) for r in rows)
    print()
    print(f"Digits CNN, {n} held-out images")
    print("-" * (w + 24))
    for k, v in rows:
        print(f"{k:<{w}}  {v}")
    print("-" * (w + 24))
    print(f"outputs in {out}")

    if py_diff is not None and py_diff != 0:
        print(f"FAILED: the Python path's logits differ from kite-run's by {py_diff:.3g}",
              file=sys.stderr)
        return 1
    if ort_correct is not None and abs(kite_correct - ort_correct) > 1:
        print(f"FAILED: Kite got {kite_correct} right, onnxruntime {ort_correct} "
              f"(more than 1 sample apart)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
