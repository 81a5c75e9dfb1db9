/* caps.c - does the writer hold a capability?
 *
 * The kernel asks capable(CAP_BLOCK_SUSPEND) of the writing task.  powerfs
 * asks the kernel for that task's effective set with capget(2), one system
 * call, no /proc parsing.  The set is the one of the task's own user
 * namespace, so a container's privileged process qualifies (a documented
 * deviation: the kernel wants the capability in the initial namespace).
 */
#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "powerfs/caps.h"

gboolean pf_caller_capable(pid_t tid, uid_t uid, int cap)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3,
		.pid = tid,
	};
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	/* A writer outside our pid namespace has no pid we could ask about
	 * (and capget(0) would describe ourselves): judge by its uid. */
	if (tid <= 0)
		return uid == 0;
	if (syscall(SYS_capget, &hdr, data) < 0)
		return FALSE;	/* gone already */
	return (data[CAP_TO_INDEX(cap)].effective & CAP_TO_MASK(cap)) != 0;
}
