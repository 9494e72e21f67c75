#ifndef CHIME_CMALLOC_SHIM_H
#define CHIME_CMALLOC_SHIM_H

// glibc's malloc.h (malloc_trim), which Swift's Glibc module leaves out. Only ChimeSupport imports it.
#include <malloc.h>

#endif
