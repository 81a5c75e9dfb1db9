/* clock.h - monotonic time and one-shot timers, injectable for tests.
 *
 * Everything in powerfs that involves time (wake lock timeouts, the autosleep
 * back-off, a simulated suspend) goes through this interface, so unit tests can
 * run the engine against a fake clock and advance it without sleeping.
 */
#ifndef POWERFS_CLOCK_H
#define POWERFS_CLOCK_H

#include <glib.h>

struct pf_clock;
struct pf_timer;

typedef void (*pf_timer_func)(gpointer data);

/* CLOCK_MONOTONIC (stops while the host sleeps, like the kernel's ktime_get),
 * timers dispatched from the thread-default GLib main context. */
struct pf_clock *pf_clock_new_monotonic(void);

/* A clock that only moves when pf_clock_fake_advance() is called; due timers
 * fire inside that call, in deadline order. */
struct pf_clock *pf_clock_new_fake(gint64 start_us);
void pf_clock_fake_advance(struct pf_clock *clock, gint64 delta_us);

void pf_clock_free(struct pf_clock *clock);

/* Microseconds on the monotonic clock. */
gint64 pf_clock_now(struct pf_clock *clock);

/* The kernel's ktime_get() in nanoseconds. */
gint64 pf_clock_mono_ns(struct pf_clock *clock);
/* How far the boot clock (CLOCK_BOOTTIME, which also counts the time the
 * host slept) is ahead of the monotonic one, in nanoseconds: it moves only
 * when the host sleeps.  The two clocks are read as close together as the
 * machine allows, so it is off by a few microseconds at most. */
gint64 pf_clock_slept_ns(struct pf_clock *clock);

/* A fake clock's host slept delta_us: the boot clock moves, the monotonic
 * clock and its timers do not. */
void pf_clock_fake_host_sleep(struct pf_clock *clock, gint64 delta_us);

/* A timer is created once and then armed and disarmed as often as needed;
 * arming an armed timer moves its deadline.  A deadline in the past fires at
 * the next opportunity (the next main loop iteration), never synchronously. */
struct pf_timer *pf_timer_new(struct pf_clock *clock, pf_timer_func func,
			      gpointer data);
void pf_timer_arm(struct pf_timer *timer, gint64 deadline_us);
void pf_timer_disarm(struct pf_timer *timer);
gboolean pf_timer_is_armed(const struct pf_timer *timer);
void pf_timer_free(struct pf_timer *timer);

#endif
