/* The native decode step's parts, timed apart: what docs/figures.md's "four streams" figures come from.
 *
 *   cc -O3 -march=native -fopenmp -o /tmp/native_parts scripts/native_parts.c -lm && /tmp/native_parts 615
 *
 * One thread, step.c's own kernels (included, so the same code as the step), on random-free constant data:
 * 1. the `wide` model's 33 matrices in a decode step's order (8 layers of qkv 512x1536 and gate/up 512x3072
 *    column-major, o 512x512 and down 1536x512 row-major, then the 512x256 head), beside one 128 MiB
 *    column-major product (the read probe's size), in turns; medians of 60, GB/s, and per shape.
 * 2. attention over 8 layers x 8 heads of 64 at N positions (argument 1; static's layout, 4,096 rows a
 *    head), after a 128 MiB read that leaves none of the K/V in the caches, as the weights do in a step:
 *    step.c's attend(), a query head at a time, as the step calls it; the median of 60. */
#include "../kvviz/native/step.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static double median(double* v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return v[n / 2];
}

static float* filled(size_t n, float v) {
    float* p = malloc(n * sizeof *p);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = v;
    return p;
}

#define R 60
typedef struct {
    float* W;
    int cm, in, out;
} Mat;

static float *xv, *yv, *part;

static void product(const Mat* m) {
    if (m->cm) {
        rows_cm(m->W, xv, part, m->out, 0, m->in);
        for (int j = 0; j < m->out; j++) yv[j] = part[j];
    } else {
        rows_rm(m->W, xv, yv, m->in, 0, m->out, NULL, 0);
    }
}

static void matrices(void) {
    const int shapes[4][3] = {{1, 512, 1536}, {0, 512, 512}, {1, 512, 3072}, {0, 1536, 512}};
    const char* names[5] = {"qkv 512x1536 column-major", "o 512x512 row-major", "gate/up 512x3072 column-major",
                            "down 1536x512 row-major", "head 512x256 row-major"};
    Mat m[33];
    size_t total = 0, bytes[5] = {0};
    for (int i = 0; i < 33; i++) {
        const int k = i < 32 ? i % 4 : 4;
        m[i].cm = k < 4 ? shapes[k][0] : 0;
        m[i].in = k < 4 ? shapes[k][1] : 512;
        m[i].out = k < 4 ? shapes[k][2] : 256;
        size_t n = (size_t)m[i].in * m[i].out;
        m[i].W = filled(n, 1e-3f);
        total += n * 4;
        bytes[k] += n * 4;
    }
    const int big_in = (128 << 20) / 4 / 4096;
    Mat big = {filled((size_t)big_in * 4096, 1e-3f), 1, big_in, 4096};
    double step[R], probe[R], shape[5][R];
    for (int r = 0; r < R; r++) {
        double per[5] = {0};
        double t0 = now();
        for (int i = 0; i < 33; i++) {
            double a = now();
            product(&m[i]);
            per[i < 32 ? i % 4 : 4] += now() - a;
        }
        double t1 = now();
        product(&big);
        double t2 = now();
        step[r] = t1 - t0;
        probe[r] = t2 - t1;
        for (int k = 0; k < 5; k++) shape[k][r] = per[k];
    }
    const double s = median(step, R), p = median(probe, R);
    printf("the model's 33 matrices, %.1f MiB: %.3f ms, %.2f GB/s; one 128 MiB column-major product %.2f GB/s; "
           "share %.0f%%\n", total / 1048576.0, 1e3 * s, total / s / 1e9, 128.0 * 1048576 / p / 1e9,
           100 * (total / s) / (128.0 * 1048576 / p));
    for (int k = 0; k < 5; k++) printf("  %s: %.2f GB/s\n", names[k], bytes[k] / median(shape[k], R) / 1e9);
}

static void attention(int n) {
    const int L = 8, KV = 8, D = 64, TMAX = 4096;
    const size_t per = (size_t)KV * TMAX * D;
    float *K = filled(L * per, 0.01f), *V = filled(L * per, 0.02f);
    const size_t flush_n = (size_t)32 << 20;
    float* flush = filled(flush_n, 1.0f);
    float *q = filled(KV * D, 0.1f), *sc = filled((size_t)KV * TMAX, 0.f), *out = filled(KV * D, 0.f);
    volatile float sink = 0;
    double t[R];
    for (int r = 0; r < R; r++) {
        float a = 0;
        for (size_t i = 0; i < flush_n; i += 16) a += flush[i]; /* a line each: none of K/V stays cached */
        sink += a;
        double t0 = now();
        for (int l = 0; l < L; l++)
            for (int h = 0; h < KV; h++) {
                float sum;
                attend(q + (size_t)h * D, K + l * per + (size_t)h * TMAX * D, V + l * per + (size_t)h * TMAX * D, D,
                       D, n, 0.125f, sc + (size_t)h * TMAX, out + (size_t)h * D, &sum);
                sink += sum;
            }
        t[r] = now() - t0;
    }
    const double mb = 2.0 * L * KV * n * D * 4, m = median(t, R);
    printf("attention at %d positions, %.1f MiB of K/V: %.3f ms, %.2f GB/s\n", n, mb / 1048576, 1e3 * m,
           mb / m / 1e9);
}

int main(int argc, char** argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 615;
    if (n < 1 || n > 4096) {
        fprintf(stderr, "native_parts: positions must be 1-4096, not %s\n", argv[1]);
        return 2;
    }
    omp_set_num_threads(1);
    xv = filled(8192, 1.0f);
    yv = filled(8192, 0.f);
    part = filled(8192, 0.f);
    matrices();
    attention(n);
    return 0;
}
