/* test_graph_cache.c — the CUDA packages' graph cache policy (templates/cuda/host.h), on the host:
 * a step shape is captured only the second time it comes (cu_graphs_seen), and a full cache drops
 * the graph used least recently (cu_graphs_slot), destroying exactly that one. No GPU: the driver
 * entry point the policy calls is a stand-in that records which graph it destroyed.
 * Built and run by tests/test_cuda_package.py (it needs the CUDA toolkit's headers). */
#include "host.h"

static CUgraphExec destroyed[4 * CU_GRAPHS];
static int n_destroyed;

static CUresult fake_destroy(CUgraphExec e) {
    destroyed[n_destroyed++] = e;
    return CUDA_SUCCESS;
}

#define EXPECT(c)                                                         \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                      \
        }                                                                 \
    } while (0)

/* The cache's use of a graph, as launch_graph does on a replay. */
static void use(cu_graph_cache *g, int i) { g->used[i] = ++g->tick; }

int main(void) {
    int fails = 0;
    cu_api a;
    memset(&a, 0, sizeof a);
    a.cuGraphExecDestroy = fake_destroy;
    static cu_graph_cache g; /* zeroed, as in dev_state */

    /* second sighting: a key is new once, then seen; other keys do not interfere */
    int k1[6] = {8, 8, 4, 1, 1, 0}, k2[6] = {9, 9, 4, 1, 1, 0};
    EXPECT(!cu_graphs_seen(&g, k1));
    EXPECT(cu_graphs_seen(&g, k1));
    EXPECT(!cu_graphs_seen(&g, k2));
    EXPECT(cu_graphs_seen(&g, k1) && cu_graphs_seen(&g, k2));
    /* every field is part of the key: a wider page table, or a chained variant, is another shape */
    int k3[6] = {8, 8, 8, 1, 1, 0}, k4[6] = {8, 8, 4, 1, 1, 2};
    EXPECT(!cu_graphs_seen(&g, k3) && !cu_graphs_seen(&g, k4));
    /* the seen list is a ring of CU_GRAPHS keys: the oldest is forgotten, the newest kept */
    for (int t = 100; t < 100 + CU_GRAPHS; t++) {
        int k[6] = {t, t, 1, 0, 1, 0};
        EXPECT(!cu_graphs_seen(&g, k));
    }
    EXPECT(!cu_graphs_seen(&g, k1)); /* forgotten, now remembered again */
    int last[6] = {100 + CU_GRAPHS - 1, 100 + CU_GRAPHS - 1, 1, 0, 1, 0};
    EXPECT(cu_graphs_seen(&g, last));

    /* slots: free ones first, in order, nothing destroyed */
    for (int i = 0; i < CU_GRAPHS; i++) {
        int s = cu_graphs_slot(&a, &g);
        EXPECT(s == i);
        g.exec[s] = (CUgraphExec)(uintptr_t)(0x1000 + s);
        use(&g, s);
    }
    EXPECT(n_destroyed == 0 && g.n == CU_GRAPHS);
    /* keep replaying all but graph 5 and 17: 5 (used before 17) goes first, then 17, then the
     * oldest of the rest, and each replaced graph is destroyed exactly once */
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < CU_GRAPHS; i++)
            if (i != 5 && i != 17) use(&g, i);
    int s = cu_graphs_slot(&a, &g);
    EXPECT(s == 5 && n_destroyed == 1 && destroyed[0] == (CUgraphExec)(uintptr_t)0x1005);
    g.exec[s] = (CUgraphExec)(uintptr_t)0x2005;
    use(&g, s);
    s = cu_graphs_slot(&a, &g);
    EXPECT(s == 17 && n_destroyed == 2 && destroyed[1] == (CUgraphExec)(uintptr_t)0x1011);
    g.exec[s] = (CUgraphExec)(uintptr_t)0x2011;
    use(&g, s);
    s = cu_graphs_slot(&a, &g);
    EXPECT(s == 0 && n_destroyed == 3 && destroyed[2] == (CUgraphExec)(uintptr_t)0x1000);
    EXPECT(g.n == CU_GRAPHS);
    /* clearing destroys every graph held, once */
    g.exec[0] = (CUgraphExec)(uintptr_t)0x2000;
    n_destroyed = 0;
    cu_graphs_clear(&a, &g);
    EXPECT(n_destroyed == CU_GRAPHS && g.n == 0);
    printf("%s (%d failures)\n", fails ? "FAILED" : "ok", fails);
    return fails ? 1 : 0;
}
