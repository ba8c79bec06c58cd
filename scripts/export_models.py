#!/usr/bin/python3
# Python: Debian's /usr/bin/python3, because it is the one with torch 1.13 + torchvision (+ onnx).
"""Export randomly initialised reference models to ONNX for Kite's end-to-end tests.

No pretrained weights are downloaded (weights=None everywhere); every model is
seeded, so the export is reproducible. BatchNorm running statistics and affine
parameters are randomised (running_mean ~ N(0, 0.1), running_var ~ U(0.5, 1.5),
weight ~ U(0.5, 1.5), bias ~ N(0, 0.1)) so that folding BatchNorm into Conv is
actually exercised, and the BatchNormalization nodes are KEPT in the ONNX:
torch 1.13 folds Conv+BN in its "eval peephole" pass whenever training is
EVAL (the default), independent of do_constant_folding; exporting with
training=TrainingMode.PRESERVE while the model is in eval mode skips that pass
and still exports inference-mode BatchNormalization. The script asserts the
number of BatchNormalization nodes equals the number of BatchNorm modules.

Usage:
  scripts/export_models.py --out DIR --models resnet18[,mobilenet_v2,...]
  scripts/export_models.py --out DIR --models all
  scripts/export_models.py --list

Each model is written as DIR/<name>.onnx with static input shapes. Inputs are
named 'input' (float32 images, or int64 token ids for the text model) and the
output 'output'. For integer inputs, the valid value range is recorded in the
model's metadata_props as  kite.input_range.<input name> = "lo,hi"  (hi
exclusive), which tests/e2e/compare_with_ort.py uses to draw random inputs.
"""
import argparse
import dataclasses
import inspect
import os
import sys
from typing import Callable, List, Tuple

import onnx
import torch
import torch.nn as nn
import torchvision


@dataclasses.dataclass
class Input:
    name: str
    shape: Tuple[int, ...]
    dtype: torch.dtype = torch.float32
    int_range: Tuple[int, int] = (0, 0)  # [lo, hi) for integer inputs


IMAGE_224 = [Input("input", (1, 3, 224, 224))]


class TokenTransformer(nn.Module):
    """A small BERT-like encoder over token ids: Embedding + positions + 2 encoder layers + head."""

    def __init__(self, vocab=1000, seq=32, dim=64, heads=4, layers=2, classes=10):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(1, seq, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):
        x = self.encoder(self.tok(ids) + self.pos)
        return self.head(self.norm(x).mean(dim=1))


def small_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    vit = VisionTransformer(image_size=64, patch_size=16, num_layers=2, num_heads=4,
                            hidden_dim=64, mlp_dim=128, num_classes=10)
    # torchvision zero-initialises the classification head (and the class token),
    # which would make every output exactly 0 and the model useless as a test.
    with torch.no_grad():
        nn.init.normal_(vit.heads.head.weight, std=0.1)
        nn.init.normal_(vit.heads.head.bias, std=0.1)
        nn.init.normal_(vit.class_token, std=0.1)
    return vit


class SmallUNet(nn.Module):
    """A U-Net-like encoder/decoder: three levels, skip connections by
    concatenation, nearest upsampling, BatchNorm kept; the long-lived skips are
    what the memory planner has to work around."""

    @staticmethod
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU())

    def __init__(self, c=16):
        super().__init__()
        self.enc1, self.enc2, self.enc3 = self.block(3, c), self.block(c, 2 * c), self.block(2 * c, 4 * c)
        self.pool = nn.MaxPool2d(2)
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.dec2, self.dec1 = self.block(6 * c, 2 * c), self.block(3 * c, c)
        self.head = nn.Conv2d(c, 2, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        e3 = self.enc3(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up(e3), e2], dim=1))
        d1 = self.dec1(torch.cat([self.up(d2), e1], dim=1))
        return self.head(d1)


tv = torchvision.models


@dataclasses.dataclass
class ModelSpec:
    build: Callable[[], nn.Module]
    inputs: List[Input]


# One line per model. Builders take no arguments and must not download anything.
MODELS = {
    "resnet18": ModelSpec(lambda: tv.resnet18(weights=None), IMAGE_224),
    "mobilenet_v2": ModelSpec(lambda: tv.mobilenet_v2(weights=None), IMAGE_224),
    "mobilenet_v3_small": ModelSpec(lambda: tv.mobilenet_v3_small(weights=None), IMAGE_224),
    "efficientnet_b0": ModelSpec(lambda: tv.efficientnet_b0(weights=None), IMAGE_224),
    "squeezenet1_1": ModelSpec(lambda: tv.squeezenet1_1(weights=None), IMAGE_224),
    "shufflenet_v2_x1_0": ModelSpec(lambda: tv.shufflenet_v2_x1_0(weights=None), IMAGE_224),
    "convnext_tiny": ModelSpec(lambda: tv.convnext_tiny(weights=None), IMAGE_224),
    "vit_small": ModelSpec(small_vit, [Input("input", (1, 3, 64, 64))]),
    "text_transformer": ModelSpec(TokenTransformer,
                                  [Input("input", (1, 32), torch.int64, (0, 1000))]),
    "unet_small": ModelSpec(SmallUNet, [Input("input", (1, 3, 128, 128))]),
}

BN_TYPES = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)


def randomise_batchnorm(model, gen):
    """Non-trivial BN statistics and affine params, so BN folding is really tested."""
    count = 0
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, BN_TYPES):
                n = m.num_features
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
                if m.affine:
                    m.weight.copy_(torch.rand(n, generator=gen) + 0.5)
                    m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                count += 1
    return count


def export_one(name, spec, out_dir, opset):
    torch.manual_seed(0)
    model = spec.build()
    n_bn = randomise_batchnorm(model, torch.Generator().manual_seed(1))
    model.eval()

    gen = torch.Generator().manual_seed(2)
    args = []
    for inp in spec.inputs:
        if inp.dtype.is_floating_point:
            args.append(torch.randn(inp.shape, generator=gen, dtype=inp.dtype))
        else:
            lo, hi = inp.int_range
            args.append(torch.randint(lo, hi, inp.shape, generator=gen, dtype=inp.dtype))

    path = os.path.join(out_dir, f"{name}.onnx")
    # Not under torch.no_grad(): with grad enabled (and parameters requiring grad),
    # torch 1.13's MultiheadAttention / TransformerEncoderLayer skip their fused
    # "fast path" kernels, which the ONNX exporter cannot export.
    # torch >= 2.9 exports with dynamo by default; this script relies on the
    # TorchScript exporter's behaviour (PRESERVE keeps BatchNormalization).
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(
        model, tuple(args), path,
        input_names=[i.name for i in spec.inputs], output_names=["output"],
        opset_version=opset, do_constant_folding=False,
        # PRESERVE + eval mode: inference-mode export without the Conv+BN fusion.
        training=torch.onnx.TrainingMode.PRESERVE, **legacy)

    m = onnx.load(path)
    for inp in spec.inputs:
        if not inp.dtype.is_floating_point:
            p = m.metadata_props.add()
            p.key = f"kite.input_range.{inp.name}"
            p.value = f"{inp.int_range[0]},{inp.int_range[1]}"
    onnx.save(m, path)
    onnx.checker.check_model(path)

    ops = [nd.op_type for nd in m.graph.node]
    n_bn_nodes = ops.count("BatchNormalization")
    if n_bn_nodes != n_bn:
        raise RuntimeError(f"{name}: {n_bn} BatchNorm modules but {n_bn_nodes} "
                           f"BatchNormalization nodes in the ONNX (Conv+BN was fused?)")
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if any(not d.HasField("dim_value") for d in dims):
            raise RuntimeError(f"{name}: '{vi.name}' has a dynamic dimension")
    op_set = sorted(set(ops))
    print(f"{name}: {path} ({os.path.getsize(path) / 1e6:.1f} MB, {len(ops)} nodes, "
          f"{n_bn_nodes} BatchNormalization) ops: {', '.join(op_set)}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="output directory")
    ap.add_argument("--models", default="resnet18", help="comma-separated names, or 'all'")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--list", action="store_true", help="list the known models and exit")
    args = ap.parse_args()
    if args.list:
        for k, v in MODELS.items():
            print(k, " ".join(f"{i.name}={'x'.join(map(str, i.shape))}" for i in v.inputs))
        return 0
    if not args.out:
        ap.error("--out is required")
    names = list(MODELS) if args.models == "all" else [s for s in args.models.split(",") if s]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}; known: {', '.join(MODELS)}")
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    failed = []
    for n in names:
        try:
            export_one(n, MODELS[n], args.out, args.opset)
        except Exception as e:  # keep going so one bad model does not hide the others
            print(f"error: {n}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(n)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
