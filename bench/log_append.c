/* log_append.c - what appending to a log file costs as it grows, with and
 * without the page-cache trim server/infra/log.c does: the measurement
 * behind it, by a program that is nothing but the appends.
 *
 *   log_append FILE CHUNK SECONDS GAP_US [trim]
 *
 * Appends CHUNK bytes to FILE (created, and removed at the end when it is
 * a regular file) every
 * GAP_US microseconds of spinning (so at a set rate, as a busy daemon's
 * log flushes come) for SECONDS, and prints every 10 s the writes made,
 * the wall time spent in write(2) per KiB, the system time per KiB, and
 * how much of the file the page cache holds (mincore(2) over a mapping of
 * it: nothing is read). With `trim`, after
 * each write that finishes a MiB it does what log.c's flusher does: start
 * that MiB's writeback (sync_file_range) and drop the MiB 8 MiB behind
 * (posix_fadvise DONTNEED, after waiting for its writeback), in this
 * thread, so its cost is in the figures.
 *
 * docs/performance.md ("The access log's page cache") has the figures and
 * the command line; run it pinned (taskset -c 0) on an otherwise idle
 * machine, the plain run and the trim run one after the other.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB ((off_t)1 << 20)
#define KEEP (8 * MIB)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double sys_us(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_stime.tv_sec * 1e6 + (double)r.ru_stime.tv_usec;
}

/* MiB of [0, size) of fd in the page cache. */
static double cached_mib(int fd, off_t size)
{
    if (size <= 0)
        return 0;
    void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED)
        return -1;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)size + page - 1) / page, in = 0;
    unsigned char *vec = malloc(n);
    if (vec && mincore(m, (size_t)size, vec) == 0) {
        for (size_t i = 0; i < n; i++)
            in += vec[i] & 1;
    }
    free(vec);
    munmap(m, (size_t)size);
    return (double)(in * page) / (double)MIB;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: log_append FILE CHUNK SECONDS GAP_US [trim]\n");
        return 2;
    }
    size_t chunk = (size_t)atol(argv[2]);
    double secs = atof(argv[3]), gap = atof(argv[4]);
    int trim = argc > 5 && strcmp(argv[5], "trim") == 0;
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char *buf = malloc(chunk);
    if (fd < 0 || !buf || chunk == 0) {
        perror("log_append");
        return 1;
    }
    memset(buf, 'x', chunk);
    buf[chunk - 1] = '\n';
    int rfd = open(argv[1], O_RDONLY);
    double t0 = now_us(), w0 = t0, s0 = sys_us(), in_write = 0;
    long writes = 0;
    off_t end = 0, done = 0;
    printf("%s: %zu-byte writes every %.0f us%s\n", argv[1], chunk, gap, trim ? ", trimmed as log.c does" : "");
    while (now_us() - t0 < secs * 1e6) {
        double a = now_us();
        if (write(fd, buf, chunk) != (ssize_t)chunk) {
            perror("write");
            return 1;
        }
        end += (off_t)chunk;
        for (; trim && end / MIB > done / MIB; done += MIB) {
            sync_file_range(fd, done, MIB, SYNC_FILE_RANGE_WRITE);
            if (done >= KEEP) {
                sync_file_range(fd, done - KEEP, MIB,
                                SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
                posix_fadvise(fd, done - KEEP, MIB, POSIX_FADV_DONTNEED);
            }
        }
        in_write += now_us() - a;
        writes++;
        for (double until = now_us() + gap; now_us() < until;)
            ;
        if (now_us() - w0 >= 10e6) {
            double s = sys_us(), kib = (double)writes * (double)chunk / 1024;
            printf("%4.0f s: %6ld writes, %5.0f MiB written: %.2f us/KiB in write(2), %.2f us/KiB system time, "
                   "%.0f MiB cached\n",
                   (now_us() - t0) / 1e6, writes, (double)end / (double)MIB, in_write / kib, (s - s0) / kib,
                   cached_mib(rfd, end));
            fflush(stdout);
            writes = 0;
            in_write = 0;
            w0 = now_us();
            s0 = s;
        }
    }
    /* Only a regular file is removed: FILE may be /dev/null (the cost of
     * the system call alone), whose removal would leave every later
     * `>/dev/null` writing into a file. */
    struct stat st;
    bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    close(rfd);
    close(fd);
    if (regular)
        unlink(argv[1]);
    free(buf);
    return 0;
}
