// The kernels' fatbin (built by nvcc from kernels/kernels.cu), embedded in
// the plugin's .nv_fatbin section, where cuobjdump finds it, and loaded at
// device_open with cuModuleLoadData: the plugin needs no CUDA runtime.
#ifndef KITE_CUDA_FATBIN_PATH
#error "KITE_CUDA_FATBIN_PATH must name the fatbin"
#endif

__asm__(
    ".pushsection .nv_fatbin, \"a\"\n"
    ".balign 16\n"
    ".globl kite_cuda_fatbin\n"
    ".hidden kite_cuda_fatbin\n"
    "kite_cuda_fatbin:\n"
    ".incbin \"" KITE_CUDA_FATBIN_PATH "\"\n"
    ".globl kite_cuda_fatbin_end\n"
    ".hidden kite_cuda_fatbin_end\n"
    "kite_cuda_fatbin_end:\n"
    ".popsection\n");
