#ifndef CHIME_CPOSTGRES_SHIM_H
#define CHIME_CPOSTGRES_SHIM_H

#include <libpq-fe.h>

/* The PG_DIAG_* field codes are character-literal macros, which Swift does not import. */
static inline int chime_pg_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }
static inline int chime_pg_diag_message_primary(void) { return PG_DIAG_MESSAGE_PRIMARY; }
static inline int chime_pg_diag_message_detail(void) { return PG_DIAG_MESSAGE_DETAIL; }
static inline int chime_pg_diag_message_hint(void) { return PG_DIAG_MESSAGE_HINT; }

#endif
