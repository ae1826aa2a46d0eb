/* _nbx_block_cache: the hot path of nbxtensor's caching allocator (nbxtensor/memory/caching.py).

   Most requests repeat a recent size, so a small block just freed is parked whole by (stream, size) and
   the next request of that size takes it back, without a split or a merge. Here are that take and that
   free, the allocator's counters, and the buffer type whose collection frees its block, so the common
   allocation and free of a small tensor run no Python. Everything else (pools, splits, segments, the
   release of a block to its pool) stays in Python: `Parking` calls back `release(block)` for that.

   Blocks are the allocator's Python objects; this file reads and writes their `ptr`, `size`,
   `requested`, `free` and `segment` (whose `stream` and `small` it reads). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* ---- Counters: the allocator's statistics, as writable integer attributes ---------------------- */

typedef struct {
    PyObject_HEAD
    long long allocated, peak_allocated, reserved, peak_reserved, allocations, frees, segments,
        cache_flushes, oom_retries;
} Counters;

#define COUNTER(name) {#name, T_LONGLONG, offsetof(Counters, name), 0, NULL}
static PyMemberDef counters_members[] = {
    COUNTER(allocated), COUNTER(peak_allocated), COUNTER(reserved), COUNTER(peak_reserved),
    COUNTER(allocations), COUNTER(frees), COUNTER(segments), COUNTER(cache_flushes), COUNTER(oom_retries),
    {NULL},
};

static PyObject *counters_repr(PyObject *op)
{
    Counters *c = (Counters *)op;
    return PyUnicode_FromFormat("MemoryStats(allocated=%lld, peak_allocated=%lld, reserved=%lld, "
                                "peak_reserved=%lld, allocations=%lld, frees=%lld, segments=%lld, "
                                "cache_flushes=%lld, oom_retries=%lld)",
                                c->allocated, c->peak_allocated, c->reserved, c->peak_reserved,
                                c->allocations, c->frees, c->segments, c->cache_flushes, c->oom_retries);
}

static PyObject *counters_as_dict(PyObject *op, PyObject *unused)
{
    PyObject *out = PyDict_New();
    for (PyMemberDef *m = counters_members; out && m->name; m++) {
        PyObject *v = PyLong_FromLongLong(*(long long *)((char *)op + m->offset));
        if (!v || PyDict_SetItemString(out, m->name, v) < 0)
            Py_CLEAR(out);
        Py_XDECREF(v);
    }
    return out;
}

static PyMethodDef counters_methods[] = {
    {"as_dict", counters_as_dict, METH_NOARGS, "The counters by name."},
    {NULL},
};

static PyTypeObject CountersType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nbx_block_cache.MemoryStats",
    .tp_doc = "The caching allocator's statistics (bytes and counts).",
    .tp_basicsize = sizeof(Counters),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_members = counters_members,
    .tp_methods = counters_methods,
    .tp_repr = counters_repr,
};

/* ---- Parking: parked blocks, live blocks, counters ------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    PyObject *parked;    /* dict (stream, size) -> list of blocks, still marked in use */
    PyObject *live;      /* dict ptr -> block */
    PyObject *release;   /* release(block): back to its pool as free, merged (Python) */
    Counters *stats;
    Py_ssize_t per_size; /* most blocks parked per (stream, size) */
    long long round, small_limit;
} Parking;

static PyObject *s_ptr, *s_size, *s_requested, *s_free, *s_segment, *s_stream, *s_small;

static int parking_traverse(PyObject *op, visitproc visit, void *arg)
{
    Parking *p = (Parking *)op;
    Py_VISIT(p->parked);
    Py_VISIT(p->live);
    Py_VISIT(p->release);
    Py_VISIT(p->stats);
    return 0;
}

static int parking_clear(PyObject *op)
{
    Parking *p = (Parking *)op;
    Py_CLEAR(p->parked);
    Py_CLEAR(p->live);
    Py_CLEAR(p->release);
    Py_CLEAR(p->stats);
    return 0;
}

static void parking_dealloc(PyObject *op)
{
    PyObject_GC_UnTrack(op);
    parking_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *parking_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"release", "per_size", "round", "small_limit", NULL};
    PyObject *release;
    Py_ssize_t per_size;
    long long round, small_limit;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnLL:Parking", kwlist, &release, &per_size, &round,
                                     &small_limit))
        return NULL;
    if (!PyCallable_Check(release) || per_size < 0 || round <= 0) {
        PyErr_SetString(PyExc_ValueError, "Parking needs a callable release, per_size >= 0 and round > 0");
        return NULL;
    }
    Parking *p = (Parking *)type->tp_alloc(type, 0);
    if (!p)
        return NULL;
    p->parked = PyDict_New();
    p->live = PyDict_New();
    p->stats = (Counters *)PyObject_CallNoArgs((PyObject *)&CountersType);
    if (!p->parked || !p->live || !p->stats) {
        Py_DECREF(p);
        return NULL;
    }
    p->release = Py_NewRef(release);
    p->per_size = per_size;
    p->round = round;
    p->small_limit = small_limit;
    return (PyObject *)p;
}

/* The bookkeeping of a block handed out: requested bytes, live, counted. */
static int checkout(Parking *p, PyObject *block, PyObject *ptr, long long size, PyObject *nbytes)
{
    if (PyObject_SetAttr(block, s_requested, nbytes) < 0 || PyDict_SetItem(p->live, ptr, block) < 0)
        return -1;
    Counters *c = p->stats;
    c->allocated += size;
    c->allocations += 1;
    if (c->allocated > c->peak_allocated)
        c->peak_allocated = c->allocated;
    return 0;
}

static long long as_long_long(PyObject *o)
{
    return o ? PyLong_AsLongLong(o) : -1;
}

/* A parked block of (stream, size) taken back, checked out; NULL without an error when none is parked. */
static PyObject *take(Parking *p, PyObject *stream, long long size, PyObject *nbytes)
{
    PyObject *size_obj = PyLong_FromLongLong(size);
    PyObject *key = size_obj ? PyTuple_Pack(2, stream, size_obj) : NULL;
    Py_XDECREF(size_obj);
    if (!key)
        return NULL;
    PyObject *list = PyDict_GetItemWithError(p->parked, key);
    Py_DECREF(key);
    if (!list || !PyList_Check(list) || PyList_GET_SIZE(list) == 0)
        return NULL;
    Py_ssize_t last = PyList_GET_SIZE(list) - 1;
    PyObject *block = Py_NewRef(PyList_GET_ITEM(list, last));
    PyObject *ptr = NULL;
    if (PyList_SetSlice(list, last, last + 1, NULL) < 0 || !(ptr = PyObject_GetAttr(block, s_ptr)) ||
        checkout(p, block, ptr, size, nbytes) < 0) {
        Py_XDECREF(ptr);
        Py_DECREF(block);
        return NULL;
    }
    Py_DECREF(ptr);
    return block;
}

static long long rounded(Parking *p, long long nbytes)
{
    long long size = (nbytes + p->round - 1) / p->round * p->round;
    return size < p->round ? p->round : size;
}

PyDoc_STRVAR(take_doc, "take(nbytes, stream) -> block or None\n\nA parked block for a small request, checked out.");

static PyObject *parking_take(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "take(nbytes, stream)");
        return NULL;
    }
    Parking *p = (Parking *)op;
    long long nbytes = PyLong_AsLongLong(args[0]);
    if (nbytes == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return NULL;
        PyErr_Clear();  /* past 64 bits: not small, so none is parked; the general path says why it fails */
        Py_RETURN_NONE;
    }
    /* only small requests are parked (and a huge one must not overflow the rounding) */
    PyObject *block = nbytes >= 0 && nbytes <= p->small_limit && rounded(p, nbytes) <= p->small_limit
                          ? take(p, args[1], rounded(p, nbytes), args[0]) : NULL;
    if (block || PyErr_Occurred())
        return block;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(checkout_doc, "checkout(block, nbytes)\n\nCount a block handed out by the general path: requested bytes, live.");

static PyObject *parking_checkout(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "checkout(block, nbytes)");
        return NULL;
    }
    Parking *p = (Parking *)op;
    PyObject *ptr = PyObject_GetAttr(args[0], s_ptr);
    PyObject *size = ptr ? PyObject_GetAttr(args[0], s_size) : NULL;
    long long n = as_long_long(size);
    int failed = !size || (n == -1 && PyErr_Occurred()) || checkout(p, args[0], ptr, n, args[1]) < 0;
    Py_XDECREF(ptr);
    Py_XDECREF(size);
    if (failed)
        return NULL;
    Py_RETURN_NONE;
}

/* The allocator's free: a block handed out and not freed since, uncounted; a small one parked while its
   (stream, size) has room (still marked in use, so no neighbour merges with it), else released. */
static int free_block(Parking *p, PyObject *block)
{
    PyObject *ptr = PyObject_GetAttr(block, s_ptr);
    if (!ptr)
        return -1;
    PyObject *known = PyDict_GetItemWithError(p->live, ptr);
    PyObject *is_free = known == block ? PyObject_GetAttr(block, s_free) : NULL;
    int already = is_free ? PyObject_IsTrue(is_free) : -1;
    Py_XDECREF(is_free);
    if (known != block || already != 0) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_RuntimeError, "block at %R freed twice or not this allocator's", ptr);
        Py_DECREF(ptr);
        return -1;
    }
    int status = PyDict_DelItem(p->live, ptr);
    Py_DECREF(ptr);
    PyObject *size_obj = status < 0 ? NULL : PyObject_GetAttr(block, s_size);
    long long size = as_long_long(size_obj);
    if (!size_obj || (size == -1 && PyErr_Occurred())) {
        Py_XDECREF(size_obj);
        return -1;
    }
    p->stats->allocated -= size;
    p->stats->frees += 1;
    PyObject *segment = PyObject_GetAttr(block, s_segment);
    PyObject *small = segment ? PyObject_GetAttr(segment, s_small) : NULL;
    int is_small = small ? PyObject_IsTrue(small) : -1;
    PyObject *stream = is_small == 1 ? PyObject_GetAttr(segment, s_stream) : NULL;
    PyObject *key = stream ? PyTuple_Pack(2, stream, size_obj) : NULL;
    Py_XDECREF(segment);
    Py_XDECREF(small);
    Py_XDECREF(stream);
    Py_DECREF(size_obj);
    if (is_small < 0 || (is_small && !key))
        return -1;
    if (key) {
        PyObject *list = PyDict_GetItemWithError(p->parked, key);
        if (!list && !PyErr_Occurred() && (list = PyList_New(0))) {
            status = PyDict_SetItem(p->parked, key, list);
            Py_DECREF(list);  /* the dict holds it */
            if (status < 0)
                list = NULL;
        }
        Py_DECREF(key);
        if (!list)
            return -1;
        if (PyList_GET_SIZE(list) < p->per_size)
            return PyList_Append(list, block);
    }
    PyObject *done = PyObject_CallOneArg(p->release, block);
    Py_XDECREF(done);
    return done ? 0 : -1;
}

PyDoc_STRVAR(free_doc, "free(block)\n\nFree a block handed out: parked when small and its size has room, else released.");

static PyObject *parking_free(PyObject *op, PyObject *block)
{
    if (free_block((Parking *)op, block) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---- CachedBuffer: device memory over a block, which frees the block when collected ------------- */

typedef struct {
    PyObject_HEAD
    PyObject *ptr, *nbytes;
    PyObject *block;     /* NULL once freed */
    Parking *parking;
    PyObject *weakrefs;
} CachedBuffer;

static PyTypeObject CachedBufferType;

static PyObject *make_buffer(Parking *p, PyObject *block, PyObject *ptr, PyObject *nbytes)
{
    CachedBuffer *b = PyObject_New(CachedBuffer, &CachedBufferType);
    if (!b)
        return NULL;
    b->ptr = Py_NewRef(ptr);
    b->nbytes = Py_NewRef(nbytes);
    b->block = Py_NewRef(block);
    b->parking = (Parking *)Py_NewRef((PyObject *)p);
    b->weakrefs = NULL;
    return (PyObject *)b;
}

PyDoc_STRVAR(buffer_doc, "buffer(nbytes, stream) -> CachedBuffer or None\n\n"
             "A parked block for a small request, checked out, as a buffer; None when none is parked.");

static PyObject *parking_buffer(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *block = parking_take(op, args, nargs);
    if (!block || block == Py_None)
        return block;
    PyObject *ptr = PyObject_GetAttr(block, s_ptr);
    PyObject *made = ptr ? make_buffer((Parking *)op, block, ptr, args[0]) : NULL;
    Py_XDECREF(ptr);
    Py_DECREF(block);
    return made;
}

PyDoc_STRVAR(wrap_doc, "wrap(block, nbytes) -> CachedBuffer\n\nA block already checked out, as a buffer.");

static PyObject *parking_wrap(PyObject *op, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "wrap(block, nbytes)");
        return NULL;
    }
    PyObject *ptr = PyObject_GetAttr(args[0], s_ptr);
    PyObject *made = ptr ? make_buffer((Parking *)op, args[0], ptr, args[1]) : NULL;
    Py_XDECREF(ptr);
    return made;
}

static void buffer_dealloc(PyObject *op)
{
    CachedBuffer *b = (CachedBuffer *)op;
    if (b->weakrefs)
        PyObject_ClearWeakRefs(op);
    if (b->block) {
        /* a collection must not disturb an exception in flight, nor raise one: a block the allocator no
           longer knows (its device already gone at exit) is simply dropped */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (free_block(b->parking, b->block) < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, traceback);
    }
    Py_XDECREF(b->block);
    Py_XDECREF((PyObject *)b->parking);
    Py_XDECREF(b->ptr);
    Py_XDECREF(b->nbytes);
    PyObject_Free(op);
}

static PyObject *buffer_false(PyObject *op, void *unused)
{
    Py_RETURN_FALSE;
}

static PyObject *buffer_none(PyObject *op, void *unused)
{
    Py_RETURN_NONE;
}

static PyMemberDef buffer_members[] = {
    {"ptr", T_OBJECT_EX, offsetof(CachedBuffer, ptr), READONLY, "the block's device address"},
    {"nbytes", T_OBJECT_EX, offsetof(CachedBuffer, nbytes), READONLY, "the bytes asked for"},
    {"_block", T_OBJECT, offsetof(CachedBuffer, block), READONLY, "the allocator's block"},
    {NULL},
};

static PyGetSetDef buffer_getset[] = {
    {"pinned", buffer_false, NULL, "device memory, never page-locked host memory", NULL},
    {"_owner", buffer_none, NULL, "nothing else keeps this memory alive", NULL},
    {NULL},
};

static PyTypeObject CachedBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nbx_block_cache.CachedBuffer",
    .tp_doc = "A block of a caching allocator as a device buffer; collected, it frees the block.",
    .tp_basicsize = sizeof(CachedBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = buffer_dealloc,
    .tp_members = buffer_members,
    .tp_getset = buffer_getset,
    .tp_weaklistoffset = offsetof(CachedBuffer, weakrefs),
};

static PyMethodDef parking_methods[] = {
    {"take", (PyCFunction)(void (*)(void))parking_take, METH_FASTCALL, take_doc},
    {"buffer", (PyCFunction)(void (*)(void))parking_buffer, METH_FASTCALL, buffer_doc},
    {"checkout", (PyCFunction)(void (*)(void))parking_checkout, METH_FASTCALL, checkout_doc},
    {"wrap", (PyCFunction)(void (*)(void))parking_wrap, METH_FASTCALL, wrap_doc},
    {"free", parking_free, METH_O, free_doc},
    {NULL},
};

static PyMemberDef parking_members[] = {
    {"parked", T_OBJECT_EX, offsetof(Parking, parked), READONLY, "(stream, size) -> parked blocks"},
    {"live", T_OBJECT_EX, offsetof(Parking, live), READONLY, "ptr -> block handed out"},
    {"stats", T_OBJECT_EX, offsetof(Parking, stats), READONLY, "the counters"},
    {NULL},
};

static PyTypeObject ParkingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nbx_block_cache.Parking",
    .tp_doc = "Parking(release, per_size, round, small_limit): parked and live blocks of one allocator.",
    .tp_basicsize = sizeof(Parking),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = parking_new,
    .tp_dealloc = parking_dealloc,
    .tp_traverse = parking_traverse,
    .tp_clear = parking_clear,
    .tp_methods = parking_methods,
    .tp_members = parking_members,
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_nbx_block_cache",
    "The caching allocator's hot path: parked blocks, their buffers, the counters.", -1, NULL,
};

PyMODINIT_FUNC PyInit__nbx_block_cache(void)
{
    if (PyType_Ready(&CountersType) < 0 || PyType_Ready(&ParkingType) < 0 || PyType_Ready(&CachedBufferType) < 0)
        return NULL;
    if (!(s_ptr = PyUnicode_InternFromString("ptr")) || !(s_size = PyUnicode_InternFromString("size")) ||
        !(s_requested = PyUnicode_InternFromString("requested")) ||
        !(s_free = PyUnicode_InternFromString("free")) || !(s_segment = PyUnicode_InternFromString("segment")) ||
        !(s_stream = PyUnicode_InternFromString("stream")) || !(s_small = PyUnicode_InternFromString("small")))
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "MemoryStats", (PyObject *)&CountersType) < 0 ||
        PyModule_AddObjectRef(m, "Parking", (PyObject *)&ParkingType) < 0 ||
        PyModule_AddObjectRef(m, "CachedBuffer", (PyObject *)&CachedBufferType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
