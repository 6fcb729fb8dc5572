/* Compiles BLAKE3's sse2 kernel with the instruction set it needs, for this file alone: the
 * dispatcher picks it at run time only when the CPU has it (as upstream's build does with
 * per-file flags, which setuptools cannot give). */
#if defined(__x86_64__) || defined(_M_X64)
#pragma GCC target("sse2")
#include "../third_party/blake3/blake3_sse2.c"
#endif
