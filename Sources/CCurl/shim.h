#ifndef CHIME_CCURL_SHIM_H
#define CHIME_CCURL_SHIM_H

#include <stddef.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <curl/curl.h>

// curl_easy_setopt, curl_multi_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call: these take one argument of one type each. Callbacks get a setter of their own type, so
// that a Swift @convention(c) closure is passed as the function pointer curl expects. Only
// ChimeHTTPClient includes this header.

static inline CURLcode chime_easy_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode chime_easy_setopt_off(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

/// A string option; curl copies the string (every string option since 7.17.0).
static inline CURLcode chime_easy_setopt_string(CURL *easy, CURLoption option, const char *value) {
    return curl_easy_setopt(easy, option, value);
}

/// An object option (a user-data pointer, an error buffer, a `curl_slist`, a `CURLU`): curl keeps
/// the pointer, which must stay valid until the handle is cleaned up or the option set again.
static inline CURLcode chime_easy_setopt_pointer(CURL *easy, CURLoption option, void *value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode chime_easy_setopt_write_function(CURL *easy, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(easy, option, value);
}

static inline CURLcode chime_easy_setopt_read_function(CURL *easy, curl_read_callback value) {
    return curl_easy_setopt(easy, CURLOPT_READFUNCTION, value);
}

static inline CURLcode chime_easy_setopt_seek_function(CURL *easy, curl_seek_callback value) {
    return curl_easy_setopt(easy, CURLOPT_SEEKFUNCTION, value);
}

static inline CURLcode chime_easy_setopt_opensocket_function(CURL *easy, curl_opensocket_callback value) {
    return curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, value);
}

static inline CURLcode chime_easy_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

static inline CURLcode chime_easy_getinfo_pointer(CURL *easy, CURLINFO info, char **value) {
    return curl_easy_getinfo(easy, info, value);
}

/// What this libcurl was built with (`CURLVERSION_NOW` is a macro Swift does not import).
static inline curl_version_info_data *chime_version_info(void) {
    return curl_version_info(CURLVERSION_NOW);
}

static inline CURLMcode chime_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/// The address curl is about to connect to: the `struct sockaddr` at the end of `curl_sockaddr`
/// holds the whole address (a `sockaddr_in6` for IPv6), which a Swift copy of the struct would cut.
/// Copies it into `out` (16 bytes at least) and returns its length: 4 (IPv4), 16 (IPv6), 0 (another
/// family, such as a Unix socket).
static inline size_t chime_curl_sockaddr_address(const struct curl_sockaddr *address, unsigned char *out) {
    if (address->family == AF_INET && address->addrlen >= sizeof(struct sockaddr_in)) {
        memcpy(out, &((const struct sockaddr_in *)&address->addr)->sin_addr, 4);
        return 4;
    }
    if (address->family == AF_INET6 && address->addrlen >= sizeof(struct sockaddr_in6)) {
        memcpy(out, &((const struct sockaddr_in6 *)&address->addr)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

#endif
