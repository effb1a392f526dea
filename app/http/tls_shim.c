/* tls_shim.c — build/tls/libssl.so: what lets Debian 12's CivetWeb serve HTTPS
 * with OpenSSL 3.
 *
 * CivetWeb 1.15 (libcivetweb1) is built for OpenSSL 1.1 and loads OpenSSL at run
 * time: dlopen("libssl.so") and dlopen("libcrypto.so"), then dlsym() of each
 * function it uses, by its 1.1 name.  On Debian 12 those names are OpenSSL 3,
 * which has every one of them but SSL_get_peer_certificate: 3.0 renamed it
 * SSL_get1_peer_certificate and kept the old name as a macro only, so CivetWeb's
 * pointer is NULL and it crashes on the first HTTPS connection (it asks every
 * connection for the client's certificate).
 *
 * This object has the soname "libssl.so", depends on the real libssl.so.3 and
 * defines the missing name.  app/http/server.c dlopen()s it by its full path before
 * CivetWeb loads OpenSSL; glibc then answers CivetWeb's dlopen("libssl.so") with
 * this already loaded object (a loaded object whose soname equals the asked name
 * is reused), and dlsym() on that handle searches this object first and then its
 * dependencies, so SSL_get_peer_certificate comes from here and every other SSL_*
 * from libssl.so.3.  Nothing is loaded when TLS is not asked for.
 *
 * It also holds dd_tls_check_pair(), which server.c calls before CivetWeb starts
 * so that a certificate or key that OpenSSL refuses is reported by the file the
 * user named (CivetWeb would name only the PEM file we build from both).
 *
 * build/tls/libcrypto.so, built from no source at all, does the same for
 * "libcrypto.so" (soname libcrypto.so, depends on libcrypto.so.3), so that only
 * the runtime package libssl3 is needed, not libssl-dev's unversioned links.
 */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

#define DD_EXPORT __attribute__((visibility("default")))

#if OPENSSL_VERSION_MAJOR >= 3
#undef SSL_get_peer_certificate
DD_EXPORT X509 *SSL_get_peer_certificate(const SSL *s);

/* OpenSSL 1.1's SSL_get_peer_certificate took a reference on the certificate
 * (the caller frees it with X509_free, and CivetWeb 1.15 does); 3.0 renamed that
 * very function SSL_get1_peer_certificate, so forward to it, not to get0. */
X509 *SSL_get_peer_certificate(const SSL *s)
{
	return SSL_get1_peer_certificate(s);
}
#endif

/* OpenSSL's reason for the last failure into msg, and the error queue cleared. */
static void last_error(char *msg, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	if (e) {
		const char *reason = ERR_reason_error_string(e);
		snprintf(msg, len, "%s", reason ? reason : "unknown OpenSSL error");
	} else {
		snprintf(msg, len, "unknown OpenSSL error");
	}
	ERR_clear_error();
}

/* Asked for a key's passphrase: none, so an encrypted key fails at once instead
 * of OpenSSL asking on the terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
	(void)buf, (void)size, (void)rwflag, (void)userdata;
	return 0;
}

DD_EXPORT int dd_tls_check_pair(const char *cert, const char *key, char *msg, size_t len);

/* Can OpenSSL serve with the certificate (chain) in PEM file cert and the private
 * key in PEM file key?  0 yes; 1 cert is refused, 2 key is refused, 3 they do
 * not belong together; OpenSSL's reason in msg. */
int dd_tls_check_pair(const char *cert, const char *key, char *msg, size_t len)
{
	int rc = 0;
	SSL_CTX *c = SSL_CTX_new(TLS_server_method());
	SSL_CTX *k = SSL_CTX_new(TLS_server_method());
	snprintf(msg, len, "%s", "");
	if (!c || !k) {
		last_error(msg, len);
		rc = 1;
		goto out;
	}
	SSL_CTX_set_default_passwd_cb(c, no_passphrase);
	SSL_CTX_set_default_passwd_cb(k, no_passphrase);
	if (SSL_CTX_use_certificate_chain_file(c, cert) != 1) {
		last_error(msg, len);
		rc = 1;
		goto out;
	}
	if (SSL_CTX_use_PrivateKey_file(k, key, SSL_FILETYPE_PEM) != 1) {
		last_error(msg, len);
		rc = 2;
		goto out;
	}
	if (SSL_CTX_use_PrivateKey_file(c, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(c) != 1) {
		last_error(msg, len);
		rc = 3;
		goto out;
	}
out:
	SSL_CTX_free(k);
	SSL_CTX_free(c);
	return rc;
}
