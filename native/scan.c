/* session._scan: count a literal's matching lines in records' searchable text, on raw JSON.
 *
 * count_literal(buf, offsets, lengths, lit) -> array('q'): for each record buf[off:off+len]
 * (one record.jsonl line), the number of lines of its searchable text (session.door._texts of
 * the decoded record) that contain `lit`, or -1 when the raw bytes might not map one-to-one onto
 * the decoded text (the caller then decodes that record in Python).
 *
 * A record is walked as JSON by a small hand-written scanner; nothing is decoded. Text fields are
 * counted on the raw runs between escapes: `lit` holds neither '"' nor '\\', so no occurrence in
 * the decoded text can include an escaped character unless the escape decodes to a character of
 * `lit` (`\/`, a printable `\uXXXX`) -- then the record is uncertain. `\n` and `\u000a` end a
 * line. A tool_use `input` is searched on its raw span, which must be exactly msgspec's compact
 * re-encoding of the decoded value (no whitespace, msgspec's own escapes, integers only, no
 * duplicate keys); anything else is uncertain. Malformed JSON, raw control characters or invalid
 * UTF-8 in strings, an unknown record or block tag, escaped or duplicate keys where keys matter,
 * a searched field missing or of the wrong type: all uncertain. Fields msgspec ignores (unknown
 * keys) are walked for well-formedness but never searched.
 *
 * Not checked (msgspec would reject the record, the count is still what the text says): the types
 * and presence of fields that hold no searchable text.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

typedef unsigned char u8;

#define MAX_DEPTH 512
#define MAX_INT_DIGITS 1000

typedef struct {
    const u8 *s;
    size_t n;
    u8 in[256];  /* in[c]: c occurs in the literal */
} Lit;

/* ------------------------------------------------------------------ byte classes */

/* Bytes a string scan must stop at: '"', '\\', controls, and non-ASCII (validated as UTF-8). */
static u8 SPECIAL[256];

static void init_tables(void) {
    for (int c = 0; c < 256; c++)
        SPECIAL[c] = (c == '"' || c == '\\' || c < 0x20 || c >= 0x80);
}

static inline int is_ws(u8 c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline const u8 *ws(const u8 *p, const u8 *end) {
    while (p < end && is_ws(*p)) p++;
    return p;
}

static inline const u8 *find_special(const u8 *p, const u8 *end) {
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\'), lo = _mm_set1_epi8(0x1f);
    while (end - p >= 32) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i y = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i mx = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, b)),
                                  _mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo));
        __m128i my = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(y, q), _mm_cmpeq_epi8(y, b)),
                                  _mm_cmpeq_epi8(_mm_max_epu8(y, lo), lo));
        /* movemask of x itself adds the bytes >= 0x80 */
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(mx, x)) |
                     ((unsigned)_mm_movemask_epi8(_mm_or_si128(my, y)) << 16);
        if (m) return p + __builtin_ctz(m);
        p += 32;
    }
    if (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i mx = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, b)),
                                  _mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo));
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_or_si128(mx, x));
        if (m) return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    while (p < end && !SPECIAL[*p]) p++;
    return p;
}

/* One valid UTF-8 sequence starting at p (*p >= 0x80): the byte after it, or NULL. */
static const u8 *utf8_seq(const u8 *p, const u8 *end) {
    u8 c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (end - p < 2 || (p[1] & 0xC0) != 0x80) return NULL;
        return p + 2;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return NULL;
        if (c == 0xE0 && p[1] < 0xA0) return NULL;  /* overlong */
        if (c == 0xED && p[1] >= 0xA0) return NULL; /* surrogate */
        return p + 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return NULL;
        if (c == 0xF0 && p[1] < 0x90) return NULL; /* overlong */
        if (c == 0xF4 && p[1] >= 0x90) return NULL; /* > U+10FFFF */
        return p + 4;
    }
    return NULL;
}

static inline int hexval(u8 c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The code unit of `\uXXXX` whose 'u' is at p[-1] (p: the first hex digit), or -1. */
static inline long hex4(const u8 *p, const u8 *end) {
    if (end - p < 4) return -1;
    int a = hexval(p[0]), b = hexval(p[1]), c = hexval(p[2]), d = hexval(p[3]);
    if ((a | b | c | d) < 0) return -1;
    return (long)((a << 12) | (b << 8) | (c << 4) | d);
}

/* ------------------------------------------------------------------ strings */

/* Skip a string (p: after the opening quote), validating it as msgspec would: the byte after the
 * closing quote, or NULL. *esc is set when the string holds an escape. */
static const u8 *str_skip(const u8 *p, const u8 *end, int *esc) {
    for (;;) {
        const u8 *q = find_special(p, end);
        if (q >= end) return NULL;
        u8 c = *q;
        if (c == '"') return q + 1;
        if (c >= 0x80) {
            p = utf8_seq(q, end);
            if (!p) return NULL;
            continue;
        }
        if (c < 0x20) return NULL;
        /* backslash */
        if (esc) *esc = 1;
        if (end - q < 2) return NULL;
        switch (q[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p = q + 2;
            break;
        case 'u': {
            long v = hex4(q + 2, end);
            if (v < 0) return NULL;
            p = q + 6;
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return NULL;
                long w = hex4(p + 2, end);
                if (w < 0xDC00 || w > 0xDFFF) return NULL;
                p += 6;
            } else if (v >= 0xDC00 && v <= 0xDFFF) {
                return NULL;
            }
            break;
        }
        default:
            return NULL;
        }
    }
}

/* The first byte at or after p that a string scan must stop at (as find_special), and whether
 * the literal occurs in the stretch before it: *found is set then (left alone otherwise). No
 * occurrence can hold a stop byte (the literal is printable ASCII without '"' or '\\'), so
 * searching the stretch [p, stop) is searching the raw run. One pass: each 16-byte block is
 * checked for stop bytes and for the literal's first and last characters at once. */
static inline const u8 *find_special_lit(const u8 *p, const u8 *end, const Lit *lit, int *found) {
    const size_t L = lit->n;
#ifdef __SSE2__
    const __m128i q = _mm_set1_epi8('"'), b = _mm_set1_epi8('\\'), lo = _mm_set1_epi8(0x1f);
    const __m128i f = _mm_set1_epi8((char)lit->s[0]), l = _mm_set1_epi8((char)lit->s[L - 1]);
    while ((size_t)(end - p) >= 16 + L - 1) {
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i y = _mm_loadu_si128((const __m128i *)(p + L - 1));
        __m128i sx = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, q), _mm_cmpeq_epi8(x, b)),
                                  _mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo));
        unsigned sm = (unsigned)_mm_movemask_epi8(_mm_or_si128(sx, x));
        unsigned cm = (unsigned)_mm_movemask_epi8(
            _mm_and_si128(_mm_cmpeq_epi8(x, f), _mm_cmpeq_epi8(y, l)));
        if (sm) cm &= (1u << __builtin_ctz(sm)) - 1;
        while (cm) {
            unsigned i = (unsigned)__builtin_ctz(cm);
            if (memcmp(p + i, lit->s, L) == 0) {  /* in bounds: p + 15 + L <= end */
                *found = 1;
                return sm ? p + __builtin_ctz(sm) : find_special(p + 16, end);
            }
            cm &= cm - 1;
        }
        if (sm) return p + __builtin_ctz(sm);
        p += 16;
    }
#endif
    const u8 *e = p;
    while (e < end && !SPECIAL[*e]) e++;
    if ((size_t)(e - p) >= L && memmem(p, (size_t)(e - p), lit->s, L)) *found = 1;
    return e;
}

/* The escape at q (q[0] == '\\') inside a counted string: the byte after it, or NULL when it is
 * malformed or may decode to a character of the literal. A line break ends the line. */
static inline const u8 *count_escape(const u8 *q, const u8 *end, const Lit *lit, int64_t *lines,
                                     int *matched) {
    if (end - q < 2) return NULL;
    switch (q[1]) {
    case 'n':
        *lines += *matched;
        *matched = 0;
        return q + 2;
    case '"': case '\\': case 'b': case 'f': case 'r': case 't':
        return q + 2;  /* decodes to a character the literal cannot hold */
    case '/':
        return lit->in['/'] ? NULL : q + 2;
    case 'u': {
        long v = hex4(q + 2, end);
        if (v < 0) return NULL;
        const u8 *p = q + 6;
        if (v == 0x0A) {
            *lines += *matched;
            *matched = 0;
        } else if (v >= 0x20 && v <= 0x7E) {
            if (lit->in[v]) return NULL;
        } else if (v >= 0xD800 && v <= 0xDBFF) {
            if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return NULL;
            long w = hex4(p + 2, end);
            if (w < 0xDC00 || w > 0xDFFF) return NULL;
            p += 6;
        } else if (v >= 0xDC00 && v <= 0xDFFF) {
            return NULL;
        }
        return p;
    }
    default:
        return NULL;
    }
}

#ifdef __SSE2__
/* Bit masks of one 64-byte window of a string. */
typedef struct {
    uint64_t bs;     /* '\\' */
    uint64_t q;      /* '"' */
    uint64_t odd;    /* control characters and non-ASCII bytes */
    uint64_t n;      /* 'n' */
    uint64_t simple; /* a letter of a one-character escape that is not '/': n t " \ r b f */
    uint64_t cand;   /* the literal's first character here and its last L - 1 bytes on */
} Masks;

static inline uint64_t mm(__m128i v) { return (uint64_t)(unsigned)_mm_movemask_epi8(v); }

/* Needs p + 64 + L - 1 <= end. */
static inline void masks64(const u8 *p, const Lit *lit, Masks *m) {
    const __m128i vq = _mm_set1_epi8('"'), vb = _mm_set1_epi8('\\'), lo = _mm_set1_epi8(0x1f);
    const __m128i vn = _mm_set1_epi8('n'), vt = _mm_set1_epi8('t'), vr = _mm_set1_epi8('r');
    const __m128i vB = _mm_set1_epi8('b'), vf = _mm_set1_epi8('f');
    const __m128i f = _mm_set1_epi8((char)lit->s[0]), l = _mm_set1_epi8((char)lit->s[lit->n - 1]);
    memset(m, 0, sizeof *m);
    for (int k = 0; k < 4; k++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * k));
        __m128i y = _mm_loadu_si128((const __m128i *)(p + 16 * k + lit->n - 1));
        __m128i eb = _mm_cmpeq_epi8(x, vb), eq = _mm_cmpeq_epi8(x, vq), en = _mm_cmpeq_epi8(x, vn);
        __m128i odd = _mm_or_si128(_mm_cmpeq_epi8(_mm_max_epu8(x, lo), lo), x);
        __m128i simple = _mm_or_si128(
            _mm_or_si128(_mm_or_si128(en, _mm_cmpeq_epi8(x, vt)), _mm_or_si128(eq, eb)),
            _mm_or_si128(_mm_cmpeq_epi8(x, vr),
                         _mm_or_si128(_mm_cmpeq_epi8(x, vB), _mm_cmpeq_epi8(x, vf))));
        __m128i cand = _mm_and_si128(_mm_cmpeq_epi8(x, f), _mm_cmpeq_epi8(y, l));
        int sh = 16 * k;
        m->bs |= mm(eb) << sh;
        m->q |= mm(eq) << sh;
        m->odd |= mm(odd) << sh;
        m->n |= mm(en) << sh;
        m->simple |= mm(simple) << sh;
        m->cand |= mm(cand) << sh;
    }
}

static inline uint64_t below(unsigned i) { return i >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << i) - 1; }
#endif

/* Count the lines of a string's decoded text that contain the literal (p: after the opening
 * quote); adds to *count. The byte after the closing quote, or NULL when malformed or uncertain.
 * The raw runs between escapes are the decoded text's own bytes; an escape decodes to one
 * character the literal cannot hold (or the record is uncertain), so no occurrence spans one,
 * and none holds a stop byte ('"', '\\', control, non-ASCII) at all.
 *
 * The SIMD loop takes 64 bytes at a time. A window with only one-character escapes (no "\\\\",
 * "\\/" or "\\u"), no control and no non-ASCII byte before its closing quote is done with masks
 * alone: escaped letters are the bytes after a backslash, line breaks the escaped 'n's, the
 * closing quote the first unescaped '"', and only candidate starts that are not escaped letters
 * are compared. Any other window is walked stop byte by stop byte. */
static const u8 *str_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count) {
    const size_t L = lit->n;
    int64_t lines = 0;
    int matched = 0;
#ifdef __SSE2__
    while ((size_t)(end - p) >= 64 + L - 1) {
        const u8 *base = p;
        Masks m;
        masks64(base, lit, &m);
        uint64_t esc = m.bs << 1;  /* escaped letters (a backslash never starts a window's
                                      escaped letter: windows begin at escape boundaries) */
        if (!(m.bs & esc)) {
            unsigned limit = (m.bs >> 63) ? 63 : 64;  /* a backslash last: its letter is beyond */
            uint64_t close = m.q & ~esc & below(limit);
            uint64_t upto = close ? below((unsigned)__builtin_ctzll(close)) : below(limit);
            if (!(((esc & ~m.simple) | m.odd) & upto)) {
                uint64_t nl = esc & m.n & upto;
                if (!matched || nl) {
                    uint64_t c = m.cand & ~esc & upto;
                    while (c) {  /* in bounds: base + 63 + L <= end */
                        unsigned i = (unsigned)__builtin_ctzll(c);
                        c &= c - 1;
                        uint64_t before = nl & below(i);
                        if (before) {
                            lines += matched;
                            matched = 0;
                            nl &= ~before;
                        }
                        if (!matched && memcmp(base + i, lit->s, L) == 0) matched = 1;
                    }
                    if (nl) {
                        lines += matched;
                        matched = 0;
                    }
                }
                if (close) {
                    *count += lines + matched;
                    return base + __builtin_ctzll(close) + 1;
                }
                p = base + limit;
                continue;
            }
        }
        /* stop byte by stop byte, within this window */
        uint64_t sm = m.bs | m.q | m.odd, cm = m.cand;
        for (;;) {
            unsigned s = sm ? (unsigned)__builtin_ctzll(sm) : 64;
            if (!matched) {
                uint64_t c = cm & below(s);
                while (c) {
                    if (memcmp(base + __builtin_ctzll(c), lit->s, L) == 0) {
                        matched = 1;
                        break;
                    }
                    c &= c - 1;
                }
            }
            if (s == 64) {
                p = base + 64;
                break;
            }
            const u8 *q = base + s, *np;
            u8 ch = *q;
            if (ch == '\\') {
                np = count_escape(q, end, lit, &lines, &matched);
            } else if (ch == '"') {
                *count += lines + matched;
                return q + 1;
            } else if (ch >= 0x80) {
                np = utf8_seq(q, end);
            } else {
                return NULL;  /* a raw control character */
            }
            if (!np) return NULL;
            size_t adv = (size_t)(np - base);
            if (adv >= 64) {
                p = np;
                break;
            }
            uint64_t keep = ~below((unsigned)adv);
            sm &= keep;
            cm &= keep;
        }
    }
#endif
    for (;;) {
        const u8 *q = matched ? find_special(p, end) : find_special_lit(p, end, lit, &matched);
        if (q >= end) return NULL;
        u8 c = *q;
        if (c == '"') {
            *count += lines + matched;
            return q + 1;
        }
        if (c == '\\') p = count_escape(q, end, lit, &lines, &matched);
        else if (c >= 0x80) p = utf8_seq(q, end);
        else return NULL;
        if (!p) return NULL;
    }
}

/* A string exactly as msgspec writes it (p: after the opening quote): the byte after the closing
 * quote, or NULL. msgspec escapes '"', '\\', and the controls (\b \t \n \f \r, else \u00xx with
 * lowercase hex); everything else, DEL and non-ASCII included, is written raw. */
static const u8 *str_canon(const u8 *p, const u8 *end) {
    for (;;) {
        const u8 *q = find_special(p, end);
        if (q >= end) return NULL;
        u8 c = *q;
        if (c == '"') return q + 1;
        if (c >= 0x80) {
            p = utf8_seq(q, end);
            if (!p) return NULL;
            continue;
        }
        if (c < 0x20) return NULL;
        if (end - q < 2) return NULL;
        switch (q[1]) {
        case '"': case '\\': case 'b': case 'f': case 'n': case 'r': case 't':
            p = q + 2;
            break;
        case 'u': {
            if (end - q < 6 || q[2] != '0' || q[3] != '0') return NULL;
            u8 h = q[4], l = q[5];
            if (h != '0' && h != '1') return NULL;
            if (!((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'))) return NULL;
            int v = ((h - '0') << 4) | hexval(l);
            if (v == 0x08 || v == 0x09 || v == 0x0A || v == 0x0C || v == 0x0D) return NULL;
            p = q + 6;
            break;
        }
        default:
            return NULL;
        }
    }
}

/* ------------------------------------------------------------------ values */

static const u8 *skip_number(const u8 *p, const u8 *end) {
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return NULL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return NULL;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    return p;
}

static inline const u8 *word(const u8 *p, const u8 *end, const char *w, size_t n) {
    if ((size_t)(end - p) < n || memcmp(p, w, n) != 0) return NULL;
    return p + n;
}

/* Skip any JSON value (p at its first byte, no leading whitespace): the byte after it, or NULL. */
static const u8 *skip_value(const u8 *p, const u8 *end, int depth) {
    if (p >= end) return NULL;
    switch (*p) {
    case '"':
        return str_skip(p + 1, end, NULL);
    case '{':
        if (depth >= MAX_DEPTH) return NULL;
        p = ws(p + 1, end);
        if (p < end && *p == '}') return p + 1;
        for (;;) {
            if (p >= end || *p != '"') return NULL;
            p = str_skip(p + 1, end, NULL);
            if (!p) return NULL;
            p = ws(p, end);
            if (p >= end || *p != ':') return NULL;
            p = skip_value(ws(p + 1, end), end, depth + 1);
            if (!p) return NULL;
            p = ws(p, end);
            if (p >= end) return NULL;
            if (*p == '}') return p + 1;
            if (*p != ',') return NULL;
            p = ws(p + 1, end);
        }
    case '[':
        if (depth >= MAX_DEPTH) return NULL;
        p = ws(p + 1, end);
        if (p < end && *p == ']') return p + 1;
        for (;;) {
            p = skip_value(p, end, depth + 1);
            if (!p) return NULL;
            p = ws(p, end);
            if (p >= end) return NULL;
            if (*p == ']') return p + 1;
            if (*p != ',') return NULL;
            p = ws(p + 1, end);
        }
    case 't':
        return word(p, end, "true", 4);
    case 'f':
        return word(p, end, "false", 5);
    case 'n':
        return word(p, end, "null", 4);
    default:
        return skip_number(p, end);
    }
}

typedef struct {
    const u8 *s;
    size_t n;
} Span;

static int span_cmp(const void *a, const void *b) {
    const Span *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->s, y->s, n);
    if (c) return c;
    return (x->n > y->n) - (x->n < y->n);
}

/* Whether the keys (raw, canonical, so equal bytes <=> equal strings) are all distinct. */
static int distinct(Span *k, size_t n) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = 0; j < i; j++)
                if (k[i].n == k[j].n && memcmp(k[i].s, k[j].s, k[i].n) == 0) return 0;
        return 1;
    }
    qsort(k, n, sizeof *k, span_cmp);
    for (size_t i = 1; i < n; i++)
        if (span_cmp(&k[i - 1], &k[i]) == 0) return 0;
    return 1;
}

/* A value exactly as msgspec's compact encoder writes the value it decodes to: no whitespace,
 * canonical strings, integers only (not "-0"), no duplicate keys. The byte after it, or NULL. */
static const u8 *canon_value(const u8 *p, const u8 *end, int depth) {
    if (p >= end) return NULL;
    switch (*p) {
    case '"':
        return str_canon(p + 1, end);
    case '{': {
        if (depth >= MAX_DEPTH) return NULL;
        p++;
        if (p < end && *p == '}') return p + 1;
        Span local[16], *keys = local;
        size_t nk = 0, cap = 16;
        const u8 *r = NULL;
        for (;;) {
            if (p >= end || *p != '"') break;
            const u8 *k = p + 1;
            p = str_canon(k, end);
            if (!p) break;
            if (nk == cap) {
                Span *nw = PyMem_RawMalloc(2 * cap * sizeof *nw);
                if (!nw) break;
                memcpy(nw, keys, nk * sizeof *nw);
                if (keys != local) PyMem_RawFree(keys);
                keys = nw;
                cap *= 2;
            }
            keys[nk].s = k;
            keys[nk].n = (size_t)(p - 1 - k);
            nk++;
            if (p >= end || *p != ':') break;
            p = canon_value(p + 1, end, depth + 1);
            if (!p || p >= end) break;
            if (*p == '}') {
                if (distinct(keys, nk)) r = p + 1;
                break;
            }
            if (*p != ',') break;
            p++;
        }
        if (keys != local) PyMem_RawFree(keys);
        return r;
    }
    case '[':
        if (depth >= MAX_DEPTH) return NULL;
        p++;
        if (p < end && *p == ']') return p + 1;
        for (;;) {
            p = canon_value(p, end, depth + 1);
            if (!p || p >= end) return NULL;
            if (*p == ']') return p + 1;
            if (*p != ',') return NULL;
            p++;
        }
    case 't':
        return word(p, end, "true", 4);
    case 'f':
        return word(p, end, "false", 5);
    case 'n':
        return word(p, end, "null", 4);
    default: {
        const u8 *s = p;
        if (*p == '-') p++;
        if (p >= end) return NULL;
        const u8 *d = p;
        if (*p == '0') {
            p++;
            if (s != d) return NULL; /* "-0" re-encodes as "0" */
        } else if (*p >= '1' && *p <= '9') {
            while (p < end && *p >= '0' && *p <= '9') p++;
            if (p - d > MAX_INT_DIGITS) return NULL;
        } else {
            return NULL;
        }
        if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) return NULL; /* a float */
        return p;
    }
    }
}

/* ------------------------------------------------------------------ records */

/* The key at p (its opening quote): its raw bytes in (*k, *kn); the byte after ':' and whitespace, or
 * NULL. An escaped key is refused (it may decode to a key that matters). */
static const u8 *key(const u8 *p, const u8 *end, const u8 **k, size_t *kn) {
    if (p >= end || *p != '"') return NULL;
    int esc = 0;
    const u8 *e = str_skip(p + 1, end, &esc);
    if (!e || esc) return NULL;
    *k = p + 1;
    *kn = (size_t)(e - 1 - (p + 1));
    e = ws(e, end);
    if (e >= end || *e != ':') return NULL;
    return ws(e + 1, end);
}

/* After a member's value: the next key's quote (after ','), or `end` itself at '}' (then *done),
 * or NULL. */
static const u8 *next_member(const u8 *p, const u8 *end, int *done) {
    p = ws(p, end);
    if (p >= end) return NULL;
    if (*p == '}') {
        *done = 1;
        return p + 1;
    }
    if (*p != ',') return NULL;
    return ws(p + 1, end);
}

#define EQ(k, kn, lit) ((kn) == sizeof(lit) - 1 && memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* A tag value (a string without escapes): its raw bytes, or NULL. */
static const u8 *tag(const u8 *p, const u8 *end, const u8 **s, size_t *n) {
    if (p >= end || *p != '"') return NULL;
    int esc = 0;
    const u8 *e = str_skip(p + 1, end, &esc);
    if (!e || esc) return NULL;
    *s = p + 1;
    *n = (size_t)(e - 1 - (p + 1));
    return e;
}

enum { B_UNKNOWN, B_TEXT, B_TOOL, B_OPAQUE };

/* A tool_use input: 1 when its compact re-encoding holds the literal, else 0; NULL if uncertain. */
static const u8 *input_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count) {
    const u8 *e = canon_value(p, end, 0);
    if (!e) return NULL;
    if ((size_t)(e - p) >= lit->n && memmem(p, (size_t)(e - p), lit->s, lit->n)) *count += 1;
    return e;
}

/* One block object (p at '{'). */
static const u8 *block_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count) {
    if (p >= end || *p != '{') return NULL;
    p = ws(p + 1, end);
    int kind = B_UNKNOWN, seen_type = 0, seen_text = 0, seen_input = 0, done = 0;
    const u8 *text_at = NULL, *input_at = NULL;  /* values met before the type */
    if (p < end && *p == '}') return NULL;       /* no type */
    while (!done) {
        const u8 *k;
        size_t kn;
        const u8 *v = key(p, end, &k, &kn);
        if (!v) return NULL;
        if (EQ(k, kn, "type")) {
            const u8 *s;
            size_t n;
            if (seen_type) return NULL;
            seen_type = 1;
            p = tag(v, end, &s, &n);
            if (!p) return NULL;
            if (EQ(s, n, "text") || EQ(s, n, "thinking")) kind = B_TEXT;
            else if (EQ(s, n, "tool_use")) kind = B_TOOL;
            else if (EQ(s, n, "opaque")) kind = B_OPAQUE;
            else return NULL;
        } else if (EQ(k, kn, "text")) {
            if (seen_text) return NULL;
            seen_text = 1;
            if (kind == B_TEXT) {
                if (v >= end || *v != '"') return NULL; /* v == end: ':' was the last byte */
                p = str_count(v + 1, end, lit, count);
            } else {
                if (kind == B_UNKNOWN) text_at = v;
                p = skip_value(v, end, 2);
            }
        } else if (EQ(k, kn, "input")) {
            if (seen_input) return NULL;
            seen_input = 1;
            if (kind == B_TOOL) {
                p = input_count(v, end, lit, count);
            } else {
                if (kind == B_UNKNOWN) input_at = v;
                p = skip_value(v, end, 2);
            }
        } else {
            p = skip_value(v, end, 2);
        }
        if (!p) return NULL;
        p = next_member(p, end, &done);
        if (!p) return NULL;
    }
    switch (kind) {
    case B_TEXT:
        if (!seen_text) return NULL;
        if (text_at) {
            if (*text_at != '"' || !str_count(text_at + 1, end, lit, count)) return NULL;
        }
        break;
    case B_TOOL:
        if (!seen_input) return NULL;
        if (input_at && !input_count(input_at, end, lit, count)) return NULL;
        break;
    case B_OPAQUE:
        break;
    default:
        return NULL;
    }
    return p;
}

static const u8 *blocks_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count) {
    if (p >= end || *p != '[') return NULL;
    p = ws(p + 1, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        p = block_count(p, end, lit, count);
        if (!p) return NULL;
        p = ws(p, end);
        if (p >= end) return NULL;
        if (*p == ']') return p + 1;
        if (*p != ',') return NULL;
        p = ws(p + 1, end);
    }
}

/* An object holding one string field `name` that counts (a ToolResult's "content", required;
 * a Residue's "note", optional and nullable). */
static const u8 *field_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count,
                             const char *name, size_t name_n, int optional) {
    if (p >= end || *p != '{') return NULL;
    p = ws(p + 1, end);
    int seen = 0, done = 0;
    if (p < end && *p == '}') return optional ? p + 1 : NULL;
    while (!done) {
        const u8 *k;
        size_t kn;
        const u8 *v = key(p, end, &k, &kn);
        if (!v) return NULL;
        if (kn == name_n && memcmp(k, name, kn) == 0) {
            if (seen) return NULL;
            seen = 1;
            if (v >= end) return NULL; /* ':' was the last byte */
            if (*v == '"') p = str_count(v + 1, end, lit, count);
            else if (optional) p = word(v, end, "null", 4);
            else return NULL;
        } else {
            p = skip_value(v, end, 2);
        }
        if (!p) return NULL;
        p = next_member(p, end, &done);
        if (!p) return NULL;
    }
    if (!seen && !optional) return NULL;
    return p;
}

static const u8 *results_count(const u8 *p, const u8 *end, const Lit *lit, int64_t *count) {
    if (p >= end || *p != '[') return NULL;
    p = ws(p + 1, end);
    if (p < end && *p == ']') return p + 1;
    for (;;) {
        p = field_count(p, end, lit, count, "content", 7, 0);
        if (!p) return NULL;
        p = ws(p, end);
        if (p >= end) return NULL;
        if (*p == ']') return p + 1;
        if (*p != ',') return NULL;
        p = ws(p + 1, end);
    }
}

/* The top-level keys that may hold searchable text, and the record types they count in. */
enum { K_TEXT, K_BLOCKS, K_RESULTS, K_RESIDUE, K_REPLACEMENT, K_N };

static const struct {
    const char *name;
    int field; /* the K_ key it counts, or -1 */
} TYPES[] = {
    {"UserPrompt", K_TEXT},       {"AssistantMessage", K_BLOCKS}, {"ToolResults", K_RESULTS},
    {"Steering", K_TEXT},         {"Inherited", -1},              {"Evicted", K_RESIDUE},
    {"Marked", K_REPLACEMENT},    {"Swept", -1},                  {"Cleared", -1},
    {"Rewound", -1},              {"SessionStarted", -1},         {"SessionResumed", -1},
    {"SessionEnded", -1},         {"TurnStarted", -1},            {"ProviderCall", -1},
    {"ApprovalRequested", -1},    {"ApprovalDecided", -1},
};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

static int top_key(const u8 *k, size_t kn) {
    if (EQ(k, kn, "text")) return K_TEXT;
    if (EQ(k, kn, "blocks")) return K_BLOCKS;
    if (EQ(k, kn, "results")) return K_RESULTS;
    if (EQ(k, kn, "residue")) return K_RESIDUE;
    if (EQ(k, kn, "replacement")) return K_REPLACEMENT;
    return -1;
}

static const u8 *field_value(int field, const u8 *v, const u8 *end, const Lit *lit,
                             int64_t *count) {
    switch (field) {
    case K_TEXT:
    case K_REPLACEMENT:
        if (v >= end || *v != '"') return NULL;
        return str_count(v + 1, end, lit, count);
    case K_BLOCKS:
        return blocks_count(v, end, lit, count);
    case K_RESULTS:
        return results_count(v, end, lit, count);
    case K_RESIDUE:
        return field_count(v, end, lit, count, "note", 4, 1);
    }
    return NULL;
}

static int64_t scan_record(const u8 *p, const u8 *end, const Lit *lit) {
    int64_t count = 0;
    int type = -1, field = -1, done = 0;
    unsigned seen = 0;
    const u8 *at[K_N] = {0};  /* values of keys met before "t" */
    p = ws(p, end);
    if (p >= end || *p != '{') return -1;
    p = ws(p + 1, end);
    if (p < end && *p == '}') return -1;
    while (!done) {
        const u8 *k;
        size_t kn;
        const u8 *v = key(p, end, &k, &kn);
        if (!v) return -1;
        int f;
        if (EQ(k, kn, "t")) {
            const u8 *s;
            size_t n;
            if (type >= 0) return -1;
            p = tag(v, end, &s, &n);
            if (!p) return -1;
            for (size_t i = 0; i < N_TYPES; i++)
                if (strlen(TYPES[i].name) == n && memcmp(TYPES[i].name, s, n) == 0) type = (int)i;
            if (type < 0) return -1;
            field = TYPES[type].field;
        } else if ((f = top_key(k, kn)) >= 0) {
            if (seen & (1u << f)) return -1;
            seen |= 1u << f;
            if (type < 0) {
                at[f] = v;
                p = skip_value(v, end, 1);
            } else if (f == field) {
                p = field_value(f, v, end, lit, &count);
            } else {
                p = skip_value(v, end, 1);
            }
        } else {
            p = skip_value(v, end, 1);
        }
        if (!p) return -1;
        p = next_member(p, end, &done);
        if (!p) return -1;
    }
    if (ws(p, end) != end || type < 0) return -1;
    if (field >= 0) {
        if (!(seen & (1u << field))) return -1; /* a required field is missing */
        if (at[field] && !field_value(field, at[field], end, lit, &count)) return -1;
    }
    return count;
}

/* ------------------------------------------------------------------ Python */

static PyObject *array_type;

/* An int64 copy of a sequence of ints or of an 8-byte integer buffer ('q'/'l'/'Q'...). */
static int64_t *as_i64(PyObject *o, Py_ssize_t *n, const char *what) {
    if (PyObject_CheckBuffer(o)) {
        Py_buffer v;
        if (PyObject_GetBuffer(o, &v, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) == 0) {
            const char *f = v.format ? v.format : "B";
            if (*f == '@' || *f == '=' || *f == '<') f++;
            if (v.itemsize == 8 && (f[0] == 'q' || f[0] == 'l') && f[1] == 0) {
                *n = v.len / 8;
                int64_t *out = PyMem_Malloc((size_t)(*n ? *n : 1) * 8);
                if (!out) {
                    PyBuffer_Release(&v);
                    PyErr_NoMemory();
                    return NULL;
                }
                memcpy(out, v.buf, (size_t)v.len);
                PyBuffer_Release(&v);
                return out;
            }
            PyBuffer_Release(&v);
        } else {
            PyErr_Clear();
        }
    }
    PyObject *seq = PySequence_Fast(o, what);
    if (!seq) return NULL;
    *n = PySequence_Fast_GET_SIZE(seq);
    int64_t *out = PyMem_Malloc((size_t)(*n ? *n : 1) * 8);
    if (!out) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return NULL;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < *n; i++) {
        long long x = PyLong_AsLongLong(items[i]);
        if (x == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            PyMem_Free(out);
            return NULL;
        }
        out[i] = x;
    }
    Py_DECREF(seq);
    return out;
}

static PyObject *count_literal(PyObject *self, PyObject *args) {
    PyObject *bufo, *offo, *leno;
    Py_buffer buf, litb;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOy*:count_literal", &bufo, &offo, &leno, &litb)) return NULL;
    PyObject *ret = NULL, *bytes = NULL;
    int64_t *offs = NULL, *lens = NULL;
    int have_buf = 0;
    Lit lit;
    memset(&lit, 0, sizeof lit);
    lit.s = litb.buf;
    lit.n = (size_t)litb.len;
    if (lit.n == 0) {
        PyErr_SetString(PyExc_ValueError, "the literal is empty");
        goto out;
    }
    for (size_t i = 0; i < lit.n; i++) {
        u8 c = lit.s[i];
        if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') {
            PyErr_SetString(PyExc_ValueError,
                            "the literal must be printable ASCII without '\"' or '\\\\'");
            goto out;
        }
        lit.in[c] = 1;
    }
    if (PyObject_GetBuffer(bufo, &buf, PyBUF_SIMPLE) < 0) goto out;
    have_buf = 1;
    Py_ssize_t n, n2;
    if (!(offs = as_i64(offo, &n, "offsets must be a sequence of ints"))) goto out;
    if (!(lens = as_i64(leno, &n2, "lengths must be a sequence of ints"))) goto out;
    if (n != n2) {
        PyErr_SetString(PyExc_ValueError, "offsets and lengths differ in length");
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (offs[i] < 0 || lens[i] < 0 || offs[i] > (int64_t)buf.len ||
            lens[i] > (int64_t)buf.len - offs[i]) {
            PyErr_Format(PyExc_ValueError, "record %zd: range [%lld, +%lld) is outside the buffer",
                         i, (long long)offs[i], (long long)lens[i]);
            goto out;
        }
    }
    bytes = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!bytes) goto out;
    {
        int64_t *res = (int64_t *)PyBytes_AS_STRING(bytes);
        const u8 *base = buf.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            const u8 *p = base + offs[i];
            int64_t r = scan_record(p, p + lens[i], &lit);
            memcpy(res + i, &r, 8);
        }
        Py_END_ALLOW_THREADS
    }
    ret = PyObject_CallFunction(array_type, "sO", "q", bytes);
out:
    Py_XDECREF(bytes);
    PyMem_Free(offs);
    PyMem_Free(lens);
    if (have_buf) PyBuffer_Release(&buf);
    PyBuffer_Release(&litb);
    return ret;
}


/* ------------------------------------------------------------------ find_all */

typedef struct {
    const u8 *s;
    size_t n, anchor;
    int64_t *pos;
    Py_ssize_t got;
    int truncated;
} Needle;

/* Every start of the needle in [lo, hi), found through memchr on its anchor byte (the caller
 * picks the rarest), at most `cap` of them. */
static void needle_scan(Needle *nd, const u8 *base, size_t lo, size_t hi, Py_ssize_t cap) {
    const u8 *s = nd->s;
    size_t n = nd->n, r = nd->anchor;
    nd->got = 0;
    nd->truncated = 0;
    if (hi < lo || hi - lo < n) return;
    const u8 *p = base + lo + r, *last = base + hi - n + r; /* anchor positions allowed */
    u8 c = s[r];
    while (p <= last) {
        const u8 *q = memchr(p, c, (size_t)(last - p) + 1);
        if (!q) break;
        const u8 *st = q - r;
        if (memcmp(st, s, n) == 0) {
            if (nd->got == cap) {
                nd->truncated = 1;
                break;
            }
            nd->pos[nd->got++] = (int64_t)(st - base);
        }
        p = q + 1;
    }
}

static PyObject *find_all(PyObject *self, PyObject *args) {
    PyObject *bufo, *needles_o, *anchors_o;
    Py_ssize_t start, end, cap;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnnOOn:find_all", &bufo, &start, &end, &needles_o, &anchors_o,
                          &cap))
        return NULL;
    Py_buffer buf;
    if (PyObject_GetBuffer(bufo, &buf, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *ret = NULL, *seq = NULL, *aseq = NULL, *bytes = NULL;
    Needle *nds = NULL;
    Py_ssize_t k = 0;
    if (start < 0 || end < start || end > buf.len) {
        PyErr_Format(PyExc_ValueError, "[%zd, %zd) is outside the buffer of %zd bytes", start,
                     end, buf.len);
        goto out;
    }
    if (cap < 1) {
        PyErr_SetString(PyExc_ValueError, "max_hits must be at least 1");
        goto out;
    }
    if (!(seq = PySequence_Fast(needles_o, "needles must be a sequence of bytes"))) goto out;
    /* a tuple of them: the needles' bytes are read with the GIL released, and a list (which
     * PySequence_Fast returns as is) may be changed meanwhile by another thread, freeing them */
    Py_SETREF(seq, PySequence_Tuple(seq));
    if (!seq) goto out;
    if (!(aseq = PySequence_Fast(anchors_o, "anchors must be a sequence of ints"))) goto out;
    k = PySequence_Fast_GET_SIZE(seq);
    if (k < 1 || PySequence_Fast_GET_SIZE(aseq) != k) {
        PyErr_SetString(PyExc_ValueError, "one anchor for each of at least one needle");
        goto out;
    }
    /* A needle starts at most end - start times in the window: room for that many hits, not
     * for max_hits (which may be huge: cap * 8 would wrap and under-allocate). */
    Py_ssize_t slots = cap < end - start ? cap : (end > start ? end - start : 1);
    nds = PyMem_Calloc((size_t)k, sizeof(Needle));
    if (!nds) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *nb = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(nb) || PyBytes_GET_SIZE(nb) == 0) {
            PyErr_SetString(PyExc_ValueError, "a needle is non-empty bytes");
            goto out;
        }
        Py_ssize_t a = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(aseq, i));
        if (a == -1 && PyErr_Occurred()) goto out;
        if (a < 0 || a >= PyBytes_GET_SIZE(nb)) {
            PyErr_SetString(PyExc_ValueError, "an anchor lies outside its needle");
            goto out;
        }
        nds[i].s = (const u8 *)PyBytes_AS_STRING(nb);
        nds[i].n = (size_t)PyBytes_GET_SIZE(nb);
        nds[i].anchor = (size_t)a;
        if (!(nds[i].pos = PyMem_Malloc((size_t)slots * sizeof(int64_t)))) {
            PyErr_NoMemory();
            goto out;
        }
    }
    Py_ssize_t total = 0;
    int64_t cutoff = -1; /* positions above it may be incomplete */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++) {
        needle_scan(&nds[i], buf.buf, (size_t)start, (size_t)end, cap);
        if (nds[i].truncated) {
            int64_t lastp = nds[i].pos[nds[i].got - 1];
            if (cutoff < 0 || lastp < cutoff) cutoff = lastp;
        }
    }
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < k; i++) total += nds[i].got;
    if (!(bytes = PyBytes_FromStringAndSize(NULL, total * 8))) goto out;
    {
        int64_t *res = (int64_t *)PyBytes_AS_STRING(bytes);
        Py_ssize_t m = 0;
        Py_ssize_t *at = PyMem_Calloc((size_t)k, sizeof(Py_ssize_t));
        if (!at) {
            PyErr_NoMemory();
            goto out;
        }
        for (;;) { /* k-way merge, duplicates dropped, nothing past the cutoff */
            int64_t best = -1;
            for (Py_ssize_t i = 0; i < k; i++)
                if (at[i] < nds[i].got && (best < 0 || nds[i].pos[at[i]] < best))
                    best = nds[i].pos[at[i]];
            if (best < 0 || (cutoff >= 0 && best > cutoff)) break;
            for (Py_ssize_t i = 0; i < k; i++)
                if (at[i] < nds[i].got && nds[i].pos[at[i]] == best) at[i]++;
            res[m++] = best;
        }
        PyMem_Free(at);
        if (_PyBytes_Resize(&bytes, m * 8) < 0) goto out;
    }
    {
        PyObject *arr = PyObject_CallFunction(array_type, "sO", "q", bytes);
        if (!arr) goto out;
        ret = Py_BuildValue("(Nn)", arr, (Py_ssize_t)(cutoff < 0 ? -1 : cutoff + 1));
    }
out:
    if (nds)
        for (Py_ssize_t i = 0; i < k; i++) PyMem_Free(nds[i].pos);
    PyMem_Free(nds);
    Py_XDECREF(bytes);
    Py_XDECREF(seq);
    Py_XDECREF(aseq);
    PyBuffer_Release(&buf);
    return ret;
}

PyDoc_STRVAR(find_all_doc,
"find_all(buf, start, end, needles, anchors, max_hits) -> (array('q'), resume)\n\n"
"Every position in buf[start:end] where one of the needles (non-empty bytes) starts, sorted and\n"
"without repeats, found by memchr on each needle's anchor byte (anchors[i] indexes needles[i];\n"
"pick its rarest byte), with the GIL released. At most max_hits per needle: when a needle had\n"
"more, the answer stops at the last position known complete and resume is where to search\n"
"again (else -1).");

PyDoc_STRVAR(count_literal_doc,
"count_literal(buf, offsets, lengths, lit) -> array('q')\n\n"
"For each record buf[off:off+len] (a record.jsonl line), how many lines of its searchable text\n"
"contain the literal `lit` (non-empty printable ASCII without '\"' or '\\\\'), or -1 when the raw\n"
"bytes might not map one-to-one onto the decoded text (decode that record instead). Counted on\n"
"the raw JSON, without decoding, with the GIL released. ValueError for a range outside buf.");

static PyMethodDef methods[] = {
    {"count_literal", count_literal, METH_VARARGS, count_literal_doc},
    {"find_all", find_all, METH_VARARGS, find_all_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_scan",
                                 "Raw-JSON literal counting for the transcript door's grep.", -1,
                                 methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) {
    init_tables();
    if (!array_type) {
        PyObject *am = PyImport_ImportModule("array");
        if (!am) return NULL;
        array_type = PyObject_GetAttrString(am, "array");
        Py_DECREF(am);
        if (!array_type) return NULL;
    }
    return PyModule_Create(&mod);
}
