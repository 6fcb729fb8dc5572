/* The protobuf wire format as the OTLP encoder (otlp.c) and the span builder (otlp_build.c)
 * write it: a growing buffer, varints, tags, length-delimited fields, and an attribute value
 * (AnyValue) or a dict of attributes (KeyValue) from Python objects, exactly as the pure-Python
 * encoder (tracing/protobuf.py) writes them. Static: each file has its own copy. */
#ifndef MNEMON_OTLP_WIRE_H
#define MNEMON_OTLP_WIRE_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* The output: first on the caller's stack (a span is a few hundred bytes), on the heap once it
 * outgrows it. */
typedef struct {
    unsigned char *p;
    Py_ssize_t n, cap;
    int heap;
} Buf;

#define STACK_BYTES 4096

static inline int grow(Buf *b, Py_ssize_t more) {
    if (b->n + more <= b->cap) return 0;
    Py_ssize_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + more) cap *= 2;
    unsigned char *p = b->heap ? PyMem_Realloc(b->p, (size_t)cap) : PyMem_Malloc((size_t)cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    if (!b->heap) memcpy(p, b->p, (size_t)b->n);
    b->p = p;
    b->cap = cap;
    b->heap = 1;
    return 0;
}

static inline int put(Buf *b, const void *s, Py_ssize_t n) {
    if (grow(b, n) < 0) return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

static inline int varint_len(uint64_t v) {
    int k = 1;
    while (v > 0x7F) {
        v >>= 7;
        k++;
    }
    return k;
}

static inline void write_varint(unsigned char *p, uint64_t v) {
    while (v > 0x7F) {
        *p++ = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    *p = (unsigned char)v;
}

static inline int put_varint(Buf *b, uint64_t v) {
    if (grow(b, 10) < 0) return -1;
    write_varint(b->p + b->n, v);
    b->n += varint_len(v);
    return 0;
}

static inline int put_tag(Buf *b, int field, int wire) {
    return put_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

static inline int put_fixed64(Buf *b, uint64_t v) {
    if (grow(b, 8) < 0) return -1;
    for (int i = 0; i < 8; i++) b->p[b->n + i] = (unsigned char)(v >> (8 * i));
    b->n += 8;
    return 0;
}

/* A length-delimited field whose payload is written next: its tag and one byte for the length;
 * close_ld writes the length and moves the payload when the length needs more bytes. */
static inline Py_ssize_t open_ld(Buf *b, int field) {
    if (put_tag(b, field, 2) < 0 || grow(b, 1) < 0) return -1;
    b->n += 1;
    return b->n;
}

static inline int close_ld(Buf *b, Py_ssize_t start) {
    uint64_t len = (uint64_t)(b->n - start);
    int k = varint_len(len);
    if (k > 1) {
        if (grow(b, k - 1) < 0) return -1;
        memmove(b->p + start + k - 1, b->p + start, (size_t)len);
        b->n += k - 1;
    }
    write_varint(b->p + start - 1, len);
    return 0;
}

static inline int put_bytes_field(Buf *b, int field, const void *s, Py_ssize_t n) {
    if (put_tag(b, field, 2) < 0 || put_varint(b, (uint64_t)n) < 0) return -1;
    return put(b, s, n);
}

static inline int put_str(Buf *b, int field, PyObject *s) {
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "not a str");
        return -1;
    }
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (!u) return -1;
    return put_bytes_field(b, field, u, n);
}

static inline int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* An id (hex digits, as bytes.fromhex reads them without spaces) as a bytes field. */
static inline int put_hex(Buf *b, int field, PyObject *s) {
    if (!PyUnicode_Check(s) || PyUnicode_READY(s) < 0 || !PyUnicode_IS_ASCII(s)) {
        PyErr_Clear();
        PyErr_SetString(PyExc_ValueError, "not an ASCII hex id");
        return -1;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const char *h = (const char *)PyUnicode_DATA(s);
    if (n % 2 || n > 256) {
        PyErr_SetString(PyExc_ValueError, "not a hex id");
        return -1;
    }
    unsigned char raw[128];
    for (Py_ssize_t i = 0; i < n / 2; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            PyErr_SetString(PyExc_ValueError, "not a hex id");
            return -1;
        }
        raw[i] = (unsigned char)(hi << 4 | lo);
    }
    return put_bytes_field(b, field, raw, n / 2);
}

/* A Python int as the 64-bit value the Python encoder writes: a negative one in two's
 * complement, one from 2^63 to 2^64 as it is; wider ones raise. */
static inline int as_u64(PyObject *v, uint64_t *out) {
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (!overflow) {
        *out = (uint64_t)x;
        return 0;
    }
    if (overflow < 0) {
        PyErr_SetString(PyExc_OverflowError, "int below -2^63");
        return -1;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = (uint64_t)u;
    return 0;
}

static inline int put_any(Buf *b, PyObject *v, int depth);

static inline int put_any(Buf *b, PyObject *v, int depth) {
    if (depth > 32) {
        PyErr_SetString(PyExc_ValueError, "attribute nested too deep");
        return -1;
    }
    if (PyBool_Check(v)) {
        if (put_tag(b, 2, 0) < 0) return -1;
        return put_varint(b, v == Py_True ? 1 : 0);
    }
    if (PyLong_Check(v)) {
        uint64_t u;
        if (as_u64(v, &u) < 0 || put_tag(b, 3, 0) < 0) return -1;
        return put_varint(b, u);
    }
    if (PyFloat_Check(v)) {
        double d = PyFloat_AS_DOUBLE(v);
        uint64_t u;
        memcpy(&u, &d, 8);
        if (put_tag(b, 4, 1) < 0) return -1;
        return put_fixed64(b, u);
    }
    if (PyList_Check(v) || PyTuple_Check(v)) {
        PyObject *seq = PySequence_Fast(v, "not a sequence");
        if (!seq) return -1;
        Py_ssize_t arr = open_ld(b, 5);
        int rc = arr < 0 ? -1 : 0;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
            Py_ssize_t one = open_ld(b, 1);
            if (one < 0 || put_any(b, PySequence_Fast_GET_ITEM(seq, i), depth + 1) < 0 ||
                close_ld(b, one) < 0)
                rc = -1;
        }
        Py_DECREF(seq);
        if (rc == 0) rc = close_ld(b, arr);
        return rc;
    }
    if (PyUnicode_Check(v)) return put_str(b, 1, v);
    PyObject *s = PyObject_Str(v);
    if (!s) return -1;
    int rc = put_str(b, 1, s);
    Py_DECREF(s);
    return rc;
}

/* Every item of ``attrs`` (a dict, in its order) as a KeyValue in field ``field``. */
static inline int put_attributes(Buf *b, int field, PyObject *attrs) {
    if (!PyDict_Check(attrs)) {
        PyErr_SetString(PyExc_TypeError, "attributes are not a dict");
        return -1;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(attrs, &pos, &k, &v)) {
        Py_ssize_t kv = open_ld(b, field);
        if (kv < 0 || put_str(b, 1, k) < 0) return -1;
        Py_ssize_t val = open_ld(b, 2);
        if (val < 0 || put_any(b, v, 0) < 0 || close_ld(b, val) < 0 || close_ld(b, kv) < 0)
            return -1;
    }
    return 0;
}


/* Every builder's function: otlp_build.c, the type added to the module by otlp.c. */
int otlp_add_builder(PyObject *module);

#endif
