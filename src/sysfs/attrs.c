/* attrs.c - the files of the mount and their show/store handlers (the
 * kernel's kernel/power/main.c, plus the debugfs wakeup_sources file).
 *
 * Parsing and formatting live here and nowhere else; each handler then calls
 * one function of the core.  Errors are negative errno values, returned to
 * the writer's write(2) unchanged.
 */
#include <string.h>
#include <sys/stat.h>
#include <linux/capability.h>

#include "powerfs/sysfs/attrs.h"
#include "powerfs/sysfs/caps.h"
#include "powerfs/backends/host-power.h"

/* The kernel's isspace(): ASCII white space and Latin-1 NBSP (0xa0). */
static gboolean kernel_isspace(char c)
{
	return g_ascii_isspace(c) || c == '\v' || (guchar)c == 0xa0;
}

static const char *skip_spaces(const char *s)
{
	while (kernel_isspace(*s))
		s++;
	return s;
}

/* kstrtou64(s, 10): optional '+', decimal digits that fit in 64 bits, at
 * most one trailing newline, nothing else. */
static gboolean parse_u64(const char *s, guint64 *out)
{
	guint64 v = 0;
	const char *digits;

	if (*s == '+')
		s++;
	for (digits = s; g_ascii_isdigit(*s); s++) {
		guint d = *s - '0';

		if (v > (G_MAXUINT64 - d) / 10)
			return FALSE;
		v = v * 10 + d;
	}
	if (s == digits)
		return FALSE;
	if (*s == '\n')
		s++;
	if (*s)
		return FALSE;
	*out = v;
	return TRUE;
}

/* sscanf(s, "%u"): white space skipped, decimal digits, the rest ignored;
 * the value wraps modulo 2^32 as the kernel's conversion does. */
static gboolean parse_uint_scanf(const char *s, guint *out)
{
	guint v = 0;

	s = skip_spaces(s);
	if (!g_ascii_isdigit(*s))
		return FALSE;
	for (; g_ascii_isdigit(*s); s++)
		v = v * 10 + (guint)(*s - '0');
	*out = v;
	return TRUE;
}

/* decode_state(): the text up to the first newline names a state the backend
 * supports ("disk" is recognised even when it does not); PM_ON otherwise. */
static enum pm_state decode_state(struct power *pw, const char *buf, gsize len)
{
	const char *nl = memchr(buf, '\n', len);
	gsize n = nl ? (gsize)(nl - buf) : len;
	guint valid = suspend_valid_states(pw->suspend);

	if (n == 4 && !memcmp(buf, "disk", 4))
		return PM_DISK;
	for (enum pm_state s = PM_FREEZE; s < PM_DISK; s++) {
		const char *label = pm_state_label(s);

		if ((valid & PM_STATE_BIT(s)) && n == strlen(label) &&
		    !memcmp(buf, label, n))
			return s;
	}
	return PM_ON;
}

static gboolean may_block_suspend(struct power *pw,
				  const struct pf_caller *caller)
{
	return !pw->check_capability ||
	       pf_caps_caller_capable(caller->pid, caller->uid,
				      CAP_BLOCK_SUSPEND,
				      pw->trusted_userns_owners);
}

/* Stores that change the power state run under the transition lock. */
struct locked_store {
	struct power *pw;
	gssize (*run)(struct locked_store *ls);
	char *buf;
	gsize len;
	enum pm_state state;
	pf_store_done done;
	gpointer data;
	gboolean answered;	 /* the writer has its answer already */
	struct pf_caller caller; /* for the events it causes */
};

static void locked_store_free(struct locked_store *ls)
{
	g_free(ls->buf);
	g_free(ls);
}

static void locked_store_finish(struct locked_store *ls, gssize result)
{
	struct suspend *s = ls->pw->suspend;

	if (!ls->answered)
		ls->done(result, ls->data);
	locked_store_free(ls);
	suspend_unlock(s);
}

static void locked_store_resume(gpointer data)
{
	struct locked_store *ls = data;
	gssize ret;

	if (suspend_shutting_down(ls->pw->suspend)) {
		locked_store_finish(ls, -EIO);
		return;
	}
	ret = ls->run(ls);

	if (ret != PF_PENDING)
		locked_store_finish(ls, ret);
}

static gssize store_locked(struct power *pw, const struct pf_caller *caller,
			   gssize (*run)(struct locked_store *ls),
			   const char *buf, gsize len, pf_store_done done,
			   gpointer data)
{
	struct locked_store *ls = g_new0(struct locked_store, 1);
	gssize ret;

	*ls = (struct locked_store){ .pw = pw,
				     .run = run,
				     .buf = g_strndup(buf, len),
				     .len = len,
				     .state = PM_ON,
				     .done = done,
				     .data = data,
				     .caller = *caller };
	/* g_strndup stops at a NUL; keep the bytes after it too. */
	memcpy(ls->buf, buf, len);
	if (!suspend_lock(pw->suspend, locked_store_resume, ls))
		return PF_PENDING;
	ret = run(ls);
	if (ret == PF_PENDING)
		return PF_PENDING;
	locked_store_free(ls);
	suspend_unlock(pw->suspend);
	return ret;
}

static gboolean locked_store_for(gpointer ls, gpointer data)
{
	return ((struct locked_store *)ls)->data == data;
}

/* The kernel waits for its transition lock interruptibly in state and
 * wakeup_count writes (mutex_lock_interruptible()): a writer still queued
 * for it may give up. */
gboolean pf_attrs_store_cancel(struct power *pw, gpointer data)
{
	gpointer ls;

	if (!suspend_lock_cancel(pw->suspend, locked_store_resume,
				 locked_store_for, data, &ls))
		return FALSE;
	locked_store_free(ls);
	return TRUE;
}

gboolean pf_attrs_store_interrupted(struct power *pw, gpointer data, pid_t pid)
{
	return suspend_writer_frozen(pw->suspend, locked_store_for, data, pid);
}

/* state */

static int state_show(struct power *pw, GString *out)
{
	guint valid = suspend_valid_states(pw->suspend);
	gsize start = out->len;

	for (enum pm_state s = PM_FREEZE; s < PM_NR_STATES; s++)
		if (valid & PM_STATE_BIT(s))
			g_string_append_printf(out, "%s ", pm_state_label(s));
	if (out->len > start)
		out->str[out->len - 1] = '\n';
	return 0;
}

/* The host is about to sleep (logind): the writer must not be inside its
 * request while the host freezes tasks, so it gets its answer now.  The
 * transition lock stays held until the resume. */
static void state_sleeping(gpointer data)
{
	struct locked_store *ls = data;

	ls->answered = TRUE;
	ls->done((gssize)ls->len, ls->data);
}

static void state_resumed(int error, gpointer data)
{
	struct locked_store *ls = data;

	locked_store_finish(ls, error ? error : (gssize)ls->len);
}

static gssize state_store_locked(struct locked_store *ls)
{
	struct power *pw = ls->pw;
	enum pm_state state;
	int ret;

	if (autosleep_state(pw->autosleep) != PM_ON)
		return -EBUSY;
	state = decode_state(pw, ls->buf, ls->len);
	if (state == PM_ON)
		return -EINVAL;
	/* A kernel without CONFIG_HIBERNATION answers "disk" so. */
	if (!(suspend_valid_states(pw->suspend) & PM_STATE_BIT(state)))
		return -ENOSYS;
	suspend_set_origin(pw->suspend, "state", &ls->caller);
	ret = suspend_enter(pw->suspend, state, state_resumed, ls);
	if (ret == PF_PENDING)
		suspend_when_sleeping(pw->suspend, state_sleeping, ls);
	return ret ? ret : (gssize)ls->len;
}

static gssize state_store(struct power *pw, const struct pf_caller *caller,
			  const char *buf, gsize len, pf_store_done done,
			  gpointer data)
{
	return store_locked(pw, caller, state_store_locked, buf, len, done,
			    data);
}

/* wakeup_count */

static int wakeup_count_show(struct power *pw, GString *out)
{
	guint count;
	gboolean settled = wakeup_get_count(pw->engine, &count);

	/* Printed even when the read must wait: see pf_attr.show. */
	g_string_append_printf(out, "%u\n", count);
	return settled ? 0 : -EAGAIN;
}

/* Who read which count: the handshake's first half. */
static void wakeup_count_read_by(struct power *pw,
				 const struct pf_caller *caller,
				 const GString *shown)
{
	char *end;
	guint64 count;

	/* What wakeup_count_show() printed: "%u\n". */
	count = g_ascii_strtoull(shown->str, &end, 10);
	if (end != shown->str)
		pf_events_publish(
			pw->events,
			&(struct pf_event){ .type = PF_EVENT_COUNT_READ,
					    .count = (guint)count,
					    .caller = caller });
}

static gssize wakeup_count_save(struct locked_store *ls, guint *count,
				gboolean *parsed)
{
	struct power *pw = ls->pw;

	*parsed = parse_uint_scanf(ls->buf, count);
	if (autosleep_state(pw->autosleep) != PM_ON)
		return -EBUSY;
	if (!*parsed)
		return -EINVAL;
	return wakeup_save_count(pw->engine, *count) ? (gssize)ls->len :
						       -EINVAL;
}

static gssize wakeup_count_store_locked(struct locked_store *ls)
{
	gboolean parsed;
	guint count = 0;
	gssize ret = wakeup_count_save(ls, &count, &parsed);

	pf_events_publish(ls->pw->events,
			  &(struct pf_event){ .type = PF_EVENT_COUNT_WRITE,
					      .parsed = parsed,
					      .count = count,
					      .error = ret < 0 ? (int)ret : 0,
					      .caller = &ls->caller });
	return ret;
}

static gssize wakeup_count_store(struct power *pw,
				 const struct pf_caller *caller,
				 const char *buf, gsize len, pf_store_done done,
				 gpointer data)
{
	return store_locked(pw, caller, wakeup_count_store_locked, buf, len,
			    done, data);
}

/* autosleep */

static int autosleep_show(struct power *pw, GString *out)
{
	enum pm_state state = autosleep_state(pw->autosleep);

	g_string_append_printf(out, "%s\n",
			       state == PM_ON ? "off" : pm_state_label(state));
	return 0;
}

struct autosleep_write {
	gsize len;
	pf_store_done done;
	gpointer data;
};

static void autosleep_switched(int error, gpointer data)
{
	struct autosleep_write *w = data;

	w->done(error ? error : (gssize)w->len, w->data);
	g_free(w);
}

static gssize autosleep_store(struct power *pw, const struct pf_caller *caller,
			      const char *buf, gsize len, pf_store_done done,
			      gpointer data)
{
	enum pm_state state = decode_state(pw, buf, len);
	struct autosleep_write *w;
	int ret;

	/* "off" is compared as a C string: "off\0junk" is off too. */
	if (state == PM_ON && strcmp(buf, "off") && strcmp(buf, "off\n"))
		return -EINVAL;
	w = g_new(struct autosleep_write, 1);
	*w = (struct autosleep_write){ len, done, data };
	ret = autosleep_set_state(pw->autosleep, state, caller,
				  autosleep_switched, w);
	if (ret == PF_PENDING)
		return PF_PENDING;
	g_free(w);
	return ret ? ret : (gssize)len;
}

/* wake_lock, wake_unlock */

static int wake_lock_show(struct power *pw, GString *out)
{
	wakelocks_show(pw->wakelocks, TRUE, out);
	return 0;
}

static gssize wake_lock_store(struct power *pw, const struct pf_caller *caller,
			      const char *buf, gsize len, pf_store_done done,
			      gpointer data)
{
	const char *end = buf;
	guint64 timeout_ns = 0;
	int ret;

	(void)done;
	(void)data;
	if (!may_block_suspend(pw, caller))
		return -EPERM;
	/* The name runs to the first white space (or NUL); a timeout in
	 * nanoseconds may follow. */
	while (*end && !kernel_isspace(*end))
		end++;
	if (end == buf)
		return -EINVAL;
	if (*end && *end != '\n' && !parse_u64(skip_spaces(end), &timeout_ns))
		return -EINVAL;
	ret = wakelocks_lock(pw->wakelocks, buf, end - buf, timeout_ns, caller);
	return ret ? ret : (gssize)len;
}

static int wake_unlock_show(struct power *pw, GString *out)
{
	wakelocks_show(pw->wakelocks, FALSE, out);
	return 0;
}

static gssize wake_unlock_store(struct power *pw,
				const struct pf_caller *caller, const char *buf,
				gsize len, pf_store_done done, gpointer data)
{
	gsize n = strlen(buf);
	int ret;

	(void)done;
	(void)data;
	if (!may_block_suspend(pw, caller))
		return -EPERM;
	/* The whole line is the name: no timeout here. */
	if (n && buf[n - 1] == '\n')
		n--;
	if (!n)
		return -EINVAL;
	ret = wakelocks_unlock(pw->wakelocks, buf, n, caller);
	return ret ? ret : (gssize)len;
}

/* wakeup_sources (debugfs) */

static gboolean wakeup_sources_show_rows(struct power *pw, guint *row,
					 GString *out, gsize min_len)
{
	return wakeup_print_rows(pw->engine, row, out, min_len);
}

static void wakeup_sources_skip_rows(struct power *pw, guint *row, gsize *skip)
{
	wakeup_skip_rows(pw->engine, row, skip);
}

/* A debugfs file's size is 0, and the kernel would not even ask us for a
 * read through the page cache (sendfile, splice) of a file of size 0: they
 * would return nothing, where debugfs fails them with EINVAL, and busybox
 * and toybox cat fall back to read(2) then.  So report a size (the content
 * cannot exceed it) and fail the page cache's reads. */
static off_t wakeup_sources_size(struct power *pw)
{
	gsize bound = wakeup_stats_size_bound(pw->engine);

	return (off_t)((bound / 4096 + 2) * 4096);
}

/* debugfs gives root a file without a write handler open for writing;
 * every write then fails. */
static gssize wakeup_sources_store(struct power *pw,
				   const struct pf_caller *caller,
				   const char *buf, gsize len,
				   pf_store_done done, gpointer data)
{
	(void)pw, (void)caller, (void)buf, (void)len, (void)done, (void)data;
	return -EINVAL;
}

/* The settings of kernel/power/main.c */

static struct pm_settings *settings(struct power *pw)
{
	return suspend_settings(pw->suspend);
}

/* A setting changed: the state file keeps it. */
static gssize setting_changed(struct power *pw, gsize len)
{
	wakeup_notify_changed(pw->engine, NULL);
	return (gssize)len;
}

/* kstrtoul() of a flag: 0 or 1. */
static gssize store_flag(struct power *pw, gboolean *flag, const char *buf,
			 gsize len)
{
	guint64 v;

	if (!parse_u64(buf, &v) || v > 1)
		return -EINVAL;
	*flag = v == 1;
	return setting_changed(pw, len);
}

#define FLAG_ATTR(field)                                                       \
	static int field##_show(struct power *pw, GString *out)                \
	{                                                                      \
		g_string_append(out, settings(pw)->field ? "1\n" : "0\n");     \
		return 0;                                                      \
	}                                                                      \
	static gssize field##_store(                                           \
		struct power *pw, const struct pf_caller *caller,              \
		const char *buf, gsize len, pf_store_done done, gpointer data) \
	{                                                                      \
		(void)caller, (void)done, (void)data;                          \
		return store_flag(pw, &settings(pw)->field, buf, len);         \
	}
FLAG_ATTR(sync_on_suspend)
FLAG_ATTR(pm_async)
FLAG_ATTR(pm_print_times)
FLAG_ATTR(pm_debug_messages)

static int pm_freeze_timeout_show(struct power *pw, GString *out)
{
	g_string_append_printf(out, "%u\n", settings(pw)->freeze_timeout_ms);
	return 0;
}

/* kstrtoul() into the kernel's unsigned int: the value is cut to 32 bits
 * (4294967296 reads back as 0). */
static gssize pm_freeze_timeout_store(struct power *pw,
				      const struct pf_caller *caller,
				      const char *buf, gsize len,
				      pf_store_done done, gpointer data)
{
	guint64 v;

	(void)caller, (void)done, (void)data;
	if (!parse_u64(buf, &v))
		return -EINVAL;
	settings(pw)->freeze_timeout_ms = (guint)v;
	return setting_changed(pw, len);
}

/* The text up to the first newline, exactly one of the words. */
static gboolean line_is(const char *buf, gsize len, const char *word)
{
	const char *nl = memchr(buf, '\n', len);
	gsize n = nl ? (gsize)(nl - buf) : len;

	return word && n == strlen(word) && !memcmp(buf, word, n);
}

/* "[current] other ...\n": the kernel's listing of a choice. */
static void show_choice(GString *out, const char *word, gboolean current)
{
	g_string_append_printf(out, current ? "[%s] " : "%s ", word);
}

static void end_choices(GString *out, gsize start)
{
	if (out->len > start)
		out->str[out->len - 1] = '\n';
}

static int pm_test_show(struct power *pw, GString *out)
{
	gsize start = out->len;

	for (enum pm_test_level l = PM_TEST_NONE; l < PM_TEST_LEVELS; l++)
		show_choice(out, pm_test_label(l),
			    l == settings(pw)->test_level);
	end_choices(out, start);
	return 0;
}

static gssize pm_test_store(struct power *pw, const struct pf_caller *caller,
			    const char *buf, gsize len, pf_store_done done,
			    gpointer data)
{
	(void)caller, (void)done, (void)data;
	for (enum pm_test_level l = PM_TEST_NONE; l < PM_TEST_LEVELS; l++)
		if (line_is(buf, len, pm_test_label(l))) {
			settings(pw)->test_level = l;
			return setting_changed(pw, len);
		}
	return -EINVAL;
}

/* mem_sleep: s2idle always, shallow and deep where the backend offers
 * standby and mem as such (see suspend_mem_sleep_states()). */
static gboolean mem_sleep_valid(struct power *pw, enum pm_state m)
{
	return suspend_mem_sleep_states(pw->suspend) & PM_STATE_BIT(m);
}

static int mem_sleep_show(struct power *pw, GString *out)
{
	gsize start = out->len;

	for (enum pm_state m = PM_FREEZE; m <= PM_MEM; m++)
		if (mem_sleep_valid(pw, m))
			show_choice(out, mem_sleep_label(m),
				    m == settings(pw)->mem_sleep);
	end_choices(out, start);
	return 0;
}

static gssize mem_sleep_store_locked(struct locked_store *ls)
{
	struct power *pw = ls->pw;

	if (autosleep_state(pw->autosleep) != PM_ON)
		return -EBUSY;
	for (enum pm_state m = PM_FREEZE; m <= PM_MEM; m++)
		if (mem_sleep_valid(pw, m) &&
		    line_is(ls->buf, ls->len, mem_sleep_label(m))) {
			settings(pw)->mem_sleep = m;
			return setting_changed(pw, ls->len);
		}
	return -EINVAL;
}

/* The kernel takes its transition lock for it, and refuses while
 * autosleep is on. */
static gssize mem_sleep_store(struct power *pw, const struct pf_caller *caller,
			      const char *buf, gsize len, pf_store_done done,
			      gpointer data)
{
	return store_locked(pw, caller, mem_sleep_store_locked, buf, len, done,
			    data);
}

/* No IRQ woke a system that sleeps on its own terms. */
static int pm_wakeup_irq_show(struct power *pw, GString *out)
{
	(void)pw, (void)out;
	return -ENODATA;
}

/* suspend_stats/ */

#define STAT_INT(field)                                                        \
	static int stat_##field##_show(struct power *pw, GString *out)         \
	{                                                                      \
		g_string_append_printf(out, "%d\n",                            \
				       suspend_get_stats(pw->suspend)->field); \
		return 0;                                                      \
	}
STAT_INT(success)
STAT_INT(fail)
STAT_INT(failed_freeze)
STAT_INT(failed_prepare)
STAT_INT(failed_suspend)
STAT_INT(failed_suspend_late)
STAT_INT(failed_suspend_noirq)
STAT_INT(failed_resume)
STAT_INT(failed_resume_early)
STAT_INT(failed_resume_noirq)
STAT_INT(last_failed_errno)

static int stat_last_failed_dev_show(struct power *pw, GString *out)
{
	g_string_append_printf(out, "%s\n",
			       suspend_get_stats(pw->suspend)->last_failed_dev);
	return 0;
}

static int stat_last_failed_step_show(struct power *pw, GString *out)
{
	g_string_append_printf(
		out, "%s\n", suspend_get_stats(pw->suspend)->last_failed_step);
	return 0;
}

#define ROOT (-1)
#define STATS_DIR 6 /* index of the suspend_stats row below */
#define FILE_RW(n)                                                  \
	{                                                           \
		.name = #n, .parent = ROOT, .mode = S_IFREG | 0644, \
		.size = 4096, .show = n##_show, .store = n##_store  \
	}
#define FILE_RW_READ_BY(n)                                          \
	{                                                           \
		.name = #n, .parent = ROOT, .mode = S_IFREG | 0644, \
		.size = 4096, .show = n##_show, .store = n##_store, \
		.read_by = n##_read_by                              \
	}
#define STAT_FILE(n)                                                     \
	{                                                                \
		.name = #n, .parent = STATS_DIR, .mode = S_IFREG | 0444, \
		.size = 4096, .show = stat_##n##_show                    \
	}
#define HOST_RW(n)                                                  \
	{                                                           \
		.name = #n, .parent = ROOT, .mode = S_IFREG | 0644, \
		.size = 4096, .show = n##_show, .store = n##_store, \
		.host = TRUE                                        \
	}
/* Hibernation's settings exist here only as the host's. */
#define HIBERNATION(n)                                              \
	{                                                           \
		.name = #n, .parent = ROOT, .mode = S_IFREG | 0644, \
		.size = 4096, .host = TRUE, .hibernation = TRUE     \
	}

static const struct pf_attr attrs[] = {
	{ .name = "state",
	  .parent = ROOT,
	  .mode = S_IFREG | 0644,
	  .size = 4096,
	  .show = state_show,
	  .store = state_store,
	  .not_twice = TRUE },
	FILE_RW_READ_BY(wakeup_count),
	FILE_RW(autosleep),
	FILE_RW(wake_lock),
	FILE_RW(wake_unlock),
	/* debugfs, not sysfs: read-only, printed a row at a time. */
	{ .name = "wakeup_sources",
	  .parent = ROOT,
	  .mode = S_IFREG | 0444,
	  .store = wakeup_sources_store,
	  .show_rows = wakeup_sources_show_rows,
	  .skip_rows = wakeup_sources_skip_rows,
	  .size_bound = wakeup_sources_size,
	  .debugfs = TRUE },
	[STATS_DIR] = { .name = "suspend_stats",
			.parent = ROOT,
			.mode = S_IFDIR | 0755 },
	STAT_FILE(success),
	STAT_FILE(fail),
	STAT_FILE(failed_freeze),
	STAT_FILE(failed_prepare),
	STAT_FILE(failed_suspend),
	STAT_FILE(failed_suspend_late),
	STAT_FILE(failed_suspend_noirq),
	STAT_FILE(failed_resume),
	STAT_FILE(failed_resume_early),
	STAT_FILE(failed_resume_noirq),
	STAT_FILE(last_failed_dev),
	STAT_FILE(last_failed_errno),
	STAT_FILE(last_failed_step),
	HOST_RW(mem_sleep),
	HOST_RW(sync_on_suspend),
	HOST_RW(pm_async),
	HOST_RW(pm_freeze_timeout),
	HOST_RW(pm_test),
	HOST_RW(pm_print_times),
	HOST_RW(pm_debug_messages),
	{ .name = "pm_wakeup_irq",
	  .parent = ROOT,
	  .mode = S_IFREG | 0444,
	  .size = 4096,
	  .show = pm_wakeup_irq_show,
	  .host = TRUE },
	HIBERNATION(disk),
	HIBERNATION(image_size),
	HIBERNATION(reserved_size),
	HIBERNATION(resume),
	HIBERNATION(resume_offset),
};

/* /sys/kernel/wakeup_reasons (the Android common kernel's) */

static int last_resume_reason_show(struct power *pw, GString *out)
{
	wakeup_reason_show_resume(pw->reasons, out);
	return 0;
}

static int last_suspend_time_show(struct power *pw, GString *out)
{
	wakeup_reason_show_times(pw->reasons, out);
	return 0;
}

static const struct pf_attr wakeup_reasons_attrs[] = {
	{ .name = "last_resume_reason",
	  .parent = ROOT,
	  .mode = S_IFREG | 0444,
	  .size = 4096,
	  .show = last_resume_reason_show },
	{ .name = "last_suspend_time",
	  .parent = ROOT,
	  .mode = S_IFREG | 0444,
	  .size = 4096,
	  .show = last_suspend_time_show },
};

const struct pf_attr *pf_attrs_wakeup_reasons(guint *n_attrs)
{
	*n_attrs = G_N_ELEMENTS(wakeup_reasons_attrs);
	return wakeup_reasons_attrs;
}

/* The backend puts the host to sleep: the host's settings count. */
static gboolean host_settings(struct power *pw)
{
	return pw->backend->host_dir != NULL;
}

gboolean pf_attr_present(const struct pf_attr *attr, struct power *pw)
{
	if (attr->hibernation &&
	    !(suspend_valid_states(pw->suspend) & PM_STATE_BIT(PM_DISK)))
		return FALSE;
	if (attr->host && host_settings(pw))
		return host_power_has(pw->backend->host_dir, attr->name);
	return attr->show || attr->show_rows || S_ISDIR(attr->mode);
}

int pf_attr_write_denied(const struct pf_attr *attr, struct power *pw)
{
	if (!attr->store && !attr->hibernation)
		return EACCES;
	return attr->host && host_settings(pw) ? EROFS : 0;
}

int pf_attr_show(const struct pf_attr *attr, struct power *pw, GString *out)
{
	if (attr->host && host_settings(pw))
		return host_power_read(pw->backend->host_dir, attr->name, out);
	return attr->show(pw, out);
}

const struct pf_attr *pf_attrs(guint *n_attrs)
{
	*n_attrs = G_N_ELEMENTS(attrs);
	return attrs;
}
