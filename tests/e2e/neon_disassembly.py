#!/usr/bin/env python3
# Python: any python3 (standard library only).
"""The CPU backend's arm64 hot loops are NEON code (issue 16): disassembles the
aarch64 build's kernel objects and requires, in each hot function, Advanced
SIMD floating-point instructions on full vectors (.4s for float, .2d for
the double sums), with the ones the loop cannot do without (fmla for the
multiply-accumulate loops). Emulated time says nothing about speed; this
says which instructions run. Prints, per function, the count of each vector
mnemonic and a few lines of the loop, for the record.

  neon_disassembly.py --objdump aarch64-linux-gnu-objdump OBJECT...
"""
import argparse
import collections
import re
import subprocess
import sys

# (name: a substring of the demangled function name, required mnemonics
#  with their minimum counts on vector registers, what it is)
CHECKS = [
    ("sgemm::detail::micro_kernel_neon(", {"fmla": 12}, "SGEMM 6x8 micro-kernel (Conv, Gemm, MatMul)"),
    ("sgemm::detail::micro_kernel_neon_x2(", {"fmla": 24}, "SGEMM two-panel micro-kernel"),
    ("depthwise::portable::", {"fmla": 4}, "depthwise convolution plane (its blocks)"),
    ("neon::softmax_contiguous(", {"fmla": 5, "fmax": 1}, "Softmax / LogSoftmax row, exp polynomial"),
    ("neon::moments(", {"fadd": 2, "fmla": 2, "fcvtl": 2}, "LayerNorm statistics (double sums)"),
    ("neon::normalize_row(", {"fmla": 1, "fmul": 2}, "LayerNorm scale and shift"),
    ("vmath::sigmoid(", {"fmla": 4}, "Sigmoid / SiLU (exp polynomial)"),
    ("vmath::gelu(", {"fmla": 4}, "Gelu (erf and exp polynomials)"),
    ("run_binary<float, float, float, kite::cpu::(anonymous namespace)::AddOp>", {"fadd": 1},
     "elementwise Add, contiguous runs"),
    ("run_binary<float, float, float, kite::cpu::(anonymous namespace)::MulOp>", {"fmul": 1},
     "elementwise Mul, contiguous runs"),
]

FN_RE = re.compile(r"^[0-9a-f]+ <(.*)>:$")
VEC_RE = re.compile(r"^\s*[0-9a-f]+:\s+([a-z0-9.]+)\s+(.*)$")


def functions(objdump, path):
    out = subprocess.run([objdump, "-dC", "--no-show-raw-insn", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, check=True).stdout
    fns, name = {}, None
    for line in out.splitlines():
        m = FN_RE.match(line)
        if m:
            name = m.group(1)
            fns.setdefault(name, [])
            continue
        if name is not None:
            m = VEC_RE.match(line)
            if m:
                fns[name].append((m.group(1), m.group(2)))
    return fns


def vector_ops(insns):
    """Counts of mnemonics whose operands are whole float vectors (.4s / .2d)."""
    counts = collections.Counter()
    for mnem, ops in insns:
        if re.search(r"\bv\d+\.(4s|2d)\b", ops):
            counts[mnem.split(".")[0]] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--objdump", required=True)
    ap.add_argument("objects", nargs="+")
    args = ap.parse_args()
    fns = {}
    for path in args.objects:
        fns.update(functions(args.objdump, path))
    failures = 0
    for needle, required, what in CHECKS:
        matches = [f for f in fns if needle in f]
        if not matches:
            print(f"FAIL {what}: no function named like '{needle}' in the objects")
            failures += 1
            continue
        counts = collections.Counter()
        insns = []
        for f in matches:
            counts.update(vector_ops(fns[f]))
            insns.extend(fns[f])
        missing = {m: n for m, n in required.items() if counts[m] < n}
        status = "FAIL" if missing else "ok"
        failures += bool(missing)
        top = ", ".join(f"{m} {n}" for m, n in counts.most_common(8))
        print(f"{status} {what}: {matches[0][:90]}")
        print(f"     vector float instructions: {top or 'none'}")
        if missing:
            print(f"     needs at least: {', '.join(f'{m} {n}' for m, n in missing.items())}")
        # A few of the vector multiply-adds (or adds), for the record.
        sample = [f"{m} {o}" for m, o in insns
                  if (m.startswith("fmla") or m.startswith("fadd") or m.startswith("fmul"))
                  and re.search(r"\bv\d+\.(4s|2d)\b", o)][:4]
        for s in sample:
            print(f"       {s}")
    print("NEON hot loops: " + ("all present" if failures == 0 else f"{failures} missing"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
