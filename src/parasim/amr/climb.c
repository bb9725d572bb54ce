/* Best-swap hill climbing over Smatch variable alignments: the loop of
 * parasim.amr.matching._climb in C (same moves, same tie-breaking, same result).
 *
 * u:  n x n unary match counts, row-major (u[i*n + j]: variable i of graph 1 on j of graph 2).
 * (a, x, c, y, w): the e binary entries B[a, x, c, y] = w (symmetric: B[a,x,c,y] = B[c,y,a,x]).
 * p:  the start permutation (p[i] = target of variable i), climbed in place.
 * Returns the objective of the final alignment, or -1 when out of memory.
 *
 * Each step computes the gain of every swap (i < k) of two variables' targets with the scatter
 * formula of parasim.amr.matching.swap_gains (O(n^2 + e) per step), takes the largest, the first
 * in row-major (i, k) order among ties, as numpy's argmax does, and stops when no swap gains more
 * than 1e-9 or after n * n + 10 steps. The weights are multiples of 1/2, so every sum is exact
 * and the gains equal numpy's bit for bit.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

double parasim_climb(int64_t n, const double *u, int64_t e, const int64_t *a, const int64_t *x,
                     const int64_t *c, const int64_t *y, const double *w, int64_t *p) {
    double *g = malloc(sizeof(double) * (size_t)(n * n));  /* G[a, x] */
    double *t = malloc(sizeof(double) * (size_t)(n * n));  /* terms inside {i, k} */
    double *r = malloc(sizeof(double) * (size_t)n);
    int64_t *pinv = malloc(sizeof(int64_t) * (size_t)n);
    if (!g || !t || !r || !pinv) {
        free(g); free(t); free(r); free(pinv);
        return -1.0;
    }
    for (int64_t step = 0; step < n * n + 10; step++) {
        for (int64_t v = 0; v < n; v++) pinv[p[v]] = v;
        memset(g, 0, sizeof(double) * (size_t)(n * n));
        memset(t, 0, sizeof(double) * (size_t)(n * n));
        memset(r, 0, sizeof(double) * (size_t)n);
        for (int64_t q = 0; q < e; q++) {
            int64_t aq = a[q], xq = x[q], cq = c[q], yq = y[q];
            double wq = w[q];
            int64_t pa = p[aq], pc = p[cq];
            if (pc == yq) g[aq * n + xq] += 2.0 * wq;
            if (aq == cq) {
                int64_t v = pinv[xq];
                if (yq == pa) { t[aq * n + v] += -2.0 * wq; t[v * n + aq] += -2.0 * wq; }
                if (xq == yq) { t[aq * n + v] += wq; t[v * n + aq] += wq; }
                if (xq == pa && yq == pa) r[aq] += wq;
            }
            if (xq == pc && yq == pc) { t[aq * n + cq] += -2.0 * wq; t[cq * n + aq] += -2.0 * wq; }
            if (xq == pa && yq == pc) t[aq * n + cq] += 2.0 * wq;
            if (xq == pc && yq == pa) t[aq * n + cq] += 2.0 * wq;
        }
        double best = -1.0 / 0.0;
        int64_t bi = -1, bk = -1;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = p[i];
            for (int64_t k = i + 1; k < n; k++) {
                int64_t m = p[k];
                double gain = u[i * n + m] + u[k * n + j] - u[i * n + j] - u[k * n + m];
                if (e) {
                    gain += g[i * n + m] - g[i * n + j] + g[k * n + j] - g[k * n + m];
                    gain += t[i * n + k] + r[i] + r[k];
                }
                if (gain > best) { best = gain; bi = i; bk = k; }
            }
        }
        if (bi < 0 || best <= 1e-9) break;
        int64_t s = p[bi]; p[bi] = p[bk]; p[bk] = s;
    }
    double obj = 0.0;
    for (int64_t i = 0; i < n; i++) obj += u[i * n + p[i]];
    for (int64_t q = 0; q < e; q++)
        if (p[a[q]] == x[q] && p[c[q]] == y[q]) obj += w[q];
    free(g); free(t); free(r); free(pinv);
    return obj;
}
