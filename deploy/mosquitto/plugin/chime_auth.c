/*
 * chime_auth: device accounts for mosquitto 2.0 without per-device state in the broker.
 *
 * A device logs in with its device id as user name and, as password, a token the backend signed
 * (a compact JWT, ES256, claims sub = the device id, iat, exp). This plugin checks the token
 * against the public keys it is given, and gives the device what deploy/mosquitto/chime.acl's
 * patterns give a device: it writes P/{id}/cmd/#, reads P/{id}/notifications, P/{id}/replies,
 * P/{id}/replies/# and P/$reply/{id}/#. PROTOCOL.md section 1 ("Device tokens") is the format;
 * docs/accounts.md the operations. Built by `make plugin` (cc, libcrypto) against Debian's
 * mosquitto-dev headers, plugin API version 5 (mosquitto 2.0.11).
 *
 * Accounts of the password file (backends, workers, devices with passwords) are not this
 * plugin's: for a user name listed in plugin_opt_password_file it defers (MOSQ_ERR_PLUGIN_DEFER)
 * both the login and every ACL check, so mosquitto's password_file and acl_file decide them as
 * before. mosquitto runs a plugin's callbacks before its own password and ACL file checks, and
 * keeps that order across a reload (SIGHUP).
 *
 * Options (plugin_opt_NAME VALUE in mosquitto.conf):
 *   public_key*     a PEM file of one or more P-256 public keys; several options whose names start
 *                   with public_key (public_key, public_key_next) add more files. A token signed by
 *                   any of the keys (at most AUTH_MAX_KEYS) is accepted. Required.
 *   deny_file       the deny list `chime accounts` writes: one line a device, "ID STATE [TIME]",
 *                   STATE disabled or deleted (every token refused) or rotated (tokens issued
 *                   before TIME refused). Optional; a missing file is an empty list.
 *   password_file   the same file as mosquitto's password_file: its user names never log in with a
 *                   token and keep the acl_file's rules. Optional without a password_file.
 *   topic_prefix    chimed's --topic-prefix, default chime.
 *   max_lifetime    the longest exp - iat a token may have, in seconds (default 31622400, 366 days).
 *
 * The files are read again when they change (device, inode, size or modification time differ),
 * looked at on every login and once a second: a device disabled or deleted is refused at its next
 * login and its connections are closed (mosquitto_kick_client_by_username) within about a second.
 * A key file that cannot be read keeps the keys read before; a deny list or a password file that
 * cannot be read, or is malformed or too large, refuses every token until it is fixed (fail closed).
 *
 * Everything read is bounded (AUTH_MAX_*); the broker is single-threaded, so is this.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mosquitto.h>
#include <mosquitto_broker.h>
#include <mosquitto_plugin.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

/* Limits, as PROTOCOL.md section 1 states them. */
#define AUTH_MAX_DEVICE_ID 128          /* a device id, so a token's user name and sub */
#define AUTH_MAX_TOKEN 2048             /* a token's bytes (the password) */
#define AUTH_MAX_PART 1024              /* a token's decoded header or claims */
#define AUTH_MAX_JSON_DEPTH 8           /* nesting inside the header or claims */
#define AUTH_MAX_KEYS 16                /* public keys, over every public_key file */
#define AUTH_MAX_KEY_FILE 65536         /* bytes of one public_key file */
#define AUTH_MAX_LIST_FILE (64L << 20)  /* bytes of the deny list or the password file */
#define AUTH_MAX_LIST_ENTRIES 1000000   /* lines of the deny list or the password file */
#define AUTH_MAX_PREFIX 64              /* the topic prefix */
#define AUTH_CLOCK_LEEWAY 60            /* seconds an iat or nbf may be ahead of the broker's clock */
#define AUTH_DEFAULT_MAX_LIFETIME 31622400

/* A file read again when it changes. */
struct watched_file {
	char *path;
	bool seen;      /* stat succeeded last time */
	struct stat last;
};

/* A name and, for the deny list, the iat before which its tokens are refused (INT64_MAX: all). */
struct entry {
	char *name;
	int64_t before;
};

/* Names sorted by strcmp, each once. */
struct name_list {
	struct entry *entries;
	size_t count;
	bool valid;     /* false: unreadable, malformed or too large (fail closed) */
};

static struct {
	mosquitto_plugin_id_t *id;
	char prefix[AUTH_MAX_PREFIX + 1];
	int64_t max_lifetime;
	struct watched_file key_files[AUTH_MAX_KEYS];
	size_t key_file_count;
	EVP_PKEY *keys[AUTH_MAX_KEYS];
	size_t key_count;
	struct watched_file deny_file;
	struct name_list deny;
	struct watched_file password_file;
	struct name_list passwords;
	/* Names whose connections are closed at the next tick (the deny list tightened for them). */
	char **kicks;
	size_t kick_count;
	struct timespec last_poll;
} chime;

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */

/* A device id (PROTOCOL.md section 1): 1 to 128 of A-Z a-z 0-9 _ . : @ -, not starting with $
 * (no character here is $, + or #, so none can widen a topic pattern). */
static bool valid_device_id(const char *s, size_t len)
{
	if(len == 0 || len > AUTH_MAX_DEVICE_ID) return false;
	for(size_t i = 0; i < len; i++){
		unsigned char c = (unsigned char)s[i];
		bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
			|| c == '_' || c == '.' || c == ':' || c == '@' || c == '-';
		if(!ok) return false;
	}
	return true;
}

static int compare_entries(const void *a, const void *b)
{
	return strcmp(((const struct entry *)a)->name, ((const struct entry *)b)->name);
}

static const struct entry *find_entry(const struct name_list *list, const char *name)
{
	struct entry key = { .name = (char *)name, .before = 0 };
	if(list->count == 0) return NULL;
	return bsearch(&key, list->entries, list->count, sizeof(struct entry), compare_entries);
}

static void free_list(struct name_list *list)
{
	for(size_t i = 0; i < list->count; i++) free(list->entries[i].name);
	free(list->entries);
	list->entries = NULL;
	list->count = 0;
}

/* Whether the file changed since the last call (or appeared, or vanished). */
static bool file_changed(struct watched_file *file)
{
	struct stat now;
	bool seen = stat(file->path, &now) == 0;
	bool changed = seen != file->seen;
	if(seen && file->seen){
		changed = now.st_dev != file->last.st_dev || now.st_ino != file->last.st_ino
			|| now.st_size != file->last.st_size
			|| now.st_mtim.tv_sec != file->last.st_mtim.tv_sec
			|| now.st_mtim.tv_nsec != file->last.st_mtim.tv_nsec;
	}
	file->seen = seen;
	if(seen) file->last = now;
	return changed;
}

/* Reads a whole file of at most `limit` bytes, NUL-terminated. Returns NULL (errno set, EFBIG when
 * too large) on failure; *length is the number of bytes. */
static char *read_file(const char *path, long limit, size_t *length)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if(fd < 0) return NULL;
	size_t capacity = 4096, used = 0;
	char *buffer = malloc(capacity + 1);
	if(buffer == NULL){
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	for(;;){
		if(used == capacity){
			if((long)capacity > limit){
				free(buffer);
				close(fd);
				errno = EFBIG;
				return NULL;
			}
			size_t bigger = capacity * 2;
			char *grown = realloc(buffer, bigger + 1);
			if(grown == NULL){
				free(buffer);
				close(fd);
				errno = ENOMEM;
				return NULL;
			}
			buffer = grown;
			capacity = bigger;
		}
		ssize_t n = read(fd, buffer + used, capacity - used);
		if(n < 0){
			if(errno == EINTR) continue;
			int saved = errno;
			free(buffer);
			close(fd);
			errno = saved;
			return NULL;
		}
		if(n == 0) break;
		used += (size_t)n;
		if((long)used > limit){
			free(buffer);
			close(fd);
			errno = EFBIG;
			return NULL;
		}
	}
	close(fd);
	buffer[used] = '\0';
	*length = used;
	return buffer;
}

/* ------------------------------------------------------------------------------------------ */
/* The deny list and the password file's names                                               */

/* Parses "ID [STATE [TIME]]" lines (deny list) or "NAME:HASH" lines (password file) into `out`,
 * sorted and merged. Returns false, with a reason, for a malformed or oversized file. */
static bool parse_list(char *text, size_t length, bool deny, struct name_list *out, char *why, size_t why_size)
{
	size_t capacity = 64, count = 0, line_number = 0;
	struct entry *entries = malloc(capacity * sizeof(struct entry));
	if(entries == NULL){
		snprintf(why, why_size, "out of memory");
		return false;
	}
	char *cursor = text, *end = text + length;
	while(cursor < end){
		char *newline = memchr(cursor, '\n', (size_t)(end - cursor));
		char *line_end = newline ? newline : end;
		*line_end = '\0';
		char *line = cursor;
		cursor = line_end + 1;
		line_number++;
		if(memchr(line, '\0', (size_t)(line_end - line)) != NULL){
			snprintf(why, why_size, "line %zu holds a NUL byte", line_number);
			goto fail;
		}
		while(*line == ' ' || *line == '\t' || *line == '\r') line++;
		if(*line == '\0' || *line == '#') continue;
		char *name = line, *state = NULL, *time_text = NULL;
		if(deny){
			char *save = NULL;
			name = strtok_r(line, " \t\r", &save);
			state = strtok_r(NULL, " \t\r", &save);
			time_text = state ? strtok_r(NULL, " \t\r", &save) : NULL;
			if(time_text && strtok_r(NULL, " \t\r", &save)){
				snprintf(why, why_size, "line %zu: more than ID STATE TIME", line_number);
				goto fail;
			}
		}else{
			char *colon = strchr(line, ':');
			if(colon == NULL){
				snprintf(why, why_size, "line %zu has no ':'", line_number);
				goto fail;
			}
			*colon = '\0';
		}
		size_t name_length = strlen(name);
		if(deny && !valid_device_id(name, name_length)){
			snprintf(why, why_size, "line %zu: not a device id", line_number);
			goto fail;
		}
		if(!deny && (name_length == 0 || name_length > 65535)){
			snprintf(why, why_size, "line %zu: no user name", line_number);
			goto fail;
		}
		int64_t before = INT64_MAX;
		if(deny && state && strcmp(state, "rotated") == 0){
			char *after = NULL;
			errno = 0;
			long long value = time_text ? strtoll(time_text, &after, 10) : -1;
			if(time_text == NULL || errno != 0 || *after != '\0' || value < 0){
				snprintf(why, why_size, "line %zu: rotated needs a time (seconds since 1970)", line_number);
				goto fail;
			}
			before = (int64_t)value;
		}else if(deny && state && strcmp(state, "disabled") != 0 && strcmp(state, "deleted") != 0){
			snprintf(why, why_size, "line %zu: the state is disabled, deleted or rotated", line_number);
			goto fail;
		}
		if(count == AUTH_MAX_LIST_ENTRIES){
			snprintf(why, why_size, "more than %d entries", AUTH_MAX_LIST_ENTRIES);
			goto fail;
		}
		if(count == capacity){
			struct entry *grown = realloc(entries, 2 * capacity * sizeof(struct entry));
			if(grown == NULL){
				snprintf(why, why_size, "out of memory");
				goto fail;
			}
			entries = grown;
			capacity *= 2;
		}
		entries[count].name = strdup(name);
		if(entries[count].name == NULL){
			snprintf(why, why_size, "out of memory");
			goto fail;
		}
		entries[count].before = before;
		count++;
	}
	qsort(entries, count, sizeof(struct entry), compare_entries);
	/* One entry a name, the strictest: refusing every token wins, else the latest rotation. */
	size_t kept = 0;
	for(size_t i = 0; i < count; i++){
		if(kept > 0 && strcmp(entries[kept - 1].name, entries[i].name) == 0){
			if(entries[i].before > entries[kept - 1].before) entries[kept - 1].before = entries[i].before;
			free(entries[i].name);
		}else{
			entries[kept++] = entries[i];
		}
	}
	out->entries = entries;
	out->count = kept;
	out->valid = true;
	return true;
fail:
	for(size_t i = 0; i < count; i++) free(entries[i].name);
	free(entries);
	return false;
}

static void queue_kick(const char *name)
{
	if(chime.kick_count >= AUTH_MAX_LIST_ENTRIES) return;
	char **grown = realloc(chime.kicks, (chime.kick_count + 1) * sizeof(char *));
	if(grown == NULL) return;
	chime.kicks = grown;
	char *copy = strdup(name);
	if(copy == NULL) return;
	chime.kicks[chime.kick_count++] = copy;
}

/* Reads the deny list or the password file again (if `force` or it changed). A deny entry that is
 * new or stricter than before queues a kick of that name's connections. */
static void refresh_list(struct watched_file *file, struct name_list *list, bool deny, bool force)
{
	if(file->path == NULL) return;
	if(!file_changed(file) && !force) return;
	const char *what = deny ? "deny list" : "password file";
	struct name_list fresh = { 0 };
	char why[160] = "";
	size_t length = 0;
	char *text = read_file(file->path, AUTH_MAX_LIST_FILE, &length);
	if(text == NULL){
		if(errno == ENOENT && deny){
			fresh.valid = true;  /* no deny list yet: nothing is denied */
		}else{
			snprintf(why, sizeof(why), "%s", errno == EFBIG ? "larger than 64 MiB" : strerror(errno));
		}
	}else{
		parse_list(text, length, deny, &fresh, why, sizeof(why));
		free(text);
	}
	if(!fresh.valid){
		mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: cannot read the %s %s (%s): every device token is refused until it is fixed",
				what, file->path, why);
	}
	if(deny && fresh.valid){
		for(size_t i = 0; i < fresh.count; i++){
			const struct entry *old = list->valid ? find_entry(list, fresh.entries[i].name) : NULL;
			if(old == NULL || old->before < fresh.entries[i].before) queue_kick(fresh.entries[i].name);
		}
	}
	free_list(list);
	*list = fresh;
}

/* ------------------------------------------------------------------------------------------ */
/* Keys                                                                                        */

static bool is_p256(EVP_PKEY *key)
{
	char group[64];
	size_t group_length = 0;
	if(EVP_PKEY_is_a(key, "EC") != 1) return false;
	if(EVP_PKEY_get_group_name(key, group, sizeof(group), &group_length) != 1) return false;
	return strcmp(group, "prime256v1") == 0 || strcmp(group, "P-256") == 0;
}

/* Reads every key file. Returns false (keeping the keys read before) if a file cannot be read,
 * holds no P-256 public key or holds more keys than allowed. */
static bool load_keys(void)
{
	EVP_PKEY *fresh[AUTH_MAX_KEYS];
	size_t count = 0;
	bool ok = true;
	for(size_t f = 0; f < chime.key_file_count && ok; f++){
		const char *path = chime.key_files[f].path;
		size_t length = 0;
		char *text = read_file(path, AUTH_MAX_KEY_FILE, &length);
		if(text == NULL){
			mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: cannot read the public key file %s: %s", path,
					errno == EFBIG ? "larger than 64 KiB" : strerror(errno));
			ok = false;
			break;
		}
		BIO *bio = BIO_new_mem_buf(text, (int)length);
		size_t in_file = 0;
		while(bio){
			EVP_PKEY *key = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
			if(key == NULL) break;
			if(!is_p256(key)){
				mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: %s holds a key that is not a P-256 (ES256) public key", path);
				EVP_PKEY_free(key);
				ok = false;
				break;
			}
			if(count == AUTH_MAX_KEYS){
				mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: more than %d public keys", AUTH_MAX_KEYS);
				EVP_PKEY_free(key);
				ok = false;
				break;
			}
			fresh[count++] = key;
			in_file++;
		}
		ERR_clear_error();  /* the end of the PEM data is reported as an error */
		BIO_free(bio);
		free(text);
		if(ok && in_file == 0){
			mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: %s holds no PEM public key", path);
			ok = false;
		}
	}
	if(!ok){
		for(size_t i = 0; i < count; i++) EVP_PKEY_free(fresh[i]);
		return false;
	}
	for(size_t i = 0; i < chime.key_count; i++) EVP_PKEY_free(chime.keys[i]);
	memcpy(chime.keys, fresh, count * sizeof(EVP_PKEY *));
	chime.key_count = count;
	return true;
}

static void refresh_keys(bool force)
{
	bool changed = force;
	for(size_t f = 0; f < chime.key_file_count; f++){
		if(file_changed(&chime.key_files[f])) changed = true;
	}
	if(changed && load_keys()){
		mosquitto_log_printf(MOSQ_LOG_INFO, "chime_auth: %zu public key(s) loaded", chime.key_count);
	}
}

static void refresh_all(bool force)
{
	refresh_keys(force);
	refresh_list(&chime.deny_file, &chime.deny, true, force);
	refresh_list(&chime.password_file, &chime.passwords, false, force);
}

/* ------------------------------------------------------------------------------------------ */
/* The token                                                                                   */

static int base64url_value(unsigned char c)
{
	if(c >= 'A' && c <= 'Z') return c - 'A';
	if(c >= 'a' && c <= 'z') return c - 'a' + 26;
	if(c >= '0' && c <= '9') return c - '0' + 52;
	if(c == '-') return 62;
	if(c == '_') return 63;
	return -1;
}

/* Canonical base64url without padding (RFC 7515): returns the decoded length, or -1. */
static long base64url_decode(const char *text, size_t length, unsigned char *out, size_t capacity)
{
	if(length % 4 == 1) return -1;
	size_t written = 0;
	uint32_t group = 0;
	int bits = 0;
	for(size_t i = 0; i < length; i++){
		int value = base64url_value((unsigned char)text[i]);
		if(value < 0) return -1;
		group = (group << 6) | (uint32_t)value;
		bits += 6;
		if(bits >= 8){
			bits -= 8;
			if(written == capacity) return -1;
			out[written++] = (unsigned char)(group >> bits);
			group &= (1u << bits) - 1;
		}
	}
	if(group != 0) return -1;  /* unused low bits of the last character must be zero */
	return (long)written;
}

/* A strict reader of the flat JSON objects a JWT's header and claims are. */
struct json {
	const unsigned char *p, *end;
};

struct json_string {
	const unsigned char *start;
	size_t length;
	bool escaped;   /* holds a backslash escape: compared as unequal to anything */
};

static void json_space(struct json *j)
{
	while(j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static bool json_string(struct json *j, struct json_string *s)
{
	if(j->p >= j->end || *j->p != '"') return false;
	j->p++;
	s->start = j->p;
	s->escaped = false;
	while(j->p < j->end && *j->p != '"'){
		if(*j->p < 0x20) return false;
		if(*j->p == '\\'){
			s->escaped = true;
			j->p++;
			if(j->p >= j->end) return false;
			if(*j->p == 'u'){
				for(int i = 0; i < 4; i++){
					j->p++;
					if(j->p >= j->end) return false;
					unsigned char c = *j->p;
					bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
					if(!hex) return false;
				}
			}else if(strchr("\"\\/bfnrt", *j->p) == NULL || *j->p == '\0'){
				return false;
			}
		}
		j->p++;
	}
	if(j->p >= j->end) return false;
	s->length = (size_t)(j->p - s->start);
	j->p++;
	return true;
}

/* An integer that fits in int64_t (NumericDate as whole seconds); *is_integer false for any other
 * JSON number, which is skipped. */
static bool json_number(struct json *j, int64_t *value, bool *is_integer)
{
	const unsigned char *start = j->p;
	if(j->p < j->end && *j->p == '-') j->p++;
	const unsigned char *digits = j->p;
	while(j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
	size_t digit_count = (size_t)(j->p - digits);
	if(digit_count == 0 || (digit_count > 1 && *digits == '0')) return false;
	*is_integer = true;
	if(j->p < j->end && *j->p == '.'){
		*is_integer = false;
		j->p++;
		const unsigned char *fraction = j->p;
		while(j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
		if(j->p == fraction) return false;
	}
	if(j->p < j->end && (*j->p == 'e' || *j->p == 'E')){
		*is_integer = false;
		j->p++;
		if(j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
		const unsigned char *exponent = j->p;
		while(j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
		if(j->p == exponent) return false;
	}
	if(*is_integer){
		if(digit_count > 18){
			*is_integer = false;  /* beyond any date: not a NumericDate this reader takes */
		}else{
			int64_t v = 0;
			for(const unsigned char *d = digits; d < digits + digit_count; d++) v = v * 10 + (*d - '0');
			*value = (*start == '-') ? -v : v;
		}
	}
	return true;
}

static bool json_literal(struct json *j, const char *word)
{
	size_t n = strlen(word);
	if((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0) return false;
	j->p += n;
	return true;
}

static bool json_skip(struct json *j, int depth);

static bool json_skip_container(struct json *j, int depth, unsigned char close, bool object)
{
	if(depth >= AUTH_MAX_JSON_DEPTH) return false;
	j->p++;
	json_space(j);
	if(j->p < j->end && *j->p == close){
		j->p++;
		return true;
	}
	for(;;){
		json_space(j);
		if(object){
			struct json_string key;
			if(!json_string(j, &key)) return false;
			json_space(j);
			if(j->p >= j->end || *j->p != ':') return false;
			j->p++;
			json_space(j);
		}
		if(!json_skip(j, depth + 1)) return false;
		json_space(j);
		if(j->p >= j->end) return false;
		if(*j->p == ','){
			j->p++;
			continue;
		}
		if(*j->p != close) return false;
		j->p++;
		return true;
	}
}

static bool json_skip(struct json *j, int depth)
{
	if(j->p >= j->end) return false;
	switch(*j->p){
		case '"': {
			struct json_string s;
			return json_string(j, &s);
		}
		case '{': return json_skip_container(j, depth, '}', true);
		case '[': return json_skip_container(j, depth, ']', false);
		case 't': return json_literal(j, "true");
		case 'f': return json_literal(j, "false");
		case 'n': return json_literal(j, "null");
		default: {
			int64_t value;
			bool integer;
			return json_number(j, &value, &integer);
		}
	}
}

static bool string_is(const struct json_string *s, const char *text)
{
	return !s->escaped && s->length == strlen(text) && memcmp(s->start, text, s->length) == 0;
}

/* What the header and the claims say. */
struct token_fields {
	bool has_alg, has_typ, has_crit;
	struct json_string alg, typ;
	bool has_sub, has_exp, has_iat, has_nbf;
	struct json_string sub;
	int64_t exp, iat, nbf;
	bool dates_are_integers;
};

/* Reads one object, recording the members a header (`claims` false) or claims object has. A
 * member given twice, or of the wrong type, makes it malformed. */
static bool read_object(const unsigned char *bytes, size_t length, bool claims, struct token_fields *f)
{
	struct json j = { bytes, bytes + length };
	json_space(&j);
	if(j.p >= j.end || *j.p != '{') return false;
	j.p++;
	json_space(&j);
	if(j.p < j.end && *j.p == '}'){
		j.p++;
	}else{
		for(;;){
			json_space(&j);
			struct json_string key;
			if(!json_string(&j, &key)) return false;
			json_space(&j);
			if(j.p >= j.end || *j.p != ':') return false;
			j.p++;
			json_space(&j);
			struct json_string *string_target = NULL;
			bool *string_seen = NULL;
			int64_t *number_target = NULL;
			bool *number_seen = NULL;
			if(!claims && string_is(&key, "alg")){ string_target = &f->alg; string_seen = &f->has_alg; }
			else if(!claims && string_is(&key, "typ")){ string_target = &f->typ; string_seen = &f->has_typ; }
			else if(!claims && string_is(&key, "crit")){
				f->has_crit = true;
			}
			else if(claims && string_is(&key, "sub")){ string_target = &f->sub; string_seen = &f->has_sub; }
			else if(claims && string_is(&key, "exp")){ number_target = &f->exp; number_seen = &f->has_exp; }
			else if(claims && string_is(&key, "iat")){ number_target = &f->iat; number_seen = &f->has_iat; }
			else if(claims && string_is(&key, "nbf")){ number_target = &f->nbf; number_seen = &f->has_nbf; }
			if(string_target){
				if(*string_seen || !json_string(&j, string_target)) return false;
				*string_seen = true;
			}else if(number_target){
				bool integer = false;
				if(*number_seen || !json_number(&j, number_target, &integer)) return false;
				if(!integer) f->dates_are_integers = false;
				*number_seen = true;
			}else{
				if(!json_skip(&j, 1)) return false;
			}
			json_space(&j);
			if(j.p >= j.end) return false;
			if(*j.p == ','){
				j.p++;
				continue;
			}
			if(*j.p != '}') return false;
			j.p++;
			break;
		}
	}
	json_space(&j);
	return j.p == j.end;
}

/* Whether `signature` (r and s, 32 bytes each) is an ES256 signature of `input` by one of the keys. */
static bool verify_es256(const unsigned char *input, size_t input_length, const unsigned char signature[64])
{
	bool verified = false;
	ECDSA_SIG *value = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(signature, 32, NULL);
	BIGNUM *s = BN_bin2bn(signature + 32, 32, NULL);
	unsigned char *der = NULL;
	int der_length = -1;
	if(value && r && s && ECDSA_SIG_set0(value, r, s) == 1){
		r = s = NULL;  /* owned by value now */
		der_length = i2d_ECDSA_SIG(value, &der);
	}
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(value);
	for(size_t i = 0; der_length > 0 && i < chime.key_count && !verified; i++){
		EVP_MD_CTX *context = EVP_MD_CTX_new();
		if(context == NULL) break;
		if(EVP_DigestVerifyInit(context, NULL, EVP_sha256(), NULL, chime.keys[i]) == 1
				&& EVP_DigestVerify(context, der, (size_t)der_length, input, input_length) == 1){
			verified = true;
		}
		EVP_MD_CTX_free(context);
	}
	OPENSSL_free(der);
	ERR_clear_error();
	return verified;
}

/* Checks `token` for device `username`. Returns NULL when it is good, else why it is not. */
static const char *check_token(const char *username, const char *token, int64_t now)
{
	size_t username_length = strnlen(username, AUTH_MAX_DEVICE_ID + 1);
	if(!valid_device_id(username, username_length)) return "the user name is not a device id";
	size_t length = strnlen(token, AUTH_MAX_TOKEN + 1);
	if(length > AUTH_MAX_TOKEN) return "the token is longer than 2048 bytes";
	const char *dot1 = memchr(token, '.', length);
	const char *dot2 = dot1 ? memchr(dot1 + 1, '.', length - (size_t)(dot1 + 1 - token)) : NULL;
	if(dot2 == NULL || memchr(dot2 + 1, '.', length - (size_t)(dot2 + 1 - token)) != NULL){
		return "not a compact JWT (three parts)";
	}
	unsigned char header[AUTH_MAX_PART], claims[AUTH_MAX_PART], signature[65];
	long header_length = base64url_decode(token, (size_t)(dot1 - token), header, sizeof(header));
	long claims_length = base64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), claims, sizeof(claims));
	long signature_length = base64url_decode(dot2 + 1, length - (size_t)(dot2 + 1 - token), signature, sizeof(signature));
	if(header_length < 0 || claims_length < 0 || signature_length < 0) return "a part is not base64url (or too long)";
	struct token_fields f;
	memset(&f, 0, sizeof(f));
	f.dates_are_integers = true;
	if(!read_object(header, (size_t)header_length, false, &f)) return "the header is not a JSON object";
	if(!f.has_alg || !string_is(&f.alg, "ES256")) return "the header's alg is not ES256";
	if(f.has_typ && !string_is(&f.typ, "JWT")) return "the header's typ is not JWT";
	if(f.has_crit) return "the header has crit";
	if(!read_object(claims, (size_t)claims_length, true, &f)) return "the claims are not a JSON object";
	if(!f.has_sub || !f.has_exp || !f.has_iat) return "sub, iat or exp is missing";
	if(!f.dates_are_integers) return "iat, exp and nbf must be whole seconds";
	if(f.sub.escaped || f.sub.length != username_length || memcmp(f.sub.start, username, username_length) != 0){
		return "sub is not the user name";
	}
	if(signature_length != 64) return "the signature is not 64 bytes (ES256)";
	if(chime.key_count == 0) return "no public key is loaded";
	if(!verify_es256((const unsigned char *)token, (size_t)(dot2 - token), signature)) return "the signature is not by a known key";
	if(f.exp <= now) return "expired";
	if(f.iat > now + AUTH_CLOCK_LEEWAY) return "issued in the future (iat)";
	if(f.has_nbf && f.nbf > now + AUTH_CLOCK_LEEWAY) return "not valid yet (nbf)";
	if(f.exp - f.iat > chime.max_lifetime) return "its lifetime (exp - iat) is longer than max_lifetime";
	if(chime.deny_file.path){
		if(!chime.deny.valid) return "the deny list cannot be read";
		const struct entry *denied = find_entry(&chime.deny, username);
		if(denied && denied->before == INT64_MAX) return "the device is disabled or deleted";
		if(denied && f.iat < denied->before) return "the token was issued before the device's last rotation";
	}
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Callbacks                                                                                   */

/* Whether a user name belongs to the password file (so not to this plugin). Unknown while the
 * password file cannot be read: then every name is deferred, and no token logs in. */
static bool is_password_account(const char *username)
{
	if(chime.password_file.path == NULL) return false;
	if(!chime.passwords.valid) return true;
	return find_entry(&chime.passwords, username) != NULL;
}

static int on_basic_auth(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)userdata;
	struct mosquitto_evt_basic_auth *ed = event_data;
	refresh_all(false);
	if(ed->username == NULL || is_password_account(ed->username)) return MOSQ_ERR_PLUGIN_DEFER;
	const char *why = ed->password ? check_token(ed->username, ed->password, (int64_t)time(NULL)) : "no token";
	if(why == NULL) return MOSQ_ERR_SUCCESS;
	size_t length = strnlen(ed->username, AUTH_MAX_DEVICE_ID + 1);
	if(valid_device_id(ed->username, length)){
		mosquitto_log_printf(MOSQ_LOG_NOTICE, "chime_auth: refused device %s: %s", ed->username, why);
	}else{
		mosquitto_log_printf(MOSQ_LOG_NOTICE, "chime_auth: refused a client: %s", why);
	}
	return MOSQ_ERR_AUTH;
}

static bool matches(const char *pattern, const char *topic)
{
	bool result = false;
	return mosquitto_topic_matches_sub(pattern, topic, &result) == MOSQ_ERR_SUCCESS && result;
}

static int on_acl_check(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)userdata;
	struct mosquitto_evt_acl_check *ed = event_data;
	const char *username = mosquitto_client_username(ed->client);
	if(username == NULL || is_password_account(username)) return MOSQ_ERR_PLUGIN_DEFER;
	size_t length = strnlen(username, AUTH_MAX_DEVICE_ID + 1);
	if(!valid_device_id(username, length)) return MOSQ_ERR_ACL_DENIED;
	/* As acl_file does, a subscription is not checked against the patterns: what it delivers is
	 * (READ). But a device never joins a shared subscription: a member of the workers' group
	 * (chimed --routing slot) would take a share of every device's commands and drop it. */
	if(ed->access == MOSQ_ACL_SUBSCRIBE){
		return ed->topic != NULL && strncmp(ed->topic, "$share/", 7) == 0 ? MOSQ_ERR_ACL_DENIED : MOSQ_ERR_SUCCESS;
	}
	if(ed->access == MOSQ_ACL_UNSUBSCRIBE) return MOSQ_ERR_SUCCESS;
	if(ed->topic == NULL) return MOSQ_ERR_ACL_DENIED;
	char pattern[AUTH_MAX_PREFIX + AUTH_MAX_DEVICE_ID + 32];
	if(ed->access == MOSQ_ACL_WRITE){
		snprintf(pattern, sizeof(pattern), "%s/%s/cmd/#", chime.prefix, username);
		return matches(pattern, ed->topic) ? MOSQ_ERR_SUCCESS : MOSQ_ERR_ACL_DENIED;
	}
	if(ed->access == MOSQ_ACL_READ){
		static const char *const reads[] = { "%s/%s/notifications", "%s/%s/replies", "%s/%s/replies/#", "%s/$reply/%s/#" };
		for(size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++){
			snprintf(pattern, sizeof(pattern), reads[i], chime.prefix, username);
			if(matches(pattern, ed->topic)) return MOSQ_ERR_SUCCESS;
		}
	}
	return MOSQ_ERR_ACL_DENIED;
}

static int on_tick(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)event_data;
	(void)userdata;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	long long elapsed_ms = (now.tv_sec - chime.last_poll.tv_sec) * 1000LL + (now.tv_nsec - chime.last_poll.tv_nsec) / 1000000;
	if(elapsed_ms >= 1000){
		chime.last_poll = now;
		refresh_all(false);
	}
	/* Outside of any client's packet handling: closing connections is safe here. */
	for(size_t i = 0; i < chime.kick_count; i++){
		if(!is_password_account(chime.kicks[i])){
			mosquitto_log_printf(MOSQ_LOG_NOTICE, "chime_auth: closing the connections of device %s (deny list)", chime.kicks[i]);
			mosquitto_kick_client_by_username(chime.kicks[i], true);
		}
		free(chime.kicks[i]);
	}
	chime.kick_count = 0;
	return MOSQ_ERR_SUCCESS;
}

static int on_reload(int event, void *event_data, void *userdata)
{
	(void)event;
	(void)event_data;
	(void)userdata;
	refresh_all(true);
	return MOSQ_ERR_PLUGIN_DEFER;  /* let other plugins see the reload too */
}

/* ------------------------------------------------------------------------------------------ */
/* Plugin entry points (API version 5)                                                         */

int mosquitto_plugin_version(int supported_version_count, const int *supported_versions)
{
	for(int i = 0; i < supported_version_count; i++){
		if(supported_versions[i] == 5) return 5;
	}
	return -1;
}

static void release(void)
{
	for(size_t i = 0; i < chime.key_count; i++) EVP_PKEY_free(chime.keys[i]);
	for(size_t f = 0; f < chime.key_file_count; f++) free(chime.key_files[f].path);
	free(chime.deny_file.path);
	free(chime.password_file.path);
	free_list(&chime.deny);
	free_list(&chime.passwords);
	for(size_t i = 0; i < chime.kick_count; i++) free(chime.kicks[i]);
	free(chime.kicks);
	memset(&chime, 0, sizeof(chime));
}

int mosquitto_plugin_init(mosquitto_plugin_id_t *identifier, void **userdata, struct mosquitto_opt *options, int option_count)
{
	*userdata = NULL;
	memset(&chime, 0, sizeof(chime));
	chime.id = identifier;
	snprintf(chime.prefix, sizeof(chime.prefix), "chime");
	chime.max_lifetime = AUTH_DEFAULT_MAX_LIFETIME;
	for(int i = 0; i < option_count; i++){
		const char *key = options[i].key, *value = options[i].value;
		if(key == NULL || value == NULL) continue;
		if(strncasecmp(key, "public_key", 10) == 0){
			if(chime.key_file_count == AUTH_MAX_KEYS){
				mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: more than %d public_key options", AUTH_MAX_KEYS);
				goto fail;
			}
			chime.key_files[chime.key_file_count++].path = strdup(value);
		}else if(strcasecmp(key, "deny_file") == 0){
			free(chime.deny_file.path);
			chime.deny_file.path = strdup(value);
		}else if(strcasecmp(key, "password_file") == 0){
			free(chime.password_file.path);
			chime.password_file.path = strdup(value);
		}else if(strcasecmp(key, "topic_prefix") == 0){
			size_t length = strlen(value);
			if(length == 0 || length > AUTH_MAX_PREFIX || strpbrk(value, "+#") || value[length - 1] == '/'){
				mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: plugin_opt_topic_prefix must be 1 to %d characters, without + # or a trailing /", AUTH_MAX_PREFIX);
				goto fail;
			}
			snprintf(chime.prefix, sizeof(chime.prefix), "%s", value);
		}else if(strcasecmp(key, "max_lifetime") == 0){
			char *end = NULL;
			errno = 0;
			long long seconds = strtoll(value, &end, 10);
			if(errno != 0 || end == value || *end != '\0' || seconds < 1){
				mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: plugin_opt_max_lifetime must be a number of seconds");
				goto fail;
			}
			chime.max_lifetime = (int64_t)seconds;
		}else{
			mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: unknown option plugin_opt_%s", key);
			goto fail;
		}
	}
	for(size_t f = 0; f < chime.key_file_count; f++){
		if(chime.key_files[f].path == NULL) goto fail;
	}
	if(chime.key_file_count == 0){
		mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: plugin_opt_public_key is required");
		goto fail;
	}
	for(size_t f = 0; f < chime.key_file_count; f++) file_changed(&chime.key_files[f]);
	if(!load_keys()) goto fail;
	refresh_list(&chime.deny_file, &chime.deny, true, true);
	refresh_list(&chime.password_file, &chime.passwords, false, true);
	/* Connections denied before the broker started are not connected: nothing to close. */
	for(size_t i = 0; i < chime.kick_count; i++) free(chime.kicks[i]);
	chime.kick_count = 0;
	clock_gettime(CLOCK_MONOTONIC, &chime.last_poll);
	if(mosquitto_callback_register(identifier, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL, NULL) != MOSQ_ERR_SUCCESS
			|| mosquitto_callback_register(identifier, MOSQ_EVT_ACL_CHECK, on_acl_check, NULL, NULL) != MOSQ_ERR_SUCCESS
			|| mosquitto_callback_register(identifier, MOSQ_EVT_TICK, on_tick, NULL, NULL) != MOSQ_ERR_SUCCESS
			|| mosquitto_callback_register(identifier, MOSQ_EVT_RELOAD, on_reload, NULL, NULL) != MOSQ_ERR_SUCCESS){
		mosquitto_log_printf(MOSQ_LOG_ERR, "chime_auth: cannot register its callbacks");
		goto fail;
	}
	mosquitto_log_printf(MOSQ_LOG_INFO, "chime_auth: device tokens for topic prefix %s, %zu public key(s)", chime.prefix, chime.key_count);
	return MOSQ_ERR_SUCCESS;
fail:
	release();
	return MOSQ_ERR_INVAL;
}

int mosquitto_plugin_cleanup(void *userdata, struct mosquitto_opt *options, int option_count)
{
	(void)userdata;
	(void)options;
	(void)option_count;
	if(chime.id){
		mosquitto_callback_unregister(chime.id, MOSQ_EVT_BASIC_AUTH, on_basic_auth, NULL);
		mosquitto_callback_unregister(chime.id, MOSQ_EVT_ACL_CHECK, on_acl_check, NULL);
		mosquitto_callback_unregister(chime.id, MOSQ_EVT_TICK, on_tick, NULL);
		mosquitto_callback_unregister(chime.id, MOSQ_EVT_RELOAD, on_reload, NULL);
	}
	release();
	return MOSQ_ERR_SUCCESS;
}
