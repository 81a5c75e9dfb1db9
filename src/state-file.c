/* state-file.c - keeping wake locks and settings across a restart.
 *
 * A container's wake locks must survive an upgrade or a crash-restart of
 * powerfs.  With --state-file, the held locks (with the time left on their
 * timeouts), the idle locks, the autosleep setting, the owners and modes set
 * by chown/chmod, the registered event count and all statistics are written
 * to a GKeyFile whenever they change (coalesced: at most every 100 ms) and at
 * exit, atomically (temporary file, fsync, rename).  At start they are read
 * back; a file that does not parse is reported and ignored.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "powerfs/state-file.h"

#define FORMAT 1
#define SAVE_EVERY_US (100 * 1000)

struct state_file {
	char *path;
	struct power *pw;
	struct pf_fs *fs;
	struct pf_timer *timer;
	gint64 last_save;
	gboolean dirty;
};

/* Group names carry bytes a key file cannot: lock names go in hex. */
static char *lock_group(const char *name)
{
	GString *g = g_string_new("lock ");

	for (const guchar *p = (const guchar *)name; *p; p++)
		g_string_append_printf(g, "%02x", *p);
	return g_string_free(g, FALSE);
}

static char *name_from_group(const char *group)
{
	const char *hex = group + strlen("lock ");
	gsize n = strlen(hex);
	char *name;

	/* A name comes from one write: at most a page. */
	if (n == 0 || n % 2 || n / 2 > 4096)
		return NULL;
	name = g_malloc(n / 2 + 1);
	for (gsize i = 0; i < n / 2; i++) {
		int hi = g_ascii_xdigit_value(hex[2 * i]);
		int lo = g_ascii_xdigit_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			g_free(name);
			return NULL;
		}
		name[i] = (char)(hi << 4 | lo);
	}
	name[n / 2] = '\0';
	return name;
}

static void save_record(GKeyFile *kf, const char *group,
			const struct wakeup_source *ws)
{
	struct wakeup_record r;

	wakeup_source_save(ws, &r);
	g_key_file_set_uint64(kf, group, "active_count", r.active_count);
	g_key_file_set_uint64(kf, group, "event_count", r.event_count);
	g_key_file_set_uint64(kf, group, "wakeup_count", r.wakeup_count);
	g_key_file_set_uint64(kf, group, "expire_count", r.expire_count);
	g_key_file_set_int64(kf, group, "total_time_us", r.total_time);
	g_key_file_set_int64(kf, group, "max_time_us", r.max_time);
	g_key_file_set_int64(kf, group, "prevent_sleep_time_us",
			     r.prevent_sleep_time);
}

static void save_lock(const struct wakeup_source *ws, gpointer data)
{
	GKeyFile *kf = data;
	g_autofree char *group = lock_group(wakeup_source_name(ws));

	g_key_file_set_boolean(kf, group, "active", wakeup_source_active(ws));
	g_key_file_set_uint64(kf, group, "timeout_ms",
			      wakeup_source_timeout_left(ws));
	save_record(kf, group, ws);
}

static void save_owner(const char *path, mode_t mode, uid_t uid, gid_t gid,
		       gpointer data)
{
	g_autofree char *group = g_strconcat("file ", path, NULL);
	g_autofree char *octal = g_strdup_printf("%04o", mode);
	GKeyFile *kf = data;

	g_key_file_set_string(kf, group, "mode", octal);
	g_key_file_set_uint64(kf, group, "uid", uid);
	g_key_file_set_uint64(kf, group, "gid", gid);
}

static void save_suspend_stats(GKeyFile *kf, const struct suspend_stats *st)
{
	const char *g = "suspend_stats";

	g_key_file_set_integer(kf, g, "success", st->success);
	g_key_file_set_integer(kf, g, "fail", st->fail);
	g_key_file_set_integer(kf, g, "failed_freeze", st->failed_freeze);
	g_key_file_set_integer(kf, g, "failed_prepare", st->failed_prepare);
	g_key_file_set_integer(kf, g, "failed_suspend", st->failed_suspend);
	g_key_file_set_integer(kf, g, "failed_suspend_late",
			       st->failed_suspend_late);
	g_key_file_set_integer(kf, g, "failed_suspend_noirq",
			       st->failed_suspend_noirq);
	g_key_file_set_integer(kf, g, "failed_resume", st->failed_resume);
	g_key_file_set_integer(kf, g, "failed_resume_early",
			       st->failed_resume_early);
	g_key_file_set_integer(kf, g, "failed_resume_noirq",
			       st->failed_resume_noirq);
	g_key_file_set_integer(kf, g, "last_failed_errno",
			       st->last_failed_errno);
	g_key_file_set_string(kf, g, "last_failed_step",
			      st->last_failed_step);
}

static void save(struct state_file *sf)
{
	struct power *pw = sf->pw;
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) error = NULL;
	g_autofree char *data = NULL;
	enum pm_state as = autosleep_state(pw->autosleep);
	guint count;
	gsize len;

	wakeup_get_count(pw->engine, &count);
	g_key_file_set_integer(kf, "powerfs", "format", FORMAT);
	g_key_file_set_uint64(kf, "powerfs", "registered", count);
	g_key_file_set_string(kf, "powerfs", "autosleep",
			      as == PM_ON ? "off" : pm_state_label(as));
	save_suspend_stats(kf, suspend_get_stats(pw->suspend));
	save_record(kf, "source autosleep", autosleep_source(pw->autosleep));
	save_record(kf, "source deleted", wakeup_deleted_source(pw->engine));
	wakelocks_foreach(pw->wakelocks, save_lock, kf);
	pf_fs_foreach_owner(sf->fs, save_owner, kf);

	data = g_key_file_to_data(kf, &len, NULL);
	if (!g_file_set_contents_full(sf->path, data, len,
				      G_FILE_SET_CONTENTS_CONSISTENT |
					      G_FILE_SET_CONTENTS_DURABLE,
				      0600, &error))
		g_warning("saving state: %s", error->message);
	sf->last_save = pf_clock_now(pw->clock);
	sf->dirty = FALSE;
}

static void save_now(gpointer data)
{
	save(data);
}

static void changed(gpointer data)
{
	struct state_file *sf = data;

	if (sf->dirty)
		return;
	sf->dirty = TRUE;
	pf_timer_arm(sf->timer, MAX(pf_clock_now(sf->pw->clock),
				    sf->last_save + SAVE_EVERY_US));
}

/* Loading: every value is checked; anything off rejects the whole file. */

static gboolean get_u64(GKeyFile *kf, const char *g, const char *k,
			guint64 max, guint64 *out, GError **error)
{
	g_autofree char *s = g_key_file_get_value(kf, g, k, error);

	if (!s)
		return FALSE;
	return g_ascii_string_to_unsigned(s, 10, 0, max, out, error);
}

static gboolean get_i64(GKeyFile *kf, const char *g, const char *k,
			gint64 min, gint64 max, gint64 *out, GError **error)
{
	g_autofree char *s = g_key_file_get_value(kf, g, k, error);

	if (!s)
		return FALSE;
	return g_ascii_string_to_signed(s, 10, min, max, out, error);
}

static gboolean load_record(GKeyFile *kf, const char *g,
			    struct wakeup_record *r, GError **error)
{
	guint64 ac, ec, wc, xc;
	gint64 tt, mt, pt;

	if (!get_u64(kf, g, "active_count", G_MAXULONG, &ac, error) ||
	    !get_u64(kf, g, "event_count", G_MAXULONG, &ec, error) ||
	    !get_u64(kf, g, "wakeup_count", G_MAXULONG, &wc, error) ||
	    !get_u64(kf, g, "expire_count", G_MAXULONG, &xc, error) ||
	    !get_i64(kf, g, "total_time_us", 0, G_MAXINT64, &tt, error) ||
	    !get_i64(kf, g, "max_time_us", 0, G_MAXINT64, &mt, error) ||
	    !get_i64(kf, g, "prevent_sleep_time_us", 0, G_MAXINT64, &pt,
		     error)) {
		g_prefix_error(error, "[%s]: ", g);
		return FALSE;
	}
	*r = (struct wakeup_record){ ac, ec, wc, xc, tt, mt, pt };
	return TRUE;
}

struct saved_lock {
	char *name;
	gboolean active;
	guint32 timeout_ms;
	struct wakeup_record rec;
};

static void saved_lock_free(gpointer p)
{
	struct saved_lock *l = p;

	g_free(l->name);
	g_free(l);
}

struct saved_owner {
	char *path;
	guint64 mode, uid, gid;
};

static void saved_owner_free(gpointer p)
{
	struct saved_owner *o = p;

	g_free(o->path);
	g_free(o);
}

struct saved {
	guint64 registered;
	enum pm_state autosleep;
	struct suspend_stats stats;
	char *last_failed_step;
	struct wakeup_record autosleep_rec, deleted_rec;
	GPtrArray *locks;	/* struct saved_lock */
	GPtrArray *owners;	/* struct saved_owner */
};

static gboolean parse_stats(GKeyFile *kf, struct saved *sv, GError **error)
{
	int *fields[] = {
		&sv->stats.success, &sv->stats.fail,
		&sv->stats.failed_freeze, &sv->stats.failed_prepare,
		&sv->stats.failed_suspend, &sv->stats.failed_suspend_late,
		&sv->stats.failed_suspend_noirq, &sv->stats.failed_resume,
		&sv->stats.failed_resume_early, &sv->stats.failed_resume_noirq,
		&sv->stats.last_failed_errno,
	};
	static const char *const keys[] = {
		"success", "fail", "failed_freeze", "failed_prepare",
		"failed_suspend", "failed_suspend_late", "failed_suspend_noirq",
		"failed_resume", "failed_resume_early", "failed_resume_noirq",
		"last_failed_errno",
	};

	for (gsize i = 0; i < G_N_ELEMENTS(keys); i++) {
		gint64 v;

		if (!get_i64(kf, "suspend_stats", keys[i], G_MININT,
			     G_MAXINT, &v, error))
			return FALSE;
		*fields[i] = (int)v;
	}
	sv->last_failed_step = g_key_file_get_string(kf, "suspend_stats",
						     "last_failed_step", error);
	return sv->last_failed_step != NULL;
}

static enum pm_state parse_state(const char *s)
{
	for (enum pm_state st = PM_FREEZE; st < PM_NR_STATES; st++)
		if (!g_strcmp0(s, pm_state_label(st)))
			return st;
	return PM_ON;
}

static gboolean parse(GKeyFile *kf, struct saved *sv, GError **error)
{
	g_auto(GStrv) groups = g_key_file_get_groups(kf, NULL);
	g_autofree char *as = NULL;
	gint64 format;

	if (!get_i64(kf, "powerfs", "format", 0, G_MAXINT, &format, error))
		return FALSE;
	if (format != FORMAT) {
		g_set_error(error, G_KEY_FILE_ERROR,
			    G_KEY_FILE_ERROR_INVALID_VALUE,
			    "unknown format %" G_GINT64_FORMAT, format);
		return FALSE;
	}
	if (!get_u64(kf, "powerfs", "registered", G_MAXUINT, &sv->registered,
		     error))
		return FALSE;
	as = g_key_file_get_string(kf, "powerfs", "autosleep", error);
	if (!as)
		return FALSE;
	sv->autosleep = parse_state(as);
	if (sv->autosleep == PM_ON && strcmp(as, "off")) {
		g_set_error(error, G_KEY_FILE_ERROR,
			    G_KEY_FILE_ERROR_INVALID_VALUE,
			    "bad autosleep \"%s\"", as);
		return FALSE;
	}
	if (!parse_stats(kf, sv, error) ||
	    !load_record(kf, "source autosleep", &sv->autosleep_rec, error) ||
	    !load_record(kf, "source deleted", &sv->deleted_rec, error))
		return FALSE;
	for (guint i = 0; groups[i]; i++) {
		const char *g = groups[i];

		if (g_str_has_prefix(g, "lock ")) {
			struct saved_lock *l = g_new0(struct saved_lock, 1);
			guint64 t;

			g_ptr_array_add(sv->locks, l);
			l->name = name_from_group(g);
			if (!l->name) {
				g_set_error(error, G_KEY_FILE_ERROR,
					    G_KEY_FILE_ERROR_INVALID_VALUE,
					    "bad lock name in [%s]", g);
				return FALSE;
			}
			l->active = g_key_file_get_boolean(kf, g, "active",
							   error);
			if ((error && *error) ||
			    !get_u64(kf, g, "timeout_ms", G_MAXUINT32, &t,
				     error) ||
			    !load_record(kf, g, &l->rec, error))
				return FALSE;
			l->timeout_ms = (guint32)t;
		} else if (g_str_has_prefix(g, "file ")) {
			struct saved_owner *o = g_new0(struct saved_owner, 1);
			g_autofree char *mode = NULL;

			g_ptr_array_add(sv->owners, o);
			o->path = g_strdup(g + strlen("file "));
			mode = g_key_file_get_string(kf, g, "mode", error);
			if (!mode ||
			    !g_ascii_string_to_unsigned(mode, 8, 0, 07777,
							&o->mode, error) ||
			    !get_u64(kf, g, "uid", G_MAXUINT32 - 1, &o->uid,
				     error) ||
			    !get_u64(kf, g, "gid", G_MAXUINT32 - 1, &o->gid,
				     error))
				return FALSE;
		}
	}
	return TRUE;
}

static void apply(struct state_file *sf, struct saved *sv)
{
	struct power *pw = sf->pw;
	struct suspend_stats stats = sv->stats;
	guint restored = 0;

	for (guint i = 0; i < sv->owners->len; i++) {
		struct saved_owner *o = sv->owners->pdata[i];

		if (!pf_fs_set_owner(sf->fs, o->path, o->mode, o->uid, o->gid))
			g_warning("state file: no file %s here", o->path);
	}
	if (sv->autosleep != PM_ON &&
	    autosleep_set_state(pw->autosleep, sv->autosleep, NULL, NULL))
		g_warning("state file: autosleep %s is not possible here",
			  pm_state_label(sv->autosleep));
	for (guint i = 0; i < sv->locks->len; i++) {
		struct saved_lock *l = sv->locks->pdata[i];
		struct wakeup_source *ws;
		int err;

		ws = wakelocks_restore(pw->wakelocks, l->name, l->active,
				       l->timeout_ms, &err);
		if (!ws) {
			g_warning("state file: wake lock %s dropped: %s",
				  l->name, g_strerror(-err));
			continue;
		}
		wakeup_source_load(ws, &l->rec);
		restored += l->active;
	}
	wakeup_source_load(autosleep_source(pw->autosleep), &sv->autosleep_rec);
	wakeup_source_load(wakeup_deleted_source(pw->engine), &sv->deleted_rec);
	stats.last_failed_step = sv->last_failed_step;
	suspend_load_stats(pw->suspend, &stats);
	wakeup_set_count(pw->engine, (guint)sv->registered);
	g_message("state file %s: restored %u wake locks (%u held), "
		  "autosleep %s", sf->path, sv->locks->len, restored,
		  sv->autosleep == PM_ON ? "off" :
					   pm_state_label(sv->autosleep));
}

static void restore(struct state_file *sf)
{
	g_autoptr(GKeyFile) kf = g_key_file_new();
	g_autoptr(GError) error = NULL;
	struct saved sv = { 0 };

	if (!g_key_file_load_from_file(kf, sf->path, G_KEY_FILE_NONE,
				       &error)) {
		if (g_error_matches(error, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			g_message("state file %s: none yet, starting clean",
				  sf->path);
		else
			g_warning("state file %s unusable, starting clean: %s",
				  sf->path, error->message);
		return;
	}
	sv.locks = g_ptr_array_new_with_free_func(saved_lock_free);
	sv.owners = g_ptr_array_new_with_free_func(saved_owner_free);
	if (parse(kf, &sv, &error))
		apply(sf, &sv);
	else
		g_warning("state file %s unusable, starting clean: %s",
			  sf->path, error->message);
	g_ptr_array_unref(sv.locks);
	g_ptr_array_unref(sv.owners);
	g_free(sv.last_failed_step);
}

struct state_file *state_file_open(const char *path, struct power *pw,
				   struct pf_fs *fs)
{
	struct state_file *sf = g_new0(struct state_file, 1);

	sf->path = g_strdup(path);
	sf->pw = pw;
	sf->fs = fs;
	sf->timer = pf_timer_new(pw->clock, save_now, sf);
	restore(sf);
	wakeup_set_change_hook(pw->engine, changed, sf);
	save(sf);
	return sf;
}

void state_file_close(struct state_file *sf)
{
	if (!sf)
		return;
	wakeup_set_change_hook(sf->pw->engine, NULL, NULL);
	save(sf);
	pf_timer_free(sf->timer);
	g_free(sf->path);
	g_free(sf);
}
