// MKL (bundled in the torch wheel) picks its kernels by CPU vendor: on AMD CPUs it runs its
// generic SSE2 code path, measured here at 1-30 fp32 GFLOP/s against ~200 with its AVX-512
// kernels (hwtrain doctor reports it as blas.mkl_generic_kernels). MKL asks this function
// whether the CPU is an Intel one; defining it in the executable, where the dynamic linker finds
// it before MKL's own, makes MKL dispatch on the ISA features instead. Only the hwtrain binary
// does this, never the library, so embedding applications keep their own choice.
extern "C" int mkl_serv_intel_cpu_true() { return 1; }
