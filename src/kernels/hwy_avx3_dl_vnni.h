// For the int8 matmul kernels, right after HWY_BEFORE_NAMESPACE(): Highway 1.0's AVX3_DL target
// string names "avxvnni" (the VEX form) but not AVX512-VNNI, which its CPU check for this target
// does require; this enables it for the VNNI tiles. Inside the target's pushed options, so no
// other target sees it. No include guard on purpose: foreach_target compiles the including file
// once per target, and each pass must read this again.
#if HWY_TARGET == HWY_AVX3_DL
#pragma GCC target("avx512vnni")
#endif
