/* caps.c - does the writer hold a capability that counts?
 *
 * The kernel asks capable(CAP_BLOCK_SUSPEND): the capability in the initial
 * user namespace.  powerfs asks the kernel for the writing thread's
 * effective set with capget(2), and that set belongs to the thread's own
 * user namespace, where anyone who may run `unshare -Ur` holds every
 * capability.  So the set counts only if that namespace is powerfs's own
 * (the initial one, normally), or if it and every namespace between it and
 * powerfs's were created by a trusted owner: root, or a uid named with
 * --trust-userns-owner (a rootless container runtime).  A container that
 * root started qualifies; a namespace that a user made does not.
 *
 * One concern, one file: the nsfs ioctls (NS_GET_OWNER_UID, NS_GET_PARENT)
 * on /proc/TID/ns/user are how the namespaces are found.
 *
 * Which task is asked about.  The check runs while powerfs handles the
 * write request, before it answers.  Every write reaches powerfs as a
 * synchronous request of the writing thread (session.c turns off
 * asynchronous direct I/O and the writeback cache), and once powerfs has
 * read a request the kernel holds that thread until the answer, even
 * through SIGKILL.  So tid names the writer for the whole check: it cannot
 * exit and be reused, and its credentials and namespace cannot change (a
 * thread changes only its own).  Not guaranteed: if the connection is
 * aborted (umount -f, fusectl abort; root only) the writer is let go at
 * once and the tid may name another task, but that write has already
 * failed and powerfs's answer goes nowhere.  capget() reads the thread's
 * own credentials, not credentials the kernel may be writing with on its
 * behalf.  Writers not visible in powerfs's pid namespace arrive with pid
 * 0 and are judged by uid: 0 passes.
 *
 * The common answer, "this thread is in powerfs's own namespace", is kept
 * for a second per tid: a lock and unlock pair costs two checks, and the
 * readlink behind that answer is the most expensive part of a write.  The
 * capability itself is read every time.  What the second allows: a thread
 * that held the capability in our namespace and then made a namespace of
 * its own still passes for up to a second (it passed a moment ago anyway);
 * a tid cannot be reused that fast (the host's pid space would have to wrap
 * in a second).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "powerfs/sysfs/caps.h"

/* powerfs's own user namespace, as its /proc/self/ns/user link reads
 * ("user:[INODE]") and as fstat sees it; empty link if /proc does not show
 * powerfs's pid namespace, whose tids are then not found there. */
static char own_link[64];
static struct stat own_ns;

static void find_own_namespace(void)
{
	char self[32], pid[32];
	ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);

	if (n > 0)
		self[n] = '\0';
	g_snprintf(pid, sizeof(pid), "%d", (int)getpid());
	if (n > 0 && !strcmp(self, pid) &&
	    stat("/proc/self/ns/user", &own_ns) == 0) {
		g_snprintf(own_link, sizeof(own_link), "user:[%lu]",
			   (unsigned long)own_ns.st_ino);
		return;
	}
	g_warning("/proc is not the proc of powerfs's pid namespace: writers "
		  "of wake_lock and wake_unlock get EPERM (mount a proc for "
		  "it, or use --no-capability-check)");
}

/* The kernel lets us read another task's namespaces only if we may ptrace
 * it (PTRACE_MODE_READ): as root, with CAP_SYS_PTRACE. */
static void warn_once_unreadable(const char *path, int err)
{
	static gsize warned;

	if (g_once_init_enter(&warned)) {
		g_warning("%s: %s: writers that powerfs may not inspect get "
			  "EPERM from wake_lock and wake_unlock (powerfs needs "
			  "CAP_SYS_PTRACE)",
			  path, g_strerror(err));
		g_once_init_leave(&warned, 1);
	}
}

static gboolean owner_trusted(int ns, const GArray *trusted_owners)
{
	uid_t owner = (uid_t)-1; /* valgrind knows no nsfs ioctl */

	if (ioctl(ns, NS_GET_OWNER_UID, &owner) < 0)
		return FALSE;
	if (owner == 0)
		return TRUE;
	for (guint i = 0; trusted_owners && i < trusted_owners->len; i++)
		if (g_array_index(trusted_owners, uid_t, i) == owner)
			return TRUE;
	return FALSE;
}

/* Walk up from the namespace open on ns (closed here) to powerfs's own:
 * every one on the way must have a trusted owner.  NS_GET_PARENT fails
 * (EPERM) above powerfs's namespace: a namespace that is not below ours
 * never reaches it. */
static gboolean namespace_trusted(int ns, const GArray *trusted_owners)
{
	for (;;) {
		struct stat st;
		int parent;

		if (fstat(ns, &st) == 0 && st.st_dev == own_ns.st_dev &&
		    st.st_ino == own_ns.st_ino) {
			close(ns);
			return TRUE;
		}
		if (!owner_trusted(ns, trusted_owners)) {
			close(ns);
			return FALSE;
		}
		parent = ioctl(ns, NS_GET_PARENT);
		close(ns);
		if (parent < 0)
			return FALSE;
		ns = parent;
	}
}

#define OWN_NS_CACHE_US G_USEC_PER_SEC
#define OWN_NS_CACHE_MAX 1024

/* tid -> until when it is known to be in our namespace (monotonic us). */
static GHashTable *own_ns_until;

static gboolean known_in_own_namespace(pid_t tid, gint64 now)
{
	gpointer value;
	gint64 until;

	if (!own_ns_until ||
	    !g_hash_table_lookup_extended(own_ns_until, GINT_TO_POINTER(tid),
					  NULL, &value))
		return FALSE;
	memcpy(&until, &value, sizeof(until));
	return now < until;
}

static void remember_own_namespace(pid_t tid, gint64 now)
{
	gint64 until = now + OWN_NS_CACHE_US;
	gpointer value;

	G_STATIC_ASSERT(sizeof(gpointer) >= sizeof(gint64));
	if (!own_ns_until)
		own_ns_until = g_hash_table_new(g_direct_hash, g_direct_equal);
	if (g_hash_table_size(own_ns_until) >= OWN_NS_CACHE_MAX)
		g_hash_table_remove_all(own_ns_until);
	memcpy(&value, &until, sizeof(until));
	g_hash_table_insert(own_ns_until, GINT_TO_POINTER(tid), value);
}

gboolean pf_caps_caller_capable(pid_t tid, uid_t uid, int cap,
				const GArray *trusted_owners)
{
	static gsize found;
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = tid,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	char path[64], link[64];
	gint64 now;
	ssize_t n;
	int ns;

	/* A writer outside our pid namespace has no pid we could ask about
	 * (and capget(0) would describe ourselves): judge by its uid. */
	if (tid <= 0)
		return uid == 0;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return FALSE; /* gone already */
	if (!(data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap)))
		return FALSE;

	if (g_once_init_enter(&found)) {
		find_own_namespace();
		g_once_init_leave(&found, 1);
	}
	if (!own_link[0])
		return FALSE;
	now = g_get_monotonic_time();
	if (known_in_own_namespace(tid, now))
		return TRUE;
	/* The common case, a writer in our own namespace, costs one
	 * readlink (open, fstat and close cost three times as much).  nsfs
	 * has a single device: its inode number alone names a namespace. */
	g_snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)tid);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0) {
		if (errno == EACCES || errno == EPERM)
			warn_once_unreadable(path, errno);
		return FALSE;
	}
	link[n] = '\0';
	if (!strcmp(link, own_link)) {
		remember_own_namespace(tid, now);
		return TRUE;
	}
	ns = open(path, O_RDONLY | O_CLOEXEC);
	return ns >= 0 && namespace_trusted(ns, trusted_owners);
}
