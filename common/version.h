/* version.h — what this binary is.  dd_commit, dd_build_date and dd_cuda_built are
 * written by the Makefile into build/buildinfo.c at each build. */
#ifndef DD_VERSION_H
#define DD_VERSION_H

#define DD_VERSION "0.1.0"

extern const char dd_commit[];
extern const char dd_build_date[];
extern const int dd_cuda_built;

#endif
