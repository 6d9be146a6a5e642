/*
 * Power-loss recorder, loaded with LD_PRELOAD into a crash-test
 * child by tests/power_loss.rs.
 *
 * It changes nothing about what the child does. After each successful
 * fsync/fdatasync of a regular file it appends "S <size> <path>" to the log
 * named by SIMSTORE_SYNC_LOG, and after each successful rename
 * "R <old> <new>". The parent, having SIGKILLed the child, replays the log
 * and cuts every file back to the size it had at its last sync (deleting
 * files that were never synced): the state a power cut would leave if the
 * page cache held everything else.
 *
 * Each record is one write(2) on an O_APPEND descriptor, so records from
 * several threads never interleave and a kill leaves at most a torn last
 * line, which the parent ignores.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int log_fd = -2;

static int log_descriptor(void) {
    if (log_fd == -2) {
        const char *path = getenv("SIMSTORE_SYNC_LOG");
        log_fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
    }
    return log_fd;
}

static void record(const char *line, size_t len) {
    int fd = log_descriptor();
    if (fd >= 0 && write(fd, line, len) != (ssize_t)len) {
        abort(); /* a lost record would make the simulation lie */
    }
}

static void record_sync(int fd) {
    struct stat st;
    char link[64], path[PATH_MAX], line[PATH_MAX + 64];
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) return;
    path[n] = 0;
    int len = snprintf(line, sizeof line, "S %lld %s\n", (long long)st.st_size, path);
    record(line, (size_t)len);
}

/* Absolute form of `path` relative to `dirfd` (AT_FDCWD or a directory). */
static void absolute(int dirfd, const char *path, char *out) {
    char base[PATH_MAX];
    if (path[0] == '/') {
        snprintf(out, PATH_MAX, "%s", path);
        return;
    }
    if (dirfd == AT_FDCWD) {
        if (!getcwd(base, sizeof base)) base[0] = 0;
    } else {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
        ssize_t n = readlink(link, base, sizeof base - 1);
        base[n > 0 ? n : 0] = 0;
    }
    snprintf(out, PATH_MAX, "%s/%s", base, path);
}

static void record_rename(int olddir, const char *old, int newdir, const char *new_) {
    char a[PATH_MAX], b[PATH_MAX], line[2 * PATH_MAX + 8];
    absolute(olddir, old, a);
    absolute(newdir, new_, b);
    int len = snprintf(line, sizeof line, "R %s %s\n", a, b);
    record(line, (size_t)len);
}

int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    int rc = real(fd);
    if (rc == 0) record_sync(fd);
    return rc;
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    int rc = real(fd);
    if (rc == 0) record_sync(fd);
    return rc;
}

int rename(const char *old, const char *new_) {
    static int (*real)(const char *, const char *);
    if (!real) real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
    int rc = real(old, new_);
    if (rc == 0) record_rename(AT_FDCWD, old, AT_FDCWD, new_);
    return rc;
}

int renameat(int olddir, const char *old, int newdir, const char *new_) {
    static int (*real)(int, const char *, int, const char *);
    if (!real) real = (int (*)(int, const char *, int, const char *))dlsym(RTLD_NEXT, "renameat");
    int rc = real(olddir, old, newdir, new_);
    if (rc == 0) record_rename(olddir, old, newdir, new_);
    return rc;
}

int renameat2(int olddir, const char *old, int newdir, const char *new_, unsigned flags) {
    static int (*real)(int, const char *, int, const char *, unsigned);
    if (!real)
        real = (int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2");
    int rc = real(olddir, old, newdir, new_, flags);
    if (rc == 0) record_rename(olddir, old, newdir, new_);
    return rc;
}
