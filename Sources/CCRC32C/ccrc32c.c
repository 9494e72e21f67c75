#include "ccrc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

int chime_crc32c_available(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
}

__attribute__((target("sse4.2"))) uint32_t chime_crc32c_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    uint64_t c = crc;
    for (; count >= 8; p += 8, count -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    for (; count > 0; p++, count--) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}

#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif

int chime_crc32c_available(void) { return (getauxval(AT_HWCAP) & HWCAP_CRC32) != 0; }

__attribute__((target("crc"))) uint32_t chime_crc32c_update(uint32_t crc, const void *bytes, size_t count) {
    const unsigned char *p = bytes;
    for (; count >= 8; p += 8, count -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_arm_crc32cd(crc, word);
    }
    for (; count > 0; p++, count--) crc = __builtin_arm_crc32cb(crc, *p);
    return crc;
}

#else
int chime_crc32c_available(void) { return 0; }

uint32_t chime_crc32c_update(uint32_t crc, const void *bytes, size_t count) {
    (void)bytes;
    (void)count;
    return crc;
}
#endif
