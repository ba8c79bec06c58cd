"""How a Python test says "this machine cannot run me" (see kite_test_skip.h).

A GPU test on a machine without that GPU calls exit_without_device(): it
prints why and exits with SKIP_EXIT_CODE, which ctest reports as Skipped for
tests registered with kite_device_test() (tests/cmake/KiteTesting.cmake).
KITE_REQUIRE_DEVICE (comma-separated devices, or "all") makes it a failure.

Missing Python modules are not handled here: kite_python_test() checks them
before the script starts (tests/support/run_with_prereqs.sh).
"""
import os
import sys

SKIP_EXIT_CODE = 77  # = KITE_TEST_SKIP_CODE (tests/cmake/KiteTesting.cmake)


def device_required(device):
    items = [s.strip() for s in os.environ.get("KITE_REQUIRE_DEVICE", "").split(",") if s.strip()]
    return device in items or "all" in items


def exit_without_device(device, why):
    if device_required(device):
        print(f"FAIL: no {device} device: {why} (KITE_REQUIRE_DEVICE requires one)", flush=True)
        sys.exit(1)
    print(f"SKIP: no {device} device: {why}", flush=True)
    sys.exit(SKIP_EXIT_CODE)


if __name__ == "__main__":
    # Self-test entry (tests/support/check_skip_mechanism.cmake):
    # kite_test_skip.py DEVICE WHY
    exit_without_device(sys.argv[1], sys.argv[2])
