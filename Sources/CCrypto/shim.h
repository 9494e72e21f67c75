#ifndef CHIME_CCRYPTO_SHIM_H
#define CHIME_CCRYPTO_SHIM_H

// OpenSSL 3's libcrypto, EVP interfaces only: ChimeCrypto calls nothing deprecated in 3.0.
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>

// The key selections are macros in parentheses, which Swift does not import: here as constants.
static const int CHIME_EVP_PKEY_KEYPAIR = EVP_PKEY_KEYPAIR;
static const int CHIME_EVP_PKEY_PUBLIC_KEY = EVP_PKEY_PUBLIC_KEY;

#endif
