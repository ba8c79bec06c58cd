#!/usr/bin/env python3
"""A .kite file converted on the build machine gives the same outputs on the
target (issue 16: x86-64 -> arm64 under qemu-aarch64).

For each ONNX model: make seeded inputs (.npy, as compare_with_ort.py does),
convert the model once with the host's kite-convert, run the host's kite-run
(the reference: x86-64, AVX2 or portable SGEMM) and the target's kite-run
(arm64 under the emulator: the NEON SGEMM) on the same file and inputs, and
require every output within --rtol-of-max x max|ref| (default 1e-4, issue 16's
bound). The two runs differ only in the order and fusing of float operations
(FMA vs separate multiply and add, vector widths), so their differences are
rounding: a few ulps per accumulation, far below 1e-4 of the output's range
for these models; a wrong kernel gives differences of the order of the
outputs themselves.

  cross_arch_models.py --kite-convert HOST/kite-convert --host-kite-run HOST/kite-run \\
      --target-kite-run build/aarch64/emulated/kite-run --workdir DIR MODEL.onnx...
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from compare_with_ort import (compare, graph_inputs, last_lines, make_inputs,  # noqa: E402
                              run_tool, sanitize, save_inputs)
from kite_driver import empty_dir  # noqa: E402
import onnx  # noqa: E402


def check_model(path, args):
    """Returns a list of (label, ok) for the model's outputs."""
    name = os.path.splitext(os.path.basename(path))[0]
    wd = os.path.join(args.workdir, sanitize(name))
    in_dir = os.path.join(wd, "inputs")
    outs = {side: os.path.join(wd, side) for side in ("host", "target")}
    os.makedirs(in_dir, exist_ok=True)
    for d in outs.values():  # stale outputs must not pass for new ones
        empty_dir(d)
    try:
        model = onnx.load(path, load_external_data=False)
        specs = graph_inputs(model, {})
        feeds = make_inputs(model, specs, args.seed)
        out_names = [o.name for o in model.graph.output]
    except Exception as e:
        print(f"{name}: FAIL cannot read model: {type(e).__name__}: {e}", flush=True)
        return [(name, False)]
    input_args, shape_args = save_inputs(specs, feeds, in_dir)

    kite_file = os.path.join(wd, name + ".kite")
    # Weights packed for both machines' CPU kernels (format 1.1): each run
    # must read its own level's forms from the file, not pack at load.
    rc, so, se, t_conv = run_tool([args.kite_convert, path, "-o", kite_file, "--pack-for", "host,arm64-neon"]
                                  + shape_args, args.timeout)
    if rc != 0 or not os.path.exists(kite_file):
        print(f"{name}: FAIL kite-convert (host) exited {rc}: {last_lines(se or so)}", flush=True)
        return [(name, False)]
    times = {}
    for side, tool in (("host", args.host_kite_run), ("target", args.target_kite_run)):
        cmd = [tool, kite_file] + input_args + ["--output-dir", outs[side], "--quiet", "--placement"]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        rc, so, se, times[side] = run_tool(cmd, args.timeout)
        if rc != 0:
            print(f"{name}: FAIL kite-run ({side}) exited {rc}: {last_lines(se or so)}", flush=True)
            return [(name, False)]
        unpacked = [line.strip() for line in so.splitlines() if "weights packed at load" in line]
        if unpacked:
            print(f"{name}: FAIL kite-run ({side}) packed weights at load although the file has "
                  f"forms for it: {unpacked[0]}", flush=True)
            return [(name, False)]
    results = []
    for oname in out_names:
        label = f"{name}:{oname}"
        files = {side: os.path.join(outs[side], sanitize(oname) + ".npy") for side in outs}
        missing = [f for f in files.values() if not os.path.exists(f)]
        if missing:
            print(f"{label}: FAIL no output file {missing[0]}", flush=True)
            results.append((label, False))
            continue
        ref, got = np.load(files["host"]), np.load(files["target"])
        ok, md, mr, ratio, note = compare(ref, got, args.rtol_of_max)
        print(f"{label}: max|diff|={md:.3g} max|ref|={mr:.3g} ratio={ratio:.3g} "
              f"(tol {args.rtol_of_max:g}) {'PASS' if ok else 'FAIL'}{' ' + note if note else ''}",
              flush=True)
        results.append((label, ok))
    print(f"  {name}: convert {t_conv:.2f}s, kite-run host {times['host']:.2f}s, "
          f"target {times['target']:.2f}s (emulated)", flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kite-convert", required=True, help="the host's kite-convert")
    ap.add_argument("--host-kite-run", required=True, help="the host's kite-run (reference)")
    ap.add_argument("--target-kite-run", required=True,
                    help="the target's kite-run (a wrapper that runs it under the emulator)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol-of-max", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("models", nargs="+", help="ONNX files")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    t0 = time.time()
    results = []
    for m in args.models:
        results += check_model(m, args)
    failed = [label for label, ok in results if not ok]
    print(f"{len(results) - len(failed)}/{len(results)} outputs match across architectures "
          f"({time.time() - t0:.1f}s)", flush=True)
    if failed:
        print("FAILED: " + ", ".join(failed), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
