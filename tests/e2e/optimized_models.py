#!/usr/bin/env python3
# Python: the default python3 (pyenv 3.11), because it has onnxruntime + onnx + numpy 2 from pip.
"""The model set through the optimizer (issue 4's done-when checks).

For each --onnx model:
  1. kite-convert -O2 --report: record nodes and kernel launches before/after
     and the fused patterns;
  2. kite-run with the CPU backend (fused kernels) and again with its fused
     kernels off (--backend-option cpu:fused=0, so the session runs every
     fused node's body): both must match onnxruntime on
     the original ONNX file within --rtol-of-max x max|ref| (default 1e-4,
     justified in compare_with_ort.py), and each other within the same bound;
  3. structural checks on the written file (through kite-inspect):
     - no BatchNormalization and no Identity node left (every model; the
       issue names resnet18, whose BatchNorms are kept by the export);
     - every Reshape reads a constant shape: no Shape/Gather/Unsqueeze/Concat
       chain is left feeding a Reshape (shufflenet_v2, ViT, transformer), and
       no Shape node is left at all.

Prints one line per check and a table of launch counts, then exactly
"N passed, N failed"; exits 1 if anything failed.

Usage:
  tests/e2e/optimized_models.py --kite-convert P --kite-run P --kite-inspect P \\
      --workdir DIR --onnx a.onnx [--onnx b.onnx ...]
"""
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import compare_with_ort as cwo  # noqa: E402  (input drawing and the comparison rule)
import kite_driver  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
except ImportError as e:  # pragma: no cover
    sys.exit(f"error: this script needs onnx and onnxruntime ({e}); run it with the pip python3")


def inspect_nodes(text):
    """Main-graph nodes from kite-inspect: [(op, pattern, [input lines])]."""
    nodes, in_main, current = [], False, None
    for line in text.splitlines():
        if line.startswith("graph "):
            in_main = line.startswith("graph 0 ")
            continue
        if not in_main:
            continue
        m = re.match(r"^  +(\d+)  (\S+)(?: \[([^\]]*)\])?  '", line)
        if m and line.startswith("  ") and not line.startswith("         "):
            current = (m.group(2), m.group(3) or "", [])
            nodes.append(current)
        elif current is not None and line.strip().startswith("in  ") and not line.startswith("                "):
            current[2].append(line.strip())
    return nodes


def main():
    ap = kite_driver.tool_parser(__doc__, tools=("kite-convert", "kite-run", "kite-inspect"))
    ap.add_argument("--onnx", action="append", required=True)
    ap.add_argument("--rtol-of-max", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = kite_driver.parse_args(ap)
    verdicts = kite_driver.Verdicts(label_first=True)
    verdict = verdicts.record
    table = []

    for path in args.onnx:
        name = os.path.splitext(os.path.basename(path))[0]
        wd = os.path.join(args.workdir, cwo.sanitize(name))
        os.makedirs(os.path.join(wd, "inputs"), exist_ok=True)
        model = onnx.load(path, load_external_data=False)
        specs = cwo.graph_inputs(model, {})
        feeds = cwo.make_inputs(model, specs, args.seed)
        input_args, shape_args = cwo.save_inputs(specs, feeds, os.path.join(wd, "inputs"))
        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        out_names = [o.name for o in sess.get_outputs()]
        refs = sess.run(None, feeds)

        kite_file = os.path.join(wd, name + ".kite")
        report_file = os.path.join(wd, name + ".report.json")
        rc, so, se = kite_driver.run_tool([args.kite_convert, path, "-o", kite_file, "-O2", "--report",
                                           report_file] + shape_args, 900)
        if rc != 0:
            verdict(False, f"{name}: convert", (se or so).strip()[-400:])
            continue
        with open(report_file) as f:
            report = json.load(f)
        table.append((name, report))

        results = {}
        for path_name, extra, env_extra in (
                ("fused", ["--backend", "cpu"], {}),
                ("body", ["--backend", "cpu", "--backend-option", "cpu:fused=0"], {})):
            out_dir = os.path.join(wd, path_name)
            kite_driver.empty_dir(out_dir)
            env = dict(os.environ, **env_extra)
            cmd = [args.kite_run, kite_file, "--output-dir", out_dir, "--placement"] + extra + input_args
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            rc, so, se = kite_driver.run_tool(cmd, 900, env)
            if rc != 0:
                verdict(False, f"{name}: kite-run ({path_name} path)", (se or so).strip()[-400:])
                continue
            outs = {}
            for oname in out_names:
                f = os.path.join(out_dir, cwo.sanitize(oname) + ".npy")
                outs[oname] = np.load(f) if os.path.exists(f) else None
            results[path_name] = (outs, so)
        if len(results) != 2:
            continue
        fused_count = sum(report["fusions"].values())
        # The placement lines say how each fused node ran.
        for path_name, want in (("fused", "fused"), ("body", "decomposed")):
            so = results[path_name][1]
            m = re.search(r"\((\d+) fused, (\d+) decomposed\)", so)
            got = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            expected = (fused_count, 0) if want == "fused" else (0, fused_count)
            verdict(got == expected, f"{name}: {path_name} path runs {fused_count} fused nodes {want}",
                    f"(placement: {got[0]} fused, {got[1]} decomposed)")
        for oname, ref in zip(out_names, refs):
            for path_name in ("fused", "body"):
                got = results[path_name][0][oname]
                if got is None:
                    verdict(False, f"{name}:{oname} {path_name} path", "no output written")
                    continue
                ok, md, mr, ratio, note = cwo.compare(np.asarray(ref), got, args.rtol_of_max)
                verdict(ok, f"{name}:{oname} {path_name} path vs onnxruntime",
                        f"max|diff|={md:.3g} max|ref|={mr:.3g} ratio={ratio:.3g} {note}".rstrip())
            a, b = results["fused"][0][oname], results["body"][0][oname]
            if a is not None and b is not None:
                ok, md, mr, ratio, note = cwo.compare(b, a, args.rtol_of_max)
                verdict(ok, f"{name}:{oname} fused path vs body path",
                        f"max|diff|={md:.3g} ratio={ratio:.3g} {note}".rstrip())

        rc, so, se = kite_driver.run_tool([args.kite_inspect, kite_file], 900)
        if rc != 0:
            verdict(False, f"{name}: kite-inspect", (se or so).strip()[-400:])
            continue
        nodes = inspect_nodes(so)
        ops = [op for op, _, _ in nodes]
        verdict("BatchNormalization" not in ops and "Identity" not in ops,
                f"{name}: no BatchNormalization or Identity left",
                f"({ops.count('BatchNormalization')} BatchNormalization, {ops.count('Identity')} Identity)")
        computed = [ins for op, _, ins in nodes if op == "Reshape" and (len(ins) < 2 or not ins[1].endswith(" const"))]
        verdict(not computed and "Shape" not in ops, f"{name}: shape subgraphs folded",
                f"({len(computed)} Reshape with a computed shape, {ops.count('Shape')} Shape)")

    print("\n| model | ONNX nodes | nodes before -> after -O2 | kernel launches before -> after | fused patterns |")
    print("|---|---|---|---|---|")
    for name, r in table:
        fusions = ", ".join(f"{k} {v}" for k, v in sorted(r["fusions"].items())) or "none"
        print(f"| {name} | {r['onnx_nodes']} | {r['nodes_before']} -> {r['nodes_after']} | "
              f"{r['kernel_launches_before']} -> {r['kernel_launches_after']} | {fusions} |")
    return verdicts.summary()


if __name__ == "__main__":
    sys.exit(main())
