/* loop-lock.c - the loop lock: the one lock that keeps the core
 * single-threaded while FUSE readers run in threads of their own.
 *
 * The main thread holds it at all times except while its GLib loop polls,
 * and a reader thread (readers.c) takes it to process a request.  So every
 * handler, timer, D-Bus callback and idle runs under that lock, one at a
 * time, and handlers may still park requests and answer them later from
 * the main loop.  How long each holder keeps it is timed by loop-hold.c.
 */
#include <errno.h>
#include <glib.h>

#include "powerfs/transport/loop-hold.h"
#include "powerfs/transport/loop-lock.h"

static GMutex loop_lock;

static gint poll_unlocked(GPollFD *fds, guint nfds, gint timeout)
{
	static gint64 held_since;
	gint ret, err;

	pf_loop_hold_end(held_since, PF_HOLD_MAIN_LOOP);
	g_mutex_unlock(&loop_lock);
	ret = g_poll(fds, nfds, timeout);
	err = errno;
	g_mutex_lock(&loop_lock);
	held_since = pf_loop_hold_start();
	/* GLib reads poll's errno (EINTR is no error): a futex wait for the
	 * lock may have set it to EAGAIN. */
	errno = err;
	return ret;
}

void pf_loop_lock_init(void)
{
	g_mutex_lock(&loop_lock);
	g_main_context_set_poll_func(NULL, poll_unlocked);
}

void pf_loop_lock_take(void)
{
	g_mutex_lock(&loop_lock);
}

void pf_loop_lock_release(void)
{
	g_mutex_unlock(&loop_lock);
}
