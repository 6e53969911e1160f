/* cpukv.h — templates/cpu/kv_quant.h (the CPU KV format, the host tests' reference) in namespace
 * cpukv, with the macros that templates/cuda/kv_quant.cuh defines again undone, so that both can be
 * included in one host test. Include before cuda_emul.h (which takes its f16 conversions from it).
 * Test code only. */
#ifndef IG_CPUKV_H
#define IG_CPUKV_H

namespace cpukv {
#include "kv_quant.h"
}
#undef IG_KVQ_LAYER_BYTES
#undef IG_KVQ_KDELTA
#undef IG_KVQ_FLIP
#undef IG_INLINE
#undef IG_RESTRICT

#endif /* IG_CPUKV_H */
