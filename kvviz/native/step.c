/* kvviz's native decode step: one token through a Llama-family model with a static, concat or paged KV
 * cache, in C.
 *
 * The same computation as kvviz.models.transformer.Transformer.forward for one new token (T = 1) with
 * kvviz.caches' exact caches (the layouts: I_MODE below), float32 on a CPU: RMSNorm, the fused QKV projection (+ bias), the
 * q/k norms (Qwen3), RoPE from the model's own tables, the new K/V written into the cache's own tensors
 * at `pos`, attention over positions 0..pos, the output projection, RMSNorm, SwiGLU, the final norm and
 * the head. Only the rounding differs (sums in another order).
 *
 * Why: a decode step streams every weight once, and torch's kernel reads the small matrices of a model
 * like `wide` (1-6 MiB each) well below the read ceiling, with a Python dispatch and a thread-pool wake-up
 * around each of some 100 ops. Here the whole step is one call and one OpenMP parallel region: the threads
 * split every matrix into contiguous row ranges (each thread's read is one sequential stream) and meet at a
 * barrier between the step's stages. No allocation: the caller passes a workspace. The sums are written on
 * vectors of the CPU's width (GCC/Clang vector extensions), the softmax's and SwiGLU's e^x too: the compiler's own
 * `omp simd` reductions and libm's expf left a fifth of the small matrices' and of attention's read speed.
 *
 * Built at first use by kvviz.native (cc -O3 -march=native -fopenmp), loaded with ctypes. No Python here.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <omp.h>

/* ints: the layout of `ip` */
enum { I_C, I_H, I_KV, I_D, I_F, I_V, I_L, I_TMAX, I_THREADS, I_BIAS, I_QKNORM, I_HEAD_CM, I_MODE, I_BLOCK,
       I_NINTS };
/* I_MODE, where the K/V live (the cache's own tensors; K row of position p, KV head g):
 *   0 static: (KV, TMAX, D) per layer, row p at (g * TMAX + p) * D
 *   1 concat: (KV, pos + 1, D) per layer, the tensors torch.cat just made one position longer, row p at
 *     (g * (pos + 1) + p) * D
 *   2 paged: a pool (N, S, KV, D) per layer, S = I_BLOCK, and a block table (G_TABLE, int64): position p
 *     at slot table[p / S] * S + p % S. Attention reads the sequence's blocks gathered into one
 *     (n_used * S, KV, D) buffer (G_GATHER), as kvviz.caches.paged does for SDPA, and counts the same bytes */
/* per layer, in `lp` (11 pointers) and `lf` (4 layout flags: 1 = column-major, stored (in, out)) */
enum { P_LN1, P_QKV, P_BQKV, P_QN, P_KN, P_O, P_LN2, P_GU, P_DOWN, P_K, P_V, P_NPTR };
/* globals, in `gp` */
enum { G_EMBED, G_NORM, G_HEAD, G_COS, G_SIN, G_WS, G_TABLE, G_GATHER, G_NPTR };

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* [lo, hi) of n items for thread t of nt, in multiples of `grain` */
static void split(int n, int grain, int t, int nt, int* lo, int* hi) {
    int chunks = (n + grain - 1) / grain;
    int per = chunks / nt, extra = chunks % nt;
    int c0 = t * per + MIN(t, extra), c1 = c0 + per + (t < extra);
    *lo = MIN(n, c0 * grain);
    *hi = MIN(n, c1 * grain);
}

/* A vector of VL floats, the CPU's own width (GCC/Clang vector extensions: 16 with AVX-512, 8 with AVX/AVX2,
 * 4 elsewhere: SSE, NEON), and its sum as a tree of halves. The horizontal sums matter: a dot product over
 * 512 floats written as `omp simd reduction` ends in sixteen dependent scalar adds, which cost the wide
 * model's (out, 512) matrices a fifth of their read speed (scripts/native_ab.py, docs/figures.md). The
 * width must be the CPU's: GCC keeps a 64-byte vector on an AVX2 CPU in memory, not in two registers, and the
 * row-major product then reads at 0.58 of the column-major one (`kvviz bench --kernel native --verbose`,
 * docs/figures.md). */
#if defined(__AVX512F__)
#define VL 16
#elif defined(__AVX__)
#define VL 8
#else
#define VL 4
#endif
typedef float vf __attribute__((vector_size(VL * 4)));
typedef int32_t vi __attribute__((vector_size(VL * 4))); /* a comparison's mask, an exponent's bits */
typedef float v8 __attribute__((vector_size(32)));
typedef float v4 __attribute__((vector_size(16)));

static inline vf loadv(const float* p) {
    vf v;
    memcpy(&v, p, sizeof v); /* an unaligned load */
    return v;
}

static inline float hsumv(vf v) {
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
#if VL == 16
    v8 s8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
            __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
#elif VL == 8
    v8 s8 = v;
#endif
#if VL >= 8
    v4 s4 = __builtin_shufflevector(s8, s8, 0, 1, 2, 3) + __builtin_shufflevector(s8, s8, 4, 5, 6, 7);
#else
    v4 s4 = v;
#endif
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
#else
    float t[VL];
    memcpy(t, &v, sizeof t);
    for (int w = VL / 2; w >= 1; w /= 2)
        for (int i = 0; i < w; i++) t[i] += t[i + w];
    return t[0];
#endif
}

static inline void storev(float* p, vf v) { memcpy(p, &v, sizeof v); }

/* m ? a : b, lane by lane */
static inline vf selectv(vi m, vf a, vf b) { return (vf)(((vi)a & m) | ((vi)b & ~m)); }

/* e^x, a vector (VL floats) at a time: Cephes' expf (x = n ln 2 + r, a degree-6 polynomial in r, 2^n put into the
 * exponent bits), relative error ~1e-7 (within a float rounding of expf). x is held to [-87, 88], where
 * 2^n is a normal float: below, e^x < 2e-38 comes out as ~1.6e-38; a NaN stays a NaN. libm's expf is
 * a call per value, which made the softmax a fifth of attention's time at 1,000 positions. */
static inline vf expv(vf x) {
    const vf zero = {0}, lo = zero - 87.0f, hi = zero + 88.0f;
    x = selectv(x < lo, lo, x);
    x = selectv(x > hi, hi, x);
    const vf magic = zero + 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    vf n = (x * 1.44269504088896341f + magic) - magic;
    vf r = x - n * 0.693359375f + n * 2.12194440e-4f;
    vf r2 = r * r;
    vf y = 1.9875691500e-4f * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r2 + r + 1.0f;
    vi e = (__builtin_convertvector(n, vi) + 127) << 23;
    return y * (vf)e;
}

/* the largest of s[0..n) (NaNs passed over, as `s > mx` does); -inf for n = 0 */
static float max_of(const float* restrict s, int n) {
    float mx = -INFINITY;
    int p = 0;
    if (n >= VL) {
        vf m = loadv(s);
        for (p = VL; p + VL <= n; p += VL) {
            vf v = loadv(s + p);
            m = selectv(v > m, v, m);
        }
        for (int i = 0; i < VL; i++) mx = m[i] > mx ? m[i] : mx;
    }
    for (; p < n; p++) mx = s[p] > mx ? s[p] : mx;
    return mx;
}

/* s[p] = e^(s[p] - mx) for p < n; returns their sum */
static float exp_shifted(float* restrict s, int n, float mx) {
    int p = 0;
    float sum = 0.f;
    if (n >= VL) {
        vf acc = {0};
        for (; p + VL <= n; p += VL) {
            vf e = expv(loadv(s + p) - mx);
            storev(s + p, e);
            acc += e;
        }
        sum = hsumv(acc);
    }
    for (; p < n; p++) {
        s[p] = expf(s[p] - mx);
        sum += s[p];
    }
    return sum;
}

/* h[j] = silu(g[j]) * u[j] = g / (1 + e^-g) * u over j in [lo, hi) */
static void swiglu(const float* restrict g, const float* restrict u, float* restrict h, int lo, int hi) {
    int j = lo;
    for (; j + VL <= hi; j += VL) {
        vf gv = loadv(g + j);
        storev(h + j, gv / (1.0f + expv(-gv)) * loadv(u + j));
    }
    for (; j < hi; j++) h[j] = g[j] / (1.0f + expf(-g[j])) * u[j];
}

/* x . w over n floats */
static inline float dot(const float* restrict x, const float* restrict w, int n) {
    int k = 0;
    float s = 0.f;
    if (n >= VL) {
        vf a = loadv(x) * loadv(w);
        for (k = VL; k + VL <= n; k += VL) a += loadv(x + k) * loadv(w + k);
        s = hsumv(a);
    }
    for (; k < n; k++) s += x[k] * w[k];
    return s;
}

/* A matrix is read as four streams at once, one in each quarter of the rows a call reads (a thread's
 * share), each one linear over its quarter. One core's read speed is how many lines it has in flight,
 * which grows with the streams the hardware prefetcher runs; four neighbouring rows are four streams too,
 * but short ones (2-6 KiB, under two pages) that it keeps restarting, and one linear stream holds too few
 * lines in flight (1 thread, Zen 3, scripts/native_parts.c's 33 matrices of the wide model: neighbouring
 * rows 13.3-16.5 GB/s, one stream a matrix 13.5-14.7, four quarters 15.9-18.4; docs/figures.md). Eight
 * streams read no faster on the model's matrices. A rule by shape, never a timing. The kernels below
 * (rows_rm, rows_cm, attend) are written out for four. */
#define STREAMS 4

/* y[o] (+)= W[o, :] . x over rows [o0, o1) of a row-major (out, in) matrix */
static void rows_rm(const float* restrict W, const float* restrict x, float* restrict y, int in, int o0, int o1,
                    const float* bias, int accum) {
    const int vin = in / VL * VL, q = (o1 - o0) / STREAMS;
    for (int o = o0; o < o0 + q; o++) {
        const float *w0 = W + (size_t)o * in, *w1 = w0 + (size_t)q * in, *w2 = w1 + (size_t)q * in,
                    *w3 = w2 + (size_t)q * in;
        vf a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
        for (int k = 0; k < vin; k += VL) {
            vf xk = loadv(x + k);
            a0 += loadv(w0 + k) * xk;
            a1 += loadv(w1 + k) * xk;
            a2 += loadv(w2 + k) * xk;
            a3 += loadv(w3 + k) * xk;
        }
        float s[4] = {hsumv(a0), hsumv(a1), hsumv(a2), hsumv(a3)};
        for (int k = vin; k < in; k++) {
            s[0] += w0[k] * x[k];
            s[1] += w1[k] * x[k];
            s[2] += w2[k] * x[k];
            s[3] += w3[k] * x[k];
        }
        for (int r = 0; r < 4; r++) {
            const int row = o + r * q;
            float v = s[r] + (bias ? bias[row] : 0.f);
            y[row] = accum ? y[row] + v : v;
        }
    }
    for (int o = o0 + STREAMS * q; o < o1; o++) {
        float v = dot(W + (size_t)o * in, x, in) + (bias ? bias[o] : 0.f);
        y[o] = accum ? y[o] + v : v;
    }
}

/* floats in a 64-byte cache line, and how far ahead of its reads (floats: four lines) rows_cm asks for
 * each of its four streams. Without it, on a Zen 4 (AVX-512) VM, one thread read a column-major matrix
 * 6-15% slower than the same bytes row-major (a 128 MiB product, medians in turns: out 1,536 22.3 against
 * 25.7 GB/s); asking four lines ahead it read as fast or faster (26.4), one or two lines / eight or more
 * ahead less so; the step on `wide` 1.04-1.10x at 1 thread, 1.015-1.022x at 2, in turns in one process
 * (scripts/native_ab.py, docs/figures.md). In rows_rm the same gains nothing beyond the
 * noise, so rows_rm does not ask ahead. */
#define LINE 16
#define CM_AHEAD 64

/* acc[:] = sum over i in [i0, i1) of x[i] * W[i, :] for a column-major weight stored (in, out), a line of
 * each stream at a time, the sum in the same order as one row's: acc + (w0 + w1 + w2 + w3) */
static void rows_cm(const float* restrict W, const float* restrict x, float* restrict acc, int out, int i0, int i1) {
    for (int j = 0; j < out; j++) acc[j] = 0.f;
    const int q = (i1 - i0) / STREAMS;
    for (int i = i0; i < i0 + q; i++) {
        const float *w0 = W + (size_t)i * out, *w1 = w0 + (size_t)q * out, *w2 = w1 + (size_t)q * out,
                    *w3 = w2 + (size_t)q * out;
        float a0 = x[i], a1 = x[i + q], a2 = x[i + 2 * q], a3 = x[i + 3 * q];
        int j = 0;
        for (; j + LINE <= out; j += LINE) {
            __builtin_prefetch(w0 + j + CM_AHEAD);
            __builtin_prefetch(w1 + j + CM_AHEAD);
            __builtin_prefetch(w2 + j + CM_AHEAD);
            __builtin_prefetch(w3 + j + CM_AHEAD);
            for (int k = j; k < j + LINE; k += VL)
                storev(acc + k, loadv(acc + k) + (a0 * loadv(w0 + k) + a1 * loadv(w1 + k) + a2 * loadv(w2 + k) +
                                                     a3 * loadv(w3 + k)));
        }
        for (; j < out; j++) acc[j] += a0 * w0[j] + a1 * w1[j] + a2 * w2[j] + a3 * w3[j];
    }
    for (int i = i0 + STREAMS * q; i < i1; i++) {
        const float* w0 = W + (size_t)i * out;
        float a0 = x[i];
#pragma omp simd
        for (int j = 0; j < out; j++) acc[j] += a0 * w0[j];
    }
}

/* y (+)= W x (+ bias), called by every thread of the region; ends with a barrier.
 * part: nt * out floats of scratch (the column-major case's partial sums). */
static void gemv(const float* W, int cm, const float* x, float* y, int in, int out, const float* bias, int accum,
                 float* part, int t, int nt) {
    int lo, hi;
    if (!cm) {
        split(out, 16, t, nt, &lo, &hi);
        rows_rm(W, x, y, in, lo, hi, bias, accum);
    } else if (nt == 1) {
        rows_cm(W, x, part, out, 0, in);
        for (int j = 0; j < out; j++) {
            float v = part[j] + (bias ? bias[j] : 0.f);
            y[j] = accum ? y[j] + v : v;
        }
    } else {
        split(in, 4, t, nt, &lo, &hi);
        rows_cm(W, x, part + (size_t)t * out, out, lo, hi);
#pragma omp barrier
        split(out, 16, t, nt, &lo, &hi);
        for (int j = lo; j < hi; j++) {
            float v = bias ? bias[j] : 0.f;
            for (int u = 0; u < nt; u++) v += part[(size_t)u * out + j];
            y[j] = accum ? y[j] + v : v;
        }
    }
#pragma omp barrier
}

/* Attention for one query head over positions 0..n-1, rows `stride` floats apart:
 * s[p] = q . K[p] * scale, then s = e^(s - max) (*sum their sum), then o = sum over p of s[p] * V[p].
 * Like a matrix (rows_rm), the head's K, then its V, is read as four streams at once, one in each quarter
 * of the positions: a head's K is one short stream (256 B a row, 100-300 KB at 400-1,000 positions) that
 * the prefetcher starts late, and two heads side by side with software prefetch into the stream read next
 * read 11.3-14.4 GB/s where four quarters of one head read 12.9-17.1, one thread (scripts/native_parts.c's
 * attention, 300-1,115 positions; eight quarters 12.5-15.6, two 11.7-14.8; docs/figures.md). V's sum runs
 * in another order than position by position: the logits move by a rounding. */
static void attend(const float* q, const float* K, const float* Vv, size_t stride, int D, int n, float scale,
                   float* restrict s, float* restrict o, float* sum) {
    const int Q = n / STREAMS;
    for (int p = 0; p < Q; p++) {
        s[p] = dot(q, K + (size_t)p * stride, D) * scale;
        s[p + Q] = dot(q, K + (size_t)(p + Q) * stride, D) * scale;
        s[p + 2 * Q] = dot(q, K + (size_t)(p + 2 * Q) * stride, D) * scale;
        s[p + 3 * Q] = dot(q, K + (size_t)(p + 3 * Q) * stride, D) * scale;
    }
    for (int p = STREAMS * Q; p < n; p++) s[p] = dot(q, K + (size_t)p * stride, D) * scale;
    *sum = exp_shifted(s, n, max_of(s, n));
    for (int d = 0; d < D; d++) o[d] = 0.f;
    for (int p = 0; p < Q; p++) {
        const float *v0 = Vv + (size_t)p * stride, *v1 = v0 + (size_t)Q * stride, *v2 = v1 + (size_t)Q * stride,
                    *v3 = v2 + (size_t)Q * stride;
        const float a0 = s[p], a1 = s[p + Q], a2 = s[p + 2 * Q], a3 = s[p + 3 * Q];
#pragma omp simd
        for (int d = 0; d < D; d++) o[d] += a0 * v0[d] + a1 * v1[d] + a2 * v2[d] + a3 * v3[d];
    }
    for (int p = STREAMS * Q; p < n; p++) {
        const float* v0 = Vv + (size_t)p * stride;
        const float a0 = s[p];
#pragma omp simd
        for (int d = 0; d < D; d++) o[d] += a0 * v0[d];
    }
}

/* out = x * rsqrt(mean(x^2) + eps) * w, n values */
static void rmsnorm(const float* x, const float* restrict w, float* out, int n, float eps) { /* in place too */
    float ss = 0.f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float r = 1.0f / sqrtf(ss / (float)n + eps);
#pragma omp simd
    for (int i = 0; i < n; i++) out[i] = x[i] * r * w[i];
}

/* RoPE as kvviz's `rotate`: x * cos + roll(x, D/2) * sin_signed, in place on one head */
static void rope(float* restrict x, const float* restrict cos_, const float* restrict sin_, int D, float* tmp) {
    int half = D / 2;
    for (int d = 0; d < D; d++) tmp[d] = x[d];
    for (int d = 0; d < D; d++) x[d] = tmp[d] * cos_[d] + tmp[(d + half) % D] * sin_[d];
}

/* Workspace floats the step needs (the caller allocates them once per run). */
int64_t kv_workspace_floats(const int64_t* ip) {
    int64_t C = ip[I_C], H = ip[I_H], KV = ip[I_KV], D = ip[I_D], F = ip[I_F], V = ip[I_V], T = ip[I_TMAX];
    int64_t nt = ip[I_THREADS];
    int64_t widest = 2 * F;
    if ((H + 2 * KV) * D > widest) widest = (H + 2 * KV) * D;
    if (V > widest) widest = V;
    if (C > widest) widest = C;
    /* x, xn, qkv, att, gu, h, scores (H * T), rope tmp (per thread), partial sums */
    return 2 * C + (H + 2 * KV) * D + H * D + 2 * F + F + H * T + nt * D + nt * widest + 64;
}

/* One decode step: token `token` at position `pos` (the cache holds 0..pos-1; its K/V rows for pos are
 * written here). logits: V floats. Where wlayer >= 0, the attention weights of query head `whead` in layer
 * `wlayer` (softmax(q k^T / sqrt(D)) over positions 0..pos, what the trace shows) go to `wout` (pos + 1
 * floats). Returns the greedy pick, the first index of the largest logit, as torch.argmax takes it (a NaN
 * counts as the largest), where that logit is finite; else -1 (the caller's own check then refuses it). */
int64_t kv_decode(const int64_t* ip, const int64_t* lf, void* const* gp, void* const* lp, float eps, int64_t token,
              int64_t pos, float* logits, int64_t wlayer, int64_t whead, float* wout) {
    const int C = (int)ip[I_C], H = (int)ip[I_H], KV = (int)ip[I_KV], D = (int)ip[I_D], F = (int)ip[I_F];
    const int V = (int)ip[I_V], L = (int)ip[I_L], TMAX = (int)ip[I_TMAX], NT = (int)ip[I_THREADS];
    const int has_bias = (int)ip[I_BIAS], qknorm = (int)ip[I_QKNORM], head_cm = (int)ip[I_HEAD_CM];
    const int mode = (int)ip[I_MODE], S = (int)ip[I_BLOCK];
    const int64_t* table = (const int64_t*)gp[G_TABLE];
    float* gk = (float*)gp[G_GATHER];
    const float* embed = (const float*)gp[G_EMBED];
    const float* cos_ = (const float*)gp[G_COS] + (size_t)pos * D;
    const float* sin_ = (const float*)gp[G_SIN] + (size_t)pos * D;
    float* ws = (float*)gp[G_WS];
    float* x = ws;
    float* xn = x + C;
    float* qkv = xn + C;
    float* att = qkv + (size_t)(H + 2 * KV) * D;
    float* gu = att + (size_t)H * D;
    float* hid = gu + 2 * (size_t)F;
    float* scores = hid + F;
    float* rtmp = scores + (size_t)H * TMAX;
    float* part = rtmp + (size_t)NT * D;
    const int group = H / KV;
    const float scale = 1.0f / sqrtf((float)D);
    const int n = (int)pos + 1; /* positions attention sees */
    /* attention's addressing of K/V row (p, g): base + p * pstride + g * gstride */
    const size_t tstride = mode == 1 ? (size_t)n : (size_t)TMAX;
    const size_t pstride = mode == 2 ? (size_t)KV * D : (size_t)D;
    const size_t gstride = mode == 2 ? (size_t)D : tstride * D;
    const int n_used = mode == 2 ? (n + S - 1) / S : 0;
    const size_t gathered = (size_t)n_used * S * KV * D; /* floats of K (and of V) gathered a layer */
    float* gv = gk + gathered;

    for (int c = 0; c < C; c++) x[c] = embed[(size_t)token * C + c];

#pragma omp parallel num_threads(NT)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int lo, hi;
        for (int l = 0; l < L; l++) {
            void* const* P = lp + (size_t)l * P_NPTR;
            const int64_t* cm = lf + (size_t)l * 4;
            float* kc = (float*)P[P_K];
            float* vc = (float*)P[P_V];
#pragma omp single
            rmsnorm(x, (const float*)P[P_LN1], xn, C, eps);
            /* (the implicit barrier of `single`) */
            gemv((const float*)P[P_QKV], (int)cm[0], xn, qkv, C, (H + 2 * KV) * D,
                 has_bias ? (const float*)P[P_BQKV] : NULL, 0, part, t, nt);
            /* q/k norms and the rotation, a head at a time; the new K and V into the cache at pos */
            split(H + 2 * KV, 1, t, nt, &lo, &hi);
            for (int h = lo; h < hi; h++) {
                float* hv = qkv + (size_t)h * D;
                if (h < H + KV) {
                    if (qknorm) rmsnorm(hv, (const float*)(h < H ? P[P_QN] : P[P_KN]), hv, D, eps);
                    rope(hv, cos_, sin_, D, rtmp + (size_t)t * D);
                }
                if (h >= H) {
                    int g = h < H + KV ? h - H : h - H - KV;
                    float* dst = (h < H + KV ? kc : vc) +
                                 (mode == 2 ? ((size_t)(table[pos / S] * S + pos % S) * KV + g) * D
                                            : g * tstride * D + (size_t)pos * D);
                    for (int d = 0; d < D; d++) dst[d] = hv[d];
                }
            }
#pragma omp barrier
            const float *kb = kc, *vb = vc;
            if (mode == 2) { /* the gather, block by block, as index_select copies them */
                const size_t blk = (size_t)S * KV * D;
                split(n_used, 1, t, nt, &lo, &hi);
                for (int b = lo; b < hi; b++) {
                    const float* ks = kc + (size_t)table[b] * blk;
                    const float* vs = vc + (size_t)table[b] * blk;
                    float* kd = gk + (size_t)b * blk;
                    float* vd = gv + (size_t)b * blk;
                    for (size_t i = 0; i < blk; i++) kd[i] = ks[i];
                    for (size_t i = 0; i < blk; i++) vd[i] = vs[i];
                }
                kb = gk;
                vb = gv;
#pragma omp barrier
            }
            /* attention, a query head at a time over positions 0..pos */
            split(H, 1, t, nt, &lo, &hi);
            for (int h = lo; h < hi; h++) {
                const int g = h / group;
                float* s = scores + (size_t)h * TMAX;
                float* o = att + (size_t)h * D;
                float sum;
                attend(qkv + (size_t)h * D, kb + (size_t)g * gstride, vb + (size_t)g * gstride, pstride, D, n,
                       scale, s, o, &sum);
                const float inv = 1.0f / sum;
                for (int d = 0; d < D; d++) o[d] *= inv;
                if (l == wlayer && h == whead)
                    for (int p = 0; p < n; p++) wout[p] = s[p] * inv;
            }
#pragma omp barrier
            gemv((const float*)P[P_O], (int)cm[1], att, x, H * D, C, NULL, 1, part, t, nt);
#pragma omp single
            rmsnorm(x, (const float*)P[P_LN2], xn, C, eps);
            gemv((const float*)P[P_GU], (int)cm[2], xn, gu, C, 2 * F, NULL, 0, part, t, nt);
            split(F, 16, t, nt, &lo, &hi);
            swiglu(gu, gu + F, hid, lo, hi);
#pragma omp barrier
            gemv((const float*)P[P_DOWN], (int)cm[3], hid, x, F, C, NULL, 1, part, t, nt);
        }
#pragma omp single
        rmsnorm(x, (const float*)gp[G_NORM], xn, C, eps);
        gemv((const float*)gp[G_HEAD], head_cm, xn, logits, C, V, NULL, 0, part, t, nt);
    }
    int64_t best = 0;
    for (int64_t i = 0; i < V; i++) {
        if (isnan(logits[i])) {
            best = i;
            break;
        }
        if (logits[i] > logits[best]) best = i;
    }
    return isfinite(logits[best]) ? best : -1;
}

/* Y[b, o0:o1] = X[b, :] . W[o, :] (+ bias[o]) for the B rows of X (B, in) against rows [o0, o1) of a row-major
 * (out, in) matrix: the serving step's product of many rows. Each weight row is read from memory once for all
 * B rows, as four streams (rows_rm's quarters); four rows of X at a time against the four streams' weight
 * vectors (sixteen sums in registers); a later group of four X rows finds the weight rows still in L1. Each
 * sum in rows_rm's order, so a row's product equals the one-row step's. */
static void gemm_rm(const float* restrict W, const float* restrict X, float* restrict Y, int in, int out, int B,
                    int o0, int o1, const float* bias) {
    const int vin = in / VL * VL, q = (o1 - o0) / STREAMS;
    for (int o = o0; o < o0 + q; o++) {
        const float* w[4] = {W + (size_t)o * in, W + (size_t)(o + q) * in, W + (size_t)(o + 2 * q) * in,
                             W + (size_t)(o + 3 * q) * in};
        int b = 0;
        for (; b + 4 <= B; b += 4) {
            const float* x[4] = {X + (size_t)b * in, X + (size_t)(b + 1) * in, X + (size_t)(b + 2) * in,
                                 X + (size_t)(b + 3) * in};
            vf a[4][4] = {{0}};
            for (int k = 0; k < vin; k += VL) {
                vf wk[4] = {loadv(w[0] + k), loadv(w[1] + k), loadv(w[2] + k), loadv(w[3] + k)};
                for (int r = 0; r < 4; r++) {
                    vf xk = loadv(x[r] + k);
                    for (int s = 0; s < 4; s++) a[r][s] += wk[s] * xk;
                }
            }
            for (int r = 0; r < 4; r++)
                for (int s = 0; s < 4; s++) {
                    float v = hsumv(a[r][s]);
                    for (int k = vin; k < in; k++) v += w[s][k] * x[r][k];
                    Y[(size_t)(b + r) * out + o + s * q] = v + (bias ? bias[o + s * q] : 0.f);
                }
        }
        for (; b < B; b++)
            for (int s = 0; s < 4; s++)
                rows_rm(W, X + (size_t)b * in, Y + (size_t)b * out, in, o + s * q, o + s * q + 1, bias, 0);
    }
    for (int b = 0; b < B; b++)
        rows_rm(W, X + (size_t)b * in, Y + (size_t)b * out, in, o0 + STREAMS * q, o1, bias, 0);
}

/* Y (B, out) = X (B, in) W^T (+ bias) for a row-major (out, in) W at `nt` threads, each thread a contiguous
 * range of W's rows (one OpenMP region; none at one thread). */
void kv_gemm(const float* W, const float* X, float* Y, int in, int out, int B, const float* bias, int nt) {
    if (nt <= 1) {
        gemm_rm(W, X, Y, in, out, B, 0, out, bias);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int lo, hi;
        split(out, 16, omp_get_thread_num(), omp_get_num_threads(), &lo, &hi);
        gemm_rm(W, X, Y, in, out, B, lo, hi, bias);
    }
}

/* the floats in one of this build's vectors (VL: 16, 8 or 4), which the bench prints */
int64_t kv_vector_floats(void) { return VL; }

/* The read ceiling as this file's kernel reads: `reps` products of x against W (in, out) column-major or
 * (out, in) row-major at `nt` threads; returns the fastest in seconds. */
double kv_gemv_best(const float* W, int cm, const float* x, float* y, int in, int out, float* part, int nt,
                    int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
#pragma omp parallel num_threads(nt)
        gemv(W, cm, x, y, in, out, NULL, 0, part, omp_get_thread_num(), omp_get_num_threads());
        double dt = omp_get_wtime() - t0;
        if (dt < best) best = dt;
    }
    return best;
}
