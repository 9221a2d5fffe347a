// The AVX-VNNI kernels: quant_avx2.cc compiled a second time with the 256-bit vpdpbusd
// (AVX-VNNI: Intel Alder Lake and later client cores, Sapphire Rapids, AMD Zen 5) in place
// of each maddubs + madd pair. Chosen at run time where the CPU has it and no AVX-512
// VNNI is chosen (quant.cc; ZENITH_NO_AVXVNNI=1 keeps AVX2). No 16-bit pair sums means
// no saturation, so the int8 GEMM takes 8-bit activation codes in the tile that AVX2
// feeds 7-bit ones (q8_gemm_tile_u8), and the uniform tiles need no sign trick.
#define ZENITH_QUANT_AVXVNNI 1
#include "quant_avx2.cc"
