/* bench_tp_allreduce.c — latency of the all-reduce a tensor-parallel decoder layer does twice per
 * step (after the attention output and the MLP down projections): MPI_Allreduce (sum, in place) of
 * hidden x batch floats, hidden 4096 (a 7B shape), batch 1..64, between the ranks of the job, the
 * way runtime/serving/rt_tp.c calls it. Rank 0 prints the median and mean microseconds per call.
 * Usage: mpirun -np 2 bench_tp_allreduce [iterations] [hidden] */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>

#ifndef IGNIS_HAVE_MPI
int main(void) {
    fprintf(stderr, "bench_tp_allreduce: built without MPI (install libopenmpi-dev and rebuild)\n");
    return 77;
}
#else
#include <mpi.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and mean seconds of `iters` all-reduces of n floats (after 20 warm-up calls). */
static void measure(float *buf, int n, int iters, double *med, double *mean) {
    double *t = malloc(sizeof *t * (size_t)iters), sum = 0;
    for (int i = 0; i < 20; i++) MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, buf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        t[i] = MPI_Wtime() - t0;
        sum += t[i];
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_double);
    *med = t[iters / 2];
    *mean = sum / iters;
    free(t);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 500, hidden = argc > 2 ? atoi(argv[2]) : 4096;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (iters < 1) iters = 500;
    if (hidden < 1) hidden = 4096;
    float *buf = calloc((size_t)hidden * 64, sizeof *buf);
    if (rank == 0) printf("MPI_Allreduce sum f32, %d ranks, hidden %d, %d calls each\nbatch  bytes     median_us  mean_us\n",
                          size, hidden, iters);
    for (int b = 1; b <= 64; b *= 2) {
        double med, mean;
        measure(buf, hidden * b, iters, &med, &mean);
        if (rank == 0) printf("%5d  %8d  %9.1f  %7.1f\n", b, hidden * b * 4, med * 1e6, mean * 1e6);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
#endif
