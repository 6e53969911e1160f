/* test_pack.c — the packer's f32 -> IEEE half conversion (compiler/pack.c, pk_f32_to_f16, used by
 * --dtype f16 CUDA packages), against an exact half decoder written here: every half value comes
 * back as itself, every midpoint between neighbours goes to the even one, values just off a
 * midpoint go to the nearer one, the subnormal / normal and overflow boundaries, signed zeros,
 * infinities and NaN. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pack.h"

static int fails;
#define EXPECT(c, ...)                                       \
    do {                                                     \
        if (!(c) && fails++ < 20) {                          \
            fprintf(stderr, "FAIL line %d: ", __LINE__);     \
            fprintf(stderr, __VA_ARGS__);                    \
            fputc('\n', stderr);                             \
        }                                                    \
    } while (0)

/* Exact value of a finite half, as a double. */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

int main(void) {
    /* every finite half, and the infinities, round-trip */
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 31) == 31 && (h & 1023)) continue; /* NaNs: below */
        float x = ((h >> 10) & 31) == 31 ? ((h & 0x8000) ? -INFINITY : INFINITY) : (float)half_value((uint16_t)h);
        uint16_t r = pk_f32_to_f16(x);
        EXPECT(r == h, "half 0x%04x (%g) came back as 0x%04x", h, x, r);
    }
    /* midpoints between neighbouring positive halves (exact in f32): to the even one; a step off
     * the midpoint: to the nearer one (the top midpoint, 65520, is the overflow boundary below) */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        double lo = half_value((uint16_t)h), hi = half_value((uint16_t)(h + 1));
        float mid = (float)((lo + hi) / 2);
        EXPECT((double)mid == (lo + hi) / 2, "midpoint above 0x%04x not exact in f32", h);
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        EXPECT(pk_f32_to_f16(mid) == even, "midpoint %a above 0x%04x -> 0x%04x, want 0x%04x", mid, h, pk_f32_to_f16(mid), even);
        EXPECT(pk_f32_to_f16(-mid) == (0x8000 | even), "negative midpoint above 0x%04x", h);
        EXPECT(pk_f32_to_f16(nextafterf(mid, 0.0f)) == h, "just below the midpoint above 0x%04x", h);
        EXPECT(pk_f32_to_f16(nextafterf(mid, INFINITY)) == h + 1, "just above the midpoint above 0x%04x", h);
    }
    /* overflow: 65504 is the largest half; from 65520 (its midpoint with 2^16) on, infinity */
    EXPECT(pk_f32_to_f16(65504.0f) == 0x7bff, "65504");
    EXPECT(pk_f32_to_f16(nextafterf(65520.0f, 0.0f)) == 0x7bff, "just below 65520");
    EXPECT(pk_f32_to_f16(65520.0f) == 0x7c00, "65520 -> inf");
    EXPECT(pk_f32_to_f16(-1e10f) == 0xfc00, "-1e10 -> -inf");
    EXPECT(pk_f32_to_f16(3.0e38f) == 0x7c00, "3e38 -> inf");
    /* underflow: at most 2^-25 is zero (the tie goes to even), just above it the smallest subnormal */
    EXPECT(pk_f32_to_f16(ldexpf(1.0f, -25)) == 0x0000, "2^-25 -> 0");
    EXPECT(pk_f32_to_f16(nextafterf(ldexpf(1.0f, -25), 1.0f)) == 0x0001, "just above 2^-25");
    EXPECT(pk_f32_to_f16(-ldexpf(1.0f, -30)) == 0x8000, "-2^-30 -> -0");
    EXPECT(pk_f32_to_f16(1e-45f) == 0x0000, "f32 subnormal -> 0");
    EXPECT(pk_f32_to_f16(-0.0f) == 0x8000, "-0");
    /* the largest subnormal rounds up into the smallest normal */
    EXPECT(pk_f32_to_f16(nextafterf(ldexpf(1.0f, -14), 0.0f)) == 0x0400, "just below 2^-14");
    /* NaN stays NaN, of either sign */
    uint16_t n = pk_f32_to_f16(NAN), nn = pk_f32_to_f16(-NAN);
    EXPECT((n & 0x7c00) == 0x7c00 && (n & 0x3ff), "NaN -> 0x%04x", n);
    EXPECT((nn & 0x7c00) == 0x7c00 && (nn & 0x3ff) && (nn & 0x8000), "-NaN -> 0x%04x", nn);
    uint32_t snan_bits = 0x7f800001u; /* a signalling NaN whose payload would truncate to inf */
    float snan;
    memcpy(&snan, &snan_bits, 4);
    EXPECT((pk_f32_to_f16(snan) & 0x3ff) != 0, "signalling NaN must not become inf");
    printf("%s (%d failures)\n", fails ? "FAILED" : "ok", fails);
    return fails ? 1 : 0;
}
