// CRC-32C with the processor's own instruction, for ChimeJournal (its only importer): SSE 4.2's
// crc32 on x86-64, the CRC extension's crc32c on 64-bit ARM. Swift cannot name either.
#ifndef CCRC32C_H
#define CCRC32C_H

#include <stddef.h>
#include <stdint.h>

/// 1 when this processor has the instruction, else 0 (then the caller computes in software).
int chime_crc32c_available(void);

/// Continues the register `crc` (already inverted, as the algorithm keeps it) over `count` bytes
/// at `bytes`. Call only when chime_crc32c_available() is 1.
uint32_t chime_crc32c_update(uint32_t crc, const void *bytes, size_t count);

#endif
