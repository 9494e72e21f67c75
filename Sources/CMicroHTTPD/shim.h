#ifndef CHIME_CMICROHTTPD_SHIM_H
#define CHIME_CMICROHTTPD_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon, MHD_get_daemon_info and MHD_get_connection_info are variadic, which Swift
// cannot call: these fix the options Chime uses. Only ChimeHTTP includes this header.

/// Called once per request with its target as sent (path and query, before libmicrohttpd splits and
/// decodes it), before the headers are read; returns the request's initial context pointer.
typedef void *(*chime_mhd_target_callback)(void *context, const char *target, struct MHD_Connection *connection);

/// The TLS versions and ciphers offered: GnuTLS's NORMAL set, TLS 1.2 and 1.3 only.
#define CHIME_MHD_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/// Starts a daemon on `address` that the caller runs (no thread of its own): it waits on
/// chime_mhd_epoll_fd for at most chime_mhd_wait_ms, then calls MHD_run. Bounded by connection
/// count, idle time and per-connection memory (which bounds the request line and headers);
/// `notify` hears of every connection opened and closed, `target` of every request's target.
/// With `certificate` and `key` (PEM, NUL-terminated; GnuTLS copies them before this returns), it
/// speaks TLS only.
static inline struct MHD_Daemon *chime_mhd_start(
    const struct sockaddr *address,
    int ipv6,
    unsigned int connection_limit,
    unsigned int timeout_seconds,
    size_t memory_limit,
    const char *certificate,
    const char *key,
    MHD_AccessHandlerCallback handler,
    MHD_NotifyConnectionCallback notify,
    chime_mhd_target_callback target,
    void *context
) {
    unsigned int flags = MHD_USE_EPOLL;
    if (ipv6) flags |= MHD_USE_IPv6;
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)certificate},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)key},
        {MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)CHIME_MHD_TLS_PRIORITIES},
        {MHD_OPTION_END, 0, NULL},
    };
    struct MHD_OptionItem plain[] = {{MHD_OPTION_END, 0, NULL}};
    int secure = certificate != NULL && key != NULL;
    if (secure) flags |= MHD_USE_TLS;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, context,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_NOTIFY_CONNECTION, notify, context,
        MHD_OPTION_URI_LOG_CALLBACK, target, context,
        MHD_OPTION_ARRAY, secure ? tls : plain,
        MHD_OPTION_END);
}

/// Whether GnuTLS takes `certificate` and `key` (PEM, NUL-terminated) as a pair: a daemon that
/// listens on nothing is started with them, and stopped.
static inline int chime_mhd_tls_accepts(const char *certificate, const char *key, MHD_AccessHandlerCallback handler) {
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_TLS | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, handler, NULL,
        MHD_OPTION_HTTPS_MEM_CERT, certificate,
        MHD_OPTION_HTTPS_MEM_KEY, key,
        MHD_OPTION_HTTPS_PRIORITIES, CHIME_MHD_TLS_PRIORITIES,
        MHD_OPTION_END);
    if (daemon == NULL) return 0;
    MHD_stop_daemon(daemon);
    return 1;
}

/// Whether this libmicrohttpd was built with TLS (GnuTLS).
static inline int chime_mhd_has_tls(void) { return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES; }

/// The port the daemon listens on (the one the system chose when asked for port 0).
static inline uint16_t chime_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/// The epoll descriptor that becomes readable when the daemon has something to do.
static inline int chime_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

/// Milliseconds the caller may wait before it must call MHD_run again; -1: no limit.
static inline int64_t chime_mhd_wait_ms(struct MHD_Daemon *daemon) {
    MHD_UNSIGNED_LONG_LONG timeout = 0;
    if (MHD_get_timeout(daemon, &timeout) != MHD_YES) return -1;
    return timeout > INT64_MAX ? INT64_MAX : (int64_t)timeout;
}

/// The connection's socket, -1 if unknown.
static inline int chime_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

/// Copies the client's address, without the port, into `out` (16 bytes at least); returns its
/// length: 4 (IPv4), 16 (IPv6), 0 (unknown).
static inline size_t chime_mhd_client_address(struct MHD_Connection *connection, uint8_t *out) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return 0;
    if (info->client_addr->sa_family == AF_INET) {
        memcpy(out, &((const struct sockaddr_in *)info->client_addr)->sin_addr, 4);
        return 4;
    }
    if (info->client_addr->sa_family == AF_INET6) {
        memcpy(out, &((const struct sockaddr_in6 *)info->client_addr)->sin6_addr, 16);
        return 16;
    }
    return 0;
}

/// Queues a response whose body MHD copies, with `Connection: close`: every connection carries
/// one request (pipelined ones after it are not answered), so the time a connection may stay is
/// the time its request may take. `headers` holds `count` names and values, each NUL-terminated,
/// one after the other (name, value, name, value...), checked by the caller; `content_type` may be
/// NULL.
static inline enum MHD_Result chime_mhd_respond(
    struct MHD_Connection *connection,
    unsigned int status,
    const char *content_type,
    const char *headers,
    size_t count,
    const void *body,
    size_t length
) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    if (content_type != NULL) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    for (size_t i = 0; i < count; i++) {
        const char *name = headers;
        const char *value = name + strlen(name) + 1;
        MHD_add_response_header(response, name, value);
        headers = value + strlen(value) + 1;
    }
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

#endif
