/* sanitizer.h — whether this build runs under AddressSanitizer (`make asan`).  ASan
 * reserves terabytes of address space for its shadow before main, so no process of
 * such a build can run under an address-space or data limit (RLIMIT_AS, RLIMIT_DATA):
 * the limits on workers and the drawing child are not set there, and only there. */
#ifndef DD_SANITIZER_H
#define DD_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define DD_UNDER_ASAN 1
#else
#define DD_UNDER_ASAN 0
#endif

#endif
