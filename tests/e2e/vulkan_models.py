#!/usr/bin/env python3
"""The model set on Vulkan through the runtime (issue 13's done-when):
each model converted at -O2 runs with `kite-run --backend vulkan,cpu
--poison` in both memory modes (unified, and `--backend-option
vulkan:unified=0`, the staging path of discrete GPUs) and must match
`--backend cpu` within 1e-3 x max|ref| (float32 sums in another order
through up to ~150 layers; measured ratios are ~1e-6). The placement must
put the nodes on Vulkan: every node of the CNNs, in one segment; for the
transformers (vit_small, text_transformer) at least 95% of the nodes (today
every node of both is on Vulkan, so 100% of their FLOPs too). With
--profile, every Vulkan node has a measured GPU time.

Usage: vulkan_models.py --kite-convert X --kite-run Y --workdir D MODEL.onnx...
Skips (tests/support/kite_test_skip.py: exit 77, printing why) when the Vulkan
backend reports no device, or fails under KITE_REQUIRE_DEVICE=vulkan.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from kite_test_skip import exit_without_device  # noqa: E402

TRANSFORMERS = ("vit_small", "text_transformer")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def outputs(folder):
    return {f[:-4]: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder)) if f.endswith(".npy")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--rtol-of-max", type=float, default=1e-3)
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("KITE_VULKAN_VALIDATION", "1")

    failures = []
    rows = []
    for onnx_path in args.models:
        name = os.path.basename(onnx_path)[:-5]
        base = os.path.join(args.workdir, name)
        kite = base + ".kite"
        run([args.kite_convert, onnx_path, "-o", kite, "-q"])
        ref_dir = base + ".cpu"
        os.makedirs(ref_dir, exist_ok=True)
        run([args.kite_run, kite, "--backend", "cpu", "--output-dir", ref_dir, "--quiet"], env=env)
        ref = outputs(ref_dir)
        for mode, extra in (("unified", []), ("staging", ["--backend-option", "vulkan:unified=0"])):
            out_dir = f"{base}.vulkan_{mode}"
            os.makedirs(out_dir, exist_ok=True)
            report = f"{base}.vulkan_{mode}.json"
            cmd = [args.kite_run, kite, "--backend", "vulkan,cpu", "--poison", "--output-dir", out_dir,
                   "--json", report, "--quiet"] + extra
            if mode == "unified":
                cmd += ["--profile", "--iterations", "1"]
            run(cmd, env=env)
            with open(report) as fh:
                r = json.load(fh)
            vk = [b for b in r["backends"] if b["name"] == "vulkan"]
            if not vk or not vk[0]["available"]:
                exit_without_device("vulkan", f"the Vulkan backend is not available: {r.get('notes')}")
            got = outputs(out_dir)
            worst = 0.0
            for k, a in ref.items():
                b = got[k]
                scale = max(float(np.max(np.abs(a))), 1e-6)
                err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) / scale
                if not np.all(np.isfinite(b)):
                    err = float("inf")
                worst = max(worst, err)
            placement = r["placement"]
            on_vk = [p for p in placement if p["backend"] == "vulkan"]
            share = len(on_vk) / max(len(placement), 1)
            problems = []
            if worst > args.rtol_of_max:
                problems.append(f"error {worst:.2e} of max|ref| > {args.rtol_of_max}")
            if name in TRANSFORMERS:
                if share < 0.95:
                    problems.append(f"only {share:.0%} of the nodes on Vulkan")
            else:
                if len(on_vk) != len(placement):
                    off = [f"{p['op']} '{p['node']}': {p['reason']}" for p in placement if p["backend"] != "vulkan"]
                    problems.append(f"{len(off)} nodes not on Vulkan: {off[:3]}")
                if r["segments_per_run"] != 1:
                    problems.append(f"{r['segments_per_run']} segments per run, expected 1")
            if mode == "unified":
                if r["transfers_per_run"] != 0 and share == 1.0:
                    problems.append(f"{r['transfers_per_run']} transfers per run on unified memory")
                nodes = (r.get("profile") or {}).get("nodes", [])
                unmeasured = [n["node"] for n in nodes if n["backend"] == "vulkan" and not n["measured"]]
                if len(nodes) != len(placement):
                    problems.append(f"the profile has {len(nodes)} nodes, the placement {len(placement)}")
                if unmeasured:
                    problems.append(f"{len(unmeasured)} Vulkan nodes without a GPU time: {unmeasured[:3]}")
            rows.append(f"{name:20} {mode:8} {len(on_vk):4}/{len(placement):<4} nodes on vulkan, "
                        f"{r['segments_per_run']} segment(s), {r['transfers_per_run']} transfers, "
                        f"error {worst:.2e} of max|ref|" + ("" if not problems else "  FAIL: " + "; ".join(problems)))
            print(rows[-1], flush=True)
            if problems:
                failures.append(f"{name} ({mode}): " + "; ".join(problems))
    if failures:
        print("\n".join(["FAILED:"] + failures))
        return 1
    print(f"all {len(rows)} runs match the CPU within {args.rtol_of_max} x max|ref|")
    return 0


if __name__ == "__main__":
    sys.exit(main())
