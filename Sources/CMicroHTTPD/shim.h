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

/// Starts a daemon on `address` that the caller runs (no thread of its own): it waits on
/// chime_mhd_epoll_fd for at most chime_mhd_wait_ms, then calls MHD_run. Bounded by connection
/// count, idle time and per-connection memory (which bounds the request line and headers);
/// `notify` hears of every connection opened and closed, `target` of every request's target.
static inline struct MHD_Daemon *chime_mhd_start(
    const struct sockaddr *address,
    int ipv6,
    unsigned int connection_limit,
    unsigned int timeout_seconds,
    size_t memory_limit,
    MHD_AccessHandlerCallback handler,
    MHD_NotifyConnectionCallback notify,
    chime_mhd_target_callback target,
    void *context
) {
    unsigned int flags = MHD_USE_EPOLL;
    if (ipv6) flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, context,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_NOTIFY_CONNECTION, notify, context,
        MHD_OPTION_URI_LOG_CALLBACK, target, context,
        MHD_OPTION_END);
}

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
