/* test_sample_masked.cpp — templates/cuda/sample.cu's token masks (guided decoding), run on the
 * host through cuda_emul.h (a CTA of 1024 fibers), without a GPU:
 *   - greedy under a mask picks the best allowed id, not the row's argmax, and never reads the
 *     per-part greedy keys (they are of the unmasked row); a mask allowing nothing gives -1; NaN
 *     at a disallowed id no longer makes the row invalid, at an allowed one it still does;
 *   - sampling (temperature, top-k, top-p) under a mask picks only allowed ids over many draws, and
 *     plain temperature sampling takes the id where the allowed mass, walked in id order, exceeds
 *     u x (allowed mass), against a host reference in double;
 *   - rows without a mask in the same launch give exactly what a launch without masks gives;
 *   - row 0's choice goes to the chained step's input (next_ids / next_pos), token 0 for -1.
 * Build (tests/test_cuda_package.py does): g++ -std=c++20 -O2 -ffp-contract=off
 *   -I templates/cuda -I templates/cpu -I tests/cuda_host tests/cuda_host/test_sample_masked.cpp
 * Exit 0 when every check passes. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "emul_extra.h"

#define SM_NAME sm_1000
#define SM_V 1000
#define SM_LD 1024
#include "sample.cu"

enum { V = 1000, LD = 1024, W = IG_SM_MASK_WORDS(V), PARTS = 3 };

static uint64_t g_rng64 = 0x9e3779b97f4a7c15ull;
static float frand4(void) { /* in [-4, 4) */
    g_rng64 ^= g_rng64 << 13, g_rng64 ^= g_rng64 >> 7, g_rng64 ^= g_rng64 << 17;
    return (float)((g_rng64 >> 11) * (1.0 / 9007199254740992.0)) * 8.0f - 4.0f;
}

/* One launch over rows of l (copied: masked rows are written in place), with the per-part keys of
 * the unmasked rows when parts, and masks when rows is not empty. */
static std::vector<int> run(std::vector<float> l, const std::vector<ig_sm_params> &ps, const std::vector<unsigned> &mask,
                            const std::vector<int> &rows, int parts, int *next = NULL) {
    const int n = (int)ps.size();
    std::vector<unsigned long long> amax((size_t)n * PARTS, 0ull);
    for (int r = 0; r < n && parts; r++)
        for (int p = 0; p < PARTS; p++)
            for (int j = p * V / PARTS; j < (p + 1) * V / PARTS; j++)
                amax[(size_t)r * PARTS + p] = max(amax[(size_t)r * PARTS + p], ig_amax_key(l[(size_t)r * LD + j], j));
    std::vector<int> out(n, 0x7f7f7f7f);
    const int np = parts ? PARTS : 0;
    bool ok = emul_launch({(unsigned)IG_SM_GRID_X(n), 1, 1}, {IG_SM_BLOCK, 1, 1}, [&] {
        sm_1000(n, l.data(), ps.data(), out.data(), amax.data(), np, rows.empty() ? NULL : mask.data(),
                rows.empty() ? NULL : rows.data(), next, next ? next + 1 : NULL);
    });
    CHECK(ok, "the sampling CTA deadlocked");
    return out;
}

static void allow(std::vector<unsigned> &mask, int k, int id) { mask[(size_t)k * W + id / 32] |= 1u << (id % 32); }

/* greedy rows, with and without the per-part keys */
static void test_greedy(int parts) {
    const int n = 6;
    std::vector<float> l((size_t)n * LD);
    for (auto &x : l) x = frand4();
    std::vector<ig_sm_params> ps(n, ig_sm_params{1, 0.0f, 0, 1.0f, 0.0f, 0.5f});
    std::vector<unsigned> mask((size_t)5 * W, 0u);
    std::vector<int> rows = {0, -1, 1, 2, 3, 4};
    for (int r = 0; r < n; r++) l[(size_t)r * LD + 17] = 9.0f; /* every row's argmax: allowed by no mask */
    allow(mask, 0, 3), allow(mask, 0, 500), allow(mask, 0, 999);
    l[500] = 2.5f, l[3] = 2.5f, l[999] = -1.0f; /* a tie among the allowed: the lower id */
    /* row 2 (mask 1): nothing allowed */
    allow(mask, 2, 10), allow(mask, 2, 20); /* row 3: NaN and +inf at disallowed ids are masked away */
    l[3 * LD + 11] = NAN, l[3 * LD + 12] = INFINITY;
    allow(mask, 3, 30), allow(mask, 3, 31); /* row 4: NaN at an allowed id: invalid */
    l[4 * LD + 31] = NAN;
    for (int j = 0; j < V; j++) allow(mask, 4, j); /* row 5: everything allowed but the bits past V */
    mask[(size_t)4 * W + W - 1] = 0xffffffffu;
    l[5 * LD + 17] = 9.0f;
    int next[2] = {-5, 41}; /* the next step's token and position, for row 0 */
    const std::vector<int> o = run(l, ps, mask, rows, parts, next);
    CHECK(next[0] == o[0] && next[1] == 42, "the next step's input: %d at %d, want %d at 42", next[0], next[1], o[0]);
    CHECK(o[0] == 3, "greedy under a mask: %d, want 3 (the best allowed, lower id on a tie)", o[0]);
    CHECK(o[1] == 17, "greedy without a mask beside masked rows: %d, want 17", o[1]);
    CHECK(o[2] == -1, "a mask allowing nothing: %d, want -1", o[2]);
    const int want3 = l[3 * LD + 10] >= l[3 * LD + 20] ? 10 : 20;
    CHECK(o[3] == want3, "NaN / +inf at disallowed ids: %d, want %d", o[3], want3);
    CHECK(o[4] == -1, "NaN at an allowed id: %d, want -1", o[4]);
    CHECK(o[5] == 17, "a mask allowing every id: %d, want 17", o[5]);
}

/* sampled rows under one mask of 9 ids, many draws; unmasked rows beside them */
static void test_sampled(void) {
    const int allowed[] = {1, 40, 41, 333, 512, 700, 701, 880, 998};
    const int na = sizeof allowed / sizeof allowed[0];
    std::vector<float> row(LD);
    for (auto &x : row) x = frand4();
    row[600] = 12.0f; /* the mode of the unmasked row, disallowed */
    struct pc { float t; int k; float p; };
    const pc cases[] = {{1.0f, 0, 1.0f}, {0.7f, 3, 1.0f}, {1.3f, 0, 0.6f}, {2.0f, 2, 0.9f}};
    const int per = 24, nc = sizeof cases / sizeof cases[0], n = nc * per + 4;
    std::vector<float> l((size_t)n * LD);
    std::vector<ig_sm_params> ps(n);
    std::vector<unsigned> mask(W, 0u);
    for (int a = 0; a < na; a++) allow(mask, 0, allowed[a]);
    std::vector<int> rows(n, 0);
    for (int i = 0; i < n; i++) {
        memcpy(&l[(size_t)i * LD], row.data(), sizeof(float) * LD);
        const pc &c = cases[i / per < nc ? i / per : 0];
        ps[i] = {1, c.t, c.k, c.p, 0.0f, (float)((i % per) + 0.5) / per};
    }
    for (int i = nc * per; i < n; i++) rows[i] = -1, ps[i] = {1, 1.0f, 0, 1.0f, 0.0f, 0.25f * (float)(i - nc * per)};
    const std::vector<int> o = run(l, ps, mask, rows, 0);
    int masked_picks = 0, walk_bad = 0;
    for (int i = 0; i < nc * per; i++) {
        bool in = false;
        for (int a = 0; a < na; a++) in |= o[i] == allowed[a];
        masked_picks += !in;
    }
    CHECK(masked_picks == 0, "%d of %d draws under a mask picked a disallowed id", masked_picks, nc * per);
    /* plain temperature 1: the walk over the allowed ids in id order */
    double m = -INFINITY, z = 0;
    for (int a = 0; a < na; a++) m = fmax(m, row[allowed[a]]);
    for (int a = 0; a < na; a++) z += exp(row[allowed[a]] - m);
    for (int i = 0; i < per; i++) {
        double target = ps[i].u * z, cum = 0;
        int want = allowed[na - 1];
        for (int a = 0; a < na; a++) {
            cum += exp(row[allowed[a]] - m);
            if (cum > target) {
                want = allowed[a];
                break;
            }
        }
        walk_bad += o[i] != want;
    }
    CHECK(walk_bad == 0, "%d of %d temperature-1 draws under a mask are not the walk over the allowed ids", walk_bad, per);
    /* the unmasked rows: the same picks as a launch without masks */
    std::vector<float> lu(l.begin() + (size_t)nc * per * LD, l.end());
    std::vector<ig_sm_params> pu(ps.begin() + nc * per, ps.end());
    const std::vector<int> ou = run(lu, pu, {}, {}, 0);
    for (int i = 0; i < 4; i++)
        CHECK(o[nc * per + i] == ou[i], "unmasked row %d beside masked ones: %d, alone %d", i, o[nc * per + i], ou[i]);
    CHECK(ou[0] >= 0 && ou[0] < V, "an unmasked draw: %d", ou[0]);
}

/* a row whose mask allows nothing: -1, and token 0 (a valid id) for the chained step's input */
static void test_next_invalid(void) {
    std::vector<float> l(LD);
    for (auto &x : l) x = frand4();
    int next[2] = {-5, 7};
    const std::vector<int> o = run(l, {ig_sm_params{1, 0.0f, 0, 1.0f, 0.0f, 0.5f}}, std::vector<unsigned>(W, 0u), {0}, 0, next);
    CHECK(o[0] == -1 && next[0] == 0 && next[1] == 8, "nothing allowed: %d, next %d at %d", o[0], next[0], next[1]);
}

int main(void) {
    test_next_invalid();
    test_greedy(0);
    test_greedy(1);
    test_sampled();
    printf(fails ? "sample masked: FAIL (%d)\n" : "sample masked: ok\n", fails);
    return fails ? 1 : 0;
}
