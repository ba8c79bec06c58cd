#!/usr/bin/env python3
# Python: the default python3 (numpy from pip) - only numpy is needed.
"""Every model through the configurable test backend (tests/backend) in each
configuration must give the CPU backend's outputs. Where the same kernels
run (all accepted, an op falling back to the CPU, the "device" side of
transfers) they must match bit for bit: same kernels, same values, same
order (runs use one thread so no work split can differ). Where fused nodes
run as their bodies, a fused kernel (LayerNorm, GELU, attention) sums in a
different order than its primitive ops, so those configurations must match
within 1e-4 x max|reference|, the bound the model set meets against
onnxruntime (float32 reassociation over a few hundred terms is ~1e-6
relative; 1e-4 leaves room and still catches any wrong op).

Also checks that with fused nodes declined, `kite-run --placement` shows
them decomposed, and that strict mode refuses the fallback naming a node.

Usage: backend_configs.py --kite-convert P --kite-run P --plugin-dir DIR
                          --workdir DIR MODEL.onnx|MODEL.kite ...
Prints one line per model and configuration, then "N passed, N failed".
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np

CONFIGS = [
    "",                                   # accept everything
    "decline-fused",                      # fused nodes run as their bodies
    "decline=Conv",                       # one op type falls back to the CPU
    "device",                             # device memory: uploads and downloads
    "device,decline-fused,decline=Relu",  # all of it at once
]


def run(cmd, env=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def outputs(folder):
    return {f: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--plugin-dir", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    passed = failed = 0

    def verdict(ok, label, detail=""):
        nonlocal passed, failed
        print(f"{'PASS' if ok else 'FAIL'} {label}{': ' + detail if detail else ''}")
        passed += ok
        failed += not ok

    for model in args.models:
        name = os.path.splitext(os.path.basename(model))[0]
        kite = model
        if model.endswith(".onnx"):
            kite = os.path.join(args.workdir, name + ".kite")
            p = run([args.kite_convert, model, "-o", kite, "-q"])
            if p.returncode != 0:
                verdict(False, f"{name} convert", p.stderr.strip())
                continue
        ref_dir = os.path.join(args.workdir, name, "cpu")
        p = run([args.kite_run, kite, "--threads", "1", "--quiet", "--output-dir", ref_dir])
        if p.returncode != 0:
            verdict(False, f"{name} cpu", p.stderr.strip())
            continue
        ref = outputs(ref_dir)
        for cfg in CONFIGS:
            env = dict(os.environ, KITE_TEST_BACKEND=cfg)
            out_dir = os.path.join(args.workdir, name, cfg.replace(",", "+").replace("=", "-") or "all")
            p = run([args.kite_run, kite, "--threads", "1", "--backend", "test,cpu",
                     "--backend-path", args.plugin_dir, "--placement", "--output-dir", out_dir], env)
            label = f"{name} [{cfg or 'accept all'}]"
            if p.returncode != 0:
                verdict(False, label, p.stderr.strip())
                continue
            got = outputs(out_dir)
            if "decline-fused" in cfg:
                def close(a, b):
                    return a.shape == b.shape and float(np.max(np.abs(a.astype(np.float64) - b), initial=0.0)) <= \
                        1e-4 * float(np.max(np.abs(a), initial=0.0))
                bad = [k for k in ref if k not in got or not close(ref[k], got[k])]
            else:
                bad = [k for k in ref if k not in got or not np.array_equal(ref[k], got[k], equal_nan=True)]
            summary = re.search(r"^placement: .*$", p.stdout, re.M)
            detail = summary.group(0) if summary else ""
            if bad:
                verdict(False, label, f"outputs differ from the CPU's: {bad}")
                continue
            m = re.search(r"\((\d+) fused, (\d+) decomposed\)", detail)
            fused, decomposed = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            if cfg == "decline-fused" and fused > 0:
                verdict(False, label, f"fused nodes not decomposed: {detail}")
                continue
            if cfg == "" and decomposed > 0:
                verdict(False, label, f"nodes decomposed though accepted: {detail}")
                continue
            verdict(True, label, detail)
        # Strict mode turns the Conv fallback (every model here has a Conv)
        # into an error naming a node.
        env = dict(os.environ, KITE_TEST_BACKEND="decline=Conv,decline-fused")
        p = run([args.kite_run, kite, "--backend", "test,cpu", "--backend-path", args.plugin_dir,
                 "--strict", "--quiet"], env)
        ok = p.returncode != 0 and "strict mode" in p.stderr and ("Conv '" in p.stderr or "decomposed" in p.stderr)
        verdict(ok, f"{name} strict", p.stderr.strip().splitlines()[0] if p.stderr.strip() else "no error")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
