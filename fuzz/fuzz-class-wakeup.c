/* fuzz-class-wakeup.c - libFuzzer harness over class-wakeup.c.
 *
 * The input interleaves changes to the wakeup sources (wake_lock and
 * wake_unlock writes of any bytes through the attribute table, so sources
 * are made, released and collected: --wakelock-gc-seconds=0, and a burst
 * of 101 unlocks runs the collector) with requests
 * on the class mount as the kernel could send them: lookups of any name
 * (wakeupN of a live or dead id, or arbitrary bytes such as "wakeup01",
 * "wakeup-1", "wakeup4294967296"), getattr, setattr, opendir, readdir,
 * opens, reads at any offset, releases and reads of handles an earlier
 * server opened.  Only inodes learnt from lookups are used.
 *
 * Checked, besides each request being answered once (fuse-fake.h):
 * - a lookup of wakeupN succeeds exactly when a source has id N, and its
 *   inode names that directory;
 * - an open "name" file reads the name of the source it was opened on,
 *   or ENODEV once that source is gone, never another source's name,
 *   even one that took its id (the serial rule);
 * - no read answers more than asked, and none through the page cache
 *   (EINVAL).
 */
#include <stdio.h>

#include "fuse-fake.h"

#include "../src/sysfs/class-wakeup.c"
#include "powerfs/sysfs/attrs.h"
#include "powerfs/engine/power.h"

#define MAX_INODES 64
#define MAX_FILES 32

struct kfile {
	guint64 fh;
	fuse_ino_t ino;
	char *name; /* "name" files: the source's, at open */
};

struct kernel {
	struct pf_class_wakeup *cw;
	fuse_ino_t inodes[MAX_INODES];
	guint n_inodes;
	struct kfile files[MAX_FILES];
	guint n_files;
	guint64 adopted_fh;
};

static void store_done(gssize result, gpointer data)
{
	(void)result;
	(void)data;
}

static void write_attr(struct power *pw, const char *file,
		       struct fake_input *in)
{
	guint n;
	const struct pf_attr *attrs = pf_attrs(&n);
	struct pf_caller caller = { 0, 0, 0 };
	char buf[PF_STORE_MAX + 1];
	size_t len = fake_bytes(in, buf, 64);

	/* Short names, often the same ones: sources come back. */
	if (!len)
		len = (size_t)g_snprintf(buf, sizeof(buf), "s%u",
					 fake_byte(in) % 8);
	buf[len] = '\0';
	for (guint i = 0; i < n; i++)
		if (!strcmp(attrs[i].name, file))
			attrs[i].store(pw, &caller, buf, len, store_done, NULL);
}

/* A lock and unlock of one name, 101 times: the collector runs (every
 * 100th unlock), and sources idle since go. */
static void churn(struct power *pw, struct fake_input *in)
{
	guint8 name[2] = { 'c', (guint8)('0' + fake_byte(in) % 4) };

	for (guint i = 0; i < 101; i++) {
		struct fake_input one = {
			(const guint8[]){ 2, 0, name[0], name[1] }, 4
		};

		write_attr(pw, "wake_lock", &one);
		one = (struct fake_input){
			(const guint8[]){ 2, 0, name[0], name[1] }, 4
		};
		write_attr(pw, "wake_unlock", &one);
	}
}

static void learn(struct kernel *k, fuse_ino_t ino)
{
	if (k->n_inodes < MAX_INODES)
		k->inodes[k->n_inodes++] = ino;
	else
		k->inodes[1 + ino % (MAX_INODES - 1)] = ino;
}

static fuse_ino_t pick_inode(struct kernel *k, struct fake_input *in)
{
	return k->inodes[fake_byte(in) % k->n_inodes];
}

static void do_lookup(struct kernel *k, struct wakeup_engine *engine,
		      struct fake_input *in)
{
	fuse_ino_t parent = pick_inode(k, in);
	guint how = fake_byte(in);
	char name[256];
	fuse_req_t req;
	guint id;

	if (how % 3 == 0) {
		g_snprintf(name, sizeof(name), "wakeup%u", fake_byte(in) % 12);
	} else if (how % 3 == 1) {
		g_strlcpy(name, fields[fake_byte(in) % N_FIELDS].name,
			  sizeof(name));
	} else {
		size_t len = fake_bytes(in, name, sizeof(name) - 1);

		name[len] = '\0';
		if (!*name || strchr(name, '/'))
			return;
	}
	req = fake_req_new(k->cw, 0);
	cw_lookup(req, parent, name);
	fake_check(req->answered, "a lookup left waiting");
	if (parent == FUSE_ROOT_ID) {
		gboolean live = parse_dir_name(name, &id) &&
				wakeup_source_by_id(engine, id);

		fake_check((req->error == 0) == live,
			   "a lookup of wakeupN disagrees with the engine");
		if (live)
			fake_check(((const struct fuse_entry_param *)
					    req->data->data)
						   ->ino == DIR_INO(id),
				   "wakeupN has another id's inode");
	}
	if (!req->error)
		learn(k,
		      ((const struct fuse_entry_param *)req->data->data)->ino);
}

static void do_open(struct kernel *k, struct wakeup_engine *engine,
		    struct fake_input *in)
{
	guint b = fake_byte(in);
	struct fuse_file_info fi = {
		.flags = (b & 1 ? O_RDWR : O_RDONLY) | (b & 2 ? O_DIRECT : 0),
	};
	fuse_ino_t ino = pick_inode(k, in);
	struct node n = node_get(k->cw, ino);
	char *name = NULL;
	fuse_req_t req;

	if (k->n_files == MAX_FILES)
		return;
	if (n.kind == NODE_FILE && n.field == 0)
		name = g_strdup(
			wakeup_source_name(wakeup_source_by_id(engine, n.id)));
	req = fake_req_new(k->cw, 0);
	if (b & 4)
		cw_opendir(req, ino, &fi);
	else
		cw_open(req, ino, &fi);
	fake_check(req->answered, "an open left waiting");
	if (req->error || (b & 4)) {
		g_free(name);
		return;
	}
	k->files[k->n_files++] =
		(struct kfile){ *(const guint64 *)req->data->data, ino, name };
}

static void do_read(struct kernel *k, struct fake_input *in)
{
	guint b = fake_byte(in);
	size_t size = 1 + fake_u16(in) % 8192;
	off_t off = b & 2 ? (off_t)fake_byte(in) : 0;
	/* read(2) names a lock owner; the page cache (sendfile) does not. */
	struct fuse_file_info fi = { .lock_owner = b & 4 ? 0 : 42 };
	struct kfile *f = NULL;
	fuse_req_t req;
	fuse_ino_t ino;

	if (b & 1) {
		/* A file an earlier server opened. */
		ino = pick_inode(k, in);
		if (node_get(k->cw, ino).kind != NODE_FILE)
			return;
		fi.fh = k->adopted_fh++;
	} else {
		if (!k->n_files)
			return;
		f = &k->files[fake_byte(in) % k->n_files];
		fi.fh = f->fh;
		ino = f->ino;
	}
	req = fake_req_new(k->cw, 0);
	cw_read(req, ino, size, off, &fi);
	fake_check(req->answered, "a read left waiting");
	fake_check(req->data->len <= size, "a read got more than asked");
	if (!fi.lock_owner) {
		fake_check(req->error == EINVAL,
			   "a read through the page cache was answered");
		return;
	}
	if (f && f->name && off == 0 && !req->error) {
		g_autofree char *want = g_strdup_printf("%s\n", f->name);
		size_t n = MIN(MIN(strlen(want), (size_t)CONTENT_MAX), size);

		fake_check(req->data->len == n &&
				   !memcmp(req->data->data, want, n),
			   "an open name file reads another source's name");
	}
	if (f && f->name && off == 0)
		fake_check(!req->error || req->error == ENODEV,
			   "a name file fails but ENODEV");
}

static void do_release(struct kernel *k, struct fake_input *in)
{
	struct fuse_file_info fi = { 0 };
	struct kfile *f;
	fuse_req_t req;

	if (!k->n_files)
		return;
	f = &k->files[fake_byte(in) % k->n_files];
	fi.fh = f->fh;
	req = fake_req_new(k->cw, 0);
	cw_release(req, f->ino, &fi);
	fake_check(req->answered && !req->error, "a release failed");
	g_free(f->name);
	*f = k->files[--k->n_files];
}

static void do_misc(struct kernel *k, struct fake_input *in)
{
	fuse_ino_t ino = pick_inode(k, in);
	guint b = fake_byte(in);
	struct fuse_file_info fi = { 0 };
	fuse_req_t req = fake_req_new(k->cw, 0);

	if (b % 3 == 0) {
		cw_getattr(req, ino, NULL);
	} else if (b % 3 == 1) {
		struct stat st = { .st_mode = 0777 };

		cw_setattr(req, ino, &st, (int)(b >> 2) & 0x3f, NULL);
	} else {
		size_t size = 1 + fake_u16(in) % 4096;

		cw_readdir(req, ino, size, (off_t)fake_byte(in), &fi);
		fake_check(req->data->len <= size, "readdir overflowed");
	}
	fake_check(req->answered, "a request that never waits waited");
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	struct pf_clock *clock = pf_clock_new_fake(1000000000);
	struct power_options opts = { 0, 0, FALSE, NULL };
	struct fake_input in = { data, size };
	struct kernel k = { .adopted_fh = 1u << 30 };
	struct power *pw;

	fake_init();
	pw = power_new(clock,
		       backend_simulate_new(clock, 50, PM_STATE_BIT(PM_MEM)),
		       &opts);
	k.cw = pf_class_wakeup_serve(pw->engine, -1, -1, "fuzz", NULL);
	k.inodes[k.n_inodes++] = FUSE_ROOT_ID;
	while (in.left) {
		switch (fake_byte(&in) % 10) {
		case 0:
			write_attr(pw, "wake_lock", &in);
			break;
		case 1:
			write_attr(pw, "wake_unlock", &in);
			break;
		case 2:
		case 3:
			do_lookup(&k, pw->engine, &in);
			break;
		case 4:
			do_open(&k, pw->engine, &in);
			break;
		case 5:
			do_read(&k, &in);
			break;
		case 6:
			do_release(&k, &in);
			break;
		case 7:
			do_misc(&k, &in);
			break;
		case 8:
			churn(pw, &in);
			break;
		default:
			pf_clock_fake_advance(clock,
					      (gint64)fake_u16(&in) * 1000);
			break;
		}
		fake_sweep(TRUE);
	}
	while (k.n_files) {
		struct fake_input none = { NULL, 0 };

		do_release(&k, &none);
	}
	pf_class_wakeup_free(k.cw);
	fake_finish();
	power_free(pw);
	return 0;
}
