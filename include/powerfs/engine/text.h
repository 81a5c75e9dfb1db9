/* text.h - building the lines powerfs writes on the way of a request (the
 * state file's, the journal's): integers in decimal by hand, and appends
 * to a GString without a call when there is room.
 *
 * printf's conversions and GString calls were most of the user-space cost
 * of those lines (callgrind over lock+unlock pairs through a mount shows
 * it; docs/performance.md has the method).
 */
#ifndef POWERFS_TEXT_H
#define POWERFS_TEXT_H

#include <string.h>
#include <glib.h>

/* The most pf_put_decimal() writes: a sign and 20 digits.  It needs that
 * much room at p whatever the number (the digits go as a fixed 20-byte
 * copy). */
#define PF_DECIMAL_MAX 21

/* Writes "-" if negative, then the digits of v, at p; returns the end. */
static inline char *pf_put_decimal(char *p, gboolean negative, guint64 v)
{
	static const char pairs[] =
		"00010203040506070809101112131415161718192021222324"
		"25262728293031323334353637383940414243444546474849"
		"50515253545556575859606162636465666768697071727374"
		"75767778798081828384858687888990919293949596979899";
	char digits[40], *end = digits + 20, *d = end;

	while (v >= 100) {
		d -= 2;
		memcpy(d, pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		d -= 2;
		memcpy(d, pairs + 2 * v, 2);
	} else {
		*--d = (char)('0' + v);
	}
	if (negative)
		*p++ = '-';
	memcpy(p, d, 20);
	return p + (end - d);
}

static inline char *pf_put_u64(char *p, guint64 v)
{
	return pf_put_decimal(p, FALSE, v);
}

static inline char *pf_put_i64(char *p, gint64 v)
{
	return pf_put_decimal(p, v < 0, v < 0 ? -(guint64)v : (guint64)v);
}

/* g_string_append_len(), its common case inline (GLib 2.76 does this
 * itself; Debian 12 has 2.74, where each append is a function call). */
static inline void pf_string_append_len(GString *out, const char *s, gsize len)
{
	if (G_LIKELY(out->len + len < out->allocated_len)) {
		memcpy(out->str + out->len, s, len);
		out->len += len;
		out->str[out->len] = '\0';
		return;
	}
	g_string_append_len(out, s, (gssize)len);
}

static inline void pf_string_append(GString *out, const char *s)
{
	pf_string_append_len(out, s, strlen(s));
}

#endif
