#!/usr/bin/env python3
"""Real exports: what today's PyTorch, torchvision and Hugging Face models emit.

Run with the default python3 (any python3 >= 3.9 with venv): the script makes
a virtual environment of its own (--venv, default build/export-venv) with
PyPI's torch, torchvision, transformers, onnx, onnxscript and numpy, and runs
itself again inside it, so the test environment's packages stay untouched.
Nothing is downloaded but those packages: every model is built from a small
configuration with random weights (seeded).

Each model is exported with both of PyTorch's exporters (TorchScript at
opset 17, dynamo at opset 18 with the weights as external data), converted
with `kite-convert --input-shape` for every input, run with `kite-run`, and
compared with PyTorch's own outputs:

    max |kite - torch| <= tol * max |torch|     (per output)

tol is 1e-4 (fp32 through tens of layers, the model set's bound), 1e-3 for
recurrent models (errors compound over the time steps). Prints one row per
(model, exporter): export, conversion (or the ops it refused), the fusions
kite-convert's report lists, and the worst error; --json writes the rows.
The models whose attention Kite must fuse (MUST_FUSE: the transformers) fail
with status "not fused" when the report lacks the fused Attention, even
when their outputs match.
Exit status 1 when a model that PyTorch exported fails to convert or to
match, 0 otherwise. --known-failures FILE lists (model, exporter) pairs that
are expected to fail today, each with its reason; then a listed pair that
passes is an error too (the list must shrink as Kite grows), and the test
(ctest -R real_exports) stays meaningful while the list is not empty.

usage: export_real_models.py --kite-convert PATH --kite-run PATH --out DIR
                             [--models a,b,...] [--exporters torchscript,dynamo]
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PACKAGES = ["torch", "torchvision", "transformers", "onnx", "onnxscript", "numpy"]


def ensure_venv(venv):
    """Re-executes this script in the venv (made first when missing)."""
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(py):
        print(f"export_real_models: making {venv} ({', '.join(PACKAGES)} from PyPI)", flush=True)
        subprocess.check_call([sys.executable, "-m", "venv", venv])
    check = "import torch, torchvision, transformers, onnx, onnxscript, numpy"
    if subprocess.call([py, "-c", check], stderr=subprocess.DEVNULL) != 0:
        subprocess.check_call([py, "-m", "pip", "install", "-q"] + PACKAGES)
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


# ---- the export set ----------------------------------------------------------------
# Each entry: name -> builder() returning (module, {input name: tensor}, tol).
# Modules return a tuple of tensors (Hugging Face outputs are unwrapped).


def _tv(name, size=224, **kw):
    def build():
        import torch
        import torchvision

        m = getattr(torchvision.models, name)(weights=None, **kw)
        return m, {"image": torch.randn(1, 3, size, size)}, 1e-4
    return build


def _seg(name, size=160):
    def build():
        import torch
        import torchvision

        m = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None)

        class Out(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, x):
                return (self.inner(x)["out"],)

        return Out(m), {"image": torch.randn(1, 3, size, size)}, 1e-4
    return build


class _First:
    """Wraps a Hugging Face model so it returns its last hidden state."""

    @staticmethod
    def wrap(model, key="last_hidden_state"):
        import torch

        class W(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, *args):
                out = self.inner(*args)
                return (out[key] if isinstance(out, dict) or hasattr(out, "keys") else out[0],)

        return W(model)


def _tokens(seq=16, vocab=1000, mask=True):
    import torch

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (1, seq), generator=g)
    inputs = {"input_ids": ids}
    if mask:
        m = torch.ones(1, seq, dtype=torch.int64)
        m[0, seq - 4:] = 0  # padding at the end: the masked softmax guard matters
        inputs["attention_mask"] = m
    return inputs


def _hf(kind):
    def build():
        import torch
        import transformers as tf

        if kind == "bert":
            cfg = tf.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                num_attention_heads=4, intermediate_size=128,
                                max_position_embeddings=64)
            m = tf.BertModel(cfg)
            inputs = _tokens()
        elif kind == "distilbert":
            cfg = tf.DistilBertConfig(vocab_size=1000, dim=64, n_layers=2, n_heads=4,
                                      hidden_dim=128, max_position_embeddings=64)
            m = tf.DistilBertModel(cfg)
            inputs = _tokens()
        elif kind == "gpt2":
            cfg = tf.GPT2Config(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                use_cache=False)
            m = tf.GPT2Model(cfg)
            inputs = _tokens(mask=False)
        elif kind == "llama":
            cfg = tf.LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128,
                                 num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, max_position_embeddings=64,
                                 use_cache=False)
            m = tf.LlamaModel(cfg)
            inputs = _tokens(mask=False)
        elif kind == "t5_encoder":
            cfg = tf.T5Config(vocab_size=1000, d_model=64, d_ff=128, d_kv=16, num_layers=2,
                              num_heads=4, use_cache=False)
            m = tf.T5EncoderModel(cfg)
            inputs = _tokens()
        elif kind == "vit":
            cfg = tf.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=128, image_size=32, patch_size=8)
            m = tf.ViTModel(cfg, add_pooling_layer=False)
            inputs = {"pixel_values": torch.randn(1, 3, 32, 32)}
        elif kind == "whisper_encoder":
            cfg = tf.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=4,
                                   decoder_layers=1, decoder_attention_heads=4,
                                   encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                                   max_source_positions=50, vocab_size=1000, pad_token_id=0,
                                   bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
            m = tf.WhisperModel(cfg).get_encoder()
            inputs = {"input_features": torch.randn(1, 80, 100)}
        else:
            raise ValueError(kind)
        m.config.return_dict = True
        return _First.wrap(m), inputs, 1e-4
    return build


def _module(kind):
    def build():
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        x = torch.randn(1, 20, 32)
        tol = 1e-4
        if kind == "multihead_attention":
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.a = nn.MultiheadAttention(32, 4, batch_first=True)

                def forward(self, x):
                    return (self.a(x, x, x, need_weights=False)[0],)
            inputs = {"x": x}
        elif kind == "transformer_encoder_layer":
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

                def forward(self, x):
                    return (self.layer(x),)
            inputs = {"x": x}
        elif kind in ("lstm", "gru"):
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    cls = nn.LSTM if kind == "lstm" else nn.GRU
                    self.rnn = cls(32, 48, num_layers=1, batch_first=True, bidirectional=True)

                def forward(self, x):
                    return (self.rnn(x)[0],)
            inputs = {"x": x}
            tol = 1e-3
        elif kind == "pixel_shuffle":
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(8, 32, 3, padding=1)
                    self.ps = nn.PixelShuffle(2)

                def forward(self, x):
                    return (self.ps(self.conv(x)),)
            inputs = {"x": torch.randn(1, 8, 16, 16)}
        elif kind == "grid_sample":
            # The grid is an input (a spatial transformer computes it; the
            # TorchScript exporter has no affine_grid before opset 20).
            class M(nn.Module):
                def forward(self, x, grid):
                    return (F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros",
                                          align_corners=False),)
            theta = torch.tensor([[[0.9, -0.2, 0.1], [0.15, 1.1, -0.05]]])
            grid = F.affine_grid(theta, [1, 3, 16, 16], align_corners=False)
            inputs = {"x": torch.randn(1, 3, 16, 16), "grid": grid}
        elif kind == "cumsum":
            class M(nn.Module):
                def forward(self, x):
                    return (torch.cumsum(x, dim=1),)
            inputs = {"x": x}
        elif kind == "topk":
            class M(nn.Module):
                def forward(self, x):
                    v, i = torch.topk(x, 5, dim=-1)
                    return v, i
            inputs = {"x": x}
        elif kind == "einsum":
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.w = nn.Parameter(torch.randn(16, 8, 12))

                def forward(self, q, k, a, b):
                    s = torch.einsum("bhqd,bhkd->bhqk", q, k)
                    bil = torch.einsum("bi,ioj,bj->bo", a, self.w, b)
                    return s, bil
            inputs = {"q": torch.randn(1, 4, 10, 8), "k": torch.randn(1, 4, 12, 8),
                      "a": torch.randn(2, 16), "b": torch.randn(2, 12)}
        else:
            raise ValueError(kind)
        return M(), inputs, tol
    return build


MODELS = {
    # torchvision
    "swin_t": _tv("swin_t"),
    "inception_v3": _tv("inception_v3", size=160, aux_logits=False, init_weights=True),
    "densenet121": _tv("densenet121", size=160),
    "googlenet": _tv("googlenet", size=160, aux_logits=False, init_weights=True),
    "deeplabv3_mobilenet": _seg("deeplabv3_mobilenet_v3_large"),
    "lraspp_mobilenet": _seg("lraspp_mobilenet_v3_large"),
    # Hugging Face (small configurations)
    "hf_bert": _hf("bert"),
    "hf_distilbert": _hf("distilbert"),
    "hf_gpt2": _hf("gpt2"),
    "hf_llama": _hf("llama"),
    "hf_t5_encoder": _hf("t5_encoder"),
    "hf_vit": _hf("vit"),
    "hf_whisper_encoder": _hf("whisper_encoder"),
    # modules users write
    "multihead_attention": _module("multihead_attention"),
    "transformer_encoder_layer": _module("transformer_encoder_layer"),
    "lstm": _module("lstm"),
    "gru": _module("gru"),
    "pixel_shuffle": _module("pixel_shuffle"),
    "grid_sample": _module("grid_sample"),
    "cumsum": _module("cumsum"),
    "topk": _module("topk"),
    "einsum": _module("einsum"),
}


# Their attention must reach one fused Attention node (issue 19: also when
# the exporter wraps the softmax in Hugging Face's IsNaN/Where guard or
# writes the products as Einsum): a slow unfused graph is a failure here.
MUST_FUSE = {m: "Attention" for m in (
    "swin_t", "hf_bert", "hf_distilbert", "hf_gpt2", "hf_llama", "hf_t5_encoder", "hf_vit",
    "hf_whisper_encoder", "multihead_attention", "transformer_encoder_layer")}


# ---- export, convert, run, compare --------------------------------------------------


def export(module, inputs, path, exporter):
    import torch

    names = list(inputs)
    args = tuple(inputs[n] for n in names)
    if exporter == "torchscript":
        torch.onnx.export(module, args, path, dynamo=False, opset_version=17,
                          input_names=names, do_constant_folding=True)
    else:
        prog = torch.onnx.export(module, args, dynamo=True, opset_version=18,
                                 input_names=names, verbose=False)
        prog.save(path, external_data=True)


def onnx_io(path):
    import onnx

    m = onnx.load(path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    ins = [i.name for i in m.graph.input if i.name not in inits]
    outs = [o.name for o in m.graph.output]
    return ins, outs


@contextlib.contextmanager
def quiet(log_path):
    """Sends what the exporters print (progress, warnings, TorchScript graphs
    on failure) to log_path instead of the table."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log_path, "w") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def file_stem(name):
    """kite-run --output-dir's file name for an output (apps/kite-run/main.cpp)."""
    ok = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    return "".join(c if c in ok else "_" for c in name) or "_"


def tail(text, lines=3):
    return " | ".join([ln for ln in text.strip().splitlines() if ln.strip()][-lines:])


def run_case(name, exporter, args):
    import numpy as np
    import torch

    row = {"model": name, "exporter": exporter}
    torch.manual_seed(0)
    module, inputs, tol = MODELS[name]()
    module.eval()
    row["tol"] = tol
    with torch.no_grad():
        ref = module(*inputs.values())
    if isinstance(ref, torch.Tensor):
        ref = (ref,)
    ref = [r.detach().numpy() for r in ref]
    work = os.path.join(args.out, f"{name}.{exporter}")
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    t0 = time.time()
    try:
        with torch.no_grad(), quiet(os.path.join(work, "export.log")):
            export(module, inputs, onnx_path, exporter)
    except Exception as e:  # PyTorch could not export: not Kite's to fix
        row["status"] = "export failed"
        row["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        return row
    row["export_s"] = round(time.time() - t0, 1)
    ins, outs = onnx_io(onnx_path)
    if len(ins) != len(inputs):
        # An exporter that drops an unused input (or folds one) changes the
        # positional mapping: say so rather than guess.
        row["status"] = "export failed"
        row["detail"] = f"ONNX has inputs {ins}, the module {list(inputs)}"
        return row
    kite_path = os.path.join(work, "model.kite")
    report_path = os.path.join(work, "report.json")
    cmd = [args.kite_convert, onnx_path, "-o", kite_path, "--report", report_path, "-q"]
    for n, (key, t) in zip(ins, inputs.items()):
        cmd += ["--input-shape", f"{n}=" + "x".join(str(d) for d in t.shape)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        row["status"] = "convert failed"
        refused = sorted(set(re.findall(r"op '([A-Za-z0-9_]+)' \(domain", p.stderr)))
        row["detail"] = ("unsupported: " + ", ".join(refused) if refused
                         else tail(p.stderr + p.stdout, 4)[:400])
        return row
    with open(report_path) as fh:
        report = json.load(fh)
    row["fusions"] = report.get("fusions", {})
    row["ops"] = report.get("ops", {})
    out_dir = os.path.join(work, "out")
    os.makedirs(out_dir, exist_ok=True)
    cmd = [args.kite_run, kite_path, "--output-dir", out_dir, "--quiet", "--poison"]
    for n, (key, t) in zip(ins, inputs.items()):
        f = os.path.join(work, f"in_{key}.npy")
        np.save(f, t.numpy())
        cmd += ["--input", f"{n}={f}"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        row["status"] = "run failed"
        row["detail"] = tail(p.stderr + p.stdout, 4)[:400]
        return row
    worst = 0.0
    for o, r in zip(outs, ref):
        fname = os.path.join(out_dir, file_stem(o) + ".npy")
        if not os.path.exists(fname):
            cands = [f for f in os.listdir(out_dir) if f.endswith(".npy")]
            row["status"] = "run failed"
            row["detail"] = f"no output file for {o} (have {cands})"
            return row
        got = np.load(fname)
        if got.shape != r.shape:
            row["status"] = "mismatch"
            row["detail"] = f"output {o}: shape {got.shape}, PyTorch {r.shape}"
            return row
        if r.dtype.kind in "iub":
            err = 0.0 if np.array_equal(got, r) else float("inf")
        else:
            scale = max(float(np.max(np.abs(r))), 1e-30)
            err = float(np.max(np.abs(got.astype(np.float64) - r.astype(np.float64)))) / scale
            if not np.all(np.isfinite(got)):
                err = float("inf")
        worst = max(worst, err)
    row["max_err"] = worst
    row["status"] = "ok" if worst <= tol else "mismatch"
    need = MUST_FUSE.get(name)
    if row["status"] == "ok" and need and not row["fusions"].get(need):
        row["status"] = "not fused"
        row["detail"] = f"kite-convert's report has no {need} fusion"
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kite-convert", required=True)
    ap.add_argument("--kite-run", required=True)
    ap.add_argument("--out", required=True, help="work folder (exports, .kite files, outputs)")
    ap.add_argument("--models", default="all", help="comma-separated names, or all")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--venv", default=os.path.join(ROOT, "build", "export-venv"))
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--known-failures", help="file of 'model exporter reason' lines")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(MODELS))
        return 0
    args.kite_convert = os.path.abspath(args.kite_convert)
    args.kite_run = os.path.abspath(args.kite_run)
    args.out = os.path.abspath(args.out)
    ensure_venv(os.path.abspath(args.venv))

    import torch
    import transformers
    import warnings

    warnings.filterwarnings("ignore")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    names = list(MODELS) if args.models == "all" else [m for m in args.models.split(",") if m]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown models: {unknown} (--list)", file=sys.stderr)
        return 2
    exporters = [e for e in args.exporters.split(",") if e]
    print(f"torch {torch.__version__}, transformers {transformers.__version__}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    print(f"{'model':28} {'exporter':11} {'status':15} {'max err':>9}  fused / detail", flush=True)
    for name in names:
        for exporter in exporters:
            try:
                row = run_case(name, exporter, args)
            except Exception as e:  # the script's own failure on one model: report, go on
                row = {"model": name, "exporter": exporter, "status": "script error",
                       "detail": f"{type(e).__name__}: {e}"[:300]}
            rows.append(row)
            err = f"{row['max_err']:.1e}" if "max_err" in row else "-"
            fused = ",".join(f"{k}x{v}" for k, v in sorted(row.get("fusions", {}).items()))
            print(f"{name:28} {exporter:11} {row['status']:15} {err:>9}  "
                  f"{fused or ''}{' ' if fused and row.get('detail') else ''}{row.get('detail', '')}",
                  flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    exported = [r for r in rows if r["status"] != "export failed"]
    ok = [r for r in exported if r["status"] == "ok"]
    print(f"\n{len(ok)} of {len(exported)} exports that PyTorch made convert and match "
          f"({len(rows) - len(exported)} not exported by PyTorch)")
    known = read_known_failures(args.known_failures) if args.known_failures else {}
    bad = []
    for r in exported:
        key = (r["model"], r["exporter"])
        if r["status"] != "ok" and key not in known:
            bad.append(f"{key[0]} ({key[1]}): {r['status']}: {r.get('detail', '')}")
        elif r["status"] == "ok" and key in known:
            bad.append(f"{key[0]} ({key[1]}) passes but is listed in {args.known_failures}: "
                       "take it off the list")
    for r in rows:
        # A pair that PyTorch cannot export must say so in the list too.
        key = (r["model"], r["exporter"])
        if r["status"] == "export failed" and key not in known:
            bad.append(f"{key[0]} ({key[1]}): PyTorch did not export it ({r.get('detail', '')}); "
                       "list it with the reason")
    if known:
        listed = {(r["model"], r["exporter"]) for r in rows}
        for key in known:
            if key[0] in names and key[1] in exporters and key not in listed:
                bad.append(f"{key} in the list was not run")
        for line in bad:
            print("FAIL:", line)
        print(f"{len(known)} known failures listed; {len(bad)} problems")
        return 1 if bad else 0
    return 0 if len(ok) == len(exported) else 1


def read_known_failures(path):
    known = {}
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 2)
            if len(parts) < 3:
                raise SystemExit(f"{path}:{n}: expected 'model exporter reason'")
            known[(parts[0], parts[1])] = parts[2]
    return known


if __name__ == "__main__":
    sys.exit(main())
