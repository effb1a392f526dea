/* accounts.h — the accounts tables of the store: users, sessions, API tokens
 * and the audit log (store/accounts.c).  store.h includes it.
 *
 * The store keeps what app/accounts/auth.c gives it: Argon2id strings, never a
 * password, and the hex SHA-256 of a session or API token, never the token. */
#ifndef DD_STORE_ACCOUNTS_H
#define DD_STORE_ACCOUNTS_H

#include <stdint.h>

#include "../common/err.h"

/* Disable (ending its sessions) or enable an account. */
int store_user_set_disabled(int64_t user_id, int disabled, struct dd_err *err);
/* The id of the account called name, 0 when none (the local user). */
int64_t store_user_id(const char *name);

#endif
