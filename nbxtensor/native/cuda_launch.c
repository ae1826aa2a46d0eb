/* _nbx_cuda_launch: launches an already compiled Triton kernel from a parameter buffer packed once.

   A BoundLaunch keeps every kernel parameter in its own 8-byte slot and the array of pointers to
   them that cuLaunchKernelEx reads; a call rewrites only the slots of the varying parameters and
   passes the stream. One source serves every kernel: the parameters' C types come as kind codes.
   The module neither links nor opens libcuda: the caller hands over cuLaunchKernelEx's address. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "cuda.h"

#if PY_VERSION_HEX < 0x030B0000  /* the half-float packers became public API in Python 3.11 */
#define PyFloat_Pack2(x, p, le) _PyFloat_Pack2((x), (unsigned char *)(p), (le))
#define PyFloat_Unpack2(p, le) _PyFloat_Unpack2((const unsigned char *)(p), (le))
#endif

PyDoc_STRVAR(module_doc,
"Launches compiled Triton kernels from a pre-packed parameter buffer.\n\n"
"BoundLaunch(launch_address, function, grid, block_x, shared_memory, cooperative, pdl,\n"
"            kinds, values, varying)\n"
"binds one kernel launch; bound(stream, *varying_values) launches it. A None in\n"
"`varying` stands for a value that calls pass and no parameter takes.\n\n"
"Kind codes, one byte per kernel parameter in `kinds` (KIND_CODES lists them):\n"
"  p pointer (u64)  b int8   B uint8   h int16  H uint16  i int32  I uint32\n"
"  l int64          L uint64 e fp16    r bf16   f fp32    d fp64\n"
"Integer kinds take ints (objects with __index__), range-checked for the kind.\n"
"Float kinds take floats or ints: fp16 rounds to nearest even and refuses values\n"
"too large for it; bf16 keeps the top 16 bits of the fp32 value and fp32 rounds\n"
"to nearest, out-of-range values becoming infinities, as Triton's launcher packs them.\n\n"
"noop_launch_address is a function with cuLaunchKernelEx's signature that does\n"
"nothing and returns 0, for measuring the host cost of a call.");

typedef CUresult (*launch_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

typedef struct {
    char code;
    const char *name;
    int size;                /* bytes the kernel reads from the slot */
    int is_float;
    long long lo;            /* integer kinds: accepted range */
    unsigned long long hi;
} Kind;

static const Kind KINDS[] = {
    {'p', "pointer", 8, 0, 0, UINT64_MAX},
    {'b', "int8", 1, 0, INT8_MIN, INT8_MAX},
    {'B', "uint8", 1, 0, 0, UINT8_MAX},
    {'h', "int16", 2, 0, INT16_MIN, INT16_MAX},
    {'H', "uint16", 2, 0, 0, UINT16_MAX},
    {'i', "int32", 4, 0, INT32_MIN, INT32_MAX},
    {'I', "uint32", 4, 0, 0, UINT32_MAX},
    {'l', "int64", 8, 0, INT64_MIN, INT64_MAX},
    {'L', "uint64", 8, 0, 0, UINT64_MAX},
    {'e', "fp16", 2, 1, 0, 0},
    {'r', "bf16", 2, 1, 0, 0},
    {'f', "fp32", 4, 1, 0, 0},
    {'d', "fp64", 8, 1, 0, 0},
};
#define NKINDS ((int)(sizeof(KINDS) / sizeof(KINDS[0])))

static const Kind *find_kind(char code)
{
    for (int k = 0; k < NKINDS; k++)
        if (KINDS[k].code == code)
            return &KINDS[k];
    return NULL;
}

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    launch_fn launch;
    CUfunction function;
    unsigned int grid[3];
    unsigned int block_x, shared_memory;
    int cooperative, pdl;
    int empty;               /* a zero grid extent: calls launch nothing */
    Py_ssize_t n, nvarying;
    /* One allocation holds these arrays, all of 8-byte items. */
    uint64_t *slots;         /* n parameter values, each at the start of its slot */
    void **params;           /* n pointers to the slots, as cuLaunchKernelEx reads them */
    const Kind **kind;       /* n */
    Py_ssize_t *varying;     /* nvarying parameter indices */
    void *block;
} BoundLaunch;

static int allocate(BoundLaunch *self, Py_ssize_t n, Py_ssize_t nvarying)
{
    size_t bytes = (size_t)(3 * n + nvarying) * 8 + 8;
    self->block = PyMem_Calloc(1, bytes);
    if (!self->block) {
        PyErr_NoMemory();
        return -1;
    }
    self->n = n;
    self->nvarying = nvarying;
    self->slots = (uint64_t *)self->block;
    self->params = (void **)(self->slots + n);
    self->kind = (const Kind **)(self->params + n);
    self->varying = (Py_ssize_t *)(self->kind + n);
    for (Py_ssize_t i = 0; i < n; i++)
        self->params[i] = &self->slots[i];
    return 0;
}

/* An unsigned integer in [lo, hi] for a launch setting; `what` names it in errors. */
static int setting(PyObject *v, const char *what, unsigned long long lo, unsigned long long hi,
                   unsigned long long *out)
{
    if (PyFloat_Check(v) || !PyIndex_Check(v)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(v)->tp_name);
        return -1;
    }
    PyObject *n = PyNumber_Index(v);
    if (!n)
        return -1;
    int overflow;
    long long s = PyLong_AsLongLongAndOverflow(n, &overflow);
    int failed = s == -1 && PyErr_Occurred();
    int negative = !failed && (overflow < 0 || (overflow == 0 && s < 0));
    unsigned long long u = (unsigned long long)s;
    if (!failed && overflow > 0) {
        u = PyLong_AsUnsignedLongLong(n);
        failed = u == (unsigned long long)-1 && PyErr_Occurred();
        if (failed && PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            failed = 0;
            u = hi, overflow = 2;  /* above 2**64 - 1: reported as too large below */
        }
    }
    Py_DECREF(n);
    if (failed)
        return -1;
    if (negative || u < lo || u > hi || overflow == 2) {
        /* OverflowError past what the C field holds, ValueError below it or for a 0/1 flag. */
        PyErr_Format(negative || u < lo || hi < UINT32_MAX ? PyExc_ValueError : PyExc_OverflowError,
                     "%s must be in [%llu, %llu], got %R", what, lo, hi, v);
        return -1;
    }
    *out = u;
    return 0;
}

static int put_int(const Kind *k, PyObject *v, uint64_t *slot, Py_ssize_t i)
{
    PyObject *n = v;
    if (PyLong_CheckExact(v)) {
        Py_INCREF(n);
    } else {
        if (PyFloat_Check(v) || !PyIndex_Check(v)) {
            PyErr_Format(PyExc_TypeError, "parameter %zd (%s) needs an int, not %.100s", i, k->name,
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        if (!(n = PyNumber_Index(v)))
            return -1;
    }
    int overflow;
    uint64_t bits = 0;
    long long s = PyLong_AsLongLongAndOverflow(n, &overflow);
    int ok = !(s == -1 && PyErr_Occurred());
    if (ok && overflow == 0) {
        ok = s >= k->lo && (s < 0 || (unsigned long long)s <= k->hi);
        bits = (uint64_t)s;
    } else if (ok && overflow > 0 && k->hi == UINT64_MAX) {
        /* Above INT64_MAX: only the unsigned 64-bit kinds reach here. */
        bits = PyLong_AsUnsignedLongLong(n);
        ok = !(bits == UINT64_MAX && PyErr_Occurred());
    } else {
        ok = 0;
    }
    Py_DECREF(n);
    if (!ok) {
        PyErr_Clear();
        if (k->lo < 0)
            PyErr_Format(PyExc_OverflowError, "parameter %zd (%s): %R is outside [%lld, %llu]", i, k->name,
                         v, k->lo, k->hi);
        else
            PyErr_Format(PyExc_OverflowError, "parameter %zd (%s): %R is outside [0, %llu]", i, k->name, v,
                         k->hi);
        return -1;
    }
    /* The low bytes of the two's complement value, stored natively at the slot start. */
    *slot = 0;
    switch (k->size) {
    case 1: { uint8_t x = (uint8_t)bits; memcpy(slot, &x, 1); break; }
    case 2: { uint16_t x = (uint16_t)bits; memcpy(slot, &x, 2); break; }
    case 4: { uint32_t x = (uint32_t)bits; memcpy(slot, &x, 4); break; }
    default: *slot = bits;
    }
    return 0;
}

static int put_float(const Kind *k, PyObject *v, uint64_t *slot, Py_ssize_t i)
{
    double d;
    if (PyFloat_CheckExact(v)) {
        d = PyFloat_AS_DOUBLE(v);
    } else {
        d = PyFloat_AsDouble(v);
        if (d == -1.0 && PyErr_Occurred()) {
            int type_error = PyErr_ExceptionMatches(PyExc_TypeError);
            PyErr_Clear();
            if (type_error)
                PyErr_Format(PyExc_TypeError, "parameter %zd (%s) needs a float, not %.100s", i, k->name,
                             Py_TYPE(v)->tp_name);
            else
                PyErr_Format(PyExc_OverflowError, "parameter %zd (%s): %R does not fit a double", i,
                             k->name, v);
            return -1;
        }
    }
    *slot = 0;
    switch (k->code) {
    case 'e':
        /* Little-endian IEEE half, rounded to nearest even, as Triton's launcher packs it. */
        if (PyFloat_Pack2(d, (char *)slot, 1) < 0) {
            PyErr_Clear();
            PyErr_Format(PyExc_OverflowError, "parameter %zd (fp16): %R is too large for fp16", i, v);
            return -1;
        }
        break;
    case 'r': {
        /* Triton's pack_bf16: the top half of the fp32 bits, truncated, not rounded. */
        float f = (float)d;
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy(slot, &h, 2);
        break;
    }
    case 'f': {
        float f = (float)d;
        memcpy(slot, &f, 4);
        break;
    }
    default:
        memcpy(slot, &d, 8);
    }
    return 0;
}

static inline int put(const Kind *k, PyObject *v, uint64_t *slot, Py_ssize_t i)
{
    return k->is_float ? put_float(k, v, slot, i) : put_int(k, v, slot, i);
}

static PyObject *get(const Kind *k, const uint64_t *slot)
{
    switch (k->code) {
    case 'b': { int8_t x; memcpy(&x, slot, 1); return PyLong_FromLong(x); }
    case 'B': { uint8_t x; memcpy(&x, slot, 1); return PyLong_FromLong(x); }
    case 'h': { int16_t x; memcpy(&x, slot, 2); return PyLong_FromLong(x); }
    case 'H': { uint16_t x; memcpy(&x, slot, 2); return PyLong_FromLong(x); }
    case 'i': { int32_t x; memcpy(&x, slot, 4); return PyLong_FromLong(x); }
    case 'I': { uint32_t x; memcpy(&x, slot, 4); return PyLong_FromUnsignedLong(x); }
    case 'l': { int64_t x; memcpy(&x, slot, 8); return PyLong_FromLongLong(x); }
    case 'e': return PyFloat_FromDouble(PyFloat_Unpack2((const char *)slot, 1));
    case 'r': {
        uint16_t h;
        memcpy(&h, slot, 2);
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return PyFloat_FromDouble(f);
    }
    case 'f': { float f; memcpy(&f, slot, 4); return PyFloat_FromDouble(f); }
    case 'd': { double x; memcpy(&x, slot, 8); return PyFloat_FromDouble(x); }
    default: return PyLong_FromUnsignedLongLong(*slot);  /* 'p', 'L' */
    }
}

static int parse_grid(PyObject *grid, unsigned int out[3])
{
    if (!(PyTuple_Check(grid) || PyList_Check(grid)) || PySequence_Size(grid) != 3) {
        PyErr_Format(PyExc_TypeError, "grid must be a tuple of 3 ints, got %R", grid);
        return -1;
    }
    static const char *names[3] = {"grid[0]", "grid[1]", "grid[2]"};
    for (int d = 0; d < 3; d++) {
        unsigned long long u;
        PyObject *item = PySequence_Fast_GET_ITEM(grid, d);
        if (setting(item, names[d], 0, UINT32_MAX, &u) < 0)
            return -1;
        out[d] = (unsigned int)u;
    }
    return 0;
}

static void set_grid(BoundLaunch *self, const unsigned int grid[3])
{
    memcpy(self->grid, grid, sizeof(self->grid));
    self->empty = grid[0] == 0 || grid[1] == 0 || grid[2] == 0;
}

static PyObject *bound_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames);

static PyObject *bound_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"launch_address", "function", "grid", "block_x", "shared_memory",
                             "cooperative", "pdl", "kinds", "values", "varying", NULL};
    PyObject *address, *function, *grid, *block_x, *shared, *cooperative, *pdl, *kinds, *values, *varying;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOOOOOO:BoundLaunch", kwlist, &address, &function,
                                     &grid, &block_x, &shared, &cooperative, &pdl, &kinds, &values, &varying))
        return NULL;
    unsigned long long launch, func, bx, sh, coop, pd;
    unsigned int g[3];
    if (setting(address, "launch_address", 1, UINTPTR_MAX, &launch) < 0 ||
        setting(function, "function", 1, UINTPTR_MAX, &func) < 0 || parse_grid(grid, g) < 0 ||
        setting(block_x, "block_x", 1, UINT32_MAX, &bx) < 0 ||
        setting(shared, "shared_memory", 0, UINT32_MAX, &sh) < 0 ||
        setting(cooperative, "cooperative", 0, 1, &coop) < 0 || setting(pdl, "pdl", 0, 1, &pd) < 0)
        return NULL;
    if (!PyBytes_Check(kinds)) {
        PyErr_Format(PyExc_TypeError, "kinds must be bytes, not %.100s", Py_TYPE(kinds)->tp_name);
        return NULL;
    }
    if (!PyTuple_Check(values) || !PyTuple_Check(varying)) {
        PyErr_SetString(PyExc_TypeError, "values and varying must be tuples");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(kinds), nvarying = PyTuple_GET_SIZE(varying);
    if (PyTuple_GET_SIZE(values) != n) {
        PyErr_Format(PyExc_ValueError, "%zd kind code(s) but %zd value(s)", n, PyTuple_GET_SIZE(values));
        return NULL;
    }
    BoundLaunch *self = (BoundLaunch *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    self->vectorcall = bound_call;
    self->launch = (launch_fn)(uintptr_t)launch;
    self->function = (CUfunction)(uintptr_t)func;
    set_grid(self, g);
    self->block_x = (unsigned int)bx;
    self->shared_memory = (unsigned int)sh;
    self->cooperative = (int)coop;
    self->pdl = (int)pd;
    if (allocate(self, n, nvarying) < 0)
        goto fail;
    const char *codes = PyBytes_AS_STRING(kinds);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!(self->kind[i] = find_kind(codes[i]))) {
            unsigned char c = (unsigned char)codes[i];
            if (c > 32 && c < 127)
                PyErr_Format(PyExc_ValueError, "parameter %zd: unknown kind code '%c' (known: pbBhHiIlLerfd)", i, c);
            else
                PyErr_Format(PyExc_ValueError, "parameter %zd: unknown kind code 0x%02x (known: pbBhHiIlLerfd)", i, c);
            goto fail;
        }
        if (put(self->kind[i], PyTuple_GET_ITEM(values, i), &self->slots[i], i) < 0)
            goto fail;
    }
    for (Py_ssize_t j = 0; j < nvarying; j++) {
        PyObject *item = PyTuple_GET_ITEM(varying, j);
        if (item == Py_None) {  /* a value calls pass that no parameter takes (a constant of the kernel) */
            self->varying[j] = -1;
            continue;
        }
        Py_ssize_t i = PyLong_Check(item) ? PyLong_AsSsize_t(item) : -1;
        if (i == -1 && PyErr_Occurred())
            PyErr_Clear();
        if (!PyLong_Check(item) || i < 0 || i >= n) {
            PyErr_Format(PyExc_ValueError, "varying[%zd] = %R is not a parameter index in [0, %zd)", j, item, n);
            goto fail;
        }
        for (Py_ssize_t m = 0; m < j; m++)
            if (self->varying[m] == i) {
                PyErr_Format(PyExc_ValueError, "varying lists parameter %zd twice", i);
                goto fail;
            }
        self->varying[j] = i;
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

static void bound_dealloc(PyObject *op)
{
    PyMem_Free(((BoundLaunch *)op)->block);
    Py_TYPE(op)->tp_free(op);
}

/* bound(stream, *varying_values). The GIL stays held: cuLaunchKernelEx only queues work and returns
   within microseconds, less than releasing and retaking the GIL would cost. */
static PyObject *bound_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    BoundLaunch *self = (BoundLaunch *)op;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames && PyTuple_GET_SIZE(kwnames)) {
        PyErr_SetString(PyExc_TypeError, "BoundLaunch calls take no keyword arguments");
        return NULL;
    }
    if (nargs != 1 + self->nvarying) {
        PyErr_Format(PyExc_TypeError, "BoundLaunch takes the stream and %zd varying value(s): %zd argument(s), "
                     "%zd given", self->nvarying, 1 + self->nvarying, nargs);
        return NULL;
    }
    unsigned long long stream;
    if (PyLong_CheckExact(args[0])) {
        stream = PyLong_AsUnsignedLongLong(args[0]);
        if (stream == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            if (setting(args[0], "stream", 0, UINT64_MAX, &stream) < 0)
                return NULL;
        }
    } else if (setting(args[0], "stream", 0, UINT64_MAX, &stream) < 0) {
        return NULL;
    }
    /* A value that fails leaves earlier varying slots rewritten; every call rewrites them all. */
    for (Py_ssize_t j = 0; j < self->nvarying; j++) {
        Py_ssize_t i = self->varying[j];
        if (i >= 0 && put(self->kind[i], args[1 + j], &self->slots[i], i) < 0)
            return NULL;
    }
    if (self->empty)
        Py_RETURN_NONE;
    CUlaunchAttribute attrs[2];
    unsigned int nattrs = 0;
    memset(attrs, 0, sizeof(attrs));
    /* Same attributes, in the same order, as Triton's launcher. */
    if (self->pdl) {
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attrs[nattrs++].value.programmaticStreamSerializationAllowed = 1;
    }
    if (self->cooperative) {
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
        attrs[nattrs++].value.cooperative = 1;
    }
    CUlaunchConfig config = {
        .gridDimX = self->grid[0], .gridDimY = self->grid[1], .gridDimZ = self->grid[2],
        .blockDimX = self->block_x, .blockDimY = 1, .blockDimZ = 1,
        .sharedMemBytes = self->shared_memory,
        .hStream = (CUstream)(uintptr_t)stream,
        .attrs = nattrs ? attrs : NULL,
        .numAttrs = nattrs,
    };
    CUresult result = self->launch(&config, self->function, self->params, NULL);
    if (result != CUDA_SUCCESS) {
        /* The code rides along as `cuda_result` too, so callers need not parse the message. */
        PyObject *exc = PyObject_CallFunction(PyExc_RuntimeError, "N",
                                              PyUnicode_FromFormat("cuLaunchKernelEx failed with CUresult %d",
                                                                   (int)result));
        PyObject *code = PyLong_FromLong((long)result);
        if (exc && code && PyObject_SetAttrString(exc, "cuda_result", code) == 0)
            PyErr_SetObject(PyExc_RuntimeError, exc);
        Py_XDECREF(exc);
        Py_XDECREF(code);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *bound_values(PyObject *op, PyObject *unused)
{
    BoundLaunch *self = (BoundLaunch *)op;
    PyObject *out = PyTuple_New(self->n);
    for (Py_ssize_t i = 0; out && i < self->n; i++) {
        PyObject *v = get(self->kind[i], &self->slots[i]);
        if (!v)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static PyObject *get_grid(PyObject *op, void *unused)
{
    BoundLaunch *self = (BoundLaunch *)op;
    return Py_BuildValue("(III)", self->grid[0], self->grid[1], self->grid[2]);
}

static PyObject *get_kinds(PyObject *op, void *unused)
{
    BoundLaunch *self = (BoundLaunch *)op;
    PyObject *out = PyBytes_FromStringAndSize(NULL, self->n);
    for (Py_ssize_t i = 0; out && i < self->n; i++)
        PyBytes_AS_STRING(out)[i] = self->kind[i]->code;
    return out;
}

static PyObject *get_varying(PyObject *op, void *unused)
{
    BoundLaunch *self = (BoundLaunch *)op;
    PyObject *out = PyTuple_New(self->nvarying);
    for (Py_ssize_t j = 0; out && j < self->nvarying; j++) {
        PyObject *v = self->varying[j] < 0 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(self->varying[j]);
        if (!v)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, j, v);
    }
    return out;
}

static PyObject *get_setting(PyObject *op, void *which)
{
    BoundLaunch *self = (BoundLaunch *)op;
    switch ((int)(intptr_t)which) {
    case 0: return PyLong_FromUnsignedLongLong((uintptr_t)self->launch);
    case 1: return PyLong_FromUnsignedLongLong((uintptr_t)self->function);
    case 2: return PyLong_FromUnsignedLong(self->block_x);
    case 3: return PyLong_FromUnsignedLong(self->shared_memory);
    case 4: return PyLong_FromLong(self->cooperative);
    default: return PyLong_FromLong(self->pdl);
    }
}

static PyObject *bound_repr(PyObject *op)
{
    BoundLaunch *self = (BoundLaunch *)op;
    PyObject *kinds = get_kinds(op, NULL), *varying = get_varying(op, NULL), *out = NULL;
    if (kinds && varying)
        out = PyUnicode_FromFormat("<BoundLaunch function=%p grid=(%u, %u, %u) block_x=%u shared_memory=%u "
                                   "kinds=%R varying=%R>", (void *)self->function, self->grid[0],
                                   self->grid[1], self->grid[2], self->block_x, self->shared_memory, kinds,
                                   varying);
    Py_XDECREF(kinds);
    Py_XDECREF(varying);
    return out;
}

static PyGetSetDef bound_getset[] = {
    {"grid", get_grid, NULL, "the grid, 3 ints", NULL},
    {"kinds", get_kinds, NULL, "one kind code per parameter", NULL},
    {"varying", get_varying, NULL, "indices of the parameters a call supplies", NULL},
    {"launch_address", get_setting, NULL, "address of the launch function", (void *)0},
    {"function", get_setting, NULL, "the CUfunction handle", (void *)1},
    {"block_x", get_setting, NULL, "threads per block", (void *)2},
    {"shared_memory", get_setting, NULL, "dynamic shared memory bytes", (void *)3},
    {"cooperative", get_setting, NULL, "1 for a cooperative launch", (void *)4},
    {"pdl", get_setting, NULL, "1 for programmatic stream serialization", (void *)5},
    {NULL},
};

static PyMethodDef bound_methods[] = {
    {"values", bound_values, METH_NOARGS, "values() -> the parameters' current values, decoded by kind"},
    {NULL},
};

static PyTypeObject BoundLaunchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_nbx_cuda_launch.BoundLaunch",
    .tp_doc = PyDoc_STR("BoundLaunch(launch_address, function, grid, block_x, shared_memory, cooperative, "
                        "pdl, kinds, values, varying)\n\nOne kernel launch with its parameters packed: "
                        "`values` gives every parameter's value (the varying ones' first values too), "
                        "`varying` the indices of those a call supplies. Call it as "
                        "bound(stream, *varying_values). Calls rewrite shared slots holding the GIL throughout, "
                        "so a call with plain int and float values is atomic to other Python threads."),
    .tp_basicsize = sizeof(BoundLaunch),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = bound_new,
    .tp_dealloc = bound_dealloc,
    .tp_vectorcall_offset = offsetof(BoundLaunch, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = bound_repr,
    .tp_methods = bound_methods,
    .tp_getset = bound_getset,
};

static CUresult noop_launch(const CUlaunchConfig *config, CUfunction f, void **params, void **extra)
{
    (void)config, (void)f, (void)params, (void)extra;
    return CUDA_SUCCESS;
}

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_nbx_cuda_launch", module_doc, -1, NULL,
};

PyMODINIT_FUNC PyInit__nbx_cuda_launch(void)
{
    if (PyType_Ready(&BoundLaunchType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    PyObject *codes = PyBytes_FromString("pbBhHiIlLerfd");
    PyObject *noop = PyLong_FromUnsignedLongLong((uintptr_t)&noop_launch);
    int failed = !codes || !noop || PyModule_AddObjectRef(m, "BoundLaunch", (PyObject *)&BoundLaunchType) < 0 ||
                 PyModule_AddObjectRef(m, "KIND_CODES", codes) < 0 ||
                 PyModule_AddObjectRef(m, "noop_launch_address", noop) < 0;
    Py_XDECREF(codes);
    Py_XDECREF(noop);
    if (failed) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
