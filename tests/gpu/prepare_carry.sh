#!/usr/bin/env bash
# Prepares what tests/gpu/run_on_device.sh needs on the GPU machine, HERE
# (same x86-64 architecture; the GPU machine has no Debian packages and no
# network): a release build with kernels for sm_87 and sm_90 (the H200) +
# PTX, and the programs with the shared libraries they need that the GPU
# machine lacks (ldd), in .gpu-carry/ (git-ignored through
# .git/info/exclude). Models are exported there with its own torch.
#
#   bash tests/gpu/prepare_carry.sh        # about 4 minutes the first time
#   then the device tool: carry [".gpu-carry"], command
#   "bash tests/gpu/run_on_device.sh", timeout_s 420
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build/gpu
CARRY=.gpu-carry
ARCHS="${KITE_GPU_ARCHITECTURES:-87;90}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKITE_BACKEND_CUDA=ON \
  "-DKITE_CUDA_ARCHITECTURES=$ARCHS" -DKITE_BUILD_TESTS=ON -DKITE_BUILD_CONVERTER=ON >/dev/null
cmake --build "$BUILD" -j "$(nproc)" --target kite-convert kite-run kite_backend_cuda kite_backend_cudaemu \
  cuda_ops_test cuda_session_test

rm -rf "$CARRY"
mkdir -p "$CARRY/bin" "$CARRY/lib"
cp "$BUILD/converter/kite-convert" "$BUILD/apps/kite-run" "$BUILD/tests/cuda/cuda_ops_test" \
   "$BUILD/tests/cuda/cuda_session_test" "$CARRY/bin/"
# libkite and the plugin side by side: the runtime looks for plugins in
# libkite's own folder.
# (Files, not symbolic links: the device tool carries links as links. The
# emulated plugin comes along for a dry run of the script without a GPU.)
cp -L "$BUILD/sdk/libkite.so.0" "$BUILD/sdk/libkite_backend_cuda.so" "$BUILD/sdk/libkite_backend_cudaemu.so" "$CARRY/lib/"
# Every shared library the programs load that is not the C/C++ runtime
# (which the GPU machine has, newer).
for exe in "$CARRY"/bin/* "$CARRY/lib/libkite_backend_cuda.so"; do
  ldd "$exe" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libgcc_s.so*|libstdc++.so*|ld-linux*|libkite*) ;;
      *) cp -n "$lib" "$CARRY/lib/" ;;
    esac
  done
done
exclude="$(git rev-parse --git-path info/exclude)"
grep -qx '/.gpu-carry/' "$exclude" 2>/dev/null || echo '/.gpu-carry/' >> "$exclude"
du -sh "$CARRY"
ls -la "$CARRY/bin" "$CARRY/lib"
