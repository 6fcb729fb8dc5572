#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "blake3.h"

static PyMethodDef methods[] = {{NULL, NULL, 0, NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_b3many", NULL, -1, methods};
PyMODINIT_FUNC PyInit__b3many(void) { return PyModule_Create(&mod); }
