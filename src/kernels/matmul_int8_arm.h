// The 64-bit ARM int8 dot-product instructions the packed W8A8 kernel uses on the NEON target:
// SDOT (FEAT_DotProd: Apple M1 and later, Cortex-A76+, Graviton 2+) and SMMLA (FEAT_I8MM: Apple
// M2 and later, Graviton 3+). Highway 1.0.3 has no int8 dot product, so these are arm_neon.h
// intrinsics in functions compiled for the extension, chosen at run time from what the CPU
// reports (getauxval on Linux, sysctl on macOS). Integer block sums are exact, and the f32
// epilogue is lane for lane the packed layout's formula (matmul_int8_packed.h), so every variant
// gives the same bits as the plain C++ formula and as x86's VNNI kernel.
// On other architectures arm_int8_dot() is kNone and nothing here runs.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace stoa::kernels {

// Ordered: a CPU with SMMLA has SDOT as well.
enum class ArmInt8Dot { kNone, kSdot, kSmmla };

// The best instruction set the CPU has, capped by force_arm_int8_dot().
ArmInt8Dot arm_int8_dot();
// Every variant this CPU can run, kNone (the plain C++ formula) first.
std::vector<ArmInt8Dot> available_arm_int8_dots();
std::string arm_int8_dot_name(ArmInt8Dot dot);
// Caps arm_int8_dot() at `dot` (tests run every variant); kSmmla restores the best. Not
// thread-safe: call it only while no kernel runs.
void force_arm_int8_dot(ArmInt8Dot dot);

struct PackedArgs;
// The packed W8A8 product with the best ARM variant; false (nothing done) where there is none.
bool arm_matmul_w8a8_packed(const PackedArgs& a, size_t batch);

}  // namespace stoa::kernels
