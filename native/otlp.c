/* orchestrator.tracing._otlp: OTLP protobuf ``Span`` messages written in C.
 *
 * span_bytes(span) -> bytes: the same bytes as the pure-Python ``tracing.protobuf.py_span_bytes``
 * for a ``tracing.spans.Span`` (the tests check both against each other on generated spans and
 * decode them with opentelemetry-proto). framed(field, parts) -> bytes: each of ``parts`` as one
 * length-delimited field ``field``, joined (the spans of a ``ScopeSpans``).
 *
 * Why C: live tracing encodes two spans per turn of every agent in the process, and the issue's
 * goal is at most a quarter more harness CPU per turn; the Python encoder, even with its caches,
 * took ~4-8 us per span, this takes well under one.
 *
 * Anything this encoder does not take exactly as the Python one does (an id that is not plain
 * hex, an integer outside 64 bits, a key that is not a str, attributes that are not a dict)
 * raises; the caller then encodes the span in Python, which gives its own answer or error.
 *
 * Field numbers: opentelemetry/proto/trace/v1/trace.proto (Span: 1 trace_id, 2 span_id,
 * 4 parent_span_id, 5 name, 6 kind, 7 start_time_unix_nano, 8 end_time_unix_nano, 9 attributes,
 * 11 events, 13 links, 15 status; Event: 1 time, 2 name, 3 attributes; Link: 1 trace_id,
 * 2 span_id, 4 attributes; Status: 2 message, 3 code) and common/v1/common.proto (KeyValue:
 * 1 key, 2 value; AnyValue: 1 string, 2 bool, 3 int, 4 double, 5 array; ArrayValue: 1 values).
 */
#include "otlp_wire.h"

static PyObject *S_trace_id, *S_span_id, *S_parent_id, *S_name, *S_kind, *S_start_ns, *S_end_ns,
    *S_attributes, *S_events, *S_links, *S_status, *S_status_message, *S_time_ns;

static int put_u64_field(Buf *b, int field, int wire, PyObject *v) {
    if (!PyLong_Check(v)) {
        PyErr_SetString(PyExc_TypeError, "not an int");
        return -1;
    }
    if (wire == 1) {
        unsigned long long u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        if (put_tag(b, field, 1) < 0) return -1;
        return put_fixed64(b, (uint64_t)u);
    }
    uint64_t u;
    if (as_u64(v, &u) < 0 || put_tag(b, field, 0) < 0) return -1;
    return put_varint(b, u);
}

/* Field ``field`` of ``span`` read and written by ``fn``: the attribute's reference dropped. */
#define ATTR(obj, name, stmt)                          \
    do {                                               \
        PyObject *a_ = PyObject_GetAttr((obj), (name)); \
        if (!a_) goto fail;                            \
        int rc_ = (stmt);                              \
        Py_DECREF(a_);                                 \
        if (rc_ < 0) goto fail;                        \
    } while (0)

/* An Event message's fields (trace.proto: 1 time, 2 name, 3 attributes). */
static int event_fields(Buf *b, PyObject *e) {
    ATTR(e, S_time_ns, put_u64_field(b, 1, 1, a_));
    ATTR(e, S_name, put_str(b, 2, a_));
    ATTR(e, S_attributes, put_attributes(b, 3, a_));
    return 0;
fail:
    return -1;
}

/* A Link message's fields (1 trace_id, 2 span_id, 4 attributes). */
static int link_fields(Buf *b, PyObject *ln) {
    ATTR(ln, S_trace_id, put_hex(b, 1, a_));
    ATTR(ln, S_span_id, put_hex(b, 2, a_));
    ATTR(ln, S_attributes, put_attributes(b, 4, a_));
    return 0;
fail:
    return -1;
}

/* Each item of ``items`` as one message in field ``field``, its fields written by ``fields``. */
static int put_messages(Buf *b, int field, PyObject *items, int (*fields)(Buf *, PyObject *)) {
    PyObject *seq = PySequence_Fast(items, "not a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < n; i++) {
        Py_ssize_t m = open_ld(b, field);
        if (m < 0 || fields(b, PySequence_Fast_GET_ITEM(seq, i)) < 0 || close_ld(b, m) < 0)
            rc = -1;
    }
    Py_DECREF(seq);
    return rc;
}

static int put_parent(Buf *b, PyObject *parent) {
    int truth = PyObject_IsTrue(parent);
    if (truth < 0) return -1;
    return truth ? put_hex(b, 4, parent) : 0;
}

static int put_status(Buf *b, PyObject *span) {
    Py_ssize_t m = open_ld(b, 15);
    if (m < 0) return -1;
    PyObject *msg = PyObject_GetAttr(span, S_status_message);
    if (!msg) return -1;
    int truth = PyObject_IsTrue(msg);
    int rc = truth < 0 ? -1 : truth ? put_str(b, 2, msg) : 0;
    Py_DECREF(msg);
    if (rc < 0) return -1;
    PyObject *code = PyObject_GetAttr(span, S_status);
    if (!code) return -1;
    truth = PyObject_IsTrue(code);
    rc = truth < 0 ? -1 : truth ? put_u64_field(b, 3, 0, code) : 0;
    Py_DECREF(code);
    if (rc < 0) return -1;
    return close_ld(b, m);
}

static int encode_span(Buf *b, PyObject *span) {
    ATTR(span, S_trace_id, put_hex(b, 1, a_));
    ATTR(span, S_span_id, put_hex(b, 2, a_));
    ATTR(span, S_parent_id, put_parent(b, a_));
    ATTR(span, S_name, put_str(b, 5, a_));
    ATTR(span, S_kind, put_u64_field(b, 6, 0, a_));
    ATTR(span, S_start_ns, put_u64_field(b, 7, 1, a_));
    ATTR(span, S_end_ns, put_u64_field(b, 8, 1, a_));
    ATTR(span, S_attributes, put_attributes(b, 9, a_));
    ATTR(span, S_events, put_messages(b, 11, a_, event_fields));
    ATTR(span, S_links, put_messages(b, 13, a_, link_fields));
    return put_status(b, span);
fail:
    return -1;
}

PyDoc_STRVAR(span_bytes_doc,
             "span_bytes(span) -> bytes: an OTLP protobuf Span message for a tracing.spans.Span.");

static PyObject *span_bytes(PyObject *self, PyObject *span) {
    unsigned char stack[STACK_BYTES];
    Buf b = {stack, 0, STACK_BYTES, 0};
    PyObject *out = encode_span(&b, span) < 0 ? NULL
                    : PyBytes_FromStringAndSize((const char *)b.p, b.n);
    if (b.heap) PyMem_Free(b.p);
    return out;
}

PyDoc_STRVAR(framed_doc,
             "framed(field, parts) -> bytes: each bytes of parts as one length-delimited field "
             "number field, joined.");

static PyObject *framed(PyObject *self, PyObject *args) {
    int field;
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "iO:framed", &field, &parts)) return NULL;
    if (field < 1 || field > 536870911) {
        PyErr_SetString(PyExc_ValueError, "field number out of range");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(parts, "parts is not a sequence");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    int tag = varint_len(((uint64_t)field << 3) | 2);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyBytes_Check(p)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "a part is not bytes");
            return NULL;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(p);
        total += tag + varint_len((uint64_t)len) + len;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (!out) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PySequence_Fast_GET_ITEM(seq, i);
        Py_ssize_t len = PyBytes_GET_SIZE(p);
        write_varint(w, ((uint64_t)field << 3) | 2);
        w += tag;
        write_varint(w, (uint64_t)len);
        w += varint_len((uint64_t)len);
        memcpy(w, PyBytes_AS_STRING(p), (size_t)len);
        w += len;
    }
    Py_DECREF(seq);
    return out;
}

static PyMethodDef methods[] = {
    {"span_bytes", span_bytes, METH_O, span_bytes_doc},
    {"framed", framed, METH_VARARGS, framed_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_otlp",
                                 "OTLP protobuf spans written in C (tracing.protobuf).", -1,
                                 methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__otlp(void) {
#define INTERN(var, s) \
    if (!(var = PyUnicode_InternFromString(s))) return NULL
    INTERN(S_trace_id, "trace_id");
    INTERN(S_span_id, "span_id");
    INTERN(S_parent_id, "parent_id");
    INTERN(S_name, "name");
    INTERN(S_kind, "kind");
    INTERN(S_start_ns, "start_ns");
    INTERN(S_end_ns, "end_ns");
    INTERN(S_attributes, "attributes");
    INTERN(S_events, "events");
    INTERN(S_links, "links");
    INTERN(S_status, "status");
    INTERN(S_status_message, "status_message");
    INTERN(S_time_ns, "time_ns");
    PyObject *m = PyModule_Create(&mod);
    if (m && otlp_add_builder(m) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
