/* test_tp_numa.c — NUMA placement of tensor-parallel CPU ranks (rt_tp_numa_cpus) on fake sysfs
 * trees: rank r gets the CPUs of the r-th node that has CPUs (wrapping, skipping memory-only nodes
 * and holes in the node ids), cpulists with ranges and single CPUs are read exactly, and a machine
 * with one node, no NUMA information or a malformed list pins nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "rt_tp.h"



/* root/devices/system/node/nodeK/cpulist = list (NULL: the node exists without CPUs). */
static void node(const char *root, int k, const char *list) {
    char p[512];
    snprintf(p, sizeof p, "%s/devices", root), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/devices/system", root), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/devices/system/node", root), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/devices/system/node/node%d", root, k), mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/devices/system/node/node%d/cpulist", root, k);
    FILE *f = fopen(p, "w");
    if (f) fputs(list ? list : "\n", f), fclose(f);
}

/* The CPUs of a set as a list string ("0,1,2,5"). */
static void show(const cpu_set_t *s, char *buf, size_t cap) {
    buf[0] = 0;
    for (int c = 0; c < 64; c++)
        if (CPU_ISSET(c, s)) snprintf(buf + strlen(buf), cap - strlen(buf), "%s%d", buf[0] ? "," : "", c);
}

static void expect(const char *root, int rank, int want_node, const char *want_cpus) {
    cpu_set_t s;
    CPU_ZERO(&s);
    char got[256];
    int k = rt_tp_numa_cpus(root, rank, &s);
    show(&s, got, sizeof got);
    CHECK(k == want_node && (k < 0 || !strcmp(got, want_cpus)), "%s rank %d: node %d cpus {%s} (want node %d {%s})", root,
          rank, k, got, want_node, want_cpus ? want_cpus : "");
}

int main(void) {
    char base[] = "/tmp/ignis-numa-XXXXXX", a[600], b[600], c[600], d[600];
    if (!mkdtemp(base)) return 1;
    snprintf(a, sizeof a, "%s/two", base), mkdir(a, 0755);
    node(a, 0, "0-3,8-11\n");
    node(a, 1, "4-7,12\n");
    expect(a, 0, 0, "0,1,2,3,8,9,10,11");
    expect(a, 1, 1, "4,5,6,7,12");
    expect(a, 2, 0, "0,1,2,3,8,9,10,11"); /* more ranks than nodes: wrap */
    snprintf(b, sizeof b, "%s/holes", base), mkdir(b, 0755);
    node(b, 0, "0-1\n");
    node(b, 1, NULL); /* memory only (CXL, HBM): no CPUs */
    node(b, 3, "2-3\n");
    expect(b, 1, 3, "2,3");
    snprintf(c, sizeof c, "%s/one", base), mkdir(c, 0755);
    node(c, 0, "0-15\n");
    expect(c, 0, -1, NULL);
    expect(c, 1, -1, NULL);
    snprintf(d, sizeof d, "%s/bad", base), mkdir(d, 0755);
    node(d, 0, "0-x\n");
    node(d, 1, "4-7\n");
    expect(d, 0, -1, NULL); /* one readable node left: nothing to spread over */
    snprintf(a, sizeof a, "%s/missing", base);
    expect(a, 0, -1, NULL);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
    printf(failures ? "%d failed\n" : "all ok\n", failures);
    return failures != 0;
}
