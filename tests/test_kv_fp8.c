/* test_kv_fp8.c — the e4m3 codec of the fp8 KV cache (templates/cpu/kv_quant.h).
 *
 * Without arguments: self-checks that need no reference (every finite code decodes and encodes
 * back to itself, saturation at +-448, a tie between two codes goes to the even one, a row's
 * reconstruction within half an e4m3 step of each element). With `--codec IN OUT`: IN holds
 * little-endian f32 values, OUT gets one e4m3 code a value, followed by the 256 decoded codes as
 * f32; tests/test_kv_fp8_codec.py compares both against ml_dtypes' float8_e4m3fn. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"
#include "kv_quant.h"

static int codec_files(const char *in, const char *out) {
    FILE *fi = fopen(in, "rb"), *fo = fopen(out, "wb");
    if (!fi || !fo) {
        fprintf(stderr, "test_kv_fp8: cannot open %s or %s\n", in, out);
        return 2;
    }
    float x;
    while (fread(&x, 4, 1, fi) == 1) fputc(ig_f32_to_e4m3(x), fo);
    for (int c = 0; c < 256; c++) {
        x = ig_e4m3_to_f32((uint8_t)c);
        fwrite(&x, 4, 1, fo);
    }
    fclose(fi);
    return fclose(fo) ? 2 : 0;
}

/* every finite code is a fixed point of decode then encode; NaN codes decode to NaN */
static int check_codes(void) {
    int bad = 0;
    for (int c = 0; c < 256; c++) {
        const float v = ig_e4m3_to_f32((uint8_t)c);
        if ((c & 0x7f) == 0x7f) bad += !isnan(v);
        else bad += ig_f32_to_e4m3(v) != (c == 0x80 ? 0x80 : c);
    }
    return bad;
}

/* saturation and ties to even: halfway between codes c and c + 1 goes to the even one */
static int check_rounding(void) {
    int bad = (ig_f32_to_e4m3(1e9f) != 0x7e) + (ig_f32_to_e4m3(-500.0f) != 0xfe) + (ig_f32_to_e4m3(449.0f) != 0x7e);
    for (int c = 0; c < 0x7e; c++) {
        const float mid = 0.5f * (ig_e4m3_to_f32((uint8_t)c) + ig_e4m3_to_f32((uint8_t)(c + 1)));
        bad += ig_f32_to_e4m3(mid) != (c & 1 ? c + 1 : c);
        bad += ig_f32_to_e4m3(-mid) != (0x80 | (c & 1 ? c + 1 : c));
    }
    return bad;
}

/* a row through ig_kvq_row / ig_kvq_load: within half a step of e4m3 at each element's magnitude
 * (relative 2^-4, or 2^-10 s absolute in the subnormals) plus the scale's f16 rounding */
static int check_row(void) {
    enum { D = 64, PS = 16 };
    uint8_t page[IG_KVQ_LAYER_BYTES(1, PS, D, IG_KVQ_E4M3)];
    float x[D], y[D];
    int bad = 0;
    srand(7);
    for (int i = 0; i < D; i++) x[i] = ((float)rand() / RAND_MAX - 0.5f) * (i == 5 ? 40.0f : 3.0f);
    ig_kvq_store(page, 1, PS, D, IG_KVQ_E4M3, 1, 0, 3, x);
    ig_kvq_load(page, 1, PS, D, IG_KVQ_E4M3, 1, 0, 3, 1, y, NULL);
    float amax = 0.0f;
    for (int i = 0; i < D; i++) amax = fmaxf(amax, fabsf(x[i]));
    for (int i = 0; i < D; i++) bad += fabsf(y[i] - x[i]) > fabsf(x[i]) / 16.0f + amax / 448.0f / 1024.0f + 1e-7f;
    return bad;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--codec")) return codec_files(argv[2], argv[3]);
    const int c = check_codes(), r = check_rounding(), w = check_row();
    printf("e4m3 codes %s, rounding %s, row %s\n", c ? "FAIL" : "ok", r ? "FAIL" : "ok", w ? "FAIL" : "ok");
    return c || r || w;
}
