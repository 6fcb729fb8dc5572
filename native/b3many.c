/* session._b3many: BLAKE3 digests (first 8 bytes) of many short records in one call.
 *
 * Why: one Python blake3 call per 1-5 KB record costs ~1 us and keeps at most two of the
 * sixteen AVX-512 lanes busy. Here every compression of every record in a batch (full
 * chunks, each final chunk's blocks, the partial last block, parent nodes) is a "job" run
 * by a kernel that compresses 16 independent jobs side by side, each lane with its own
 * pointer, block count, counter, block length and flags. Jobs are sorted by block count
 * so lanes of one kernel call finish together. The result is exactly BLAKE3 (upstream
 * 1.3.1 is the oracle in the tests); records longer than MAX_CHUNKS chunks go through
 * upstream's hasher, which already fills the lanes with one input's chunks.
 *
 * Memory, not arithmetic, was the limit: 16 lanes reading 16 scattered records defeat the
 * hardware prefetcher, so while one window (<= 256 records, <= 512 KiB) is hashed the kernels
 * prefetch the next window's lines, a few after each round.
 *
 * Kernels: AVX-512 (16 lanes) and AVX2 (8 lanes) written here with per-function target
 * attributes and picked with upstream's own CPU detection (blake3_simd_degree); otherwise
 * a portable loop over upstream's blake3_compress_in_place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blake3.h"
#include "blake3_impl.h"

#define BLOCK_LEN 64
#define CHUNK_LEN 1024
#define MAX_CHUNKS 16        /* longer records (> 16 KiB) use upstream's hasher */
#ifndef BATCH_RECORDS
#define BATCH_RECORDS 256    /* records per batch: scratch stays in L1/L2 */
#endif
#ifndef BATCH_CHUNKS
#define BATCH_CHUNKS 512     /* and at most this many chunks (512 KiB) */
#endif
#define MAX_JOBS BATCH_CHUNKS

/* One lane's work: nblocks compressions starting from the IV; blocks 0..nblocks-2 are read
 * from `in` (contiguous, full), the last from `last` (64 readable, zero-padded bytes). */
typedef struct {
  const uint8_t *in;
  const uint8_t *last;
  uint8_t *out; /* 32 bytes: the resulting chaining value (the root hash with ROOT) */
  uint32_t counter;
  uint8_t nblocks;  /* 1..16 */
  uint8_t last_len; /* 0..64 */
  uint8_t flags_first;
  uint8_t flags_last;
} job_t;

typedef struct {
  job_t jobs[MAX_JOBS];
  job_t sorted[MAX_JOBS];
  uint8_t cvs[MAX_JOBS][32];
  uint8_t lastblk[BATCH_RECORDS][BLOCK_LEN];
  uint32_t rec_base[BATCH_RECORDS];
  uint32_t rec_nodes[BATCH_RECORDS];
  size_t rec_index[BATCH_RECORDS];
} scratch_t;

static const uint8_t ZERO_BLOCK[BLOCK_LEN] = {0};

/* TAIL_MASK + 64 - n: 64 bytes of which the first n are 0xff. */
static const uint8_t TAIL_MASK[2 * BLOCK_LEN] = {
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
    255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255};

/* The next window's records, walked a few cache lines per kernel step so that its bytes are in
 * cache when it is hashed: the kernels are then never waiting on DRAM (records are scattered
 * across lanes, which defeats the hardware prefetcher's stream detection). */
typedef struct {
  const uint8_t *buf;
  const int64_t *off, *len;
  size_t n, rec;
  uintptr_t cur, end; /* the current record's remaining lines */
} prefetch_t;

#ifndef PREFETCH_LINES
#define PREFETCH_LINES 21 /* per 16-lane kernel step, which consumes 16 blocks */
#endif

static inline void prefetch_some(prefetch_t *pf, int lines) {
  while (lines > 0) {
    if (pf->cur >= pf->end) {
      if (pf->rec >= pf->n) return;
      uintptr_t p = (uintptr_t)(pf->buf + pf->off[pf->rec]);
      pf->cur = p & ~(uintptr_t)63;
      pf->end = p + (uintptr_t)pf->len[pf->rec];
      pf->rec++;
      continue;
    }
    __builtin_prefetch((const void *)pf->cur, 0, 3);
    pf->cur += 64;
    lines--;
  }
}

INLINE const uint8_t *job_block(const job_t *j, size_t s) {
  if (s + 1 < j->nblocks) return j->in + BLOCK_LEN * s;
  if (s + 1 == j->nblocks) return j->last;
  return ZERO_BLOCK;
}

/* ---------------------------------------------------------------- portable kernel */

static void kernel_portable(const job_t *jobs, size_t n, prefetch_t *pf) {
  for (size_t i = 0; i < n; i++) {
    prefetch_some(pf, jobs[i].nblocks + 1);
    const job_t *j = &jobs[i];
    uint32_t cv[8];
    memcpy(cv, IV, sizeof cv);
    for (size_t s = 0; s < j->nblocks; s++) {
      bool last = s + 1 == j->nblocks;
      uint8_t flags = (uint8_t)((s == 0 ? j->flags_first : 0) | (last ? j->flags_last : 0));
      blake3_compress_in_place(cv, job_block(j, s), last ? j->last_len : BLOCK_LEN,
                               j->counter, flags);
    }
    store_cv_words(j->out, cv);
  }
}

/* ---------------------------------------------------------------- SIMD kernels */

#if defined(IS_X86_64) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_X86_KERNELS 1
#include <immintrin.h>

/* The BLAKE3 round on 16 state vectors: G on columns, then on diagonals. */
#define ROUND(V, M, r, ADD, XOR, ROT16, ROT12, ROT8, ROT7)                                   \
  do {                                                                                       \
    const uint8_t *sch = MSG_SCHEDULE[r];                                                    \
    G(V, M, 0, 4, 8, 12, sch[0], sch[1], ADD, XOR, ROT16, ROT12, ROT8, ROT7);                \
    G(V, M, 1, 5, 9, 13, sch[2], sch[3], ADD, XOR, ROT16, ROT12, ROT8, ROT7);                \
    G(V, M, 2, 6, 10, 14, sch[4], sch[5], ADD, XOR, ROT16, ROT12, ROT8, ROT7);               \
    G(V, M, 3, 7, 11, 15, sch[6], sch[7], ADD, XOR, ROT16, ROT12, ROT8, ROT7);               \
    G(V, M, 0, 5, 10, 15, sch[8], sch[9], ADD, XOR, ROT16, ROT12, ROT8, ROT7);               \
    G(V, M, 1, 6, 11, 12, sch[10], sch[11], ADD, XOR, ROT16, ROT12, ROT8, ROT7);             \
    G(V, M, 2, 7, 8, 13, sch[12], sch[13], ADD, XOR, ROT16, ROT12, ROT8, ROT7);              \
    G(V, M, 3, 4, 9, 14, sch[14], sch[15], ADD, XOR, ROT16, ROT12, ROT8, ROT7);              \
  } while (0)

#define G(V, M, a, b, c, d, x, y, ADD, XOR, ROT16, ROT12, ROT8, ROT7)                        \
  do {                                                                                       \
    V[a] = ADD(ADD(V[a], V[b]), M[x]);                                                       \
    V[d] = ROT16(XOR(V[d], V[a]));                                                           \
    V[c] = ADD(V[c], V[d]);                                                                  \
    V[b] = ROT12(XOR(V[b], V[c]));                                                           \
    V[a] = ADD(ADD(V[a], V[b]), M[y]);                                                       \
    V[d] = ROT8(XOR(V[d], V[a]));                                                            \
    V[c] = ADD(V[c], V[d]);                                                                  \
    V[b] = ROT7(XOR(V[b], V[c]));                                                            \
  } while (0)

/* Written out so every message index is a constant and m[] can stay in registers. */
/* PF runs between rounds: prefetches spread over the step keep the fill buffers from
 * filling up (a burst of them stalls). */
#define ROUNDS7(V, M, PF, ...)                                                               \
  do {                                                                                       \
    ROUND(V, M, 0, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 1, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 2, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 3, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 4, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 5, __VA_ARGS__);                                                             \
    PF;                                                                                      \
    ROUND(V, M, 6, __VA_ARGS__);                                                             \
    PF;                                                                                      \
  } while (0)

/* --- AVX-512: 16 lanes */
#define T512 __attribute__((target("avx512f,avx512vl")))
#define A512(a, b) _mm512_add_epi32(a, b)
#define X512(a, b) _mm512_xor_si512(a, b)
#define R512_16(x) _mm512_ror_epi32(x, 16)
#define R512_12(x) _mm512_ror_epi32(x, 12)
#define R512_8(x) _mm512_ror_epi32(x, 8)
#define R512_7(x) _mm512_ror_epi32(x, 7)

T512 static inline void transpose16(__m512i v[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  /* t[4k+0..3] hold pairs (lo,hi) of rows 4k..4k+3 */
  for (int k = 0; k < 4; k++) {
    u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k + 0], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k + 0], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  /* u[4k+c]: words c, c+4, c+8, c+12 (per 128-bit lane) of rows 4k..4k+3 */
  for (int c = 0; c < 4; c++) {
    t[c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);
    t[4 + c] = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);
    t[8 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
  }
  for (int c = 0; c < 8; c++) {
    v[c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0x88);
    v[8 + c] = _mm512_shuffle_i32x4(t[c], t[8 + c], 0xdd);
  }
}

T512 static void kernel16(const job_t *jobs, size_t n, prefetch_t *pf) {
  uint32_t nb[16], ctr[16], ll[16], ff[16], fl[16];
  const uint8_t *in[16], *last[16];
  size_t steps = 0;
  for (size_t i = 0; i < 16; i++) {
    if (i < n) {
      const job_t *j = &jobs[i];
      nb[i] = j->nblocks, ctr[i] = j->counter, ll[i] = j->last_len;
      ff[i] = j->flags_first, fl[i] = j->flags_last, in[i] = j->in, last[i] = j->last;
      if (j->nblocks > steps) steps = j->nblocks;
    } else {
      nb[i] = ctr[i] = ll[i] = ff[i] = fl[i] = 0, in[i] = last[i] = ZERO_BLOCK;
    }
  }
  const __m512i nbv = _mm512_loadu_si512(nb), ctrv = _mm512_loadu_si512(ctr);
  const __m512i llv = _mm512_loadu_si512(ll), ffv = _mm512_loadu_si512(ff);
  const __m512i flv = _mm512_loadu_si512(fl);
  const __m512i nbm1 = _mm512_sub_epi32(nbv, _mm512_set1_epi32(1));
  __m512i h[8];
  for (int k = 0; k < 8; k++) h[k] = _mm512_set1_epi32((int)IV[k]);

  for (size_t s = 0; s < steps; s++) {
    __m512i m[16];
    for (size_t i = 0; i < 16; i++) {
      const uint8_t *p = s + 1 < nb[i] ? in[i] + BLOCK_LEN * s : s + 1 == nb[i] ? last[i]
                                                                                : ZERO_BLOCK;
      m[i] = _mm512_loadu_si512(p);
      _mm_prefetch((const char *)p + 256, _MM_HINT_T0);
    }
    transpose16(m);
    const __m512i sv = _mm512_set1_epi32((int)s);
    const __mmask16 active = _mm512_cmplt_epu32_mask(sv, nbv);
    const __mmask16 is_last = _mm512_cmpeq_epi32_mask(sv, nbm1);
    __m512i flags = _mm512_maskz_mov_epi32(is_last, flv);
    if (s == 0) flags = _mm512_or_si512(flags, ffv);
    __m512i v[16] = {
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
        _mm512_set1_epi32((int)IV[0]), _mm512_set1_epi32((int)IV[1]),
        _mm512_set1_epi32((int)IV[2]), _mm512_set1_epi32((int)IV[3]),
        ctrv, _mm512_setzero_si512(),
        _mm512_mask_mov_epi32(_mm512_set1_epi32(BLOCK_LEN), is_last, llv), flags,
    };
    ROUNDS7(v, m, prefetch_some(pf, PREFETCH_LINES / 7), A512, X512, R512_16, R512_12, R512_8, R512_7);
    for (int k = 0; k < 8; k++) h[k] = _mm512_mask_xor_epi32(h[k], active, v[k], v[k + 8]);
  }
  __m512i o[16];
  for (int k = 0; k < 8; k++) o[k] = h[k], o[k + 8] = _mm512_setzero_si512();
  transpose16(o);
  for (size_t i = 0; i < n; i++)
    _mm256_storeu_si256((__m256i *)jobs[i].out, _mm512_castsi512_si256(o[i]));
}

/* --- AVX2: 8 lanes */
#define T256 __attribute__((target("avx2")))
#define A256(a, b) _mm256_add_epi32(a, b)
#define X256(a, b) _mm256_xor_si256(a, b)
#define R256_16(x)                                                                           \
  _mm256_shuffle_epi8(x, _mm256_set_epi8(13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, 3, \
                                         2, 13, 12, 15, 14, 9, 8, 11, 10, 5, 4, 7, 6, 1, 0, \
                                         3, 2))
#define R256_8(x)                                                                            \
  _mm256_shuffle_epi8(x, _mm256_set_epi8(12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, 2, \
                                         1, 12, 15, 14, 13, 8, 11, 10, 9, 4, 7, 6, 5, 0, 3, \
                                         2, 1))
#define R256_12(x) _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20))
#define R256_7(x) _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25))

T256 static inline void transpose8(__m256i v[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_epi32(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(v[2 * i], v[2 * i + 1]);
  }
  for (int k = 0; k < 2; k++) {
    u[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k + 0], t[4 * k + 2]);
    u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k + 0], t[4 * k + 2]);
    u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int c = 0; c < 4; c++) {
    v[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    v[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}

T256 static void kernel8(const job_t *jobs, size_t n, prefetch_t *pf) {
  uint32_t nb[8], ctr[8], ll[8], ff[8], fl[8];
  const uint8_t *in[8], *last[8];
  size_t steps = 0;
  for (size_t i = 0; i < 8; i++) {
    if (i < n) {
      const job_t *j = &jobs[i];
      nb[i] = j->nblocks, ctr[i] = j->counter, ll[i] = j->last_len;
      ff[i] = j->flags_first, fl[i] = j->flags_last, in[i] = j->in, last[i] = j->last;
      if (j->nblocks > steps) steps = j->nblocks;
    } else {
      nb[i] = ctr[i] = ll[i] = ff[i] = fl[i] = 0, in[i] = last[i] = ZERO_BLOCK;
    }
  }
  const __m256i nbv = _mm256_loadu_si256((const __m256i *)nb);
  const __m256i ctrv = _mm256_loadu_si256((const __m256i *)ctr);
  const __m256i llv = _mm256_loadu_si256((const __m256i *)ll);
  const __m256i ffv = _mm256_loadu_si256((const __m256i *)ff);
  const __m256i flv = _mm256_loadu_si256((const __m256i *)fl);
  __m256i h[8];
  for (int k = 0; k < 8; k++) h[k] = _mm256_set1_epi32((int)IV[k]);

  for (size_t s = 0; s < steps; s++) {
    __m256i m[16];
    for (size_t i = 0; i < 8; i++) {
      const uint8_t *p = s + 1 < nb[i] ? in[i] + BLOCK_LEN * s : s + 1 == nb[i] ? last[i]
                                                                                : ZERO_BLOCK;
      m[i] = _mm256_loadu_si256((const __m256i *)p);
      m[8 + i] = _mm256_loadu_si256((const __m256i *)(p + 32));
      _mm_prefetch((const char *)p + 256, _MM_HINT_T0);
    }
    transpose8(m);
    transpose8(m + 8);
    /* nb <= 16, so signed compares are exact */
    const __m256i sv = _mm256_set1_epi32((int)s);
    const __m256i active = _mm256_cmpgt_epi32(nbv, sv);
    const __m256i is_last = _mm256_cmpeq_epi32(_mm256_set1_epi32((int)s + 1), nbv);
    __m256i flags = _mm256_and_si256(is_last, flv);
    if (s == 0) flags = _mm256_or_si256(flags, ffv);
    __m256i v[16] = {
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
        _mm256_set1_epi32((int)IV[0]), _mm256_set1_epi32((int)IV[1]),
        _mm256_set1_epi32((int)IV[2]), _mm256_set1_epi32((int)IV[3]),
        ctrv, _mm256_setzero_si256(),
        _mm256_blendv_epi8(_mm256_set1_epi32(BLOCK_LEN), llv, is_last), flags,
    };
    ROUNDS7(v, m, prefetch_some(pf, PREFETCH_LINES / 14 + 1), A256, X256, R256_16, R256_12, R256_8, R256_7);
    for (int k = 0; k < 8; k++)
      h[k] = _mm256_blendv_epi8(h[k], _mm256_xor_si256(v[k], v[k + 8]), active);
  }
  transpose8(h);
  for (size_t i = 0; i < n; i++) _mm256_storeu_si256((__m256i *)jobs[i].out, h[i]);
}

static void kernel_avx512(const job_t *jobs, size_t n, prefetch_t *pf) {
  for (; n >= 16; jobs += 16, n -= 16) kernel16(jobs, 16, pf);
  if (n > 8) kernel16(jobs, n, pf);
  else if (n > 0) kernel8(jobs, n, pf); /* AVX-512 implies AVX2 */
}

static void kernel_avx2(const job_t *jobs, size_t n, prefetch_t *pf) {
  for (; n >= 8; jobs += 8, n -= 8) kernel8(jobs, 8, pf);
  if (n > 0) kernel8(jobs, n, pf);
}
#endif /* x86-64 */

typedef void (*kernel_fn)(const job_t *, size_t, prefetch_t *);

typedef struct {
  const char *name;
  kernel_fn fn;
  size_t degree; /* needs blake3_simd_degree() >= degree */
} kernel_t;

static const kernel_t KERNELS[] = {
#if defined(HAVE_X86_KERNELS) && !defined(BLAKE3_NO_AVX512)
    {"avx512", kernel_avx512, 16},
#endif
#if defined(HAVE_X86_KERNELS) && !defined(BLAKE3_NO_AVX2)
    {"avx2", kernel_avx2, 8},
#endif
    {"portable", kernel_portable, 0},
};
#define N_KERNELS (sizeof KERNELS / sizeof KERNELS[0])

static kernel_fn g_kernel = NULL; /* chosen at import; _set_kernel() for the tests */
static const char *g_kernel_name = "portable";

/* ---------------------------------------------------------------- batching */

static void sort_by_blocks(const job_t *src, job_t *dst, size_t n) {
  size_t count[MAX_CHUNKS + 2] = {0};
  for (size_t i = 0; i < n; i++) count[src[i].nblocks]++;
  /* descending block count: each kernel call's lanes run the same number of steps */
  size_t pos = 0;
  for (size_t b = MAX_CHUNKS + 1; b-- > 0;) {
    size_t c = count[b];
    count[b] = pos;
    pos += c;
  }
  for (size_t i = 0; i < n; i++) dst[count[src[i].nblocks]++] = src[i];
}

static void hash_large(const uint8_t *p, size_t len, uint8_t out[8]) {
  blake3_hasher h;
  blake3_hasher_init(&h);
  blake3_hasher_update(&h, p, len);
  blake3_hasher_finalize(&h, out, 8);
}

/* Hash records 0..n-1 (ranges already validated) until one batch is full; returns how many
 * were done (at least one), their digest prefixes in dig. */
static size_t hash_window(scratch_t *S, const uint8_t *buf, size_t buf_len, const int64_t *off,
                          const int64_t *len, size_t n, uint8_t (*dig)[8]) {
  const uint8_t *buf_end = buf + buf_len;
  kernel_fn kernel = g_kernel;
  size_t nrec = 0, njobs = 0, done = 0;
  for (; done < n && done < BATCH_RECORDS; done++) {
    const uint8_t *p = buf + off[done];
    size_t L = (size_t)len[done];
    size_t nc = L == 0 ? 1 : (L + CHUNK_LEN - 1) / CHUNK_LEN;
    if (nc > MAX_CHUNKS) {
      hash_large(p, L, dig[done]);
      continue;
    }
    if (njobs + nc > BATCH_CHUNKS) break; /* the batch's bytes stay within L2 */
    S->rec_base[nrec] = (uint32_t)njobs;
    S->rec_nodes[nrec] = (uint32_t)nc;
    S->rec_index[nrec] = done;
    for (size_t c = 0; c + 1 < nc; c++) {
      job_t *j = &S->jobs[njobs];
      j->in = p + CHUNK_LEN * c;
      j->last = j->in + CHUNK_LEN - BLOCK_LEN;
      j->out = S->cvs[njobs];
      j->counter = (uint32_t)c;
      j->nblocks = CHUNK_LEN / BLOCK_LEN;
      j->last_len = BLOCK_LEN;
      j->flags_first = CHUNK_START;
      j->flags_last = CHUNK_END;
      njobs++;
    }
    size_t fl = L - CHUNK_LEN * (nc - 1); /* 0 only for the empty record */
    size_t nb = fl == 0 ? 1 : (fl + BLOCK_LEN - 1) / BLOCK_LEN;
    size_t ll = fl - BLOCK_LEN * (nb - 1);
    job_t *j = &S->jobs[njobs];
    j->in = p + CHUNK_LEN * (nc - 1);
    if (ll == BLOCK_LEN) {
      j->last = j->in + BLOCK_LEN * (nb - 1);
    } else {
      uint8_t *blk = S->lastblk[nrec];
      const uint8_t *src = j->in + BLOCK_LEN * (nb - 1);
      if (buf_end - src >= BLOCK_LEN) { /* fixed-size copy, then zero the tail: no rep movs */
        uint64_t w[8], mask[8];
        memcpy(w, src, BLOCK_LEN);
        memcpy(mask, TAIL_MASK + BLOCK_LEN - ll, BLOCK_LEN);
        for (int k = 0; k < 8; k++) w[k] &= mask[k];
        memcpy(blk, w, BLOCK_LEN);
      } else {
        memcpy(blk, src, ll);
        memset(blk + ll, 0, BLOCK_LEN - ll);
      }
      j->last = blk;
    }
    j->out = S->cvs[njobs];
    j->counter = (uint32_t)(nc - 1);
    j->nblocks = (uint8_t)nb;
    j->last_len = (uint8_t)ll;
    j->flags_first = CHUNK_START;
    j->flags_last = (uint8_t)(CHUNK_END | (nc == 1 ? ROOT : 0));
    njobs++;
    nrec++;
  }
  if (nrec) {
    prefetch_t pf = {buf, off + done, len + done, n - done, 0, 0, 0};
    sort_by_blocks(S->jobs, S->sorted, njobs);
    kernel(S->sorted, njobs, &pf);
    /* Parent levels: pair neighbours, an odd last node moves up unchanged; this builds
     * BLAKE3's left-full tree. Outputs go in place (node j from nodes 2j, 2j+1). */
    for (;;) {
      njobs = 0;
      for (size_t r = 0; r < nrec; r++) {
        uint32_t k = S->rec_nodes[r], base = S->rec_base[r];
        for (uint32_t i = 0; i + 1 < k; i += 2) {
          job_t *j = &S->jobs[njobs++];
          j->in = NULL;
          j->last = S->cvs[base + i];
          j->out = S->cvs[base + i / 2];
          j->counter = 0;
          j->nblocks = 1;
          j->last_len = BLOCK_LEN;
          j->flags_first = PARENT;
          j->flags_last = (uint8_t)(PARENT | (k == 2 ? ROOT : 0));
        }
      }
      if (!njobs) break;
      kernel(S->jobs, njobs, &pf);
      for (size_t r = 0; r < nrec; r++) {
        uint32_t k = S->rec_nodes[r], base = S->rec_base[r];
        if (k < 2) continue;
        if (k & 1) memcpy(S->cvs[base + k / 2], S->cvs[base + k - 1], 32);
        S->rec_nodes[r] = (k + 1) / 2;
      }
    }
    for (size_t r = 0; r < nrec; r++) memcpy(dig[S->rec_index[r]], S->cvs[S->rec_base[r]], 8);
  }
  return done;
}

/* ---------------------------------------------------------------- argument handling */

typedef struct {
  Py_buffer view;
  int has_view;
  int64_t *owned;
  const int64_t *data;
  Py_ssize_t n;
} i64arr;

static void i64arr_release(i64arr *a) {
  if (a->has_view) PyBuffer_Release(&a->view);
  a->has_view = 0;
  PyMem_Free(a->owned);
  a->owned = NULL;
}

/* An int64 buffer (array('q'), numpy int64) is copied in one memcpy; anything else is read as
 * a sequence of ints. Copied, not used in place: the ranges are checked with the GIL held and
 * then read with it released, when another thread could rewrite the array's items (an exported
 * array cannot be resized, but its items can be assigned) and send a checked range out of the
 * buffer. */
static int i64arr_get(PyObject *obj, i64arr *a, const char *name) {
  memset(a, 0, sizeof *a);
  if (PyObject_CheckBuffer(obj)) {
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
      const char *f = a->view.format ? a->view.format : "B";
      if (f[0] == '@' || f[0] == '=' || f[0] == '<') f++;
      if (a->view.itemsize == 8 && (f[0] == 'q' || f[0] == 'l' || f[0] == 'n') && f[1] == 0) {
        Py_ssize_t n = a->view.len / 8;
        a->owned = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
        if (!a->owned) {
          PyBuffer_Release(&a->view);
          PyErr_NoMemory();
          return -1;
        }
        memcpy(a->owned, a->view.buf, sizeof(int64_t) * (size_t)n);
        PyBuffer_Release(&a->view);
        a->data = a->owned;
        a->n = n;
        return 0;
      }
      PyBuffer_Release(&a->view);
    } else {
      PyErr_Clear();
    }
  }
  PyObject *seq = PySequence_Fast(obj, "");
  if (!seq) {
    PyErr_Format(PyExc_TypeError, "%s must be an int64 array or a sequence of ints", name);
    return -1;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  a->owned = PyMem_Malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!a->owned) {
    Py_DECREF(seq);
    PyErr_NoMemory();
    return -1;
  }
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(items[i]);
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      i64arr_release(a);
      return -1;
    }
    a->owned[i] = (int64_t)v;
  }
  Py_DECREF(seq);
  a->data = a->owned;
  a->n = n;
  return 0;
}

typedef struct {
  Py_buffer buf;
  i64arr off, len;
  int has_buf;
} records_t;

static void records_release(records_t *R) {
  if (R->has_buf) PyBuffer_Release(&R->buf);
  R->has_buf = 0;
  i64arr_release(&R->off);
  i64arr_release(&R->len);
}

static int records_get(PyObject *buf, PyObject *offs, PyObject *lens, records_t *R) {
  memset(R, 0, sizeof *R);
  if (PyObject_GetBuffer(buf, &R->buf, PyBUF_SIMPLE) < 0) return -1;
  R->has_buf = 1;
  if (i64arr_get(offs, &R->off, "offsets") < 0 || i64arr_get(lens, &R->len, "lengths") < 0)
    goto fail;
  if (R->off.n != R->len.n) {
    PyErr_Format(PyExc_ValueError, "offsets has %zd items but lengths has %zd", R->off.n,
                 R->len.n);
    goto fail;
  }
  int64_t size = (int64_t)R->buf.len;
  for (Py_ssize_t i = 0; i < R->off.n; i++) {
    int64_t o = R->off.data[i], l = R->len.data[i];
    if (l < 0) {
      PyErr_Format(PyExc_ValueError, "record %zd: negative length %lld", i, (long long)l);
      goto fail;
    }
    if (o < 0 || o > size || l > size - o) {
      PyErr_Format(PyExc_ValueError,
                   "record %zd: range [%lld, %lld + %lld) lies outside the buffer of %lld bytes",
                   i, (long long)o, (long long)o, (long long)l, (long long)size);
      goto fail;
    }
  }
  return 0;
fail:
  records_release(R);
  return -1;
}

static scratch_t *scratch_new(void) {
  scratch_t *S = PyMem_RawMalloc(sizeof(scratch_t));
  if (!S) PyErr_NoMemory();
  return S;
}

/* ---------------------------------------------------------------- module functions */

static const char HEX[] = "0123456789abcdef";
static uint16_t HEX2[256]; /* byte -> its two hex digits, as stored in memory */

static PyObject *digest_many(PyObject *self, PyObject *args) {
  PyObject *buf, *offs, *lens;
  if (!PyArg_ParseTuple(args, "OOO:digest_many", &buf, &offs, &lens)) return NULL;
  records_t R;
  if (records_get(buf, offs, lens, &R) < 0) return NULL;
  size_t n = (size_t)R.off.n;
  uint8_t(*dig)[8] = PyMem_RawMalloc(8 * (n ? n : 1));
  scratch_t *S = n ? scratch_new() : NULL;
  PyObject *result = NULL;
  if (!dig || (n && !S)) {
    PyErr_NoMemory();
    goto done;
  }
  Py_BEGIN_ALLOW_THREADS
  for (size_t i = 0; i < n;)
    i += hash_window(S, R.buf.buf, (size_t)R.buf.len, R.off.data + i, R.len.data + i, n - i, dig + i);
  Py_END_ALLOW_THREADS
  result = PyList_New((Py_ssize_t)n);
  if (!result) goto done;
  for (size_t i = 0; i < n; i++) {
    PyObject *s = PyUnicode_New(16, 127);
    if (!s) {
      Py_CLEAR(result);
      goto done;
    }
    Py_UCS1 *d = PyUnicode_1BYTE_DATA(s);
    for (int k = 0; k < 8; k++) memcpy(d + 2 * k, &HEX2[dig[i][k]], 2);
    PyList_SET_ITEM(result, (Py_ssize_t)i, s);
  }
done:
  PyMem_RawFree(S);
  PyMem_RawFree(dig);
  records_release(&R);
  return result;
}

static int8_t UNHEX[256]; /* lowercase hex digit -> value, anything else -1 */

/* 16 lowercase hex digits, exactly as digest_many writes them; anything else is -1. A
 * non-ASCII str cannot be hex digits. */
static int parse_expected(PyObject *o, uint8_t out[8]) {
  if (!PyUnicode_Check(o) || !PyUnicode_IS_COMPACT_ASCII(o) || PyUnicode_GET_LENGTH(o) != 16)
    return -1;
  const uint8_t *d = PyUnicode_1BYTE_DATA(o);
  int bad = 0;
  for (int k = 0; k < 8; k++) {
    int hi = UNHEX[d[2 * k]], lo = UNHEX[d[2 * k + 1]];
    bad |= hi | lo;
    out[k] = (uint8_t)((unsigned)hi << 4 | (unsigned)lo); /* hi may be -1: no signed shift (UB) */
  }
  return bad < 0 ? -1 : 0;
}

static PyObject *verify_many(PyObject *self, PyObject *args) {
  PyObject *buf, *offs, *lens, *expected;
  if (!PyArg_ParseTuple(args, "OOOO:verify_many", &buf, &offs, &lens, &expected)) return NULL;
  records_t R;
  if (records_get(buf, offs, lens, &R) < 0) return NULL;
  PyObject *seq = PySequence_Fast(expected, "expected must be a sequence of str");
  if (!seq) {
    records_release(&R);
    return NULL;
  }
  size_t n = (size_t)R.off.n;
  if ((size_t)PySequence_Fast_GET_SIZE(seq) != n) {
    PyErr_Format(PyExc_ValueError, "expected has %zd items for %zu records",
                 PySequence_Fast_GET_SIZE(seq), n);
    Py_DECREF(seq);
    records_release(&R);
    return NULL;
  }
  uint8_t(*want)[8] = PyMem_RawMalloc(8 * (n ? n : 1));
  scratch_t *S = n ? scratch_new() : NULL;
  if (!want || (n && !S)) {
    PyMem_RawFree(want);
    PyMem_RawFree(S);
    Py_DECREF(seq);
    records_release(&R);
    return PyErr_NoMemory();
  }
  /* a malformed expected value is a mismatch at its index: hash only the records before */
  size_t limit = n;
  PyObject **items = PySequence_Fast_ITEMS(seq);
  for (size_t i = 0; i < n; i++) {
    if (parse_expected(items[i], want[i]) < 0) {
      limit = i;
      break;
    }
  }
  Py_DECREF(seq);
  Py_ssize_t bad = -1;
  Py_BEGIN_ALLOW_THREADS
  uint8_t dig[BATCH_RECORDS][8];
  for (size_t i = 0; i < limit && bad < 0;) {
    size_t k = hash_window(S, R.buf.buf, (size_t)R.buf.len, R.off.data + i, R.len.data + i, limit - i, dig);
    for (size_t r = 0; r < k; r++) {
      if (memcmp(dig[r], want[i + r], 8) != 0) {
        bad = (Py_ssize_t)(i + r);
        break;
      }
    }
    i += k;
  }
  Py_END_ALLOW_THREADS
  if (bad < 0 && limit < n) bad = (Py_ssize_t)limit;
  PyMem_RawFree(S);
  PyMem_RawFree(want);
  records_release(&R);
  return PyLong_FromSsize_t(bad);
}

static PyObject *g_array_type = NULL; /* array.array, imported once */

static PyObject *make_array(const int64_t *data, size_t n) {
  PyObject *b = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)(n * 8));
  if (!b) return NULL;
  PyObject *a = PyObject_CallFunction(g_array_type, "sO", "q", b);
  Py_DECREF(b);
  return a;
}

static PyObject *split_lines(PyObject *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"buf", "start", "end", NULL};
  PyObject *buf;
  Py_ssize_t start = 0, end = -1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|nn:split_lines", kwlist, &buf, &start, &end))
    return NULL;
  Py_buffer view;
  if (PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE) < 0) return NULL;
  if (end == -1) end = view.len;
  if (start < 0 || end < start || end > view.len) {
    PyErr_Format(PyExc_ValueError, "start=%zd, end=%zd do not lie within a buffer of %zd bytes",
                 start, end, view.len);
    PyBuffer_Release(&view);
    return NULL;
  }
  size_t cap = 1024, n = 0;
  int64_t *offs = PyMem_RawMalloc(cap * 8), *lens = PyMem_RawMalloc(cap * 8);
  int oom = !offs || !lens;
  if (!oom) {
    Py_BEGIN_ALLOW_THREADS
    const char *base = view.buf, *p = base + start, *e = base + end;
    const char *nl;
    while (p < e && (nl = memchr(p, '\n', (size_t)(e - p))) != NULL) {
      if (n == cap) {
        cap *= 2;
        int64_t *o2 = PyMem_RawRealloc(offs, cap * 8);
        if (o2) offs = o2;
        int64_t *l2 = o2 ? PyMem_RawRealloc(lens, cap * 8) : NULL;
        if (l2) lens = l2;
        if (!o2 || !l2) {
          oom = 1;
          break;
        }
      }
      offs[n] = (int64_t)(p - base);
      lens[n] = (int64_t)(nl - p);
      n++;
      p = nl + 1;
    }
    Py_END_ALLOW_THREADS
  }
  PyBuffer_Release(&view);
  PyObject *result = NULL;
  if (oom) {
    PyErr_NoMemory();
  } else {
    PyObject *a = make_array(offs, n), *b = a ? make_array(lens, n) : NULL;
    if (b) result = PyTuple_Pack(2, a, b);
    Py_XDECREF(a);
    Py_XDECREF(b);
  }
  PyMem_RawFree(offs);
  PyMem_RawFree(lens);
  return result;
}

static PyObject *kernels(PyObject *self, PyObject *unused) {
  size_t degree = blake3_simd_degree();
  PyObject *l = PyList_New(0);
  for (size_t i = 0; l && i < N_KERNELS; i++) {
    if (degree < KERNELS[i].degree) continue;
    PyObject *s = PyUnicode_FromString(KERNELS[i].name);
    if (!s || PyList_Append(l, s) < 0) Py_CLEAR(l);
    Py_XDECREF(s);
  }
  return l;
}

static void choose_kernel(const char *name) {
  size_t degree = blake3_simd_degree();
  for (size_t i = 0; i < N_KERNELS; i++) {
    if (degree >= KERNELS[i].degree && (!name || strcmp(name, KERNELS[i].name) == 0)) {
      g_kernel = KERNELS[i].fn;
      g_kernel_name = KERNELS[i].name;
      return;
    }
  }
}

static PyObject *set_kernel(PyObject *self, PyObject *arg) {
  const char *name = PyUnicode_AsUTF8(arg);
  if (!name) return NULL;
  const char *before = g_kernel_name;
  choose_kernel(name);
  if (strcmp(g_kernel_name, name) != 0) {
    choose_kernel(before);
    return PyErr_Format(PyExc_ValueError, "kernel %s is not available here", name);
  }
  return PyUnicode_FromString(before);
}

/* Every record is one JSON object on its line: at least "{}", first byte '{', last byte '}'.
 * Then a JSON-lines decoder that reads values across whitespace (msgspec's decode_lines) yields
 * exactly one value per line: no value can span a line break (a '}' ending a line cannot be
 * followed inside a value by a '{' opening the next), and a second value on a line makes the
 * count differ. */
static PyObject *framed(PyObject *self, PyObject *args) {
  PyObject *buf, *offs, *lens;
  (void)self;
  if (!PyArg_ParseTuple(args, "OOO:framed", &buf, &offs, &lens)) return NULL;
  records_t R;
  if (records_get(buf, offs, lens, &R) < 0) return NULL;
  const uint8_t *b = R.buf.buf;
  int ok = 1;
  for (Py_ssize_t i = 0; i < R.off.n; i++) {
    int64_t o = R.off.data[i], l = R.len.data[i];
    if (l < 2 || b[o] != '{' || b[o + l - 1] != '}') {
      ok = 0;
      break;
    }
  }
  records_release(&R);
  return PyBool_FromLong(ok);
}

/* fill(fd, dst, src, src_from, src_to, base) -> (filled, end, loci, framed)
 *
 * One block of a resume, done with the GIL released (so it runs beside the decoder): move the
 * carry src[src_from:src_to] (the previous block's unfinished line; src may be dst) to the front
 * of dst, read fd until dst is full or the file ends, split the complete lines, digest them.
 * loci: [(base + offset, length, digest)] of each complete line; end: the offset after the last
 * one's newline (0 if none); framed: as framed() over those lines. */
static PyObject *fill(PyObject *self, PyObject *args) {
  int fd;
  PyObject *dsto, *srco, *result = NULL;
  Py_ssize_t from, to;
  long long base;
  (void)self;
  if (!PyArg_ParseTuple(args, "iOOnnL:fill", &fd, &dsto, &srco, &from, &to, &base)) return NULL;
  Py_buffer dst, src;
  int has_src = 0;
  if (PyObject_GetBuffer(dsto, &dst, PyBUF_WRITABLE) < 0) return NULL;
  if (srco != Py_None) {
    if (PyObject_GetBuffer(srco, &src, PyBUF_SIMPLE) < 0) {
      PyBuffer_Release(&dst);
      return NULL;
    }
    has_src = 1;
  }
  /* to - from only once 0 <= from <= to: before, it may overflow (UB) */
  if (has_src && (from < 0 || to < from || to > src.len || to - from > dst.len)) {
    PyErr_Format(PyExc_ValueError, "the carry [%zd, %zd) does not fit", from, to);
    goto out;
  }
  Py_ssize_t carry = has_src ? to - from : 0;
  /* each locus is base + an offset in dst: that sum must not overflow (UB) */
  if (base > LLONG_MAX - (long long)dst.len) {
    PyErr_Format(PyExc_OverflowError, "base %lld + %zd bytes overflows a 64-bit offset", base,
                 dst.len);
    goto out;
  }
  size_t cap = 4096, n = 0;
  int64_t *offs = PyMem_RawMalloc(cap * 8), *lens = PyMem_RawMalloc(cap * 8);
  uint8_t(*dig)[8] = NULL;
  scratch_t *S = scratch_new();
  int oom = !offs || !lens || !S, err = 0, is_framed = 1;
  Py_ssize_t filled = carry, end = 0;
  if (!oom) {
    Py_BEGIN_ALLOW_THREADS
    uint8_t *d = dst.buf;
    if (carry) memmove(d, (const uint8_t *)src.buf + from, (size_t)carry);
    while (filled < dst.len) {
      ssize_t r = read(fd, d + filled, (size_t)(dst.len - filled));
      if (r < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (r == 0) break;
      filled += r;
    }
    const uint8_t *p = d, *e = d + filled, *nl;
    while (!err && p < e && (nl = memchr(p, '\n', (size_t)(e - p))) != NULL) {
      if (n == cap) {
        cap *= 2;
        int64_t *o2 = PyMem_RawRealloc(offs, cap * 8);
        if (o2) offs = o2;
        int64_t *l2 = o2 ? PyMem_RawRealloc(lens, cap * 8) : NULL;
        if (l2) lens = l2;
        if (!o2 || !l2) {
          oom = 1;
          break;
        }
      }
      int64_t L = (int64_t)(nl - p);
      if (L < 2 || p[0] != '{' || p[L - 1] != '}') is_framed = 0;
      offs[n] = (int64_t)(p - d);
      lens[n] = L;
      n++;
      p = nl + 1;
    }
    end = (Py_ssize_t)(p - d);
    if (!oom && !err && n) {
      dig = PyMem_RawMalloc(8 * n);
      if (!dig) oom = 1;
      else
        for (size_t i = 0; i < n;)
          i += hash_window(S, d, (size_t)filled, offs + i, lens + i, n - i, dig + i);
    }
    Py_END_ALLOW_THREADS
  }
  if (err) {
    errno = err;
    PyErr_SetFromErrno(PyExc_OSError);
  } else if (oom) {
    PyErr_NoMemory();
  } else {
    PyObject *loci = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; loci && i < n; i++) {
      PyObject *h = PyUnicode_New(16, 127);
      PyObject *t = NULL;
      if (h) {
        Py_UCS1 *hd = PyUnicode_1BYTE_DATA(h);
        for (int k = 0; k < 8; k++) memcpy(hd + 2 * k, &HEX2[dig[i][k]], 2);
        t = Py_BuildValue("(LLN)", base + (long long)offs[i], (long long)lens[i], h);
      }
      if (!t) {
        Py_CLEAR(loci);
        break;
      }
      PyList_SET_ITEM(loci, (Py_ssize_t)i, t);
    }
    if (loci) result = Py_BuildValue("(nnNO)", filled, n ? end : (Py_ssize_t)0, loci,
                                     is_framed && n ? Py_True : Py_False);
  }
  PyMem_RawFree(offs);
  PyMem_RawFree(lens);
  PyMem_RawFree(dig);
  PyMem_RawFree(S);
out:
  if (has_src) PyBuffer_Release(&src);
  PyBuffer_Release(&dst);
  return result;
}

/* ---- Chain: the log writer's running BLAKE3 state (session.log.Running) ----
 *
 * Why: a chained append hashed each line twice from Python — the running state over the line
 * and its key (session.chain), then the line alone for its Locus digest — with a handful of
 * calls and copies around each hash. Here one call builds the sealed line, advances the state
 * over it and digests the line: the chain's cost per record is the hashing, not the calls.
 * The state is upstream's blake3_hasher; its finalize leaves it unchanged, so the 8-byte key
 * and the head are read off it mid-stream exactly as the Python blake3 package's digest does. */

typedef struct {
  PyObject_HEAD
  blake3_hasher h;
  int busy; /* an update running with the GIL released: a second caller is refused */
} Chain;

#define NOGIL_FROM (64 * 1024) /* updates this long release the GIL */

static int chain_enter(Chain *self) {
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "Chain is in use by another thread");
    return -1;
  }
  return 0;
}

static void hash_into(blake3_hasher *h, const uint8_t *p, size_t n, Chain *self) {
  if (n >= NOGIL_FROM) {
    self->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    blake3_hasher_update(h, p, n);
    Py_END_ALLOW_THREADS
    self->busy = 0;
  } else {
    blake3_hasher_update(h, p, n);
  }
}

static PyObject *Chain_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  if (PyTuple_GET_SIZE(args) || (kw && PyDict_GET_SIZE(kw))) {
    PyErr_SetString(PyExc_TypeError, "Chain() takes no arguments");
    return NULL;
  }
  Chain *self = (Chain *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  blake3_hasher_init(&self->h);
  self->busy = 0;
  return (PyObject *)self;
}

static void Chain_dealloc(Chain *self) { Py_TYPE(self)->tp_free((PyObject *)self); }

static PyObject *Chain_update(Chain *self, PyObject *arg) {
  if (chain_enter(self) < 0) return NULL;
  Py_buffer b;
  if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0) return NULL;
  hash_into(&self->h, (const uint8_t *)b.buf, (size_t)b.len, self);
  PyBuffer_Release(&b);
  Py_RETURN_NONE;
}

static PyObject *Chain_digest(Chain *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"length", NULL};
  Py_ssize_t length = 32;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|n:digest", kwlist, &length)) return NULL;
  if (length < 1 || length > 1024) {
    PyErr_SetString(PyExc_ValueError, "length must lie in [1, 1024]");
    return NULL;
  }
  if (chain_enter(self) < 0) return NULL;
  PyObject *out = PyBytes_FromStringAndSize(NULL, length);
  if (!out) return NULL;
  blake3_hasher_finalize(&self->h, (uint8_t *)PyBytes_AS_STRING(out), (size_t)length);
  return out;
}

static PyObject *Chain_copy(Chain *self, PyObject *unused) {
  if (chain_enter(self) < 0) return NULL;
  Chain *c = (Chain *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
  if (!c) return NULL;
  memcpy(&c->h, &self->h, sizeof(blake3_hasher));
  c->busy = 0;
  return (PyObject *)c;
}

/* The hashing of seal: d[0, pre) is the line up to its key's digits; the 16 digits and the
 * closing '"]}\n' are written here (d has total = pre + 20 bytes). */
static void seal_core(blake3_hasher *h, uint8_t *d, size_t pre, size_t total, uint8_t own[8]) {
  uint8_t link[8];
  blake3_hasher_update(h, d, pre);
  blake3_hasher_finalize(h, link, 8);
  for (int k = 0; k < 8; k++) memcpy(d + pre + 2 * k, &HEX2[link[k]], 2);
  memcpy(d + pre + 16, "\"]}\n", 4);
  blake3_hasher_update(h, d + pre, 20);
  blake3_hasher line;
  blake3_hasher_init(&line);
  blake3_hasher_update(&line, d, total - 1);
  blake3_hasher_finalize(&line, own, 8);
}

static const char FIRST_KEY[] = ",\"chain\":1,\"c\":[1,\"";

/* The sealed line's bytes before hashing: the line without its closing brace, then its key
 * ',"c":[n,"' (the first line also ',"chain":1'); room is left for the 16 digits and '"]}\n'.
 * A new bytes object of pre + 20 bytes, *pre set; NULL with an error set (a line that is not
 * a record, "{...}", or n < 1: `who` names the call). */
static PyObject *sealed_bytes(const Py_buffer *b, long long n, const char *who, Py_ssize_t *pre) {
  if (b->len < 2 || ((const char *)b->buf)[b->len - 1] != '}' || n < 1) {
    PyErr_Format(PyExc_ValueError, "%s wants a record '{...}' and a number n >= 1", who);
    return NULL;
  }
  char key[48];
  int klen;
  if (n == 1) {
    memcpy(key, FIRST_KEY, sizeof(FIRST_KEY) - 1);
    klen = (int)(sizeof(FIRST_KEY) - 1);
  } else {
    klen = snprintf(key, sizeof(key), ",\"c\":[%lld,\"", n);
  }
  Py_ssize_t body = b->len - 1;
  *pre = body + klen;
  PyObject *data = PyBytes_FromStringAndSize(NULL, *pre + 16 + 4);
  if (!data) return NULL;
  uint8_t *d = (uint8_t *)PyBytes_AS_STRING(data);
  memcpy(d, b->buf, (size_t)body);
  memcpy(d + body, key, (size_t)klen);
  return data;
}

/* (data, the 16-hex digest of `own`): what seal and append return. */
static PyObject *sealed_result(PyObject *data, const uint8_t own[8]) {
  char hx[16];
  for (int k = 0; k < 8; k++) memcpy(hx + 2 * k, &HEX2[own[k]], 2);
  PyObject *dig = PyUnicode_FromStringAndSize(hx, 16);
  if (!dig) return NULL;
  PyObject *result = PyTuple_Pack(2, data, dig);
  Py_DECREF(dig);
  return result;
}

/* seal(line, n) -> (data, digest): line (an encoded record, "{...}") with its chain key
 * ',"c":[n,"<16 hex>"]' (the first line also ',"chain":1') spliced before its closing brace
 * and a newline after; the state advanced over exactly those bytes; digest = the 16-hex
 * BLAKE3 prefix of data without its newline (the record's Locus digest). */
static PyObject *Chain_seal(Chain *self, PyObject *args) {
  Py_buffer b;
  long long n;
  if (!PyArg_ParseTuple(args, "y*L:seal", &b, &n)) return NULL;
  PyObject *result = NULL, *data = NULL;
  Py_ssize_t pre;
  uint8_t own[8];
  if (chain_enter(self) < 0 || !(data = sealed_bytes(&b, n, "seal", &pre))) goto out;
  size_t total = (size_t)PyBytes_GET_SIZE(data);
  self->busy = 1;
  if (total >= NOGIL_FROM) {
    Py_BEGIN_ALLOW_THREADS
    seal_core(&self->h, (uint8_t *)PyBytes_AS_STRING(data), (size_t)pre, total, own);
    Py_END_ALLOW_THREADS
  } else {
    seal_core(&self->h, (uint8_t *)PyBytes_AS_STRING(data), (size_t)pre, total, own);
  }
  self->busy = 0;
  result = sealed_result(data, own);
out:
  Py_XDECREF(data);
  PyBuffer_Release(&b);
  return result;
}

/* append(fd, line, n, size, tail) -> (data, digest) | None: the log writer's whole append
 * (session.log.RecordLog.append_line) in one call, so that a record costs its system calls
 * and its hashing rather than the Python around them (decision 0473). First the writer's
 * check: the file behind fd is still `size` bytes long, still linked, and its last len(tail)
 * bytes are `tail` (what this writer wrote last) — else None, with nothing hashed or written,
 * and the caller names what changed. Then seal (as seal(line, n)) and write the sealed bytes
 * whole, retrying short writes. A failed write raises OSError with the state already advanced
 * over the line: the caller cuts the file back and rehashes, as after a failed os.write. */
#define TAIL_MAX 4096 /* session.log.TAIL: the most of its last record a writer keeps */
static PyObject *Chain_append(Chain *self, PyObject *args) {
  int fd;
  Py_buffer b, t;
  long long n, size;
  if (!PyArg_ParseTuple(args, "iy*LLy*:append", &fd, &b, &n, &size, &t)) return NULL;
  PyObject *result = NULL, *data = NULL;
  if (size < 0 || t.len > TAIL_MAX || t.len > size) {
    PyErr_SetString(PyExc_ValueError, "append wants the file's size and at most its last "
                                      "4096 bytes as the tail");
    goto out;
  }
  Py_ssize_t pre;
  if (chain_enter(self) < 0 || !(data = sealed_bytes(&b, n, "append", &pre))) goto out;
  uint8_t *d = (uint8_t *)PyBytes_AS_STRING(data), own[8];
  Py_ssize_t total = PyBytes_GET_SIZE(data);
  int changed = 0, err = 0;
  self->busy = 1;
  Py_BEGIN_ALLOW_THREADS
  struct stat st;
  if (fstat(fd, &st) != 0) {
    err = errno;
  } else if ((long long)st.st_size != size || st.st_nlink == 0) {
    changed = 1;
  } else if (t.len > 0) {
    uint8_t was[TAIL_MAX];
    ssize_t got = pread(fd, was, (size_t)t.len, (off_t)(size - t.len));
    if (got < 0) err = errno;
    else if (got != t.len || memcmp(was, t.buf, (size_t)t.len) != 0) changed = 1;
  }
  if (!changed && !err) {
    seal_core(&self->h, d, (size_t)pre, (size_t)total, own);
    const uint8_t *p = d;
    size_t left = (size_t)total;
    while (left) {
      ssize_t w = write(fd, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      p += w;
      left -= (size_t)w;
    }
  }
  Py_END_ALLOW_THREADS
  self->busy = 0;
  if (err) {
    errno = err;
    PyErr_SetFromErrno(PyExc_OSError);
  } else if (changed) {
    result = Py_None;
    Py_INCREF(result);
  } else {
    result = sealed_result(data, own);
  }
out:
  Py_XDECREF(data);
  PyBuffer_Release(&b);
  PyBuffer_Release(&t);
  return result;
}

static PyMethodDef Chain_methods[] = {
    {"update", (PyCFunction)Chain_update, METH_O, "update(data): hash more bytes."},
    {"digest", (PyCFunction)(void (*)(void))Chain_digest, METH_VARARGS | METH_KEYWORDS,
     "digest(length=32) -> bytes: BLAKE3 of every byte so far (the state is unchanged)."},
    {"copy", (PyCFunction)Chain_copy, METH_NOARGS, "copy() -> Chain: the same state."},
    {"append", (PyCFunction)Chain_append, METH_VARARGS,
     "append(fd, line, n, size, tail) -> (data, digest) | None: check, seal and write a record."},
    {"seal", (PyCFunction)Chain_seal, METH_VARARGS,
     "seal(line, n) -> (data, digest): the line with its chain key and newline, the state\n"
     "advanced over it, and the line's own 16-hex digest."},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ChainType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mnemon.session._b3many.Chain",
    .tp_basicsize = sizeof(Chain),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Chain(): a running BLAKE3 state that seals log lines (session.log.Running).",
    .tp_new = Chain_new,
    .tp_dealloc = (destructor)Chain_dealloc,
    .tp_methods = Chain_methods,
};

static PyMethodDef methods[] = {
    {"digest_many", digest_many, METH_VARARGS,
     "digest_many(buf, offsets, lengths) -> list[str]: 16-hex BLAKE3 prefix of each record."},
    {"verify_many", verify_many, METH_VARARGS,
     "verify_many(buf, offsets, lengths, expected) -> int: first mismatching index, or -1."},
    {"split_lines", (PyCFunction)(void (*)(void))split_lines, METH_VARARGS | METH_KEYWORDS,
     "split_lines(buf, start=0, end=-1) -> (offsets, lengths): complete lines, as array('q')."},
    {"fill", fill, METH_VARARGS,
     "fill(fd, dst, src, src_from, src_to, base) -> (filled, end, loci, framed): one block of a\n"
     "resume read, split and digested with the GIL released."},
    {"framed", framed, METH_VARARGS,
     "framed(buf, offsets, lengths) -> bool: every record is one '{...}' object on its line."},
    {"_kernels", kernels, METH_NOARGS, "Kernels usable on this CPU, fastest first."},
    {"_set_kernel", set_kernel, METH_O, "Use the named kernel (tests); returns the previous."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_b3many",
                                 "BLAKE3 digests of many short records, across SIMD lanes.",
                                 -1, methods};

PyMODINIT_FUNC PyInit__b3many(void) {
  choose_kernel(NULL);
  for (int b = 0; b < 256; b++) {
    uint8_t two[2] = {(uint8_t)HEX[b >> 4], (uint8_t)HEX[b & 15]};
    memcpy(&HEX2[b], two, 2);
    UNHEX[b] = (int8_t)(b >= '0' && b <= '9' ? b - '0' : b >= 'a' && b <= 'f' ? b - 'a' + 10 : -1);
  }
  if (!g_array_type) {
    PyObject *array = PyImport_ImportModule("array");
    if (!array) return NULL;
    g_array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    if (!g_array_type) return NULL;
  }
  if (PyType_Ready(&ChainType) < 0) return NULL;
  PyObject *m = PyModule_Create(&mod);
  if (m && PyModule_AddStringConstant(m, "KERNEL", g_kernel_name) < 0) Py_CLEAR(m);
  if (m) {
    Py_INCREF(&ChainType);
    if (PyModule_AddObject(m, "Chain", (PyObject *)&ChainType) < 0) {
      Py_DECREF(&ChainType);
      Py_CLEAR(m);
    }
  }
  return m;
}
