/* digest.h — what names a model in a plan: SHA-256 of the file's bytes
 * (digest.c), and bytes as hex.  Below the loader: it includes nothing of
 * roamc, and the loader, plan files and `roamc check` use it. */
#ifndef ROAMC_DIGEST_H
#define ROAMC_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 (FIPS 180-4) of data[0..len) into out. */
void fe_sha256(const void *data, size_t len, uint8_t out[32]);

/* bytes[0..n) as 2n lowercase hex digits and a NUL into out (2n+1 bytes). */
void fe_hex(const uint8_t *bytes, size_t n, char *out);

#endif
