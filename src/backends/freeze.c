/* backend-freeze.c - a container's own sleep: its cgroup frozen.
 *
 * --backend=freeze:CGROUP.  A sleep of the container (a state write of
 * "freeze" or "mem", or autosleep) freezes every task of CGROUP and its
 * descendants: cgroup.freeze (cgroup v2) or freezer.state (the v1
 * freezer), whichever the directory has.  "mem" is no deeper than
 * "freeze": mem_sleep offers s2idle only, as a platform without deep sleep
 * does.  The host and powerfs go on.  A freeze that has not completed
 * within pm_freeze_timeout fails the attempt with EBUSY at "freeze", as the
 * kernel's freezer does, and the cgroup is thawed.
 *
 * The writer of state.  A task of the container that asks for the sleep
 * waits inside its write request, parked in powerfs.  The freezer sends it
 * its fake signal, and the kernel's FUSE client then sends us an INTERRUPT
 * for the request and goes on waiting for the answer in a killable wait,
 * where the freezer cannot take it: the cgroup would stay "freezing" for
 * as long as the write waits, with either freezer (check-vm's
 * j-freeze-design shows it on Linux 6.1).
 * So an INTERRUPT of the state write from a task of this cgroup, while
 * its sleep is under way, is answered at once with success (freezes()
 * says which tasks; fs.c answers).  Nothing of the task runs before the
 * freezer holds it: the freeze was ordered before the write was answered,
 * and the task is frozen on its way back to user space, before the
 * signal handling that would run its code.  From its side the write
 * returns when the sleep is over, as on the kernel.  A writer outside the
 * cgroup (the host) gets no INTERRUPT and is answered when the container
 * wakes.  Readers parked in powerfs (a blocked wakeup_count) are
 * interrupted too and get EINTR, as the kernel's freezer gives them; they
 * read again once thawed.  The one answer that can be wrong: a sleep whose
 * freeze then fails has told its writer in the container "success".
 *
 * What wakes the container, whichever comes first:
 *   - a wakeup event (the core calls wake()): a wake_lock write on the
 *     mount, from the host too ("the user opened the window");
 *   - the earliest alarm timer the container's own tasks armed: timerfds
 *     of CLOCK_BOOTTIME_ALARM or CLOCK_REALTIME_ALARM, found in
 *     /proc/PID/fdinfo of every task of the cgroup once the freeze is
 *     complete (the tasks can arm no other then).  A timer that expired and
 *     was not read yet is due now; one its owner disarmed still shows the
 *     time it had left, and wakes the container once.  The kernel keeps such timers armed
 *     while the tasks are frozen and wakes the host for them; here a timer
 *     on the boot clock wakes the container when the earliest comes due.
 *     The alarm is the kernel's "alarmtimer" wakeup source;
 *   - the host's resume from its own sleep (logind's PrepareForSleep
 *     false), through the logind backend given as host, whose IRQ is then
 *     the reason.  That backend also keeps the host from sleeping while a
 *     request waits in powerfs, and holds --inhibit-sleep's block
 *     inhibitor.
 * A wakeup event while the freeze is still under way ends the sleep at
 * once: the writer may have its answer already.
 *
 * At the wake-up the cgroup is thawed, and then the core counts the sleep,
 * records why (suspend_stats, wakeup_sources, wakeup_reasons) and answers
 * a writer on the host: that writer's write returns once the container
 * runs again, as a write of the kernel's state returns after its thaw.
 * Both happen in one turn of the loop, so a task of the container, whose
 * reads wait for the loop, reads the statistics as they are after its
 * sleep.
 *
 * Crash safety.  A trusted.powerfs.asleep attribute on the cgroup says
 * that powerfs froze it: set before the freeze, removed after the thaw.  A
 * server that finds it at start (its predecessor died, or handed over
 * during a sleep) thaws the cgroup: the container wakes, and a state write
 * the dead server had not answered is answered by the successor (EBUSY:
 * see attrs.h, not_twice).  A keeper whose servers will not come back
 * thaws it too (backend_freeze_release()), and so does a server that stops
 * (SIGTERM, unmount) in the middle of a sleep.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>
#include <gio/gio.h>
#include <glib-unix.h>

#include "powerfs/engine/backend.h"
#include "powerfs/engine/suspend.h"

#define MARK "trusted.powerfs.asleep"
/* How often a freeze in progress is looked at (the v1 freezer moves from
 * FREEZING to FROZEN only when its state is read). */
#define POLL_US (5 * 1000)
/* An alarm that expired unread is due now; as the kernel's alarmtimer
 * does when an alarm is too close to sleep through, its wakeup source
 * holds the container awake a while, time for its owner to read it. */
#define UNREAD_ALARM_HOLD_MS 2000
/* Tasks named in the log when a freeze fails. */
#define TASKS_SHOWN 5

enum phase {
	AWAKE,
	FREEZING, /* ordered, not complete */
	SCANNING, /* frozen; the alarms are being looked for */
	ASLEEP,
};

enum why {
	WOKEN_BY_NOTHING,
	WOKEN_BY_EVENT,
	WOKEN_BY_ALARM,
	WOKEN_BY_UNREAD_ALARM,
	WOKEN_BY_HOST
};

struct scan;

struct freeze {
	struct backend base;
	struct pf_clock *clock;
	char *dir; /* the cgroup's directory */
	gboolean v2;
	char *path;	      /* the cgroup as /proc/PID/cgroup names it */
	struct backend *host; /* logind, or NULL */
	struct backend_listener host_listener;
	gboolean mark_failed; /* said once */
	/* The attempt. */
	enum phase phase;
	backend_done_func done;
	gpointer data;
	gint64 freeze_until; /* monotonic us */
	gint64 frozen_at;    /* boot clock ns; 0 before the freeze completed */
	struct pf_timer *poll;
	struct scan *scan;
	int alarm_fd; /* a timerfd on the boot clock */
	guint alarm_watch;
	gint64 alarm_due; /* boot clock ns, the alarm it is armed for */
	struct pf_timer *wake_timer; /* wakes from the main loop */
	enum why why;
	int host_irq;
	char *host_irq_name; /* base.wake_irq_name points here */
};

/* --- the cgroup's files --------------------------------------------------- */

static const char *control(gboolean v2)
{
	return v2 ? "cgroup.freeze" : "freezer.state";
}

static int write_file(const char *dir, const char *name, const char *value)
{
	g_autofree char *path = g_build_filename(dir, name, NULL);
	gssize len = strlen(value), n;
	int fd = open(path, O_WRONLY | O_CLOEXEC), err = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, value, len);
	if (n < 0)
		err = -errno;
	else if (n != len)
		err = -EIO;
	close(fd);
	return err;
}

/* The file's first bytes (cgroup files are short), or NULL and errno. */
static char *read_small(const char *path)
{
	char buf[512];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	gssize n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		int err = errno;

		close(fd);
		errno = err;
		return NULL;
	}
	close(fd);
	return g_strndup(buf, n);
}

static int set_frozen(const char *dir, gboolean v2, gboolean frozen)
{
	return write_file(dir, control(v2),
			  v2 ? (frozen ? "1" : "0") :
			       (frozen ? "FROZEN" : "THAWED"));
}

/* 1 if every task is frozen, 0 if not yet, or a negative errno. */
static int all_frozen(const struct freeze *fb)
{
	g_autofree char *path = g_build_filename(
		fb->dir, fb->v2 ? "cgroup.events" : "freezer.state", NULL);
	g_autofree char *text = read_small(path);

	if (!text)
		return -errno;
	if (fb->v2)
		return strstr(text, "frozen 1") != NULL;
	return g_str_has_prefix(text, "FROZEN");
}

static gboolean marked(const char *dir)
{
	return getxattr(dir, MARK, NULL, 0) >= 0;
}

static void mark(struct freeze *fb)
{
	char pid[16];
	int n = g_snprintf(pid, sizeof(pid), "%d", (int)getpid());

	/* No cgroup (yet): the freeze fails and says so. */
	if (setxattr(fb->dir, MARK, pid, n, 0) == 0 || errno == ENOENT ||
	    fb->mark_failed)
		return;
	fb->mark_failed = TRUE;
	g_warning("%s: cannot set %s (%s): should this server die while the "
		  "container sleeps, nothing will thaw it",
		  fb->dir, MARK, g_strerror(errno));
}

static void unmark(const char *dir)
{
	removexattr(dir, MARK);
}

/* Thaws dir and takes the mark off. */
static int thaw(const char *dir, gboolean v2)
{
	int err = set_frozen(dir, v2, FALSE);

	if (!err || err == -ENOENT)
		unmark(dir);
	return err;
}

/* --- where the cgroup is -------------------------------------------------- */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static char *unescape(const char *s)
{
	GString *out = g_string_new(NULL);

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			g_string_append_c(out, (char)((s[1] - '0') * 64 +
						      (s[2] - '0') * 8 +
						      (s[3] - '0')));
			s += 3;
		} else {
			g_string_append_c(out, *s);
		}
	}
	return g_string_free(out, FALSE);
}

static gboolean within(const char *path, const char *dir)
{
	gsize n = strlen(dir);

	return !strncmp(path, dir, n) &&
	       (path[n] == '\0' || path[n] == '/' || !strcmp(dir, "/"));
}

/* The mount path lies in (the one with the longest mount point), as its
 * hierarchy: cgroup v2, the v1 freezer, or neither (FALSE).  *rel: path as
 * the hierarchy names it (/proc/PID/cgroup). */
static gboolean find_hierarchy(const char *path, gboolean *v2, char **rel)
{
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	gsize best = 0;
	gboolean found = FALSE;

	if (!g_file_get_contents("/proc/self/mountinfo", &text, NULL, NULL))
		return FALSE;
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		g_auto(GStrv) f = g_strsplit(lines[i], " ", -1);
		g_autofree char *root = NULL, *point = NULL;
		guint n = g_strv_length(f), sep;

		for (sep = 6; sep < n && strcmp(f[sep], "-"); sep++)
			;
		if (sep + 3 >= n)
			continue;
		point = unescape(f[4]);
		if (!within(path, point) || strlen(point) < best)
			continue;
		best = strlen(point);
		root = unescape(f[3]);
		g_clear_pointer(rel, g_free);
		found = FALSE;
		if (!strcmp(f[sep + 1], "cgroup2")) {
			*v2 = TRUE;
			found = TRUE;
		} else if (!strcmp(f[sep + 1], "cgroup")) {
			g_auto(GStrv) opts = g_strsplit(f[sep + 3], ",", -1);

			*v2 = FALSE;
			found = g_strv_contains((const char *const *)opts,
						"freezer");
		}
		if (found)
			*rel = g_build_filename("/", root, path + best, NULL);
	}
	if (!found)
		g_clear_pointer(rel, g_free);
	return found;
}

/* pid's cgroup in the hierarchy (v2's, or the v1 freezer's), or NULL. */
static char *cgroup_of(pid_t pid, gboolean v2)
{
	g_autofree char *file = g_strdup_printf("/proc/%d/cgroup", (int)pid);
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;

	if (!g_file_get_contents(file, &text, NULL, NULL))
		return NULL;
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		g_auto(GStrv) f = g_strsplit(lines[i], ":", 3);
		g_auto(GStrv) ctl = NULL;

		if (g_strv_length(f) != 3)
			continue;
		if (v2) {
			if (!strcmp(f[0], "0") && !*f[1])
				return g_strdup(f[2]);
			continue;
		}
		ctl = g_strsplit(f[1], ",", -1);
		if (g_strv_contains((const char *const *)ctl, "freezer"))
			return g_strdup(f[2]);
	}
	return NULL;
}

static gboolean in_cgroup(const struct freeze *fb, pid_t pid)
{
	g_autofree char *cg = pid > 0 ? cgroup_of(pid, fb->v2) : NULL;

	return cg && within(cg, fb->path);
}

/* --- the alarms ------------------------------------------------------------ */

/* Looked for in a thread of its own: a container may have thousands of
 * tasks and descriptors, and the main loop goes on serving meanwhile. */
struct scan {
	struct freeze *fb; /* NULL once nobody waits for the result */
	char *dir;
	guint tasks, alarms, unread;
	gint64 due_ns; /* the earliest, on the boot clock; 0: none */
	pid_t due_pid;
	pid_t unread_pid;
};

static void scan_free(gpointer data)
{
	struct scan *sc = data;

	g_free(sc->dir);
	g_free(sc);
}

static gint64 boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return ts.tv_sec * G_GINT64_CONSTANT(1000000000) + ts.tv_nsec;
}

/* One timerfd's fdinfo (fs/timerfd.c's timerfd_show()): its clock, the
 * expirations not read yet, and the time left, which counts down on the
 * timer's clock. */
static void scan_timer(struct scan *sc, pid_t pid, const char *info)
{
	const char *p;
	int clockid = -1;
	guint64 ticks = 0;
	gint64 sec = 0, nsec = 0, due;

	if ((p = strstr(info, "clockid:")))
		clockid = atoi(p + strlen("clockid:"));
	if (clockid != CLOCK_BOOTTIME_ALARM && clockid != CLOCK_REALTIME_ALARM)
		return;
	sc->alarms++;
	if ((p = strstr(info, "ticks:")))
		ticks = g_ascii_strtoull(p + strlen("ticks:"), NULL, 10);
	if ((p = strstr(info, "it_value:")) &&
	    sscanf(p, "it_value: (%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT ")",
		   &sec, &nsec) != 2)
		sec = nsec = 0;
	if (ticks) {
		sc->unread++;
		sc->unread_pid = pid;
	}
	if (sec <= 0 && nsec <= 0)
		return;
	due = boot_ns() + sec * G_GINT64_CONSTANT(1000000000) + nsec;
	if (!sc->due_ns || due < sc->due_ns) {
		sc->due_ns = due;
		sc->due_pid = pid;
	}
}

static void scan_task(struct scan *sc, pid_t pid)
{
	char path[64], link[64], info[1024];
	struct dirent *e;
	DIR *fds;

	g_snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fds = opendir(path);
	if (!fds)
		return; /* gone */
	sc->tasks++;
	while ((e = readdir(fds))) {
		gssize n = readlinkat(dirfd(fds), e->d_name, link,
				      sizeof(link) - 1);
		int fd;

		if (n <= 0)
			continue;
		link[n] = '\0';
		if (strcmp(link, "anon_inode:[timerfd]"))
			continue;
		g_snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)pid,
			   e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		n = read(fd, info, sizeof(info) - 1);
		close(fd);
		if (n <= 0)
			continue;
		info[n] = '\0';
		scan_timer(sc, pid, info);
	}
	closedir(fds);
}

/* The tasks of the cgroup dfd and of its descendants. */
static void scan_cgroup(struct scan *sc, int dfd)
{
	int fd = openat(dfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	struct dirent *e;
	DIR *d;

	if (fd >= 0) {
		g_autoptr(GString) procs = g_string_new(NULL);
		g_auto(GStrv) pids = NULL;
		char buf[4096];
		gssize n;

		while ((n = read(fd, buf, sizeof(buf))) > 0)
			g_string_append_len(procs, buf, n);
		close(fd);
		pids = g_strsplit(procs->str, "\n", -1);
		for (guint i = 0; pids[i]; i++) {
			guint64 pid;

			if (g_ascii_string_to_unsigned(pids[i], 10, 1, G_MAXINT,
						       &pid, NULL))
				scan_task(sc, (pid_t)pid);
		}
	}
	fd = dup(dfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((e = readdir(d))) {
		int sub;

		/* LXC's attached tasks live in ".lxc". */
		if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") ||
		    !strcmp(e->d_name, ".."))
			continue;
		sub = openat(dfd, e->d_name,
			     O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub < 0)
			continue;
		scan_cgroup(sc, sub);
		close(sub);
	}
	closedir(d);
}

static void scan_thread(GTask *task, gpointer source, gpointer data,
			GCancellable *cancellable)
{
	struct scan *sc = data;
	int dfd = open(sc->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	(void)source, (void)cancellable;
	if (dfd >= 0) {
		scan_cgroup(sc, dfd);
		close(dfd);
	}
	g_task_return_boolean(task, TRUE);
}

/* --- sleeping -------------------------------------------------------------- */

static void disarm_alarm(struct freeze *fb)
{
	struct itimerspec off = { { 0, 0 }, { 0, 0 } };

	timerfd_settime(fb->alarm_fd, 0, &off, NULL);
}

/* Whatever woke it, from the main loop (not from inside the caller of
 * wake(), the engine's event). */
static void wake_soon(struct freeze *fb, enum why why)
{
	if (fb->phase != FREEZING && fb->phase != SCANNING &&
	    fb->phase != ASLEEP)
		return;
	if (fb->why == WOKEN_BY_NOTHING)
		fb->why = why;
	pf_timer_arm(fb->wake_timer, pf_clock_now(fb->clock));
}

/* The attempt ends: the container thaws, then the core counts it and
 * answers (and may start the next one at once, from inside done()). */
static void end_sleep(struct freeze *fb, int error)
{
	backend_done_func done = fb->done;
	int err;

	pf_timer_disarm(fb->poll);
	pf_timer_disarm(fb->wake_timer);
	disarm_alarm(fb);
	if (fb->scan) {
		fb->scan->fb = NULL;
		fb->scan = NULL;
	}
	fb->why = WOKEN_BY_NOTHING;
	fb->base.slept_ns = fb->frozen_at ? boot_ns() - fb->frozen_at : 0;
	fb->phase = AWAKE;
	fb->done = NULL;
	err = thaw(fb->dir, fb->v2);
	if (err)
		g_warning("%s: cannot thaw: %s", fb->dir, g_strerror(-err));
	else
		g_debug("%s thawed", fb->dir);
	done(error, fb->data);
}

static void woken(gpointer data)
{
	struct freeze *fb = data;
	struct backend *be = &fb->base;

	switch (fb->why) {
	case WOKEN_BY_ALARM:
	case WOKEN_BY_UNREAD_ALARM:
		be->wake_source = "alarmtimer";
		be->wake_source_ms =
			fb->why == WOKEN_BY_ALARM ? 0 : UNREAD_ALARM_HOLD_MS;
		break;
	case WOKEN_BY_HOST:
		if (fb->host_irq >= 0) {
			be->wake_irq = fb->host_irq;
			be->wake_irq_name = fb->host_irq_name;
		} else {
			be->wake_reason = "host resumed";
		}
		break;
	default:
		/* An event: the core knows its source. */
		break;
	}
	if (fb->why == WOKEN_BY_ALARM)
		g_info("%s: woken by an alarm after %.3f s, %.3f ms after it "
		       "was due",
		       fb->dir, (boot_ns() - fb->frozen_at) / 1e9,
		       (boot_ns() - fb->alarm_due) / 1e6);
	else
		g_info("%s: woken %s after %.3f s", fb->dir,
		       fb->why == WOKEN_BY_HOST	 ? "by the host's resume" :
		       fb->why == WOKEN_BY_EVENT ? "by a wakeup event" :
						   "by an alarm",
		       fb->frozen_at ? (boot_ns() - fb->frozen_at) / 1e9 : 0.0);
	end_sleep(fb, 0);
}

static gboolean on_alarm(gint fd, GIOCondition cond, gpointer data)
{
	struct freeze *fb = data;
	guint64 expirations;

	(void)cond;
	if (read(fd, &expirations, sizeof(expirations)) < 0 && errno != EAGAIN)
		g_warning("%s: alarm timer: %s", fb->dir, g_strerror(errno));
	if (fb->phase == ASLEEP)
		wake_soon(fb, WOKEN_BY_ALARM);
	return G_SOURCE_CONTINUE;
}

static void scan_done(GObject *source, GAsyncResult *res, gpointer data)
{
	struct scan *sc = data;
	struct freeze *fb = sc->fb;
	gint64 now;

	(void)source, (void)res;
	if (!fb)
		return; /* the sleep ended meanwhile */
	fb->scan = NULL;
	fb->phase = ASLEEP;
	now = boot_ns();
	if (sc->unread) {
		g_info("%s: asleep, but an alarm of pid %d expired unread: "
		       "due now",
		       fb->dir, (int)sc->unread_pid);
		wake_soon(fb, WOKEN_BY_UNREAD_ALARM);
		return;
	}
	if (!sc->due_ns) {
		g_info("%s: asleep (%u tasks, %u alarm timers, none armed)",
		       fb->dir, sc->tasks, sc->alarms);
		return;
	}
	g_info("%s: asleep (%u tasks), the earliest of %u alarms due in "
	       "%.3f s (pid %d)",
	       fb->dir, sc->tasks, sc->alarms, (sc->due_ns - now) / 1e9,
	       (int)sc->due_pid);
	fb->alarm_due = sc->due_ns;
	timerfd_settime(
		fb->alarm_fd, TFD_TIMER_ABSTIME,
		&(struct itimerspec){ .it_value = { sc->due_ns / 1000000000,
						    sc->due_ns % 1000000000 } },
		NULL);
}

static void start_scan(struct freeze *fb)
{
	struct scan *sc = g_new0(struct scan, 1);
	g_autoptr(GTask) task = g_task_new(NULL, NULL, scan_done, sc);

	sc->fb = fb;
	sc->dir = g_strdup(fb->dir);
	fb->scan = sc;
	fb->phase = SCANNING;
	g_task_set_task_data(task, sc, scan_free);
	g_task_run_in_thread(task, scan_thread);
}

/* The threads of the cgroup that are not frozen, for the log: "comm (tid)
 * in wchan". */
static void describe_unfrozen(const char *dir, GString *out, guint *left)
{
	g_autofree char *procs_path =
		g_build_filename(dir, "cgroup.procs", NULL);
	g_autofree char *procs = NULL;
	g_autoptr(GDir) d = NULL;
	const char *name;

	if (g_file_get_contents(procs_path, &procs, NULL, NULL)) {
		g_auto(GStrv) pids = g_strsplit(procs, "\n", -1);

		for (guint i = 0; pids[i] && *left; i++) {
			g_autofree char *tdir =
				g_strdup_printf("/proc/%s/task", pids[i]);
			g_autoptr(GDir) tasks =
				*pids[i] ? g_dir_open(tdir, 0, NULL) : NULL;
			const char *tid;

			while (tasks && *left &&
			       (tid = g_dir_read_name(tasks))) {
				g_autofree char *base =
					g_build_filename(tdir, tid, NULL);
				g_autofree char *wpath =
					g_build_filename(base, "wchan", NULL);
				g_autofree char *cpath =
					g_build_filename(base, "comm", NULL);
				g_autofree char *wchan = read_small(wpath);
				g_autofree char *comm = read_small(cpath);

				if (!wchan ||
				    !strcmp(wchan, "do_freezer_trap") ||
				    !strcmp(wchan, "__refrigerator"))
					continue;
				g_string_append_printf(out, "%s%s (%s) in %s",
						       out->len ? ", " : "",
						       comm ? g_strchomp(comm) :
							      "?",
						       tid, wchan);
				(*left)--;
			}
		}
	}
	d = g_dir_open(dir, 0, NULL);
	while (d && *left && (name = g_dir_read_name(d))) {
		g_autofree char *sub = g_build_filename(dir, name, NULL);

		if (g_file_test(sub, G_FILE_TEST_IS_DIR))
			describe_unfrozen(sub, out, left);
	}
}

static void poll_frozen(gpointer data)
{
	struct freeze *fb = data;
	gint64 now = pf_clock_now(fb->clock);
	int ret = all_frozen(fb);

	if (ret > 0) {
		fb->frozen_at = boot_ns();
		start_scan(fb);
		return;
	}
	if (ret == 0 && now < fb->freeze_until) {
		pf_timer_arm(fb->poll, MIN(now + POLL_US, fb->freeze_until));
		return;
	}
	if (ret < 0) {
		g_warning("%s: %s", fb->dir, g_strerror(-ret));
	} else {
		g_autoptr(GString) tasks = g_string_new(NULL);
		guint left = TASKS_SHOWN;

		describe_unfrozen(fb->dir, tasks, &left);
		g_warning("%s: not frozen within pm_freeze_timeout (%u ms): "
			  "%s",
			  fb->dir, fb->base.freeze_timeout_ms,
			  tasks->len ? tasks->str : "no task to blame");
	}
	fb->base.failed_step = "freeze";
	end_sleep(fb, ret < 0 ? -EIO : -EBUSY);
}

static guint freeze_states(struct backend *be)
{
	(void)be;
	return PM_STATE_BIT(PM_FREEZE) | PM_STATE_BIT(PM_MEM);
}

static int freeze_suspend(struct backend *be, enum pm_state state,
			  backend_done_func done, gpointer data)
{
	struct freeze *fb = (struct freeze *)be;
	int err;

	(void)state;
	g_return_val_if_fail(fb->phase == AWAKE, -EBUSY);
	mark(fb);
	err = set_frozen(fb->dir, fb->v2, TRUE);
	if (err) {
		unmark(fb->dir);
		g_warning("%s: cannot freeze: %s%s", fb->dir, g_strerror(-err),
			  err == -ENOENT ? " (is the container running?)" : "");
		be->failed_step = "freeze";
		return -EIO;
	}
	fb->done = done;
	fb->data = data;
	fb->phase = FREEZING;
	fb->why = WOKEN_BY_NOTHING;
	fb->frozen_at = 0;
	fb->freeze_until =
		pf_clock_now(fb->clock) + (gint64)be->freeze_timeout_ms * 1000;
	/* Where the kernel's freezer strikes: every wait in powerfs ends as
	 * it would (the container's own waiters are interrupted anyway). */
	if (be->listener)
		be->listener->sleeping(FALSE, be->listener->data);
	pf_timer_arm(fb->poll, pf_clock_now(fb->clock));
	return PF_PENDING;
}

static void freeze_wake(struct backend *be)
{
	wake_soon((struct freeze *)be, WOKEN_BY_EVENT);
}

static gboolean freeze_freezes(struct backend *be, pid_t pid)
{
	struct freeze *fb = (struct freeze *)be;

	return (fb->phase == FREEZING || fb->phase == SCANNING ||
		fb->phase == ASLEEP) &&
	       in_cgroup(fb, pid);
}

static void freeze_block_host_sleep(struct backend *be, const char *why)
{
	struct freeze *fb = (struct freeze *)be;

	if (fb->host && fb->host->ops->block_host_sleep)
		fb->host->ops->block_host_sleep(fb->host, why);
}

/* --- the host's own sleeps (through the logind backend) ---------------- */

static gboolean host_sleeping(gboolean host, gpointer data)
{
	struct freeze *fb = data;
	const struct backend_listener *l = fb->base.listener;

	return l ? l->sleeping(host, l->data) : FALSE;
}

/* The core learns of the host's sleep as logind's backend tells it (the
 * failures and the IRQ, in our fields for that call); then a container
 * that sleeps meanwhile wakes. */
static void host_resumed(int error, gpointer data)
{
	struct freeze *fb = data;
	struct backend *be = &fb->base, *host = fb->host;
	const struct backend_listener *l = be->listener;

	g_free(fb->host_irq_name);
	fb->host_irq_name = g_strdup(host->wake_irq_name);
	fb->host_irq = error ? -1 : host->wake_irq;
	be->failed_step = host->failed_step;
	be->earlier_failures = host->earlier_failures;
	be->earlier_errno = host->earlier_errno;
	be->wake_irq = fb->host_irq;
	be->wake_irq_name = fb->host_irq_name;
	be->wake_reason = host->wake_reason;
	if (l)
		l->resumed(error, l->data);
	backend_clear_wakeup(host);
	backend_clear_wakeup(be);
	be->failed_step = NULL;
	be->earlier_failures = 0;
	if (!error)
		wake_soon(fb, WOKEN_BY_HOST);
}

/* --- life ------------------------------------------------------------------ */

static void freeze_free(struct backend *be)
{
	struct freeze *fb = (struct freeze *)be;

	/* Stopping in the middle of a sleep: the container wakes. */
	if (fb->phase != AWAKE)
		thaw(fb->dir, fb->v2);
	if (fb->scan)
		fb->scan->fb = NULL;
	if (fb->host)
		fb->host->ops->free(fb->host);
	g_source_remove(fb->alarm_watch);
	close(fb->alarm_fd);
	pf_timer_free(fb->poll);
	pf_timer_free(fb->wake_timer);
	g_free(fb->host_irq_name);
	g_free(fb->path);
	g_free(fb->dir);
	g_free(fb);
}

static const struct backend_ops freeze_ops = {
	.name = "freeze",
	.states = freeze_states,
	.suspend = freeze_suspend,
	.wake = freeze_wake,
	.freezes = freeze_freezes,
	.block_host_sleep = freeze_block_host_sleep,
	.free = freeze_free,
};

/* dir's real path, which may not exist yet: its parent's, then its name. */
static char *real_dir(const char *dir, GError **error)
{
	g_autofree char *parent = NULL, *name = NULL, *real_parent = NULL;
	char *real = realpath(dir, NULL);

	if (real)
		return real;
	if (errno != ENOENT)
		goto fail;
	parent = g_path_get_dirname(dir);
	name = g_path_get_basename(dir);
	real_parent = realpath(parent, NULL);
	if (real_parent && strcmp(name, ".") && strcmp(name, "..") &&
	    strcmp(name, "/"))
		return g_build_filename(real_parent, name, NULL);
fail:
	g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "%s: %s",
		    dir, g_strerror(errno));
	return NULL;
}

/* dir is a freezable cgroup (or where one will be), which powerfs itself
 * is not in; its real path, its version and its name in the hierarchy. */
static char *check_cgroup(const char *dir, gboolean *v2, char **path,
			  GError **error)
{
	g_autofree char *real = real_dir(dir, error);
	g_autofree char *self = NULL;
	gboolean exists;

	if (!real)
		return NULL;
	exists = g_file_test(real, G_FILE_TEST_EXISTS);
	if (!find_hierarchy(real, v2, path)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "%s is neither in a cgroup v2 hierarchy nor in "
			    "the v1 freezer's",
			    dir);
		return NULL;
	}
	if (exists) {
		g_autofree char *file =
			g_build_filename(real, control(*v2), NULL);

		if (!g_file_test(file, G_FILE_TEST_EXISTS)) {
			g_set_error(error, G_IO_ERROR,
				    G_IO_ERROR_INVALID_ARGUMENT,
				    "%s is no cgroup that can be frozen (it "
				    "has no %s: the root, or not a cgroup)",
				    dir, control(*v2));
			g_clear_pointer(path, g_free);
			return NULL;
		}
	}
	self = cgroup_of(getpid(), *v2);
	if (self && within(self, *path)) {
		g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
			    "powerfs runs inside %s: it would freeze itself",
			    dir);
		g_clear_pointer(path, g_free);
		return NULL;
	}
	return g_steal_pointer(&real);
}

gboolean backend_freeze_check(const char *dir, GError **error)
{
	g_autofree char *path = NULL;
	gboolean v2;
	g_autofree char *real = check_cgroup(dir, &v2, &path, error);

	return real != NULL;
}

struct backend *backend_freeze_new(struct pf_clock *clock, const char *dir,
				   struct backend *host, GError **error)
{
	struct freeze *fb;
	gboolean v2 = FALSE;
	char *path = NULL;
	char *real = check_cgroup(dir, &v2, &path, error);
	int fd;

	if (!real)
		return NULL;
	fd = timerfd_create(CLOCK_BOOTTIME, TFD_NONBLOCK | TFD_CLOEXEC);
	if (fd < 0) {
		g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno),
			    "timerfd_create: %s", g_strerror(errno));
		g_free(real);
		g_free(path);
		return NULL;
	}
	fb = g_new0(struct freeze, 1);
	fb->base.ops = &freeze_ops;
	fb->base.mem_sleep_states = PM_STATE_BIT(PM_FREEZE);
	fb->clock = clock;
	fb->dir = real;
	fb->path = path;
	fb->v2 = v2;
	fb->host_irq = -1;
	fb->alarm_fd = fd;
	fb->alarm_watch = g_unix_fd_add(fd, G_IO_IN, on_alarm, fb);
	fb->poll = pf_timer_new(clock, poll_frozen, fb);
	fb->wake_timer = pf_timer_new(clock, woken, fb);
	if (host) {
		fb->host = host;
		fb->host_listener =
			(struct backend_listener){ host_sleeping, host_resumed,
						   fb };
		host->listener = &fb->host_listener;
		backend_clear_wakeup(host);
	}
	if (backend_freeze_release(fb->dir))
		g_warning("%s: left asleep by a server that ended: thawed",
			  fb->dir);
	g_message("%s: cgroup %s, %s", fb->dir, v2 ? "v2" : "v1 freezer",
		  g_file_test(fb->dir, G_FILE_TEST_EXISTS) ? "present" :
							     "not there yet");
	return &fb->base;
}

gboolean backend_freeze_release(const char *dir)
{
	g_autofree char *v2_file = g_build_filename(dir, "cgroup.freeze", NULL);

	if (!marked(dir))
		return FALSE;
	thaw(dir, g_file_test(v2_file, G_FILE_TEST_EXISTS));
	return TRUE;
}
