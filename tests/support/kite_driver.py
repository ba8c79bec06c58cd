"""What the Python test drivers share: their command line, running Kite's
tools, comparing .npy outputs and the PASS/FAIL lines they print.

A driver finds this module next to kite_test_skip.py:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "support"))
    import kite_driver
(no PYTHONPATH needed, so a driver runs the same from ctest and by hand).

Importing it needs only the standard library (some drivers run on "any
python3"); numpy is imported by the functions that compare arrays.
"""
import argparse
import collections
import os
import re
import subprocess
import sys


# ---- command line ----------------------------------------------------------

def tool_parser(doc=None, tools=("kite-convert", "kite-run"), workdir_help=None, timeout=None):
    """An ArgumentParser with a required --TOOL PATH for each tool and
    --workdir (required unless workdir_help describes its default); with
    timeout, --timeout SECONDS per tool run (that default). doc (the driver's
    __doc__) becomes its description."""
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    for tool in tools:
        ap.add_argument("--" + tool, required=True)
    if workdir_help:
        ap.add_argument("--workdir", help=workdir_help)
    else:
        ap.add_argument("--workdir", required=True)
    if timeout is not None:
        ap.add_argument("--timeout", type=float, default=timeout, help="seconds per tool invocation")
    return ap


def check_tools(*paths):
    """Exits with a message unless every path is an executable file."""
    for tool in paths:
        if not (os.path.isfile(tool) and os.access(tool, os.X_OK)):
            sys.exit(f"error: {tool} is not an executable file")


def parse_args(ap):
    """ap.parse_args(), and the work folder made."""
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    return args


# ---- verdicts --------------------------------------------------------------

class Verdicts:
    """Counts checks and prints one line each: "PASS label[: detail]" /
    "FAIL label: detail" (or, with label_first, "label: PASS[ detail]"), then
    summary() prints "N passed, N failed" and gives the exit status."""

    def __init__(self, label_first=False):
        self.passed = self.failed = 0
        self.label_first = label_first

    def record(self, ok, label, detail=""):
        ok = bool(ok)
        word = "PASS" if ok else "FAIL"
        if self.label_first:
            line = f"{label}: {word}{' ' + detail if detail else ''}"
        else:
            line = f"{word} {label}{': ' + detail if detail else ''}"
        print(line, flush=True)
        self.passed += ok
        self.failed += not ok
        return ok

    def check(self, label, problems):
        """PASS when problems (a list of reasons, a reason, or None) is empty."""
        if isinstance(problems, str):
            problems = [problems] if problems else []
        problems = problems or []
        return self.record(not problems, label, "; ".join(problems))

    def summary(self):
        print(f"{self.passed} passed, {self.failed} failed")
        return 1 if self.failed else 0


# ---- running the tools -----------------------------------------------------

def sanitize(name):
    """kite-run's output file rule: chars outside [A-Za-z0-9._-] become '_'."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


ToolResult = collections.namedtuple("ToolResult", "returncode stdout stderr")


def run_tool(cmd, timeout=None, env=None):
    """ToolResult(returncode, stdout, stderr), which also unpacks as a tuple;
    returncode 124 when it ran past timeout seconds, 127 when it could not
    start."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           errors="replace", timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return ToolResult(124, "", f"timed out after {timeout} s")
    except OSError as e:
        return ToolResult(127, "", str(e))
    return ToolResult(p.returncode, p.stdout, p.stderr)


def remove_files(*paths):
    """Removes what an earlier run left, so that it cannot pass for new output."""
    for path in paths:
        if os.path.exists(path):
            os.remove(path)


def empty_dir(folder):
    """Makes folder and removes the files in it (stale outputs)."""
    os.makedirs(folder, exist_ok=True)
    for f in os.listdir(folder):
        os.remove(os.path.join(folder, f))


def run_kite(kite_run, kite_file, feeds, folder, extra=(), timeout=300):
    """kite-run on feeds ({name: array}, saved as folder/in_NAME.npy), its
    outputs into folder/out (emptied first). Returns run_tool's."""
    import numpy as np
    out_dir = os.path.join(folder, "out")
    empty_dir(out_dir)
    cmd = [kite_run, kite_file, "--output-dir", out_dir] + list(extra)
    for name, value in feeds.items():
        f = os.path.join(folder, f"in_{sanitize(name)}.npy")
        np.save(f, value)
        cmd += ["--input", f"{name}={f}"]
    return run_tool(cmd, timeout)


def convert_refused(kite_convert, onnx_path, out_path, timeout=120):
    """kite-convert on a model it must refuse. Returns (exit status, message,
    problems): its stderr + stdout, and what is wrong if it succeeded or left
    a file."""
    remove_files(out_path)
    rc, out, err = run_tool([kite_convert, onnx_path, "-o", out_path], timeout)
    problems = []
    if rc == 0:
        problems.append("kite-convert succeeded")
    if os.path.exists(out_path):
        problems.append(f"{out_path} exists after a failed conversion")
    return rc, err + out, problems


# ---- comparing outputs -----------------------------------------------------

def compare_array(name, exp, got, atol, rtol, nan_equal=True):
    """None when got matches exp, else the reason. Shape and dtype must match;
    integers and bools exactly; floats element-wise |got - exp| <= atol +
    rtol * |exp|, with NaN and +-Inf in the same places (nan_equal=False:
    any NaN fails, as np.allclose)."""
    import numpy as np
    if got.shape != exp.shape:
        return f"output '{name}': shape {list(got.shape)}, expected {list(exp.shape)}"
    if got.dtype != exp.dtype:
        return f"output '{name}': dtype {got.dtype}, expected {exp.dtype}"
    if not np.issubdtype(exp.dtype, np.floating):
        bad = got != exp
        if bad.any():
            i = tuple(int(v) for v in np.unravel_index(np.argmax(bad), exp.shape))
            return (f"output '{name}': {int(bad.sum())}/{exp.size} elements differ "
                    f"(first at {list(i)}: got {got[i]}, expected {exp[i]}; exact match required)")
        return None
    e, g = exp.astype(np.float64), got.astype(np.float64)
    if not nan_equal and (np.isnan(e).any() or np.isnan(g).any()):
        return f"output '{name}': NaN values (none allowed)"
    fe, fg = np.isfinite(e), np.isfinite(g)
    if not np.array_equal(fe, fg) or not np.array_equal(e[~fe], g[~fg], equal_nan=True):
        n = int((fe != fg).sum()) or int((~fe).sum())
        return f"output '{name}': NaN/Inf values differ ({n} positions)"
    # (non-finite positions already match; compare the finite ones)
    diff = np.asarray(np.abs(np.where(fe, g, 0.0) - np.where(fe, e, 0.0)))
    bound = atol + rtol * np.abs(np.where(fe, e, 0.0))
    bad = diff > bound
    if bad.any():
        i = tuple(int(v) for v in np.unravel_index(np.argmax(diff - bound), exp.shape))
        return (f"output '{name}': {int(bad.sum())}/{exp.size} elements outside "
                f"atol {atol:g} + rtol {rtol:g}*|expected| (worst at {list(i)}: got {g[i]:.9g}, "
                f"expected {e[i]:.9g}, max|diff| {float(diff.max()):.3g})")
    return None


def compare_outputs(folder, names, refs, atol, rtol, nan_equal=True):
    """compare_array for each output kite-run wrote into folder; a list of
    the reasons (empty when all match)."""
    import numpy as np
    problems = []
    for name, ref in zip(names, refs):
        path = os.path.join(folder, sanitize(name) + ".npy")
        if not os.path.exists(path):
            problems.append(f"output '{name}': kite-run wrote no {os.path.basename(path)}")
            continue
        why = compare_array(name, ref, np.load(path), atol, rtol, nan_equal)
        if why:
            problems.append(why)
    return problems


def load_outputs(folder):
    """{file name: array} for every .npy in folder."""
    import numpy as np
    return {f: np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
            if f.endswith(".npy")}


if __name__ == "__main__":
    sys.exit("kite_driver.py is a module for the test drivers, not a script")
