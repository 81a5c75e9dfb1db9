/* fuzz-fs.c - libFuzzer harness over fs.c's request handlers.
 *
 * The input is a stream of requests as the kernel could send them on the
 * main mount: lookups of any name (the real ones or arbitrary bytes) under
 * the directories, getattr and setattr, opens with any flags, reads of
 * any size at any offset through read(2) or the page cache, writes of any
 * bytes (up to twice a page) to files opened for writing, lseek, readdir,
 * releases, reads of a handle an earlier server opened, INTERRUPTs of
 * waiting requests, and time passing on a fake clock (simulated sleeps,
 * autosleep, lock timeouts).  Only inodes the kernel learnt from a lookup
 * are used, and only handles it got from an open.
 *
 * Checked: every request is answered exactly once (fuse-fake.h), no answer
 * holds more bytes than asked for, a write's count is the bytes written or
 * the page it was cut to, and at the end, with the server freed, nothing
 * is left waiting and (under ASan) nothing leaks.
 */
#include "fuse-fake.h"

#include "../src/sysfs/fs.c"

#define MAX_INODES 64
#define MAX_FILES 32

struct kfile {
	guint64 fh;
	fuse_ino_t ino;
	gboolean writable;
};

struct kernel {
	struct pf_fs *fs;
	fuse_ino_t inodes[MAX_INODES]; /* learnt from lookups */
	guint n_inodes;
	struct kfile files[MAX_FILES];
	guint n_files;
	guint64 adopted_fh;
};

static void run_loop(void)
{
	while (g_main_context_iteration(NULL, FALSE))
		;
}

static fuse_ino_t pick_inode(struct kernel *k, struct fake_input *in)
{
	return k->inodes[fake_byte(in) % k->n_inodes];
}

static gboolean is_dir(struct kernel *k, fuse_ino_t ino)
{
	return S_ISDIR(node_get(k->fs, ino)->owner->mode);
}

static void learn(struct kernel *k, fuse_ino_t ino)
{
	if (k->n_inodes < MAX_INODES)
		k->inodes[k->n_inodes++] = ino;
	else
		k->inodes[1 + ino % (MAX_INODES - 1)] = ino;
}

static void do_lookup(struct kernel *k, struct fake_input *in)
{
	fuse_ino_t parent = pick_inode(k, in);
	char name[256];
	guint how = fake_byte(in);
	fuse_req_t req;

	if (!is_dir(k, parent))
		return; /* the kernel looks up in directories only */
	if (how & 1) {
		guint n;
		const struct pf_attr *attrs = pf_attrs(&n);

		g_strlcpy(name, attrs[(how >> 1) % n].name, sizeof(name));
	} else {
		size_t len = fake_bytes(in, name, sizeof(name) - 1);

		name[len] = '\0';
		if (!*name || strchr(name, '/'))
			return; /* not a name the kernel sends */
	}
	req = fake_req_new(k->fs, 0);
	fs_lookup(req, parent, name);
	fake_check(req->answered, "a lookup left waiting");
	if (!req->error) {
		const struct fuse_entry_param *e =
			(const void *)req->data->data;

		fake_check(node_get(k->fs, e->ino) != NULL,
			   "a lookup gave an inode with no node");
		fake_check(node_get(k->fs, e->ino)->parent ==
				   node_get(k->fs, parent),
			   "a lookup gave another directory's file");
		learn(k, e->ino);
	} else {
		fake_check(req->error == ENOENT, "a lookup failed but ENOENT");
	}
}

static void do_open(struct kernel *k, struct fake_input *in)
{
	static const int modes[] = { O_RDONLY, O_WRONLY, O_RDWR };
	guint b = fake_byte(in);
	struct fuse_file_info fi = {
		.flags = modes[b % 3] | (b & 4 ? O_TRUNC : 0) |
			 (b & 8 ? O_DIRECT : 0),
	};
	fuse_ino_t ino = pick_inode(k, in);
	fuse_req_t req;

	if (is_dir(k, ino) || k->n_files == MAX_FILES)
		return; /* directories are opened with opendir */
	req = fake_req_new(k->fs, 0);
	fs_open(req, ino, &fi);
	fake_check(req->answered, "an open left waiting");
	if (!req->error)
		k->files[k->n_files++] =
			(struct kfile){ *(const guint64 *)req->data->data, ino,
					(fi.flags & O_ACCMODE) != O_RDONLY };
}

static struct kfile *pick_file(struct kernel *k, struct fake_input *in)
{
	return k->n_files ? &k->files[fake_byte(in) % k->n_files] : NULL;
}

static void do_read(struct kernel *k, struct fake_input *in, gboolean adopt)
{
	struct kfile *f = pick_file(k, in);
	guint b = fake_byte(in);
	size_t size = 1 + fake_u16(in) % 8192;
	off_t off = b & 2 ? (off_t)fake_u16(in) : 0;
	struct fuse_file_info fi = { .lock_owner = b & 1 ? 0 : 42 };
	fuse_ino_t ino;
	fuse_req_t req;

	if (adopt) {
		/* A file an earlier server opened, on an inode it gave: one
		 * of ours, or a number of a former version's (a serial above
		 * a row of its table) or of none. */
		ino = pick_inode(k, in);
		if (b & 4)
			ino = (fuse_ino_t)fake_u16(in) << LEGACY_SHIFT |
			      fake_byte(in) % 32;
		if (node_get(k->fs, ino) && is_dir(k, ino))
			return;
		fi.fh = k->adopted_fh++;
	} else {
		if (!f)
			return;
		fi.fh = f->fh;
		ino = f->ino;
	}
	req = fake_req_new(k->fs, 0);
	req->fh = fi.fh;
	fs_read(req, ino, size, off, &fi);
	if (req->answered)
		fake_check(req->data->len <= size,
			   "a read got more than asked");
}

static void do_write(struct kernel *k, struct fake_input *in)
{
	struct kfile *f = pick_file(k, in);
	char buf[2 * PF_STORE_MAX];
	size_t len = fake_bytes(in, buf, sizeof(buf));
	struct fuse_file_info fi = { 0 };
	fuse_req_t req;

	if (!f || !f->writable || !len)
		return; /* the kernel answers empty writes itself */
	fi.fh = f->fh;
	req = fake_req_new(k->fs, fake_byte(in) & 1 ? 1000 : 0);
	req->fh = fi.fh;
	fs_write(req, f->ino, buf, len, 0, &fi);
	if (req->answered && !req->error)
		fake_check(*(const size_t *)req->data->data ==
				   MIN(len, (size_t)PF_STORE_MAX),
			   "a write's count is not what was written");
}

static void do_release(struct kernel *k, struct fake_input *in)
{
	struct kfile *f = pick_file(k, in);
	struct fuse_file_info fi = { 0 };
	fuse_req_t req;

	if (!f || fake_fh_busy(f->fh))
		return;
	fi.fh = f->fh;
	req = fake_req_new(k->fs, 0);
	fs_release(req, f->ino, &fi);
	fake_check(req->answered && !req->error, "a release failed");
	*f = k->files[--k->n_files];
}

static void do_misc(struct kernel *k, struct fake_input *in, guint op)
{
	fuse_ino_t ino = pick_inode(k, in);
	guint b = fake_byte(in);
	struct fuse_file_info fi = { 0 };
	fuse_req_t req;

	if (op == 0) {
		req = fake_req_new(k->fs, 0);
		fs_getattr(req, ino, NULL);
	} else if (op == 1) {
		struct stat st = { .st_mode = fake_u16(in),
				   .st_uid = fake_byte(in),
				   .st_gid = fake_byte(in) };

		req = fake_req_new(k->fs, 0);
		fs_setattr(req, ino, &st,
			   (int)(b & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID |
				      FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE)),
			   NULL);
	} else if (op == 2) {
		if (is_dir(k, ino))
			return;
		req = fake_req_new(k->fs, 0);
		fs_lseek(req, ino, (off_t)fake_u16(in),
			 b & 1 ? SEEK_DATA : SEEK_HOLE, &fi);
	} else {
		size_t size = 1 + fake_u16(in) % 4096;

		if (!is_dir(k, ino))
			return; /* the kernel reads directories only */
		req = fake_req_new(k->fs, 0);
		fs_readdir(req, ino, size, b % 16, &fi);
		fake_check(req->data->len <= size, "readdir overflowed");
	}
	fake_check(req->answered, "a request that never waits waited");
}

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size);

int LLVMFuzzerTestOneInput(const guint8 *data, size_t size)
{
	struct pf_clock *clock = pf_clock_new_fake(1000000000);
	struct power_options opts = { 8, 1, FALSE, NULL };
	struct fake_input in = { data, size };
	struct kernel k = { .adopted_fh = 1u << 30 };
	const struct pf_attr *attrs;
	guint n_attrs;
	struct power *pw;

	fake_init();
	pw = power_new(clock,
		       backend_simulate_new(clock, 50,
					    PM_STATE_BIT(PM_FREEZE) |
						    PM_STATE_BIT(PM_MEM)),
		       &opts);
	attrs = pf_attrs(&n_attrs);
	k.fs = pf_fs_serve(pw, attrs, n_attrs, NULL, -1, -1, "fuzz", FALSE,
			   NULL, NULL, NULL);
	k.inodes[k.n_inodes++] = FUSE_ROOT_ID;
	while (in.left) {
		guint op = fake_byte(&in) % 12;

		switch (op) {
		case 0:
		case 1:
			do_lookup(&k, &in);
			break;
		case 2:
			do_open(&k, &in);
			break;
		case 3:
			do_read(&k, &in, FALSE);
			break;
		case 4:
			do_write(&k, &in);
			break;
		case 5:
			do_release(&k, &in);
			break;
		case 6:
			do_read(&k, &in, TRUE);
			break;
		case 7:
			if (fake_pending->len)
				fake_interrupt(
					fake_pending->pdata[fake_byte(&in) %
							    fake_pending->len]);
			break;
		case 8:
			pf_clock_fake_advance(clock,
					      (gint64)fake_u16(&in) * 1000);
			break;
		default:
			do_misc(&k, &in, op - 9 + fake_byte(&in) % 2);
			break;
		}
		run_loop();
		fake_sweep(FALSE);
	}
	/* Time passes; the kernel releases what no request uses; the server
	 * leaves, answering whoever still waits (the rest of the open files
	 * go with its session). */
	pf_clock_fake_advance(clock, 2000000);
	run_loop();
	fake_sweep(FALSE);
	for (guint i = k.n_files; i-- > 0;) {
		struct fake_input one = { (const guint8[]){ (guint8)i }, 1 };

		do_release(&k, &one);
	}
	pf_fs_free(k.fs, FALSE);
	run_loop();
	fake_finish();
	power_free(pw);
	return 0;
}
