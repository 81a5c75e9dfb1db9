/* backend-sysfs.c - suspend by writing to a backing sysfs directory.
 *
 * DIR is normally the host's /sys/power when powerfs serves a container; it
 * can also be another powerfs.  The states are DIR/state's at start; a
 * suspend writes the state's name to DIR/state, and that write's result is
 * the attempt's.
 *
 * The host's sleep begins with that write: the core is told just before
 * (it answers the requests waiting in powerfs, the state write that asked
 * for the sleep first, since the kernel cannot freeze a task that waits in
 * a FUSE request).  Their callers may come back at once: a reader retries
 * a read that got EINTR, a suspend loop reads wakeup_count again.  Such a
 * request is answered at once from then on, but it must come before the
 * host freezes its tasks, powerfs's own first, which the write starts after
 * only the kernel's sync: so when anyone was answered, the write waits
 * SETTLE_US first (in its thread: the attempt is under way, as for
 * everything that follows the answers).  The write itself blocks until the
 * host has resumed, so it runs in a GTask's thread and reports back to the
 * main loop.
 *
 * Another powerfs as DIR answers that write when the host's sleep begins,
 * not after it: the write returns, the host is about to freeze.  It is
 * told apart by DIR/suspend_stats: a kernel (or a powerfs that simulated
 * the sleep) has counted the attempt when the write returns; a powerfs
 * that answered early counts it after the resume.  The sleep then counts
 * as over only once the host's clocks show it happened (CLOCK_BOOTTIME ran
 * on while CLOCK_MONOTONIC stood still), or after CHAINED_WAIT_US if they
 * never do: meanwhile nobody waits in this powerfs either.  (DIR's files
 * are read once, right after the write: a read during the freeze would
 * wait for a frozen server.)
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <gio/gio.h>

#include "powerfs/engine/backend.h"
#include "powerfs/backends/host-power.h"
#include "powerfs/engine/suspend.h"

/* How long after another powerfs answered a host's sleep can begin: what
 * logind lets a delay inhibitor hold it (InhibitDelayMaxSec). */
#define CHAINED_WAIT_US (5 * G_USEC_PER_SEC)
#define CHAINED_POLL_US (50 * 1000)
/* The clocks drift apart by less than this unless the host slept. */
#define SLEPT_US (10 * 1000)
/* How long the callers answered as the sleep begins get to come back and
 * be answered again before the write starts the freeze: long enough for a
 * reader on a slow (emulated) machine to come back after the kernel's
 * sync, as one that came back during the freeze would hang it (make
 * check-vm, b-readers-sysfs-held, checks this). */
#define SETTLE_US (100 * 1000)

struct sysfs_backend {
	struct backend base;
	struct pf_clock *clock;
	char *dir;
	guint states;
	/* The attempt in progress. */
	backend_done_func done;
	gpointer data;
	int error;
	gint64 offset_before; /* boottime - monotonic, us */
	gint64 wait_until;    /* chained: how long to wait for the sleep */
	struct pf_timer *poll;
	char failed_step[32];
	char *wake_irq_name; /* base.wake_irq_name points here */
};

/* Time the host spent asleep since boot, in us. */
static gint64 time_asleep(void)
{
	struct timespec boot, mono;

	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return (boot.tv_sec - mono.tv_sec) * G_USEC_PER_SEC +
	       (boot.tv_nsec - mono.tv_nsec) / 1000;
}

static guint sysfs_states(struct backend *be)
{
	return ((struct sysfs_backend *)be)->states;
}

/* What one write to DIR/state does, in the task's thread. */
struct write_job {
	char *dir;
	const char *label;
	char failed_step[32];
	gboolean answered_early; /* DIR has not counted the attempt */
	gboolean settle;	 /* wait SETTLE_US first */
};

static void write_job_free(gpointer data)
{
	struct write_job *job = data;

	g_free(job->dir);
	g_free(job);
}

/* After a failed write: the step at which the host's kernel says it
 * failed, if it says (a real /sys/power; another powerfs too). */
static void read_failed_step(struct write_job *job)
{
	g_autofree char *path = g_build_filename(job->dir, "suspend_stats",
						 "last_failed_step", NULL);
	g_autofree char *text = NULL;

	if (g_file_get_contents(path, &text, NULL, NULL))
		g_strlcpy(job->failed_step, g_strstrip(text),
			  sizeof(job->failed_step));
}

/* success + fail in DIR/suspend_stats, -1 if it cannot be read. */
static gint64 attempts_counted(const char *dir)
{
	static const char *const names[] = { "success", "fail" };
	gint64 sum = 0;

	for (gsize i = 0; i < G_N_ELEMENTS(names); i++) {
		g_autofree char *path =
			g_build_filename(dir, "suspend_stats", names[i], NULL);
		g_autofree char *text = NULL;

		if (!g_file_get_contents(path, &text, NULL, NULL))
			return -1;
		sum += g_ascii_strtoll(text, NULL, 10);
	}
	return sum;
}

static void write_state(GTask *task, gpointer source, gpointer data,
			GCancellable *cancellable)
{
	struct write_job *job = data;
	g_autofree char *path = g_build_filename(job->dir, "state", NULL);
	gssize len = strlen(job->label), n;
	gint64 counted = attempts_counted(job->dir);
	int fd, error = 0;

	(void)source, (void)cancellable;
	if (job->settle)
		g_usleep(SETTLE_US);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		error = errno;
	} else {
		n = write(fd, job->label, len);
		/* A short write sets no errno: do not report a stale one. */
		if (n < 0)
			error = errno;
		else if (n != len)
			error = EIO;
		close(fd);
	}
	if (error)
		read_failed_step(job);
	else if (counted >= 0 && attempts_counted(job->dir) == counted)
		job->answered_early = TRUE;
	g_task_return_int(task, -error);
}

static void finish(struct sysfs_backend *sb)
{
	backend_done_func done = sb->done;

	sb->done = NULL;
	pf_timer_disarm(sb->poll);
	sb->base.failed_step = sb->failed_step[0] ? sb->failed_step : NULL;
	g_free(sb->wake_irq_name);
	sb->wake_irq_name = NULL;
	if (!sb->error &&
	    host_power_wakeup_irq(sb->base.host_dir, &sb->base.wake_irq,
				  &sb->wake_irq_name))
		sb->base.wake_irq_name = sb->wake_irq_name;
	if (sb->base.listener)
		sb->base.listener->resumed(sb->error, sb->base.listener->data);
	done(sb->error, sb->data);
}

static gboolean host_slept(struct sysfs_backend *sb)
{
	return time_asleep() - sb->offset_before > SLEPT_US;
}

static void poll_for_the_sleep(gpointer data)
{
	struct sysfs_backend *sb = data;
	gint64 now = pf_clock_now(sb->clock);

	if (host_slept(sb) || now >= sb->wait_until)
		finish(sb);
	else
		pf_timer_arm(sb->poll,
			     MIN(now + CHAINED_POLL_US, sb->wait_until));
}

static void write_done(GObject *source, GAsyncResult *res, gpointer data)
{
	struct sysfs_backend *sb = data;
	struct write_job *job = g_task_get_task_data(G_TASK(res));

	(void)source;
	sb->error = (int)g_task_propagate_int(G_TASK(res), NULL);
	g_strlcpy(sb->failed_step, job->failed_step, sizeof(sb->failed_step));
	/* Another powerfs answered as the host's sleep began: it is over
	 * only once the host has slept (or clearly will not). */
	if (!sb->error && job->answered_early && !host_slept(sb)) {
		sb->wait_until = pf_clock_now(sb->clock) + CHAINED_WAIT_US;
		poll_for_the_sleep(sb);
		return;
	}
	finish(sb);
}

static int sysfs_suspend(struct backend *be, enum pm_state state,
			 backend_done_func done, gpointer data)
{
	struct sysfs_backend *sb = (struct sysfs_backend *)be;
	struct write_job *job = g_new0(struct write_job, 1);
	g_autoptr(GTask) task = g_task_new(NULL, NULL, write_done, sb);

	sb->done = done;
	sb->data = data;
	sb->error = 0;
	sb->failed_step[0] = '\0';
	sb->offset_before = time_asleep();
	job->dir = g_strdup(sb->dir);
	job->label = pm_state_label(state);
	/* The host's sleep begins with the write: answer everyone first. */
	job->settle = be->listener &&
		      be->listener->sleeping(TRUE, be->listener->data);
	g_task_set_task_data(task, job, write_job_free);
	g_task_run_in_thread(task, write_state);
	return PF_PENDING;
}

static void sysfs_free(struct backend *be)
{
	struct sysfs_backend *sb = (struct sysfs_backend *)be;

	pf_timer_free(sb->poll);
	g_free(sb->wake_irq_name);
	g_free(sb->dir);
	g_free(sb);
}

static const struct backend_ops sysfs_ops = {
	.name = "sysfs",
	.states = sysfs_states,
	.suspend = sysfs_suspend,
	.free = sysfs_free,
};

/* DIR/state's text: a regular file (sysfs's and powerfs's are); anything
 * else, a FIFO say, would block the start. */
static char *read_states(const char *path, GError **error)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	char buf[256];
	struct stat st;
	gssize n = -1;

	if (fd < 0)
		goto failed;
	if (fstat(fd, &st) < 0)
		goto failed;
	if (!S_ISREG(st.st_mode)) {
		errno = EINVAL;
		goto failed;
	}
	n = read(fd, buf, sizeof(buf) - 1);
failed:
	if (n < 0) {
		int err = errno;

		g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(err),
			    "%s: %s", path,
			    err == EINVAL ? "not a regular file" :
					    g_strerror(err));
	}
	if (fd >= 0)
		close(fd);
	return n < 0 ? NULL : g_strndup(buf, n);
}

struct backend *backend_sysfs_new(struct pf_clock *clock, const char *dir,
				  GError **error)
{
	struct sysfs_backend *sb;
	g_autofree char *path = g_build_filename(dir, "state", NULL);
	g_autofree char *text = read_states(path, error);
	g_auto(GStrv) words = NULL;
	guint states = 0;

	if (!text)
		return NULL;
	words = g_strsplit_set(g_strstrip(text), " \n", -1);
	for (guint i = 0; words[i]; i++)
		for (enum pm_state s = PM_FREEZE; s < PM_NR_STATES; s++)
			if (!strcmp(words[i], pm_state_label(s)))
				states |= PM_STATE_BIT(s);
	sb = g_new0(struct sysfs_backend, 1);
	sb->base.ops = &sysfs_ops;
	sb->clock = clock;
	sb->dir = g_strdup(dir);
	sb->states = states;
	sb->poll = pf_timer_new(clock, poll_for_the_sleep, sb);
	sb->base.host_dir = sb->dir;
	return &sb->base;
}
