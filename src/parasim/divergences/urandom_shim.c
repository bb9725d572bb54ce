/* parasim: a fixed seed for programs that seed themselves from /dev/urandom (eflomal).
 *
 * Loaded with LD_PRELOAD by parasim.perturb.wordalign, and active only while the environment
 * variable PARASIM_URANDOM_SEED is set: fopen("/dev/urandom") then returns an in-memory stream
 * of splitmix64 output started from that number, so the program draws the same "random" seed
 * on every run. Every other fopen goes to the C library unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One buffer per thread: eflomal aligns its two directions in parallel threads, and each opens
 * /dev/urandom once. */
static __thread unsigned char stream[4096];

FILE *fopen(const char *path, const char *mode) {
    static FILE *(*real_fopen)(const char *, const char *);
    if (real_fopen == NULL)
        real_fopen = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
    const char *seed = getenv("PARASIM_URANDOM_SEED");
    if (seed != NULL && *seed != '\0' && path != NULL && strcmp(path, "/dev/urandom") == 0) {
        uint64_t x = strtoull(seed, NULL, 10);
        for (size_t i = 0; i < sizeof stream; i += 8) {
            uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
            z ^= z >> 31;
            memcpy(stream + i, &z, sizeof z);
        }
        return fmemopen(stream, sizeof stream, "rb");
    }
    return real_fopen(path, mode);
}
