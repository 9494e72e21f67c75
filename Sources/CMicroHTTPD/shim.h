#ifndef CHIME_CMICROHTTPD_SHIM_H
#define CHIME_CMICROHTTPD_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <microhttpd.h>

// MHD_start_daemon and MHD_get_daemon_info are variadic, which Swift cannot call: these fix
// the options Chime uses. Only ChimeHTTP includes this header.

/// Starts a daemon with its own polling thread on `address`, bounded by connection count,
/// idle time and per-connection memory (which bounds the request line and headers).
static inline struct MHD_Daemon *chime_mhd_start(
    const struct sockaddr *address,
    int ipv6,
    unsigned int connection_limit,
    unsigned int per_ip_limit,
    unsigned int timeout_seconds,
    size_t memory_limit,
    MHD_AccessHandlerCallback handler,
    void *context
) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
    if (ipv6) flags |= MHD_USE_IPv6;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, handler, context,
        MHD_OPTION_SOCK_ADDR, address,
        MHD_OPTION_CONNECTION_LIMIT, connection_limit,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout_seconds,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
        MHD_OPTION_END);
}

/// The port the daemon listens on (the one the system chose when asked for port 0).
static inline uint16_t chime_mhd_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

/// Queues a response whose body MHD copies.
static inline enum MHD_Result chime_mhd_respond(
    struct MHD_Connection *connection,
    unsigned int status,
    const char *content_type,
    const char *allow,
    const void *body,
    size_t length
) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    if (content_type != NULL) MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (allow != NULL) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
    MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result result = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return result;
}

#endif
