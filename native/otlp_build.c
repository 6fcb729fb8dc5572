/* orchestrator.tracing._otlp.Builder: the trace builder of a live run, in C, writing each span
 * it finishes as OTLP protobuf bytes.
 *
 * The same mapping as tracing/build.py's TraceBuilder (records in, OpenTelemetry GenAI spans
 * out), for what a live run sends over OTLP/HTTP protobuf without message content (the
 * default): no Span objects, no attribute dicts; the hot records of a turn (TurnStarted,
 * ProviderCall, AssistantMessage, ToolResults) are read and written here. What is rare or
 * needs Python's own arithmetic comes from the hooks the Python side passes in: the span ids
 * (BLAKE2b over the run and agent, tracing/ids.py), a call's price (providers/prices.py), the
 * attributes of the events on an agent's span, the cut of a text a model or a person chose to
 * its class (an end reason, a call's error, a tool's name: build.ended, build.call_error,
 * build.tool_name), and a record time in any other format than the one the log writes.
 *
 * Why C: tracing fed the Python builder two spans per turn of every agent; it cost 18-45 us per
 * turn of harness CPU in a running swarm, the goal allows about 35. Here, fed on the
 * agent's own path as each record is appended (warm in the cache), it costs a few.
 *
 * The tests (tests/native/test_otlp_build.py) feed generated logs to both builders and compare
 * the bytes of every span, in order. Anything here that differs from TraceBuilder(hold_agents=
 * False, content=False) is a bug of this file.
 *
 * Spans wait as CSpan values: their ids as bytes, their attributes already encoded (KeyValue
 * fields in order: the Python builder only ever adds a key once, so appending is the dict's
 * order), their events and links encoded as they come. An agent's invoke_agent spans stay (the
 * fork event and a child's parent find them by time); chat and tool spans are freed once
 * written.
 */
#include "otlp_wire.h"

/* --------------------------------------------------------------------------- spans */

typedef struct {
    unsigned char trace[16], id[8], parent[8];
    int has_parent;
    PyObject *name; /* str, owned */
    int kind;
    int64_t start, end;
    Buf attrs, events, links; /* encoded fields, tags included */
    int status;
    PyObject *message; /* str or NULL */
} CSpan;

static Buf heapbuf(void) {
    Buf b = {NULL, 0, 0, 1};
    return b;
}

static CSpan *span_new(const unsigned char *trace, PyObject *name, int kind, int64_t start) {
    CSpan *s = PyMem_Calloc(1, sizeof(CSpan));
    if (!s) {
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(s->trace, trace, 16);
    Py_INCREF(name);
    s->name = name;
    s->kind = kind;
    s->start = s->end = start;
    s->attrs = heapbuf();
    s->events = heapbuf();
    s->links = heapbuf();
    return s;
}

static void span_free(CSpan *s) {
    if (!s) return;
    Py_XDECREF(s->name);
    Py_XDECREF(s->message);
    PyMem_Free(s->attrs.p);
    PyMem_Free(s->events.p);
    PyMem_Free(s->links.p);
    PyMem_Free(s);
}

/* A hex id (as ids.py answers it) into raw bytes. */
static int unhex(PyObject *s, unsigned char *out, Py_ssize_t n) {
    if (!PyUnicode_Check(s) || !PyUnicode_IS_ASCII(s) || PyUnicode_GET_LENGTH(s) != 2 * n) {
        PyErr_SetString(PyExc_ValueError, "an id is not hex of the expected length");
        return -1;
    }
    const char *h = (const char *)PyUnicode_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            PyErr_SetString(PyExc_ValueError, "an id is not hex");
            return -1;
        }
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* One KeyValue in field ``field`` of ``b``: a C string key, a Python value. */
static int kv(Buf *b, int field, const char *key, PyObject *v) {
    Py_ssize_t m = open_ld(b, field);
    if (m < 0 || put_bytes_field(b, 1, key, (Py_ssize_t)strlen(key)) < 0) return -1;
    Py_ssize_t val = open_ld(b, 2);
    if (val < 0 || put_any(b, v, 0) < 0 || close_ld(b, val) < 0) return -1;
    return close_ld(b, m);
}


static int kv_cstr(Buf *b, int field, const char *key, const char *v) {
    Py_ssize_t m = open_ld(b, field);
    if (m < 0 || put_bytes_field(b, 1, key, (Py_ssize_t)strlen(key)) < 0) return -1;
    Py_ssize_t val = open_ld(b, 2);
    if (val < 0 || put_bytes_field(b, 1, v, (Py_ssize_t)strlen(v)) < 0 || close_ld(b, val) < 0)
        return -1;
    return close_ld(b, m);
}

/* span.fail(error_type, message): the status, its message, and error.type last. */
static int span_fail(CSpan *s, PyObject *type, PyObject *message) {
    s->status = 2;
    Py_INCREF(message);
    Py_XSETREF(s->message, message);
    return kv(&s->attrs, 9, "error.type", type);
}

static int span_fail_c(CSpan *s, const char *type, const char *message) {
    PyObject *t = PyUnicode_FromString(type), *m = PyUnicode_FromString(message);
    int rc = (t && m) ? span_fail(s, t, m) : -1;
    Py_XDECREF(t);
    Py_XDECREF(m);
    return rc;
}

/* The Span message, as protobuf.py_span_bytes writes it. */
static PyObject *span_encode(CSpan *s) {
    if (s->start < 0 || s->end < 0) {
        PyErr_SetString(PyExc_OverflowError, "a span time before 1970");
        return NULL;
    }
    Buf b = heapbuf();
    int rc = put_bytes_field(&b, 1, s->trace, 16);
    if (rc == 0) rc = put_bytes_field(&b, 2, s->id, 8);
    if (rc == 0 && s->has_parent) rc = put_bytes_field(&b, 4, s->parent, 8);
    if (rc == 0) rc = put_str(&b, 5, s->name);
    if (rc == 0) rc = put_tag(&b, 6, 0);
    if (rc == 0) rc = put_varint(&b, (uint64_t)s->kind);
    if (rc == 0) rc = put_tag(&b, 7, 1);
    if (rc == 0) rc = put_fixed64(&b, (uint64_t)s->start);
    if (rc == 0) rc = put_tag(&b, 8, 1);
    if (rc == 0) rc = put_fixed64(&b, (uint64_t)s->end);
    if (rc == 0) rc = put(&b, s->attrs.p, s->attrs.n);
    if (rc == 0) rc = put(&b, s->events.p, s->events.n);
    if (rc == 0) rc = put(&b, s->links.p, s->links.n);
    Py_ssize_t st = rc == 0 ? open_ld(&b, 15) : -1;
    if (st < 0) rc = -1;
    if (rc == 0 && s->message) {
        int truth = PyObject_IsTrue(s->message);
        rc = truth < 0 ? -1 : truth ? put_str(&b, 2, s->message) : 0;
    }
    if (rc == 0 && s->status) {
        rc = put_tag(&b, 3, 0);
        if (rc == 0) rc = put_varint(&b, (uint64_t)s->status);
    }
    if (rc == 0) rc = close_ld(&b, st);
    PyObject *out = rc < 0 ? NULL : PyBytes_FromStringAndSize((const char *)b.p, b.n);
    PyMem_Free(b.p);
    return out;
}

/* --------------------------------------------------------------------------- agents */

typedef struct {
    PyObject *call; /* the call's id, str */
    CSpan *span;
} Asked;

typedef struct {
    int64_t turn, bytes;
    int withdrawn;
} Weight;

typedef struct {
    PyObject *id, *parent, *kind, *depth, *provider, *model, *ids; /* parent, depth: or None */
    PyObject *offered; /* the tool names it was offered (frozenset), or None: hooks.offered */
    unsigned char trace[16];
    CSpan **segs; /* every invoke_agent span, oldest first */
    Py_ssize_t nsegs, capsegs;
    CSpan *open;
    int has_last;
    int64_t last_ns;
    PyObject *turn; /* the turn the next request opens, or NULL */
    CSpan *chat;    /* a successful attempt waiting for its AssistantMessage */
    long long calls;
    Asked *tools; /* asked for, not answered: in the order asked */
    Py_ssize_t ntools, captools;
    CSpan **ended; /* answered, waiting for a time to end at */
    Py_ssize_t nended, capended;
    int has_in_hand;
    int64_t in_hand;
    Weight *w; /* turn -> its weight as recorded */
    Py_ssize_t nw, capw;
    int64_t top; /* the largest turn in w */
    PyObject *chat_static, *tool_static, *names; /* dicts: encoded shared attributes, names */
} Agent;

static void agent_free(Agent *a) {
    if (!a) return;
    Py_XDECREF(a->id);
    Py_XDECREF(a->parent);
    Py_XDECREF(a->kind);
    Py_XDECREF(a->depth);
    Py_XDECREF(a->provider);
    Py_XDECREF(a->model);
    Py_XDECREF(a->ids);
    Py_XDECREF(a->offered);
    for (Py_ssize_t i = 0; i < a->nsegs; i++) span_free(a->segs[i]);
    PyMem_Free(a->segs);
    Py_XDECREF(a->turn);
    span_free(a->chat);
    for (Py_ssize_t i = 0; i < a->ntools; i++) {
        Py_XDECREF(a->tools[i].call);
        span_free(a->tools[i].span);
    }
    PyMem_Free(a->tools);
    for (Py_ssize_t i = 0; i < a->nended; i++) span_free(a->ended[i]);
    PyMem_Free(a->ended);
    PyMem_Free(a->w);
    Py_XDECREF(a->chat_static);
    Py_XDECREF(a->tool_static);
    Py_XDECREF(a->names);
    PyMem_Free(a);
}

static void agent_capsule_free(PyObject *cap) {
    agent_free((Agent *)PyCapsule_GetPointer(cap, "mnemon.agent"));
}

/* Room for one more item in a growing array. */
static int room(void **p, Py_ssize_t n, Py_ssize_t *cap, size_t item) {
    if (n < *cap) return 0;
    Py_ssize_t c = *cap ? *cap * 2 : 4;
    void *q = PyMem_Realloc(*p, (size_t)c * item);
    if (!q) {
        PyErr_NoMemory();
        return -1;
    }
    *p = q;
    *cap = c;
    return 0;
}

static Weight *weight_of(Agent *a, int64_t turn) {
    for (Py_ssize_t i = a->nw - 1; i >= 0; i--)
        if (a->w[i].turn == turn) return &a->w[i];
    return NULL;
}

/* a.bytes[turn] = bytes (add: += bytes, from 0). Turns come in increasing order but for an
 * agent's first records (an inherited table) and a rewind: a turn past the last one met is
 * new, with no search (a child inherits hundreds of turns). */
static int weigh(Agent *a, int64_t turn, int64_t bytes, int add) {
    Weight *w = a->nw && turn <= a->top ? weight_of(a, turn) : NULL;
    if (w) {
        w->bytes = add ? w->bytes + bytes : bytes;
        return 0;
    }
    if (room((void **)&a->w, a->nw, &a->capw, sizeof(Weight)) < 0) return -1;
    a->w[a->nw].turn = turn;
    a->w[a->nw].bytes = bytes;
    a->w[a->nw].withdrawn = 0;
    if (!a->nw || turn > a->top) a->top = turn;
    a->nw++;
    return 0;
}

/* --------------------------------------------------------------------------- the builder */

/* what the dispatch table answers for a record's type: its kind, and whether it has ``at`` */
enum {
    K_NONE = 0, K_STARTED, K_RESUMED, K_ENDED, K_TURN, K_CALL, K_MESSAGE, K_RESULTS, K_PROMPT,
    K_INHERITED, K_EVICTED, K_MARKED, K_SWEPT, K_STEERING, K_ASKED, K_DECIDED, K_CLEARED,
    K_REWOUND
};
#define HAS_AT 0x100

typedef struct {
    PyObject_HEAD
    PyObject *run;
    int latest_only;
    PyObject *agents;   /* agent id -> capsule(Agent) */
    PyObject *kinds;    /* type -> int (kind | HAS_AT) */
    PyObject *kind_of;  /* hook: type -> int, for a type not met yet */
    PyObject *trace_id, *agent_span_id, *agent_ids, *cost, *call_error, *ended, *time_ns,
        *provider_name, *event, *synod, *tool_use, *offered, *tool_name;
    PyObject *out; /* list of encoded spans, taken by ``take`` */
    int has_now;
    int64_t now;
    Py_ssize_t spans; /* written in all */
} Builder;

static PyObject *S_at, *S_latency_s, *S_purpose, *S_turn, *S_attempt, *S_usage, *S_model,
    *S_error, *S_total_input, *S_output_tokens, *S_cache_read_tokens, *S_cache_write_tokens,
    *S_reasoning_tokens, *S_stop_reason, *S_blocks, *S_id, *S_name, *S_input, *S_results,
    *S_tool_use_id, *S_is_error, *S_reason, *S_turns, *S_row, *S_bytes, *S_residue, *S_span,
    *S_to, *S_parent, *S_kind, *S_depth, *S_provider, *S_chat, *S_tool, *S_start;

static int intern_all(void) {
#define I(var, s) \
    if (!(var = PyUnicode_InternFromString(s))) return -1
    I(S_at, "at"); I(S_latency_s, "latency_s"); I(S_purpose, "purpose"); I(S_turn, "turn");
    I(S_attempt, "attempt"); I(S_usage, "usage"); I(S_model, "model"); I(S_error, "error");
    I(S_total_input, "total_input"); I(S_output_tokens, "output_tokens");
    I(S_cache_read_tokens, "cache_read_tokens"); I(S_cache_write_tokens, "cache_write_tokens");
    I(S_reasoning_tokens, "reasoning_tokens"); I(S_stop_reason, "stop_reason");
    I(S_blocks, "blocks"); I(S_id, "id"); I(S_name, "name"); I(S_input, "input");
    I(S_results, "results"); I(S_tool_use_id, "tool_use_id"); I(S_is_error, "is_error");
    I(S_reason, "reason"); I(S_turns, "turns"); I(S_row, "row"); I(S_bytes, "bytes");
    I(S_residue, "residue"); I(S_span, "span"); I(S_to, "to"); I(S_parent, "parent");
    I(S_kind, "kind"); I(S_depth, "depth"); I(S_provider, "provider"); I(S_chat, "chat");
    I(S_tool, "tool"); I(S_start, "start");
#undef I
    return 0;
}

/* ``o`` truthy; -1 on an error. */
static int truthy(PyObject *o) { return o == Py_None ? 0 : PyObject_IsTrue(o); }

static int as_i64(PyObject *o, int64_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_SetString(PyExc_TypeError, "not an int");
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = (int64_t)v;
    return 0;
}

static int emit(Builder *self, CSpan *s) {
    PyObject *b = span_encode(s);
    if (!b) return -1;
    int rc = PyList_Append(self->out, b);
    Py_DECREF(b);
    if (rc == 0) self->spans++;
    return rc;
}

/* Emit and free a chat or tool span. */
static int emit_free(Builder *self, CSpan *s) {
    int rc = emit(self, s);
    span_free(s);
    return rc;
}

static Agent *agent_get(Builder *self, PyObject *agent) {
    PyObject *cap = PyDict_GetItemWithError(self->agents, agent);
    if (!cap) return NULL;
    return (Agent *)PyCapsule_GetPointer(cap, "mnemon.agent");
}

/* ``started.field`` or None. */
static PyObject *field_or_none(PyObject *started, PyObject *name) {
    if (started == Py_None) Py_RETURN_NONE;
    return PyObject_GetAttr(started, name);
}

/* TraceBuilder._place: the trace of the agent's root, through the parents met so far. */
static int place(Builder *self, Agent *a) {
    PyObject *seen = PySet_New(NULL);
    if (!seen || PySet_Add(seen, a->id) < 0) {
        Py_XDECREF(seen);
        return -1;
    }
    Agent *root = a;
    for (;;) {
        if (root->parent == Py_None) break;
        Agent *p = agent_get(self, root->parent);
        if (!p) {
            if (PyErr_Occurred()) goto fail;
            break;
        }
        int in = PySet_Contains(seen, root->parent);
        if (in < 0) goto fail;
        if (in) break;
        root = p;
        if (PySet_Add(seen, root->id) < 0) goto fail;
    }
    PyObject *rid;
    if (root->parent == Py_None) {
        rid = root->id;
    } else {
        int in = PySet_Contains(seen, root->parent);
        if (in < 0) goto fail;
        rid = in ? root->id : root->parent;
    }
    PyObject *t = PyObject_CallFunctionObjArgs(self->trace_id, self->run, rid, NULL);
    if (!t) goto fail;
    int rc = unhex(t, a->trace, 16);
    Py_DECREF(t);
    Py_DECREF(seen);
    return rc;
fail:
    Py_DECREF(seen);
    return -1;
}

/* TraceBuilder.meet */
static Agent *meet(Builder *self, PyObject *agent, PyObject *started) {
    Agent *a = agent_get(self, agent);
    if (a || PyErr_Occurred()) return a;
    a = PyMem_Calloc(1, sizeof(Agent));
    if (!a) {
        PyErr_NoMemory();
        return NULL;
    }
    PyObject *cap = PyCapsule_New(a, "mnemon.agent", agent_capsule_free);
    if (!cap) {
        PyMem_Free(a);
        return NULL;
    }
    Py_INCREF(agent);
    a->id = agent;
    if (!(a->chat_static = PyDict_New()) || !(a->tool_static = PyDict_New()) ||
        !(a->names = PyDict_New()))
        goto fail;
    if (!(a->parent = field_or_none(started, S_parent))) goto fail;
    PyObject *kind = field_or_none(started, S_kind);
    if (!kind) goto fail;
    int k = truthy(kind);
    if (k < 0) {
        Py_DECREF(kind);
        goto fail;
    }
    if (k) {
        a->kind = kind;
    } else {
        Py_DECREF(kind);
        if (!(a->kind = PyUnicode_FromString("root"))) goto fail;
    }
    if (!(a->depth = field_or_none(started, S_depth))) goto fail;
    PyObject *provider = field_or_none(started, S_provider);
    if (!provider) goto fail;
    a->provider = PyObject_CallOneArg(self->provider_name, provider);
    Py_DECREF(provider);
    if (!a->provider) goto fail;
    if (!(a->model = field_or_none(started, S_model))) goto fail;
    if (!(a->offered = PyObject_CallOneArg(self->offered, started))) goto fail;
    if (!(a->ids = PyObject_CallFunctionObjArgs(self->agent_ids, self->run, agent, NULL)))
        goto fail;
    if (PyDict_SetItem(self->agents, agent, cap) < 0) goto fail;
    Py_DECREF(cap);
    if (place(self, a) < 0) return NULL; /* met (as Python's meet), its trace unknown */
    return a;
fail:
    Py_DECREF(cap); /* frees a */
    return NULL;
}

static CSpan *segment(Agent *a) { return a->open ? a->open : a->nsegs ? a->segs[a->nsegs - 1] : NULL; }

static CSpan *segment_at(Agent *a, int64_t t) {
    CSpan *found = a->nsegs ? a->segs[0] : NULL;
    for (Py_ssize_t i = 0; i < a->nsegs; i++)
        if (a->segs[i]->start <= t) found = a->segs[i];
    return found;
}

/* ``a.last_ns or 0`` */
static int64_t last_or(Agent *a, int64_t dflt) { return a->has_last && a->last_ns ? a->last_ns : dflt; }

/* An Event message appended to ``seg``'s events: ``attrs`` a dict, or NULL for none. */
static int add_event(CSpan *seg, const char *name, int64_t t, PyObject *attrs) {
    Buf *b = &seg->events;
    Py_ssize_t m = open_ld(b, 11);
    if (m < 0 || put_tag(b, 1, 1) < 0 || put_fixed64(b, (uint64_t)t) < 0 ||
        put_bytes_field(b, 2, name, (Py_ssize_t)strlen(name)) < 0)
        return -1;
    if (attrs && put_attributes(b, 3, attrs) < 0) return -1;
    return close_ld(b, m);
}

/* TraceBuilder._event: on the agent's latest span, at its last time. */
static int agent_event(Agent *a, const char *name, PyObject *attrs) {
    CSpan *seg = segment(a);
    if (!seg) return 0;
    return add_event(seg, name, last_or(a, seg->start), attrs);
}

static int end_tools(Builder *self, Agent *a, int64_t end) {
    for (Py_ssize_t i = 0; i < a->nended; i++) {
        CSpan *s = a->ended[i];
        a->ended[i] = NULL;
        s->end = s->start > end ? s->start : end;
        if (emit_free(self, s) < 0) {
            /* the rest stay to be freed with the agent */
            memmove(a->ended, a->ended + i + 1, (size_t)(a->nended - i - 1) * sizeof(CSpan *));
            a->nended -= i + 1;
            return -1;
        }
    }
    a->nended = 0;
    return 0;
}

/* TraceBuilder._close; ``has_end``: an end given (else the agent's last time). */
static int close_seg(Builder *self, Agent *a, PyObject *reason, int has_end, int64_t end) {
    CSpan *seg = a->open;
    if (!seg) return 0;
    if (!has_end) end = last_or(a, seg->start);
    if (end_tools(self, a, end) < 0) return -1;
    while (a->ntools) {
        Asked q = a->tools[0];
        memmove(a->tools, a->tools + 1, (size_t)(a->ntools - 1) * sizeof(Asked));
        a->ntools--;
        Py_DECREF(q.call);
        q.span->end = q.span->start > end ? q.span->start : end;
        if (span_fail_c(q.span, "interrupted",
                        "the agent's log holds no result for this call") < 0 ||
            emit_free(self, q.span) < 0)
            return -1;
    }
    seg->end = end > seg->start ? end : seg->start;
    if (reason && reason != Py_None) {
        /* (end_reason, error.type or None): a failure's detail cut to its class */
        PyObject *cut = PyObject_CallOneArg(self->ended, reason);
        if (!cut) return -1;
        if (!PyTuple_Check(cut) || PyTuple_GET_SIZE(cut) != 2) {
            Py_DECREF(cut);
            PyErr_SetString(PyExc_TypeError, "hooks.ended must answer a pair");
            return -1;
        }
        PyObject *shown = PyTuple_GET_ITEM(cut, 0), *type = PyTuple_GET_ITEM(cut, 1);
        int rc = kv(&seg->attrs, 9, "mnemon.agent.end_reason", shown);
        if (rc == 0 && type != Py_None) rc = span_fail(seg, type, shown);
        Py_DECREF(cut);
        if (rc < 0) return -1;
    }
    a->open = NULL;
    return emit(self, seg);
}

static int provider_attrs(Builder *self, Agent *a, Buf *b) {
    if (kv(b, 9, "gen_ai.provider.name", a->provider) < 0) return -1;
    if (!self->latest_only && kv(b, 9, "gen_ai.system", a->provider) < 0) return -1;
    return 0;
}

/* ids.agent_span_id(run, agent, key) as bytes */
static int agent_span_id(Builder *self, Agent *a, PyObject *key, unsigned char *out) {
    PyObject *h = PyObject_CallFunctionObjArgs(self->agent_span_id, self->run, a->id, key, NULL);
    if (!h) return -1;
    int rc = unhex(h, out, 8);
    Py_DECREF(h);
    return rc;
}

/* TraceBuilder._open */
static int open_seg(Builder *self, Agent *a, PyObject *at, int has_before, int64_t before,
                    int first) {
    if (a->open) {
        if (kv_cstr(&a->open->attrs, 9, "mnemon.agent.state", "interrupted") < 0 ||
            close_seg(self, a, NULL, has_before, before) < 0)
            return -1;
    }
    int64_t start = last_or(a, 0);
    PyObject *key = first ? (Py_INCREF(S_start), S_start)
                    : at != Py_None ? PyUnicode_FromFormat("resumed@%S", at)
                                    : PyUnicode_FromFormat("resumed#%zd", a->nsegs);
    if (!key) return -1;
    PyObject *name = PyUnicode_FromFormat("invoke_agent %U", a->id);
    if (!name) {
        Py_DECREF(key);
        return -1;
    }
    CSpan *seg = span_new(a->trace, name, 1, start);
    Py_DECREF(name);
    if (!seg) {
        Py_DECREF(key);
        return -1;
    }
    int rc = agent_span_id(self, a, key, seg->id);
    Py_DECREF(key);
    Buf *b = &seg->attrs;
    if (rc < 0 || kv_cstr(b, 9, "gen_ai.operation.name", "invoke_agent") < 0 ||
        kv(b, 9, "gen_ai.agent.id", a->id) < 0 || kv(b, 9, "gen_ai.agent.name", a->id) < 0 ||
        kv(b, 9, "mnemon.agent.kind", a->kind) < 0 || provider_attrs(self, a, b) < 0)
        goto fail;
    int m = truthy(a->model);
    if (m < 0 || (m && kv(b, 9, "gen_ai.request.model", a->model) < 0)) goto fail;
    if (a->depth != Py_None && kv(b, 9, "mnemon.agent.depth", a->depth) < 0) goto fail;
    if (a->parent != Py_None && kv(b, 9, "mnemon.agent.parent", a->parent) < 0) goto fail;
    if (!first) {
        if (kv(b, 9, "mnemon.agent.resumed", Py_True) < 0) goto fail;
        Buf *l = &seg->links;
        unsigned char sid[8];
        if (agent_span_id(self, a, S_start, sid) < 0) goto fail;
        Py_ssize_t lm = open_ld(l, 13);
        if (lm < 0 || put_bytes_field(l, 1, a->trace, 16) < 0 ||
            put_bytes_field(l, 2, sid, 8) < 0 ||
            kv_cstr(l, 4, "mnemon.link", "resumed") < 0 || close_ld(l, lm) < 0)
            goto fail;
    }
    if (room((void **)&a->segs, a->nsegs, &a->capsegs, sizeof(CSpan *)) < 0) goto fail;
    a->segs[a->nsegs++] = seg;
    a->open = seg;
    Agent *p = NULL;
    if (a->parent != Py_None) {
        p = agent_get(self, a->parent);
        if (!p && PyErr_Occurred()) return -1;
    }
    if (p) { /* its parent: the parent's span open at its start */
        CSpan *ps = segment_at(p, seg->start);
        if (ps) {
            memcpy(seg->parent, ps->id, 8);
            seg->has_parent = 1;
        }
    }
    if (first && p) { /* a fork: told on the parent's span */
        CSpan *ps = segment_at(p, start);
        if (ps) {
            PyObject *attrs = Py_BuildValue("{sOsO}", "mnemon.child", a->id, "mnemon.child.kind",
                                            a->kind);
            if (!attrs) return -1;
            int r = add_event(ps, "mnemon.fork", start, attrs);
            Py_DECREF(attrs);
            if (r < 0) return -1;
        }
    }
    return 0;
fail:
    span_free(seg);
    return -1;
}

/* TraceBuilder._chat: a chat span, its attributes up to the price. */
static CSpan *chat_span(Builder *self, Agent *a, PyObject *span_id, int64_t start, int64_t end,
                        PyObject *attempt, PyObject *usage, PyObject *model) {
    CSpan *seg = segment(a);
    int am = truthy(a->model);
    if (am < 0) return NULL;
    PyObject *request_model = am ? a->model : model;
    int rm = truthy(request_model);
    if (rm < 0) return NULL;
    PyObject *stat = PyDict_GetItemWithError(a->chat_static, request_model);
    if (!stat) {
        if (PyErr_Occurred()) return NULL;
        Buf b = heapbuf();
        int rc = kv_cstr(&b, 9, "gen_ai.operation.name", "chat");
        if (rc == 0) rc = kv(&b, 9, "gen_ai.agent.id", a->id);
        if (rc == 0) rc = provider_attrs(self, a, &b);
        if (rc == 0 && rm) rc = kv(&b, 9, "gen_ai.request.model", request_model);
        stat = rc < 0 ? NULL : PyBytes_FromStringAndSize((const char *)b.p, b.n);
        PyMem_Free(b.p);
        if (!stat) return NULL;
        rc = PyDict_SetItem(a->chat_static, request_model, stat);
        Py_DECREF(stat); /* the dict holds it */
        if (rc < 0) return NULL;
    }
    PyObject *name = PyDict_GetItemWithError(a->names, request_model);
    if (!name) {
        if (PyErr_Occurred()) return NULL;
        name = rm ? PyUnicode_FromFormat("chat %S", request_model) : PyUnicode_FromString("chat");
        if (!name) return NULL;
        int rc = PyDict_SetItem(a->names, request_model, name);
        Py_DECREF(name);
        if (rc < 0) return NULL;
    }
    CSpan *s = span_new(a->trace, name, 3, start);
    if (!s) return NULL;
    if (unhex(span_id, s->id, 8) < 0) goto fail;
    if (seg) {
        memcpy(s->parent, seg->id, 8);
        s->has_parent = 1;
    }
    Buf *b = &s->attrs;
    if (put(b, PyBytes_AS_STRING(stat), PyBytes_GET_SIZE(stat)) < 0 ||
        kv(b, 9, "mnemon.attempt", attempt) < 0)
        goto fail;
    if (usage != Py_None) {
        PyObject *v;
#define USAGE(attr, key)                       \
    if (!(v = PyObject_GetAttr(usage, attr))) goto fail; \
    if (kv(b, 9, key, v) < 0) {                \
        Py_DECREF(v);                          \
        goto fail;                             \
    }                                          \
    Py_DECREF(v);
        USAGE(S_total_input, "gen_ai.usage.input_tokens");
        USAGE(S_output_tokens, "gen_ai.usage.output_tokens");
        USAGE(S_cache_read_tokens, "gen_ai.usage.cache_read.input_tokens");
        USAGE(S_cache_write_tokens, "gen_ai.usage.cache_creation.input_tokens");
#undef USAGE
        if (!(v = PyObject_GetAttr(usage, S_reasoning_tokens))) goto fail;
        int rc = PyLong_Check(v) ? kv(b, 9, "gen_ai.usage.reasoning.output_tokens", v) : 0;
        Py_DECREF(v);
        if (rc < 0) goto fail;
        int mm = truthy(model);
        if (mm < 0) goto fail;
        PyObject *c = PyObject_CallFunctionObjArgs(self->cost, mm ? model : a->model, usage, NULL);
        if (!c) goto fail;
        rc = kv(b, 9, "mnemon.cost_usd", c);
        Py_DECREF(c);
        if (rc < 0) goto fail;
    }
    s->end = end > start ? end : start;
    return s;
fail:
    span_free(s);
    return NULL;
}

static PyObject *attr(PyObject *o, PyObject *name) { return PyObject_GetAttr(o, name); }

/* A ProviderCall's ``int(latency_s * 1e9)``: read once a record, by ``feed``. */
static int latency_ns(PyObject *rec, int64_t *out) {
    PyObject *lat = attr(rec, S_latency_s);
    if (!lat) return -1;
    double l = PyFloat_AsDouble(lat);
    Py_DECREF(lat);
    if (l == -1.0 && PyErr_Occurred()) return -1;
    double ns = l * 1e9;
    if (!(ns > -9.2e18 && ns < 9.2e18)) {
        PyErr_SetString(PyExc_OverflowError, "a call's latency out of range");
        return -1;
    }
    *out = (int64_t)ns;
    return 0;
}

/* ``o.name`` as a 64-bit int (a turn, a row's id or bytes). */
static int int_attr(PyObject *o, PyObject *name, int64_t *out) {
    PyObject *v = attr(o, name);
    if (!v) return -1;
    int rc = as_i64(v, out);
    Py_DECREF(v);
    return rc;
}

static int on_call(Builder *self, Agent *a, PyObject *rec, int64_t lat_ns) {
    a->calls++;
    int64_t end = self->has_now && self->now ? self->now : last_or(a, 0);
    int64_t start = end - lat_ns;
    PyObject *purpose = NULL, *attempt = NULL, *at = NULL, *sid = NULL, *usage = NULL,
             *model = NULL, *error = NULL;
    CSpan *s = NULL;
    int rc = -1;
    if (!(purpose = attr(rec, S_purpose)) || !(attempt = attr(rec, S_attempt)) ||
        !(at = attr(rec, S_at)) || !(usage = attr(rec, S_usage)) ||
        !(model = attr(rec, S_model)) || !(error = attr(rec, S_error)))
        goto done;
    PyObject *turn = purpose != Py_None || !a->turn ? Py_None : a->turn;
    if (!(sid = PyObject_CallMethodObjArgs(a->ids, S_chat, turn, attempt, at, NULL))) goto done;
    if (!(s = chat_span(self, a, sid, start, end, attempt, usage, model))) goto done;
    if (purpose != Py_None && kv(&s->attrs, 9, "mnemon.purpose", purpose) < 0) goto done;
    if (error != Py_None) {
        /* (error.type, status message): the provider's own words cut to their class */
        PyObject *cut = PyObject_CallOneArg(self->call_error, error);
        if (!cut) goto done;
        int r = -1;
        if (PyTuple_Check(cut) && PyTuple_GET_SIZE(cut) == 2)
            r = span_fail(s, PyTuple_GET_ITEM(cut, 0), PyTuple_GET_ITEM(cut, 1));
        else
            PyErr_SetString(PyExc_TypeError, "hooks.call_error must answer a pair");
        Py_DECREF(cut);
        if (r < 0) goto done;
        rc = emit_free(self, s);
        s = NULL;
    } else if (turn == Py_None) {
        rc = emit_free(self, s);
        s = NULL;
    } else {
        a->chat = s;
        s = NULL;
        rc = 0;
    }
done:
    span_free(s);
    Py_XDECREF(purpose);
    Py_XDECREF(attempt);
    Py_XDECREF(at);
    Py_XDECREF(sid);
    Py_XDECREF(usage);
    Py_XDECREF(model);
    Py_XDECREF(error);
    return rc;
}

/* a.tools[call] = span (a call asked for again keeps its place, as a dict's key) */
static int ask(Agent *a, PyObject *call, CSpan *span) {
    for (Py_ssize_t i = 0; i < a->ntools; i++) {
        int eq = PyObject_RichCompareBool(a->tools[i].call, call, Py_EQ);
        if (eq < 0) return -1;
        if (eq) {
            span_free(a->tools[i].span);
            a->tools[i].span = span;
            return 0;
        }
    }
    if (room((void **)&a->tools, a->ntools, &a->captools, sizeof(Asked)) < 0) return -1;
    Py_INCREF(call);
    a->tools[a->ntools].call = call;
    a->tools[a->ntools].span = span;
    a->ntools++;
    return 0;
}

static int on_message(Builder *self, Agent *a, PyObject *rec, Py_ssize_t length) {
    PyObject *turn = NULL, *model = NULL, *stop = NULL, *blocks = NULL, *seq = NULL;
    int rc = -1;
    int64_t t64;
    if (!(turn = attr(rec, S_turn)) || as_i64(turn, &t64) < 0) goto done;
    a->has_in_hand = 1;
    a->in_hand = t64;
    if (weigh(a, t64, length, 0) < 0) goto done;
    CSpan *span = a->chat;
    a->chat = NULL;
    if (!(model = attr(rec, S_model))) goto fail_span;
    if (!span && a->calls == 0) { /* a log with no ProviderCall: the message's usage */
        int64_t t = last_or(a, 0);
        PyObject *zero = PyLong_FromLong(0), *usage = attr(rec, S_usage), *sid = NULL;
        if (zero && usage)
            sid = PyObject_CallMethodObjArgs(a->ids, S_chat, turn, zero, Py_None, NULL);
        if (sid) span = chat_span(self, a, sid, t, t, zero, usage, model);
        Py_XDECREF(zero);
        Py_XDECREF(usage);
        Py_XDECREF(sid);
        if (!span) goto done;
    }
    if (span) {
        int m = truthy(model);
        if (m < 0 || (m && kv(&span->attrs, 9, "gen_ai.response.model", model) < 0))
            goto fail_span;
        if (!(stop = attr(rec, S_stop_reason))) goto fail_span;
        int st = truthy(stop);
        if (st < 0) goto fail_span;
        if (st) {
            PyObject *reasons = PyList_New(1);
            if (!reasons) goto fail_span;
            Py_INCREF(stop);
            PyList_SET_ITEM(reasons, 0, stop);
            int r = kv(&span->attrs, 9, "gen_ai.response.finish_reasons", reasons);
            Py_DECREF(reasons);
            if (r < 0) goto fail_span;
        }
        if (kv(&span->attrs, 9, "mnemon.turn", turn) < 0) goto fail_span;
        int r = emit_free(self, span);
        span = NULL;
        if (r < 0) goto done;
    }
    CSpan *seg = segment(a);
    int64_t start = last_or(a, 0);
    if (!(blocks = attr(rec, S_blocks)) || !(seq = PySequence_Fast(blocks, "blocks"))) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *blk = PySequence_Fast_GET_ITEM(seq, i);
        int is = PyObject_IsInstance(blk, self->tool_use);
        if (is < 0) goto done;
        if (!is) continue;
        PyObject *name = attr(blk, S_name), *id = NULL, *sid = NULL, *input = NULL;
        CSpan *tool = NULL;
        int ok = 0;
        if (!name) goto done;
        /* its shared attributes encoded, and its name: (bytes, str), once per tool */
        PyObject *known = PyDict_GetItemWithError(a->tool_static, name);
        if (!known) {
            if (PyErr_Occurred()) goto block_done;
            /* the name the model wrote, as the trace may show it (hooks.tool_name) */
            PyObject *shown = PyObject_CallFunctionObjArgs(self->tool_name, name, a->offered, NULL);
            if (!shown) goto block_done;
            Buf b = heapbuf();
            int r = kv_cstr(&b, 9, "gen_ai.operation.name", "execute_tool");
            if (r == 0) r = kv(&b, 9, "gen_ai.tool.name", shown);
            if (r == 0) r = kv_cstr(&b, 9, "gen_ai.tool.type", "function");
            if (r == 0) r = kv(&b, 9, "gen_ai.agent.id", a->id);
            PyObject *bytes = r < 0 ? NULL : PyBytes_FromStringAndSize((const char *)b.p, b.n);
            PyMem_Free(b.p);
            PyObject *sname = bytes ? PyUnicode_FromFormat("execute_tool %S", shown) : NULL;
            Py_DECREF(shown);
            known = sname ? PyTuple_Pack(2, bytes, sname) : NULL;
            Py_XDECREF(bytes);
            Py_XDECREF(sname);
            if (!known) goto block_done;
            r = PyDict_SetItem(a->tool_static, name, known);
            Py_DECREF(known); /* the dict holds it */
            if (r < 0) goto block_done;
        }
        PyObject *stat = PyTuple_GET_ITEM(known, 0);
        tool = span_new(a->trace, PyTuple_GET_ITEM(known, 1), 1, start);
        if (!tool) goto block_done;
        if (!(id = attr(blk, S_id))) goto block_done;
        if (!(sid = PyObject_CallMethodObjArgs(a->ids, S_tool, turn, id, NULL)) ||
            unhex(sid, tool->id, 8) < 0)
            goto block_done;
        if (seg) {
            memcpy(tool->parent, seg->id, 8);
            tool->has_parent = 1;
        }
        if (put(&tool->attrs, PyBytes_AS_STRING(stat), PyBytes_GET_SIZE(stat)) < 0 ||
            kv(&tool->attrs, 9, "gen_ai.tool.call.id", id) < 0 ||
            kv(&tool->attrs, 9, "mnemon.turn", turn) < 0 || ask(a, id, tool) < 0)
            goto block_done;
        tool = NULL;
        if (seg) {
            int synod = PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "agents_synod") == 0;
            if (synod) {
                if (!(input = attr(blk, S_input))) goto block_done;
                if (PyDict_Check(input)) {
                    PyObject *attrs = PyObject_CallOneArg(self->synod, input);
                    if (!attrs) goto block_done;
                    int r = add_event(seg, "mnemon.synod", start, attrs);
                    Py_DECREF(attrs);
                    if (r < 0) goto block_done;
                }
            }
        }
        ok = 1;
    block_done:
        span_free(tool);
        Py_XDECREF(name);
        Py_XDECREF(id);
        Py_XDECREF(sid);
        Py_XDECREF(input);
        if (!ok) goto done;
    }
    rc = 0;
    goto done;
fail_span:
    span_free(span);
done:
    Py_XDECREF(turn);
    Py_XDECREF(model);
    Py_XDECREF(stop);
    Py_XDECREF(blocks);
    Py_XDECREF(seq);
    return rc;
}

static int grow_turn(Agent *a, Py_ssize_t length) {
    return a->has_in_hand ? weigh(a, a->in_hand, length, 1) : 0;
}

static int on_results(Builder *self, Agent *a, PyObject *rec, Py_ssize_t length) {
    if (grow_turn(a, length) < 0) return -1;
    PyObject *results = attr(rec, S_results);
    if (!results) return -1;
    PyObject *seq = PySequence_Fast(results, "results");
    Py_DECREF(results);
    if (!seq) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *r = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *call = attr(r, S_tool_use_id);
        if (!call) {
            rc = -1;
            break;
        }
        CSpan *span = NULL;
        for (Py_ssize_t j = 0; j < a->ntools; j++) {
            int eq = PyObject_RichCompareBool(a->tools[j].call, call, Py_EQ);
            if (eq < 0) {
                rc = -1;
                break;
            }
            if (eq) {
                span = a->tools[j].span;
                Py_DECREF(a->tools[j].call);
                memmove(a->tools + j, a->tools + j + 1,
                        (size_t)(a->ntools - j - 1) * sizeof(Asked));
                a->ntools--;
                break;
            }
        }
        Py_DECREF(call);
        if (rc < 0 || !span) continue;
        PyObject *err = attr(r, S_is_error);
        int e = err ? PyObject_IsTrue(err) : -1;
        Py_XDECREF(err);
        if (e < 0 || (e && span_fail_c(span, "tool_error", "the tool answered an error") < 0) ||
            room((void **)&a->ended, a->nended, &a->capended, sizeof(CSpan *)) < 0) {
            span_free(span);
            rc = -1;
            break;
        }
        a->ended[a->nended++] = span;
    }
    Py_DECREF(seq);
    return rc;
}

/* An event whose attributes the Python side makes (``hooks.event(kind, record, weight,
 * offered)``). */
static int py_event(Builder *self, Agent *a, int kind, const char *name, PyObject *rec,
                    long long weight) {
    PyObject *attrs = PyObject_CallFunction(self->event, "iOLO", kind, rec, weight,
                                            a->offered ? a->offered : Py_None);
    if (!attrs) return -1;
    int rc = agent_event(a, name, attrs);
    Py_DECREF(attrs);
    return rc;
}

static int on_evicted(Builder *self, Agent *a, PyObject *rec, Py_ssize_t length) {
    if (grow_turn(a, length) < 0) return -1;
    PyObject *res = attr(rec, S_residue);
    if (!res) return -1;
    PyObject *span = attr(res, S_span);
    Py_DECREF(res);
    if (!span) return -1;
    PyObject *lo_o = PySequence_GetItem(span, 0), *hi_o = PySequence_GetItem(span, 1);
    Py_DECREF(span);
    int64_t lo, hi;
    int rc = lo_o && hi_o && as_i64(lo_o, &lo) == 0 && as_i64(hi_o, &hi) == 0 ? 0 : -1;
    Py_XDECREF(lo_o);
    Py_XDECREF(hi_o);
    if (rc < 0) return -1;
    long long weight = 0;
    for (Py_ssize_t i = 0; i < a->nw; i++)
        if (lo <= a->w[i].turn && a->w[i].turn <= hi && !a->w[i].withdrawn) weight += a->w[i].bytes;
    return py_event(self, a, K_EVICTED, "mnemon.eviction", rec, weight);
}

static int on_inherited(Agent *a, PyObject *rec) {
    PyObject *turns = attr(rec, S_turns);
    if (!turns) return -1;
    PyObject *seq = PySequence_Fast(turns, "turns");
    Py_DECREF(turns);
    if (!seq) return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *row = attr(PySequence_Fast_GET_ITEM(seq, i), S_row);
        int64_t t, n;
        rc = row && int_attr(row, S_id, &t) == 0 && int_attr(row, S_bytes, &n) == 0
                 ? weigh(a, t, n, 0) : -1;
        Py_XDECREF(row);
    }
    Py_DECREF(seq);
    return rc;
}

/* A record's time in nanoseconds, as spans.time_ns reads it: the log's own format here, any
 * other through the hook. ``*has`` 0 when absent or unreadable. A time after 2261 does not fit
 * the signed 64 bits kept here: the hook's answer then raises, and the record is not traced
 * (Python's builder would write it, as an unsigned fixed64, up to 2554). */
static int days_from_civil(int64_t y, int64_t m, int64_t d, int64_t *out) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    *out = era * 146097 + doe - 719468;
    return 0;
}

static int digits(const char *s, int n, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

static int read_time(Builder *self, PyObject *at, int *has, int64_t *ns) {
    *has = 0;
    if (at == Py_None) return 0;
    if (PyUnicode_Check(at) && PyUnicode_IS_ASCII(at) && PyUnicode_GET_LENGTH(at) == 27) {
        const char *s = (const char *)PyUnicode_DATA(at);
        int64_t Y, M, D, h, mi, se, us;
        if (s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':' &&
            s[19] == '.' && s[26] == 'Z' && digits(s, 4, &Y) == 0 && digits(s + 5, 2, &M) == 0 &&
            digits(s + 8, 2, &D) == 0 && digits(s + 11, 2, &h) == 0 &&
            digits(s + 14, 2, &mi) == 0 && digits(s + 17, 2, &se) == 0 &&
            digits(s + 20, 6, &us) == 0 && Y >= 1 && Y <= 2261 && M >= 1 && M <= 12) {
            int64_t days;
            days_from_civil(Y, M, 1, &days);
            days += D - 1;
            *ns = ((days * 86400 + h * 3600 + mi * 60 + se) * 1000000 + us) * 1000;
            *has = 1;
            return 0;
        }
    }
    PyObject *t = PyObject_CallOneArg(self->time_ns, at);
    if (!t) return -1;
    int rc = 0;
    if (t != Py_None) {
        rc = as_i64(t, ns);
        if (rc == 0) *has = 1;
    }
    Py_DECREF(t);
    return rc;
}

/* The kind of a record's type: from the table, or the hook once per new type. */
static int kind_of(Builder *self, PyObject *rec) {
    PyObject *tp = (PyObject *)Py_TYPE(rec);
    PyObject *k = PyDict_GetItemWithError(self->kinds, tp);
    if (!k) {
        if (PyErr_Occurred()) return -1;
        k = PyObject_CallOneArg(self->kind_of, tp);
        if (!k) return -1;
        int rc = PyDict_SetItem(self->kinds, tp, k);
        Py_DECREF(k);
        if (rc < 0) return -1;
    }
    long v = PyLong_AsLong(k);
    return v == -1 && PyErr_Occurred() ? -1 : (int)v;
}

static int feed(Builder *self, PyObject *agent, PyObject *rec, Py_ssize_t length) {
    int kind = kind_of(self, rec);
    if (kind < 0) return -1;
    int has_at = kind & HAS_AT;
    kind &= ~HAS_AT;
    Agent *a = agent_get(self, agent);
    if (!a) {
        if (PyErr_Occurred()) return -1;
        a = meet(self, agent, kind == K_STARTED ? rec : Py_None);
        if (!a) {
            if (PyErr_Occurred()) return -1;
        }
    }
    int has_before = a->has_last;
    int64_t before = a->last_ns;
    PyObject *at = NULL;
    self->has_now = 0;
    if (has_at) {
        if (!(at = attr(rec, S_at))) return -1;
        int rc = read_time(self, at, &self->has_now, &self->now);
        if (rc < 0) {
            Py_DECREF(at);
            return -1;
        }
    } else {
        at = Py_None;
        Py_INCREF(at);
    }
    int rc = -1;
    int64_t lat_ns = 0;
    if (kind == K_CALL && latency_ns(rec, &lat_ns) < 0) goto done;
    if (self->has_now) {
        int64_t begin = kind == K_CALL ? self->now - lat_ns : self->now;
        if (a->nended && end_tools(self, a, has_before && before > begin ? before : begin) < 0)
            goto done;
        a->last_ns = has_before && before > self->now ? before : self->now;
        a->has_last = 1;
    }
    if (a->chat && kind != K_MESSAGE) { /* a success whose message never came */
        CSpan *c = a->chat;
        a->chat = NULL;
        if (emit_free(self, c) < 0) goto done;
    }
    switch (kind) {
    case K_STARTED:
        rc = open_seg(self, a, at, has_before, before, 1);
        break;
    case K_RESUMED:
        rc = open_seg(self, a, at, has_before, before, 0);
        break;
    case K_ENDED: {
        PyObject *reason = attr(rec, S_reason);
        if (!reason) break;
        rc = close_seg(self, a, reason, 0, 0);
        Py_DECREF(reason);
        break;
    }
    case K_TURN: {
        PyObject *t = attr(rec, S_turn);
        if (!t) break;
        Py_XSETREF(a->turn, t);
        rc = 0;
        break;
    }
    case K_CALL:
        rc = on_call(self, a, rec, lat_ns);
        break;
    case K_MESSAGE:
        rc = on_message(self, a, rec, length);
        break;
    case K_RESULTS:
        rc = on_results(self, a, rec, length);
        break;
    case K_PROMPT: {
        int64_t t64;
        if (int_attr(rec, S_turn, &t64) < 0) break;
        a->has_in_hand = 1;
        a->in_hand = t64;
        rc = weigh(a, t64, length, 0);
        break;
    }
    case K_INHERITED:
        rc = on_inherited(a, rec);
        break;
    case K_EVICTED:
        rc = on_evicted(self, a, rec, length);
        break;
    case K_MARKED:
        rc = grow_turn(a, length) < 0 ? -1 : py_event(self, a, kind, "mnemon.mark", rec, 0);
        break;
    case K_SWEPT:
        rc = grow_turn(a, length) < 0 ? -1 : py_event(self, a, kind, "mnemon.sweep", rec, 0);
        break;
    case K_STEERING:
        rc = grow_turn(a, length);
        break;
    case K_ASKED:
        rc = py_event(self, a, kind, "mnemon.approval.requested", rec, 0);
        break;
    case K_DECIDED:
        rc = py_event(self, a, kind, "mnemon.approval.decided", rec, 0);
        break;
    case K_CLEARED:
        for (Py_ssize_t i = 0; i < a->nw; i++) a->w[i].withdrawn = 1;
        rc = agent_event(a, "mnemon.clear", NULL);
        break;
    case K_REWOUND: {
        int64_t t;
        if (int_attr(rec, S_to, &t) < 0) break;
        for (Py_ssize_t i = 0; i < a->nw; i++)
            if (a->w[i].turn > t) a->w[i].withdrawn = 1;
        rc = py_event(self, a, kind, "mnemon.rewind", rec, 0);
        break;
    }
    default:
        rc = 0;
    }
done:
    Py_DECREF(at);
    return rc;
}

/* --------------------------------------------------------------------------- the type */

static PyObject *Builder_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"run", "latest_only", "hooks", NULL};
    PyObject *run, *hooks;
    int latest_only;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "UpO:Builder", names, &run, &latest_only, &hooks))
        return NULL;
    Builder *self = (Builder *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    Py_INCREF(run);
    self->run = run;
    self->latest_only = latest_only;
    if (!(self->agents = PyDict_New()) || !(self->kinds = PyDict_New()) ||
        !(self->out = PyList_New(0)))
        goto fail;
#define HOOK(var, s) \
    if (!(self->var = PyObject_GetAttrString(hooks, s))) goto fail
    HOOK(kind_of, "kind_of");
    HOOK(trace_id, "trace_id");
    HOOK(agent_span_id, "agent_span_id");
    HOOK(agent_ids, "agent_ids");
    HOOK(cost, "cost");
    HOOK(call_error, "call_error");
    HOOK(ended, "ended");
    HOOK(time_ns, "time_ns");
    HOOK(provider_name, "provider_name");
    HOOK(event, "event");
    HOOK(synod, "synod");
    HOOK(tool_use, "tool_use");
    HOOK(offered, "offered");
    HOOK(tool_name, "tool_name");
#undef HOOK
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void Builder_dealloc(Builder *self) {
    Py_XDECREF(self->run);
    Py_XDECREF(self->agents);
    Py_XDECREF(self->kinds);
    Py_XDECREF(self->kind_of);
    Py_XDECREF(self->trace_id);
    Py_XDECREF(self->agent_span_id);
    Py_XDECREF(self->agent_ids);
    Py_XDECREF(self->cost);
    Py_XDECREF(self->call_error);
    Py_XDECREF(self->ended);
    Py_XDECREF(self->time_ns);
    Py_XDECREF(self->provider_name);
    Py_XDECREF(self->event);
    Py_XDECREF(self->synod);
    Py_XDECREF(self->tool_use);
    Py_XDECREF(self->offered);
    Py_XDECREF(self->tool_name);
    Py_XDECREF(self->out);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Builder_feed(Builder *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "feed(agent, record, length)");
        return NULL;
    }
    Py_ssize_t length = PyLong_AsSsize_t(args[2]);
    if (length == -1 && PyErr_Occurred()) return NULL;
    if (feed(self, args[0], args[1], length) < 0) return NULL;
    return PyLong_FromSsize_t(PyList_GET_SIZE(self->out));
}

static PyObject *Builder_meet(Builder *self, PyObject *const *args, Py_ssize_t n) {
    if (n != 2) {
        PyErr_SetString(PyExc_TypeError, "meet(agent, started)");
        return NULL;
    }
    if (!meet(self, args[0], args[1]) && PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Builder_take(Builder *self, PyObject *unused) {
    PyObject *fresh = PyList_New(0);
    if (!fresh) return NULL;
    PyObject *out = self->out;
    self->out = fresh;
    return out;
}

static PyObject *Builder_finish(Builder *self, PyObject *unused) {
    Py_ssize_t pos = 0;
    PyObject *k, *cap;
    while (PyDict_Next(self->agents, &pos, &k, &cap)) {
        Agent *a = (Agent *)PyCapsule_GetPointer(cap, "mnemon.agent");
        if (!a) return NULL;
        if (a->chat) {
            CSpan *c = a->chat;
            a->chat = NULL;
            if (emit_free(self, c) < 0) return NULL;
        }
        if (a->open) {
            if (kv_cstr(&a->open->attrs, 9, "mnemon.agent.state", "open") < 0 ||
                close_seg(self, a, NULL, 0, 0) < 0)
                return NULL;
        } else if (end_tools(self, a, last_or(a, 0)) < 0) {
            return NULL;
        }
    }
    return Builder_take(self, NULL);
}

static PyObject *Builder_spans(Builder *self, void *unused) { return PyLong_FromSsize_t(self->spans); }

static PyMethodDef Builder_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))Builder_feed, METH_FASTCALL,
     "feed(agent, record, length) -> int: take one record of an agent's log; answer how many "
     "encoded spans wait to be taken."},
    {"meet", (PyCFunction)(void (*)(void))Builder_meet, METH_FASTCALL,
     "meet(agent, started): know an agent before its records (its SessionStarted, or None)."},
    {"take", (PyCFunction)Builder_take, METH_NOARGS,
     "take() -> list[bytes]: the spans finished since the last take, encoded."},
    {"finish", (PyCFunction)Builder_finish, METH_NOARGS,
     "finish() -> list[bytes]: end what is still open and take every span waiting."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Builder_getset[] = {
    {"spans", (getter)Builder_spans, NULL, "spans written in all", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "mnemon.orchestrator.tracing._otlp.Builder",
    .tp_basicsize = sizeof(Builder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Builder(run, latest_only, hooks): tracing.build.TraceBuilder for a live run "
              "without content, writing OTLP protobuf spans (tracing.native_build).",
    .tp_new = Builder_new,
    .tp_dealloc = (destructor)Builder_dealloc,
    .tp_methods = Builder_methods,
    .tp_getset = Builder_getset,
};

int otlp_add_builder(PyObject *module) {
    if (intern_all() < 0 || PyType_Ready(&BuilderType) < 0) return -1;
    Py_INCREF(&BuilderType);
    if (PyModule_AddObject(module, "Builder", (PyObject *)&BuilderType) < 0) {
        Py_DECREF(&BuilderType);
        return -1;
    }
    return 0;
}
